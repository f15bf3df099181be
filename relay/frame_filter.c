/* The frame checker: decode, authorize, rewrite; the calls in flight, and
 * the one place where a reply from the service is matched to its request
 * (tg_relay_filter_upstream). ConsumerPort calls are decided here;
 * TracegateRelay calls in relay/relay_calls.c, the relay's own calls in
 * relay/own_calls.c. Never does I/O, never logs, never carries out an
 * effect: the verdict names it for the caller. */
#include "relay/frame_filter.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "abi/consumer_port_methods.h"
#include "abi/ipc_frame.h"
#include "tracegate/pb_wire.h"
#include "pb/config/trace_config.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "relay/filter_internal.h"
#include "relay/session_scope.h"

#define CONSUMER_PORT "ConsumerPort"

static const char write_into_file_refusal[] =
    "write_into_file needs a file descriptor, which cannot cross the "
    "network: stream with ReadBuffers instead";

void tg_relay_filter_init(tg_relay_filter_t *f, const char *identity,
                          const tg_relay_host_info_t *host) {
  memset(f, 0, sizeof(*f));
  snprintf(f->identity, sizeof(f->identity), "%s", identity ? identity : "");
  f->host = host;
}

void tg_relay_filter_set_session_tag(tg_relay_filter_t *f, const char *tag) {
  snprintf(f->session_tag, sizeof(f->session_tag), "%s", tag ? tag : "");
}

void tg_relay_filter_set_service_instance(tg_relay_filter_t *f,
                                          const char *instance) {
  snprintf(f->service_instance, sizeof(f->service_instance), "%s",
           instance ? instance : "");
}

void tg_relay_filter_set_service_down(tg_relay_filter_t *f) {
  f->service_down = true;
}

void tg_relay_filter_set_compress(tg_relay_filter_t *f,
                                  tg_relay_compress_t policy) {
  f->compress = policy;
}

static void note_owned(void *ctx, uint64_t id) {
  tg_relay_filter_t *f = ctx;
  for (size_t i = 0; i < f->n_owned && i < TG_RELAY_FILTER_MAX_OWNED; i++)
    if (f->owned[i] == id) return;
  f->owned[f->n_owned % TG_RELAY_FILTER_MAX_OWNED] = id;
  f->n_owned++;
}

/* --- calls in flight ------------------------------------------------------ */

static bool in_flight(const tg_relay_filter_t *f, uint64_t id) {
  size_t at;
  return tg__relay_tracked(f, id, &at) != TG_TRACK_NONE;
}

/* The session left this connection: its EnableTracing will never get a
 * reply here (the service drops the call on Detach). */
static void session_left(tg_relay_filter_t *f) {
  f->session_active = false;
  for (size_t i = 0; i < f->n_tracked;) {
    if (f->tracked[i].kind == TG_TRACK_ENABLE) tg__relay_untrack(f, i);
    else i++;
  }
}

/* --- client frames: BindService ------------------------------------------- */

/* A call whose request id is still in flight: whichever of the two the
 * service answered first, its reply would be taken for the other's. Says
 * why; the caller refuses the call. */
static void reused_id(tg_relay_filter_t *f, tg_relay_verdict_t *v) {
  tg__relay_say(v, TG_N_RELAY_REQUEST_ID_REFUSED,
                "request id %" PRIu64 " is still in flight: a reply "
                "must answer exactly one call", v->request_id);
  f->stats.in_flight_reused++;
}

/* BindServiceReply{success=false}; |v->reason| says why. */
static int refuse_bind(tg_relay_filter_t *f, tg_relay_verdict_t *v,
                       tg_buf_t *out) {
  v->action = TG_RELAY_REPLY;
  v->audit = true;
  f->stats.denied++;
  return tg__relay_append_bind_refusal(v->request_id, out);
}

