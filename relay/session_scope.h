/* Session scoping: which tracing sessions a remote identity may reach.
 *
 * The service behind the relay (ours or Perfetto's traced) sees one
 * consumer uid, the relay's, for every remote identity, so it cannot keep
 * identities apart; the relay does, by naming. Every session started
 * through the relay gets a unique_session_name "<identity>/<name>" (the
 * client's name, or one the relay makes up), and:
 *
 *   EnableTracing      -> trace_config.unique_session_name namespaced
 *   CloneSession       -> by unique_session_name: namespaced (so only the
 *                         identity's own sessions match); by session_id:
 *                         only ids this connection has seen as its own
 *   QueryServiceState  <- tracing_sessions not named exactly
 *                         "<identity>/<name>" (a name without '/') are
 *                         removed from every reply, and the session counts
 *                         recomputed from what is left
 *   Attach / Detach    -> keys namespaced (relay/frame_filter.c)
 *
 * The other session calls (ReadBuffers, FreeBuffers, Flush, DisableTracing,
 * StartTracing, ChangeTraceConfig, GetTraceStats, ObserveEvents) act on the
 * calling connection's own session in the protocol, so reaching another
 * identity's session takes one of the calls above first.
 *
 * Pure: decodes and re-encodes with protobuf-c (unknown fields are kept).
 * Names and ids come from untrusted clients and an honest service.
 */
#ifndef TRACEGATE_RELAY_SESSION_SCOPE_H
#define TRACEGATE_RELAY_SESSION_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Longest "<identity>/<name>" the relay makes. */
#define TG_RELAY_SCOPED_NAME_MAX 400

/* EnableTracingRequest |args|: appends to |out| the same request with
 * trace_config.unique_session_name = "<identity>/<name>", |name| being the
 * client's (which must be a valid key: printable, no space or '/', at most
 * 128 characters) or, when it gave none, |fallback|. A request without a
 * trace_config is copied as it is. Returns 0 (|why| says the name), or -1
 * with the reason in |why| (does not decode, bad name). */
int tg_relay_scope_enable(const char *identity, const char *fallback,
                          const uint8_t *args, size_t len, tg_buf_t *out,
                          char *why, size_t whylen);

/* CloneSessionRequest |args|: by unique_session_name, appends the request
 * with the name namespaced; by session_id, appends it unchanged when the id
 * is among |owned| (|n_owned| ids). Returns 0 (|why| says which session),
 * or -1 with the reason in |why| (another identity's or unknown id, no
 * selector, bad name, does not decode). */
int tg_relay_scope_clone(const char *identity, const uint64_t *owned,
                         size_t n_owned, const uint8_t *args, size_t len,
                         tg_buf_t *out, char *why, size_t whylen);

/* A QueryServiceStateResponse body from the service: appends to |out| the
 * same with only |identity|'s sessions, num_sessions and
 * num_sessions_started counting those; |on_owned| (may be NULL) gets each
 * kept session's id. Returns 0, or -1 when the body does not decode (the
 * caller forwards nothing of it). */
int tg_relay_scope_service_state(const char *identity, const uint8_t *body,
                                 size_t len, tg_buf_t *out,
                                 void (*on_owned)(void *ctx, uint64_t id),
                                 void *ctx);

#endif /* TRACEGATE_RELAY_SESSION_SCOPE_H */
