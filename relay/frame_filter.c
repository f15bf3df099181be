/* The frame checker: decode, authorize, rewrite, track. No I/O. */
#include "relay/frame_filter.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "abi/ipc_frame.h"
#include "tracegate/pb_wire.h"
#include "pb/config/trace_config.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/tracegate/consumer_lease.pb-c.h"
#include "pb/tracegate/relay.pb-c.h"
#include "relay/session_scope.h"
#include "tracegate/error.h"

#define CONSUMER_PORT "ConsumerPort"

static const char write_into_file_refusal[] =
    "write_into_file needs a file descriptor, which cannot cross the "
    "network: stream with ReadBuffers instead";

static void say(tg_relay_verdict_t *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(tg_relay_verdict_t *v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
  va_end(ap);
}

static void set_method(tg_relay_verdict_t *v, const char *m) {
  snprintf(v->method, sizeof(v->method), "%s", m);
}

void tg_relay_filter_init(tg_relay_filter_t *f, const char *identity,
                          const tg_relay_host_info_t *host) {
  memset(f, 0, sizeof(*f));
  snprintf(f->identity, sizeof(f->identity), "%s", identity ? identity : "");
  f->host = host;
}

void tg_relay_filter_set_session_tag(tg_relay_filter_t *f, const char *tag) {
  snprintf(f->session_tag, sizeof(f->session_tag), "%s", tag ? tag : "");
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

/* --- calls in flight ------------------------------------------------------- */

/* One entry per call whose reply is still to come, keyed by request id,
 * which is unique in the table: callers check in_flight() before track()
 * for client calls, and the relay's own ids are reserved. */

static int track(tg_relay_filter_t *f, uint64_t id, tg_relay_track_kind_t k) {
  if (f->n_tracked == TG_RELAY_FILTER_MAX_TRACKED) return -ENOSPC;
  f->tracked[f->n_tracked].request_id = id;
  f->tracked[f->n_tracked].kind = k;
  f->n_tracked++;
  return 0;
}

static tg_relay_track_kind_t tracked_kind(const tg_relay_filter_t *f,
                                          uint64_t id, size_t *at) {
  for (size_t i = 0; i < f->n_tracked; i++)
    if (f->tracked[i].request_id == id) {
      *at = i;
      return f->tracked[i].kind;
    }
  return TG_TRACK_NONE;
}

static bool in_flight(const tg_relay_filter_t *f, uint64_t id) {
  size_t at;
  return tracked_kind(f, id, &at) != TG_TRACK_NONE;
}

static void untrack(tg_relay_filter_t *f, size_t at) {
  f->tracked[at] = f->tracked[--f->n_tracked];
}

/* The session left this connection: its EnableTracing will never get a
 * reply here (the service drops the call on Detach). */
static void session_left(tg_relay_filter_t *f) {
  f->session_active = false;
  for (size_t i = 0; i < f->n_tracked;) {
    if (f->tracked[i].kind == TG_TRACK_ENABLE) untrack(f, i);
    else i++;
  }
}

/* --- building frames ------------------------------------------------------ */

/* A frame that answers or forwards |request_id|; the caller sets its
 * message. */
static tg_ipc_frame_t frame_for(uint64_t request_id) {
  tg_ipc_frame_t fr = PERFETTO__PROTOS__IPCFRAME__INIT;
  fr.has_request_id = 1;
  fr.request_id = request_id;
  return fr;
}

/* An InvokeMethodReply whose reply_proto is already serialised. */
static int append_invoke_reply_bytes(uint64_t request_id, bool success,
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

/* The same with |reply| (may be NULL: empty) serialised here. */
static int append_invoke_reply(uint64_t request_id, bool success,
                               const ProtobufCMessage *reply, tg_buf_t *out) {
  uint8_t body[1024];
  size_t blen = 0;
  if (reply) {
    blen = protobuf_c_message_get_packed_size(reply);
    if (blen > sizeof(body)) return TG_EFRAME_TOO_LARGE;
    protobuf_c_message_pack(reply, body);
  }
  return append_invoke_reply_bytes(request_id, success, body, blen, out);
}

static int append_bind_refusal(uint64_t request_id, tg_buf_t *out) {
  Perfetto__Protos__IPCFrame__BindServiceReply r =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
  r.has_success = 1;
  r.success = 0;
  tg_ipc_frame_t fr = frame_for(request_id);
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
  fr.msg_bind_service_reply = &r;
  return tg_ipc_frame_append(&fr, out);
}

/* The canonical forwarded call: only the fields we checked. */
static int append_invoke(uint64_t request_id, uint32_t service_id,
                         uint32_t method_id, const uint8_t *args, size_t alen,
                         bool drop_reply, tg_buf_t *out) {
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

/* IPCFrame{request_id 0, RequestError{|text|}}. */
static int append_notice(const char *text, tg_buf_t *out) {
  Perfetto__Protos__IPCFrame__RequestError e =
      PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;
  e.error = (char *)text;
  tg_ipc_frame_t fr = frame_for(0);
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR;
  fr.msg_request_error = &e;
  return tg_ipc_frame_append(&fr, out);
}

/* A denial: InvokeMethodReply{success=false}, unless no reply was asked
 * for. |reply| (may be NULL) is the method's response message carrying the
 * reason where it has a field for one. */
static int deny(tg_relay_filter_t *f, tg_relay_verdict_t *v, bool drop_reply,
                const ProtobufCMessage *reply, tg_buf_t *out) {
  f->stats.denied++;
  v->action = TG_RELAY_REPLY;
  v->allowed = false;
  v->audit = true;
  if (drop_reply) return 0;
  return append_invoke_reply(v->request_id, false, reply, out);
}

/* A denied ConsumerPort call (or TracegateRelay.SetCompression), answered
 * with the method's own response carrying the reason where it has a field
 * for one (EnableTracing, CloneSession, SaveTraceForBugreport), so that a
 * client can print why. The reason names only the caller's own identity,
 * role and request. */
static int deny_call(tg_relay_filter_t *f, tg_relay_verdict_t *v,
                     bool drop_reply, const char *method, tg_buf_t *out) {
  char text[sizeof(v->reason) + 32];
  snprintf(text, sizeof(text), "refused by the relay: %s",
           v->reason[0] ? v->reason : "denied");
  if (!strcmp(method, "EnableTracing")) {
    Perfetto__Protos__EnableTracingResponse r =
        PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
    r.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
    r.disabled = 1;
    r.error = text;
    return deny(f, v, drop_reply, &r.base, out);
  }
  if (!strcmp(method, "CloneSession")) {
    Perfetto__Protos__CloneSessionResponse r =
        PERFETTO__PROTOS__CLONE_SESSION_RESPONSE__INIT;
    r.has_success = 1;
    r.error = text;
    return deny(f, v, drop_reply, &r.base, out);
  }
  if (!strcmp(method, "SaveTraceForBugreport")) {
    Perfetto__Protos__SaveTraceForBugreportResponse r =
        PERFETTO__PROTOS__SAVE_TRACE_FOR_BUGREPORT_RESPONSE__INIT;
    r.has_success = 1;
    r.msg = text;
    return deny(f, v, drop_reply, &r.base, out);
  }
  if (!drop_reply) {
    /* The reply has no field for the reason: a RequestError addressed to
     * no request (id 0, which no client uses) carries it just before, for
     * tracegate's client to print with the refusal; Perfetto's client
     * drops it as unmatched. */
    int rv = append_notice(text, out);
    if (rv < 0) return rv;
  }
  return deny(f, v, drop_reply, NULL, out);
}

/* --- client frames: BindService ------------------------------------------- */

/* A call whose request id is still in flight: whichever of the two the
 * service answered first, its reply would be taken for the other's. Says
 * why; the caller refuses the call. */
static void reused_id(tg_relay_filter_t *f, tg_relay_verdict_t *v) {
  say(v, "request id %" PRIu64 " is still in flight: a reply must answer "
      "exactly one call", v->request_id);
  f->stats.in_flight_reused++;
}

static int on_bind(tg_relay_filter_t *f, const tg_ipc_frame_t *fr,
                   tg_buf_t *out, tg_relay_verdict_t *v) {
  const char *name = fr->msg_bind_service->service_name;
  v->call = true;
  set_method(v, "BindService");
  if (in_flight(f, v->request_id)) {
    reused_id(f, v);
    v->action = TG_RELAY_REPLY;
    v->audit = true;
    f->stats.denied++;
    return append_bind_refusal(v->request_id, out);
  }
  if (name && !strcmp(name, CONSUMER_PORT)) {
    if (TG_RELAY_OWN_REQUEST_ID(v->request_id)) {
      say(v, "request id %" PRIu64 " is reserved for the relay",
          v->request_id);
      v->action = TG_RELAY_REPLY;
      v->audit = true;
      f->stats.denied++;
      return append_bind_refusal(v->request_id, out);
    }
    if (track(f, v->request_id, TG_TRACK_BIND_CONSUMER) < 0) {
      say(v, "too many calls in flight (%d)", TG_RELAY_FILTER_MAX_TRACKED);
      v->action = TG_RELAY_REPLY;
      v->audit = true;
      f->stats.denied++;
      return append_bind_refusal(v->request_id, out);
    }
    Perfetto__Protos__IPCFrame__BindService b =
        PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
    b.service_name = (char *)CONSUMER_PORT;
    tg_ipc_frame_t c = frame_for(v->request_id);
    c.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
    c.msg_bind_service = &b;
    v->action = TG_RELAY_FORWARD;
    v->allowed = true;
    f->stats.forwarded++;
    return tg_ipc_frame_append(&c, out);
  }
  v->action = TG_RELAY_REPLY;
  if (name && !strcmp(name, TG_RELAY_SERVICE_NAME)) {
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
  say(v, "no service '%s' here (ConsumerPort and TracegateRelay are)",
      shown);
  v->audit = true;
  f->stats.denied++;
  return append_bind_refusal(v->request_id, out);
}

/* --- client frames: TracegateRelay calls ---------------------------------- */

static int on_relay_call(tg_relay_filter_t *f, tg_authz_role_t role,
                         const Perfetto__Protos__IPCFrame__InvokeMethod *im,
                         tg_buf_t *out, tg_relay_verdict_t *v) {
  const char *name = tg_relay_service_method_name(im->method_id);
  bool drop = im->has_drop_reply && im->drop_reply;
  if (!name) {
    set_method(v, "TracegateRelay.?");
    say(v, "TracegateRelay has no method id %" PRIu32, im->method_id);
    return deny(f, v, drop, NULL, out);
  }
  snprintf(v->method, sizeof(v->method), "TracegateRelay.%s", name);
  if (role == TG_ROLE_NONE) {
    say(v, "identity is not in the authorization file");
    return deny(f, v, drop, NULL, out);
  }
  const uint8_t *args = im->has_args_proto ? im->args_proto.data : NULL;
  size_t alen = im->has_args_proto ? im->args_proto.len : 0;
  tg_buf_t body;
  tg_buf_init(&body, 4096);
  int rv = 0;
  bool ok = true;
  switch (im->method_id) {
    case TG_RELAY_M_GET_HOST_INFO:
      if (f->host) rv = tg_relay_service_host_info(f->host, &body);
      else ok = false;
      v->audit = true;
      break;
    case TG_RELAY_M_CLOCK_SYNC:
      rv = tg_relay_service_clock_sync(&body);
      break;
    case TG_RELAY_M_SET_SESSION_KEY: {
      const char *why = "";
      char key[TG_RELAY_SESSION_KEY_MAX + 1];
      if (tg_relay_service_parse_session_key(args, alen, key, sizeof(key),
                                             &why) < 0 ||
          strlen(f->identity) + 1 + strlen(key) > TG_DETACH_KEY_MAX) {
        say(v, "%s", why[0] ? why : "identity and key too long together");
        tg_buf_free(&body);
        return deny(f, v, drop, NULL, out);
      }
      memcpy(f->session_key, key, strlen(key) + 1);
      say(v, "resume key '%s/%s'", f->identity, key);
      v->audit = true;
      v->session_key_set = true;
      break;
    }
    case TG_RELAY_M_ACK:
    case TG_RELAY_M_RESUME: {
      bool resume = im->method_id == TG_RELAY_M_RESUME;
      uint64_t seq = 0, cum = 0;
      bool ok_args = true;
      if (resume) {
        Perfetto__Protos__ResumeRequest *req =
            perfetto__protos__resume_request__unpack(NULL, alen, args);
        if (req) {
          seq = req->last_seq;
          cum = req->cum;
          perfetto__protos__resume_request__free_unpacked(req, NULL);
        }
        ok_args = req != NULL;
      } else {
        Perfetto__Protos__ReplayAckRequest *req =
            perfetto__protos__replay_ack_request__unpack(NULL, alen, args);
        if (req) {
          seq = req->seq;
          perfetto__protos__replay_ack_request__free_unpacked(req, NULL);
        }
        ok_args = req != NULL;
      }
      /* What Resume sends again is trace data: ReadBuffers' role. */
      bool may_read = tg_authz_allows(role, "ReadBuffers");
      if (!ok_args || !may_read || !f->session_key[0] || (resume && drop)) {
        say(v, "%s", !ok_args ? "the request does not decode"
                     : !may_read ? "the role does not allow ReadBuffers"
                     : !f->session_key[0] ? "no session key on this connection"
                                          : "Resume needs its reply");
        tg_buf_free(&body);
        return deny(f, v, drop, NULL, out);
      }
      v->replay = resume ? TG_REPLAY_RESUME : TG_REPLAY_ACK;
      v->replay_seq = seq;
      v->replay_cum = cum;
      if (resume) {
        /* The caller streams the answer from the window. */
        say(v, "resume after frame %" PRIu64, seq);
        v->audit = true;
        v->action = TG_RELAY_REPLY;
        v->allowed = true;
        f->stats.local++;
        tg_buf_free(&body);
        return 0;
      }
      break;
    }
    case TG_RELAY_M_SET_COMPRESSION: {
      const char *why = "";
      if (f->compress == TG_RELAY_COMPRESS_NEVER || drop ||
          f->compression_granted ||
          tg_relay_service_compression(args, alen, &v->compression_level,
                                       &v->compression_window_log, &body,
                                       &why) < 0) {
        /* Without a reply the client would never know when to switch. */
        say(v, "%s", f->compress == TG_RELAY_COMPRESS_NEVER
                         ? "compression refused by this relay (--compress "
                           "never)"
                     : drop ? "SetCompression wants its reply"
                     : f->compression_granted ? "compression is already on"
                                              : why);
        tg_buf_free(&body);
        /* The reply has no field for the reason: the notice carries it. */
        return deny_call(f, v, drop, name, out);
      }
      f->compression_granted = true;
      v->start_compression = true;
      say(v, "zstd level %d, window 2^%d", v->compression_level,
          v->compression_window_log);
      v->audit = true;
      break;
    }
  }
  if (rv < 0 || !ok) {
    say(v, "%s", rv < 0 ? tg_strerror(rv) : "host facts unavailable");
    tg_buf_free(&body);
    return deny(f, v, drop, NULL, out);
  }
  v->action = TG_RELAY_REPLY;
  v->allowed = true;
  f->stats.local++;
  if (!drop)
    rv = append_invoke_reply_bytes(
        v->request_id, true, tg_buf_size(&body) ? tg_buf_begin(&body) : NULL,
        tg_buf_size(&body), out);
  tg_buf_free(&body);
  return rv;
}

/* --- client frames: ConsumerPort calls ------------------------------------ */

static const char *consumer_method(const tg_relay_filter_t *f, uint32_t id) {
  for (size_t i = 0; i < f->n_methods; i++)
    if (f->methods[i].id == id) return f->methods[i].name;
  return NULL;
}

static uint32_t consumer_method_id(const tg_relay_filter_t *f,
                                   const char *name) {
  for (size_t i = 0; i < f->n_methods; i++)
    if (!strcmp(f->methods[i].name, name)) return f->methods[i].id;
  return 0;
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
  say(v, "%s%s", write_into_file_refusal,
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
    say(v, "%sRequest does not decode", detach ? "Detach" : "Attach");
    return -1;
  }
  key = detach ? ((Perfetto__Protos__DetachRequest *)msg)->key
               : ((Perfetto__Protos__AttachRequest *)msg)->key;
  const char *why = NULL;
  int rv = -1;
  char ns[TG_DETACH_KEY_MAX + 1];
  if (!tg_relay_key_valid(key, &why)) {
    say(v, "%s", why);
  } else if ((size_t)snprintf(ns, sizeof(ns), "%s/%s", f->identity, key) >=
             sizeof(ns)) {
    say(v, "identity and key longer than %d characters together",
        TG_DETACH_KEY_MAX);
  } else {
    char *old = key;
    if (detach) ((Perfetto__Protos__DetachRequest *)msg)->key = ns;
    else ((Perfetto__Protos__AttachRequest *)msg)->key = ns;
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n <= cap) {
      protobuf_c_message_pack(msg, args_out);
      rv = (int)n;
      say(v, "key '%s' namespaced as '%s'", old, ns);
    } else {
      say(v, "%sRequest too large", detach ? "Detach" : "Attach");
    }
    /* Put the unpacked string back before freeing. */
    if (detach) ((Perfetto__Protos__DetachRequest *)msg)->key = old;
    else ((Perfetto__Protos__AttachRequest *)msg)->key = old;
  }
  protobuf_c_message_free_unpacked(msg, NULL);
  return rv;
}

static bool chatty(const char *method) {
  return !strcmp(method, "ReadBuffers") || !strcmp(method, "GetTraceStats") ||
         !strcmp(method, "QueryServiceState");
}

static int on_consumer_call(tg_relay_filter_t *f, tg_authz_role_t role,
                            const Perfetto__Protos__IPCFrame__InvokeMethod *im,
                            tg_buf_t *out, tg_relay_verdict_t *v) {
  bool drop = im->has_drop_reply && im->drop_reply;
  const char *name = consumer_method(f, im->method_id);
  if (!name) {
    snprintf(v->method, sizeof(v->method), "ConsumerPort.#%" PRIu32,
             im->method_id);
    say(v, "unknown method id %" PRIu32, im->method_id);
    return deny(f, v, drop, NULL, out);
  }
  set_method(v, name);
  if (TG_RELAY_OWN_REQUEST_ID(v->request_id)) {
    /* Its reply would pass for the reply to one of the relay's own calls. */
    say(v, "request id %" PRIu64 " is reserved for the relay",
        v->request_id);
    return deny_call(f, v, drop, name, out);
  }
  if (!tg_authz_allows(role, name)) {
    if (role == TG_ROLE_NONE)
      say(v, "identity is not in the authorization file");
    else
      say(v, "role %s does not allow %s", tg_authz_role_name(role), name);
    return deny_call(f, v, drop, name, out);
  }
  const uint8_t *args = im->has_args_proto ? im->args_proto.data : NULL;
  size_t alen = im->has_args_proto ? im->args_proto.len : 0;
  static const uint8_t empty[1];
  if (!args) args = empty;

  tg_relay_track_kind_t kind = TG_TRACK_OTHER;
  uint8_t rewritten[TG_DETACH_KEY_MAX + 64];
  /* Requests rewritten to scope them to the identity's sessions. */
  tg_buf_t scoped;
  tg_buf_init(&scoped, 0);
  int rv;
  if (!strcmp(name, "EnableTracing")) {
    Perfetto__Protos__EnableTracingResponse r =
        PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
    int ok = check_enable(args, alen, &r, v);
    if (ok < 0) {
      say(v, "EnableTracingRequest does not decode");
      return deny_call(f, v, drop, name, out);
    }
    if (ok == 0) return deny(f, v, drop, &r.base, out);
    char fallback[64];
    snprintf(fallback, sizeof(fallback), "~relay-%s-%" PRIu32,
             f->session_tag[0] ? f->session_tag : "0", f->n_unnamed + 1);
    if (tg_relay_scope_enable(f->identity, fallback, args, alen, &scoped,
                              v->reason, sizeof(v->reason)) < 0) {
      tg_buf_free(&scoped);
      return deny_call(f, v, drop, name, out);
    }
    f->n_unnamed++;
    args = tg_buf_size(&scoped) ? tg_buf_begin(&scoped) : empty;
    alen = tg_buf_size(&scoped);
    kind = TG_TRACK_ENABLE;
  } else if (!strcmp(name, "CloneSession")) {
    size_t n_owned = f->n_owned < TG_RELAY_FILTER_MAX_OWNED
                         ? f->n_owned
                         : TG_RELAY_FILTER_MAX_OWNED;
    if (tg_relay_scope_clone(f->identity, f->owned, n_owned, args, alen,
                             &scoped, v->reason, sizeof(v->reason)) < 0) {
      tg_buf_free(&scoped);
      return deny_call(f, v, drop, name, out);
    }
    args = tg_buf_size(&scoped) ? tg_buf_begin(&scoped) : empty;
    alen = tg_buf_size(&scoped);
  } else if (!strcmp(name, "QueryServiceState")) {
    kind = TG_TRACK_QUERY_STATE;
  } else if (!strcmp(name, "Detach") || !strcmp(name, "Attach")) {
    bool detach = name[0] == 'D';
    int n = namespace_key(f, detach, args, alen, rewritten, sizeof(rewritten),
                          v);
    if (n < 0) return deny_call(f, v, drop, name, out);
    args = rewritten;
    alen = (size_t)n;
    kind = detach ? TG_TRACK_DETACH : TG_TRACK_ATTACH;
  } else if (!strcmp(name, "ReadBuffers")) {
    kind = TG_TRACK_READ_BUFFERS;
  }
  /* With no reply coming there is nothing to follow. */
  if (!drop && track(f, v->request_id, kind) < 0) {
    tg_buf_free(&scoped);
    say(v, "too many calls in flight (%d)", TG_RELAY_FILTER_MAX_TRACKED);
    return deny_call(f, v, drop, name, out);
  }
  if (kind == TG_TRACK_ENABLE && !drop) f->session_active = true;
  v->action = TG_RELAY_FORWARD;
  v->allowed = true;
  v->audit = !chatty(name);
  f->stats.forwarded++;
  rv = append_invoke(v->request_id, im->service_id, im->method_id, args, alen,
                     drop, out);
  tg_buf_free(&scoped);
  return rv;
}

static int on_invoke(tg_relay_filter_t *f, tg_authz_role_t role,
                     const tg_ipc_frame_t *fr, tg_buf_t *out,
                     tg_relay_verdict_t *v) {
  const Perfetto__Protos__IPCFrame__InvokeMethod *im = fr->msg_invoke_method;
  v->call = true;
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
    return deny(f, v, im->has_drop_reply && im->drop_reply, NULL, out);
  }
  if (im->service_id == TG_RELAY_SERVICE_ID)
    return on_relay_call(f, role, im, out, v);
  if (f->consumer_bound && im->service_id == f->consumer_id)
    return on_consumer_call(f, role, im, out, v);
  snprintf(v->method, sizeof(v->method), "service#%" PRIu32 ".#%" PRIu32,
           im->service_id, im->method_id);
  say(v, "service id %" PRIu32 " is not bound on this connection",
      im->service_id);
  return deny(f, v, im->has_drop_reply && im->drop_reply, NULL, out);
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
    v->garbage = true;
    set_method(v, "-");
    say(v, "a frame of %zu bytes does not decode as an IPCFrame", len);
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
    set_method(v, kind);
    say(v, "%s is not something a client may send",
        strcmp(kind, "set_peer_identity")
            ? kind
            : "set_peer_identity (identity comes from the certificate)");
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
  tg_ipc_frame_t *fr = tg_ipc_frame_unpack(payload, len);
  if (!fr) return -1;
  int rv = -1;
  if (fr->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY)
    goto done;
  Perfetto__Protos__IPCFrame__InvokeMethodReply *r =
      fr->msg_invoke_method_reply;
  tg_buf_t body;
  tg_buf_init(&body, 0);
  if (tg_relay_scope_service_state(
          f->identity, r->has_reply_proto ? r->reply_proto.data : NULL,
          r->has_reply_proto ? r->reply_proto.len : 0, &body, note_owned,
          f) < 0)
    goto done_body;
  Perfetto__Protos__IPCFrame__InvokeMethodReply nr =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  nr.has_success = r->has_success;
  nr.success = r->success;
  nr.has_has_more = r->has_has_more;
  nr.has_more = r->has_more;
  nr.has_reply_proto = 1;
  nr.reply_proto.data = tg_buf_size(&body) ? tg_buf_begin(&body) : NULL;
  nr.reply_proto.len = tg_buf_size(&body);
  tg_ipc_frame_t nf = frame_for(fr->request_id);
  nf.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  nf.msg_invoke_method_reply = &nr;
  rv = tg_ipc_frame_append(&nf, out);
done_body:
  tg_buf_free(&body);
done:
  tg_ipc_frame_free(fr);
  return rv;
}

/* The ReadBuffersResponse inside an InvokeMethodReply (reply_proto = 3). */
static void bulk_body(const uint8_t *reply, size_t len, tg_relay_verdict_t *v) {
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  tg_pb_reader_init(&r, reply, len);
  while (tg_pb_reader_next(&r, &fld) == 1) {
    if (fld.id == 3 && fld.type == TG_PB_WT_LEN) {
      v->bulk_body = fld.data;
      v->bulk_len = fld.size;
    }
  }
}

/* --- disconnect leases (TracegateConsumer) --------------------------------- */

/* The reply to the relay's own BindService "TracegateConsumer". */
static void learn_lease_service(tg_relay_filter_t *f, const uint8_t *msg,
                                size_t len, tg_relay_verdict_t *v) {
  v->own_lease_reply = true;
  v->action = TG_RELAY_DROP; /* the client never asked */
  set_method(v, "BindService " TG_RELAY_LEASE_SERVICE);
  f->lease = TG_LEASE_UNSUPPORTED;
  Perfetto__Protos__IPCFrame__BindServiceReply *r =
      (Perfetto__Protos__IPCFrame__BindServiceReply *)protobuf_c_message_unpack(
          &perfetto__protos__ipcframe__bind_service_reply__descriptor, NULL,
          len, msg);
  if (r && r->success && r->has_service_id) {
    for (size_t i = 0; i < r->n_methods; i++) {
      const Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *m =
          r->methods[i];
      if (m->has_id && m->id && m->name &&
          !strcmp(m->name, "SetDisconnectLease")) {
        f->lease = TG_LEASE_BOUND;
        f->lease_service_id = r->service_id;
        f->lease_method_id = m->id;
      }
    }
  }
  if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
  v->allowed = f->lease == TG_LEASE_BOUND;
  if (v->allowed)
    say(v, "the service keeps sessions past a lost connection");
  else
    say(v, "the service has no %s (Perfetto's traced?): a session survives "
        "its client's lost link (the relay detaches it) but not a crash of "
        "the relay", TG_RELAY_LEASE_SERVICE);
}

/* The reply to the relay's own SetDisconnectLease. */
static void lease_granted(tg_relay_filter_t *f, const uint8_t *reply,
                          size_t reply_len, bool success,
                          tg_relay_verdict_t *v) {
  v->own_lease_reply = true;
  v->action = TG_RELAY_DROP;
  v->allowed = success;
  set_method(v, TG_RELAY_LEASE_SERVICE ".SetDisconnectLease");
  f->lease_in_flight = false;
  uint64_t ms = 0;
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  tg_pb_reader_init(&r, reply, reply_len);
  while (tg_pb_reader_next(&r, &fld) == 1) {
    /* InvokeMethodReply.reply_proto = 3: SetDisconnectLeaseResponse. */
    if (fld.id != 3 || fld.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_t rr;
    tg_pb_field_t ff;
    tg_pb_reader_init(&rr, fld.data, fld.size);
    while (tg_pb_reader_next(&rr, &ff) == 1)
      if (ff.id == 1 && ff.type == TG_PB_WT_VARINT) ms = ff.value;
  }
  if (success)
    say(v, "the service keeps the session of key '%s/%s' for %" PRIu64
        " ms if the relay goes away", f->identity, f->lease_key, ms);
  else
    say(v, "the service refused a disconnect lease for key '%s/%s': a crash "
        "of the relay would end the session", f->identity, f->lease_key);
  if (!success) f->lease_key[0] = 0;
}

int tg_relay_filter_lease_frames(tg_relay_filter_t *f, uint64_t lease_ms,
                                 tg_buf_t *out) {
  if (!f->session_key[0] || f->lease_in_flight ||
      f->lease == TG_LEASE_BINDING || f->lease == TG_LEASE_UNSUPPORTED ||
      !strcmp(f->lease_key, f->session_key))
    return 0;
  if (f->n_tracked == TG_RELAY_FILTER_MAX_TRACKED) return 0;
  if (f->lease == TG_LEASE_UNKNOWN) {
    Perfetto__Protos__IPCFrame__BindService b =
        PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
    b.service_name = (char *)TG_RELAY_LEASE_SERVICE;
    tg_ipc_frame_t c = frame_for(TG_RELAY_LEASE_BIND_REQUEST_ID);
    c.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
    c.msg_bind_service = &b;
    int rv = tg_ipc_frame_append(&c, out);
    if (rv < 0) return rv;
    track(f, TG_RELAY_LEASE_BIND_REQUEST_ID, TG_TRACK_OWN_LEASE_BIND);
    f->lease = TG_LEASE_BINDING;
    return 1;
  }
  char ns[TG_DETACH_KEY_MAX + 1];
  if ((size_t)snprintf(ns, sizeof(ns), "%s/%s", f->identity, f->session_key) >=
      sizeof(ns))
    return 0; /* SetSessionKey checked the length */
  Perfetto__Protos__SetDisconnectLeaseRequest req =
      PERFETTO__PROTOS__SET_DISCONNECT_LEASE_REQUEST__INIT;
  req.key = ns;
  req.has_lease_ms = 1;
  req.lease_ms = lease_ms;
  uint8_t args[TG_DETACH_KEY_MAX + 32];
  size_t n = perfetto__protos__set_disconnect_lease_request__get_packed_size(&req);
  if (n > sizeof(args)) return 0;
  perfetto__protos__set_disconnect_lease_request__pack(&req, args);
  int rv = append_invoke(TG_RELAY_LEASE_REQUEST_ID, f->lease_service_id,
                         f->lease_method_id, args, n, false, out);
  if (rv < 0) return rv;
  track(f, TG_RELAY_LEASE_REQUEST_ID, TG_TRACK_OWN_LEASE);
  f->lease_in_flight = true;
  memcpy(f->lease_key, f->session_key, strlen(f->session_key) + 1);
  return 1;
}

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
    v->garbage = true;
    v->action = TG_RELAY_DROP;
    say(v, "a frame of %zu bytes from the service does not decode", len);
    return 0;
  }
  size_t at = 0;
  tg_relay_track_kind_t kind = tracked_kind(f, request_id, &at);
  if (kind == TG_TRACK_NONE) {
    /* A reply to nothing the client is waiting for (or to a call whose
     * final reply came already): it may not pass for another call's. */
    f->stats.unmatched++;
    v->action = TG_RELAY_DROP;
    set_method(v, "reply");
    say(v, "the service answered request %" PRIu64 ", which is not in "
        "flight", request_id);
    return 0;
  }
  v->action = TG_RELAY_FORWARD;
  if (bind) {
    if (kind == TG_TRACK_BIND_CONSUMER) {
      learn_methods(f, bind, bind_len);
      untrack(f, at);
    } else if (kind == TG_TRACK_OWN_LEASE_BIND) {
      untrack(f, at);
      learn_lease_service(f, bind, bind_len, v);
    }
    return 0;
  }
  /* No InvokeMethodReply: a RequestError, the call's failed end. */
  static const uint8_t no_reply[1];
  if (!reply) reply_len = 0;
  bool success = false, more = false;
  tg_pb_reader_init(&r, reply ? reply : no_reply, reply_len);
  while (tg_pb_reader_next(&r, &fld) == 1) {
    if (fld.type != TG_PB_WT_VARINT) continue;
    if (fld.id == R_SUCCESS) success = fld.value != 0;
    else if (fld.id == R_HAS_MORE) more = fld.value != 0;
  }
  switch (kind) {
    case TG_TRACK_READ_BUFFERS:
      if (!reply) break;
      v->bulk = true;
      v->bulk_last = !more;
      bulk_body(reply, reply_len, v);
      break;
    case TG_TRACK_QUERY_STATE: {
      if (!reply) break; /* an error names no session */
      int srv = scope_state_reply(f, payload, len, out);
      if (srv == -ENOMEM) return srv;
      if (srv < 0) {
        /* Unfiltered, it could show other identities' sessions. */
        f->stats.upstream_garbage++;
        v->garbage = true;
        v->action = TG_RELAY_DROP;
        say(v, "a QueryServiceState reply from the service does not decode");
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
      lease_granted(f, reply ? reply : no_reply, reply_len, success, v);
      break;
    case TG_TRACK_OWN_DETACH:
      v->own_detach_reply = true;
      v->allowed = success;
      v->action = TG_RELAY_DROP; /* the client is gone; nobody asked */
      if (success) session_left(f);
      break;
    default:
      break;
  }
  /* session_left() may have reordered the table: find the entry again. */
  if (!more && tracked_kind(f, request_id, &at) == kind) untrack(f, at);
  return 0;
}

int tg_relay_filter_detach_on_drop(tg_relay_filter_t *f, tg_buf_t *out,
                                   char *key, size_t keycap) {
  if (!f->session_active || !f->session_key[0] || !f->consumer_bound)
    return 0;
  uint32_t mid = consumer_method_id(f, "Detach");
  if (mid == 0) return 0;
  char ns[TG_DETACH_KEY_MAX + 1];
  if ((size_t)snprintf(ns, sizeof(ns), "%s/%s", f->identity, f->session_key) >=
      sizeof(ns))
    return 0; /* SetSessionKey checked the length */
  Perfetto__Protos__DetachRequest d = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
  d.key = ns;
  uint8_t args[TG_DETACH_KEY_MAX + 16];
  size_t n = perfetto__protos__detach_request__get_packed_size(&d);
  if (n > sizeof(args)) return 0;
  perfetto__protos__detach_request__pack(&d, args);
  /* Replace any stale entry so the reply is recognised. */
  size_t at;
  if (tracked_kind(f, TG_RELAY_DETACH_REQUEST_ID, &at) != TG_TRACK_NONE)
    untrack(f, at);
  if (f->n_tracked == TG_RELAY_FILTER_MAX_TRACKED) untrack(f, 0);
  track(f, TG_RELAY_DETACH_REQUEST_ID, TG_TRACK_OWN_DETACH);
  int rv = append_invoke(TG_RELAY_DETACH_REQUEST_ID, f->consumer_id, mid, args,
                         n, false, out);
  if (rv < 0) return rv;
  if (key && keycap) snprintf(key, keycap, "%s", ns);
  return 1;
}
