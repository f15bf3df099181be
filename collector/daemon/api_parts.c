/* api.c's pure parts (api_parts.h). */
#include "collector/daemon/api_parts.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon/routes.h"
#include "collector/catalog/snapshot_id.h"
#include "common/decimal.h"
#include "common/json.h"

int coll_list_filter(const char *const *args, size_t n, tg_coll_filter_t *f,
                     const char **why) {
  *f = (tg_coll_filter_t)TG_COLL_FILTER_INIT;
  f->limit = COLL_LIST_DEFAULT;
  int64_t v;
  const char *s;
  if ((s = coll_route_arg(args, n, "from"))) {
    if (tg_decimal_i64(s, INT64_MIN, INT64_MAX, &v) < 0)
      return *why = "from: epoch milliseconds", -EINVAL;
    f->from_ms = v;
  }
  if ((s = coll_route_arg(args, n, "to"))) {
    if (tg_decimal_i64(s, INT64_MIN, INT64_MAX, &v) < 0)
      return *why = "to: epoch milliseconds", -EINVAL;
    f->to_ms = v;
  }
  if ((s = coll_route_arg(args, n, "limit"))) {
    if (tg_decimal_i64(s, 1, TG_COLL_LIST_MAX, &v) < 0)
      return *why = "limit: 1..1000", -EINVAL;
    f->limit = (uint32_t)v;
  }
  if ((s = coll_route_arg(args, n, "before"))) {
    uint64_t id;
    if (tg_coll_id_parse(s, strlen(s), &id) < 0)
      return *why = "before: " COLL_ROUTE_ID_FORM, -EINVAL;
    f->before_id = id;
  }
  if ((s = coll_route_arg(args, n, "state"))) {
    unsigned st = 0;
    for (int i = 0; i < TG_COLL_STATE_COUNT; i++)
      if (!strcmp(s, tg_coll_state_name((tg_coll_state_t)i)))
        st = TG_COLL_STATE_BIT(i);
    if (!st) return *why = "state: pending, complete, partial or failed", -EINVAL;
    f->states = st;
  }
  f->trigger = coll_route_arg(args, n, "trigger");
  f->host = coll_route_arg(args, n, "host");
  if ((f->trigger && strlen(f->trigger) > TG_COLL_TRIGGER_MAX) ||
      (f->host && strlen(f->host) > TG_COLL_HOST_MAX))
    return *why = "trigger or host: too long", -EINVAL;
  return 0;
}

json_t *coll_json_snapshot(const tg_coll_snapshot_t *s) {
  char id[TG_COLL_ID_STRLEN];
  tg_coll_id_format(s->id, id);
  return json_pack(
      "{s:s, s:s, s:b, s:I, s:I, s:o, s:I, s:o, s:o, s:I, s:I, s:o, s:o,"
      " s:o, s:o}",
      "id", id, "state", tg_coll_state_name(s->state), "pinned", s->pinned,
      "started_ms", (json_int_t)s->started_ms,
      "finished_ms", (json_int_t)s->finished_ms,
      "bytes", tg_json_u64(s->bytes), "crc32", (json_int_t)s->crc32,
      "packets", tg_json_u64(s->packets), "loss", tg_json_u64(s->loss),
      "hosts", (json_int_t)s->n_hosts,
      "hosts_failed", (json_int_t)s->n_hosts_failed,
      "trigger", tg_json_text(s->trigger), "reason", tg_json_text(s->reason),
      "origin", tg_json_text(s->origin), "failure", tg_json_text(s->failure));
}

/* A host row's problems as JSON: the array the collector stored, or an
 * empty one for none. A catalog edited by hand may hold anything there:
 * what does not parse as an array within the bound is shown as text. */
static json_t *problems_json(const char *text) {
  size_t len = strlen(text);
  if (!len) return json_array();
  int rv;
  json_error_t err;
  json_t *v = tg_json_load(text, len, 0, 16 * (TG_COLL_PROBLEMS_MAX + 1),
                           &err, &rv);
  if (v && json_is_array(v)) return v;
  json_decref(v);
  return tg_json_push(json_array(), tg_json_text(text));
}

/* A host row's object column (its perf boost, its links; at most |max|
 * bytes) parsed: NULL for none or what is not an object. */
static json_t *object_of(const char *text, size_t max) {
  size_t len = strlen(text);
  if (!len) return NULL;
  int rv;
  json_error_t err;
  json_t *v = tg_json_load(text, len, 0, 16 * (max + 1), &err, &rv);
  if (v && json_is_object(v)) return v;
  json_decref(v);
  return NULL;
}

