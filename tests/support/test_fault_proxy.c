/* The fault-injecting proxy itself (fault_proxy.h), against plain sockets
 * of this test: bytes pass both ways; a stall holds them (and new
 * connections) without closing anything, and a resume delivers them; a
 * hold-down holds only what goes to the client; a reset aborts both sides
 * with an RST. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_proxy.h"

#define WAIT_MS 10000
/* How long "nothing arrives" is watched for during a stall. */
#define QUIET_MS 300

typedef struct world {
  int target;  /* listening socket the proxy forwards to */
  int port;    /* its port */
  tg_fault_proxy_t *px;
} world_t;

static int tcp_listen(int *port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(s, 8), 0);
  socklen_t l = sizeof(a);
  assert_int_equal(getsockname(s, (struct sockaddr *)&a, &l), 0);
  *port = ntohs(a.sin_port);
  return s;
}

static int tcp_connect(int port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
  return s;
}

/* Waits up to |ms| for |fd| to be readable; true if it is. */
static bool readable(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

/* A client through the proxy and the target's end of it. */
static void connect_pair(world_t *w, int *cli, int *srv) {
  *cli = tcp_connect(tg_fault_proxy_port(w->px));
  assert_true(readable(w->target, WAIT_MS));
  *srv = accept(w->target, NULL, NULL);
  assert_true(*srv >= 0);
}

static void send_str(int fd, const char *s) {
  assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

static void expect_str(int fd, const char *s) {
  char buf[64] = "";
  size_t got = 0, n = strlen(s);
  while (got < n) {
    assert_true(readable(fd, WAIT_MS));
    ssize_t r = recv(fd, buf + got, n - got, 0);
    assert_true(r > 0);
    got += (size_t)r;
  }
  assert_memory_equal(buf, s, n);
}

static int setup(void **state) {
  static world_t w;
  w.target = tcp_listen(&w.port);
  if (tg_fault_proxy_start(w.port, &w.px) < 0) return -1;
  *state = &w;
  return 0;
}

static int teardown(void **state) {
  world_t *w = *state;
  tg_fault_proxy_stop(w->px);
  close(w->target);
  return 0;
}

static void bytes_pass_both_ways(void **state) {
  world_t *w = *state;
  int cli, srv;
  connect_pair(w, &cli, &srv);
  assert_int_equal(tg_fault_proxy_wait_accepted(w->px, 1, WAIT_MS), 0);
  send_str(cli, "ping");
  expect_str(srv, "ping");
  uint64_t down = tg_fault_proxy_down_bytes(w->px);
  send_str(srv, "pong");
  expect_str(cli, "pong");
  assert_int_equal(tg_fault_proxy_wait_down_bytes(w->px, down + 4, WAIT_MS), 0);
  close(cli);
  close(srv);
}

static void stall_holds_everything_and_resume_delivers_it(void **state) {
  world_t *w = *state;
  int cli, srv;
  connect_pair(w, &cli, &srv);
  tg_fault_proxy_stall(w->px);
  send_str(cli, "held");
  send_str(srv, "back");
  /* Nothing moves and nothing closes, either way. */
  assert_false(readable(srv, QUIET_MS));
  assert_false(readable(cli, 0));
  /* A new connection is queued by the kernel, not forwarded. */
  int late = tcp_connect(tg_fault_proxy_port(w->px));
  assert_false(readable(w->target, QUIET_MS));
  tg_fault_proxy_resume(w->px);
  expect_str(srv, "held");
  expect_str(cli, "back");
  assert_true(readable(w->target, WAIT_MS));
  int late_srv = accept(w->target, NULL, NULL);
  assert_true(late_srv >= 0);
  send_str(late, "late");
  expect_str(late_srv, "late");
  close(late);
  close(late_srv);
  close(cli);
  close(srv);
}

static void hold_down_passes_requests_and_holds_replies(void **state) {
  world_t *w = *state;
  int cli, srv;
  connect_pair(w, &cli, &srv);
  tg_fault_proxy_hold_down(w->px);
  send_str(cli, "req");
  expect_str(srv, "req");
  send_str(srv, "rep");
  assert_false(readable(cli, QUIET_MS));
  tg_fault_proxy_resume(w->px);
  expect_str(cli, "rep");
  close(cli);
  close(srv);
}

/* The held reply is counted (a test waits for it), and a target that
 * closes meanwhile is not passed on before the resume: then the client
 * gets the reply first, the close after it. */
static void hold_down_counts_what_it_holds_and_keeps_a_close_for_later(void **state) {
  world_t *w = *state;
  int cli, srv;
  connect_pair(w, &cli, &srv);
  tg_fault_proxy_hold_down(w->px);
  send_str(srv, "reply");
  assert_int_equal(tg_fault_proxy_wait_held_bytes(w->px, 5, WAIT_MS), 0);
  close(srv);
  assert_false(readable(cli, QUIET_MS));
  tg_fault_proxy_resume(w->px);
  expect_str(cli, "reply");
  char b;
  assert_true(readable(cli, WAIT_MS));
  assert_int_equal(recv(cli, &b, 1, 0), 0);
  assert_int_equal(tg_fault_proxy_wait_open_at_most(w->px, 0, WAIT_MS), 0);
  close(cli);
}

static void reset_aborts_both_sides(void **state) {
  world_t *w = *state;
  int cli, srv;
  connect_pair(w, &cli, &srv);
  send_str(cli, "x");
  expect_str(srv, "x");
  tg_fault_proxy_reset(w->px);
  assert_int_equal(tg_fault_proxy_open(w->px), 0);
  char b;
  assert_true(readable(cli, WAIT_MS));
  assert_int_equal(recv(cli, &b, 1, 0), -1);
  assert_int_equal(errno, ECONNRESET);
  assert_true(readable(srv, WAIT_MS));
  assert_int_equal(recv(srv, &b, 1, 0), -1);
  assert_int_equal(errno, ECONNRESET);
  close(cli);
  close(srv);
  /* It goes on accepting. */
  connect_pair(w, &cli, &srv);
  send_str(cli, "again");
  expect_str(srv, "again");
  close(cli);
  close(srv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bytes_pass_both_ways),
      cmocka_unit_test(stall_holds_everything_and_resume_delivers_it),
      cmocka_unit_test(hold_down_passes_requests_and_holds_replies),
      cmocka_unit_test(hold_down_counts_what_it_holds_and_keeps_a_close_for_later),
      cmocka_unit_test(reset_aborts_both_sides),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
