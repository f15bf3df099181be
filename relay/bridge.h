/* One remote client connection bridged to the local tracing service.
 *
 *   client (TLS, or stdin/stdout) <-> frame filter <-> consumer socket
 *
 * A bridge owns its client transport (a tg_tls_chan, or a pipe transport in
 * --stdio mode), its upstream connection to the consumer socket (opened
 * once the client is verified and authorized), its frame filter and an
 * audit identity. Every client frame goes through tg_relay_filter_client()
 * (relay/frame_filter.h); every service frame through
 * tg_relay_filter_upstream(). Replies to ReadBuffers travel as bulk data,
 * everything else as control frames that overtake queued bulk data.
 *
 * Backpressure: while the client's output is congested the upstream is not
 * read; while the upstream's output is congested (or the client's output
 * is far over its mark with locally made replies) the client is not read.
 * Both resume on drain. Queues are bounded by the transports' caps.
 *
 * Closing: either side closing closes the other. When the client's link
 * drops while its connection has a tracing session and a resume key
 * (TracegateRelay.SetSessionKey), the bridge first sends the service
 * Detach{"<identity>/<key>"} and waits (bounded) for its reply, so the
 * session survives for a re-Attach. So that it also survives the relay
 * (a crash, a restart), the bridge asks the service, when the client sets
 * its key, to keep the session under the same key for a lease if the
 * upstream connection dies without Detach (TracegateConsumer, tracegated
 * only; in front of Perfetto's traced the log says that a relay crash ends
 * the session). A bridge frees itself once all its
 * handles are closed; it must never be touched by the owner after that
 * (the owner learns of it through env->on_idle when none are left).
 */
#ifndef TRACEGATE_RELAY_BRIDGE_H
#define TRACEGATE_RELAY_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "relay/audit.h"
#include "auth/authz.h"
#include "relay/relay_service.h"
#include "relay/replay_window.h"
#include "tls/session.h"
#include "tls/transport.h"
#include "common/clock.h"
#include "common/list.h"
#include "common/notice.h"

typedef struct tg_relay_bridge tg_relay_bridge_t;

/* What every bridge of a relay shares. Owned by the caller (main.c), which
 * must keep it valid while any bridge lives. */
typedef struct tg_relay_env {
  uv_loop_t *loop;
  /* What the bridges' decisions read (common/clock.h): a bridge's age
   * (evicting unverified handshakes, the closing line), the audit lines'
   * budgets, when a replay window was taken and let go. Required: the
   * loop's clock in main.c (common/clock_loop.h), a simulated one in
   * tests. Timers (idle, detach) stay the loop's. Borrowed. */
  const tg_clock_t *clock;
  const char *consumer_socket;
  /* The current authorization table; the owner swaps it on reload. Roles
   * are looked up per call. Not used in --stdio mode. */
  const tg_authz_t *authz;
  tg_relay_audit_t *audit;
  const tg_relay_host_info_t *host;
  /* How long a drop-time Detach may take before the upstream is closed
   * anyway. */
  uint32_t detach_timeout_ms;
  /* The disconnect lease asked of the service for sessions with a resume
   * key (0: the service's default): how long tracegated keeps such a
   * session when the relay itself goes away. */
  uint64_t session_lease_ms;
  /* Replay windows of the keyed sessions (NULL: no replay; Resume then
   * answers unknown_key). */
  tg_replay_store_t *replay;
  /* Output queued per direction before reading the other side pauses. */
  size_t high_water;
  /* Whether clients may have what the relay sends compressed (--compress;
   * zero: allowed). */
  tg_relay_compress_t compress;
  /* Runs when the last bridge is gone (shutdown, end of --stdio). */
  void (*on_idle)(struct tg_relay_env *env);
  /* The idle timeout of a TLS client once it heartbeats (its first
   * TracegateRelay.ClockSync): silence this long means a dead link. 0:
   * keep the ordinary one. */
  uint32_t heartbeat_idle_ms;
  /* Connections one identity may hold at once (0: no cap), so that one
   * client, looping or hostile, cannot take every --max-conns slot from
   * the others. A connection over it is refused after its handshake, and
   * told why. */
  size_t max_conns_per_identity;
  /* The size of every budget of audit lines below and of each
   * connection's denied calls (--audit-burst, --audit-lines-per-s);
   * tg_relay_env_init sets the defaults. */
  tg_relay_audit_budget_t audit_budget;
  void *data; /* owner's */

  /* Maintained by bridge.c. */
  tg_list_t bridges;
  size_t n_bridges;
  uint64_t accepted, refused, denied_calls;
  /* State changes bridge_internal.h has no arrow for: a bug, logged. */
  uint64_t bad_transitions;
  uint64_t handshakes_evicted; /* unverified, closed for newer ones */
  /* Lines about peers not verified (no identity: failed handshakes,
   * connections closed or refused for room) share one budget, so that a
   * flood of connections cannot flood the log and the audit trail. */
  tg_relay_audit_limit_t unverified_limit;
  /* The same for refusals of verified clients (not authorized, over the
   * per-identity cap, no usable identity, no service): a certificate
   * looping resumed handshakes at a tenth of a millisecond each would
   * otherwise write thousands of lines a second. */
  tg_relay_audit_limit_t refused_limit;
} tg_relay_env_t;

/* Prepares the bridge list of |env| (call once before the first bridge). */
void tg_relay_env_init(tg_relay_env_t *env);

/* Accepts a pending TCP connection on |server| and starts the TLS
 * handshake (|cfg| and |opts| as for tg_tls_chan_accept(); the handshake
 * callback is the bridge's own). Returns 0 or a negative error (nothing
 * was accepted). */
int tg_relay_bridge_accept(tg_relay_env_t *env, uv_stream_t *server,
                           tg_tls_config_t *cfg, const tg_tls_chan_opts_t *opts);

/* Connections that are not closing: what --max-conns counts (a closed
 * one leaves the list a loop iteration later). */
size_t tg_relay_bridge_live(const tg_relay_env_t *env);

/* For room: closes the oldest connection whose TLS handshake has not
 * verified a client after |min_age_ms| (0: none is closed). Returns
 * whether there was one. Verified clients are never closed for room, and
 * neither is a handshake younger than that: a client's takes a few round
 * trips, so peers without a certificate that hold connections open (or
 * dribble a ClientHello) cannot keep verified clients out unless they open
 * a connection for every slot every |min_age_ms|. */
bool tg_relay_bridge_evict_unverified(tg_relay_env_t *env,
                                      uint64_t min_age_ms);

/* Logs (with notice |code|) and audits a "connect deny" about the
 * unverified peer at |addr| within env->unverified_limit: past its burst,
 * lines are counted and their number said with the next line written. */
void tg_relay_deny_unverified(tg_relay_env_t *env, tg_notice_t code,
                              const char *addr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Bridges |in_fd|/|out_fd| (ownership passes) to the service as
 * |identity| with the record role (--stdio: ssh authenticated the user).
 * Returns 0, or a negative error; then the bridge goes away by itself and
 * env->on_idle runs from the loop. */
int tg_relay_bridge_open_stdio(tg_relay_env_t *env, int in_fd, int out_fd,
                               const char *identity);

/* Closes every bridge (shutdown): clients are disconnected, sessions with
 * a resume key detached first. env->on_idle runs from the loop when the
 * last one is gone; with none open it does not run (the caller checks
 * env->n_bridges first). */
void tg_relay_bridge_close_all(tg_relay_env_t *env, const char *why);

#endif /* TRACEGATE_RELAY_BRIDGE_H */
