/* One bridged connection: the UI's WebSocket and its upstream (the local
 * consumer socket, or a relay over TLS), bytes both ways, backpressure and
 * the close. The verdict on an upgrade is bridge_policy.c's; this file
 * acts on it and logs who, what and why.
 *
 * lws does the WebSocket framing (masks, fragments, control frames, UTF-8
 * of text); this file never parses WebSocket or HTTP bytes itself, and
 * asks lws for what it needs to know (lws_hdr_copy, lws_frame_is_binary).
 * In front of lws, bridge_screen.c closes a client that sends an unmasked
 * frame (lws 4.1 does not); each wsi's opaque user data is its screen,
 * which knows the client's address and holds this file's connection.
 *
 * Lifetime: a bridge_conn_t is made when an upgrade is allowed, and freed
 * once both the WebSocket (LWS_CALLBACK_WSI_DESTROY) and the upstream
 * transport (its on_close) are gone, whichever goes last.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "abi/ipc_frame.h"
#include "common/fsm.h"
#include "common/log.h"
#include "common/printable.h"
#include "cli/bridge.h"
#include "ipc/net_addr.h"
#include "ipc/unix_transport.h"
#include "tls/dial.h"
#include "tls/transport.h"
#include "tracegate/error.h"

/* How long a WebSocket may take to take its close (a peer that stopped
 * reading), and to read what the service said last before it closed. */
#define CLOSE_GRACE_S 5
#define DRAIN_GRACE_S 30

#define HANDSHAKE_TIMEOUT_MS 10000
/* The largest message the UI may send: one IPC frame's worth (the UI
 * sends one frame per message). */
#define MAX_MESSAGE TG_IPC_FRAME_BUFFER_SIZE

/* OPEN -> DRAINING -> CLOSING, or OPEN -> CLOSING (kNext). */
typedef enum conn_state {
  BC_OPEN,     /* bytes flow both ways */
  BC_DRAINING, /* upstream gone: what it sent goes out, then the close */
  BC_CLOSING,  /* the WebSocket is closing: nothing more is forwarded */
} conn_state_t;

/* A message to the UI: one IPC frame, after lws's headroom. */
typedef struct out_msg {
  tg_list_t node;
  size_t len; /* of the frame, from data + LWS_PRE */
  uint8_t data[];
} out_msg_t;

struct bridge_conn {
  tg_list_t node; /* bridge_server_t.conns */
  bridge_server_t *srv;
  uint64_t id;
  conn_state_t state;
  struct lws *wsi;    /* NULL once lws destroyed it */
  tg_transport_t *up; /* NULL once its on_close ran */
  bridge_verdict_t kind;
  tg_unix_transport_t ut; /* BRIDGE_LOCAL */
  tg_tls_chan_t *ch;      /* BRIDGE_REMOTE */
  tg_frame_decoder_t dec; /* the UI's bytes, cut into frames */
  size_t msg_len;         /* bytes of the UI's message being received */
  bool rx_paused;         /* the UI is not read: upstream congested */
  bool up_paused;         /* upstream is not read: out is above water */
  tg_list_t out;          /* out_msg_t, to the UI */
  size_t out_bytes;
  uint64_t bytes_in, bytes_out, frames_in, frames_out;
  uint64_t rx_pauses, up_pauses; /* times each side had to wait */
  uint64_t opened_ms;
  uint16_t close_code; /* sent to the UI when we close */
  char why[256];       /* the first reason the connection ended */
  tg_notice_t why_code; /* its code, for the close line */
  char peer[TG_NET_ADDR_STRLEN], origin[128], path[320], upstream[320];
};

static void update_flow(bridge_conn_t *c);

/* The first reason wins: what follows is its consequence. */
static void set_why(bridge_conn_t *c, tg_notice_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_why(bridge_conn_t *c, tg_notice_t code, const char *fmt, ...) {
  if (c->why[0]) return;
  c->why_code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof(c->why), fmt, ap);
  va_end(ap);
}

