/* The collector's HTTP(S) server: libwebsockets on the daemon's own libuv
 * loop (a "foreign loop" to lws), nothing else.
 *
 * It owns the listener, the connections and lws's context; it parses
 * nothing itself (lws does: request line, headers, URI decoding, body
 * framing) and knows nothing of snapshots. Each complete request goes to
 * the owner's handler, which answers it at once or later from the loop
 * (deferred: after a snapshot finishes); the layer sends what the owner
 * answers, adding Content-Length, X-Content-Type-Options: nosniff and, for
 * responses that are not files, Cache-Control: no-store.
 *
 * What lws decides before the owner sees anything:
 *   - malformed requests, methods lws does not know: lws's own 4xx or a
 *     closed connection. The headers lws knows (Host, Cookie, User-Agent
 *     ...: the values it keeps) over cfg.max_header: 431 from this layer.
 *     lws's buffer is twice cfg.max_header: a head past it (unknown
 *     headers count only there) is closed by lws without an answer. The methods that
 *     reach the handler are GET POST PUT PATCH DELETE OPTIONS HEAD; the
 *     owner answers 405 to those it does not serve.
 *   - the path and query come URL-decoded and normalised by lws ("/a//b/../c"
 *     -> "/a/c", "%41" -> "A"); lws keeps no raw copy. req->query is the
 *     decoded arguments joined with '&', so a '&' or ';' that was sent
 *     encoded cannot be told from a separator there: parse req->args (one
 *     decoded "name=value" each) when that matters.
 *   - a body needs Content-Length; one above cfg.max_body is answered 413
 *     before it is read and the connection closed. A request with any
 *     Transfer-Encoding is answered 400 and the connection closed: with
 *     Content-Length too, lws would frame the body by the length, and the
 *     bytes a front proxy took for the rest of a chunked body would be read
 *     here as a request of their own (request smuggling).
 *   - connections: at most cfg.max_conns open at once, and at most
 *     cfg.max_conns_per_source of them from one client address (IPv4 or
 *     IPv6 compared exactly; an IPv4-mapped IPv6 address is its IPv4
 *     address; every loopback address, 127.0.0.0/8 and ::1, is one source:
 *     they are all the same machine's users). A connection beyond either
 *     takes the place of the connection idle the longest (no request in
 *     progress) of that source, or of all for max_conns, which is closed
 *     (counted as evicted); with none idle it is closed as soon as it is
 *     accepted, before any TLS or HTTP, and counted.
 *   - a response is written at cfg.min_rate bytes per second on average at
 *     least, after a first cfg.timeout_s: a reader slower than that is
 *     closed, however often it takes a little.
 *   - HTTPS (cfg.cert, key and ca all set) requires a client certificate
 *     chaining to cfg.ca, TLS 1.2 or later: any other peer is refused during
 *     the handshake (logged as a warning) and never reaches the handler.
 *     Then the certificate must name an identity (auth/cert_identity.h, the
 *     relay's rule), not be revoked by cfg.crl and have a role in
 *     cfg.authz: else every request on the connection is answered 403 by
 *     the layer and the connection closed. tg_http_server_set_access()
 *     replaces the tables and ends the connections they no longer allow.
 *
 * Threads: everything runs on the loop's thread, callbacks included.
 */
#ifndef TRACEGATE_COLLECTOR_HTTP_HTTP_H
#define TRACEGATE_COLLECTOR_HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "auth/authz.h"
#include "auth/crl.h"
#include "common/clock.h"

typedef struct tg_http_server tg_http_server_t;
/* One request and its response; opaque. */
typedef struct tg_http_exchange tg_http_exchange_t;

