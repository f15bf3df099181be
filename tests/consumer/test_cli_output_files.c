/* Where `tracegate record -o` writes, end to end with the real binaries:
 * a regular file is replaced only once complete, but a device, a FIFO or a
 * symlink is written through, never replaced; `-o -` is stdout; a failed
 * write (/dev/full) fails the run; and a failed or aborted run leaves no
 * hidden file behind, only a visible partial trace the message names.
 * Also the failures before any output: --socket naming a producer socket
 * must say so and exit 1, not abort. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_child.h"
#include "test_proc.h"

/* --- a wrong --socket --------------------------------------------------------- */

/* |args| name the producer socket: the CLI must diagnose it, exit 1 and
 * leave nothing in the directory. */
static void expect_not_a_consumer_socket(test_service_t *ts,
                                         const char *const *args,
                                         const char *out) {
  child_t c;
  int code = run_cli(&c, args);
  if (code != 1) print_message("exit %d, stderr:\n%s\n", code, c.err);
  assert_int_equal(code, 1);
  assert_notice_with(c.err, TG_N_NOT_A_CONSUMER_SOCKET, ts->producer_sock);
  /* It answered: "is it running?" would mislead. */
  assert_no_notice(c.err, TG_N_SERVICE_UNREACHABLE);
  assert_null(strstr(c.err, "Assertion"));
  assert_false(exists(out));
  assert_no_temp(ts->dir);
}

static void producer_socket_is_refused_cleanly(void **state) {
  test_service_t *ts = *state;
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "wrong.pftrace"));
  const char *args[] = {"record", "--socket", ts->producer_sock, "-o", out,
                        "-t", "1s", "cli.ds", NULL};
  expect_not_a_consumer_socket(ts, args, out);
}

static void producer_socket_with_read_buffers_is_refused_cleanly(void **state) {
  test_service_t *ts = *state;
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "wrong-rb.pftrace"));
  const char *args[] = {"record", "--socket", ts->producer_sock, "-o", out,
                        "--read-buffers", "-t", "1s", "cli.ds", NULL};
  expect_not_a_consumer_socket(ts, args, out);
}

static void producer_socket_with_attach_stop_is_refused_cleanly(void **state) {
  test_service_t *ts = *state;
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "wrong-attach.pftrace"));
  const char *args[] = {"record", "--socket", ts->producer_sock, "--attach", "k",
                        "--stop", "-o", out, NULL};
  expect_not_a_consumer_socket(ts, args, out);
}

/* --- where -o points ------------------------------------------------------------ */

/* A short recording of the service's own packets (the config, the stats):
 * no producer is needed for a trace that is not empty. */
#define RECORD_ARGS(ts, out) \
  "record", "--socket", (ts)->consumer_sock, "-o", (out), "-t", "300ms", "cli.ds"

static void dev_null_stays_a_char_device(void **state) {
  test_service_t *ts = *state;
  const char *args[] = {RECORD_ARGS(ts, "/dev/null"), NULL};
  child_t c;
  int code = run_cli(&c, args);
  if (code) print_message("stderr:\n%s\n", c.err);
  assert_int_equal(code, 0);
  assert_notice_with(c.err, TG_N_TRACE_WRITTEN, " /dev/null:");
  struct stat st;
  assert_int_equal(lstat("/dev/null", &st), 0);
  assert_true(S_ISCHR(st.st_mode));
  /* Still the null device: what is written disappears. */
  int fd = open("/dev/null", O_RDONLY);
  assert_true(fd >= 0);
  char b;
  assert_int_equal(read(fd, &b, 1), 0);
  close(fd);
}

static void fifo_delivers_the_trace_to_a_reader(void **state) {
  test_service_t *ts = *state;
  char fifo[256];
  snprintf(fifo, sizeof(fifo), "%s", out_in(ts, "trace.fifo"));
  assert_int_equal(mkfifo(fifo, 0600), 0);
  const char *args[] = {RECORD_ARGS(ts, fifo), NULL};
  child_t c;
  spawn_cli(&c, args);
  /* Opening blocks until the CLI opens its end; then read to its EOF. */
  int fd = open(fifo, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  size_t cap = 1 << 20, n = 0;
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    int left = (int)(deadline - tg_test_now_ms());
    assert_true(left > 0);
    assert_true(poll(&p, 1, left) == 1);
    ssize_t r = read(fd, buf + n, cap - n);
    assert_true(r >= 0);
    if (r == 0) break;
    n += (size_t)r;
    assert_true(n < cap);
  }
  close(fd);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  decode_trace(buf, n, "", &t);
  assert_true(t.packets > 0);
  assert_true(t.has_config);
  free(buf);
  struct stat st;
  assert_int_equal(lstat(fifo, &st), 0);
  assert_true(S_ISFIFO(st.st_mode));
  unlink(fifo);
  assert_no_temp(ts->dir);
}

