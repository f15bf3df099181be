/* api.c's pure parts (no I/O but the FILE handed in, no collector): the
 * list's filter read from a request's arguments, the JSON of the store's
 * rows (jansson trees; text under common/json.h's rule), the HTTP layer's
 * counters in Prometheus text. Unit-tested by
 * tests/collector/test_collector_routes.c; api.c answers with them. */
#ifndef TRACEGATE_COLLECTOR_DAEMON_API_PARTS_H
#define TRACEGATE_COLLECTOR_DAEMON_API_PARTS_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "collector/catalog/catalog.h"
#include "collector/http/http.h"

/* The list's page size when the request names none. */
#define COLL_LIST_DEFAULT 100

/* GET /api/v1/snapshots's filter from |args| (|n|, "name=value", already
 * checked by coll_route_args_check: known names, each once) into *f:
 * numbers whole and in range, the id by tg_coll_id_parse(), the state
 * one of the store's names, trigger and host within the catalog's
 * lengths. f's strings borrow |args|. 0, or -EINVAL with the refusal (a
 * static text) in *why. */
int coll_list_filter(const char *const *args, size_t n, tg_coll_filter_t *f,
                     const char **why);

/* One snapshot row as a JSON object; |n| host rows of a snapshot as a
 * JSON array. New references the caller owns, or NULL when out of
 * memory. */
json_t *coll_json_snapshot(const tg_coll_snapshot_t *s);
json_t *coll_json_snap_hosts(const tg_coll_host_t *h, size_t n);
/* The snapshot's links: its host rows' flow counts summed
 * ("flows_started", "flows_terminated", "flows_across",
 * "flows_unmatched", "flows_unfollowed"; docs/collector.md), or null when
 * no row of |h| has links (not merged, or older rows). */
json_t *coll_json_snap_links(const tg_coll_host_t *h, size_t n);

/* GET /api/v1/functions's question (catalog.h's tg_coll_share_query_t)
 * from |args| as coll_list_filter reads its own: name (required, exact
 * bytes), host, min_share (a fraction 0..1, strtod's form, finite),
 * by ("total" or "self"), from and to (epoch ms), limit (1..
 * TG_COLL_SHARES_LIST_MAX, default COLL_LIST_DEFAULT) and after (a page's
 * next_after: "<id>.<rank>.<host>"). q's strings borrow |args|. 0, or
 * -EINVAL with the refusal (a static text) in *why. */
int coll_share_query(const char *const *args, size_t n,
                     tg_coll_share_query_t *q, const char **why);
/* One row of find_shares as a JSON object (a new reference, or NULL). */
json_t *coll_json_share(const tg_coll_share_t *s);
/* A page's next_after for the rows after |s| into |out| (|cap| bytes, at
 * least TG_COLL_ID_STRLEN + 12 + TG_COLL_HOST_MAX). */
void coll_share_after(const tg_coll_share_t *s, char *out, size_t cap);

/* The HTTP layer's counters (tracegate_collector_http_*_total). */
void coll_metrics_http(FILE *f, const tg_http_server_stats_t *hs);

#endif /* TRACEGATE_COLLECTOR_DAEMON_API_PARTS_H */
