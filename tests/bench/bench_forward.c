/* The counting forwarder; see bench_forward.h. splice() through a pipe
 * moves the bytes without copying them through this process, so the
 * forwarder adds little to the path it measures. */
#include "bench_forward.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 16
#define SPLICE_CHUNK (1u << 20)

typedef struct pump {
  int from, to;
  _Atomic uint64_t *count;
  pthread_t th;
} pump_t;

typedef struct conn {
  int a, b; /* accepted, and ours to the target */
  pump_t up, down;
} conn_t;

struct bench_forward {
  int lfd;
  int to_port;
  atomic_bool stop;
  pthread_t acceptor;
  conn_t conns[MAX_CONNS];
  atomic_int nconns;
  _Atomic uint64_t up, down;
};

static void *pump_run(void *arg) {
  pump_t *p = arg;
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) < 0) {
    shutdown(p->from, SHUT_RDWR);
    shutdown(p->to, SHUT_RDWR);
    return NULL;
  }
  fcntl(pipefd[1], F_SETPIPE_SZ, SPLICE_CHUNK);
  for (;;) {
    ssize_t n = splice(p->from, NULL, pipefd[1], NULL, SPLICE_CHUNK,
                       SPLICE_F_MOVE);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    atomic_fetch_add(p->count, (uint64_t)n);
    while (n > 0) {
      ssize_t w = splice(pipefd[0], NULL, p->to, NULL, (size_t)n,
                         SPLICE_F_MOVE);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) goto out;
      n -= w;
    }
  }
out:
  /* The other side sees the end as the real peer would have sent it. */
  shutdown(p->to, SHUT_WR);
  close(pipefd[0]);
  close(pipefd[1]);
  return NULL;
}

static int connect_target(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

static void *accept_run(void *arg) {
  bench_forward_t *fw = arg;
  while (!atomic_load(&fw->stop)) {
    struct pollfd p = {.fd = fw->lfd, .events = POLLIN};
    if (poll(&p, 1, 50) != 1) continue;
    int a = accept4(fw->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (a < 0) continue;
    int n = atomic_load(&fw->nconns);
    int b = n < MAX_CONNS ? connect_target(fw->to_port) : -1;
    if (b < 0) {
      close(a);
      continue;
    }
    int one = 1;
    setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    conn_t *c = &fw->conns[n];
    c->a = a;
    c->b = b;
    c->up = (pump_t){.from = a, .to = b, .count = &fw->up};
    c->down = (pump_t){.from = b, .to = a, .count = &fw->down};
    if (pthread_create(&c->up.th, NULL, pump_run, &c->up) != 0) {
      close(a);
      close(b);
      continue;
    }
    if (pthread_create(&c->down.th, NULL, pump_run, &c->down) != 0) {
      shutdown(a, SHUT_RDWR);
      shutdown(b, SHUT_RDWR);
      pthread_join(c->up.th, NULL);
      close(a);
      close(b);
      continue;
    }
    atomic_store(&fw->nconns, n + 1);
  }
  return NULL;
}

bench_forward_t *bench_forward_start(int to_port, int *port) {
  bench_forward_t *fw = calloc(1, sizeof(*fw));
  if (!fw) return NULL;
  fw->to_port = to_port;
  fw->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof(sa);
  if (fw->lfd < 0 || bind(fw->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
      listen(fw->lfd, 16) < 0 ||
      getsockname(fw->lfd, (struct sockaddr *)&sa, &sl) < 0 ||
      pthread_create(&fw->acceptor, NULL, accept_run, fw) != 0) {
    perror("bench: forwarder");
    if (fw->lfd >= 0) close(fw->lfd);
    free(fw);
    return NULL;
  }
  *port = ntohs(sa.sin_port);
  return fw;
}

void bench_forward_stop(bench_forward_t *fw, uint64_t *up, uint64_t *down) {
  atomic_store(&fw->stop, true);
  pthread_join(fw->acceptor, NULL);
  close(fw->lfd);
  int n = atomic_load(&fw->nconns);
  for (int i = 0; i < n; i++) {
    conn_t *c = &fw->conns[i];
    shutdown(c->a, SHUT_RDWR);
    shutdown(c->b, SHUT_RDWR);
    pthread_join(c->up.th, NULL);
    pthread_join(c->down.th, NULL);
    close(c->a);
    close(c->b);
  }
  *up = atomic_load(&fw->up);
  *down = atomic_load(&fw->down);
  free(fw);
}

int bench_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof(sa);
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
    port = ntohs(sa.sin_port);
  if (fd >= 0) close(fd);
  return port;
}
