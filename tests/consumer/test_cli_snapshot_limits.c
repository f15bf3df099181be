/* `tracegate snapshot` against a fake collector (a thread on a loopback
 * port that answers one request with the status and body length the test
 * asks): a reply of exactly CLI_SNAP_REPLY_MAX bytes is taken, one byte
 * more is refused with [TG-2060] and the limit's bytes on that line, for
 * the snapshot's POST and for `snapshot get`'s refusal alike. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_child.h"
#include "common/flags.h"
#include "cli/snapshot_json.h"

/* A snapshot the CLI's summary takes; the pad fills the body to size. */
#define REPLY_HEAD                                                         \
  "{\"snapshot\":{\"id\":\"000000000000002a\",\"state\":\"complete\","     \
  "\"hosts\":1,\"hosts_failed\":0,\"bytes\":1},\"pad\":\""
#define REPLY_TAIL "\"}"

typedef struct fake {
  int fd, port;
  int status;      /* the answer's HTTP status */
  size_t body_len; /* its body's length, REPLY_HEAD and REPLY_TAIL included */
  pthread_t thread;
  bool answered; /* the whole body was written */
} fake_t;

static bool send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= (size_t)w;
  }
  return true;
}

/* Reads the request's head (the CLI's request has no body worth reading:
 * Content-Length 0), then answers with the head and the body. */
static void *serve(void *arg) {
  fake_t *f = arg;
  int c = accept(f->fd, NULL, NULL);
  if (c < 0) return NULL;
  char req[8192];
  size_t n = 0;
  while (n < sizeof(req) - 1) {
    ssize_t r = recv(c, req + n, sizeof(req) - 1 - n, 0);
    if (r <= 0) break;
    n += (size_t)r;
    req[n] = 0;
    if (strstr(req, "\r\n\r\n")) break;
  }
  char head[256];
  int hn = snprintf(head, sizeof(head),
                    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                    f->status, f->status == 200 ? "OK" : "Not Found",
                    f->body_len);
  size_t pad = f->body_len - strlen(REPLY_HEAD) - strlen(REPLY_TAIL);
  char chunk[65536];
  memset(chunk, 'x', sizeof(chunk));
  bool ok = send_all(c, head, (size_t)hn) &&
            send_all(c, REPLY_HEAD, strlen(REPLY_HEAD));
  while (ok && pad) {
    size_t k = pad < sizeof(chunk) ? pad : sizeof(chunk);
    ok = send_all(c, chunk, k);
    pad -= k;
  }
  f->answered = ok && send_all(c, REPLY_TAIL, strlen(REPLY_TAIL));
  close(c);
  return NULL;
}

static void fake_start(fake_t *f, int status, size_t body_len) {
  memset(f, 0, sizeof(*f));
  f->status = status;
  f->body_len = body_len;
  f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(f->fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof(a);
  assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(f->fd, 4), 0);
  assert_int_equal(getsockname(f->fd, (struct sockaddr *)&a, &l), 0);
  f->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&f->thread, NULL, serve, f), 0);
}

/* Joins the thread: the CLI has exited, so its connection is closed and
 * the thread's writes end. */
static void fake_stop(fake_t *f) {
  shutdown(f->fd, SHUT_RDWR);
  pthread_join(f->thread, NULL);
  close(f->fd);
}

/* `tracegate snapshot --collector 127.0.0.1:PORT` (or `snapshot get ID
 * ... --output /dev/null` with |get|): its exit code, stderr in |c|. */
static int run_snapshot(fake_t *f, bool get, child_t *c) {
  char addr[32];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", f->port);
  const char *post[] = {"snapshot", "--collector", addr, "--timeout", "60s",
                        NULL};
  const char *get_args[] = {"snapshot", "get", "000000000000002a",
                            "--collector", addr, "--output", "/dev/null",
                            "--timeout", "60s", NULL};
  spawn_cli(c, get ? get_args : post);
  return wait_cli_ex(c, 60000, -1, NULL, 0);
}

/* The limit's line: [TG-2060] with the limit in bytes on it. */
static void assert_refused(const child_t *c) {
  char bytes[32];
  snprintf(bytes, sizeof(bytes), "%u bytes", CLI_SNAP_REPLY_MAX);
  assert_notice_with(c->err, TG_N_SNAPSHOT_REPLY_TOO_BIG, bytes);
}

static void a_reply_at_the_limit_is_taken(void **state) {
  (void)state;
  fake_t f;
  fake_start(&f, 200, CLI_SNAP_REPLY_MAX);
  child_t c;
  int code = run_snapshot(&f, false, &c);
  fake_stop(&f);
  if (code != 0) fail_msg("exit %d:\n%s", code, c.err);
  assert_true(f.answered);
  assert_no_notice(c.err, TG_N_SNAPSHOT_REPLY_TOO_BIG);
}

static void a_reply_a_byte_over_is_refused_with_its_code(void **state) {
  (void)state;
  fake_t f;
  fake_start(&f, 200, CLI_SNAP_REPLY_MAX + 1u);
  child_t c;
  int code = run_snapshot(&f, false, &c);
  fake_stop(&f);
  assert_int_equal(code, TG_EXIT_FAIL);
  assert_refused(&c);
}

/* snapshot get: a 200's body goes to the file, unbounded; a refusal's
 * body is read for its reason, within the same limit. */
static void a_refusal_over_the_limit_is_refused_with_its_code(void **state) {
  (void)state;
  fake_t f;
  fake_start(&f, 404, CLI_SNAP_REPLY_MAX + 1u);
  child_t c;
  int code = run_snapshot(&f, true, &c);
  fake_stop(&f);
  assert_int_equal(code, TG_EXIT_FAIL);
  assert_refused(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_reply_at_the_limit_is_taken),
      cmocka_unit_test(a_reply_a_byte_over_is_refused_with_its_code),
      cmocka_unit_test(a_refusal_over_the_limit_is_refused_with_its_code),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
