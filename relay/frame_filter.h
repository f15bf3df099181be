/* The relay's frame checker: what may pass between a remote client and the
 * local tracing service, decided one frame at a time.
 *
 *   client --frame--> tg_relay_filter_client()   --> forward | reply | drop
 *   service --frame-> tg_relay_filter_upstream() --> forward | drop
 *
 * Pure: decode, authorize, rewrite. No I/O, no clock but ClockSync's, no
 * logging. A verdict is an action on frames plus at most one tagged
 * effect (tg_relay_effect_t) that the caller (the bridge) carries out, in
 * one place, along with the logs and the audit trail. This is what
 * tests/fuzz/fuzz_relay_filter.c drives.
 *
 * Client frames are untrusted. Every one is decoded; only BindService and
 * InvokeMethod pass, and what passes is re-encoded from the decoded fields
 * (request id, service name or ids, args, drop_reply): unknown fields,
 * data_for_testing and second messages never reach the service. Replies,
 * request errors and set_peer_identity from a client are dropped (a remote
 * peer must never choose its identity toward the service).
 *
 *   BindService "ConsumerPort"   -> forwarded; the method table is learned
 *                                   from the matching BindServiceReply
 *   BindService "TracegateRelay" -> answered here (relay/relay_service.h)
 *   BindService anything else    -> BindServiceReply{success=false}
 *   InvokeMethod                 -> the role (looked up by the caller per
 *                                   call) must allow the method's name;
 *                                   denied calls get InvokeMethodReply
 *                                   {success=false} with the same request id
 *   TracegateRelay calls         -> answered here (relay/relay_calls.c);
 *                                   SetCompression is granted once per
 *                                   connection, unless the relay's policy
 *                                   refuses it (--compress never)
 *
 * Rewrites: Detach{key} and Attach{key} become "<identity>/<key>", so one
 * principal cannot attach to another's session (keys may not contain '/',
 * so the namespaced form is unambiguous). Sessions are scoped the same way
 * by name (relay/session_scope.h): EnableTracing's unique_session_name and
 * CloneSession's become "<identity>/<name>", CloneSession by id is let
 * through only for the identity's own sessions, and QueryServiceState
 * replies show only the identity's own sessions. EnableTracing asking for
 * write_into_file or an output_path is refused: the file descriptor it
 * needs cannot cross the network.
 *
 * Connection state kept here: the learned ConsumerPort table, every call
 * in flight (forwarded with a reply to come, until its final reply),
 * whether the connection has a tracing session, and the resume key from
 * SetSessionKey.
 *
 * Where a reply is matched to its request: tg_relay_filter_upstream(), by
 * request id against the calls in flight, and nowhere else. A request id
 * is in flight at most once: a client call (BindService or InvokeMethod,
 * to any service) whose id is still in flight is refused, and a frame
 * from the service whose id no call in flight has is dropped. So a reply
 * is attributed to exactly the call that caused it, never to one the
 * client chose (a QueryServiceState reply passed off as an EnableTracing
 * reply would go unscoped). The relay's own calls (relay/own_calls.h) use
 * reserved ids that client calls may not use; the TracegateRelay calls
 * and Resume are answered here at once and are never in flight.
 */
#ifndef TRACEGATE_RELAY_FRAME_FILTER_H
#define TRACEGATE_RELAY_FRAME_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/authz.h"
#include "relay/relay_service.h"
#include "common/buf.h"
#include "common/notice.h"

#define TG_RELAY_FILTER_MAX_METHODS 32
#define TG_RELAY_FILTER_METHOD_NAME_MAX 48
/* Calls in flight (client calls and the relay's own); more are refused. */
#define TG_RELAY_FILTER_MAX_TRACKED 64
/* The request ids of the relay's own calls to the service
 * (relay/own_calls.h): Detach when a link drops, BindService
 * "TracegateConsumer" and SetDisconnectLease. They are refused in client
 * frames that would be forwarded (TG_RELAY_OWN_REQUEST_ID), so no reply
 * to a client passes for one of these. */
