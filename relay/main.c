/* tracegate-relay: the consumer protocol of the local tracing service,
 * offered to remote clients over mutual TLS (or over stdin/stdout for
 * `ssh host tracegate-relay --stdio`). Wires flags, the listener, signals
 * and reloads together; the per-connection work lives in relay/bridge.c
 * and the checking in relay/frame_filter.c. */
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mbedtls/version.h>
#include <uv.h>

#include "ipc/channel.h"
#include "ipc/net_addr.h"
#include "ipc/net_addr_listen.h"
#include "common/clock_loop.h"
#include "common/identity.h"
#include "relay/audit.h"
#include "auth/authz.h"
#include "relay/bridge.h"
#include "relay/relay_service.h"
#include "tls/paths.h"
#include "tls/session.h"
#include "tls/transport.h"
#include "tracegate/error.h"
#include "common/flags.h"
#include "common/log.h"


#define PROG "tracegate-relay"
#define DEFAULT_LISTEN "0.0.0.0:7467"
#define DETACH_TIMEOUT_MS 5000

/* Everything the process holds; one instance, in main()'s frame. */
typedef struct relay {
  uv_loop_t *loop;
  uv_tcp_t listener;
  bool listening;
  uv_signal_t sig_int, sig_term, sig_hup;
  bool stopping;
  bool signals_closed;
  tg_relay_env_t env;
  tg_clock_t clock; /* the loop's: what env.clock points at */
  tg_tls_config_t *tls;
  tg_tls_chan_opts_t chan_opts;
  tg_authz_t *authz;
  tg_relay_audit_t *audit;
  tg_relay_host_info_t host;
  const char *authz_path;
  const char *crl_path;
  uint64_t max_conns;
  uint64_t evict_after_ms; /* --unverified-evict-ms */
  uint64_t refused_busy;
} relay_t;

static void close_signals(relay_t *r) {
  if (r->signals_closed) return;
  r->signals_closed = true;
  uv_close((uv_handle_t *)&r->sig_int, NULL);
  uv_close((uv_handle_t *)&r->sig_term, NULL);
  uv_close((uv_handle_t *)&r->sig_hup, NULL);
}

static void on_idle(tg_relay_env_t *env) {
  relay_t *r = env->data;
  /* --stdio: the one connection is over, so is the relay. */
  if (r->stopping || !r->listening) {
    r->stopping = true;
    close_signals(r);
  }
}

static void stop(relay_t *r, const char *why) {
  if (r->stopping) return;
  r->stopping = true;
  TG_INFO("%s %s: closing %zu connection(s) and shutting down",
          TG_NOTE(RELAY_SHUTDOWN), why, r->env.n_bridges);
  if (r->listening) uv_close((uv_handle_t *)&r->listener, NULL);
  if (r->env.n_bridges == 0) close_signals(r);
  else tg_relay_bridge_close_all(&r->env, "the relay is shutting down");
}

static void reload(relay_t *r) {
  char err[512];
  if (r->authz_path) {
    tg_authz_t *a = NULL;
    int rv = tg_authz_load(r->authz_path, &a, err, sizeof(err));
    if (rv < 0) {
      TG_ERROR("%s SIGHUP: keeping the previous authorization table: %s",
               TG_NOTE(RELAY_RELOAD_FAILED), err);
    } else {
      tg_authz_free(r->authz);
      r->authz = a;
      r->env.authz = a;
      TG_INFO("%s SIGHUP: reloaded %s: %zu identit%s", TG_NOTE(RELAY_RELOADED),
              r->authz_path,
              tg_authz_count(a), tg_authz_count(a) == 1 ? "y" : "ies");
    }
  }
  if (r->tls && r->crl_path) {
    int rv = tg_tls_config_reload_crl(r->tls, NULL, err, sizeof(err));
    if (rv < 0)
      TG_ERROR("%s SIGHUP: keeping the previous CRL: %s",
               TG_NOTE(RELAY_RELOAD_FAILED), err);
    else
      TG_INFO("%s SIGHUP: reloaded the CRL %s", TG_NOTE(RELAY_CRL_RELOADED),
              r->crl_path);
  }
  if (tg_relay_audit_reopen(r->audit, err, sizeof(err)) < 0)
    TG_ERROR("%s SIGHUP: cannot reopen the audit log, keeping the old one: %s",
             TG_NOTE(RELAY_RELOAD_FAILED), err);
}

