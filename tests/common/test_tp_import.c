/* common/tp_import.h against stand-ins for trace_processor_shell (shell
 * scripts in a fresh directory): each way an import ends is classified
 * (imported, refused with its error line, killed by a signal, out of
 * memory, past its deadline with its whole process group killed, not
 * startable), the child runs under the address-space limit asked for,
 * and the error line is picked out of progress and noise. */
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

static char g_dir[256];

static int setup(void **state) {
  (void)state;
  return tg_test_mkdtemp(g_dir, sizeof(g_dir), "tpimport");
}

static int teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir);
}

/* A stand-in named |name| running |body| (sh); its path in |out|. */
static void script(const char *name, const char *body, char *out, size_t cap) {
  snprintf(out, cap, "%s/%s", g_dir, name);
  FILE *f = fopen(out, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\n%s\n", body);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(chmod(out, 0755), 0);
}

static tg_tp_verdict_t run(const char *body, uint64_t timeout_ms,
                           uint64_t memory) {
  char tp[512];
  static unsigned k;
  char name[32];
  snprintf(name, sizeof(name), "tp%u", k++);
  script(name, body, tp, sizeof(tp));
  tg_tp_limits_t lim = {.timeout_ms = timeout_ms, .memory = memory};
  tg_tp_verdict_t v;
  tg_tp_import(tp, "/tmp/some/trace.pftrace", &lim, &v);
  return v;
}

static void each_end_is_classified(void **state) {
  (void)state;
  tg_tp_verdict_t v = run("exit 0", 10000, 0);
  assert_int_equal(v.failure, TG_TP_OK);
  assert_string_equal(v.why, "");
  /* The arguments: -Q, a query, the trace. */
  v = run("[ \"$1\" = -Q ] && [ \"$3\" = /tmp/some/trace.pftrace ] || exit 9",
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

/* Past the deadline the child and what it started are killed. */
static void a_child_past_its_deadline_is_killed_with_its_group(void **state) {
  (void)state;
  char pidfile[512];
  snprintf(pidfile, sizeof(pidfile), "%s/grandchild.pid", g_dir);
  char body[1024];
  snprintf(body, sizeof(body), "sleep 60 & echo $! > '%s'; wait", pidfile);
  tg_tp_verdict_t v = run(body, 300, 0);
  assert_int_equal(v.failure, TG_TP_TIMEOUT);
  FILE *f = fopen(pidfile, "r");
  assert_non_null(f);
  int pid = 0;
  assert_int_equal(fscanf(f, "%d", &pid), 1);
  fclose(f);
  /* Killed (SIGKILL is delivered at once; init reaps it soon after). */
  for (int i = 0; i < 100 && kill(pid, 0) == 0; i++) {
    char stat[64], line[256];
    snprintf(stat, sizeof(stat), "/proc/%d/stat", pid);
    FILE *s = fopen(stat, "r");
    if (!s) break;
    bool zombie = fgets(line, sizeof(line), s) && strstr(line, ") Z");
    fclose(s);
    if (zombie) break;
    usleep(10000);
  }
  char stat[64], line[256] = "";
  snprintf(stat, sizeof(stat), "/proc/%d/stat", pid);
  FILE *s = fopen(stat, "r");
  if (s) {
    assert_non_null(fgets(line, sizeof(line), s));
    fclose(s);
    assert_non_null(strstr(line, ") Z"));
  }
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
      cmocka_unit_test(the_line_is_picked_and_printable),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
