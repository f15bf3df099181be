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
  assert_non_null(strstr(c.err, "cannot connect to the tracing service at"));
  assert_non_null(strstr(c.err, ts->producer_sock));
  assert_non_null(strstr(c.err, "not a tracing service's consumer socket"));
  /* It answered: "is it running?" would mislead. */
  assert_null(strstr(c.err, "is tracegated running?"));
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

int main(void) {
#define SVC(t) cmocka_unit_test_setup_teardown(t, test_service_setup, test_service_teardown)
  const struct CMUnitTest tests[] = {
      SVC(producer_socket_is_refused_cleanly),
      SVC(producer_socket_with_read_buffers_is_refused_cleanly),
      SVC(producer_socket_with_attach_stop_is_refused_cleanly),
  };
#undef SVC
  return cmocka_run_group_tests(tests, NULL, NULL);
}
