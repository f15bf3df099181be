/* tg_ipc_host: listener, BindService, method dispatch, replies. */
#include "ipc/host.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tracegate/error.h"
#include "common/line_limit.h"
#include "common/log.h"

#define MAX_SERVICES 32

/* Lines about refused and evicted connections (any local user can cause
 * them at will): a burst, then this many a second, then a count. */
#define CONN_LINES_BURST 50
#define CONN_LINES_PER_S 10

/* The open connections of one local user (SO_PEERCRED uid): what the
 * fair share at the limit compares (see host.h). */
struct tg_ipc_uid_share {
  tg_list_t node;
  uid_t uid;
  size_t conns; /* >= 1: a share is freed when its last connection goes */
};
typedef struct tg_ipc_uid_share uid_share_t;

struct tg_ipc_host {
  uv_loop_t *loop;
  uv_poll_t listen_poll;
  int listen_fd;
  char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1]; /* "" if abstract */
  const tg_ipc_service_def_t *services;
  size_t n_services;
  size_t max_conns;
  size_t n_conns;    /* connections not yet released, evicted ones included */
  size_t n_evicting; /* evicted, not yet released: their slots are free */
  tg_list_t conns;   /* in accept order */
  tg_list_t shares;  /* uid_share_t, one per uid with a connection */
  tg_line_limit_t conn_lines;
  bool share_by_uid;
  uint64_t next_conn_id;
  tg_ipc_host_limits_t limits;
  bool closing;
  bool listener_closed;
  void (*done)(void *);
  void *done_arg;
  tg_ipc_host_stats_t stats;
};

static const tg_ipc_chan_cbs_t conn_cbs;

static uid_share_t *share_find(tg_ipc_host_t *h, uid_t uid) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &h->shares) {
    uid_share_t *s = TG_CONTAINER_OF(it, uid_share_t, node);
    if (s->uid == uid) return s;
  }
  return NULL;
}

static uid_share_t *share_get(tg_ipc_host_t *h, uid_t uid) {
  uid_share_t *s = share_find(h, uid);
  if (!s) {
    s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->uid = uid;
    tg_list_insert_tail(&h->shares, &s->node);
  }
  s->conns++;
  return s;
}

static void share_put(uid_share_t *s) {
  if (!s || --s->conns > 0) return;
  tg_list_remove(&s->node);
  free(s);
}

static void maybe_finish_close(tg_ipc_host_t *h) {
  if (!h->closing || !h->listener_closed || h->n_conns > 0) return;
  void (*done)(void *) = h->done;
  void *arg = h->done_arg;
  free(h);
  if (done) done(arg);
}

/* Sends what |b| holds, |built| being how building it went, with |fd|
 * (when >= 0) attached; frees |b| and, unless the channel took it, |fd|. */
static void send_built(tg_ipc_host_conn_t *c, int built, tg_buf_t *b, int fd) {
  int rv = built;
  if (rv == 0) {
    rv = tg_ipc_chan_send(&c->chan, tg_buf_begin(b), tg_buf_size(b), fd);
    fd = -1; /* owned by the channel now, sent or closed */
  }
  if (rv < 0)
    TG_WARN("ipc: conn %llu: cannot send reply: %s",
            (unsigned long long)c->id, tg_strerror(rv));
  if (fd >= 0) close(fd);
  tg_buf_free(b);
}

static void send_frame(tg_ipc_host_conn_t *c, const tg_ipc_frame_t *f, int fd) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  send_built(c, tg_ipc_frame_append(f, &b), &b, fd);
}

static void send_request_error(tg_ipc_host_conn_t *c, uint64_t request_id,
                               const char *why) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  send_built(c, tg_ipc_request_error_append(request_id, why, &b), &b, -1);
}

