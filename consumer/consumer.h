/* The consumer library: Perfetto's ConsumerPort on libuv, over any framed
 * transport (a local UNIX socket, or TLS to a relay).
 *
 * A tg_consumer_t is one connection bound to "ConsumerPort" (method ids come
 * from the BindServiceReply). Each call sends one request and reports its
 * outcome to a callback; the service allows one tracing session per
 * connection, so a connection is also "the session" for the session calls.
 *
 * Rules every call follows:
 * - It returns 0 and its callback runs exactly once later (once per reply
 *   for the streaming calls, the last one with has_more == false), or it
 *   returns a negative error and its callback never runs.
 * - Callbacks never run inside the call that asked for them; they run from
 *   the loop.
 * - A failure is a status (negative: -errno or TG_E*, tracegate/error.h)
 *   plus |msg|, a human-readable sentence without trailing newline, e.g.
 *   "the service refused: buffers: at least one buffer is required". |msg|
 *   is never NULL ("" on success) and is valid during the callback only.
 *   Text that came from the service is stripped of control characters.
 * - TG_EREMOTE_FAILED: the service answered with a failure.
 *   TG_EPEER_CLOSED: the connection was lost before the answer (every
 *   pending callback gets it, then on_close runs).
 *   -ECANCELED: tg_consumer_close() was called before the answer.
 *   TG_ENOT_CONNECTED (returned): not bound yet, or closing.
 * - Pointers passed to a callback (packets, decoded messages) are borrowed
 *   for the duration of the callback.
 * - A callback may call any function of this API, including
 *   tg_consumer_close().
 */
#ifndef TRACEGATE_CONSUMER_CONSUMER_H
#define TRACEGATE_CONSUMER_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "pb/common/observable_events.pb-c.h"
#include "pb/common/trace_stats.pb-c.h"
#include "pb/common/tracing_service_capabilities.pb-c.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "consumer/slice_reassembler.h"
#include "ipc/transport.h"

typedef struct tg_consumer tg_consumer_t;

/* Default cap on one reassembled packet (ReadBuffers). */
#define TG_CONSUMER_DEFAULT_MAX_PACKET (64u << 20)
/* Cap on a merged QueryServiceState answer. */
#define TG_CONSUMER_MAX_STATE_BYTES (32u << 20)

typedef struct tg_consumer_cbs {
  /* The bind to ConsumerPort finished. On error (the host does not offer
   * ConsumerPort, or the connection failed) on_close follows: at once, or,
   * when calls on another service (tg_consumer_bind_service) are in
   * flight, once they and the calls their callbacks make are answered (a
   * relay whose tracing service is down still answers its own). Optional. */
  void (*on_ready)(tg_consumer_t *c, int status, const char *msg);
  /* The connection is closed and every pending callback has run. |status|
   * is 0 after tg_consumer_close(), the bind's error if the bind failed,
   * else TG_EPEER_CLOSED (the transport's reason in |msg|). The consumer's
   * memory is freed when this returns. Required. */
  void (*on_close)(tg_consumer_t *c, int status, const char *msg);
} tg_consumer_cbs_t;

/* Connects to the service's consumer socket |addr| (a path or "@abstract";
 * borrowed for the call) and binds ConsumerPort. The library allocates the
 * consumer and its UNIX transport (which passes file descriptors); *out is
 * valid until on_close returns. |cbs| must outlive the consumer; |data| is
 * the owner's (tg_consumer_data). Returns 0 or a negative error (-ENOENT,
 * -ECONNREFUSED, -EACCES... from connect(2)); then no callback runs and
 * nothing is left to the caller (what was opened is released by the loop). */
int tg_consumer_connect(uv_loop_t *loop, const char *addr,
                                  const tg_consumer_cbs_t *cbs, void *data,
                                  tg_consumer_t **out);

/* The same over a transport the caller opened (TLS to a relay, a pipe).
 * The consumer takes over |t|'s callbacks; |t| stays the caller's memory
 * and must stay valid until on_close, after which the caller frees it (the
 * transport itself is closed by then). |can_pass_fds| says whether the
 * transport carries file descriptors (write_into_file needs them). On
 * error |t| is handed back as it was (its cbs and data restored). */