#define S(x) TG_FSM_BIT(BC_##x)
static const uint32_t kNext[] = {
    [BC_OPEN] = S(DRAINING) | S(CLOSING),
    [BC_DRAINING] = S(CLOSING),
    [BC_CLOSING] = 0,
};
#undef S
static const char *const kNames[] = {"open", "draining", "closing"};
_Static_assert(TG_FSM_COUNT(kNext) == BC_CLOSING + 1, "arrows per state");
_Static_assert(TG_FSM_COUNT(kNames) == TG_FSM_COUNT(kNext), "a name per state");
static const tg_fsm_def_t kDef = {"bridge connection", TG_FSM_COUNT(kNext),
                                  kNext, kNames};

/* The one transition, under common/fsm.h's policy. */
static void set_state(bridge_conn_t *c, conn_state_t to, const char *why) {
  char who[24];
  snprintf(who, sizeof(who), "#%" PRIu64, c->id);
  unsigned st = c->state;
  if (tg_fsm_move(&kDef, &st, to, &c->srv->bad_transitions, who, why))
    c->state = to;
}

static void maybe_free(bridge_conn_t *c) {
  if (c->wsi || c->up) return;
  uint64_t secs = (uv_now(c->srv->loop) - c->opened_ms) / 1000;
  /* The code says why it closed; the counters are name=value fields. */
  TG_INFO("%s bridge #%" PRIu64 ": %s origin %s %s -> %s: closed after %" PRIu64
          " s: %s (ui_bytes=%" PRIu64 " ui_frames=%" PRIu64
          " service_bytes=%" PRIu64 " service_frames=%" PRIu64
          " ui_waits=%" PRIu64 " service_waits=%" PRIu64 ")",
          tg_notice_tag(c->why[0] ? c->why_code : TG_N_BRIDGE_CLOSED), c->id,
          c->peer, c->origin, c->path, c->upstream, secs,
          c->why[0] ? c->why : "closed", c->bytes_in, c->frames_in,
          c->bytes_out, c->frames_out, c->rx_pauses, c->up_pauses);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &c->out) {
    tg_list_remove(it);
    free(TG_CONTAINER_OF(it, out_msg_t, node));
  }
  tg_frame_decoder_free(&c->dec);
  tg_list_remove(&c->node);
  c->srv->n_conns--;
  free(c);
}

/* Ends the connection from our side: upstream is closed, and the
 * WebSocket closes with |code| once lws lets us write (from outside its
 * callbacks, a close is only asked for). */
static void conn_close(bridge_conn_t *c, uint16_t code) {
  if (c->state == BC_CLOSING) return;
  set_state(c, BC_CLOSING, c->why);
  c->close_code = code;
  if (c->up) tg_transport_close(c->up, 0);
  if (c->wsi) {
    lws_callback_on_writable(c->wsi);
    /* A peer that reads nothing never lets us write the close: lws drops
     * it after this, so it cannot hold a slot for good. */
    lws_set_timeout(c->wsi, PENDING_TIMEOUT_CLOSE_SEND, CLOSE_GRACE_S);
  }
}

/* Inside an lws callback of |c|'s WebSocket: the close starts at once.
 * Returns what the callback returns (-1: lws closes it). */
