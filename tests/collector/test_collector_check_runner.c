/* The collector's check runner (collector/daemon/check_runner.h) from the
 * collector's side of its socket: a request it must refuse (the wrong
 * size, no or two descriptors, a descriptor that is no regular file, a
 * path without its NUL, a limit out of range) is answered with the
 * refusal's code, and the runner answers the next request after it; a
 * good request runs trace processor (a stand-in script) and, the runner
 * being root here, as uid 65534; the decoder alone on edge values; a
 * cancel ends a check under way and the runner.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/daemon/check_runner.h"
#include "test_proc.h"

static char g_dir[256], g_trace[320];

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  if (tg_test_mkdtemp(g_dir, sizeof(g_dir), "runner") != 0) return -1;
  /* A runner that is root runs the stand-ins as the other user. */
  if (!tg_test_other_user_unavailable() &&
      tg_test_other_user_dir(g_dir, 0755) != 0)
    return -1;
  snprintf(g_trace, sizeof(g_trace), "%s/trace.pftrace", g_dir);
  FILE *f = fopen(g_trace, "w");
  if (!f) return -1;
  fputs("not a trace", f);
  return fclose(f);
}

static int group_teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

/* A stand-in for trace processor running |body| (sh); its path in |out|. */
static void script(const char *name, const char *body, char *out, size_t cap) {
  assert_int_equal(tg_test_write_script(g_dir, name, body, out, cap), 0);
}

/* Whether a live process's command line holds |mark|. */
static bool running(const char *mark) {
  DIR *d = opendir("/proc");
  assert_non_null(d);
  bool found = false;
  for (struct dirent *de; !found && (de = readdir(d));) {
    int pid = atoi(de->d_name);
    if (pid <= 0) continue;
    char path[64], cmd[512];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
    close(fd);
    if (n <= 0) continue;
    for (ssize_t i = 0; i < n; i++)
      if (!cmd[i]) cmd[i] = ' ';
    cmd[n] = 0;
    /* A zombie has no command line: only the living count. */
    if (strstr(cmd, mark)) found = true;
  }
  closedir(d);
  return found;
}

static coll_runner_req_t good_req(const char *tp) {
  coll_runner_req_t req;
  memset(&req, 0, sizeof(req));
  req.magic = COLL_RUNNER_MAGIC;
  req.version = COLL_RUNNER_VERSION;
  req.snapshot_id = 7;
  req.timeout_ms = 10000;
  req.memory = 1ull << 30;
  snprintf(req.tp, sizeof(req.tp), "%s", tp);
  return req;
}

/* |n| bytes of |msg| with |n_fds| descriptors to the runner. */
static void send_msg(coll_runner_t *r, const void *msg, size_t n,
                     const int *fds, size_t n_fds) {
  union {
    char buf[CMSG_SPACE(4 * sizeof(int))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof(ctl));
  struct iovec iov = {(void *)msg, n};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (n_fds) {
    m.msg_control = ctl.buf;
    m.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, n_fds * sizeof(int));
  }
  assert_int_equal(sendmsg(r->fd, &m, 0), (ssize_t)n);
}

/* The same, and the runner's answer. */
static coll_runner_verdict_t send_raw(coll_runner_t *r, const void *msg,
                                      size_t n, const int *fds, size_t n_fds) {
  send_msg(r, msg, n, fds, n_fds);
  coll_runner_verdict_t v;
  assert_int_equal(recv(r->fd, &v, sizeof(v), 0), (ssize_t)sizeof(v));
  assert_int_equal(v.magic, COLL_RUNNER_MAGIC);
  return v;
}

/* A runner started, a stand-in |name| running |body| (its path in |tp|,
 * 512 bytes): the trace opened for it, returned. */