int tg_consumer_open(uv_loop_t *loop, tg_transport_t *t,
                               bool can_pass_fds, const tg_consumer_cbs_t *cbs,
                               void *data, tg_consumer_t **out);

/* Closes the connection: pending callbacks run with -ECANCELED, then
 * on_close(status 0). Idempotent; safe inside any callback. */
void tg_consumer_close(tg_consumer_t *c);

void *tg_consumer_data(const tg_consumer_t *c);
void tg_consumer_set_data(tg_consumer_t *c, void *data);
/* True once bound and until closing. */
bool tg_consumer_ready(const tg_consumer_t *c);
/* True if the transport carries file descriptors (EnableTracing's fd). */
bool tg_consumer_can_pass_fds(const tg_consumer_t *c);
/* Caps one reassembled ReadBuffers packet (default
 * TG_CONSUMER_DEFAULT_MAX_PACKET); a bigger one fails the read. */
void tg_consumer_set_max_packet(tg_consumer_t *c, size_t max);

/* --- callbacks ---------------------------------------------------------- */

/* Outcome of a call without a result. */
typedef void (*tg_consumer_done_cb)(tg_consumer_t *c, void *ctx, int status,
                                    const char *msg);
/* One whole TracePacket (its serialised bytes, without the Trace.packet
 * tag). Return 0 to go on, or a negative error to stop the read: the
 * read's done callback then gets that error. */
typedef int (*tg_consumer_packet_cb)(tg_consumer_t *c, void *ctx,
                                     const uint8_t *packet, size_t len);
typedef void (*tg_consumer_stats_cb)(tg_consumer_t *c, void *ctx, int status,
                                     const char *msg,
                                     const Perfetto__Protos__TraceStats *stats);
/* |config|: the session's TraceConfig, serialised as the service sent it. */
typedef void (*tg_consumer_attach_cb)(tg_consumer_t *c, void *ctx, int status,
                                      const char *msg, const uint8_t *config,
                                      size_t len);
/* |state| is NULL on error. */
typedef void (*tg_consumer_state_cb)(
    tg_consumer_t *c, void *ctx, int status, const char *msg, bool has_more,
    const Perfetto__Protos__TracingServiceState *state);
typedef void (*tg_consumer_caps_cb)(
    tg_consumer_t *c, void *ctx, int status, const char *msg,
    const Perfetto__Protos__TracingServiceCapabilities *caps);
/* |events| may be NULL (the last reply of a stream carries none). */
typedef void (*tg_consumer_events_cb)(
    tg_consumer_t *c, void *ctx, int status, const char *msg, bool has_more,
    const Perfetto__Protos__ObservableEvents *events);

/* --- the session -------------------------------------------------------- */

/* EnableTracing with a serialised TraceConfig (|config|, borrowed for the
 * call: sent as is, unknown fields included). |fd| >= 0 is the output file
 * for write_into_file; its ownership passes to the library (closed once
 * sent, or on error) — dup() it first to keep a handle. |on_ended| runs
 * when tracing ENDS: status 0; or TG_EREMOTE_FAILED with the service's
 * reason ("the service refused: ...") when it refused the config or
 * tracing failed; or -ECANCELED after a successful tg_consumer_detach()
 * (msg "detached"): the end is then no longer reported here. */
int tg_consumer_enable_tracing(tg_consumer_t *c,
                                         const uint8_t *config, size_t len,
                                         int fd, tg_consumer_done_cb on_ended,
                                         void *ctx);
/* EnableTracing{attach_notification_only}: after tg_consumer_attach(), asks
 * for the end of the attached session, reported like on_ended above (at
 * once if it already ended). */
int tg_consumer_notify_on_end(tg_consumer_t *c,
                                        tg_consumer_done_cb on_ended,
                                        void *ctx);
