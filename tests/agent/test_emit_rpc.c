/* tracegate-emit's rpc mode end to end: a real tracegated, an
 * --rpc-server and an --rpc-client on loopback, `tracegate record`.
 *
 *   - every call is one flow: with PERFETTO_BIN, Perfetto's trace
 *     processor holds exactly one `flow` row per request, from an rpc.call
 *     slice to an rpc.serve slice, and the counts both sides print match;
 *   - the server survives what the network sends: garbage, a line past
 *     the maximum, half a request held open or cut short are counted
 *     malformed and the next client is still served;
 *   - the client waits for a server that is not up yet, counting the
 *     attempts, and calls once it is.
 *
 * The test speaks the protocol itself (agent/emit/rpc_wire.h): a ping
 * tells whether the server records and how many calls it served, so
 * the test waits on events, not on time. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/emit/rpc_wire.h"
#include "te_harness.h"
#include "test_proc.h"
#include "test_service.h"
#include "test_wait.h"

#ifndef EMIT_PATH
#error "EMIT_PATH must name the tracegate-emit binary"
#endif
#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

#define WAIT_MS 30000
#define CALLS 200

/* --- the programs ----------------------------------------------------------
 */

typedef struct emit_proc {
  pid_t pid;
  char err[192]; /* its stderr */
  int port;      /* an rpc server's */
} emit_proc_t;

/* tracegate-emit with |args| (NULL-terminated, at most 16), stderr into
 * |ts|'s dir/|tag|.err; with |ready|, waits for its "ready" line and
 * keeps the port it names. */