static void symlink_is_kept_and_its_target_written(void **state) {
  test_service_t *ts = *state;
  char link[256], real[256];
  snprintf(link, sizeof(link), "%s", out_in(ts, "link.pftrace"));
  snprintf(real, sizeof(real), "%s", out_in(ts, "real.pftrace"));
  /* Relative, and dangling until the trace is written. */
  assert_int_equal(symlink("real.pftrace", link), 0);
  const char *args[] = {RECORD_ARGS(ts, link), NULL};
  child_t c;
  for (int round = 0; round < 2; round++) { /* then over an existing file */
    int code = run_cli(&c, args);
    if (code) print_message("stderr:\n%s\n", c.err);
    assert_int_equal(code, 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    char target[256];
    ssize_t k = readlink(link, target, sizeof(target) - 1);
    assert_true(k > 0);
    target[k] = 0;
    assert_string_equal(target, "real.pftrace");
    trace_file_t t;
    read_trace(real, "", &t);
    assert_true(t.has_config);
    assert_no_temp(ts->dir);
  }
  unlink(link);
  unlink(real);
  /* A loop of links is refused before any session, not followed forever. */
  char a[256], b[256];
  snprintf(a, sizeof(a), "%s", out_in(ts, "loop-a"));
  snprintf(b, sizeof(b), "%s", out_in(ts, "loop-b"));
  assert_int_equal(symlink("loop-b", a), 0);
  assert_int_equal(symlink("loop-a", b), 0);
  const char *loop[] = {RECORD_ARGS(ts, a), NULL};
  assert_int_equal(run_cli(&c, loop), 1);
  assert_notice_with(c.err, TG_N_OUTPUT_UNWRITABLE, strerror(ELOOP));
  unlink(a);
  unlink(b);
  assert_no_temp(ts->dir);
}

static void dev_full_fails_the_run(void **state) {
  test_service_t *ts = *state;
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "full.json"));
  const char *args[] = {RECORD_ARGS(ts, "/dev/full"), "--summary-json", sum,
                        NULL};
  child_t c;
  assert_int_equal(run_cli(&c, args), 1);
  assert_json(sum, "hosts.0.outcome", "\"failed\"");
  assert_json(sum, "hosts.0.failure", "\"write\"");
  unlink(sum);
  assert_notice_with(c.err, TG_N_OUTPUT_UNWRITABLE, "/dev/full");
  assert_notice_with(c.err, TG_N_OUTPUT_UNWRITABLE, strerror(ENOSPC));
  assert_no_notice(c.err, TG_N_TRACE_WRITTEN);
  /* The same through a symlink: the link leads to a device. */
  char link[256];
  snprintf(link, sizeof(link), "%s", out_in(ts, "full.pftrace"));
  assert_int_equal(symlink("/dev/full", link), 0);
  const char *via_link[] = {RECORD_ARGS(ts, link), NULL};
  assert_int_equal(run_cli(&c, via_link), 1);
  assert_notice_with(c.err, TG_N_OUTPUT_UNWRITABLE, strerror(ENOSPC));
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  unlink(link);
  assert_no_temp(ts->dir);
}

static void dash_writes_the_trace_to_stdout(void **state) {
  test_service_t *ts = *state;
  const char *args[] = {RECORD_ARGS(ts, "-"), NULL};
  child_t c;
  assert_int_equal(run_cli(&c, args), 0);
  assert_true(c.n_out > 0);
  trace_file_t t;
  decode_trace((const uint8_t *)c.out, c.n_out, "", &t);
  assert_true(t.has_config);
  assert_false(exists("-"));
  assert_no_temp(ts->dir);
  /* --detach would leave nothing to write there. */
  const char *detach[] = {RECORD_ARGS(ts, "-"), "--detach", "k", NULL};
  assert_int_equal(run_cli(&c, detach), 2);
  assert_notice_with(c.err, TG_N_USAGE, "-o -");
}

static void failed_run_leaves_no_file(void **state) {
  test_service_t *ts = *state;
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "refused.pbtxt"));
  /* A 1 KiB buffer: the service refuses it. */
  write_file(cfg, "duration_ms: 1000\nbuffers { size_kb: 1 }\n");
  snprintf(out, sizeof(out), "%s", out_in(ts, "refused.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg,
                        "--txt", "-o", out, NULL};
  child_t c;
  assert_int_equal(run_cli(&c, args), 1);
  unlink(cfg);
  assert_false(exists(out));
  assert_no_temp(ts->dir);
}

int main(void) {
#define SVC(t) cmocka_unit_test_setup_teardown(t, test_service_setup, test_service_teardown)
  const struct CMUnitTest tests[] = {
      SVC(producer_socket_is_refused_cleanly),
      SVC(producer_socket_with_read_buffers_is_refused_cleanly),
      SVC(producer_socket_with_attach_stop_is_refused_cleanly),
      SVC(dev_null_stays_a_char_device),
      SVC(fifo_delivers_the_trace_to_a_reader),
      SVC(symlink_is_kept_and_its_target_written),
      SVC(dev_full_fails_the_run),
      SVC(dash_writes_the_trace_to_stdout),
      SVC(failed_run_leaves_no_file),
  };
#undef SVC
  return cmocka_run_group_tests(tests, NULL, NULL);
}
