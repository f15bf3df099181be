/* The bucket's keys (collector/s3/s3_credentials.h): the file's grammar, its
 * mode (a file others can read is refused), the environment. */
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

#include "collector/s3/s3_credentials.h"

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

/* Without s3_credentials_file: systemd's credential (LoadCredential=)
 * when $CREDENTIALS_DIRECTORY holds one, whatever its group bits (systemd
 * grants the unit's user by an ACL, which shows as group-readable), and
 * before the environment; the environment when it holds none. */
static void credentials_from_systemd_before_the_environment(void **state) {
  (void)state;
  char dir[] = "/tmp/tg-s3-creds-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/" TG_S3_CREDENTIAL_NAME, dir);
  setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "SKENV", 1);
  setenv("CREDENTIALS_DIRECTORY", dir, 1);
  tg_s3_credentials_t c;
  char why[256];
  /* None in the directory: the environment. */
  assert_int_equal(tg_s3_credentials_load(NULL, &c, why, sizeof why), 0);
  assert_string_equal(c.secret_key, "SKENV");
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0440);
  assert_true(fd >= 0);
  static const char text[] = "AWS_ACCESS_KEY_ID=AKCRED\n"
                             "AWS_SECRET_ACCESS_KEY=SKCRED\n";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  assert_int_equal(tg_s3_credentials_load("", &c, why, sizeof why), 0);
  assert_string_equal(c.access_key, "AKCRED");
  assert_string_equal(c.secret_key, "SKCRED");
  /* A named file still comes first, and still needs its owner-only mode. */
  char named[] = "/tmp/tg-s3-keys-XXXXXX";
  fd = mkstemp(named);
  assert_true(fd >= 0);
  static const char file[] = "AWS_ACCESS_KEY_ID=AKF\nAWS_SECRET_ACCESS_KEY=SKF\n";
  assert_int_equal(write(fd, file, strlen(file)), (ssize_t)strlen(file));
  close(fd);
  assert_int_equal(tg_s3_credentials_load(named, &c, why, sizeof why), 0);
  assert_string_equal(c.secret_key, "SKF");
  assert_int_equal(chmod(named, 0440), 0);
  assert_int_equal(tg_s3_credentials_load(named, &c, why, sizeof why), -EPERM);
  unlink(named);
  /* A credential that does not parse is an error, not the environment. */
  unlink(path);
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0400);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "AWS_ACCESS_KEY_ID=A\n", 20), 20);
  close(fd);
  assert_int_equal(tg_s3_credentials_load(NULL, &c, why, sizeof why), -EINVAL);
  assert_string_equal(c.secret_key, "");
  assert_non_null(strstr(why, path));
  unlink(path);
  rmdir(dir);
  unsetenv("CREDENTIALS_DIRECTORY");
  assert_int_equal(tg_s3_credentials_load(NULL, &c, why, sizeof why), 0);
  assert_string_equal(c.secret_key, "SKENV");
  tg_s3_credentials_clear(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(credentials_file_grammar),
      cmocka_unit_test(credentials_file_mode_and_environment),
      cmocka_unit_test(credentials_from_systemd_before_the_environment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
