/* tracegate-emit --rpc-server: one thread polls the listener and up to
 * EMIT_RPC_MAX_CONNS connections, answering each request line (rpc.h,
 * rpc_wire.h). What a connection sends is untrusted: a line that is no
 * request is counted and answered "error"; a line past the maximum, or
 * one cut short by the peer, is counted and its connection closed. Nothing
 * a peer sends stops the server or the other connections. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/emit/rpc.h"
#include "agent/emit/rpc_wire.h"
#include "common/log.h"
#include "ipc/net_addr.h"
#include "tracegate/trace_context.h"

/* How often the thread looks at sh->quit and at the category. */
#define POLL_MS 20

TG_CATEGORY(emit_rpc_cat, "rpc");

int emit_rpc_register_category(void) {
  static tg_category_t *const cats[] = {&emit_rpc_cat};
  return tg_track_event_register(cats, 1);
}

typedef struct conn {
  int fd; /* -1: the slot is free */
  size_t have;
  uint8_t buf_untrusted[EMIT_RPC_LINE_MAX];
} conn_t;

int emit_rpc_server_open(emit_rpc_server_t *s, emit_shared_t *sh,
                         const char *bind_addr, uint16_t port) {
  memset(s, 0, sizeof(*s));
  s->sh = sh;
  s->listen_fd = -1;
  tg_net_addr_t a;
  struct sockaddr_storage ss;
  if (tg_net_addr_parse(bind_addr, TG_NET_ADDR_PORT_OPTIONAL, 0, &a) < 0 ||
      a.port != 0) {
    TG_ERROR("--rpc-bind %s: not an address without a port", bind_addr);
    return -EINVAL;
  }
  a.port = port;
  if (tg_net_addr_to_sockaddr(&a, &ss) < 0) {
    TG_ERROR("--rpc-bind %s: not a numeric IPv4 or IPv6 address", bind_addr);
    return -EINVAL;
  }
  socklen_t sl = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                          : sizeof(struct sockaddr_in);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) goto fail;
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 64) < 0)
    goto fail;
  sl = sizeof(ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) goto fail;
  s->port = ntohs(ss.ss_family == AF_INET6
                      ? ((struct sockaddr_in6 *)&ss)->sin6_port
                      : ((struct sockaddr_in *)&ss)->sin_port);
  s->listen_fd = fd;
  return 0;
fail:;
  int err = -errno;
  TG_ERROR("--rpc-server: cannot listen on %s port %u: %s", bind_addr,
           (unsigned)port, strerror(errno));
  if (fd >= 0) close(fd);
  return err;
}

/* Whole or not at all: the answers are a few bytes and the protocol has
 * one in flight, so a socket buffer that cannot take one belongs to a
 * peer that does not read them. */
