/* From a parsed PerfEventConfig (perf_config.h) to what perf_event_open(2)
 * takes: a tracepoint's id from tracefs, and the perf_event_attr of the
 * timebase (the group leader) and of each follower, as traced_perf builds
 * them:
 *
 *   sampling  leader: sample_freq or sample_period, the sample_type given,
 *             use_clockid, sample_id_all, disabled until enabled; with
 *             followers read_format = PERF_FORMAT_GROUP, so that each
 *             sample's READ holds every member's count; callstacks add the
 *             callchain exclusions and the mmap/comm records.
 *   polling   leader: no sampling at all (period 0, no sample_type),
 *             read_format = PERF_FORMAT_GROUP always: read(2) of the
 *             leader gives { nr, value[nr] } whatever the followers.
 *   follower: the event, not disabled (it runs while its leader does), the
 *             leader's sample_type and clock (the kernel wants them to
 *             match), never sampling.
 *
 * The user-stack registers of UNWIND_DWARF are the caller's to add (they
 * depend on the unwinder). No I/O but tg_perf_event_resolve's read of one
 * tracefs file.
 */
#ifndef TRACEGATE_PERF_PERF_EVENTS_H
#define TRACEGATE_PERF_PERF_EVENTS_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/perf/perf_config.h"

/* Sets a tracepoint event's id (attr_config) from
 * <tracefs_root>/events/<group>/<name>/id. Other kinds: 0, unchanged.
 * Returns 0, -ENOENT (no such tracepoint), -EACCES/-EPERM (tracefs not
 * readable), -EBADMSG (the id file holds no number). */
int tg_perf_event_resolve(tg_perf_event_t *ev, const char *tracefs_root);

/* Resolves the timebase and every follower; on failure |*failed| is the
 * event that failed. */
int tg_perf_cfg_resolve(tg_perf_cfg_t *c, const char *tracefs_root,
                        const tg_perf_event_t **failed);

/* The leader's attr (sampling or polling as |c| says). |sample_type| is
 * what the samples hold (ignored when polling). */
void tg_perf_attr_leader(const tg_perf_cfg_t *c, uint64_t sample_type,
                         struct perf_event_attr *a);
/* Follower |i|'s attr (i < c->n_followers), |leader| as built above. */
void tg_perf_attr_follower(const tg_perf_cfg_t *c, size_t i,
                           const struct perf_event_attr *leader,
                           struct perf_event_attr *a);

#endif /* TRACEGATE_PERF_PERF_EVENTS_H */