static void on_signal(uv_signal_t *h, int signum) {
  relay_t *r = h->data;
  if (signum == SIGHUP) reload(r);
  else stop(r, strsignal(signum));
}

/* Beyond --max-conns with no unverified connection old enough to close:
 * accept and close at once, so the peer learns at once and the listen
 * queue does not fill up. */
static void on_busy_closed(uv_handle_t *h) { free(h); }

static void refuse_busy(relay_t *r) {
  uv_tcp_t *t = malloc(sizeof(*t));
  if (!t) return;
  uv_tcp_init(r->loop, t);
  char addr[64] = "?";
  struct sockaddr_storage ss;
  int sl = sizeof(ss);
  if (uv_accept((uv_stream_t *)&r->listener, (uv_stream_t *)t) == 0 &&
      uv_tcp_getpeername(t, (struct sockaddr *)&ss, &sl) == 0)
    tg_net_sockaddr_format((struct sockaddr *)&ss, addr, sizeof(addr));
  r->refused_busy++;
  tg_relay_deny_unverified(&r->env, TG_N_RELAY_BUSY, addr,
                           "too many connections (max %llu): "
                           "%zu connections open (--max-conns)",
                           (unsigned long long)r->max_conns,
                           tg_relay_bridge_live(&r->env));
  uv_close((uv_handle_t *)t, on_busy_closed);
}

static void on_connection(uv_stream_t *server, int status) {
  relay_t *r = server->data;
  if (status < 0) {
    TG_WARN("listener: %s", uv_strerror(status));
    return;
  }
  if (r->stopping) return;
  /* Closing connections leave the list a loop iteration later: they do
   * not count. */
  if (tg_relay_bridge_live(&r->env) >= r->max_conns &&
      !tg_relay_bridge_evict_unverified(&r->env, r->evict_after_ms)) {
    refuse_busy(r);
    return;
  }
  int rv = tg_relay_bridge_accept(&r->env, server, r->tls, &r->chan_opts);
  if (rv < 0) TG_WARN("cannot accept a connection: %s", tg_strerror(rv));
}

/* "1.2.3.4:port" or "[v6]:port": numeric only (a listener binds, it does
 * not resolve), port 0 meaning any free port. Numeric is checked here, so
 * that a name gets the usage line rather than a bare "invalid argument". */
static int parse_listen(const char *s, tg_net_addr_t *a) {
  struct sockaddr_storage ss;
  int rv = tg_net_addr_parse(s, TG_NET_ADDR_PORT_ZERO, 0, a);
  if (rv == 0) rv = tg_net_addr_to_sockaddr(a, &ss);
  return rv;
}

static int start_listening(relay_t *r, const char *addr, int *port) {
  tg_net_addr_t at;
  if (parse_listen(addr, &at) < 0) {
    TG_ERROR("--listen %s: not ADDR:PORT with a numeric IPv4 address or "
             "[IPv6] and a port 0-65535 (e.g. 0.0.0.0:7467, [::]:7467)",
             addr);
    return -EINVAL;
  }
  uv_tcp_init(r->loop, &r->listener);
  r->listener.data = r;
  r->listening = true; /* initialised: stop() closes it, even on failure */
  uint16_t bound = 0;
  int rv = tg_net_tcp_listen(&r->listener, &at, 128, on_connection, &bound);
  if (rv < 0) {
    TG_ERROR("--listen %s: %s", addr, uv_strerror(rv));
    return rv;
  }
  *port = bound;
  return 0;
}

