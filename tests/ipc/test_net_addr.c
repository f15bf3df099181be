/* Network addresses (ipc/net_addr.h): the "host:port" forms the CLI, the
 * relay's --listen and the TLS dialer accept and refuse, formatting back,
 * and the dialer (ipc/net_addr_dial.h) against loopback listeners. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "ipc/net_addr.h"
#include "ipc/net_addr_dial.h"

static const unsigned OPT = TG_NET_ADDR_PORT_OPTIONAL;

static void parse_ok(const char *s, unsigned flags, uint16_t def,
                     const char *host, uint16_t port, bool v6) {
  tg_net_addr_t a;
  int rv = tg_net_addr_parse(s, flags, def, &a);
  if (rv != 0) fail_msg("'%s' refused", s);
  assert_string_equal(a.host, host);
  assert_int_equal(a.port, port);
  assert_int_equal(a.ipv6, v6);
}

static void parse_bad(const char *s, unsigned flags) {
  tg_net_addr_t a;
  if (tg_net_addr_parse(s, flags, 7467, &a) != -EINVAL)
    fail_msg("'%s' accepted", s);
}

static void net_addr_parses_host_port(void **state) {
  (void)state;
  parse_ok("relay.example:7467", 0, 0, "relay.example", 7467, false);
  parse_ok("10.0.0.1:1", 0, 0, "10.0.0.1", 1, false);
  parse_ok("h_1-x:65535", 0, 0, "h_1-x", 65535, false);
  parse_ok("host:00080", 0, 0, "host", 80, false);
}

static void net_addr_parses_bracketed_ipv6(void **state) {
  (void)state;
  parse_ok("[::1]:443", 0, 0, "::1", 443, true);
  parse_ok("[fe80::1%eth0]:9", 0, 0, "fe80::1%eth0", 9, true);
  parse_ok("[::1]", OPT, 7467, "::1", 7467, true);
  parse_bad("[::1]", 0);          /* port required */
  parse_bad("[::1]443", 0);       /* no ':' after ']' */
  parse_bad("[::1]:443x", 0);
  parse_bad("[::1", OPT);         /* no ']' */
  parse_bad("[]:443", 0);         /* empty host */
  parse_bad("[::1]:", 0);         /* empty port */
  parse_bad("[a b]:1", 0);        /* space inside the brackets */
}

static void net_addr_default_port_only_when_optional(void **state) {
  (void)state;
  parse_ok("relay", OPT, 7467, "relay", 7467, false);
  parse_ok("relay:9", OPT, 7467, "relay", 9, false);
  /* Bare IPv6: the colons are the address's, so there is no port. */
  parse_ok("::1", OPT, 7467, "::1", 7467, true);
  parse_ok("fe80::1:2", OPT, 0, "fe80::1:2", 0, true);
  parse_bad("relay", 0);
  parse_bad("::1", 0);
  parse_bad("::1:443", 0);
}

static void net_addr_refuses_bad_ports(void **state) {
  (void)state;
  const char *bad[] = {"h:0",   "h:65536", "h:99999", "h:123456", "h:12a",
                       "h:-1",  "h:+80",   "h: 80",   "h:80 ",    "h:",
                       "h:0x50"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    parse_bad(bad[i], 0);
    parse_bad(bad[i], OPT);
  }
  /* Port 0 only for a listener. */
  parse_ok("127.0.0.1:0", TG_NET_ADDR_PORT_ZERO, 0, "127.0.0.1", 0, false);
  parse_ok("[::]:0", TG_NET_ADDR_PORT_ZERO, 0, "::", 0, true);
  parse_bad("h:65536", TG_NET_ADDR_PORT_ZERO);
}

