/* tg_consumer: the connection, the bind to ConsumerPort, the call plumbing
 * and the session-control calls. ReadBuffers lives in consumer_read.c, the
 * queries in consumer_query.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/protocol_limits.h"
#include "abi/consumer_port_methods.h"
#include "tracegate/pb_wire.h"
#include "consumer/consumer_internal.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "tracegate/error.h"
#include "common/fsm.h"
#include "common/log.h"
#include "common/printable.h"

/* --- messages ------------------------------------------------------------ */

int tg__failure(const tg__call_t *call, int status, const char *remote,
                char *msg, size_t n) {
  const char *m = call->method;
  char text[256];
  switch (status) {
    case 0:
      if (n) msg[0] = 0;
      break;
    case TG_EREMOTE_FAILED:
      /* Without words of the method's own, a relay's notice (sent with
       * the refusal: ipc/client.h) says why. */
      if (!remote || !remote[0]) remote = tg_ipc_client_notice(&call->c->client);
      if (remote && remote[0]) {
        tg_printable(text, sizeof(text), remote);
        snprintf(msg, n, "the service refused %s: %s", m, text);
      } else {
        snprintf(msg, n, "the service refused %s", m);
      }
      break;
    case TG_EUNKNOWN_METHOD: {
      const char *why = tg_ipc_client_notice(&call->c->client);
      tg_printable(text, sizeof(text), why);
      snprintf(msg, n, "the service rejected the %s request%s%s", m,
               why[0] ? ": " : "", text);
      break;
    }
    case TG_EPEER_CLOSED: {
      /* What the peer said before it closed, if anything (a relay does). */
      const char *note = tg_ipc_client_notice(&call->c->client);
      if (note[0]) tg_printable(text, sizeof(text), note);
      snprintf(msg, n, "lost the connection to the service before %s finished (%s)",
               m, note[0] ? text : tg_strerror(call->c->raw_status));
      break;
    }
    case -ECANCELED:
      snprintf(msg, n, "%s was cancelled: the consumer was closed", m);
      break;
    default:
      snprintf(msg, n, "%s failed: %s", m, tg_strerror(status));
      break;
  }
  return status;
}

int tg__failure_why(const tg__call_t *call, int status, const char *why,
                    char *msg, size_t n) {
  if (status != TG_EREMOTE_FAILED)
    return tg__failure(call, status, NULL, msg, n);
  /* A relay's notice is the known reason: it replaces the guess. */
  const char *note = tg_ipc_client_notice(&call->c->client);
  if (note[0]) return tg__failure(call, status, note, msg, n);
  snprintf(msg, n, "the service refused %s (%s)", call->method, why);
  return status;
}

ProtobufCMessage *tg__unpack(const ProtobufCMessageDescriptor *d,
                             const uint8_t *reply, size_t len) {
  static const uint8_t empty[1];
  return protobuf_c_message_unpack(d, NULL, len, reply ? reply : empty);
}

/* --- calls ----------------------------------------------------------------- */

tg__call_t *tg__call_new(tg_consumer_t *c, const char *method, void *ctx,
                         tg__reply_fn on_reply) {
  tg__call_t *call = calloc(1, sizeof(*call));
  if (!call) return NULL;
  call->c = c;
  call->method = method;
  call->ctx = ctx;
  call->on_reply = on_reply;
  return call;
}

void tg__call_free(tg__call_t *call) {
  if (!call) return;
  if (call->c->enable_call == call) call->c->enable_call = NULL;
  /* Both are zeroed (a no-op to free) for calls that do not use them. */
  tg_slice_reassembler_free(&call->ra);
  tg_buf_free(&call->merged);
  free(call);
}

tg__call_end_t tg__call_end(tg__call_t *call) {
  tg__call_end_t e = {.c = call->c, .ctx = call->ctx, .cb = call->cb};
  tg__call_free(call);
  return e;
}

void tg__call_cancel(tg__call_t *call) {
  tg_ipc_client_cancel(&call->c->client, call->request_id);
}

int tg__classify(tg_consumer_t *c, int status) {
  if (status == 0 || status == TG_EREMOTE_FAILED || status == TG_EUNKNOWN_METHOD)
    return status;
  c->raw_status = status;
  return c->local_close ? -ECANCELED : TG_EPEER_CLOSED;
}

