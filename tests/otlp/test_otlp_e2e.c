/* SPDX-License-Identifier: Apache-2.0 */
/* tracegate-otlp end to end: a real tracegated, `tracegate record` of the
 * data source "tracegate.otlp", the receiver on a loopback port, and
 * requests posted with libcurl as an OTel exporter posts them.
 *
 *   - a protobuf request and an OTLP/JSON one reach the trace: with
 *     PERFETTO_BIN, trace processor finds every slice by name, db.query
 *     nested in serve /a, processes alpha (pid 4242) and beta, the
 *     attributes and status as args (trace processor spells an
 *     annotation's dots as '_': debug.http_method), each serve /a joined to its GET /a
 *     by a flow, and GET /a lasting its 10 ms; spans with bad ids are
 *     refused with partial success and counted in the trace
 *     (otlp.invalid_spans of their service, written at the flush);
 *   - bad input gets its status (400, 404, 405, 413, 415) with a reason,
 *     and the receiver still answers a good request after it all;
 *   - with no session the spans are answered 200 and counted unrecorded
 *     per service; with no tracegated they are answered 503 with
 *     Retry-After and counted refused per service (GET /metrics);
 *   - 70 requests held open at once from one address are all answered:
 *     the 6 past the 64 bodies received at once get 503 with Retry-After
 *     at their headers (counted busy), the 64 are taken once whole;
 *   - --trigger-on-error (a span with status ERROR) and
 *     --trigger-on-latency (a span at least --latency-ms long) activate
 *     their trigger, which stops a session waiting for it (STOP_TRACING),
 *     and the trace holds one trigger packet of that name from
 *     tracegate-otlp. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "otlp_bodies.h"
#include "otlp_harness.h"
#include "pb/otlp/trace_service.pb-c.h"
#include "test_proc.h"
#include "test_service.h"
#include "test_wait.h"

#ifndef OTLP_PATH
#error "OTLP_PATH must name the tracegate-otlp binary"
#endif
#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

/* --- tests --------------------------------------------------------------- */

static void spans_reach_the_trace_with_nesting_args_and_flows(void **state) {
  const test_service_t *ts = *state;
  receiver_t r;
  receiver_spawn(OTLP_PATH, ts->producer_sock, NULL, &r);
  char trace[160];
  snprintf(trace, sizeof(trace), "%s/otlp.pftrace", ts->dir);
  pid_t rec = otlp_record_start(TRACEGATE_CLI_PATH, ts, &r, trace);
  uint64_t base = otlp_unix_now_ns() - 1000000000u;
  size_t len;
  uint8_t *pb = otlp_test_pb_body(base, 1, &len);
  answer_t a = otlp_post(&r, "application/x-protobuf", NULL, pb, len);
  assert_int_equal(a.status, 200);
  Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse *resp =
      opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
          NULL, a.len, (const uint8_t *)a.body);
  assert_non_null(resp);
  assert_null(resp->partial_success); /* everything taken */
  opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(
      resp, NULL);
  free(pb);
  char *js = otlp_test_json_body(base + 100000000u);
  a = otlp_post(&r, "application/json", NULL, js, strlen(js));
  assert_int_equal(a.status, 200);
  assert_string_equal(a.body, "{}");
  free(js);
  assert_int_equal(otlp_spans(&r, "beta", "accepted"),
                   4);
  /* Two spans of gamma with ids that are not ids: partial success, and
   * counted in the trace at the stop's flush. */
  static const char bad_ids[] =
      "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":"
      "\"service.name\",\"value\":{\"stringValue\":\"gamma\"}}]},"
      "\"scopeSpans\":[{\"spans\":["
      "{\"traceId\":\"4bf9\",\"spanId\":\"00f067aa0ba902b7\",\"name\":\"x\"},"
      "{\"traceId\":\"4bf92f3577b34da6a3ce929d0cf0e4f7\",\"name\":\"y\"}"
      "]}]}]}";
  a = otlp_post(&r, "application/json", NULL, bad_ids, strlen(bad_ids));
  assert_int_equal(a.status, 200);
  assert_non_null(strstr(a.body, "\"rejectedSpans\":2"));
  assert_int_equal(otlp_spans(&r, "alpha", "accepted"),
                   2);
  otlp_record_stop(rec);
  receiver_stop(&r);

  char out[512];
  int got = tg_test_tp_answer(
      trace,
      "select "
      "(select count(*) from slice where name = 'GET /a') as client, "
      "(select count(*) from slice where name = 'serve /a') as server, "
      "(select count(*) from slice where name = 'retry') as event, "
      OTLP_SQL_NESTED("db.query", "serve /a") " as nested, "
      "(select count(*) from process where name = 'alpha' and pid = 4242) "
      " as alpha, "
      "(select count(*) from process where name = 'beta') as beta, "
      OTLP_SQL_ARG("GET /a", "debug.http_method", "display_value", "'GET'")
      " as method, "
      OTLP_SQL_ARG("serve /a", "debug.otel_status_code", "display_value",
                   "'error'") " as status, "
      OTLP_SQL_ARG("db.query", "debug.db_rows", "real_value", "3.5")
      " as rows_arg, "
      OTLP_SQL_FLOWS("GET /a", "serve /a") " as flows, "
      "(select min(dur) from slice where name = 'GET /a') as dur, "
      "(select max(c.value) from counter c join process_counter_track t "
      " on c.track_id = t.id join process p using(upid) "
      " where t.name = 'otlp.invalid_spans' and p.name = 'gamma') "
      " as invalid;",
      out, sizeof(out));
  if (got == 0) skip();
  assert_int_equal(got, 1);
  assert_string_equal(out, "2,2,2,2,1,1,2,2,2,2,10000000,2.000000\n");
}

