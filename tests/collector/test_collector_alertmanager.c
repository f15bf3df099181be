/* Alertmanager's webhook on the collector (collector/daemon/alertmanager.h,
 * docs/collector.md "Alertmanager").
 *
 * The pure half first: the payload's parser (every field's type, the
 * bounds, the reason cut to fit), host matching (a mapping, host:port, the
 * host name, the reported hostname; exact bytes), the repeat window (its
 * time, its bounds), the decision's order, the webhook's own trigger
 * budget, and the config keys.
 *
 * Then the real thing: Debian's prometheus-alertmanager on loopback with
 * a webhook_configs receiver pointing at the collector over mutual TLS,
 * alerts posted to Alertmanager's /api/v2/alerts as Prometheus posts them:
 * the snapshot holds the hosts the alert names, with its name as the
 * trigger and its labels and annotations as the reason; Alertmanager's
 * repeat does not snapshot again, a resolved alert snapshots nothing; a
 * group label and a mapping name their hosts; malformed and oversized
 * payloads posted directly are refused and change nothing. Skipped, saying
 * so, when the binary is not installed (deploy/deps.sh installs it).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "collector/catalog.h"
#include "collector/config.h"
#include "collector/daemon/alertmanager.h"
#include "collector/daemon/trigger_policy.h"
#include "test_proc.h"
#include "test_wait.h"

#define ALERTMANAGER_PATH "/usr/bin/prometheus-alertmanager"

/* --- the pure half: the payload ------------------------------------------- */

/* A payload of version 4 whose alerts are |alerts| (JSON text). */
#define PAYLOAD(alerts)                                                     \
  "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":\"4\","          \
  "\"groupKey\":\"{}:{alertname=\\\"RunQueue\\\"}\",\"truncatedAlerts\":0," \
  "\"groupLabels\":{\"alertname\":\"RunQueue\"},\"commonLabels\":{},"       \
  "\"commonAnnotations\":{},\"externalURL\":\"http://am:9093\","            \
  "\"alerts\":[" alerts "]}"
#define ALERT(status, labels, annotations)                                 \
  "{\"status\":\"" status "\",\"labels\":{" labels "},"                   \
  "\"annotations\":{" annotations "},\"startsAt\":\"2026-11-26T10:00:00Z\"," \
  "\"endsAt\":\"0001-01-01T00:00:00Z\",\"generatorURL\":\"http://p\","      \
  "\"fingerprint\":\"0123456789abcdef\"}"

static int parse(const char *text, tg_am_payload_t *p, const char **why) {
  return tg_am_parse((const uint8_t *)text, strlen(text), "instance",
                     "tracegate_group", p, why);
}

static void am_parse_reads_a_webhook_payload(void **state) {
  (void)state;
  static const char body[] = PAYLOAD(
      ALERT("firing", "\"alertname\":\"RunQueue\",\"instance\":\"db1:9100\","
                      "\"severity\":\"page\"",
            "\"summary\":\"run queue over 4\"") ","
      ALERT("resolved", "\"alertname\":\"RunQueue\",\"tracegate_group\":\"db\"",
            ""));
  tg_am_payload_t p;
  const char *why;
  assert_int_equal(parse(body, &p, &why), 0);
  assert_string_equal(p.receiver, "tg");
  assert_string_equal(p.group_key, "{}:{alertname=\"RunQueue\"}");
  assert_true(p.firing);
  assert_int_equal(p.n_alerts, 2);
  const tg_am_alert_t *a = &p.alerts[0];
  assert_true(a->firing);
  assert_string_equal(a->alertname, "RunQueue");
  assert_string_equal(a->host, "db1:9100");
  assert_null(a->group);
  /* The labels sorted, whatever the order they came in. */
  assert_string_equal(a->key, "{}:{alertname=\"RunQueue\"}\n"
                              "{\"alertname\":\"RunQueue\",\"instance\":"
                              "\"db1:9100\",\"severity\":\"page\"}");
  assert_string_equal(a->reason,
                      "{\"annotations\":{\"summary\":\"run queue over 4\"},"
                      "\"labels\":{\"alertname\":\"RunQueue\",\"instance\":"
                      "\"db1:9100\",\"severity\":\"page\"}}");
  assert_false(p.alerts[1].firing);
  assert_null(p.alerts[1].host);
  assert_string_equal(p.alerts[1].group, "db");
  tg_am_payload_free(&p);
  tg_am_payload_free(&p); /* twice: harmless */
}

