/* ConsumerPort: the consumer socket's methods, and the one dispatcher
 * that unpacks, checks and frees every request (consumer_port_internal.h
 * lists which file handles what).
 *
 * Consumers are trusted (the socket is owner/group only) but still sent
 * garbage-proof replies: every request decodes or fails explicitly. One
 * connection owns at most one session; a consumer that goes away without
 * Detach ends its session, unless it set a disconnect lease
 * (TracegateConsumer.SetDisconnectLease): then the session is detached
 * under the lease's key, as Detach{key} would, and freed only if nobody
 * attaches it before the lease runs out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "abi/consumer_port_methods.h"
#include "abi/protocol_limits.h"
#include "tracegate/pb_wire.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "common/log.h"
#include "service/consumer_port.h"
#include "service/consumer_port_internal.h"
#include "service/consumer_query.h"
#include "service/session.h"
#include "tracegate/error.h"

static tg_consumer_conn_t *consumer_of(tg_service_t *svc,
                                       tg_ipc_call_t call) {
  tg_consumer_conn_t *c = call.conn->user;
  if (c) return c;
  c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->svc = svc;
  c->conn = call.conn;
  tg_list_init(&c->flush_calls);
  tg_list_insert_tail(&svc->consumers, &c->node);
  call.conn->user = c;
  return c;
}

/* --- the dispatcher ----------------------------------------------------------- */

/* EnableTracingRequest into |out|: 0, or negative when it does not
 * decode. */
static int parse_enable_args(const uint8_t *args, size_t len, tg__enable_args_t *out) {
  memset(out, 0, sizeof(*out));
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, args, len);
  int rv;
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 1 && f.type == TG_PB_WT_LEN) {
      /* Repeated occurrences would have to be merged; nobody sends them. */
      if (out->has_config) return -1;
      out->has_config = true;
      out->config = f.data;
      out->config_len = f.size;
    } else if (f.id == 2 && f.type == TG_PB_WT_VARINT) {
      out->attach_notification_only = f.value != 0;
    }
  }
  return rv;
}

/* A method's handler: |c| is the calling connection's, |req| its request,
 * decoded, borrowed for the call (the dispatcher frees it after: a
 * handler copies what it keeps, and none keeps the request itself). */
typedef void (*consumer_handler_fn)(tg_consumer_conn_t *c, tg_ipc_call_t call,
                                    const void *req);

typedef struct consumer_method {
  /* The request's type, unpacked with protobuf-c; NULL: an
   * EnableTracingRequest, read into an enable_args_t. */
  const ProtobufCMessageDescriptor *request;
  consumer_handler_fn handle;
} consumer_method_t;

/* Every ConsumerPort call: a request that does not decode is refused
 * (success = false) before its handler sees it. */
static void dispatch(tg_service_t *svc, tg_ipc_call_t call,
                     const uint8_t *args, size_t len,
                     const consumer_method_t *m) {
  tg_consumer_conn_t *c = consumer_of(svc, call);
  if (!c) {
    tg__cport_fail(call);
    return;
  }
  if (!m->request) {
    tg__enable_args_t req;
    if (parse_enable_args(args, len, &req) < 0) {
      tg__cport_fail(call);
      return;
    }
    m->handle(c, call, &req);
    return;
  }
  ProtobufCMessage *req = protobuf_c_message_unpack(m->request, NULL, len, args);
  if (!req) {
    TG_DEBUG("consumer pid %d: a %s that does not decode; refused",
             (int)call.conn->chan.peer_pid, m->request->name);
    tg__cport_fail(call);
    return;
  }
  m->handle(c, call, req);
  protobuf_c_message_free_unpacked(req, NULL);
}

/* |entry|, the IPC host's entry for |handler|, whose request is of
 * |descriptor|'s type (NULL: EnableTracing's). */
#define CONSUMER_METHOD(entry, handler, descriptor)                        \
  static void entry(void *ctx, tg_ipc_call_t call, const uint8_t *args,   \
                    size_t len) {                                         \
    static const consumer_method_t m = {(descriptor), handler};           \
    dispatch(ctx, call, args, len, &m);                                   \
  }

/* --- detach / attach ------------------------------------------------------ */

