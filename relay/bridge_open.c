/* Opening a bridge: a TLS client through its handshake, identity check
 * and authorization, or an --stdio one; then the upstream connection to
 * the service and the connection's filter. A client that is verified but
 * not authorized is told why before it is closed (B_REFUSING).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "relay/bridge.h"
#include "relay/bridge_internal.h"
#include "tracegate/error.h"

/* --- unverified peers -------------------------------------------------------- */

/* Whether a refusal's lines fit |l|'s budget; when they do and earlier
 * ones were held back, says how many first. |budget| names the budget in
 * the audit line (budget=unverified or budget=verified, a token a script
 * matches); |whom| says it in words. */
static bool refusal_line_due(tg_relay_env_t *env, tg_relay_audit_limit_t *l,
                             const char *budget, const char *whom) {
  uint64_t held = 0;
  const tg_relay_audit_budget_t *bg = &env->audit_budget;
  if (!tg_relay_audit_limit_take(l, bg, tg_clock_ms(env->clock), &held))
    return false;
  if (held) {
    TG_WARN("%" PRIu64 " more lines about refusals of %s suppressed (at "
            "most %" PRIu32 " a second after %" PRIu32 ")", held, whom,
            bg->per_s, bg->burst);
    tg_relay_audit(env->audit, NULL, "-", "connect", "suppressed",
                   TG_N_RELAY_AUDIT_SUPPRESSED,
                   "%" PRIu64 " more refusals of %s (budget=%s, at most %"
                   PRIu32 " lines a second after %" PRIu32 ")", held, whom,
                   budget, bg->per_s, bg->burst);
  }
  return true;
}

void tg_relay_deny_unverified(tg_relay_env_t *env, tg_notice_t code,
                              const char *addr, const char *fmt, ...) {
  if (!refusal_line_due(env, &env->unverified_limit, "unverified",
                        "unverified peers"))
    return;
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  TG_WARN("%s -@%s: connection refused: %s", tg_notice_tag(code), addr, why);
  tg_relay_audit(env->audit, NULL, addr, "connect", "deny", code, "%s", why);
}

size_t tg_relay_bridge_live(const tg_relay_env_t *env) {
  size_t n = 0;
  for (const tg_list_t *it = env->bridges.next; it != &env->bridges;
       it = it->next) {
    const tg_relay_bridge_t *b = TG_CONTAINER_OF(it, tg_relay_bridge_t, node);
    if (!tg__bridge_ending(b)) n++;
  }
  return n;
}

bool tg_relay_bridge_evict_unverified(tg_relay_env_t *env,
                                      uint64_t min_age_ms) {
  if (min_age_ms == 0) return false;
  uint64_t now = tg_clock_ms(env->clock);
  /* The list is in accept order: the first unverified one is the oldest. */
  for (tg_list_t *it = env->bridges.next; it != &env->bridges; it = it->next) {
    tg_relay_bridge_t *b = TG_CONTAINER_OF(it, tg_relay_bridge_t, node);
    if (b->state != B_HANDSHAKE) continue;
    uint64_t age = now - b->opened_ms;
    if (age < min_age_ms) return false;
    env->handshakes_evicted++;
    tg_relay_deny_unverified(env, TG_N_RELAY_STALE_CLOSED, b->addr,
                             "still unverified after %" PRIu64
                             " ms: closed for a newer connection "
                             "(--max-conns)", age);
    tg__bridge_close(b, TG_EDENIED, "closed for a newer connection");
    return true;
  }
  return false;
}

/* --- opening ---------------------------------------------------------------- */

static tg_relay_bridge_t *bridge_new(tg_relay_env_t *env) {
  tg_relay_bridge_t *b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->env = env;
  b->state = B_HANDSHAKE;
  tg_list_init(&b->node);
  tg_buf_init(&b->out, 0);
  tg_buf_init(&b->up_out, 0);
  uv_timer_init(env->loop, &b->timer);
  b->timer.data = b;
  b->opened_ms = tg_clock_ms(env->clock);
  tg_list_insert_tail(&env->bridges, &b->node);
  env->n_bridges++;
  return b;
}

