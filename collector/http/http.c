/* The HTTP server's lifecycle, its connections and requests coming in.
 * Responses going out are http_respond.c's.
 *
 * lws runs on the owner's loop as a foreign loop (lws_context_creation_info
 * .foreign_loops with LWS_SERVER_OPTION_LIBUV) and calls on_lws() for
 * everything; this file must never read lws's private structures nor parse
 * HTTP itself: what it knows of a request, it asks lws through
 * lws_hdr_copy() and friends.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/http/http_internal.h"
#include "common/decimal.h"
#include "common/log.h"
#include "common/printable.h"
#include "tracegate/error.h"

#define DEFAULT_MAX_BODY (64u * 1024)
#define DEFAULT_MAX_HEADER (8u * 1024)
#define DEFAULT_MAX_CONNS 64u
#define DEFAULT_TIMEOUT_S 30u
#define DEFAULT_MIN_RATE 4096u
/* More URI arguments than this are refused (414). */
#define MAX_ARGS 64

static const char *const method_names[] = {
    [LWSHUMETH_GET] = "GET",         [LWSHUMETH_POST] = "POST",
    [LWSHUMETH_OPTIONS] = "OPTIONS", [LWSHUMETH_PUT] = "PUT",
    [LWSHUMETH_PATCH] = "PATCH",     [LWSHUMETH_DELETE] = "DELETE",
    [LWSHUMETH_HEAD] = "HEAD",
};

static tg_http_server_t *server_of(struct lws *wsi) {
  return lws_context_user(lws_get_context(wsi));
}

/* --- lws's log into ours ---------------------------------------------------- */

/* lws's lines end in '\n'; its errors concern peers or its own setup, which
 * start() reports again as an error of its own, so both levels are warnings
 * here (and tests that raise the threshold to errors stay quiet). */
static void lws_log_emit(int level, const char *line) {
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
  TG_WARN("lws%s: %.*s", (level & LLL_ERR) ? " error" : "", (int)n, line);
}

/* Copies header |h| into the arena at *at; "" if absent. */
static const char *copy_hdr(struct lws *wsi, enum lws_token_indexes h,
                            char **at, const char *end) {
  char *dst = *at;
  int n = lws_hdr_total_length(wsi, h);
  if (n <= 0 || n >= end - dst ||
      lws_hdr_copy(wsi, dst, (int)(end - dst), h) != n)
    n = 0;
  dst[n] = '\0';
  *at = dst + n + 1;
  return dst;
}

/* The length of query argument |i| (the URI's fragment: lws decodes and
 * splits at '&'), or -1 when the query has no such argument. An empty one
 * ("?&a=1" starts with one) counts: lws_hdr_fragment_length() says 0 for
 * it and for one that is not there alike, so that counting up to the first
 * 0 took "?&limit=0" for no arguments at all; lws_hdr_copy_fragment() tells
 * the two apart. */
static int arg_len(struct lws *wsi, int i) {
  int n = lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_URI_ARGS, i);
  if (n > 0) return n;
  char nul;
  return lws_hdr_copy_fragment(wsi, &nul, 1, WSI_TOKEN_HTTP_URI_ARGS, i) < 0 ? -1
                                                                            : 0;
}

/* The exchange for the request whose headers lws just parsed, with every
 * string it will hand the owner copied into one arena (lws reuses its
 * header storage once the body starts). NULL: out of memory or a request
 * lws could not describe (refused by the caller). */
