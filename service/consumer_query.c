/* ConsumerPort's read-only queries: QueryServiceState and
 * QueryCapabilities.
 *
 * A QueryServiceState reply is written field by field into one frame-sized
 * buffer: the service's scalars, then whole producers, sessions and data
 * sources, each a complete element of TracingServiceState's repeated
 * fields; an element that does not fit sends the reply (has_more) and
 * starts the next. Perfetto's service splits the same way (everything but
 * the data sources first, then as many data sources per reply as fit),
 * so its clients' merge of the replies gives the same state.
 */
#include <stdlib.h>
#include <string.h>

#include "abi/ipc_frame.h"
#include "common/log.h"
#include "common/version.h"
#include "pb/common/observable_events.pb-c.h"
#include "pb/common/tracing_service_capabilities.pb-c.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "service/consumer_query.h"
#include "service/ds_descriptor.h"
#include "service/producer_port.h"
#include "service/readout.h"
#include "service/session.h"
#include "tracegate/pb_wire.h"

static void fail(tg_ipc_call_t call) { tg_ipc_reply(&call, false, false, NULL, -1); }

/* Field numbers: proto/common/tracing_service_state.proto. */
enum {
  RESPONSE_SERVICE_STATE = 1,
  STATE_PRODUCERS = 1,
  STATE_DATA_SOURCES = 2,
  STATE_TRACING_SESSIONS = 6,
  DATA_SOURCE_DS_DESCRIPTOR = 1,
  DATA_SOURCE_PRODUCER_ID = 2,
};

/* Around a reply's TracingServiceState bytes, in its frame: the IPCFrame
 * (request_id with up to 10 bytes, msg_invoke_method_reply with a 3-byte
 * length, success, has_more, reply_proto with a 3-byte length) and
 * QueryServiceStateResponse.service_state's tag and 3-byte length. */
#define STATE_HEAD 4u
#define STATE_MAX (TG_IPC_FRAME_MAX_PAYLOAD - (11u + 4 + 2 + 2 + 4) - STATE_HEAD)
/* A data source element around its descriptor: tag and 3-byte length of
 * data_sources and of ds_descriptor, producer_id (tag, 3 bytes). */
#define DS_ELEMENT_MAX_OVERHEAD 12u
_Static_assert(TG_DS_DESCRIPTOR_MAX_BYTES + DS_ELEMENT_MAX_OVERHEAD <= STATE_MAX,
               "a data source with the largest descriptor fits a reply");
_Static_assert(STATE_MAX < (1u << 21), "lengths fit 3 varint bytes");

/* The reply being filled: [STATE_HEAD room][len bytes of state]. */
typedef struct reply {
  tg_ipc_call_t call;
  uint8_t *buf;
  size_t len;
  int err; /* the first failed send: the stream is over */
} reply_t;

static int reply_send(reply_t *r, bool has_more) {
  size_t head = 1 + tg_pb_varint_size(r->len);
  uint8_t *p = r->buf + STATE_HEAD - head;
  uint8_t *q = tg_pb_write_varint(p, TG_PB_TAG(RESPONSE_SERVICE_STATE, TG_PB_WT_LEN));
  tg_pb_write_varint(q, r->len);
  int rv = tg_ipc_reply_bytes(&r->call, true, has_more, p, head + r->len, -1);
  r->len = 0;
  if (rv < 0 && !r->err) r->err = rv;
  return rv;
}

/* Where the next |n| bytes of state go: the current reply, or the next one
 * after sending it with has_more. NULL once the stream failed, or for an
 * element that no reply can hold (logged, left out). */
static uint8_t *reply_room(reply_t *r, size_t n) {
  if (r->err) return NULL;
  if (n > STATE_MAX) {
    TG_WARN("QueryServiceState: an element of %zu bytes left out", n);
    return NULL;
  }
  if (r->len + n > STATE_MAX && reply_send(r, true) < 0) return NULL;
  return r->buf + STATE_HEAD + r->len;
}

/* |m| as field |field| of TracingServiceState; field 0: |m| is itself a
 * TracingServiceState whose fields are added as they are. */
static void reply_add_message(reply_t *r, uint32_t field, const ProtobufCMessage *m) {
  size_t body = protobuf_c_message_get_packed_size(m);
  uint32_t tag = TG_PB_TAG(field, TG_PB_WT_LEN);
  size_t n = field ? tg_pb_varint_size(tag) + tg_pb_varint_size(body) + body : body;
  uint8_t *p = reply_room(r, n);
  if (!p) return;
  if (field) {
    p = tg_pb_write_varint(p, tag);
    p = tg_pb_write_varint(p, body);
  }
  protobuf_c_message_pack(m, p);
  r->len += n;
}

