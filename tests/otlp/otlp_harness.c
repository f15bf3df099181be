/* SPDX-License-Identifier: Apache-2.0 */
/* See otlp_harness.h. */
#include "otlp_harness.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "test_wait.h"

void receiver_spawn(const char *otlp_path, const char *sock,
                    const char *const *extra, receiver_t *r) {
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  char fd[16];
  snprintf(fd, sizeof(fd), "%d", p[1]);
  const char *argv[16] = {otlp_path, "--socket", sock, "--port", "0",
                          "--ready-fd", fd};
  size_t n = 7;
  for (size_t i = 0; extra && extra[i] && n < 15; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = otlp_path;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.keep_fd = p[1];
  r->pid = tg_test_spawn(&s);
  assert_true(r->pid > 0);
  close(p[1]);
  char line[64];
  assert_int_equal(
      tg_test_wait_line(p[0], "ready", OTLP_WAIT_MS, line, sizeof(line)), 1);
  close(p[0]);
  r->port = atoi(line + 6);
  assert_true(r->port > 0);
}

void receiver_stop(receiver_t *r) {
  assert_int_equal(
      tg_test_exit_code(tg_test_stop(r->pid, SIGTERM, OTLP_WAIT_MS)), 0);
}

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

/* otlp_http with one more header line |extra| (NULL: none). */
static answer_t request(const receiver_t *r, const char *method,
                        const char *path, const char *ct, const char *ce,
                        const char *extra, const void *body, size_t len) {
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
  if (extra) hs = curl_slist_append(hs, extra);
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
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)OTLP_WAIT_MS);
  CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) fail_msg("curl: %s", curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
  curl_slist_free_all(hs);
  curl_easy_cleanup(c);
  return a;
}

answer_t otlp_http(const receiver_t *r, const char *method, const char *path,
                   const char *ct, const char *ce, const void *body,
                   size_t len) {
  return request(r, method, path, ct, ce, NULL, body, len);
}

answer_t otlp_post_chunked(const receiver_t *r, const char *ct,
                           const void *body, size_t len) {
  return request(r, "POST", "/v1/traces", ct, NULL,
                 "Transfer-Encoding: chunked", body, len);
}

answer_t otlp_post(const receiver_t *r, const char *ct, const char *ce,
                   const void *body, size_t len) {
  return otlp_http(r, "POST", "/v1/traces", ct, ce, body, len);
}

long long otlp_metric(const receiver_t *r, const char *series) {
  answer_t a = otlp_http(r, "GET", "/metrics", NULL, NULL, NULL, 0);
  assert_int_equal(a.status, 200);
  size_t n = strlen(series);
  for (const char *l = a.body; *l;) {
    if (strncmp(l, series, n) == 0 && l[n] == ' ') return atoll(l + n + 1);
    const char *nl = strchr(l, '\n');
    if (!nl) break;
    l = nl + 1;
  }
  return -1;
}

long long otlp_spans(const receiver_t *r, const char *service,
                     const char *outcome) {
  char series[160];
  snprintf(series, sizeof(series),
           "tracegate_otlp_spans_total{service=\"%s\",outcome=\"%s\"}",
           service, outcome);
  return otlp_metric(r, series);
}

void otlp_wait_recording(const receiver_t *r) {
  int64_t end = tg_test_now_ms() + OTLP_WAIT_MS;
  while (otlp_metric(r, "tracegate_otlp_recording") < 1) {
    assert_true(tg_test_now_ms() < end);
    usleep(10000);
  }
}

pid_t otlp_record_start(const char *cli_path, const test_service_t *ts,
                        const receiver_t *r, const char *trace) {
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-t", "120s",
                        "-o", trace, "tracegate.otlp", NULL};
  pid_t rec = tg_test_spawn_cli(cli_path, args, TG_TEST_FD_DEVNULL,
                                TG_TEST_FD_INHERIT);
  assert_true(rec > 0);
  otlp_wait_recording(r);
  return rec;
}

void otlp_record_stop(pid_t rec) {
  assert_int_equal(tg_test_exit_code(tg_test_stop(rec, SIGINT, OTLP_WAIT_MS)),
                   0);
}

void otlp_sdk_took(receiver_t *r, pid_t rec, const char *front,
                   long long n_front, const char *back, long long n_back) {
  assert_int_equal(otlp_spans(r, front, "accepted"), n_front);
  assert_int_equal(otlp_spans(r, back, "accepted"), n_back);
  assert_int_equal(otlp_metric(r, "tracegate_otlp_bad_requests_total"), 0);
  otlp_record_stop(rec);
  receiver_stop(r);
}

uint64_t otlp_unix_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#ifndef OTLP_GO_CLIENT_DIR
#error "OTLP_GO_CLIENT_DIR must name tests/otlp/go_client"
#endif
#ifndef OTLP_GO_CACHE
#error "OTLP_GO_CACHE must name the go build cache in the build tree"
#endif

#define GO "/usr/bin/go"
#define GO_PATH "/usr/share/gocode"
/* One package of the SDK the client imports, as Debian installs it. */
#define GO_OTEL_SDK GO_PATH "/src/go.opentelemetry.io/otel/sdk/trace"

bool otlp_go_client_build(const char *out) {
  struct stat st;
  if (access(GO, X_OK) != 0 || stat(GO_OTEL_SDK, &st) != 0) {
    fprintf(stderr, "[ SKIPPED  ] %s or OpenTelemetry's Go SDK (%s) is "
                    "missing: deploy/deps.sh installs golang-go and "
                    "golang-opentelemetry-otel-dev\n", GO, GO_OTEL_SDK);
    return false;
  }
  /* GOPATH mode: Debian's Go libraries are sources under GOPATH, with no
   * module proxy to reach. */
  setenv("GO111MODULE", "off", 1);
  setenv("GOPATH", GO_PATH, 1);
  setenv("GOCACHE", OTLP_GO_CACHE, 1);
  setenv("GOFLAGS", "", 1);
  setenv("CGO_ENABLED", "0", 1);
  const char *argv[] = {GO, "build", "-o", out,
                        OTLP_GO_CLIENT_DIR "/main.go", NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = GO;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  /* A cold cache compiles the SDK and net/http: minutes on a slow box. */
  assert_int_equal(tg_test_exit_code(tg_test_reap(pid, 10 * 60 * 1000)), 0);
  return true;
}

void otlp_go_client_run(const char *client, int front_port, int back_port,
                        char *line, size_t cap) {
  char front[64], back[64];
  snprintf(front, sizeof(front), "http://127.0.0.1:%d/v1/traces", front_port);
  snprintf(back, sizeof(back), "http://127.0.0.1:%d/v1/traces", back_port);
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  const char *argv[] = {client, front, back, NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = client;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = p[1];
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  close(p[1]);
  assert_int_equal(tg_test_wait_line(p[0], "{", OTLP_WAIT_MS, line, cap), 1);
  close(p[0]);
  assert_int_equal(tg_test_exit_code(tg_test_reap(pid, OTLP_WAIT_MS)), 0);
}
