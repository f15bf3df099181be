/* The fault-injecting proxy (fault_proxy.h): one thread, poll(2) over
 * non-blocking sockets, a bounded buffer per direction of each
 * connection; commands come through a pipe and are acknowledged through
 * a condition variable. */
#include "fault_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 16
#define BUF_SIZE (256 * 1024)

enum { MODE_PASS, MODE_STALL, MODE_HOLD_DOWN };

/* One direction: bytes read from |from| not yet written to |to|. */
typedef struct dir {
  int from, to;
  uint8_t *buf;
  size_t off, len;
  bool eof; /* |from| is gone; what is held still goes out on resume */
} dir_t;

typedef struct pair {
  int cli, up;
  dir_t d[2]; /* [0] client -> target, [1] target -> client */
} pair_t;

struct tg_fault_proxy {
  int listen_fd, port, target_port;
  int wake[2];
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* Under mu. */
  char cmd;      /* pending command, 0 when none */
  unsigned done; /* commands carried out */
  unsigned accepted, open;
  uint64_t down;
  uint64_t held; /* target -> client bytes held in the proxy now */
  /* The thread's own. */
  int mode;
  pair_t pairs[MAX_PAIRS];
  int n;
};

static void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void publish(tg_fault_proxy_t *p, unsigned accepted_add, uint64_t down_add) {
  uint64_t held = 0;
  for (int i = 0; i < p->n; i++) held += p->pairs[i].d[1].len;
  pthread_mutex_lock(&p->mu);
  p->accepted += accepted_add;
  p->down += down_add;
  p->held = held;
  p->open = (unsigned)p->n;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static void pair_close(tg_fault_proxy_t *p, int i, bool rst) {
  pair_t *pr = &p->pairs[i];
  if (rst) {
    struct linger lg = {1, 0}; /* close() sends an RST */
    setsockopt(pr->cli, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    setsockopt(pr->up, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  }
  close(pr->cli);
  close(pr->up);
  free(pr->d[0].buf);
  free(pr->d[1].buf);
  p->pairs[i] = p->pairs[p->n - 1];
  p->n--;
}

static void accept_one(tg_fault_proxy_t *p) {
  int c = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
  if (c < 0) return;
  int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)p->target_port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  /* Loopback: a blocking connect is immediate. */
  if (u < 0 || p->n == MAX_PAIRS ||
      connect(u, (struct sockaddr *)&a, sizeof(a)) < 0) {
    close(c);
    if (u >= 0) close(u);
    return;
  }
  set_nonblock(c);
  set_nonblock(u);
  int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  pair_t *pr = &p->pairs[p->n];
  memset(pr, 0, sizeof(*pr));
  pr->cli = c;
  pr->up = u;
  pr->d[0] = (dir_t){c, u, malloc(BUF_SIZE), 0, 0, false};
  pr->d[1] = (dir_t){u, c, malloc(BUF_SIZE), 0, 0, false};
  if (!pr->d[0].buf || !pr->d[1].buf) {
    p->n++;
    pair_close(p, p->n - 1, true);
    return;
  }
  p->n++;
  publish(p, 1, 0);
}

/* Reads what it can into |d|'s buffer without forwarding it (hold down:
 * the proxy, not the kernel, holds the reply, so a test can tell it came).
 * A target that closes meanwhile is remembered, not passed on: the client
 * must not learn of it before the link comes back. */
static void fill(dir_t *d, short rev_from) {
  if (d->eof || !(rev_from & (POLLIN | POLLHUP | POLLERR)) || d->len == BUF_SIZE)
    return;
  if (d->off) { /* compact */
    memmove(d->buf, d->buf + d->off, d->len);
    d->off = 0;
  }
  ssize_t r = read(d->from, d->buf + d->len, BUF_SIZE - d->len);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) d->eof = true;
  if (r > 0) d->len += (size_t)r;
}

/* Moves what it can in one direction; false when a side is gone. */
static bool pump(dir_t *d, short rev_from, short rev_to, uint64_t *moved) {
  if (!d->eof && (rev_from & (POLLIN | POLLHUP | POLLERR)) && d->len < BUF_SIZE) {
    size_t end = d->off + d->len;
    if (d->off && end == BUF_SIZE) { /* compact */
      memmove(d->buf, d->buf + d->off, d->len);
      d->off = 0;
      end = d->len;
    }
    ssize_t r = read(d->from, d->buf + end, BUF_SIZE - end);
    if (r == 0) return false;
    if (r < 0 && errno != EAGAIN && errno != EINTR) return false;
    if (r > 0) d->len += (size_t)r;
  }
  if ((rev_to & (POLLOUT | POLLERR | POLLHUP)) || d->len) {
    while (d->len) {
      ssize_t w = send(d->to, d->buf + d->off, d->len, MSG_NOSIGNAL);
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) break;
      if (w <= 0) return false;
      d->off += (size_t)w;
      d->len -= (size_t)w;
      *moved += (uint64_t)w;
    }
    if (!d->len) d->off = 0;
  }
  return !(d->eof && !d->len); /* held bytes out, then the close */
}