static void emit_spawn(const test_service_t *ts, const char *tag,
                       const char *const *args, bool ready, emit_proc_t *e) {
  int p[2] = {-1, -1};
  char fd[16];
  const char *argv[24] = {EMIT_PATH, "--socket", ts->producer_sock, "--name",
                          tag};
  size_t n = 5;
  if (ready) {
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    snprintf(fd, sizeof(fd), "%d", p[1]);
    argv[n++] = "--ready-fd";
    argv[n++] = fd;
  }
  for (size_t i = 0; args[i]; i++) {
    assert_true(n + 1 < sizeof(argv) / sizeof(argv[0]));
    argv[n++] = args[i];
  }
  argv[n] = NULL;
  snprintf(e->err, sizeof(e->err), "%s/%s.err", ts->dir, tag);
  int err = open(e->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(err >= 0);
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = EMIT_PATH;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stderr_fd = err;
  s.keep_fd = p[1];
  e->pid = tg_test_spawn(&s);
  close(err);
  assert_true(e->pid > 0);
  e->port = 0;
  if (!ready) return;
  close(p[1]);
  char line[64];
  assert_int_equal(tg_test_wait_line(p[0], "ready", WAIT_MS, line,
                                     sizeof(line)),
                   1);
  close(p[0]);
  if (strncmp(line, "ready ", 6) == 0) e->port = atoi(line + 6);
}

/* Stops |e| (with |sig|, or 0: waits for it to leave by itself), which
 * must exit 0, and reads the counts after |key| ("rpc: calls=") of its
 * summary line: |n| numbers, each after the next '='. */
static void emit_finish(emit_proc_t *e, int sig, const char *key,
                        uint64_t *vals, size_t n) {
  int st = sig ? tg_test_stop(e->pid, sig, WAIT_MS)
               : tg_test_reap(e->pid, WAIT_MS);
  size_t len = 0;
  char *text = (char *)tg_test_read_file(e->err, &len);
  assert_non_null(text);
  if (tg_test_exit_code(st) != 0)
    fail_msg("tracegate-emit exit status %d; stderr:\n%.*s",
             tg_test_exit_code(st), (int)len, text);
  text = realloc(text, len + 1);
  assert_non_null(text);
  text[len] = '\0';
  const char *at = strstr(text, key);
  if (!at) fail_msg("no '%s' in:\n%s", key, text);
  for (size_t i = 0; i < n; i++) {
    at = strchr(at, '=');
    assert_non_null(at);
    at++;
    vals[i] = strtoull(at, NULL, 10);
  }
  free(text);
}

/* --- the protocol, spoken by the test --------------------------------------
 */

static int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

static void send_bytes(int fd, const void *p, size_t n) {
  assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* The next answer on |fd|, or EMIT_RPC_RESP_MORE when the server closed
 * the connection first. */
static emit_rpc_resp_t read_answer(int fd, emit_rpc_pong_t *pong) {
  uint8_t buf[EMIT_RPC_LINE_MAX];
  size_t have = 0;
  int64_t end = tg_test_now_ms() + WAIT_MS;
  for (;;) {
    size_t used;
    emit_rpc_resp_t k = emit_rpc_parse_response(buf, have, &used, pong);
    if (k != EMIT_RPC_RESP_MORE) {
      assert_int_equal(used, have); /* one answer, nothing after it */
      return k;
    }
    int left = (int)(end - tg_test_now_ms());
    assert_true(left > 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_true(poll(&p, 1, left) >= 0);
    ssize_t r = recv(fd, buf + have, sizeof(buf) - have, MSG_DONTWAIT);
    if (r == 0) return EMIT_RPC_RESP_MORE;
    if (r < 0) {
      assert_true(errno == EAGAIN || errno == EINTR);
      continue;
    }
    have += (size_t)r;
  }
}

/* Whether the server closed |fd| (bounded wait). */
static bool closed_by_server(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, WAIT_MS) <= 0) return false;
  char b;
  return recv(fd, &b, 1, MSG_DONTWAIT) == 0;
}

static emit_rpc_pong_t ping(int port) {
  int fd = dial(port);
  send_bytes(fd, "ping\n", 5);
  emit_rpc_pong_t p;
  assert_int_equal(read_answer(fd, &p), EMIT_RPC_RESP_PONG);
  close(fd);
  return p;
}

/* Pings until |done| holds of the pong (bounded); returns the last. */
static emit_rpc_pong_t ping_until(int port,
                                  bool (*done)(const emit_rpc_pong_t *,
                                               uint64_t),
                                  uint64_t arg) {
  int64_t end = tg_test_now_ms() + WAIT_MS;
  for (;;) {
    emit_rpc_pong_t p = ping(port);
    if (done(&p, arg)) return p;
    if (tg_test_now_ms() > end)
      fail_msg("server: recording=%u served=%llu malformed=%llu", p.recording,
               (unsigned long long)p.served,
               (unsigned long long)p.malformed);
    te_sleep_ms(5);
  }
}

static bool recording(const emit_rpc_pong_t *p, uint64_t arg) {
  (void)arg;
  return p->recording == 1;
}
static bool served_at_least(const emit_rpc_pong_t *p, uint64_t n) {
  return p->served >= n;
}
static bool malformed_at_least(const emit_rpc_pong_t *p, uint64_t n) {
  return p->malformed >= n;
}

/* The request line of a call with a fresh context. */
static size_t call_line(char line[EMIT_RPC_CALL_BUF]) {
  tg_trace_context_t ctx;
  assert_int_equal(tg_trace_context_new(&ctx), 0);
  return emit_rpc_format_call(&ctx, line);
}

/* `tracegate record` of every category into |ts|'s dir/|name|. */
static pid_t record_start(const test_service_t *ts, const char *name,
                          char *trace, size_t cap) {
  snprintf(trace, cap, "%s/%s", ts->dir, name);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-t", "120s",
                        "-o", trace, "track_event", NULL};
  pid_t cl = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL,
                               TG_TEST_FD_INHERIT);
  assert_true(cl > 0);
  return cl;
}

/* --- tests -----------------------------------------------------------------
 */

