/* A fleet's admission windows (consumer/fleet/admit.h): never more hosts
 * starting or bursting than the window, every host admitted once and in
 * order, a place given back lets the next in, and a halted fleet starts
 * no more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "consumer/fleet/admit.h"

#define HOSTS 10

static void the_start_window_admits_each_host_once_in_order(void **st) {
  (void)st;
  tg_fleet_admit_t a;
  tg_fleet_admit_init(&a, HOSTS, 3, 0);
  tg_fleet_slot_t slot[HOSTS] = {0};
  size_t i, order = 0;
  /* The first three, then the window is full. */
  for (int k = 0; k < 3; k++) {
    assert_true(tg_fleet_admit_start(&a, &i));
    assert_int_equal(i, order++);
    slot[i] = TG_FLEET_SLOT_STARTING;
  }
  assert_false(tg_fleet_admit_start(&a, &i));
  /* Host 1 gets through: one place, one more host. */
  tg_fleet_admit_release(&a, &slot[1]);
  assert_int_equal(slot[1], TG_FLEET_SLOT_NONE);
  assert_true(tg_fleet_admit_start(&a, &i));
  assert_int_equal(i, order++);
  slot[i] = TG_FLEET_SLOT_STARTING;
  assert_false(tg_fleet_admit_start(&a, &i));
  /* Giving back a place twice frees one place, not two. */
  tg_fleet_admit_release(&a, &slot[0]);
  tg_fleet_admit_release(&a, &slot[0]);
  assert_int_equal(a.starting, 2);
  /* Everyone through: each admitted once, never more than 3 at once. */
  for (;;) {
    while (tg_fleet_admit_start(&a, &i)) {
      assert_int_equal(i, order++);
      slot[i] = TG_FLEET_SLOT_STARTING;
      assert_true(a.starting <= 3);
    }
    size_t k = 0;
    while (k < HOSTS && slot[k] != TG_FLEET_SLOT_STARTING) k++;
    if (k == HOSTS) break;
    tg_fleet_admit_release(&a, &slot[k]);
  }
  assert_int_equal(order, HOSTS);
  assert_int_equal(a.starting, 0);
  assert_false(tg_fleet_admit_start(&a, &i));
}

static void a_halted_fleet_starts_no_more(void **st) {
  (void)st;
  tg_fleet_admit_t a;
  tg_fleet_admit_init(&a, HOSTS, 2, 0);
  size_t i;
  assert_true(tg_fleet_admit_start(&a, &i));
  a.halted = true;
  assert_false(tg_fleet_admit_start(&a, &i));
  tg_fleet_slot_t s = TG_FLEET_SLOT_STARTING;
  tg_fleet_admit_release(&a, &s);
  assert_false(tg_fleet_admit_start(&a, &i));
}

static void the_burst_window_is_apart_from_the_start_window(void **st) {
  (void)st;
  tg_fleet_admit_t a;
  tg_fleet_admit_init(&a, HOSTS, 1, 2);
  size_t i, j;
  assert_true(tg_fleet_admit_start(&a, &i)); /* the start window full */
  assert_true(tg_fleet_admit_burst(&a, &i));
  assert_true(tg_fleet_admit_burst(&a, &j));
  assert_int_equal(i, 0);
  assert_int_equal(j, 1);
  assert_false(tg_fleet_admit_burst(&a, &j));
  tg_fleet_slot_t s = TG_FLEET_SLOT_BURSTING;
  tg_fleet_admit_release(&a, &s);
  assert_int_equal(a.starting, 1); /* untouched */
  assert_true(tg_fleet_admit_burst(&a, &j));
  assert_int_equal(j, 2);
}

static void zero_takes_the_defaults(void **st) {
  (void)st;
  tg_fleet_admit_t a;
  tg_fleet_admit_init(&a, 1000, 0, 0);
  size_t i, n = 0;
  while (tg_fleet_admit_start(&a, &i)) n++;
  assert_int_equal(n, TG_FLEET_STARTING_MAX);
  n = 0;
  while (tg_fleet_admit_burst(&a, &i)) n++;
  assert_int_equal(n, TG_FLEET_BURSTING_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_start_window_admits_each_host_once_in_order),
      cmocka_unit_test(a_halted_fleet_starts_no_more),
      cmocka_unit_test(the_burst_window_is_apart_from_the_start_window),
      cmocka_unit_test(zero_takes_the_defaults),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