static tg_http_exchange_t *x_new(tg_http_conn_t *conn, int method,
                                 const char *uri, int uri_len) {
  tg_http_server_t *srv = conn->srv;
  struct lws *wsi = conn->wsi;
  enum lws_token_indexes hs[] = {WSI_TOKEN_HTTP_CONTENT_TYPE,
                                 WSI_TOKEN_ORIGIN, WSI_TOKEN_HOST};
  size_t cap = (size_t)uri_len + 1 + sizeof(conn->identity);
  for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
    int n = lws_hdr_total_length(wsi, hs[i]);
    if (n > 0) cap += (size_t)n;
    cap++;
  }
  int n_frags = 0;
  for (int n; n_frags < MAX_ARGS && (n = arg_len(wsi, n_frags)) >= 0; n_frags++)
    cap += 2 * ((size_t)n + 1); /* in args and in query */
  cap++;

  tg_http_exchange_t *x = calloc(1, sizeof(*x));
  char *s = malloc(cap);
  const char **args = calloc((size_t)n_frags + 1, sizeof(*args));
  if (!x || !s || !args) {
    free(x);
    free(s);
    free(args);
    return NULL;
  }
  x->srv = srv;
  x->wsi = wsi;
  x->fd = -1;
  x->fd2 = -1;
  x->strings = s;
  x->args = args;
  tg_list_init(&x->node);
  const char *end = s + cap;
  char *at = s;

  x->req.method = method_names[method];
  x->head = method == LWSHUMETH_HEAD;
  memcpy(at, uri, (size_t)uri_len);
  at[uri_len] = '\0';
  x->req.path = at;
  at += uri_len + 1;
  x->req.content_type = copy_hdr(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, &at, end);
  x->req.origin = copy_hdr(wsi, WSI_TOKEN_ORIGIN, &at, end);
  x->req.host = copy_hdr(wsi, WSI_TOKEN_HOST, &at, end);

  int n_args = 0;
  for (int i = 0; i < n_frags; i++) {
    int n = lws_hdr_copy_fragment(wsi, at, (int)(end - at),
                                  WSI_TOKEN_HTTP_URI_ARGS, i);
    /* "a=1&&b=2": nothing between the two. lws 4.1 hands a trailing '&'
     * ("a=1&") over as an argument "/" (its path normaliser runs on the
     * last fragment): nothing either, and no handler takes an argument
     * "/" of its own. */
    if (n <= 0 || (n == 1 && at[0] == '/')) continue;
    at[n] = '\0';
    args[n_args++] = at;
    at += n + 1;
  }
  x->req.args = args;
  x->req.n_args = (size_t)n_args;
  char *q = at;
  for (int i = 0; i < n_args; i++) {
    size_t n = strlen(args[i]);
    if (i) *at++ = '&';
    memcpy(at, args[i], n);
    at += n;
  }
  *at++ = '\0';
  x->req.query = q;

  x->req.tls = lws_is_ssl(wsi) != 0;
  /* Judged by on_request() before anything is handed over. */
  char *id = at;
  snprintf(id, sizeof(conn->identity), "%s",
           x->req.tls && conn->peer == TG_HTTP_PEER_OK ? conn->identity : "");
  x->req.role = x->req.tls ? conn->role : TG_ROLE_NONE;
  x->req.identity = id;
  tg_list_insert_tail(&srv->exchanges, &x->node);
  return x;
}

/* Hands a complete request to the owner. */
static int x_dispatch(tg_http_exchange_t *x) {
  tg_http_server_t *srv = x->srv;
  /* Stopping: the owner hears of no request any more (http.h); the body
   * that completed meanwhile closes the connection. */
  if (srv->state != TG_HTTP_RUNNING) return -1;
  x->req.body = x->body_len ? x->body : NULL;
  x->req.body_len = x->body_len;
  tg__http_x_set(x, TG_HTTP_X_OWNED, "request complete");
  /* The owner may take its time (a snapshot): that is not the client's
   * slowness, so no lws timeout runs while the exchange is the owner's. A
   * client whose connection breaks (reset) meanwhile is seen by lws and
   * the exchange abandoned; one that only half-closes (FIN) may still be
   * reading, so it keeps its exchange until the answer's write fails. */
  lws_set_timeout(x->wsi, NO_PENDING_TIMEOUT, 0);
  srv->handler(srv->ctx_arg, x, &x->req);
  return 0;
}

