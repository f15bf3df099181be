/* What bridge.c and bridge_open.c share of a bridge: its state and the
 * functions each calls in the other. Only those two files include it.
 */
#ifndef TRACEGATE_RELAY_BRIDGE_INTERNAL_H
#define TRACEGATE_RELAY_BRIDGE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/pipe_transport.h"
#include "ipc/unix_transport.h"
#include "relay/bridge.h"
#include "relay/bridge_state.h"
#include "relay/frame_filter.h"
#include "tls/compress_transport.h"

/* Per connection, drops and denials are logged at warn level this many
 * times, then at debug level (they are all counted and summed up at the
 * end): a client cannot flood the log. */
#define LOUD_LOGS 20
#define DEFAULT_HIGH_WATER (4u * 1024 * 1024)
/* How long a refused client is kept to be told why (its first request is
 * answered with the refusal), and how long its answer may take to leave. */
#define REFUSAL_LINGER_MS 3000
#define REFUSAL_FLUSH_MS 200
/* How long a connection with no service behind it (B_NO_SERVICE) is kept
 * for the relay's own calls: a client that lost its session learns from
 * GetHostInfo that the service is down. */
#define NO_SERVICE_LINGER_MS 10000

/* The bools below are not states: each records what one handle or one
 * side did, whatever the state. |client_open| and |up_open| follow each
 * transport's own close callback, which come in either order in any
 * state; |zstd|, |heartbeats| and |stdio| say how the client talks (from
 * birth or from its request on); the paused pair mirrors each side's
 * reading under backpressure; |authorized| and |up_answered| remember
 * what happened, which the closing and its reason still need. */
struct tg_relay_bridge {
  tg_relay_env_t *env;
  tg_list_t node;
  enum bridge_state state; /* written only by tg__bridge_set_state() */

  /* The client's link, made once by the accept (bridge_open.c): a TLS
   * channel (owned, freed with the bridge; the admission reads its peer)
   * or, with --stdio, a pipe transport. */
  tg_tls_chan_t *tls;
  tg_pipe_transport_t pipe;
  /* The client's transport, set by the accept: the link, or |z| over it
   * once the client asked for compression (TracegateRelay.SetCompression).
   * Everything the bridge sends to, reads from and asks of the client
   * goes through its ops (ipc/transport.h), whatever the link is. */
  tg_transport_t *client;
  bool client_open; /* its on_close has not run yet */
  tg_zstd_transport_t z;
  bool zstd;
  bool heartbeats; /* the client called ClockSync: dead-link idle timeout */
  bool stdio;

  tg_unix_transport_t up;
  bool up_open;
  bool up_answered; /* the service sent a frame: it took the connection */

  uv_timer_t timer; /* bounds the drop-time Detach */

  tg_relay_filter_t filter;
  char identity[TG_AUTHZ_IDENTITY_MAX + 1];
  char addr[320];
  bool authorized; /* the connection got past the identity check */

  char close_why[420];
  /* The code of |close_why| for the audit trail's disconnect line; set by
   * the first close (TG_N_NONE until then). */
  tg_notice_t close_code;
  char refusal[TG_AUTHZ_IDENTITY_MAX + 160]; /* for the client (B_REFUSING) */
  char detach_key[300];
  tg_replay_window_t *win; /* the session key's replay window, held */
  /* While the client takes the stream compressed: the segment of |win|
   * that the compressor's bytes go to (relay/replay_window.h). */
  tg_replay_seg_t *seg;
  uint64_t seg_start;     /* the compressor's raw_pos() where it began */
  uint64_t seg_frame_end; /* where the frame just kept in it ends, inflated */
  /* Replies the window kept: in the buffer read, copied, compressed. */
  uint64_t replay_adopted, replay_copied, replay_compressed;

  tg_relay_audit_limit_t deny_limit; /* denial lines in the audit trail */
  tg_buf_t out;    /* frames the filter built from a client frame */
  tg_buf_t up_out; /* frames it built from a service frame */
  bool client_paused, up_paused;
  unsigned loud;
  uint64_t opened_ms;
};

/* bridge.c */

/* The one transition: logs "who: from -> to: why" at debug level. One
 * that tg__bridge_transition_ok() refuses is a bug of the bridge's:
 * common/fsm.h's policy refuses it (the state stays), counts it
 * (env->bad_transitions) and logs it as an error; the caller's effects
 * go on. Setting the current state again does nothing. */
void tg__bridge_set_state(tg_relay_bridge_t *b, enum bridge_state to,
                          const char *why);
/* Frames flow between the client and a service: the real one (B_OPEN) or
 * the relay's own stand-in (B_NO_SERVICE). */
static inline bool tg__bridge_serving(const tg_relay_bridge_t *b) {
  return b->state == B_OPEN || b->state == B_NO_SERVICE;
}
/* Going or gone: no longer counted among live connections. */
static inline bool tg__bridge_ending(const tg_relay_bridge_t *b) {
  return b->state == B_CLOSING || b->state == B_FREEING;
}
const char *tg__bridge_who(const tg_relay_bridge_t *b);
size_t tg__bridge_high_water(const tg_relay_bridge_t *b);
/* Frees |b| once every handle of it has closed. */
void tg__bridge_maybe_free(tg_relay_bridge_t *b);
/* Closes |b| (idempotent): |why| is kept for the log and the audit. */
void tg__bridge_close(tg_relay_bridge_t *b, int status, const char *why);
/* B_REFUSING ran its course: the connection closes. */
void tg__bridge_on_refusal_timer(uv_timer_t *t);
extern const tg_transport_cbs_t tg__bridge_client_cbs;
extern const tg_transport_cbs_t tg__bridge_up_cbs;

#endif /* TRACEGATE_RELAY_BRIDGE_INTERNAL_H */
