/* SPDX-License-Identifier: Apache-2.0 */
/* common/flag_rules.c: each kind of rule, the given flags the parser
 * records, rules naming unknown flags, and the order of reporting. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/flag_rules.h"
#include "common/flags.h"

typedef struct opts {
  const char *config, *out, *attach, *detach;
  bool txt, stop;
  uint64_t count;
  const char *hosts[4];
  size_t n_hosts;
  char *pos[4];
  size_t n_pos;
  tg_flag_list_t host_list;
  tg_flag_t flags[8];
  tg_flags_given_t given;
} opts_t;

#define N_FLAGS 8

static void table(opts_t *o) {
  o->host_list = (tg_flag_list_t){o->hosts, 4, &o->n_hosts};
  const tg_flag_t f[N_FLAGS] = {
      {"config", TG_FLAG_STRING, &o->config, "F", "-c: config", 0, 0},
      {"out", TG_FLAG_STRING, &o->out, "F", "-o: out", 0, 0},
      {"attach", TG_FLAG_STRING, &o->attach, "K", "attach", 0, 0},
      {"detach", TG_FLAG_STRING, &o->detach, "K", "detach", 0, 0},
      {"txt", TG_FLAG_BOOL, &o->txt, NULL, "text", 0, 0},
      {"stop", TG_FLAG_BOOL, &o->stop, NULL, "stop", 0, 0},
      {"count", TG_FLAG_UINT, &o->count, "N", "count", 0, 0},
      {"host", TG_FLAG_LIST, &o->host_list, "H", "-H: host", 0, 0},
  };
  memcpy(o->flags, f, sizeof(f));
}

/* Parses the NULL-terminated |args| into |o|, recording what was given. */
static int parse(opts_t *o, const char *const *args) {
  memset(o, 0, sizeof(*o));
  o->count = 7; /* a default, given or not */
  table(o);
  char *argv[16] = {"prog"};
  int argc = 1;
  while (*args && argc < 15) argv[argc++] = (char *)*args++;
  return tg_flags_parse_given("prog", o->flags, N_FLAGS, argc, argv, o->pos, 4,
                              &o->n_pos, &o->given);
}

/* The index of the rule check() found broken (SIZE_MAX: none). */
static size_t last_which;

/* The rules |r| against |args|: the validator's result, its message in
 * |err|. */
static int check(const char *const *args, const tg_flag_rule_t *r, size_t n,
                 char *err, size_t cap) {
  static opts_t o;
  assert_int_equal(parse(&o, args), 0);
  err[0] = 0;
  last_which = SIZE_MAX;
  return tg_flag_rules_check(o.flags, N_FLAGS, &o.given, r, n, &o, err, cap,
                             &last_which);
}

/* A built message names the flags |names| (NULL-terminated), in that
 * order; its words around them are not the contract. */