/* Every field the receiver reads, or that the format lists, is checked
 * for its type; a payload that fails any check is refused whole. */
static void am_parse_refuses_malformed_payloads(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",
      "{",
      "[]",
      "\"4\"",
      "{\"version\":\"4\"}",
      /* another version, or the right one as a number */
      "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":\"3\","
      "\"groupKey\":\"k\",\"alerts\":[]}",
      "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":4,"
      "\"groupKey\":\"k\",\"alerts\":[]}",
      /* groupKey, receiver, status */
      "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":\"4\","
      "\"alerts\":[]}",
      "{\"receiver\":1,\"status\":\"firing\",\"version\":\"4\","
      "\"groupKey\":\"k\",\"alerts\":[]}",
      "{\"receiver\":\"tg\",\"status\":\"pending\",\"version\":\"4\","
      "\"groupKey\":\"k\",\"alerts\":[]}",
      /* alerts */
      "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":\"4\","
      "\"groupKey\":\"k\",\"alerts\":{}}",
      "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":\"4\","
      "\"groupKey\":\"k\"}",
      PAYLOAD("1"),
      PAYLOAD("{\"status\":\"firing\"}"),
      PAYLOAD(ALERT("pending", "\"alertname\":\"a\"", "")),
      PAYLOAD(ALERT("firing", "\"alertname\":1", "")),
      PAYLOAD(ALERT("firing", "\"alertname\":null", "")),
      PAYLOAD(ALERT("firing", "\"alertname\":\"a\"", "\"summary\":[]")),
      PAYLOAD("{\"status\":\"firing\",\"labels\":{},\"annotations\":[]}"),
      PAYLOAD("{\"status\":\"firing\",\"labels\":{},\"startsAt\":0}"),
      PAYLOAD("{\"status\":\"firing\",\"labels\":{},\"fingerprint\":{}}"),
      /* a key twice: one label, two readings */
      PAYLOAD(ALERT("firing", "\"alertname\":\"a\",\"alertname\":\"b\"", "")),
      /* not UTF-8; a NUL inside a string */
      PAYLOAD(ALERT("firing", "\"alertname\":\"\xff\"", "")),
      PAYLOAD(ALERT("firing", "\"alertname\":\"a\\u0000b\"", "")),
      /* the group's fields */
      "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":\"4\","
      "\"groupKey\":\"k\",\"commonLabels\":{\"a\":2},\"alerts\":[]}",
      "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":\"4\","
      "\"groupKey\":\"k\",\"externalURL\":false,\"alerts\":[]}",
      "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":\"4\","
      "\"groupKey\":\"k\",\"truncatedAlerts\":-1,\"alerts\":[]}",
      "{\"receiver\":\"tg\",\"status\":\"firing\",\"version\":\"4\","
      "\"groupKey\":\"k\",\"truncatedAlerts\":\"0\",\"alerts\":[]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tg_am_payload_t p;
    const char *why = NULL;
    int rv = parse(bad[i], &p, &why);
    if (rv != -EINVAL) fail_msg("payload %zu taken (%d): %s", i, rv, bad[i]);
    assert_non_null(why);
    assert_null(p.doc); /* nothing owned */
    assert_null(p.alerts);
  }
}

/* A buffer with "{PREFIX" then |n| entries made by |entry| (index),
 * comma-separated, then "SUFFIX". */
static char *repeat_json(const char *prefix, size_t n,
                         void (*entry)(char *, size_t, size_t),
                         const char *suffix) {
  size_t cap = strlen(prefix) + strlen(suffix) + n * 128 + 1;
  char *s = malloc(cap);
  assert_non_null(s);
  size_t k = (size_t)snprintf(s, cap, "%s", prefix);
  for (size_t i = 0; i < n; i++) {
    if (i) s[k++] = ',';
    entry(s + k, cap - k, i);
    k += strlen(s + k);
  }
  snprintf(s + k, cap - k, "%s", suffix);
  return s;
}

