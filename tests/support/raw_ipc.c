/* The blocking test client of raw_ipc.h. */
#include "raw_ipc.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_proc.h"
#include "tracegate/pb_wire.h"
#include "ipc/channel.h"

int raw_connect(raw_conn_t *c, const char *path) {
  memset(c, 0, sizeof(*c));
  tg_frame_decoder_init(&c->dec);
  c->next_request = 1;
  c->fd = tg_ipc_connect_unix(path);
  return c->fd < 0 ? c->fd : 0;
}

void raw_close(raw_conn_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  tg_frame_decoder_free(&c->dec);
  for (size_t i = 0; i < c->n_queued; i++) {
    tg_ipc_frame_free(c->queue[i].frame);
    if (c->queue[i].fd >= 0) close(c->queue[i].fd);
  }
  c->n_queued = 0;
  for (size_t i = 0; i < c->n_pending_fds; i++) close(c->pending_fds[i]);
  c->n_pending_fds = 0;
  for (size_t i = 0; i < c->n_methods; i++) free(c->method_names[i]);
  c->n_methods = 0;
}

ssize_t raw_sendmsg_fd(int sock, const void *p, size_t n, int fd) {
  union {
    struct cmsghdr a;
    char buf[CMSG_SPACE(sizeof(int))];
  } cb;
  struct iovec iov = {(void *)p, n};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    memset(&cb, 0, sizeof(cb));
    m.msg_control = cb.buf;
    m.msg_controllen = sizeof(cb.buf);
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof(int));
  }
  ssize_t k = sendmsg(sock, &m, MSG_NOSIGNAL);
  return k < 0 ? -errno : k;
}

static int send_frame(raw_conn_t *c, const tg_ipc_frame_t *f, int fd) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  int rv = tg_ipc_frame_append(f, &b);
  if (rv == 0) {
    ssize_t n = raw_sendmsg_fd(c->fd, tg_buf_begin(&b), tg_buf_size(&b), fd);
    if (n < 0)
      rv = (int)n;
    else if ((size_t)n < tg_buf_size(&b))
      rv = raw_send_bytes(c, tg_buf_begin(&b) + n, tg_buf_size(&b) - (size_t)n);
  }
  tg_buf_free(&b);
  return rv;
}

int raw_send_bytes(raw_conn_t *c, const void *p, size_t n) {
  const uint8_t *q = p;
  while (n > 0) {
    ssize_t w = send(c->fd, q, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    q += w;
    n -= (size_t)w;
  }
  return 0;
}

static int on_frame(void *ctx, const uint8_t *p, size_t n) {
  raw_conn_t *c = ctx;
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(p, n);
  if (!f || c->n_queued >= RAW_MAX_QUEUED) {
    tg_ipc_frame_free(f);
    return 0;
  }
  raw_frame_t *q = &c->queue[c->n_queued++];
  q->frame = f;
  /* One recvmsg() can return the frames before an fd's frame together
   * with it, so which frame an fd came with is not known here: the code
   * that expects one takes it (raw_take_fd), as Perfetto's clients do. */
  q->fd = -1;
  return 0;
}

int raw_take_fd(raw_conn_t *c) {
  if (c->n_pending_fds == 0) return -1;
  int fd = c->pending_fds[0];
  memmove(c->pending_fds, c->pending_fds + 1, (--c->n_pending_fds) * sizeof(int));
  return fd;
}

/* Reads what is available (waiting up to |timeout_ms|). 1 read, 0 timeout,
 * -1 EOF or error. */
static int pump(raw_conn_t *c, int timeout_ms) {
  struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
  int pr = poll(&pfd, 1, timeout_ms);
  if (pr <= 0) return pr < 0 && errno != EINTR ? -1 : 0;
  uint8_t buf[65536];
  union {
    struct cmsghdr a;
    char b[CMSG_SPACE(sizeof(int) * 4)];
  } cb;
  struct iovec iov = {buf, sizeof(buf)};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b,
                     .msg_controllen = sizeof(cb.b)};
  ssize_t n = recvmsg(c->fd, &m, MSG_CMSG_CLOEXEC);
  if (n <= 0) return -1;
  for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k && c->n_pending_fds < 8; i++)
      memcpy(&c->pending_fds[c->n_pending_fds++], CMSG_DATA(h) + i * sizeof(int),
             sizeof(int));
  }
  return tg_frame_decoder_feed(&c->dec, buf, (size_t)n, on_frame, c) < 0 ? -1 : 1;
}

int raw_wait(raw_conn_t *c, uint64_t request_id, int timeout_ms, raw_frame_t *out) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  for (;;) {
    for (size_t i = 0; i < c->n_queued; i++) {
      if (request_id && c->queue[i].frame->request_id != request_id) continue;
      *out = c->queue[i];
      memmove(&c->queue[i], &c->queue[i + 1],
              (c->n_queued - i - 1) * sizeof(c->queue[0]));
      c->n_queued--;
      return 1;
    }
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0) return 0;
    int rv = pump(c, (int)left);
    if (rv < 0) return -1;
  }
}

