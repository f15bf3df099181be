// SPDX-License-Identifier: Apache-2.0
/* A snapshot's sidecar (snap_meta.h): its text from a row, and the
 * checked parse of one read back from a bucket. */
#include "collector/store/snap_meta.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog/catalog_check.h"
#include "collector/catalog/snapshot_id.h"
#include "common/json.h"

/* jansson's tree of a document takes several times its text. */
#define META_TREE_MAX (8u * TG_COLL_META_MAX)

void tg_coll_meta_object_name(uint64_t id, char out[64]) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(id, 0, name);
  snprintf(out, 64, "snapshots/%s", name);
}

static json_t *i64(int64_t v) { return json_integer((json_int_t)v); }

static json_t *host_json(const tg_coll_host_result_t *h) {
  json_t *o = json_object();
  o = tg_json_put(o, "host", tg_json_text(h->host));
  o = tg_json_put(o, "name", tg_json_text(h->name ? h->name : ""));
  o = tg_json_put(o, "outcome",
                  json_string(tg_coll_host_outcome_name(h->outcome)));
  o = tg_json_put(o, "error", tg_json_text(h->error ? h->error : ""));
  o = tg_json_put(o, "problems", tg_json_text(h->problems ? h->problems : ""));
  o = tg_json_put(o, "boost", tg_json_text(h->boost ? h->boost : ""));
  o = tg_json_put(o, "links", tg_json_text(h->links ? h->links : ""));
  o = tg_json_put(o, "bytes", tg_json_u64(h->bytes));
  o = tg_json_put(o, "packets", tg_json_u64(h->packets));
  o = tg_json_put(o, "loss", tg_json_u64(h->loss));
  o = tg_json_put(o, "window_first_ms", i64(h->window_first_ms));
  return tg_json_put(o, "window_last_ms", i64(h->window_last_ms));
}

int tg_coll_meta_format(const tg_coll_meta_in_t *in, char **out, size_t *len) {
  const tg_coll_finish_t *f = in->finish;
  tg_coll_insert_t ins = {.id = in->id,
                          .begin = in->begin,
                          .started_ms = in->started_ms,
                          .finish = f};
  tg_coll_state_t state;
  uint32_t n_failed;
  uint64_t loss;
  if (tg__coll_check_insert(&ins, &state, &n_failed, &loss) ||
      state == TG_COLL_FAILED ||
      (in->etag && strlen(in->etag) >= TG_COLL_META_ETAG_MAX))
    return -EINVAL;
  char idtext[TG_COLL_ID_STRLEN], object[64];
  tg_coll_id_format(in->id, idtext);
  tg_coll_meta_object_name(in->id, object);
  json_t *o = json_object();
  o = tg_json_put(o, "format", json_string(TG_COLL_META_FORMAT));
  o = tg_json_put(o, "version", json_integer(TG_COLL_META_VERSION));
  o = tg_json_put(o, "id", json_string(idtext));
  o = tg_json_put(o, "object", json_string(object));
  o = tg_json_put(o, "state", json_string(tg_coll_state_name(state)));
  o = tg_json_put(o, "pinned", json_boolean(in->pinned));
  o = tg_json_put(o, "started_ms", i64(in->started_ms));
  o = tg_json_put(o, "finished_ms", i64(f->finished_ms));
  o = tg_json_put(o, "trigger", tg_json_text(in->begin->trigger));
  o = tg_json_put(o, "reason",
                  tg_json_text(in->begin->reason ? in->begin->reason : ""));
  o = tg_json_put(o, "origin",
                  tg_json_text(in->begin->origin ? in->begin->origin : ""));
  o = tg_json_put(o, "bytes", tg_json_u64(f->bytes));
  o = tg_json_put(o, "crc32", json_integer(f->crc32));
  o = tg_json_put(o, "etag", tg_json_text(in->etag ? in->etag : ""));
  o = tg_json_put(o, "index", json_boolean(in->index));
  o = tg_json_put(o, "packets", tg_json_u64(f->packets));
  o = tg_json_put(o, "loss", tg_json_u64(loss));
  o = tg_json_put(o, "n_hosts_failed", json_integer(n_failed));
  json_t *hosts = json_array();
  for (size_t i = 0; i < f->n_hosts; i++)
    hosts = tg_json_push(hosts, host_json(&f->hosts[i]));
  o = tg_json_put(o, "hosts", hosts);
  if (!o) return -ENOMEM;
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!text) return -ENOMEM;
  size_t n = strlen(text);
  char *line = realloc(text, n + 2);
  if (!line) {
    free(text);
    return -ENOMEM;
  }
  line[n] = '\n';
  line[n + 1] = '\0';
  *out = line;
  *len = n + 1;
  return 0;
}

/* --- the parser ------------------------------------------------------- */

typedef struct parse {
  char *why;
  size_t cap;
} parse_t;

static int bad(parse_t *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->why, p->cap, fmt, ap);
  va_end(ap);
  return -EINVAL;
}

/* A string of |min|..|max| bytes (jansson refuses \u0000 in strings
 * without JSON_ALLOW_NUL, so the length is strlen's). */