/* The uid's name, not $USER: the environment is the caller's to set. */
static void stdio_identity(char *out, size_t cap) {
  struct passwd *pw = getpwuid(getuid());
  tg_identity_ssh(out, cap, pw ? pw->pw_name : NULL, (unsigned)getuid());
}

static void write_ready(uint64_t fd, const char *what) {
  if (fd == 0) return;
  char msg[32];
  int n = snprintf(msg, sizeof(msg), "ready %s\n", what);
  /* Supervisors and tests wait on this instead of polling the port. */
  ssize_t w = write((int)fd, msg, (size_t)n);
  (void)w;
  close((int)fd);
}

/* --compress MODE. Returns 0, or -EINVAL after saying why. */
static int parse_compress(const char *s, tg_relay_compress_t *out) {
  if (!strcmp(s, "allow")) *out = TG_RELAY_COMPRESS_ALLOW;
  else if (!strcmp(s, "never")) *out = TG_RELAY_COMPRESS_NEVER;
  else {
    fprintf(stderr, PROG ": --compress: '%s' is not one of allow, never\n", s);
    return -EINVAL;
  }
  return 0;
}

static const char about[] =
      "Offers the consumer protocol of the local tracing service "
      "(tracegated, or\nPerfetto's traced) to remote clients over mutual "
      "TLS. Every frame is checked:\nclients are identified by their "
      "certificate (CN), authorized by role from\n--authz (lines "
      "\"identity observe|record\"; default deny), and every call\nthat "
      "matters is written to the audit log.\n\n"
      "  --stdio    bridge stdin/stdout instead (no TLS, no --authz): the "
      "caller was\n             authenticated by ssh and gets the record "
      "role, as ssh:USER:\n             ssh host tracegate-relay --stdio\n\n"
      "Signals: SIGTERM/SIGINT close every connection and exit 0; SIGHUP "
      "reloads\n--authz and --crl and reopens --audit-log without dropping "
      "connections\n(a broken new file keeps the old one).\n";

/* --version's second line: which library carries each part of TLS here
 * (tls/paths.h). */
static void version_detail(FILE *out) {
  tg_tls_paths_t p;
  tg_tls_paths_decide(&p, mbedtls_version_get_number());
  char paths[640];
  tg_tls_paths_describe(&p, paths, sizeof(paths));
  fprintf(out, "%s\n", paths);
}

