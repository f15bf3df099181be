/* Alertmanager's webhook on the collector (collector/daemon/alertmanager.h,
 * docs/collector.md "Alertmanager").
 *
 * The pure half first: the payload's parser (every field's type, the
 * bounds, the reason cut to fit, the repeat key's digest, the tree's bound
 * on a payload's memory), host matching (a mapping, host:port, the
 * inventory's host name, never what a host reports; exact bytes), the
 * repeat window (its time, its bounds), the decision's order, the
 * webhook's own trigger budget, and the config keys.
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
 *
 * Then, posted directly to a collector: a host is not snapshotted by an
 * alert naming the hostname it reports; and 1000 payloads of 256 KiB,
 * each a 228 KB groupKey and 1000 resolved alerts, leave the collector's
 * resident memory within its documented bound.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
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
#include <openssl/evp.h>

#include "coll_e2e.h"
#include "collector/catalog/catalog.h"
#include "collector/config/config.h"
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

/* SHA-256 of |n| bytes at |in| into |out|. */
static void sha256(const void *in, size_t n, uint8_t out[TG_AM_KEY_LEN]) {
  unsigned int len = 0;
  assert_int_equal(EVP_Digest(in, n, out, &len, EVP_sha256(), NULL), 1);
  assert_int_equal(len, TG_AM_KEY_LEN);
}

/* The repeat key alertmanager.h defines, of |group_key| and |labels| (as
 * compact JSON with sorted keys). */
static void key_digest(const char *group_key, const char *labels,
                       uint8_t out[TG_AM_KEY_LEN]) {
  uint8_t in[TG_AM_KEY_LEN + 512];
  size_t n = strlen(labels);
  assert_true(n <= sizeof(in) - TG_AM_KEY_LEN);
  sha256(group_key, strlen(group_key), in);
  memcpy(in + TG_AM_KEY_LEN, labels, n);
  sha256(in, TG_AM_KEY_LEN + n, out);
}

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
  /* The key: the group's digest, then the labels sorted, whatever the
   * order they came in, in one digest. */
  uint8_t want[TG_AM_KEY_LEN];
  key_digest("{}:{alertname=\"RunQueue\"}",
             "{\"alertname\":\"RunQueue\",\"instance\":\"db1:9100\","
             "\"severity\":\"page\"}", want);
  assert_memory_equal(a->key, want, TG_AM_KEY_LEN);
  assert_string_equal(a->reason,
                      "{\"annotations\":{\"summary\":\"run queue over 4\"},"
                      "\"labels\":{\"alertname\":\"RunQueue\",\"instance\":"
                      "\"db1:9100\",\"severity\":\"page\"}}");
  assert_false(p.alerts[1].firing);
  assert_null(p.alerts[1].host);
  assert_string_equal(p.alerts[1].group, "db");
  assert_null(p.alerts[1].reason); /* resolved: it snapshots nothing */
  tg_am_payload_free(&p);
  tg_am_payload_free(&p); /* twice: harmless */
}

/* The same labels in another order have the same key; another groupKey
 * or another label value, another key. */
