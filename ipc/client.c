/* tg_ipc_client: numbered requests out, replies routed back by id. */
#include "ipc/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/ipc_frame.h"
#include "tracegate/error.h"
#include "common/log.h"

typedef enum { CALL_BIND, CALL_INVOKE } call_kind_t;

typedef struct pending_call {
  tg_list_t node;
  uint64_t request_id;
  call_kind_t kind;
  tg_ipc_bind_cb bind_cb;
  tg_ipc_reply_cb reply_cb; /* NULL after cancel */
  void *ctx;
  char service[TG_IPC_METHOD_NAME_MAX];
} pending_call_t;

static pending_call_t *find_call(tg_ipc_client_t *c, uint64_t id) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &c->pending) {
    pending_call_t *pc = TG_CONTAINER_OF(it, pending_call_t, node);
    if (pc->request_id == id) return pc;
  }
  return NULL;
}

static void finish_call(pending_call_t *pc) {
  tg_list_remove(&pc->node);
  free(pc);
}

static void on_bind_reply(tg_ipc_client_t *c, pending_call_t *pc,
                          const Perfetto__Protos__IPCFrame__BindServiceReply *r) {
  if (!r->success) {
    if (pc->bind_cb) pc->bind_cb(c, pc->ctx, TG_EUNKNOWN_SERVICE, NULL);
    return;
  }
  if (c->n_services >= TG_IPC_CLIENT_MAX_SERVICES) {
    if (pc->bind_cb) pc->bind_cb(c, pc->ctx, -ENOSPC, NULL);
    return;
  }
  tg_ipc_remote_service_t *svc = &c->services[c->n_services];
  memset(svc, 0, sizeof(*svc));
  svc->id = r->service_id;
  snprintf(svc->name, sizeof(svc->name), "%s", pc->service);
  for (size_t i = 0; i < r->n_methods; i++) {
    const Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *m =
        r->methods[i];
    /* Names that do not fit are methods we never call: skip them. */
    if (!m->name || strlen(m->name) >= TG_IPC_METHOD_NAME_MAX || m->id == 0)
      continue;
    if (svc->n_methods == TG_IPC_CLIENT_MAX_METHODS) break;
    svc->methods[svc->n_methods].id = m->id;
    memcpy(svc->methods[svc->n_methods].name, m->name, strlen(m->name) + 1);
    svc->n_methods++;
  }
  c->n_services++;
  if (pc->bind_cb) pc->bind_cb(c, pc->ctx, 0, svc);
}

/* Copies |text_untrusted| as printable ASCII ('?' for the rest). */
static void keep_notice(tg_ipc_client_t *c, const char *text_untrusted) {
  size_t n = 0;
  for (; text_untrusted && text_untrusted[n] && n < sizeof(c->notice) - 1; n++) {
    unsigned char ch = (unsigned char)text_untrusted[n];
    c->notice[n] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
  }
  c->notice[n] = 0;
}

const char *tg_ipc_client_notice(const tg_ipc_client_t *c) { return c->notice; }

/* An InvokeMethodReply, read in place. */
static int on_reply(tg_ipc_client_t *c, const tg_ipc_reply_view_t *r) {
  pending_call_t *pc = find_call(c, r->request_id);
  if (!pc || pc->kind != CALL_INVOKE) {
    c->replies_unmatched++;
    return 0;
  }
  tg_ipc_reply_cb cb = pc->reply_cb;
  void *ctx = pc->ctx;
  if (!r->has_more) finish_call(pc);
  if (r->success) c->notice[0] = 0;
  if (cb)
    cb(c, ctx, r->success ? 0 : TG_EREMOTE_FAILED, r->has_more,
       r->has_reply_proto ? r->reply_proto : NULL,
       r->has_reply_proto ? r->reply_proto_len : 0);
  /* It spoke for this reply only. The client outlives its callbacks
   * (freed after on_close). */
  c->notice[0] = 0;
  /* A callback may have closed the client: stop reading this input. */
  return c->closing ? 1 : 0;
}