static void on_ipc_reply(tg_ipc_client_t *cl, void *ctx, int status,
                         bool has_more, const uint8_t *reply, size_t len) {
  tg__call_t *call = ctx;
  tg_consumer_t *c = cl->data;
  call->on_reply(call, tg__classify(c, status), has_more, reply, len);
  tg__consumer_close_if_refused(c);
}

void tg__consumer_close_if_refused(tg_consumer_t *c) {
  if (c->state == TG__CONSUMER_REFUSED && !c->client.closing &&
      tg_list_empty(&c->client.pending))
    tg_ipc_client_close(&c->client, c->bind_status ? c->bind_status
                                                   : TG_EUNKNOWN_SERVICE);
}

int tg__invoke(tg__call_t *call, const uint8_t *args, size_t len, int fd) {
  tg_consumer_t *c = call->c;
  const tg_ipc_remote_service_t *svc = call->svc ? call->svc : c->svc;
  uint32_t method_id = 0;
  int rv;
  /* A call to another service was checked by consumer_service.c: those
   * may go while ConsumerPort is still binding. */
  if (call->svc ? c->state == TG__CONSUMER_CLOSING || c->client.closing
                : !tg_consumer_ready(c)) {
    rv = TG_ENOT_CONNECTED;
  } else if ((method_id = tg_ipc_method_id(svc, call->method)) == 0) {
    rv = TG_ENOT_SUPPORTED;
  } else {
    rv = tg_ipc_client_invoke_id(&c->client, svc->id, method_id, args, len,
                                 fd, on_ipc_reply, call, &call->request_id);
    fd = -1; /* the client took it, whatever the outcome */
  }
  if (rv < 0) {
    if (fd >= 0) close(fd);
    tg__call_free(call);
  }
  return rv;
}

int tg__invoke_msg(tg__call_t *call, const ProtobufCMessage *msg) {
  size_t n = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    tg__call_free(call);
    return -ENOMEM;
  }
  protobuf_c_message_pack(msg, buf);
  int rv = tg__invoke(call, buf, n, -1);
  free(buf);
  return rv;
}

int tg__call_msg(tg_consumer_t *c, const char *method, tg__reply_fn on_reply,
                 tg__call_cb_t cb, void *ctx, const ProtobufCMessage *msg) {
  tg__call_t *call = tg__call_new(c, method, ctx, on_reply);
  if (!call) return -ENOMEM;
  call->cb = cb;
  return tg__invoke_msg(call, msg);
}

/* --- connection ------------------------------------------------------------ */

#define S(x) TG_FSM_BIT(TG__CONSUMER_##x)
/* The connection's arrows (consumer_internal.h). */
static const uint32_t kNext[] = {
    [TG__CONSUMER_BINDING] = S(READY) | S(REFUSED) | S(CLOSING),
    [TG__CONSUMER_READY] = S(CLOSING),
    [TG__CONSUMER_REFUSED] = S(CLOSING),
    [TG__CONSUMER_CLOSING] = 0,
};
#undef S
static const char *const kNames[] = {"binding", "ready", "refused", "closing"};
_Static_assert(TG_FSM_COUNT(kNext) == TG__CONSUMER_CLOSING + 1,
               "arrows per state");
_Static_assert(TG_FSM_COUNT(kNames) == TG_FSM_COUNT(kNext), "a name per state");
static const tg_fsm_def_t kDef = {"consumer connection", TG_FSM_COUNT(kNext),
                                  kNext, kNames};

/* The only writer of c->state after start(), under common/fsm.h's
 * policy. */
static void set_state(tg_consumer_t *c, enum tg__consumer_state to,
                      const char *why) {
  char who[32];
  snprintf(who, sizeof(who), "%p", (void *)c);
  unsigned st = c->state;
  if (tg_fsm_move(&kDef, &st, to, &c->bad_transitions, who, why))
    c->state = to;
}