static bool reply(conn_t *c, const char *msg, size_t n) {
  ssize_t w = send(c->fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  return w == (ssize_t)n;
}

static void conn_close(conn_t *c) {
  close(c->fd);
  c->fd = -1;
  c->have = 0;
}

static bool serve_call(emit_rpc_server_t *s, conn_t *c,
                       const tg_trace_context_t *ctx) {
  uint64_t id = tg_flow_id_from_context(ctx->trace_id, ctx->parent_id);
  char tp[TG_TRACEPARENT_BUF];
  tg_traceparent_format(ctx, tp);
  TG_SLICE_BEGIN(emit_rpc_cat, "rpc.serve", TG_TERMINATING_FLOW(id),
                 TG_ARG_STR("traceparent", tp));
  bool sent = reply(c, "ok\n", 3);
  TG_SLICE_END(emit_rpc_cat);
  /* After the slice ended: a ping that reports N served implies N whole
   * slices. */
  if (sent) atomic_fetch_add(&s->served, 1);
  return sent;
}

static bool serve_ping(emit_rpc_server_t *s, conn_t *c) {
  emit_rpc_pong_t p = {
      .recording = tg_category_enabled(&emit_rpc_cat),
      .served = atomic_load(&s->served),
      .malformed = atomic_load(&s->malformed),
  };
  char line[EMIT_RPC_LINE_MAX];
  size_t n = emit_rpc_format_pong(&p, line, sizeof(line));
  atomic_fetch_add(&s->pings, 1);
  return reply(c, line, n);
}

/* Answers every whole request in |c|'s buffer. Returns false when the
 * connection is to close. */
static bool drain_requests(emit_rpc_server_t *s, conn_t *c) {
  for (;;) {
    size_t used = 0;
    tg_trace_context_t ctx;
    bool ok = true;
    switch (emit_rpc_parse_request(c->buf_untrusted, c->have, &used, &ctx)) {
      case EMIT_RPC_REQ_MORE:
        return true;
      case EMIT_RPC_REQ_CALL:
        ok = serve_call(s, c, &ctx);
        break;
      case EMIT_RPC_REQ_PING:
        ok = serve_ping(s, c);
        break;
      case EMIT_RPC_REQ_BAD:
        atomic_fetch_add(&s->malformed, 1);
        ok = reply(c, "error\n", 6);
        break;
      case EMIT_RPC_REQ_OVERLONG:
        atomic_fetch_add(&s->malformed, 1);
        (void)reply(c, "error\n", 6);
        return false;
    }
    if (!ok) return false;
    /* used <= have: the parser counts only bytes it was given. */
    memmove(c->buf_untrusted, c->buf_untrusted + used, c->have - used);
    c->have -= used;
  }
}

static void on_readable(emit_rpc_server_t *s, conn_t *c) {
  /* have < EMIT_RPC_LINE_MAX here: a full buffer without a line was
   * OVERLONG and closed. */
  ssize_t r = recv(c->fd, c->buf_untrusted + c->have,
                   sizeof(c->buf_untrusted) - c->have, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (r <= 0) {
    /* The peer left (or reset) in the middle of a request. */
    if (c->have > 0) atomic_fetch_add(&s->malformed, 1);
    conn_close(c);
    return;
  }
  c->have += (size_t)r;
  if (!drain_requests(s, c)) conn_close(c);
}

static void accept_one(emit_rpc_server_t *s, conn_t *conns, size_t *n) {
  int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    /* EAGAIN (the peer gave up), or EMFILE and the like: the listener is
     * looked at again on the next round. */
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED)
      TG_WARN("--rpc-server: accept: %s", strerror(errno));
    return;
  }
  if (*n == EMIT_RPC_MAX_CONNS) {
    atomic_fetch_add(&s->refused, 1);
    close(fd);
    return;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  conns[*n].fd = fd;
  conns[*n].have = 0;
  (*n)++;
  atomic_fetch_add(&s->conns, 1);
}

static void mark_started(emit_shared_t *sh) {
  uint64_t expected = 0;
  atomic_compare_exchange_strong(&sh->first_start_ns, &expected,
                                 emit_now_ns());
}

static void *server_main(void *arg) {
  emit_rpc_server_t *s = arg;
  conn_t conns[EMIT_RPC_MAX_CONNS];
  struct pollfd pfd[1 + EMIT_RPC_MAX_CONNS];
  size_t n = 0;
  while (!atomic_load(&s->sh->quit)) {
    if (tg_category_enabled(&emit_rpc_cat)) mark_started(s->sh);
    pfd[0] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
    for (size_t i = 0; i < n; i++)
      pfd[1 + i] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
    int r = poll(pfd, 1 + n, POLL_MS);
    if (r < 0) {
      if (errno != EINTR) {
        TG_ERROR("--rpc-server: poll: %s", strerror(errno));
        break;
      }
      continue;
    }
    /* The connections polled are conns[0..polled); an accepted one is
     * appended after them and first polled on the next round. */
    size_t polled = n;
    for (size_t i = 0; i < polled; i++)
      if (pfd[1 + i].revents) on_readable(s, &conns[i]);
    if (pfd[0].revents & POLLIN) accept_one(s, conns, &n);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
      if (conns[i].fd >= 0) conns[kept++] = conns[i];
    n = kept;
  }
  for (size_t i = 0; i < n; i++) conn_close(&conns[i]);
  return NULL;
}

int emit_rpc_server_start(emit_rpc_server_t *s) {
  int rv = pthread_create(&s->thread, NULL, server_main, s);
  return -rv;
}

void emit_rpc_server_close(emit_rpc_server_t *s) {
  if (s->listen_fd >= 0) close(s->listen_fd);
  s->listen_fd = -1;
}

void emit_rpc_server_stop(emit_rpc_server_t *s) {
  pthread_join(s->thread, NULL);
  emit_rpc_server_close(s);
}

void emit_rpc_server_counts(const emit_rpc_server_t *s, char *out,
                            size_t cap) {
  snprintf(out, cap,
           "rpc: served=%llu malformed=%llu pings=%llu connections=%llu "
           "refused=%llu",
           (unsigned long long)atomic_load(&s->served),
           (unsigned long long)atomic_load(&s->malformed),
           (unsigned long long)atomic_load(&s->pings),
           (unsigned long long)atomic_load(&s->conns),
           (unsigned long long)atomic_load(&s->refused));
}