/* The layer answers |x| itself (400, 403, 413, 414) and closes the
 * connection after it. */
static int x_refuse(tg_http_exchange_t *x, int status, const char *why) {
  static const char body[] = "request refused\n";
  TG_DEBUG("http: %s %s refused: %s", x->req.method, x->req.path, why);
  tg__http_x_set(x, TG_HTTP_X_OWNED, why); /* respond() takes owned ones */
  int rc = tg_http_respond(x, status, "text/plain", body, sizeof(body) - 1);
  if (rc < 0) return -1;
  tg__http_x_set(x, TG_HTTP_X_REFUSING, why);
  return 0;
}

/* The bytes of the request's head that lws kept: the request line's URI
 * and every header it stores, values only (lws keeps no names, no
 * separators). */
static size_t head_bytes(struct lws *wsi) {
  size_t n = 0;
  for (int t = 0; t < WSI_TOKEN_COUNT; t++) {
    int len = lws_hdr_total_length(wsi, (enum lws_token_indexes)t);
    if (len > 0) n += (size_t)len;
  }
  return n;
}

/* Parses the Content-Length lws already validated for its own framing. */
static int content_length(struct lws *wsi, uint64_t *out) {
  char v[32];
  *out = 0;
  int n = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH);
  if (n <= 0) return 0;
  if (n >= (int)sizeof(v) ||
      lws_hdr_copy(wsi, v, sizeof(v), WSI_TOKEN_HTTP_CONTENT_LENGTH) != n)
    return -1;
  return tg_decimal_u64(v, UINT64_MAX, out) < 0 ? -1 : 0;
}

/* --- HTTPS peers: identity, revocation, role --------------------------------- */

/* The DER of the certificate OpenSSL verified for |wsi|'s peer into *der
 * (malloc'd): > 0 its length, 0 none yet (still in its handshake), -1 out
 * of memory. */
static int peer_der(struct lws *wsi, unsigned char **der) {
  *der = NULL;
  SSL *ssl = lws_get_ssl(wsi);
  X509 *cert = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
  if (!cert) return 0;
  int n = i2d_X509(cert, NULL);
  if (n <= 0) return -1;
  unsigned char *buf = malloc((size_t)n), *p = buf;
  if (!buf || i2d_X509(cert, &p) != n) {
    free(buf);
    return -1;
  }
  *der = buf;
  return n;
}

/* Judges |conn|'s peer against the access tables in force, once per
 * table: its identity (the relay's rule, auth/crl.h), the CRL, its role.
 * Policy only; the callers refuse or end the connection. */
static tg_http_peer_t conn_judge(tg_http_conn_t *conn) {
  tg_http_server_t *s = conn->srv;
  if (conn->peer != TG_HTTP_PEER_UNKNOWN && conn->judged_gen == s->access_gen)
    return conn->peer;
  unsigned char *der;
  int n = peer_der(conn->wsi, &der);
  if (n <= 0) return TG_HTTP_PEER_UNKNOWN;
  const char *why = NULL;
  int rv = tg_cert_check_der(der, (size_t)n, s->crl, conn->identity, &why);
  free(der);
  if (rv == -ENOMEM) return TG_HTTP_PEER_UNKNOWN;
  conn->role = rv == 0 ? tg_authz_role(s->authz, conn->identity) : TG_ROLE_NONE;
  if (rv == 0 && conn->role == TG_ROLE_NONE)
    why = "its identity has no role in the authorization file";
  conn->judged_gen = s->access_gen;
  conn->peer = conn->role != TG_ROLE_NONE ? TG_HTTP_PEER_OK
                                          : TG_HTTP_PEER_REFUSED;
  conn->refused_why = why;
  if (conn->peer == TG_HTTP_PEER_REFUSED) {
    s->refused_peers++;
    char peer[64] = "?", shown[TG_CERT_IDENTITY_SIZE];
    lws_get_peer_simple(conn->wsi, peer, sizeof(peer));
    tg_printable(shown, sizeof(shown), conn->identity);
    TG_WARN("http: TLS peer %s (identity '%s') refused: %s", peer, shown, why);
  }
  return conn->peer;
}

