/* The TCP side of `tracegate bridge`: it accepts the clients itself and
 * puts a screen between each one and libwebsockets.
 *
 * Why: RFC 6455 §5.1 has a server close the connection on any client
 * frame without the MASK bit; libwebsockets 4.1 (Debian bookworm's) reads
 * such a frame as if it were masked, and its API does not show the bit.
 * So each accepted connection is a socketpair: lws adopts one end
 * (lws_adopt_descriptor_vhost_via_info, as for any foreign listener; the
 * wsi's opaque user data is the screen), and this file pumps bytes
 * between the client's TCP stream and the other end, on the bridge's
 * libuv loop:
 *
 *   client TCP  --head, then frames-->  screen  ---unchanged--->  lws
 *               <------------------- unchanged -----------------
 *
 * The screen changes no byte. It looks at what the client sends, in
 * three steps (bridge_screen_walk.h does the looking):
 *   - the HTTP request head goes to lws as it comes, up to its end (an
 *     empty line; twice lws's header room at most, or the client is
 *     closed);
 *   - then the client is not read until lws has decided: the WebSocket
 *     established (bridge_conn.c tells the screen), or lws answered (an
 *     HTTP error: bridge_conn.c's 4xx or 5xx) and closed its end, whose
 *     last bytes still reach the client before the TCP connection is shut
 *     down; a WebSocket client waits for the 101 before it sends frames
 *     anyway;
 *   - after the upgrade, the header of every client frame is read, and
 *     the first one without the MASK bit closes both sides at once: the
 *     frame does not reach lws, and the connection's close line says why.
 * Nothing else is judged here: HTTP, lengths, opcodes, fragments, UTF-8
 * and limits stay libwebsockets' and bridge_conn.c's.
 *
 * Memory: one read (BRIDGE_READ_SIZE) is queued per direction at most.
 * What a side cannot take at once is kept and the other side is not read
 * until it has been written; the kernel's socket buffers do the rest, and
 * lws's own flow control (bridge_conn.c) reaches the client through them.
 *
 * Lifetime: a screen is freed once its three handles are closed and lws
 * destroyed its wsi (LWS_CALLBACK_WSI_DESTROY, or its whole context) or
 * never adopted one, so that the wsi's opaque pointer never dangles.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fsm.h"
#include "common/log.h"
#include "cli/bridge.h"
#include "cli/bridge_test.h"
#include "cli/bridge_screen_walk.h"
#include "ipc/net_addr_listen.h"
#include "tracegate/error.h"

/* Connections at once, upgraded or not: lws bridges BRIDGE_MAX_CONNS
 * WebSockets; the others are requests being answered or refused. */
#define MAX_SCREENS (4 * BRIDGE_MAX_CONNS)
/* The raw head also holds the names and separators lws does not keep:
 * past twice its room, lws has refused it or would. */
#define MAX_HEAD (2 * BRIDGE_MAX_HEADER)
/* Once lws is done, how long a client that reads nothing may hold on to
 * the rest of what lws wrote. */
#define FLUSH_GRACE_MS 5000
#define LISTEN_BACKLOG 128

/* Forward only: HEAD -> HELD -> FRAMES, any of them -> HALF (the client's
 * end), any live one -> FLUSHING (lws's end) -> CLOSED, or straight to
 * CLOSED (kNext). */
typedef enum screen_state {
  SC_HEAD,     /* the request head goes to lws as it comes */
  SC_HELD,     /* the head went: the client waits for lws's answer */
  SC_FRAMES,   /* a WebSocket: every client frame header is checked */
  SC_HALF,     /* the client ended its side: lws gets the end, then answers */
  SC_FLUSHING, /* lws is done: what it wrote goes out, then the close */
  SC_CLOSED,   /* handles closing */
} screen_state_t;

