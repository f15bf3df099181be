/* `tracegate bridge` when no screen can be allocated for a connection
 * (bridge_screen.c, refuse()): each such connection is accepted and
 * closed, and the listener goes on accepting. libuv polls a listener
 * again only once its pending connection is accepted, so one refusal left
 * unaccepted stops the bridge for good (fixed in 1dcd6e0: a connection
 * refused while the last refused one still closed was never accepted).
 *
 * In-process: the bridge's own server (bridge_server.c: lws, the
 * listener, the screens, the connections) on the test's loop, started and
 * stopped as `tracegate bridge` does. The allocation failures come from
 * the test hook tg__bridge_screen_fail_next_for_test(). Clients are plain
 * loopback sockets, read without blocking between loop iterations; the
 * consumer socket is an abstract UNIX socket that listens and never
 * accepts (the upgrade needs it to connect, nothing more).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "cli/bridge_test.h"
#include "test_wait.h"
#include "ws_frame.h"

/* Under lws's handshake timeout: a connection that got a screen and sends
 * nothing is not closed by lws within a wait of the test, so it cannot
 * pass for a refused one. */
#define WAIT_MS 5000
_Static_assert(WAIT_MS < BRIDGE_HANDSHAKE_TIMEOUT_S * 1000,
               "a served connection must outlive a wait");
#define N_REFUSED 3
#define UI_ORIGIN "https://ui.perfetto.dev"

typedef struct fixture {
  uv_loop_t loop;
  bridge_server_t srv; /* large (its read buffer): the fixture is heap */
  bridge_cfg_t cfg;
  bool stopped;
  char sock[64]; /* "@name": the consumer socket */
  int up_fd;     /* listens there, never accepts */
  uint16_t port;
} fixture_t;

/* --- the bridge, as `tracegate bridge` starts and stops it --------------- */

static int listen_abstract(const char *name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t n = strlen(name);
  assert_true(n < sizeof(sa.sun_path));
  memcpy(sa.sun_path + 1, name + 1, n - 1); /* sun_path[0] = 0: abstract */
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
  assert_int_equal(listen(fd, 16), 0);
  return fd;
}

static void on_stopped(bridge_server_t *s) {
  ((fixture_t *)s->data)->stopped = true;
}

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof(*f));
  assert_non_null(f);
  f->up_fd = -1;
  assert_int_equal(uv_loop_init(&f->loop), 0);
  snprintf(f->sock, sizeof(f->sock), "@tg-test-bridge-refuse-%ld",
           (long)getpid());
  f->up_fd = listen_abstract(f->sock);
  f->cfg.consumer_socket = f->sock;
  f->srv.data = f;
  f->srv.on_stopped = on_stopped;
  tg_net_addr_t at;
  assert_int_equal(tg_net_addr_parse("127.0.0.1:0", TG_NET_ADDR_PORT_ZERO, 0,
                                     &at),
                   0);
  *state = f;
  assert_int_equal(
      tg__bridge_server_start(&f->srv, &f->loop, &f->cfg, &at, &f->port), 0);
  assert_true(f->port > 0);
  return 0;
}

static bool stopped(void *arg) {
  fixture_t *f = arg;
  return f->stopped && !f->srv.n_screens && !f->srv.n_conns &&
         f->srv.refusal == BRIDGE_REFUSAL_NONE;
}

/* Runs after a failed test too: the bridge stops, and no handle is left
 * on the loop. */
static int teardown(void **state) {
  fixture_t *f = *state;
  tg__bridge_server_stop(&f->srv);
  bool ok = tg_test_run_loop_until(&f->loop, stopped, f, WAIT_MS);
  int closed = ok ? uv_loop_close(&f->loop) : -1;
  close(f->up_fd);
  free(f);
  if (!ok) print_message("the bridge did not stop\n");
  else if (closed) print_message("handles left on the loop\n");
  return ok && !closed ? 0 : -1;
}

/* --- clients ------------------------------------------------------------- */

/* Connected before the bridge's loop runs: the kernel completes the
 * handshake into the listen backlog. */
static int tcp_connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

typedef struct refused {
  int fd[N_REFUSED];
  bool closed[N_REFUSED];
  ssize_t got; /* bytes a refused connection received: must stay 0 */
} refused_t;

/* Each connection closed by the bridge: EOF or a reset, no byte first. */
static bool all_closed(void *arg) {
  refused_t *r = arg;
  bool all = true;
  for (int i = 0; i < N_REFUSED; i++) {
    if (r->closed[i]) continue;
    char b[64];
    ssize_t n = recv(r->fd[i], b, sizeof(b), MSG_DONTWAIT);
    if (n > 0) r->got += n;
    if (n == 0 || (n < 0 && errno == ECONNRESET)) r->closed[i] = true;
    else all = false;
  }
  return all || r->got;
}

