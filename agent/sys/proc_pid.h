/* /proc/<pid>/stat and /proc/<pid>/status, and the set of pids between two
 * scans of /proc: for linux.process_stats (tracegate-probes) and for
 * tracegate-perf's memory guardrail (its own status), so that neither
 * program parses these files its own way.
 *
 * Pure parsers over a file's content: a process can exit between open()
 * and read(), so the caller treats a short or empty read as "vanished"
 * and never as a bug; the parsers only see text and say whether it makes
 * sense.
 */
#ifndef TRACEGATE_AGENT_SYS_PROC_PID_H
#define TRACEGATE_AGENT_SYS_PROC_PID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for a command name: TASK_COMM_LEN is 16, but status escapes
 * unprintable bytes, so allow more; longer names are truncated. */
#define TG_PROC_NAME_MAX 64

/* From /proc/<pid>/stat (fields as numbered in proc(5)). */
typedef struct tg_pid_stat {
  int32_t pid;                  /* (1) */
  char comm[TG_PROC_NAME_MAX];  /* (2), without the parentheses */
  char state;                   /* (3) */
  int32_t ppid;                 /* (4) */
  uint64_t utime, stime;        /* (14), (15): clock ticks */
  int64_t num_threads;          /* (20) */
  uint64_t starttime;           /* (22): clock ticks after boot */
} tg_pid_stat_t;

/* Parses /proc/<pid>/stat. The command name may hold spaces and ')', so it
 * ends at the last ')'. Returns 0 or TG_EPARSE (truncated before field 22,
 * a non-numeric field). */
int tg_pid_stat_parse(const char *text, size_t len, tg_pid_stat_t *out);

enum {
  TG_PID_STATUS_NAME = 1u << 0,
  TG_PID_STATUS_PID = 1u << 1,
  TG_PID_STATUS_TGID = 1u << 2,
  TG_PID_STATUS_PPID = 1u << 3,
  TG_PID_STATUS_UID = 1u << 4,
  TG_PID_STATUS_VM_SIZE = 1u << 5,
  TG_PID_STATUS_VM_RSS = 1u << 6,
  TG_PID_STATUS_RSS_ANON = 1u << 7,
  TG_PID_STATUS_RSS_FILE = 1u << 8,
  TG_PID_STATUS_RSS_SHMEM = 1u << 9,
  TG_PID_STATUS_VM_SWAP = 1u << 10,
  TG_PID_STATUS_VM_LOCKED = 1u << 11,
  TG_PID_STATUS_VM_HWM = 1u << 12,
};

/* From /proc/<pid>/status. Kernel threads have no Vm* and Rss* lines. */
typedef struct tg_pid_status {
  char name[TG_PROC_NAME_MAX];
  int32_t pid, tgid, ppid;
  int32_t uid; /* real uid */
  uint64_t vm_size_kb, vm_rss_kb, rss_anon_kb, rss_file_kb, rss_shmem_kb,
      vm_swap_kb, vm_locked_kb, vm_hwm_kb;
  unsigned present; /* TG_PID_STATUS_* */
} tg_pid_status_t;

/* Parses /proc/<pid>/status. Unknown keys are skipped. Returns 0, or
 * TG_EPARSE for a line without ':', a malformed value of a key it reads, or
 * a missing Pid line (truncated content). */
int tg_pid_status_parse(const char *text, size_t len, tg_pid_status_t *out);

/* From /proc/<pid>/smaps_rollup (kernel 4.14+), in kB. */
typedef struct tg_smaps_rollup {
  uint64_t rss_kb, pss_kb, pss_anon_kb, pss_file_kb, pss_shmem_kb,
      swap_pss_kb;
} tg_smaps_rollup_t;

/* Parses /proc/<pid>/smaps_rollup. Pss_Anon/File/Shmem are absent before
 * kernel 5.9 and read as 0. Returns 0, or TG_EPARSE for a malformed value
 * or a missing Rss line (truncated content, or a kernel thread's empty
 * file). */
int tg_smaps_rollup_parse(const char *text, size_t len, tg_smaps_rollup_t *out);

/* Parses /proc/<pid>/oom_score_adj ("-1000".."1000"). */
int tg_oom_score_adj_parse(const char *text, size_t len, int64_t *out);

/* Parses /proc/sys/kernel/ns_last_pid: the last pid the kernel gave out
 * in the reader's pid namespace ("0".."2147483647"). */
int tg_ns_last_pid_parse(const char *text, size_t len, int64_t *out);

/* Given the sorted pids of the previous scan and of this one, writes the
 * pids of |cur| that are not in |prev| to |out_new| (room for n_cur) and
 * returns how many. */
size_t tg_pids_new(const int32_t *prev, size_t n_prev, const int32_t *cur,
                   size_t n_cur, int32_t *out_new);

#endif /* TRACEGATE_AGENT_SYS_PROC_PID_H */
