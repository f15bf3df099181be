/* linux.sys_stats' rounds, for its data source (sys_stats_ds.c) and for
 * tests, which run them on an instance of tg_sys_stats_probe with a plain
 * sink, a clock of their own and a fake /proc and /sys.
 *
 * Each group of SysStatsConfig with a *_period_ms is read when due; a
 * round writes one TracePacket { sys_stats } with the groups it read, or
 * nothing when none read.
 */
#ifndef TRACEGATE_PROBES_SYS_STATS_H
#define TRACEGATE_PROBES_SYS_STATS_H

#include <stdint.h>

#include "agent/probes/probes_sink.h"

/* Sampler thread: one round at |now_ms| for instance |state| (of
 * tg_sys_stats_probe.create). Returns when the next round is due
 * (absolute ms), or UINT64_MAX when no group is polled. */
uint64_t tg__sys_stats_round(void *state, const tg_probes_sink_t *sink,
                             uint64_t now_ms);

/* For tests, before the first round: every file the instance reads is
 * looked for under |root| (borrowed for the call): "<root>/proc/meminfo",
 * "<root>/sys/class/thermal"... "" is this machine. Returns 0, -ENOMEM or
 * -ENAMETOOLONG (then the root is unchanged). */
int tg__sys_stats_set_root(void *state, const char *root);

#endif /* TRACEGATE_PROBES_SYS_STATS_H */
