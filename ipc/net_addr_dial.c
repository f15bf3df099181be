/* Resolve, then connect to each address in turn; see ipc/net_addr_dial.h.
 *
 * One socket per attempt: a socket whose connect failed cannot be reused,
 * and the next address may be of another family.
 *
 * An address written as numbers skips the resolver: getaddrinfo() would
 * only parse it, yet the call costs a round through libuv's thread pool
 * (two thread wakeups) and, with AI_ADDRCONFIG, a netlink query of the
 * machine's addresses; a collector dialling a thousand hosts by address
 * paid that a thousand times. */
#include "ipc/net_addr_dial.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "common/log.h"

struct tg_net_dial {
  uv_loop_t *loop;
  tg_net_dial_cb on_dialed;
  void *data;
  uv_getaddrinfo_t gai;
  uv_connect_t conn;
  uv_tcp_t tcp;
  bool tcp_open;  /* tcp initialised, its close callback yet to run */
  bool canceled;
  bool reported;  /* on_dialed has run */
  bool resolver;  /* the name went to the resolver (not a literal) */
  struct addrinfo *ai_list, *ai_next;
  int last_err;   /* the last failed connect, for the final report */
  char name[TG_NET_ADDR_STRLEN]; /* what was asked, for logs */
  char addr[TG_NET_ADDR_STRLEN]; /* the address being tried */
  char why[TG_NET_ADDR_STRLEN + 64];
};

static void set_why(tg_net_dial_t *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_why(tg_net_dial_t *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->why, sizeof(d->why), fmt, ap);
  va_end(ap);
}

static void free_dial(tg_net_dial_t *d) {
  if (d->ai_list) uv_freeaddrinfo(d->ai_list);
  free(d);
}

static void on_final_close(uv_handle_t *h) { free_dial(h->data); }

/* Runs on_dialed once, then releases everything, the socket last. */
static void report(tg_net_dial_t *d, int status, int fd) {
  d->reported = true;
  d->on_dialed(d, status, fd);
  if (d->tcp_open) {
    d->tcp_open = false;
    uv_close((uv_handle_t *)&d->tcp, on_final_close);
    return;
  }
  free_dial(d);
}

static void try_next(tg_net_dial_t *d);

static void on_retry_closed(uv_handle_t *h) {
  tg_net_dial_t *d = h->data;
  d->tcp_open = false;
  if (d->canceled) {
    report(d, UV_ECANCELED, -1);
    return;
  }
  try_next(d);
}

/* Closes the failed attempt's socket and goes on with the next address, or
 * reports |err| when there is none. */
static void attempt_failed(tg_net_dial_t *d, int err) {
  d->last_err = err;
  if (!d->ai_next) {
    set_why(d, "cannot connect: %s", uv_strerror(err));
    report(d, err, -1);
    return;
  }
  TG_DEBUG("dial %s: %s: %s; trying the next address", d->name, d->addr,
           uv_strerror(err));
  uv_close((uv_handle_t *)&d->tcp, on_retry_closed);
}

static void on_connected(uv_connect_t *req, int status) {
  tg_net_dial_t *d = req->data;
  if (d->canceled) return; /* UV_ECANCELED: the close callback reports */
  if (status < 0) {
    attempt_failed(d, status);
    return;
  }
  /* Hand over a duplicate: this handle is closed (with its own
   * descriptor) after the callback, the socket lives on in the copy. */
  uv_os_fd_t fd = -1;
  int rv = uv_fileno((uv_handle_t *)&d->tcp, &fd);
  int dup_fd = rv == 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  if (dup_fd < 0) {
    rv = rv < 0 ? rv : -errno;
    set_why(d, "cannot take the socket: %s", uv_strerror(rv));
    report(d, rv, -1);
    return;
  }
  report(d, 0, dup_fd);
}

static void try_next(tg_net_dial_t *d) {
  while (d->ai_next) {
    struct addrinfo *ai = d->ai_next;
    d->ai_next = ai->ai_next;
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    tg_net_sockaddr_format(ai->ai_addr, d->addr, sizeof(d->addr));
    int rv = uv_tcp_init(d->loop, &d->tcp);
    if (rv < 0) {
      set_why(d, "uv_tcp_init: %s", uv_strerror(rv));
      report(d, rv, -1);
      return;
    }
    d->tcp.data = d;
    d->tcp_open = true;
    rv = uv_tcp_connect(&d->conn, &d->tcp, ai->ai_addr, on_connected);
    if (rv < 0) attempt_failed(d, rv);
    return;
  }
  int err = d->last_err ? d->last_err : UV_EAI_NONAME;
  set_why(d, "no usable address%s%s", d->last_err ? ": " : "",
          d->last_err ? uv_strerror(d->last_err) : "");
  report(d, err, -1);
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res) {
  tg_net_dial_t *d = req->data;
  d->ai_list = d->ai_next = res;
  if (d->canceled) {
    report(d, UV_ECANCELED, -1);
    return;
  }
  if (status < 0) {
    set_why(d, "cannot resolve: %s", uv_strerror(status));
    report(d, status, -1);
    return;
  }
  try_next(d);
}

