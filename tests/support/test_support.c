/* The test support library itself (test_proc.h, test_wait.h): children
 * are reaped or killed on time, waits wake on their event and give up at
 * their deadline. Children here are /bin/sh one-liners; where one sleeps,
 * the sleep is the scenario (an event that comes later), not a wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_notice.h"
#include "test_proc.h"
#include "test_wait.h"

static pid_t sh(const char *script, int stdout_fd) {
  const char *argv[] = {"sh", "-c", script, NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = "/bin/sh";
  s.argv = argv;
  s.stdout_fd = stdout_fd;
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  return pid;
}

static void exit_codes_and_exec_failures_are_reported(void **state) {
  (void)state;
  assert_int_equal(tg_test_exit_code(tg_test_reap(sh("exit 3", -1), 5000)), 3);
  const char *argv[] = {"nothing", NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = "/nonexistent/tg-test-binary";
  s.argv = argv;
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(pid, 5000)), 127);
}

static void a_child_past_its_deadline_is_killed_and_reaped(void **state) {
  (void)state;
  pid_t pid = sh("exec sleep 30", TG_TEST_FD_DEVNULL);
  int64_t t0 = tg_test_now_ms();
  assert_int_equal(tg_test_reap(pid, 100), -1);
  assert_true(tg_test_now_ms() - t0 < 5000);
  /* Reaped: the pid is no longer ours to signal. */
  assert_int_equal(kill(pid, 0), -1);
  assert_int_equal(errno, ESRCH);
  pid = sh("exec sleep 30", TG_TEST_FD_DEVNULL);
  assert_int_equal(tg_test_exit_code(tg_test_stop(pid, SIGTERM, 5000)),
                   128 + SIGTERM);
}

/* What a test failing half-way leaves, the per-test teardown kills and
 * reaps, and says so; children already reaped are not touched again. */
static void the_teardown_kills_what_a_test_left_running(void **state) {
  assert_int_equal(tg_test_children_teardown(state), 0);
  pid_t gone = sh("exit 0", -1);
  assert_int_equal(tg_test_reap(gone, 5000), 0);
  pid_t a = sh("exec sleep 30", TG_TEST_FD_DEVNULL);
  pid_t b = sh("exec sleep 30", TG_TEST_FD_DEVNULL);
  int64_t t0 = tg_test_now_ms();
  assert_int_equal(tg_test_children_teardown(state), -1);
  assert_true(tg_test_now_ms() - t0 < 5000);
  /* Both reaped: neither pid is ours to signal or wait for any more. */
  assert_int_equal(kill(a, 0), -1);
  assert_int_equal(errno, ESRCH);
  assert_int_equal(kill(b, 0), -1);
  assert_int_equal(errno, ESRCH);
  assert_int_equal(tg_test_children_teardown(state), 0);
}

static void wait_line_returns_the_line_and_stops_at_eof_or_deadline(
    void **state) {
  (void)state;
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  pid_t pid = sh("echo starting; printf 'ready 42\\nafter\\n'", p[1]);
  close(p[1]);
  char line[32];
  assert_int_equal(tg_test_wait_line(p[0], "ready", 5000, line, sizeof(line)),
                   1);
  assert_string_equal(line, "ready 42");
  close(p[0]);
  assert_int_equal(tg_test_reap(pid, 5000), 0);
  /* EOF without the line; then a silent open pipe until the deadline. */
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  pid = sh("printf 'not it'", p[1]);
  close(p[1]);
  assert_int_equal(tg_test_wait_line(p[0], "ready", 5000, line, sizeof(line)),
                   0);
  close(p[0]);
  assert_int_equal(tg_test_reap(pid, 5000), 0);
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  int64_t t0 = tg_test_now_ms();
  assert_int_equal(tg_test_wait_line(p[0], "ready", 100, NULL, 0), 0);
  assert_true(tg_test_now_ms() - t0 >= 100);
  close(p[0]);
  close(p[1]);
}