int main(int argc, char **argv) {
  static relay_t r;
  const char *listen = DEFAULT_LISTEN;
  const char *consumer_socket = tg_ipc_default_socket(false);
  const char *cert = NULL, *key = NULL, *ca = NULL, *crl = NULL;
  const char *authz_path = NULL, *audit_path = NULL;
  const char *compress = "allow";
  uint64_t max_conns = 64, hs_timeout = 10000, idle_timeout = 600000;
  uint64_t evict_after_ms = 1000;
  uint64_t per_identity = 0; /* half of --max-conns */
  uint64_t high_water_kb = 4096;
  uint64_t dead_link_s = 10;
  uint64_t session_lease_ms = 0;
  uint64_t replay_window_kb = 8192;
  uint64_t ready_fd = 0;
  uint64_t ticket_lifetime_s = TG_TLS_TICKET_LIFETIME_DEFAULT_S;
  int log_level = TG_LOG_INFO;
  bool stdio = false;
  const tg_flag_t flags[] = {
      {"listen", TG_FLAG_STRING, &listen, "ADDR:PORT",
       "TLS listen address: 0.0.0.0:7467, [::]:7467, 127.0.0.1:0 (port 0: "
       "any free port, logged and written to --ready-fd)", 0, 0},
      {"consumer-socket", TG_FLAG_STRING, &consumer_socket, "PATH",
       "the tracing service's consumer socket: a path or @abstract name", 0, 0},
      {"cert", TG_FLAG_STRING, &cert, "FILE",
       "the relay's certificate (PEM; required unless --stdio)", 0, 0},
      {"key", TG_FLAG_STRING, &key, "FILE",
       "its private key (PEM; required unless --stdio)", 0, 0},
      {"ca", TG_FLAG_STRING, &ca, "FILE",
       "CA that signs client certificates (PEM; required unless --stdio)", 0,
       0},
      {"crl", TG_FLAG_STRING, &crl, "FILE",
       "certificate revocation list (PEM), reloaded on SIGHUP", 0, 0},
      {"authz", TG_FLAG_STRING, &authz_path, "FILE",
       "authorization file: \"identity observe|record\" lines, reloaded on "
       "SIGHUP (required unless --stdio)", 0, 0},
      {"session-ticket-lifetime", TG_FLAG_SECONDS, &ticket_lifetime_s,
       "DURATION",
       "issue TLS session tickets accepted this long, so that a client "
       "reconnecting within it resumes without any public-key operation "
       "(its certificate is still checked against the CRL in force and its "
       "dates). The keys that seal tickets live in memory only, are "
       "replaced every lifetime, and a restart forgets them. 0: no tickets, "
       "every handshake a full one (forward secrecy for every connection)",
       0, TG_TLS_TICKET_LIFETIME_MAX_S},
      {"compress", TG_FLAG_STRING, &compress, "MODE",
       "allow or never: whether a client may have what this relay sends "
       "zstd-compressed (tracegate record asks by default). Compression "
       "comes before encryption, so whoever sees the sizes of the link's "
       "records and can also write trace packets on this host (an app "
       "producing into the same session) may learn other packets' contents "
       "from how well they compress together, as in CRIME. never keeps every "
       "link plain, at the cost of several times the bytes on the wire", 0,
       0},
      {"max-conns", TG_FLAG_UINT, &max_conns, "N",
       "connections at once (handshakes included); more are refused", 1,
       65535},
      {"max-conns-per-identity", TG_FLAG_UINT, &per_identity, "N",
       "connections one client identity may hold at once; more are refused "
       "after their handshake, told why, so that one client cannot take "
       "every slot (0: half of --max-conns, rounded up)", 0, 65535},
      {"handshake-timeout-ms", TG_FLAG_MS, &hs_timeout, "DURATION",
       "from accept to a verified client", 100, 600000},
      {"unverified-evict-ms", TG_FLAG_MS, &evict_after_ms, "DURATION",
       "with --max-conns reached, a new connection closes the oldest one "
       "that has not presented a verified certificate after this long, "
       "instead of being refused: peers without a certificate holding "
       "connections open cannot keep clients out (a client's handshake "
       "takes a few round trips; 0: refuse the new one)", 0, 600000},
      {"idle-timeout-ms", TG_FLAG_MS, &idle_timeout, "DURATION",
       "close a connection that has been silent this long (0: never)", 0,
       86400000},
      {"dead-link-timeout", TG_FLAG_SECONDS, &dead_link_s, "DURATION",
       "declare a client's link dead once it has been silent this long: TCP "
       "keepalive and TCP_USER_TIMEOUT, and the connection is closed "
       "(tracegate clients send a heartbeat every second; 0: neither)", 0,
       3600},
      {"high-water-kb", TG_FLAG_KIB, &high_water_kb, "SIZE",
       "output queued per connection and direction before reading the "
       "other side pauses (hard cap: 16x)", 64, 1048576},
      {"session-lease-ms", TG_FLAG_MS, &session_lease_ms, "DURATION",
       "how long tracegated keeps a session with a resume key when the "
       "relay goes away (a crash, a restart) before its client re-attaches "
       "(0: tracegated's --session-lease-ms, which also caps it)", 0,
       86400000},
      {"replay-window-kb", TG_FLAG_KIB, &replay_window_kb, "SIZE",
       "per session key, ReadBuffers replies kept until the client "
       "acknowledges them, to send again what a lost link swallowed (0: "
       "none); sent compressed, they are kept as the compressed bytes, so "
       "the same memory holds several times more; beyond it the oldest go "
       "and a resuming client is told exactly what is lost", 0, 262144},
      {"audit-log", TG_FLAG_STRING, &audit_path, "FILE",
       "append audit lines here, reopened on SIGHUP (default: the log; "
       "syslog with --stdio)", 0,
       0},
      {"log-level", TG_FLAG_LOG_LEVEL, &log_level, "LEVEL",
       "error, warn, info or debug", 0, 0},
      {"ready-fd", TG_FLAG_UINT, &ready_fd, "FD",
       "write \"ready PORT\\n\" to this fd once listening, then close it (0: "
       "none)", 0, 1024},
      {"stdio", TG_FLAG_BOOL, &stdio, NULL,
       "bridge stdin/stdout to the service instead of listening", 0, 0},
  };
  static const tg_prog_t prog = {.name = PROG,
                                 .synopsis = "[options]",
                                 .about = about,
                                 .version_detail = version_detail};
  int rv, status;
  if (tg_prog_flags(&prog, flags, sizeof(flags) / sizeof(flags[0]), argc, argv,
                    NULL, 0, NULL, &status))
    return status;
  tg_relay_compress_t compress_policy;
  if (parse_compress(compress, &compress_policy) < 0) return TG_EXIT_USAGE;
  if (!stdio) {
    const char *missing = !cert ? "--cert" : !key ? "--key" : !ca ? "--ca"
                          : !authz_path ? "--authz" : NULL;
    if (missing) {
      fprintf(stderr, PROG ": %s is required (or --stdio; see --help)\n",
              missing);
      return TG_EXIT_USAGE;
    }
  }
  tg_log_set_prefix(PROG);
  tg_log_set_level((tg_log_level_t)log_level);
  signal(SIGPIPE, SIG_IGN);

  r.loop = uv_default_loop();
  r.max_conns = max_conns;
  r.evict_after_ms = evict_after_ms;
  r.authz_path = stdio ? NULL : authz_path;
  r.crl_path = crl;
  tg_relay_host_info_load(&r.host);
  char err[512] = "";
  status = TG_EXIT_FAIL;
  if (stdio && !audit_path) {
    /* stderr goes back to the ssh client: audit lines stay on the host. */
    if (tg_relay_audit_open_syslog(PROG, &r.audit) < 0) {
      TG_ERROR("cannot set up the audit trail: out of memory");
      goto out;
    }
  } else if (tg_relay_audit_open(audit_path, &r.audit, err, sizeof(err)) < 0) {
    TG_ERROR("--audit-log: %s", err);
    goto out;
  }
  if (!stdio) {
    if (tg_authz_load(authz_path, &r.authz, err, sizeof(err)) < 0) {
      TG_ERROR("--authz: %s", err);
      goto out;
    }
    tg_tls_opts_t to = {.server = true,
                        .cert_file = cert,
                        .key_file = key,
                        .ca_file = ca,
                        .crl_file = crl,
                        .ticket_lifetime_s = (uint32_t)ticket_lifetime_s};
    if (tg_tls_config_new(&to, &r.tls, err, sizeof(err)) < 0) {
      TG_ERROR("TLS: %s", err);
      goto out;
    }
  }
  r.chan_opts.handshake_timeout_ms = (uint32_t)hs_timeout;
  r.chan_opts.idle_timeout_ms = (uint32_t)idle_timeout;
  /* A silent partition (a dead NAT holds traffic, nothing is reset) must
   * not keep a session's link open for the idle timeout: the kernel gives
   * up on unacknowledged data and unanswered probes (every connection),
   * and a client that heartbeats (TracegateRelay.ClockSync) is never
   * silent this long while its link works, so its connection alone gets
   * the dead-link timeout as its idle timeout (bridge.c). A plain consumer
   * waiting quietly for its trace keeps the ordinary idle timeout. */
  r.chan_opts.dead_link_timeout_s = (uint32_t)dead_link_s;
  tg_relay_env_init(&r.env);
  r.env.loop = r.loop;
  tg_clock_loop_init(&r.clock, r.loop);
  r.env.clock = &r.clock;
  r.env.consumer_socket = consumer_socket;
  r.env.authz = r.authz;
  r.env.audit = r.audit;
  r.env.host = &r.host;
  r.env.detach_timeout_ms = DETACH_TIMEOUT_MS;
  r.env.high_water = (size_t)high_water_kb * 1024;
  r.env.compress = compress_policy;
  r.env.max_conns_per_identity =
      (size_t)(per_identity ? per_identity : (max_conns + 1) / 2);
  r.env.session_lease_ms = session_lease_ms;
  /* One window per connection at most, each kept after its last
   * connection for as long as the session's lease (tracegated's default
   * when not given here): a client that re-attaches within the lease must
   * still find what the link swallowed. (A fixed 10 min, counted from the
   * relay's detection, left a 10 min partition under a 15 min lease about
   * 2.5 s of margin before the in-flight reply was dropped; a few seconds
   * more of the client's backoff and it was lost.) */
  static tg_replay_store_t replay;
  tg_replay_store_init(&replay, (size_t)replay_window_kb * 1024,
                       (size_t)max_conns,
                       session_lease_ms ? session_lease_ms : 10u * 60 * 1000);
  if (replay_window_kb) r.env.replay = &replay;
  r.env.on_idle = on_idle;
  r.env.heartbeat_idle_ms = (uint32_t)(dead_link_s * 1000);
  r.env.data = &r;

  uv_signal_init(r.loop, &r.sig_int);
  uv_signal_init(r.loop, &r.sig_term);
  uv_signal_init(r.loop, &r.sig_hup);
  r.sig_int.data = r.sig_term.data = r.sig_hup.data = &r;
  uv_signal_start(&r.sig_int, on_signal, SIGINT);
  uv_signal_start(&r.sig_term, on_signal, SIGTERM);
  uv_signal_start(&r.sig_hup, on_signal, SIGHUP);

  if (stdio) {
    char identity[300];
    stdio_identity(identity, sizeof(identity));
    rv = tg_relay_bridge_open_stdio(&r.env, STDIN_FILENO, STDOUT_FILENO,
                                    identity);
    if (rv < 0) {
      TG_ERROR("--stdio: %s (stdin and stdout must be pipes or sockets "
               "and the service must be up)", tg_strerror(rv));
      stop(&r, "--stdio failed");
    } else {
      write_ready(ready_fd, "stdio");
      status = TG_EXIT_OK;
    }
  } else {
    int port = 0;
    if (start_listening(&r, listen, &port) < 0) {
      stop(&r, "cannot listen");
    } else {
      size_t n = tg_authz_count(r.authz);
      TG_INFO("listening on %s (port %d), forwarding to %s; %zu identit%s "
              "authorized; max %llu connections, %zu per identity%s",
              listen, port, consumer_socket, n, n == 1 ? "y" : "ies",
              (unsigned long long)max_conns, r.env.max_conns_per_identity,
              compress_policy == TG_RELAY_COMPRESS_NEVER
                  ? "; compression refused (--compress never)"
                  : "");
      char p[16];
      snprintf(p, sizeof(p), "%d", port);
      write_ready(ready_fd, p);
      status = TG_EXIT_OK;
    }
  }
  uv_run(r.loop, UV_RUN_DEFAULT);
  TG_INFO("stopped: %llu connection(s) served, %llu refused, %llu over "
          "--max-conns, %llu unverified closed for newer ones, %llu call(s) "
          "denied",
          (unsigned long long)r.env.accepted, (unsigned long long)r.env.refused,
          (unsigned long long)r.refused_busy,
          (unsigned long long)r.env.handshakes_evicted,
          (unsigned long long)r.env.denied_calls);
out:
  if (r.env.replay) tg_replay_store_free(r.env.replay);
  rv = uv_loop_close(r.loop);
  if (rv != 0) TG_WARN("loop closed with handles open: %s", uv_strerror(rv));
  tg_tls_config_free(r.tls);
  tg_authz_free(r.authz);
  tg_relay_audit_close(r.audit);
  return status;
}