static int on_bind(tg_relay_filter_t *f, const tg_ipc_frame_t *fr,
                   tg_buf_t *out, tg_relay_verdict_t *v) {
  const char *name = fr->msg_bind_service->service_name;
  v->frame = TG_RELAY_FRAME_CALL;
  tg__relay_set_method(v, "BindService");
  if (in_flight(f, v->request_id)) {
    reused_id(f, v);
    return refuse_bind(f, v, out);
  }
  if (name && !strcmp(name, CONSUMER_PORT)) {
    if (TG_RELAY_OWN_REQUEST_ID(v->request_id)) {
      tg__relay_say(v, TG_N_RELAY_REQUEST_ID_REFUSED,
                    "request id %" PRIu64 " is reserved for the relay",
                    v->request_id);
      return refuse_bind(f, v, out);
    }
    if (tg__relay_track(f, v->request_id, TG_TRACK_BIND_CONSUMER) < 0) {
      tg__relay_say(v, TG_N_RELAY_TOO_MANY_CALLS,
                    "too many calls in flight (%d)",
                    TG_RELAY_FILTER_MAX_TRACKED);
      return refuse_bind(f, v, out);
    }
    v->action = TG_RELAY_FORWARD;
    v->allowed = true;
    f->stats.forwarded++;
    return tg__relay_append_bind(v->request_id, CONSUMER_PORT, out);
  }
  if (name && !strcmp(name, TG_RELAY_SERVICE_NAME)) {
    v->action = TG_RELAY_REPLY;
    v->allowed = true;
    f->stats.local++;
    return tg_relay_service_bind_reply(v->request_id, out);
  }
  /* Printable and bounded for the logs: the name is the client's. */
  char shown[49];
  size_t i = 0;
  for (; name && name[i] && i < sizeof(shown) - 1; i++)
    shown[i] = name[i] > 0x20 && name[i] < 0x7f ? name[i] : '?';
  shown[i] = 0;
  tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED,
                "no service '%s' here (ConsumerPort and TracegateRelay "
                "are)", shown);
  return refuse_bind(f, v, out);
}

/* --- client frames: ConsumerPort calls ------------------------------------ */

static const char *consumer_method(const tg_relay_filter_t *f, uint32_t id) {
  for (size_t i = 0; i < f->n_methods; i++)
    if (f->methods[i].id == id) return f->methods[i].name;
  return NULL;
}

/* EnableTracing: refuse what would need a file descriptor. Returns 1 to
 * forward, 0 when denied (|reply| filled), -1 when the args do not
 * decode. */
static int check_enable(const uint8_t *args, size_t alen,
                        Perfetto__Protos__EnableTracingResponse *reply,
                        tg_relay_verdict_t *v) {
  Perfetto__Protos__EnableTracingRequest *req =
      perfetto__protos__enable_tracing_request__unpack(NULL, alen, args);
  if (!req) return -1;
  const Perfetto__Protos__TraceConfig *c = req->trace_config;
  bool wif = c && c->has_write_into_file && c->write_into_file;
  bool path = c && c->output_path;
  perfetto__protos__enable_tracing_request__free_unpacked(req, NULL);
  if (!wif && !path) return 1;
  tg__relay_say(v, TG_N_RELAY_WRITE_INTO_FILE, "%s%s", write_into_file_refusal,
                path && !wif ? " (output_path is set)" : "");
  reply->state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
  reply->disabled = 1;
  reply->error = (char *)write_into_file_refusal;
  return 0;
}

/* Detach/Attach: "<identity>/<key>" into |args_out|. Returns the new
 * length, or -1 (with the reason in |v|). */
static int namespace_key(const tg_relay_filter_t *f, bool detach,
                         const uint8_t *args, size_t alen, uint8_t *args_out,
                         size_t cap, tg_relay_verdict_t *v) {
  char *key = NULL;
  ProtobufCMessage *msg =
      detach ? (ProtobufCMessage *)perfetto__protos__detach_request__unpack(
                   NULL, alen, args)
             : (ProtobufCMessage *)perfetto__protos__attach_request__unpack(
                   NULL, alen, args);
  if (!msg) {
    tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED, "%sRequest does not decode",
                  tg_cport_name(detach ? TG_CPORT_Detach : TG_CPORT_Attach));
    return -1;
  }
  key = detach ? ((Perfetto__Protos__DetachRequest *)msg)->key
               : ((Perfetto__Protos__AttachRequest *)msg)->key;
  const char *why = NULL;
  int rv = -1;
  char ns[TG_DETACH_KEY_MAX + 1];
  if (!tg_relay_key_valid(key, &why)) {
    tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED, "%s", why);
  } else if ((size_t)snprintf(ns, sizeof(ns), "%s/%s", f->identity, key) >=
             sizeof(ns)) {
    tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED,
                  "identity and key longer than %d characters together",
                  TG_DETACH_KEY_MAX);
  } else {
    char *old = key;
    if (detach) ((Perfetto__Protos__DetachRequest *)msg)->key = ns;
    else ((Perfetto__Protos__AttachRequest *)msg)->key = ns;
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n <= cap) {
      protobuf_c_message_pack(msg, args_out);
      rv = (int)n;
      tg__relay_say(v, TG_N_RELAY_KEY_SCOPED,
                    "key '%s' namespaced as '%s'", old, ns);
    } else {
      tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED,
                    "%sRequest too large",
                    tg_cport_name(detach ? TG_CPORT_Detach : TG_CPORT_Attach));
    }
    /* Put the unpacked string back before freeing. */
    if (detach) ((Perfetto__Protos__DetachRequest *)msg)->key = old;
    else ((Perfetto__Protos__AttachRequest *)msg)->key = old;
  }
  protobuf_c_message_free_unpacked(msg, NULL);
  return rv;
}

