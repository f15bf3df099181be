/* common/tp_import.h against stand-ins for trace_processor_shell (shell
 * scripts in a fresh directory): each way an import ends is classified
 * (imported, refused with its error line, killed by a signal, out of
 * memory, past its deadline with its whole process group killed, not
 * startable), the child runs under the address-space limit asked for,
 * and the error line is picked out of progress and noise. The child
 * holds nothing worth taking: it reads the trace's bytes through its
 * descriptor, but neither a key file beside it nor the caller's
 * environment; it writes no file, opens no socket, and runs as another
 * uid when asked (root only). */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/tp_import.h"
#include "test_proc.h"

static char g_dir[256];   /* the stand-ins */
static char g_store[256]; /* the trace and a key, as a collector's store */
static char g_trace[320];
static char g_key[320];

/* |n| bytes of |c| into |path|, mode 0644: readable by anyone but for
 * the sandbox. */
static int write_file(const char *path, char c, size_t n) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  for (size_t i = 0; i < n; i++) fputc(c, f);
  if (fclose(f) != 0) return -1;
  return chmod(path, 0644);
}

static int setup(void **state) {
  (void)state;
  if (tg_test_mkdtemp(g_dir, sizeof(g_dir), "tpimport") < 0 ||
      tg_test_mkdtemp(g_store, sizeof(g_store), "tpstore") < 0)
    return -1;
  snprintf(g_trace, sizeof(g_trace), "%s/trace.pftrace", g_store);
  snprintf(g_key, sizeof(g_key), "%s/client.key", g_store);
  return write_file(g_trace, 't', 100000) || write_file(g_key, 'k', 10);
}

static int teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) || tg_test_rm_rf(g_store);
}

/* A stand-in named |name| running |body| (sh); its path in |out|. */
static void script(const char *name, const char *body, char *out, size_t cap) {
  assert_int_equal(tg_test_write_script(g_dir, name, body, out, cap), 0);
}

static tg_tp_verdict_t run_as(const char *body, uint64_t timeout_ms,
                              uint64_t memory, bool as_nobody) {
  char tp[512];
  static unsigned k;
  char name[32];
  snprintf(name, sizeof(name), "tp%u", k++);
  script(name, body, tp, sizeof(tp));
  tg_tp_limits_t lim = {
      .timeout_ms = timeout_ms, .memory = memory, .as_nobody = as_nobody};
  tg_tp_verdict_t v;
  tg_tp_import(tp, g_trace, &lim, &v);
  return v;
}

static tg_tp_verdict_t run(const char *body, uint64_t timeout_ms,
                           uint64_t memory) {
  return run_as(body, timeout_ms, memory, false);
}

static void each_end_is_classified(void **state) {
  (void)state;
  tg_tp_verdict_t v = run("exit 0", 10000, 0);
  assert_int_equal(v.failure, TG_TP_OK);
  assert_string_equal(v.why, "");
  /* The arguments: -Q, a query, the trace as its descriptor. */
  v = run("[ \"$1\" = -Q ] && [ \"$3\" = /proc/self/fd/3 ] || exit 9",
          10000, 0);
  assert_int_equal(v.failure, TG_TP_OK);

  v = run("printf 'Loading trace: 0.00 MB\\rLoading trace: 0.01 MBCould not "
          "read trace file (path: /tmp/x/part.pftrace): No path from clock 6 "
          "to 1\\n' >&2; exit 1", 10000, 0);
  assert_int_equal(v.failure, TG_TP_ERROR);
  assert_string_equal(v.why, "No path from clock 6 to 1");

  v = run("echo noise >&2; echo '[1.0] x.cc:12 Check failed: a < b' >&2; "
          "echo more >&2; kill -SEGV $$", 10000, 0);
  assert_int_equal(v.failure, TG_TP_CRASH);
  assert_non_null(strstr(v.why, "signal 11"));
  assert_non_null(strstr(v.why, "Check failed: a < b"));

  v = run("echo \"terminate called after throwing an instance of "
          "'std::bad_alloc'\" >&2; kill -ABRT $$", 10000, 0);
  assert_int_equal(v.failure, TG_TP_MEMORY);
}

/* The state letter of the process whose command line holds |mark|, or 0
 * when there is none. */