static void net_addr_refuses_bad_hosts(void **state) {
  (void)state;
  const char *bad[] = {"",        ":443",     "-oProxyCommand=x:22",
                       "a b:1",   "a\tb:1",   "a\nb:1",
                       "a/b:1",   "a@b:1",    "[-x]:1",
                       "h:1:x]",  "\x01:1",   "\xc3\xa9t\xc3\xa9:1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    parse_bad(bad[i], OPT);
  assert_int_equal(tg_net_addr_parse(NULL, OPT, 1, &(tg_net_addr_t){0}),
                   -EINVAL);
}

static void net_addr_host_length_is_capped(void **state) {
  (void)state;
  char s[TG_NET_HOST_MAX + 16];
  memset(s, 'a', TG_NET_HOST_MAX);
  strcpy(s + TG_NET_HOST_MAX, ":80");
  tg_net_addr_t a;
  assert_int_equal(tg_net_addr_parse(s, 0, 0, &a), 0);
  assert_int_equal(strlen(a.host), TG_NET_HOST_MAX);
  memset(s, 'a', TG_NET_HOST_MAX + 1);
  strcpy(s + TG_NET_HOST_MAX + 1, ":80");
  parse_bad(s, 0);
  s[0] = '[';
  memset(s + 1, 'a', TG_NET_HOST_MAX + 1);
  strcpy(s + TG_NET_HOST_MAX + 2, "]:80"); /* 256 bytes in brackets */
  parse_bad(s, 0);
  strcpy(s + TG_NET_HOST_MAX + 1, "]:80"); /* 255: the most there is */
  assert_int_equal(tg_net_addr_parse(s, 0, 0, &a), 0);
}

static void net_addr_formats_back(void **state) {
  (void)state;
  const char *forms[] = {"relay.example:7467", "[::1]:443", "10.0.0.1:1"};
  for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
    tg_net_addr_t a;
    char buf[TG_NET_ADDR_STRLEN];
    assert_int_equal(tg_net_addr_parse(forms[i], 0, 0, &a), 0);
    assert_int_equal(tg_net_addr_format(&a, buf, sizeof(buf)), 0);
    assert_string_equal(buf, forms[i]);
  }
  tg_net_addr_t a;
  char buf[TG_NET_ADDR_STRLEN];
  assert_int_equal(tg_net_addr_parse("::1", OPT, 7467, &a), 0);
  assert_int_equal(tg_net_addr_format(&a, buf, sizeof(buf)), 0);
  assert_string_equal(buf, "[::1]:7467");
  /* The longest address fits TG_NET_ADDR_STRLEN; a short buffer does not. */
  memset(a.host, 'a', TG_NET_HOST_MAX);
  a.host[TG_NET_HOST_MAX] = 0;
  a.port = 65535;
  a.ipv6 = true;
  assert_int_equal(tg_net_addr_format(&a, buf, sizeof(buf)), 0);
  assert_int_equal(strlen(buf), TG_NET_ADDR_STRLEN - 1);
  char small[8];
  assert_int_equal(tg_net_addr_format(&a, small, sizeof(small)), -ENOSPC);
  assert_string_equal(small, "");
}

static void net_addr_numeric_to_sockaddr(void **state) {
  (void)state;
  tg_net_addr_t a;
  struct sockaddr_storage ss;
  char buf[TG_NET_ADDR_STRLEN];
  assert_int_equal(tg_net_addr_parse("127.0.0.1:0", TG_NET_ADDR_PORT_ZERO, 0,
                                     &a), 0);
  assert_int_equal(tg_net_addr_to_sockaddr(&a, &ss), 0);
  assert_int_equal(ss.ss_family, AF_INET);
  tg_net_sockaddr_format((struct sockaddr *)&ss, buf, sizeof(buf));
  assert_string_equal(buf, "127.0.0.1:0");
  assert_int_equal(tg_net_addr_parse("[::1]:7467", 0, 0, &a), 0);
  assert_int_equal(tg_net_addr_to_sockaddr(&a, &ss), 0);
  assert_int_equal(ss.ss_family, AF_INET6);
  tg_net_sockaddr_format((struct sockaddr *)&ss, buf, sizeof(buf));
  assert_string_equal(buf, "[::1]:7467");
  /* Names are never resolved here; IPv4 in brackets is not IPv6. */
  const char *names[] = {"localhost:80", "[1.2.3.4]:80", "1.2.3:80",
                         "1.2.3.4.5:80"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    assert_int_equal(tg_net_addr_parse(names[i], 0, 0, &a), 0);
    assert_int_equal(tg_net_addr_to_sockaddr(&a, &ss), -EINVAL);
  }
  struct sockaddr un = {.sa_family = AF_UNIX};
  tg_net_sockaddr_format(&un, buf, sizeof(buf));
  assert_string_equal(buf, "(family 1)");
}

/* --- the dialer ----------------------------------------------------------- */

typedef struct dial_fx {
  uv_loop_t loop;
  uv_tcp_t listener;
  int port;
  bool accepted;
  uv_tcp_t conn; /* the accepted side */
  int status;
  int fd;
  int calls;
  bool resolved; /* the dial went through the resolver */
  char addr[TG_NET_ADDR_STRLEN];
  char why[TG_NET_ADDR_STRLEN + 64];
} dial_fx_t;

