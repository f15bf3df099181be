/* The audit trail's denial rate limit (relay/audit.h), on a made-up
 * clock: a burst, then a steady rate, and every suppressed line counted
 * once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "relay/audit.h"

static const tg_relay_audit_budget_t B = {TG_AUDIT_DENIAL_BURST,
                                          TG_AUDIT_DENIALS_PER_S};

static void audit_limit_allows_a_burst_then_counts(void **state) {
  (void)state;
  tg_relay_audit_limit_t l = {0};
  uint64_t held = 99;
  for (int i = 0; i < TG_AUDIT_DENIAL_BURST; i++) {
    assert_true(tg_relay_audit_limit_take(&l, &B, 1000, &held));
    assert_int_equal(held, 0);
  }
  for (int i = 0; i < 7; i++)
    assert_false(tg_relay_audit_limit_take(&l, &B, 1000, &held));
  /* One line's worth of time later the window reopens, with the count. */
  uint64_t one_line_ms = 1000 / TG_AUDIT_DENIALS_PER_S;
  assert_false(tg_relay_audit_limit_take(&l, &B, 1000 + one_line_ms - 1, &held));
  assert_true(tg_relay_audit_limit_take(&l, &B, 1000 + one_line_ms, &held));
  assert_int_equal(held, 8);
  assert_int_equal(tg_relay_audit_limit_flush(&l), 0);
}

static void audit_limit_keeps_a_steady_rate(void **state) {
  (void)state;
  tg_relay_audit_limit_t l = {0};
  uint64_t held, written = 0, suppressed = 0;
  /* 100 denials a second for 10 s. */
  for (uint64_t t = 0; t < 10000; t += 10) {
    if (tg_relay_audit_limit_take(&l, &B, t, &held)) {
      written++;
      suppressed += held;
    }
  }
  suppressed += tg_relay_audit_limit_flush(&l);
  assert_int_equal(written + suppressed, 1000);
  assert_true(written <= TG_AUDIT_DENIAL_BURST + 10 * TG_AUDIT_DENIALS_PER_S);
  assert_true(written >= TG_AUDIT_DENIAL_BURST + 9 * TG_AUDIT_DENIALS_PER_S);
}

static void audit_limit_survives_a_clock_going_back_and_long_gaps(void **state) {
  (void)state;
  tg_relay_audit_limit_t l = {0};
  uint64_t held;
  for (int i = 0; i < TG_AUDIT_DENIAL_BURST; i++)
    assert_true(tg_relay_audit_limit_take(&l, &B, 5000, &held));
  assert_false(tg_relay_audit_limit_take(&l, &B, 10, &held));
  /* A very long quiet spell refills to the burst, no more (no overflow). */
  uint64_t later = UINT64_MAX - 1;
  for (int i = 0; i < TG_AUDIT_DENIAL_BURST; i++)
    assert_true(tg_relay_audit_limit_take(&l, &B, later, &held));
  assert_false(tg_relay_audit_limit_take(&l, &B, later, &held));
  assert_int_equal(tg_relay_audit_limit_flush(&l), 1);
}

/* The budget is the relay's (--audit-burst, --audit-lines-per-s): a
 * small one holds lines back after its own burst and refills at its own
 * rate. */
static void audit_limit_follows_the_budget_given(void **state) {
  (void)state;
  const tg_relay_audit_budget_t small = {.burst = 3, .per_s = 2};
  tg_relay_audit_limit_t l = {0};
  uint64_t held = 99;
  for (int i = 0; i < 3; i++) {
    assert_true(tg_relay_audit_limit_take(&l, &small, 7000, &held));
    assert_int_equal(held, 0);
  }
  assert_false(tg_relay_audit_limit_take(&l, &small, 7000, &held));
  assert_false(tg_relay_audit_limit_take(&l, &small, 7499, &held));
  assert_true(tg_relay_audit_limit_take(&l, &small, 7500, &held));
  assert_int_equal(held, 2);
  assert_false(tg_relay_audit_limit_take(&l, &small, 7500, &held));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(audit_limit_allows_a_burst_then_counts),
      cmocka_unit_test(audit_limit_keeps_a_steady_rate),
      cmocka_unit_test(audit_limit_survives_a_clock_going_back_and_long_gaps),
      cmocka_unit_test(audit_limit_follows_the_budget_given),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
