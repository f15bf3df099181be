/* The limits on producer name patterns (service/name_regex.h): what users
 * write passes with its cost counted, and each pattern measured to
 * take glibc's regcomp() seconds, gigabytes or its stack is refused with
 * why. Accepted patterns are compiled and matched here too, so that a
 * pattern the rules let through but regcomp() chokes on shows. */
#include <errno.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "service/name_regex.h"

static long check(const char *pat) {
  char why[256] = "";
  long rv = tg_name_regex_check(pat, why, sizeof(why));
  if (rv < 0) {
    assert_int_equal(rv, -E2BIG);
    assert_true(why[0] != 0);
  }
  return rv;
}

/* |pat| is refused, saying |words|. */
static void expect_refused(const char *pat, const char *words) {
  char why[256] = "";
  assert_int_equal(tg_name_regex_check(pat, why, sizeof(why)), -E2BIG);
  if (!strstr(why, words)) fail_msg("'%s' refused for '%s', not '%s'", pat, why, words);
}

/* A string of |n| copies of |unit|, then |tail| |n| times. */
static char *nest(const char *unit, const char *mid, const char *tail, int n) {
  size_t len = (strlen(unit) + strlen(tail)) * (size_t)n + strlen(mid) + 1;
  char *s = malloc(len);
  assert_non_null(s);
  s[0] = 0;
  for (int i = 0; i < n; i++) strcat(s, unit);
  strcat(s, mid);
  for (int i = 0; i < n; i++) strcat(s, tail);
  return s;
}

static void patterns_users_write_pass_with_their_cost(void **state) {
  (void)state;
  static const struct {
    const char *pat;
    long cost;
  } ok[] = {
      {"pro.*", 7},
      {"com\\.google\\.android\\..*", 23},
      {"perfetto\\.traced_probes|tracegate-emit", 36},
      {"(app|svc)-[0-9]+", 15}, /* under '+': 2 copies of 4 */
      {"[a-z]{1,8}", 32},
      {"(ab){3}", 6},
      {"a{2,}", 12},
      {"a{0}", 1}, /* no cost; every pattern counts at least one */
      {"", 1},
      {"[]a]{4}", 4},
      {"[[:alpha:]_]+", 8},
      {"com(\\.[a-z_]*)*", 11}, /* '*' over '*' copies nothing */
      {"((ab|c)*d)?", 16},
      {"\\{literal\\}", 9},
  };
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    long got = check(ok[i].pat);
    if (got != ok[i].cost)
      fail_msg("'%s': cost %ld, want %ld", ok[i].pat, got, ok[i].cost);
  }
}