static void on_dialed(tg_net_dial_t *d, int status, int fd) {
  dial_fx_t *x = tg_net_dial_data(d);
  x->calls++;
  x->status = status;
  x->fd = fd;
  x->resolved = tg_net_dial_resolved(d);
  snprintf(x->addr, sizeof(x->addr), "%s", tg_net_dial_addr(d));
  snprintf(x->why, sizeof(x->why), "%s", tg_net_dial_error(d));
}

static void on_connection(uv_stream_t *s, int status) {
  dial_fx_t *x = s->data;
  assert_int_equal(status, 0);
  assert_int_equal(uv_tcp_init(&x->loop, &x->conn), 0);
  assert_int_equal(uv_accept(s, (uv_stream_t *)&x->conn), 0);
  x->accepted = true;
  uv_close((uv_handle_t *)&x->conn, NULL);
  uv_close((uv_handle_t *)&x->listener, NULL);
}

/* A loopback listener on a free port. */
static void listen_loopback(dial_fx_t *x) {
  struct sockaddr_in sin;
  assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &sin), 0);
  assert_int_equal(uv_tcp_init(&x->loop, &x->listener), 0);
  x->listener.data = x;
  assert_int_equal(uv_tcp_bind(&x->listener, (struct sockaddr *)&sin, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&x->listener, 4, on_connection), 0);
  int len = sizeof(sin);
  assert_int_equal(
      uv_tcp_getsockname(&x->listener, (struct sockaddr *)&sin, &len), 0);
  x->port = ntohs(sin.sin_port);
}

static void dial_fx_init(dial_fx_t *x) {
  memset(x, 0, sizeof(*x));
  x->fd = -2;
  assert_int_equal(uv_loop_init(&x->loop), 0);
}

static void dial(dial_fx_t *x, const char *hostport) {
  tg_net_addr_t a;
  assert_int_equal(tg_net_addr_parse(hostport, 0, 0, &a), 0);
  tg_net_dial_t *d;
  assert_int_equal(tg_net_dial_start(&x->loop, &a, on_dialed, x, &d), 0);
  assert_int_equal(x->calls, 0); /* never inside the call */
}

static void net_dial_connects_to_a_listener(void **state) {
  (void)state;
  dial_fx_t x;
  dial_fx_init(&x);
  listen_loopback(&x);
  char hp[32];
  snprintf(hp, sizeof(hp), "127.0.0.1:%d", x.port);
  dial(&x, hp);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_int_equal(x.calls, 1);
  assert_int_equal(x.status, 0);
  assert_true(x.fd >= 0);
  assert_true(x.accepted);
  assert_string_equal(x.addr, hp);
  /* The descriptor handed over is the connected socket itself. */
  struct sockaddr_in peer;
  socklen_t pl = sizeof(peer);
  assert_int_equal(getpeername(x.fd, (struct sockaddr *)&peer, &pl), 0);
  assert_int_equal(ntohs(peer.sin_port), x.port);
  close(x.fd);
  assert_int_equal(uv_loop_close(&x.loop), 0);
}

static void net_dial_reports_a_refused_connection(void **state) {
  (void)state;
  dial_fx_t x;
  dial_fx_init(&x);
  /* A port that was free a moment ago and has no listener now. */
  listen_loopback(&x);
  uv_close((uv_handle_t *)&x.listener, NULL);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  char hp[32];
  snprintf(hp, sizeof(hp), "127.0.0.1:%d", x.port);
  dial(&x, hp);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_int_equal(x.calls, 1);
  assert_int_equal(x.status, UV_ECONNREFUSED);
  assert_int_equal(x.fd, -1);
  assert_string_equal(x.addr, hp);
  assert_non_null(strstr(x.why, "cannot connect"));
  assert_int_equal(uv_loop_close(&x.loop), 0);
}

static void net_dial_cancel_reports_from_the_loop(void **state) {
  (void)state;
  dial_fx_t x;
  dial_fx_init(&x);
  tg_net_addr_t a;
  assert_int_equal(tg_net_addr_parse("127.0.0.1:9", 0, 0, &a), 0);
  tg_net_dial_t *d;
  assert_int_equal(tg_net_dial_start(&x.loop, &a, on_dialed, &x, &d), 0);
  tg_net_dial_cancel(d);
  tg_net_dial_cancel(d); /* idempotent */
  assert_int_equal(x.calls, 0);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_int_equal(x.calls, 1);
  assert_int_equal(x.status, UV_ECANCELED);
  assert_int_equal(x.fd, -1);
  assert_int_equal(uv_loop_close(&x.loop), 0);
}