static void am_keys_are_digests_of_group_and_labels(void **state) {
  (void)state;
  static const char *const bodies[] = {
      "{\"receiver\":\"r\",\"status\":\"firing\",\"version\":\"4\","
      "\"groupKey\":\"g\",\"alerts\":[{\"status\":\"firing\",\"labels\":"
      "{\"b\":\"2\",\"a\":\"1\"}},{\"status\":\"resolved\",\"labels\":"
      "{\"a\":\"1\",\"b\":\"2\"}},{\"status\":\"firing\",\"labels\":"
      "{\"a\":\"1\",\"b\":\"3\"}}]}",
      "{\"receiver\":\"r\",\"status\":\"firing\",\"version\":\"4\","
      "\"groupKey\":\"h\",\"alerts\":[{\"status\":\"firing\",\"labels\":"
      "{\"a\":\"1\",\"b\":\"2\"}}]}",
  };
  tg_am_payload_t p, q;
  const char *why;
  assert_int_equal(parse(bodies[0], &p, &why), 0);
  assert_int_equal(parse(bodies[1], &q, &why), 0);
  uint8_t want[TG_AM_KEY_LEN];
  key_digest("g", "{\"a\":\"1\",\"b\":\"2\"}", want);
  assert_memory_equal(p.alerts[0].key, want, TG_AM_KEY_LEN);
  assert_memory_equal(p.alerts[1].key, want, TG_AM_KEY_LEN);
  assert_memory_not_equal(p.alerts[2].key, want, TG_AM_KEY_LEN);
  assert_memory_not_equal(q.alerts[0].key, want, TG_AM_KEY_LEN);
  key_digest("h", "{\"a\":\"1\",\"b\":\"2\"}", want);
  assert_memory_equal(q.alerts[0].key, want, TG_AM_KEY_LEN);
  tg_am_payload_free(&p);
  tg_am_payload_free(&q);
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

/* The payload of the memory case: |size| bytes exactly, a groupKey of
 * all but what 1000 resolved alerts with no labels take. Returns it
 * (malloc'd, NUL-terminated). */
static char *long_group_payload(size_t size) {
  static const char head[] = "{\"receiver\":\"r\",\"status\":\"resolved\","
                             "\"version\":\"4\",\"groupKey\":\"";
  static const char alert[] = "{\"status\":\"resolved\",\"labels\":{}}";
  size_t fixed = strlen(head) + strlen("\",\"alerts\":[]}") +
                 TG_AM_ALERTS_MAX * strlen(alert) + TG_AM_ALERTS_MAX - 1;
  assert_true(size > fixed);
  char *s = malloc(size + 1);
  assert_non_null(s);
  size_t k = (size_t)sprintf(s, "%s", head);
  memset(s + k, 'g', size - fixed);
  k += size - fixed;
  k += (size_t)sprintf(s + k, "\",\"alerts\":[");
  for (size_t i = 0; i < TG_AM_ALERTS_MAX; i++)
    k += (size_t)sprintf(s + k, "%s%s", i ? "," : "", alert);
  k += (size_t)sprintf(s + k, "]}");
  assert_int_equal(k, size);
  return s;
}

/* One alert as Alertmanager writes it, about 450 bytes. */
static void a_real_alert(char *out, size_t cap, size_t i) {
  snprintf(out, cap,
           "{\"status\":\"firing\",\"labels\":{\"alertname\":\"RunQueueHigh\","
           "\"instance\":\"db%zu.example:9100\",\"job\":\"node\",\"severity\":"
           "\"page\",\"tracegate\":\"snapshot\"},\"annotations\":{\"summary\":"
           "\"run queue over 4 on db%zu\",\"description\":\"The run queue has "
           "been over 4 for 5 minutes.\"},\"startsAt\":\"2026-11-26T10:00:00.000Z\","
           "\"endsAt\":\"0001-01-01T00:00:00Z\",\"generatorURL\":\"http://"
           "prometheus.example:9090/graph?g0.expr=node_load1+%%3E+4&g0.tab=1\","
           "\"fingerprint\":\"0123456789abcdef\"}", i, i);
}

/* A payload's memory is bounded by its size: the 256 KiB of a 228 KB
 * groupKey and 1000 resolved alerts is read with one digest per alert (no
 * copy of the groupKey) and no reason; 1000 alerts as Alertmanager writes
 * them fit the tree's bound; a document whose tree would pass it (empty
 * objects, about 75 times their text) is refused whole, -E2BIG (413). */
static void am_parse_bounds_its_memory(void **state) {
  (void)state;
  char *body = long_group_payload(256u << 10);
  tg_am_payload_t p;
  const char *why = NULL;
  assert_int_equal(parse(body, &p, &why), 0);
  assert_int_equal(p.n_alerts, TG_AM_ALERTS_MAX);
  assert_true(strlen(p.group_key) > 228000);
  for (size_t i = 0; i < p.n_alerts; i++) {
    assert_null(p.alerts[i].reason);
    assert_memory_equal(p.alerts[i].key, p.alerts[0].key, TG_AM_KEY_LEN);
  }
  tg_am_payload_free(&p);
  free(body);

  static const char head[] = "{\"receiver\":\"tg\",\"status\":\"firing\","
                             "\"version\":\"4\",\"groupKey\":\"k\",\"alerts\":[";
  size_t cap = sizeof(head) + TG_AM_ALERTS_MAX * 600 + 8, k = 0;
  body = malloc(cap);
  assert_non_null(body);
  k += (size_t)snprintf(body, cap, "%s", head);
  for (size_t i = 0; i < TG_AM_ALERTS_MAX; i++) {
    if (i) body[k++] = ',';
    a_real_alert(body + k, cap - k, i);
    k += strlen(body + k);
  }
  snprintf(body + k, cap - k, "]}");
  assert_int_equal(parse(body, &p, &why), 0);
  assert_int_equal(p.n_alerts, TG_AM_ALERTS_MAX);
  tg_am_payload_free(&p);
  free(body);

  static const char bomb_head[] = "{\"receiver\":\"tg\",\"status\":\"firing\","
                                  "\"version\":\"4\",\"groupKey\":\"k\","
                                  "\"alerts\":[],\"pad\":[{}";
  size_t size = 256u << 10;
  body = malloc(size + 1);
  assert_non_null(body);
  k = (size_t)sprintf(body, "%s", bomb_head);
  while (k + 5 <= size) k += (size_t)sprintf(body + k, ",{}");
  k += (size_t)sprintf(body + k, "]}");
  why = NULL;
  assert_int_equal(parse(body, &p, &why), -E2BIG);
  assert_non_null(why);
  assert_null(p.doc); /* nothing owned */
  assert_null(p.alerts);
  free(body);
}

/* --- the pure half: hosts, the window, the decision -------------------------- */

static const tg_am_inv_t INV[] = {
    {"db1.example:7467", "db1.example"},
    {"db1.example:7468", "db1.example"},
    {"10.0.0.5:7467", "10.0.0.5"},
    {"[::1]:7467", "::1"},
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
  /* an address as the inventory spells it */
  assert_string_equal(matched(&c, "10.0.0.5:9100"), "0010");
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

/* A key of the window's, made of |i|. */
static const uint8_t *key_n(uint8_t out[TG_AM_KEY_LEN], unsigned i) {
  memset(out, 0, TG_AM_KEY_LEN);
  memcpy(out + TG_AM_KEY_LEN - sizeof(i), &i, sizeof(i));
  return out;
}

static void am_repeat_window_holds_for_its_time(void **state) {
  (void)state;
  tg_am_seen_t *s = tg_am_seen_new();
  assert_non_null(s);
  uint8_t k[TG_AM_KEY_LEN];
  uint64_t id = 99;
  const int64_t w = 3600000;
  assert_false(tg_am_seen_recent(s, key_n(k, 1), 1000, w, &id));
  tg_am_seen_note(s, key_n(k, 1), 1000, w, 7);
  assert_true(tg_am_seen_recent(s, key_n(k, 1), 1000 + w - 1, w, &id));
  assert_int_equal(id, 7);
  assert_false(tg_am_seen_recent(s, key_n(k, 1), 1000 + w, w, &id));
  assert_false(tg_am_seen_recent(s, key_n(k, 1), 999, w, &id)); /* went back */
  assert_false(tg_am_seen_recent(s, key_n(k, 2), 1001, w, &id));
  /* noted again: from then on */
  tg_am_seen_note(s, key_n(k, 1), 5000, w, 0);
  assert_int_equal(tg_am_seen_count(s), 1);
  assert_true(tg_am_seen_recent(s, key_n(k, 1), 5000 + w - 1, w, &id));
  assert_int_equal(id, 0);
  tg_am_seen_free(s);
}

/* TG_AM_SEEN_MAX entries at most, the oldest going first; an entry past
 * the window is forgotten when the next is noted. */
static void am_repeat_window_is_bounded(void **state) {
  (void)state;
  tg_am_seen_t *s = tg_am_seen_new();
  assert_non_null(s);
  uint8_t k[TG_AM_KEY_LEN];
  uint64_t id;
  const int64_t w = 1 << 30;
  for (unsigned i = 0; i <= TG_AM_SEEN_MAX; i++)
    tg_am_seen_note(s, key_n(k, i), i, w, (uint64_t)i + 1);
  assert_int_equal(tg_am_seen_count(s), TG_AM_SEEN_MAX);
  assert_false(tg_am_seen_recent(s, key_n(k, 0), TG_AM_SEEN_MAX, w, &id));
  assert_true(tg_am_seen_recent(s, key_n(k, 1), TG_AM_SEEN_MAX, w, &id));
  assert_true(tg_am_seen_recent(s, key_n(k, TG_AM_SEEN_MAX), TG_AM_SEEN_MAX, w,
                                &id));
  assert_int_equal(id, TG_AM_SEEN_MAX + 1);
  /* A window later, the next note leaves only itself. */
  tg_am_seen_note(s, key_n(k, 1u << 20), (int64_t)TG_AM_SEEN_MAX + w, w, 1);
  assert_int_equal(tg_am_seen_count(s), 1);
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
    tg_am_seen_note(seen, p.alerts[0].key, now, c->am_repeat_window_ms, 42);
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
  assert_int_equal(decide(&c, seen, "resolved", "\"alertname\":\"A\",\"node\":\"10.0.0.5:9100\"",
                          0, &g, &id, hits), TG_AM_RESOLVED);
  assert_int_equal(decide(&c, seen, "firing", "\"node\":\"10.0.0.5:9100\"", 0, &g, &id, hits),
                   TG_AM_NO_ALERTNAME);
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"\",\"node\":\"10.0.0.5:9100\"",
                          0, &g, &id, hits), TG_AM_NO_ALERTNAME);
  char labels[600];
  char name[TG_COLL_TRIGGER_MAX + 2];
  memset(name, 'n', sizeof(name) - 1);
  name[sizeof(name) - 1] = 0;
  snprintf(labels, sizeof(labels), "\"alertname\":\"%s\",\"node\":\"10.0.0.5:9100\"", name);
  assert_int_equal(decide(&c, seen, "firing", labels, 0, &g, &id, hits),
                   TG_AM_NO_ALERTNAME);
  name[TG_COLL_TRIGGER_MAX] = 0; /* at the bound: taken */
  snprintf(labels, sizeof(labels), "\"alertname\":\"%s\",\"node\":\"10.0.0.5:9100\"", name);
  assert_int_equal(decide(&c, seen, "firing", labels, 0, &g, &id, hits), TG_AM_HOSTS);
  /* The configured labels, not the defaults. */
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"A\",\"instance\":\"10.0.0.5:9100\"",
                          0, &g, &id, hits), TG_AM_NO_LABEL);
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"A\",\"node\":\"10.0.0.5:9100\"",
                          0, &g, &id, hits), TG_AM_HOSTS);
  assert_string_equal(hits, "0010");
  /* The same alert again within the window: a repeat naming the first;
   * after it, a snapshot again. */
  assert_int_equal(decide(&c, seen, "firing", "\"node\":\"10.0.0.5:9100\",\"alertname\":\"A\"",
                          59999, &g, &id, hits), TG_AM_REPEAT);
  assert_int_equal(id, 42);
  assert_int_equal(decide(&c, seen, "firing", "\"alertname\":\"A\",\"node\":\"10.0.0.5:9100\"",
                          60000, &g, &id, hits), TG_AM_HOSTS);
  /* The group label before the host label. */
  assert_int_equal(decide(&c, seen, "firing",
                          "\"alertname\":\"B\",\"node\":\"10.0.0.5:9100\",\"team_group\":\"db\"",
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
  assert_int_equal(c.am_max_bytes, 256 << 10);
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


/* --- the real thing ------------------------------------------------------------ */

/* A request by python3 (urllib) in a child: |method| to |url| with the
 * body of file |body| (NULL: none), over HTTPS as |who| (pki/WHO.pem,
 * the collector verified against pki/ca.pem) or plain HTTP (NULL). The
 * answer's body goes to |out|; returns its status (0: no HTTP answer).
 * The body goes in one write, so one TLS record of up to 16 KiB: the
 * collector once stalled on a record larger than its read buffer. */
static int request(const char *url, const char *who, const char *method,
                   const char *body, const char *out) {
  static const char script[] =
      "import ssl, sys, urllib.request, urllib.error\n"
      "url, method, body, out, ca, cert, key = sys.argv[1:8]\n"
      "ctx = None\n"
      "if ca != '-':\n"
      "    ctx = ssl.create_default_context(cafile=ca)\n"
      "    ctx.load_cert_chain(cert, key)\n"
      "data = open(body, 'rb').read() if body != '-' else None\n"
      "req = urllib.request.Request(url, method=method)\n"
      "if data is not None:\n"
      "    req.data = data\n"
      "    req.add_header('Content-Length', str(len(data)))\n"
      "    req.add_header('Content-Type', 'application/json')\n"
      "try:\n"
      "    r = urllib.request.urlopen(req, timeout=30, context=ctx)\n"
      "    code, text = r.status, r.read()\n"
      "except urllib.error.HTTPError as e:\n"
      "    code, text = e.code, e.read()\n"
      "except Exception as e:  # no HTTP answer: status 0\n"
      "    code, text = 0, str(e).encode()\n"
      "open(out, 'wb').write(text)\n"
      "open(out + '.status', 'w').write(str(code))\n";
  char ca[256] = "-", cert[256] = "-", key[256] = "-", name[64];
  if (who) {
    snprintf(ca, sizeof(ca), "%s", fleet_in_dir("pki/ca.pem"));
    snprintf(name, sizeof(name), "pki/%s.pem", who);
    snprintf(cert, sizeof(cert), "%s", fleet_in_dir(name));
    snprintf(name, sizeof(name), "pki/%s.key", who);
    snprintf(key, sizeof(key), "%s", fleet_in_dir(name));
  }
  const char *argv[] = {"/usr/bin/python3", "-c", script, url, method, body ? body : "-",
                        out, ca, cert, key, NULL};
  tg_test_spawn_t sp = TG_TEST_SPAWN_INIT;
  sp.path = "/usr/bin/python3";
  sp.argv = argv;
  sp.stdin_fd = TG_TEST_FD_DEVNULL;
  pid_t pid = tg_test_spawn(&sp);
  assert_true(pid > 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(pid, 60000)), 0);
  char path[512], text[16] = "";
  snprintf(path, sizeof(path), "%s.status", out);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(text, sizeof(text), f));
  fclose(f);
  return atoi(text);
}

