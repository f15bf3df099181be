/* The Alertmanager webhook's pure half (alertmanager.h): the payload's
 * parser (jansson), host matching, the repeat window and the decision.
 * Pure: no I/O, no logging, nothing kept between calls but what a
 * tg_am_seen_t holds. */
#include "collector/daemon/alertmanager.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog/catalog.h"
#include "common/json.h"

/* --- the payload ----------------------------------------------------------- */

/* |v|, when present, is an object of at most |max| strings. */
static bool strings_ok(const json_t *v, size_t max) {
  if (!v) return true;
  if (!json_is_object(v) || json_object_size(v) > max) return false;
  const char *k;
  json_t *s;
  json_object_foreach((json_t *)v, k, s) {
    if (!json_is_string(s)) return false;
  }
  return true;
}

/* |v|, when present, is a string. */
static bool string_ok(const json_t *v) { return !v || json_is_string(v); }

static const char *label(const json_t *labels, const char *name) {
  return json_string_value(json_object_get(labels, name));
}

/* "firing" (1), "resolved" (0), else -1. */
static int status_of(const json_t *v) {
  const char *s = json_string_value(v);
  if (!s) return -1;
  if (!strcmp(s, "firing")) return 1;
  if (!strcmp(s, "resolved")) return 0;
  return -1;
}

/* The reason (alertmanager.h): the first form that fits. */
static char *reason_of(const json_t *labels, const json_t *annotations) {
  static const size_t flags = JSON_COMPACT | JSON_SORT_KEYS;
  json_t *empty = json_object();
  json_t *only_name = json_object();
  const char *name = label(labels, "alertname");
  json_t *forms[4] = {
      json_pack("{s:O,s:O}", "labels", labels, "annotations",
                annotations ? annotations : empty),
      json_pack("{s:O,s:b}", "labels", labels, "cut", 1),
      NULL,
      json_pack("{s:b}", "cut", 1),
  };
  if (only_name && name &&
      json_object_set_new(only_name, "alertname", json_string(name)) == 0)
    forms[2] = json_pack("{s:O,s:b}", "labels", only_name, "cut", 1);
  char *out = NULL;
  for (size_t i = 0; i < 4 && !out; i++) {
    if (!forms[i]) continue;
    char *text = json_dumps(forms[i], flags);
    if (text && strlen(text) <= TG_COLL_REASON_MAX) out = text;
    else free(text);
  }
  for (size_t i = 0; i < 4; i++) json_decref(forms[i]);
  json_decref(empty);
  json_decref(only_name);
  return out;
}

/* The digests of one parse: the groupKey's once, then each alert's key
 * from it, so that a long groupKey is read once per payload, not once per
 * alert. */
typedef struct keyer {
  EVP_MD_CTX *md;
  uint8_t group[TG_AM_KEY_LEN];
} keyer_t;

static int digest_part(const char *buffer, size_t size, void *md) {
  return EVP_DigestUpdate(md, buffer, size) == 1 ? 0 : -1;
}

/* SHA-256 of |group_key| into k->group. */
static bool keyer_start(keyer_t *k, const char *group_key) {
  k->md = EVP_MD_CTX_new();
  unsigned int n = 0;
  return k->md && EVP_DigestInit_ex(k->md, EVP_sha256(), NULL) == 1 &&
         EVP_DigestUpdate(k->md, group_key, strlen(group_key)) == 1 &&
         EVP_DigestFinal_ex(k->md, k->group, &n) == 1 && n == TG_AM_KEY_LEN;
}

/* SHA-256(SHA-256(groupKey) || labels as compact JSON, sorted keys): the
 * group's digest has a fixed length and JSON text delimits itself, so
 * two different (groupKey, labels) give two different inputs. The labels
 * are written into the digest as they are serialised, not copied. */
static bool key_of(keyer_t *k, const json_t *labels,
                   uint8_t key[TG_AM_KEY_LEN]) {
  unsigned int n = 0;
  return EVP_DigestInit_ex(k->md, EVP_sha256(), NULL) == 1 &&
         EVP_DigestUpdate(k->md, k->group, sizeof(k->group)) == 1 &&
         json_dump_callback(labels, digest_part, k->md,
                            JSON_COMPACT | JSON_SORT_KEYS) == 0 &&
         EVP_DigestFinal_ex(k->md, key, &n) == 1 && n == TG_AM_KEY_LEN;
}

