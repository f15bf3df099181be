/* SPDX-License-Identifier: Apache-2.0 */
/* `tracegate record`'s flag rules (cli/record_flags.c): every rule names
 * only flags of record's table, every rule of every mode has a command
 * line here that breaks it and gets that rule's message (parse_args
 * exits 2 with it), and lines that keep the rules pass. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "abi/protocol_limits.h"
#include "cli/record_flags.h"

typedef struct line {
  record_opts_t o;
  tg_flag_list_t hosts;
  tg_flag_t flags[RECORD_MAX_FLAGS];
  size_t n;
  tg_flags_given_t given;
} line_t;

static line_t L; /* record_opts_t holds 1024 host slots: not on the stack */

/* Parses |args| (NULL-terminated) as record's parse_args does, then its
 * rules: the validator's result, the message in |err|. */
static size_t broken_table, broken_rule; /* where check() found it */

static int check(const char *const *args, char *err, size_t cap) {
  memset(&L, 0, sizeof(L));
  L.n = record_flag_table(&L.o, &L.hosts, L.flags, RECORD_MAX_FLAGS);
  assert_true(L.n > 0);
  char *argv[24] = {"tracegate record"};
  int argc = 1;
  while (*args && argc < 23) argv[argc++] = (char *)*args++;
  assert_int_equal(
      tg_flags_parse_given("tracegate record", L.flags, L.n, argc, argv, L.o.ds,
                           RECORD_MAX_DATA_SOURCES, &L.o.n_ds, &L.given),
      0);
  err[0] = 0;
  broken_table = broken_rule = SIZE_MAX;
  return record_check_flags(&L.o, L.flags, L.n, &L.given, err, cap,
                            &broken_table, &broken_rule);
}

#define LONG_KEY                                                           \
  "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk" \
  "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
_Static_assert(sizeof(LONG_KEY) - 1 > TG_RELAY_SESSION_KEY_MAX,
               "LONG_KEY breaks the resume key's limit");

/* A line that breaks rule |rule| of the |table|th table of |mode|, and
 * no rule before it. */
typedef struct breaking {
  record_mode_t mode;
  size_t table, rule;
  const char *args[12];
} breaking_t;

static const breaking_t cases[] = {
    /* The rules every clone and recording keeps (record mode's table 0). */
    {RECORD_MODE_RECORD, 0, 0, {"--attach", "k", "--size", "1m", "-o", "x"}},
    {RECORD_MODE_RECORD,
     0,
     1,
     {"--attach", "k", "--background-wait", "-o", "x"}},
    {RECORD_MODE_RECORD, 0, 2, {"-d", "--detach", "k", "ds"}},
    {RECORD_MODE_RECORD, 0, 3, {"--background-wait", "-o", "-", "ds"}},
    {RECORD_MODE_RECORD, 0, 4, {"--clone-for-bugreport", "-o", "x", "ds"}},
    /* A recording's. */
    {RECORD_MODE_RECORD, 1, 0, {"-H", "h", "-d", "-o", "x", "ds"}},
    {RECORD_MODE_RECORD, 1, 1, {"--hosts", "f", "-s", "1m", "-o", "x", "ds"}},
    {RECORD_MODE_RECORD, 1, 2, {"--attach", "k", "--detach", "j"}},
    {RECORD_MODE_RECORD, 1, 3, {"--stop", "-o", "x", "ds"}},
    {RECORD_MODE_RECORD, 1, 4, {"--attach", "k", "ds", "-o", "x"}},
    {RECORD_MODE_RECORD, 1, 5, {"--attach", "k", "-b", "1m", "-o", "x"}},
    {RECORD_MODE_RECORD, 1, 6, {"-c", "c", "ds", "-o", "x"}},
    {RECORD_MODE_RECORD, 1, 7, {"--txt", "ds", "-o", "x"}},
    {RECORD_MODE_RECORD, 1, 8, {"-o", "x"}},
    {RECORD_MODE_RECORD, 1, 9, {"ds"}},
    {RECORD_MODE_RECORD, 1, 10, {"--detach", "k", "-o", "-", "ds"}},
    {RECORD_MODE_RECORD, 1, 11, {"-o", "-", "--summary-json", "-", "ds"}},
    {RECORD_MODE_RECORD, 1, 12, {"--merge", "-o", "x", "ds"}},
    {RECORD_MODE_RECORD, 1, 13, {"--merge-allow-fields", "a", "-o", "x", "ds"}},
    {RECORD_MODE_RECORD, 1, 14, {"--app-tracks", "joined", "-o", "x", "ds"}},
    {RECORD_MODE_RECORD,
     1,
     15,
     {"--clock-from-requests", "on", "-o", "x", "ds"}},
    {RECORD_MODE_RECORD, 1, 16, {"-H", "h", "--detach", "k", "ds"}},
    {RECORD_MODE_RECORD,
     1,
     17,
     {"-H", "h", "-H", "g", "--attach", "k", "-o", "x"}},
    {RECORD_MODE_RECORD, 1, 18, {"-H", "h", "--attach", "k"}},
    {RECORD_MODE_RECORD, 1, 19, {"-H", "h", "--attach", LONG_KEY, "-o", "x"}},
    {RECORD_MODE_RECORD, 1, 20, {"--tls-server-name", "n", "-o", "x", "ds"}},
    {RECORD_MODE_RECORD, 1, 21, {"--clock-sync-period", "5s", "-o", "x", "ds"}},
    /* A clone's (table 0 is the common one, covered above). */
    {RECORD_MODE_CLONE,
     1,
     0,
     {"--clone", "1", "--clone-by-name", "n", "-o", "x"}},
    {RECORD_MODE_CLONE, 1, 1, {"--clone", "1", "-t", "5s", "-o", "x"}},
    {RECORD_MODE_CLONE, 1, 2, {"--clone", "1", "--stop", "-o", "x"}},
    {RECORD_MODE_CLONE, 1, 3, {"--clone-by-name", "n", "-H", "h", "-o", "x"}},
    {RECORD_MODE_CLONE, 1, 4, {"--clone", "1"}},
    {RECORD_MODE_BUGREPORT_ALL,
     0,
     0,
     {"--save-all-for-bugreport", "--summary-json", "s"}},
    {RECORD_MODE_BUGREPORT, 0, 0, {"--save-for-bugreport", "-b", "1m"}},
    {RECORD_MODE_IS_DETACHED, 0, 0, {"--is_detached", "k", "-o", "x"}},
};

