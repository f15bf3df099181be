/* Services other than ConsumerPort on the consumer's connection: bound by
 * name, invoked with caller-encoded messages. What a relay offers next to
 * the forwarded ConsumerPort ("TracegateRelay") is reached this way. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_internal.h"
#include "tracegate/error.h"

typedef struct bind_req {
  tg_consumer_done_cb cb;
  void *ctx;
  char name[TG_IPC_METHOD_NAME_MAX];
} bind_req_t;

static const tg_ipc_remote_service_t *find_service(const tg_consumer_t *c,
                                                   const char *name) {
  for (size_t i = 0; i < c->client.n_services; i++)
    if (!strcmp(c->client.services[i].name, name)) return &c->client.services[i];
  return NULL;
}

bool tg_consumer_has_service(const tg_consumer_t *c, const char *service) {
  return service && find_service(c, service) != NULL;
}

/* Other services need the connection, not ConsumerPort: they may be bound
 * and called while its bind is still in flight (one round trip for both). */
static bool usable(const tg_consumer_t *c) {
  return (c->state == TG__CONSUMER_BINDING || c->state == TG__CONSUMER_READY ||
          c->state == TG__CONSUMER_REFUSED) &&
         !c->client.closing;
}

static void on_service_bound(tg_ipc_client_t *cl, void *ctx, int status,
                             const tg_ipc_remote_service_t *svc) {
  (void)svc;
  bind_req_t *b = ctx;
  tg_consumer_t *c = cl->data;
  char msg[TG__MSG_MAX] = "";
  if (status == TG_EUNKNOWN_SERVICE) {
    snprintf(msg, sizeof(msg), "the peer does not offer %s", b->name);
  } else if (status) {
    status = tg__classify(c, status);
    snprintf(msg, sizeof(msg), "binding %s failed: %s", b->name,
             tg_strerror(status == TG_EPEER_CLOSED ? c->raw_status : status));
  }
  tg_consumer_done_cb cb = b->cb;
  void *cctx = b->ctx;
  free(b);
  cb(c, cctx, status, msg);
  tg__consumer_close_if_refused(c);
}

int tg_consumer_bind_service(tg_consumer_t *c, const char *service,
                             tg_consumer_done_cb cb, void *ctx) {
  if (!cb || !service || !service[0] ||
      strlen(service) >= TG_IPC_METHOD_NAME_MAX)
    return -EINVAL;
  if (!usable(c)) return TG_ENOT_CONNECTED;
  /* ConsumerPort is the consumer's own bind, answered or not. */
  if (find_service(c, service) || !strcmp(service, "ConsumerPort"))
    return -EALREADY;
  bind_req_t *b = calloc(1, sizeof(*b));
  if (!b) return -ENOMEM;
  b->cb = cb;
  b->ctx = ctx;
  snprintf(b->name, sizeof(b->name), "%s", service);
  int rv = tg_ipc_client_bind(&c->client, service, on_service_bound, b);
  if (rv < 0) free(b);
  return rv;
}

static void on_call_reply(tg__call_t *call, int status, bool has_more,
                          const uint8_t *reply, size_t len) {
  if (has_more) return; /* not for streams: the last reply is the answer */
  char msg[TG__MSG_MAX];
  status = tg__failure(call, status, NULL, msg, sizeof(msg));
  tg__call_end_t e = tg__call_end(call);
  e.cb.reply(e.c, e.ctx, status, msg, status ? NULL : reply, status ? 0 : len);
}

int tg_consumer_call(tg_consumer_t *c, const char *service, const char *method,
                     const uint8_t *args, size_t len, tg_consumer_reply_cb cb,
                     void *ctx) {
  if (!cb || !service || !method || (len && !args)) return -EINVAL;
  const tg_ipc_remote_service_t *svc = find_service(c, service);
  if (!svc || !usable(c)) return TG_ENOT_CONNECTED;
  /* The call names the method by the service's own copy of the name: it
   * lives as long as the connection, hence as long as the call. */
  const char *name = NULL;
  for (size_t i = 0; i < svc->n_methods && !name; i++)
    if (!strcmp(svc->methods[i].name, method)) name = svc->methods[i].name;
  if (!name) return TG_ENOT_SUPPORTED;
  tg__call_t *call = tg__call_new(c, name, ctx, on_call_reply);
  if (!call) return -ENOMEM;
  call->svc = svc;
  call->cb.reply = cb;
  static const uint8_t empty[1];
  return tg__invoke(call, len ? args : empty, len, -1);
}

static void on_stream_reply(tg__call_t *call, int status, bool has_more,
                            const uint8_t *reply, size_t len) {
  char msg[TG__MSG_MAX] = "";
  status = tg__failure(call, status, NULL, msg, sizeof(msg));
  if (has_more && status == 0) {
    call->cb.stream(call->c, call->ctx, 0, "", reply, len, true);
    return;
  }
  if (has_more) tg__call_cancel(call);
  tg__call_end_t e = tg__call_end(call);
  e.cb.stream(e.c, e.ctx, status, msg, status ? NULL : reply, status ? 0 : len,
              false);
}

int tg_consumer_call_stream(tg_consumer_t *c, const char *service,
                            const char *method, const uint8_t *args,
                            size_t len, tg_consumer_stream_cb cb, void *ctx) {
  if (!cb || !service || !method || (len && !args)) return -EINVAL;
  const tg_ipc_remote_service_t *svc = find_service(c, service);
  if (!svc || !usable(c)) return TG_ENOT_CONNECTED;
  const char *name = NULL;
  for (size_t i = 0; i < svc->n_methods && !name; i++)
    if (!strcmp(svc->methods[i].name, method)) name = svc->methods[i].name;
  if (!name) return TG_ENOT_SUPPORTED;
  tg__call_t *call = tg__call_new(c, name, ctx, on_stream_reply);
  if (!call) return -ENOMEM;
  call->svc = svc;
  call->cb.stream = cb;
  static const uint8_t empty[1];
  return tg__invoke(call, len ? args : empty, len, -1);
}