int tg_ipc_reply_bytes(const tg_ipc_call_t *call, bool success, bool has_more,
                       const uint8_t *reply, size_t len, int fd) {
  tg_ipc_host_conn_t *c = call->conn;
  if (call->drop_reply || !tg_ipc_chan_is_open(&c->chan)) {
    if (fd >= 0) close(fd);
    return call->drop_reply ? 0 : -EPIPE;
  }
  Perfetto__Protos__IPCFrame__InvokeMethodReply r =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  r.has_success = 1;
  r.success = success;
  r.has_has_more = has_more;
  r.has_more = has_more;
  r.has_reply_proto = 1;
  r.reply_proto.data = (uint8_t *)reply;
  r.reply_proto.len = len;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = call->request_id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  f.msg_invoke_method_reply = &r;
  tg_buf_t b;
  tg_buf_init(&b, 0);
  int rv = tg_ipc_frame_append(&f, &b);
  if (rv == 0) {
    rv = tg_ipc_chan_send(&c->chan, tg_buf_begin(&b), tg_buf_size(&b), fd);
  } else if (fd >= 0) {
    close(fd);
  }
  tg_buf_free(&b);
  return rv;
}

int tg_ipc_reply(const tg_ipc_call_t *call, bool success, bool has_more,
                 const ProtobufCMessage *msg, int fd) {
  if (call->drop_reply || !tg_ipc_chan_is_open(&call->conn->chan))
    return tg_ipc_reply_bytes(call, success, has_more, NULL, 0, fd);
  uint8_t stack[1024];
  uint8_t *body = stack;
  size_t n = msg ? protobuf_c_message_get_packed_size(msg) : 0;
  if (n > sizeof(stack)) {
    body = malloc(n);
    if (!body) {
      if (fd >= 0) close(fd);
      return -ENOMEM;
    }
  }
  if (msg) protobuf_c_message_pack(msg, body);
  int rv = tg_ipc_reply_bytes(call, success, has_more, msg ? body : NULL, n,
                              fd);
  if (body != stack) free(body);
  return rv;
}

static void handle_bind(tg_ipc_host_conn_t *c, uint64_t request_id,
                        const char *name) {
  tg_ipc_host_t *h = c->host;
  Perfetto__Protos__IPCFrame__BindServiceReply reply =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo
      infos[64];
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *ptrs[64];
  reply.has_success = 1;
  reply.success = 0;
  for (size_t i = 0; name && i < h->n_services; i++) {
    const tg_ipc_service_def_t *s = &h->services[i];
    if (strcmp(s->name, name) != 0) continue;
    size_t nm = s->n_methods < 64 ? s->n_methods : 64;
    for (size_t m = 0; m < nm; m++) {
      Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo mi =
          PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__METHOD_INFO__INIT;
      mi.has_id = 1;
      mi.id = (uint32_t)(m + 1);
      mi.name = (char *)s->methods[m].name;
      infos[m] = mi;
      ptrs[m] = &infos[m];
    }
    reply.success = 1;
    reply.has_service_id = 1;
    reply.service_id = (uint32_t)(i + 1);
    reply.n_methods = nm;
    reply.methods = ptrs;
    c->bound |= 1u << i;
    break;
  }
  if (!reply.success)
    TG_INFO("ipc: conn %llu (pid %d) asked for unknown service '%s'",
            (unsigned long long)c->id, (int)c->chan.peer_pid,
            name ? name : "");
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = request_id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
  f.msg_bind_service_reply = &reply;
  send_frame(c, &f, -1);
}

static void handle_invoke(tg_ipc_host_conn_t *c, const tg_ipc_invoke_view_t *im) {
  tg_ipc_host_t *h = c->host;
  tg_ipc_call_t call = {.conn = c,
                        .request_id = im->request_id,
                        .drop_reply = im->drop_reply};
  uint32_t sid = im->service_id, mid = im->method_id;
  if (sid == 0 || sid > h->n_services || !(c->bound & (1u << (sid - 1)))) {
    h->stats.requests_unknown++;
    tg_ipc_reply(&call, false, false, NULL, -1);
    return;
  }
  const tg_ipc_service_def_t *s = &h->services[sid - 1];
  if (mid == 0 || mid > s->n_methods || !s->methods[mid - 1].fn) {
    h->stats.requests_unknown++;
    TG_INFO("ipc: conn %llu: %s method id %u is not supported",
            (unsigned long long)c->id, s->name, mid);
    tg_ipc_reply(&call, false, false, NULL, -1);
    return;
  }
  s->methods[mid - 1].fn(s->ctx, call, im->args, im->args_len);
}