/* data_sources { ds_descriptor = <the producer's bytes>, producer_id }:
 * its size, then the element. */
static size_t data_source_size(const tg_producer_t *p, const tg_registered_ds_t *ds,
                               size_t *body) {
  *body = 1 + tg_pb_varint_size(ds->descriptor_len) + ds->descriptor_len + 1 +
          tg_pb_varint_size(p->ident.producer_id);
  return 1 + tg_pb_varint_size(*body) + *body;
}

static void reply_add_data_source(reply_t *r, const tg_producer_t *p,
                                  const tg_registered_ds_t *ds) {
  size_t body, n = data_source_size(p, ds, &body);
  uint8_t *d = reply_room(r, n);
  if (!d) return;
  d = tg_pb_write_varint(d, TG_PB_TAG(STATE_DATA_SOURCES, TG_PB_WT_LEN));
  d = tg_pb_write_varint(d, body);
  d = tg_pb_write_varint(d, TG_PB_TAG(DATA_SOURCE_DS_DESCRIPTOR, TG_PB_WT_LEN));
  d = tg_pb_write_varint(d, ds->descriptor_len);
  memcpy(d, ds->descriptor, ds->descriptor_len);
  d += ds->descriptor_len;
  d = tg_pb_write_varint(d, TG_PB_TAG(DATA_SOURCE_PRODUCER_ID, TG_PB_WT_VARINT));
  tg_pb_write_varint(d, p->ident.producer_id);
  r->len += n;
}

static void add_scalars(tg_service_t *svc, reply_t *r) {
  int32_t started = 0;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    if (TG_CONTAINER_OF(it, tg_session_t, node)->state == TG_SESSION_STARTED)
      started++;
  }
  Perfetto__Protos__TracingServiceState st = PERFETTO__PROTOS__TRACING_SERVICE_STATE__INIT;
  st.has_supports_tracing_sessions = 1;
  st.supports_tracing_sessions = 1;
  st.has_num_sessions = 1;
  st.num_sessions = (int32_t)svc->n_sessions;
  st.has_num_sessions_started = 1;
  st.num_sessions_started = started;
  st.tracing_service_version = "tracegate " TG_VERSION;
  reply_add_message(r, 0, &st.base);
}

static void add_producers(tg_service_t *svc, reply_t *r) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->producers) {
    tg_producer_t *p = TG_CONTAINER_OF(it, tg_producer_t, node);
    Perfetto__Protos__TracingServiceState__Producer m =
        PERFETTO__PROTOS__TRACING_SERVICE_STATE__PRODUCER__INIT;
    m.has_id = 1;
    m.id = p->ident.producer_id;
    m.name = p->name;
    m.has_pid = 1;
    m.pid = p->ident.pid;
    m.has_uid = 1;
    m.uid = (int32_t)p->ident.uid;
    reply_add_message(r, STATE_PRODUCERS, &m.base);
  }
}

/* The sessions of the caller's uid (all of them for root), as Perfetto's
 * service lists them: another user's names, buffers and counters are not
 * the caller's to see. */
static void add_sessions(tg_service_t *svc, reply_t *r) {
  uid_t uid = r->call.conn->chan.peer_uid;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    if (uid != 0 && s->consumer_uid != uid) continue;
    uint32_t sizes[TG_SERVICE_MAX_BUFFERS_PER_SESSION];
    Perfetto__Protos__TracingServiceState__TracingSession t =
        PERFETTO__PROTOS__TRACING_SERVICE_STATE__TRACING_SESSION__INIT;
    t.has_id = 1;
    t.id = s->id;
    t.has_consumer_uid = 1;
    t.consumer_uid = (int32_t)s->consumer_uid;
    t.state = (char *)tg__session_state_name(s->state);
    t.unique_session_name = s->config->unique_session_name;
    t.n_buffer_size_kb = s->n_buffers;
    t.buffer_size_kb = sizes;
    for (size_t b = 0; b < s->n_buffers; b++)
      sizes[b] = (uint32_t)(tg_trace_buffer_size(s->buffers[b].tb) / 1024);
    t.has_duration_ms = s->config->has_duration_ms;
    t.duration_ms = s->config->duration_ms;
    t.has_num_data_sources = 1;
    t.num_data_sources = (uint32_t)s->config->n_data_sources;
    t.has_bugreport_score = s->config->has_bugreport_score;
    t.bugreport_score = s->config->bugreport_score;
    t.bugreport_filename = s->config->bugreport_filename;
    t.has_is_started = 1;
    t.is_started = s->state == TG_SESSION_STARTED && !s->freeing;
    /* Live counters (NULL when out of memory: the rest still answers). */
    t.trace_stats = tg__readout_stats_new(s);
    reply_add_message(r, STATE_TRACING_SESSIONS, &t.base);
    tg__readout_stats_free(t.trace_stats);
  }
}

