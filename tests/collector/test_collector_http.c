/* The collector's HTTP layer (collector/http/http.h) on a real loop: clients
 * are plain sockets (and OpenSSL for HTTPS) in a second thread, the server
 * runs on the test's loop, every server is stopped and every loop closes
 * with no handle left. Certificates come from deploy/certs/tg-certs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "auth/authz.h"
#include "auth/crl.h"
#include "collector/http/http.h"
#include "common/clock.h"
#include "common/log.h"
#include "test_notice.h"
#include "test_proc.h"
#include "test_wait.h"

#define WAIT_MS 10000
#define MAX_BODY (64u * 1024)

static char g_certs[128];

static const char *cert_path(const char *dir, const char *file) {
  static char bufs[8][256];
  static int i;
  char *b = bufs[i++ % 8];
  snprintf(b, 256, "%s/%s/%s", g_certs, dir, file);
  return b;
}

/* --- the client thread ---------------------------------------------------- */

typedef struct client {
  uint16_t port;
  const char *from; /* the loopback address to connect from; NULL: any */
  const char *const *parts; /* written one by one, paced */
  size_t n_parts;
  bool tls;
  const char *cert, *key; /* client certificate, or NULL */
  /* Closes once the handler has the request, without reading. */
  bool close_when_handled;
  atomic_int *handled; /* the server side's count, for the above */
  uint8_t *resp;       /* all that came back until EOF */
  size_t resp_len;
  uv_async_t *wake; /* sent when done */
  atomic_bool done;
} client_t;

/* A connection to 127.0.0.1:|port| (or [::1]:|port| when |from| is an
 * IPv6 literal) from the address |from| (NULL: the kernel's choice). Linux
 * routes all of 127.0.0.0/8 to lo, so 127.0.0.2 is a second client
 * address on the same machine. */
static int tcp_connect_from(uint16_t port, const char *from) {
  bool v6 = from && strchr(from, ':');
  struct sockaddr_storage to = {0}, me = {0};
  socklen_t len;
  if (v6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&to, *b =
        (struct sockaddr_in6 *)&me;
    a->sin6_family = b->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    a->sin6_addr = in6addr_loopback;
    if (inet_pton(AF_INET6, from, &b->sin6_addr) != 1) return -1;
    len = sizeof(*a);
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&to, *b =
        (struct sockaddr_in *)&me;
    a->sin_family = b->sin_family = AF_INET;
    a->sin_port = htons(port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (from && inet_pton(AF_INET, from, &b->sin_addr) != 1) return -1;
    len = sizeof(*a);
  }
  int fd = socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct timeval tv = {.tv_sec = 10};
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if ((from && bind(fd, (struct sockaddr *)&me, len) != 0) ||
      connect(fd, (struct sockaddr *)&to, len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void pace(void) {
  struct timespec ts = {.tv_nsec = 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static void wait_handled(client_t *c) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (atomic_load(c->handled) == 0 && tg_test_now_ms() < deadline) pace();
}

static void append(client_t *c, const void *p, size_t n) {
  uint8_t *r = realloc(c->resp, c->resp_len + n + 1);
  if (!r) return;
  memcpy(r + c->resp_len, p, n);
  c->resp = r;
  c->resp_len += n;
  c->resp[c->resp_len] = 0;
}

static void run_plain(client_t *c, int fd) {
  for (size_t i = 0; i < c->n_parts; i++) {
    if (i) pace();
    if (write(fd, c->parts[i], strlen(c->parts[i])) < 0) return;
  }
  if (c->close_when_handled) {
    wait_handled(c);
    /* Reset, not FIN: a FIN alone is an HTTP half-close, after which the
     * client may still read its answer. */
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    return;
  }
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) append(c, buf, (size_t)n);
}

static void run_tls(client_t *c, int fd) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  SSL *ssl = NULL;
  if (!ctx) return;
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  if (SSL_CTX_load_verify_locations(ctx, cert_path("pki", "ca.pem"), NULL) !=
      1)
    goto out;
  if (c->cert &&
      (SSL_CTX_use_certificate_file(ctx, c->cert, SSL_FILETYPE_PEM) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx, c->key, SSL_FILETYPE_PEM) != 1))
    goto out;
  ssl = SSL_new(ctx);
  if (!ssl || SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1) goto out;
  for (size_t i = 0; i < c->n_parts; i++)
    if (SSL_write(ssl, c->parts[i], (int)strlen(c->parts[i])) <= 0) goto out;
  char buf[16384];
  int n;
  while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0) append(c, buf, (size_t)n);
out:
  ERR_clear_error();
  SSL_free(ssl);
  SSL_CTX_free(ctx);
}

static void *client_main(void *arg) {
  client_t *c = arg;
  int fd = tcp_connect_from(c->port, c->from);
  if (fd >= 0) {
    if (c->tls)
      run_tls(c, fd);
    else
      run_plain(c, fd);
    close(fd);
  }
  atomic_store(&c->done, true);
  uv_async_send(c->wake);
  return NULL;
}

/* --- the server side ------------------------------------------------------ */

enum mode { ANSWER_NOW, DEFER, DEFER_FOREVER, SEND_FILE, SEND_EXTENTS, INJECT };

typedef struct fixture {
  uv_loop_t loop;
  uv_async_t wake;
  uv_timer_t timer;
  tg_http_server_t *srv;
  enum mode mode;
  atomic_int handled;
  int abandoned;
  int respond_after_abandon;
  bool stopped;
  tg_http_exchange_t *pending;
  int file_fd;
  uint64_t file_size;
  const tg_http_extent_t *ext; /* SEND_EXTENTS: ranges of file_fd */
  size_t n_ext;
  int inject_rc[3];
  /* The last request, copied. */
  char method[16], path[256], query[256], identity[128], ctype[64];
  tg_authz_role_t role;
  char args[4][64];
  size_t n_args;
  bool tls;
  uint8_t *body;
  size_t body_len;
} fixture_t;

static void on_wake(uv_async_t *a) { (void)a; }

static void respond_ok(tg_http_exchange_t *x) {
  static const char body[] = "hello\n";
  assert_int_equal(tg_http_respond(x, 200, "text/plain", body, 6), 0);
  (void)body;
}

static void on_timer(uv_timer_t *t) {
  fixture_t *f = t->data;
  if (!f->pending) {
    f->respond_after_abandon++;
    return;
  }
  tg_http_exchange_t *x = f->pending;
  f->pending = NULL;
  respond_ok(x);
}

static void handler(void *ctx, tg_http_exchange_t *x,
                    const tg_http_request_t *req) {
  fixture_t *f = ctx;
  snprintf(f->method, sizeof(f->method), "%s", req->method);
  snprintf(f->path, sizeof(f->path), "%s", req->path);
  snprintf(f->query, sizeof(f->query), "%s", req->query);
  snprintf(f->identity, sizeof(f->identity), "%s", req->identity);
  f->role = req->role;
  snprintf(f->ctype, sizeof(f->ctype), "%s", req->content_type);
  f->n_args = req->n_args;
  for (size_t i = 0; i < req->n_args && i < 4; i++)
    snprintf(f->args[i], sizeof(f->args[i]), "%s", req->args[i]);
  f->tls = req->tls;
  free(f->body);
  f->body = malloc(req->body_len + 1);
  if (req->body_len) memcpy(f->body, req->body, req->body_len);
  f->body_len = req->body_len;
  switch (f->mode) {
    case ANSWER_NOW:
      respond_ok(x);
      break;
    case DEFER:
      f->pending = x;
      uv_timer_start(&f->timer, on_timer, 50, 0);
      break;
    case DEFER_FOREVER:
      f->pending = x;
      break;
    case SEND_FILE:
      assert_int_equal(tg_http_respond_file(x, 200, "application/octet-stream",
                                            f->file_fd, f->file_size,
                                            "trace-1.pftrace"),
                       0);
      f->file_fd = -1;
      break;
    case SEND_EXTENTS:
      assert_int_equal(tg_http_respond_extents(x, 200,
                                               "application/octet-stream",
                                               f->file_fd, f->ext, f->n_ext,
                                               "part.pftrace"),
                       0);
      f->file_fd = -1;
      break;
    case INJECT:
      f->inject_rc[0] =
          tg_http_add_header(x, "X-Test", "a\r\nSet-Cookie: evil=1");
      f->inject_rc[1] = tg_http_add_header(x, "Bad Name", "v");
      f->inject_rc[2] = tg_http_add_header(x, "Location", "/snapshots/1");
      respond_ok(x);
      break;
  }
  atomic_fetch_add(&f->handled, 1);
}

static void on_abandon(void *ctx, tg_http_exchange_t *x) {
  fixture_t *f = ctx;
  assert_ptr_equal(x, f->pending);
  f->pending = NULL;
  f->abandoned++;
}

static void on_stopped(void *ctx) { ((fixture_t *)ctx)->stopped = true; }

static void fixture_start_cfg(fixture_t *f,
                              const tg_http_server_config_t *cfg) {
  memset(f, 0, sizeof(*f));
  f->file_fd = -1;
  assert_int_equal(uv_loop_init(&f->loop), 0);
  assert_int_equal(uv_async_init(&f->loop, &f->wake, on_wake), 0);
  assert_int_equal(uv_timer_init(&f->loop, &f->timer), 0);
  f->timer.data = f;
  assert_int_equal(
      tg_http_server_start(&f->loop, cfg, handler, on_abandon, f, &f->srv), 0);
  assert_true(tg_http_server_port(f->srv) != 0);
}

/* Who has a role in the HTTPS tests: the identities the odd certificates
 * would forge ("rec") or spell ("rec/OU=ops") are listed too, so that a
 * refusal can only come from how the identity is read. */
static const char AUTHZ_TEXT[] =
    "alice record\nrec record\nbob observe\ncarol record\n"
    "rec.OU.ops record\n";

static tg_authz_t *authz_of(const char *text) {
  tg_authz_t *a = NULL;
  char err[256];
  assert_int_equal(tg_authz_parse(text, strlen(text), "test", &a, err,
                                  sizeof(err)),
                   0);
  return a;
}

/* The HTTPS part of a config: the pki CA, localhost's certificate,
 * AUTHZ_TEXT and no CRL. */
static void cfg_https(tg_http_server_config_t *cfg) {
  cfg->cert = cert_path("pki", "localhost.pem");
  cfg->key = cert_path("pki", "localhost.key");
  cfg->ca = cert_path("pki", "ca.pem");
  cfg->authz = authz_of(AUTHZ_TEXT);
}

static void fixture_start(fixture_t *f, bool tls) {
  tg_http_server_config_t cfg = {.host = "127.0.0.1",
                                 .max_body = MAX_BODY,
                                 .max_header = 8192,
                                 .max_conns = 16,
                                 .timeout_s = 5};
  if (tls) cfg_https(&cfg);
  fixture_start_cfg(f, &cfg);
}

static bool is_stopped(void *arg) { return ((fixture_t *)arg)->stopped; }

/* Stops the server, lets the loop run out and closes it: a handle left
 * behind fails uv_loop_close(). */
static void fixture_stop(fixture_t *f) {
  tg_http_server_stop(f->srv, on_stopped, f);
  f->srv = NULL;
  assert_true(tg_test_run_loop_until(&f->loop, is_stopped, f, WAIT_MS));
  uv_close((uv_handle_t *)&f->wake, NULL);
  uv_close((uv_handle_t *)&f->timer, NULL);
  /* With every handle closed the loop must end by itself. */
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  if (f->file_fd >= 0) close(f->file_fd);
  free(f->body);
}

static bool client_done(void *arg) { return atomic_load(&((client_t *)arg)->done); }

/* Runs |parts| through a client thread against |f|'s server until the
 * client is done; the response is in c->resp. */
static void exchange(fixture_t *f, client_t *c) {
  c->port = tg_http_server_port(f->srv);
  c->wake = &f->wake;
  c->handled = &f->handled;
  atomic_init(&c->done, false);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, client_main, c), 0);
  bool ok = tg_test_run_loop_until(&f->loop, client_done, c, WAIT_MS);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_true(ok);
}

