/* The host's fair share of connections between local users (ipc/host.h):
 * a user who fills a host's slots cannot keep another user out. One user
 * (nobody, in a child process) takes every slot, binding a service on its
 * first connection only; a second user (root, this process) then connects
 * three times. The first two connections each close one of the first
 * user's, never the one with a bound service (the oldest unbound goes
 * first); the third is refused, since the two users then hold as many.
 * And a host that does not share (trusted clients) refuses both alike.
 * Needs root, to be two users.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipc/host.h"
#include "raw_ipc.h"
#include "test_proc.h"
#include "test_wait.h"

#define MAX_CONNS 4
#define THEIRS 6 /* MAX_CONNS taken, two refused */
#define WAIT_MS 10000

static const tg_ipc_method_def_t methods[] = {{"Unused", NULL}};
static const tg_ipc_service_def_t service = {
    .name = "Test", .methods = methods, .n_methods = 1};

typedef struct fixture {
  uv_loop_t loop;
  char dir[64];
  char sock[96];
  tg_ipc_host_t *host;
  bool host_closed;
  pid_t child;
  int to_child, from_child;
} fixture_t;

/* --- the first user's side (a child process, blocking sockets) ---------- */

static bool is_closed(int fd) {
  char b;
  ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Bit i: connection i was closed by the host. */
static unsigned closed_mask(const raw_conn_t *c) {
  unsigned m = 0;
  for (int i = 0; i < THEIRS; i++)
    if (is_closed(c[i].fd)) m |= 1u << i;
  return m;
}

/* Connects THEIRS times, binds on the first, says "R"; then for each mask
 * the parent sends, waits (up to WAIT_MS) for exactly those connections to
 * be closed and answers with the mask seen. Exits when the pipe closes. */
static void first_user(const char *sock, int in, int out) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (tg_test_become_nobody() != 0) _exit(10);
  raw_conn_t c[THEIRS];
  for (int i = 0; i < THEIRS; i++)
    if (raw_connect(&c[i], sock) != 0) _exit(11);
  if (raw_bind(&c[0], "Test") != 0) _exit(12);
  if (write(out, "R", 1) != 1) _exit(13);
  unsigned want;
  while (read(in, &want, sizeof(want)) == sizeof(want)) {
    unsigned seen = closed_mask(c);
    for (int ms = 0; seen != want && ms < WAIT_MS; ms += 10) {
      usleep(10 * 1000);
      seen = closed_mask(c);
    }
    if (write(out, &seen, sizeof(seen)) != sizeof(seen)) _exit(14);
  }
  _exit(0);
}

/* --- the host's side ----------------------------------------------------- */

typedef struct wait_read {
  int fd;
  void *into;
  size_t len;
  bool answered, done;
} wait_read_t;

/* Reads once: the waiter asks again after it returned true. */
static bool pipe_answered(void *arg) {
  wait_read_t *w = arg;
  if (w->answered) return true;
  struct pollfd p = {.fd = w->fd, .events = POLLIN};
  if (poll(&p, 1, 0) != 1) return false;
  w->answered = true;
  w->done = read(w->fd, w->into, w->len) == (ssize_t)w->len;
  return true;
}

static void on_pipe(uv_poll_t *p, int status, int events) {
  (void)p;
  (void)status;
  (void)events; /* wakes the loop; pipe_answered() reads */
}

/* Runs the host's loop until the first user answers |len| bytes. */
static void read_child(fixture_t *f, void *into, size_t len) {
  wait_read_t w = {.fd = f->from_child, .into = into, .len = len};
  uv_poll_t wake;
  assert_int_equal(uv_poll_init(&f->loop, &wake, f->from_child), 0);
  uv_poll_start(&wake, UV_READABLE, on_pipe);
  bool answered =
      tg_test_run_loop_until(&f->loop, pipe_answered, &w, WAIT_MS);
  uv_close((uv_handle_t *)&wake, NULL);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_true(answered);
  assert_true(w.done);
}

/* The first user's connections the host has closed, once |want| are. */
static unsigned their_closed(fixture_t *f, unsigned want) {
  assert_int_equal(write(f->to_child, &want, sizeof(want)), sizeof(want));
  unsigned seen = 0;
  read_child(f, &seen, sizeof(seen));
  return seen;
}

typedef struct stat_wait {
  fixture_t *f;
  uint64_t accepted, refused, evicted;
} stat_wait_t;

static bool stats_reached(void *arg) {
  stat_wait_t *w = arg;
  const tg_ipc_host_stats_t *s = tg_ipc_host_stats(w->f->host);
  return s->connections_accepted >= w->accepted &&
         s->connections_refused >= w->refused &&
         s->connections_evicted >= w->evicted;
}

static void wait_stats(fixture_t *f, uint64_t accepted, uint64_t refused,
                       uint64_t evicted) {
  stat_wait_t w = {f, accepted, refused, evicted};
  assert_true(tg_test_run_loop_until(&f->loop, stats_reached, &w, WAIT_MS));
  const tg_ipc_host_stats_t *s = tg_ipc_host_stats(f->host);
  assert_int_equal(s->connections_accepted, accepted);
  assert_int_equal(s->connections_refused, refused);
  assert_int_equal(s->connections_evicted, evicted);
}

/* The second user's connection: open or closed by the host, once the loop
 * has run the accept's consequences. */
