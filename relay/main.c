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
#include "relay/relay_flags.h"
#include "relay/relay_service.h"
#include "tls/paths.h"
#include "tls/session.h"
#include "tls/transport.h"
#include "tracegate/error.h"
#include "common/flags.h"
#include "common/log.h"


#define PROG "tracegate-relay"
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

/* The command line into |o| and |compress|: parsed, the values read,
 * then checked against relay_rules (a bad value is named before a missing
 * flag, as it always was). Returns true when main() is to return *status
 * at once. */
static bool parse_args(relay_opts_t *o, tg_relay_compress_t *compress,
                       int argc, char **argv, int *status) {
  static const tg_prog_t base = {.name = PROG,
                                 .synopsis = "[options]",
                                 .about = about,
                                 .version_detail = version_detail};
  tg_flags_given_t given;
  tg_prog_t prog = base;
  prog.given = &given;
  tg_flag_t flags[RELAY_MAX_FLAGS];
  relay_opts_defaults(o);
  size_t n = relay_flag_table(o, flags, RELAY_MAX_FLAGS);
  if (tg_prog_flags(&prog, flags, n, argc, argv, NULL, 0, NULL, status))
    return true;
  char err[256];
  *status = TG_EXIT_USAGE;
  if (parse_compress(o->compress, compress) < 0) return true;
  if (tg_flag_rules_check(flags, n, &given, relay_rules, relay_n_rules, o, err,
                          sizeof(err), NULL) < 0) {
    fprintf(stderr, PROG ": %s\n", err);
    return true;
  }
  return false;
}

/* The audit trail: --audit-log, else the log, else (--stdio) syslog. */
static int open_audit(relay_t *r, const relay_opts_t *o) {
  char err[512] = "";
  if (o->stdio && !o->audit_path) {
    /* stderr goes back to the ssh client: audit lines stay on the host. */
    if (tg_relay_audit_open_syslog(PROG, &r->audit) < 0) {
      TG_ERROR("cannot set up the audit trail: out of memory");
      return -ENOMEM;
    }
  } else if (tg_relay_audit_open(o->audit_path, &r->audit, err,
                                 sizeof(err)) < 0) {
    TG_ERROR("--audit-log: %s", err);
    return -EINVAL;
  }
  return 0;
}

/* What listening needs: the authorization file and the TLS config. */
static int open_authz_and_tls(relay_t *r, const relay_opts_t *o) {
  char err[512] = "";
  if (tg_authz_load(o->authz_path, &r->authz, err, sizeof(err)) < 0) {
    TG_ERROR("--authz: %s", err);
    return -EINVAL;
  }
  tg_tls_opts_t to = {.server = true,
                      .cert_file = o->cert,
                      .key_file = o->key,
                      .ca_file = o->ca,
                      .crl_file = o->crl,
                      .ticket_lifetime_s = (uint32_t)o->ticket_lifetime_s};
  if (tg_tls_config_new(&to, &r->tls, err, sizeof(err)) < 0) {
    TG_ERROR("TLS: %s", err);
    return -EINVAL;
  }
  return 0;
}

/* The bridges' environment and the channels' timeouts, from |o|. */
static void configure(relay_t *r, const relay_opts_t *o,
                      tg_relay_compress_t compress) {
  r->chan_opts.handshake_timeout_ms = (uint32_t)o->hs_timeout;
  r->chan_opts.idle_timeout_ms = (uint32_t)o->idle_timeout;
  /* A silent partition (a dead NAT holds traffic, nothing is reset) must
   * not keep a session's link open for the idle timeout: the kernel gives
   * up on unacknowledged data and unanswered probes (every connection),
   * and a client that heartbeats (TracegateRelay.ClockSync) is never
   * silent this long while its link works, so its connection alone gets
   * the dead-link timeout as its idle timeout (bridge.c). A plain consumer
   * waiting quietly for its trace keeps the ordinary idle timeout. */
  r->chan_opts.dead_link_timeout_s = (uint32_t)o->dead_link_s;
  tg_relay_env_init(&r->env);
  r->env.loop = r->loop;
  tg_clock_loop_init(&r->clock, r->loop);
  r->env.clock = &r->clock;
  r->env.consumer_socket = o->consumer_socket;
  r->env.authz = r->authz;
  r->env.audit = r->audit;
  r->env.host = &r->host;
  r->env.detach_timeout_ms = DETACH_TIMEOUT_MS;
  r->env.high_water = (size_t)o->high_water_kb * 1024;
  r->env.compress = compress;
  r->env.max_conns_per_identity =
      (size_t)(o->per_identity ? o->per_identity : (o->max_conns + 1) / 2);
  r->env.session_lease_ms = o->session_lease_ms;
  r->env.audit_budget = (tg_relay_audit_budget_t){
      .burst = (uint32_t)o->audit_burst, .per_s = (uint32_t)o->audit_per_s};
  /* One window per connection at most, each kept after its last
   * connection for as long as the session's lease (tracegated's default
   * when not given here): a client that re-attaches within the lease must
   * still find what the link swallowed. (A fixed 10 min, counted from the
   * relay's detection, left a 10 min partition under a 15 min lease about
   * 2.5 s of margin before the in-flight reply was dropped; a few seconds
   * more of the client's backoff and it was lost.) */
  static tg_replay_store_t replay;
  tg_replay_store_init(&replay, (size_t)o->replay_window_kb * 1024,
                       (size_t)o->max_conns,
                       o->session_lease_ms ? o->session_lease_ms
                                           : 10u * 60 * 1000);
  if (o->replay_window_kb) r->env.replay = &replay;
  r->env.on_idle = on_idle;
  r->env.heartbeat_idle_ms = (uint32_t)(o->dead_link_s * 1000);
  r->env.data = r;
}

