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
 *     by a flow, and GET /a lasting its 10 ms;
 *   - bad input gets its status (400, 404, 405, 413, 415) with a reason,
 *     and the receiver still answers a good request after it all;
 *   - with no session the spans are answered 200 and counted unrecorded
 *     per service; with no tracegated they are answered 503 with
 *     Retry-After and counted refused per service (GET /metrics). */
#include <curl/curl.h>
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

#include <cmocka.h>

#include "otlp_bodies.h"
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

#define WAIT_MS 30000

typedef struct receiver {
  pid_t pid;
  int port;
} receiver_t;

/* tracegate-otlp on |sock| with |extra| flags (NULL-terminated), its
 * port read from --ready-fd. */
static void receiver_spawn(const test_service_t *ts, const char *sock,
                           const char *const *extra, receiver_t *r) {
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  char fd[16];
  snprintf(fd, sizeof(fd), "%d", p[1]);
  const char *argv[16] = {OTLP_PATH, "--socket", sock, "--port", "0",
                          "--ready-fd", fd};
  size_t n = 7;
  for (size_t i = 0; extra && extra[i] && n < 15; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  (void)ts;
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = OTLP_PATH;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.keep_fd = p[1];
  r->pid = tg_test_spawn(&s);
  assert_true(r->pid > 0);
  close(p[1]);
  char line[64];
  assert_int_equal(tg_test_wait_line(p[0], "ready", WAIT_MS, line,
                                     sizeof(line)),
                   1);
  close(p[0]);
  r->port = atoi(line + 6);
  assert_true(r->port > 0);
}

static void receiver_stop(receiver_t *r) {
  assert_int_equal(tg_test_exit_code(tg_test_stop(r->pid, SIGTERM, WAIT_MS)),
                   0);
}

/* --- HTTP through libcurl ------------------------------------------------ */

typedef struct answer {
  long status;
  char body[8192];
  size_t len;
  bool retry_after;
} answer_t;

static size_t on_body(char *p, size_t sz, size_t n, void *ctx) {
  answer_t *a = ctx;
  size_t k = sz * n;
  size_t room = sizeof(a->body) - 1 - a->len;
  memcpy(a->body + a->len, p, k < room ? k : room);
  a->len += k < room ? k : room;
  a->body[a->len] = '\0';
  return k;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ctx) {
  answer_t *a = ctx;
  if (sz * n >= 12 && strncasecmp(p, "Retry-After:", 12) == 0)
    a->retry_after = true;
  return sz * n;
}

/* |method| |path| with |body| (NULL: none) and the two headers (NULL:
 * not sent). */
static answer_t http(const receiver_t *r, const char *method, const char *path,
                     const char *ct, const char *ce, const void *body,
                     size_t len) {
  answer_t a = {0};
  CURL *c = curl_easy_init();
  assert_non_null(c);
  char url[128], h1[128], h2[128];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", r->port, path);
  struct curl_slist *hs = NULL;
  if (ct) {
    snprintf(h1, sizeof(h1), "Content-Type: %s", ct);
    hs = curl_slist_append(hs, h1);
  }
  if (ce) {
    snprintf(h2, sizeof(h2), "Content-Encoding: %s", ce);
    hs = curl_slist_append(hs, h2);
  }
  hs = curl_slist_append(hs, "Expect:");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)WAIT_MS);
  CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) fail_msg("curl: %s", curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
  curl_slist_free_all(hs);
  curl_easy_cleanup(c);
  return a;
}

static answer_t post(const receiver_t *r, const char *ct, const char *ce,
                     const void *body, size_t len) {
  return http(r, "POST", "/v1/traces", ct, ce, body, len);
}