static int on_frame(tg_ipc_chan_t *ch, const uint8_t *p, size_t n) {
  tg_ipc_host_conn_t *c = ch->data;
  /* Calls (a producer's CommitData is most frames) are read where they
   * lie; the rest, and a call of an unusual shape, by protobuf-c. */
  tg_ipc_invoke_view_t iv;
  if (tg_ipc_frame_read_invoke(p, n, &iv) == 1) {
    handle_invoke(c, &iv);
    return 0;
  }
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(p, n);
  if (!f) {
    c->host->stats.frames_undecodable++;
    TG_DEBUG("ipc: conn %llu: dropped an undecodable frame of %zu bytes",
             (unsigned long long)c->id, n);
    return 0;
  }
  uint64_t rid = f->request_id;
  switch (f->msg_case) {
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE:
      handle_bind(c, rid, f->msg_bind_service->service_name);
      break;
    case PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD: {
      const Perfetto__Protos__IPCFrame__InvokeMethod *im = f->msg_invoke_method;
      tg_ipc_invoke_view_t v = {
          .request_id = rid,
          .service_id = im->service_id,
          .method_id = im->method_id,
          .drop_reply = im->has_drop_reply && im->drop_reply,
          .args = im->has_args_proto ? im->args_proto.data : NULL,
          .args_len = im->has_args_proto ? im->args_proto.len : 0,
      };
      handle_invoke(c, &v);
      break;
    }
    case PERFETTO__PROTOS__IPCFRAME__MSG_SET_PEER_IDENTITY:
      /* Only meaningful on TCP; on a UNIX socket the kernel's SO_PEERCRED
       * is the identity, so a claimed one is ignored. */
      TG_DEBUG("ipc: conn %llu: ignoring SetPeerIdentity on a UNIX socket",
               (unsigned long long)c->id);
      break;
    default:
      c->host->stats.requests_unknown++;
      send_request_error(c, rid, "unknown frame kind");
      break;
  }
  tg_ipc_frame_free(f);
  return 0;
}

static void on_conn_closed(tg_ipc_chan_t *ch, int status) {
  tg_ipc_host_conn_t *c = ch->data;
  tg_ipc_host_t *h = c->host;
  if (status == -ENOBUFS) {
    h->stats.output_cap_disconnects++;
    TG_WARN("ipc: %s: disconnected conn %llu (pid %d, uid %d): more than "
            "%zu KiB of replies it did not read",
            h->path[0] ? h->path : "(abstract socket)",
            (unsigned long long)c->id, (int)ch->peer_pid, (int)ch->peer_uid,
            h->limits.output_hard_cap / 1024);
  } else if (status != 0 && status != TG_EPEER_CLOSED && !c->evicted)
    TG_INFO("ipc: conn %llu (pid %d) closed: %s", (unsigned long long)c->id,
            (int)ch->peer_pid, tg_strerror(status));
  for (size_t i = 0; i < h->n_services; i++)
    if ((c->bound & (1u << i)) && h->services[i].on_disconnect)
      h->services[i].on_disconnect(h->services[i].ctx, c);
  tg_list_remove(&c->node);
  h->n_conns--;
  if (c->evicted) h->n_evicting--;
  share_put(c->share);
  free(c);
  maybe_finish_close(h);
}

static void on_conn_drain(tg_ipc_chan_t *ch) {
  tg_ipc_host_conn_t *c = ch->data;
  tg_ipc_host_t *h = c->host;
  for (size_t i = 0; i < h->n_services && tg_ipc_chan_is_open(ch); i++)
    if ((c->bound & (1u << i)) && h->services[i].on_drain)
      h->services[i].on_drain(h->services[i].ctx, c);
}

static const tg_ipc_chan_cbs_t conn_cbs = {
    .on_frame = on_frame,
    .on_drain = on_conn_drain,
    .on_close = on_conn_closed,
};

/* Writes one line about a refused or evicted connection, within the
 * host's budget, after the count of those held back before it. */