static void waits_on_files_wake_when_they_appear_or_change(void **state) {
  (void)state;
  char dir[64], path[96], script[256];
  assert_int_equal(tg_test_mkdtemp(dir, sizeof(dir), "support"), 0);
  snprintf(path, sizeof(path), "%s/later", dir);
  assert_false(tg_test_wait_path(path, 50));
  /* Created and then written by a child while we wait. */
  snprintf(script, sizeof(script),
           "sleep 0.2; echo first > %s; sleep 0.2; echo needle >> %s", path,
           path);
  pid_t pid = sh(script, -1);
  assert_true(tg_test_wait_path(path, 10000));
  assert_true(tg_test_wait_file_text(path, "needle", 10000));
  assert_int_equal(tg_test_reap(pid, 5000), 0);
  assert_false(tg_test_wait_file_text(path, "absent", 50));
  /* rm_rf: nested content goes, a missing path is fine. */
  snprintf(path, sizeof(path), "%s/a/b", dir);
  snprintf(script, sizeof(script), "mkdir -p %s && touch %s/f", path, path);
  assert_int_equal(tg_test_reap(sh(script, -1), 5000), 0);
  assert_int_equal(tg_test_rm_rf(dir), 0);
  struct stat st;
  assert_int_equal(stat(dir, &st), -1);
  assert_int_equal(tg_test_rm_rf(dir), 0);
}

static void on_timer(uv_timer_t *t) { *(bool *)t->data = true; }
static bool flag_set(void *arg) { return *(bool *)arg; }

static void run_loop_until_returns_on_the_condition_or_the_deadline(
    void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  bool fired = false;
  uv_timer_t t;
  uv_timer_init(&loop, &t);
  t.data = &fired;
  uv_timer_start(&t, on_timer, 20, 0);
  assert_true(tg_test_run_loop_until(&loop, flag_set, &fired, 5000));
  /* Nothing else alive in the loop: the deadline still ends the wait. */
  bool never = false;
  int64_t t0 = tg_test_now_ms();
  assert_false(tg_test_run_loop_until(&loop, flag_set, &never, 50));
  /* libuv's clock may be a coarse one, a few ms behind ours. */
  assert_true(tg_test_now_ms() - t0 >= 40);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void certs_run_tg_certs_in_the_directory(void **state) {
  (void)state;
  char dir[64], path[128];
  assert_int_equal(tg_test_mkdtemp(dir, sizeof(dir), "support-certs"), 0);
  assert_int_equal(tg_test_certs(dir, "ca pki"), 0);
  snprintf(path, sizeof(path), "%s/pki/ca.pem", dir);
  assert_int_equal(access(path, R_OK), 0);
  assert_int_equal(tg_test_certs(dir, "host nodir relay"), -1);
  assert_int_equal(tg_test_rm_rf(dir), 0);
}

/* tg_test_json writes each value as Python's json.dumps(v,
 * sort_keys=True) does, the form the tests' expected texts use: Python
 * itself is the oracle, over every kind of value and the awkward ones
 * (floats near the notation's edges, escapes, code points past U+FFFF). */
static void json_values_are_written_as_python_writes_them(void **state) {
  (void)state;
  char dir[64], path[128], keys[128], want[8192];
  assert_int_equal(tg_test_mkdtemp(dir, sizeof(dir), "support-json"), 0);
  snprintf(path, sizeof(path), "%s/v.json", dir);
  snprintf(keys, sizeof(keys), "%s/want", dir);
  static const char doc[] =
      "{\"z\": [1, -2, 0, 9223372036854775807, -9223372036854775808],"
      " \"a\": {\"y\": true, \"b\": false, \"n\": null, \"e\": {}, "
      "\"l\": []},"
      " \"f\": [0.5, 2.0, 0.1, 1e16, 1e15, 123456789.125, 1.5e-5, 0.0001,"
      " -0.0, 3.141592653589793, 1e300, 5e-324, 100.0, 1e22],"
      " \"s\": [\"\", \"q\\\"b\\\\n\\n\\t\\r\\b\\f\\u0001\","
      " \"\u00e9\u4e2d\\ud83d\\ude00\", \"/ok\"]}";
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(doc, f);
  assert_int_equal(fclose(f), 0);
  static const char *const key[] = {"z", "a", "f", "s", "a.y", "a.e",
                                    "f.3", "f.12", "s.1", "s.2", "z.3",
                                    "f.0", "f.1", "f.7"};
  /* Python's answers, one line each. */
  char script[512];
  snprintf(script, sizeof(script),
           "python3 -c 'import json, sys\n"
           "v = json.load(open(sys.argv[1]))\n"
           "for k in sys.argv[2:]:\n"
           "    x = v\n"
           "    for p in k.split(\".\"):\n"
           "        x = x[int(p)] if isinstance(x, list) else x[p]\n"
           "    print(json.dumps(x, sort_keys=True))' %s", path);
  for (size_t i = 0; i < sizeof(key) / sizeof(key[0]); i++) {
    strcat(script, " ");
    strcat(script, key[i]);
  }
  int fd = open(keys, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(sh(script, fd), 30000)), 0);
  close(fd);
  f = fopen(keys, "r");
  assert_non_null(f);
  for (size_t i = 0; i < sizeof(key) / sizeof(key[0]); i++) {
    assert_non_null(fgets(want, sizeof(want), f));
    want[strcspn(want, "\n")] = 0;
    const char *got = tg_test_json(path, key[i]);
    assert_non_null(got);
    if (strcmp(got, want) != 0)
      fail_msg("%s: got %s, python3 writes %s", key[i], got, want);
  }
  fclose(f);
  /* No such key, an index past the end, not JSON: NULL. */
  assert_null(tg_test_json(path, "nope"));
  assert_null(tg_test_json(path, "z.5"));
  assert_null(tg_test_json(path, "z.x"));
  assert_null(tg_test_json(keys, "z"));
  assert_int_equal(tg_test_rm_rf(dir), 0);
}