static void an_alert(char *out, size_t cap, size_t i) {
  snprintf(out, cap, "{\"status\":\"firing\",\"labels\":{\"alertname\":\"a%zu\"}}", i);
}

static void a_label(char *out, size_t cap, size_t i) {
  snprintf(out, cap, "\"l%zu\":\"v\"", i);
}

/* TG_AM_ALERTS_MAX alerts and TG_AM_LABELS_MAX labels are taken, one
 * more of either refuses the payload. */
static void am_parse_bounds_alerts_and_labels(void **state) {
  (void)state;
  static const char head[] = "{\"receiver\":\"tg\",\"status\":\"firing\","
                             "\"version\":\"4\",\"groupKey\":\"k\",\"alerts\":[";
  for (size_t extra = 0; extra < 2; extra++) {
    char *body = repeat_json(head, TG_AM_ALERTS_MAX + extra, an_alert, "]}");
    tg_am_payload_t p;
    const char *why;
    assert_int_equal(parse(body, &p, &why), extra ? -EINVAL : 0);
    if (!extra) assert_int_equal(p.n_alerts, TG_AM_ALERTS_MAX);
    tg_am_payload_free(&p);
    free(body);
    char prefix[256];
    snprintf(prefix, sizeof(prefix),
             "%s{\"status\":\"firing\",\"labels\":{\"alertname\":\"x\",", head);
    body = repeat_json(prefix, TG_AM_LABELS_MAX - 1 + extra, a_label, "}}]}");
    assert_int_equal(parse(body, &p, &why), extra ? -EINVAL : 0);
    tg_am_payload_free(&p);
    free(body);
  }
}

/* The reason fits the catalog's TG_COLL_REASON_MAX: annotations go
 * first, then every label but alertname, then that too. */
static void am_reason_is_cut_to_fit(void **state) {
  (void)state;
  char big[1200];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  char body[8192];
  tg_am_payload_t p;
  const char *why;
  /* A long annotation: the labels stay. */
  snprintf(body, sizeof(body),
           PAYLOAD("{\"status\":\"firing\",\"labels\":{\"alertname\":\"A\","
                   "\"instance\":\"h:1\"},\"annotations\":{\"d\":\"%s\"}}"),
           big);
  assert_int_equal(parse(body, &p, &why), 0);
  assert_string_equal(p.alerts[0].reason,
                      "{\"cut\":true,\"labels\":{\"alertname\":\"A\","
                      "\"instance\":\"h:1\"}}");
  tg_am_payload_free(&p);
  /* A long label: alertname alone. */
  snprintf(body, sizeof(body),
           PAYLOAD("{\"status\":\"firing\",\"labels\":{\"alertname\":\"A\","
                   "\"instance\":\"%s\"}}"),
           big);
  assert_int_equal(parse(body, &p, &why), 0);
  assert_string_equal(p.alerts[0].reason,
                      "{\"cut\":true,\"labels\":{\"alertname\":\"A\"}}");
  tg_am_payload_free(&p);
  /* A long alertname: nothing but the cut. */
  snprintf(body, sizeof(body),
           PAYLOAD("{\"status\":\"firing\",\"labels\":{\"alertname\":\"%s\"}}"),
           big);
  assert_int_equal(parse(body, &p, &why), 0);
  assert_string_equal(p.alerts[0].reason, "{\"cut\":true}");
  tg_am_payload_free(&p);
}

/* --- the pure half: hosts, the window, the decision -------------------------- */

static const tg_am_inv_t INV[] = {
    {"db1.example:7467", "db1.example", ""},
    {"db1.example:7468", "db1.example", "db1-b"},
    {"10.0.0.5:7467", "10.0.0.5", "web1"},
    {"[::1]:7467", "::1", ""},
};
#define N_INV (sizeof(INV) / sizeof(INV[0]))

static void config_of(const char *text, tg_coll_config_t *c) {
  char err[512];
  int rv = tg_coll_config_parse(text, strlen(text), "t.conf", "/", c, NULL,
                                NULL, err, sizeof(err));
  if (rv) fail_msg("%s", err);
}

#define CONF_REQUIRED "hosts = h\ntrace_config = t\nstore = s\n"