static void m_detach(tg_consumer_conn_t *c, tg_ipc_call_t call,
                     const void *arg) {
  const Perfetto__Protos__DetachRequest *req = arg;
  bool ok = c->session && req->key && req->key[0] &&
            strlen(req->key) <= TG_DETACH_KEY_MAX;
  /* Fails when the key is taken. */
  tg_session_t *s = ok ? c->session : NULL;
  if (ok) ok = tg__session_detach(s, req->key) == 0;
  /* A Detach under the lease's own key (a relay detaching a session whose
   * client link dropped) is bounded by the same lease. */
  if (ok && c->lease_key && !strcmp(c->lease_key, req->key))
    tg__session_lease_start(s, c->lease_ms);
  if (ok) {
    /* The EnableTracing call dies with this connection. */
    if (c->enable_session == c->session) c->has_enable_call = false;
    c->session = NULL;
    c->reading = false;
  }
  Perfetto__Protos__DetachResponse r = PERFETTO__PROTOS__DETACH_RESPONSE__INIT;
  tg_ipc_reply(&call, ok, false, &r.base, -1);
}
CONSUMER_METHOD(ipc_detach, m_detach,
                &perfetto__protos__detach_request__descriptor)

static void m_attach(tg_consumer_conn_t *c, tg_ipc_call_t call,
                     const void *arg) {
  const Perfetto__Protos__AttachRequest *req = arg;
  tg_session_t *found = NULL;
  if (!c->session && req->key)
    found = tg__session_attach(c->svc, req->key, call.conn);
  if (!found) {
    tg__cport_fail(call);
    return;
  }
  c->session = found;
  Perfetto__Protos__AttachResponse r = PERFETTO__PROTOS__ATTACH_RESPONSE__INIT;
  r.trace_config = found->config;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}
CONSUMER_METHOD(ipc_attach, m_attach,
                &perfetto__protos__attach_request__descriptor)

/* --- queries --------------------------------------------------------------- */

static void m_get_trace_stats(tg_consumer_conn_t *c, tg_ipc_call_t call,
                              const void *req) {
  (void)req;
  Perfetto__Protos__TraceStats *st = c->session ? tg__readout_stats_new(c->session) : NULL;
  if (!st) {
    tg__cport_fail(call);
    return;
  }
  Perfetto__Protos__GetTraceStatsResponse r = PERFETTO__PROTOS__GET_TRACE_STATS_RESPONSE__INIT;
  r.trace_stats = st;
  tg_ipc_reply(&call, true, false, &r.base, -1);
  tg__readout_stats_free(st);
}
CONSUMER_METHOD(ipc_get_trace_stats, m_get_trace_stats,
                &perfetto__protos__get_trace_stats_request__descriptor)

static void m_observe_events(tg_consumer_conn_t *c, tg_ipc_call_t call,
                             const void *arg) {
  const Perfetto__Protos__ObserveEventsRequest *req = arg;
  if (call.drop_reply) {
    tg__cport_fail(call);
    return;
  }
  uint32_t mask = 0;
  for (size_t i = 0; i < req->n_events_to_observe; i++)
    if ((unsigned)req->events_to_observe[i] < 32) mask |= 1u << req->events_to_observe[i];
  if (c->observing) /* a new request replaces the old stream */
    tg_ipc_reply(&c->observe_call, true, false, NULL, -1);
  c->observing = mask != 0;
  c->observe_mask = mask;
  c->observe_call = call;
  if (!mask) tg_ipc_reply(&call, true, false, NULL, -1);
}
CONSUMER_METHOD(ipc_observe_events, m_observe_events,
                &perfetto__protos__observe_events_request__descriptor)

/* --- leases and the end of a connection ------------------------------------ */

/* The connection died with |c|'s session attached: detach it under the
 * lease's key if there is one. Returns true if the session was kept. */
static bool keep_under_lease(tg_consumer_conn_t *c) {
  tg_session_t *s = c->session;
  if (!c->lease_key || s->freeing) return false;
  int rv = tg__session_detach(s, c->lease_key);
  if (rv < 0) {
    TG_WARN("consumer went away: cannot keep session %llu under its "
            "disconnect lease key '%s': %s",
            (unsigned long long)s->id, c->lease_key,
            rv == -EEXIST ? "another session is detached under that key"
                          : tg_strerror(rv));
    return false;
  }
  TG_INFO("consumer went away without Detach: session %llu detached under "
          "key '%s'", (unsigned long long)s->id, c->lease_key);
  tg__session_lease_start(s, c->lease_ms);
  return true;
}

int tg__consumer_port_set_lease(tg_service_t *svc, tg_ipc_call_t call,
                                const char *key, uint64_t lease_ms) {
  if (strlen(key) > TG_DETACH_KEY_MAX) return -EINVAL;
  tg_consumer_conn_t *c = consumer_of(svc, call);
  if (!c) return -ENOMEM;
  char *copy = NULL;
  if (key[0] && !(copy = strdup(key))) return -ENOMEM;
  free(c->lease_key);
  c->lease_key = copy;
  c->lease_ms = lease_ms;
  return 0;
}