static void bad_input_gets_its_status_and_the_receiver_stays_up(void **state) {
  const test_service_t *ts = *state;
  receiver_t r;
  const char *extra[] = {"--max-body", "65536", NULL};
  receiver_spawn(OTLP_PATH, ts->producer_sock, extra, &r);
  size_t len;
  uint8_t *pb = otlp_test_pb_body(otlp_unix_now_ns(), 1, &len);
  static const uint8_t bad_pb[] = {0x0a, 0x7f, 0x0a, 0x02};
  char *big = calloc(1, 70000);
  assert_non_null(big);
  memset(big, '{', 69999);
  struct {
    const char *method, *path, *ct, *ce;
    const void *body;
    size_t len;
    long status;
  } cases[] = {
      {"POST", "/v1/traces", "application/x-protobuf", NULL, bad_pb,
       sizeof(bad_pb), 400},
      {"POST", "/v1/traces", "application/json", NULL, "{\"resourceSpans\":", 17,
       400},
      {"POST", "/v1/traces", "application/json", NULL, "[[[[[[]]]]]]", 12, 400},
      {"POST", "/v1/traces", "application/x-protobuf", "gzip", pb, len, 400},
      {"POST", "/v1/traces", "text/plain", NULL, pb, len, 415},
      {"POST", "/v1/traces", "application/x-protobuf", "br", pb, len, 415},
      {"POST", "/v1/traces", "application/json", NULL, big, 69999, 413},
      {"GET", "/v1/traces", NULL, NULL, NULL, 0, 405},
      {"POST", "/v1/logs", "application/json", NULL, "{}", 2, 404},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    answer_t a = otlp_http(&r, cases[i].method, cases[i].path, cases[i].ct,
                      cases[i].ce, cases[i].body, cases[i].len);
    if (a.status != cases[i].status)
      fail_msg("case %zu: status %ld, want %ld", i, a.status, cases[i].status);
    /* 413 is the HTTP layer's, before the body is read; the rest say why
     * in a google.rpc.Status (field 2: its message). */
    if (a.status != 413) assert_true(a.len > 2);
  }
  /* Chunked: past --max-body it is answered 413 without the rest being
   * read; within it, taken whole. */
  char *huge = calloc(1, 4u << 20);
  assert_non_null(huge);
  answer_t a = otlp_post_chunked(&r, "application/x-protobuf", huge, 4u << 20);
  assert_int_equal(a.status, 413);
  free(huge);
  a = otlp_post_chunked(&r, "application/x-protobuf", pb, len);
  assert_int_equal(a.status, 200);
  a = otlp_post(&r, "application/x-protobuf", NULL, pb, len);
  assert_int_equal(a.status, 200);
  assert_true(otlp_metric(&r, "tracegate_otlp_bad_requests_total") >= 6);
  free(big);
  free(pb);
  receiver_stop(&r);
}

