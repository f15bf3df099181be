/* tracegate-emit --rpc-client: one thread, one connection, one call at a
 * time (rpc.h, rpc_wire.h). A connection that fails (refused, reset, an
 * answer that is late, garbage or out of turn) is closed and made again
 * after a backoff; the calls it failed are counted, never retried. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
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

#define NS_PER_MS UINT64_C(1000000)
#define CONNECT_TIMEOUT_MS 2000
/* An answer later than this fails its call (and its connection). */
#define CALL_TIMEOUT_MS 5000
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 1000
/* The longest the thread goes without looking at sh->quit. */
#define SLICE_MS 10

typedef struct conn_state {
  int fd; /* -1: not connected */
  unsigned backoff_ms;
  uint64_t next_attempt_ns;
  bool failing; /* the last attempt failed: said once per streak */
} conn_state_t;

int emit_rpc_client_init(emit_rpc_client_t *c, emit_shared_t *sh,
                         const char *target) {
  memset(c, 0, sizeof(*c));
  c->sh = sh;
  tg_net_addr_t a;
  if (tg_net_addr_parse(target, 0, 0, &a) < 0) {
    TG_ERROR("--rpc-client %s: not host:port or [v6]:port", target);
    return -EINVAL;
  }
  snprintf(c->host, sizeof(c->host), "%s", a.host);
  snprintf(c->port, sizeof(c->port), "%u", (unsigned)a.port);
  return 0;
}

static bool quitting(const emit_rpc_client_t *c) {
  return atomic_load_explicit(&c->sh->quit, memory_order_relaxed);
}

/* Waits for |events| on |fd| up to |timeout_ms|, looking at sh->quit
 * every SLICE_MS. Returns 1 when ready, 0 on timeout or quit, -errno. */
static int wait_fd(const emit_rpc_client_t *c, int fd, short events,
                   int timeout_ms) {
  uint64_t end = emit_now_ns() + (uint64_t)timeout_ms * NS_PER_MS;
  while (!quitting(c)) {
    uint64_t now = emit_now_ns();
    if (now >= end) return 0;
    uint64_t left_ms = (end - now) / NS_PER_MS + 1;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, left_ms < SLICE_MS ? (int)left_ms : SLICE_MS);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -errno;
  }
  return 0;
}

/* One connected socket to any address |c|'s host resolves to, or -errno
 * (-EAI names are folded into -EHOSTUNREACH). */
static int dial(const emit_rpc_client_t *c) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int g = getaddrinfo(c->host, c->port, &hints, &res);
  if (g != 0) return g == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
  int err = -EHOSTUNREACH;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
    if (fd < 0) {
      err = -errno;
      continue;
    }
    int rv = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : -errno;
    if (rv == -EINPROGRESS) {
      int w = wait_fd(c, fd, POLLOUT, CONNECT_TIMEOUT_MS);
      int soerr = 0;
      socklen_t sl = sizeof(soerr);
      if (w <= 0)
        rv = w < 0 ? w : -ETIMEDOUT;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        rv = -errno;
      else
        rv = -soerr;
    }
    if (rv == 0) {
      int one = 1;
      (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      freeaddrinfo(res);
      return fd;
    }
    err = rv;
    close(fd);
  }
  freeaddrinfo(res);
  return err;
}

/* Connects unless the backoff says not yet (then sleeps a little).
 * Returns whether st->fd is connected. */
static bool connect_step(emit_rpc_client_t *c, conn_state_t *st) {
  uint64_t now = emit_now_ns();
  if (now < st->next_attempt_ns) {
    uint64_t until = st->next_attempt_ns;
    if (until > now + SLICE_MS * NS_PER_MS) until = now + SLICE_MS * NS_PER_MS;
    emit_sleep_until(until);
    return false;
  }
  int fd = dial(c);
  if (fd >= 0) {
    st->fd = fd;
    st->backoff_ms = BACKOFF_MIN_MS;
    if (st->failing) TG_INFO("--rpc-client: connected to %s:%s", c->host, c->port);
    st->failing = false;
    atomic_fetch_add(&c->connects, 1);
    return true;
  }
  atomic_fetch_add(&c->connect_failures, 1);
  if (!st->failing)
    TG_WARN("--rpc-client: cannot connect to %s:%s: %s (trying again, "
            "backing off to %u ms)",
            c->host, c->port, strerror(-fd), BACKOFF_MAX_MS);
  st->failing = true;
  st->next_attempt_ns = emit_now_ns() + st->backoff_ms * NS_PER_MS;
  st->backoff_ms = st->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                       : st->backoff_ms * 2;
  return false;
}

static bool send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      /* A request is far smaller than any socket buffer: a full one
       * means the server stopped reading. */
      return false;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* The answer to the call just sent: EMIT_RPC_RESP_OK, _ERROR, or _BAD for
 * anything else (no answer in time, a closed connection, garbage, or
 * more bytes than the one answer: the server spoke out of turn). */
