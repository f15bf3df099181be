/* The fleet tests' cutting proxy (fleet_proxy.h). */
#include "fleet_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "fleet_harness.h"
#include "test_proc.h"

static void proxy_cut_all(fleet_proxy_t *p) {
  for (int i = 0; i < p->n; i++) {
    close(p->cli[i]);
    close(p->up[i]);
  }
  p->n = 0;
}

static void proxy_notify(fleet_proxy_t *p) {
  char b = 1;
  ssize_t w = write(p->notify[1], &b, 1); /* full pipe: a wake-up is pending */
  (void)w;
}

static bool pump(int from, int to, atomic_ullong *count) {
  char buf[65536];
  ssize_t r = read(from, buf, sizeof(buf));
  if (r <= 0) return false;
  for (ssize_t off = 0; off < r;) {
    ssize_t w = write(to, buf + off, (size_t)(r - off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += w;
  }
  if (count) atomic_fetch_add(count, (unsigned long long)r);
  return true;
}

/* Hold mode: read and count, deliver nothing. */
static bool hold(int from, atomic_ullong *count) {
  char buf[65536];
  ssize_t r = read(from, buf, sizeof(buf));
  if (r <= 0) return false;
  atomic_fetch_add(count, (unsigned long long)r);
  return true;
}

static void *proxy_main(void *arg) {
  fleet_proxy_t *p = arg;
  for (;;) {
    struct pollfd fds[2 + 16];
    int nf = 0;
    fds[nf++] = (struct pollfd){p->ctl[0], POLLIN, 0};
    fds[nf++] = (struct pollfd){p->listen_fd, POLLIN, 0};
    for (int i = 0; i < p->n; i++) {
      fds[nf++] = (struct pollfd){p->cli[i], POLLIN, 0};
      fds[nf++] = (struct pollfd){p->up[i], POLLIN, 0};
    }
    if (poll(fds, (nfds_t)nf, -1) < 0) continue;
    if (fds[0].revents) {
      char cmd = 0;
      if (read(p->ctl[0], &cmd, 1) != 1 || cmd == 'q') break;
      if (cmd == 'h') {
        p->hold = true;
        continue;
      }
      p->hold = false;
      proxy_cut_all(p);
      continue;
    }
    if (fds[1].revents) {
      /* Close-on-exec: the tests start children while this thread runs. */
      int c = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
      int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      struct sockaddr_in a = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)p->target_port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
      if (c >= 0 && p->n < 8 && connect(u, (struct sockaddr *)&a, sizeof(a)) == 0) {
        p->cli[p->n] = c;
        p->up[p->n++] = u;
        atomic_fetch_add(&p->accepted, 1);
        proxy_notify(p);
      } else {
        if (c >= 0) close(c);
        close(u);
      }
      continue;
    }
    for (int i = 0; i < p->n; i++) {
      bool ok = true;
      if (fds[2 + 2 * i].revents) ok = pump(p->cli[i], p->up[i], NULL);
      if (ok && fds[3 + 2 * i].revents) {
        ok = p->hold ? hold(p->up[i], &p->held_bytes)
                     : pump(p->up[i], p->cli[i], &p->down_bytes);
        proxy_notify(p);
      }
      if (!ok) { /* one side closed: close the pair */
        close(p->cli[i]);
        close(p->up[i]);
        p->cli[i] = p->cli[p->n - 1];
        p->up[i] = p->up[p->n - 1];
        p->n--;
        break; /* the poll set changed */
      }
    }
  }
  proxy_cut_all(p);
  return NULL;
}

void fleet_proxy_start(fleet_proxy_t *p, int target_port) {
  memset(p, 0, sizeof(*p));
  p->target_port = target_port;
  p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(p->listen_fd, 8), 0);
  socklen_t l = sizeof(a);
  assert_int_equal(getsockname(p->listen_fd, (struct sockaddr *)&a, &l), 0);
  p->port = ntohs(a.sin_port);
  assert_int_equal(pipe2(p->ctl, O_CLOEXEC), 0);
  assert_int_equal(pipe2(p->notify, O_NONBLOCK | O_CLOEXEC), 0);
  assert_int_equal(pthread_create(&p->thread, NULL, proxy_main, p), 0);
}

/* A command for the thread, carried out at its next wake-up. */
static void send_cmd(fleet_proxy_t *p, char cmd) {
  assert_int_equal(write(p->ctl[1], &cmd, 1), 1);
}

void fleet_proxy_cut(fleet_proxy_t *p) { send_cmd(p, 'c'); }

void fleet_proxy_hold(fleet_proxy_t *p) { send_cmd(p, 'h'); }

void fleet_proxy_stop(fleet_proxy_t *p) {
  send_cmd(p, 'q');
  pthread_join(p->thread, NULL);
  close(p->listen_fd);
  close(p->ctl[0]);
  close(p->ctl[1]);
  close(p->notify[0]);
  close(p->notify[1]);
}

void fleet_proxy_wait(fleet_proxy_t *p, int64_t deadline) {
  int64_t left = deadline - tg_test_now_ms();
  assert_true(left > 0);
  struct pollfd pf = {p->notify[0], POLLIN, 0};
  if (poll(&pf, 1, (int)left) == 1) {
    char buf[256];
    while (read(p->notify[0], buf, sizeof(buf)) > 0) {
    }
  }
}

void fleet_proxy_wait_down_bytes(fleet_proxy_t *p, unsigned long long base,
                                 unsigned long long n) {
  int64_t deadline = tg_test_now_ms() + FLEET_WAIT_MS;
  while (atomic_load(&p->down_bytes) < base + n) fleet_proxy_wait(p, deadline);
}