/* The client is verified and authorized: connect to the service. */
static int open_upstream(tg_relay_bridge_t *b) {
  int rv = tg_unix_transport_connect(b->env->loop, &b->up,
                                     b->env->consumer_socket);
  if (rv < 0) return rv;
  b->up.base.cbs = &tg__bridge_up_cbs;
  b->up.base.data = b;
  b->up.chan.high_water = tg__bridge_high_water(b);
  b->up_open = true;
  return 0;
}

/* The connection's filter, with the relay's policy. The session tag is
 * unique among this relay's connections, and across restarts by the pid. */
static void start_filter(tg_relay_bridge_t *b) {
  tg_relay_filter_init(&b->filter, b->identity, b->env->host);
  char tag[40];
  snprintf(tag, sizeof(tag), "%ld.%" PRIu64, (long)getpid(), b->env->accepted);
  tg_relay_filter_set_session_tag(&b->filter, tag);
  tg_relay_filter_set_compress(&b->filter, b->env->compress);
  /* Which tracegated answers (SO_PEERCRED): a restarted one has lost the
   * sessions of the one before, which a reconnected client can tell. */
  char inst[48];
  if (b->up_open &&
      tg_relay_service_instance(b->up.chan.peer_pid, inst, sizeof(inst)) == 0)
    tg_relay_filter_set_service_instance(&b->filter, inst);
}

/* A verified client's connection refused: counted, and said in the log
 * and the audit trail within env->refused_limit. */
static void say_refused(tg_relay_bridge_t *b, tg_notice_t code,
                        const char *why) {
  b->env->refused++;
  if (!refusal_line_due(b->env, &b->env->refused_limit, "verified",
                        "verified clients"))
    return;
  TG_WARN("%s %s@%s: connection refused: %s", TG_NOTE(RELAY_REFUSED),
          tg__bridge_who(b), b->addr, why);
  tg_relay_audit(b->env->audit, b->identity, b->addr, "connect", "deny", code,
                 "%s", why);
}

static void refuse(tg_relay_bridge_t *b, tg_notice_t code, int status,
                   const char *why) {
  say_refused(b, code, why);
  tg__bridge_close(b, status, why);
}

/* Refuses a verified client, first telling it why (|fmt|: words for the
 * client, naming nothing but itself) when it sends a request within
 * REFUSAL_LINGER_MS. */
static void refuse_telling(tg_relay_bridge_t *b, tg_notice_t code,
                           const char *why, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void refuse_telling(tg_relay_bridge_t *b, tg_notice_t code,
                           const char *why, const char *fmt, ...) {
  say_refused(b, code, why);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->refusal, sizeof(b->refusal), fmt, ap);
  va_end(ap);
  tg_notice_prefix(b->refusal, sizeof(b->refusal), code);
  snprintf(b->close_why, sizeof(b->close_why), "%s", why);
  tg__bridge_set_state(b, B_REFUSING, why);
  uv_timer_start(&b->timer, tg__bridge_on_refusal_timer, REFUSAL_LINGER_MS, 0);
}

/* Nothing listens on the service's socket: no tracing service runs, and
 * with it went its sessions. */
static bool service_not_running(int err) {
  return err == -ENOENT || err == -ECONNREFUSED;
}

/* A verified client of a host whose tracing service is not running: the
 * relay's own service answers it (GetHostInfo says service_down, which a
 * client whose session was there takes as the session's end), a bind of
 * the tracing service's is refused with the reason (bridge_internal.h,
 * B_NO_SERVICE), and the connection closes after NO_SERVICE_LINGER_MS.
 * Counted, logged and audited as a refusal. */
