/* The calls that return data: GetTraceStats, Attach, QueryServiceState
 * (streamed, optionally merged), QueryCapabilities, ObserveEvents. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracegate/pb_wire.h"
#include "abi/consumer_port_methods.h"
#include "consumer/consumer_internal.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "tracegate/error.h"

/* The message of a successful reply; NULL (with *|status| set to
 * TG_EPROTO_DECODE if it does not decode) otherwise. */
static ProtobufCMessage *unpack_if_ok(int *status,
                                      const ProtobufCMessageDescriptor *d,
                                      const uint8_t *reply, size_t len) {
  if (*status) return NULL;
  ProtobufCMessage *m = tg__unpack(d, reply, len);
  if (!m) *status = TG_EPROTO_DECODE;
  return m;
}

/* --- GetTraceStats --------------------------------------------------------- */

static void on_stats_reply(tg__call_t *call, int status, bool has_more,
                           const uint8_t *reply, size_t len) {
  if (has_more) return;
  char msg[TG__MSG_MAX] = "";
  Perfetto__Protos__TraceStats empty = PERFETTO__PROTOS__TRACE_STATS__INIT;
  Perfetto__Protos__GetTraceStatsResponse *r =
      (Perfetto__Protos__GetTraceStatsResponse *)unpack_if_ok(
          &status, &perfetto__protos__get_trace_stats_response__descriptor,
          reply, len);
  status = tg__failure_why(call, status,
                           "no tracing session on this connection", msg,
                           sizeof(msg));
  tg__call_end_t e = tg__call_end(call);
  e.cb.stats(e.c, e.ctx, status, msg,
             status ? NULL : r->trace_stats ? r->trace_stats : &empty);
  if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
}

int tg_consumer_get_trace_stats(tg_consumer_t *c, tg_consumer_stats_cb cb,
                                void *ctx) {
  if (!cb) return -EINVAL;
  Perfetto__Protos__GetTraceStatsRequest r =
      PERFETTO__PROTOS__GET_TRACE_STATS_REQUEST__INIT;
  return tg__call_msg(c, tg_cport_name(TG_CPORT_GetTraceStats), on_stats_reply,
                      (tg__call_cb_t){.stats = cb}, ctx, &r.base);
}

/* --- Attach ----------------------------------------------------------------- */

/* AttachResponse{trace_config = 1}: the config's bytes as sent, found with
 * the field reader (no decode/re-encode round). Returns 0 or -1. */
static int find_config(const uint8_t *reply, size_t len, const uint8_t **cfg,
                       size_t *cfg_len) {
  static const uint8_t empty[1];
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, reply ? reply : empty, reply ? len : 0);
  *cfg = empty;
  *cfg_len = 0;
  int rv;
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id != 1) continue;
    if (f.type != TG_PB_WT_LEN) return -1;
    *cfg = f.data;
    *cfg_len = f.size;
  }
  return rv < 0 ? -1 : 0;
}

static void on_attach_reply(tg__call_t *call, int status, bool has_more,
                            const uint8_t *reply, size_t len) {
  if (has_more) return;
  char msg[TG__MSG_MAX] = "";
  const uint8_t *cfg = NULL;
  size_t cfg_len = 0;
  if (status == 0 && find_config(reply, len, &cfg, &cfg_len) < 0)
    status = TG_EPROTO_DECODE;
  status = tg__failure_why(call, status,
                           "no detached session with this key for this user, "
                           "or this connection already has a session",
                           msg, sizeof(msg));
  /* |cfg| points into |reply|, valid for the whole reply callback. */
  tg__call_end_t e = tg__call_end(call);
  e.cb.attach(e.c, e.ctx, status, msg, status ? NULL : cfg,
              status ? 0 : cfg_len);
}

int tg_consumer_attach(tg_consumer_t *c, const char *key,
                       tg_consumer_attach_cb cb, void *ctx) {
  if (!cb || !key || !key[0]) return -EINVAL;
  Perfetto__Protos__AttachRequest r = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
  r.key = (char *)key;
  return tg__call_msg(c, tg_cport_name(TG_CPORT_Attach), on_attach_reply,
                      (tg__call_cb_t){.attach = cb}, ctx, &r.base);
}

/* --- QueryServiceState ---------------------------------------------------- */

static int state_deliver(tg__call_t *call, int status, const char *msg,
                          bool has_more, const uint8_t *bytes, size_t len) {
  Perfetto__Protos__QueryServiceStateResponse *r = NULL;
  Perfetto__Protos__TracingServiceState empty =
      PERFETTO__PROTOS__TRACING_SERVICE_STATE__INIT;
  char buf[TG__MSG_MAX];
  if (status == 0) {
    r = (Perfetto__Protos__QueryServiceStateResponse *)tg__unpack(
        &perfetto__protos__query_service_state_response__descriptor, bytes, len);
    if (!r) {
      status = tg__failure(call, TG_EPROTO_DECODE, NULL, buf, sizeof(buf));
      msg = buf;
      has_more = false; /* the caller cancels the rest */
    }
  }
  call->cb.state(call->c, call->ctx, status, msg, has_more,
                 status ? NULL : r->service_state ? r->service_state : &empty);
  if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
  return status;
}

