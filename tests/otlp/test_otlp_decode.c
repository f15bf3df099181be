/* SPDX-License-Identifier: Apache-2.0 */
/* The OTLP decoders (agent/otlp/otlp_decode.h) on bodies built by
 * protobuf-c and written as OTLP/JSON:
 *   - both give the same spans: services, pid, names, kinds, ids,
 *     parents, times, attributes of each type, events, status;
 *   - spans with bad ids are rejected one by one (partial success), the
 *     rest still decoded;
 *   - the body's way in answers as OTLP/HTTP says: 415 for another
 *     content type or encoding, 400 for malformed protobuf, JSON, a JSON
 *     of the wrong shape, nesting past jansson's limit or a corrupt gzip,
 *     413 for a gzip bomb and for a protobuf body whose unpacked message
 *     would pass the memory cap; gzip bodies decode; a protobuf AnyValue
 *     nested a million deep costs no recursion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "agent/otlp/otlp_decode.h"
#include "otlp_bodies.h"
#include "tracegate/pb_wire.h"

#define BASE 1700000000000000000ull
#define MS 1000000ull

/* What a sink saw, copied out. */
typedef struct seen_span {
  char service[32];
  int64_t pid;
  char name[32];
  int kind;
  uint8_t trace_id[16], span_id[8], parent[8];
  bool has_parent;
  uint64_t start, end;
  size_t n_attrs, n_events;
  char attr0_key[32];
  otlp_attr_t attr0, attr1;
  char event_name[16];
  int64_t event_attr;
  int status;
  char status_msg[16];
} seen_span_t;

typedef struct seen {
  seen_span_t spans[8];
  size_t n;
  otlp_resource_t res;
  char service[32];
} seen_t;

static void cp(char *dst, size_t cap, otlp_str_t s) {
  size_t n = s.n < cap - 1 ? s.n : cap - 1;
  if (n) memcpy(dst, s.p, n);
  dst[n] = '\0';
}

static int on_res(void *ctx, const otlp_resource_t *r) {
  seen_t *s = ctx;
  s->res = *r;
  cp(s->service, sizeof(s->service), r->service);
  return 0;
}

static int on_span(void *ctx, const otlp_span_t *sp, bool *rejected) {
  seen_t *s = ctx;
  *rejected = false;
  if (s->n == 8) return 0;
  seen_span_t *o = &s->spans[s->n++];
  memset(o, 0, sizeof(*o));
  strcpy(o->service, s->service);
  o->pid = s->res.pid;
  cp(o->name, sizeof(o->name), sp->name);
  o->kind = sp->kind;
  memcpy(o->trace_id, sp->trace_id, 16);
  memcpy(o->span_id, sp->span_id, 8);
  memcpy(o->parent, sp->parent_span_id, 8);
  o->has_parent = sp->has_parent;
  o->start = sp->start_unix_ns;
  o->end = sp->end_unix_ns;
  o->n_attrs = sp->n_attrs;
  o->n_events = sp->n_events;
  if (sp->n_attrs) {
    cp(o->attr0_key, sizeof(o->attr0_key), sp->attrs[0].key);
    o->attr0 = sp->attrs[0];
    o->attr0.s.p = NULL;
  }
  if (sp->n_attrs > 1) o->attr1 = sp->attrs[1];
  if (sp->n_events) {
    cp(o->event_name, sizeof(o->event_name), sp->events[0].name);
    if (sp->events[0].n_attrs) o->event_attr = sp->events[0].attrs[0].v.i;
  }
  o->status = sp->status_code;
  cp(o->status_msg, sizeof(o->status_msg), sp->status_message);
  return 0;
}

