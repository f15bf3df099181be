/* One "linux.ftrace" session's kernel side: its tracefs instance with the
 * config's events enabled, the per-CPU trace_pipe_raw files, and the reads
 * that turn their pages into TracePackets.
 *
 * Reads are non-blocking and take whole pages (one read(2) per page, never
 * one per event); the pages of one CPU read in one drain become one
 * TracePacket { ftrace_events } (or a few: ftrace_encode.h), with
 * the names of its new kernel address indices (interned_data) when the
 * session symbolizes. Those indices start again at 1 after every drain
 * (ftrace_kaddr.h). When an event writes a char pointer as its string,
 * tracefs' printk_formats is read at start (ftrace_printk.h).
 * Packets go to a sink, so the data source (agent writer) and the bench
 * (plain buffer) share this code. Not thread-safe: one thread owns a
 * session from start to stop.
 */
#ifndef TRACEGATE_PROBES_FTRACE_SESSION_H
#define TRACEGATE_PROBES_FTRACE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probes/ftrace_config.h"
#include "agent/sys/ftrace_ksyms.h"
#include "agent/probes/inode_set.h"
#include "agent/probes/probes_sink.h"
#include "tracegate/pb_writer.h"


/* Receives the pids the records of written pages named (deduplicated,
 * never 0), leaving out those it took in the last
 * TG_FTRACE_PIDS_AGAIN_DRAINS drains; |pids| is borrowed for the call.
 * Returns whether anyone took them (false: they are handed over again
 * next time). */
typedef bool (*tg_ftrace_pids_cb)(void *ctx, const int32_t *pids, size_t n);
/* A pid handed over is left out of the hand-overs of this many drains
 * (2 s at the default drain period): an idle host's steady tasks then do
 * not wake linux.process_stats at every drain, and a pid a new process
 * reused is still handed over within that window. */
#define TG_FTRACE_PIDS_AGAIN_DRAINS 20

/* Whether the next drain is to collect the (inode, device) pairs its
 * records name; |*skip_pid| may name a task whose records are left out. */
typedef bool (*tg_ftrace_inodes_want_cb)(void *ctx, int32_t *skip_pid);
/* Receives the pairs (deduplicated, inode never 0, the device as st_dev);
 * |keys| is borrowed for the call. */
typedef void (*tg_ftrace_inodes_cb)(void *ctx, const tg_inode_key_t *keys,
                                    size_t n);

typedef struct tg_ftrace_session tg_ftrace_session_t;

typedef struct tg_ftrace_session_stats {
  uint64_t pages, bytes, events, skipped, lost_pages, corrupt_pages;
  uint64_t read_errors;
  uint64_t pids_dropped; /* not handed over for want of room */
  uint64_t inodes_dropped; /* the same, of (inode, device) pairs */
  uint64_t ksyms_written; /* interned kernel_symbols */
  uint64_t kaddrs_dropped; /* kernel addresses written as 0: table full */
} tg_ftrace_session_stats_t;

/* FtraceStats.Phase */
#define TG_FTRACE_STATS_START 1
#define TG_FTRACE_STATS_END 2

/* Finds tracefs, removes stale instances of dead runs, creates this
 * session's instance and sets it up for |cfg| (borrowed for the call).
 * Events that do not exist or cannot be enabled are remembered for the
 * start stats and logged. Returns 0, or -errno (-EACCES/-EPERM: not root,
 * -ENOENT: no tracefs) after undoing what it did. */
int tg_ftrace_session_start(const tg_ftrace_cfg_t *cfg,
                            tg_ftrace_session_t **out);

/* Has drains with a sink hand the pids of their pages to |cb| (NULL: they
 * are not collected): once at the end of each drain (earlier only when a
 * drain names thousands of new ones). |ctx| is borrowed for the session's
 * life. */
void tg_ftrace_session_on_pids(tg_ftrace_session_t *s, tg_ftrace_pids_cb cb,
                               void *ctx);

/* Has drains with a sink for which |want| says so hand the (inode,
 * device) pairs of their pages to |cb|, as the pids (NULL |want|: never).
 * A drain that is not wanted collects nothing, and the set is allocated
 * the first time one is. |ctx| is borrowed for the session's life. */
void tg_ftrace_session_on_inodes(tg_ftrace_session_t *s,
                                 tg_ftrace_inodes_want_cb want,
                                 tg_ftrace_inodes_cb cb, void *ctx);

/* Has written pages carry the names of their kernel addresses from |ks|
 * (NULL: not named; the addresses are still written as indices). |ks| is
 * borrowed until the session stops or this is called again. */
void tg_ftrace_session_set_ksyms(tg_ftrace_session_t *s, const tg_ksyms_t *ks);

/* Reads up to |max_pages| ready pages of every CPU. With a NULL |sink| the
 * pages are read and discarded (the bench's floor). Sets |*more| when a CPU
 * still had pages at the cap. Returns the pages read. */