/* The 413's text names the bound. */
_Static_assert(TG_AM_TREE_PER_BYTE == 16 && TG_AM_TREE_BASE == 1u << 20,
               "tg_am_parse's -E2BIG text names the tree's bound");

static int bad(const char **why, const char *text) {
  *why = text;
  return -EINVAL;
}

/* One alert of the array, checked, into *a. */
static int parse_alert(const json_t *v, keyer_t *k, const char *host_label,
                       const char *group_label, tg_am_alert_t *a,
                       const char **why) {
  if (!json_is_object(v)) return bad(why, "alerts: an alert is not an object");
  int st = status_of(json_object_get(v, "status"));
  if (st < 0) return bad(why, "alert status: not \"firing\" or \"resolved\"");
  const json_t *labels = json_object_get(v, "labels");
  const json_t *annotations = json_object_get(v, "annotations");
  if (!labels || !strings_ok(labels, TG_AM_LABELS_MAX))
    return bad(why, "alert labels: not an object of at most 256 strings");
  if (!strings_ok(annotations, TG_AM_LABELS_MAX))
    return bad(why, "alert annotations: not an object of at most 256 strings");
  static const char *const strings[] = {"startsAt", "endsAt", "generatorURL",
                                        "fingerprint"};
  for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
    if (!string_ok(json_object_get(v, strings[i])))
      return bad(why, "alert startsAt, endsAt, generatorURL or fingerprint: "
                      "not a string");
  a->firing = st == 1;
  a->alertname = label(labels, "alertname");
  a->host = label(labels, host_label);
  a->group = label(labels, group_label);
  /* Only a firing alert may snapshot, so only its reason is written. */
  if (!key_of(k, labels, a->key) ||
      (a->firing && !(a->reason = reason_of(labels, annotations)))) {
    *why = "out of memory";
    return -ENOMEM;
  }
  return 0;
}

int tg_am_parse(const uint8_t *body_untrusted, size_t len,
                const char *host_label, const char *group_label,
                tg_am_payload_t *out, const char **why) {
  memset(out, 0, sizeof(*out));
  *why = NULL;
  json_error_t err;
  int rv;
  /* Duplicate keys refused: a label given twice would be read one way
   * here and maybe another in Alertmanager. */
  size_t max_tree = len > (SIZE_MAX - TG_AM_TREE_BASE) / TG_AM_TREE_PER_BYTE
                        ? SIZE_MAX
                        : len * TG_AM_TREE_PER_BYTE + TG_AM_TREE_BASE;
  json_t *doc = tg_json_load((const char *)body_untrusted, len,
                             JSON_REJECT_DUPLICATES, max_tree, &err, &rv);
  if (!doc) {
    if (rv == -E2BIG)
      *why = "its JSON tree would take more than 16 times its size "
             "plus 1 MiB";
    else if (rv == -ENOMEM)
      *why = "out of memory";
    else
      *why = "not JSON (or a key twice, or not UTF-8)";
    return rv;
  }
  out->doc = doc;
  keyer_t k = {0};
  rv = -EINVAL;
  if (!json_is_object(doc)) {
    *why = "not a JSON object";
    goto fail;
  }
  const char *version = json_string_value(json_object_get(doc, "version"));
  if (!version || strcmp(version, "4") != 0) {
    *why = "version: not \"4\" (Alertmanager's webhook_configs payload)";
    goto fail;
  }
  out->group_key = json_string_value(json_object_get(doc, "groupKey"));
  out->receiver = json_string_value(json_object_get(doc, "receiver"));
  int st = status_of(json_object_get(doc, "status"));
  if (!out->group_key || !out->receiver || st < 0) {
    *why = "groupKey, receiver or status: missing or not a string "
           "(status \"firing\" or \"resolved\")";
    goto fail;
  }
  out->firing = st == 1;
  if (!keyer_start(&k, out->group_key)) {
    *why = "out of memory";
    rv = -ENOMEM;
    goto fail;
  }
  if (!strings_ok(json_object_get(doc, "groupLabels"), TG_AM_LABELS_MAX) ||
      !strings_ok(json_object_get(doc, "commonLabels"), TG_AM_LABELS_MAX) ||
      !strings_ok(json_object_get(doc, "commonAnnotations"),
                  TG_AM_LABELS_MAX) ||
      !string_ok(json_object_get(doc, "externalURL"))) {
    *why = "groupLabels, commonLabels, commonAnnotations or externalURL: "
           "not an object of strings, or a string";
    goto fail;
  }
  const json_t *trunc = json_object_get(doc, "truncatedAlerts");
  if (trunc && (!json_is_integer(trunc) || json_integer_value(trunc) < 0)) {
    *why = "truncatedAlerts: not a count";
    goto fail;
  }
  const json_t *alerts = json_object_get(doc, "alerts");
  if (!json_is_array(alerts) || json_array_size(alerts) > TG_AM_ALERTS_MAX) {
    *why = "alerts: not an array of at most 1000";
    goto fail;
  }
  size_t n = json_array_size(alerts);
  out->alerts = calloc(n ? n : 1, sizeof(*out->alerts));
  if (!out->alerts) {
    *why = "out of memory";
    rv = -ENOMEM;
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    out->n_alerts = i + 1; /* freed with the payload if it fails */
    rv = parse_alert(json_array_get(alerts, i), &k, host_label, group_label,
                     &out->alerts[i], why);
    if (rv < 0) goto fail;
  }
  out->n_alerts = n;
  EVP_MD_CTX_free(k.md);
  return 0;
fail:
  EVP_MD_CTX_free(k.md);
  tg_am_payload_free(out);
  return rv;
}

