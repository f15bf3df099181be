/* Standby connections (standby.c): one idle, bound consumer connection
 * per host, lent to a snapshot for its clone. Below hosts.c and snap.c:
 * it tells them back through coll_t.on (standby_closed, standby_gone,
 * standby_released), never by a call.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_STANDBY_H
#define TRACEGATE_COLLECTOR_DAEMON_STANDBY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/daemon/coll.h"

void coll_standby_init(coll_host_t *h);
/* Dials the standby connection if there is none (the holder traces). */
void coll_standby_want(coll_host_t *h);
/* Takes the ready connection for |user|'s clone: true, and h->sb.c is
 * the consumer; false: none ready (the snapshot dials its own). */
bool coll_standby_take(coll_host_t *h, struct snap_host *user);
/* The clone was read and freed: the connection is idle again. */
void coll_standby_give_back(coll_host_t *h);
/* Closes it (a failed clone, the host removed); the user, if any, hears
 * c->on.standby_closed() then c->on.standby_gone() (coll_events_t). */
void coll_standby_close(coll_host_t *h);
/* Whether nothing of it is left to wait for (freeing the host). */
bool coll_standby_idle(const coll_host_t *h);
/* Whether standby.c's diagram has an arrow |from| -> |to| (a state to
 * itself is none). */
bool coll_standby_transition_ok(coll_standby_state_t from,
                                coll_standby_state_t to);

#endif /* TRACEGATE_COLLECTOR_DAEMON_STANDBY_H */