static void check_request(const seen_t *s) {
  assert_int_equal(s->n, 3);
  const seen_span_t *c = &s->spans[0], *v = &s->spans[1], *d = &s->spans[2];
  assert_string_equal(c->service, "alpha");
  assert_int_equal(c->pid, 4242);
  assert_string_equal(c->name, "GET /a");
  assert_int_equal(c->kind, OTLP_KIND_CLIENT);
  assert_memory_equal(c->trace_id, otlp_test_trace_id, 16);
  assert_memory_equal(c->span_id, otlp_test_client_span, 8);
  assert_false(c->has_parent);
  assert_int_equal(c->start, BASE);
  assert_int_equal(c->end, BASE + 10 * MS);
  assert_int_equal(c->n_attrs, 2);
  assert_string_equal(c->attr0_key, "http.method");
  assert_int_equal(c->attr0.type, OTLP_V_STRING);
  assert_int_equal(c->attr1.type, OTLP_V_INT);
  assert_int_equal(c->attr1.v.i, 200);

  assert_string_equal(v->service, "beta");
  assert_int_equal(v->pid, 0);
  assert_string_equal(v->name, "serve /a");
  assert_int_equal(v->kind, OTLP_KIND_SERVER);
  assert_memory_equal(v->trace_id, otlp_test_trace_id, 16);
  assert_true(v->has_parent);
  assert_memory_equal(v->parent, otlp_test_client_span, 8);
  assert_int_equal(v->start, BASE + 1 * MS);
  assert_int_equal(v->end, BASE + 9 * MS);
  assert_int_equal(v->n_events, 1);
  assert_string_equal(v->event_name, "retry");
  assert_int_equal(v->event_attr, 2);
  assert_int_equal(v->status, 2);
  assert_string_equal(v->status_msg, "boom");

  assert_string_equal(d->name, "db.query");
  assert_int_equal(d->kind, OTLP_KIND_INTERNAL);
  assert_memory_equal(d->parent, otlp_test_server_span, 8);
  assert_int_equal(d->attr0.type, OTLP_V_DOUBLE);
  assert_true(d->attr0.v.d == 3.5);
  assert_int_equal(d->attr1.type, OTLP_V_BOOL);
  assert_true(d->attr1.v.b);
}

static otlp_sink_t sink_of(seen_t *s) {
  memset(s, 0, sizeof(*s));
  return (otlp_sink_t){.resource = on_res, .span = on_span, .ctx = s};
}

static void protobuf_and_json_give_the_same_spans(void **state) {
  (void)state;
  seen_t s;
  otlp_sink_t k = sink_of(&s);
  otlp_result_t res;
  size_t len;
  uint8_t *pb = otlp_test_pb_body(BASE, 1, &len);
  assert_non_null(pb);
  assert_int_equal(otlp_decode_pb(pb, len, &k, &res), 0);
  assert_int_equal(res.spans, 3);
  assert_int_equal(res.rejected_spans, 0);
  check_request(&s);
  free(pb);

  k = sink_of(&s);
  char *js = otlp_test_json_body(BASE);
  assert_non_null(js);
  assert_int_equal(otlp_decode_json((const uint8_t *)js, strlen(js), &k, &res),
                   0);
  assert_int_equal(res.spans, 3);
  assert_int_equal(res.rejected_spans, 0);
  check_request(&s);
  free(js);
}

static void spans_with_bad_ids_are_rejected_one_by_one(void **state) {
  (void)state;
  static const char body[] =
      "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["
      "{\"traceId\":\"4bf9\",\"spanId\":\"00f067aa0ba902b7\",\"name\":\"a\"},"
      "{\"traceId\":\"00000000000000000000000000000000\","
      "\"spanId\":\"00f067aa0ba902b7\",\"name\":\"b\"},"
      "{\"traceId\":\"4bf92f3577b34da6a3ce929d0cf0e4f7\","
      "\"spanId\":\"zzf067aa0ba902b7\",\"name\":\"c\"},"
      "{\"traceId\":\"4bf92f3577b34da6a3ce929d0cf0e4f7\",\"name\":\"d\"},"
      "{\"traceId\":\"4bf92f3577b34da6a3ce929d0cf0e4f7\","
      "\"spanId\":\"00f067aa0ba902b7\",\"name\":\"ok\"}]}]}]}";
  seen_t s;
  otlp_sink_t k = sink_of(&s);
  otlp_result_t res;
  assert_int_equal(
      otlp_decode_json((const uint8_t *)body, strlen(body), &k, &res), 0);
  assert_int_equal(res.spans, 1);
  assert_int_equal(res.rejected_spans, 4);
  assert_int_equal(res.invalid_spans, 4);
  assert_non_null(res.reason);
  assert_int_equal(s.n, 1);
  assert_string_equal(s.spans[0].name, "ok");
  assert_string_equal(s.spans[0].service, "unknown_service");
}

