/* What the frame checker writes: the frames it builds (replies, refusals,
 * the canonical forms of forwarded calls) and a verdict's words. Encoders
 * only: never decides, never reads a frame. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "abi/consumer_port_methods.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "common/notice.h"
#include "relay/filter_internal.h"
#include "tracegate/error.h"

void tg__relay_say(tg_relay_verdict_t *v, tg_notice_t code, const char *fmt,
                   ...) {
  v->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
  va_end(ap);
}

void tg__relay_set_method(tg_relay_verdict_t *v, const char *method) {
  snprintf(v->method, sizeof(v->method), "%s", method);
}

/* A frame that answers or forwards |request_id|; the caller sets its
 * message. */
static tg_ipc_frame_t frame_for(uint64_t request_id) {
  tg_ipc_frame_t fr = PERFETTO__PROTOS__IPCFRAME__INIT;
  fr.has_request_id = 1;
  fr.request_id = request_id;
  return fr;
}

int tg__relay_append_reply_bytes(uint64_t request_id, bool success,
                                 const uint8_t *body, size_t blen,
                                 tg_buf_t *out) {
  Perfetto__Protos__IPCFrame__InvokeMethodReply r =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  r.has_success = 1;
  r.success = success;
  r.has_reply_proto = 1;
  r.reply_proto.data = (uint8_t *)body;
  r.reply_proto.len = blen;
  tg_ipc_frame_t fr = frame_for(request_id);
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  fr.msg_invoke_method_reply = &r;
  return tg_ipc_frame_append(&fr, out);
}

int tg__relay_append_reply(uint64_t request_id, bool success,
                           const ProtobufCMessage *reply, tg_buf_t *out) {
  uint8_t body[1024];
  size_t blen = 0;
  if (reply) {
    blen = protobuf_c_message_get_packed_size(reply);
    if (blen > sizeof(body)) return TG_EFRAME_TOO_LARGE;
    protobuf_c_message_pack(reply, body);
  }
  return tg__relay_append_reply_bytes(request_id, success, body, blen, out);
}

int tg__relay_append_bind(uint64_t request_id, const char *service_name,
                          tg_buf_t *out) {
  Perfetto__Protos__IPCFrame__BindService b =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  b.service_name = (char *)service_name;
  tg_ipc_frame_t fr = frame_for(request_id);
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  fr.msg_bind_service = &b;
  return tg_ipc_frame_append(&fr, out);
}

int tg__relay_append_bind_refusal(uint64_t request_id, tg_buf_t *out) {
  Perfetto__Protos__IPCFrame__BindServiceReply r =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
  r.has_success = 1;
  r.success = 0;
  tg_ipc_frame_t fr = frame_for(request_id);
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
  fr.msg_bind_service_reply = &r;
  return tg_ipc_frame_append(&fr, out);
}

int tg__relay_append_invoke(uint64_t request_id, uint32_t service_id,
                            uint32_t method_id, const uint8_t *args,
                            size_t alen, bool drop_reply, tg_buf_t *out) {
  Perfetto__Protos__IPCFrame__InvokeMethod m =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  m.has_service_id = m.has_method_id = m.has_args_proto = 1;
  m.service_id = service_id;
  m.method_id = method_id;
  m.args_proto.data = (uint8_t *)args;
  m.args_proto.len = alen;
  if (drop_reply) m.has_drop_reply = m.drop_reply = 1;
  tg_ipc_frame_t fr = frame_for(request_id);
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
  fr.msg_invoke_method = &m;
  return tg_ipc_frame_append(&fr, out);
}

int tg__relay_deny(tg_relay_filter_t *f, tg_relay_verdict_t *v,
                   bool drop_reply, const ProtobufCMessage *reply,
                   tg_buf_t *out) {
  f->stats.denied++;
  v->action = TG_RELAY_REPLY;
  v->allowed = false;
  v->audit = true;
  if (drop_reply) return 0;
  return tg__relay_append_reply(v->request_id, false, reply, out);
}

/* The response carries the reason where the method has a field for one
 * (its row's refusal, abi/consumer_port_methods.h), so that a client can
 * print why. The reason names only the caller's own identity, role and
 * request. */
int tg__relay_deny_call(tg_relay_filter_t *f, tg_relay_verdict_t *v,
                        bool drop_reply, const char *method, tg_buf_t *out) {
  char text[sizeof(v->reason) + 32];
  snprintf(text, sizeof(text), "%s refused by the relay: %s",
           TG_NOTE(RELAY_CALL_DENIED), v->reason[0] ? v->reason : "denied");
  const tg_cport_method_t *m = tg_cport_method_by_name(method);
  switch (m ? m->refusal : TG_CPORT_REFUSE_NOTE) {
  case TG_CPORT_REFUSE_DISABLED: {
    Perfetto__Protos__EnableTracingResponse r =
        PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
    r.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
    r.disabled = 1;
    r.error = text;
    return tg__relay_deny(f, v, drop_reply, &r.base, out);
  }
  case TG_CPORT_REFUSE_ERROR: {
    Perfetto__Protos__CloneSessionResponse r =
        PERFETTO__PROTOS__CLONE_SESSION_RESPONSE__INIT;
    r.has_success = 1;
    r.error = text;
    return tg__relay_deny(f, v, drop_reply, &r.base, out);
  }
  case TG_CPORT_REFUSE_MSG: {
    Perfetto__Protos__SaveTraceForBugreportResponse r =
        PERFETTO__PROTOS__SAVE_TRACE_FOR_BUGREPORT_RESPONSE__INIT;
    r.has_success = 1;
    r.msg = text;
    return tg__relay_deny(f, v, drop_reply, &r.base, out);
  }
  case TG_CPORT_REFUSE_NOTE:
    break;
  }
  if (!drop_reply) {
    /* The reply has no field for the reason: a RequestError addressed to
     * no request (id 0, which no client uses) carries it just before, for
     * tracegate's client to print with the refusal; Perfetto's client
     * drops it as unmatched. */
    int rv = tg_ipc_request_error_append(0, text, out);
    if (rv < 0) return rv;
  }
  return tg__relay_deny(f, v, drop_reply, NULL, out);
}