/* An address written as numbers is connected to without the resolver, in
 * every form getaddrinfo() would read; a name still goes through it. */
static void net_dial_literals_skip_the_resolver(void **state) {
  (void)state;
  static const char *const forms[] = {"127.0.0.1", "127.00.0.01", "127.1",
                                      "0x7f.0.0.1"};
  for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
    dial_fx_t x;
    dial_fx_init(&x);
    listen_loopback(&x);
    char hp[48], want[32];
    snprintf(hp, sizeof(hp), "%s:%d", forms[i], x.port);
    snprintf(want, sizeof(want), "127.0.0.1:%d", x.port);
    dial(&x, hp);
    uv_run(&x.loop, UV_RUN_DEFAULT);
    assert_false(x.resolved);
    assert_int_equal(x.calls, 1);
    assert_int_equal(x.status, 0);
    assert_true(x.accepted);
    assert_string_equal(x.addr, want);
    close(x.fd);
    assert_int_equal(uv_loop_close(&x.loop), 0);
  }
  /* IPv6 too: whatever the machine's IPv6, no resolver on the way. */
  dial_fx_t x;
  dial_fx_init(&x);
  dial(&x, "[::1]:9");
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_false(x.resolved);
  assert_int_equal(x.calls, 1);
  assert_int_equal(x.fd, -1);
  assert_string_equal(x.addr, "[::1]:9");
  assert_int_equal(uv_loop_close(&x.loop), 0);
  /* A name is resolved. */
  dial_fx_init(&x);
  listen_loopback(&x);
  char hp[48];
  snprintf(hp, sizeof(hp), "localhost:%d", x.port);
  dial(&x, hp);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_true(x.resolved);
  assert_int_equal(x.calls, 1);
  if (x.fd >= 0) close(x.fd);
  if (!x.accepted) uv_close((uv_handle_t *)&x.listener, NULL);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&x.loop), 0);
}

/* A literal whose connect the kernel refuses at once (TCP to the broadcast
 * address: ENETUNREACH, no packet sent) is still reported from the loop,
 * never inside tg_net_dial_start(). */
static void net_dial_a_literal_refused_at_once_reports_from_the_loop(
    void **state) {
  (void)state;
  dial_fx_t x;
  dial_fx_init(&x);
  dial(&x, "255.255.255.255:9"); /* asserts no call inside */
  uv_run(&x.loop, UV_RUN_DEFAULT);
  assert_int_equal(x.calls, 1);
  assert_int_equal(x.status, UV_ENETUNREACH);
  assert_int_equal(x.fd, -1);
  assert_string_equal(x.addr, "255.255.255.255:9");
  assert_non_null(strstr(x.why, "cannot connect"));
  assert_int_equal(uv_loop_close(&x.loop), 0);
}

static void net_dial_refuses_bad_arguments(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  tg_net_addr_t a = {.host = "", .port = 1};
  tg_net_dial_t *d = (tg_net_dial_t *)&a;
  assert_int_equal(tg_net_dial_start(&loop, &a, on_dialed, NULL, &d), -EINVAL);
  assert_null(d);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(net_addr_parses_host_port),
      cmocka_unit_test(net_addr_parses_bracketed_ipv6),
      cmocka_unit_test(net_addr_default_port_only_when_optional),
      cmocka_unit_test(net_addr_refuses_bad_ports),
      cmocka_unit_test(net_addr_refuses_bad_hosts),
      cmocka_unit_test(net_addr_host_length_is_capped),
      cmocka_unit_test(net_addr_formats_back),
      cmocka_unit_test(net_addr_numeric_to_sockaddr),
      cmocka_unit_test(net_dial_connects_to_a_listener),
      cmocka_unit_test(net_dial_reports_a_refused_connection),
      cmocka_unit_test(net_dial_cancel_reports_from_the_loop),
      cmocka_unit_test(net_dial_literals_skip_the_resolver),
      cmocka_unit_test(net_dial_a_literal_refused_at_once_reports_from_the_loop),
      cmocka_unit_test(net_dial_refuses_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