/* A call's request on its way to the service, rewritten (|scoped|,
 * |rewritten|) to scope it to the identity's sessions. */
typedef struct call_args {
  const uint8_t *p;
  size_t len;
  tg_buf_t scoped;
  uint8_t rewritten[TG_DETACH_KEY_MAX + 64];
} call_args_t;

static const uint8_t kEmpty[1];

/* EnableTracing, scoped to the identity. Returns 1 to forward, 0 when
 * refused with its reply made (into |out|, the result in |*rv|), -1 when
 * refused (|v| says why). */
static int scope_enable(tg_relay_filter_t *f, call_args_t *a, bool drop,
                        tg_buf_t *out, tg_relay_verdict_t *v, int *rv) {
  Perfetto__Protos__EnableTracingResponse r =
      PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
  int ok = check_enable(a->p, a->len, &r, v);
  if (ok == 0) {
    *rv = tg__relay_deny(f, v, drop, &r.base, out); /* |r| says why */
    return 0;
  }
  if (ok < 0) {
    tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED,
                  "EnableTracingRequest does not decode");
    return -1;
  }
  char fallback[64];
  snprintf(fallback, sizeof(fallback), "~relay-%s-%" PRIu32,
           f->session_tag[0] ? f->session_tag : "0", f->n_unnamed + 1);
  if (tg_relay_scope_enable(f->identity, fallback, a->p, a->len, &a->scoped,
                            v->reason, sizeof(v->reason)) < 0) {
    v->code = TG_N_RELAY_SESSION_REFUSED;
    return -1;
  }
  v->code = TG_N_RELAY_SESSION_SCOPED;
  f->n_unnamed++;
  a->p = tg_buf_size(&a->scoped) ? tg_buf_begin(&a->scoped) : kEmpty;
  a->len = tg_buf_size(&a->scoped);
  return 1;
}

/* CloneSession, of the identity's own sessions only: 1, or -1 (|v| says
 * why). */
static int scope_clone(tg_relay_filter_t *f, call_args_t *a,
                       tg_relay_verdict_t *v) {
  size_t n_owned = f->n_owned < TG_RELAY_FILTER_MAX_OWNED
                       ? f->n_owned
                       : TG_RELAY_FILTER_MAX_OWNED;
  if (tg_relay_scope_clone(f->identity, f->owned, n_owned, a->p, a->len,
                           &a->scoped, v->reason, sizeof(v->reason)) < 0) {
    v->code = TG_N_RELAY_SESSION_REFUSED;
    return -1;
  }
  v->code = TG_N_RELAY_SESSION_SCOPED;
  a->p = tg_buf_size(&a->scoped) ? tg_buf_begin(&a->scoped) : kEmpty;
  a->len = tg_buf_size(&a->scoped);
  return 1;
}