/* Everything borrowed for the handler call only: copy what outlives it. */
typedef struct tg_http_request {
  const char *method; /* "GET", "POST", "PUT", "PATCH", "DELETE", ... */
  const char *path;   /* decoded and normalised by lws, without the query */
  const char *query;  /* decoded arguments joined with '&'; "" if none */
  /* Each decoded "name=value" as sent, in order; empty ones ("a=1&&b=2",
   * a trailing '&') are not there. */
  const char *const *args;
  size_t n_args;
  const uint8_t *body; /* the whole body (NULL when body_len is 0) */
  size_t body_len;     /* at most cfg.max_body */
  const char *content_type; /* "" if none */
  const char *origin;       /* Origin header, "" if none */
  const char *host;         /* Host header, "" if none */
  /* HTTPS: the identity the client certificate names (auth/
   * cert_identity.h; verified against cfg.ca, not revoked); "" over plain
   * HTTP. */
  const char *identity;
  /* HTTPS: the identity's role in cfg.authz, never TG_ROLE_NONE (those
   * are refused by the layer); TG_ROLE_NONE over plain HTTP. */
  tg_authz_role_t role;
  bool tls;
} tg_http_request_t;

typedef struct tg_http_server_config {
  const char *host; /* bind address (an IP literal); NULL: every address */
  uint16_t port;    /* 0: any free port, see tg_http_server_port() */
  /* All NULL: plain HTTP. All set: HTTPS with a client certificate signed
   * by |ca| required. Read at start; borrowed for the call. */
  const char *cert, *key, *ca;
  /* HTTPS: who has which role (required) and the revocation list (NULL:
   * none). The server's once tg_http_server_start() returns 0 (freed at
   * the stop or replaced by tg_http_server_set_access); the caller's
   * still after an error. NULL over plain HTTP. */
  tg_authz_t *authz;
  tg_crl_t *crl;
  size_t max_body;     /* 0: 64 KiB */
  /* Header bytes a request may have (values lws keeps), beyond: 431;
   * lws's buffer per request is twice this. 0: 8 KiB. */
  size_t max_header;
  unsigned max_conns;  /* beyond it new connections are closed; 0: 64 */
  /* Beyond it new connections from that address are closed; 0: max(1,
   * max_conns / 4). Above max_conns it is max_conns (with a warning). */
  unsigned max_conns_per_source;
  unsigned timeout_s;  /* idle and slow-client timeout; 0: 30 */
  /* Bytes per second a response must average after its first timeout_s;
   * 0: 4096. */
  uint64_t min_rate;
  /* What the rates, ages and warning intervals read (common/clock.h);
   * borrowed for the server's life. NULL: tg_clock_monotonic. */
  const tg_clock_t *clock;
} tg_http_server_config_t;

/* Called once per complete request. |x| stays the owner's until it calls
 * tg_http_respond*() (now or later) or until on_abandon(x); |req| only for
 * this call. Not called again after tg_http_server_stop(). */
typedef void (*tg_http_handler_fn)(void *ctx, tg_http_exchange_t *x,
                                   const tg_http_request_t *req);
/* The connection broke (reset, lws's own timeout) or the server stopped
 * before the owner answered |x|: after this returns |x| is gone and must
 * not be touched. Never called for an exchange already answered. A client
 * that only half-closes (FIN) may still read its answer (HTTP allows it),
 * so its exchange stays the owner's until answered. */
typedef void (*tg_http_abandon_fn)(void *ctx, tg_http_exchange_t *x);

/* Binds and listens on |loop|. |cfg| is read during the call; |handler|,
 * |on_abandon| and |ctx| are kept until the server is stopped. Returns 0
 * and *out, or a negative errno with the reason logged: -EINVAL (config),
 * -errno (a certificate file), -EIO (lws refused the context or the
 * listener; its own warning says why, e.g. the port is taken). After an
 * -EIO for the listener lws still closes handles on |loop|: run the loop
 * before closing it. */
int tg_http_server_start(uv_loop_t *loop, const tg_http_server_config_t *cfg,
                         tg_http_handler_fn handler,
                         tg_http_abandon_fn on_abandon, void *ctx,
                         tg_http_server_t **out);

/* The port actually listened on. */
uint16_t tg_http_server_port(const tg_http_server_t *s);