/* |n| bytes of |p| as one gzip member, malloc'd. */
static uint8_t *gzip(const void *p, size_t n, size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9,
                                Z_DEFAULT_STRATEGY),
                   Z_OK);
  size_t cap = deflateBound(&z, (uLong)n);
  uint8_t *out = malloc(cap);
  assert_non_null(out);
  z.next_in = (Bytef *)(uintptr_t)p;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
  *out_len = cap - z.avail_out;
  deflateEnd(&z);
  return out;
}

static int answer(const char *ct, const char *ce, const void *p, size_t n,
                  seen_t *s, otlp_result_t *res) {
  tg_buf_t scratch;
  tg_buf_init(&scratch, OTLP_MAX_INFLATED);
  otlp_sink_t k = sink_of(s);
  otlp_body_t b = {ct, ce, p, n};
  const char *why = NULL;
  int err = 0;
  int st = otlp_decode_body(&b, &scratch, &k, res, &why, &err);
  if (st != 200) assert_non_null(why);
  tg_buf_free(&scratch);
  return st;
}

static void the_way_in_answers_as_otlp_http_says(void **state) {
  (void)state;
  seen_t s;
  otlp_result_t res;
  size_t len, zlen;
  uint8_t *pb = otlp_test_pb_body(BASE, 1, &len);
  char *js = otlp_test_json_body(BASE);

  assert_int_equal(answer("application/x-protobuf", "", pb, len, &s, &res),
                   200);
  check_request(&s);
  assert_int_equal(answer("application/json; charset=utf-8", "identity", js,
                          strlen(js), &s, &res),
                   200);
  check_request(&s);
  uint8_t *z = gzip(pb, len, &zlen);
  assert_int_equal(answer("application/x-protobuf", "gzip", z, zlen, &s, &res),
                   200);
  check_request(&s);
  free(z);
  z = gzip(js, strlen(js), &zlen);
  assert_int_equal(answer("Application/JSON", "GZIP", z, zlen, &s, &res), 200);
  check_request(&s);
  /* The same gzip cut short, and one byte changed in its middle. */
  assert_int_equal(
      answer("application/json", "gzip", z, zlen / 2, &s, &res), 400);
  z[zlen / 2] ^= 0x55;
  int st = answer("application/json", "gzip", z, zlen, &s, &res);
  assert_true(st == 400);
  free(z);

  assert_int_equal(answer("text/plain", "", js, strlen(js), &s, &res), 415);
  assert_int_equal(answer("", "", js, strlen(js), &s, &res), 415);
  assert_int_equal(answer("application/json", "br", js, strlen(js), &s, &res),
                   415);
  /* Malformed protobuf: a length running past the end. */
  static const uint8_t bad_pb[] = {0x0a, 0x7f, 0x0a, 0x02};
  assert_int_equal(answer("application/x-protobuf", "", bad_pb, sizeof(bad_pb),
                          &s, &res),
                   400);
  assert_int_equal(s.n, 0);
  assert_int_equal(answer("application/json", "", "{\"resourceSpans\":[", 18,
                          &s, &res),
                   400);
  static const char wrong_shape[] =
      "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":5}]}]}]}";
  assert_int_equal(answer("application/json", "", wrong_shape,
                          strlen(wrong_shape), &s, &res),
                   400);
  assert_int_equal(answer("application/json", "", "[1,2]", 5, &s, &res), 400);
  /* 5000 nested arrays: past jansson's depth limit. */
  size_t deep = 5000;
  char *d = malloc(2 * deep + 1);
  memset(d, '[', deep);
  memset(d + deep, ']', deep);
  d[2 * deep] = '\0';
  assert_int_equal(answer("application/json", "", d, 2 * deep, &s, &res), 400);
  free(d);

  /* A bomb: 40 MiB of zeros in about 40 KiB, past OTLP_MAX_INFLATED. */
  size_t big = 40u << 20;
  uint8_t *zeros = calloc(1, big);
  assert_non_null(zeros);
  z = gzip(zeros, big, &zlen);
  free(zeros);
  assert_true(zlen < (1u << 20));
  assert_int_equal(answer("application/x-protobuf", "gzip", z, zlen, &s, &res),
                   413);
  free(z);
  free(pb);
  free(js);
}

/* |n| as a varint at |p|; returns its size. */
static size_t varint(uint8_t *p, uint64_t n) {
  return (size_t)(tg_pb_write_varint(p, n) - p);
}

/* A KeyValue whose AnyValue is an array_value nested |depth| deep: each
 * level is a field 5 around the next AnyValue, written inside out. */