static void client_free(client_t *c) { free(c->resp); }

#define PARTS(...)                                 \
  (const char *const[]) { __VA_ARGS__ }
#define N_PARTS(...) (sizeof(PARTS(__VA_ARGS__)) / sizeof(const char *))
#define CLIENT(...) \
  { .parts = PARTS(__VA_ARGS__), .n_parts = N_PARTS(__VA_ARGS__) }

static bool has_header(const client_t *c, const char *line) {
  const char *end = c->resp ? strstr((const char *)c->resp, "\r\n\r\n") : NULL;
  const char *at = c->resp ? strcasestr((const char *)c->resp, line) : NULL;
  return at && end && at < end;
}

static const char *body_of(const client_t *c) {
  const char *end = c->resp ? strstr((const char *)c->resp, "\r\n\r\n") : NULL;
  return end ? end + 4 : NULL;
}

/* --- one request, one answer: the table ----------------------------------- */

/* A case: one request to a fresh server (HTTPS with a client certificate
 * when |cert| is set) and what must come of it. Each case is a cmocka
 * test of its own name, so a failure says which. */
typedef struct http_case {
  const char *name;
  const char *request; /* sent in one write */
  /* Or a GET whose |pad_header| carries |pad| bytes of 'a'. */
  const char *pad_header;
  size_t pad;
  enum mode mode;
  bool tls;
  const char *cert_dir, *cert; /* client certificate |cert_dir|/|cert| */
  bool crl;                    /* pki's CRL loaded */
  int handled;                 /* requests the handler saw */
  /* The status line ("HTTP/1.1 200"); "": none came; NULL: not checked. */
  const char *status;
  bool silent;                 /* not a byte came back */
  bool one_answer;             /* no second status line after the first */
  const char *headers[4];      /* each within the answer's head */
  const char *absent;          /* nowhere in the answer, any case */
  const char *body;            /* the whole body */
  /* Anything else the case holds the handler's view or the server to. */
  void (*check)(fixture_t *f, const client_t *c);
} http_case_t;

static void check_path_and_query(fixture_t *f, const client_t *c) {
  (void)c;
  assert_string_equal(f->method, "GET");
  assert_string_equal(f->path, "/api/snapshots");
  assert_string_equal(f->query, "host=a&limit=10&q=two words");
  assert_int_equal(f->n_args, 3);
  assert_string_equal(f->args[2], "q=two words");
  assert_string_equal(f->identity, "");
  assert_false(f->tls);
}

static void check_empty_args_skipped(fixture_t *f, const client_t *c) {
  (void)c;
  assert_int_equal(f->n_args, 2);
  assert_string_equal(f->args[0], "limit=0");
  assert_string_equal(f->args[1], "host=b");
  assert_string_equal(f->query, "limit=0&host=b");
}