typedef struct tg_http_server_stats {
  unsigned conns;              /* open now */
  unsigned busy;               /* of those, with a request in progress */
  uint64_t refused_per_source; /* closed at accept: over max_conns_per_source */
  uint64_t refused_max_conns;  /* closed at accept: over max_conns */
  uint64_t evicted;        /* idle ones closed to let a new one in */
  uint64_t refused_peers;  /* HTTPS: no identity, revoked, or no role */
  uint64_t ended_by_reload; /* set_access() no longer allowed them */
} tg_http_server_stats_t;

/* The server's counters since start, into *out. */
void tg_http_server_stats(const tg_http_server_t *s,
                          tg_http_server_stats_t *out);

/* HTTPS: replaces the authorization table and the CRL (NULL: none) with
 * |authz| and |crl|, which become the server's (the previous ones are
 * freed). Every open connection whose certificate they no longer allow
 * (revoked, or its identity without a role) is ended from the loop (its
 * unanswered exchange abandoned), and any request still arriving on it is
 * answered 403. Returns how many connections end, or -EINVAL (plain
 * HTTP, or |authz| NULL: then nothing is taken). */
int tg_http_server_set_access(tg_http_server_t *s, tg_authz_t *authz,
                              tg_crl_t *crl);

/* Closes the listener and every connection: exchanges not yet answered get
 * on_abandon. lws's context is destroyed from the loop and lws closes its
 * handles there; |done| (optional) runs from the loop once all of them are
 * closed and |s| freed. The loop can end after that. Never runs a callback
 * inside this call. Calling it twice is a programming error. */
void tg_http_server_stop(tg_http_server_t *s, void (*done)(void *ctx),
                         void *ctx);

/* Adds a response header, before tg_http_respond*(). |name| must be an
 * HTTP token and |value| printable (no CR, LF or other control byte);
 * Content-Length, Content-Type, Content-Disposition, Transfer-Encoding and
 * Connection are the layer's. Both copied. 0, -EINVAL (refused), -E2BIG
 * (more than 16 headers or 4 KiB), -EALREADY (already answered). */
int tg_http_add_header(tg_http_exchange_t *x, const char *name,
                       const char *value);

/* Answers |x| with |status| (200..599), |content_type| (NULL: none) and
 * |len| bytes of |body| (copied). From now on |x| is the layer's. 0, or
 * -EINVAL / -ENOMEM / -EALREADY, and then |x| is still the owner's. */
int tg_http_respond(tg_http_exchange_t *x, int status, const char *content_type,
                    const void *body, size_t len);

/* Answers |x| with |size| bytes of |fd| read from offset 0, streamed from
 * the loop in chunks (never the whole file in memory). |fd| is the layer's
 * from the call on, even on error: closed once sent, on error or when the
 * client goes away. |download_name| (NULL: none) becomes Content-
 * Disposition: attachment; filename="..." and must be printable ASCII
 * without '"' or '\'. 0, or -EINVAL / -ENOMEM / -EALREADY, and then |x| is
 * still the owner's. */
int tg_http_respond_file(tg_http_exchange_t *x, int status,
                         const char *content_type, int fd, uint64_t size,
                         const char *download_name);

/* One byte range of a file (of the second file when |second|). */
typedef struct tg_http_extent {
  uint64_t off, len;
  bool second;
} tg_http_extent_t;

/* As tg_http_respond_file(), but the body is the |n| ranges |ext| of |fd|
 * one after another (copied; their lengths' sum is the Content-Length):
 * one host's part of a snapshot. Each range must lie in the file; one the
 * file turns out too short for ends the response early (logged). */
int tg_http_respond_extents(tg_http_exchange_t *x, int status,
                            const char *content_type, int fd,
                            const tg_http_extent_t *ext, size_t n,
                            const char *download_name);
/* The same from two files: the ranges with |second| set are |fd2|'s
 * (taken too; -1 when none is). A snapshot and its symbols. */
int tg_http_respond_extents2(tg_http_exchange_t *x, int status,
                             const char *content_type, int fd, int fd2,
                             const tg_http_extent_t *ext, size_t n,
                             const char *download_name);

#endif /* TRACEGATE_COLLECTOR_HTTP_HTTP_H */