static void start_signals(relay_t *r) {
  uv_signal_init(r->loop, &r->sig_int);
  uv_signal_init(r->loop, &r->sig_term);
  uv_signal_init(r->loop, &r->sig_hup);
  r->sig_int.data = r->sig_term.data = r->sig_hup.data = r;
  uv_signal_start(&r->sig_int, on_signal, SIGINT);
  uv_signal_start(&r->sig_term, on_signal, SIGTERM);
  uv_signal_start(&r->sig_hup, on_signal, SIGHUP);
}

/* --stdio: one bridge over stdin/stdout. Returns the exit status. */
static int serve_stdio(relay_t *r, const relay_opts_t *o) {
  char identity[300];
  stdio_identity(identity, sizeof(identity));
  int rv = tg_relay_bridge_open_stdio(&r->env, STDIN_FILENO, STDOUT_FILENO,
                                      identity);
  if (rv < 0) {
    TG_ERROR("--stdio: %s (stdin and stdout must be pipes or sockets "
             "and the service must be up)", tg_strerror(rv));
    stop(r, "--stdio failed");
    return TG_EXIT_FAIL;
  }
  write_ready(o->ready_fd, "stdio");
  return TG_EXIT_OK;
}

/* The TLS listener. Returns the exit status. */
static int serve_tls(relay_t *r, const relay_opts_t *o) {
  int port = 0;
  if (start_listening(r, o->listen, &port) < 0) {
    stop(r, "cannot listen");
    return TG_EXIT_FAIL;
  }
  size_t n = tg_authz_count(r->authz);
  TG_INFO("listening on %s (port %d), forwarding to %s; %zu identit%s "
          "authorized; max %llu connections, %zu per identity%s",
          o->listen, port, o->consumer_socket, n, n == 1 ? "y" : "ies",
          (unsigned long long)o->max_conns, r->env.max_conns_per_identity,
          r->env.compress == TG_RELAY_COMPRESS_NEVER
              ? "; compression refused (--compress never)"
              : "");
  char p[16];
  snprintf(p, sizeof(p), "%d", port);
  write_ready(o->ready_fd, p);
  return TG_EXIT_OK;
}

static void log_stopped(const relay_t *r) {
  TG_INFO("stopped: %llu connection(s) served, %llu refused, %llu over "
          "--max-conns, %llu unverified closed for newer ones, %llu call(s) "
          "denied",
          (unsigned long long)r->env.accepted,
          (unsigned long long)r->env.refused,
          (unsigned long long)r->refused_busy,
          (unsigned long long)r->env.handshakes_evicted,
          (unsigned long long)r->env.denied_calls);
}

int main(int argc, char **argv) {
  static relay_t r;
  static relay_opts_t o;
  int rv, status;
  tg_relay_compress_t compress_policy;
  if (parse_args(&o, &compress_policy, argc, argv, &status)) return status;
  tg_log_set_prefix(PROG);
  tg_log_set_level((tg_log_level_t)o.log_level);
  signal(SIGPIPE, SIG_IGN);

  r.loop = uv_default_loop();
  r.max_conns = o.max_conns;
  r.evict_after_ms = o.evict_after_ms;
  r.authz_path = o.stdio ? NULL : o.authz_path;
  r.crl_path = o.crl;
  tg_relay_host_info_load(&r.host);
  status = TG_EXIT_FAIL;
  if (open_audit(&r, &o) < 0 || (!o.stdio && open_authz_and_tls(&r, &o) < 0))
    goto out;
  configure(&r, &o, compress_policy);
  start_signals(&r);
  status = o.stdio ? serve_stdio(&r, &o) : serve_tls(&r, &o);
  uv_run(r.loop, UV_RUN_DEFAULT);
  log_stopped(&r);
out:
  if (r.env.replay) tg_replay_store_free(r.env.replay);
  rv = uv_loop_close(r.loop);
  if (rv != 0) TG_WARN("loop closed with handles open: %s", uv_strerror(rv));
  tg_tls_config_free(r.tls);
  tg_authz_free(r.authz);
  tg_relay_audit_close(r.audit);
  return status;
}