void tg_am_payload_free(tg_am_payload_t *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_alerts; i++) free(p->alerts[i].reason);
  free(p->alerts);
  json_decref(p->doc);
  memset(p, 0, sizeof(*p));
}

/* --- hosts ------------------------------------------------------------------ */

/* The host part of a label's value: "db1" of "db1:9100", "::1" of
 * "[::1]:9100"; the whole value otherwise. Into |out| (|cap|); false when
 * it does not fit. */
static bool host_part(const char *value, char *out, size_t cap) {
  const char *start = value, *end = value + strlen(value);
  if (value[0] == '[') {
    const char *close = strchr(value, ']');
    if (close && (close[1] == 0 || close[1] == ':')) {
      start = value + 1;
      end = close;
    }
  } else {
    const char *colon = strchr(value, ':');
    if (colon && !strchr(colon + 1, ':')) end = colon;
  }
  size_t n = (size_t)(end - start);
  if (n >= cap) return false;
  memcpy(out, start, n);
  out[n] = 0;
  return true;
}

size_t tg_am_match(const tg_coll_config_t *cfg, const char *value,
                   const tg_am_inv_t *inv, size_t n, bool *hit) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) hit[i] = false;
  const tg_coll_am_host_t *m = tg_coll_config_am_host(cfg, value);
  if (m) { /* the operator's word is final: no guessing beside it */
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < m->n_hosts && !hit[i]; j++)
        if (!strcmp(inv[i].spec, m->hosts[j])) hit[i] = true, k++;
    return k;
  }
  for (size_t i = 0; i < n; i++)
    if (!strcmp(inv[i].spec, value)) hit[i] = true, k++;
  if (k) return k;
  char name[TG_COLL_CONFIG_HOST_MAX + 1];
  if (!host_part(value, name, sizeof(name)) || !name[0]) return 0;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(inv[i].host, name)) hit[i] = true, k++;
  return k;
}

/* --- the repeat window ------------------------------------------------------ */

typedef struct seen_entry {
  uint8_t key[TG_AM_KEY_LEN];
  int64_t at_ms;
  uint64_t id;
} seen_entry_t;

struct tg_am_seen {
  seen_entry_t e[TG_AM_SEEN_MAX];
  size_t n;
};

static seen_entry_t *find(const tg_am_seen_t *s,
                          const uint8_t key[TG_AM_KEY_LEN]) {
  for (size_t i = 0; i < s->n; i++)
    if (!memcmp(s->e[i].key, key, TG_AM_KEY_LEN))
      return (seen_entry_t *)&s->e[i];
  return NULL;
}

/* Whether |e| still holds at |now_ms| within |window_ms|. */
static bool recent(const seen_entry_t *e, int64_t now_ms, int64_t window_ms) {
  return now_ms >= e->at_ms && now_ms - e->at_ms < window_ms;
}

tg_am_seen_t *tg_am_seen_new(void) { return calloc(1, sizeof(tg_am_seen_t)); }

void tg_am_seen_free(tg_am_seen_t *s) { free(s); }

size_t tg_am_seen_count(const tg_am_seen_t *s) { return s->n; }