#define TG_RELAY_DETACH_REQUEST_ID UINT64_MAX
#define TG_RELAY_LEASE_BIND_REQUEST_ID (UINT64_MAX - 2)
#define TG_RELAY_LEASE_REQUEST_ID (UINT64_MAX - 3)
#define TG_RELAY_OWN_REQUEST_ID(id)                                      \
  ((id) == TG_RELAY_DETACH_REQUEST_ID ||                                \
   (id) == TG_RELAY_LEASE_BIND_REQUEST_ID || (id) == TG_RELAY_LEASE_REQUEST_ID)
/* tracegated's own consumer service (service/consumer_lease.h). */
#define TG_RELAY_LEASE_SERVICE "TracegateConsumer"

typedef enum tg_relay_action {
  /* Send |out| (whole frames) on to the other side. For upstream frames
   * |out| is left empty: forward the input frame as it is. */
  TG_RELAY_FORWARD = 0,
  /* Client frames: send |out| back to the client (empty when the client
   * asked for no reply). */
  TG_RELAY_REPLY = 1,
  /* Send nothing; |reason| says why. */
  TG_RELAY_DROP = 2,
} tg_relay_action_t;

/* What the frame was, for the log. */
typedef enum tg_relay_frame_kind {
  /* A frame from the service, or a kind a client may not send. */
  TG_RELAY_FRAME_OTHER = 0,
  /* A client's BindService or InvokeMethod; |allowed| says how it was
   * decided. */
  TG_RELAY_FRAME_CALL,
  /* It did not decode (counted in stats.undecodable or
   * stats.upstream_garbage). */
  TG_RELAY_FRAME_GARBAGE,
} tg_relay_frame_kind_t;

/* What the caller must do beyond sending what the action says: at most
 * one per frame. */
typedef enum tg_relay_effect_kind {
  TG_RELAY_EFFECT_NONE = 0,
  /* Upstream: a ReadBuffers reply, queued as bulk data and kept for
   * replay. |bulk.body| (into the payload, NULL when empty) is its
   * ReadBuffersResponse and |bulk.last| says it ends its read. */
  TG_RELAY_EFFECT_BULK,
  /* Client: TracegateRelay.SetCompression was granted. Send the reply
   * behind everything before it, then compress from the next frame on
   * with |compression|. */
  TG_RELAY_EFFECT_START_COMPRESSION,
  /* Client: SetSessionKey set the resume key (f->session_key), with |out|
   * empty: hold the key's replay window, answer request_id with
   * tg_relay_filter_session_key_reply() when |session_key.reply| (what
   * the reply says comes from the window), and send
   * tg_relay_filter_lease_frames() upstream. */
  TG_RELAY_EFFECT_SESSION_KEY_SET,
  /* Client: ClockSync was answered; the client heartbeats. */
  TG_RELAY_EFFECT_HEARTBEAT,
  /* Client: TracegateRelay.Ack{|replay.seq|}, answered already: the key's
   * replay window forgets through it. */
  TG_RELAY_EFFECT_REPLAY_ACK,
  /* Client: TracegateRelay.Resume{|replay.seq|, |replay.cum|}, with |out|
   * empty: the caller answers request_id from the key's replay window
   * (relay/replay_window.h). */
  TG_RELAY_EFFECT_REPLAY_RESUME,
  /* Upstream: the reply to the relay's own TracegateConsumer bind or
   * SetDisconnectLease (dropped); |allowed| says whether it worked,
   * |reason| what it means, |audit| whether the audit trail gets it. The
   * caller sends tg_relay_filter_lease_frames() again (after a bind, the
   * lease call follows). */
  TG_RELAY_EFFECT_OWN_LEASE_REPLY,
  /* Upstream: the reply to the relay's own drop-time Detach (dropped);
   * |allowed| says whether the service accepted it. */
  TG_RELAY_EFFECT_OWN_DETACH_REPLY,
} tg_relay_effect_kind_t;

typedef struct tg_relay_effect {
  tg_relay_effect_kind_t kind;
  union {
    struct {
      const uint8_t *body;
      size_t len;
      bool last;
    } bulk;
    struct {
      int level, window_log;
    } compression;
    struct {
      uint64_t seq, cum; /* cum: Resume only */
    } replay;
    struct {
      bool reply; /* false: the client asked for no reply (drop_reply) */
    } session_key;
  };
} tg_relay_effect_t;