/* One direction: what the writer did not take at once. */
typedef struct pump {
  uv_stream_t *to;
  uv_write_t req;
  uint8_t *buf; /* BRIDGE_READ_SIZE, from the first queued write to the end */
  bool queued;  /* |req| writes from |buf| */
} pump_t;

struct bridge_screen {
  tg_list_t node; /* bridge_server_t.screens */
  bridge_server_t *srv;
  screen_state_t state;
  /* lws's, from a successful adoption until it is destroyed; NULL: none
   * (the screen's opaque pointer is set only then, so no callback of a
   * failed adoption ever sees the screen). */
  struct lws *wsi;
  bridge_conn_t *conn; /* bridge_conn.c's, once upgraded */
  uv_tcp_t tcp;        /* the client */
  uv_pipe_t lws_end;   /* our end of lws's socketpair */
  uv_timer_t grace;    /* bounds SC_FLUSHING */
  unsigned open_handles;
  bool tcp_reading, lws_reading; /* as update_reading() last set them */
  uv_shutdown_t tcp_shut, lws_shut;
  pump_t up, down; /* the client to lws, lws to the client */
  bridge_head_t head;
  bridge_walk_t walk;
  uint8_t *held; /* the client's bytes after its head, until the upgrade */
  size_t held_len;
  char peer[TG_NET_ADDR_STRLEN];
  char why[256]; /* the screen's own reason for closing the client */
  tg_notice_t why_code; /* its code */
};

static void update_reading(bridge_screen_t *sc);

#define S(x) TG_FSM_BIT(SC_##x)
#define END S(FLUSHING) | S(CLOSED)
static const uint32_t kNext[] = {
    [SC_HEAD] = S(HELD) | S(HALF) | END,
    [SC_HELD] = S(FRAMES) | S(HALF) | END,
    [SC_FRAMES] = S(HALF) | END,
    [SC_HALF] = END,
    [SC_FLUSHING] = S(CLOSED),
    [SC_CLOSED] = 0,
};
#undef END
#undef S
static const char *const kNames[] = {"head", "held", "frames", "half-closed",
                                     "flushing", "closed"};
_Static_assert(TG_FSM_COUNT(kNext) == SC_CLOSED + 1, "arrows per state");
_Static_assert(TG_FSM_COUNT(kNames) == TG_FSM_COUNT(kNext), "a name per state");
static const tg_fsm_def_t kDef = {"bridge screen", TG_FSM_COUNT(kNext), kNext,
                                  kNames};

/* The one transition, under common/fsm.h's policy. */
static void set_state(bridge_screen_t *sc, screen_state_t to,
                      const char *why) {
  unsigned st = sc->state;
  if (tg_fsm_move(&kDef, &st, to, &sc->srv->bad_transitions, sc->peer, why))
    sc->state = to;
}

/* --- closing ------------------------------------------------------------- */

static void maybe_free(bridge_screen_t *sc) {
  if (sc->open_handles || sc->wsi) return;
  free(sc->up.buf);
  free(sc->down.buf);
  free(sc->held);
  tg_list_remove(&sc->node);
  sc->srv->n_screens--;
  free(sc);
}

static void on_handle_closed(uv_handle_t *h) {
  bridge_screen_t *sc = h->data;
  sc->open_handles--;
  maybe_free(sc);
}

static void close_handle(uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, on_handle_closed);
}

/* Both sides close now; lws drops the wsi at its next timeout check
 * (LWS_TO_KILL_ASYNC: never at once, so also safe inside its callback). */