#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static void test_rules_name_only_record_flags(void **state) {
  (void)state;
  char err[256];
  check((const char *const[]){NULL}, err, sizeof(err));
  for (record_mode_t m = 0; m < RECORD_MODES; m++) {
    record_rules_t t[RECORD_MAX_RULE_TABLES];
    size_t nt = record_rules_of(m, t);
    assert_true(nt >= 1 && nt <= RECORD_MAX_RULE_TABLES);
    for (size_t i = 0; i < nt; i++) {
      int rv = tg_flag_rules_lint(L.flags, L.n, t[i].rules, t[i].n, err,
                                  sizeof(err));
      if (rv < 0) fail_msg("mode %d table %zu: %s", (int)m, i, err);
    }
  }
}

static void test_each_rule_broken_by_a_line(void **state) {
  (void)state;
  char err[256];
  for (size_t c = 0; c < N_CASES; c++) {
    const breaking_t *b = &cases[c];
    assert_int_equal(check(b->args, err, sizeof(err)), -EINVAL);
    assert_int_equal(record_mode(&L.o), b->mode);
    record_rules_t t[RECORD_MAX_RULE_TABLES];
    assert_true(b->table < record_rules_of(b->mode, t));
    assert_true(b->rule < t[b->table].n);
    const char *why = t[b->table].rules[b->rule].why;
    if (broken_table != b->table || broken_rule != b->rule)
      fail_msg("case %zu: broke table %zu rule %zu ('%s')", c, broken_table,
               broken_rule, err);
    if (!why || strcmp(err, why))
      fail_msg("case %zu: got '%s', rule says '%s'", c, err, why ? why : "");
  }
}

/* Every rule of every table a mode checks has its case above: a rule
 * added without one fails here. */
static void test_every_rule_has_a_case(void **state) {
  (void)state;
  for (record_mode_t m = 0; m < RECORD_MODES; m++) {
    record_rules_t t[RECORD_MAX_RULE_TABLES];
    size_t nt = record_rules_of(m, t);
    for (size_t i = 0; i < nt; i++) {
      for (size_t r = 0; r < t[i].n; r++) {
        bool found = false;
        for (size_t c = 0; c < N_CASES && !found; c++) {
          record_rules_t u[RECORD_MAX_RULE_TABLES];
          size_t nu = record_rules_of(cases[c].mode, u);
          found = cases[c].table < nu &&
                  u[cases[c].table].rules == t[i].rules && cases[c].rule == r;
        }
        if (!found)
          fail_msg("mode %d table %zu rule %zu: no case", (int)m, i, r);
      }
    }
  }
}

static void test_lines_that_keep_the_rules(void **state) {
  (void)state;
  static const char *const ok[][14] = {
      {"-o", "x", "ds"},
      {"-c", "c", "--txt", "-o", "x", "-t", "5s", "-b", "1m", "-s", "2m"},
      {"--attach", "k", "--stop", "-o", "x"},
      {"--detach", "k", "-c", "c"},
      {"-d", "-o", "x", "ds"},
      {"-o", "-", "--summary-json", "s", "ds"},
      {"-H", "h", "--merge", "-o", "f", "ds", "--app-tracks", "joined",
       "--clock-from-requests", "off", "--compress", "none", "--ca", "c"},
      {"--hosts", "f", "-o", "d", "--dead-link-timeout", "5s", "ds"},
      {"-H", "h", "--attach", "k", "-o", "f", "--merge"},
      {"--clone", "3", "-o", "x", "--clone-for-bugreport"},
      {"--clone-by-name", "n", "-o", "x", "-s", "1m"},
      {"--save-for-bugreport", "-o", "x", "--summary-json", "s"},
      {"--save-all-for-bugreport", "--socket", "s"},
      {"--is_detached", "k", "--socket", "s"},
  };
  char err[256];
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    int rv = check(ok[i], err, sizeof(err));
    if (rv != 0) fail_msg("line %zu: %s", i, err);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rules_name_only_record_flags),
      cmocka_unit_test(test_each_rule_broken_by_a_line),
      cmocka_unit_test(test_every_rule_has_a_case),
      cmocka_unit_test(test_lines_that_keep_the_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