static emit_rpc_resp_t read_answer(const emit_rpc_client_t *c, int fd) {
  uint8_t buf_untrusted[EMIT_RPC_LINE_MAX];
  size_t have = 0;
  uint64_t end = emit_now_ns() + CALL_TIMEOUT_MS * NS_PER_MS;
  for (;;) {
    uint64_t now = emit_now_ns();
    if (now >= end) return EMIT_RPC_RESP_BAD;
    int w = wait_fd(c, fd, POLLIN, (int)((end - now) / NS_PER_MS) + 1);
    if (w <= 0) return EMIT_RPC_RESP_BAD;
    ssize_t r = recv(fd, buf_untrusted + have, sizeof(buf_untrusted) - have,
                     MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      continue;
    if (r <= 0) return EMIT_RPC_RESP_BAD;
    have += (size_t)r;
    size_t used = 0;
    emit_rpc_pong_t pong;
    emit_rpc_resp_t k =
        emit_rpc_parse_response(buf_untrusted, have, &used, &pong);
    if (k == EMIT_RPC_RESP_MORE) continue;
    if (k == EMIT_RPC_RESP_PONG || used != have) return EMIT_RPC_RESP_BAD;
    return k;
  }
}

/* The next attempt after the backoff, which a connection made reset to
 * its minimum: a server that drops every call is not hammered. */
static void disconnect(conn_state_t *st) {
  if (st->fd >= 0) close(st->fd);
  st->fd = -1;
  st->next_attempt_ns = emit_now_ns() + st->backoff_ms * NS_PER_MS;
}

static void call_once(emit_rpc_client_t *c, conn_state_t *st) {
  atomic_fetch_add(&c->calls, 1);
  tg_trace_context_t ctx;
  int rv = tg_trace_context_new(&ctx);
  if (rv < 0) {
    TG_WARN("--rpc-client: no trace context: %s", strerror(-rv));
    atomic_fetch_add(&c->failed, 1);
    return;
  }
  if (tg_category_enabled(&emit_rpc_cat)) ctx.flags |= TG_TRACE_FLAG_SAMPLED;
  char tp[TG_TRACEPARENT_BUF], line[EMIT_RPC_CALL_BUF];
  tg_traceparent_format(&ctx, tp);
  size_t n = emit_rpc_format_call(&ctx, line);
  uint64_t id = tg_flow_id_from_context(ctx.trace_id, ctx.parent_id);
  TG_SLICE_BEGIN(emit_rpc_cat, "rpc.call", TG_FLOW(id),
                 TG_ARG_STR("traceparent", tp));
  emit_rpc_resp_t k =
      send_all(st->fd, line, n) ? read_answer(c, st->fd) : EMIT_RPC_RESP_BAD;
  TG_SLICE_END(emit_rpc_cat);
  if (k == EMIT_RPC_RESP_OK) {
    atomic_fetch_add(&c->ok, 1);
    return;
  }
  atomic_fetch_add(&c->failed, 1);
  /* "error" leaves the framing whole; anything else does not. */
  if (k != EMIT_RPC_RESP_ERROR) disconnect(st);
}

/* Calls while the category stays on; --count bounds the calls of one
 * session, after which it waits for the next. */
static void run_session(emit_rpc_client_t *c, conn_state_t *st) {
  emit_shared_t *sh = c->sh;
  const emit_opts_t *o = sh->opts;
  uint64_t t0 = emit_now_ns(), expected = 0;
  atomic_compare_exchange_strong(&sh->first_start_ns, &expected, t0);
  /* Pacing counts from t0 and the calls made by then (base); both move
   * on a reconnect, so that an outage is not made up in a burst. */
  uint64_t sent = 0, base = 0;
  while (!quitting(c) && emit_active(sh)) {
    if (o->count && sent >= o->count) {
      while (!quitting(c) && emit_active(sh)) emit_idle_wait(sh, 5);
      return;
    }
    if (st->fd < 0) {
      if (!connect_step(c, st)) continue;
      t0 = emit_now_ns();
      base = sent;
    }
    if (o->rate) {
      uint64_t now = emit_now_ns();
      if (base + emit_units_due(now - t0, o->rate) <= sent) {
        uint64_t next = t0 + emit_unit_time(sent - base + 1, o->rate);
        if (next > now + SLICE_MS * NS_PER_MS)
          next = now + SLICE_MS * NS_PER_MS;
        emit_sleep_until(next);
        continue;
      }
    }
    call_once(c, st);
    sent++;
  }
}

static void *client_main(void *arg) {
  emit_rpc_client_t *c = arg;
  conn_state_t st = {.fd = -1, .backoff_ms = BACKOFF_MIN_MS};
  while (!quitting(c)) {
    if (emit_active(c->sh)) {
      run_session(c, &st);
      continue;
    }
    emit_idle_wait(c->sh, 20);
  }
  disconnect(&st);
  return NULL;
}

int emit_rpc_client_start(emit_rpc_client_t *c) {
  return -pthread_create(&c->thread, NULL, client_main, c);
}

void emit_rpc_client_stop(emit_rpc_client_t *c) {
  pthread_join(c->thread, NULL);
}

void emit_rpc_client_counts(const emit_rpc_client_t *c, char *out,
                            size_t cap) {
  snprintf(out, cap,
           "rpc: calls=%llu ok=%llu failed=%llu connects=%llu "
           "connect_failures=%llu",
           (unsigned long long)atomic_load(&c->calls),
           (unsigned long long)atomic_load(&c->ok),
           (unsigned long long)atomic_load(&c->failed),
           (unsigned long long)atomic_load(&c->connects),
           (unsigned long long)atomic_load(&c->connect_failures));
}
