/* linux.process_stats' on-demand dumps: the ProcessTree entries of the
 * pids linux.ftrace of the same session saw (pid_feed.h), resolved in
 * /proc on the sampler thread. The data source (process_stats_ds.c) runs
 * them after each round and whenever the feed wakes the sampler; tests
 * run them on an instance of tg_process_stats_probe with a plain sink.
 */
#ifndef TRACEGATE_PROBES_PROCESS_STATS_H
#define TRACEGATE_PROBES_PROCESS_STATS_H

#include <stddef.h>

#include "agent/probes/probes_sink.h"

/* Sampler thread: drains the pids the feed holds for instance |state| (of
 * tg_process_stats_probe.create, with the feed as its ctx) and writes one
 * TracePacket { process_tree } with a Process for each tgid not seen yet
 * in the instance and a Thread for each pid that is not its process's
 * main thread. Pid 0, pids already seen and pids whose /proc entry is
 * gone are skipped. Returns the entries written (processes and threads). */
size_t tg__process_stats_resolve(void *state, const tg_probes_sink_t *sink);

/* How many processes (returned) and threads (|*threads|, may be NULL) the
 * instance knows it wrote; the sets shrink as their members exit (pruned
 * once a set has doubled). For tests. */
size_t tg__process_stats_known(const void *state, size_t *threads);
/* Forgets now the known processes and threads that have exited. */
void tg__process_stats_prune(void *state);

#endif /* TRACEGATE_PROBES_PROCESS_STATS_H */