/* The same as the API shows it: the object the collector stored, or null
 * for none; what does not parse as an object (a hand-edited catalog) is
 * shown as text. */
static json_t *object_json(const char *text, size_t max) {
  json_t *v = object_of(text, max);
  if (v) return v;
  return *text ? tg_json_text(text) : json_null();
}

/* The counts the snapshot's links sum over its hosts. */
static const char *const kLinkTotals[] = {
    "flows_started", "flows_terminated", "flows_across", "flows_unmatched",
    "flows_unfollowed"};
#define LINK_TOTALS (sizeof(kLinkTotals) / sizeof(kLinkTotals[0]))

json_t *coll_json_snap_links(const tg_coll_host_t *h, size_t n) {
  uint64_t sum[LINK_TOTALS] = {0};
  size_t rows = 0;
  for (size_t i = 0; i < n; i++) {
    json_t *o = object_of(h[i].links, TG_COLL_LINKS_MAX);
    if (!o) continue;
    rows++;
    for (size_t k = 0; k < LINK_TOTALS; k++) {
      uint64_t v;
      if (tg_json_get_u64(json_object_get(o, kLinkTotals[k]), &v) == 0 &&
          !__builtin_add_overflow(sum[k], v, &sum[k]))
        continue;
      sum[k] = UINT64_MAX; /* a hand-edited row: shown as the most */
    }
    json_decref(o);
  }
  if (!rows) return json_null();
  json_t *t = json_object();
  for (size_t k = 0; t && k < LINK_TOTALS; k++)
    t = tg_json_put(t, kLinkTotals[k], tg_json_u64(sum[k]));
  return t;
}

json_t *coll_json_snap_hosts(const tg_coll_host_t *h, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    a = tg_json_push(
        a, json_pack("{s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:I,"
                     " s:o, s:o}",
                     "host", tg_json_text(h[i].host),
                     "name", tg_json_text(h[i].name),
                     "outcome", tg_coll_host_outcome_name(h[i].outcome),
                     "error", tg_json_text(h[i].error),
                     "problems", problems_json(h[i].problems),
                     "bytes", tg_json_u64(h[i].bytes),
                     "packets", tg_json_u64(h[i].packets),
                     "loss", tg_json_u64(h[i].loss),
                     "window_first_ms", (json_int_t)h[i].window_first_ms,
                     "window_last_ms", (json_int_t)h[i].window_last_ms,
                     "boost", object_json(h[i].boost, TG_COLL_BOOST_MAX),
                     "links", object_json(h[i].links, TG_COLL_LINKS_MAX)));
  return a;
}

/* One counter without labels, its HELP and TYPE lines first. */
static void counter(FILE *f, const char *name, const char *help, uint64_t v) {
  fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help,
          name, name, v);
}

void coll_metrics_http(FILE *f, const tg_http_server_stats_t *hs) {
  fprintf(f,
          "# HELP tracegate_collector_http_refused_total HTTP(S) connections "
          "closed at accept, by the cap they were over.\n"
          "# TYPE tracegate_collector_http_refused_total counter\n"
          "tracegate_collector_http_refused_total{reason=\"per_source\"} "
          "%" PRIu64 "\n"
          "tracegate_collector_http_refused_total{reason=\"max_conns\"} "
          "%" PRIu64 "\n",
          hs->refused_per_source, hs->refused_max_conns);
  counter(f, "tracegate_collector_http_evictions_total",
          "Idle HTTP(S) connections closed to let a new one in.",
          hs->evicted);
  counter(f, "tracegate_collector_http_refused_peers_total",
          "HTTPS connections refused for their certificate: no identity, "
          "revoked, or an identity without a role.",
          hs->refused_peers);
  counter(f, "tracegate_collector_http_ended_by_reload_total",
          "HTTPS connections ended because a reload of the authorization "
          "file or the CRL no longer allowed them.",
          hs->ended_by_reload);
}

/* A fraction 0..1 written whole: strtod's form, nothing after it. */
static int parse_fraction(const char *s, double *out) {
  if (!*s || strlen(s) > 32) return -EINVAL;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || !(v >= 0 && v <= 1)) return -EINVAL;
  *out = v;
  return 0;
}

/* "<id>.<rank>.<host>": the id by tg_coll_id_parse, the rank decimal,
 * the host the rest (it may hold dots of its own). */