static void admit_without_service(tg_relay_bridge_t *b, tg_authz_role_t role,
                                  int err) {
  char why[300];
  snprintf(why, sizeof(why), "the tracing service is not running: cannot "
           "reach %.200s: %s", b->env->consumer_socket, tg_strerror(err));
  say_refused(b, TG_N_RELAY_NO_SERVICE, why);
  snprintf(b->close_why, sizeof(b->close_why), "%s", why);
  b->close_code = TG_N_RELAY_NO_SERVICE;
  /* For the client, without the socket's path (the relay's own business). */
  snprintf(b->refusal, sizeof(b->refusal), "relay: the tracing service on "
           "the relay's host is not running (%s): is tracegated running?",
           tg_strerror(err));
  tg__bridge_set_state(b, B_NO_SERVICE, why);
  b->authorized = true;
  b->env->accepted++;
  b->opened_ms = tg_clock_ms(b->env->clock);
  start_filter(b);
  tg_relay_filter_set_service_down(&b->filter);
  TG_DEBUG("%s@%s: answering as role %s for the relay's own service only",
           tg__bridge_who(b), b->addr, tg_authz_role_name(role));
  uv_timer_start(&b->timer, tg__bridge_on_refusal_timer, NO_SERVICE_LINGER_MS,
                 0);
}

static void admit(tg_relay_bridge_t *b, tg_authz_role_t role) {
  int rv = open_upstream(b);
  if (service_not_running(rv)) {
    admit_without_service(b, role, rv);
    return;
  }
  if (rv < 0) {
    char why[300];
    snprintf(why, sizeof(why), "cannot reach the tracing service at %s: %s",
             b->env->consumer_socket, tg_strerror(rv));
    /* refuse_telling() logs it; the client is told too, without the
     * socket's path (the relay's own business). */
    refuse_telling(b, TG_N_RELAY_NO_SERVICE, why,
                   "relay: the tracing service on the relay's host is "
                   "not reachable (%s): is tracegated running?",
                   tg_strerror(rv));
    return;
  }
  tg__bridge_set_state(b, B_OPEN, "admitted");
  b->authorized = true;
  b->env->accepted++;
  b->opened_ms = tg_clock_ms(b->env->clock);
  start_filter(b);
  /* Operators (and tests) tell an abbreviated TLS handshake by this word. */
  const char *tls = !b->tls ? "" : tg_tls_chan_resumed(b->tls)
                                       ? ", TLS resumed"
                                       : ", TLS full handshake";
  TG_INFO("%s %s@%s: connected with role %s%s", TG_NOTE(RELAY_CONNECTED),
          tg__bridge_who(b), b->addr, tg_authz_role_name(role), tls);
  tg_relay_audit(b->env->audit, b->identity, b->addr, "connect", "allow",
                 TG_N_RELAY_CONNECTED, "role %s%s", tg_authz_role_name(role),
                 tls);
}

/* Connections |id| holds: admitted and not closing (a detaching one still
 * holds the service's connection). Compared exactly. */
static size_t identity_conns(const tg_relay_env_t *env, const char *id) {
  size_t n = 0;
  for (const tg_list_t *it = env->bridges.next; it != &env->bridges;
       it = it->next) {
    const tg_relay_bridge_t *o = TG_CONTAINER_OF(it, tg_relay_bridge_t, node);
    if (o->authorized && !tg__bridge_ending(o) && !strcmp(o->identity, id))
      n++;
  }
  return n;
}

static void on_handshake(tg_tls_chan_t *ch, int status) {
  tg_relay_bridge_t *b = tg_tls_chan_transport(ch)->data;
  if (status != 0) {
    /* on_close follows. */
    const char *detail = tg_tls_chan_error(ch);
    b->env->refused++;
    tg_relay_deny_unverified(b->env, TG_N_RELAY_TLS_HANDSHAKE_FAILED, b->addr,
                             "TLS handshake failed: %s%s%s",
                             tg_strerror(status), detail[0] ? ": " : "",
                             detail);
    return;
  }
  const char *id = tg_tls_chan_peer_identity(ch);
  snprintf(b->identity, sizeof(b->identity), "%s", id ? id : "");
  if (!id) {
    refuse(b, TG_N_RELAY_NOT_AUTHORIZED, TG_EDENIED,
           "the client certificate names no usable identity");
    return;
  }
  tg_authz_role_t role = tg_authz_role(b->env->authz, id);
  if (role == TG_ROLE_NONE) {
    char why[TG_AUTHZ_IDENTITY_MAX + 64];
    snprintf(why, sizeof(why),
             "identity '%s' is not in the authorization file", id);
    refuse_telling(b, TG_N_RELAY_NOT_AUTHORIZED, why,
                   "this relay does not authorize the identity of this "
                   "client certificate ('%s' is not in its authorization "
                   "file)", id);
    return;
  }
  size_t cap = b->env->max_conns_per_identity;
  size_t held = identity_conns(b->env, id);
  if (cap && held >= cap) {
    char why[TG_AUTHZ_IDENTITY_MAX + 96];
    snprintf(why, sizeof(why),
             "identity '%s' already holds %zu connections "
             "(--max-conns-per-identity)", id, held);
    refuse_telling(b, TG_N_RELAY_IDENTITY_LIMIT, why,
                   "relay: this client's identity ('%s') already holds %zu "
                   "connections to this relay, its limit "
                   "(--max-conns-per-identity): close one first", id, held);
    return;
  }
  admit(b, role);
}

