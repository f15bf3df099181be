/* Shared by http.c (server, connections, requests in), http_conn.c
 * (admission of connections), http_respond.c (responses out) and
 * http_exchange.c (an exchange's state and end, below the others). Not
 * installed, not for the owner. */
#ifndef TRACEGATE_COLLECTOR_HTTP_HTTP_INTERNAL_H
#define TRACEGATE_COLLECTOR_HTTP_HTTP_INTERNAL_H

#include <libwebsockets.h>

#include "auth/authz.h"
#include "auth/cert_identity.h"
#include "auth/crl.h"
#include "collector/http/http.h"
#include "common/list.h"

#define TG_HTTP_MAX_HEADERS 16
#define TG_HTTP_MAX_HEADER_BYTES 4096
/* Bytes handed to lws_write() per WRITEABLE: large enough to keep a
 * loopback socket busy, small enough that one slow client never makes lws
 * buffer much of a file (it keeps what the socket did not take). */
#define TG_HTTP_CHUNK (32u * 1024)

/* An exchange's life; every transition goes through tg__http_x_set(). */
typedef enum tg_http_x_state {
  TG_HTTP_X_READING,    /* headers in, body still arriving */
  TG_HTTP_X_REFUSING,   /* answered by the layer (413); closes after */
  TG_HTTP_X_OWNED,      /* handed to the owner: in the handler or deferred */
  TG_HTTP_X_RESPONDING, /* answered; headers or body being written */
} tg_http_x_state_t;

/* The connections open from one client address. A slot whose n_conns is
 * 0 is free; it keeps its address and warning state until another address
 * takes it, so a source whose connections churn still warns at most once
 * per interval. */
typedef struct tg_http_source {
  uint8_t addr[16]; /* IPv4 in the first 4 bytes, or IPv6 */
  uint8_t addr_len; /* 4 or 16; 0: never used */
  unsigned n_conns;
  unsigned n_evicted; /* of n_conns, closing to make room (not counted) */
  uint64_t warned_ms; /* server clock at the last warning about it */
  uint64_t unwarned;  /* refusals since that warning */
} tg_http_source_t;

typedef enum tg_http_server_state {
  TG_HTTP_RUNNING,
  TG_HTTP_STOPPING,  /* stop() called; lws context not destroyed yet */
  TG_HTTP_DRAINING,  /* lws_context_destroy() called; its handles closing */
} tg_http_server_state_t;

struct tg_http_server {
  uv_loop_t *loop;
  const tg_clock_t *clock; /* never NULL */
  /* Written NULL by lws (info.pcontext) once its destruction is complete:
   * the only documented signal that lws has left the loop. */
  struct lws_context *ctx;
  struct lws_vhost *vh;
  tg_http_server_state_t state;
  uint16_t port;
  size_t max_body;
  size_t max_header; /* header bytes a request may have; more: 431 */
  unsigned max_conns;
  unsigned max_per_source;
  unsigned timeout_s;
  uint64_t min_rate; /* bytes per second a response averages at least */
  unsigned n_conns; /* == the sum of sources[].n_conns */
  unsigned n_evicted; /* == the sum of sources[].n_evicted */
  tg_list_t conns;  /* every tg_http_conn_t, oldest first */
  /* 2 * max_conns slots, allocated at start: there are never more
   * distinct addresses with an open connection than open connections,
   * max_conns counted and at most max_conns evicted, still closing. */
  tg_http_source_t *sources;
  uint64_t refused_per_source, refused_max_conns, evicted;
  uint64_t refused_peers, ended_by_reload;
  /* HTTPS: who may do what (owned; replaced by tg_http_server_set_access,
   * which bumps access_gen so that every connection is judged again). */
  tg_authz_t *authz;
  tg_crl_t *crl;
  unsigned access_gen;
  uint64_t max_conns_warned_ms, max_conns_unwarned;
  tg_http_handler_fn handler;
  tg_http_abandon_fn on_abandon;
  void *ctx_arg;
  tg_list_t exchanges; /* every live exchange */
  uv_idle_t stopper;   /* drives stop: destroy, then wait for ctx == NULL */
  void (*done)(void *);
  void *done_arg;
  struct lws_protocols protocols[2];
  struct lws_protocol_vhost_options nosniff;
};

