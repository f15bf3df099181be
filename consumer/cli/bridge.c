/* `tracegate bridge`: lets the Perfetto UI record from tracegated, as
 * Perfetto's `tracebox websocket_bridge` does: WebSockets on a loopback
 * port, each bridged to the local consumer socket (/traced) or to a
 * host's tracegate-relay over mutual TLS (/traced/HOST).
 *
 * This file is the command: its flags, and libwebsockets on the command's
 * libuv loop as a foreign loop (the same documented lws usage as
 * collector/http.c: lws_context_creation_info.foreign_loops with
 * LWS_SERVER_OPTION_LIBUV), so that the upstream transports (ipc/, tls/),
 * which are libuv's, run on the same thread and loop. lws's vhost listens
 * nowhere: bridge_screen.c accepts the connections and hands them to lws
 * behind its check of the client's frames. Connections are
 * bridge_conn.c's, the verdict on each upgrade bridge_policy.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "consumer/cli/bridge.h"
#include "consumer/cli/cli.h"
#include "ipc/channel.h"
#include "ipc/net_addr.h"
#include "tracegate/error.h"

#define DEFAULT_LISTEN "127.0.0.1:8037"
#define MAX_HOSTS 4096
#define RX_BUFFER_SIZE (16u * 1024)
#define HANDSHAKE_TIMEOUT_S 10

typedef struct bridge_run {
  bridge_server_t srv;
  uv_signal_t sigint, sigterm;
  uv_idle_t stopper;
  bool stop_requested;
} bridge_run_t;

/* lws's lines end in '\n'; they concern peers or its own setup. */
static void lws_log_emit(int level, const char *line) {
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
  TG_WARN("lws%s: %.*s", (level & LLL_ERR) ? " error" : "", (int)n, line);
}

/* --- stopping ----------------------------------------------------------- */

static void count_closing(uv_handle_t *h, void *arg) {
  if (uv_is_closing(h)) ++*(unsigned *)arg;
}

/* lws 4.1 on a foreign loop takes two lws_context_destroy() calls (its
 * minimal-http-server-eventlib-foreign example): the first closes every
 * connection and starts closing lws's handles on the loop, the second,
 * once those closes have run, frees the context and clears *pcontext.
 * Both run from this idle handle, outside any lws callback. */
