/* The HTTP API, /metrics, the web page and the health listener (api.c,
 * page.c, health.c): the top of the daemon but coll.c, which starts and
 * stops it and wires coll_t.on to its functions.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_API_H
#define TRACEGATE_COLLECTOR_DAEMON_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/daemon/coll.h"

struct tg_http_exchange;
/* The web page (page.c), and its file at |path| ("/app.js"). */
void coll_page_send(coll_t *c, struct tg_http_exchange *x);
void coll_asset_send(struct tg_http_exchange *x, const char *path);

int coll_api_start(coll_t *c);
void coll_api_stop(coll_t *c);
/* health.c: health_listen's listener (none without it), started by
 * coll_api_start and stopped by coll_api_stop. */
int coll_health_start(coll_t *c);
void coll_health_stop(coll_t *c);
/* A snapshot ended: answers the requests waiting for it
 * (coll_events_t's snapshot_done). */
void coll_api_snapshot_done(coll_t *c, coll_snap_t *s);
/* The queued snapshot began as |id|, or could not (|err|): the requests
 * that were folded into it are told (coll_events_t's queued_*). */
void coll_api_queued_begun(coll_t *c, uint64_t id);
void coll_api_queued_failed(coll_t *c, int err);

#endif /* TRACEGATE_COLLECTOR_DAEMON_API_H */
