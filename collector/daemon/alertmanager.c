/* POST /api/v1/alertmanager (coll.h): Alertmanager's webhook_configs
 * receiver. The shell of alertmanager.h: it parses the payload, asks what
 * each alert calls for, triggers the snapshots through trigger.c (the
 * webhook's own budget, "alertmanager"), notes them in the repeat window
 * and answers what was done per alert, in JSON:
 *
 *   {"receiver":"tracegate","alerts":[
 *     {"alertname":"HighRunQueue","status":"firing","result":"snapshot",
 *      "id":"00000000000000a1","hosts":["db1.example:7467"]},
 *     {"alertname":"HighRunQueue","status":"firing","result":"repeat",
 *      "id":"00000000000000a1"},
 *     {"alertname":"Latency","status":"resolved","result":"resolved"}]}
 *
 * "result": "snapshot" (begun, or served by one under way: "id"),
 * "queued" (it begins when one under way ends; its id is not known yet),
 * "refused" (over "budget"), "error" (with "error"), or what
 * tg_am_verdict_name() says of an alert that snapshots nothing. A payload
 * over alertmanager_max_bytes, or whose JSON tree would take more than its
 * bound (alertmanager.h), is 413 and a malformed one 400, all before
 * anything is done.
 *
 * Only the route's record role (routes.h) may post here, as for every
 * trigger. Refused alerts are not noted: Alertmanager's next notification
 * of the group (repeat_interval) tries them again.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon/alertmanager.h"
#include "collector/daemon/coll.h"
#include "collector/daemon/trigger.h"
#include "collector/daemon/webhook.h"
#include "collector/http/http.h"
#include "collector/catalog/snapshot_id.h"
#include "common/log.h"
#include "common/printable.h"
#include "tracegate/error.h"

/* Sends |doc| (taken) as JSON with |status|. */
static void send_json(tg_http_exchange_t *x, int status, json_t *doc) {
  char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  if (!text || tg_http_respond(x, status, "application/json", text,
                               strlen(text)) < 0)
    tg_http_respond(x, 500, NULL, NULL, 0);
  free(text);
}

static void send_error(tg_http_exchange_t *x, int status, const char *why) {
  send_json(x, status, json_pack("{s:s}", "error", why));
}

static json_t *id_json(uint64_t id) {
  char text[TG_COLL_ID_STRLEN];
  tg_coll_id_format(id, text);
  return json_string(text);
}

/* The shard's hosts as matching sees them, into |inv| (c->n). */
static void inventory(const coll_t *c, tg_am_inv_t *inv) {
  for (size_t i = 0; i < c->n; i++) {
    const coll_host_t *h = c->hosts[i];
    inv[i] = (tg_am_inv_t){.spec = h->t.spec, .host = h->t.host};
  }
}

static void set_result(coll_t *c, json_t *row, tg_am_result_t r) {
  c->am.alerts[r]++;
  json_object_set_new(row, "result", json_string(tg_am_result_name(r)));
}

/* An alert that names nothing this collector knows is a config to fix
 * (a label, a mapping, a group): said at the 1st, 2nd, 4th, 8th... of
 * each kind, so that a storm of them costs a counter, not a log line. */
static void unmatched(const coll_t *c, const tg_am_alert_t *a,
                      tg_am_result_t r) {
  bool misfit = r == TG_AM_R_NO_ALERTNAME || r == TG_AM_R_NO_GROUP ||
                r == TG_AM_R_NO_HOST || r == TG_AM_R_NO_LABEL;
  uint64_t k = c->am.alerts[r];
  if (!misfit || (k & (k - 1)) != 0) return;
  char name[TG_COLL_TRIGGER_MAX + 1], value[TG_COLL_CONFIG_HOST_MAX + 1];
  tg_printable(name, sizeof(name), a->alertname ? a->alertname : "");
  tg_printable(value, sizeof(value),
               r == TG_AM_R_NO_GROUP ? a->group : a->host ? a->host : "");
  TG_WARN("alertmanager: alert '%s' (%s '%s'): nothing snapshotted: %s "
          "(%" PRIu64 " so far)", name,
          r == TG_AM_R_NO_GROUP ? c->cfg.am_group_label : c->cfg.am_host_label,
          value, tg_am_result_name(r), k);
}

