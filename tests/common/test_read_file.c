/* Whole reads of operator files (common/read_file.c): a regular file is
 * read whole and NUL-terminated, up to its bound and not a byte past it;
 * a FIFO (with or without a writer), a directory and a device are refused
 * at once with -EINVAL; a missing file says ENOENT. alarm() bounds the
 * test if a read does block. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/read_file.h"

static char dir[] = "/tmp/tg_read_file_XXXXXX";

static const char *in_dir(const char *name) {
  static char path[128];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  return path;
}

static void write_file(const char *path, size_t n) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (size_t i = 0; i < n; i++) fputc('a' + (int)(i % 26), f);
  assert_int_equal(fclose(f), 0);
}

static void reads_a_regular_file_up_to_its_bound(void **state) {
  (void)state;
  char *text;
  size_t len;
  write_file(in_dir("f"), 100);
  assert_int_equal(tg_read_regular_file(in_dir("f"), 100, &text, &len), 0);
  assert_int_equal(len, 100);
  assert_int_equal(text[99], 'a' + 99 % 26);
  assert_int_equal(text[100], '\0');
  free(text);
  assert_int_equal(tg_read_regular_file(in_dir("f"), 99, &text, &len), -EFBIG);
  assert_null(text);
  write_file(in_dir("empty"), 0);
  assert_int_equal(tg_read_regular_file(in_dir("empty"), 10, &text, &len), 0);
  assert_int_equal(len, 0);
  assert_string_equal(text, "");
  free(text);
  assert_int_equal(tg_read_regular_file(in_dir("none"), 10, &text, &len),
                   -ENOENT);
}

static void refuses_what_is_not_a_regular_file(void **state) {
  (void)state;
  char *text;
  size_t len;
  assert_int_equal(mkfifo(in_dir("fifo"), 0600), 0);
  alarm(10);
  assert_int_equal(tg_read_regular_file(in_dir("fifo"), 10, &text, &len),
                   -EINVAL);
  int w = open(in_dir("fifo"), O_RDWR | O_CLOEXEC);
  assert_true(w >= 0);
  assert_int_equal(tg_read_regular_file(in_dir("fifo"), 10, &text, &len),
                   -EINVAL);
  alarm(0);
  close(w);
  assert_int_equal(tg_read_regular_file(dir, 10, &text, &len), -EINVAL);
  assert_int_equal(tg_read_regular_file("/dev/zero", 10, &text, &len),
                   -EINVAL);
  assert_null(text);
  char why[96];
  assert_non_null(strstr(tg_read_file_why(why, sizeof(why), -EINVAL, 9), "regular"));
  assert_string_equal(tg_read_file_why(why, sizeof(why), -EFBIG, 100),
                      "larger than 100 bytes");
}

static int setup(void **state) {
  (void)state;
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  const char *names[] = {"f", "empty", "fifo"};
  for (size_t i = 0; i < 3; i++) unlink(in_dir(names[i]));
  return rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reads_a_regular_file_up_to_its_bound),
      cmocka_unit_test(refuses_what_is_not_a_regular_file),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