/* Notices are found by code and data, on one line; the tag is the
 * table's number; a log is waited on until the line with the data comes. */
static void notices_are_found_by_code_and_data_on_one_line(void **state) {
  (void)state;
  assert_string_equal(tg_notice_tag(TG_N_STOPPING), "[TG-1003]");
  assert_string_equal(tg_notice_tag(TG_N_NONE), "[TG-0000]");
  assert_string_equal(tg_notice_tag((tg_notice_t)1), "[TG-0000]");
  const char *text =
      "tracegate: [TG-1011] cannot write /a/b: No space left on device\n"
      "tracegate: [TG-1005] the partial trace is in /tmp/x.pftrace\n"
      "tracegate: [TG-1011] cannot write /c: it is a directory";
  char line[256], word[64];
  assert_true(tg_test_notice_line(text, TG_N_OUTPUT_UNWRITABLE, "/c", line,
                                  sizeof(line)));
  assert_string_equal(line, "tracegate: [TG-1011] cannot write /c: it is a "
                            "directory");
  /* The data must be on the code's own line. */
  assert_false(tg_test_notice_line(text, TG_N_PARTIAL_KEPT, "/a/b", NULL, 0));
  assert_false(tg_test_notice_line(text, TG_N_STOPPING, NULL, NULL, 0));
  assert_int_equal(tg_test_notice_count(text, TG_N_OUTPUT_UNWRITABLE, NULL), 2);
  assert_int_equal(tg_test_notice_count(text, TG_N_OUTPUT_UNWRITABLE, "/a/"), 1);
  assert_true(tg_test_notice_last_word(text, TG_N_PARTIAL_KEPT, word,
                                       sizeof(word)));
  assert_string_equal(word, "/tmp/x.pftrace");

  char dir[64], path[96], script[400];
  assert_int_equal(tg_test_mkdtemp(dir, sizeof(dir), "notice"), 0);
  snprintf(path, sizeof(path), "%s/log", dir);
  snprintf(script, sizeof(script),
           "echo '[TG-4001] alice@1: connected' > %s; sleep 0.2; "
           "echo '[TG-4001] bob@2: connected' >> %s", path, path);
  pid_t pid = sh(script, -1);
  assert_true(tg_test_wait_notice(path, TG_N_RELAY_CONNECTED, "bob@", 10000));
  assert_int_equal(tg_test_reap(pid, 5000), 0);
  assert_false(tg_test_wait_notice(path, TG_N_RELAY_CONNECTED, "eve@", 50));
  assert_false(tg_test_wait_notice(path, TG_N_RELAY_CLOSED, NULL, 50));
  assert_int_equal(tg_test_rm_rf(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(notices_are_found_by_code_and_data_on_one_line),
      cmocka_unit_test(exit_codes_and_exec_failures_are_reported),
      cmocka_unit_test(a_child_past_its_deadline_is_killed_and_reaped),
      cmocka_unit_test(the_teardown_kills_what_a_test_left_running),
      cmocka_unit_test(wait_line_returns_the_line_and_stops_at_eof_or_deadline),
      cmocka_unit_test(waits_on_files_wake_when_they_appear_or_change),
      cmocka_unit_test(run_loop_until_returns_on_the_condition_or_the_deadline),
      cmocka_unit_test(certs_run_tg_certs_in_the_directory),
      cmocka_unit_test(json_values_are_written_as_python_writes_them),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