/* StartTracing, for a config with deferred_start. */
int tg_consumer_start_tracing(tg_consumer_t *c,
                                        tg_consumer_done_cb cb, void *ctx);
/* Flush: asks every data source to commit what it holds; done when all
 * acknowledged (status 0) or after |timeout_ms| (0: the config's or the
 * service's default) with TG_EREMOTE_FAILED. */
int tg_consumer_flush(tg_consumer_t *c, uint32_t timeout_ms,
                                tg_consumer_done_cb cb, void *ctx);
/* DisableTracing: stops the data sources; the end itself is reported to
 * the EnableTracing callback. */
int tg_consumer_disable_tracing(tg_consumer_t *c,
                                          tg_consumer_done_cb cb, void *ctx);
/* ReadBuffers: drains the session's buffers (destructive). Slices are
 * reassembled into whole packets, each handed to |on_packet| in order;
 * |on_done| follows once. Memory is bounded by the largest packet (see
 * tg_consumer_set_max_packet); a malformed stream fails the read with
 * TG_EPROTO_DECODE, a too large packet with TG_ENO_SPACE. One read at a
 * time per connection (the service refuses a second one). */
int tg_consumer_read_buffers(tg_consumer_t *c,
                                       tg_consumer_packet_cb on_packet,
                                       tg_consumer_done_cb on_done, void *ctx);
/* The same, reassembling into |ra| (the caller's: kept across reads and
 * connections, so that a packet cut short by a lost connection can be
 * completed from a relay's replay; the caller resets it when it cannot
 * be), and counting every reply frame received into *|frames| and its
 * ReadBuffersResponse bytes into *|bytes| (both may be NULL): the
 * numbering a tracegate-relay gives them (TracegateRelay.Ack/Resume). */
int tg_consumer_read_buffers_into(tg_consumer_t *c, tg_slice_reassembler_t *ra,
                                  uint64_t *frames, uint64_t *bytes,
                                  tg_consumer_packet_cb on_packet,
                                  tg_consumer_done_cb on_done, void *ctx);
/* FreeBuffers: ends the session and frees its buffers. */
int tg_consumer_free_buffers(tg_consumer_t *c,
                                       tg_consumer_done_cb cb, void *ctx);
int tg_consumer_get_trace_stats(tg_consumer_t *c,
                                          tg_consumer_stats_cb cb, void *ctx);
/* Detach: the session outlives this connection under |key| (borrowed for
 * the call; 1..256 bytes). On success the EnableTracing callback runs first
 * with -ECANCELED ("detached"), then |cb|. */
int tg_consumer_detach(tg_consumer_t *c, const char *key,
                                 tg_consumer_done_cb cb, void *ctx);
/* Attach: takes over the detached session |key| of the same uid; |cb| gets
 * its TraceConfig. */
int tg_consumer_attach(tg_consumer_t *c, const char *key,
                                 tg_consumer_attach_cb cb, void *ctx);
/* Which session CloneSession snapshots, and why. Strings borrowed for the
 * call. */
typedef struct tg_consumer_clone_args {
  uint64_t session_id;             /* used when unique_session_name is NULL */
  const char *unique_session_name; /* NULL: by id */
  /* A CLONE_SNAPSHOT trigger that asked for it (ObservableEvents
   * clone_trigger_hit), recorded in the snapshot; NULL for none. */
  const char *clone_trigger_name;
  const char *clone_trigger_producer_name;
  int32_t clone_trigger_producer_uid;
  /* For a bugreport (Perfetto's --clone-for-bugreport): with session_id
   * UINT64_MAX (kBugreportSessionId), the service picks the session with
   * the highest bugreport_score. */
  bool for_bugreport;
} tg_consumer_clone_args_t;

/* CloneSession: a read-only snapshot of a session of the same uid (the
 * original keeps running) becomes this connection's session, read with
 * tg_consumer_read_buffers() and ended with tg_consumer_free_buffers().
 * |cb| gets 0, or TG_EREMOTE_FAILED with the service's reason (no such
 * session, another uid's, this connection already has one). */