/* LWS_CALLBACK_HTTP: a request's headers are in. */
static int on_request(struct lws *wsi) {
  tg_http_conn_t *conn = lws_get_opaque_user_data(wsi);
  if (!conn || conn->x || conn->srv->state != TG_HTTP_RUNNING) return -1;
  tg_http_server_t *srv = conn->srv;
  char *uri;
  int uri_len;
  int m = lws_http_get_uri_and_method(wsi, &uri, &uri_len);
  if (m < 0 || (size_t)m >= sizeof(method_names) / sizeof(method_names[0]) ||
      !method_names[m] || uri_len < 0)
    return -1;
  /* OpenSSL verified the chain in the handshake, so a TLS connection has
   * its peer's certificate by now. */
  tg_http_peer_t peer = lws_is_ssl(wsi) ? conn_judge(conn) : TG_HTTP_PEER_OK;
  if (peer == TG_HTTP_PEER_UNKNOWN) {
    TG_WARN("http: a TLS peer without a certificate, or out of memory; "
            "connection closed");
    return -1;
  }
  tg_http_exchange_t *x = x_new(conn, m, uri, uri_len);
  if (!x) {
    TG_WARN("http: out of memory for a request; connection closed");
    return -1;
  }
  conn->x = x;
  tg__http_x_set(x, TG_HTTP_X_READING, "headers in");
  if (head_bytes(wsi) > srv->max_header)
    return x_refuse(x, 431, "request head over max_header");
  if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0)
    return x_refuse(x, 400, "Transfer-Encoding (only Content-Length frames "
                            "a body here)");
  if (peer == TG_HTTP_PEER_REFUSED) return x_refuse(x, 403, conn->refused_why);
  if (arg_len(wsi, MAX_ARGS) >= 0)
    return x_refuse(x, 414, "more than 64 query arguments");
  uint64_t len;
  if (content_length(wsi, &len) < 0) return x_refuse(x, 400, "bad length");
  if (len > srv->max_body) {
    char why[64];
    snprintf(why, sizeof(why), "body of %llu bytes over %zu",
             (unsigned long long)len, srv->max_body);
    return x_refuse(x, 413, why);
  }
  if (len == 0) return x_dispatch(x);
  x->body = malloc((size_t)len);
  if (!x->body) return -1;
  x->body_expected = (size_t)len;
  return 0;
}

/* LWS_CALLBACK_HTTP_BODY: the next piece of the body. */
static int on_body(struct lws *wsi, const void *in, size_t len) {
  tg_http_conn_t *conn = lws_get_opaque_user_data(wsi);
  tg_http_exchange_t *x = conn ? conn->x : NULL;
  if (!x) return -1;
  if (x->state != TG_HTTP_X_READING) return 0; /* refused: dropped */
  if (len > x->body_expected - x->body_len) return -1;
  memcpy(x->body + x->body_len, in, len);
  x->body_len += len;
  return 0;
}

/* LWS_CALLBACK_HTTP_BODY_COMPLETION. */
static int on_body_done(struct lws *wsi) {
  tg_http_conn_t *conn = lws_get_opaque_user_data(wsi);
  tg_http_exchange_t *x = conn ? conn->x : NULL;
  if (!x) return -1;
  if (x->state != TG_HTTP_X_READING) return 0;
  if (x->body_len != x->body_expected) return -1;
  return x_dispatch(x);
}