bool tg_am_seen_recent(const tg_am_seen_t *s, const uint8_t key[TG_AM_KEY_LEN],
                       int64_t now_ms, int64_t window_ms, uint64_t *id) {
  const seen_entry_t *e = find(s, key);
  if (!e || !recent(e, now_ms, window_ms)) return false;
  *id = e->id;
  return true;
}

void tg_am_seen_note(tg_am_seen_t *s, const uint8_t key[TG_AM_KEY_LEN],
                     int64_t now_ms, int64_t window_ms, uint64_t id) {
  seen_entry_t *e = find(s, key);
  if (e) {
    e->at_ms = now_ms;
    e->id = id;
    return;
  }
  for (size_t i = 0; i < s->n;) /* what no longer holds goes */
    if (!recent(&s->e[i], now_ms, window_ms)) s->e[i] = s->e[--s->n];
    else i++;
  if (s->n == TG_AM_SEEN_MAX) { /* then the oldest */
    size_t oldest = 0;
    for (size_t i = 1; i < s->n; i++)
      if (s->e[i].at_ms < s->e[oldest].at_ms) oldest = i;
    s->e[oldest] = s->e[--s->n];
  }
  seen_entry_t *n = &s->e[s->n++];
  memcpy(n->key, key, TG_AM_KEY_LEN);
  n->at_ms = now_ms;
  n->id = id;
}

/* --- the decision ----------------------------------------------------------- */

tg_am_verdict_t tg_am_decide(const tg_am_alert_t *a,
                             const tg_coll_config_t *cfg,
                             const tg_am_seen_t *seen, int64_t now_ms,
                             const tg_am_inv_t *inv, size_t n, bool *hit,
                             const char **group, uint64_t *repeat_id) {
  *group = NULL;
  *repeat_id = 0;
  if (!a->firing) return TG_AM_RESOLVED;
  if (!a->alertname || !a->alertname[0] ||
      strlen(a->alertname) > TG_COLL_TRIGGER_MAX)
    return TG_AM_NO_ALERTNAME;
  if (seen && cfg->am_repeat_window_ms > 0 &&
      tg_am_seen_recent(seen, a->key, now_ms, cfg->am_repeat_window_ms,
                        repeat_id))
    return TG_AM_REPEAT;
  if (a->group) {
    if (!strcmp(a->group, TG_COLL_CONFIG_GROUP_ALL)) {
      *group = TG_COLL_CONFIG_GROUP_ALL;
      return TG_AM_GROUP;
    }
    if (!tg_coll_config_group(cfg, a->group)) return TG_AM_NO_GROUP;
    *group = a->group;
    return TG_AM_GROUP;
  }
  if (!a->host) return TG_AM_NO_LABEL;
  return tg_am_match(cfg, a->host, inv, n, hit) ? TG_AM_HOSTS : TG_AM_NO_HOST;
}

tg_am_result_t tg_am_result_of(tg_am_verdict_t v) {
  switch (v) {
    case TG_AM_RESOLVED: return TG_AM_R_RESOLVED;
    case TG_AM_NO_ALERTNAME: return TG_AM_R_NO_ALERTNAME;
    case TG_AM_REPEAT: return TG_AM_R_REPEAT;
    case TG_AM_NO_GROUP: return TG_AM_R_NO_GROUP;
    case TG_AM_NO_HOST: return TG_AM_R_NO_HOST;
    case TG_AM_NO_LABEL: return TG_AM_R_NO_LABEL;
    case TG_AM_GROUP:
    case TG_AM_HOSTS: break;
  }
  return TG_AM_R_ERROR;
}

const char *tg_am_result_name(tg_am_result_t r) {
  static const char *const names[TG_AM_R_COUNT] = {
      [TG_AM_R_SNAPSHOT] = "snapshot",   [TG_AM_R_QUEUED] = "queued",
      [TG_AM_R_REFUSED] = "refused",     [TG_AM_R_ERROR] = "error",
      [TG_AM_R_RESOLVED] = "resolved",   [TG_AM_R_NO_ALERTNAME] = "no_alertname",
      [TG_AM_R_REPEAT] = "repeat",       [TG_AM_R_NO_GROUP] = "no_group",
      [TG_AM_R_NO_HOST] = "no_host",     [TG_AM_R_NO_LABEL] = "no_label",
  };
  return (unsigned)r < TG_AM_R_COUNT ? names[r] : "?";
}
