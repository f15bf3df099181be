/* A host's clock estimate (consumer/fleet/clock_sync.h): the best sample
 * of a burst or period wins, the first estimate is kept, the period is
 * the owner's time, and the offset survives a relay's wild reading. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "consumer/fleet/clock_sync.h"

/* A sample whose round trip took |rtt| ns from |before|, the host's
 * BOOTTIME reading |remote|. */
static tg_clock_sample_t sample(uint64_t before, uint64_t rtt,
                                uint64_t remote) {
  tg_clock_sample_t s = {0};
  s.before[TG_CLK_BOOTTIME] = before;
  s.after[TG_CLK_BOOTTIME] = before + rtt;
  s.remote[TG_CLK_BOOTTIME] = remote;
  return s;
}

static void the_smallest_round_trip_of_a_burst_wins(void **st) {
  (void)st;
  tg_clock_sync_t cs;
  tg_clock_sync_init(&cs, 30000);
  tg_clock_sample_t a = sample(1000, 900, 5000), b = sample(3000, 100, 7000),
                    c = sample(5000, 400, 9000);
  tg_clock_sync_keep(&cs, &a);
  tg_clock_sync_keep(&cs, &b);
  tg_clock_sync_keep(&cs, &c);
  assert_int_equal(cs.estimates, 0);
  assert_true(tg_clock_sync_settle(&cs, 1000));
  assert_int_equal(cs.estimates, 1);
  assert_int_equal(tg_clock_rtt(&cs.best), 100);
  uint64_t half;
  /* 7000 - (3000 + 50) */
  assert_int_equal(tg_clock_offset(&cs.best, &half), 3950);
  assert_int_equal(half, 50);
}

static void the_first_estimate_is_kept_and_periods_follow_the_owner(void **st) {
  (void)st;
  tg_clock_sync_t cs;
  tg_clock_sync_init(&cs, 30000);
  tg_clock_sample_t a = sample(1000, 100, 2000), b = sample(9000, 300, 1000);
  tg_clock_sync_keep(&cs, &a);
  tg_clock_sync_settle(&cs, 5000);
  assert_false(tg_clock_sync_due(&cs, 34999));
  assert_true(tg_clock_sync_due(&cs, 35000));
  /* A period without a sample makes no estimate. */
  assert_false(tg_clock_sync_settle(&cs, 35000));
  tg_clock_sync_keep(&cs, &b);
  assert_true(tg_clock_sync_settle(&cs, 65000));
  assert_int_equal(cs.estimates, 2);
  assert_int_equal(tg_clock_rtt(&cs.first), 100);
  assert_int_equal(tg_clock_rtt(&cs.best), 300);
  /* A restarted burst forgets what it had not settled. */
  tg_clock_sync_keep(&cs, &a);
  tg_clock_sync_restart(&cs);
  assert_false(tg_clock_sync_settle(&cs, 70000));
}

static void a_wild_remote_reading_does_not_overflow(void **st) {
  (void)st;
  tg_clock_sample_t s = sample(UINT64_MAX - 10, 4, 0);
  uint64_t half;
  assert_int_equal(tg_clock_offset(&s, &half), 9); /* 2^64 - (2^64 - 9) */
  assert_int_equal(half, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_smallest_round_trip_of_a_burst_wins),
      cmocka_unit_test(the_first_estimate_is_kept_and_periods_follow_the_owner),
      cmocka_unit_test(a_wild_remote_reading_does_not_overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