static int on_consumer_call(tg_relay_filter_t *f, tg_authz_role_t role,
                            const Perfetto__Protos__IPCFrame__InvokeMethod *im,
                            tg_buf_t *out, tg_relay_verdict_t *v) {
  bool drop = im->has_drop_reply && im->drop_reply;
  const char *name = consumer_method(f, im->method_id);
  if (!name) {
    snprintf(v->method, sizeof(v->method), "ConsumerPort.#%" PRIu32,
             im->method_id);
    tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED,
                  "unknown method id %" PRIu32, im->method_id);
    return tg__relay_deny(f, v, drop, NULL, out);
  }
  tg__relay_set_method(v, name);
  if (TG_RELAY_OWN_REQUEST_ID(v->request_id)) {
    /* Its reply would pass for the reply to one of the relay's own calls. */
    tg__relay_say(v, TG_N_RELAY_REQUEST_ID_REFUSED,
                  "request id %" PRIu64 " is reserved for the relay",
                  v->request_id);
    return tg__relay_deny_call(f, v, drop, name, out);
  }
  if (!tg_authz_allows(role, name)) {
    if (role == TG_ROLE_NONE)
      tg__relay_say(v, TG_N_RELAY_NOT_AUTHORIZED,
                    "identity is not in the authorization file");
    else
      tg__relay_say(v, TG_N_RELAY_ROLE_DENIES,
                    "role %s does not allow %s", tg_authz_role_name(role),
                    name);
    return tg__relay_deny_call(f, v, drop, name, out);
  }
  /* A method the role allows has a row (auth/authz.c reads the table). */
  const tg_cport_method_t *m = tg_cport_method_by_name(name);
  if (!m) {
    tg__relay_say(v, TG_N_RELAY_ROLE_DENIES, "no role allows %s", name);
    return tg__relay_deny_call(f, v, drop, name, out);
  }
  call_args_t a = {.p = im->has_args_proto ? im->args_proto.data : NULL,
                   .len = im->has_args_proto ? im->args_proto.len : 0};
  if (!a.p) a.p = kEmpty;
  tg_buf_init(&a.scoped, 0);
  tg_relay_track_kind_t kind = TG_TRACK_OTHER;
  int ok = 1, rv;
  switch (m->id) {
  case TG_CPORT_EnableTracing:
    ok = scope_enable(f, &a, drop, out, v, &rv);
    if (ok == 0) goto done;
    kind = TG_TRACK_ENABLE;
    break;
  case TG_CPORT_CloneSession:
    ok = scope_clone(f, &a, v);
    break;
  case TG_CPORT_QueryServiceState:
    kind = TG_TRACK_QUERY_STATE;
    break;
  case TG_CPORT_Detach:
  case TG_CPORT_Attach: {
    bool detach = m->id == TG_CPORT_Detach;
    int n = namespace_key(f, detach, a.p, a.len, a.rewritten,
                          sizeof(a.rewritten), v);
    ok = n < 0 ? -1 : 1;
    if (n >= 0) {
      a.p = a.rewritten;
      a.len = (size_t)n;
    }
    kind = detach ? TG_TRACK_DETACH : TG_TRACK_ATTACH;
    break;
  }
  case TG_CPORT_ReadBuffers:
    kind = TG_TRACK_READ_BUFFERS;
    break;
  default:
    break;
  }
  if (ok < 0) goto fail;
  /* With no reply coming there is nothing to follow. */
  if (!drop && tg__relay_track(f, v->request_id, kind) < 0) {
    tg__relay_say(v, TG_N_RELAY_TOO_MANY_CALLS, "too many calls in flight (%d)",
                  TG_RELAY_FILTER_MAX_TRACKED);
    goto fail;
  }
  if (kind == TG_TRACK_ENABLE && !drop) f->session_active = true;
  v->action = TG_RELAY_FORWARD;
  v->allowed = true;
  v->audit = m->traffic == TG_CPORT_CONTROL; /* not what is polled or read */
  f->stats.forwarded++;
  rv = tg__relay_append_invoke(v->request_id, im->service_id, im->method_id,
                               a.p, a.len, drop, out);
  goto done;
fail:
  rv = tg__relay_deny_call(f, v, drop, name, out);
done:
  tg_buf_free(&a.scoped);
  return rv;
}

