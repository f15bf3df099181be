/* The Alertmanager webhook's pure half (alertmanager.h): the payload's
 * parser (jansson), host matching, the repeat window and the decision.
 * Pure: no I/O, no logging, nothing kept between calls but what a
 * tg_am_seen_t holds. */
#include "collector/daemon/alertmanager.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog.h"

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

/* groupKey "\n" labels, sorted. */
static char *key_of(const char *group_key, const json_t *labels) {
  char *text = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS);
  if (!text) return NULL;
  size_t g = strlen(group_key), t = strlen(text);
  char *key = malloc(g + 1 + t + 1);
  if (key) {
    memcpy(key, group_key, g);
    key[g] = '\n';
    memcpy(key + g + 1, text, t + 1);
  }
  free(text);
  return key;
}

static int bad(const char **why, const char *text) {
  *why = text;
  return -EINVAL;
}

/* One alert of the array, checked, into *a. */
static int parse_alert(const json_t *v, const char *group_key,
                       const char *host_label, const char *group_label,
                       tg_am_alert_t *a, const char **why) {
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
  a->key = key_of(group_key, labels);
  a->reason = reason_of(labels, annotations);
  if (!a->key || !a->reason) {
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
  /* Duplicate keys refused: a label given twice would be read one way
   * here and maybe another in Alertmanager. */
  json_t *doc = json_loadb((const char *)body_untrusted, len,
                           JSON_REJECT_DUPLICATES, &err);
  if (!doc) return bad(why, "not JSON (or a key twice, or not UTF-8)");
  out->doc = doc;
  int rv = -EINVAL;
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
    rv = parse_alert(json_array_get(alerts, i), out->group_key, host_label,
                     group_label, &out->alerts[i], why);
    if (rv < 0) goto fail;
  }
  out->n_alerts = n;
  return 0;
fail:
  tg_am_payload_free(out);
  return rv;
}

void tg_am_payload_free(tg_am_payload_t *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_alerts; i++) {
    free(p->alerts[i].key);
    free(p->alerts[i].reason);
  }
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
    if (!strcmp(inv[i].host, name) ||
        (inv[i].hostname[0] && !strcmp(inv[i].hostname, name)))
      hit[i] = true, k++;
  return k;
}

/* --- the repeat window ------------------------------------------------------ */

typedef struct seen_entry {
  char *key;
  size_t len;
  uint64_t hash;
  int64_t at_ms;
  uint64_t id;
} seen_entry_t;

struct tg_am_seen {
  seen_entry_t e[TG_AM_SEEN_MAX];
  size_t n;
  size_t bytes;
};

/* FNV-1a 64: a first look before the exact comparison. */
static uint64_t hash_of(const char *s, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

static seen_entry_t *find(const tg_am_seen_t *s, const char *key) {
  size_t len = strlen(key);
  uint64_t h = hash_of(key, len);
  for (size_t i = 0; i < s->n; i++) {
    const seen_entry_t *e = &s->e[i];
    if (e->hash == h && e->len == len && !memcmp(e->key, key, len))
      return (seen_entry_t *)e;
  }
  return NULL;
}

static void drop(tg_am_seen_t *s, size_t i) {
  s->bytes -= s->e[i].len;
  free(s->e[i].key);
  s->e[i] = s->e[--s->n];
}

tg_am_seen_t *tg_am_seen_new(void) { return calloc(1, sizeof(tg_am_seen_t)); }

void tg_am_seen_free(tg_am_seen_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) free(s->e[i].key);
  free(s);
}

size_t tg_am_seen_count(const tg_am_seen_t *s) { return s->n; }

bool tg_am_seen_recent(const tg_am_seen_t *s, const char *key, int64_t now_ms,
                       int64_t window_ms, uint64_t *id) {
  const seen_entry_t *e = find(s, key);
  if (!e || now_ms < e->at_ms || now_ms - e->at_ms >= window_ms) return false;
  *id = e->id;
  return true;
}

int tg_am_seen_note(tg_am_seen_t *s, const char *key, int64_t now_ms,
                    uint64_t id) {
  size_t len = strlen(key);
  if (len > TG_AM_SEEN_BYTES) return -E2BIG;
  seen_entry_t *e = find(s, key);
  if (e) {
    e->at_ms = now_ms;
    e->id = id;
    return 0;
  }
  char *copy = malloc(len + 1);
  if (!copy) return -ENOMEM;
  memcpy(copy, key, len + 1);
  /* Room: the oldest go first. */
  while (s->n && (s->n == TG_AM_SEEN_MAX || s->bytes + len > TG_AM_SEEN_BYTES)) {
    size_t oldest = 0;
    for (size_t i = 1; i < s->n; i++)
      if (s->e[i].at_ms < s->e[oldest].at_ms) oldest = i;
    drop(s, oldest);
  }
  s->e[s->n++] = (seen_entry_t){.key = copy,
                                .len = len,
                                .hash = hash_of(key, len),
                                .at_ms = now_ms,
                                .id = id};
  s->bytes += len;
  return 0;
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