static void on_client_close(tg_ipc_client_t *cl, int status) {
  tg_consumer_t *c = cl->data;
  set_state(c, TG__CONSUMER_CLOSING, "the connection closed");
  char msg[TG__MSG_MAX] = "";
  int st = 0;
  if (c->bind_status) {
    st = c->bind_status;
    snprintf(msg, sizeof(msg), "%s", c->bind_msg);
  } else if (!c->local_close) {
    /* However it broke, the connection is lost: TG_EPEER_CLOSED, with the
     * transport's reason in the message. */
    st = TG_EPEER_CLOSED;
    bool by_peer = status == 0 || status == TG_EPEER_CLOSED;
    const char *note = tg_ipc_client_notice(cl);
    if (by_peer && note[0])
      /* A relay says why before it closes, and names itself: its words,
       * not our guess (which would call the relay "the service"). */
      tg_printable(msg, sizeof(msg), note);
    else if (by_peer)
      snprintf(msg, sizeof(msg), "the service closed the connection");
    else
      snprintf(msg, sizeof(msg), "lost the connection to the service (%s)",
               tg_strerror(status));
  }
  c->cbs->on_close(c, st, msg);
  free(c);
}

static const tg_ipc_client_cbs_t client_cbs = {.on_close = on_client_close};

static void on_bound(tg_ipc_client_t *cl, void *ctx, int status,
                     const tg_ipc_remote_service_t *svc) {
  (void)ctx;
  tg_consumer_t *c = cl->data;
  char msg[TG__MSG_MAX] = "";
  if (status == 0) {
    c->svc = svc;
    set_state(c, TG__CONSUMER_READY, "ConsumerPort bound");
  } else if (status == TG_EUNKNOWN_SERVICE && tg_ipc_client_notice(cl)[0]) {
    char text[256]; /* the peer's words: a relay's refusal says why */
    tg_printable(text, sizeof(text), tg_ipc_client_notice(cl));
    snprintf(msg, sizeof(msg), "binding ConsumerPort refused: %s", text);
  } else if (status == TG_EUNKNOWN_SERVICE) {
    snprintf(msg, sizeof(msg),
             "the peer does not offer ConsumerPort (not a tracing service's "
             "consumer socket?)");
  } else {
    status = c->local_close ? -ECANCELED : status;
    snprintf(msg, sizeof(msg), "binding ConsumerPort failed: %s",
             tg_strerror(status));
  }
  if (status && !c->local_close) {
    c->bind_status = status;
    snprintf(c->bind_msg, sizeof(c->bind_msg), "%s", msg);
  }
  /* Refused while calls on another service (a relay's own) are in flight:
   * their answers still come (a relay says in them why it refused). */
  bool others = status && !c->local_close && !c->client.closing &&
                !tg_list_empty(&c->client.pending);
  if (others) set_state(c, TG__CONSUMER_REFUSED, msg);
  if (c->cbs->on_ready) c->cbs->on_ready(c, status, msg);
  if (others) tg__consumer_close_if_refused(c);
  else if (status) tg_ipc_client_close(&c->client, status);
}

static int start(tg_consumer_t *c, tg_transport_t *t,
                 const tg_consumer_cbs_t *cbs, void *data) {
  c->cbs = cbs;
  c->data = data;
  c->max_packet = TG_CONSUMER_DEFAULT_MAX_PACKET;
  c->state = TG__CONSUMER_BINDING; /* the first state: no move */
  tg_ipc_client_init(&c->client, t, &client_cbs, c);
  return tg_ipc_client_bind(&c->client, "ConsumerPort", on_bound, NULL);
}

static void on_close_after_failed_start(tg_consumer_t *c, int status,
                                        const char *msg) {
  (void)c;
  (void)status;
  (void)msg;
}

static const tg_consumer_cbs_t failed_start_cbs = {
    .on_close = on_close_after_failed_start};

int tg_consumer_connect(uv_loop_t *loop, const char *addr,
                        const tg_consumer_cbs_t *cbs, void *data,
                        tg_consumer_t **out) {
  tg_consumer_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  int rv = tg_unix_transport_connect(loop, &c->own_tr, addr);
  if (rv < 0) {
    free(c);
    return rv;
  }
  c->can_pass_fds = true;
  rv = start(c, &c->own_tr.base, cbs, data);
  if (rv < 0) {
    /* The channel is open: it must close through the loop, which then
     * frees |c| silently. */
    c->cbs = &failed_start_cbs;
    c->local_close = true;
    tg_ipc_client_close(&c->client, rv);
    return rv;
  }
  *out = c;
  return 0;
}

