/* api.c's pure parts (api_parts.h). */
#include "collector/daemon/api_parts.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "collector/daemon/routes.h"
#include "collector/snapshot_id.h"
#include "common/decimal.h"
#include "consumer/cli/json_out.h"

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

void coll_json_snapshot(FILE *f, const tg_coll_snapshot_t *s) {
  char id[TG_COLL_ID_STRLEN];
  tg_coll_id_format(s->id, id);
  fprintf(f, "{\"id\":\"%s\",\"state\":\"%s\",\"pinned\":%s,"
          "\"started_ms\":%" PRId64 ",\"finished_ms\":%" PRId64
          ",\"bytes\":%" PRIu64 ",\"crc32\":%" PRIu32 ",\"packets\":%" PRIu64
          ",\"loss\":%" PRIu64 ",\"hosts\":%" PRIu32 ",\"hosts_failed\":%" PRIu32
          ",\"trigger\":", id, tg_coll_state_name(s->state),
          s->pinned ? "true" : "false", s->started_ms, s->finished_ms, s->bytes,
          s->crc32, s->packets, s->loss, s->n_hosts, s->n_hosts_failed);
  cli_json_str(f, s->trigger);
  fputs(",\"reason\":", f);
  cli_json_str(f, s->reason);
  fputs(",\"origin\":", f);
  cli_json_str(f, s->origin);
  fputs(",\"failure\":", f);
  cli_json_str(f, s->failure);
  fputc('}', f);
}

void coll_json_snap_hosts(FILE *f, const tg_coll_host_t *h, size_t n) {
  fputc('[', f);
  for (size_t i = 0; i < n; i++) {
    fputs(i ? ",{\"host\":" : "{\"host\":", f);
    cli_json_str(f, h[i].host);
    fprintf(f, ",\"outcome\":\"%s\",\"error\":",
            tg_coll_host_outcome_name(h[i].outcome));
    cli_json_str(f, h[i].error);
    fprintf(f, ",\"bytes\":%" PRIu64 ",\"packets\":%" PRIu64
            ",\"loss\":%" PRIu64 ",\"window_first_ms\":%" PRId64
            ",\"window_last_ms\":%" PRId64 "}", h[i].bytes, h[i].packets,
            h[i].loss, h[i].window_first_ms, h[i].window_last_ms);
  }
  fputc(']', f);
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