static void end(bridge_screen_t *sc, const char *why) {
  if (sc->state == SC_CLOSED) return;
  set_state(sc, SC_CLOSED, why);
  if (sc->wsi)
    lws_set_timeout(sc->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
  free(sc->held);
  sc->held = NULL;
  uv_timer_stop(&sc->grace);
  close_handle((uv_handle_t *)&sc->tcp);
  close_handle((uv_handle_t *)&sc->lws_end);
  close_handle((uv_handle_t *)&sc->grace);
}

/* The screen's verdict on the client. Before the upgrade nobody else
 * logs it; after, the connection's close line gives |why|. */
static void fail(bridge_screen_t *sc, tg_notice_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(bridge_screen_t *sc, tg_notice_t code, const char *fmt, ...) {
  if (sc->state == SC_CLOSED) return;
  if (!sc->why[0]) {
    sc->why_code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sc->why, sizeof(sc->why), fmt, ap);
    va_end(ap);
  }
  if (!sc->conn)
    TG_WARN("%s bridge: %s closed: %s", tg_notice_tag(sc->why_code), sc->peer,
            sc->why);
  end(sc, sc->why);
}

static void on_grace(uv_timer_t *t) {
  bridge_screen_t *sc = t->data;
  end(sc, "the client did not read the rest in time");
}

static void on_client_shut(uv_shutdown_t *req, int status) {
  bridge_screen_t *sc = req->data;
  if (status == UV_ECANCELED) return; /* closing already */
  end(sc, status < 0 ? uv_strerror(status) : "all sent");
}

/* lws closed its end (or it failed): the rest of what lws wrote goes to
 * the client, then the TCP connection is shut down and closed. */
static void lws_done(bridge_screen_t *sc, const char *why) {
  if (sc->state >= SC_FLUSHING) return;
  if (sc->down.queued && sc->srv->state != BRIDGE_RUNNING) {
    end(sc, "the bridge is stopping"); /* no wait for a client behind */
    return;
  }
  set_state(sc, SC_FLUSHING, why);
  free(sc->held);
  sc->held = NULL;
  close_handle((uv_handle_t *)&sc->lws_end);
  update_reading(sc);
  uv_timer_start(&sc->grace, on_grace, FLUSH_GRACE_MS, 0);
  sc->tcp_shut.data = sc;
  int rv = uv_shutdown(&sc->tcp_shut, (uv_stream_t *)&sc->tcp, on_client_shut);
  if (rv < 0) end(sc, uv_strerror(rv));
}

/* --- moving bytes -------------------------------------------------------- */

static void release_held(bridge_screen_t *sc);

static void pump_failed(bridge_screen_t *sc, pump_t *pm, int err) {
  if (pm == &sc->up) lws_done(sc, uv_strerror(err));
  else end(sc, uv_strerror(err));
}

static void on_written(uv_write_t *req, int status) {
  bridge_screen_t *sc = req->data;
  pump_t *pm = req == &sc->up.req ? &sc->up : &sc->down;
  pm->queued = false;
  if (status == UV_ECANCELED) return; /* closing */
  if (status < 0) {
    pump_failed(sc, pm, status);
    return;
  }
  if (pm == &sc->up) release_held(sc);
  update_reading(sc);
}

/* Writes what the stream takes now and queues the rest (one read at
 * most: the source is not read while it waits, and the held bytes wait
 * for the queued write, release_held), in the pump's one buffer. */
static void pump_write(bridge_screen_t *sc, pump_t *pm, const uint8_t *p,
                       size_t n) {
  if (!n) return;
  assert(!pm->queued && n <= BRIDGE_READ_SIZE);
  uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
  int w = uv_try_write(pm->to, &b, 1);
  if (w == UV_EAGAIN) w = 0;
  if (w < 0) {
    pump_failed(sc, pm, w);
    return;
  }
  if ((size_t)w == n) return;
  if (!pm->buf && !(pm->buf = malloc(BRIDGE_READ_SIZE))) {
    fail(sc, TG_N_BRIDGE_FAILED, "out of memory");
    return;
  }
  memcpy(pm->buf, p + w, n - (size_t)w);
  b = uv_buf_init((char *)pm->buf, (unsigned)(n - (size_t)w));
  pm->req.data = sc;
  int rv = uv_write(&pm->req, pm->to, &b, 1, on_written);
  if (rv < 0) {
    pump_failed(sc, pm, rv);
    return;
  }
  pm->queued = true;
}

static void unmasked(bridge_screen_t *sc) {
  const bridge_walk_t *w = &sc->walk;
  fail(sc, TG_N_BRIDGE_UNMASKED, "an unmasked frame from the client (opcode 0x%x, after %" PRIu64
       " frames; RFC 6455 5.1: a client masks every frame)",
       (unsigned)(w->hdr[0] & 0x0f), w->frames);
}

/* Client bytes after the upgrade: checked, then on to lws. */
static void frames_to_lws(bridge_screen_t *sc, const uint8_t *p, size_t n) {
  if (bridge_walk_feed(&sc->walk, p, n) < 0) {
    unmasked(sc);
    return;
  }
  pump_write(sc, &sc->up, p, n);
}

/* What came behind the head goes once lws upgraded and what went before
 * it has been written. */
static void release_held(bridge_screen_t *sc) {
  if (sc->state != SC_FRAMES || !sc->held || sc->up.queued) return;
  uint8_t *h = sc->held;
  sc->held = NULL;
  frames_to_lws(sc, h, sc->held_len);
  free(h);
}

static void from_client(bridge_screen_t *sc, const uint8_t *p, size_t n) {
  if (sc->state == SC_FRAMES) {
    frames_to_lws(sc, p, n);
    return;
  }
  if (sc->state != SC_HEAD) return; /* not read in the other states */
  size_t used;
  if (bridge_head_feed(&sc->head, p, n, MAX_HEAD, &used) < 0) {
    fail(sc, TG_N_BRIDGE_BAD_REQUEST, "no end of the request head within %u bytes",
         (unsigned)MAX_HEAD);
    return;
  }
  if (sc->head.state == BRIDGE_HEAD_ENDED) {
    if (used < n) {
      sc->held = malloc(n - used);
      if (!sc->held) {
        fail(sc, TG_N_BRIDGE_FAILED, "out of memory");
        return;
      }
      memcpy(sc->held, p + used, n - used);
      sc->held_len = n - used;
    }
    set_state(sc, SC_HELD, "the request head ended");
  }
  pump_write(sc, &sc->up, p, used);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  bridge_screen_t *sc = h->data;
  /* One buffer for every read: each read callback is done with it (what
   * it keeps, it copies) before the next read. */
  *buf = uv_buf_init((char *)sc->srv->rx, sizeof(sc->srv->rx));
}

static void on_client_read(uv_stream_t *st, ssize_t nread,
                           const uv_buf_t *buf) {
  bridge_screen_t *sc = st->data;
  if (nread == 0) return;
  if (nread == UV_EOF) {
    if (sc->state > SC_FRAMES) return;
    set_state(sc, SC_HALF, "the client ended its side");
    if (uv_shutdown(&sc->lws_shut, (uv_stream_t *)&sc->lws_end, NULL) < 0)
      lws_done(sc, "cannot pass the client's end on");
    update_reading(sc);
    return;
  }
  if (nread < 0) {
    end(sc, uv_strerror((int)nread));
    return;
  }
  from_client(sc, (const uint8_t *)buf->base, (size_t)nread);
  update_reading(sc);
}

static void on_lws_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  bridge_screen_t *sc = st->data;
  if (nread == 0) return;
  if (nread < 0) {
    lws_done(sc, nread == UV_EOF ? "lws closed its end"
                                 : uv_strerror((int)nread));
    return;
  }
  pump_write(sc, &sc->down, (const uint8_t *)buf->base, (size_t)nread);
  update_reading(sc);
}