static int parse_after(const char *s, tg_coll_share_query_t *q) {
  const char *d1 = strchr(s, '.');
  const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
  if (!d2 || d2 == d1 + 1 || d2 - d1 > 11) return -EINVAL;
  uint64_t id;
  if (tg_coll_id_parse(s, (size_t)(d1 - s), &id) < 0) return -EINVAL;
  char rank[12];
  memcpy(rank, d1 + 1, (size_t)(d2 - d1 - 1));
  rank[d2 - d1 - 1] = 0;
  int64_t r;
  if (tg_decimal_i64(rank, 0, TG_COLL_SHARES_TOP_MAX, &r) < 0) return -EINVAL;
  if (strlen(d2 + 1) > TG_COLL_HOST_MAX) return -EINVAL;
  q->after_id = id;
  q->after_rank = (uint32_t)r;
  q->after_host = d2 + 1;
  return 0;
}

int coll_share_query(const char *const *args, size_t n,
                     tg_coll_share_query_t *q, const char **why) {
  *q = (tg_coll_share_query_t)TG_COLL_SHARE_QUERY_INIT;
  q->limit = COLL_LIST_DEFAULT;
  int64_t v;
  const char *s;
  q->function = coll_route_arg(args, n, "name");
  if (!q->function || !q->function[0] ||
      strlen(q->function) > TG_COLL_FUNCTION_MAX)
    return *why = "name: a function's name, 1..1024 bytes", -EINVAL;
  q->host = coll_route_arg(args, n, "host");
  if (q->host && (!q->host[0] || strlen(q->host) > TG_COLL_HOST_MAX))
    return *why = "host: a host of the snapshots, 1..320 bytes", -EINVAL;
  if ((s = coll_route_arg(args, n, "min_share")) &&
      parse_fraction(s, &q->min_share) < 0)
    return *why = "min_share: a fraction 0..1 (0.05 is 5%)", -EINVAL;
  if ((s = coll_route_arg(args, n, "by"))) {
    if (strcmp(s, "total") && strcmp(s, "self"))
      return *why = "by: total or self", -EINVAL;
    q->by_self = !strcmp(s, "self");
  }
  if ((s = coll_route_arg(args, n, "from"))) {
    if (tg_decimal_i64(s, INT64_MIN, INT64_MAX, &v) < 0)
      return *why = "from: epoch milliseconds", -EINVAL;
    q->from_ms = v;
  }
  if ((s = coll_route_arg(args, n, "to"))) {
    if (tg_decimal_i64(s, INT64_MIN, INT64_MAX, &v) < 0)
      return *why = "to: epoch milliseconds", -EINVAL;
    q->to_ms = v;
  }
  if ((s = coll_route_arg(args, n, "limit"))) {
    if (tg_decimal_i64(s, 1, TG_COLL_SHARES_LIST_MAX, &v) < 0)
      return *why = "limit: 1..1000", -EINVAL;
    q->limit = (uint32_t)v;
  }
  if ((s = coll_route_arg(args, n, "after")) && parse_after(s, q) < 0)
    return *why = "after: a page's next_after (ID.RANK.HOST)", -EINVAL;
  return 0;
}

json_t *coll_json_share(const tg_coll_share_t *s) {
  char id[TG_COLL_ID_STRLEN];
  tg_coll_id_format(s->snapshot_id, id);
  return json_pack(
      "{s:s, s:I, s:o, s:I, s:s, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o,"
      " s:s, s:f, s:f}",
      "snapshot", id, "started_ms", (json_int_t)s->started_ms, "host",
      tg_json_text(s->host), "rank", (json_int_t)s->rank, "kind",
      tg_coll_share_kind_name(s->kind), "file", tg_json_text(s->file), "cut",
      s->cut, "self_ns", tg_json_u64(s->self_ns), "total_ns",
      tg_json_u64(s->total_ns), "self_samples", tg_json_u64(s->self_samples),
      "total_samples", tg_json_u64(s->total_samples), "host_cpu_ns",
      tg_json_u64(s->host_cpu_ns), "host_samples",
      tg_json_u64(s->host_samples), "basis",
      s->by_samples ? "samples" : "cpu", "self_share", s->self_share,
      "total_share", s->total_share);
}

void coll_share_after(const tg_coll_share_t *s, char *out, size_t cap) {
  char id[TG_COLL_ID_STRLEN];
  tg_coll_id_format(s->snapshot_id, id);
  snprintf(out, cap, "%s.%" PRIu32 ".%s", id, s->rank, s->host);
}