static void spans_nobody_records_and_refused_ones_are_counted(void **state) {
  const test_service_t *ts = *state;
  size_t len;
  uint8_t *pb = otlp_test_pb_body(otlp_unix_now_ns(), 1, &len);

  /* A service but no session: taken, counted unrecorded. */
  receiver_t r;
  receiver_spawn(OTLP_PATH, ts->producer_sock, NULL, &r);
  answer_t a = otlp_post(&r, "application/x-protobuf", NULL, pb, len);
  int64_t end = tg_test_now_ms() + OTLP_WAIT_MS;
  /* Until the agent connected, the answer is 503 (refused): retry as an
   * exporter does. */
  while (a.status == 503 && tg_test_now_ms() < end) {
    assert_true(a.retry_after);
    usleep(10000);
    a = otlp_post(&r, "application/x-protobuf", NULL, pb, len);
  }
  assert_int_equal(a.status, 200);
  assert_int_equal(otlp_spans(&r, "beta", "unrecorded"),
                   2);
  assert_int_equal(otlp_spans(&r, "beta", "accepted"),
                   0);
  receiver_stop(&r);

  /* No service at all: 503 with Retry-After, counted refused. */
  char nowhere[200];
  snprintf(nowhere, sizeof(nowhere), "%s/no-such.sock", ts->dir);
  receiver_spawn(OTLP_PATH, nowhere, NULL, &r);
  for (int i = 0; i < 3; i++) {
    a = otlp_post(&r, "application/x-protobuf", NULL, pb, len);
    assert_int_equal(a.status, 503);
    assert_true(a.retry_after);
  }
  assert_int_equal(otlp_spans(&r, "beta", "refused"),
                   6);
  assert_int_equal(otlp_spans(&r, "alpha", "refused"),
                   3);
  receiver_stop(&r);
  free(pb);
}

/* Trigger packets named |name| from the producer tracegate-otlp. */
static size_t triggers_named(Perfetto__Protos__TracePacket **pk, size_t n,
                             const char *name) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER)
      continue;
    const Perfetto__Protos__Trigger *t = pk[i]->trigger;
    if (t->trigger_name && !strcmp(t->trigger_name, name) &&
        t->producer_name && !strcmp(t->producer_name, "tracegate-otlp"))
      k++;
  }
  return k;
}

/* A session that stops on trigger |name|, a receiver with |extra| flags,
 * and the test body posted: the session must stop, and its trace hold
 * one trigger packet |name| from tracegate-otlp. */
static void span_fires_trigger(test_service_t *ts, const char *const *extra,
                               const char *name) {
  receiver_t r;
  receiver_spawn(OTLP_PATH, ts->producer_sock, extra, &r);
  Perfetto__Protos__TraceConfig__TriggerConfig tc =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__INIT;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger tr =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER__INIT;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *trp = &tr;
  tr.name = (char *)name;
  tc.has_trigger_mode = 1;
  tc.trigger_mode =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING;
  tc.n_triggers = 1;
  tc.triggers = &trp;
  tc.has_trigger_timeout_ms = 1;
  tc.trigger_timeout_ms = 120000;
  raw_consumer_t c;
  simple_cfg_t sc;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 1024, 1, "tracegate.otlp");
  sc.cfg.trigger_config = &tc;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  int64_t end = tg_test_now_ms() + OTLP_WAIT_MS;
  while (otlp_metric(&r, "tracegate_otlp_recording") != 1) {
    assert_true(tg_test_now_ms() < end);
    usleep(10000);
  }
  size_t len;
  uint8_t *pb = otlp_test_pb_body(otlp_unix_now_ns(), 1, &len);
  assert_int_equal(otlp_post(&r, "application/x-protobuf", NULL, pb, len).status,
                   200);
  free(pb);
  char err[256] = "";
  assert_int_equal(raw_consumer_wait_disabled(&c, OTLP_WAIT_MS, err,
                                              sizeof(err)),
                   1);
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(&c, &n);
  assert_non_null(pk);
  assert_int_equal(triggers_named(pk, n, name), 1);
  free_packets(pk, n);
  raw_consumer_close(&c);
  receiver_stop(&r);
}

static void an_error_span_fires_its_trigger(void **state) {
  const char *extra[] = {"--trigger-on-error", "otlp.error", NULL};
  span_fires_trigger(*state, extra, "otlp.error");
}