/* What the server makes of an HTTPS connection's peer, judged again
 * whenever the access tables change (access_gen). */
typedef enum tg_http_peer {
  TG_HTTP_PEER_UNKNOWN, /* no certificate yet (handshake), or not judged */
  TG_HTTP_PEER_OK,      /* identity, not revoked, a role */
  TG_HTTP_PEER_REFUSED, /* none of those: 403, then closed */
} tg_http_peer_t;

/* One accepted connection: lws's opaque user data of its wsi. */
typedef struct tg_http_conn {
  tg_http_server_t *srv;
  struct lws *wsi;
  tg_list_t node;        /* in srv->conns */
  tg_http_exchange_t *x; /* the current exchange, or NULL */
  tg_http_source_t *src; /* its address's slot, counting it */
  uint64_t idle_since_ms; /* server clock when it last had no exchange */
  bool evicted; /* closing to make room: counted in src->n_evicted */
  /* HTTPS: the peer as of access_gen |judged_gen|. */
  tg_http_peer_t peer;
  unsigned judged_gen;
  tg_authz_role_t role;
  const char *refused_why; /* static, with TG_HTTP_PEER_REFUSED */
  char identity[TG_CERT_IDENTITY_SIZE];
} tg_http_conn_t;

struct tg_http_exchange {
  tg_http_server_t *srv;
  struct lws *wsi;
  tg_list_t node;
  tg_http_x_state_t state;
  /* Request: every string lives in |strings|. */
  char *strings;
  tg_http_request_t req;
  const char **args;
  uint8_t *body;
  size_t body_len, body_expected;
  bool head;
  /* Response. */
  int status;
  char *content_type;
  char *disposition; /* full Content-Disposition value, or NULL */
  char *hdr_names[TG_HTTP_MAX_HEADERS], *hdr_values[TG_HTTP_MAX_HEADERS];
  size_t n_hdrs, hdr_bytes;
  bool is_file;
  bool headers_sent;
  uint8_t *resp;      /* tg_http_respond(): the body, owned */
  int fd;             /* tg_http_respond_file(): owned, or -1 */
  int fd2;            /* tg_http_respond_extents2()'s second: owned, or -1 */
  /* tg_http_respond_extents(): the ranges of |fd| sent, owned (NULL: the
   * file from offset 0), the one being sent and how far into it. */
  tg_http_extent_t *ext;
  size_t n_ext, ext_i;
  uint64_t ext_pos;
  uint64_t resp_len;  /* bytes of body to send */
  uint64_t resp_off;  /* bytes sent */
  uint64_t answered_ms; /* server clock when answered: min_rate's start */
};

/* --- http_exchange.c: below http.c, http_conn.c, http_respond.c ------- */

void tg__http_x_set(tg_http_exchange_t *x, tg_http_x_state_t to,
                    const char *why);
/* Frees |x| and everything it owns (closes its fd); unlinks it. */
void tg__http_x_free(tg_http_exchange_t *x);
/* The connection lost its exchange (closed, destroyed): the owner hears
 * of it only if the exchange is still its own. */
void tg__http_conn_drop_exchange(tg_http_conn_t *conn, const char *why);

/* http_conn.c. LWS_CALLBACK_FILTER_NETWORK_CONNECTION for the accepted
 * socket |fd|: 0 keeps it (making room if it must), 1 has lws close it
 * before anything is read or written. */
int tg__http_on_accept(tg_http_server_t *s, int fd);
/* LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED, right after on_accept()
 * kept the socket: the connection's conn, counted against its source
 * until LWS_CALLBACK_WSI_DESTROY. Without a conn (out of memory, or the
 * peer reset in between and has no address any more) the connection is
 * counted nowhere and closed at its first request or error. */
void tg__http_on_instantiated(tg_http_server_t *s, struct lws *wsi);
/* LWS_CALLBACK_WSI_DESTROY: the last lws says of a connection. */
void tg__http_on_destroyed(struct lws *wsi);
/* LWS_CALLBACK_HTTP_WRITEABLE for |x| (answered): writes the headers or
 * the next chunk. 0: more to write, another WRITEABLE asked for; 1: all
 * sent (the per-request log line written); -1: failed, close. */
int tg__http_x_write(tg_http_exchange_t *x);

#endif /* TRACEGATE_COLLECTOR_HTTP_HTTP_INTERNAL_H */