bool raw_wait_closed(raw_conn_t *c, int timeout_ms) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  for (;;) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0) return false;
    if (pump(c, (int)left) < 0) return true;
  }
}

int raw_bind(raw_conn_t *c, const char *service) {
  Perfetto__Protos__IPCFrame__BindService b =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  b.service_name = (char *)service;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  uint64_t rid = c->next_request++;
  f.has_request_id = 1;
  f.request_id = rid;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  f.msg_bind_service = &b;
  if (send_frame(c, &f, -1) < 0) return -1;
  raw_frame_t r;
  if (raw_wait(c, rid, 5000, &r) != 1) return -1;
  int rv = -1;
  if (r.frame->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY &&
      r.frame->msg_bind_service_reply->success) {
    Perfetto__Protos__IPCFrame__BindServiceReply *br = r.frame->msg_bind_service_reply;
    c->service_id = br->service_id;
    for (size_t i = 0; i < br->n_methods && c->n_methods < RAW_MAX_METHODS; i++) {
      c->method_names[c->n_methods] = strdup(br->methods[i]->name);
      c->method_ids[c->n_methods++] = br->methods[i]->id;
    }
    rv = 0;
  }
  tg_ipc_frame_free(r.frame);
  if (r.fd >= 0) close(r.fd);
  return rv;
}

uint32_t raw_method_id(const raw_conn_t *c, const char *name) {
  for (size_t i = 0; i < c->n_methods; i++)
    if (!strcmp(c->method_names[i], name)) return c->method_ids[i];
  return 0;
}

int64_t raw_invoke_id(raw_conn_t *c, uint32_t method_id,
                      const ProtobufCMessage *args, int fd, bool drop_reply) {
  uint8_t stack[4096];
  size_t n = args ? protobuf_c_message_get_packed_size(args) : 0;
  uint8_t *body = n > sizeof(stack) ? malloc(n) : stack;
  if (!body) return -ENOMEM;
  if (args) protobuf_c_message_pack(args, body);
  Perfetto__Protos__IPCFrame__InvokeMethod im =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  im.has_service_id = 1;
  im.service_id = c->service_id;
  im.has_method_id = 1;
  im.method_id = method_id;
  im.has_args_proto = 1;
  im.args_proto.data = body;
  im.args_proto.len = n;
  im.has_drop_reply = drop_reply;
  im.drop_reply = drop_reply;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  uint64_t rid = c->next_request++;
  f.has_request_id = 1;
  f.request_id = rid;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
  f.msg_invoke_method = &im;
  int rv = send_frame(c, &f, fd);
  if (body != stack) free(body);
  return rv < 0 ? rv : (int64_t)rid;
}

int64_t raw_invoke(raw_conn_t *c, const char *method, const ProtobufCMessage *args,
                   int fd, bool drop_reply) {
  return raw_invoke_id(c, raw_method_id(c, method), args, fd, drop_reply);
}

int raw_wait_reply(raw_conn_t *c, uint64_t request_id,
                   const ProtobufCMessageDescriptor *desc,
                   ProtobufCMessage **reply, int timeout_ms) {
  if (reply) *reply = NULL;
  raw_frame_t r;
  if (raw_wait(c, request_id, timeout_ms, &r) != 1) return -1;
  int rv = -1;
  if (r.frame->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY) {
    Perfetto__Protos__IPCFrame__InvokeMethodReply *ir = r.frame->msg_invoke_method_reply;
    rv = ir->success ? 1 : 0;
    if (desc && reply)
      *reply = protobuf_c_message_unpack(desc, NULL, ir->reply_proto.len,
                                         ir->reply_proto.data);
  }
  tg_ipc_frame_free(r.frame);
  if (r.fd >= 0) close(r.fd);
  return rv;
}

int raw_call(raw_conn_t *c, const char *method, const ProtobufCMessage *args,
             int fd, const ProtobufCMessageDescriptor *desc,
             ProtobufCMessage **reply, int timeout_ms) {
  if (reply) *reply = NULL;
  int64_t rid = raw_invoke(c, method, args, fd, false);
  if (rid < 0) return -1;
  return raw_wait_reply(c, (uint64_t)rid, desc, reply, timeout_ms);
}

int raw_send_frame(raw_conn_t *c, const tg_ipc_frame_t *f) {
  return send_frame(c, f, -1);
}

bool raw_hangup(raw_conn_t *c, int timeout_ms) {
  /* Half-close, then wait for the peer's EOF: it has seen ours by then. */
  bool seen = shutdown(c->fd, SHUT_WR) == 0 && raw_wait_closed(c, timeout_ms);
  raw_close(c);
  return seen;
}
