/* TracePackets of the probes: SysStats, ProcessTree, ProcessStats.
 *
 * Encoders write the fields of one TracePacket into a tg_pbw_t (the agent's
 * writer inside TG_DS_TRACE, or a plain buffer in tests), with the field
 * numbers of Perfetto's protos (ours are the same). They never fail on
 * their own: a writer error stays sticky in the tg_pbw_t.
 *
 * Timestamps are CLOCK_BOOTTIME nanoseconds, Perfetto's default trace clock.
 */
#ifndef TRACEGATE_PROBES_PACKETS_H
#define TRACEGATE_PROBES_PACKETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracegate/pb_writer.h"
#include "agent/probes/kernel_files.h"
#include "agent/probes/meminfo.h"
#include "agent/sys/proc_pid.h"
#include "agent/probes/proc_stat.h"
#include "agent/probes/sysfs_files.h"

/* SysStatsConfig.StatCounters values, as bits of a mask. */
#define TG_STAT_BIT(counter) (1u << (counter))

typedef struct tg_sys_stats_sample {
  uint64_t ts_ns;              /* when the round began */
  uint64_t end_ts_ns;          /* SysStats.collection_end_timestamp */
  /* Each group: NULL when not polled (or unreadable) this round. */
  const tg_meminfo_t *meminfo;
  uint64_t meminfo_mask;       /* bit i: emit MeminfoCounters i */
  const tg_vmstat_t *vmstat;
  const uint64_t *vmstat_mask; /* TG_VMSTAT_IDS bits: emit counter i */
  const tg_proc_stat_t *stat;
  uint32_t stat_mask;          /* TG_STAT_BIT(StatCounters) */
  uint64_t ns_per_tick;        /* 1e9 / sysconf(_SC_CLK_TCK) */
  const uint32_t *cpufreq_khz; /* one per cpu, cpu 0 first */
  size_t n_cpufreq;
  const tg_buddyinfo_t *buddyinfo;
  const tg_diskstats_t *diskstats;
  /* Indexed by SysStats.PsiSample.PsiResource / 2: cpu, io, memory. */
  const tg_psi_t *psi[3];
  /* The /sys groups (sysfs_groups.h): n == 0 when not polled. */
  const tg_devfreq_t *devfreq;
  size_t n_devfreq;
  const tg_thermal_zone_t *thermal;
  size_t n_thermal;
  const tg_cpuidle_cpu_t *cpuidle;
  size_t n_cpuidle;
  bool has_gpufreq;
  uint64_t gpufreq_mhz;
} tg_sys_stats_sample_t;

/* True if |s| holds anything to write. */
bool tg_sys_stats_sample_empty(const tg_sys_stats_sample_t *s);

/* timestamp + sys_stats { meminfo*, vmstat*, cpu_stat*, num_forks, num_irq*,
 * devfreq*, cpufreq_khz*, buddy_info*, disk_stat*, psi*, thermal_zone*,
 * cpuidle_state*, gpufreq_mhz, ... }.
 * IRQs with a zero count are left out (softirqs are all listed), as
 * traced_probes does. */
void tg_probes_write_sys_stats(tg_pbw_t *w, const tg_sys_stats_sample_t *s);

/* One process of a ProcessTree; pointers are borrowed for the call. */
typedef struct tg_proc_entry {
  int32_t pid, ppid;
  bool has_uid;
  int32_t uid;
  const char *cmdline; /* /proc/<pid>/cmdline: NUL-separated arguments */
  size_t cmdline_len;
  const char *name;    /* used as cmdline[0] when cmdline is empty */
  bool has_start;
  uint64_t start_ns;   /* process_start_from_boot (record_process_age) */
} tg_proc_entry_t;

/* One thread (other than a process's main thread) of a ProcessTree. */
typedef struct tg_thread_entry {
  int32_t tid, tgid;
  const char *name; /* NULL: not recorded (record_thread_names off) */
} tg_thread_entry_t;

/* The entries of one ProcessTree packet; pointers are borrowed. */
typedef struct tg_process_tree {
  const tg_proc_entry_t *procs;
  size_t n_procs;
  const tg_thread_entry_t *threads;
  size_t n_threads;
} tg_process_tree_t;

/* timestamp + process_tree { processes {pid, ppid, cmdline*, uid,
 * process_start_from_boot}*, threads {tid, tgid, name}*,
 * collection_end_timestamp }. */
void tg_probes_write_process_tree(tg_pbw_t *w, uint64_t ts_ns,
                                  const tg_process_tree_t *tree,
                                  uint64_t end_ts_ns);

/* One process of a ProcessStats. */
typedef struct tg_proc_counters {
  int32_t pid;
  unsigned present; /* TG_PID_STATUS_* bits of the kB fields below */
  uint64_t vm_size_kb, vm_rss_kb, rss_anon_kb, rss_file_kb, rss_shmem_kb,
      vm_swap_kb, vm_locked_kb, vm_hwm_kb;
  bool has_oom_score_adj;
  int64_t oom_score_adj;
  bool has_runtime;
  uint64_t utime_ticks, stime_ticks;
  bool has_smaps_rollup;
  tg_smaps_rollup_t smr;
} tg_proc_counters_t;

/* Fills the kB fields of |c| from a parsed status. */
void tg_proc_counters_from_status(tg_proc_counters_t *c,
                                  const tg_pid_status_t *st);

/* timestamp + process_stats { processes {pid, vm_*_kb, rss_*_kb,
 * oom_score_adj, smr_*_kb, runtime_user_mode, runtime_kernel_mode (ns)}*,
 * collection_end_timestamp }. */
void tg_probes_write_process_stats(tg_pbw_t *w, uint64_t ts_ns,
                                   const tg_proc_counters_t *procs, size_t n,
                                   uint64_t end_ts_ns, uint64_t ns_per_tick);

#endif /* TRACEGATE_PROBES_PACKETS_H */