/* Triggers the snapshot |v| calls for and says so in |row|. */
static void snapshot(coll_t *c, const tg_am_alert_t *a, tg_am_verdict_t v,
                     const char *group, const bool *hit, json_t *row) {
  coll_host_t **hosts = NULL;
  size_t n_hosts = 0;
  if (v == TG_AM_HOSTS) {
    hosts = calloc(c->n ? c->n : 1, sizeof(*hosts));
    json_t *list = json_array();
    if (!hosts || !list) {
      free(hosts);
      json_decref(list);
      set_result(c, row, TG_AM_R_ERROR);
      json_object_set_new(row, "error", json_string("out of memory"));
      return;
    }
    for (size_t i = 0; i < c->n; i++) {
      if (!hit[i]) continue;
      if (n_hosts < TG_AM_ANSWER_HOSTS_MAX)
        json_array_append_new(list, json_string(c->hosts[i]->t.spec));
      hosts[n_hosts++] = c->hosts[i];
    }
    json_object_set_new(row, "hosts", list);
    if (n_hosts > TG_AM_ANSWER_HOSTS_MAX)
      json_object_set_new(row, "hosts_more",
                          json_integer((json_int_t)(n_hosts -
                                                    TG_AM_ANSWER_HOSTS_MAX)));
  } else {
    json_object_set_new(row, "group", json_string(group));
  }
  coll_trigger_req_t t = {.trigger = a->alertname,
                          .reason = a->reason,
                          .origin = "",
                          .group = group ? group : TG_COLL_CONFIG_GROUP_ALL,
                          .alertmanager = true,
                          .hosts = hosts,
                          .n_hosts = n_hosts};
  uint64_t id = 0;
  int rv = coll_trigger(c, &t, &id);
  free(hosts);
  char name[TG_COLL_TRIGGER_MAX + 1];
  tg_printable(name, sizeof(name), a->alertname);
  if (rv == -EAGAIN) { /* counted and said by trigger.c */
    set_result(c, row, TG_AM_R_REFUSED);
    json_object_set_new(row, "budget", json_string(tg_trigger_budget_name(
                                           TG_TRIGGER_BUDGET_ALERTMANAGER)));
    return;
  }
  if (rv < 0) {
    TG_WARN("alertmanager: alert '%s': no snapshot: %s", name, tg_strerror(rv));
    set_result(c, row, TG_AM_R_ERROR);
    json_object_set_new(row, "error", json_string(tg_strerror(rv)));
    return;
  }
  set_result(c, row, id ? TG_AM_R_SNAPSHOT : TG_AM_R_QUEUED);
  if (id) json_object_set_new(row, "id", id_json(id));
  if (v == TG_AM_HOSTS)
    TG_INFO("alertmanager: alert '%s' -> snapshot %016" PRIx64 " of %zu "
            "host(s)%s", name, id, n_hosts, id ? "" : " (queued)");
  else
    TG_INFO("alertmanager: alert '%s' -> snapshot %016" PRIx64 " of group "
            "%s%s", name, id, group, id ? "" : " (queued)");
  tg_am_seen_note(c->am.seen, a->key, coll_loop_ms(c),
                  c->cfg.am_repeat_window_ms, id);
}