static void check_injection_refused(fixture_t *f, const client_t *c) {
  (void)c;
  assert_int_equal(f->inject_rc[0], -EINVAL);
  assert_int_equal(f->inject_rc[1], -EINVAL);
  assert_int_equal(f->inject_rc[2], 0);
}

static void check_path_decoded(fixture_t *f, const client_t *c) {
  (void)c;
  assert_string_equal(f->path, "/api/v1/snapshots/0000000000000001");
}

static void check_alice_over_tls(fixture_t *f, const client_t *c) {
  (void)c;
  assert_string_equal(f->identity, "alice");
  assert_true(f->tls);
}

static void check_one_peer_refused(fixture_t *f, const client_t *c) {
  (void)c;
  tg_http_server_stats_t st;
  tg_http_server_stats(f->srv, &st);
  assert_int_equal(st.refused_peers, 1);
}

static void check_rec_records(fixture_t *f, const client_t *c) {
  (void)c;
  assert_string_equal(f->identity, "rec");
  assert_int_equal(f->role, TG_ROLE_RECORD);
}

#define AMP16 "&&&&&&&&&&&&&&&&"
#define GET_X "GET /api/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
#define GET_ME "GET /api/me HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
/* Over HTTPS as |dir|/|name| (NULL: no certificate). */
#define TLS_AS(dir, name) .tls = true, .cert_dir = (dir), .cert = (name)

static const http_case_t HTTP_CASES[] = {
    {.name = "http_get_passes_path_and_query",
     .request = "GET /api/snapshots?host=a&limit=10&q=two%20words "
                "HTTP/1.1\r\nHost: x\r\nOrigin: http://ui.test\r\n"
                "Connection: close\r\n\r\n",
     .handled = 1,
     .status = "HTTP/1.1 200",
     .headers = {"content-length: 6\r\n", "cache-control: no-store\r\n",
                 "x-content-type-options: nosniff\r\n"},
     .body = "hello\n",
     .check = check_path_and_query},
    /* An empty argument ("?&limit=0", "a=1&&b=2", a trailing '&') carries
     * nothing, and what follows it still arrives: counting arguments up to
     * the first empty one once handed the owner no arguments for
     * "?&limit=0". */
    {.name = "http_empty_query_arguments_hide_nothing",
     .request = "GET /api/snapshots?&limit=0&&host=b& HTTP/1.1\r\n"
                "Host: x\r\nConnection: close\r\n\r\n",
     .handled = 1,
     .check = check_empty_args_skipped},
    /* Empty ones still count toward the 64: 64 of them and one more
     * argument are over the limit, not handled. */
    {.name = "http_empty_query_arguments_count_toward_the_limit",
     .request = "GET /api/snapshots?" AMP16 AMP16 AMP16 AMP16
                "limit=0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
     .handled = 0,
     .status = "HTTP/1.1 414"},
    {.name = "http_body_over_max_gets_413_unhandled",
     .request = "POST /api/upload HTTP/1.1\r\nHost: x\r\n"
                "Content-Length: 1000000\r\n\r\n",
     .handled = 0,
     .status = "HTTP/1.1 413",
     .headers = {"x-content-type-options: nosniff\r\n"}},
    {.name = "http_header_injection_refused",
     .request = GET_X,
     .mode = INJECT,
     .handled = 1,
     .headers = {"location: /snapshots/1\r\n"},
     .absent = "set-cookie",
     .check = check_injection_refused},
    /* Content-Length and Transfer-Encoding together: lws frames the body
     * by the length, so what a proxy took for the end of a chunked body
     * would be a request of its own here. Refused whole: one answer,
     * nothing handled. */
    {.name = "http_transfer_encoding_gets_400_unhandled",
     .request = "POST /api/v1/snapshots HTTP/1.1\r\nHost: x\r\n"
                "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                "0\r\n\r\n"
                "POST /api/v1/snapshots?reason=hidden HTTP/1.1\r\nHost: x\r\n"
                "Content-Length: 0\r\nConnection: close\r\n\r\n",
     .handled = 0,
     .status = "HTTP/1.1 400",
     .one_answer = true},
    {.name = "http_transfer_encoding_alone_gets_400_unhandled",
     .request = "POST /api/x HTTP/1.1\r\nHost: x\r\n"
                "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     .handled = 0,
     .status = "HTTP/1.1 400"},
    /* The headers lws knows over max_header (8192 here): 431, unhandled
     * (lws closed the connection without a word). A head of headers lws
     * does not know, over max_header but within its buffer, cannot be
     * measured with lws 4.1's API and is served (docs/security.md). A head
     * past lws's buffer, twice max_header, is still closed unanswered,
     * however it is made up. */
    {.name = "http_head_within_max_header_is_served",
     .pad_header = "User-Agent", .pad = 8000,
     .handled = 1, .status = "HTTP/1.1 200"},
    {.name = "http_head_over_max_header_gets_431",
     .pad_header = "User-Agent", .pad = 8300,
     .handled = 0, .status = "HTTP/1.1 431"},
    {.name = "http_cookie_over_max_header_gets_431",
     .pad_header = "Cookie", .pad = 12000,
     .handled = 0, .status = "HTTP/1.1 431"},
    {.name = "http_unknown_header_over_max_header_is_served",
     .pad_header = "X-Padding", .pad = 12000,
     .handled = 1, .status = "HTTP/1.1 200"},
    {.name = "http_head_past_the_buffer_closes_unanswered",
     .pad_header = "X-Padding", .pad = 40000,
     .handled = 0, .status = ""},
    /* lws percent-decodes the path while it parses the request line,
     * before any callback: the handler (and so the id parser) sees the
     * decoded text, one spelling per id once decoded (docs/collector.md,
     * ids; docs/security.md). */
    {.name = "http_path_reaches_the_handler_percent_decoded",
     .request = "GET /api/v1/snapshots/%30%30%30%30000000000001 "
                "HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
     .handled = 1,
     .check = check_path_decoded},
    {.name = "https_client_cert_gives_identity",
     .request = GET_ME,
     TLS_AS("pki", "alice"), .handled = 1, .status = "HTTP/1.1 200",
     .check = check_alice_over_tls},
    /* The handshake fails: nothing reaches the handler, nothing comes
     * back. */
    {.name = "https_refuses_peer_without_cert",
     .request = GET_ME,
     TLS_AS(NULL, NULL), .handled = 0, .silent = true},
    {.name = "https_refuses_cert_of_another_ca",
     .request = GET_ME,
     TLS_AS("other", "eve"), .handled = 0, .silent = true},
    /* A certificate's identity is its one CN attribute, read as the relay
     * reads it: a subject without a CN whose O is "Example/CN=rec" names
     * nobody, two CNs name nobody (both refused by the layer with 403, the
     * handler never called), and "CN=rec, OU=ops" names exactly "rec". */
    {.name = "https_identity_without_cn_gets_403",
     .request = GET_ME,
     TLS_AS("pki", "nocn"),
     .handled = 0, .status = "HTTP/1.1 403", .check = check_one_peer_refused},
    {.name = "https_identity_of_two_cns_gets_403",
     .request = GET_ME,
     TLS_AS("pki", "twocn"),
     .handled = 0, .status = "HTTP/1.1 403", .check = check_one_peer_refused},
    {.name = "https_identity_is_the_one_cn_attribute",
     .request = GET_ME,
     TLS_AS("pki", "ou"), .handled = 1,
     .check = check_rec_records},
    /* With a CRL, a revoked certificate gets 403 and its identity's role
     * nothing; one the CRL does not list is served. */
    {.name = "https_revoked_cert_refused_with_crl",
     .request = GET_X,
     TLS_AS("pki", "carol"), .crl = true,
     .handled = 0, .status = "HTTP/1.1 403"},
    {.name = "https_unrevoked_cert_served_with_crl",
     .request = GET_X,
     TLS_AS("pki", "alice"), .crl = true,
     .handled = 1, .status = "HTTP/1.1 200"},
};