int tg_consumer_open(uv_loop_t *loop, tg_transport_t *t, bool can_pass_fds,
                     const tg_consumer_cbs_t *cbs, void *data,
                     tg_consumer_t **out) {
  (void)loop; /* |t| runs on it already */
  tg_consumer_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  c->can_pass_fds = can_pass_fds;
  const tg_transport_cbs_t *old_cbs = t->cbs;
  void *old_data = t->data;
  int rv = start(c, t, cbs, data);
  if (rv < 0) {
    /* The transport is the caller's: hand it back as it was. */
    t->cbs = old_cbs;
    t->data = old_data;
    free(c);
    return rv;
  }
  *out = c;
  return 0;
}

void tg_consumer_close(tg_consumer_t *c) {
  if (c->local_close || c->state == TG__CONSUMER_CLOSING) return;
  c->local_close = true;
  set_state(c, TG__CONSUMER_CLOSING, "closed by its owner");
  tg_ipc_client_close(&c->client, -ECANCELED);
}

void *tg_consumer_data(const tg_consumer_t *c) { return c->data; }
void tg_consumer_set_data(tg_consumer_t *c, void *data) { c->data = data; }
bool tg_consumer_ready(const tg_consumer_t *c) {
  /* The client knows first: its pending calls fail before on_close. */
  return c->state == TG__CONSUMER_READY && !c->client.closing;
}
bool tg_consumer_can_pass_fds(const tg_consumer_t *c) { return c->can_pass_fds; }
void tg_consumer_set_max_packet(tg_consumer_t *c, size_t max) {
  c->max_packet = max ? max : TG_CONSUMER_DEFAULT_MAX_PACKET;
}

/* --- calls without a result ------------------------------------------------ */

static void on_done_reply(tg__call_t *call, int status, bool has_more,
                          const uint8_t *reply, size_t len) {
  (void)reply;
  (void)len;
  if (has_more) return; /* not a streaming method: wait for the last reply */
  char msg[TG__MSG_MAX];
  status = tg__failure(call, status, NULL, msg, sizeof(msg));
  tg__call_end_t e = tg__call_end(call);
  e.cb.done(e.c, e.ctx, status, msg);
}

static int simple_call(tg_consumer_t *c, const char *method,
                       const ProtobufCMessage *req, tg_consumer_done_cb cb,
                       void *ctx) {
  if (!cb) return -EINVAL;
  return tg__call_msg(c, method, on_done_reply, (tg__call_cb_t){.done = cb},
                      ctx, req);
}

int tg_consumer_start_tracing(tg_consumer_t *c, tg_consumer_done_cb cb,
                              void *ctx) {
  Perfetto__Protos__StartTracingRequest r =
      PERFETTO__PROTOS__START_TRACING_REQUEST__INIT;
  return simple_call(c, tg_cport_name(TG_CPORT_StartTracing), &r.base, cb, ctx);
}

int tg_consumer_flush(tg_consumer_t *c, uint32_t timeout_ms,
                      tg_consumer_done_cb cb, void *ctx) {
  Perfetto__Protos__FlushRequest r = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  if (timeout_ms) {
    r.has_timeout_ms = 1;
    r.timeout_ms = timeout_ms;
  }
  return simple_call(c, tg_cport_name(TG_CPORT_Flush), &r.base, cb, ctx);
}

int tg_consumer_disable_tracing(tg_consumer_t *c, tg_consumer_done_cb cb,
                                void *ctx) {
  Perfetto__Protos__DisableTracingRequest r =
      PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
  return simple_call(c, tg_cport_name(TG_CPORT_DisableTracing), &r.base, cb,
                     ctx);
}

int tg_consumer_free_buffers(tg_consumer_t *c, tg_consumer_done_cb cb,
                             void *ctx) {
  Perfetto__Protos__FreeBuffersRequest r =
      PERFETTO__PROTOS__FREE_BUFFERS_REQUEST__INIT;
  return simple_call(c, tg_cport_name(TG_CPORT_FreeBuffers), &r.base, cb, ctx);
}

/* --- EnableTracing ----------------------------------------------------------- */