static int on_invoke(tg_relay_filter_t *f, tg_authz_role_t role,
                     const tg_ipc_frame_t *fr, tg_buf_t *out,
                     tg_relay_verdict_t *v) {
  const Perfetto__Protos__IPCFrame__InvokeMethod *im = fr->msg_invoke_method;
  v->frame = TG_RELAY_FRAME_CALL;
  if (in_flight(f, v->request_id)) {
    const char *name = im->service_id == TG_RELAY_SERVICE_ID
                           ? tg_relay_service_method_name(im->method_id)
                       : f->consumer_bound && im->service_id == f->consumer_id
                           ? consumer_method(f, im->method_id)
                           : NULL;
    snprintf(v->method, sizeof(v->method), "%s%s",
             im->service_id == TG_RELAY_SERVICE_ID ? "TracegateRelay." : "",
             name ? name : "?");
    reused_id(f, v);
    return tg__relay_deny(f, v, im->has_drop_reply && im->drop_reply, NULL,
                          out);
  }
  if (im->service_id == TG_RELAY_SERVICE_ID)
    return tg__relay_answer_call(f, role, im, out, v);
  if (f->consumer_bound && im->service_id == f->consumer_id)
    return on_consumer_call(f, role, im, out, v);
  snprintf(v->method, sizeof(v->method), "service#%" PRIu32 ".#%" PRIu32,
           im->service_id, im->method_id);
  tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED,
                "service id %" PRIu32 " is not bound on this connection",
                im->service_id);
  return tg__relay_deny(f, v, im->has_drop_reply && im->drop_reply, NULL, out);
}

int tg_relay_filter_client(tg_relay_filter_t *f, tg_authz_role_t role,
                           const uint8_t *payload_untrusted, size_t len,
                           tg_buf_t *out, tg_relay_verdict_t *v) {
  memset(v, 0, sizeof(*v));
  v->action = TG_RELAY_DROP;
  f->stats.client_frames++;
  tg_ipc_frame_t *fr = tg_ipc_frame_unpack(payload_untrusted, len);
  if (!fr) {
    f->stats.undecodable++;
    v->frame = TG_RELAY_FRAME_GARBAGE;
    tg__relay_set_method(v, "-");
    tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED,
                  "a frame of %zu bytes does not decode as an IPCFrame",
                  len);
    return 0;
  }
  v->request_id = fr->request_id;
  int rv = 0;
  const char *kind = NULL;
  switch (fr->msg_case) {
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE:
      rv = on_bind(f, fr, out, v);
      break;
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD:
      rv = on_invoke(f, role, fr, out, v);
      break;
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY:
      kind = "bind_service_reply";
      break;
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY:
      kind = "invoke_method_reply";
      break;
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR:
      kind = "request_error";
      break;
    case PERFETTO__PROTOS__IPCFRAME__MSG_SET_PEER_IDENTITY:
      kind = "set_peer_identity";
      break;
    default:
      kind = fr->n_data_for_testing ? "data_for_testing" : "empty frame";
      break;
  }
  if (kind) {
    f->stats.refused_kinds++;
    tg__relay_set_method(v, kind);
    tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED,
                  "%s is not something a client may send",
                  strcmp(kind, "set_peer_identity")
                      ? kind
                      : "set_peer_identity (identity comes from the "
                        "certificate)");
    v->action = TG_RELAY_DROP;
    v->audit = true;
  }
  tg_ipc_frame_free(fr);
  return rv;
}

/* --- upstream frames ------------------------------------------------------ */

