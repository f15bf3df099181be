/* SPDX-License-Identifier: Apache-2.0 */
/* tracegate-relay's flag rules (relay/relay_flags.c): they name only the
 * relay's flags; each has a line that breaks it and gets its message
 * (main exits 2 with it); --stdio, or the four TLS files, keep them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "relay/relay_flags.h"

static relay_opts_t O;
static tg_flag_t F[RELAY_MAX_FLAGS];
static size_t N;

static int check(const char *const *args, char *err, size_t cap) {
  relay_opts_defaults(&O);
  N = relay_flag_table(&O, F, RELAY_MAX_FLAGS);
  assert_true(N > 0);
  char *argv[16] = {"tracegate-relay"};
  int argc = 1;
  while (*args && argc < 15) argv[argc++] = (char *)*args++;
  tg_flags_given_t given;
  assert_int_equal(tg_flags_parse_given("tracegate-relay", F, N, argc, argv,
                                        NULL, 0, NULL, &given),
                   0);
  err[0] = 0;
  return tg_flag_rules_check(F, N, &given, relay_rules, relay_n_rules, &O, err,
                             cap, NULL);
}

static void test_rules_name_only_relay_flags(void **state) {
  (void)state;
  char err[256];
  check((const char *const[]){NULL}, err, sizeof(err));
  int rv =
      tg_flag_rules_lint(F, N, relay_rules, relay_n_rules, err, sizeof(err));
  if (rv < 0) fail_msg("%s", err);
}

/* Rule i requires the i-th of these unless --stdio: the line with the
 * other three breaks rule i alone. */
static const char *const tls_flags[] = {"--cert", "--key", "--ca", "--authz"};

static void test_each_rule_broken_by_a_line(void **state) {
  (void)state;
  assert_int_equal(relay_n_rules, 4);
  char err[256];
  for (size_t i = 0; i < relay_n_rules; i++) {
    const char *args[16];
    size_t k = 0;
    for (size_t j = 0; j < 4; j++) {
      if (j == i) continue;
      args[k++] = tls_flags[j];
      args[k++] = "f";
    }
    args[k] = NULL;
    assert_int_equal(check(args, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, relay_rules[i].why);
    assert_non_null(strstr(err, tls_flags[i]));
  }
}

static void test_lines_that_keep_the_rules(void **state) {
  (void)state;
  char err[256];
  assert_int_equal(check((const char *const[]){"--stdio", NULL}, err, 256), 0);
  assert_int_equal(
      check((const char *const[]){"--cert", "c", "--key", "k", "--ca", "a",
                                  "--authz", "z", NULL},
            err, 256),
      0);
  /* Nothing at all: the first rule, --cert, is the one named. */
  assert_int_equal(check((const char *const[]){NULL}, err, 256), -EINVAL);
  assert_string_equal(err, relay_rules[0].why);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rules_name_only_relay_flags),
      cmocka_unit_test(test_each_rule_broken_by_a_line),
      cmocka_unit_test(test_lines_that_keep_the_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
