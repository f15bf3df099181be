/* The simulated clock of common/clock.h, which every scenario on a
 * simulated clock stands on: it reads what it was set to until moved,
 * time going by moves its monotonic and wall readings together, and
 * setting the wall moves the wall alone. The real one: its wall reading
 * is the machine's CLOCK_REALTIME, and its monotonic readings agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "common/clock.h"

static void the_sim_clock_moves_only_when_moved(void **state) {
  (void)state;
  tg_clock_sim_t sim;
  tg_clock_sim_init(&sim, 1000);
  const tg_clock_t *k = &sim.clock;
  assert_int_equal(tg_clock_ms(k), 1000);
  assert_int_equal(tg_clock_ns(k), 1000ull * 1000000u);
  assert_int_equal(tg_clock_wall_ms(k), TG_CLOCK_SIM_WALL_START_MS);
  /* Reading it again does not move it. */
  assert_int_equal(tg_clock_ms(k), 1000);
  assert_int_equal(tg_clock_wall_ms(k), TG_CLOCK_SIM_WALL_START_MS);
  tg_clock_sim_advance_ms(&sim, 2500);
  assert_int_equal(tg_clock_ms(k), 3500);
  assert_int_equal(tg_clock_ns(k), 3500ull * 1000000u);
  assert_int_equal(tg_clock_wall_ms(k), TG_CLOCK_SIM_WALL_START_MS + 2500);
}

/* The machine's time set back an hour: the wall jumps, the monotonic
 * readings stay, and time going by moves both from there. */
static void setting_the_wall_leaves_the_monotonic_readings(void **state) {
  (void)state;
  tg_clock_sim_t sim;
  tg_clock_sim_init(&sim, 0);
  tg_clock_sim_advance_ms(&sim, 10);
  tg_clock_sim_set_wall_ms(&sim, TG_CLOCK_SIM_WALL_START_MS - 3600000);
  assert_int_equal(tg_clock_ms(&sim.clock), 10);
  assert_int_equal(tg_clock_wall_ms(&sim.clock),
                   TG_CLOCK_SIM_WALL_START_MS - 3600000);
  tg_clock_sim_advance_ms(&sim, 5);
  assert_int_equal(tg_clock_ms(&sim.clock), 15);
  assert_int_equal(tg_clock_wall_ms(&sim.clock),
                   TG_CLOCK_SIM_WALL_START_MS - 3600000 + 5);
}

/* Two simulated clocks are two clocks: moving one leaves the other. */
static void sim_clocks_are_independent(void **state) {
  (void)state;
  tg_clock_sim_t a, b;
  tg_clock_sim_init(&a, 7);
  tg_clock_sim_init(&b, 7);
  tg_clock_sim_advance_ms(&a, 1);
  assert_int_equal(tg_clock_ms(&a.clock), 8);
  assert_int_equal(tg_clock_ms(&b.clock), 7);
  assert_int_equal(tg_clock_wall_ms(&b.clock), TG_CLOCK_SIM_WALL_START_MS);
}

/* The real clock's wall is CLOCK_REALTIME: a reading lies between two of
 * the kernel's taken around it (no bound on how far apart they are, so
 * that the test holds on a slow machine); its ns and ms agree in order. */
static void the_real_clock_reads_the_kernel(void **state) {
  (void)state;
  struct timespec before, after;
  clock_gettime(CLOCK_REALTIME, &before);
  uint64_t wall = tg_clock_wall_ms(&tg_clock_monotonic);
  clock_gettime(CLOCK_REALTIME, &after);
  uint64_t lo = (uint64_t)before.tv_sec * 1000u +
                (uint64_t)before.tv_nsec / 1000000u;
  uint64_t hi = (uint64_t)after.tv_sec * 1000u +
                (uint64_t)after.tv_nsec / 1000000u;
  assert_true(wall >= lo && wall <= hi);
  uint64_t ms = tg_clock_ms(&tg_clock_monotonic);
  uint64_t ns = tg_clock_ns(&tg_clock_monotonic);
  assert_true(ns / 1000000u >= ms);
  assert_true(tg_clock_ms(&tg_clock_monotonic) >= ns / 1000000u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_sim_clock_moves_only_when_moved),
      cmocka_unit_test(setting_the_wall_leaves_the_monotonic_readings),
      cmocka_unit_test(sim_clocks_are_independent),
      cmocka_unit_test(the_real_clock_reads_the_kernel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