static void deep_protobuf_values_cost_no_recursion(void **state) {
  (void)state;
  size_t depth = 1000000;
  /* Each level adds a tag and a length of up to 5 bytes, and an
   * ArrayValue { values = 1 } wrapper (tag + length): at most 12. */
  size_t cap = depth * 12 + 64;
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  size_t at = cap, n = 0; /* the value so far lies in [at, cap) */
  for (size_t i = 0; i < depth; i++) {
    /* ArrayValue { 1: AnyValue } then AnyValue { 5: ArrayValue } */
    for (int w = 0; w < 2; w++) {
      uint8_t len[TG_PB_MAX_VARINT_SIZE];
      size_t ln = varint(len, n);
      at -= ln;
      memcpy(buf + at, len, ln);
      buf[--at] = w == 0 ? 0x0a : 0x2a;
      n = cap - at;
    }
  }
  /* Wrap: KeyValue(2: AnyValue) -> Span(9: KeyValue, ids) ->
   * ScopeSpans(2) -> ResourceSpans(2) -> Request(1). */
  static const uint8_t ids[] = {0x0a, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                12,   13, 14, 15, 16, 0x12, 8, 1, 2, 3, 4,
                                5,    6,  7, 8};
  const uint8_t fields[] = {0x12, 0x4a, 0x12, 0x12, 0x0a};
  uint8_t *cur = malloc(n);
  assert_non_null(cur);
  memcpy(cur, buf + at, n);
  free(buf);
  for (size_t f = 0; f < sizeof(fields); f++) {
    size_t extra = f == 1 ? sizeof(ids) : 0;
    uint8_t len[TG_PB_MAX_VARINT_SIZE];
    size_t ln = varint(len, n);
    uint8_t *next = malloc(extra + 1 + ln + n);
    assert_non_null(next);
    memcpy(next, ids, extra);
    next[extra] = fields[f];
    memcpy(next + extra + 1, len, ln);
    memcpy(next + extra + 1 + ln, cur, n);
    free(cur);
    cur = next;
    n += extra + 1 + ln;
  }
  seen_t s;
  otlp_result_t res;
  assert_int_equal(answer("application/x-protobuf", "", cur, n, &s, &res),
                   200);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.spans[0].n_attrs, 1);
  assert_int_equal(s.spans[0].attr0.type, OTLP_V_ARRAY);
  free(cur);
}


/* A span of 4 million empty attributes (2 bytes each on the wire, tens of
 * bytes each unpacked), gzip'd to some kilobytes: unpacking it whole
 * would take hundreds of MiB; the decoder stops at OTLP_MAX_PB_TREE. */
static void a_protobuf_memory_bomb_is_refused(void **state) {
  (void)state;
  size_t attrs = 4u << 20;
  size_t span_len = 2 * attrs;
  uint8_t *body = malloc(span_len + 64);
  assert_non_null(body);
  /* Request { 1: ResourceSpans { 2: ScopeSpans { 2: Span { 9: ""... } } } } */
  uint8_t head[64];
  size_t h = 0, lens[3];
  lens[2] = span_len;                            /* the Span */
  lens[1] = 1 + varint(head, lens[2]) + lens[2]; /* ScopeSpans */
  lens[0] = 1 + varint(head, lens[1]) + lens[1]; /* ResourceSpans */
  head[h++] = 0x0a;
  h += varint(head + h, lens[0]);
  head[h++] = 0x12;
  h += varint(head + h, lens[1]);
  head[h++] = 0x12;
  h += varint(head + h, lens[2]);
  memcpy(body, head, h);
  for (size_t i = 0; i < attrs; i++) {
    body[h + 2 * i] = 0x4a;
    body[h + 2 * i + 1] = 0x00;
  }
  size_t zlen;
  uint8_t *z = gzip(body, h + span_len, &zlen);
  free(body);
  seen_t s;
  otlp_result_t res;
  assert_int_equal(answer("application/x-protobuf", "gzip", z, zlen, &s, &res),
                   413);
  assert_int_equal(s.n, 0);
  free(z);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(protobuf_and_json_give_the_same_spans),
      cmocka_unit_test(spans_with_bad_ids_are_rejected_one_by_one),
      cmocka_unit_test(the_way_in_answers_as_otlp_http_says),
      cmocka_unit_test(deep_protobuf_values_cost_no_recursion),
      cmocka_unit_test(a_protobuf_memory_bomb_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