/* LWS_CALLBACK_HTTP_WRITEABLE with an exchange on the connection. */
static int on_writeable(struct lws *wsi, tg_http_conn_t *conn) {
  tg_http_exchange_t *x = conn->x;
  bool refused = x->state == TG_HTTP_X_REFUSING;
  int rc = tg__http_x_write(x);
  if (rc == 0) return 0;
  /* Sent or failed: the connection is free for the next request, or
   * closes (after a refusal the rest of the request is not read). */
  conn->x = NULL;
  conn->idle_since_ms = tg_clock_ms(conn->srv->clock);
  tg__http_x_free(x);
  if (rc < 0 || refused) return -1;
  return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* --- TLS peers ---------------------------------------------------------------- */

/* LWS_CALLBACK_OPENSSL_PERFORM_CLIENT_CERT_VERIFICATION. lws documents
 * that returning 0 accepts the certificate whatever OpenSSL found, so
 * OpenSSL's verdict is passed on here: 1 refuses. */
static int verify_peer(X509_STORE_CTX *store, int preverify_ok) {
  if (preverify_ok) return 0;
  char subject[256] = "?";
  X509 *cert = X509_STORE_CTX_get_current_cert(store);
  if (cert)
    X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof(subject));
  char shown[256];
  tg_printable(shown, sizeof(shown), subject);
  TG_DEBUG("http: TLS peer certificate %s refused: %s", shown,
           X509_verify_cert_error_string(X509_STORE_CTX_get_error(store)));
  return 1;
}

/* LWS_CALLBACK_SSL_INFO for SSL_CB_ALERT: a fatal alert we send is a
 * refused handshake (no certificate, an unknown CA, an old protocol). */
static void on_ssl_alert(struct lws *wsi, const struct lws_ssl_info *si) {
  if (!(si->where & SSL_CB_WRITE) || (si->ret >> 8) != SSL3_AL_FATAL) return;
  char peer[64] = "?";
  lws_get_peer_simple(wsi, peer, sizeof(peer));
  TG_WARN("http: TLS peer %s refused: %s", peer,
          SSL_alert_desc_string_long(si->ret));
}

/* --- the lws callback ------------------------------------------------------- */

static int on_lws(struct lws *wsi, enum lws_callback_reasons reason,
                  void *user, void *in, size_t len) {
  tg_http_conn_t *conn;
  switch (reason) {
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
      /* |user| is the vhost's SSL_CTX. */
      if (SSL_CTX_set_min_proto_version(user, TLS1_2_VERSION) != 1) {
        TG_ERROR("http: cannot require TLS 1.2");
        return 1;
      }
      return 0;
    case LWS_CALLBACK_OPENSSL_PERFORM_CLIENT_CERT_VERIFICATION:
      return verify_peer(user, (int)len);
    case LWS_CALLBACK_SSL_INFO:
      on_ssl_alert(wsi, in);
      return 0;
    case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
      /* lws documents |in| as the accepted socket's descriptor; |wsi| is
       * still the listener's. */
      return tg__http_on_accept(server_of(wsi), (int)(intptr_t)in);
    case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
      tg__http_on_instantiated(server_of(wsi), wsi);
      return 0;
    case LWS_CALLBACK_HTTP:
      return on_request(wsi);
    case LWS_CALLBACK_HTTP_BODY:
      return on_body(wsi, in, len);
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
      return on_body_done(wsi);
    case LWS_CALLBACK_HTTP_WRITEABLE:
      conn = lws_get_opaque_user_data(wsi);
      if (!conn || !conn->x) return 0;
      return on_writeable(wsi, conn);
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
      return -1; /* no websockets, no h2c: hang up */
    case LWS_CALLBACK_CLOSED_HTTP:
      conn = lws_get_opaque_user_data(wsi);
      if (conn) tg__http_conn_drop_exchange(conn, "connection closed");
      return 0;
    case LWS_CALLBACK_WSI_DESTROY:
      tg__http_on_destroyed(wsi);
      return 0;
    default:
      return 0;
  }
}