#define N_HTTP_CASES (sizeof(HTTP_CASES) / sizeof(HTTP_CASES[0]))

/* Starts |k|'s server: fixture_start()'s, or with the CRL an HTTPS one
 * with the default limits and a 5 s timeout. */
static void case_server_start(fixture_t *f, const http_case_t *k) {
  if (!k->crl) {
    fixture_start(f, k->tls);
    return;
  }
  tg_http_server_config_t cfg = {.host = "127.0.0.1", .timeout_s = 5};
  cfg_https(&cfg);
  char err[256];
  assert_int_equal(tg_crl_load(cert_path("pki", "crl.pem"),
                               cert_path("pki", "ca.pem"), &cfg.crl, err,
                               sizeof(err)),
                   0);
  fixture_start_cfg(f, &cfg);
}

/* |k|'s request, built when it is a padded GET; *owned is what to free. */
static const char *case_request(const http_case_t *k, char **owned) {
  *owned = NULL;
  if (!k->pad_header) return k->request;
  char *req = malloc(k->pad + 256);
  assert_non_null(req);
  int n = snprintf(req, 256, "GET /api/x HTTP/1.1\r\nHost: x\r\n"
                             "Connection: close\r\n%s: ", k->pad_header);
  memset(req + n, 'a', k->pad);
  snprintf(req + n + k->pad, 256, "\r\n\r\n");
  *owned = req;
  return req;
}

static void http_case_run(void **state) {
  const http_case_t *k = *state;
  fixture_t f;
  case_server_start(&f, k);
  f.mode = k->mode;
  char *owned;
  const char *parts[] = {case_request(k, &owned)};
  client_t c = {.parts = parts, .n_parts = 1, .tls = k->tls};
  char file[64];
  if (k->cert) {
    snprintf(file, sizeof(file), "%s.pem", k->cert);
    c.cert = cert_path(k->cert_dir, file);
    snprintf(file, sizeof(file), "%s.key", k->cert);
    c.key = cert_path(k->cert_dir, file);
  }
  exchange(&f, &c);
  assert_int_equal(atomic_load(&f.handled), k->handled);
  if (k->silent) assert_null(c.resp);
  if (k->status && !k->status[0])
    assert_true(!c.resp || c.resp_len < 12);
  else if (k->status) {
    assert_non_null(c.resp);
    assert_memory_equal(c.resp, k->status, 12);
  }
  if (k->one_answer)
    assert_null(strstr((const char *)c.resp + 12, "HTTP/1.1"));
  for (size_t i = 0; i < 4 && k->headers[i]; i++)
    if (!has_header(&c, k->headers[i]))
      fail_msg("%s: no header %s", k->name, k->headers[i]);
  if (k->absent)
    assert_null(strcasestr(c.resp ? (const char *)c.resp : "", k->absent));
  if (k->body) assert_string_equal(body_of(&c), k->body);
  if (k->check) k->check(&f, &c);
  client_free(&c);
  free(owned);
  fixture_stop(&f);
}

/* --- plain HTTP ------------------------------------------------------------- */

static void http_post_body_arrives_whole_across_writes(void **state) {
  (void)state;
  fixture_t f;
  fixture_start(&f, false);
  static char a[4000], b[4000], d[2000];
  memset(a, 'a', sizeof(a) - 1);
  memset(b, 'b', sizeof(b) - 1);
  memset(d, 'd', sizeof(d) - 1);
  client_t c = CLIENT("POST /api/upload HTTP/1.1\r\nHost: x\r\n"
                      "Content-Type: application/octet-stream\r\n"
                      "Content-Length: 9996\r\nConnection: close\r\n\r\n",
                      a, b, d);
  exchange(&f, &c);
  assert_int_equal(atomic_load(&f.handled), 1);
  assert_string_equal(f.method, "POST");
  assert_string_equal(f.ctype, "application/octet-stream");
  assert_int_equal(f.body_len, 9996);
  assert_memory_equal(f.body, a, 3999);
  assert_memory_equal(f.body + 3999, b, 3999);
  assert_memory_equal(f.body + 7998, d, 1998);
  assert_memory_equal(c.resp, "HTTP/1.1 200", 12);
  client_free(&c);
  fixture_stop(&f);
}

static void http_deferred_response_arrives(void **state) {
  (void)state;
  fixture_t f;
  fixture_start(&f, false);
  f.mode = DEFER;
  int64_t t0 = tg_test_now_ms();
  client_t c = CLIENT("GET /api/slow HTTP/1.1\r\nHost: x\r\n"
                      "Connection: close\r\n\r\n");
  exchange(&f, &c);
  assert_true(tg_test_now_ms() - t0 >= 45);
  assert_int_equal(f.abandoned, 0);
  assert_memory_equal(c.resp, "HTTP/1.1 200", 12);
  assert_string_equal(body_of(&c), "hello\n");
  client_free(&c);
  fixture_stop(&f);
}

static bool was_abandoned(void *arg) {
  return ((fixture_t *)arg)->abandoned > 0;
}

static void http_client_reset_while_deferred_abandons_once(void **state) {
  (void)state;
  fixture_t f;
  fixture_start(&f, false);
  f.mode = DEFER_FOREVER;
  client_t c = CLIENT("GET /api/slow HTTP/1.1\r\nHost: x\r\n\r\n");
  c.close_when_handled = true;
  exchange(&f, &c);
  assert_true(tg_test_run_loop_until(&f.loop, was_abandoned, &f, WAIT_MS));
  assert_null(f.pending);
  /* Whatever would have answered finds nothing to answer. */
  uv_timer_start(&f.timer, on_timer, 1, 0);
  uv_run(&f.loop, UV_RUN_ONCE);
  assert_int_equal(f.respond_after_abandon, 1);
  assert_int_equal(f.abandoned, 1);
  client_free(&c);
  fixture_stop(&f);
}

static void http_file_arrives_byte_exact(void **state) {
  (void)state;
  fixture_t f;
  fixture_start(&f, false);
  const size_t size = 3u * 1024 * 1024 + 12345;
  char path[] = "/tmp/tg-test-http-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  uint8_t *data = malloc(size);
  for (size_t i = 0; i < size; i++) data[i] = (uint8_t)(i * 131 + (i >> 13));
  assert_int_equal(write(fd, data, size), (ssize_t)size);
  f.mode = SEND_FILE;
  f.file_fd = fd;
  f.file_size = size;
  client_t c = CLIENT("GET /api/snapshots/1/file HTTP/1.1\r\nHost: x\r\n"
                      "Connection: close\r\n\r\n");
  exchange(&f, &c);
  assert_int_equal(f.file_fd, -1);
  char want[64];
  snprintf(want, sizeof(want), "content-length: %zu\r\n", size);
  assert_true(has_header(&c, want));
  assert_true(has_header(
      &c, "content-disposition: attachment; filename=\"trace-1.pftrace\"\r\n"));
  assert_true(has_header(&c, "x-content-type-options: nosniff\r\n"));
  const char *body = body_of(&c);
  assert_non_null(body);
  assert_int_equal(c.resp_len - (size_t)((const uint8_t *)body - c.resp), size);
  assert_memory_equal(body, data, size);
  free(data);
  client_free(&c);
  fixture_stop(&f);
}