size_t tg_ftrace_session_drain(tg_ftrace_session_t *s,
                               const tg_probes_sink_t *sink, size_t max_pages,
                               bool *more);

/* One TracePacket { timestamp, ftrace_stats { phase, cpu_stats per CPU,
 * unknown/failed events (at the start) } }. A START always carries the
 * CPUs' counters as tracing began (read once, at start), an END those of
 * the moment: a reader takes the loss from the last END against the START
 * before it, so a pair written at every flush spans the whole session. */
void tg_ftrace_session_write_stats(tg_ftrace_session_t *s,
                                   const tg_probes_sink_t *sink, int phase);

const tg_ftrace_session_stats_t *tg_ftrace_session_stats(
    const tg_ftrace_session_t *s);
/* The instance's directory (for tests and logs). */
const char *tg_ftrace_session_dir(const tg_ftrace_session_t *s);
/* Events the instance records. */
size_t tg_ftrace_session_n_events(const tg_ftrace_session_t *s);

/* The open trace_pipe_raw descriptors, up to |cap| into |out|: they poll
 * readable once a CPU's buffer is TG_FTRACE_WAKE_PERCENT full. None when
 * the kernel took no buffer_percent (they would poll readable at every
 * event). Returns how many. */
size_t tg_ftrace_session_fds(const tg_ftrace_session_t *s, int *out, size_t cap);
/* Whether the descriptors can be polled (buffer_percent set): else a
 * quiet session is still drained at its period, bursts being seen only
 * then. */
bool tg_ftrace_session_pollable(const tg_ftrace_session_t *s);

/* How full (percent) a CPU's buffer is when its descriptor polls readable
 * (the instance's buffer_percent). */
#define TG_FTRACE_WAKE_PERCENT 50
/* The wait between drains of a session whose config left
 * drain_period_ms unset and whose CPUs can be polled. */
#define TG_FTRACE_QUIET_WAIT_MS 1000
/* How long after the last new processes the default period holds: a host
 * that started one in the last few seconds is likely to start the next
 * soon (a job, a build, a periodic check), and one that lives less than
 * a quiet wait and comes more than a second after the last would be
 * missed. An idle host, where no task is created, keeps its quiet wait. */
#define TG_FTRACE_NEW_PIDS_HOLD_MS 10000

/* The wait before a session's next drain. A config that asked for a
 * drain period (|period_asked|) gets |period_ms|, as Perfetto's probes
 * keep it. Otherwise, with descriptors that poll readable at
 * TG_FTRACE_WAKE_PERCENT (|pollable|): |period_ms| (the default period,
 * traced_probes' cadence) while the last drain that handed
 * linux.process_stats pids it had not been handed lately (new processes)
 * is less than TG_FTRACE_NEW_PIDS_HOLD_MS old (|ms_since_new_pids|;
 * UINT64_MAX for never), so that while processes come and go each is
 * resolved in /proc while it still lives, as traced_probes resolves it;
 * else TG_FTRACE_QUIET_WAIT_MS: a busy CPU is read as soon as its
 * buffer is that full, so the timer only collects what quiet CPUs
 * trickle, and an idle host wakes the reader once a second. Without
 * pollable descriptors, |period_ms|: nothing else would read a burst
 * before it overwrites itself. */
uint32_t tg_ftrace_drain_wait_ms(uint32_t period_ms, bool period_asked,
                                 bool pollable, uint64_t ms_since_new_pids);

/* Whether the last drain handed over pids (tg_ftrace_session_on_pids)
 * that were not handed over in the drains before it, someone took them,
 * and the host created tasks since the last drain of which that was true
 * (the pid namespace's last pid moved): new processes, not a task seen
 * for the first time. */
bool tg_ftrace_session_handed_new_pids(const tg_ftrace_session_t *s);

/* throttle_rss_stat, as Perfetto's probes do it: in the instance |dir|,
 * a histogram trigger on kmem/rss_stat that emits the synthetic event
 * rss_stat_throttled only when a process's counter crosses a 512 KiB
 * boundary; the session then records that event instead of kmem/rss_stat.
 * The synthetic event is the system's (tracefs synthetic_events, defined
 * at boot as Android does); without it this returns -ENOENT and the
 * session records kmem/rss_stat unthrottled, as Perfetto's probes then
 * do. Returns 0 or -errno. */
int tg__ftrace_rss_throttle_on(const char *dir);
/* Removes that trigger. Returns 0 or -errno. */
int tg__ftrace_rss_throttle_off(const char *dir);
#define TG_FTRACE_RSS_TRIGGER                                          \
  "hist:keys=mm_id,member:bucket=size/0x80000:onchange($bucket)" \
  ".rss_stat_throttled(mm_id,curr,member,size)"

/* Stops tracing, removes the instance, frees |s|. NULL is a no-op. */
void tg_ftrace_session_stop(tg_ftrace_session_t *s);

#endif /* TRACEGATE_PROBES_FTRACE_SESSION_H */