/* |host| as getaddrinfo() reads a numeric host: inet_aton()'s IPv4 forms
 * (127.1, 0x7f.0.0.1, ...), or an IPv6 address without a scope (those go
 * to the resolver, which knows the interface names). */
static bool parse_literal(const char *host, uint16_t port,
                          struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof(*ss));
  struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
  if (inet_aton(host, &in4->sin_addr)) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    return true;
  }
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    return true;
  }
  return false;
}

/* A literal's connect refused at once (no callback will come): reported
 * from the loop once the socket is closed, as the contract wants. */
static void on_refused_closed(uv_handle_t *h) {
  tg_net_dial_t *d = h->data;
  d->tcp_open = false;
  report(d, d->canceled ? UV_ECANCELED : d->last_err, -1);
}

static int dial_literal(tg_net_dial_t *d, const struct sockaddr *sa) {
  tg_net_sockaddr_format(sa, d->addr, sizeof(d->addr));
  int rv = uv_tcp_init(d->loop, &d->tcp);
  if (rv < 0) return rv;
  d->tcp.data = d;
  d->tcp_open = true;
  rv = uv_tcp_connect(&d->conn, &d->tcp, sa, on_connected);
  if (rv < 0) {
    d->last_err = rv;
    set_why(d, "cannot connect: %s", uv_strerror(rv));
    uv_close((uv_handle_t *)&d->tcp, on_refused_closed);
  }
  return 0;
}

int tg_net_dial_start(uv_loop_t *loop, const tg_net_addr_t *addr,
                      tg_net_dial_cb on_dialed, void *data,
                      tg_net_dial_t **out) {
  *out = NULL;
  if (!loop || !addr || !on_dialed || !addr->host[0] ||
      !memchr(addr->host, 0, sizeof(addr->host)))
    return -EINVAL;
  tg_net_dial_t *d = calloc(1, sizeof(*d));
  if (!d) return -ENOMEM;
  d->loop = loop;
  d->on_dialed = on_dialed;
  d->data = data;
  d->gai.data = d->conn.data = d;
  tg_net_addr_format(addr, d->name, sizeof(d->name));
  struct sockaddr_storage literal;
  if (parse_literal(addr->host, addr->port, &literal)) {
    int rv = dial_literal(d, (const struct sockaddr *)&literal);
    if (rv < 0) {
      free(d);
      return rv;
    }
    *out = d;
    return 0;
  }
  char port[8];
  snprintf(port, sizeof(port), "%u", (unsigned)addr->port);
  struct addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
  d->resolver = true;
  int rv = uv_getaddrinfo(loop, &d->gai, on_resolved, addr->host, port, &hints);
  if (rv < 0) {
    free(d);
    return rv;
  }
  *out = d;
  return 0;
}

void tg_net_dial_cancel(tg_net_dial_t *d) {
  if (d->canceled || d->reported) return;
  d->canceled = true;
  if (!d->tcp_open) {
    /* Still resolving: on_resolved runs either way and reports. */
    uv_cancel((uv_req_t *)&d->gai);
    return;
  }
  /* Connecting: the connect ends with UV_ECANCELED, then on_retry_closed
   * reports. Already closing for a retry: on_retry_closed reports. */
  if (!uv_is_closing((uv_handle_t *)&d->tcp))
    uv_close((uv_handle_t *)&d->tcp, on_retry_closed);
}

void *tg_net_dial_data(const tg_net_dial_t *d) { return d->data; }

const char *tg_net_dial_addr(const tg_net_dial_t *d) { return d->addr; }

const char *tg_net_dial_error(const tg_net_dial_t *d) { return d->why; }
bool tg_net_dial_resolved(const tg_net_dial_t *d) { return d->resolver; }

/* --- dead links ------------------------------------------------------------ */

static int set_int(int fd, int level, int name, int v) {
  return setsockopt(fd, level, name, &v, sizeof(v)) < 0 ? -errno : 0;
}

int tg_net_set_dead_link_timeout(int fd, unsigned timeout_s) {
  if (timeout_s == 0) return 0;
  if (timeout_s > 86400) timeout_s = 86400;
  /* Half of it idle, the other half probing: a second apart, so the last
   * probe still falls within the timeout (kernel units are seconds). */
  int idle = (int)(timeout_s / 2 ? timeout_s / 2 : 1);
  int rest = (int)timeout_s - idle;
  int intvl = rest / 3 > 1 ? rest / 3 : 1;
  int cnt = rest / intvl > 1 ? rest / intvl : 1;
  int rv = set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
  if (rv == 0) rv = set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle);
  if (rv == 0) rv = set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, intvl);
  if (rv == 0) rv = set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, cnt);
  if (rv == 0)
    rv = set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, (int)(timeout_s * 1000));
  if (rv < 0) TG_WARN("cannot set the dead-link timeout on socket %d: %s", fd,
                      strerror(-rv));
  return rv;
}