static int on_frame(tg_transport_t *t, const uint8_t *payload, size_t len) {
  tg_ipc_client_t *c = t->data;
  /* Replies (a ReadBuffers stream is all replies) are read where they
   * lie; the rest, and any reply of an unusual shape, by protobuf-c. */
  tg_ipc_reply_view_t view;
  if (tg_ipc_frame_read_reply(payload, len, &view) == 1)
    return on_reply(c, &view);
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(payload, len);
  if (!f) {
    c->frames_undecodable++;
    TG_WARN("ipc client: dropped an undecodable frame of %zu bytes", len);
    return 0;
  }
  pending_call_t *pc = find_call(c, f->request_id);
  if (!pc && f->request_id == 0 &&
      f->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR) {
    keep_notice(c, f->msg_request_error->error);
    tg_ipc_frame_free(f);
    return 0;
  }
  if (!pc) {
    c->replies_unmatched++;
    tg_ipc_frame_free(f);
    return 0;
  }
  switch (f->msg_case) {
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY:
      if (pc->kind != CALL_BIND) break;
      /* Out of the pending list before its callback, as every answered
       * call is: the callback sees only the calls still unanswered. */
      tg_list_remove(&pc->node);
      on_bind_reply(c, pc, f->msg_bind_service_reply);
      free(pc);
      c->notice[0] = 0; /* it spoke for this reply only */
      break;
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY: {
      /* An unusual shape (the reply merged from two, say). */
      const Perfetto__Protos__IPCFrame__InvokeMethodReply *r =
          f->msg_invoke_method_reply;
      tg_ipc_reply_view_t v = {
          .request_id = f->request_id,
          .success = r->success,
          .has_more = r->has_more,
          .has_reply_proto = r->has_reply_proto,
          .reply_proto = r->reply_proto.data,
          .reply_proto_len = r->reply_proto.len,
      };
      int rv = on_reply(c, &v);
      tg_ipc_frame_free(f);
      return rv;
    }
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR: {
      tg_ipc_reply_cb rcb = pc->kind == CALL_INVOKE ? pc->reply_cb : NULL;
      tg_ipc_bind_cb bcb = pc->kind == CALL_BIND ? pc->bind_cb : NULL;
      void *ctx = pc->ctx;
      /* A callback's owner says it to its user, with the peer's words
       * (the notice, for the callback's length): one line, not two. A
       * call nobody waits for is said here. */
      TG_LOG(rcb || bcb ? TG_LOG_DEBUG : TG_LOG_WARN,
             "ipc client: request %llu refused: %s",
             (unsigned long long)f->request_id,
             f->msg_request_error->error ? f->msg_request_error->error : "");
      keep_notice(c, f->msg_request_error->error);
      finish_call(pc);
      if (rcb) rcb(c, ctx, TG_EUNKNOWN_METHOD, false, NULL, 0);
      if (bcb) bcb(c, ctx, TG_EUNKNOWN_SERVICE, NULL);
      c->notice[0] = 0;
      break;
    }
    default:
      c->replies_unmatched++;
      break;
  }
  tg_ipc_frame_free(f);
  /* A callback may have closed the client: stop reading this input. */
  return c->closing ? 1 : 0;
}

static void on_drain(tg_transport_t *t) {
  tg_ipc_client_t *c = t->data;
  if (c->cbs->on_drain) c->cbs->on_drain(c);
}

static void on_close(tg_transport_t *t, int status) {
  tg_ipc_client_t *c = t->data;
  c->closing = true;
  int err = status ? status : TG_EPEER_CLOSED;
  /* The calls still pending were never answered: they fail as the
   * connection did, never with a status that reads as the peer's answer.
   * An owner that closes because one bind was refused (a relay refusing
   * the whole connection) would otherwise tell every other pending bind
   * that its service does not exist. */
  if (err == TG_EUNKNOWN_SERVICE || err == TG_EUNKNOWN_METHOD ||
      err == TG_EREMOTE_FAILED)
    err = -ECANCELED;
  while (!tg_list_empty(&c->pending)) {
    pending_call_t *pc = TG_CONTAINER_OF(c->pending.next, pending_call_t, node);
    tg_list_remove(&pc->node);
    if (pc->kind == CALL_BIND && pc->bind_cb)
      pc->bind_cb(c, pc->ctx, err, NULL);
    if (pc->kind == CALL_INVOKE && pc->reply_cb)
      pc->reply_cb(c, pc->ctx, err, false, NULL, 0);
    free(pc);
  }
  tg_buf_free(&c->out);
  c->cbs->on_close(c, status);
}

static const tg_transport_cbs_t client_transport_cbs = {
    .on_frame = on_frame,
    .on_drain = on_drain,
    .on_close = on_close,
};

void tg_ipc_client_init(tg_ipc_client_t *c, tg_transport_t *t,
                        const tg_ipc_client_cbs_t *cbs, void *data) {
  memset(c, 0, sizeof(*c));
  c->t = t;
  c->cbs = cbs;
  c->data = data;
  c->next_request_id = 1;
  tg_list_init(&c->pending);
  tg_buf_init(&c->out, TG_IPC_FRAME_BUFFER_SIZE);
  t->cbs = &client_transport_cbs;
  t->data = c;
}

