/* A host's rate floor during a snapshot (consumer/clone_rate.h)
 * on synthetic times: nothing judged before a window has passed, a
 * trickler slow at its first judged look, a host at the floor or in
 * bursts that average above it never slow, a stall after a fast start
 * caught within a window and a spacing, the span judged always between
 * the window and the window plus the spacing however often it is looked
 * at, looks late or out of order, the floor off, and no overflow. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "consumer/clone_rate.h"

#define T0 5000000 /* the daemon's clock at the host's first answer */
#define W 8000     /* the window: clone_timeout */
#define FLOOR 1000 /* bytes per second */

/* Looks every |step| ms from |from| to |to| (inclusive of |from|) with
 * |rate| bytes per second added to *bytes; returns the first slow
 * verdict's time, or -1. */
static int64_t run(tg_clone_rate_t *r, int64_t from, int64_t to, int64_t step,
                   uint64_t rate, uint64_t *bytes) {
  for (int64_t t = from; t <= to; t += step) {
    *bytes += rate * (uint64_t)step / 1000;
    tg_clone_rate_verdict_t v = tg_clone_rate_look(r, t, *bytes, FLOOR, W);
    if (v.slow) return t;
  }
  return -1;
}

/* Less than a window since the first answer: nothing is judged, not
 * even a host that sent nothing; a clone read whole that fast is fine. */
static void nothing_is_judged_before_a_window(void **state) {
  (void)state;
  tg_clone_rate_t r;
  tg_clone_rate_start(&r, T0, 0);
  for (int64_t t = T0; t < T0 + W; t += 100) {
    tg_clone_rate_verdict_t v = tg_clone_rate_look(&r, t, 0, FLOOR, W);
    assert_false(v.judged);
    assert_false(v.slow);
  }
  tg_clone_rate_verdict_t v = tg_clone_rate_look(&r, T0 + W, 0, FLOOR, W);
  assert_true(v.judged);
  assert_true(v.slow);
  assert_int_equal(v.span_ms, W);
  assert_int_equal(v.bytes, 0);
}

/* A host that sends a tenth of the floor is slow at the first look a
 * window after its first answer, with what it sent over that span. */
static void a_trickler_is_slow_a_window_after_its_first_answer(void **state) {
  (void)state;
  tg_clone_rate_t r;
  uint64_t bytes = 4096; /* what came with the first answer */
  tg_clone_rate_start(&r, T0, bytes);
  int64_t at = run(&r, T0 + 100, T0 + 60000, 100, FLOOR / 10, &bytes);
  assert_int_equal(at, T0 + W);
  tg_clone_rate_verdict_t v = tg_clone_rate_look(&r, at, bytes, FLOOR, W);
  assert_true(v.slow);
  assert_int_equal(v.span_ms, W);
  assert_int_equal(v.bytes, (uint64_t)FLOOR / 10 * W / 1000);
}

/* At the floor exactly, or above it, over two minutes of looks: never
 * slow. */
static void at_or_above_the_floor_is_never_slow(void **state) {
  (void)state;
  const uint64_t rates[] = {FLOOR, FLOOR + 1, 50 * FLOOR};
  for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
    tg_clone_rate_t r;
    uint64_t bytes = 0;
    tg_clone_rate_start(&r, T0, 0);
    assert_int_equal(run(&r, T0 + 100, T0 + 120000, 100, rates[i], &bytes),
                     -1);
  }
}

/* Bursts of ten times the floor for half of every window, nothing in the
 * other half: the average is above the floor, never slow. */
static void bursts_that_average_above_the_floor_pass(void **state) {
  (void)state;
  tg_clone_rate_t r;
  uint64_t bytes = 0;
  tg_clone_rate_start(&r, T0, 0);
  for (int64_t t = T0 + 50; t <= T0 + 120000; t += 50) {
    if ((t - T0) % W < W / 2) bytes += 10 * FLOOR * 50 / 1000;
    assert_false(tg_clone_rate_look(&r, t, bytes, FLOOR, W).slow);
  }
}

/* Fast for a minute, then a trickle: slow within a window and one
 * sampling spacing (an eighth of it) of the stall. */