/* The body's spans last 3 to 10 ms: 5 ms is reached. */
static void a_slow_span_fires_its_trigger(void **state) {
  const char *extra[] = {"--trigger-on-latency", "otlp.slow", "--latency-ms",
                         "5", NULL};
  span_fires_trigger(*state, extra, "otlp.slow");
}

/* Connections to the receiver on loopback, each holding one request whose
 * body is still to come. */
#define HELD 70
#define BODY_SLOTS 64 /* receiver.c's MAX_BODIES */

static int connect_receiver(const receiver_t *r) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)r->port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

static void send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t k = write(fd, c, n);
    assert_true(k > 0);
    c += k;
    n -= (size_t)k;
  }
}

/* The status line's code of the answer on |fd|, and whether it had a
 * Retry-After header (read until the head's end or EOF). */
static int read_status(int fd, bool *retry_after) {
  char buf[4096];
  size_t got = 0;
  while (got < sizeof(buf) - 1) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, OTLP_WAIT_MS), 1);
    ssize_t k = read(fd, buf + got, sizeof(buf) - 1 - got);
    assert_true(k >= 0);
    if (k == 0) break;
    got += (size_t)k;
    buf[got] = '\0';
    if (strstr(buf, "\r\n\r\n")) break;
  }
  buf[got] = '\0';
  int code = 0;
  if (sscanf(buf, "HTTP/1.1 %d", &code) != 1) fail_msg("no answer: %s", buf);
  *retry_after = strcasestr(buf, "\r\nRetry-After: 1\r\n") != NULL;
  return code;
}

/* Many exports at once from one address, as one SDK sends them (OTel JS:
 * up to 30 in flight by default): every connection is answered, none
 * closed unanswered; past the 64 bodies received at once, a request is
 * answered 503 with Retry-After at its headers and counted busy, and the
 * held ones, once whole, are all taken. */
static void many_requests_at_once_are_answered(void **state) {
  const test_service_t *ts = *state;
  receiver_t r;
  receiver_spawn(OTLP_PATH, ts->producer_sock, NULL, &r);
  char trace[160];
  snprintf(trace, sizeof(trace), "%s/many.pftrace", ts->dir);
  pid_t rec = otlp_record_start(TRACEGATE_CLI_PATH, ts, &r, trace);
  size_t len;
  uint8_t *pb = otlp_test_pb_body(otlp_unix_now_ns() - 1000000000u, 1, &len);
  char head[256];
  int hn = snprintf(head, sizeof(head),
                    "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Content-Type: application/x-protobuf\r\n"
                    "Content-Length: %zu\r\n\r\n", len);
  int fd[HELD];
  for (size_t i = 0; i < HELD; i++) {
    fd[i] = connect_receiver(&r);
    send_all(fd[i], head, (size_t)hn);
    if (i < BODY_SLOTS) continue;
    /* Past the slots: answered at once, before its body. */
    bool retry = false;
    assert_int_equal(read_status(fd[i], &retry), 503);
    assert_true(retry);
    close(fd[i]);
    fd[i] = -1;
  }
  assert_int_equal(otlp_metric(&r, "tracegate_otlp_busy_requests_total"),
                   HELD - BODY_SLOTS);
  for (size_t i = 0; i < BODY_SLOTS; i++) {
    send_all(fd[i], pb, len);
    bool retry = true;
    assert_int_equal(read_status(fd[i], &retry), 200);
    assert_false(retry);
    close(fd[i]);
  }
  /* The slots came back: one more request is taken. */
  assert_int_equal(otlp_post(&r, "application/x-protobuf", NULL, pb, len).status,
                   200);
  assert_int_equal(otlp_spans(&r, "beta", "accepted"), 2 * (BODY_SLOTS + 1));
  assert_int_equal(otlp_metric(&r, "tracegate_otlp_busy_requests_total"),
                   HELD - BODY_SLOTS);
  otlp_record_stop(rec);
  receiver_stop(&r);
  free(pb);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
#define T(fn) \
  cmocka_unit_test_setup_teardown(fn, test_service_setup, test_service_teardown)
  const struct CMUnitTest tests[] = {
      T(spans_reach_the_trace_with_nesting_args_and_flows),
      T(bad_input_gets_its_status_and_the_receiver_stays_up),
      T(spans_nobody_records_and_refused_ones_are_counted),
      T(many_requests_at_once_are_answered),
      T(an_error_span_fires_its_trigger),
      T(a_slow_span_fires_its_trigger),
  };
#undef T
  int rv = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rv;
}
