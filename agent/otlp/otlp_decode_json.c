/* SPDX-License-Identifier: Apache-2.0 */
/* OTLP/JSON bodies through jansson, into the sink. The mapping is
 * protobuf's JSON mapping with OTLP's exceptions
 * (opentelemetry-proto docs/specification.md, "JSON Protobuf Encoding"):
 * lowerCamelCase keys, trace and span ids as hex strings (not base64),
 * enums as integers (their names accepted too), 64-bit integers as
 * numbers or decimal strings. Unknown keys are ignored, as there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/otlp/otlp_decode.h"
#include "common/json.h"
#include "tracegate/error.h"

/* A key present with the wrong JSON type makes the body malformed. */
#define BAD TG_EPARSE

static int get_str(const json_t *o, const char *key, otlp_str_t *out) {
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return 0;
  if (!json_is_string(v)) return BAD;
  *out = (otlp_str_t){json_string_value(v), json_string_length(v)};
  return 0;
}

/* Decimal digits, at most 20, within 64 bits. */
static int digits_of(const char *s, size_t n, uint64_t *out) {
  if (n == 0 || n > 20) return BAD;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return BAD;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (x > (UINT64_MAX - d) / 10) return BAD;
    x = x * 10 + d;
  }
  *out = x;
  return 0;
}

/* A uint64 as a number or a string of decimal digits. */
static int u64_of(const json_t *v, uint64_t *out) {
  if (json_is_integer(v)) {
    if (json_integer_value(v) < 0) return BAD;
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  if (!json_is_string(v)) return BAD;
  return digits_of(json_string_value(v), json_string_length(v), out);
}

static int get_u64(const json_t *o, const char *key, uint64_t *out) {
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return 0;
  return u64_of(v, out);
}

/* An int64 as a number or an optionally signed decimal string. */
static int i64_of(const json_t *v, int64_t *out) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return 0;
  }
  if (!json_is_string(v)) return BAD;
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  bool neg = n > 0 && s[0] == '-';
  uint64_t m;
  int rv = digits_of(s + neg, n - neg, &m);
  if (rv < 0) return rv;
  if (m > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return BAD;
  *out = neg ? (int64_t)(0 - m) : (int64_t)m;
  return 0;
}

