/* TracegateRelay calls (relay/relay_service.h), decided and answered on
 * the connection: what each method may do for this identity and role, and
 * the effect the caller carries out (compression, the resume key, the
 * replay window, heartbeats). The messages themselves are encoded and
 * decoded by relay/relay_service.c.
 *
 * Never forwards anything to the service and never tracks a call: every
 * call here is answered at once (Resume and SetSessionKey by the caller,
 * from the replay window), so none is ever in flight. A refused call has
 * no effect.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "abi/consumer_port_methods.h"
#include "pb/tracegate/relay.pb-c.h"
#include "relay/filter_internal.h"
#include "tracegate/error.h"

/* What a method's handler decided. */
typedef enum call_outcome {
  CALL_ANSWER,        /* InvokeMethodReply{success} with the body */
  CALL_ANSWER_LATER,  /* allowed; the caller answers (Resume, SetSessionKey) */
  CALL_REFUSE,        /* InvokeMethodReply{success=false}; v->reason */
  CALL_REFUSE_NOTICE, /* the same, the reason in a notice just before */
} call_outcome_t;

/* A body built by relay_service.c: answered, or refused with why not. */
static call_outcome_t built(int rv, tg_relay_verdict_t *v) {
  if (rv >= 0) return CALL_ANSWER;
  tg__relay_say(v, TG_N_RELAY_CALL_REFUSED, "%s", tg_strerror(rv));
  return CALL_REFUSE;
}

static call_outcome_t set_session_key(tg_relay_filter_t *f, bool drop,
                                      const uint8_t *args, size_t alen,
                                      tg_relay_verdict_t *v) {
  const char *why = "";
  char key[TG_RELAY_SESSION_KEY_MAX + 1];
  if (tg_relay_service_parse_session_key(args, alen, key, sizeof(key),
                                         &why) < 0 ||
      strlen(f->identity) + 1 + strlen(key) > TG_DETACH_KEY_MAX) {
    tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED, "%s",
                  why[0] ? why : "identity and key too long together");
    return CALL_REFUSE;
  }
  memcpy(f->session_key, key, strlen(key) + 1);
  tg__relay_say(v, TG_N_RELAY_CALL_ALLOWED,
                "resume key '%s/%s'", f->identity, key);
  v->audit = true;
  v->effect.kind = TG_RELAY_EFFECT_SESSION_KEY_SET;
  v->effect.session_key.reply = !drop;
  /* The reply says what the key's window knows: the caller's. */
  return CALL_ANSWER_LATER;
}

int tg_relay_filter_session_key_reply(uint64_t request_id,
                                      bool ended_with_service, tg_buf_t *out) {
  tg_buf_t body;
  tg_buf_init(&body, 64);
  int rv = tg_relay_service_session_key_reply(ended_with_service, &body);
  if (rv == 0)
    rv = tg__relay_append_reply_bytes(
        request_id, true, tg_buf_size(&body) ? tg_buf_begin(&body) : NULL,
        tg_buf_size(&body), out);
  tg_buf_free(&body);
  return rv;
}

/* Ack{seq} and Resume{last_seq, cum}: the key's replay window, which the
 * caller holds. */
static call_outcome_t replay_call(const tg_relay_filter_t *f,
                                  tg_authz_role_t role, bool resume,
                                  bool drop, const uint8_t *args, size_t alen,
                                  tg_relay_verdict_t *v) {
  uint64_t seq = 0, cum = 0;
  bool ok_args;
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
  bool may_read = tg_authz_allows(role, tg_cport_name(TG_CPORT_ReadBuffers));
  if (!ok_args || !may_read || !f->session_key[0] || (resume && drop)) {
    if (!ok_args || may_read)
      tg__relay_say(v, TG_N_RELAY_CALL_REFUSED, "%s",
                    !ok_args             ? "the request does not decode"
                    : !f->session_key[0] ? "no session key on this connection"
                                         : "Resume needs its reply");
    else
      tg__relay_say(v, TG_N_RELAY_CALL_REFUSED, "the role does not allow %s",
                    tg_cport_name(TG_CPORT_ReadBuffers));
    return CALL_REFUSE;
  }
  v->effect.replay.seq = seq;
  v->effect.replay.cum = cum;
  if (!resume) {
    v->effect.kind = TG_RELAY_EFFECT_REPLAY_ACK;
    return CALL_ANSWER;
  }
  v->effect.kind = TG_RELAY_EFFECT_REPLAY_RESUME;
  tg__relay_say(v, TG_N_RELAY_CALL_ALLOWED, "resume after frame %" PRIu64, seq);
  v->audit = true;
  return CALL_ANSWER_LATER;
}

