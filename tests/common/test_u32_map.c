/* common/u32_map: insert, lookup, update, growth, bounds, key 0 and
 * allocation failure (calloc is wrapped at link time). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/u32_map.h"

/* calloc calls from u32_map.c land here: the Nth one from now fails. */
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
static int calloc_fail_in; /* 0: never */
void *__wrap_calloc(size_t n, size_t size) {
  if (calloc_fail_in > 0 && --calloc_fail_in == 0) return NULL;
  return __real_calloc(n, size);
}

static void map_starts_empty_and_misses(void **state) {
  (void)state;
  tg_u32_map_t m;
  tg_u32_map_init(&m, 0);
  uint32_t v = 77;
  assert_false(tg_u32_map_get(&m, 1, &v));
  assert_false(tg_u32_map_get(&m, 0, &v));
  assert_int_equal(v, 77);
  assert_int_equal(tg_u32_map_count(&m), 0);
  tg_u32_map_free(&m);
}

static void map_inserts_looks_up_and_updates(void **state) {
  (void)state;
  tg_u32_map_t m;
  tg_u32_map_init(&m, 0);
  assert_int_equal(tg_u32_map_put(&m, 42, 1000), 0);
  assert_int_equal(tg_u32_map_put(&m, 0xFFFFFFFFu, 7), 0);
  uint32_t v = 0;
  assert_true(tg_u32_map_get(&m, 42, &v));
  assert_int_equal(v, 1000);
  assert_true(tg_u32_map_get(&m, 0xFFFFFFFFu, &v));
  assert_int_equal(v, 7);
  assert_int_equal(tg_u32_map_put(&m, 42, 2000), 0);
  assert_true(tg_u32_map_get(&m, 42, &v));
  assert_int_equal(v, 2000);
  assert_int_equal(tg_u32_map_count(&m), 2); /* an update adds nothing */
  assert_false(tg_u32_map_get(&m, 43, &v));
  tg_u32_map_free(&m);
}

static void map_key_zero_is_an_ordinary_key(void **state) {
  (void)state;
  tg_u32_map_t m;
  tg_u32_map_init(&m, 0);
  assert_int_equal(tg_u32_map_put(&m, 0, 5), 0);
  uint32_t v = 0;
  assert_true(tg_u32_map_get(&m, 0, &v));
  assert_int_equal(v, 5);
  assert_int_equal(tg_u32_map_put(&m, 0, 6), 0);
  assert_true(tg_u32_map_get(&m, 0, &v));
  assert_int_equal(v, 6);
  assert_int_equal(tg_u32_map_count(&m), 1);
  /* Key 0 does not shadow the free-slot marker of other keys. */
  assert_false(tg_u32_map_get(&m, 1, &v));
  tg_u32_map_free(&m);
  assert_false(tg_u32_map_get(&m, 0, &v));
}

static void map_grows_and_keeps_many_keys(void **state) {
  (void)state;
  tg_u32_map_t m;
  tg_u32_map_init(&m, 0);
  enum { N = 100000 };
  /* Keys shaped like producer_id << 16 | writer_id, plus scattered ones. */
  for (uint32_t i = 1; i <= N; i++)
    assert_int_equal(tg_u32_map_put(&m, ((i % 300) + 1) << 16 | i / 300, i), 0);
  assert_int_equal(tg_u32_map_count(&m), N);
  assert_true(m.cap >= 2 * N); /* grown at half load */
  for (uint32_t i = 1; i <= N; i++) {
    uint32_t v = 0;
    assert_true(tg_u32_map_get(&m, ((i % 300) + 1) << 16 | i / 300, &v));
    assert_int_equal(v, i);
  }
  tg_u32_map_free(&m);
  assert_int_equal(tg_u32_map_count(&m), 0);
}

static void map_refuses_new_keys_past_its_bound(void **state) {
  (void)state;
  tg_u32_map_t m;
  tg_u32_map_init(&m, 3);
  assert_int_equal(tg_u32_map_put(&m, 1, 1), 0);
  assert_int_equal(tg_u32_map_put(&m, 2, 2), 0);
  assert_int_equal(tg_u32_map_put(&m, 0, 3), 0);
  assert_int_equal(tg_u32_map_put(&m, 4, 4), -ENOSPC);
  assert_int_equal(tg_u32_map_put(&m, 2, 22), 0); /* updates still work */
  uint32_t v = 0;
  assert_false(tg_u32_map_get(&m, 4, &v));
  assert_true(tg_u32_map_get(&m, 2, &v));
  assert_int_equal(v, 22);
  assert_int_equal(tg_u32_map_count(&m), 3);
  tg_u32_map_free(&m);
}

static void map_survives_allocation_failure(void **state) {
  (void)state;
  tg_u32_map_t m;
  tg_u32_map_init(&m, 0);
  calloc_fail_in = 1; /* the first table */
  assert_int_equal(tg_u32_map_put(&m, 9, 9), -ENOMEM);
  assert_int_equal(tg_u32_map_count(&m), 0);
  for (uint32_t k = 1; k <= 32; k++) assert_int_equal(tg_u32_map_put(&m, k, k), 0);
  calloc_fail_in = 2; /* the values array of the grown table */
  assert_int_equal(tg_u32_map_put(&m, 33, 33), -ENOMEM);
  calloc_fail_in = 0;
  /* Nothing was lost or half-inserted. */
  assert_int_equal(tg_u32_map_count(&m), 32);
  uint32_t v = 0;
  assert_false(tg_u32_map_get(&m, 33, &v));
  for (uint32_t k = 1; k <= 32; k++) {
    assert_true(tg_u32_map_get(&m, k, &v));
    assert_int_equal(v, k);
  }
  assert_int_equal(tg_u32_map_put(&m, 33, 33), 0);
  tg_u32_map_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(map_starts_empty_and_misses),
      cmocka_unit_test(map_inserts_looks_up_and_updates),
      cmocka_unit_test(map_key_zero_is_an_ordinary_key),
      cmocka_unit_test(map_grows_and_keeps_many_keys),
      cmocka_unit_test(map_refuses_new_keys_past_its_bound),
      cmocka_unit_test(map_survives_allocation_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
