/* The TCP listener helper (ipc/net_addr_listen.h) on loopback: port 0
 * gives a real port that a client reaches, the port is then held (a
 * second listener on it fails), names are refused. IPv6 is skipped where
 * the machine has no ::1. Each run is bounded by a timer and closes every
 * handle it opened. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <uv.h>

#include "ipc/net_addr.h"
#include "ipc/net_addr_listen.h"

/* Loopback connects in microseconds; this only ends a run that hangs. */
#define DEADLINE_MS 5000

typedef struct listen_fx {
  uv_loop_t loop;
  uv_timer_t deadline;
  uv_tcp_t listener;
  uv_tcp_t accepted;
  uv_tcp_t client;
  uv_connect_t connect_req;
  bool timed_out;
  int connections;       /* on_connection calls */
  int connection_status; /* the last one's */
  int accept_status;
  int connects; /* on_connect calls */
  int connect_status;
} listen_fx_t;

static void close_if_open(uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void close_one(uv_handle_t *h, void *arg) {
  (void)arg;
  close_if_open(h);
}

/* Closes whatever is still open and runs the loop until it is gone.
 * Returns uv_loop_close()'s verdict: 0, or UV_EBUSY for a leaked handle. */
static int fx_finish(listen_fx_t *x) {
  uv_walk(&x->loop, close_one, NULL);
  uv_run(&x->loop, UV_RUN_DEFAULT);
  return uv_loop_close(&x->loop);
}

static void on_deadline(uv_timer_t *t) {
  listen_fx_t *x = t->data;
  x->timed_out = true;
  uv_walk(&x->loop, close_one, NULL);
}

/* Both ends have reported: the run is over. */
static void maybe_done(listen_fx_t *x) {
  if (x->connections > 0 && x->connects > 0)
    close_if_open((uv_handle_t *)&x->deadline);
}

static void on_connection(uv_stream_t *server, int status) {
  listen_fx_t *x = server->data;
  x->connections++;
  x->connection_status = status;
  if (status == 0 && x->connections == 1) {
    uv_tcp_init(&x->loop, &x->accepted);
    x->accept_status = uv_accept(server, (uv_stream_t *)&x->accepted);
    uv_close((uv_handle_t *)&x->accepted, NULL);
  }
  close_if_open((uv_handle_t *)server);
  maybe_done(x);
}

static void on_connect(uv_connect_t *req, int status) {
  listen_fx_t *x = req->data;
  x->connects++;
  x->connect_status = status;
  close_if_open((uv_handle_t *)&x->client); /* open unless on_deadline ran */
  maybe_done(x);
}

static void never_called(uv_stream_t *server, int status) {
  (void)server;
  (void)status;
  fail_msg("a listener that failed reported a connection");
}

static void fx_init(listen_fx_t *x) {
  memset(x, 0, sizeof(*x));
  assert_int_equal(uv_loop_init(&x->loop), 0);
  assert_int_equal(uv_timer_init(&x->loop, &x->deadline), 0);
  x->deadline.data = x;
  assert_int_equal(uv_timer_start(&x->deadline, on_deadline, DEADLINE_MS, 0),
                   0);
}

/* |any| is "127.0.0.1:0" or "[::1]:0". */
static void listen_accepts_and_holds_the_port(const char *any) {
  listen_fx_t x;
  fx_init(&x);
  tg_net_addr_t at;
  assert_int_equal(tg_net_addr_parse(any, TG_NET_ADDR_PORT_ZERO, 0, &at), 0);
  assert_int_equal(uv_tcp_init(&x.loop, &x.listener), 0);
  x.listener.data = &x;
  uint16_t port = 0;
  int rv = tg_net_tcp_listen(&x.listener, &at, 8, on_connection, &port);
  if (at.ipv6 && (rv == UV_EADDRNOTAVAIL || rv == UV_EAFNOSUPPORT)) {
    assert_int_equal(fx_finish(&x), 0);
    skip(); /* no IPv6 loopback here */
  }
  assert_int_equal(rv, 0);
  assert_int_not_equal(port, 0);

  /* The port is held: a second listener on it fails, and says so at
   * once (libuv defers EADDRINUSE from bind to listen; the helper
   * reports it either way), leaving *port_out alone. */
  tg_net_addr_t same = at;
  same.port = port;
  uv_tcp_t second;
  assert_int_equal(uv_tcp_init(&x.loop, &second), 0);
  second.data = &x;
  uint16_t port2 = 4242;
  rv = tg_net_tcp_listen(&second, &same, 8, never_called, &port2);
  assert_true(rv < 0);
  assert_int_equal(rv, UV_EADDRINUSE);
  assert_int_equal(port2, 4242);
  uv_close((uv_handle_t *)&second, NULL);

  /* A client reaches the first one on the port it returned. */
  struct sockaddr_storage ss;
  assert_int_equal(tg_net_addr_to_sockaddr(&same, &ss), 0);
  assert_int_equal(uv_tcp_init(&x.loop, &x.client), 0);
  x.connect_req.data = &x;
  assert_int_equal(uv_tcp_connect(&x.connect_req, &x.client,
                                  (const struct sockaddr *)&ss, on_connect),
                   0);
  assert_int_equal(x.connections, 0); /* never inside a call */
  uv_run(&x.loop, UV_RUN_DEFAULT);

  assert_int_equal(fx_finish(&x), 0);
  if (x.timed_out)
    fail_msg("no connection within %d ms (%d accepted, %d connected)",
             DEADLINE_MS, x.connections, x.connects);
  assert_int_equal(x.connects, 1);
  assert_int_equal(x.connect_status, 0);
  assert_int_equal(x.connections, 1);
  assert_int_equal(x.connection_status, 0);
  assert_int_equal(x.accept_status, 0);
}

static void tcp_listen_ipv4_any_port_accepts_and_holds_it(void **state) {
  (void)state;
  listen_accepts_and_holds_the_port("127.0.0.1:0");
}

static void tcp_listen_ipv6_any_port_accepts_and_holds_it(void **state) {
  (void)state;
  listen_accepts_and_holds_the_port("[::1]:0");
}

static void tcp_listen_refuses_a_name(void **state) {
  (void)state;
  listen_fx_t x;
  fx_init(&x);
  tg_net_addr_t at;
  assert_int_equal(tg_net_addr_parse("localhost:0", TG_NET_ADDR_PORT_ZERO, 0,
                                     &at),
                   0);
  assert_int_equal(uv_tcp_init(&x.loop, &x.listener), 0);
  uint16_t port = 4242;
  assert_int_equal(tg_net_tcp_listen(&x.listener, &at, 8, never_called, &port),
                   -EINVAL);
  assert_int_equal(port, 4242);
  assert_int_equal(fx_finish(&x), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tcp_listen_ipv4_any_port_accepts_and_holds_it),
      cmocka_unit_test(tcp_listen_ipv6_any_port_accepts_and_holds_it),
      cmocka_unit_test(tcp_listen_refuses_a_name),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