/* Granted once per connection, and never under --compress never. Refused
 * with a notice: the reply has no field for the reason. */
static call_outcome_t set_compression(tg_relay_filter_t *f, bool drop,
                                      const uint8_t *args, size_t alen,
                                      tg_buf_t *body, tg_relay_verdict_t *v) {
  const char *why = "";
  int level = 0, window_log = 0;
  if (f->compress == TG_RELAY_COMPRESS_NEVER || drop ||
      f->compression_granted ||
      tg_relay_service_compression(args, alen, &level, &window_log, body,
                                   &why) < 0) {
    /* Without a reply the client would never know when to switch. */
    tg__relay_say(v, TG_N_RELAY_CALL_REFUSED, "%s",
                  f->compress == TG_RELAY_COMPRESS_NEVER
                      ? "compression refused by this relay (--compress never)"
                  : drop                   ? "SetCompression wants its reply"
                  : f->compression_granted ? "compression is already on"
                                           : why);
    return CALL_REFUSE_NOTICE;
  }
  f->compression_granted = true;
  v->effect.kind = TG_RELAY_EFFECT_START_COMPRESSION;
  v->effect.compression.level = level;
  v->effect.compression.window_log = window_log;
  tg__relay_say(v, TG_N_RELAY_CALL_ALLOWED,
                "zstd level %d, window 2^%d", level, window_log);
  v->audit = true;
  return CALL_ANSWER;
}

int tg__relay_answer_call(tg_relay_filter_t *f, tg_authz_role_t role,
                          const Perfetto__Protos__IPCFrame__InvokeMethod *im,
                          tg_buf_t *out, tg_relay_verdict_t *v) {
  const char *name = tg_relay_service_method_name(im->method_id);
  bool drop = im->has_drop_reply && im->drop_reply;
  if (!name) {
    tg__relay_set_method(v, "TracegateRelay.?");
    tg__relay_say(v, TG_N_RELAY_REQUEST_MALFORMED,
                  "TracegateRelay has no method id %" PRIu32,
                  im->method_id);
    return tg__relay_deny(f, v, drop, NULL, out);
  }
  snprintf(v->method, sizeof(v->method), "TracegateRelay.%s", name);
  if (role == TG_ROLE_NONE) {
    tg__relay_say(v, TG_N_RELAY_NOT_AUTHORIZED,
                  "identity is not in the authorization file");
    return tg__relay_deny(f, v, drop, NULL, out);
  }
  const uint8_t *args = im->has_args_proto ? im->args_proto.data : NULL;
  size_t alen = im->has_args_proto ? im->args_proto.len : 0;
  tg_buf_t body;
  tg_buf_init(&body, 4096);
  call_outcome_t o = CALL_REFUSE;
  switch (im->method_id) {
    case TG_RELAY_M_GET_HOST_INFO:
      v->audit = true;
      if (f->host) {
        o = built(tg_relay_service_host_info(f->host, f->service_instance,
                                             f->service_down,
                                             &body), v);
      } else {
        tg__relay_say(v, TG_N_RELAY_CALL_REFUSED, "host facts unavailable");
        o = CALL_REFUSE;
      }
      break;
    case TG_RELAY_M_CLOCK_SYNC:
      o = built(tg_relay_service_clock_sync(&body), v);
      if (o == CALL_ANSWER) v->effect.kind = TG_RELAY_EFFECT_HEARTBEAT;
      break;
    case TG_RELAY_M_SET_SESSION_KEY:
      o = set_session_key(f, drop, args, alen, v);
      break;
    case TG_RELAY_M_ACK:
    case TG_RELAY_M_RESUME:
      o = replay_call(f, role, im->method_id == TG_RELAY_M_RESUME, drop, args,
                      alen, v);
      break;
    case TG_RELAY_M_SET_COMPRESSION:
      o = set_compression(f, drop, args, alen, &body, v);
      break;
  }
  int rv = 0;
  switch (o) {
    case CALL_REFUSE:
    case CALL_REFUSE_NOTICE:
      v->effect.kind = TG_RELAY_EFFECT_NONE;
      rv = o == CALL_REFUSE ? tg__relay_deny(f, v, drop, NULL, out)
                            : tg__relay_deny_call(f, v, drop, name, out);
      break;
    case CALL_ANSWER:
    case CALL_ANSWER_LATER:
      v->action = TG_RELAY_REPLY;
      v->allowed = true;
      f->stats.local++;
      if (o == CALL_ANSWER && !drop)
        rv = tg__relay_append_reply_bytes(
            v->request_id, true,
            tg_buf_size(&body) ? tg_buf_begin(&body) : NULL,
            tg_buf_size(&body), out);
      break;
  }
  tg_buf_free(&body);
  return rv;
}