static int ws_fail(bridge_conn_t *c, uint16_t code, tg_notice_t why_code,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int ws_fail(bridge_conn_t *c, uint16_t code, tg_notice_t why_code,
                   const char *fmt, ...) {
  if (!c->why[0]) {
    c->why_code = why_code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
  }
  conn_close(c, code);
  static const char reason[] = "tracegate bridge: refused";
  lws_close_reason(c->wsi, (enum lws_close_status)code,
                   (unsigned char *)reason, sizeof(reason) - 1);
  return -1;
}

/* --- upstream to the UI ------------------------------------------------------ */

static int up_on_frame(tg_transport_t *t, const uint8_t *payload, size_t len) {
  bridge_conn_t *c = t->data;
  if (!c->wsi || c->state != BC_OPEN) return 0;
  out_msg_t *m = malloc(sizeof(*m) + LWS_PRE + TG_IPC_FRAME_HEADER_SIZE + len);
  if (!m) {
    set_why(c, TG_N_BRIDGE_FAILED, "out of memory for a frame to the UI");
    conn_close(c, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION);
    return 1;
  }
  uint8_t *f = m->data + LWS_PRE;
  f[0] = (uint8_t)len;
  f[1] = (uint8_t)(len >> 8);
  f[2] = (uint8_t)(len >> 16);
  f[3] = (uint8_t)(len >> 24);
  memcpy(f + TG_IPC_FRAME_HEADER_SIZE, payload, len);
  m->len = TG_IPC_FRAME_HEADER_SIZE + len;
  tg_list_insert_tail(&c->out, &m->node);
  c->out_bytes += m->len;
  c->frames_out++;
  lws_callback_on_writable(c->wsi);
  update_flow(c);
  return 0;
}

static void up_on_drain(tg_transport_t *t) { update_flow(t->data); }

static void up_on_close(tg_transport_t *t, int status) {
  bridge_conn_t *c = t->data;
  if (c->kind == BRIDGE_REMOTE) {
    const char *err = tg_tls_chan_error(c->ch);
    if (status == 0 || status == TG_EPEER_CLOSED)
      set_why(c, TG_N_BRIDGE_RELAY_CLOSED, "the relay closed the connection");
    else
      set_why(c, TG_N_BRIDGE_RELAY_FAILED, "the relay connection failed: %s",
              err[0] ? err : tg_strerror(status));
    tg_tls_chan_free(c->ch);
    c->ch = NULL;
  } else if (status == 0 || status == TG_EPEER_CLOSED) {
    set_why(c, TG_N_BRIDGE_SERVICE_CLOSED, "the service closed the connection");
  } else {
    set_why(c, TG_N_BRIDGE_SERVICE_FAILED, "the service connection failed: %s",
            tg_strerror(status));
  }
  c->up = NULL;
  if (c->wsi && c->state == BC_OPEN) {
    /* What the service said last (an error reply) still reaches the UI. */
    set_state(c, BC_DRAINING, c->why);
    c->close_code = status == 0 || status == TG_EPEER_CLOSED
                        ? LWS_CLOSE_STATUS_NORMAL
                        : LWS_CLOSE_STATUS_UNEXPECTED_CONDITION;
    lws_callback_on_writable(c->wsi);
    /* The drain is bounded too: a UI that stops reading is dropped. */
    lws_set_timeout(c->wsi, PENDING_TIMEOUT_CLOSE_SEND, DRAIN_GRACE_S);
  }
  maybe_free(c);
}

static const tg_transport_cbs_t up_cbs = {
    .on_frame = up_on_frame,
    .on_drain = up_on_drain,
    .on_close = up_on_close,
};

/* LWS_CALLBACK_SERVER_WRITEABLE: one message per call, as lws asks. */
static int on_writeable(bridge_conn_t *c) {
  if (c->state != BC_CLOSING && !tg_list_empty(&c->out)) {
    out_msg_t *m = TG_CONTAINER_OF(c->out.next, out_msg_t, node);
    tg_list_remove(&m->node);
    c->out_bytes -= m->len;
    int n = lws_write(c->wsi, m->data + LWS_PRE, m->len, LWS_WRITE_BINARY);
    size_t len = m->len;
    free(m);
    if (n < 0 || (size_t)n < len) {
      set_why(c, TG_N_BRIDGE_FAILED, "cannot write to the UI");
      conn_close(c, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION);
      return -1;
    }
    c->bytes_out += len;
    if (!tg_list_empty(&c->out) || c->state != BC_OPEN)
      lws_callback_on_writable(c->wsi);
    update_flow(c);
    return 0;
  }
  if (c->state == BC_OPEN) return 0;
  static const char reason[] = "tracegate bridge: upstream closed";
  lws_close_reason(c->wsi, (enum lws_close_status)c->close_code,
                   (unsigned char *)reason, sizeof(reason) - 1);
  return -1;
}

/* --- the UI to upstream ---------------------------------------------------- */

static int on_ui_frame(void *ctx, const uint8_t *payload, size_t len) {
  bridge_conn_t *c = ctx;
  c->frames_in++;
  if (c->kind == BRIDGE_REMOTE)
    return tg_tls_chan_send_payload(c->ch, payload, len, false);
  uint8_t hdr[TG_IPC_FRAME_HEADER_SIZE] = {(uint8_t)len, (uint8_t)(len >> 8),
                                           (uint8_t)(len >> 16),
                                           (uint8_t)(len >> 24)};
  struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, len}};
  return tg_ipc_chan_sendv(&c->ut.chan, iov, 2);
}