/* Ranges of a file, one after another: empty ones skipped, ranges
 * smaller and larger than the layer's chunk, one crossing chunks; the
 * body is their bytes in order and Content-Length their sum. */
static void http_extents_arrive_in_order(void **state) {
  (void)state;
  fixture_t f;
  fixture_start(&f, false);
  const size_t size = 1024 * 1024;
  char path[] = "/tmp/tg-test-http-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  uint8_t *data = malloc(size);
  for (size_t i = 0; i < size; i++) data[i] = (uint8_t)(i * 131 + (i >> 13));
  assert_int_equal(write(fd, data, size), (ssize_t)size);
  const tg_http_extent_t ext[] = {
      {0, 100, false},         {500, 0, false},    {1000, 300000, false},
      {400000, 1, false},      {400001, 0, false}, {600000, 424576, false},
      {10, 5, false}};
  size_t want_len = 0;
  for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
    want_len += ext[i].len;
  uint8_t *want = malloc(want_len);
  for (size_t i = 0, k = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
    memcpy(want + k, data + ext[i].off, ext[i].len);
    k += ext[i].len;
  }
  f.mode = SEND_EXTENTS;
  f.file_fd = fd;
  f.ext = ext;
  f.n_ext = sizeof(ext) / sizeof(ext[0]);
  client_t c = CLIENT("GET /api/snapshots/1/part HTTP/1.1\r\nHost: x\r\n"
                      "Connection: close\r\n\r\n");
  exchange(&f, &c);
  assert_int_equal(f.file_fd, -1);
  char hdr[64];
  snprintf(hdr, sizeof(hdr), "content-length: %zu\r\n", want_len);
  assert_true(has_header(&c, hdr));
  const char *body = body_of(&c);
  assert_non_null(body);
  assert_int_equal(c.resp_len - (size_t)((const uint8_t *)body - c.resp),
                   want_len);
  assert_memory_equal(body, want, want_len);
  free(want);
  free(data);
  client_free(&c);
  fixture_stop(&f);
}

static bool was_handled(void *arg) {
  return atomic_load(&((fixture_t *)arg)->handled) > 0;
}

static void http_stop_abandons_deferred_and_loop_ends(void **state) {
  (void)state;
  fixture_t f;
  fixture_start(&f, false);
  f.mode = DEFER_FOREVER;
  client_t c = CLIENT("GET /api/slow HTTP/1.1\r\nHost: x\r\n\r\n");
  c.port = tg_http_server_port(f.srv);
  c.wake = &f.wake;
  c.handled = &f.handled;
  atomic_init(&c.done, false);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, client_main, &c), 0);
  assert_true(tg_test_run_loop_until(&f.loop, was_handled, &f, WAIT_MS));
  assert_non_null(f.pending);
  /* fixture_stop() asserts the loop ends and closes clean. */
  tg_http_server_stop(f.srv, on_stopped, &f);
  f.srv = NULL;
  assert_int_equal(f.abandoned, 0); /* never inside stop() */
  assert_true(tg_test_run_loop_until(&f.loop, is_stopped, &f, WAIT_MS));
  assert_int_equal(f.abandoned, 1);
  assert_null(f.pending);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_true(atomic_load(&c.done));
  assert_null(c.resp); /* the connection closed without an answer */
  uv_close((uv_handle_t *)&f.wake, NULL);
  uv_close((uv_handle_t *)&f.timer, NULL);
  assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  free(f.body);
  client_free(&c);
}

/* A reader that takes a little now and then, never enough. */
typedef struct slow_reader {
  uint16_t port;
  uint64_t got;
  bool closed; /* the server ended it (EOF or reset) */
  uv_async_t *wake;
  atomic_bool done;
} slow_reader_t;

static void *slow_reader_main(void *arg) {
  static const char req[] =
      "GET /api/snapshots/1/trace HTTP/1.1\r\nHost: x\r\n\r\n";
  slow_reader_t *r = arg;
  int fd = tcp_connect_from(r->port, NULL);
  if (fd >= 0) {
    if (write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1) {
      int64_t deadline = tg_test_now_ms() + 2 * WAIT_MS;
      char buf[64 * 1024];
      while (tg_test_now_ms() < deadline) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) {
          r->closed = n == 0 || errno == ECONNRESET;
          break;
        }
        r->got += (uint64_t)n;
        struct timespec ts = {.tv_nsec = 16 * 1000 * 1000};
        nanosleep(&ts, NULL);
      }
    }
    close(fd);
  }
  atomic_store(&r->done, true);
  uv_async_send(r->wake);
  return NULL;
}

static bool reader_done(void *arg) {
  return atomic_load(&((slow_reader_t *)arg)->done);
}

/* Under min_rate the download ends, though the reader takes some of it
 * every few milliseconds (each write used to restart the timeout). */
static void http_slow_reader_closed_under_min_rate(void **state) {
  (void)state;
  fixture_t f;
  tg_http_server_config_t cfg = {.host = "127.0.0.1",
                                 .max_conns = 4,
                                 .timeout_s = 1,
                                 .min_rate = 32u << 20};
  fixture_start_cfg(&f, &cfg);
  const uint64_t size = 256ull << 20; /* sparse: reads as zeros */
  char path[] = "/tmp/tg-test-http-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(ftruncate(fd, (off_t)size), 0);
  f.mode = SEND_FILE;
  f.file_fd = fd;
  f.file_size = size;
  slow_reader_t r = {.port = tg_http_server_port(f.srv), .wake = &f.wake};
  atomic_init(&r.done, false);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, slow_reader_main, &r), 0);
  bool ok = tg_test_run_loop_until(&f.loop, reader_done, &r, 3 * WAIT_MS);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_true(ok);
  assert_true(r.closed);
  assert_true(r.got < size);
  fixture_stop(&f);
}

/* --- connections per source ---------------------------------------------- */

typedef struct conns_wait {
  fixture_t *f;
  bool busy; /* count the busy ones (a request in progress), not all */
  unsigned n;
} conns_wait_t;

static bool conns_are(void *arg) {
  conns_wait_t *w = arg;
  tg_http_server_stats_t st;
  tg_http_server_stats(w->f->srv, &st);
  return (w->busy ? st.busy : st.conns) == w->n;
}

/* Runs |f|'s loop until the server counts |n| open connections. */
static bool wait_conns(fixture_t *f, unsigned n) {
  conns_wait_t w = {f, false, n};
  return tg_test_run_loop_until(&f->loop, conns_are, &w, WAIT_MS);
}

/* Whether the server closed the connection |*fd| (EOF or a reset),
 * without blocking. */
static bool peer_closed(void *arg) {
  int fd = *(int *)arg;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, 0) <= 0) return false;
  char b;
  ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* A connection from |from| that the server closes as soon as it is
 * accepted (over a cap). */
static void assert_refused_from(fixture_t *f, uint16_t port,
                                const char *from) {
  int fd = tcp_connect_from(port, from);
  assert_true(fd >= 0);
  assert_true(tg_test_run_loop_until(&f->loop, peer_closed, &fd, WAIT_MS));
  close(fd);
}