static void on_enable_reply(tg__call_t *call, int status, bool has_more,
                            const uint8_t *reply, size_t len) {
  if (has_more) return;
  char msg[TG__MSG_MAX];
  Perfetto__Protos__EnableTracingResponse *r = NULL;
  /* The service says why in EnableTracingResponse.error, with success
   * true (a refused config) or false (tracing failed). */
  if (status == 0 || status == TG_EREMOTE_FAILED) {
    r = (Perfetto__Protos__EnableTracingResponse *)tg__unpack(
        &perfetto__protos__enable_tracing_response__descriptor, reply, len);
    if (r && r->error && r->error[0]) status = TG_EREMOTE_FAILED;
    else if (!r && status == 0) status = TG_EPROTO_DECODE;
  }
  status = tg__failure(call, status, r ? r->error : NULL, msg, sizeof(msg));
  if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
  tg__call_end_t e = tg__call_end(call);
  e.cb.done(e.c, e.ctx, status, msg);
}

static int enable(tg_consumer_t *c, const uint8_t *config, size_t len,
                  bool has_config, bool attach_only, int fd,
                  tg_consumer_done_cb cb, void *ctx) {
  if (!cb || (has_config && !config && len)) {
    if (fd >= 0) close(fd);
    return -EINVAL;
  }
  if (c->enable_call) {
    if (fd >= 0) close(fd);
    return -EBUSY;
  }
  tg__call_t *call = tg__call_new(c, tg_cport_name(TG_CPORT_EnableTracing),
                                  ctx, on_enable_reply);
  /* EnableTracingRequest{trace_config = 1, attach_notification_only = 2},
   * written by hand: the config goes out exactly as given. */
  uint8_t *req = malloc(len + 2 * TG_PB_MAX_VARINT_SIZE + 4);
  if (!call || !req) {
    free(call);
    free(req);
    if (fd >= 0) close(fd);
    return -ENOMEM;
  }
  call->cb.done = cb;
  uint8_t *p = req;
  if (has_config) {
    p = tg_pb_write_varint(p, TG_PB_TAG(1, TG_PB_WT_LEN));
    p = tg_pb_write_varint(p, len);
    if (len) memcpy(p, config, len);
    p += len;
  }
  if (attach_only) {
    p = tg_pb_write_varint(p, TG_PB_TAG(2, TG_PB_WT_VARINT));
    *p++ = 1;
  }
  int rv = tg__invoke(call, req, (size_t)(p - req), fd);
  free(req);
  if (rv == 0) c->enable_call = call;
  return rv;
}

int tg_consumer_enable_tracing(tg_consumer_t *c, const uint8_t *config,
                               size_t len, int fd, tg_consumer_done_cb on_ended,
                               void *ctx) {
  if (fd >= 0 && !c->can_pass_fds) {
    close(fd);
    return -EOPNOTSUPP;
  }
  return enable(c, config, len, true, false, fd, on_ended, ctx);
}

int tg_consumer_notify_on_end(tg_consumer_t *c, tg_consumer_done_cb on_ended,
                              void *ctx) {
  return enable(c, NULL, 0, false, true, -1, on_ended, ctx);
}

/* --- Detach ------------------------------------------------------------------- */

static void on_detach_reply(tg__call_t *call, int status, bool has_more,
                            const uint8_t *reply, size_t len) {
  (void)reply;
  (void)len;
  if (has_more) return;
  tg_consumer_t *c = call->c;
  char msg[TG__MSG_MAX];
  status = tg__failure_why(call, status,
                           "no session on this connection, or the key is "
                           "already in use", msg, sizeof(msg));
  /* The session's end is no longer reported on this connection. */
  tg__call_t *en = status == 0 ? c->enable_call : NULL;
  if (en) {
    tg__call_cancel(en);
    tg__call_end_t ee = tg__call_end(en);
    ee.cb.done(ee.c, ee.ctx, -ECANCELED, "detached");
  }
  tg__call_end_t e = tg__call_end(call);
  e.cb.done(e.c, e.ctx, status, msg);
}

int tg_consumer_detach(tg_consumer_t *c, const char *key,
                       tg_consumer_done_cb cb, void *ctx) {
  if (!cb || !key || !key[0] || strlen(key) > TG_DETACH_KEY_MAX) return -EINVAL;
  Perfetto__Protos__DetachRequest r = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
  r.key = (char *)key;
  return tg__call_msg(c, tg_cport_name(TG_CPORT_Detach), on_detach_reply,
                      (tg__call_cb_t){.done = cb}, ctx, &r.base);
}