/* LWS_CALLBACK_RECEIVE: the next piece of the UI's current message. */
static int on_receive(bridge_conn_t *c, const uint8_t *in, size_t len) {
  if (c->state != BC_OPEN || !c->up) return 0; /* closing: dropped */
  if (!lws_frame_is_binary(c->wsi))
    return ws_fail(c, LWS_CLOSE_STATUS_UNACCEPTABLE_OPCODE,
                   TG_N_BRIDGE_TEXT_MESSAGE, "a text message (the consumer protocol is binary)");
  if (lws_is_first_fragment(c->wsi)) c->msg_len = 0;
  /* What the frame's header announces counts at once: a peer that
   * announces 2^63 bytes is closed before it sends them. */
  size_t rest = lws_remaining_packet_payload(c->wsi);
  if (len > MAX_MESSAGE - c->msg_len ||
      rest > MAX_MESSAGE - c->msg_len - len)
    return ws_fail(c, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
                   TG_N_BRIDGE_MESSAGE_TOO_BIG, "a message over %u bytes",
                   MAX_MESSAGE);
  c->msg_len += len;
  c->bytes_in += len;
  int rv = tg_frame_decoder_feed(&c->dec, in, len, on_ui_frame, c);
  if (rv == TG_EFRAME_TOO_LARGE)
    return ws_fail(c, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
                   TG_N_BRIDGE_MESSAGE_TOO_BIG, "an IPC frame over %u bytes",
                   TG_IPC_FRAME_BUFFER_SIZE);
  if (rv < 0)
    return ws_fail(c, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION,
                   TG_N_BRIDGE_FAILED, "cannot forward to %s: %s", c->upstream,
                   tg_strerror(rv));
  update_flow(c);
  return 0;
}

/* Stops reading a side while the other side's queue is above the
 * high-water mark, and resumes below the low-water mark (the upstream
 * transport has its own marks: congested() and on_drain). */
static void update_flow(bridge_conn_t *c) {
  if (!c->wsi || !c->up) return;
  bool rx_pause = tg_transport_congested(c->up);
  if (rx_pause != c->rx_paused) {
    c->rx_paused = rx_pause;
    c->rx_pauses += rx_pause;
    lws_rx_flow_control(c->wsi, rx_pause ? 0 : 1);
  }
  bool up_pause = c->out_bytes > BRIDGE_HIGH_WATER ||
                  (c->up_paused && c->out_bytes > BRIDGE_LOW_WATER);
  if (up_pause != c->up_paused) {
    c->up_paused = up_pause;
    c->up_pauses += up_pause;
    tg_transport_pause_reading(c->up, up_pause);
  }
}

/* --- the upgrade ----------------------------------------------------------- */

static void on_tls_handshake(tg_tls_chan_t *ch, int status) {
  bridge_conn_t *c = tg_tls_chan_owner(ch);
  if (status == 0)
    TG_INFO("%s bridge #%" PRIu64 ": TLS to %s: relay %s, %s",
            TG_NOTE(BRIDGE_TLS), c->id,
            c->upstream, tg_tls_chan_peer_identity(ch),
            tg_tls_chan_ciphersuite(ch));
}

static int open_upstream(bridge_conn_t *c, const bridge_decision_t *d,
                         char *err, size_t n) {
  const bridge_cfg_t *cfg = c->srv->cfg;
  int rv;
  if (d->verdict == BRIDGE_LOCAL) {
    snprintf(c->upstream, sizeof(c->upstream), "%s", cfg->consumer_socket);
    rv = tg_unix_transport_connect(c->srv->loop, &c->ut, cfg->consumer_socket);
    if (rv < 0) {
      snprintf(err, n, "cannot connect to the consumer socket %s: %s",
               cfg->consumer_socket, tg_strerror(rv));
      return rv;
    }
    tg_ipc_chan_set_high_water(&c->ut.chan, BRIDGE_HIGH_WATER);
    c->ut.base.cbs = &up_cbs;
    c->ut.base.data = c;
    c->up = &c->ut.base;
    return 0;
  }
  const tg_target_t *t = &d->target;
  snprintf(c->upstream, sizeof(c->upstream), "%s", t->hostport);
  tg_tls_chan_opts_t opts = {.handshake_timeout_ms = HANDSHAKE_TIMEOUT_MS,
                             .high_water = BRIDGE_HIGH_WATER,
                             .on_handshake = on_tls_handshake,
                             .owner = c};
  const char *name = t->server_name[0] ? t->server_name : cfg->server_name;
  rv = tg_tls_chan_connect(c->srv->loop, t->hostport, cfg->tls, name, &opts,
                           &up_cbs, c, &c->ch);
  if (rv < 0) {
    snprintf(err, n, "cannot connect to %s: %s", t->hostport, tg_strerror(rv));
    return rv;
  }
  c->up = tg_tls_chan_transport(c->ch);
  return 0;
}