/* An enum as its number or one of |names| (index = value). */
static int enum_of(const json_t *o, const char *key, const char *const *names,
                   size_t n_names, int *out) {
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return 0;
  if (json_is_integer(v)) {
    json_int_t x = json_integer_value(v);
    if (x < INT32_MIN || x > INT32_MAX) return BAD;
    *out = (int)x;
    return 0;
  }
  if (!json_is_string(v)) return BAD;
  for (size_t i = 0; i < n_names; i++)
    if (strcmp(json_string_value(v), names[i]) == 0) {
      *out = (int)i;
      return 0;
    }
  return BAD;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* An id: absent or "" -> *present false; exactly 2n hex digits -> the
 * bytes; anything else -> *ok false (the span is rejected, not the body). */
static int id_of(const json_t *o, const char *key, uint8_t *out, size_t n,
                 bool *present, bool *ok) {
  otlp_str_t s = {0};
  int rv = get_str(o, key, &s);
  if (rv < 0) return rv;
  *present = s.n != 0;
  if (!*present) return 0;
  if (s.n != 2 * n) {
    *ok = false;
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    int hi = hex_digit(s.p[2 * i]), lo = hex_digit(s.p[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      *ok = false;
      return 0;
    }
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return 0;
}

/* An array and nested values are kept as their compact JSON text, cut
 * where the writer cuts every value (it is only shown). */
static int text_of(const json_t *v, otlp_attr_t *a, int type, json_t *keep) {
  char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (!t) return -ENOMEM;
  json_t *s = json_string(t);
  free(t);
  if (!s || json_array_append_new(keep, s) < 0) return -ENOMEM;
  a->type = type;
  a->json_text = true;
  a->s = (otlp_str_t){json_string_value(s), json_string_length(s)};
  return 0;
}

static int attr_of(const json_t *kv, otlp_attr_t *a, json_t *keep) {
  memset(a, 0, sizeof(*a));
  if (!json_is_object(kv)) return BAD;
  int rv = get_str(kv, "key", &a->key);
  if (rv < 0) return rv;
  const json_t *v = json_object_get(kv, "value");
  if (!v || json_is_null(v)) return 0;
  if (!json_is_object(v)) return BAD;
  const json_t *x;
  if ((x = json_object_get(v, "stringValue"))) {
    a->type = OTLP_V_STRING;
    return get_str(v, "stringValue", &a->s);
  }
  if ((x = json_object_get(v, "boolValue"))) {
    if (!json_is_boolean(x)) return BAD;
    a->type = OTLP_V_BOOL;
    a->v.b = json_is_true(x);
    return 0;
  }
  if ((x = json_object_get(v, "intValue"))) {
    a->type = OTLP_V_INT;
    return i64_of(x, &a->v.i);
  }
  if ((x = json_object_get(v, "doubleValue"))) {
    if (!json_is_number(x)) return BAD;
    a->type = OTLP_V_DOUBLE;
    a->v.d = json_number_value(x);
    return 0;
  }
  if ((x = json_object_get(v, "bytesValue"))) {
    a->type = OTLP_V_BYTES; /* base64 as sent: shown, not decoded */
    return get_str(v, "bytesValue", &a->s);
  }
  if ((x = json_object_get(v, "arrayValue")))
    return text_of(x, a, OTLP_V_ARRAY, keep);
  if ((x = json_object_get(v, "kvlistValue")))
    return text_of(x, a, OTLP_V_KVLIST, keep);
  return 0; /* an empty AnyValue */
}

/* |o|[key] as an array (absent: empty); its first |max| attributes into
 * |out|; *n how many, *dropped the rest. */
static int attrs_of(const json_t *o, const char *key, otlp_attr_t *out,
                    size_t max, size_t *n, uint64_t *dropped, json_t *keep) {
  *n = 0;
  const json_t *arr = json_object_get(o, key);
  if (!arr || json_is_null(arr)) return 0;
  if (!json_is_array(arr)) return BAD;
  size_t total = json_array_size(arr);
  for (size_t i = 0; i < total; i++) {
    if (*n >= max) {
      if (!json_is_object(json_array_get(arr, i))) return BAD;
      (*dropped)++;
      continue;
    }
    int rv = attr_of(json_array_get(arr, i), &out[*n], keep);
    if (rv < 0) return rv;
    (*n)++;
  }
  return 0;
}

/* |o|[key] as an array, NULL when absent (jansson's array functions take
 * NULL as an empty array); a present non-array sets *rv. */
static const json_t *array_at(const json_t *o, const char *key, int *rv) {
  const json_t *a = json_object_get(o, key);
  *rv = 0;
  if (!a || json_is_null(a)) return NULL;
  if (!json_is_array(a)) *rv = BAD;
  return a;
}

static const char *const kinds[] = {
    "SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",      "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"};
static const char *const codes[] = {"STATUS_CODE_UNSET", "STATUS_CODE_OK",
                                    "STATUS_CODE_ERROR"};

static int span_of(const json_t *p, otlp__scratch_t *sc, const otlp_sink_t *sink,
                   otlp_result_t *res, json_t *keep) {
  if (!json_is_object(p)) return BAD;
  otlp_span_t s;
  memset(&s, 0, sizeof(s));
  bool ok = true, present;
  int rv;
  if ((rv = id_of(p, "traceId", s.trace_id, 16, &present, &ok)) < 0) return rv;
  ok = ok && present;
  if ((rv = id_of(p, "spanId", s.span_id, 8, &present, &ok)) < 0) return rv;
  ok = ok && present;
  if ((rv = id_of(p, "parentSpanId", s.parent_span_id, 8, &s.has_parent,
                  &ok)) < 0)
    return rv;
  uint64_t flags = 0, dropped = 0;
  size_t n = 0;
  if ((rv = get_u64(p, "flags", &flags)) < 0 || flags > UINT32_MAX) return BAD;
  s.flags = (uint32_t)flags;
  if ((rv = get_str(p, "name", &s.name)) < 0 ||
      (rv = enum_of(p, "kind", kinds, 6, &s.kind)) < 0 ||
      (rv = get_u64(p, "startTimeUnixNano", &s.start_unix_ns)) < 0 ||
      (rv = get_u64(p, "endTimeUnixNano", &s.end_unix_ns)) < 0 ||
      (rv = attrs_of(p, "attributes", sc->attrs, OTLP_MAX_ATTRS, &n,
                     &s.dropped_attrs, keep)) < 0 ||
      (rv = get_u64(p, "droppedAttributesCount", &dropped)) < 0)
    return rv;
  s.attrs = sc->attrs;
  s.n_attrs = n;
  s.dropped_attrs += dropped;

  const json_t *evs = array_at(p, "events", &rv);
  if (rv < 0) return rv;
  size_t ev_used = 0;
  for (size_t i = 0; i < json_array_size(evs); i++) {
    const json_t *e = json_array_get(evs, i);
    if (!json_is_object(e)) return BAD;
    if (s.n_events >= OTLP_MAX_EVENTS) {
      s.dropped_events++;
      continue;
    }
    otlp_event_t *o = &sc->events[s.n_events++];
    memset(o, 0, sizeof(*o));
    if ((rv = get_u64(e, "timeUnixNano", &o->time_unix_ns)) < 0 ||
        (rv = get_str(e, "name", &o->name)) < 0 ||
        (rv = attrs_of(e, "attributes", &sc->ev_attrs[ev_used],
                       OTLP_MAX_EVENT_ATTRS - ev_used, &o->n_attrs,
                       &s.dropped_attrs, keep)) < 0)
      return rv;
    o->attrs = &sc->ev_attrs[ev_used];
    ev_used += o->n_attrs;
  }
  s.events = sc->events;
  if ((rv = get_u64(p, "droppedEventsCount", &dropped)) < 0) return rv;
  s.dropped_events += dropped;

  const json_t *lks = array_at(p, "links", &rv);
  if (rv < 0) return rv;
  for (size_t i = 0; i < json_array_size(lks); i++) {
    const json_t *l = json_array_get(lks, i);
    if (!json_is_object(l)) return BAD;
    otlp_link_t lk;
    bool lok = true, tp, sp;
    if ((rv = id_of(l, "traceId", lk.trace_id, 16, &tp, &lok)) < 0 ||
        (rv = id_of(l, "spanId", lk.span_id, 8, &sp, &lok)) < 0)
      return rv;
    if (!lok || !tp || !sp || s.n_links >= OTLP_MAX_LINKS) {
      s.dropped_links++;
      continue;
    }
    sc->links[s.n_links++] = lk;
  }
  s.links = sc->links;
  if ((rv = get_u64(p, "droppedLinksCount", &dropped)) < 0) return rv;
  s.dropped_links += dropped;

  const json_t *st = json_object_get(p, "status");
  if (st && !json_is_null(st)) {
    if (!json_is_object(st)) return BAD;
    if ((rv = enum_of(st, "code", codes, 3, &s.status_code)) < 0 ||
        (rv = get_str(st, "message", &s.status_message)) < 0)
      return rv;
  }
  return otlp__emit_span(sink, &s, ok, res);
}

static int resource_spans_of(const json_t *rs, otlp__scratch_t *sc,
                             const otlp_sink_t *sink, otlp_result_t *res,
                             json_t *keep) {
  if (!json_is_object(rs)) return BAD;
  otlp_resource_t r = {.attrs = sc->res_attrs};
  const json_t *resource = json_object_get(rs, "resource");
  int rv;
  if (resource && !json_is_null(resource)) {
    if (!json_is_object(resource)) return BAD;
    uint64_t dropped = 0;
    if ((rv = attrs_of(resource, "attributes", sc->res_attrs, OTLP_MAX_ATTRS,
                       &r.n_attrs, &dropped, keep)) < 0)
      return rv;
  }
  otlp__resource_names(&r);
  if ((rv = sink->resource(sink->ctx, &r)) < 0) return rv;
  const json_t *sss = array_at(rs, "scopeSpans", &rv);
  if (rv < 0) return rv;
  for (size_t j = 0; j < json_array_size(sss); j++) {
    const json_t *ss = json_array_get(sss, j);
    if (!json_is_object(ss)) return BAD;
    const json_t *spans = array_at(ss, "spans", &rv);
    if (rv < 0) return rv;
    for (size_t k = 0; k < json_array_size(spans); k++)
      if ((rv = span_of(json_array_get(spans, k), sc, sink, res, keep)) < 0)
        return rv;
  }
  return 0;
}

int otlp_decode_json(const uint8_t *body_untrusted, size_t len,
                     const otlp_sink_t *sink, otlp_result_t *res) {
  memset(res, 0, sizeof(*res));
  json_error_t jerr;
  int rv = 0;
  json_t *doc = tg_json_load((const char *)body_untrusted, len, 0,
                             OTLP_MAX_JSON_TREE, &jerr, &rv);
  if (!doc) return rv == -EINVAL ? TG_EPARSE : rv; /* -E2BIG, -ENOMEM */
  otlp__scratch_t *sc = malloc(sizeof(*sc));
  /* Texts made for nested values live until the decode ends. */
  json_t *keep = json_array();
  if (!sc || !keep) {
    rv = -ENOMEM;
  } else if (!json_is_object(doc)) {
    rv = BAD;
  } else {
    const json_t *rss = array_at(doc, "resourceSpans", &rv);
    for (size_t i = 0; rv == 0 && i < json_array_size(rss); i++)
      rv = resource_spans_of(json_array_get(rss, i), sc, sink, res, keep);
  }
  json_decref(keep);
  free(sc);
  json_decref(doc);
  return rv;
}