static void learn_methods(tg_relay_filter_t *f, const uint8_t *msg,
                          size_t len) {
  /* Nested messages have no unpack helper in protobuf-c. */
  Perfetto__Protos__IPCFrame__BindServiceReply *r =
      (Perfetto__Protos__IPCFrame__BindServiceReply *)protobuf_c_message_unpack(
          &perfetto__protos__ipcframe__bind_service_reply__descriptor, NULL,
          len, msg);
  if (!r) return;
  if (r->success && r->has_service_id) {
    f->consumer_bound = true;
    f->consumer_id = r->service_id;
    f->n_methods = 0;
    for (size_t i = 0; i < r->n_methods; i++) {
      const Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *m =
          r->methods[i];
      /* Names that do not fit are methods no role grants. */
      if (!m->has_id || m->id == 0 || !m->name ||
          strlen(m->name) >= TG_RELAY_FILTER_METHOD_NAME_MAX)
        continue;
      if (f->n_methods == TG_RELAY_FILTER_MAX_METHODS) break;
      f->methods[f->n_methods].id = m->id;
      memcpy(f->methods[f->n_methods].name, m->name, strlen(m->name) + 1);
      f->n_methods++;
    }
  }
  protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* IPCFrame field numbers (wire_protocol.proto). */
enum {
  F_REQUEST_ID = 2,
  F_BIND_REPLY = 4,
  F_INVOKE_REPLY = 6,
  R_SUCCESS = 1,
  R_HAS_MORE = 2,
};

/* A QueryServiceState reply with only the identity's sessions, into |out|.
 * Returns 0, -1 when it does not decode, -ENOMEM. */
static int scope_state_reply(tg_relay_filter_t *f, const uint8_t *payload,
                             size_t len, tg_buf_t *out) {
  int rv = -1;
  tg_buf_t body;
  tg_buf_init(&body, 0);
  tg_ipc_frame_t *fr = tg_ipc_frame_unpack(payload, len);
  if (!fr ||
      fr->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY)
    goto done;
  const Perfetto__Protos__IPCFrame__InvokeMethodReply *r =
      fr->msg_invoke_method_reply;
  if (tg_relay_scope_service_state(
          f->identity, r->has_reply_proto ? r->reply_proto.data : NULL,
          r->has_reply_proto ? r->reply_proto.len : 0, &body, note_owned,
          f) < 0)
    goto done;
  Perfetto__Protos__IPCFrame__InvokeMethodReply nr =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  nr.has_success = r->has_success;
  nr.success = r->success;
  nr.has_has_more = r->has_has_more;
  nr.has_more = r->has_more;
  nr.has_reply_proto = 1;
  nr.reply_proto.data = tg_buf_size(&body) ? tg_buf_begin(&body) : NULL;
  nr.reply_proto.len = tg_buf_size(&body);
  tg_ipc_frame_t nf = PERFETTO__PROTOS__IPCFRAME__INIT;
  nf.has_request_id = 1;
  nf.request_id = fr->request_id;
  nf.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  nf.msg_invoke_method_reply = &nr;
  rv = tg_ipc_frame_append(&nf, out);
done:
  tg_buf_free(&body);
  if (fr) tg_ipc_frame_free(fr);
  return rv;
}

/* The ReadBuffersResponse inside an InvokeMethodReply (reply_proto = 3). */
static void bulk_body(const uint8_t *reply, size_t len, tg_relay_effect_t *e) {
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  tg_pb_reader_init(&r, reply, len);
  while (tg_pb_reader_next(&r, &fld) == 1) {
    if (fld.id == 3 && fld.type == TG_PB_WT_LEN) {
      e->bulk.body = fld.data;
      e->bulk.len = fld.size;
    }
  }
}

/* Where a reply is matched to its request, and nowhere else: by request
 * id against the calls in flight. A frame whose id no call in flight has
 * is dropped; a call's entry goes with its final reply. */
int tg_relay_filter_upstream(tg_relay_filter_t *f, const uint8_t *payload,
                             size_t len, tg_buf_t *out,
                             tg_relay_verdict_t *v) {
  memset(v, 0, sizeof(*v));
  f->stats.upstream_frames++;
  /* The field reader, not protobuf-c: ReadBuffers replies are large and
   * only the request id and reply flags matter here. */
  uint64_t request_id = 0;
  const uint8_t *bind = NULL, *reply = NULL;
  size_t bind_len = 0, reply_len = 0;
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  int rv;
  tg_pb_reader_init(&r, payload, len);
  while ((rv = tg_pb_reader_next(&r, &fld)) == 1) {
    if (fld.id == F_REQUEST_ID && fld.type == TG_PB_WT_VARINT) {
      request_id = fld.value;
    } else if (fld.id == F_BIND_REPLY && fld.type == TG_PB_WT_LEN) {
      bind = fld.data;
      bind_len = fld.size;
      reply = NULL;
    } else if (fld.id == F_INVOKE_REPLY && fld.type == TG_PB_WT_LEN) {
      reply = fld.data;
      reply_len = fld.size;
      bind = NULL;
    }
  }
  v->request_id = request_id;
  if (rv < 0) {
    f->stats.upstream_garbage++;
    v->frame = TG_RELAY_FRAME_GARBAGE;
    v->action = TG_RELAY_DROP;
    tg__relay_say(v, TG_N_RELAY_SERVICE_GARBAGE,
                  "a frame of %zu bytes from the service does not decode",
                  len);
    return 0;
  }
  size_t at = 0;
  tg_relay_track_kind_t kind = tg__relay_tracked(f, request_id, &at);
  if (kind == TG_TRACK_NONE) {
    /* A reply to nothing the client is waiting for (or to a call whose
     * final reply came already): it may not pass for another call's. */
    f->stats.unmatched++;
    v->action = TG_RELAY_DROP;
    tg__relay_set_method(v, "reply");
    tg__relay_say(v, TG_N_RELAY_SERVICE_GARBAGE,
                  "the service answered request %" PRIu64 ", which is "
                  "not in flight", request_id);
    return 0;
  }
  /* The relay's own calls are answered to the relay alone, whatever
   * shape the answer has. */
  bool own = kind == TG_TRACK_OWN_DETACH || kind == TG_TRACK_OWN_LEASE_BIND ||
             kind == TG_TRACK_OWN_LEASE;
  bool bind_call =
      kind == TG_TRACK_BIND_CONSUMER || kind == TG_TRACK_OWN_LEASE_BIND;
  v->action = own ? TG_RELAY_DROP : TG_RELAY_FORWARD;
  if (bind && !bind_call) {
    /* A BindServiceReply to a method call: no answer of that call. */
    f->stats.unmatched++;
    v->action = TG_RELAY_DROP;
    tg__relay_set_method(v, "reply");
    tg__relay_say(v, TG_N_RELAY_SERVICE_GARBAGE,
                  "the service answered request %" PRIu64 " (a method "
                  "call) as a BindService", request_id);
    return 0;
  }
  if (bind_call) {
    /* Its one reply: a BindServiceReply, or a RequestError (bind NULL:
     * the lease then stays unsupported, and says so). */
    tg__relay_untrack(f, at);
    if (kind == TG_TRACK_BIND_CONSUMER && bind)
      learn_methods(f, bind, bind_len);
    else if (kind == TG_TRACK_OWN_LEASE_BIND)
      tg__relay_lease_bind_reply(f, bind, bind ? bind_len : 0, v);
    return 0;
  }
  /* No InvokeMethodReply: a RequestError, the call's failed end. */
  static const uint8_t no_reply[1];
  if (!reply) reply_len = 0;
  bool success = false, more = false;
  tg_pb_reader_init(&r, reply ? reply : no_reply, reply_len);
  while (tg_pb_reader_next(&r, &fld) == 1) {
    if (fld.type != TG_PB_WT_VARINT) continue;
    /* As protobuf-c reads them, as the client will (ipc/client.c). */
    if (fld.id == R_SUCCESS) success = tg_pb_reader_bool(&r);
    else if (fld.id == R_HAS_MORE) more = tg_pb_reader_bool(&r);
  }
  switch (kind) {
    case TG_TRACK_READ_BUFFERS:
      if (!reply) break;
      v->effect.kind = TG_RELAY_EFFECT_BULK;
      v->effect.bulk.last = !more;
      bulk_body(reply, reply_len, &v->effect);
      break;
    case TG_TRACK_QUERY_STATE: {
      if (!reply) break; /* an error names no session */
      int srv = scope_state_reply(f, payload, len, out);
      if (srv == -ENOMEM) return srv;
      if (srv < 0) {
        /* Unfiltered, it could show other identities' sessions. */
        f->stats.upstream_garbage++;
        v->frame = TG_RELAY_FRAME_GARBAGE;
        v->action = TG_RELAY_DROP;
        tg__relay_say(v, TG_N_RELAY_SERVICE_GARBAGE,
                      "a QueryServiceState reply from the service does "
                      "not decode");
      }
      break;
    }
    case TG_TRACK_ENABLE:
      /* The final reply: tracing has ended (or never started). */
      if (!more) f->session_active = false;
      break;
    case TG_TRACK_ATTACH:
      if (success) f->session_active = true;
      break;
    case TG_TRACK_DETACH:
      if (success) session_left(f);
      break;
    case TG_TRACK_OWN_LEASE:
      tg__relay_lease_reply(f, reply ? reply : no_reply, reply_len, success,
                            v);
      break;
    case TG_TRACK_OWN_DETACH:
      v->effect.kind = TG_RELAY_EFFECT_OWN_DETACH_REPLY;
      v->allowed = success;
      v->action = TG_RELAY_DROP; /* the client is gone; nobody asked */
      if (success) session_left(f);
      break;
    default:
      break;
  }
  /* session_left() may have reordered the table: find the entry again. */
  if (!more && tg__relay_tracked(f, request_id, &at) == kind)
    tg__relay_untrack(f, at);
  return 0;
}