/* The collector's API over HTTPS as |who|. */
static int coll_req(const collector_t *c, const char *who, const char *method,
                    const char *path, const char *body, const char *out) {
  char url[512];
  snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", c->port, path);
  return request(url, who, method, body, out);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* A loopback port nobody listens on now. */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

typedef struct alertmanager {
  pid_t pid;
  int port;
} alertmanager_t;

/* prometheus-alertmanager on loopback, its storage in the test's
 * directory, no cluster, one webhook receiver: the collector's
 * /api/v1/alertmanager over mutual TLS as "am". Groups by alert name and
 * instance; short waits and intervals so that repeats come quickly. */
static void alertmanager_start(alertmanager_t *am, const collector_t *c) {
  char conf[4096], ca[256], cert[256], key[256];
  snprintf(ca, sizeof(ca), "%s", fleet_in_dir("pki/ca.pem"));
  snprintf(cert, sizeof(cert), "%s", fleet_in_dir("pki/am.pem"));
  snprintf(key, sizeof(key), "%s", fleet_in_dir("pki/am.key"));
  snprintf(conf, sizeof(conf),
           "route:\n"
           "  receiver: tracegate\n"
           "  group_by: [alertname, instance]\n"
           "  group_wait: 100ms\n"
           "  group_interval: 500ms\n"
           "  repeat_interval: 1s\n"
           "receivers:\n"
           "- name: tracegate\n"
           "  webhook_configs:\n"
           "  - url: https://127.0.0.1:%d/api/v1/alertmanager\n"
           "    send_resolved: true\n"
           "    http_config:\n"
           "      tls_config:\n"
           "        ca_file: %s\n"
           "        cert_file: %s\n"
           "        key_file: %s\n"
           "        server_name: relay.test\n",
           c->port, ca, cert, key);
  char conf_path[256], storage[256], config_arg[300], storage_arg[300],
      listen_arg[64];
  snprintf(conf_path, sizeof(conf_path), "%s", fleet_in_dir("alertmanager.yml"));
  write_text(conf_path, conf);
  snprintf(storage, sizeof(storage), "%s", fleet_in_dir("alertmanager-data"));
  am->port = free_port();
  snprintf(config_arg, sizeof(config_arg), "--config.file=%s", conf_path);
  snprintf(storage_arg, sizeof(storage_arg), "--storage.path=%s", storage);
  snprintf(listen_arg, sizeof(listen_arg), "--web.listen-address=127.0.0.1:%d",
           am->port);
  const char *argv[] = {"prometheus-alertmanager", config_arg, storage_arg,
                        listen_arg, "--cluster.listen-address=",
                        "--log.level=debug", NULL};
  int log = open(fleet_in_dir("alertmanager.log"),
                 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  assert_true(log >= 0);
  tg_test_spawn_t sp = TG_TEST_SPAWN_INIT;
  sp.path = ALERTMANAGER_PATH;
  sp.argv = argv;
  sp.stdin_fd = TG_TEST_FD_DEVNULL;
  sp.stdout_fd = log;
  sp.stderr_fd = log;
  am->pid = tg_test_spawn(&sp);
  close(log);
  assert_true(am->pid > 0);
  char url[128];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/-/ready", am->port);
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  while (request(url, NULL, "GET", NULL, fleet_in_dir("am-ready.txt")) != 200) {
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
}

static void alertmanager_stop(alertmanager_t *am) {
  int st = tg_test_stop(am->pid, SIGTERM, FLEET_WAIT_MS);
  assert_int_equal(tg_test_exit_code(st), 0);
  am->pid = 0;
}

/* Posts |alerts| (a JSON array) to Alertmanager's /api/v2/alerts, as
 * Prometheus does. */
static void alertmanager_post(const alertmanager_t *am, const char *alerts) {
  char body[256], url[128];
  snprintf(body, sizeof(body), "%s", fleet_in_dir("am-alerts.json"));
  write_text(body, alerts);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/v2/alerts", am->port);
  assert_int_equal(request(url, NULL, "POST", body, fleet_in_dir("am-post.txt")),
                   200);
}

/* The value of |series| ("name{label=\"v\"}") in the collector's
 * /metrics; -1 when absent. */
static long long coll_metric(const collector_t *c, const char *series) {
  char out[256], line[512];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("metrics.txt"));
  assert_int_equal(coll_req(c, "alice", "GET", "/metrics", NULL, out), 200);
  FILE *f = fopen(out, "r");
  assert_non_null(f);
  long long v = -1;
  size_t n = strlen(series);
  while (v < 0 && fgets(line, sizeof(line), f))
    if (!strncmp(line, series, n) && line[n] == ' ') v = atoll(line + n + 1);
  fclose(f);
  return v;
}

/* Until |series| is at least |least|. */
static void wait_coll_metric(const collector_t *c, const char *series,
                             long long least) {
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  while (coll_metric(c, series) < least) {
    if (tg_test_now_ms() >= end) collector_dump_log();
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
}

#define AM_ALERTS(result) \
  "tracegate_collector_alertmanager_alerts_total{result=\"" result "\"}"
#define AM_REFUSED(status) \
  "tracegate_collector_alertmanager_payloads_refused_total{status=\"" status "\"}"

/* How many rows the list answer |out| holds (each row has one "id"). */
static size_t rows_of(const char *out) {
  const char *list = tg_test_json(out, "snapshots");
  assert_non_null(list);
  size_t n = 0;
  for (const char *p = list; (p = strstr(p, "\"id\": ")) != NULL; p++) n++;
  return n;
}

/* The snapshot listed with |trigger| (it must be the only one), once
 * stored, into |out|; returns its id (a static buffer). */
static const char *stored_snapshot(const collector_t *c, const char *trigger,
                                   const char *out) {
  char path[256];
  snprintf(path, sizeof(path), "/api/v1/snapshots?trigger=%s", trigger);
  static char id[32];
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(coll_req(c, "alice", "GET", path, NULL, out), 200);
    const char *v = rows_of(out) ? tg_test_json(out, "snapshots.0.state") : NULL;
    if (v && strcmp(v, "\"pending\"") != 0) break;
    if (tg_test_now_ms() >= end) collector_dump_log();
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
  assert_int_equal(rows_of(out), 1);
  snprintf(id, sizeof(id), "%.16s", tg_test_json(out, "snapshots.0.id") + 1);
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id);
  assert_int_equal(coll_req(c, "alice", "GET", path, NULL, out), 200);
  return id;
}

/* How many snapshots the collector lists. */
static size_t snapshots_listed(const collector_t *c) {
  char out[256];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("list.json"));
  assert_int_equal(coll_req(c, "alice", "GET", "/api/v1/snapshots", NULL, out),
                   200);
  return rows_of(out);
}

/* "2026-11-26T10:00:00Z" for |t| seconds since the epoch. */
static const char *rfc3339(time_t t) {
  static char out[32];
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

static void alertmanager_snapshots_what_its_alerts_name(void **state) {
  (void)state;
  if (access(ALERTMANAGER_PATH, X_OK) != 0) {
    print_message("skipped: " ALERTMANAGER_PATH " is not installed "
                  "(Debian's prometheus-alertmanager; deploy/deps.sh)\n");
    skip();
  }
  assert_int_equal(tg_test_certs(fleet_in_dir(""), "client pki am"), 0);
  assert_int_equal(tg_test_certs(fleet_in_dir(""), "client pki viewer --role observe"), 0);
  write_text(fleet_in_dir("http-authz"), "alice record\nam record\nviewer observe\n");
  fleet_host_t h[2];
  collector_t c;
  start_hosts(h, 2);
  char extra[1024];
  snprintf(extra, sizeof(extra),
           "http_cert = pki/relay.test.pem\nhttp_key = pki/relay.test.key\n"
           "http_ca = pki/ca.pem\nauthz = http-authz\n"
           "group = second %s\n"
           "alertmanager_host = db-1 %s\n"
           "alertmanager_max_bytes = 8K\n",
           h[1].spec, h[1].spec);
  write_config(h, 2, extra);
  collector_start(&c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("answer.json"));
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) { /* both rings tracing */
    assert_int_equal(coll_req(&c, "alice", "GET", "/api/v1/hosts", NULL, out), 200);
    const char *a = tg_test_json(out, "hosts.0.state");
    const char *b = tg_test_json(out, "hosts.1.state");
    if (a && b && !strcmp(a, "\"tracing\"") && !strcmp(b, "\"tracing\"")) break;
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
  alertmanager_t am;
  alertmanager_start(&am, &c);

  /* A run-queue alert naming host A by its host:port: host A alone, the
   * alert's name the trigger, its labels and annotations the reason. */
  char alerts[1024], want[1024];
  snprintf(alerts, sizeof(alerts),
           "[{\"labels\":{\"alertname\":\"RunQueueHigh\",\"instance\":\"%s\","
           "\"severity\":\"page\"},\"annotations\":{\"summary\":\"run queue "
           "over 4\"}}]", h[0].spec);
  alertmanager_post(&am, alerts);
  fleet_ack_flush(&h[0].p); /* only host A is asked */
  stored_snapshot(&c, "RunQueueHigh", out);
  assert_json(out, "snapshot.state", "\"complete\"");
  assert_json(out, "snapshot.trigger", "\"RunQueueHigh\"");
  assert_json(out, "snapshot.hosts", "1");
  snprintf(want, sizeof(want), "\"%s\"", h[0].spec);
  assert_json(out, "hosts.0.host", want);
  snprintf(want, sizeof(want),
           "\"{\\\"annotations\\\":{\\\"summary\\\":\\\"run queue over 4\\\"},"
           "\\\"labels\\\":{\\\"alertname\\\":\\\"RunQueueHigh\\\","
           "\\\"instance\\\":\\\"%s\\\",\\\"severity\\\":\\\"page\\\"}}\"",
           h[0].spec);
  assert_json(out, "snapshot.reason", want);

  /* Alertmanager sends the group again (repeat_interval): within the
   * repeat window it snapshots nothing. */
  wait_coll_metric(&c, AM_ALERTS("repeat"), 1);
  assert_int_equal(snapshots_listed(&c), 1);

  /* A mapping names host B (alertmanager_host = db-1), and a group label
   * names the group holding host B alone. */
  alertmanager_post(&am,
                    "[{\"labels\":{\"alertname\":\"LatencyHigh\",\"instance\":"
                    "\"db-1\"}},{\"labels\":{\"alertname\":\"DiskLatency\","
                    "\"tracegate_group\":\"second\"}}]");
  fleet_ack_flush(&h[1].p);
  fleet_ack_flush(&h[1].p);
  snprintf(want, sizeof(want), "\"%s\"", h[1].spec);
  stored_snapshot(&c, "LatencyHigh", out);
  assert_json(out, "snapshot.hosts", "1");
  assert_json(out, "hosts.0.host", want);
  stored_snapshot(&c, "DiskLatency", out);
  assert_json(out, "snapshot.hosts", "1");
  assert_json(out, "hosts.0.host", want);
  assert_int_equal(snapshots_listed(&c), 3);

  /* The run-queue alert resolved: Alertmanager says so, nothing is
   * snapshotted. */
  snprintf(alerts, sizeof(alerts),
           "[{\"labels\":{\"alertname\":\"RunQueueHigh\",\"instance\":\"%s\","
           "\"severity\":\"page\"},\"annotations\":{\"summary\":\"run queue "
           "over 4\"},\"endsAt\":\"%s\"}]", h[0].spec, rfc3339(time(NULL) - 1));
  alertmanager_post(&am, alerts);
  wait_coll_metric(&c, AM_ALERTS("resolved"), 1);
  assert_int_equal(snapshots_listed(&c), 3);
  assert_int_equal(coll_metric(&c, AM_ALERTS("snapshot")), 3);
  alertmanager_stop(&am);

  /* Posted directly: malformed (400) and oversized (413) payloads change
   * nothing; an observe identity may not trigger (403). */
  const char *body = fleet_in_dir("direct.json");
  char body_path[256];
  snprintf(body_path, sizeof(body_path), "%s", body);
  static const char *const malformed[] = {
      "{",
      "{\"version\":\"3\",\"groupKey\":\"k\",\"status\":\"firing\","
      "\"receiver\":\"r\",\"alerts\":[]}",
      "{\"version\":\"4\",\"groupKey\":\"k\",\"status\":\"firing\","
      "\"receiver\":\"r\",\"alerts\":[{\"status\":\"firing\",\"labels\":"
      "{\"alertname\":\"X\",\"instance\":7}}]}",
  };
  for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
    write_text(body_path, malformed[i]);
    assert_int_equal(coll_req(&c, "am", "POST", "/api/v1/alertmanager",
                              body_path, out), 400);
    assert_non_null(tg_test_json(out, "error"));
  }
  char *big = malloc(9000);
  assert_non_null(big);
  snprintf(big, 9000, "{\"version\":\"4\",\"groupKey\":\"k\",\"status\":"
           "\"firing\",\"receiver\":\"r\",\"alerts\":[{\"status\":\"firing\","
           "\"labels\":{\"alertname\":\"Big\",\"instance\":\"%s\"},"
           "\"annotations\":{\"pad\":\"", h[0].spec);
  size_t n = strlen(big);
  memset(big + n, 'x', 9000 - n - 8);
  snprintf(big + 9000 - 8, 8, "\"}}]}");
  write_text(body_path, big);
  free(big);
  assert_int_equal(coll_req(&c, "am", "POST", "/api/v1/alertmanager",
                            body_path, out), 413);
  snprintf(alerts, sizeof(alerts),
           "{\"version\":\"4\",\"groupKey\":\"k2\",\"status\":\"firing\","
           "\"receiver\":\"r\",\"alerts\":[{\"status\":\"firing\",\"labels\":"
           "{\"alertname\":\"Viewer\",\"instance\":\"%s\"}}]}", h[0].spec);
  write_text(body_path, alerts);
  assert_int_equal(coll_req(&c, "viewer", "POST", "/api/v1/alertmanager",
                            body_path, out), 403);
  assert_int_equal(coll_metric(&c, AM_REFUSED("400")), 3);
  assert_int_equal(coll_metric(&c, AM_REFUSED("413")), 1);
  assert_int_equal(coll_metric(&c, AM_ALERTS("snapshot")), 3);
  assert_int_equal(snapshots_listed(&c), 3);

  /* The same payload as a record identity: answered per alert. */
  assert_int_equal(coll_req(&c, "am", "POST", "/api/v1/alertmanager",
                            body_path, out), 200);
  assert_json(out, "receiver", "\"r\"");
  assert_json(out, "alerts.0.alertname", "\"Viewer\"");
  assert_json(out, "alerts.0.result", "\"snapshot\"");
  snprintf(want, sizeof(want), "\"%s\"", h[0].spec);
  char want_list[sizeof(want) + 2];
  snprintf(want_list, sizeof(want_list), "[%s]", want);
  assert_string_equal(tg_test_json(out, "alerts.0.hosts"), want_list);
  char snap[32];
  snprintf(snap, sizeof(snap), "%s", tg_test_json(out, "alerts.0.id"));
  fleet_ack_flush(&h[0].p);
  assert_int_equal(coll_req(&c, "am", "POST", "/api/v1/alertmanager",
                            body_path, out), 200);
  assert_json(out, "alerts.0.result", "\"repeat\"");
  assert_json(out, "alerts.0.id", snap);
  stored_snapshot(&c, "Viewer", out);
  assert_int_equal(snapshots_listed(&c), 4);

  /* Alerts that name nothing: each answered with why, none snapshotted. */
  snprintf(alerts, sizeof(alerts),
           "{\"version\":\"4\",\"groupKey\":\"k3\",\"status\":\"firing\","
           "\"receiver\":\"r\",\"alerts\":["
           "{\"status\":\"firing\",\"labels\":{\"alertname\":\"Nowhere\","
           "\"instance\":\"nowhere.example:9100\"}},"
           "{\"status\":\"firing\",\"labels\":{\"alertname\":\"NoGroup\","
           "\"tracegate_group\":\"nosuch\"}},"
           "{\"status\":\"firing\",\"labels\":{\"alertname\":\"Bare\"}},"
           "{\"status\":\"firing\",\"labels\":{\"instance\":\"%s\"}},"
           "{\"status\":\"resolved\",\"labels\":{\"alertname\":\"Done\","
           "\"instance\":\"%s\"}}]}", h[0].spec, h[0].spec);
  write_text(body_path, alerts);
  assert_int_equal(coll_req(&c, "am", "POST", "/api/v1/alertmanager",
                            body_path, out), 200);
  static const char *const why[] = {"\"no_host\"", "\"no_group\"",
                                    "\"no_label\"", "\"no_alertname\"",
                                    "\"resolved\""};
  for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++) {
    char key[32];
    snprintf(key, sizeof(key), "alerts.%zu.result", i);
    assert_json(out, key, why[i]);
  }
  assert_json(out, "alerts.3.alertname", "null");
  assert_int_equal(coll_metric(&c, AM_ALERTS("no_host")), 1);
  assert_int_equal(snapshots_listed(&c), 4);

  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* Posts a payload of one firing alert |name| naming |instance|, in group
 * |group_key|, to a plain-HTTP collector's webhook; the answer in |out|.
 * Returns the status. */
static int post_alert(const collector_t *c, const char *group_key,
                      const char *name, const char *instance,
                      const char *out) {
  char body[1024], path[256], url[128];
  snprintf(body, sizeof(body),
           "{\"version\":\"4\",\"groupKey\":\"%s\",\"status\":\"firing\","
           "\"receiver\":\"r\",\"alerts\":[{\"status\":\"firing\",\"labels\":"
           "{\"alertname\":\"%s\",\"instance\":\"%s\"}}]}",
           group_key, name, instance);
  snprintf(path, sizeof(path), "%s", fleet_in_dir("storm-body.json"));
  write_text(path, body);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/v1/alertmanager", c->port);
  return request(url, NULL, "POST", path, out);
}

/* An alert storm while the snapshots wait on the producers' flushes: four
 * alerts naming host A begin four snapshots (COLL_RUNNING_MAX); the fifth,
 * naming host B, is queued with B's name, and a sixth naming B folds into
 * it: the queued snapshot holds B alone. Once all ran, the webhook's
 * budget (5) refuses the next alert, and an operator's trigger is still
 * taken from a budget of its own. */
static void an_alert_storm_queues_and_spends_its_own_budget(void **state) {
  (void)state;
  fleet_host_t h[2];
  start_hosts(h, 2);
  write_config(h, 2, "alertmanager_snapshots_per_minute = 5\n"
                     "clone_timeout = 90s\n");
  /* The snapshots end when the test answers their flushes, not when the
   * service gives up on them, however slow the storm. */
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "a");
  assert_non_null(f);
  fputs("flush_timeout_ms: 60000\n", f);
  assert_int_equal(fclose(f), 0);
  collector_t c;
  collector_start(&c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 2, "tracing");
  char out[256], key[16], want[128];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("storm.json"));
  uint64_t flush[4];
  for (int k = 0; k < 4; k++) {
    snprintf(key, sizeof(key), "g%d", k);
    assert_int_equal(post_alert(&c, key, "Storm", h[0].spec, out), 200);
    assert_json(out, "alerts.0.result", "\"snapshot\"");
    flush[k] = raw_producer_wait_flush(&h[0].p, h[0].p.last_flush_id, FLEET_WAIT_MS);
    assert_true(flush[k] > 0);
  }
  assert_int_equal(post_alert(&c, "g4", "Queued", h[1].spec, out), 200);
  assert_json(out, "alerts.0.result", "\"queued\"");
  snprintf(want, sizeof(want), "[\"%s\"]", h[1].spec);
  assert_string_equal(tg_test_json(out, "alerts.0.hosts"), want);
  assert_int_equal(post_alert(&c, "g5", "Folded", h[1].spec, out), 200);
  assert_json(out, "alerts.0.result", "\"queued\"");
  for (int k = 0; k < 4; k++)
    assert_int_equal(raw_producer_commit(&h[0].p, NULL, NULL, 0, flush[k]), 0);
  fleet_ack_flush(&h[1].p); /* the queued one's, of B alone */
  char metrics[256];
  snprintf(metrics, sizeof(metrics), "%s", fleet_in_dir("storm-metrics.txt"));
  wait_metric(&c, "tracegate_collector_snapshots_total{outcome=\"complete\"} 5\n",
              metrics);
  /* The queued snapshot took the host its alerts named, once, alone. */
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots?trigger=Queued", out), 200);
  assert_json(out, "snapshots.0.hosts", "1");
  assert_json(out, "snapshots.0.state", "\"complete\"");
  const char *qid = tg_test_json(out, "snapshots.0.id");
  assert_non_null(qid);
  char path[96];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%.*s", (int)strlen(qid) - 2,
           qid + 1);
  assert_int_equal(http(&c, "GET", path, out), 200);
  snprintf(want, sizeof(want), "\"%s\"", h[1].spec);
  assert_json(out, "hosts.0.host", want);
  assert_null(tg_test_json(out, "hosts.1"));
  /* The webhook's budget is spent (4 begun, 1 queued): refused, said so. */
  assert_int_equal(post_alert(&c, "g6", "Refused", h[0].spec, out), 200);
  assert_json(out, "alerts.0.result", "\"refused\"");
  assert_json(out, "alerts.0.budget", "\"alertmanager\"");
  /* The operators' budget is untouched. */
  snapshot(&c, h, 2, fleet_in_dir("storm-op.json"));
  wait_metric(&c, "tracegate_collector_triggers_capped_total{budget=\"alertmanager\"} 1\n",
              metrics);
  wait_metric(&c, "tracegate_collector_triggers_capped_total{budget=\"operator\"} 0\n",
              metrics);
  wait_metric(&c, "tracegate_collector_alertmanager_alerts_total{result=\"queued\"} 2\n",
              metrics);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* The JSON string at |key| of the answer in |path|, unquoted, into |out|
 * (|cap|); fails the test when it is not a plain string. */