/* Sends the frame in c->out (built by the caller) and empties it; the
 * scratch buffer is kept for the next request. */
static int send_out(tg_ipc_client_t *c, int fd) {
  int rv = tg_transport_send(c->t, tg_buf_begin(&c->out), tg_buf_size(&c->out),
                             fd);
  tg_buf_reset(&c->out);
  return rv;
}

static pending_call_t *new_call(tg_ipc_client_t *c, call_kind_t kind,
                                void *ctx) {
  pending_call_t *pc = calloc(1, sizeof(*pc));
  if (!pc) return NULL;
  pc->kind = kind;
  pc->ctx = ctx;
  pc->request_id = c->next_request_id++;
  return pc;
}

int tg_ipc_client_bind(tg_ipc_client_t *c, const char *service,
                       tg_ipc_bind_cb cb, void *ctx) {
  if (c->closing) return -EPIPE;
  if (!service || strlen(service) >= TG_IPC_METHOD_NAME_MAX) return -EINVAL;
  pending_call_t *pc = new_call(c, CALL_BIND, ctx);
  if (!pc) return -ENOMEM;
  pc->bind_cb = cb;
  snprintf(pc->service, sizeof(pc->service), "%s", service);

  Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
  Perfetto__Protos__IPCFrame__BindService b =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  b.service_name = (char *)service;
  f.has_request_id = true;
  f.request_id = pc->request_id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  f.msg_bind_service = &b;
  tg_buf_reset(&c->out);
  int rv = tg_ipc_frame_append(&f, &c->out);
  if (rv == 0) rv = send_out(c, -1);
  if (rv < 0) {
    /* The owner may free a client whose bind failed without a close. */
    tg_buf_free(&c->out);
    free(pc);
    return rv;
  }
  tg_list_insert_tail(&c->pending, &pc->node);
  return 0;
}

uint32_t tg_ipc_method_id(const tg_ipc_remote_service_t *svc,
                          const char *method) {
  for (size_t i = 0; i < svc->n_methods; i++)
    if (strcmp(svc->methods[i].name, method) == 0) return svc->methods[i].id;
  return 0;
}

int tg_ipc_client_invoke_id(tg_ipc_client_t *c, uint32_t service_id,
                            uint32_t method_id, const uint8_t *args,
                            size_t args_len, int fd, tg_ipc_reply_cb cb,
                            void *ctx, uint64_t *request_id) {
  if (c->closing) {
    if (fd >= 0) close(fd);
    return -EPIPE;
  }
  pending_call_t *pc = new_call(c, CALL_INVOKE, ctx);
  if (!pc) {
    if (fd >= 0) close(fd);
    return -ENOMEM;
  }
  pc->reply_cb = cb;

  tg_buf_reset(&c->out);
  int rv = tg_ipc_invoke_append(&c->out, pc->request_id, service_id, method_id,
                                args, args_len, cb == NULL);
  if (rv == 0) {
    rv = send_out(c, fd);
  } else if (fd >= 0) {
    close(fd);
  }
  if (rv < 0) {
    tg_buf_free(&c->out); /* as in bind: nothing is held after a failure */
    free(pc);
    return rv;
  }
  if (request_id) *request_id = pc->request_id;
  if (cb)
    tg_list_insert_tail(&c->pending, &pc->node);
  else
    free(pc); /* no reply will come */
  return 0;
}

int tg_ipc_client_invoke(tg_ipc_client_t *c,
                         const tg_ipc_remote_service_t *svc,
                         const char *method, const uint8_t *args,
                         size_t args_len, int fd, tg_ipc_reply_cb cb,
                         void *ctx, uint64_t *request_id) {
  uint32_t mid = tg_ipc_method_id(svc, method);
  if (mid == 0) {
    TG_WARN("ipc client: service %s has no method %s", svc->name, method);
    if (fd >= 0) close(fd);
    return -ENOENT;
  }
  return tg_ipc_client_invoke_id(c, svc->id, mid, args, args_len, fd, cb, ctx,
                                 request_id);
}

void tg_ipc_client_cancel(tg_ipc_client_t *c, uint64_t request_id) {
  pending_call_t *pc = find_call(c, request_id);
  if (pc) {
    pc->reply_cb = NULL;
    pc->bind_cb = NULL;
  }
}

int tg_ipc_client_take_fd(tg_ipc_client_t *c) {
  return tg_transport_take_fd(c->t);
}

void tg_ipc_client_close(tg_ipc_client_t *c, int status) {
  if (c->closing) return;
  c->closing = true;
  tg_transport_close(c->t, status);
}