static void on_state_reply(tg__call_t *call, int status, bool has_more,
                           const uint8_t *reply, size_t len) {
  static const uint8_t empty[1];
  char msg[TG__MSG_MAX] = "";
  if (status) status = tg__failure(call, status, NULL, msg, sizeof(msg));
  if (!reply) {
    reply = empty;
    len = 0;
  }
  if (call->merge) {
    /* Concatenated encodings of one message type decode as their merge:
     * repeated fields add up, which is how the replies are meant. */
    if (status == 0) {
      int err = tg_buf_append(&call->merged, reply, len);
      if (err) {
        status = err == -ENOBUFS ? TG_ENO_SPACE : err;
        snprintf(msg, sizeof(msg),
                 "the service state exceeds %u bytes", TG_CONSUMER_MAX_STATE_BYTES);
      }
    }
    if (status == 0 && has_more) return;
    if (has_more) tg__call_cancel(call);
    size_t n = tg_buf_size(&call->merged);
    state_deliver(call, status, msg, false, n ? tg_buf_begin(&call->merged) : NULL,
                  n);
    tg__call_free(call);
    return;
  }
  status = state_deliver(call, status, msg, status ? false : has_more, reply,
                         len);
  /* A reply that failed to decode ended the stream for the caller. */
  bool ended = !has_more || status;
  if (has_more && ended) tg__call_cancel(call);
  if (ended) tg__call_free(call);
}

int tg_consumer_query_service_state(tg_consumer_t *c, bool sessions_only,
                                    bool merge, tg_consumer_state_cb cb,
                                    void *ctx) {
  if (!cb) return -EINVAL;
  tg__call_t *call = tg__call_new(
      c, tg_cport_name(TG_CPORT_QueryServiceState), ctx, on_state_reply);
  if (!call) return -ENOMEM;
  call->cb.state = cb;
  call->merge = merge;
  if (merge) tg_buf_init(&call->merged, TG_CONSUMER_MAX_STATE_BYTES);
  Perfetto__Protos__QueryServiceStateRequest r =
      PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
  if (sessions_only) {
    r.has_sessions_only = 1;
    r.sessions_only = 1;
  }
  return tg__invoke_msg(call, &r.base);
}

/* --- QueryCapabilities -------------------------------------------------------- */

static void on_caps_reply(tg__call_t *call, int status, bool has_more,
                          const uint8_t *reply, size_t len) {
  if (has_more) return;
  char msg[TG__MSG_MAX] = "";
  Perfetto__Protos__TracingServiceCapabilities empty =
      PERFETTO__PROTOS__TRACING_SERVICE_CAPABILITIES__INIT;
  Perfetto__Protos__QueryCapabilitiesResponse *r =
      (Perfetto__Protos__QueryCapabilitiesResponse *)unpack_if_ok(
          &status, &perfetto__protos__query_capabilities_response__descriptor,
          reply, len);
  status = tg__failure(call, status, NULL, msg, sizeof(msg));
  tg__call_end_t e = tg__call_end(call);
  e.cb.caps(e.c, e.ctx, status, msg,
            status ? NULL : r->capabilities ? r->capabilities : &empty);
  if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
}

int tg_consumer_query_capabilities(tg_consumer_t *c, tg_consumer_caps_cb cb,
                                   void *ctx) {
  if (!cb) return -EINVAL;
  Perfetto__Protos__QueryCapabilitiesRequest r =
      PERFETTO__PROTOS__QUERY_CAPABILITIES_REQUEST__INIT;
  return tg__call_msg(c, tg_cport_name(TG_CPORT_QueryCapabilities),
                      on_caps_reply, (tg__call_cb_t){.caps = cb}, ctx,
                      &r.base);
}

/* --- ObserveEvents -------------------------------------------------------------- */

static void on_events_reply(tg__call_t *call, int status, bool has_more,
                            const uint8_t *reply, size_t len) {
  char msg[TG__MSG_MAX] = "";
  Perfetto__Protos__ObserveEventsResponse *r =
      (Perfetto__Protos__ObserveEventsResponse *)unpack_if_ok(
          &status, &perfetto__protos__observe_events_response__descriptor,
          reply, len);
  status = tg__failure(call, status, NULL, msg, sizeof(msg));
  bool ended = !has_more || status;
  call->cb.events(call->c, call->ctx, status, msg, ended ? false : has_more,
                  r ? r->events : NULL);
  if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
  if (has_more && ended) tg__call_cancel(call);
  if (ended) tg__call_free(call);
}

int tg_consumer_observe_events(
    tg_consumer_t *c, const Perfetto__Protos__ObservableEvents__Type *types,
    size_t n, tg_consumer_events_cb cb, void *ctx) {
  if (!cb || (n && !types)) return -EINVAL;
  Perfetto__Protos__ObserveEventsRequest r =
      PERFETTO__PROTOS__OBSERVE_EVENTS_REQUEST__INIT;
  r.n_events_to_observe = n;
  r.events_to_observe = (Perfetto__Protos__ObservableEvents__Type *)types;
  return tg__call_msg(c, tg_cport_name(TG_CPORT_ObserveEvents), on_events_reply,
                      (tg__call_cb_t){.events = cb}, ctx, &r.base);
}