/* Reads a side only while the other has nothing of it queued, and the
 * client only where the screen looks at its bytes. */
static void update_reading(bridge_screen_t *sc) {
  bool tcp = (sc->state == SC_HEAD || sc->state == SC_FRAMES) &&
             !sc->up.queued && !sc->held;
  bool lws = sc->state <= SC_HALF && !sc->down.queued;
  int rv = 0;
  if (tcp != sc->tcp_reading) {
    sc->tcp_reading = tcp;
    if (tcp)
      rv = uv_read_start((uv_stream_t *)&sc->tcp, on_alloc, on_client_read);
    else
      uv_read_stop((uv_stream_t *)&sc->tcp);
  }
  if (rv == 0 && lws != sc->lws_reading) {
    sc->lws_reading = lws;
    if (lws)
      rv = uv_read_start((uv_stream_t *)&sc->lws_end, on_alloc, on_lws_read);
    else
      uv_read_stop((uv_stream_t *)&sc->lws_end);
  }
  if (rv < 0) end(sc, uv_strerror(rv));
}

/* --- accepting ----------------------------------------------------------- */

/* Hands one end of a socketpair to lws; the screen keeps the other. */
static int adopt(bridge_screen_t *sc) {
  bridge_server_t *s = sc->srv;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) <
      0)
    return -errno;
  int rv = uv_pipe_open(&sc->lws_end, sv[0]);
  if (rv < 0) {
    close(sv[0]);
    close(sv[1]);
    return rv;
  }
  lws_adopt_desc_t ad;
  memset(&ad, 0, sizeof(ad));
  ad.vh = s->vh;
  ad.type = LWS_ADOPT_SOCKET | LWS_ADOPT_HTTP;
  ad.fd.sockfd = sv[1];
  ad.vh_prot_name = s->protocols[0].name;
  /* No opaque pointer yet: a failed adoption may destroy its wsi with or
   * without LWS_CALLBACK_WSI_DESTROY, and then no callback may know the
   * screen. A successful one runs no callback that needs it. On failure
   * lws has closed sv[1]. */
  ad.opaque = NULL;
  struct lws *wsi = lws_adopt_descriptor_vhost_via_info(&ad);
  if (!wsi) return -ECONNABORTED;
  lws_set_opaque_user_data(wsi, sc);
  sc->wsi = wsi;
  return 0;
}

