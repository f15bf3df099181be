/* `tracegate bridge`: Perfetto's websocket_bridge for tracegate. Shared by
 * bridge.c (the command: flags, signals, the loop), bridge_server.c (the
 * lws context on that libuv loop, start and stop), bridge_screen.c (the
 * TCP side: the listener, and each client's bytes checked on their way to
 * lws) and bridge_conn.c (one WebSocket and its upstream, bytes both
 * ways); who may open what is bridge_policy.h's (pure).
 *
 * A bridged connection: the UI's WebSocket on one side, the consumer
 * socket of the local tracegated (path /traced) or a tracegate-relay over
 * mutual TLS (path /traced/HOST) on the other. Both upstreams are framed
 * transports (ipc/transport.h): the UI's byte stream is cut into IPC
 * frames (abi/ipc_frame.h, 128 KiB at most) on the way in, and each frame
 * from upstream goes to the UI as one binary message.
 */
#ifndef TRACEGATE_CLI_BRIDGE_H
#define TRACEGATE_CLI_BRIDGE_H

#include <libwebsockets.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/list.h"
#include "common/notice.h"
#include "cli/bridge_policy.h"
#include "ipc/net_addr.h"

#define BRIDGE_MAX_CONNS 64
/* Queued bytes, per direction, above which the other side is not read. */
#define BRIDGE_HIGH_WATER (1024u * 1024)
#define BRIDGE_LOW_WATER (BRIDGE_HIGH_WATER / 4)
/* lws's room for a request's header values (max_http_header_data2). */
#define BRIDGE_MAX_HEADER 4096
/* Bytes read at once from a client or from lws (bridge_screen.c). */
#define BRIDGE_READ_SIZE (64u * 1024)
/* lws closes a client whose upgrade has not ended by then. */
#define BRIDGE_HANDSHAKE_TIMEOUT_S 10

typedef struct bridge_conn bridge_conn_t;     /* bridge_conn.c's */
typedef struct bridge_screen bridge_screen_t; /* bridge_screen.c's */

/* --- bridge_server.c: the server ----------------------------------------- */

/* RUNNING -> STOPPING -> DRAINING, through bridge_server.c's set_state()
 * (common/fsm.h). */
typedef enum bridge_state {
  BRIDGE_RUNNING,
  BRIDGE_STOPPING, /* connections closing; lws's context destroyed next */
  BRIDGE_DRAINING, /* lws's handles closing on the loop */
} bridge_state_t;

/* What |refused| is doing. */
typedef enum bridge_refusal {
  BRIDGE_REFUSAL_NONE,    /* free */
  BRIDGE_REFUSAL_CLOSING, /* closing a refused connection */
  BRIDGE_REFUSAL_QUEUED,  /* that, and another waits for it (libuv offers
                             no more until it is accepted) */
} bridge_refusal_t;

typedef struct bridge_server {
  uv_loop_t *loop;
  const bridge_cfg_t *cfg;
  bridge_state_t state;
  struct lws_context *ctx;
  struct lws_vhost *vh;
  struct lws_protocols protocols[2];
  tg_list_t conns; /* bridge_conn_t.node */
  unsigned n_conns;
  uint64_t next_id;
  uv_tcp_t listener; /* initialized by bridge_server.c, bound by
                        bridge_screen.c */
  uv_idle_t stopper;  /* the stop's steps, outside lws's callbacks */
  /* Called once the stop has closed every handle of the bridge; the
   * owner's, as is |data|. */
  void (*on_stopped)(struct bridge_server *s);
  void *data;
  /* A connection no screen could be allocated for is accepted into this
   * and closed (libuv offers no further one until it is accepted). */
  uv_tcp_t refused;
  bridge_refusal_t refusal;
  /* Tests' hook (bridge_test.h): connections still
   * to be refused as if no screen could be allocated. 0 in production. */
  unsigned fail_screens_for_test;
  tg_list_t screens; /* bridge_screen_t.node: every accepted connection */
  unsigned n_screens;
  /* State changes the server's, a screen's or a connection's table
   * refused (common/fsm.h): a bug, logged. */
  uint64_t bad_transitions;
  uint8_t rx[BRIDGE_READ_SIZE]; /* each read, until its callback returns */
} bridge_server_t;

/* Starts |s| (zeroed caller memory, valid until on_stopped) on |loop|:
 * lws's context and vhost, and the listener at |at| (the port it got
 * into |port|). |cfg| is borrowed until on_stopped. Returns 0, or -1 with
 * why on stderr; either way tg__bridge_server_stop() takes down what was
 * started. */
int tg__bridge_server_start(bridge_server_t *s, uv_loop_t *loop,
                            const bridge_cfg_t *cfg, const tg_net_addr_t *at,
                            uint16_t *port);
/* Stops accepting, closes every connection, destroys lws's context, and
 * calls s->on_stopped once all of it is closed. Once only: later calls do
 * nothing. */
void tg__bridge_server_stop(bridge_server_t *s);

/* --- bridge_screen.c: accepted connections -------------------------------- */

/* Binds |at| (loopback, checked by the caller) and accepts on s->loop;
 * each connection is adopted into s->vh behind its screen. Returns 0 and
 * the port bound, or a libuv error (the listener stays for the caller to
 * close). */
int tg__bridge_screen_listen(bridge_server_t *s, const tg_net_addr_t *at,
                             uint16_t *port);
/* No more connections are accepted (the bridge is stopping). */
void tg__bridge_screen_stop(bridge_server_t *s);
/* lws's context is gone: no wsi will be destroyed any more. */
void tg__bridge_screen_lws_gone(bridge_server_t *s);

/* Every wsi's opaque user data is its screen; bridge_conn.c's callback
 * tells it what lws did, and asks it what lws cannot know. */
/* "127.0.0.1:51234": the client, for the logs. Valid as long as |sc|. */
const char *tg__bridge_screen_peer(const bridge_screen_t *sc);
/* Why the screen closed the client (and its notice code into |code|), or
 * NULL if it did not. */
const char *tg__bridge_screen_why(const bridge_screen_t *sc, tg_notice_t *code);
/* The connection bridged over it (NULL before the upgrade). Borrowed. */
bridge_conn_t *tg__bridge_screen_conn(const bridge_screen_t *sc);
void tg__bridge_screen_set_conn(bridge_screen_t *sc, bridge_conn_t *c);
/* LWS_CALLBACK_ESTABLISHED: the client's frames are checked from now. */
void tg__bridge_screen_established(bridge_screen_t *sc);
/* LWS_CALLBACK_WSI_DESTROY: its wsi is gone (|sc| may be freed). */
void tg__bridge_screen_wsi_destroyed(bridge_screen_t *sc);

/* --- bridge_conn.c: bridged connections ---------------------------------- */

/* The protocol callback of every connection, HTTP and WebSocket. */
int tg__bridge_on_lws(struct lws *wsi, enum lws_callback_reasons reason,
                      void *user, void *in, size_t len);
/* Closes every connection (the bridge is stopping). */
void tg__bridge_close_all(bridge_server_t *s);

#endif /* TRACEGATE_CLI_BRIDGE_H */