static int get_text(parse_t *p, const json_t *o, const char *key, size_t min,
                    size_t max, const char **out) {
  const json_t *v = json_object_get(o, key);
  if (!json_is_string(v)) return bad(p, "%s: not a string", key);
  size_t n = json_string_length(v);
  if (n < min || n > max)
    return bad(p, "%s: %zu bytes, not %zu..%zu", key, n, min, max);
  *out = json_string_value(v);
  return 0;
}

/* As get_text, 0..|max| bytes, where a missing key reads as "": a field
 * sidecars written before it lack. */
static int get_opt_text(parse_t *p, const json_t *o, const char *key,
                        size_t max, const char **out) {
  if (!json_object_get(o, key)) {
    *out = "";
    return 0;
  }
  return get_text(p, o, key, 0, max, out);
}

static int get_u64(parse_t *p, const json_t *o, const char *key, uint64_t max,
                   uint64_t *out) {
  uint64_t v;
  if (tg_json_get_u64(json_object_get(o, key), &v) != 0 || v > max)
    return bad(p, "%s: not a count of 0..%llu", key, (unsigned long long)max);
  *out = v;
  return 0;
}

static int get_i64(parse_t *p, const json_t *o, const char *key,
                   int64_t *out) {
  const json_t *v = json_object_get(o, key);
  if (!json_is_integer(v)) return bad(p, "%s: not an integer", key);
  *out = (int64_t)json_integer_value(v);
  return 0;
}

static int get_bool(parse_t *p, const json_t *o, const char *key, bool *out) {
  const json_t *v = json_object_get(o, key);
  if (!json_is_boolean(v)) return bad(p, "%s: not true or false", key);
  *out = json_is_true(v);
  return 0;
}

static int parse_host(parse_t *p, const json_t *o, size_t i,
                      tg_coll_host_result_t *h) {
  if (!json_is_object(o)) return bad(p, "hosts[%zu]: not an object", i);
  const char *outcome = NULL;
  int err;
  if ((err = get_text(p, o, "host", 1, TG_COLL_HOST_MAX, &h->host)) ||
      (err = get_text(p, o, "name", 0, TG_COLL_HOST_MAX, &h->name)) ||
      (err = get_text(p, o, "outcome", 1, 16, &outcome)) ||
      (err = get_text(p, o, "error", 0, TG_COLL_ERROR_MAX, &h->error)) ||
      (err = get_text(p, o, "problems", 0, TG_COLL_PROBLEMS_MAX,
                      &h->problems)) ||
      (err = get_opt_text(p, o, "boost", TG_COLL_BOOST_MAX, &h->boost)) ||
      (err = get_opt_text(p, o, "links", TG_COLL_LINKS_MAX, &h->links)) ||
      (err = get_u64(p, o, "bytes", INT64_MAX, &h->bytes)) ||
      (err = get_u64(p, o, "packets", INT64_MAX, &h->packets)) ||
      (err = get_u64(p, o, "loss", INT64_MAX, &h->loss)) ||
      (err = get_i64(p, o, "window_first_ms", &h->window_first_ms)) ||
      (err = get_i64(p, o, "window_last_ms", &h->window_last_ms))) {
    char field[160];
    snprintf(field, sizeof field, "%s", p->why);
    snprintf(p->why, p->cap, "hosts[%zu].%.*s", i, (int)strlen(field),
             field);
    return err;
  }
  if (!strcmp(outcome, "ok")) h->outcome = TG_COLL_HOST_OK;
  else if (!strcmp(outcome, "partial")) h->outcome = TG_COLL_HOST_PARTIAL;
  else if (!strcmp(outcome, "failed")) h->outcome = TG_COLL_HOST_FAILED;
  else return bad(p, "hosts[%zu].outcome: not ok, partial or failed", i);
  return 0;
}

