/* SPDX-License-Identifier: Apache-2.0 */
/* See otlp_bodies.h. The request:
 *
 *   resource alpha (service.name, process.pid 4242)
 *     "GET /a"   CLIENT  [base, base+10ms]  http.method=GET, http.status=200
 *   resource beta (service.name only)
 *     "serve /a" SERVER  [base+1ms, base+9ms] parent = alpha's span,
 *                        status ERROR "boom", event "retry" at base+2ms
 *                        (attempt=2)
 *     "db.query" INTERNAL [base+2ms, base+5ms] parent = "serve /a",
 *                        db.rows=3.5 (double), cached=true
 */
#include "otlp_bodies.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb/otlp/trace_service.pb-c.h"

const uint8_t otlp_test_trace_id[16] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3,
                                        0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d,
                                        0x0c, 0xf0, 0xe4, 0xf7};
const uint8_t otlp_test_client_span[8] = {0x00, 0xf0, 0x67, 0xaa,
                                          0x0b, 0xa9, 0x02, 0xb7};
const uint8_t otlp_test_server_span[8] = {0x11, 0x22, 0x33, 0x44,
                                          0x55, 0x66, 0x77, 0x88};
const uint8_t otlp_test_child_span[8] = {0x99, 0xaa, 0xbb, 0xcc,
                                         0xdd, 0xee, 0xff, 0x01};

#define MS 1000000u

typedef Opentelemetry__Proto__Common__V1__KeyValue kv_t;
typedef Opentelemetry__Proto__Common__V1__AnyValue any_t;
typedef Opentelemetry__Proto__Trace__V1__Span span_t;

static ProtobufCBinaryData bin(const uint8_t *p, size_t n) {
  return (ProtobufCBinaryData){n, (uint8_t *)p};
}

uint8_t *otlp_test_pb_body(uint64_t base, size_t n_copies, size_t *len) {
  /* Values */
  any_t v_get = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        v_200 = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        v_alpha = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        v_pid = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        v_beta = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        v_two = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        v_rows = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
        v_true = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
  v_get.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
  v_get.string_value = "GET";
  v_200.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
  v_200.int_value = 200;
  v_alpha.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
  v_alpha.string_value = "alpha";
  v_pid.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
  v_pid.int_value = 4242;
  v_beta.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
  v_beta.string_value = "beta";
  v_two.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
  v_two.int_value = 2;
  v_rows.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
  v_rows.double_value = 3.5;
  v_true.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
  v_true.bool_value = 1;
  kv_t k_method = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
       k_status = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
       k_alpha = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
       k_pid = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
       k_beta = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
       k_attempt = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
       k_rows = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
       k_cached = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
  k_method.key = "http.method", k_method.value = &v_get;
  k_status.key = "http.status", k_status.value = &v_200;
  k_alpha.key = "service.name", k_alpha.value = &v_alpha;
  k_pid.key = "process.pid", k_pid.value = &v_pid;
  k_beta.key = "service.name", k_beta.value = &v_beta;
  k_attempt.key = "attempt", k_attempt.value = &v_two;
  k_rows.key = "db.rows", k_rows.value = &v_rows;
  k_cached.key = "cached", k_cached.value = &v_true;

  kv_t *client_attrs[] = {&k_method, &k_status};
  span_t client = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
  client.trace_id = bin(otlp_test_trace_id, 16);
  client.span_id = bin(otlp_test_client_span, 8);
  client.name = "GET /a";
  client.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_CLIENT;
  client.start_time_unix_nano = base;
  client.end_time_unix_nano = base + 10 * MS;
  client.n_attributes = 2;
  client.attributes = client_attrs;

  size_t n_beta = 2 * (n_copies ? n_copies : 1);
  span_t *beta = calloc(n_beta, sizeof(*beta));
  span_t **beta_p = calloc(n_beta, sizeof(*beta_p));
  uint8_t (*tids)[16] = calloc(n_beta, 16);
  kv_t *ev_attrs[] = {&k_attempt};
  Opentelemetry__Proto__Trace__V1__Span__Event ev =
      OPENTELEMETRY__PROTO__TRACE__V1__SPAN__EVENT__INIT;
  ev.time_unix_nano = base + 2 * MS;
  ev.name = "retry";
  ev.n_attributes = 1;
  ev.attributes = ev_attrs;
  Opentelemetry__Proto__Trace__V1__Span__Event *evs[] = {&ev};
  Opentelemetry__Proto__Trace__V1__Status st =
      OPENTELEMETRY__PROTO__TRACE__V1__STATUS__INIT;
  st.code = OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
  st.message = "boom";
  kv_t *child_attrs[] = {&k_rows, &k_cached};
  for (size_t i = 0; beta && beta_p && tids && i < n_beta; i += 2) {
    memcpy(tids[i], otlp_test_trace_id, 16);
    /* Copies after the first are requests of their own. */
    tids[i][0] ^= (uint8_t)(i / 2);
    tids[i][1] ^= (uint8_t)(i / 2 >> 8);
    span_t *s = &beta[i], *c = &beta[i + 1];
    *s = (span_t)OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    s->trace_id = bin(tids[i], 16);
    s->span_id = bin(otlp_test_server_span, 8);
    s->parent_span_id = bin(otlp_test_client_span, 8);
    s->name = "serve /a";
    s->kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
    s->start_time_unix_nano = base + 1 * MS;
    s->end_time_unix_nano = base + 9 * MS;
    s->n_events = 1;
    s->events = evs;
    s->status = &st;
    *c = (span_t)OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    c->trace_id = bin(tids[i], 16);
    c->span_id = bin(otlp_test_child_span, 8);
    c->parent_span_id = bin(otlp_test_server_span, 8);
    c->name = "db.query";
    c->kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL;
    c->start_time_unix_nano = base + 2 * MS;
    c->end_time_unix_nano = base + 5 * MS;
    c->n_attributes = 2;
    c->attributes = child_attrs;
    beta_p[i] = s;
    beta_p[i + 1] = c;
  }
  span_t *alpha_p[] = {&client};
  Opentelemetry__Proto__Trace__V1__ScopeSpans ss_a =
      OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT,
                                             ss_b =
      OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
  ss_a.n_spans = 1;
  ss_a.spans = alpha_p;
  ss_b.n_spans = n_beta;
  ss_b.spans = beta_p;
  Opentelemetry__Proto__Trace__V1__ScopeSpans *ssa[] = {&ss_a}, *ssb[] = {&ss_b};
  kv_t *ra_attrs[] = {&k_alpha, &k_pid}, *rb_attrs[] = {&k_beta};
  Opentelemetry__Proto__Resource__V1__Resource ra =
      OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT,
                                               rb =
      OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
  ra.n_attributes = 2;
  ra.attributes = ra_attrs;
  rb.n_attributes = 1;
  rb.attributes = rb_attrs;
  Opentelemetry__Proto__Trace__V1__ResourceSpans rs_a =
      OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT,
                                                 rs_b =
      OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
  rs_a.resource = &ra;
  rs_a.n_scope_spans = 1;
  rs_a.scope_spans = ssa;
  rs_b.resource = &rb;
  rs_b.n_scope_spans = 1;
  rs_b.scope_spans = ssb;
  Opentelemetry__Proto__Trace__V1__ResourceSpans *rss[] = {&rs_a, &rs_b};
  Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req =
      OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
  req.n_resource_spans = 2;
  req.resource_spans = rss;
  uint8_t *out = NULL;
  if (beta && beta_p && tids) {
    *len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
        &req);
    out = malloc(*len ? *len : 1);
    if (out)
      opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(
          &req, out);
  }
  free(beta);
  free(beta_p);
  free(tids);
  return out;
}

