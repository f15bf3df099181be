/* The unwinder thread of a UNWIND_DWARF session: it takes the samples
 * the reader thread queued (perf_queue.h), unwinds each with the session's
 * per-process Dwfl caches (perf_unwind.h), leaves the frames in the
 * sample's entry and hands it back to the reader, which writes it: the
 * reader stays the only writer of the session's trace writer and the only
 * user of its interning tables and process tables, none of which is
 * thread-safe, and the unwinder touches nothing but the queue and its
 * Dwfls.
 *
 * The caches are dropped when the queue asks (a process's mappings
 * changed and its forget found no room, or the memory guardrail) and,
 * when |clear_period_ms| is not 0, on that period
 * (PerfEventConfig.unwind_state_clear_period_ms), so that processes gone
 * or idle give their memory back.
 */
#ifndef TRACEGATE_PERF_PERF_UNWIND_THREAD_H
#define TRACEGATE_PERF_PERF_UNWIND_THREAD_H

#include <stdint.h>

#include "agent/perf/perf_queue.h"

typedef struct tg_perf_unwind_thread tg_perf_unwind_thread_t;

typedef struct tg_perf_unwind_thread_stats {
  uint64_t unwound;       /* samples with at least one frame past the leaf */
  uint64_t unwind_failed; /* processes that could not be reported */
  uint64_t periodic_clears, requested_drops;
  uint64_t rebuilds_deferred; /* samples unwound with a stale Dwfl */
} tg_perf_unwind_thread_stats_t;

/* Starts the thread over |q|, which the caller owns and keeps until
 * tg_perf_unwind_thread_stop returns. A sample's frames, its callchain's
 * entries included, stay within |max_frames|. 0 or -errno. */
int tg_perf_unwind_thread_start(tg_perf_queue_t *q, uint32_t clear_period_ms,
                                uint32_t max_frames,
                                tg_perf_unwind_thread_t **out);
/* Closes the queue, lets the thread finish every entry committed, joins
 * it, copies its counters into |st| (may be NULL) and frees it. */
void tg_perf_unwind_thread_stop(tg_perf_unwind_thread_t *t,
                                tg_perf_unwind_thread_stats_t *st);

#endif /* TRACEGATE_PERF_PERF_UNWIND_THREAD_H */