static void run_cmd(tg_fault_proxy_t *p, char cmd) {
  if (cmd == 'r') {
    while (p->n) pair_close(p, p->n - 1, true);
  } else if (cmd == 's') {
    p->mode = MODE_STALL;
  } else if (cmd == 'd') {
    p->mode = MODE_HOLD_DOWN;
  } else if (cmd == 'g') {
    p->mode = MODE_PASS;
  }
}

static void *proxy_main(void *arg) {
  tg_fault_proxy_t *p = arg;
  for (;;) {
    struct pollfd fds[2 + 2 * MAX_PAIRS];
    int nf = 0;
    fds[nf++] = (struct pollfd){p->wake[0], POLLIN, 0};
    bool pass = p->mode != MODE_STALL; /* at least client -> target */
    bool down = p->mode == MODE_PASS;
    bool hold = p->mode == MODE_HOLD_DOWN;
    fds[nf++] = (struct pollfd){pass ? p->listen_fd : -1, POLLIN, 0};
    for (int i = 0; i < p->n; i++) {
      pair_t *pr = &p->pairs[i];
      short ce = 0, ue = 0;
      if (pass) {
        if (pr->d[0].len < BUF_SIZE) ce |= POLLIN;
        if (pr->d[0].len) ue |= POLLOUT;
      }
      if ((down || hold) && !pr->d[1].eof && pr->d[1].len < BUF_SIZE) ue |= POLLIN;
      if (down && pr->d[1].len) ce |= POLLOUT;
      fds[nf++] = (struct pollfd){pass ? pr->cli : -1, ce, 0};
      fds[nf++] = (struct pollfd){pass ? pr->up : -1, ue, 0};
    }
    if (poll(fds, (nfds_t)nf, -1) < 0) continue;
    if (fds[0].revents) {
      char b;
      if (read(p->wake[0], &b, 1) == 1) {
        pthread_mutex_lock(&p->mu);
        char cmd = p->cmd;
        pthread_mutex_unlock(&p->mu);
        if (cmd == 'q') break;
        run_cmd(p, cmd);
        pthread_mutex_lock(&p->mu);
        p->cmd = 0;
        p->done++;
        p->open = (unsigned)p->n;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
      }
      continue; /* the poll set may be stale */
    }
    if (!pass) continue;
    if (fds[1].revents) accept_one(p);
    uint64_t moved_down = 0;
    bool closed = false;
    for (int i = 0; i < p->n && 2 + 2 * i + 1 < nf; i++) {
      pair_t *pr = &p->pairs[i];
      short cr = fds[2 + 2 * i].revents, ur = fds[3 + 2 * i].revents;
      uint64_t up_moved = 0;
      bool ok = pump(&pr->d[0], cr, ur, &up_moved);
      if (ok && down) ok = pump(&pr->d[1], ur, cr, &moved_down);
      else if (ok && hold) fill(&pr->d[1], ur);
      if (!ok) {
        pair_close(p, i, false);
        closed = true;
        break; /* the poll set changed */
      }
    }
    if (moved_down || closed || hold) publish(p, 0, moved_down);
  }
  while (p->n) pair_close(p, p->n - 1, false);
  return NULL;
}

