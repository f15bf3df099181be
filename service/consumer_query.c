/* ConsumerPort's read-only queries: QueryServiceState and
 * QueryCapabilities. */
#include <stdlib.h>

#include "pb/common/observable_events.pb-c.h"
#include "pb/common/tracing_service_capabilities.pb-c.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "service/consumer_query.h"
#include "service/producer_port.h"
#include "service/readout.h"
#include "service/session.h"

static void fail(tg_ipc_call_t call) { tg_ipc_reply(&call, false, false, NULL, -1); }

static const char *session_state_name(enum tg_session_state st) {
  switch (st) {
    case TG_SESSION_CONFIGURED: return "CONFIGURED";
    case TG_SESSION_STARTED: return "STARTED";
    case TG_SESSION_DISABLING: return "DISABLING_WAITING_STOP_ACKS";
    default: return "DISABLED";
  }
}

void tg__consumer_query_service_state(void *ctx, tg_ipc_call_t call,
                                      const uint8_t *args, size_t len) {
  tg_service_t *svc = ctx;
  Perfetto__Protos__QueryServiceStateRequest *req =
      perfetto__protos__query_service_state_request__unpack(NULL, len, args);
  if (!req) {
    fail(call);
    return;
  }
  bool sessions_only = req->has_sessions_only && req->sessions_only;
  perfetto__protos__query_service_state_request__free_unpacked(req, NULL);

  size_t np = svc->n_producers, nd = 0, ns = svc->n_sessions;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->producers) {
    nd += TG_CONTAINER_OF(it, tg_producer_t, node)->n_ds;
  }
  Perfetto__Protos__TracingServiceState st = PERFETTO__PROTOS__TRACING_SERVICE_STATE__INIT;
  Perfetto__Protos__TracingServiceState__Producer *prod = calloc(np + 1, sizeof(*prod));
  Perfetto__Protos__TracingServiceState__Producer **pprod = calloc(np + 1, sizeof(void *));
  Perfetto__Protos__TracingServiceState__DataSource *ds = calloc(nd + 1, sizeof(*ds));
  Perfetto__Protos__TracingServiceState__DataSource **pds = calloc(nd + 1, sizeof(void *));
  Perfetto__Protos__DataSourceDescriptor *desc = calloc(nd + 1, sizeof(*desc));
  Perfetto__Protos__TracingServiceState__TracingSession *ses = calloc(ns + 1, sizeof(*ses));
  Perfetto__Protos__TracingServiceState__TracingSession **pses = calloc(ns + 1, sizeof(void *));
  uint32_t *sizes = calloc(ns * TG_SERVICE_MAX_BUFFERS_PER_SESSION + 1, sizeof(uint32_t));
  if (!prod || !pprod || !ds || !pds || !desc || !ses || !pses || !sizes) {
    fail(call);
    goto out;
  }
  size_t ip = 0, id = 0;
  if (!sessions_only) {
    tg_list_foreach_safe(it, tmp, &svc->producers) {
      tg_producer_t *p = TG_CONTAINER_OF(it, tg_producer_t, node);
      perfetto__protos__tracing_service_state__producer__init(&prod[ip]);
      prod[ip].has_id = 1;
      prod[ip].id = p->ident.producer_id;
      prod[ip].name = p->name;
      prod[ip].has_pid = 1;
      prod[ip].pid = p->ident.pid;
      prod[ip].has_uid = 1;
      prod[ip].uid = (int32_t)p->ident.uid;
      pprod[ip] = &prod[ip];
      ip++;
      for (size_t k = 0; k < p->n_ds; k++) {
        perfetto__protos__tracing_service_state__data_source__init(&ds[id]);
        perfetto__protos__data_source_descriptor__init(&desc[id]);
        desc[id].name = p->ds[k]->name;
        desc[id].has_will_notify_on_stop = 1;
        desc[id].will_notify_on_stop = p->ds[k]->will_notify_on_stop;
        desc[id].has_will_notify_on_start = 1;
        desc[id].will_notify_on_start = p->ds[k]->will_notify_on_start;
        ds[id].ds_descriptor = &desc[id];
        ds[id].has_producer_id = 1;
        ds[id].producer_id = p->ident.producer_id;
        pds[id] = &ds[id];
        id++;
      }
    }
  }
  size_t is = 0, started = 0;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    Perfetto__Protos__TracingServiceState__TracingSession *t = &ses[is];
    perfetto__protos__tracing_service_state__tracing_session__init(t);
    t->has_id = 1;
    t->id = s->id;
    t->has_consumer_uid = 1;
    t->consumer_uid = (int32_t)s->consumer_uid;
    t->state = (char *)session_state_name(s->state);
    t->unique_session_name = s->config->unique_session_name;
    t->n_buffer_size_kb = s->n_buffers;
    t->buffer_size_kb = &sizes[is * TG_SERVICE_MAX_BUFFERS_PER_SESSION];
    for (size_t b = 0; b < s->n_buffers; b++)
      t->buffer_size_kb[b] = (uint32_t)(tg_trace_buffer_size(s->buffers[b].tb) / 1024);
    t->has_duration_ms = s->config->has_duration_ms;
    t->duration_ms = s->config->duration_ms;
    t->has_num_data_sources = 1;
    t->num_data_sources = (uint32_t)s->config->n_data_sources;
    /* Live counters (NULL when out of memory: the rest still answers). */
    t->trace_stats = tg__readout_stats_new(s);
    if (s->state == TG_SESSION_STARTED) started++;
    pses[is] = t;
    is++;
  }
  st.n_producers = ip;
  st.producers = pprod;
  st.n_data_sources = id;
  st.data_sources = pds;
  st.n_tracing_sessions = is;
  st.tracing_sessions = pses;
  st.has_supports_tracing_sessions = 1;
  st.supports_tracing_sessions = 1;
  st.has_num_sessions = 1;
  st.num_sessions = (int32_t)is;
  st.has_num_sessions_started = 1;
  st.num_sessions_started = (int32_t)started;
  st.tracing_service_version = "tracegate 0.1.0";
  /* A streaming method: consumers merge the replies, so a large state goes
   * out in batches that each fit a frame (sessions with the first). */
  Perfetto__Protos__QueryServiceStateResponse r =
      PERFETTO__PROTOS__QUERY_SERVICE_STATE_RESPONSE__INIT;
  r.service_state = &st;
  enum { BATCH = 128 }; /* names <= 256 B: a batch stays far below a frame */
  size_t sent_p = 0, sent_d = 0;
  do {
    st.n_producers = ip - sent_p < BATCH ? ip - sent_p : BATCH;
    st.producers = pprod + sent_p;
    st.n_data_sources = id - sent_d < BATCH ? id - sent_d : BATCH;
    st.data_sources = pds + sent_d;
    sent_p += st.n_producers;
    sent_d += st.n_data_sources;
    bool more = sent_p < ip || sent_d < id;
    tg_ipc_reply(&call, true, more, &r.base, -1);
    st.n_tracing_sessions = 0; /* only in the first reply */
  } while (sent_p < ip || sent_d < id);
out:
  for (size_t k = 0; ses && k < ns; k++) tg__readout_stats_free(ses[k].trace_stats);
  free(prod);
  free(pprod);
  free(ds);
  free(pds);
  free(desc);
  free(ses);
  free(pses);
  free(sizes);
}

static const Perfetto__Protos__ObservableEvents__Type observable_types[] = {
    PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_DATA_SOURCES_INSTANCES,
    PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED,
};

void tg__consumer_query_capabilities(void *ctx, tg_ipc_call_t call,
                                     const uint8_t *args, size_t len) {
  (void)ctx;
  (void)args;
  (void)len;
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