static void refuse(bridge_server_t *s);

static void on_refused_closed(uv_handle_t *h) {
  bridge_server_t *s = h->data;
  bool queued = s->refusal == BRIDGE_REFUSAL_QUEUED;
  s->refusal = BRIDGE_REFUSAL_NONE;
  if (queued) refuse(s);
}

/* Out of memory for a screen: the connection is taken and closed, or
 * libuv would stop offering the next ones (it polls the listener again
 * only once the pending one is accepted). One handle for it: a connection
 * refused while the last still closes is accepted when that close ends
 * (libuv offers no other meanwhile). */
static void refuse(bridge_server_t *s) {
  if (s->refusal != BRIDGE_REFUSAL_NONE) {
    s->refusal = BRIDGE_REFUSAL_QUEUED;
    return;
  }
  /* Once per connection: a queued one is told when it is taken. */
  TG_WARN("bridge: out of memory: a connection is refused");
  uv_tcp_init(s->loop, &s->refused); /* cannot fail: no socket yet */
  s->refusal = BRIDGE_REFUSAL_CLOSING;
  s->refused.data = s;
  uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&s->refused);
  uv_close((uv_handle_t *)&s->refused, on_refused_closed);
}

static void on_connection(uv_stream_t *server, int status) {
  bridge_server_t *s = server->data;
  if (status < 0) {
    TG_WARN("bridge: cannot accept a connection: %s", uv_strerror(status));
    return;
  }
  bridge_screen_t *sc = NULL;
  if (s->fail_screens_for_test) s->fail_screens_for_test--;
  else sc = calloc(1, sizeof(*sc));
  if (!sc) {
    refuse(s);
    return;
  }
  sc->srv = s;
  snprintf(sc->peer, sizeof(sc->peer), "?");
  uv_tcp_init(s->loop, &sc->tcp);
  uv_pipe_init(s->loop, &sc->lws_end, 0);
  uv_timer_init(s->loop, &sc->grace);
  sc->tcp.data = sc->lws_end.data = sc->grace.data = sc;
  sc->open_handles = 3;
  sc->up.to = (uv_stream_t *)&sc->lws_end;
  sc->down.to = (uv_stream_t *)&sc->tcp;
  bridge_head_init(&sc->head);
  bridge_walk_init(&sc->walk);
  tg_list_insert_tail(&s->screens, &sc->node);
  s->n_screens++;

  int rv = uv_accept(server, (uv_stream_t *)&sc->tcp);
  if (rv < 0) {
    TG_WARN("bridge: cannot accept a connection: %s", uv_strerror(rv));
    end(sc, "not accepted");
    return;
  }
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  if (uv_tcp_getpeername(&sc->tcp, (struct sockaddr *)&ss, &len) == 0)
    tg_net_sockaddr_format((struct sockaddr *)&ss, sc->peer, sizeof(sc->peer));
  if (s->n_screens > MAX_SCREENS) {
    fail(sc, TG_N_BRIDGE_BUSY, "%u connections open already", (unsigned)MAX_SCREENS);
    return;
  }
  uv_tcp_nodelay(&sc->tcp, 1); /* as lws sets on what it accepts */
  rv = adopt(sc);
  if (rv < 0) {
    fail(sc, TG_N_BRIDGE_FAILED, "libwebsockets did not take the connection: %s",
         tg_strerror(rv));
    return;
  }
  TG_DEBUG("bridge: %s connected", sc->peer);
  update_reading(sc);
}