/* --- start and stop -------------------------------------------------------- */

static int check_readable(const char *what, const char *path) {
  if (access(path, R_OK) == 0) return 0;
  int err = -errno;
  TG_ERROR("http: %s %s: %s", what, path, strerror(-err));
  return err;
}

static void on_stopper_closed(uv_handle_t *h) {
  tg_http_server_t *s = TG_CONTAINER_OF(h, tg_http_server_t, stopper);
  void (*done)(void *) = s->done;
  void *arg = s->done_arg;
  tg_authz_free(s->authz);
  tg_crl_free(s->crl);
  free(s->sources);
  free(s);
  if (done) done(arg);
}

static void count_closing(uv_handle_t *h, void *arg) {
  if (uv_is_closing(h)) ++*(unsigned *)arg;
}

/* True when no handle on the loop waits for its close callback (lws's
 * last closes have run). A handle of the owner's closing meanwhile only
 * makes this wait one iteration more. */
static bool loop_settled(uv_loop_t *loop) {
  unsigned n = 0;
  uv_walk(loop, count_closing, &n);
  return n == 0;
}

/* Runs each loop iteration while stopping; an idle handle, so that the
 * loop never blocks while lws still has closes to finish. lws 4.1 on a
 * foreign loop takes two lws_context_destroy() calls (as its
 * minimal-http-server-eventlib-foreign example does): the first closes
 * every connection and starts closing lws's handles on the loop, the
 * second, once those closes have run, frees the context and writes NULL
 * through info.pcontext. Both run here, outside any lws callback. */
static void on_stopper(uv_idle_t *h) {
  tg_http_server_t *s = TG_CONTAINER_OF(h, tg_http_server_t, stopper);
  if (s->state == TG_HTTP_STOPPING) {
    s->state = TG_HTTP_DRAINING;
    lws_context_destroy(s->ctx);
    return;
  }
  if (!loop_settled(s->loop)) return;
  if (s->ctx) {
    lws_context_destroy(s->ctx);
    return; /* whatever it closed runs its callbacks first */
  }
  /* lws closed every connection, each abandoning its exchange. */
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->exchanges) {
    tg_http_exchange_t *x = TG_CONTAINER_OF(it, tg_http_exchange_t, node);
    if (x->state == TG_HTTP_X_OWNED) s->on_abandon(s->ctx_arg, x);
    tg__http_x_free(x);
  }
  uv_idle_stop(h);
  uv_close((uv_handle_t *)h, on_stopper_closed);
}

static void begin_stop(tg_http_server_t *s, void (*done)(void *), void *arg) {
  s->state = TG_HTTP_STOPPING;
  s->done = done;
  s->done_arg = arg;
  uv_idle_init(s->loop, &s->stopper);
  uv_idle_start(&s->stopper, on_stopper);
}

void tg_http_server_stop(tg_http_server_t *s, void (*done)(void *), void *ctx) {
  if (!s) return;
  TG_DEBUG("http: stopping the server on port %u", s->port);
  begin_stop(s, done, ctx);
}

uint16_t tg_http_server_port(const tg_http_server_t *s) { return s->port; }

void tg_http_server_stats(const tg_http_server_t *s,
                          tg_http_server_stats_t *out) {
  unsigned busy = 0;
  const tg_list_t *it;
  for (it = s->conns.next; it != &s->conns; it = it->next)
    busy += TG_CONTAINER_OF(it, tg_http_conn_t, node)->x != NULL;
  *out = (tg_http_server_stats_t){.conns = s->n_conns,
                                  .busy = busy,
                                  .refused_per_source = s->refused_per_source,
                                  .refused_max_conns = s->refused_max_conns,
                                  .evicted = s->evicted,
                                  .refused_peers = s->refused_peers,
                                  .ended_by_reload = s->ended_by_reload};
}

