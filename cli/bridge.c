/* `tracegate bridge`: lets the Perfetto UI record from tracegated, as
 * Perfetto's `tracebox websocket_bridge` does: WebSockets on a loopback
 * port, each bridged to the local consumer socket (/traced) or to a
 * host's tracegate-relay over mutual TLS (/traced/HOST).
 *
 * This file is the command: its flags, its signals and its loop;
 * bridge_server.c starts and stops libwebsockets and the listener on that
 * loop. Connections are bridge_conn.c's, what a client sends before lws
 * sees it bridge_screen.c's, the verdict on each upgrade
 * bridge_policy.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/remote.h"
#include "common/log.h"
#include "cli/bridge.h"
#include "cli/cli.h"
#include "ipc/channel.h"
#include "ipc/net_addr.h"
#include "tracegate/error.h"

#define DEFAULT_LISTEN "127.0.0.1:8037"
#define MAX_HOSTS 4096

typedef struct bridge_run {
  bridge_server_t srv;
  uv_signal_t sigint, sigterm;
} bridge_run_t;

/* --- stopping ----------------------------------------------------------- */

static void on_stopped(bridge_server_t *s) {
  bridge_run_t *r = s->data;
  uv_close((uv_handle_t *)&r->sigint, NULL);
  uv_close((uv_handle_t *)&r->sigterm, NULL);
}

static void on_signal(uv_signal_t *h, int signum) {
  bridge_run_t *r = h->data;
  fprintf(stderr, CLI_PROG " bridge: %s: stopping\n",
          signum == SIGINT ? "interrupted" : "terminated");
  tg__bridge_server_stop(&r->srv);
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
  r->sigint.data = r->sigterm.data = r;
  r->srv.data = r;
  r->srv.on_stopped = on_stopped;
  int code = CLI_EXIT_OK;
  uint16_t port = 0;
  if (tg__bridge_server_start(&r->srv, &loop, cfg, at, &port) < 0) {
    code = CLI_EXIT_FAIL;
    tg__bridge_server_stop(&r->srv);
  } else {
    uv_signal_start(&r->sigint, on_signal, SIGINT);
    uv_signal_start(&r->sigterm, on_signal, SIGTERM);
    tg_net_addr_t shown_at = *at;
    shown_at.port = port;
    char shown[TG_NET_ADDR_STRLEN];
    tg_net_addr_format(&shown_at, shown, sizeof(shown));
    fprintf(stderr,
            CLI_PROG " bridge: %s listening on ws://%s" BRIDGE_PATH
            " (local service: %s)%s\n", TG_NOTE(BRIDGE_LISTENING),
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
  fprintf(stderr, "%s: %s %s (see --help)\n", prog, TG_NOTE(USAGE), what);
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
       "per line, \"HOST [name=SERVER_NAME] [label=LABEL]\"); without it, "
       "any host:port", 0,
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
  if (!strcmp(at.host, "localhost"))
    snprintf(at.host, sizeof(at.host), "127.0.0.1");
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
  char why[TG_CLIENT_TLS_ERR_MAX];
  if (tg_client_tls_defaults(&ro->tls, why, sizeof(why)) < 0) {
    fprintf(stderr, CLI_PROG ": %s\n", why);
    goto out;
  }
  if (ro->hosts_file && !ro->tls.ca) {
    fprintf(stderr, "%s: --hosts needs --ca (the CA that signed the relays' "
            "certificates), --cert and --key\n", prog);
    goto out;
  }
  if (ro->tls.ca && tg_client_tls_load(ro->tls.cert, ro->tls.key, ro->tls.ca,
                                       &cfg.tls, why, sizeof(why)) < 0) {
    fprintf(stderr, CLI_PROG ": %s\n", why);
    goto out;
  }
  cfg.server_name = ro->server_name;
  if (ro->hosts_file) {
    if (tg_targets_load(ro->hosts_file, &cfg.hosts, &cfg.n_hosts, MAX_HOSTS,
                        why, sizeof(why)) < 0 ||
        tg_targets_name(cfg.hosts, cfg.n_hosts, why, sizeof(why)) < 0) {
      fprintf(stderr, CLI_PROG ": %s\n", why);
      goto out;
    }
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
