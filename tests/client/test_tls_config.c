/* The per-user config file of TLS defaults (client/tls_defaults.c,
 * tg_client_tls_config_parse): docs/commands.md's example as written,
 * and each refusal naming its line. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client/tls_defaults.h"

static int parse(const char *text, tg_client_tls_files_t *tf, char *err,
                 size_t errn) {
  memset(tf, 0, sizeof(*tf));
  return tg_client_tls_config_parse(text, strlen(text), "config", tf, err,
                                    errn);
}

static void tls_config_reads_the_documented_example(void **state) {
  (void)state;
  static const char text[] =
      "# tracegate's TLS files for -H\n"
      "cert = /home/me/.tracegate/me.pem\n"
      "key  = /home/me/.tracegate/me.key\n"
      "ca   = /etc/tracegate/ca.pem\r\n"
      "session_cache = on   # record: resume TLS sessions across runs\n";
  tg_client_tls_files_t tf;
  char err[256] = "";
  assert_int_equal(parse(text, &tf, err, sizeof(err)), 0);
  assert_string_equal(tf.cert, "/home/me/.tracegate/me.pem");
  assert_string_equal(tf.key, "/home/me/.tracegate/me.key");
  assert_string_equal(tf.ca, "/etc/tracegate/ca.pem");
  assert_string_equal(tf.session_cache, "on");
  /* A '#' inside a path is the path's (config_text.h). */
  assert_int_equal(parse("ca = /etc/tg#2/ca.pem\n", &tf, err, sizeof(err)), 0);
  assert_string_equal(tf.ca, "/etc/tg#2/ca.pem");
  assert_null(tf.cert);
}

static void tls_config_refusals_name_the_line(void **state) {
  (void)state;
  static const struct {
    const char *text;
    const char *want;
  } cases[] = {
      {"# x\ncertt = a\n", "config:2: unknown setting (cert, key, ca, session_cache)"},
      {"ca =   # none\n", "config:1: empty value"},
      {"just a path\n", "config:1: expected key = value, not 'just a path'"},
      {"ca = a\nkey = b\nca = c\n", "config:3: ca: expected once, already set on line 1"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tg_client_tls_files_t tf;
    char err[256] = "";
    assert_int_equal(parse(cases[i].text, &tf, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, cases[i].want);
  }
  /* A value that does not fit is refused, never cut. */
  char text[TG_CLIENT_PATH_MAX + 16];
  int w = snprintf(text, sizeof(text), "key = ");
  memset(text + w, 'k', TG_CLIENT_PATH_MAX);
  text[w + TG_CLIENT_PATH_MAX] = 0;
  tg_client_tls_files_t tf;
  char err[256] = "";
  assert_int_equal(parse(text, &tf, err, sizeof(err)), -EINVAL);
  assert_string_equal(err, "config:1: key: longer than 1023 bytes");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tls_config_reads_the_documented_example),
      cmocka_unit_test(tls_config_refusals_name_the_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