int tg_http_server_set_access(tg_http_server_t *s, tg_authz_t *authz,
                              tg_crl_t *crl) {
  if (!s || !s->authz || !authz) return -EINVAL;
  tg_authz_free(s->authz);
  tg_crl_free(s->crl);
  s->authz = authz;
  s->crl = crl;
  s->access_gen++;
  int ended = 0;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->conns) {
    tg_http_conn_t *c = TG_CONTAINER_OF(it, tg_http_conn_t, node);
    if (conn_judge(c) != TG_HTTP_PEER_REFUSED) continue;
    /* From the loop, not inside this call: ending it may abandon an
     * exchange, which calls the owner back. */
    lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
    ended++;
  }
  s->ended_by_reload += (uint64_t)ended;
  TG_INFO("http: access tables replaced: %zu identit%s, %s; %d connection(s) "
          "no longer allowed end", tg_authz_count(authz),
          tg_authz_count(authz) == 1 ? "y" : "ies", crl ? "a CRL" : "no CRL",
          ended);
  return ended;
}

static int check_config(const tg_http_server_config_t *cfg) {
  int n_tls = !!cfg->cert + !!cfg->key + !!cfg->ca;
  if (n_tls != 0 && n_tls != 3) {
    TG_ERROR("http: cert, key and ca go together (%d of 3 given)", n_tls);
    return -EINVAL;
  }
  if ((n_tls == 3) != !!cfg->authz || (n_tls == 0 && cfg->crl)) {
    TG_ERROR("http: HTTPS needs an authorization table, plain HTTP takes "
             "neither it nor a CRL");
    return -EINVAL;
  }
  if (cfg->max_header > 65535 || cfg->max_conns > 65535 ||
      cfg->max_conns_per_source > 65535 || cfg->timeout_s > 86400 ||
      cfg->max_body > ((size_t)1 << 40)) {
    TG_ERROR("http: a limit is out of range");
    return -EINVAL;
  }
  int rc = 0;
  if (n_tls == 3 && ((rc = check_readable("certificate", cfg->cert)) ||
                     (rc = check_readable("key", cfg->key)) ||
                     (rc = check_readable("CA", cfg->ca))))
    return rc;
  return 0;
}