/* Which of INV |value| names, as a string of 0 and 1. */
static const char *matched(const tg_coll_config_t *c, const char *value) {
  static char out[N_INV + 1];
  bool hit[N_INV];
  size_t n = tg_am_match(c, value, INV, N_INV, hit);
  size_t k = 0;
  for (size_t i = 0; i < N_INV; i++) {
    out[i] = hit[i] ? '1' : '0';
    k += hit[i];
  }
  out[N_INV] = 0;
  assert_int_equal(n, k);
  return out;
}

static void am_hosts_match_by_mapping_spec_and_name(void **state) {
  (void)state;
  tg_coll_config_t c;
  config_of(CONF_REQUIRED
            "alertmanager_host = db-primary db1.example:7468\n"
            "alertmanager_host = gone.example:9100 gone.example:7467\n"
            "alertmanager_host = db1.example:9100 10.0.0.5:7467\n",
            &c);
  /* host:port as the inventory spells it: that host alone */
  assert_string_equal(matched(&c, "db1.example:7467"), "1000");
  /* the host name: every host of that name, whatever the port */
  assert_string_equal(matched(&c, "db1.example:9101"), "1100");
  assert_string_equal(matched(&c, "db1.example"), "1100");
  /* the hostname a host reports */
  assert_string_equal(matched(&c, "web1:9100"), "0010");
  assert_string_equal(matched(&c, "db1-b"), "0100");
  assert_string_equal(matched(&c, "[::1]:9100"), "0001");
  /* a mapping is final: its hosts, nothing guessed beside them */
  assert_string_equal(matched(&c, "db-primary"), "0100");
  assert_string_equal(matched(&c, "db1.example:9100"), "0010");
  assert_string_equal(matched(&c, "gone.example:9100"), "0000");
  /* exact bytes */
  assert_string_equal(matched(&c, "DB1.example:7467"), "0000");
  assert_string_equal(matched(&c, "db1.example.:9100"), "0000");
  assert_string_equal(matched(&c, ""), "0000");
  assert_string_equal(matched(&c, ":9100"), "0000");
  tg_coll_config_free(&c);
}

static void am_repeat_window_holds_for_its_time(void **state) {
  (void)state;
  tg_am_seen_t *s = tg_am_seen_new();
  assert_non_null(s);
  uint64_t id = 99;
  assert_false(tg_am_seen_recent(s, "g\n{}", 1000, 3600000, &id));
  assert_int_equal(tg_am_seen_note(s, "g\n{}", 1000, 7), 0);
  assert_true(tg_am_seen_recent(s, "g\n{}", 1000 + 3600000 - 1, 3600000, &id));
  assert_int_equal(id, 7);
  assert_false(tg_am_seen_recent(s, "g\n{}", 1000 + 3600000, 3600000, &id));
  assert_false(tg_am_seen_recent(s, "g\n{}", 999, 3600000, &id)); /* went back */
  assert_false(tg_am_seen_recent(s, "g\n{ }", 1001, 3600000, &id));
  assert_false(tg_am_seen_recent(s, "g", 1001, 3600000, &id));
  /* noted again: from then on */
  assert_int_equal(tg_am_seen_note(s, "g\n{}", 5000, 0), 0);
  assert_int_equal(tg_am_seen_count(s), 1);
  assert_true(tg_am_seen_recent(s, "g\n{}", 5000 + 3600000 - 1, 3600000, &id));
  assert_int_equal(id, 0);
  tg_am_seen_free(s);
}

/* TG_AM_SEEN_MAX entries and TG_AM_SEEN_BYTES of keys at most: the
 * oldest go first. */