void coll_alertmanager_post(coll_t *c, tg_http_exchange_t *x,
                            const tg_http_request_t *r, uint64_t no_id) {
  (void)no_id;
  /* The HTTP layer refuses bodies over its own bound before reading;
   * this one is the key's, when it is lower. */
  if (r->body_len > c->cfg.am_max_bytes) {
    c->am.oversized++;
    return send_error(x, 413, "larger than alertmanager_max_bytes");
  }
  if (!c->am.seen && !(c->am.seen = tg_am_seen_new()))
    return send_error(x, 503, "out of memory");
  tg_am_payload_t p;
  const char *why;
  int rv = tg_am_parse(r->body, r->body_len, c->cfg.am_host_label,
                       c->cfg.am_group_label, &p, &why);
  if (rv == -ENOMEM) return send_error(x, 503, why);
  if (rv == -E2BIG) { /* its tree past the bound (alertmanager.h) */
    c->am.oversized++;
    return send_error(x, 413, why);
  }
  if (rv < 0) {
    c->am.malformed++;
    return send_error(x, 400, why);
  }
  tg_am_inv_t *inv = calloc(c->n ? c->n : 1, sizeof(*inv));
  bool *hit = calloc(c->n ? c->n : 1, sizeof(*hit));
  /* |rows| is ours as well as |doc|'s until the end: each is let go once. */
  json_t *rows = json_array();
  json_t *doc = json_object();
  if (!inv || !hit || !rows || !doc ||
      json_object_set_new(doc, "receiver", json_string(p.receiver)) < 0 ||
      json_object_set(doc, "alerts", rows) < 0) {
    free(inv);
    free(hit);
    json_decref(rows);
    json_decref(doc);
    tg_am_payload_free(&p);
    return send_error(x, 503, "out of memory");
  }
  inventory(c, inv);
  bool oom = false;
  for (size_t i = 0; i < p.n_alerts; i++) {
    const tg_am_alert_t *a = &p.alerts[i];
    const char *group;
    uint64_t earlier;
    tg_am_verdict_t v = tg_am_decide(a, &c->cfg, c->am.seen,
                                     coll_loop_ms(c), inv, c->n, hit,
                                     &group, &earlier);
    json_t *row = json_pack("{s:s?,s:s}", "alertname", a->alertname, "status",
                            a->firing ? "firing" : "resolved");
    if (!row || json_array_append_new(rows, row) < 0) {
      oom = true; /* said in the answer, not left out of it */
      break;
    }
    if (v == TG_AM_GROUP || v == TG_AM_HOSTS) {
      snapshot(c, a, v, group, hit, row);
      continue;
    }
    set_result(c, row, tg_am_result_of(v));
    unmatched(c, a, tg_am_result_of(v));
    if (v == TG_AM_REPEAT && earlier)
      json_object_set_new(row, "id", id_json(earlier));
  }
  free(inv);
  free(hit);
  json_decref(rows);
  tg_am_payload_free(&p);
  if (oom) {
    json_decref(doc);
    return send_error(x, 503, "out of memory: alerts before it may have "
                              "snapshotted (the log says)");
  }
  send_json(x, 200, doc);
}

void coll_alertmanager_metrics(const coll_t *c, FILE *f) {
  fputs("# HELP tracegate_collector_alertmanager_alerts_total Alerts of "
        "Alertmanager's webhook, by what became of them.\n"
        "# TYPE tracegate_collector_alertmanager_alerts_total counter\n", f);
  for (int r = 0; r < TG_AM_R_COUNT; r++)
    fprintf(f, "tracegate_collector_alertmanager_alerts_total{result=\"%s\"} %"
            PRIu64 "\n", tg_am_result_name((tg_am_result_t)r), c->am.alerts[r]);
  fprintf(f, "# HELP tracegate_collector_alertmanager_payloads_refused_total "
          "Webhook payloads refused whole: malformed (400), over "
          "alertmanager_max_bytes or its tree's bound (413).\n"
          "# TYPE tracegate_collector_alertmanager_payloads_refused_total "
          "counter\n"
          "tracegate_collector_alertmanager_payloads_refused_total{status="
          "\"400\"} %" PRIu64 "\n"
          "tracegate_collector_alertmanager_payloads_refused_total{status="
          "\"413\"} %" PRIu64 "\n", c->am.malformed, c->am.oversized);
}