static bool conn_line_allowed(tg_ipc_host_t *h) {
  uint64_t held = 0;
  if (!tg_line_limit_take(&h->conn_lines, uv_now(h->loop), CONN_LINES_BURST,
                          CONN_LINES_PER_S, &held))
    return false;
  if (held)
    TG_WARN("ipc: %s: %llu more lines about refused or evicted connections "
            "held back (at most %d a second after %d)",
            h->path[0] ? h->path : "(abstract socket)",
            (unsigned long long)held, CONN_LINES_PER_S, CONN_LINES_BURST);
  return true;
}

/* The connection of |share|'s user to close for another user's: one that
 * has bound no service (nothing depends on it yet), the oldest first;
 * else the newest, which has the least tracing state behind it. */
static tg_ipc_host_conn_t *pick_victim(tg_ipc_host_t *h, uid_share_t *share) {
  tg_ipc_host_conn_t *newest = NULL;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &h->conns) {
    tg_ipc_host_conn_t *c = TG_CONTAINER_OF(it, tg_ipc_host_conn_t, node);
    if (c->share != share || !tg_ipc_chan_is_open(&c->chan)) continue;
    if (!c->bound) return c;
    newest = c;
  }
  return newest;
}

/* At the limit: makes room for a connection from |cr|'s user by evicting
 * one of the user holding the most, if that user holds at least two more
 * (so the two end at most one apart, and nobody is evicted for a user
 * who already has as many). Returns false when the new one is refused. */
static bool make_room(tg_ipc_host_t *h, const struct ucred *cr) {
  const char *path = h->path[0] ? h->path : "(abstract socket)";
  uid_share_t *mine = share_find(h, cr->uid), *top = NULL;
  size_t have = mine ? mine->conns : 0;
  if (h->share_by_uid) {
    tg_list_t *it, *tmp;
    tg_list_foreach_safe(it, tmp, &h->shares) {
      uid_share_t *s = TG_CONTAINER_OF(it, uid_share_t, node);
      if (!top || s->conns > top->conns) top = s;
    }
  }
  tg_ipc_host_conn_t *victim =
      top && top->conns >= have + 2 ? pick_victim(h, top) : NULL;
  if (!victim) {
    h->stats.connections_refused++;
    if (conn_line_allowed(h))
      TG_WARN("ipc: %s: refused a connection from pid %d (uid %d): %zu "
              "connections already, %zu of them that user's",
              path, (int)cr->pid, (int)cr->uid, h->max_conns, have);
    return false;
  }
  h->stats.connections_evicted++;
  if (conn_line_allowed(h))
    TG_WARN("ipc: %s: closed conn %llu (pid %d, uid %d, holding %zu of "
            "%zu) for a connection from pid %d (uid %d, holding %zu)",
            path, (unsigned long long)victim->id, (int)victim->chan.peer_pid,
            (int)top->uid, top->conns, h->max_conns, (int)cr->pid,
            (int)cr->uid, have);
  victim->evicted = true;
  h->n_evicting++;
  share_put(victim->share);
  victim->share = NULL;
  tg_ipc_host_conn_close(victim, -EUSERS);
  return true;
}

static void on_listen_readable(uv_poll_t *p, int status, int events) {
  (void)events;
  tg_ipc_host_t *h = p->data;
  if (status < 0) return;
  for (int i = 0; i < 64; i++) {
    int fd = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
        TG_WARN("ipc: accept on %s: %s", h->path, strerror(errno));
      return;
    }
    /* The kernel's word on who connected; unknown is a user of its own. */
    struct ucred cr;
    socklen_t crlen = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0)
      cr = (struct ucred){.pid = -1, .uid = (uid_t)-1, .gid = (gid_t)-1};
    /* Allocated first: nobody is evicted for a connection that then
     * could not be kept. */
    tg_ipc_host_conn_t *c = calloc(1, sizeof(*c));
    if (!c || (h->n_conns - h->n_evicting >= h->max_conns &&
               !make_room(h, &cr))) {
      free(c);
      close(fd);
      continue;
    }
    c->host = h;
    c->id = ++h->next_conn_id;
    tg_list_init(&c->node);
    c->share = share_get(h, cr.uid);
    if (!c->share) {
      free(c);
      close(fd);
      continue;
    }
    if (tg_ipc_chan_open(h->loop, &c->chan, fd, &conn_cbs, c) < 0) {
      share_put(c->share);
      free(c);
      continue;
    }
    tg_ipc_chan_limit_output(&c->chan, h->limits.input_hold,
                             h->limits.output_hard_cap);
    tg_list_insert_tail(&h->conns, &c->node);
    h->n_conns++;
    h->stats.connections_accepted++;
  }
}