static void am_repeat_window_is_bounded(void **state) {
  (void)state;
  tg_am_seen_t *s = tg_am_seen_new();
  assert_non_null(s);
  char key[32];
  uint64_t id;
  for (int i = 0; i <= TG_AM_SEEN_MAX; i++) {
    snprintf(key, sizeof(key), "k%d", i);
    assert_int_equal(tg_am_seen_note(s, key, i, (uint64_t)i + 1), 0);
  }
  assert_int_equal(tg_am_seen_count(s), TG_AM_SEEN_MAX);
  assert_false(tg_am_seen_recent(s, "k0", TG_AM_SEEN_MAX, 1 << 30, &id));
  assert_true(tg_am_seen_recent(s, "k1", TG_AM_SEEN_MAX, 1 << 30, &id));
  assert_true(tg_am_seen_recent(s, "k4096", TG_AM_SEEN_MAX, 1 << 30, &id));
  size_t big = TG_AM_SEEN_BYTES / 2;
  char *k = malloc(TG_AM_SEEN_BYTES + 2);
  assert_non_null(k);
  memset(k, 'a', TG_AM_SEEN_BYTES + 1);
  k[TG_AM_SEEN_BYTES + 1] = 0;
  assert_int_equal(tg_am_seen_note(s, k, 10000, 1), -E2BIG);
  k[big] = 0;
  assert_int_equal(tg_am_seen_note(s, k, 10001, 1), 0);
  k[0] = 'b';
  assert_int_equal(tg_am_seen_note(s, k, 10002, 2), 0);
  k[0] = 'c'; /* no room for three halves: the oldest half goes */
  assert_int_equal(tg_am_seen_note(s, k, 10003, 3), 0);
  assert_true(tg_am_seen_recent(s, k, 10004, 1 << 30, &id));
  k[0] = 'a';
  assert_false(tg_am_seen_recent(s, k, 10004, 1 << 30, &id));
  k[0] = 'b';
  assert_true(tg_am_seen_recent(s, k, 10004, 1 << 30, &id));
  free(k);
  tg_am_seen_free(s);
}

/* tg_am_decide on one alert of |labels| (and |status|). */
static tg_am_verdict_t decide(const tg_coll_config_t *c, tg_am_seen_t *seen,
                              const char *status, const char *labels,
                              int64_t now, const char **group, uint64_t *id,
                              char hits[N_INV + 1]) {
  char body[4096];
  snprintf(body, sizeof(body),
           "{\"receiver\":\"tg\",\"status\":\"%s\",\"version\":\"4\","
           "\"groupKey\":\"k\",\"alerts\":[{\"status\":\"%s\",\"labels\":{%s}}]}",
           status, status, labels);
  tg_am_payload_t p;
  const char *why;
  assert_int_equal(tg_am_parse((const uint8_t *)body, strlen(body),
                               c->am_host_label, c->am_group_label, &p, &why),
                   0);
  bool hit[N_INV];
  tg_am_verdict_t v =
      tg_am_decide(&p.alerts[0], c, seen, now, INV, N_INV, hit, group, id);
  for (size_t i = 0; i < N_INV; i++) hits[i] = v == TG_AM_HOSTS && hit[i] ? '1' : '0';
  hits[N_INV] = 0;
  if (v == TG_AM_GROUP && *group && strcmp(*group, "all")) {
    /* the group's name outlives the payload only as the config's */
    *group = tg_coll_config_group(c, *group)->name;
  }
  if (seen && (v == TG_AM_GROUP || v == TG_AM_HOSTS))
    assert_int_equal(tg_am_seen_note(seen, p.alerts[0].key, now, 42), 0);
  tg_am_payload_free(&p);
  return v;
}