static void on_stopper(uv_idle_t *h) {
  bridge_run_t *r = h->data;
  bridge_server_t *s = &r->srv;
  if (s->state == BRIDGE_STOPPING) {
    s->state = BRIDGE_DRAINING;
    lws_context_destroy(s->ctx);
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
  uv_close((uv_handle_t *)h, NULL);
  uv_close((uv_handle_t *)&r->sigint, NULL);
  uv_close((uv_handle_t *)&r->sigterm, NULL);
}

static void begin_stop(bridge_run_t *r) {
  if (r->stop_requested) return;
  r->stop_requested = true;
  r->srv.state = BRIDGE_STOPPING;
  tg__bridge_screen_stop(&r->srv);
  tg__bridge_close_all(&r->srv);
  uv_idle_start(&r->stopper, on_stopper);
}

static void on_signal(uv_signal_t *h, int signum) {
  bridge_run_t *r = h->data;
  fprintf(stderr, CLI_PROG " bridge: %s: stopping\n",
          signum == SIGINT ? "interrupted" : "terminated");
  begin_stop(r);
}

/* --- starting ----------------------------------------------------------- */

/* Only loopback: the bridge hands the tracing service to whoever reaches
 * its port from an allowed origin, and the UI runs on this machine. */
static bool is_loopback(const tg_net_addr_t *a) {
  struct sockaddr_storage ss;
  if (tg_net_addr_to_sockaddr(a, &ss) < 0) return false;
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
  return ss.ss_family == AF_INET6 &&
         !memcmp(&in6->sin6_addr, &in6addr_loopback, sizeof(in6addr_loopback));
}

static int start_server(bridge_run_t *r, uv_loop_t *loop,
                        const bridge_cfg_t *cfg, const tg_net_addr_t *at,
                        uint16_t *port) {
  bridge_server_t *s = &r->srv;
  s->loop = loop;
  s->cfg = cfg;
  tg_list_init(&s->conns);
  tg_list_init(&s->screens);
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
  vi.timeout_secs = HANDSHAKE_TIMEOUT_S;
  vi.timeout_secs_ah_idle = HANDSHAKE_TIMEOUT_S;
  vi.alpn = "http/1.1";
  s->vh = lws_create_vhost(s->ctx, &vi);
  if (!s->vh) {
    fprintf(stderr, CLI_PROG " bridge: libwebsockets refused its vhost (its "
            "warning above says why)\n");
    return -1; /* the caller stops what lws started */
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

static int run_bridge(const bridge_cfg_t *cfg, const tg_net_addr_t *at) {
  uv_loop_t loop;
  if (uv_loop_init(&loop) < 0) {
    fprintf(stderr, CLI_PROG " bridge: cannot start an event loop\n");
    return CLI_EXIT_FAIL;
  }
  bridge_run_t *r = calloc(1, sizeof(*r));
  if (!r) {
    uv_loop_close(&loop);
    return CLI_EXIT_FAIL;
  }
  uv_signal_init(&loop, &r->sigint);
  uv_signal_init(&loop, &r->sigterm);
  uv_idle_init(&loop, &r->stopper);
  uv_tcp_init(&loop, &r->srv.listener);
  r->sigint.data = r->sigterm.data = r->stopper.data = r;
  int code = CLI_EXIT_OK;
  uint16_t port = 0;
  if (start_server(r, &loop, cfg, at, &port) < 0) {
    code = CLI_EXIT_FAIL;
    if (r->srv.ctx) begin_stop(r);
    else {
      uv_close((uv_handle_t *)&r->srv.listener, NULL);
      uv_close((uv_handle_t *)&r->stopper, NULL);
      uv_close((uv_handle_t *)&r->sigint, NULL);
      uv_close((uv_handle_t *)&r->sigterm, NULL);
    }
  } else {
    uv_signal_start(&r->sigint, on_signal, SIGINT);
    uv_signal_start(&r->sigterm, on_signal, SIGTERM);
    tg_net_addr_t shown_at = *at;
    shown_at.port = port;
    char shown[TG_NET_ADDR_STRLEN];
    tg_net_addr_format(&shown_at, shown, sizeof(shown));
    fprintf(stderr,
            CLI_PROG " bridge: listening on ws://%s" BRIDGE_PATH
            " (local service: %s)%s\n",
            shown, cfg->consumer_socket,
            cfg->tls ? " and ws://.../traced/HOST (relays over TLS)" : "");
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  bool clean = cli_loop_close(&loop);
  free(r);
  if (!clean) {
    fprintf(stderr, CLI_PROG " bridge: internal error: handles left open\n");
    return CLI_EXIT_FAIL;
  }
  return code;
}

static const char about[] =
    "Lets the Perfetto UI record traces from tracegated, as Perfetto's\n"
    "`tracebox websocket_bridge` does: in ui.perfetto.dev, Record new trace,\n"
    "target \"Linux / websocket\" at ws://127.0.0.1:8037/traced. Each\n"
    "WebSocket is bridged to its own connection to the local service's\n"
    "consumer socket (path /traced), or to the tracegate-relay of HOST over\n"
    "mutual TLS with this command's client certificate (path /traced/HOST;\n"
    "HOST is host[:port], or a name from --hosts; the relay enforces the\n"
    "certificate's role). Only pages from https://ui.perfetto.dev,\n"
    "http://localhost:10000, http://127.0.0.1:10000 and --allow-origin may\n"
    "connect (exact match; refused with 403 otherwise), and the bridge\n"
    "listens on loopback addresses only. Each connection is logged when it\n"
    "opens and closes: peer, origin, path, bytes each way, why it closed.\n"
    "Runs until interrupted.\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " bridge\n"
    "  " CLI_PROG " bridge --hosts fleet.txt --ca ca.pem --cert me.pem "
    "--key me.key\n";

static int usage_error(const char *prog, const char *what) {
  fprintf(stderr, "%s: %s (see --help)\n", prog, what);
  return CLI_EXIT_USAGE;
}

int cli_bridge_main(int argc, char **argv) {
  const char *prog = CLI_PROG " bridge";
  bridge_cfg_t cfg = {.consumer_socket = tg_ipc_default_socket(false)};
  cli_remote_opts_t *ro = calloc(1, sizeof(*ro));
  if (!ro) return CLI_EXIT_FAIL;
  const char *listen = DEFAULT_LISTEN;
  const tg_flag_t flags[] = {
      {"listen", TG_FLAG_STRING, &listen, "ADDR:PORT",
       "where the UI connects: a loopback address (127.0.0.1, [::1]) and "
       "port (0: any free port)", 0, 0},
      {"consumer-socket", TG_FLAG_STRING, &cfg.consumer_socket, "PATH",
       "the local service's consumer socket, for /traced ('@name': "
       "abstract)", 0, 0},
      {"allow-origin", TG_FLAG_LIST,
       &(tg_flag_list_t){cfg.origins, BRIDGE_MAX_ORIGINS, &cfg.n_origins},
       "ORIGIN",
       "one more origin allowed to connect, as the browser sends it "
       "(\"http://localhost:8080\"); may be repeated", 0, 0},
      {"hosts", TG_FLAG_STRING, &ro->hosts_file, "FILE",
       "the hosts /traced/HOST may name, as record --hosts reads them (one "
       "per line, \"HOST [name=SERVER_NAME]\"); without it, any host:port", 0,
       0},
      CLI_TLS_FLAGS(ro),
  };
  int code = CLI_EXIT_USAGE;
  int rv = cli_parse_flags(prog, "[--listen ADDR:PORT] [--hosts FILE] "
                           "[--allow-origin ORIGIN]...", about, flags,
                           sizeof(flags) / sizeof(flags[0]), argc, argv, NULL,
                           0, NULL);
  if (rv == 1) code = CLI_EXIT_OK;
  if (rv != 0) goto out;
  tg_net_addr_t at;
  if (tg_net_addr_parse(listen, TG_NET_ADDR_PORT_ZERO, 0, &at) < 0) {
    code = usage_error(prog, "--listen takes ADDR:PORT (127.0.0.1:8037)");
    goto out;
  }
  if (!strcmp(at.host, "localhost")) snprintf(at.host, sizeof(at.host), "127.0.0.1");
  if (!is_loopback(&at)) {
    fprintf(stderr, "%s: --listen %s: only loopback addresses (127.0.0.1, "
            "[::1]): the bridge hands the tracing service to whoever reaches "
            "its port, and the UI runs on this machine\n", prog, listen);
    goto out;
  }
  for (size_t i = 0; i < cfg.n_origins; i++) {
    if (!cfg.origins[i][0] || strchr(cfg.origins[i], ',')) {
      code = usage_error(prog, "--allow-origin takes one origin, as "
                         "\"scheme://host[:port]\"");
      goto out;
    }
  }
  code = CLI_EXIT_FAIL;
  if (cli_tls_defaults(ro) < 0) goto out;
  if (ro->hosts_file && !ro->ca) {
    fprintf(stderr, "%s: --hosts needs --ca (the CA that signed the relays' "
            "certificates), --cert and --key\n", prog);
    goto out;
  }
  if (ro->ca && cli_tls_load(ro->cert, ro->key, ro->ca, &cfg.tls) < 0) goto out;
  cfg.server_name = ro->server_name;
  if (ro->hosts_file) {
    if (cli_targets_load(ro->hosts_file, &cfg.hosts, &cfg.n_hosts, MAX_HOSTS) <
            0 ||
        cli_targets_name(cfg.hosts, cfg.n_hosts) < 0)
      goto out;
    if (!cfg.hosts) { /* an empty file allows no host */
      cfg.hosts = calloc(1, sizeof(*cfg.hosts));
      if (!cfg.hosts) goto out;
    }
  }
  tg_log_set_level(TG_LOG_INFO); /* each connection's open and close */
  code = run_bridge(&cfg, &at);
out:
  free(cfg.hosts);
  if (cfg.tls) tg_tls_config_free(cfg.tls);
  free(ro);
  return code;
}