/* Copies header |h| (at most |cap| - 1 bytes, shown printable) into
 * |out|; false when absent, empty or too long (then |out| is ""). */
static bool copy_hdr(struct lws *wsi, enum lws_token_indexes h, char *out,
                     size_t cap) {
  out[0] = '\0';
  int n = lws_hdr_total_length(wsi, h);
  if (n <= 0 || (size_t)n >= cap) return false;
  return lws_hdr_copy(wsi, out, (int)cap, h) == n;
}

/* "127.0.0.1:51234": who, for the logs. lws's socket is the screen's
 * socketpair: the client's address is the screen's. */
static const char *peer_of(const bridge_screen_t *sc) {
  return sc ? tg__bridge_screen_peer(sc) : "?";
}

static int refuse_upgrade(struct lws *wsi, const char *peer, const char *origin,
                          const char *path, unsigned status, const char *why) {
  TG_WARN("%s bridge: %s origin %s %s refused (%u): %s", TG_NOTE(BRIDGE_REFUSED),
          peer,
          origin[0] ? origin : "(none)", path, status, why);
  /* lws writes the status and the caller's return of 1 completes it. */
  if (lws_return_http_status(wsi, status, why)) return -1;
  return 1;
}

/* LWS_CALLBACK_HTTP_CONFIRM_UPGRADE: the verdict, and the upstream opened
 * before the UI hears 101 (the local socket connects at once, so its
 * absence is a 503; a relay's TLS handshake finishes after the upgrade,
 * and the UI's first frames wait in the channel meanwhile). */
static int on_confirm_upgrade(bridge_server_t *s, struct lws *wsi,
                              bridge_screen_t *sc, const char *proto) {
  char origin_raw[256], origin[128], path_raw[512], path[320];
  const char *peer = peer_of(sc);
  bool has_origin = copy_hdr(wsi, WSI_TOKEN_ORIGIN, origin_raw,
                             sizeof(origin_raw));
  bool has_path = copy_hdr(wsi, WSI_TOKEN_GET_URI, path_raw, sizeof(path_raw));
  tg_printable(origin, sizeof(origin), origin_raw);
  tg_printable(path, sizeof(path), path_raw);
  if (!proto || strcmp(proto, "websocket"))
    return refuse_upgrade(wsi, peer, origin, path, 400,
                          "only WebSocket upgrades");
  if (!has_path) return refuse_upgrade(wsi, peer, origin, path, 404, "no path");
  bridge_decision_t d;
  bridge_decide(s->cfg, path_raw, has_origin ? origin_raw : NULL, &d);
  if (d.verdict == BRIDGE_REFUSE)
    return refuse_upgrade(wsi, peer, origin, path, d.status, d.why);
  if (s->state != BRIDGE_RUNNING || s->n_conns >= BRIDGE_MAX_CONNS)
    return refuse_upgrade(wsi, peer, origin, path, 503,
                          s->state != BRIDGE_RUNNING ? "the bridge is stopping"
                                                     : "too many connections");
  bridge_conn_t *c = calloc(1, sizeof(*c));
  if (!c) return refuse_upgrade(wsi, peer, origin, path, 503, "out of memory");
  c->srv = s;
  c->id = ++s->next_id;
  c->kind = d.verdict;
  c->opened_ms = uv_now(s->loop);
  tg_list_init(&c->out);
  tg_frame_decoder_init(&c->dec);
  snprintf(c->peer, sizeof(c->peer), "%s", peer);
  snprintf(c->origin, sizeof(c->origin), "%s", origin);
  snprintf(c->path, sizeof(c->path), "%s", path);
  char err[400];
  if (open_upstream(c, &d, err, sizeof(err)) < 0) {
    tg_frame_decoder_free(&c->dec);
    free(c);
    return refuse_upgrade(wsi, peer, origin, path,
                          d.verdict == BRIDGE_LOCAL ? 503 : 502, err);
  }
  c->wsi = wsi;
  tg_list_insert_tail(&s->conns, &c->node);
  s->n_conns++;
  tg__bridge_screen_set_conn(sc, c);
  TG_INFO("%s bridge #%" PRIu64 ": %s origin %s %s -> %s", TG_NOTE(BRIDGE_OPENED),
          c->id, peer, origin, path, c->upstream);
  return 0;
}

