/* Alertmanager's webhook, the daemon's half (alertmanager.c): the
 * route api.c serves, triggering through trigger.c. Its pure half is
 * alertmanager.h.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_WEBHOOK_H
#define TRACEGATE_COLLECTOR_DAEMON_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/trigger.h"

struct tg_http_exchange;
struct tg_http_request;
/* POST /api/v1/alertmanager: Alertmanager's webhook (alertmanager.h).
 * Its repeat window is made at the first call (c->am.seen) and kept
 * until the process exits, as everything coll_t holds. */
void coll_alertmanager_post(coll_t *c, struct tg_http_exchange *x,
                            const struct tg_http_request *r, uint64_t id);
/* Its counters in /metrics' text format, to |f|. */
void coll_alertmanager_metrics(const coll_t *c, FILE *f);

#endif /* TRACEGATE_COLLECTOR_DAEMON_WEBHOOK_H */