int tg_consumer_clone_session(tg_consumer_t *c,
                              const tg_consumer_clone_args_t *args,
                              tg_consumer_done_cb cb, void *ctx);

/* --- the service -------------------------------------------------------- */

/* QueryServiceState. The service streams a large state in several replies:
 * with |merge| the library merges them (up to TG_CONSUMER_MAX_STATE_BYTES)
 * and calls |cb| once; otherwise |cb| runs per reply. */
int tg_consumer_query_service_state(tg_consumer_t *c,
                                              bool sessions_only, bool merge,
                                              tg_consumer_state_cb cb,
                                              void *ctx);
int tg_consumer_query_capabilities(tg_consumer_t *c,
                                             tg_consumer_caps_cb cb, void *ctx);
/* ObserveEvents: a stream of events of the given types (|types| borrowed
 * for the call) until the connection closes or a new ObserveEvents (or one
 * with no types) replaces it. */
int tg_consumer_observe_events(
    tg_consumer_t *c, const Perfetto__Protos__ObservableEvents__Type *types,
    size_t n, tg_consumer_events_cb cb, void *ctx);

/* --- other services on the same connection ------------------------------- */

/* A relay answers services of its own next to the forwarded ConsumerPort
 * (tracegate-relay's "TracegateRelay": host info, clock sync, resume key;
 * proto/tracegate/relay.proto). These two calls reach them without a
 * second connection; the messages are the caller's to encode and decode.
 */

/* One reply of tg_consumer_call(): the service's serialised reply message
 * (|reply|, |len|; NULL/0 on error or for an empty message), borrowed for
 * the callback. |status| as for every call, TG_EREMOTE_FAILED when the
 * service answered success=false. */
typedef void (*tg_consumer_reply_cb)(tg_consumer_t *c, void *ctx, int status,
                                     const char *msg, const uint8_t *reply,
                                     size_t len);

/* BindService |service| (borrowed for the call) on this connection; |cb|
 * gets 0 once its methods are known, TG_EUNKNOWN_SERVICE when the peer
 * does not offer it (a plain tracing service instead of a relay), or the
 * connection's error. Returns -EALREADY (no callback) for a service
 * already bound, and for ConsumerPort. At most a few services per
 * connection (the IPC client's TG_IPC_CLIENT_MAX_SERVICES, ConsumerPort
 * included). May be called as soon as tg_consumer_open/connect returned,
 * before on_ready: the bind then shares ConsumerPort's round trip, and the
 * service's calls below work before on_ready too (a relay answers its own
 * service without waiting for the tracing service). */
int tg_consumer_bind_service(tg_consumer_t *c, const char *service,
                                       tg_consumer_done_cb cb, void *ctx);
/* True once |service| is bound on this connection. */
bool tg_consumer_has_service(const tg_consumer_t *c,
                                       const char *service);
/* Invokes |method| of the bound |service| with the serialised request
 * |args| (|len| bytes, borrowed for the call). Returns TG_ENOT_CONNECTED
 * when |service| is not bound (or the connection is closing; for
 * ConsumerPort itself, until on_ready),
 * TG_ENOT_SUPPORTED when it has no such method. Not for streaming methods:
 * |cb| runs once, with the last reply. */
int tg_consumer_call(tg_consumer_t *c, const char *service,
                               const char *method, const uint8_t *args,
                               size_t len, tg_consumer_reply_cb cb, void *ctx);

/* One reply of tg_consumer_call_stream(): as tg_consumer_reply_cb, with
 * |more| on every reply but the last (after which the call is over). */
typedef void (*tg_consumer_stream_cb)(tg_consumer_t *c, void *ctx, int status,
                                      const char *msg, const uint8_t *reply,
                                      size_t len, bool more);

/* tg_consumer_call() for a method that answers with a stream: |cb| gets
 * every reply. */
int tg_consumer_call_stream(tg_consumer_t *c, const char *service,
                            const char *method, const uint8_t *args,
                            size_t len, tg_consumer_stream_cb cb, void *ctx);

#endif /* TRACEGATE_CONSUMER_CONSUMER_H */