static const char *const GET_CLOSE[] = {
    "GET /api/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"};

/* A GET_CLOSE over HTTPS presenting pki/|name|.pem. */
static client_t tls_client(const char *name) {
  char file[64];
  client_t c = {.parts = GET_CLOSE, .n_parts = 1, .tls = true};
  snprintf(file, sizeof(file), "%s.pem", name);
  c.cert = cert_path("pki", file);
  snprintf(file, sizeof(file), "%s.key", name);
  c.key = cert_path("pki", file);
  return c;
}

/* A full GET from |from|; true when it is answered 200. */
static bool get_from(fixture_t *f, const char *from) {
  client_t c = {.from = from, .parts = GET_CLOSE, .n_parts = 1};
  exchange(f, &c);
  bool ok = c.resp && c.resp_len >= 12 && !memcmp(c.resp, "HTTP/1.1 200", 12);
  client_free(&c);
  return ok;
}

/* |n| connections from |from| that send nothing, in order (the first is
 * the idlest), each counted by the server before the next. */
static void open_idle(fixture_t *f, const char *from, int *fds, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    fds[i] = tcp_connect_from(tg_http_server_port(f->srv), from);
    assert_true(fds[i] >= 0);
    assert_true(wait_conns(f, i + 1));
  }
}

/* A connection from |from| whose request is in progress (its body still
 * to come), so that it is never the idle one a newcomer replaces; the
 * server counts |busy_after| such when this returns. */
static int busy_from(fixture_t *f, const char *from, unsigned busy_after) {
  static const char head[] =
      "POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";
  int fd = tcp_connect_from(tg_http_server_port(f->srv), from);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, head, sizeof(head) - 1), (ssize_t)sizeof(head) - 1);
  conns_wait_t w = {f, true, busy_after};
  assert_true(tg_test_run_loop_until(&f->loop, conns_are, &w, WAIT_MS));
  return fd;
}

static void http_caps_connections_per_source(void **state) {
  (void)state;
  fixture_t f;
  tg_http_server_config_t cfg = {.host = "127.0.0.1",
                                 .max_conns = 8,
                                 .max_conns_per_source = 2,
                                 .timeout_s = 60};
  fixture_start_cfg(&f, &cfg);
  uint16_t port = tg_http_server_port(f.srv);
  /* The source holds two connections, each in the middle of a request. */
  int busy[2];
  for (int i = 0; i < 2; i++) busy[i] = busy_from(&f, "127.0.0.2", i + 1);
  /* Its third is closed by the server at once: none is idle to replace. */
  assert_refused_from(&f, port, "127.0.0.2");
  assert_false(peer_closed(&busy[0]));
  assert_false(peer_closed(&busy[1]));
  /* It lets one go: once the server has released it, a new one from it
   * is served. */
  close(busy[0]);
  assert_true(wait_conns(&f, 1));
  assert_true(get_from(&f, "127.0.0.2"));
  assert_int_equal(atomic_load(&f.handled), 1);
  tg_http_server_stats_t st;
  tg_http_server_stats(f.srv, &st);
  assert_int_equal(st.refused_per_source, 1);
  assert_int_equal(st.refused_max_conns, 0);
  assert_int_equal(st.evicted, 0);
  /* Stops clean with busy[1] still open (fixture_stop() closes the loop). */
  fixture_stop(&f);
  close(busy[1]);
}

/* Every slot held by connections that send nothing: a new client is still
 * served, in place of the one idle the longest. */
static void http_full_listener_serves_new_client(void **state) {
  (void)state;
  fixture_t f;
  tg_http_server_config_t cfg = {.host = "127.0.0.1",
                                 .max_conns = 3,
                                 .max_conns_per_source = 3,
                                 .timeout_s = 60};
  fixture_start_cfg(&f, &cfg);
  int idle[3];
  open_idle(&f, "127.0.0.1", idle, 3);
  assert_true(get_from(&f, "127.0.0.1"));
  assert_int_equal(atomic_load(&f.handled), 1);
  /* The oldest idle one made room; the others are untouched. */
  assert_true(tg_test_run_loop_until(&f.loop, peer_closed, &idle[0], WAIT_MS));
  assert_false(peer_closed(&idle[1]));
  assert_false(peer_closed(&idle[2]));
  tg_http_server_stats_t st;
  tg_http_server_stats(f.srv, &st);
  assert_int_equal(st.evicted, 1);
  assert_int_equal(st.refused_per_source + st.refused_max_conns, 0);
  fixture_stop(&f);
  for (int i = 0; i < 3; i++) close(idle[i]);
}

/* A keep-alive response read on |fd| as it comes, without blocking. */
typedef struct {
  int fd;
  char buf[512];
  size_t len;
} reply_t;

static bool reply_complete(void *arg) {
  reply_t *r = arg;
  ssize_t n = recv(r->fd, r->buf + r->len, sizeof(r->buf) - 1 - r->len,
                   MSG_DONTWAIT);
  if (n > 0) r->len += (size_t)n;
  r->buf[r->len] = 0;
  return strstr(r->buf, "\r\n\r\nhello\n") != NULL;
}

/* Which connection is idle the longest is the server's clock's to say
 * (tg_http_server_config_t.clock), not the order they came in: A came
 * first but finished a request after B and C came, so B (then C) is the
 * one a newcomer replaces. On a simulated clock the ages are exact; on
 * the real one all of this happens within a millisecond or two. */
static void http_idle_age_is_read_on_the_servers_clock(void **state) {
  (void)state;
  fixture_t f;
  tg_clock_sim_t clock;
  tg_clock_sim_init(&clock, 1000000);
  tg_http_server_config_t cfg = {.host = "127.0.0.1",
                                 .max_conns = 3,
                                 .max_conns_per_source = 3,
                                 .timeout_s = 60,
                                 .clock = &clock.clock};
  fixture_start_cfg(&f, &cfg);
  int fds[3];
  open_idle(&f, "127.0.0.1", fds, 1);
  tg_clock_sim_advance_ms(&clock, 10000);
  for (unsigned i = 1; i < 3; i++) { /* B and C, counted in turn */
    fds[i] = tcp_connect_from(tg_http_server_port(f.srv), "127.0.0.1");
    assert_true(fds[i] >= 0);
    assert_true(wait_conns(&f, i + 1));
  }
  tg_clock_sim_advance_ms(&clock, 10000);
  static const char get[] = "GET /api/x HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(write(fds[0], get, sizeof(get) - 1), (ssize_t)sizeof(get) - 1);
  reply_t r = {.fd = fds[0]};
  assert_true(tg_test_run_loop_until(&f.loop, reply_complete, &r, WAIT_MS));
  tg_clock_sim_advance_ms(&clock, 10000);
  assert_true(get_from(&f, "127.0.0.1"));
  assert_true(tg_test_run_loop_until(&f.loop, peer_closed, &fds[1], WAIT_MS));
  assert_false(peer_closed(&fds[0]));
  assert_false(peer_closed(&fds[2]));
  tg_http_server_stats_t st;
  tg_http_server_stats(f.srv, &st);
  assert_int_equal(st.evicted, 1);
  fixture_stop(&f);
  for (int i = 0; i < 3; i++) close(fds[i]);
}

/* A connection-cap case: a server with these limits; connections from
 * |busy| (in order), each in the middle of a request so that none is the
 * idle one a newcomer replaces; then one from |newcomer|, which the server
 * must close at once while the busy ones stay open; then its counts. Each
 * case is a cmocka test of its own name. */
