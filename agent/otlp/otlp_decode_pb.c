/* SPDX-License-Identifier: Apache-2.0 */
/* OTLP/protobuf bodies through protobuf-c (proto/otlp/), into the sink. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "agent/otlp/otlp_decode.h"
#include "pb/otlp/trace_service.pb-c.h"
#include "tracegate/error.h"

typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any_t;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans pb_rs_t;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans pb_ss_t;
typedef Opentelemetry__Proto__Trace__V1__Span pb_span_t;

static otlp_str_t cstr(const char *s) {
  /* protobuf-c gives every string field a NUL-terminated copy (or its
   * shared empty default); a NUL inside the sent bytes ends it there. */
  return s ? (otlp_str_t){s, strlen(s)} : (otlp_str_t){"", 0};
}

static void attr_of(const pb_kv_t *kv, otlp_attr_t *a) {
  memset(a, 0, sizeof(*a));
  a->key = cstr(kv->key);
  const pb_any_t *v = kv->value;
  if (!v) return;
  switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
      a->type = OTLP_V_STRING;
      a->s = cstr(v->string_value);
      break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
      a->type = OTLP_V_BOOL;
      a->v.b = v->bool_value;
      break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
      a->type = OTLP_V_INT;
      a->v.i = v->int_value;
      break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
      a->type = OTLP_V_DOUBLE;
      a->v.d = v->double_value;
      break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE:
      a->type = OTLP_V_BYTES;
      a->s = (otlp_str_t){(const char *)v->bytes_value.data,
                          v->bytes_value.len};
      break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE:
      a->type = OTLP_V_ARRAY;
      a->s = (otlp_str_t){(const char *)v->array_value.data,
                          v->array_value.len};
      break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
      a->type = OTLP_V_KVLIST;
      a->s = (otlp_str_t){(const char *)v->kvlist_value.data,
                          v->kvlist_value.len};
      break;
    default:
      break;
  }
}

/* Up to |max| of the |n| key-values into |out|; returns how many. */
static size_t attrs_of(pb_kv_t *const *kvs, size_t n, otlp_attr_t *out,
                       size_t max) {
  size_t k = n < max ? n : max;
  for (size_t i = 0; i < k; i++) attr_of(kvs[i], &out[i]);
  return k;
}

static bool id_of(ProtobufCBinaryData b, uint8_t *out, size_t n) {
  if (b.len != n) return false;
  memcpy(out, b.data, n);
  return true;
}

static int span_of(const pb_span_t *p, otlp__scratch_t *sc,
                   const otlp_sink_t *sink, otlp_result_t *res) {
  otlp_span_t s;
  memset(&s, 0, sizeof(s));
  bool ids_ok = id_of(p->trace_id, s.trace_id, 16) &&
                id_of(p->span_id, s.span_id, 8);
  if (p->parent_span_id.len != 0) {
    s.has_parent = id_of(p->parent_span_id, s.parent_span_id, 8);
    ids_ok = ids_ok && s.has_parent;
  }
  s.flags = p->flags;
  s.name = cstr(p->name);
  s.kind = (int)p->kind;
  s.start_unix_ns = p->start_time_unix_nano;
  s.end_unix_ns = p->end_time_unix_nano;
  s.n_attrs = attrs_of(p->attributes, p->n_attributes, sc->attrs,
                       OTLP_MAX_ATTRS);
  s.attrs = sc->attrs;
  s.dropped_attrs = (uint64_t)(p->n_attributes - s.n_attrs) +
                    p->dropped_attributes_count;
  size_t ev_used = 0;
  for (size_t i = 0; i < p->n_events && s.n_events < OTLP_MAX_EVENTS; i++) {
    const Opentelemetry__Proto__Trace__V1__Span__Event *e = p->events[i];
    otlp_event_t *o = &sc->events[s.n_events++];
    o->time_unix_ns = e->time_unix_nano;
    o->name = cstr(e->name);
    o->attrs = &sc->ev_attrs[ev_used];
    o->n_attrs = attrs_of(e->attributes, e->n_attributes, &sc->ev_attrs[ev_used],
                          OTLP_MAX_EVENT_ATTRS - ev_used);
    s.dropped_attrs += (uint64_t)(e->n_attributes - o->n_attrs);
    ev_used += o->n_attrs;
  }
  s.events = sc->events;
  s.dropped_events = (uint64_t)(p->n_events - s.n_events) +
                     p->dropped_events_count;
  for (size_t i = 0; i < p->n_links; i++) {
    const Opentelemetry__Proto__Trace__V1__Span__Link *l = p->links[i];
    otlp_link_t lk;
    /* A link with bad ids is left out, not the span. */
    if (s.n_links >= OTLP_MAX_LINKS || !id_of(l->trace_id, lk.trace_id, 16) ||
        !id_of(l->span_id, lk.span_id, 8)) {
      s.dropped_links++;
      continue;
    }
    sc->links[s.n_links++] = lk;
  }
  s.links = sc->links;
  s.dropped_links += p->dropped_links_count;
  if (p->status) {
    s.status_code = (int)p->status->code;
    s.status_message = cstr(p->status->message);
  }
  return otlp__emit_span(sink, &s, ids_ok, res);
}

/* protobuf-c's allocator for one unpack, counting what it hands out: an
 * unpacked message takes many times its wire size (a KeyValue of 6 bytes
 * becomes two structs and a string), so a body within --max-body, or its
 * gzip within OTLP_MAX_INFLATED, could otherwise ask for gigabytes. Past
 * OTLP_MAX_PB_TREE the allocation fails and the unpack with it. */
typedef struct counted {
  size_t used;
  bool over;
} counted_t;

static void *counted_alloc(void *data, size_t size) {
  counted_t *c = data;
  if (size > OTLP_MAX_PB_TREE - c->used) {
    c->over = true;
    return NULL;
  }
  c->used += size;
  return malloc(size);
}

static void counted_free(void *data, void *p) {
  (void)data;
  free(p);
}

int otlp_decode_pb(const uint8_t *body_untrusted, size_t len,
                   const otlp_sink_t *sink, otlp_result_t *res) {
  memset(res, 0, sizeof(*res));
  counted_t counted = {0};
  ProtobufCAllocator alloc = {counted_alloc, counted_free, &counted};
  Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req =
      opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
          &alloc, len, body_untrusted);
  if (!req) return counted.over ? -E2BIG : TG_EPARSE;
  otlp__scratch_t *sc = malloc(sizeof(*sc));
  int rv = sc ? 0 : -ENOMEM;
  for (size_t i = 0; rv == 0 && i < req->n_resource_spans; i++) {
    const pb_rs_t *rs = req->resource_spans[i];
    otlp_resource_t r = {.attrs = sc->res_attrs};
    if (rs->resource)
      r.n_attrs = attrs_of(rs->resource->attributes,
                           rs->resource->n_attributes, sc->res_attrs,
                           OTLP_MAX_ATTRS);
    otlp__resource_names(&r);
    rv = sink->resource(sink->ctx, &r);
    for (size_t j = 0; rv == 0 && j < rs->n_scope_spans; j++) {
      const pb_ss_t *ss = rs->scope_spans[j];
      for (size_t k = 0; rv == 0 && k < ss->n_spans; k++)
        rv = span_of(ss->spans[k], sc, sink, res);
    }
  }
  free(sc);
  opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
      req, &alloc);
  return rv;
}