static void a_stall_after_a_fast_start_is_caught_within_a_window(void **state) {
  (void)state;
  tg_clone_rate_t r;
  uint64_t bytes = 0;
  tg_clone_rate_start(&r, T0, 0);
  const int64_t stall = T0 + 60000;
  assert_int_equal(run(&r, T0 + 100, stall, 100, 100 * FLOOR, &bytes), -1);
  int64_t at = run(&r, stall + 100, stall + 60000, 100, FLOOR / 100, &bytes);
  assert_true(at > stall);
  assert_true(at <= stall + W + W / 8 + 100);
}

/* Looked at every millisecond, or every 700 ms: each judged span lies
 * between the window and the window plus the spacing (or the step, when
 * looks are sparser than that). */
static void the_span_judged_is_a_window_and_at_most_a_spacing(void **state) {
  (void)state;
  const int64_t steps[] = {1, 7, 700, W / 8, W / 8 + 1};
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    tg_clone_rate_t r;
    tg_clone_rate_start(&r, T0, 0);
    int64_t most = W + (steps[i] > W / 8 ? steps[i] : W / 8) + steps[i];
    uint64_t bytes = 0;
    for (int64_t t = T0 + steps[i]; t <= T0 + 40000; t += steps[i]) {
      bytes += 10 * (uint64_t)steps[i];
      tg_clone_rate_verdict_t v = tg_clone_rate_look(&r, t, bytes, FLOOR, W);
      if (t - T0 < W) {
        assert_false(v.judged);
        continue;
      }
      assert_true(v.judged);
      assert_true(v.span_ms >= W);
      assert_true(v.span_ms <= most);
      assert_false(v.slow); /* 10 bytes per ms is ten times the floor */
    }
  }
}

/* A look long after the last (the loop was held up): judged over the
 * whole span since, not over a window it has no sample for. A time that
 * goes back counts as the latest seen. */
static void late_and_backward_looks(void **state) {
  (void)state;
  tg_clone_rate_t r;
  tg_clone_rate_start(&r, T0, 0);
  tg_clone_rate_verdict_t v = tg_clone_rate_look(&r, T0 + 3 * W, 3 * W, FLOOR, W);
  assert_true(v.judged);
  assert_int_equal(v.span_ms, 3 * W);
  assert_int_equal(v.bytes, 3 * W);
  assert_false(v.slow);
  /* Back to T0 + W: taken as T0 + 3W, the same span again. */
  v = tg_clone_rate_look(&r, T0 + W, 3 * W, FLOOR, W);
  assert_true(v.judged);
  assert_int_equal(v.span_ms, 3 * W);
  assert_false(v.slow);
  /* Nothing since the late look, a window on: slow. */
  v = tg_clone_rate_look(&r, T0 + 4 * W, 3 * W, FLOOR, W);
  assert_true(v.judged);
  assert_int_equal(v.span_ms, W);
  assert_int_equal(v.bytes, 0);
  assert_true(v.slow);
}

/* min_bps 0 is off: nothing is slow, the counts are still told. A floor
 * whose owed bytes pass 64 bits saturates instead of wrapping. */
static void off_and_saturated(void **state) {
  (void)state;
  tg_clone_rate_t r;
  tg_clone_rate_start(&r, T0, 0);
  tg_clone_rate_verdict_t v = tg_clone_rate_look(&r, T0 + W, 0, 0, W);
  assert_true(v.judged);
  assert_false(v.slow);
  v = tg_clone_rate_look(&r, T0 + 2 * W, UINT64_MAX - 1, UINT64_MAX, W);
  assert_true(v.judged);
  assert_true(v.slow);
  /* Never started: nothing judged. */
  tg_clone_rate_t none = {0};
  assert_false(tg_clone_rate_look(&none, T0, 0, FLOOR, W).judged);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nothing_is_judged_before_a_window),
      cmocka_unit_test(a_trickler_is_slow_a_window_after_its_first_answer),
      cmocka_unit_test(at_or_above_the_floor_is_never_slow),
      cmocka_unit_test(bursts_that_average_above_the_floor_pass),
      cmocka_unit_test(a_stall_after_a_fast_start_is_caught_within_a_window),
      cmocka_unit_test(the_span_judged_is_a_window_and_at_most_a_spacing),
      cmocka_unit_test(late_and_backward_looks),
      cmocka_unit_test(off_and_saturated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