int tg_http_server_start(uv_loop_t *loop, const tg_http_server_config_t *cfg,
                         tg_http_handler_fn handler,
                         tg_http_abandon_fn on_abandon, void *ctx,
                         tg_http_server_t **out) {
  *out = NULL;
  if (!loop || !cfg || !handler || !on_abandon) return -EINVAL;
  int rc = check_config(cfg);
  if (rc < 0) return rc;
  tg_http_server_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->loop = loop;
  s->clock = cfg->clock ? cfg->clock : &tg_clock_monotonic;
  s->handler = handler;
  s->on_abandon = on_abandon;
  s->ctx_arg = ctx;
  s->max_body = cfg->max_body ? cfg->max_body : DEFAULT_MAX_BODY;
  s->max_header = cfg->max_header ? cfg->max_header : DEFAULT_MAX_HEADER;
  s->max_conns = cfg->max_conns ? cfg->max_conns : DEFAULT_MAX_CONNS;
  s->timeout_s = cfg->timeout_s ? cfg->timeout_s : DEFAULT_TIMEOUT_S;
  s->min_rate = cfg->min_rate ? cfg->min_rate : DEFAULT_MIN_RATE;
  s->max_per_source = cfg->max_conns_per_source;
  if (s->max_per_source == 0)
    s->max_per_source = s->max_conns / 4 ? s->max_conns / 4 : 1;
  if (s->max_per_source > s->max_conns) {
    TG_WARN("http: max_conns_per_source %u is over max_conns: %u used",
            s->max_per_source, s->max_conns);
    s->max_per_source = s->max_conns;
  }
  s->sources = calloc(2 * (size_t)s->max_conns, sizeof(*s->sources));
  if (!s->sources) {
    free(s);
    return -ENOMEM;
  }
  tg_list_init(&s->exchanges);
  tg_list_init(&s->conns);
  s->protocols[0] = (struct lws_protocols){.name = "http", .callback = on_lws};
  /* Every response, lws's own refusals included, says nosniff. */
  s->nosniff = (struct lws_protocol_vhost_options){
      .name = "X-Content-Type-Options:", .value = "nosniff"};

  lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_emit);

  void *loops[1] = {loop};
  struct lws_context_creation_info ci;
  memset(&ci, 0, sizeof(ci));
  ci.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
               LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN |
               LWS_SERVER_OPTION_SKIP_SERVER_CANONICAL_NAME;
  if (cfg->cert) ci.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
  ci.foreign_loops = loops;
  ci.pcontext = &s->ctx;
  ci.user = s;
  ci.port = CONTEXT_PORT_NO_LISTEN;
  /* lws closes a request whose head overflows its buffer without an
   * answer: twice the limit, so that a head over it is still parsed and
   * answered 431 (on_request), and only one over twice closed. */
  ci.max_http_header_data2 = (unsigned)(2 * s->max_header);
  ci.max_http_header_pool2 = s->max_conns;
  /* lws reads TLS into this buffer, one SSL_read a time the socket is
   * readable: smaller than a TLS record (16 KiB of plaintext), it leaves
   * the rest of a record inside OpenSSL, where no poll sees it, and a
   * body sent in one large record stalls. A whole record fits. */
  ci.pt_serv_buf_size = 32 * 1024;
  ci.uid = -1;
  ci.gid = -1;
  s->ctx = lws_create_context(&ci);
  if (!s->ctx) {
    TG_ERROR("http: lws refused its context (libuv event plugin missing?)");
    free(s->sources);
    free(s);
    return -EIO;
  }

  struct lws_context_creation_info vi;
  memset(&vi, 0, sizeof(vi));
  vi.protocols = s->protocols;
  vi.iface = cfg->host;
  vi.port = cfg->port;
  vi.headers = &s->nosniff;
  vi.keepalive_timeout = (int)s->timeout_s;
  vi.timeout_secs = s->timeout_s;
  vi.timeout_secs_ah_idle = s->timeout_s;
  vi.options = LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND;
  if (cfg->host && !strchr(cfg->host, ':'))
    vi.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
  /* HTTP/1.1 only: one exchange per connection at a time. */
  vi.alpn = "http/1.1";
  if (cfg->cert) {
    vi.ssl_cert_filepath = cfg->cert;
    vi.ssl_private_key_filepath = cfg->key;
    vi.ssl_ca_filepath = cfg->ca;
    vi.options |= LWS_SERVER_OPTION_REQUIRE_VALID_OPENSSL_CLIENT_CERT |
                  LWS_SERVER_OPTION_DISABLE_OS_CA_CERTS;
    vi.ssl_info_event_mask = SSL_CB_ALERT;
  }
  s->vh = lws_create_vhost(s->ctx, &vi);
  if (!s->vh) {
    TG_ERROR("http: cannot listen on %s:%u (lws's warning above says why)",
             cfg->host ? cfg->host : "*", cfg->port);
    /* lws has handles on the loop already: they close as the loop runs. */
    begin_stop(s, NULL, NULL);
    return -EIO;
  }
  /* The tables are the server's from here (http.h). */
  s->authz = cfg->authz;
  s->crl = cfg->crl;
  int port = lws_get_vhost_listen_port(s->vh);
  s->port = port > 0 && port <= 65535 ? (uint16_t)port : cfg->port;
  TG_INFO("http: listening on %s:%u (%s; at most %u connections, %u per "
          "source)",
          cfg->host ? cfg->host : "*", s->port,
          cfg->cert ? "HTTPS, client certificates required" : "HTTP",
          s->max_conns, s->max_per_source);
  *out = s;
  return 0;
}
