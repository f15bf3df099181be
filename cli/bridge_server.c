/* The bridge's server: libwebsockets on the owner's libuv loop, the
 * listener, and the stop that takes both down. See bridge.h.
 *
 * lws runs on the loop as a foreign loop (the same documented lws usage
 * as collector/http/http.c: lws_context_creation_info.foreign_loops with
 * LWS_SERVER_OPTION_LIBUV), so that the upstream transports (ipc/, tls/),
 * which are libuv's, run on the same thread and loop. lws's vhost listens
 * nowhere: bridge_screen.c accepts the connections and hands them to lws
 * behind its check of the client's frames.
 */
#include <stdio.h>
#include <string.h>

#include "common/fsm.h"
#include "common/log.h"
#include "cli/bridge.h"
#include "cli/cli.h"
#include "tracegate/error.h"

#define RX_BUFFER_SIZE (16u * 1024)

/* lws's lines end in '\n'; they concern peers or its own setup. */
static void lws_log_emit(int level, const char *line) {
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
  TG_WARN("lws%s: %.*s", (level & LLL_ERR) ? " error" : "", (int)n, line);
}

int tg__bridge_server_start(bridge_server_t *s, uv_loop_t *loop,
                            const bridge_cfg_t *cfg, const tg_net_addr_t *at,
                            uint16_t *port) {
  s->loop = loop;
  s->cfg = cfg;
  tg_list_init(&s->conns);
  tg_list_init(&s->screens);
  /* First, so that a stop after any failure below has both to close. */
  uv_tcp_init(loop, &s->listener);
  uv_idle_init(loop, &s->stopper);
  s->stopper.data = s;
  s->protocols[0] = (struct lws_protocols){
      .name = "tracegate-bridge",
      .callback = tg__bridge_on_lws,
      .rx_buffer_size = RX_BUFFER_SIZE,
  };
  lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_emit);

  void *loops[1] = {loop};
  struct lws_context_creation_info ci;
  memset(&ci, 0, sizeof(ci));
  /* VALIDATE_UTF8: a text message with bad UTF-8 closes the connection in
   * lws (any text message is refused by bridge_conn.c anyway). */
  ci.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
               LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN |
               LWS_SERVER_OPTION_SKIP_SERVER_CANONICAL_NAME |
               LWS_SERVER_OPTION_VALIDATE_UTF8;
  ci.foreign_loops = loops;
  ci.pcontext = &s->ctx;
  ci.user = s;
  ci.port = CONTEXT_PORT_NO_LISTEN;
  ci.max_http_header_data2 = BRIDGE_MAX_HEADER;
  ci.max_http_header_pool2 = BRIDGE_MAX_CONNS;
  ci.uid = -1;
  ci.gid = -1;
  s->ctx = lws_create_context(&ci);
  if (!s->ctx) {
    fprintf(stderr, CLI_PROG " bridge: libwebsockets refused its context "
            "(its libuv event library missing?)\n");
    return -1;
  }
  /* A server vhost without a listener of its own: the screen adopts
   * what it accepts into it (lws-adopt.h). */
  struct lws_context_creation_info vi;
  memset(&vi, 0, sizeof(vi));
  vi.protocols = s->protocols;
  vi.port = CONTEXT_PORT_NO_LISTEN_SERVER;
  vi.timeout_secs = BRIDGE_HANDSHAKE_TIMEOUT_S;
  vi.timeout_secs_ah_idle = BRIDGE_HANDSHAKE_TIMEOUT_S;
  vi.alpn = "http/1.1";
  s->vh = lws_create_vhost(s->ctx, &vi);
  if (!s->vh) {
    fprintf(stderr, CLI_PROG " bridge: libwebsockets refused its vhost (its "
            "warning above says why)\n");
    return -1;
  }
  int rv = tg__bridge_screen_listen(s, at, port);
  if (rv < 0) {
    char shown[TG_NET_ADDR_STRLEN];
    tg_net_addr_format(at, shown, sizeof(shown));
    fprintf(stderr, CLI_PROG " bridge: cannot listen on %s: %s\n", shown,
            tg_strerror(rv));
    return -1;
  }
  return 0;
}

/* --- stopping ----------------------------------------------------------- */

static void count_closing(uv_handle_t *h, void *arg) {
  if (uv_is_closing(h)) ++*(unsigned *)arg;
}

#define S(x) TG_FSM_BIT(BRIDGE_##x)
static const uint32_t kNext[] = {
    [BRIDGE_RUNNING] = S(STOPPING),
    [BRIDGE_STOPPING] = S(DRAINING),
    [BRIDGE_DRAINING] = 0,
};
#undef S
static const char *const kNames[] = {"running", "stopping", "draining"};
_Static_assert(TG_FSM_COUNT(kNext) == BRIDGE_DRAINING + 1, "arrows per state");
_Static_assert(TG_FSM_COUNT(kNames) == TG_FSM_COUNT(kNext), "a name per state");
static const tg_fsm_def_t kDef = {"bridge server", TG_FSM_COUNT(kNext), kNext,
                                  kNames};

/* The only writer of s->state after its start, under common/fsm.h's
 * policy. */
static void set_state(bridge_server_t *s, bridge_state_t to, const char *why) {
  unsigned st = s->state;
  if (tg_fsm_move(&kDef, &st, to, &s->bad_transitions, NULL, why))
    s->state = to;
}

static void on_stopper_closed(uv_handle_t *h) {
  bridge_server_t *s = h->data;
  if (s->on_stopped) s->on_stopped(s);
}

/* lws 4.1 on a foreign loop takes two lws_context_destroy() calls (its
 * minimal-http-server-eventlib-foreign example): the first closes every
 * connection and starts closing lws's handles on the loop, the second,
 * once those closes have run, frees the context and clears *pcontext.
 * Both run from this idle handle, outside any lws callback. */
static void on_stopper(uv_idle_t *h) {
  bridge_server_t *s = h->data;
  if (s->state == BRIDGE_STOPPING) {
    set_state(s, BRIDGE_DRAINING, "connections closed");
    if (s->ctx) lws_context_destroy(s->ctx);
    return;
  }
  unsigned closing = 0;
  uv_walk(s->loop, count_closing, &closing);
  if (closing) return;
  if (s->ctx) {
    lws_context_destroy(s->ctx);
    return;
  }
  tg__bridge_screen_lws_gone(s);
  uv_idle_stop(h);
  uv_close((uv_handle_t *)h, on_stopper_closed);
}

void tg__bridge_server_stop(bridge_server_t *s) {
  if (s->state != BRIDGE_RUNNING) return;
  set_state(s, BRIDGE_STOPPING, "stop");
  tg__bridge_screen_stop(s);
  tg__bridge_close_all(s);
  uv_idle_start(&s->stopper, on_stopper);
}
