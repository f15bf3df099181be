/* Where snapshots come from (trigger.c): the shell of trigger_policy.h.
 * Below api.c and alertmanager.c; the queued snapshot begun or failed is
 * told up through coll_t.on (queued_begun, queued_failed).
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_TRIGGER_H
#define TRACEGATE_COLLECTOR_DAEMON_TRIGGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/snap.h"

/* A trigger from anywhere, as trigger_policy.h decides: served by a
 * snapshot under way, folded into the queued one, refused over its budget
 * (-EAGAIN), begun now or queued. Returns 0 and in *id the snapshot that
 * serves it (0 when queued or folded into the queued one), or an error. */
int coll_trigger(coll_t *c, const coll_trigger_req_t *r, uint64_t *id);
/* The budgets' limits from the config (the per-host ones are set as each
 * host is added, hosts.c). */
void coll_trigger_budgets(coll_t *c);
/* The budgets, then the schedule (snapshot_every) and retention timers. */
void coll_trigger_start(coll_t *c);
void coll_trigger_stop(coll_t *c);
/* A host's holder reached tracing: watch its ring's triggers
 * (coll_events_t's host_tracing). */
void coll_watch_host(coll_t *c, coll_host_t *h);

#endif /* TRACEGATE_COLLECTOR_DAEMON_TRIGGER_H */