/* Every field but the hosts. */
static int parse_row(parse_t *p, const json_t *o, tg_coll_meta_t *m) {
  const char *format = NULL, *idtext = NULL, *state = NULL;
  int64_t version = 0;
  uint64_t crc, n_failed;
  int err;
  if ((err = get_text(p, o, "format", 1, 64, &format))) return err;
  if (strcmp(format, TG_COLL_META_FORMAT) != 0)
    return bad(p, "format: not %s", TG_COLL_META_FORMAT);
  if ((err = get_i64(p, o, "version", &version))) return err;
  if (version != TG_COLL_META_VERSION)
    return bad(p, "version: %lld, this collector reads %d",
               (long long)version, TG_COLL_META_VERSION);
  if ((err = get_text(p, o, "id", TG_COLL_ID_DIGITS, TG_COLL_ID_DIGITS,
                      &idtext)))
    return err;
  if (tg_coll_id_parse(idtext, TG_COLL_ID_DIGITS, &m->id) != 0)
    return bad(p, "id: not a snapshot id");
  if ((err = get_text(p, o, "object", 1, 63, &m->object)) ||
      (err = get_text(p, o, "state", 1, 16, &state)) ||
      (err = get_bool(p, o, "pinned", &m->pinned)) ||
      (err = get_i64(p, o, "started_ms", &m->started_ms)) ||
      (err = get_i64(p, o, "finished_ms", &m->finished_ms)) ||
      (err = get_text(p, o, "trigger", 1, TG_COLL_TRIGGER_MAX, &m->trigger)) ||
      (err = get_text(p, o, "reason", 0, TG_COLL_REASON_MAX, &m->reason)) ||
      (err = get_text(p, o, "origin", 0, TG_COLL_HOST_MAX, &m->origin)) ||
      (err = get_u64(p, o, "bytes", INT64_MAX, &m->bytes)) ||
      (err = get_u64(p, o, "crc32", UINT32_MAX, &crc)) ||
      (err = get_text(p, o, "etag", 0, TG_COLL_META_ETAG_MAX - 1, &m->etag)) ||
      (err = get_bool(p, o, "index", &m->index)) ||
      (err = get_u64(p, o, "packets", INT64_MAX, &m->packets)) ||
      (err = get_u64(p, o, "loss", INT64_MAX, &m->loss)) ||
      (err = get_u64(p, o, "n_hosts_failed", UINT32_MAX, &n_failed)))
    return err;
  m->crc32 = (uint32_t)crc;
  m->n_hosts_failed = (uint32_t)n_failed;
  char object[64];
  tg_coll_meta_object_name(m->id, object);
  if (strcmp(m->object, object) != 0)
    return bad(p, "object: not %s, the id's", object);
  if (!strcmp(state, "complete")) m->state = TG_COLL_COMPLETE;
  else if (!strcmp(state, "partial")) m->state = TG_COLL_PARTIAL;
  else return bad(p, "state: not complete or partial");
  return 0;
}

int tg_coll_meta_parse(const char *text_untrusted, size_t len,
                       tg_coll_meta_t *out, char *why, size_t cap) {
  memset(out, 0, sizeof(*out));
  parse_t p = {why, cap};
  if (cap) why[0] = '\0';
  if (len > TG_COLL_META_MAX) {
    snprintf(why, cap, "%zu bytes, more than %u", len, TG_COLL_META_MAX);
    return -E2BIG;
  }
  json_error_t jerr;
  int rv = 0;
  json_t *doc = tg_json_load(text_untrusted, len, JSON_REJECT_DUPLICATES,
                             META_TREE_MAX, &jerr, &rv);
  if (!doc) {
    if (rv == -EINVAL)
      snprintf(why, cap, "not JSON: line %d: %s", jerr.line, jerr.text);
    else snprintf(why, cap, "not read: %s", strerror(-rv));
    return rv;
  }
  out->doc_ = doc;
  int err;
  if (!json_is_object(doc)) {
    err = bad(&p, "not a JSON object");
    goto fail;
  }
  if ((err = parse_row(&p, doc, out))) goto fail;
  const json_t *hosts = json_object_get(doc, "hosts");
  if (!json_is_array(hosts)) {
    err = bad(&p, "hosts: not an array");
    goto fail;
  }
  size_t n = json_array_size(hosts);
  if (n == 0 || n > TG_COLL_META_HOSTS_MAX) {
    err = bad(&p, "hosts: %zu, not 1..%u", n, TG_COLL_META_HOSTS_MAX);
    goto fail;
  }
  if (!(out->hosts = calloc(n, sizeof(*out->hosts)))) {
    err = -ENOMEM;
    snprintf(why, cap, "out of memory");
    goto fail;
  }
  out->n_hosts = n;
  for (size_t i = 0; i < n; i++)
    if ((err = parse_host(&p, json_array_get(hosts, i), i, &out->hosts[i])))
      goto fail;
  /* The fields that follow from others must agree with them: a sidecar
   * that says COMPLETE of hosts that failed is not one a collector wrote. */
  tg_coll_begin_t b = {out->trigger, out->reason, out->origin};
  tg_coll_finish_t f = {.bytes = out->bytes,
                        .crc32 = out->crc32,
                        .packets = out->packets,
                        .hosts = out->hosts,
                        .n_hosts = out->n_hosts,
                        .finished_ms = out->finished_ms};
  tg_coll_insert_t ins = {
      .id = out->id, .begin = &b, .started_ms = out->started_ms, .finish = &f};
  tg_coll_state_t state;
  uint32_t n_failed;
  uint64_t loss;
  if (tg__coll_check_insert(&ins, &state, &n_failed, &loss) != 0) {
    err = bad(&p, "hosts: refused by the catalog's checks");
    goto fail;
  }
  if (state != out->state) {
    err = bad(&p, "state: %s, the hosts' outcomes make it %s",
              tg_coll_state_name(out->state), tg_coll_state_name(state));
    goto fail;
  }
  if (loss != out->loss || n_failed != out->n_hosts_failed) {
    err = bad(&p, "loss or n_hosts_failed: not the hosts' sum");
    goto fail;
  }
  return 0;
fail:
  tg_coll_meta_free(out);
  return err;
}

void tg_coll_meta_free(tg_coll_meta_t *m) {
  if (!m) return;
  free(m->hosts);
  if (m->doc_) json_decref(m->doc_);
  memset(m, 0, sizeof(*m));
}