static void json_string_at(const char *path, const char *key, char *out,
                           size_t cap) {
  const char *v = tg_test_json(path, key);
  assert_non_null(v);
  size_t n = strlen(v);
  assert_true(n >= 2 && v[0] == '"' && v[n - 1] == '"' && n - 2 < cap);
  assert_null(memchr(v + 1, '\\', n - 2));
  memcpy(out, v + 1, n - 2);
  out[n - 2] = 0;
}

/* Alerts name hosts by what the operator wrote. Both hosts report the
 * machine's hostname: an alert naming it ("<hostname>:9100") snapshots
 * neither (no_host), where it once snapshotted both; an alert naming a
 * host as the inventory spells it snapshots that host alone. */
static void a_host_is_named_by_the_inventory_not_by_itself(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, NULL);
  char out[256], self[256], instance[300], want[128];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("self.json"));
  assert_int_equal(http(&c, "GET", "/api/v1/hosts", out), 200);
  json_string_at(out, "hosts.0.hostname", self, sizeof(self));
  assert_true(self[0] != 0);
  assert_string_not_equal(self, "127.0.0.1"); /* the inventory's host part */
  snprintf(instance, sizeof(instance), "%s:9100", self);
  assert_int_equal(post_alert(&c, "self", "SelfNamed", instance, out), 200);
  assert_json(out, "alerts.0.result", "\"no_host\"");
  assert_null(tg_test_json(out, "alerts.0.hosts"));
  assert_int_equal(post_alert(&c, "inventory", "InventoryNamed", h[0].spec, out),
                   200);
  assert_json(out, "alerts.0.result", "\"snapshot\"");
  snprintf(want, sizeof(want), "[\"%s\"]", h[0].spec);
  assert_string_equal(tg_test_json(out, "alerts.0.hosts"), want);
  fleet_ack_flush(&h[0].p);
  char metrics[256];
  snprintf(metrics, sizeof(metrics), "%s", fleet_in_dir("self-metrics.txt"));
  wait_metric(&c, "tracegate_collector_snapshots_total{outcome=\"complete\"} 1\n",
              metrics);
  wait_metric(&c, "tracegate_collector_alertmanager_alerts_total{result=\"no_host\"} 1\n",
              metrics);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* An answer's row lists at most TG_AM_ANSWER_HOSTS_MAX hosts of those its
 * alert named, and counts the others: an alert naming a mapping of 40
 * hosts (none reachable: the row is written whatever the snapshot's
 * fate) lists 32 and counts 8. */
