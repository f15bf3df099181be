/* Where one host of a collector snapshot stands (snap.c): the snapshot's
 * own view of it. Which step its clone is at (connecting, cloning,
 * reading, its loss counters, freeing) is its clone engine's state
 * (consumer/clone_read.h); this one says whether the host was asked at
 * all and whether its connection is still the snapshot's.
 *
 *   NEW --ring not up--> SKIPPED
 *   NEW --asked (dialed, or on its standby connection)--> ACTIVE
 *   NEW --cannot connect--> RELEASED
 *   ACTIVE --closed (read, failed, or cut)--> CLOSING --transport gone-->
 *   RELEASED
 *   ACTIVE --its standby connection given back, or gone--> RELEASED
 *
 * SKIPPED and RELEASED are final: the host counts as finished only there,
 * so that the snapshot never outlives a callback that could still reach
 * it. Every change goes through snap.c's one setter, against
 * coll_sh_transition_ok(), under common/fsm.h's policy: one the table has
 * no arrow for is a bug of snap.c's, refused (the state stays), counted
 * (coll_counts_t.snap_host_bad_transitions) and logged, as the standby
 * connection's.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_SNAP_HOST_H
#define TRACEGATE_COLLECTOR_DAEMON_SNAP_HOST_H

#include <stdbool.h>

typedef enum coll_sh_state {
  COLL_SH_NEW,      /* not started yet */
  COLL_SH_SKIPPED,  /* not asked: its ring was not up */
  COLL_SH_ACTIVE,   /* its clone engine runs */
  COLL_SH_CLOSING,  /* its connection closing */
  COLL_SH_RELEASED, /* its connection released, or given back */
  COLL_SH_STATE_COUNT
} coll_sh_state_t;

/* Whether the diagram has an arrow |from| -> |to|. A state to itself is
 * no transition. */
bool coll_sh_transition_ok(coll_sh_state_t from, coll_sh_state_t to);
/* "new", "skipped", ... (a static string; "?" out of range). */
const char *coll_sh_state_name(coll_sh_state_t st);

#endif /* TRACEGATE_COLLECTOR_DAEMON_SNAP_HOST_H */