static void am_decide_in_its_order(void **state) {
  (void)state;
  tg_coll_config_t c;
  config_of(CONF_REQUIRED "group = db db1.example:7467\n"
                          "alertmanager_host_label = node\n"
                          "alertmanager_group_label = team_group\n"
                          "alertmanager_repeat_window = 1m\n",
            &c);
  tg_am_seen_t *seen = tg_am_seen_new();
  const char *g;
  uint64_t id;
  char hits[N_INV + 1];
  assert_int_equal(decide(&c, seen, "resolved", "\"alertname\":\"A\",\"node\":\"web1\"",
                          0, &g, &id, hits), TG_AM_RESOLVED);
  assert_int_equal(decide(&c, seen, "firing", "\"node\":\"web1\"", 0, &g, &id, hits),
                   TG_AM_NO_ALERTNAME);
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"\",\"node\":\"web1\"",
                          0, &g, &id, hits), TG_AM_NO_ALERTNAME);
  char labels[600];
  char name[TG_COLL_TRIGGER_MAX + 2];
  memset(name, 'n', sizeof(name) - 1);
  name[sizeof(name) - 1] = 0;
  snprintf(labels, sizeof(labels), "\"alertname\":\"%s\",\"node\":\"web1\"", name);
  assert_int_equal(decide(&c, seen, "firing", labels, 0, &g, &id, hits),
                   TG_AM_NO_ALERTNAME);
  name[TG_COLL_TRIGGER_MAX] = 0; /* at the bound: taken */
  snprintf(labels, sizeof(labels), "\"alertname\":\"%s\",\"node\":\"web1\"", name);
  assert_int_equal(decide(&c, seen, "firing", labels, 0, &g, &id, hits), TG_AM_HOSTS);
  /* The configured labels, not the defaults. */
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"A\",\"instance\":\"web1\"",
                          0, &g, &id, hits), TG_AM_NO_LABEL);
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"A\",\"node\":\"web1\"",
                          0, &g, &id, hits), TG_AM_HOSTS);
  assert_string_equal(hits, "0010");
  /* The same alert again within the window: a repeat naming the first;
   * after it, a snapshot again. */
  assert_int_equal(decide(&c, seen, "firing", "\"node\":\"web1\",\"alertname\":\"A\"",
                          59999, &g, &id, hits), TG_AM_REPEAT);
  assert_int_equal(id, 42);
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"A\",\"node\":\"web1\"",
                          60000, &g, &id, hits), TG_AM_HOSTS);
  /* The group label before the host label. */
  assert_int_equal(decide(&c, seen, "firing",
                          "\"alertname\":\"B\",\"node\":\"web1\",\"team_group\":\"db\"",
                          0, &g, &id, hits), TG_AM_GROUP);
  assert_string_equal(g, "db");
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"C\",\"team_group\":\"all\"",
                          0, &g, &id, hits), TG_AM_GROUP);
  assert_string_equal(g, "all");
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"D\",\"team_group\":\"Db\"",
                          0, &g, &id, hits), TG_AM_NO_GROUP);
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"E\",\"node\":\"nowhere\"",
                          0, &g, &id, hits), TG_AM_NO_HOST);
  /* No window: every notification snapshots. */
  c.am_repeat_window_ms = 0;
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"C\",\"team_group\":\"all\"",
                          1, &g, &id, hits), TG_AM_GROUP);
  tg_am_seen_free(seen);
  tg_coll_config_free(&c);
  /* Each result has its name. */
  for (int r = 0; r < TG_AM_R_COUNT; r++)
    assert_string_not_equal(tg_am_result_name((tg_am_result_t)r), "?");
  assert_string_equal(tg_am_result_name(tg_am_result_of(TG_AM_REPEAT)), "repeat");
}

/* The webhook's caller is an origin of its own: its storm spends its own
 * budget, never the operators'; a snapshot of "all" under way serves it
 * before any clone is requested, one of a host list never does. */
static void am_budget_is_its_own(void **state) {
  (void)state;
  tg_trigger_budget_t am = {.limit = 2}, op = {.limit = 6};
  tg_trigger_state_t st = {.running_max = 4, .coalesce_window_ms = 10000};
  tg_trigger_t t = {.from = TG_TRIGGER_FROM_ALERTMANAGER, .group = ""};
  int64_t now = 1000000;
  for (int i = 0; i < 2; i++) {
    st.own = &am;
    assert_int_equal(tg_trigger_decide(&st, &t, now).verdict, TG_TRIGGER_BEGIN);
    tg_trigger_charge(&am, now);
  }
  tg_trigger_decision_t d = tg_trigger_decide(&st, &t, now);
  assert_int_equal(d.verdict, TG_TRIGGER_REFUSE);
  assert_int_equal(d.budget, TG_TRIGGER_BUDGET_ALERTMANAGER);
  assert_string_equal(tg_trigger_budget_name(d.budget), "alertmanager");
  assert_int_equal(tg_trigger_budget_of(TG_TRIGGER_FROM_ALERTMANAGER),
                   TG_TRIGGER_BUDGET_ALERTMANAGER);
  tg_trigger_t op_t = {.from = TG_TRIGGER_FROM_OPERATOR, .group = "all"};
  st.own = &op;
  assert_int_equal(tg_trigger_decide(&st, &op_t, now).verdict, TG_TRIGGER_BEGIN);
  /* Served: by "all" before its clones, not by a host list's snapshot. */
  tg_trigger_snap_view_t running[2] = {
      {.group = "(hosts)", .started_ms = now, .none_requested = true},
      {.group = "all", .started_ms = now, .none_requested = true},
  };
  st.own = &am;
  st.running = running;
  st.n_running = 2;
  d = tg_trigger_decide(&st, &t, now);
  assert_int_equal(d.verdict, TG_TRIGGER_SERVE);
  assert_int_equal(d.snap, 1);
  running[1].none_requested = false;
  assert_int_equal(tg_trigger_decide(&st, &t, now).verdict, TG_TRIGGER_REFUSE);
}