char *otlp_test_json_body(uint64_t base) {
  static const char fmt[] =
      "{\"resourceSpans\":["
      "{\"resource\":{\"attributes\":["
      "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"alpha\"}},"
      "{\"key\":\"process.pid\",\"value\":{\"intValue\":\"4242\"}}]},"
      "\"scopeSpans\":[{\"scope\":{\"name\":\"t\"},\"spans\":["
      "{\"traceId\":\"4bf92f3577b34da6a3ce929d0cf0e4f7\","
      "\"spanId\":\"00f067aa0ba902b7\",\"name\":\"GET /a\",\"kind\":3,"
      "\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\","
      "\"attributes\":[{\"key\":\"http.method\",\"value\":{\"stringValue\":"
      "\"GET\"}},{\"key\":\"http.status\",\"value\":{\"intValue\":200}}]}]}]},"
      "{\"resource\":{\"attributes\":["
      "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"beta\"}}]},"
      "\"scopeSpans\":[{\"spans\":["
      "{\"traceId\":\"4BF92F3577B34DA6A3CE929D0CF0E4F7\","
      "\"spanId\":\"1122334455667788\",\"parentSpanId\":\"00f067aa0ba902b7\","
      "\"name\":\"serve /a\",\"kind\":\"SPAN_KIND_SERVER\","
      "\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":%llu,"
      "\"events\":[{\"timeUnixNano\":\"%llu\",\"name\":\"retry\","
      "\"attributes\":[{\"key\":\"attempt\",\"value\":{\"intValue\":\"2\"}}]}],"
      "\"status\":{\"code\":2,\"message\":\"boom\"}},"
      "{\"traceId\":\"4bf92f3577b34da6a3ce929d0cf0e4f7\","
      "\"spanId\":\"99aabbccddeeff01\",\"parentSpanId\":\"1122334455667788\","
      "\"name\":\"db.query\",\"kind\":1,"
      "\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\","
      "\"attributes\":[{\"key\":\"db.rows\",\"value\":{\"doubleValue\":3.5}},"
      "{\"key\":\"cached\",\"value\":{\"boolValue\":true}}]}]}]}]}";
  typedef unsigned long long ull;
  char *out = malloc(sizeof(fmt) + 8 * 24);
  if (out)
    snprintf(out, sizeof(fmt) + 8 * 24, fmt, (ull)base, (ull)(base + 10 * MS),
             (ull)(base + 1 * MS), (ull)(base + 9 * MS), (ull)(base + 2 * MS),
             (ull)(base + 2 * MS), (ull)(base + 5 * MS));
  return out;
}