static void an_answer_lists_a_bounded_number_of_hosts(void **state) {
  (void)state;
  enum { N = TG_AM_ANSWER_HOSTS_MAX + 8 };
  static fleet_host_t h[N];
  char extra[1024] = "alertmanager_host = many";
  for (size_t i = 0; i < N; i++) {
    /* Loopback ports below 64 nobody listens on here: refused at once. */
    snprintf(h[i].spec, sizeof(h[i].spec), "127.0.0.1:%zu", i + 2);
    snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), " %s",
             h[i].spec);
  }
  snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "\n");
  write_config(h, N, extra);
  collector_t c;
  collector_start(&c);
  char out[256], key[32];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("many.json"));
  assert_int_equal(post_alert(&c, "many", "Many", "many", out), 200);
  assert_json(out, "alerts.0.hosts_more", "8");
  snprintf(key, sizeof(key), "alerts.0.hosts.%d", TG_AM_ANSWER_HOSTS_MAX - 1);
  assert_non_null(tg_test_json(out, key));
  snprintf(key, sizeof(key), "alerts.0.hosts.%d", TG_AM_ANSWER_HOSTS_MAX);
  assert_null(tg_test_json(out, key));
  collector_stop(&c);
}

/* The collector's resident memory, and its peak, may grow by this much
 * over 1000 payloads of the memory case. What a payload takes is about
 * 5 MiB (its tree, its answer) and nothing of it is kept but repeat-window
 * entries; the rest of the margin is the allocator's (glibc's arenas,
 * ASan's quarantine, size classes and shadow) and the rings' own traffic:
 * a wide margin (the ASan build grew by 24 MiB), far below the 220 MiB
 * one payload once took. */