/* --- the config keys ----------------------------------------------------------- */

static void am_config_keys_read_and_checked(void **state) {
  (void)state;
  tg_coll_config_t c;
  config_of(CONF_REQUIRED, &c);
  assert_string_equal(c.am_host_label, "instance");
  assert_string_equal(c.am_group_label, "tracegate_group");
  assert_int_equal(c.am_repeat_window_ms, 3600000);
  assert_int_equal(c.am_snapshots_per_minute, 6);
  assert_int_equal(c.am_max_bytes, 1 << 20);
  assert_int_equal(c.n_am_hosts, 0);
  tg_coll_config_free(&c);
  config_of(CONF_REQUIRED "alertmanager_host_label = node\n"
                          "alertmanager_group_label = g\n"
                          "alertmanager_repeat_window = 0\n"
                          "alertmanager_snapshots_per_minute = 600\n"
                          "alertmanager_max_bytes = 16M\n"
                          "alertmanager_host = db-1:9100 a:1 b:2\n",
            &c);
  assert_string_equal(c.am_host_label, "node");
  assert_string_equal(c.am_group_label, "g");
  assert_int_equal(c.am_repeat_window_ms, 0);
  assert_int_equal(c.am_snapshots_per_minute, 600);
  assert_int_equal(c.am_max_bytes, 16u << 20);
  assert_int_equal(c.n_am_hosts, 1);
  const tg_coll_am_host_t *m = tg_coll_config_am_host(&c, "db-1:9100");
  assert_non_null(m);
  assert_int_equal(m->line, 9);
  assert_int_equal(m->n_hosts, 2);
  assert_string_equal(m->hosts[1], "b:2");
  assert_null(tg_coll_config_am_host(&c, "db-1"));
  tg_coll_config_free(&c);
  /* Each bad value refused on its line (4: after the required three). */
  static const char *const bad[] = {
      "alertmanager_repeat_window = 31d\n",
      "alertmanager_repeat_window = 5\n",
      "alertmanager_max_bytes = 1023\n",
      "alertmanager_max_bytes = 17M\n",
      "alertmanager_snapshots_per_minute = 0\n",
      "alertmanager_host_label = a b\n",
      "alertmanager_group_label = .g\n",
      "alertmanager_host = lonely\n",
      "alertmanager_host = v\x01 a:1\n",
      "alertmanager_host = v a:1\nalertmanager_host = v b:1\n",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char text[256], err[512];
    snprintf(text, sizeof(text), CONF_REQUIRED "%s", bad[i]);
    int rv = tg_coll_config_parse(text, strlen(text), "t.conf", "/", &c, NULL,
                                  NULL, err, sizeof(err));
    assert_int_equal(rv, -EINVAL);
    const char *want = strchr(bad[i], '\n')[1] ? "t.conf:5: alertmanager_"
                                               : "t.conf:4: alertmanager_";
    if (strncmp(err, want, strlen(want))) fail_msg("%s: %s", bad[i], err);
    assert_int_equal(c.n_am_hosts, 0);
    assert_null(c.am_hosts);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(am_parse_reads_a_webhook_payload),
      cmocka_unit_test(am_parse_refuses_malformed_payloads),
      cmocka_unit_test(am_parse_bounds_alerts_and_labels),
      cmocka_unit_test(am_reason_is_cut_to_fit),
      cmocka_unit_test(am_hosts_match_by_mapping_spec_and_name),
      cmocka_unit_test(am_repeat_window_holds_for_its_time),
      cmocka_unit_test(am_repeat_window_is_bounded),
      cmocka_unit_test(am_decide_in_its_order),
      cmocka_unit_test(am_budget_is_its_own),
      cmocka_unit_test(am_config_keys_read_and_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