static void assert_names(const char *err, const char *const *names) {
  const char *at = err;
  for (; *names; names++) {
    const char *hit = strstr(at, *names);
    if (!hit) fail_msg("'%s' does not name %s in order", err, *names);
    at = hit + strlen(*names);
  }
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_ARGS ((const char *const[]){NULL})

static void test_given_recorded(void **state) {
  (void)state;
  opts_t o;
  assert_int_equal(parse(&o, ARGS("--txt", "-H", "a", "--count=7", "ds")), 0);
  assert_true(tg_flags_was_given(&o.given, 4));  /* txt */
  assert_true(tg_flags_was_given(&o.given, 7));  /* host */
  assert_true(tg_flags_was_given(&o.given, 6));  /* count, at its default */
  assert_false(tg_flags_was_given(&o.given, 0)); /* config */
  assert_false(tg_flags_was_given(&o.given, 5)); /* stop */
  assert_false(tg_flags_was_given(&o.given, 200));
  assert_true(o.given.args);
  /* After "--" the arguments are positional all the same. */
  assert_int_equal(parse(&o, ARGS("--", "--stop")), 0);
  assert_true(o.given.args);
  assert_false(tg_flags_was_given(&o.given, 5));
  assert_int_equal(parse(&o, NO_ARGS), 0);
  assert_false(o.given.args);
}

static void test_requires(void **state) {
  (void)state;
  const tg_flag_rule_t r[] = {TG_FLAG_REQUIRES(("txt"), ("config"), NULL)};
  char err[200];
  assert_int_equal(check(ARGS("--txt", "-c", "x"), r, 1, err, sizeof(err)), 0);
  assert_int_equal(check(NO_ARGS, r, 1, err, sizeof(err)), 0);
  assert_int_equal(check(ARGS("--txt"), r, 1, err, sizeof(err)), -EINVAL);
  assert_names(err, (const char *const[]){"--txt", "--config", NULL});
  /* Any of several on either side. */
  const tg_flag_rule_t r2[] = {
      TG_FLAG_REQUIRES(("stop", "txt"), ("attach", "config"), NULL)};
  assert_int_equal(check(ARGS("--txt", "--attach", "k"), r2, 1, err, 200), 0);
  assert_int_equal(check(ARGS("--txt"), r2, 1, err, 200), -EINVAL);
  assert_names(err,
               (const char *const[]){"--txt", "--attach", "--config", NULL});
}

static void test_excludes(void **state) {
  (void)state;
  const tg_flag_rule_t r[] = {
      TG_FLAG_EXCLUDES(("attach"), ("detach", "config", TG_FLAG_ARGS), NULL)};
  char err[200];
  assert_int_equal(check(ARGS("--attach", "k"), r, 1, err, 200), 0);
  assert_int_equal(check(ARGS("--detach", "k", "ds"), r, 1, err, 200), 0);
  assert_int_equal(
      check(ARGS("--attach", "k", "--detach", "j"), r, 1, err, 200), -EINVAL);
  assert_names(err, (const char *const[]){"--attach", "--detach", NULL});
  /* The positional arguments are a name of their own. */
  assert_int_equal(check(ARGS("--attach", "k", "ds"), r, 1, err, 200), -EINVAL);
  assert_names(err, (const char *const[]){"--attach", TG_FLAG_ARGS, NULL});
}

static void test_any_of(void **state) {
  (void)state;
  const tg_flag_rule_t r[] = {
      TG_FLAG_ANY_OF(("attach", "config", TG_FLAG_ARGS), NULL)};
  char err[200];
  assert_int_equal(check(ARGS("ds"), r, 1, err, 200), 0);
  assert_int_equal(check(ARGS("-c", "x"), r, 1, err, 200), 0);
  assert_int_equal(check(ARGS("--txt"), r, 1, err, 200), -EINVAL);
  assert_names(
      err, (const char *const[]){"--attach", "--config", TG_FLAG_ARGS, NULL});
}

static void test_at_most_and_one_of(void **state) {
  (void)state;
  const tg_flag_rule_t most[] = {
      TG_FLAG_AT_MOST_ONE_OF(("attach", "detach", "stop"), NULL)};
  const tg_flag_rule_t one[] = {
      TG_FLAG_ONE_OF(("attach", "detach", "stop"), NULL)};
  char err[200];
  assert_int_equal(check(NO_ARGS, most, 1, err, 200), 0);
  assert_int_equal(check(NO_ARGS, one, 1, err, 200), -EINVAL);
  assert_names(err,
               (const char *const[]){"--attach", "--detach", "--stop", NULL});
  assert_int_equal(check(ARGS("--stop"), most, 1, err, 200), 0);
  assert_int_equal(check(ARGS("--stop"), one, 1, err, 200), 0);
  /* Two given: both named, in the rule's order, whatever the line's. */
  assert_int_equal(check(ARGS("--stop", "--detach", "k"), most, 1, err, 200),
                   -EINVAL);
  assert_names(err, (const char *const[]){"--detach", "--stop", NULL});
  assert_int_equal(check(ARGS("--detach", "k", "--stop"), one, 1, err, 200),
                   -EINVAL);
  assert_names(err, (const char *const[]){"--detach", "--stop", NULL});
}

static bool out_not_dash(const void *ctx) {
  const opts_t *o = ctx;
  return !o->out || strcmp(o->out, "-");
}

static void test_check_and_why(void **state) {
  (void)state;
  const tg_flag_rule_t r[] = {
      TG_FLAG_CHECK(("detach"), ("out"), "--detach: not with -o -",
                    out_not_dash),
      TG_FLAG_REQUIRES(("stop"), ("attach"), "--stop needs --attach KEY")};
  char err[200];
  /* The check applies only when a flag of its a side was given. */
  assert_int_equal(check(ARGS("-o", "-"), r, 2, err, 200), 0);
  assert_int_equal(check(ARGS("-o", "x", "--detach", "k"), r, 2, err, 200), 0);
  assert_int_equal(check(ARGS("-o", "-", "--detach", "k"), r, 2, err, 200),
                   -EINVAL);
  assert_string_equal(err, "--detach: not with -o -");
  /* A rule's own words replace the built ones. */
  assert_int_equal(check(ARGS("--stop"), r, 2, err, 200), -EINVAL);
  assert_string_equal(err, "--stop needs --attach KEY");
  /* A short buffer gets as much as fits, terminated. */
  assert_int_equal(check(ARGS("--stop"), r, 2, err, 6), -EINVAL);
  assert_string_equal(err, "--sto");
}

static void test_refused(void **state) {
  (void)state;
  const tg_flag_rule_t r[] = {TG_FLAG_REFUSED(("stop", "detach"), NULL)};
  char err[200];
  assert_int_equal(check(ARGS("--txt"), r, 1, err, 200), 0);
  assert_int_equal(check(ARGS("--detach", "k"), r, 1, err, 200), -EINVAL);
  assert_names(err, (const char *const[]){"--detach", NULL});
}

/* Marked by hand (config fields, not a command line): the same rules. */
static void test_marked_given(void **state) {
  (void)state;
  opts_t o;
  assert_int_equal(parse(&o, NO_ARGS), 0);
  const tg_flag_rule_t r[] = {
      TG_FLAG_REQUIRES(("txt"), ("config"), NULL),
      TG_FLAG_EXCLUDES(("attach"), ("detach"), "no"),
  };
  tg_flags_given_t g;
  memset(&g, 0, sizeof(g));
  tg_flags_mark_given(&g, 2);                  /* attach */
  tg_flags_mark_given(&g, 3);                  /* detach */
  tg_flags_mark_given(&g, TG_FLAGS_GIVEN_MAX); /* past the end: ignored */
  char err[200];
  size_t which = 99;
  assert_int_equal(tg_flag_rules_check(o.flags, N_FLAGS, &g, r, 2, &o, err,
                                       sizeof(err), &which),
                   -EINVAL);
  assert_int_equal(which, 1);
  assert_string_equal(err, "no");
}

static void test_order_is_the_tables(void **state) {
  (void)state;
  const tg_flag_rule_t r[] = {
      TG_FLAG_REQUIRES(("txt"), ("config"), NULL),
      TG_FLAG_REQUIRES(("stop"), ("attach"), NULL),
  };
  char err[200];
  /* Both broken: the first rule of the table is reported, however the
   * command line orders the flags. */
  assert_int_equal(check(ARGS("--stop", "--txt"), r, 2, err, 200), -EINVAL);
  assert_names(err, (const char *const[]){"--txt", "--config", NULL});
  assert_int_equal(last_which, 0);
  assert_int_equal(check(ARGS("--txt", "--stop"), r, 2, err, 200), -EINVAL);
  assert_names(err, (const char *const[]){"--txt", "--config", NULL});
  assert_int_equal(last_which, 0);
}

static void test_unknown_name_is_a_bug(void **state) {
  (void)state;
  opts_t o;
  assert_int_equal(parse(&o, NO_ARGS), 0);
  const tg_flag_rule_t r[] = {
      TG_FLAG_REQUIRES(("txt"), ("config"), NULL),
      TG_FLAG_EXCLUDES(("attach"), ("detatch"), NULL), /* misspelt */
  };
  char err[200];
  assert_int_equal(tg_flag_rules_lint(o.flags, N_FLAGS, r, 2, err, 200),
                   -ENOENT);
  assert_non_null(strstr(err, "rule 1"));
  assert_non_null(strstr(err, "--detatch"));
  /* The validator refuses it rather than reading it as never given. */
  assert_int_equal(
      tg_flag_rules_check(o.flags, N_FLAGS, &o.given, r, 2, &o, err, 200, NULL),
      -ENOENT);
  assert_non_null(strstr(err, "--detatch"));
  /* Shapes that do not fit their kind. */
  const tg_flag_rule_t bad[] = {
      TG_FLAG_REQUIRES(("txt"), (NULL), NULL),
      TG_FLAG_AT_MOST_ONE_OF(("txt"), NULL),
      TG_FLAG_CHECK(("txt"), (NULL), NULL, out_not_dash),
      TG_FLAG_CHECK(("txt"), (NULL), "why", NULL),
      {.kind = TG_RULE_ANY_OF,
       .a = {"txt"},
       .b = {"stop"},
       .why = NULL,
       .ok = NULL},
      {.kind = TG_RULE_REFUSED,
       .a = {NULL},
       .b = {NULL},
       .why = NULL,
       .ok = NULL},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(tg_flag_rules_lint(o.flags, N_FLAGS, &bad[i], 1, err, 200),
                     -EDOM);
  const tg_flag_rule_t good[] = {
      TG_FLAG_ANY_OF((TG_FLAG_ARGS, "config"), NULL),
      TG_FLAG_CHECK(("out"), (NULL), "why", out_not_dash),
  };
  assert_int_equal(tg_flag_rules_lint(o.flags, N_FLAGS, good, 2, err, 200), 0);
}

static void test_table_too_large_for_given(void **state) {
  (void)state;
  static bool b[TG_FLAGS_GIVEN_MAX + 1];
  static tg_flag_t f[TG_FLAGS_GIVEN_MAX + 1];
  static char names[TG_FLAGS_GIVEN_MAX + 1][8];
  for (size_t i = 0; i <= TG_FLAGS_GIVEN_MAX; i++) {
    snprintf(names[i], sizeof(names[i]), "f%zu", i);
    f[i] = (tg_flag_t){names[i], TG_FLAG_BOOL, &b[i], NULL, "x", 0, 0};
  }
  char *argv[] = {"prog", "--f1", NULL};
  tg_flags_given_t g;
  assert_int_equal(tg_flags_parse_given("prog", f, TG_FLAGS_GIVEN_MAX + 1, 2,
                                        argv, NULL, 0, NULL, &g),
                   -EINVAL);
  assert_int_equal(tg_flags_parse_given("prog", f, TG_FLAGS_GIVEN_MAX, 2, argv,
                                        NULL, 0, NULL, &g),
                   0);
  assert_true(tg_flags_was_given(&g, 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_given_recorded),
      cmocka_unit_test(test_requires),
      cmocka_unit_test(test_excludes),
      cmocka_unit_test(test_any_of),
      cmocka_unit_test(test_at_most_and_one_of),
      cmocka_unit_test(test_check_and_why),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_marked_given),
      cmocka_unit_test(test_order_is_the_tables),
      cmocka_unit_test(test_unknown_name_is_a_bug),
      cmocka_unit_test(test_table_too_large_for_given),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