void tg__consumer_port_disconnect(void *ctx, tg_ipc_host_conn_t *conn) {
  tg_service_t *svc = ctx;
  tg_consumer_conn_t *c = conn->user;
  tg__session_consumer_gone(svc, conn);
  if (!c) return;
  conn->user = NULL;
  /* Forget every call that points at this connection: a flush completing
   * later finds no call for its cookie. */
  c->has_enable_call = false;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &c->flush_calls) {
    tg_list_remove(it);
    tg__flush_call_free(TG_CONTAINER_OF(it, tg__flush_call_t, node));
  }
  if (c->session && !keep_under_lease(c)) {
    TG_INFO("consumer went away: ending session %llu",
            (unsigned long long)c->session->id);
    tg__session_free(c->session);
  }
  tg_list_remove(&c->node);
  free(c->lease_key);
  free(c->frames);
  free(c);
}

static void m_query_service_state(tg_consumer_conn_t *c, tg_ipc_call_t call,
                                  const void *req) {
  tg__consumer_query_service_state(c->svc, &c->state_query, call, req);
}
CONSUMER_METHOD(ipc_query_service_state, m_query_service_state,
                &perfetto__protos__query_service_state_request__descriptor)

static void m_query_capabilities(tg_consumer_conn_t *c, tg_ipc_call_t call,
                                 const void *req) {
  (void)req;
  tg__consumer_query_capabilities(c->svc, call);
}
CONSUMER_METHOD(ipc_query_capabilities, m_query_capabilities,
                &perfetto__protos__query_capabilities_request__descriptor)

static void on_consumer_drain(void *ctx, tg_ipc_host_conn_t *conn) {
  tg_consumer_conn_t *c = conn->user;
  if (c) tg__cport_read_resume(c);
  /* A read-out that failed closes the connection (its user is cleared
   * only later, by the close callback): nothing more is sent on it. */
  if (c && c->state_query.paused && tg_ipc_chan_is_open(&conn->chan))
    tg__consumer_query_resume(ctx, &c->state_query);
}

/* --- the method table ------------------------------------------------------- */

/* The handlers of the other files (consumer_port_internal.h). */
CONSUMER_METHOD(ipc_enable_tracing, tg__cport_enable_tracing, NULL)
CONSUMER_METHOD(ipc_start_tracing, tg__cport_start_tracing,
                &perfetto__protos__start_tracing_request__descriptor)
CONSUMER_METHOD(ipc_disable_tracing, tg__cport_disable_tracing,
                &perfetto__protos__disable_tracing_request__descriptor)
CONSUMER_METHOD(ipc_free_buffers, tg__cport_free_buffers,
                &perfetto__protos__free_buffers_request__descriptor)
CONSUMER_METHOD(ipc_flush, tg__cport_flush,
                &perfetto__protos__flush_request__descriptor)
CONSUMER_METHOD(ipc_change_trace_config, tg__cport_change_trace_config,
                &perfetto__protos__change_trace_config_request__descriptor)
CONSUMER_METHOD(ipc_read_buffers, tg__cport_read_buffers,
                &perfetto__protos__read_buffers_request__descriptor)
CONSUMER_METHOD(ipc_clone_session, tg__cport_clone_session,
                &perfetto__protos__clone_session_request__descriptor)

/* Not supported: the host answers it with an explicit failure. */
#define ipc_save_trace_for_bugreport NULL

/* Each row's handler at its id (abi/consumer_port_methods.h): ipc_<snake>. */
static const tg_ipc_method_def_t consumer_methods[] = {
#define HANDLER(id, Name, snake, role, traffic, refusal) \
  [(id) - 1] = {#Name, ipc_##snake},
    TG_CPORT_METHODS(HANDLER)
#undef HANDLER
};
#undef ipc_save_trace_for_bugreport

void tg__consumer_port_bind(tg_service_t *svc, tg_ipc_service_def_t *def) {
  memset(def, 0, sizeof(*def));
  def->name = "ConsumerPort";
  def->methods = consumer_methods;
  def->n_methods = sizeof(consumer_methods) / sizeof(consumer_methods[0]);
  def->ctx = svc;
  def->on_disconnect = tg__consumer_port_disconnect;
  def->on_drain = on_consumer_drain;
}
