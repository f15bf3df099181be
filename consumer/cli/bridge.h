/* `tracegate bridge`: Perfetto's websocket_bridge for tracegate. Shared by
 * bridge.c (the command: flags, the lws context on our libuv loop, start
 * and stop) and bridge_conn.c (one WebSocket and its upstream, bytes both
 * ways); who may open what is bridge_policy.h's (pure).
 *
 * A bridged connection: the UI's WebSocket on one side, the consumer
 * socket of the local tracegated (path /traced) or a tracegate-relay over
 * mutual TLS (path /traced/HOST) on the other. Both upstreams are framed
 * transports (ipc/transport.h): the UI's byte stream is cut into IPC
 * frames (abi/ipc_frame.h, 128 KiB at most) on the way in, and each frame
 * from upstream goes to the UI as one binary message.
 */
#ifndef TRACEGATE_CONSUMER_CLI_BRIDGE_H
#define TRACEGATE_CONSUMER_CLI_BRIDGE_H

#include <libwebsockets.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/list.h"
#include "consumer/cli/bridge_policy.h"

#define BRIDGE_MAX_CONNS 64
/* Queued bytes, per direction, above which the other side is not read. */
#define BRIDGE_HIGH_WATER (1024u * 1024)
#define BRIDGE_LOW_WATER (BRIDGE_HIGH_WATER / 4)

/* --- bridge.c: the server ------------------------------------------------ */

typedef enum bridge_state {
  BRIDGE_RUNNING,
  BRIDGE_STOPPING, /* connections closing; lws's context destroyed next */
  BRIDGE_DRAINING, /* lws's handles closing on the loop */
} bridge_state_t;

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
} bridge_server_t;

/* --- bridge_conn.c: bridged connections ---------------------------------- */

/* The protocol callback of every connection, HTTP and WebSocket. */
int tg__bridge_on_lws(struct lws *wsi, enum lws_callback_reasons reason,
                      void *user, void *in, size_t len);
/* Closes every connection (the bridge is stopping). */
void tg__bridge_close_all(bridge_server_t *s);

#endif /* TRACEGATE_CONSUMER_CLI_BRIDGE_H */
