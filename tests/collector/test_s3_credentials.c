/* The bucket's keys (collector/s3_credentials.h): the file's grammar, its
 * mode (a file others can read is refused), the environment. */
#include <errno.h>
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

#include "collector/s3_credentials.h"

static int parse(const char *text, tg_s3_credentials_t *c) {
  char why[160];
  return tg_s3_credentials_parse(text, strlen(text), c, why, sizeof why);
}

static void credentials_file_grammar(void **state) {
  (void)state;
  tg_s3_credentials_t c;
  assert_int_equal(parse("# keys\n\nAWS_ACCESS_KEY_ID=AK1\r\n"
                         "  AWS_SECRET_ACCESS_KEY = s/e+c=r  \n", &c), 0);
  assert_string_equal(c.access_key, "AK1");
  assert_string_equal(c.secret_key, "s/e+c=r");
  static const char *const bad[] = {
      "",
      "AWS_ACCESS_KEY_ID=a\n",
      "AWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=\n",
      "AWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b c\n",
      "AWS_ACCESS_KEY_ID=a\nAWS_ACCESS_KEY_ID=b\nAWS_SECRET_ACCESS_KEY=c\n",
      "AWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\nAWS_SESSION_TOKEN=t\n",
      "AWS_ACCESS_KEY_ID a\nAWS_SECRET_ACCESS_KEY=b\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(parse(bad[i], &c), -EINVAL);
    assert_string_equal(c.access_key, "");
    assert_string_equal(c.secret_key, "");
  }
}

static void credentials_file_mode_and_environment(void **state) {
  (void)state;
  char path[] = "/tmp/tg-s3-keys-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  static const char text[] = "AWS_ACCESS_KEY_ID=AK\nAWS_SECRET_ACCESS_KEY=SK\n";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  tg_s3_credentials_t c;
  char why[160];
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(tg_s3_credentials_load(path, &c, why, sizeof why), 0);
  assert_string_equal(c.secret_key, "SK");
  assert_int_equal(chmod(path, 0640), 0);
  assert_int_equal(tg_s3_credentials_load(path, &c, why, sizeof why), -EPERM);
  assert_string_equal(c.secret_key, "");
  assert_int_equal(chmod(path, 0604), 0);
  assert_int_equal(tg_s3_credentials_load(path, &c, why, sizeof why), -EPERM);
  unlink(path);
  assert_int_equal(tg_s3_credentials_load(path, &c, why, sizeof why), -ENOENT);
  assert_int_equal(tg_s3_credentials_load("/tmp", &c, why, sizeof why),
                   -EINVAL);

  unsetenv("AWS_ACCESS_KEY_ID");
  setenv("AWS_SECRET_ACCESS_KEY", "SK2", 1);
  assert_int_equal(tg_s3_credentials_load(NULL, &c, why, sizeof why), -EINVAL);
  setenv("AWS_ACCESS_KEY_ID", "AK2", 1);
  assert_int_equal(tg_s3_credentials_load("", &c, why, sizeof why), 0);
  assert_string_equal(c.access_key, "AK2");
  assert_string_equal(c.secret_key, "SK2");
  tg_s3_credentials_clear(&c);
  assert_string_equal(c.secret_key, "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(credentials_file_grammar),
      cmocka_unit_test(credentials_file_mode_and_environment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