static void patterns_that_hurt_regcomp_are_refused(void **state) {
  (void)state;
  /* 20 s and 4.6 GB in regcomp. */
  expect_refused("(((.*){1,16}){1,16}){1,16}", "holds a repetition");
  /* 0.5 s and 94 MB. */
  expect_refused("(.*){1,255}", "holds a repetition");
  /* 2 s and 1.1 GB. */
  expect_refused("(((a{1,100}){1,100}){1,100})", "holds a repetition");
  expect_refused("a{1,256}", "over 255");
  expect_refused("a{256,}", "over 255");
  expect_refused("(abcde){255}", "costs more than");
  expect_refused("a{255}b{255}c{255}d{255}e{255}", "costs more than");
  /* 87 ms of regexec on a 256-byte name at cost 1020: 4 per position
   * under a repetition. */
  expect_refused(".{0,255}.{0,255}", "costs more than");
  expect_refused("(a)\\1", "back-reference");
  expect_refused("a{", "does not start a bound");
  expect_refused("a{1,x}", "does not start a bound");
  expect_refused("a{ 1}", "does not start a bound");
  expect_refused("{3}", "repeats nothing");
  expect_refused("(|{3})", "repeats nothing");
  expect_refused("a*{3}", "repeats a repetition");
  expect_refused("(ab*){3}", "holds a repetition");
  expect_refused("a{2}{3}", "repeats a repetition");
  /* Found by fuzz_name_regex: regcomp did not end. 8 s for five levels of
   * "+" over something that can be empty. */
  expect_refused("()++++++7", "can match nothing");
  expect_refused("a++++++7", "repeats a repetition");
  expect_refused("(((((a|)+)+)+)+)+", "can match nothing");
  expect_refused("((((ab)+)+)+)+", "use '*' there");
  expect_refused("com(\\.[a-z_]+)+", "use '*' there");
  expect_refused("(+a)+", "repeats nothing");
  expect_refused("a|*", "repeats nothing");
  expect_refused("^?", "repeats nothing");
  /* Found by fuzz_name_regex: a stray ')' closed the "^(...)$" that
   * tracegated wraps a pattern in, and the bound after it applied to the
   * whole: regcomp did not end (and "a)|(b" matched "abc"). */
  expect_refused(".{0,20}.{0,2}){0,255}", "closes no '('");
  expect_refused("a)|(b", "closes no '('");
  expect_refused("(a", "without their ')'");
  /* 43 s and 1.6 GB for 200 levels of "(...)*"; here 17 without. */
  char *deep = nest("(", "a", ")", TG_NAME_REGEX_MAX_DEPTH + 1);
  expect_refused(deep, "levels of parentheses");
  free(deep);
  /* 20,000 levels overflowed regcomp's stack. */
  char *crash = nest("(", "a", ")", 20000);
  expect_refused(crash, "longer than");
  free(crash);
  char *at_depth = nest("(", "a", ")", TG_NAME_REGEX_MAX_DEPTH);
  assert_int_equal(check(at_depth), 1);
  free(at_depth);
  /* Found by fuzz_name_regex: a few runs of "((((a)*)*)*...)*", each
   * within the depth, took regcomp 4.3 s. */
  expect_refused("((ab*)*c)*", "nests repetitions 3 deep");
  expect_refused("(((((((((((a)*)*)*)*)*)*)*)*)*)*)*", "can match nothing");
  /* Twenty of "(.*.*)*" took regcomp 1.5 s, thirty did not end; as many
   * of "(ab*)*" take nothing. */
  expect_refused("(.*)*", "can match nothing");
  expect_refused("(a|)+", "can match nothing");
  expect_refused("()*", "can match nothing");
  expect_refused("(.?.?){2}", "holds a repetition");
  expect_refused("(a{0,2})?", "can match nothing");
  char *runs = nest("(ab*)*", "", "", 30);
  assert_true(check(runs) > 0);
  free(runs);
}

/* What passes compiles (or is refused as malformed) at once and matches
 * a 256-byte name, the longest a producer may have. */
static void what_passes_compiles_and_matches(void **state) {
  (void)state;
  static const char *const pats[] = {
      ".{0,255}.{0,255}.{0,255}.{0,255}", "a{0,255}a{0,255}a{0,255}a{0,255}",
      "([a-z]{1,64}){1,16}",             "(.*.*.*.*.*.*.*.*)*",
      "((((((((a*)*)*)*)*)*)*)*)*",        "[a-z]{0,255}[0-9]{0,255}",
      "(a|b|.*|.+|.?){4}", /* refused: the group holds repetitions */
  };
  char name[257];
  memset(name, 'a', 256);
  name[256] = 0;
  for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
    if (check(pats[i]) < 0) continue;
    char anchored[TG_NAME_REGEX_MAX_LEN + 8];
    snprintf(anchored, sizeof(anchored), "^(%s)$", pats[i]);
    regex_t re;
    int rv = regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB);
    if (rv != 0) fail_msg("'%s' passed but regcomp says %d", pats[i], rv);
    (void)regexec(&re, name, 0, NULL, 0);
    regfree(&re);
  }
}

static void a_long_pattern_is_refused_before_it_is_read(void **state) {
  (void)state;
  char *s = malloc(TG_NAME_REGEX_MAX_LEN + 2);
  assert_non_null(s);
  memset(s, 'a', TG_NAME_REGEX_MAX_LEN + 1);
  s[TG_NAME_REGEX_MAX_LEN + 1] = 0;
  expect_refused(s, "longer than");
  s[TG_NAME_REGEX_MAX_LEN] = 0; /* exactly the limit: 1 per character */
  assert_int_equal(check(s), TG_NAME_REGEX_MAX_POSITIONS);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(patterns_users_write_pass_with_their_cost),
      cmocka_unit_test(patterns_that_hurt_regcomp_are_refused),
      cmocka_unit_test(what_passes_compiles_and_matches),
      cmocka_unit_test(a_long_pattern_is_refused_before_it_is_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
