/* SPDX-License-Identifier: Apache-2.0 */
/* GET /api/v1/functions?name=F[&host=H][&min_share=X][&by=total|self]
 * [&from=&to=][&limit=][&after=]: a function's shares across snapshots,
 * from the catalog's function_shares (catalog.h; docs/collector.md,
 * "Function shares"). No trace is read: one catalog statement, on the
 * loop as the snapshots' list is. The arguments are a client's:
 * coll_share_query (api_parts.c, fuzzed) reads them. */
#include <stdlib.h>

#include "collector/daemon/api_internal.h"
#include "collector/daemon/api_parts.h"
#include "collector/catalog/snapshot_id.h"
#include "collector/store/store.h"
#include "common/json.h"
#include "tracegate/error.h"

void coll_api_get_functions(coll_t *c, tg_http_exchange_t *x,
                            const tg_http_request_t *r, uint64_t no_id) {
  (void)no_id;
  tg_coll_share_query_t q;
  const char *why;
  if (coll_share_query(r->args, r->n_args, &q, &why) < 0)
    return coll_api_json_error(x, 400, why);
  tg_coll_share_t *rows = calloc(q.limit, sizeof(*rows));
  if (!rows) return coll_api_json_error(x, 500, "out of memory");
  size_t n = 0;
  int rv = tg_coll_store_find_shares(c->store, &q, rows, q.limit, &n);
  if (rv < 0) {
    free(rows);
    return coll_api_json_error(x, 503, tg_strerror(rv));
  }
  json_t *list = json_array();
  for (size_t i = 0; list && i < n; i++)
    list = tg_json_push(list, coll_json_share(&rows[i]));
  /* A full page may have more after it: its last row is where the next
   * begins. */
  json_t *next = json_null();
  if (n && n == q.limit) {
    char after[TG_COLL_ID_STRLEN + 16 + TG_COLL_HOST_MAX];
    coll_share_after(&rows[n - 1], after, sizeof(after));
    next = tg_json_text(after);
  }
  free(rows);
  coll_api_respond_json(
      x, 200,
      json_pack("{s:o, s:o, s:f, s:s, s:o, s:o}", "name",
                tg_json_text(q.function), "host",
                q.host ? tg_json_text(q.host) : json_null(), "min_share",
                q.min_share, "by", q.by_self ? "self" : "total", "rows", list,
                "next_after", next));
}