typedef struct cap_case {
  const char *name;
  const char *host;
  unsigned max_conns, max_conns_per_source;
  const char *busy[3]; /* NULL ends */
  const char *newcomer;
  unsigned refused_per_source;
  int refused_max_conns; /* -1: not checked */
  int conns;             /* -1: not checked */
} cap_case_t;

static const cap_case_t CAP_CASES[] = {
    /* 127.0.0.0/8 is one machine, where any user binds any of its
     * addresses: one source, whichever address a connection comes from. */
    {.name = "http_loopback_addresses_are_one_source",
     .host = "127.0.0.1", .max_conns = 8, .max_conns_per_source = 2,
     .busy = {"127.0.0.2", "127.0.0.3"}, .newcomer = "127.0.0.4",
     .refused_per_source = 1, .refused_max_conns = -1, .conns = 2},
    {.name = "http_caps_ipv6_source",
     .host = "::1", .max_conns = 2, .max_conns_per_source = 1,
     .busy = {"::1"}, .newcomer = "::1",
     .refused_per_source = 1, .refused_max_conns = -1, .conns = 1},
    /* Over max_conns it is max_conns: a source may then fill the listener,
     * and the one connection after that is refused by the per-source cap
     * (checked first), which unclamped would have let it through to
     * max_conns. */
    {.name = "http_per_source_cap_clamps_to_max_conns",
     .host = "127.0.0.1", .max_conns = 2, .max_conns_per_source = 100,
     .busy = {"127.0.0.3", "127.0.0.3"}, .newcomer = "127.0.0.4",
     .refused_per_source = 1, .refused_max_conns = 0, .conns = -1},
    /* Unset: a quarter of max_conns, here 1. */
    {.name = "http_per_source_cap_defaults_to_a_quarter",
     .host = "127.0.0.1", .max_conns = 7, .max_conns_per_source = 0,
     .busy = {"127.0.0.3"}, .newcomer = "127.0.0.3",
     .refused_per_source = 1, .refused_max_conns = -1, .conns = -1},
};

#define N_CAP_CASES (sizeof(CAP_CASES) / sizeof(CAP_CASES[0]))

/* Whether this host can bind [::1] (a container may have no IPv6). */
static bool have_ipv6_loopback(void) {
  int probe = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                           .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  bool ok = probe >= 0 && bind(probe, (struct sockaddr *)&a, sizeof(a)) == 0;
  if (probe >= 0) close(probe);
  return ok;
}

static void cap_case_run(void **state) {
  const cap_case_t *k = *state;
  if (strchr(k->host, ':') && !have_ipv6_loopback()) skip();
  fixture_t f;
  tg_http_server_config_t cfg = {.host = k->host,
                                 .max_conns = k->max_conns,
                                 .max_conns_per_source = k->max_conns_per_source,
                                 .timeout_s = 60};
  fixture_start_cfg(&f, &cfg);
  int held[3];
  unsigned n = 0;
  for (; n < 3 && k->busy[n]; n++) held[n] = busy_from(&f, k->busy[n], n + 1);
  assert_refused_from(&f, tg_http_server_port(f.srv), k->newcomer);
  for (unsigned i = 0; i < n; i++) assert_false(peer_closed(&held[i]));
  tg_http_server_stats_t st;
  tg_http_server_stats(f.srv, &st);
  assert_int_equal(st.refused_per_source, k->refused_per_source);
  if (k->refused_max_conns >= 0)
    assert_int_equal(st.refused_max_conns, k->refused_max_conns);
  if (k->conns >= 0) assert_int_equal(st.conns, k->conns);
  fixture_stop(&f);
  for (unsigned i = 0; i < n; i++) close(held[i]);
}

typedef struct warnings {
  int n;           /* COLLECTOR_HTTP_SOURCE_LIMIT lines */
  char last[256];
} warnings_t;

static void count_warnings(void *ctx, tg_log_level_t level, const char *line) {
  warnings_t *w = ctx;
  if (level != TG_LOG_WARN ||
      !strstr(line, TG_NOTE(COLLECTOR_HTTP_SOURCE_LIMIT)))
    return;
  w->n++;
  snprintf(w->last, sizeof(w->last), "%s", line);
}

/* A dual-stack listener sees IPv4 clients as IPv4-mapped IPv6 addresses:
 * they are counted as their IPv4 address, here loopback's one source.
 * Refusals in a burst are each counted, and warned about once. */
static void http_per_source_refusals_warn_once_as_loopback(void **state) {
  (void)state;
  fixture_t f;
  tg_http_server_config_t cfg = {.host = "::ffff:127.0.0.1",
                                 .max_conns = 4,
                                 .max_conns_per_source = 1,
                                 .timeout_s = 60};
  fixture_start_cfg(&f, &cfg);
  uint16_t port = tg_http_server_port(f.srv);
  warnings_t w = {0};
  tg_log_set_level(TG_LOG_WARN);
  tg_log_set_sink(count_warnings, &w);
  int held = busy_from(&f, "127.0.0.5", 1);
  for (int i = 0; i < 3; i++) assert_refused_from(&f, port, "127.0.0.5");
  tg_log_set_sink(NULL, NULL);
  tg_log_set_level(TG_LOG_ERROR);
  tg_http_server_stats_t st;
  tg_http_server_stats(f.srv, &st);
  assert_int_equal(st.refused_per_source, 3);
  assert_int_equal(w.n, 1);
  /* Counted as IPv4 loopback, not as the mapped IPv6 address. */
  assert_notice_with(w.last, TG_N_COLLECTOR_HTTP_SOURCE_LIMIT, " loopback ");
  fixture_stop(&f);
  close(held);
}