typedef struct tg_relay_verdict {
  tg_relay_action_t action;
  tg_relay_frame_kind_t frame;
  uint64_t request_id;
  bool allowed;
  /* Worth a line in the audit trail: every call except the chatty allowed
   * reads (ReadBuffers, GetTraceStats, QueryServiceState, ClockSync), and
   * refused frame kinds. */
  bool audit;
  tg_relay_effect_t effect;
  /* "EnableTracing", "BindService", "set_peer_identity", ... */
  char method[TG_RELAY_FILTER_METHOD_NAME_MAX + 16];
  /* Why it was denied or dropped, or what was rewritten; "" if nothing to
   * say. |code| names it for the audit trail (TG_N_NONE: nothing said). */
  char reason[256];
  tg_notice_t code;
} tg_relay_verdict_t;

typedef struct tg_relay_filter_stats {
  uint64_t client_frames;
  uint64_t upstream_frames;
  uint64_t undecodable;     /* client frames that did not decode */
  uint64_t refused_kinds;   /* replies, set_peer_identity, ... from a client */
  uint64_t denied;          /* calls answered with success=false locally */
  uint64_t forwarded;
  uint64_t local;           /* TracegateRelay calls answered here */
  uint64_t upstream_garbage;
  uint64_t in_flight_reused; /* client calls refused: id still in flight */
  uint64_t unmatched;        /* service frames answering no call in flight */
} tg_relay_filter_stats_t;

/* What a call in flight is, for what its replies mean to the relay. */
typedef enum tg_relay_track_kind {
  TG_TRACK_NONE = 0, /* not in flight */
  TG_TRACK_OTHER,    /* a forwarded call whose replies pass as they are */
  TG_TRACK_BIND_CONSUMER,
  TG_TRACK_READ_BUFFERS,
  TG_TRACK_ENABLE,
  TG_TRACK_ATTACH,
  TG_TRACK_DETACH,
  TG_TRACK_OWN_DETACH,
  TG_TRACK_QUERY_STATE,
  TG_TRACK_OWN_LEASE_BIND,
  TG_TRACK_OWN_LEASE,
} tg_relay_track_kind_t;

/* Whether the service keeps sessions past a dead consumer connection. */
typedef enum tg_relay_lease_state {
  TG_LEASE_UNKNOWN = 0, /* not asked yet */
  TG_LEASE_BINDING,     /* BindService "TracegateConsumer" in flight */
  TG_LEASE_BOUND,       /* it is there: leases can be set */
  TG_LEASE_UNSUPPORTED, /* it is not (Perfetto's traced) */
} tg_relay_lease_state_t;

/* Session ids a connection has seen as its own identity's. */
#define TG_RELAY_FILTER_MAX_OWNED 16

typedef struct tg_relay_filter {
  char identity[TG_AUTHZ_IDENTITY_MAX + 1];
  const tg_relay_host_info_t *host; /* borrowed */
  char service_instance[48]; /* the upstream's (RelayHostInfo); "" unknown */
  bool service_down; /* nothing listens on the service's socket */

  /* ConsumerPort as the service announced it. */
  bool consumer_bound;
  uint32_t consumer_id;
  size_t n_methods;
  struct {
    uint32_t id;
    char name[TG_RELAY_FILTER_METHOD_NAME_MAX];
  } methods[TG_RELAY_FILTER_MAX_METHODS];

  size_t n_tracked;
  struct {
    uint64_t request_id;
    tg_relay_track_kind_t kind;
  } tracked[TG_RELAY_FILTER_MAX_TRACKED];

  /* An EnableTracing (or a successful Attach) whose session has not ended
   * or left this connection yet. */
  bool session_active;
  char session_key[TG_RELAY_SESSION_KEY_MAX + 1]; /* "" when none */
  bool compression_granted; /* SetCompression answered: once per connection */
  tg_relay_compress_t compress; /* the relay's policy (--compress) */

  /* TracegateConsumer upstream: the lease follows the session key. */
  tg_relay_lease_state_t lease;
  uint32_t lease_service_id, lease_method_id;
  /* The key the service holds a lease for ("" none), and whether a lease
   * call is in flight. */
  char lease_key[TG_RELAY_SESSION_KEY_MAX + 1];
  bool lease_in_flight;

  /* Names the relay gives sessions the client left unnamed:
   * "<identity>/~relay-<tag>-<n>"; |tag| makes them unique per relay. */
  char session_tag[40];
  uint32_t n_unnamed;
  /* Ids of this identity's sessions, from QueryServiceState replies (a
   * ring): what CloneSession by id may name. */
  uint64_t owned[TG_RELAY_FILTER_MAX_OWNED];
  size_t n_owned;

  tg_relay_filter_stats_t stats;
} tg_relay_filter_t;