/* The value of the metrics line that starts with |series|, or -1. */
static long long metric(const receiver_t *r, const char *series) {
  answer_t a = http(r, "GET", "/metrics", NULL, NULL, NULL, 0);
  assert_int_equal(a.status, 200);
  size_t n = strlen(series);
  for (const char *l = a.body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (strncmp(l, series, n) == 0 && l[n] == ' ') return atoll(l + n + 1);
  return -1;
}

static uint64_t unix_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* --- tests --------------------------------------------------------------- */

static void spans_reach_the_trace_with_nesting_args_and_flows(void **state) {
  const test_service_t *ts = *state;
  receiver_t r;
  receiver_spawn(ts, ts->producer_sock, NULL, &r);
  char trace[160];
  snprintf(trace, sizeof(trace), "%s/otlp.pftrace", ts->dir);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-t", "120s",
                        "-o", trace, "tracegate.otlp", NULL};
  pid_t rec = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL,
                                TG_TEST_FD_INHERIT);
  assert_true(rec > 0);
  int64_t end = tg_test_now_ms() + WAIT_MS;
  while (metric(&r, "tracegate_otlp_recording") != 1) {
    assert_true(tg_test_now_ms() < end);
    usleep(10000);
  }
  uint64_t base = unix_now_ns() - 1000000000u;
  size_t len;
  uint8_t *pb = otlp_test_pb_body(base, 1, &len);
  answer_t a = post(&r, "application/x-protobuf", NULL, pb, len);
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
  a = post(&r, "application/json", NULL, js, strlen(js));
  assert_int_equal(a.status, 200);
  assert_string_equal(a.body, "{}");
  free(js);
  assert_int_equal(metric(&r, "tracegate_otlp_spans_total{service=\"beta\","
                              "outcome=\"accepted\"}"),
                   4);
  assert_int_equal(metric(&r, "tracegate_otlp_spans_total{service=\"alpha\","
                              "outcome=\"accepted\"}"),
                   2);
  assert_int_equal(tg_test_exit_code(tg_test_stop(rec, SIGINT, WAIT_MS)), 0);
  receiver_stop(&r);

  char out[512];
  int got = tg_test_tp_answer(
      trace,
      "select "
      "(select count(*) from slice where name = 'GET /a') as client, "
      "(select count(*) from slice where name = 'serve /a') as server, "
      "(select count(*) from slice where name = 'retry') as event, "
      "(select count(*) from slice c join slice p on c.parent_id = p.id "
      " where c.name = 'db.query' and p.name = 'serve /a') as nested, "
      "(select count(*) from process where name = 'alpha' and pid = 4242) "
      " as alpha, "
      "(select count(*) from process where name = 'beta') as beta, "
      "(select count(*) from slice s join args a using(arg_set_id) "
      " where s.name = 'GET /a' and a.key = 'debug.http_method' "
      " and a.display_value = 'GET') as method, "
      "(select count(*) from slice s join args a using(arg_set_id) "
      " where s.name = 'serve /a' and a.key = 'debug.otel_status_code' "
      " and a.display_value = 'error') as status, "
      "(select count(*) from slice s join args a using(arg_set_id) "
      " where s.name = 'db.query' and a.key = 'debug.db_rows' "
      " and a.real_value = 3.5) as rows_arg, "
      "(select count(*) from flow f join slice o on f.slice_out = o.id "
      " join slice i on f.slice_in = i.id "
      " where o.name = 'GET /a' and i.name = 'serve /a') as flows, "
      "(select min(dur) from slice where name = 'GET /a') as dur;",
      out, sizeof(out));
  if (got == 0) skip();
  assert_int_equal(got, 1);
  assert_string_equal(out, "2,2,2,2,1,1,2,2,2,2,10000000\n");
}

static void bad_input_gets_its_status_and_the_receiver_stays_up(void **state) {
  const test_service_t *ts = *state;
  receiver_t r;
  const char *extra[] = {"--max-body", "65536", NULL};
  receiver_spawn(ts, ts->producer_sock, extra, &r);
  size_t len;
  uint8_t *pb = otlp_test_pb_body(unix_now_ns(), 1, &len);
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
    answer_t a = http(&r, cases[i].method, cases[i].path, cases[i].ct,
                      cases[i].ce, cases[i].body, cases[i].len);
    if (a.status != cases[i].status)
      fail_msg("case %zu: status %ld, want %ld", i, a.status, cases[i].status);
    /* 413 is the HTTP layer's, before the body is read; the rest say why
     * in a google.rpc.Status (field 2: its message). */
    if (a.status != 413) assert_true(a.len > 2);
  }
  answer_t a = post(&r, "application/x-protobuf", NULL, pb, len);
  assert_int_equal(a.status, 200);
  assert_true(metric(&r, "tracegate_otlp_bad_requests_total") >= 5);
  free(big);
  free(pb);
  receiver_stop(&r);
}

static void spans_nobody_records_and_refused_ones_are_counted(void **state) {
  const test_service_t *ts = *state;
  size_t len;
  uint8_t *pb = otlp_test_pb_body(unix_now_ns(), 1, &len);

  /* A service but no session: taken, counted unrecorded. */
  receiver_t r;
  receiver_spawn(ts, ts->producer_sock, NULL, &r);
  answer_t a = post(&r, "application/x-protobuf", NULL, pb, len);
  int64_t end = tg_test_now_ms() + WAIT_MS;
  /* Until the agent connected, the answer is 503 (refused): retry as an
   * exporter does. */
  while (a.status == 503 && tg_test_now_ms() < end) {
    assert_true(a.retry_after);
    usleep(10000);
    a = post(&r, "application/x-protobuf", NULL, pb, len);
  }
  assert_int_equal(a.status, 200);
  assert_int_equal(metric(&r, "tracegate_otlp_spans_total{service=\"beta\","
                              "outcome=\"unrecorded\"}"),
                   2);
  assert_int_equal(metric(&r, "tracegate_otlp_spans_total{service=\"beta\","
                              "outcome=\"accepted\"}"),
                   0);
  receiver_stop(&r);

  /* No service at all: 503 with Retry-After, counted refused. */
  char nowhere[200];
  snprintf(nowhere, sizeof(nowhere), "%s/no-such.sock", ts->dir);
  receiver_spawn(ts, nowhere, NULL, &r);
  for (int i = 0; i < 3; i++) {
    a = post(&r, "application/x-protobuf", NULL, pb, len);
    assert_int_equal(a.status, 503);
    assert_true(a.retry_after);
  }
  assert_int_equal(metric(&r, "tracegate_otlp_spans_total{service=\"beta\","
                              "outcome=\"refused\"}"),
                   6);
  assert_int_equal(metric(&r, "tracegate_otlp_spans_total{service=\"alpha\","
                              "outcome=\"refused\"}"),
                   3);
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
  };
#undef T
  int rv = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rv;
}