static void http_start_refuses_per_source_out_of_range(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  tg_http_server_config_t cfg = {.host = "127.0.0.1",
                                 .max_conns_per_source = 65536};
  tg_http_server_t *s = (tg_http_server_t *)&loop;
  assert_int_equal(
      tg_http_server_start(&loop, &cfg, handler, on_abandon, NULL, &s),
      -EINVAL);
  assert_null(s);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* --- HTTPS ------------------------------------------------------------------ */

/* Connections that never start their handshake hold their source's
 * slots: a client that does is still served, in place of the idlest, and
 * gets through its handshake and its answer. */
static void https_handshakeless_connections_make_room(void **state) {
  (void)state;
  fixture_t f;
  tg_http_server_config_t cfg = {.host = "127.0.0.1",
                                 .max_conns = 8,
                                 .max_conns_per_source = 2,
                                 .timeout_s = 60};
  cfg_https(&cfg);
  fixture_start_cfg(&f, &cfg);
  int idle[2];
  open_idle(&f, "127.0.0.2", idle, 2);
  client_t c = tls_client("alice");
  exchange(&f, &c);
  assert_non_null(c.resp);
  assert_memory_equal(c.resp, "HTTP/1.1 200", 12);
  assert_string_equal(f.identity, "alice");
  client_free(&c);
  assert_true(tg_test_run_loop_until(&f.loop, peer_closed, &idle[0], WAIT_MS));
  assert_false(peer_closed(&idle[1]));
  tg_http_server_stats_t st;
  tg_http_server_stats(f.srv, &st);
  assert_int_equal(st.evicted, 1);
  assert_int_equal(st.refused_per_source, 0);
  fixture_stop(&f);
  for (int i = 0; i < 2; i++) close(idle[i]);
}

static void http_start_refuses_half_tls_config(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  tg_http_server_config_t cfg = {.host = "127.0.0.1",
                                 .cert = cert_path("pki", "localhost.pem")};
  tg_http_server_t *s = (tg_http_server_t *)&loop;
  assert_int_equal(
      tg_http_server_start(&loop, &cfg, handler, on_abandon, NULL, &s),
      -EINVAL);
  assert_null(s);
  assert_int_equal(uv_loop_close(&loop), 0);
}

typedef struct answered_wait {
  fixture_t *f;
  int handled;
} answered_wait_t;

/* The handler had |handled| requests and every answer is written. */
static bool answered(void *arg) {
  answered_wait_t *w = arg;
  tg_http_server_stats_t st;
  tg_http_server_stats(w->f->srv, &st);
  return atomic_load(&w->f->handled) == w->handled && st.busy == 0;
}

/* New access tables end the open connections of the identities they no
 * longer list, and a new connection of theirs gets 403; the others go on. */
static void https_set_access_ends_removed_identities(void **state) {
  (void)state;
  static const char *const keep_alive[] = {
      "GET /api/me HTTP/1.1\r\nHost: x\r\n\r\n"};
  fixture_t f;
  fixture_start(&f, true);
  client_t c = {.parts = keep_alive,
                .n_parts = 1,
                .tls = true,
                .cert = cert_path("pki", "alice.pem"),
                .key = cert_path("pki", "alice.key"),
                .port = tg_http_server_port(f.srv),
                .wake = &f.wake,
                .handled = &f.handled};
  atomic_init(&c.done, false);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, client_main, &c), 0);
  answered_wait_t w = {&f, 1};
  assert_true(tg_test_run_loop_until(&f.loop, answered, &w, WAIT_MS));
  assert_false(atomic_load(&c.done)); /* kept alive, reading */
  assert_int_equal(
      tg_http_server_set_access(f.srv, authz_of("bob observe\n"), NULL), 1);
  bool ok = tg_test_run_loop_until(&f.loop, client_done, &c, WAIT_MS);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_true(ok);
  assert_non_null(c.resp);
  assert_memory_equal(c.resp, "HTTP/1.1 200", 12);
  assert_null(strstr((const char *)c.resp + 12, "HTTP/1.1"));
  client_free(&c);
  tg_http_server_stats_t st;
  tg_http_server_stats(f.srv, &st);
  assert_int_equal(st.ended_by_reload, 1);
  /* alice again: 403, unhandled; bob: served as an observer. */
  client_t a = tls_client("alice");
  exchange(&f, &a);
  assert_non_null(a.resp);
  assert_memory_equal(a.resp, "HTTP/1.1 403", 12);
  assert_int_equal(atomic_load(&f.handled), 1);
  client_free(&a);
  client_t b = tls_client("bob");
  exchange(&f, &b);
  assert_non_null(b.resp);
  assert_memory_equal(b.resp, "HTTP/1.1 200", 12);
  assert_string_equal(f.identity, "bob");
  assert_int_equal(f.role, TG_ROLE_OBSERVE);
  client_free(&b);
  /* Plain tables are refused on an HTTPS server's behalf: NULL authz. */
  assert_int_equal(tg_http_server_set_access(f.srv, NULL, NULL), -EINVAL);
  fixture_stop(&f);
}

/* A client certificate of the pki CA with subject |subj|, as NAME.pem and
 * NAME.key, made with openssl (tg-certs makes only CN=NAME ones). */
static int odd_cert(const char *name, const char *subj) {
  static const char script[] =
      "set -e; cd \"$0\"; "
      "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
      "-keyout \"$1.key\" -subj \"$2\" -out \"$1.csr\" 2>/dev/null; "
      "printf 'extendedKeyUsage=clientAuth\\n' >\"$1.ext\"; "
      "openssl x509 -req -in \"$1.csr\" -CA ca.pem -CAkey ca.key "
      "-CAcreateserial -days 2 -extfile \"$1.ext\" -out \"$1.pem\" "
      "2>/dev/null";
  char dir[256];
  snprintf(dir, sizeof(dir), "%s/pki", g_certs);
  const char *argv[] = {"sh", "-c", script, dir, name, subj, NULL};
  tg_test_spawn_t sp = TG_TEST_SPAWN_INIT;
  sp.path = "/bin/sh";
  sp.argv = argv;
  sp.stdin_fd = TG_TEST_FD_DEVNULL;
  pid_t pid = tg_test_spawn(&sp);
  return pid > 0 && tg_test_reap(pid, 60000) == 0 ? 0 : -1;
}

static int certs_setup(void **state) {
  (void)state;
  static const char *const steps[] = {
      "ca pki", "host pki localhost --ip 127.0.0.1", "client pki alice",
      "client pki bob", "client pki carol", "revoke pki carol",
      "ca other", "client other eve"};
  /* Only errors: lws's warnings about refused peers are expected here. */
  tg_log_set_level(TG_LOG_ERROR);
  if (tg_test_mkdtemp(g_certs, sizeof(g_certs), "http") < 0) return -1;
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
    if (tg_test_certs(g_certs, steps[i]) < 0) return -1;
  if (odd_cert("nocn", "/O=Example\\/CN=rec") < 0 ||
      odd_cert("twocn", "/CN=rec/CN=alice") < 0 ||
      odd_cert("ou", "/CN=rec/OU=ops") < 0)
    return -1;
  return 0;
}

static int certs_teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_certs) < 0 ? -1 : 0;
}

int main(void) {
  static const struct CMUnitTest others[] = {
      cmocka_unit_test(http_post_body_arrives_whole_across_writes),
      cmocka_unit_test(http_deferred_response_arrives),
      cmocka_unit_test(http_client_reset_while_deferred_abandons_once),
      cmocka_unit_test(http_file_arrives_byte_exact),
      cmocka_unit_test(http_extents_arrive_in_order),
      cmocka_unit_test(http_slow_reader_closed_under_min_rate),
      cmocka_unit_test(http_stop_abandons_deferred_and_loop_ends),
      cmocka_unit_test(http_start_refuses_half_tls_config),
      cmocka_unit_test(http_caps_connections_per_source),
      cmocka_unit_test(http_per_source_refusals_warn_once_as_loopback),
      cmocka_unit_test(http_full_listener_serves_new_client),
      cmocka_unit_test(http_idle_age_is_read_on_the_servers_clock),
      cmocka_unit_test(http_start_refuses_per_source_out_of_range),
      cmocka_unit_test(https_handshakeless_connections_make_room),
      cmocka_unit_test(https_set_access_ends_removed_identities),
  };
  enum { N_OTHERS = sizeof(others) / sizeof(others[0]) };
  struct CMUnitTest tests[N_HTTP_CASES + N_CAP_CASES + N_OTHERS];
  size_t n = 0;
  for (size_t i = 0; i < N_HTTP_CASES; i++)
    tests[n++] = (struct CMUnitTest){.name = HTTP_CASES[i].name,
                                     .test_func = http_case_run,
                                     .initial_state = (void *)&HTTP_CASES[i]};
  for (size_t i = 0; i < N_CAP_CASES; i++)
    tests[n++] = (struct CMUnitTest){.name = CAP_CASES[i].name,
                                     .test_func = cap_case_run,
                                     .initial_state = (void *)&CAP_CASES[i]};
  memcpy(tests + n, others, sizeof(others));
  return _cmocka_run_group_tests("test_collector_http", tests, n + N_OTHERS,
                                 certs_setup, certs_teardown);
}