static char state_of(const char *mark) {
  char found = 0;
  DIR *d = opendir("/proc");
  assert_non_null(d);
  for (struct dirent *de; !found && (de = readdir(d));) {
    int pid = atoi(de->d_name);
    if (pid <= 0) continue;
    char path[64], cmd[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
      if (!cmd[i]) cmd[i] = ' ';
    cmd[n] = 0;
    if (!strstr(cmd, mark)) continue;
    char line[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (!f) continue;
    if (fgets(line, sizeof(line), f)) {
      const char *e = strrchr(line, ')');
      if (e && e[1] == ' ') found = e[2];
    }
    fclose(f);
  }
  closedir(d);
  return found;
}

/* Past the deadline the child and what it started are killed. */
static void a_child_past_its_deadline_is_killed_with_its_group(void **state) {
  (void)state;
  /* A sleep no other process on the machine has. */
  char mark[32], body[128];
  snprintf(mark, sizeof(mark), "61.%d", (int)getpid());
  snprintf(body, sizeof(body), "sleep %s & wait", mark);
  tg_tp_verdict_t v = run(body, 300, 0);
  assert_int_equal(v.failure, TG_TP_TIMEOUT);
  /* Killed (SIGKILL is delivered at once; init reaps it soon after). */
  char st = state_of(mark);
  for (int i = 0; i < 100 && st && st != 'Z'; i++) {
    usleep(10000);
    st = state_of(mark);
  }
  assert_true(st == 0 || st == 'Z');
}

/* The child reads the trace's bytes through its descriptor, and nothing
 * of the caller: a key file readable by anyone, its environment, a file
 * written, a socket. */
static void the_child_reads_the_trace_and_nothing_else(void **state) {
  (void)state;
  setenv("AWS_SECRET_ACCESS_KEY", "tg-test-secret", 1);
  char body[1024];
  snprintf(body, sizeof(body),
           "[ \"$(wc -c < \"$3\")\" = 100000 ] || exit 11\n"
           "cat '%s' >/dev/null 2>&1 && exit 12\n"
           "env | grep -q tg-test-secret && exit 13\n"
           "[ \"$(env | wc -l)\" -le 4 ] || exit 14\n"
           "echo x > '%s/written' 2>/dev/null && exit 15\n"
           "python3 -c 'import socket; socket.socket()' 2>/dev/null && exit 16\n"
           "exit 0",
           g_key, g_store);
  tg_tp_verdict_t v = run(body, 10000, 0);
  unsetenv("AWS_SECRET_ACCESS_KEY");
  assert_string_equal(v.why, "");
  assert_int_equal(v.failure, TG_TP_OK);
  char written[400];
  snprintf(written, sizeof(written), "%s/written", g_store);
  assert_int_not_equal(access(written, F_OK), 0);
}

/* With as_nobody, a root caller's child runs as uid and gid 65534. */
static void as_nobody_the_child_is_another_uid(void **state) {
  (void)state;
  TG_TEST_REQUIRE_OTHER_USER();
  assert_int_equal(tg_test_other_user_dir(g_dir, 0755), 0);
  tg_tp_verdict_t v = run_as(
      "[ \"$(id -u):$(id -g)\" = 65534:65534 ] || exit 9\n"
      "[ \"$(wc -c < \"$3\")\" = 100000 ] || exit 11",
      10000, 0, true);
  assert_int_equal(tg_test_other_user_dir(g_dir, 0700), 0);
  assert_string_equal(v.why, "");
  assert_int_equal(v.failure, TG_TP_OK);
}

/* A trace that is not a regular file is no verdict on a file. */
static void a_trace_that_is_no_file_is_not_run(void **state) {
  (void)state;
  tg_tp_limits_t lim = {.timeout_ms = 1000};
  tg_tp_verdict_t v;
  tg_tp_import("/bin/true", g_store, &lim, &v);
  assert_int_equal(v.failure, TG_TP_NOT_RUN);
  tg_tp_import("/bin/true", "/nonexistent/trace", &lim, &v);
  assert_int_equal(v.failure, TG_TP_NOT_RUN);
}

/* The address-space limit is the child's (ulimit -v: KiB). */
static void the_memory_limit_is_the_childs(void **state) {
  (void)state;
  tg_tp_verdict_t v = run("ulimit -v >&2; exit 1", 10000, 256u << 20);
  assert_int_equal(v.failure, TG_TP_ERROR);
  assert_string_equal(v.why, "262144");
  v = run("ulimit -v >&2; exit 1", 10000, 0);
  assert_string_equal(v.why, "unlimited");
}

static void a_missing_program_is_not_run(void **state) {
  (void)state;
  tg_tp_limits_t lim = {.timeout_ms = 1000};
  tg_tp_verdict_t v;
  tg_tp_import("/nonexistent/trace_processor_shell", "/x", &lim, &v);
  assert_int_equal(v.failure, TG_TP_NOT_RUN);
  tg_tp_import("tg-no-such-trace-processor", "/x", &lim, &v);
  assert_int_equal(v.failure, TG_TP_NOT_RUN);
  assert_string_equal(tg_tp_failure_name(TG_TP_NOT_RUN), "not_run");
}

static void the_line_is_picked_and_printable(void **state) {
  (void)state;
  char why[64];
  tg_tp_why_of("", 0, why, sizeof(why));
  assert_string_equal(why, "no reason given");
  static const char esc[] = "first\nbad \x1b[31m line\n";
  tg_tp_why_of(esc, sizeof(esc) - 1, why, sizeof(why));
  assert_null(strchr(why, 0x1b));
  static const char progress[] = "Loading trace: 1.00 MB\r";
  tg_tp_why_of(progress, sizeof(progress) - 1, why, sizeof(why));
  assert_string_equal(why, "no reason given");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_end_is_classified),
      cmocka_unit_test(a_child_past_its_deadline_is_killed_with_its_group),
      cmocka_unit_test(the_memory_limit_is_the_childs),
      cmocka_unit_test(a_missing_program_is_not_run),
      cmocka_unit_test(the_child_reads_the_trace_and_nothing_else),
      cmocka_unit_test(as_nobody_the_child_is_another_uid),
      cmocka_unit_test(a_trace_that_is_no_file_is_not_run),
      cmocka_unit_test(the_line_is_picked_and_printable),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