#define AM_RSS_GROWTH_MAX (64u << 20)
#define AM_PAYLOADS 1000

/* The |field| ("VmRSS", "VmHWM") of /proc/|pid|/status, in bytes. */
static uint64_t status_bytes(pid_t pid, const char *field) {
  char path[64], line[256], format[32];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  snprintf(format, sizeof(format), "%s: %%llu kB", field);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  unsigned long long kb = 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, format, &kb) == 1) break;
  fclose(f);
  assert_true(kb > 0);
  return (uint64_t)kb * 1024;
}

/* The memory case end to end, on the default plain-HTTP loopback
 * listener: a payload whose tree would pass its bound refused (413); then
 * AM_PAYLOADS payloads of 256 KiB (alertmanager_max_bytes'
 * default), each a 228 KB groupKey and 1000 resolved alerts, all answered
 * 200, every alert counted, and the collector's VmRSS (what it kept) and
 * VmHWM (its peak while it read them) grown by at most AM_RSS_GROWTH_MAX. */
static void webhook_payloads_leave_memory_bounded(void **state) {
  (void)state;
  static const char script[] =
      "import http.client, sys\n"
      "port, body, n, out = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), "
      "sys.argv[4]\n"
      "data = open(body, 'rb').read()\n"
      "ok, last, status = 0, b'', 0\n"
      "for i in range(n):\n"
      "    c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)\n"
      "    c.request('POST', '/api/v1/alertmanager', data,\n"
      "              {'Content-Type': 'application/json'})\n"
      "    r = c.getresponse()\n"
      "    status, last = r.status, r.read()\n"
      "    c.close()\n"
      "    if status != 200:\n"
      "        break\n"
      "    ok += 1\n"
      "open(out, 'wb').write(last)\n"
      "open(out + '.status', 'w').write('%d %d' % (ok, status))\n";
  fleet_host_t h[1];
  collector_t c;
  start_hosts(h, 1);
  write_config(h, 1, NULL);
  collector_start(&c);
  assert_int_equal(raw_producer_wait_started(&h[0].p, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 1, "tracing");
  char body[256], out[256], port[16], count[16], status[300], text[64] = "";
  snprintf(body, sizeof(body), "%s", fleet_in_dir("long-group.json"));
  snprintf(out, sizeof(out), "%s", fleet_in_dir("long-group-answer.json"));
  char *payload = long_group_payload(256u << 10);
  write_text(body, payload);
  free(payload);
  snprintf(port, sizeof(port), "%d", c.port);
  snprintf(count, sizeof(count), "%d", AM_PAYLOADS);
  /* A payload whose tree would pass its bound: 413, counted with the
   * payloads over alertmanager_max_bytes. */
  char bomb_path[256], url[128];
  snprintf(bomb_path, sizeof(bomb_path), "%s", fleet_in_dir("tree-bomb.json"));
  char *bomb = malloc((256u << 10) + 1);
  assert_non_null(bomb);
  size_t k = (size_t)sprintf(bomb, "{\"receiver\":\"r\",\"status\":\"firing\","
                                   "\"version\":\"4\",\"groupKey\":\"k\","
                                   "\"alerts\":[],\"pad\":[{}");
  while (k + 5 <= 256u << 10) k += (size_t)sprintf(bomb + k, ",{}");
  sprintf(bomb + k, "]}");
  write_text(bomb_path, bomb);
  free(bomb);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/v1/alertmanager", c.port);
  assert_int_equal(request(url, NULL, "POST", bomb_path, out), 413);
  assert_non_null(tg_test_json(out, "error"));
  uint64_t before = status_bytes(c.pid, "VmRSS");
  uint64_t peak_before = status_bytes(c.pid, "VmHWM");
  const char *argv[] = {"/usr/bin/python3", "-c", script, port, body, count, out, NULL};
  tg_test_spawn_t sp = TG_TEST_SPAWN_INIT;
  sp.path = "/usr/bin/python3";
  sp.argv = argv;
  sp.stdin_fd = TG_TEST_FD_DEVNULL;
  pid_t pid = tg_test_spawn(&sp);
  assert_true(pid > 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(pid, 280000)), 0);
  uint64_t after = status_bytes(c.pid, "VmRSS");
  uint64_t peak_after = status_bytes(c.pid, "VmHWM");
  snprintf(status, sizeof(status), "%s.status", out);
  FILE *f = fopen(status, "r");
  assert_non_null(f);
  assert_non_null(fgets(text, sizeof(text), f));
  fclose(f);
  snprintf(status, sizeof(status), "%d 200", AM_PAYLOADS);
  assert_string_equal(text, status);
  assert_json(out, "alerts.999.result", "\"resolved\"");
  char metrics[256];
  snprintf(metrics, sizeof(metrics), "%s", fleet_in_dir("long-group-metrics.txt"));
  snprintf(status, sizeof(status),
           "tracegate_collector_alertmanager_alerts_total{result=\"resolved\"} "
           "%d\n", AM_PAYLOADS * TG_AM_ALERTS_MAX);
  wait_metric(&c, status, metrics);
  wait_metric(&c, "tracegate_collector_alertmanager_payloads_refused_total"
                  "{status=\"413\"} 1\n", metrics);
  print_message("collector VmRSS %llu KiB before, %llu KiB after %d "
                "payloads; VmHWM %llu KiB before, %llu KiB after\n",
                (unsigned long long)(before >> 10),
                (unsigned long long)(after >> 10), AM_PAYLOADS,
                (unsigned long long)(peak_before >> 10),
                (unsigned long long)(peak_after >> 10));
  assert_true(after <= before + AM_RSS_GROWTH_MAX);
  assert_true(peak_after <= peak_before + AM_RSS_GROWTH_MAX);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
}