/* Is something listening on |sa|? Used to tell a live service from a stale
 * socket file left behind by a crash. */
static bool someone_listens(const struct sockaddr_un *sa, socklen_t len) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool live = connect(fd, (const struct sockaddr *)sa, len) == 0;
  close(fd);
  return live;
}

int tg_ipc_host_listen(uv_loop_t *loop, const char *addr, mode_t mode,
                       const tg_ipc_service_def_t *services, size_t n,
                       size_t max_conns, tg_ipc_host_t **out) {
  if (n > MAX_SERVICES) return -EINVAL;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  size_t len = strlen(addr);
  socklen_t salen;
  bool abstract = addr[0] == '@';
  if (abstract) {
    if (len > sizeof(sa.sun_path)) return -ENAMETOOLONG;
    memcpy(sa.sun_path + 1, addr + 1, len - 1);
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
  } else {
    if (len == 0 || len >= sizeof(sa.sun_path)) return -ENAMETOOLONG;
    memcpy(sa.sun_path, addr, len);
    salen = (socklen_t)sizeof(sa);
    struct stat st;
    if (lstat(addr, &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) return -EEXIST;
      if (someone_listens(&sa, salen)) return -EADDRINUSE;
      TG_INFO("ipc: removing stale socket %s", addr);
      unlink(addr);
    }
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  int err;
  if (bind(fd, (struct sockaddr *)&sa, salen) < 0) {
    err = -errno;
    goto fail;
  }
  if (!abstract && chmod(addr, mode) < 0) {
    err = -errno;
    unlink(addr);
    goto fail;
  }
  if (listen(fd, 128) < 0) {
    err = -errno;
    goto fail_unlink;
  }
  tg_ipc_host_t *h = calloc(1, sizeof(*h));
  if (!h) {
    err = -ENOMEM;
    goto fail_unlink;
  }
  h->loop = loop;
  h->listen_fd = fd;
  if (!abstract) memcpy(h->path, addr, len + 1);
  h->services = services;
  h->n_services = n;
  h->max_conns = max_conns ? max_conns : 1024;
  h->limits.input_hold = TG_IPC_HOST_INPUT_HOLD;
  h->limits.output_hard_cap = TG_IPC_HOST_OUTPUT_HARD_CAP;
  tg_list_init(&h->conns);
  tg_list_init(&h->shares);
  err = uv_poll_init(loop, &h->listen_poll, fd);
  if (err < 0) {
    free(h);
    goto fail_unlink;
  }
  h->listen_poll.data = h;
  uv_poll_start(&h->listen_poll, UV_READABLE, on_listen_readable);
  *out = h;
  return 0;

fail_unlink:
  if (!abstract) unlink(addr);
fail:
  close(fd);
  return err;
}

static void on_listener_closed(uv_handle_t *hd) {
  tg_ipc_host_t *h = hd->data;
  close(h->listen_fd);
  h->listener_closed = true;
  maybe_finish_close(h);
}

void tg_ipc_host_close(tg_ipc_host_t *h, void (*done)(void *), void *arg) {
  if (h->closing) return;
  h->closing = true;
  h->done = done;
  h->done_arg = arg;
  if (h->path[0]) unlink(h->path);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &h->conns) {
    tg_ipc_host_conn_t *c = TG_CONTAINER_OF(it, tg_ipc_host_conn_t, node);
    tg_ipc_chan_close(&c->chan, 0);
  }
  uv_poll_stop(&h->listen_poll);
  uv_close((uv_handle_t *)&h->listen_poll, on_listener_closed);
}

const tg_ipc_host_stats_t *tg_ipc_host_stats(const tg_ipc_host_t *h) {
  return &h->stats;
}

void tg_ipc_host_share_by_uid(tg_ipc_host_t *h, bool on) {
  h->share_by_uid = on;
}

void tg_ipc_host_conn_close(tg_ipc_host_conn_t *conn, int status) {
  tg_ipc_chan_close(&conn->chan, status);
}