static void every_call_is_one_flow_from_rpc_call_to_rpc_serve(void **state) {
  const test_service_t *ts = *state;
  emit_proc_t srv, cli;
  const char *srv_args[] = {"--rpc-server", "0", NULL};
  emit_spawn(ts, "server", srv_args, true, &srv);
  assert_true(srv.port > 0);
  char trace[160];
  pid_t rec = record_start(ts, "rpc.pftrace", trace, sizeof(trace));
  /* The client calls only while it records; the server must too, before
   * the first call, for every call to be one whole flow. */
  ping_until(srv.port, recording, 0);
  char target[32], count[16];
  snprintf(target, sizeof(target), "127.0.0.1:%d", srv.port);
  snprintf(count, sizeof(count), "%d", CALLS);
  const char *cli_args[] = {"--rpc-client", target, "--count", count,
                            "--exit-when-stopped", NULL};
  emit_spawn(ts, "client", cli_args, false, &cli);
  ping_until(srv.port, served_at_least, CALLS);
  assert_int_equal(tg_test_exit_code(tg_test_stop(rec, SIGINT, WAIT_MS)), 0);

  uint64_t c[5], s[5];
  /* --exit-when-stopped: the client leaves when the session ends. */
  emit_finish(&cli, 0, "rpc: calls=", c, 5);
  emit_finish(&srv, SIGTERM, "rpc: served=", s, 5);
  assert_int_equal(c[0], CALLS); /* calls */
  assert_int_equal(c[1], CALLS); /* ok */
  assert_int_equal(c[2], 0);     /* failed */
  assert_int_equal(c[3], 1);     /* connects */
  assert_int_equal(s[0], CALLS); /* served */
  assert_int_equal(s[1], 0);     /* malformed */

  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) {
    print_message("skipped: PERFETTO_BIN not set: the flow table is not "
                  "checked\n");
    skip();
  }
  char out[512];
  te_tp_query(bin, ts->dir,
              "select (select count(*) from flow) as flows, "
              "(select count(*) from flow f "
              " join slice o on f.slice_out = o.id "
              " join slice i on f.slice_in = i.id "
              " where o.name = 'rpc.call' and o.category = 'rpc' "
              " and i.name = 'rpc.serve' and i.category = 'rpc') as joined, "
              "(select count(distinct f.slice_out) from flow f) as outs, "
              "(select count(distinct f.slice_in) from flow f) as ins, "
              "(select count(*) from slice where name = 'rpc.call') as calls, "
              "(select count(*) from slice where name = 'rpc.serve') "
              "as serves;\n",
              trace, out, sizeof(out));
  assert_string_equal(out,
                      "\"flows\",\"joined\",\"outs\",\"ins\",\"calls\","
                      "\"serves\"\n200,200,200,200,200,200\n");
}

