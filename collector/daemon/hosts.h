/* The shard's hosts and their ring holders (hosts.c; coll.h has
 * coll_host_t). Calls standby.c below it; a holder reaching tracing goes
 * up through coll_t.on.host_tracing.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_HOSTS_H
#define TRACEGATE_COLLECTOR_DAEMON_HOSTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/daemon/coll.h"

/* |st|'s name in the API and the metrics (a static string). */
const char *coll_host_state_name(coll_host_state_t st);
/* The state of a holder whose link is in |link| and whose recording, if
 * |has_rec|, is in |rec|. Pure. */
coll_host_state_t coll_host_state_of(tg_link_state_t link, bool has_rec,
                                     tg_rec_state_t rec);

/* Reads the inventory's shard and starts every host's holder (with
 * check_only: reads it only). Prints what is wrong and returns -1. */
int coll_hosts_start(coll_t *c);
/* Reads the inventory again: hosts that stay are untouched, new ones
 * start, removed ones have their ring ended. |why| for the log. */
void coll_hosts_reload(coll_t *c, const char *why);
/* Reloads when the inventory file changes; unwatch at the stop. */
void coll_hosts_watch(coll_t *c);
void coll_hosts_unwatch(coll_t *c);
/* A removed host is freed if nothing holds it any more (also
 * coll_events_t's standby_released). */
void coll_host_check_free(coll_host_t *h);
/* *|slot| (a coll_host_t's not_offered or seen) becomes a copy of |ps|,
 * or NULL when |ps| holds none (or memory ran out: said in the log). */
void coll_host_set_problems(coll_host_t *h, tg_ds_problems_t **slot,
                            const tg_ds_problems_t *ps);
/* A snapshot lets go of |h| (it took it with h->busy++). */
void coll_host_release(coll_host_t *h);
/* Whether |h| is in |group| ("all": every host). */
bool coll_host_in_group(const coll_t *c, const coll_host_t *h,
                        const char *group);

#endif /* TRACEGATE_COLLECTOR_DAEMON_HOSTS_H */