typedef struct reader {
  int fd;
  uint8_t buf[2048];
  size_t have, want; /* want: bytes to read; 0: up to the end of a head */
  bool eof;
} reader_t;

static bool read_done(const reader_t *rd) {
  if (rd->want) return rd->have >= rd->want;
  return rd->have >= 4 && !memcmp(rd->buf + rd->have - 4, "\r\n\r\n", 4);
}

/* What has come, without blocking: byte by byte up to a head's end
 * (nothing after it is consumed). True once done, at EOF or when full. */
static bool read_some(void *arg) {
  reader_t *rd = arg;
  while (!rd->eof && !read_done(rd) && rd->have < sizeof(rd->buf) - 1) {
    size_t ask = rd->want ? rd->want - rd->have : 1;
    ssize_t n = recv(rd->fd, rd->buf + rd->have, ask, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) rd->eof = true;
    else rd->have += (size_t)n;
  }
  rd->buf[rd->have] = 0;
  return read_done(rd) || rd->eof || rd->have >= sizeof(rd->buf) - 1;
}

static void send_all(int fd, const void *p, size_t n) {
  assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* --- tests --------------------------------------------------------------- */

/* Three connections at once for which no screen can be allocated: the
 * second and third arrive while the first refusal still closes (all
 * three wait in the backlog before the loop runs). Each is accepted and
 * closed, and a WebSocket client is served after them. */
static void refusals_back_to_back_leave_the_listener_accepting(void **state) {
  fixture_t *f = *state;
  bridge_server_t *s = &f->srv;
  tg__bridge_screen_fail_next_for_test(s, N_REFUSED);
  refused_t r = {.got = 0};
  for (int i = 0; i < N_REFUSED; i++) r.fd[i] = tcp_connect(f->port);

  bool ok = tg_test_run_loop_until(&f->loop, all_closed, &r, WAIT_MS);
  for (int i = 0; i < N_REFUSED; i++) close(r.fd[i]);
  assert_int_equal(r.got, 0);
  if (!ok) {
    int n = 0;
    for (int i = 0; i < N_REFUSED; i++) n += r.closed[i];
    fail_msg("%d of %d refused connections closed within %d ms (%u "
             "refusals left): the listener stopped accepting", n, N_REFUSED,
             WAIT_MS, s->fail_screens_for_test);
  }
  /* Refused, not served: every failure used, no screen made. */
  assert_int_equal(s->fail_screens_for_test, 0);
  assert_int_equal(s->n_screens, 0);

  /* A WebSocket upgrade of /traced from the UI's origin: 101, with the
   * accept key of RFC 6455 1.3's example. */
  reader_t rd = {.fd = tcp_connect(f->port)};
  char req[512];
  int k = snprintf(req, sizeof(req),
                   "GET " BRIDGE_PATH " HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n"
                   "Origin: " UI_ORIGIN "\r\n\r\n",
                   (unsigned)f->port);
  assert_true(k > 0 && (size_t)k < sizeof(req));
  send_all(rd.fd, req, (size_t)k);
  assert_true(tg_test_run_loop_until(&f->loop, read_some, &rd, WAIT_MS));
  if (strncmp((char *)rd.buf, "HTTP/1.1 101 ", 13))
    fail_msg("not upgraded: \"%s\"", (char *)rd.buf);
  assert_non_null(strstr((char *)rd.buf, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
  assert_int_equal(s->n_screens, 1);
  assert_int_equal(s->n_conns, 1);

  /* And frames flow both ways: a masked ping, its pong. */
  static const uint8_t ping[4] = {'p', 'i', 'n', 'g'};
  uint8_t frame[16];
  size_t n = ws_frame(frame, 9, true, false, sizeof(ping), ping, sizeof(ping));
  send_all(rd.fd, frame, n);
  rd.have = 0;
  rd.want = 2 + sizeof(ping);
  assert_true(tg_test_run_loop_until(&f->loop, read_some, &rd, WAIT_MS));
  assert_false(rd.eof);
  assert_int_equal(rd.buf[0], 0x8a); /* FIN + pong */
  assert_int_equal(rd.buf[1], sizeof(ping));
  assert_memory_equal(rd.buf + 2, ping, sizeof(ping));
  close(rd.fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          refusals_back_to_back_leave_the_listener_accepting, setup,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