int tg_fault_proxy_start(int target_port, tg_fault_proxy_t **out) {
  tg_fault_proxy_t *p = calloc(1, sizeof(*p));
  if (!p) return -ENOMEM;
  p->target_port = target_port;
  p->wake[0] = p->wake[1] = -1;
  int err = 0;
  p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof(a);
  if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
      listen(p->listen_fd, 16) < 0 ||
      getsockname(p->listen_fd, (struct sockaddr *)&a, &l) < 0 ||
      pipe2(p->wake, O_CLOEXEC) < 0) {
    err = -errno;
    goto fail;
  }
  set_nonblock(p->listen_fd);
  p->port = ntohs(a.sin_port);
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  err = -pthread_create(&p->thread, NULL, proxy_main, p);
  if (err) {
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    goto fail;
  }
  *out = p;
  return 0;
fail:
  if (p->listen_fd >= 0) close(p->listen_fd);
  if (p->wake[0] >= 0) close(p->wake[0]);
  if (p->wake[1] >= 0) close(p->wake[1]);
  free(p);
  return err ? err : -EIO;
}

/* Hands |cmd| to the thread and waits until it is carried out. */
static void command(tg_fault_proxy_t *p, char cmd) {
  pthread_mutex_lock(&p->mu);
  while (p->cmd) pthread_cond_wait(&p->cv, &p->mu);
  p->cmd = cmd;
  unsigned want = p->done + 1;
  pthread_mutex_unlock(&p->mu);
  char b = cmd;
  while (write(p->wake[1], &b, 1) < 0 && errno == EINTR) {
  }
  if (cmd == 'q') return;
  pthread_mutex_lock(&p->mu);
  while (p->done < want) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

void tg_fault_proxy_stop(tg_fault_proxy_t *p) {
  if (!p) return;
  command(p, 'q');
  pthread_join(p->thread, NULL);
  close(p->listen_fd);
  close(p->wake[0]);
  close(p->wake[1]);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int tg_fault_proxy_port(const tg_fault_proxy_t *p) { return p->port; }
void tg_fault_proxy_reset(tg_fault_proxy_t *p) { command(p, 'r'); }
void tg_fault_proxy_stall(tg_fault_proxy_t *p) { command(p, 's'); }
void tg_fault_proxy_resume(tg_fault_proxy_t *p) { command(p, 'g'); }
void tg_fault_proxy_hold_down(tg_fault_proxy_t *p) { command(p, 'd'); }

unsigned tg_fault_proxy_accepted(tg_fault_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  unsigned v = p->accepted;
  pthread_mutex_unlock(&p->mu);
  return v;
}

uint64_t tg_fault_proxy_down_bytes(tg_fault_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  uint64_t v = p->down;
  pthread_mutex_unlock(&p->mu);
  return v;
}

unsigned tg_fault_proxy_open(tg_fault_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  unsigned v = p->open;
  pthread_mutex_unlock(&p->mu);
  return v;
}

/* Waits under p->mu until |ok| holds for |arg|, or the timeout. */
static int wait_for(tg_fault_proxy_t *p, bool (*ok)(tg_fault_proxy_t *, uint64_t),
                    uint64_t arg, int timeout_ms) {
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  int rv = 0;
  pthread_mutex_lock(&p->mu);
  while (!ok(p, arg)) {
    if (pthread_cond_timedwait(&p->cv, &p->mu, &dl) == ETIMEDOUT && !ok(p, arg)) {
      rv = -ETIMEDOUT;
      break;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return rv;
}

static bool accepted_at_least(tg_fault_proxy_t *p, uint64_t n) { return p->accepted >= n; }
static bool down_at_least(tg_fault_proxy_t *p, uint64_t n) { return p->down >= n; }
static bool held_at_least(tg_fault_proxy_t *p, uint64_t n) { return p->held >= n; }
static bool open_at_most(tg_fault_proxy_t *p, uint64_t n) { return p->open <= n; }

int tg_fault_proxy_wait_accepted(tg_fault_proxy_t *p, unsigned n, int timeout_ms) {
  return wait_for(p, accepted_at_least, n, timeout_ms);
}

int tg_fault_proxy_wait_down_bytes(tg_fault_proxy_t *p, uint64_t n,
                                   int timeout_ms) {
  return wait_for(p, down_at_least, n, timeout_ms);
}

int tg_fault_proxy_wait_open_at_most(tg_fault_proxy_t *p, unsigned n,
                                     int timeout_ms) {
  return wait_for(p, open_at_most, n, timeout_ms);
}

int tg_fault_proxy_wait_held_bytes(tg_fault_proxy_t *p, uint64_t n,
                                   int timeout_ms) {
  return wait_for(p, held_at_least, n, timeout_ms);
}