int tg_relay_bridge_accept(tg_relay_env_t *env, uv_stream_t *server,
                           tg_tls_config_t *cfg,
                           const tg_tls_chan_opts_t *opts) {
  tg_relay_bridge_t *b = bridge_new(env);
  if (!b) return -ENOMEM;
  tg_tls_chan_opts_t o = *opts;
  o.on_handshake = on_handshake;
  if (!o.high_water) o.high_water = tg__bridge_high_water(b);
  int rv = tg_tls_chan_accept(server, cfg, &o, &tg__bridge_client_cbs, b, &b->tls);
  if (rv < 0) {
    /* Nothing was accepted: the bridge goes with its timer. */
    b->tls = NULL;
    tg__bridge_maybe_free(b);
    return rv;
  }
  b->client = tg_tls_chan_transport(b->tls);
  b->client_open = true; /* B_HANDSHAKE since bridge_new() */
  snprintf(b->addr, sizeof(b->addr), "%s", tg_tls_chan_peer_addr(b->tls));
  snprintf(b->close_why, sizeof(b->close_why), "closed");
  return 0;
}

int tg_relay_bridge_open_stdio(tg_relay_env_t *env, int in_fd, int out_fd,
                               const char *identity) {
  tg_relay_bridge_t *b = bridge_new(env);
  if (!b) {
    close(in_fd);
    if (out_fd != in_fd) close(out_fd);
    return -ENOMEM;
  }
  b->stdio = true;
  snprintf(b->identity, sizeof(b->identity), "%s", identity);
  snprintf(b->addr, sizeof(b->addr), "stdio");
  snprintf(b->close_why, sizeof(b->close_why), "closed");
  int rv = tg_pipe_transport_open(env->loop, &b->pipe, in_fd, out_fd,
                                  tg__bridge_high_water(b));
  if (rv < 0) {
    /* The pipe's handles close before the timer: the bridge goes last. */
    tg__bridge_maybe_free(b);
    return rv;
  }
  b->client = &b->pipe.base;
  b->client->cbs = &tg__bridge_client_cbs;
  b->client->data = b;
  b->client_open = true;
  rv = open_upstream(b);
  if (service_not_running(rv)) {
    admit_without_service(b, TG_ROLE_RECORD, rv);
    return 0;
  }
  if (rv < 0) {
    char why[300];
    snprintf(why, sizeof(why), "cannot reach the tracing service at %s: %s",
             env->consumer_socket, tg_strerror(rv));
    TG_ERROR("%s", why);
    tg_relay_audit(env->audit, b->identity, b->addr, "connect", "deny",
                   TG_N_RELAY_NO_SERVICE, "%s", why);
    tg__bridge_close(b, rv, why);
    return rv;
  }
  tg__bridge_set_state(b, B_OPEN, "admitted (--stdio)");
  b->authorized = true;
  env->accepted++;
  start_filter(b);
  TG_INFO("%s %s@stdio: connected with role record", TG_NOTE(RELAY_CONNECTED),
          b->identity);
  tg_relay_audit(env->audit, b->identity, b->addr, "connect", "allow",
                 TG_N_RELAY_CONNECTED, "role record (--stdio)");
  return 0;
}