/* |identity| is copied (truncated to TG_AUTHZ_IDENTITY_MAX); |host| is
 * borrowed and must outlive the filter (NULL: GetHostInfo fails). */
void tg_relay_filter_init(tg_relay_filter_t *f, const char *identity,
                          const tg_relay_host_info_t *host);

/* Sets the tag that makes the relay's names for unnamed sessions unique
 * (e.g. "<pid>.<connection number>"; truncated to 39 characters). */
void tg_relay_filter_set_session_tag(tg_relay_filter_t *f, const char *tag);

/* Sets the tracing service's process, as GetHostInfo tells it (see
 * tg_relay_service_instance; truncated to 47 characters). */
void tg_relay_filter_set_service_instance(tg_relay_filter_t *f,
                                          const char *instance);
/* The connection has no service behind it: nothing listens on the
 * service's socket (GetHostInfo says service_down). */
void tg_relay_filter_set_service_down(tg_relay_filter_t *f);

/* Sets whether SetCompression may be granted (the default: allowed).
 * With TG_RELAY_COMPRESS_NEVER it is denied and the link stays plain. */
void tg_relay_filter_set_compress(tg_relay_filter_t *f,
                                  tg_relay_compress_t policy);

/* Decides one client frame payload (an IPCFrame without its length
 * prefix; read during the call only, never kept). |role| is the identity's
 * role now (the caller looks it up per frame, so a reloaded authorization
 * file applies to the next call). |out| and |v| are the caller's.
 * Frames to send are appended to |out| (the caller resets it). Returns 0
 * with |v| filled, or -ENOMEM / TG_EFRAME_TOO_LARGE when a frame could not
 * be built (the caller closes the connection). */
int tg_relay_filter_client(tg_relay_filter_t *f, tg_authz_role_t role,
                           const uint8_t *payload_untrusted, size_t len,
                           tg_buf_t *out, tg_relay_verdict_t *v);

/* Decides one frame from the service: matches it to its call in flight,
 * learns the ConsumerPort table from the BindServiceReply of a tracked
 * bind, marks ReadBuffers replies as bulk, follows the session through
 * EnableTracing/Attach/Detach replies. The action is FORWARD or DROP (the
 * frame does not decode, answers no call in flight, or answers one of the
 * relay's own calls). FORWARD with |out| empty: the input as it is; with
 * frames appended to |out| (the caller resets it): those instead (a
 * QueryServiceState reply with other identities' sessions removed).
 * Returns 0, or -ENOMEM. */
int tg_relay_filter_upstream(tg_relay_filter_t *f, const uint8_t *payload,
                             size_t len, tg_buf_t *out,
                             tg_relay_verdict_t *v);

/* After TG_RELAY_EFFECT_SESSION_KEY_SET with |session_key.reply|: appends
 * the SetSessionKey reply frame for |request_id| to |out|, saying whether
 * the key's last session ended with the service's connection
 * (proto/tracegate/relay.proto). Returns 0, or -ENOMEM. */
int tg_relay_filter_session_key_reply(uint64_t request_id,
                                      bool ended_with_service, tg_buf_t *out);

#endif /* TRACEGATE_RELAY_FRAME_FILTER_H */