static int group_setup(void **state) {
  (void)state;
  /* The collector's freed memory is not held back in ASan's quarantine
   * (256 MiB by default), so that its resident size is its live memory
   * (webhook_payloads_leave_memory_bounded). */
  const char *asan = getenv("ASAN_OPTIONS");
  char opts[512];
  snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=16", asan ? asan : "",
           asan && asan[0] ? ":" : "");
  setenv("ASAN_OPTIONS", opts, 1);
  return fleet_dir_create("am");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(am_parse_reads_a_webhook_payload),
      cmocka_unit_test(am_parse_refuses_malformed_payloads),
      cmocka_unit_test(am_parse_bounds_alerts_and_labels),
      cmocka_unit_test(am_reason_is_cut_to_fit),
      cmocka_unit_test(am_keys_are_digests_of_group_and_labels),
      cmocka_unit_test(am_parse_bounds_its_memory),
      cmocka_unit_test(am_hosts_match_by_mapping_spec_and_name),
      cmocka_unit_test(am_repeat_window_holds_for_its_time),
      cmocka_unit_test(am_repeat_window_is_bounded),
      cmocka_unit_test(am_decide_in_its_order),
      cmocka_unit_test(am_budget_is_its_own),
      cmocka_unit_test(am_config_keys_read_and_checked),
      FLEET_TEST(alertmanager_snapshots_what_its_alerts_name),
      FLEET_TEST(an_alert_storm_queues_and_spends_its_own_budget),
      FLEET_TEST(a_host_is_named_by_the_inventory_not_by_itself),
      FLEET_TEST(an_answer_lists_a_bounded_number_of_hosts),
      FLEET_TEST(webhook_payloads_leave_memory_bounded),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