int tg__bridge_screen_listen(bridge_server_t *s, const tg_net_addr_t *at,
                             uint16_t *port) {
  s->listener.data = s;
  return tg_net_tcp_listen(&s->listener, at, LISTEN_BACKLOG, on_connection,
                           port);
}

void tg__bridge_screen_fail_next_for_test(bridge_server_t *s, unsigned n) {
  s->fail_screens_for_test = n;
}

void tg__bridge_screen_stop(bridge_server_t *s) {
  if (!uv_is_closing((uv_handle_t *)&s->listener))
    uv_close((uv_handle_t *)&s->listener, NULL);
}

void tg__bridge_screen_lws_gone(bridge_server_t *s) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->screens) {
    bridge_screen_t *sc = TG_CONTAINER_OF(it, bridge_screen_t, node);
    sc->wsi = NULL;
    sc->conn = NULL;
    if (sc->state == SC_CLOSED) maybe_free(sc);
    else lws_done(sc, "libwebsockets stopped");
  }
}

/* --- what lws tells ------------------------------------------------------ */

const char *tg__bridge_screen_peer(const bridge_screen_t *sc) {
  return sc->peer;
}

const char *tg__bridge_screen_why(const bridge_screen_t *sc, tg_notice_t *code) {
  *code = sc->why_code;
  return sc->why[0] ? sc->why : NULL;
}

bridge_conn_t *tg__bridge_screen_conn(const bridge_screen_t *sc) {
  return sc->conn;
}

void tg__bridge_screen_set_conn(bridge_screen_t *sc, bridge_conn_t *c) {
  sc->conn = c;
}

void tg__bridge_screen_established(bridge_screen_t *sc) {
  if (sc->state == SC_HEAD) {
    /* lws saw an end of the head where the screen saw none: nothing the
     * client sends can be checked, so it goes. */
    fail(sc, TG_N_BRIDGE_BAD_REQUEST, "the WebSocket opened before the end of the request head");
    return;
  }
  if (sc->state != SC_HELD) return;
  set_state(sc, SC_FRAMES, "WebSocket established");
  release_held(sc);
  update_reading(sc);
}

void tg__bridge_screen_wsi_destroyed(bridge_screen_t *sc) {
  sc->wsi = NULL;
  sc->conn = NULL;
  maybe_free(sc);
}