/* LWS_CALLBACK_WSI_DESTROY: the WebSocket is gone, for whatever reason
 * (the screen's, if it closed the client). */
static void on_destroy(bridge_conn_t *c, bridge_screen_t *sc) {
  tg__bridge_screen_set_conn(sc, NULL);
  c->wsi = NULL;
  tg_notice_t screened_code = TG_N_NONE;
  const char *screened = tg__bridge_screen_why(sc, &screened_code);
  if (screened) set_why(c, screened_code, "%s", screened);
  set_why(c, TG_N_BRIDGE_UI_GONE, "the WebSocket ended without a close from the UI (a broken "
             "connection, or a WebSocket protocol error)");
  conn_close(c, LWS_CLOSE_STATUS_NORMAL);
  maybe_free(c);
}

int tg__bridge_on_lws(struct lws *wsi, enum lws_callback_reasons reason,
                      void *user, void *in, size_t len) {
  (void)user;
  bridge_server_t *s = lws_context_user(lws_get_context(wsi));
  /* NULL until a successful adoption set it (bridge_screen.c, adopt). */
  bridge_screen_t *sc = lws_get_opaque_user_data(wsi);
  bridge_conn_t *c = sc ? tg__bridge_screen_conn(sc) : NULL;
  switch (reason) {
    case LWS_CALLBACK_HTTP: {
      /* Not an upgrade: the bridge serves no pages. */
      char path[320], raw[512];
      copy_hdr(wsi, WSI_TOKEN_GET_URI, raw, sizeof(raw));
      tg_printable(path, sizeof(path), raw);
      TG_WARN("%s bridge: %s %s refused (404): not a WebSocket upgrade",
              TG_NOTE(BRIDGE_REFUSED), peer_of(sc), path);
      lws_return_http_status(wsi, 404, "not a WebSocket upgrade");
      return -1;
    }
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
      return sc ? on_confirm_upgrade(s, wsi, sc, in) : -1;
    case LWS_CALLBACK_ESTABLISHED:
      if (sc) tg__bridge_screen_established(sc);
      return 0;
    case LWS_CALLBACK_RECEIVE:
      return c ? on_receive(c, in, len) : -1;
    case LWS_CALLBACK_SERVER_WRITEABLE:
      return c ? on_writeable(c) : -1;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
      if (c) {
        unsigned code = len >= 2 ? ((unsigned)((uint8_t *)in)[0] << 8) |
                                       ((uint8_t *)in)[1]
                                 : 1005;
        set_why(c, TG_N_BRIDGE_UI_CLOSED, "the UI closed the WebSocket (code %u)",
                code);
      }
      return 0;
    case LWS_CALLBACK_WSI_DESTROY:
      if (c) on_destroy(c, sc);
      if (sc) tg__bridge_screen_wsi_destroyed(sc); /* may free |sc| */
      return 0;
    default:
      return 0;
  }
}

void tg__bridge_close_all(bridge_server_t *s) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->conns) {
    bridge_conn_t *c = TG_CONTAINER_OF(it, bridge_conn_t, node);
    set_why(c, TG_N_BRIDGE_STOPPING, "the bridge is stopping");
    conn_close(c, LWS_CLOSE_STATUS_GOINGAWAY);
  }
}