static int runner_up(coll_runner_t *r, const char *name, const char *body,
                     char *tp) {
  script(name, body, tp, 512);
  assert_int_equal(coll_runner_start(r), 0);
  int fd = open(g_trace, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  return fd;
}

static void runner_refuses_bad_requests_and_goes_on(void **state) {
  (void)state;
  char tp[512];
  coll_runner_t r;
  int fd = runner_up(&r, "ok_tp", "exit 0", tp);
  coll_runner_req_t req = good_req(tp);
  int two[2] = {fd, fd};

  /* Too short, too long. */
  coll_runner_verdict_t v = send_raw(&r, &req, sizeof(req) - 1, &fd, 1);
  assert_int_equal(v.refused, COLL_RUNNER_BAD_SIZE);
  assert_int_equal(v.failure, TG_TP_NOT_RUN);
  char big[sizeof(req) + 64];
  memset(big, 'x', sizeof(big));
  v = send_raw(&r, big, sizeof(big), &fd, 1);
  assert_int_equal(v.refused, COLL_RUNNER_BAD_SIZE);
  /* No descriptor, two. */
  v = send_raw(&r, &req, sizeof(req), NULL, 0);
  assert_int_equal(v.refused, COLL_RUNNER_BAD_FDS);
  v = send_raw(&r, &req, sizeof(req), two, 2);
  assert_int_equal(v.refused, COLL_RUNNER_BAD_FDS);
  /* A directory, a pipe. */
  int dfd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(dfd >= 0);
  v = send_raw(&r, &req, sizeof(req), &dfd, 1);
  assert_int_equal(v.refused, COLL_RUNNER_NOT_REGULAR);
  close(dfd);
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  v = send_raw(&r, &req, sizeof(req), &p[0], 1);
  assert_int_equal(v.refused, COLL_RUNNER_NOT_REGULAR);
  close(p[0]);
  close(p[1]);
  /* A path without its NUL, a timeout of 0, another magic. */
  coll_runner_req_t bad = req;
  memset(bad.tp, 'a', sizeof(bad.tp));
  v = send_raw(&r, &bad, sizeof(bad), &fd, 1);
  assert_int_equal(v.refused, COLL_RUNNER_BAD_FIELD);
  bad = req;
  bad.timeout_ms = 0;
  v = send_raw(&r, &bad, sizeof(bad), &fd, 1);
  assert_int_equal(v.refused, COLL_RUNNER_BAD_FIELD);
  bad = req;
  bad.magic ^= 1;
  v = send_raw(&r, &bad, sizeof(bad), &fd, 1);
  assert_int_equal(v.refused, COLL_RUNNER_BAD_FIELD);

  /* Still there: the good request runs. */
  v = send_raw(&r, &req, sizeof(req), &fd, 1);
  assert_int_equal(v.refused, COLL_RUNNER_ACCEPTED);
  assert_int_equal(v.failure, TG_TP_OK);
  /* Through the client too. */
  tg_tp_limits_t lim = {.timeout_ms = 10000, .memory = 1ull << 30};
  tg_tp_verdict_t tv;
  assert_int_equal(coll_runner_check(&r, tp, fd, &lim, 7, &tv), 0);
  assert_int_equal(tv.failure, TG_TP_OK);
  close(fd);
  coll_runner_close(&r);
  assert_int_equal(r.pid, 0);
}

/* The runner (root here: it keeps CAP_SETUID and CAP_SETGID) runs trace
 * processor as 65534, which reads the whole trace through its pipe. */
static void runner_runs_the_check_as_nobody(void **state) {
  (void)state;
  TG_TEST_REQUIRE_OTHER_USER();
  char tp[512];
  coll_runner_t r;
  int fd = runner_up(&r, "id_tp",
                     "echo \"ids $(id -u):$(id -g):$(id -G) bytes "
                     "$(wc -c < \"$3\")\" >&2\nexit 1",
                     tp);
  tg_tp_limits_t lim = {.timeout_ms = 10000, .memory = 1ull << 30};
  tg_tp_verdict_t v;
  assert_int_equal(coll_runner_check(&r, tp, fd, &lim, 7, &v), 0);
  assert_int_equal(v.failure, TG_TP_ERROR);
  assert_int_equal(v.uid, 65534);
  assert_false(v.uid_kept);
  assert_string_equal(v.why, "ids 65534:65534:65534 bytes 11");
  /* Twice from one descriptor: each import reads it from its start. */
  assert_int_equal(coll_runner_check(&r, tp, fd, &lim, 7, &v), 0);
  assert_string_equal(v.why, "ids 65534:65534:65534 bytes 11");
  /* Past its deadline the runner kills it, though its uid is another's
   * (the runner has no CAP_KILL), and goes on. */
  script("sleepy_tp", "sleep 600", tp, sizeof(tp));
  lim.timeout_ms = COLL_RUNNER_TIMEOUT_MIN_MS;
  assert_int_equal(coll_runner_check(&r, tp, fd, &lim, 7, &v), 0);
  assert_int_equal(v.failure, TG_TP_TIMEOUT);
  assert_int_equal(v.uid, 65534);
  for (int i = 0; i < 600 && running("sleepy_tp -Q"); i++) usleep(50 * 1000);
  assert_false(running("sleepy_tp -Q"));
  close(fd);
  coll_runner_close(&r);
}

/* The daemon stops during a check: the check under way is killed by the
 * runner (its uid is not the caller's), the waiting call returns, the
 * runner ends with status 0. */
static void cancel_ends_the_check_and_the_runner(void **state) {
  (void)state;
  char tp[512];
  coll_runner_t r;
  int fd = runner_up(&r, "slow_tp", "sleep 600", tp);
  coll_runner_req_t req = good_req(tp);
  send_msg(&r, &req, sizeof(req), &fd, 1);
  /* Until the stand-in runs (bounded). */
  for (int i = 0; i < 600 && !running("slow_tp -Q"); i++)
    usleep(50 * 1000);
  assert_true(running("slow_tp -Q"));
  coll_runner_cancel(&r);
  int status = -1;
  int64_t end = tg_test_now_ms() + 30000;
  while (waitpid(r.pid, &status, WNOHANG) == 0 && tg_test_now_ms() < end)
    usleep(20 * 1000);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  r.pid = 0;
  /* A check after the cancel is refused at once. */
  tg_tp_limits_t lim = {.timeout_ms = 10000, .memory = 1ull << 30};
  tg_tp_verdict_t v;
  assert_int_equal(coll_runner_check(&r, tp, fd, &lim, 7, &v), -ECANCELED);
  assert_int_equal(v.failure, TG_TP_NOT_RUN);
  close(fd);
  coll_runner_close(&r);
  /* The stand-in went with the check (bounded: its group's kill). */
  for (int i = 0; i < 600 && running("slow_tp -Q"); i++)
    usleep(50 * 1000);
  assert_false(running("slow_tp -Q"));
}

static void decode_checks_every_field(void **state) {
  (void)state;
  coll_runner_req_t req = good_req("/usr/bin/trace_processor_shell"), out;
  const char *why = NULL;
  assert_int_equal(coll_runner_req_decode(&req, sizeof(req), &out, &why),
                   COLL_RUNNER_ACCEPTED);
  assert_string_equal(out.tp, "/usr/bin/trace_processor_shell");
  assert_int_equal(coll_runner_req_decode(&req, 0, &out, &why),
                   COLL_RUNNER_BAD_SIZE);
  coll_runner_req_t bad = req;
  bad.version = 2;
  assert_int_equal(coll_runner_req_decode(&bad, sizeof(bad), &out, &why),
                   COLL_RUNNER_BAD_FIELD);
  bad = req;
  bad.timeout_ms = COLL_RUNNER_TIMEOUT_MAX_MS + 1;
  assert_int_equal(coll_runner_req_decode(&bad, sizeof(bad), &out, &why),
                   COLL_RUNNER_BAD_FIELD);
  bad = req;
  bad.memory = COLL_RUNNER_MEMORY_MIN - 1;
  assert_int_equal(coll_runner_req_decode(&bad, sizeof(bad), &out, &why),
                   COLL_RUNNER_BAD_FIELD);
  bad = req;
  bad.memory = COLL_RUNNER_MEMORY_MAX + 1;
  assert_int_equal(coll_runner_req_decode(&bad, sizeof(bad), &out, &why),
                   COLL_RUNNER_BAD_FIELD);
  bad = req;
  bad.tp[0] = 0;
  assert_int_equal(coll_runner_req_decode(&bad, sizeof(bad), &out, &why),
                   COLL_RUNNER_BAD_FIELD);
  bad = req;
  bad.tp[3] = '\n';
  assert_int_equal(coll_runner_req_decode(&bad, sizeof(bad), &out, &why),
                   COLL_RUNNER_BAD_FIELD);
  /* The last byte may be the NUL. */
  bad = req;
  memset(bad.tp, 'a', sizeof(bad.tp) - 1);
  bad.tp[sizeof(bad.tp) - 1] = 0;
  assert_int_equal(coll_runner_req_decode(&bad, sizeof(bad), &out, &why),
                   COLL_RUNNER_ACCEPTED);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(decode_checks_every_field),
      cmocka_unit_test(runner_refuses_bad_requests_and_goes_on),
      cmocka_unit_test(runner_runs_the_check_as_nobody),
      cmocka_unit_test(cancel_ends_the_check_and_the_runner),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
