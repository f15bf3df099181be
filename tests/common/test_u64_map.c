/* The u64 -> u32 map (common/u64_map.h): values come back through
 * growth, an update replaces, key 0 and keys that differ only in their
 * high bits are keys like any, the bound refuses a new key and leaves
 * the map as it was, and a freed map is empty and usable again. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/u64_map.h"

static void values_come_back_through_growth(void **state) {
  (void)state;
  tg_u64_map_t m;
  tg_u64_map_init(&m, 0x10000);
  assert_int_equal(tg_u64_map_get(&m, 5), 0);
  for (uint64_t i = 0; i < 5000; i++)
    assert_int_equal(tg_u64_map_put(&m, i << 40, (uint32_t)i + 1), 0);
  assert_int_equal(tg_u64_map_put(&m, 0, 77), 0); /* an update */
  for (uint64_t i = 1; i < 5000; i++)
    assert_int_equal(tg_u64_map_get(&m, i << 40), (uint32_t)i + 1);
  assert_int_equal(tg_u64_map_get(&m, 0), 77);
  assert_int_equal(tg_u64_map_get(&m, 1), 0);
  assert_int_equal(m.count, 5000);
  tg_u64_map_free(&m);
  assert_int_equal(tg_u64_map_get(&m, 1ull << 40), 0);
  assert_int_equal(tg_u64_map_put(&m, 1ull << 40, 3), 0);
  assert_int_equal(tg_u64_map_get(&m, 1ull << 40), 3);
  tg_u64_map_free(&m);
}

static void the_bound_refuses_a_new_key(void **state) {
  (void)state;
  tg_u64_map_t m;
  tg_u64_map_init(&m, 3);
  for (uint64_t k = 1; k <= 3; k++)
    assert_int_equal(tg_u64_map_put(&m, k * 0x9E3779B97F4A7C15ull, 1), 0);
  assert_int_equal(tg_u64_map_put(&m, 42, 1), -ENOSPC);
  assert_int_equal(tg_u64_map_get(&m, 42), 0);
  /* A key it has still takes a new value. */
  assert_int_equal(tg_u64_map_put(&m, 2 * 0x9E3779B97F4A7C15ull, 9), 0);
  assert_int_equal(tg_u64_map_get(&m, 2 * 0x9E3779B97F4A7C15ull), 9);
  assert_int_equal(m.count, 3);
  tg_u64_map_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(values_come_back_through_growth),
      cmocka_unit_test(the_bound_refuses_a_new_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