static void server_survives_garbage_and_serves_the_next_client(void **state) {
  const test_service_t *ts = *state;
  emit_proc_t srv;
  const char *srv_args[] = {"--rpc-server", "0", "--rpc-bind", "127.0.0.1",
                            NULL};
  emit_spawn(ts, "server", srv_args, true, &srv);
  assert_true(srv.port > 0);
  emit_rpc_pong_t p;
  char line[EMIT_RPC_CALL_BUF];

  /* Garbage on a line of its own: "error", and the connection stays. */
  int a = dial(srv.port);
  static const uint8_t garbage[] = {0x00, 0xff, 'G', 'E', 'T', ' ', '/', '\n'};
  send_bytes(a, garbage, sizeof(garbage));
  assert_int_equal(read_answer(a, &p), EMIT_RPC_RESP_ERROR);
  /* A traceparent that is not one (uppercase hex). */
  send_bytes(a,
             "traceparent: 00-4BF92F3577B34DA6A3CE929D0CF0E4F7-"
             "00f067aa0ba902b7-01\n",
             69);
  assert_int_equal(read_answer(a, &p), EMIT_RPC_RESP_ERROR);

  /* Half a request, held open: others are served meanwhile. */
  int b = dial(srv.port);
  send_bytes(b, "traceparent: 00-4bf9", 20);
  int c = dial(srv.port);
  size_t n = call_line(line);
  send_bytes(c, line, n);
  assert_int_equal(read_answer(c, &p), EMIT_RPC_RESP_OK);

  /* A line past the maximum: "error", then the server closes. Exactly
   * the maximum, so that the server read it all and its close is a FIN,
   * not a reset that could beat the answer. */
  char big[EMIT_RPC_LINE_MAX];
  memset(big, 'x', sizeof(big));
  send_bytes(a, big, sizeof(big));
  assert_int_equal(read_answer(a, &p), EMIT_RPC_RESP_ERROR);
  assert_true(closed_by_server(a));
  close(a);
  /* The half request cut short by its sender. */
  close(b);
  p = ping_until(srv.port, malformed_at_least, 4);
  assert_int_equal(p.malformed, 4);
  assert_int_equal(p.served, 1);

  /* The next client, on the connection that saw nothing wrong and on a
   * new one. */
  n = call_line(line);
  send_bytes(c, line, n);
  assert_int_equal(read_answer(c, &p), EMIT_RPC_RESP_OK);
  close(c);
  int d = dial(srv.port);
  n = call_line(line);
  send_bytes(d, line, n);
  assert_int_equal(read_answer(d, &p), EMIT_RPC_RESP_OK);
  close(d);

  uint64_t s[5];
  emit_finish(&srv, SIGTERM, "rpc: served=", s, 5);
  assert_int_equal(s[0], 3); /* served */
  assert_int_equal(s[1], 4); /* malformed */
}

static void client_waits_for_a_server_that_is_not_up_yet(void **state) {
  const test_service_t *ts = *state;
  /* A port nobody listens on: bound, then released. Another process may
   * take it meanwhile; then the server below fails to start, which fails
   * the test loudly rather than passing it. */
  int hold = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof(a);
  assert_int_equal(bind(hold, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(getsockname(hold, (struct sockaddr *)&a, &sl), 0);
  int port = ntohs(a.sin_port);
  close(hold);

  char trace[160], target[32], port_s[8];
  snprintf(target, sizeof(target), "127.0.0.1:%d", port);
  snprintf(port_s, sizeof(port_s), "%d", port);
  pid_t rec = record_start(ts, "wait.pftrace", trace, sizeof(trace));
  emit_proc_t cli, srv;
  const char *cli_args[] = {"--rpc-client", target, "--count", "20",
                            "--rate", "1000", "--exit-when-stopped", NULL};
  emit_spawn(ts, "client", cli_args, false, &cli);
  /* The client's failed attempts are in its log once it records and
   * tries: wait for the first. */
  assert_true(tg_test_wait_file_text(cli.err, "--rpc-client", WAIT_MS));
  const char *srv_args[] = {"--rpc-server", port_s, NULL};
  emit_spawn(ts, "server", srv_args, true, &srv);
  assert_int_equal(srv.port, port);
  ping_until(srv.port, served_at_least, 20);
  assert_int_equal(tg_test_exit_code(tg_test_stop(rec, SIGINT, WAIT_MS)), 0);
  uint64_t c[5], s[5];
  emit_finish(&cli, 0, "rpc: calls=", c, 5);
  emit_finish(&srv, SIGTERM, "rpc: served=", s, 5);
  assert_int_equal(c[0], 20); /* calls: none before the server was up */
  assert_int_equal(c[1], 20);
  assert_int_equal(c[2], 0);
  assert_int_equal(c[3], 1);    /* connects */
  assert_true(c[4] >= 1);       /* connect_failures */
  assert_int_equal(s[0], 20);
}

int main(void) {
#define T(fn)                                                  \
  cmocka_unit_test_setup_teardown(fn, test_service_setup, \
                                  test_service_teardown)
  const struct CMUnitTest tests[] = {
      T(every_call_is_one_flow_from_rpc_call_to_rpc_serve),
      T(server_survives_garbage_and_serves_the_next_client),
      T(client_waits_for_a_server_that_is_not_up_yet),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