/* Data sources from where |q| says on, in order of producer serial. Returns
 * true when all went into replies (the last one still to send), false
 * when the stream paused (the connection is congested) or failed. */
static bool add_data_sources(tg_service_t *svc, tg_state_query_t *q, reply_t *r) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->producers) {
    tg_producer_t *p = TG_CONTAINER_OF(it, tg_producer_t, node);
    if (p->serial < q->next_serial) continue;
    for (size_t k = p->serial == q->next_serial ? q->next_ds : 0; k < p->n_ds; k++) {
      size_t body, n = data_source_size(p, p->ds[k], &body);
      if (r->len && r->len + n > STATE_MAX) {
        if (reply_send(r, true) < 0) return false;
        /* Paused between replies: nothing is held for it. */
        if (tg_ipc_chan_congested(&r->call.conn->chan)) {
          q->paused = true;
          q->next_serial = p->serial;
          q->next_ds = k;
          return false;
        }
      }
      reply_add_data_source(r, p, p->ds[k]);
      if (r->err) return false;
    }
  }
  return true;
}

/* Fills and sends replies of |q| from its data sources on; the last one
 * without has_more unless it pauses. */
static void stream_rest(tg_service_t *svc, tg_state_query_t *q, reply_t *r,
                        bool data_sources) {
  q->paused = false;
  if (data_sources && !add_data_sources(svc, q, r)) return;
  if (!r->err) reply_send(r, false);
}

static uint8_t *reply_buffer(void) { return malloc(STATE_HEAD + STATE_MAX); }

void tg__consumer_query_service_state(
    tg_service_t *svc, tg_state_query_t *q, tg_ipc_call_t call,
    const Perfetto__Protos__QueryServiceStateRequest *req) {
  if (call.drop_reply) return;
  reply_t r = {.call = call, .buf = !q->paused ? reply_buffer() : NULL};
  if (!r.buf) {
    fail(call);
    return;
  }
  bool sessions_only = req->has_sessions_only && req->sessions_only;
  q->call = call;
  q->next_serial = 0;
  q->next_ds = 0;
  add_scalars(svc, &r);
  if (!sessions_only) add_producers(svc, &r);
  add_sessions(svc, &r);
  stream_rest(svc, q, &r, !sessions_only);
  free(r.buf);
}

void tg__consumer_query_resume(tg_service_t *svc, tg_state_query_t *q) {
  reply_t r = {.call = q->call, .buf = reply_buffer()};
  if (!r.buf) {
    q->paused = false;
    fail(q->call); /* ends the stream */
    return;
  }
  stream_rest(svc, q, &r, true);
  free(r.buf);
}

static const Perfetto__Protos__ObservableEvents__Type observable_types[] = {
    PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_DATA_SOURCES_INSTANCES,
    PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED,
};

void tg__consumer_query_capabilities(tg_service_t *svc, tg_ipc_call_t call) {
  (void)svc;
  Perfetto__Protos__TracingServiceCapabilities cap =
      PERFETTO__PROTOS__TRACING_SERVICE_CAPABILITIES__INIT;
  cap.has_has_query_capabilities = 1;
  cap.has_query_capabilities = 1;
  cap.n_observable_events = 2;
  cap.observable_events = (Perfetto__Protos__ObservableEvents__Type *)observable_types;
  cap.has_has_trace_config_output_path = 1;
  cap.has_trace_config_output_path = 0;
  cap.has_has_clone_session = 1;
  cap.has_clone_session = 1;
  Perfetto__Protos__QueryCapabilitiesResponse r =
      PERFETTO__PROTOS__QUERY_CAPABILITIES_RESPONSE__INIT;
  r.capabilities = &cap;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}
