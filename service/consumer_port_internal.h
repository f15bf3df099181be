/* ConsumerPort's files among themselves (private to service/consumer_port*.c).
 *
 * consumer_port.c holds the one dispatcher: it unpacks each request,
 * refuses one that does not decode, hands it to a handler below and frees
 * it after; it also owns the connections (tg_consumer_conn_t), their
 * leases, and the small calls (Attach, Detach, the queries). The handlers
 * of the other concerns live beside it:
 *   consumer_port_control.c  EnableTracing ... ChangeTraceConfig, and the
 *                            session observer EnableTracing installs
 *   consumer_port_read.c     ReadBuffers, streamed
 *   consumer_port_clone.c    CloneSession
 * A handler gets its connection, the call and the decoded request,
 * borrowed for the call: it copies what it keeps. The dispatcher calls
 * the handlers, never the other way (what both use is inline below);
 * consumer_port_control.c calls consumer_port_clone.c, never the other
 * way.
 */
#ifndef TRACEGATE_SERVICE_CONSUMER_PORT_INTERNAL_H
#define TRACEGATE_SERVICE_CONSUMER_PORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/list.h"
#include "ipc/host.h"
#include "service/consumer_query.h"
#include "service/read_frames.h"
#include "service/service.h"
#include "service/session.h"

/* A Flush or CloneSession call waiting for its session's flush; its
 * address is the flush's cookie. */
typedef struct tg__flush_call {
  tg_list_t node;
  tg_ipc_call_t call;
  /* CloneSession: the snapshot of session |clone_src| is taken once the
   * flush is over, so it holds what producers had written until now. */
  bool clone;
  uint64_t clone_src;
  /* skip_trace_filter: the snapshot is read without the source's filter
   * (perfetto --clone-for-bugreport asks for this). */
  bool skip_trace_filter;
  /* The trigger it is cloned for (owned); no name: none. */
  tg_trigger_info_t trigger;
} tg__flush_call_t;

/* Inline: consumer_port.c and the handlers both free them, and the
 * handlers never call back into the dispatcher's file. */
static inline void tg__flush_call_free(tg__flush_call_t *fc) {
  tg__trigger_info_free(&fc->trigger);
  free(fc);
}

typedef struct tg_consumer_conn {
  tg_service_t *svc;
  tg_ipc_host_conn_t *conn;
  tg_list_t node;
  tg_session_t *session;
  /* EnableTracing is answered when |enable_session| ends. */
  bool has_enable_call;
  tg_ipc_call_t enable_call;
  tg_session_t *enable_session;
  tg_list_t flush_calls; /* tg__flush_call_t */
  bool observing;
  tg_ipc_call_t observe_call;
  uint32_t observe_mask; /* bit per ObservableEvents.Type */
  bool reading;          /* a ReadBuffers is in progress */
  tg_ipc_call_t read_call;
  uint64_t read_budget;  /* bytes this ReadBuffers may still send */
  /* Owned; made at the first ReadBuffers, when the socket is also set up
   * for streaming (consumer_port_read.c). */
  tg_read_frames_t *frames;
  char *lease_key;       /* SetDisconnectLease; NULL when none */
  uint64_t lease_ms;
  tg_state_query_t state_query; /* a QueryServiceState paused for drain */
} tg_consumer_conn_t;

/* EnableTracingRequest {trace_config = 1, attach_notification_only = 2},
 * read with the field reader: the config bytes go to the session exactly
 * as sent, unknown fields included, without a decode/re-encode round. */
typedef struct tg__enable_args {
  const uint8_t *config; /* into the request's bytes */
  size_t config_len;
  bool has_config;
  bool attach_notification_only;
} tg__enable_args_t;

/* Answers |call| with success = false. */
static inline void tg__cport_fail(tg_ipc_call_t call) {
  tg_ipc_reply(&call, false, false, NULL, -1);
}

/* --- the handlers: |req| is the decoded request (a tg__enable_args_t for
 * EnableTracing) --------------------------------------------------------- */

void tg__cport_enable_tracing(tg_consumer_conn_t *c, tg_ipc_call_t call,
                              const void *req);
void tg__cport_start_tracing(tg_consumer_conn_t *c, tg_ipc_call_t call,
                             const void *req);
void tg__cport_disable_tracing(tg_consumer_conn_t *c, tg_ipc_call_t call,
                               const void *req);
void tg__cport_free_buffers(tg_consumer_conn_t *c, tg_ipc_call_t call,
                            const void *req);
void tg__cport_flush(tg_consumer_conn_t *c, tg_ipc_call_t call,
                     const void *req);
void tg__cport_change_trace_config(tg_consumer_conn_t *c, tg_ipc_call_t call,
                                   const void *req);
void tg__cport_read_buffers(tg_consumer_conn_t *c, tg_ipc_call_t call,
                            const void *req);
void tg__cport_clone_session(tg_consumer_conn_t *c, tg_ipc_call_t call,
                             const void *req);

/* consumer_port_read.c: a ReadBuffers paused on a full socket goes on. */
void tg__cport_read_resume(tg_consumer_conn_t *c);

/* consumer_port_clone.c: the flush a CloneSession waited for is over (or
 * there was none to wait for): take the snapshot and answer. |fc| stays
 * the caller's. */
void tg__cport_clone_finish(tg_consumer_conn_t *c, tg__flush_call_t *fc);

#endif /* TRACEGATE_SERVICE_CONSUMER_PORT_INTERNAL_H */
