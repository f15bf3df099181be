/* SPDX-License-Identifier: Apache-2.0 */
/* common/fsm: the one policy of every state machine. An arrow moves; a
 * move the table lacks leaves the state, counts and logs one error; a
 * state to itself is no move; out-of-range states are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/fsm.h"
#include "common/log.h"

enum { A, B, C, N_ST };

static const uint32_t kNext[] = {
    [A] = TG_FSM_BIT(B),
    [B] = TG_FSM_BIT(A) | TG_FSM_BIT(C),
    [C] = 0,
};
static const char *const kNames[] = {"a", "b", "c"};
_Static_assert(TG_FSM_COUNT(kNext) == N_ST, "an arrow set per state");
_Static_assert(TG_FSM_COUNT(kNames) == N_ST, "a name per state");

static const tg_fsm_def_t kDef = {
    .what = "test", .n_states = N_ST, .next = kNext, .names = kNames};

static int errors, debugs;
static void sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  (void)line;
  if (level == TG_LOG_ERROR) errors++;
  if (level == TG_LOG_DEBUG) debugs++;
}

static int setup(void **state) {
  (void)state;
  errors = debugs = 0;
  tg_log_set_level(TG_LOG_DEBUG);
  tg_log_set_sink(sink, NULL);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tg_log_set_sink(NULL, NULL);
  tg_log_set_level(TG_LOG_INFO);
  return 0;
}

static void fsm_moves_along_an_arrow(void **state) {
  (void)state;
  unsigned st = A;
  uint64_t bad = 0;
  assert_true(tg_fsm_move(&kDef, &st, B, &bad, "x", "why"));
  assert_int_equal(st, B);
  assert_true(tg_fsm_move(&kDef, &st, C, &bad, NULL, NULL));
  assert_int_equal(st, C);
  assert_int_equal(bad, 0);
  assert_int_equal(errors, 0);
  assert_int_equal(debugs, 2);
}

static void fsm_refuses_counts_and_logs_a_missing_arrow(void **state) {
  (void)state;
  unsigned st = A;
  uint64_t bad = 0;
  assert_false(tg_fsm_move(&kDef, &st, C, &bad, "x", "why"));
  assert_int_equal(st, A);
  assert_int_equal(bad, 1);
  assert_int_equal(errors, 1);
  st = C; /* final: no arrow out */
  assert_false(tg_fsm_move(&kDef, &st, A, &bad, "x", NULL));
  assert_int_equal(st, C);
  assert_int_equal(bad, 2);
  assert_int_equal(errors, 2);
  /* No counter yet: still refused and logged. */
  assert_false(tg_fsm_move(&kDef, &st, B, NULL, NULL, NULL));
  assert_int_equal(st, C);
  assert_int_equal(errors, 3);
}

static void fsm_same_state_is_no_move(void **state) {
  (void)state;
  unsigned st = B;
  uint64_t bad = 0;
  assert_false(tg_fsm_move(&kDef, &st, B, &bad, "x", "why"));
  assert_int_equal(st, B);
  assert_int_equal(bad, 0);
  assert_int_equal(errors + debugs, 0);
  assert_false(tg_fsm_allowed(&kDef, B, B));
}

static void fsm_refuses_out_of_range_states(void **state) {
  (void)state;
  unsigned st = A;
  uint64_t bad = 0;
  assert_false(tg_fsm_move(&kDef, &st, N_ST, &bad, "x", "why"));
  assert_int_equal(st, A);
  assert_false(tg_fsm_move(&kDef, &st, 40, &bad, "x", "why"));
  st = 40;
  assert_false(tg_fsm_move(&kDef, &st, A, &bad, "x", "why"));
  assert_int_equal(st, 40);
  assert_int_equal(bad, 3);
  assert_int_equal(errors, 3);
  assert_false(tg_fsm_allowed(&kDef, N_ST, A));
  assert_false(tg_fsm_allowed(&kDef, A, N_ST));
  assert_false(tg_fsm_allowed(&kDef, A, 1000));
}

static void fsm_names_states(void **state) {
  (void)state;
  assert_string_equal(tg_fsm_name(&kDef, A), "a");
  assert_string_equal(tg_fsm_name(&kDef, C), "c");
  assert_string_equal(tg_fsm_name(&kDef, N_ST), "?");
  assert_string_equal(tg_fsm_name(&kDef, 1000), "?");
  assert_true(tg_fsm_allowed(&kDef, A, B));
  assert_true(tg_fsm_allowed(&kDef, B, A));
  assert_false(tg_fsm_allowed(&kDef, A, C));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(fsm_moves_along_an_arrow, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          fsm_refuses_counts_and_logs_a_missing_arrow, setup, teardown),
      cmocka_unit_test_setup_teardown(fsm_same_state_is_no_move, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(fsm_refuses_out_of_range_states, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(fsm_names_states, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