static bool ours_open(fixture_t *f, int fd) {
  for (int i = 0; i < 20; i++) uv_run(&f->loop, UV_RUN_NOWAIT);
  return !is_closed(fd);
}

static int connect_unix(const char *path) {
  raw_conn_t c;
  return raw_connect(&c, path) == 0 ? c.fd : -1;
}

static void a_user_filling_the_slots_cannot_keep_another_out(void **state) {
  TG_TEST_REQUIRE_OTHER_USER(); /* one user only: nothing to share */
  fixture_t *f = *state;
  char r = 0;
  read_child(f, &r, 1);
  assert_int_equal(r, 'R');
  /* Four taken, two refused: the limit holds against one user. */
  wait_stats(f, MAX_CONNS, 2, 0);
  assert_int_equal(their_closed(f, 0x30), 0x30);

  /* A second user gets in: the first's oldest connection without a bound
   * service (1) goes, its bound one (0) stays. */
  int a = connect_unix(f->sock);
  assert_true(a >= 0);
  wait_stats(f, MAX_CONNS + 1, 2, 1);
  assert_true(ours_open(f, a));
  assert_int_equal(their_closed(f, 0x32), 0x32);

  /* 3 against 1: again, the next unbound one (2). */
  int b = connect_unix(f->sock);
  assert_true(b >= 0);
  wait_stats(f, MAX_CONNS + 2, 2, 2);
  assert_true(ours_open(f, b));
  assert_int_equal(their_closed(f, 0x36), 0x36);

  /* 2 against 2: the second user is refused like the first was. */
  int c = connect_unix(f->sock);
  assert_true(c >= 0);
  wait_stats(f, MAX_CONNS + 2, 3, 2);
  assert_false(ours_open(f, c));
  assert_true(ours_open(f, a) && ours_open(f, b));
  assert_int_equal(their_closed(f, 0x36), 0x36);
  close(a);
  close(b);
  close(c);
}

/* A host of trusted clients (the consumer socket) keeps the plain limit:
 * the second user is refused like the first. */
static void without_sharing_the_limit_refuses_everyone(void **state) {
  TG_TEST_REQUIRE_OTHER_USER();
  fixture_t *f = *state;
  tg_ipc_host_share_by_uid(f->host, false);
  char r = 0;
  read_child(f, &r, 1);
  assert_int_equal(r, 'R');
  wait_stats(f, MAX_CONNS, 2, 0);
  int a = connect_unix(f->sock);
  assert_true(a >= 0);
  wait_stats(f, MAX_CONNS, 3, 0);
  assert_false(ours_open(f, a));
  assert_int_equal(their_closed(f, 0x30), 0x30);
  close(a);
}

static int setup(void **state) {
  static fixture_t f;
  memset(&f, 0, sizeof(f));
  f.child = -1;
  if (uv_loop_init(&f.loop) != 0) return -1;
  if (tg_test_mkdtemp(f.dir, sizeof(f.dir), "fair") < 0) return -1;
  /* The first user must reach the socket. */
  if (tg_test_other_user_dir(f.dir, 0711) != 0) return -1;
  snprintf(f.sock, sizeof(f.sock), "%s/sock", f.dir);
  if (tg_ipc_host_listen(&f.loop, f.sock, 0666, &service, 1, MAX_CONNS,
                         &f.host) != 0)
    return -1;
  tg_ipc_host_share_by_uid(f.host, true);
  *state = &f;
  if (tg_test_other_user_unavailable()) return 0;
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) return -1;
  f.child = fork();
  if (f.child < 0) return -1;
  if (f.child == 0) {
    close(down[1]);
    close(up[0]);
    first_user(f.sock, down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);
  f.to_child = down[1];
  f.from_child = up[0];
  return 0;
}

static bool child_exited(void *arg) {
  fixture_t *f = arg;
  int st = 0;
  pid_t r = waitpid(f->child, &st, WNOHANG);
  if (r == 0) return false;
  if (r != f->child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fprintf(stderr, "first user's process: wait status %d\n", st);
  else
    f->child = -1; /* exited 0 */
  return true;
}

static void on_host_closed(void *arg) { ((fixture_t *)arg)->host_closed = true; }
static bool host_closed(void *arg) { return ((fixture_t *)arg)->host_closed; }

static int teardown(void **state) {
  fixture_t *f = *state;
  int rv = 0;
  if (f->child > 0) {
    close(f->to_child); /* the first user exits */
    close(f->from_child);
    /* The loop runs meanwhile: a child still waiting on the host (a test
     * that failed half-way) gets its answer and ends. */
    if (!tg_test_run_loop_until(&f->loop, child_exited, f, WAIT_MS)) {
      kill(f->child, SIGKILL);
      waitpid(f->child, NULL, 0);
      fprintf(stderr, "first user's process did not end; killed\n");
    }
    if (f->child > 0) rv = -1;
  }
  tg_ipc_host_close(f->host, on_host_closed, f);
  if (!tg_test_run_loop_until(&f->loop, host_closed, f, WAIT_MS)) rv = -1;
  uv_run(&f->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&f->loop) != 0) rv = -1;
  tg_test_rm_rf(f->dir);
  return rv;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          a_user_filling_the_slots_cannot_keep_another_out, setup, teardown),
      cmocka_unit_test_setup_teardown(
          without_sharing_the_limit_refuses_everyone, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
