/* Sharding hosts among collectors (collector/config/shard.h): the values are
 * pinned, so that no change ever reshuffles a fleet by accident; and the
 * properties that make the function worth having. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "collector/config/shard.h"

static uint32_t shard(const char *host, uint32_t count) {
  return tg_coll_shard_of(host, strlen(host), count);
}

static void shard_key_is_fnv1a_64(void **state) {
  (void)state;
  /* The published FNV-1a 64 test vectors. */
  assert_int_equal(tg_coll_shard_key("", 0), 0xcbf29ce484222325ull);
  assert_int_equal(tg_coll_shard_key("a", 1), 0xaf63dc4c8601ec8cull);
  assert_int_equal(tg_coll_shard_key("foobar", 6), 0x85944171f73967e8ull);
  /* Bytes, not a C string: a NUL inside counts. */
  assert_int_not_equal(tg_coll_shard_key("a\0b", 3), tg_coll_shard_key("a", 1));
}

static void shard_values_are_pinned(void **state) {
  (void)state;
  static const struct {
    const char *host;
    uint32_t count, want;
  } pinned[] = {
      {"db1.example:7467", 2, 1},
      {"db1.example:7467", 3, 1},
      {"db1.example:7467", 10, 7},
      {"db1.example:7467", 1000, 917},
      {"db2.example:7467", 2, 1},
      {"db2.example:7467", 3, 1},
      {"db2.example:7467", 10, 9},
      {"db2.example:7467", 1000, 715},
      {"web-001.prod:7467", 2, 0},
      {"web-001.prod:7467", 3, 0},
      {"web-001.prod:7467", 10, 9},
      {"web-001.prod:7467", 1000, 753},
      {"web-002.prod:7467", 2, 1},
      {"web-002.prod:7467", 3, 2},
      {"web-002.prod:7467", 10, 2},
      {"web-002.prod:7467", 1000, 274},
      {"10.0.0.1:7467", 2, 1},
      {"10.0.0.1:7467", 3, 1},
      {"10.0.0.1:7467", 10, 6},
      {"10.0.0.1:7467", 1000, 365},
      {"[::1]:7467", 2, 0},
      {"[::1]:7467", 3, 2},
      {"[::1]:7467", 10, 4},
      {"[::1]:7467", 1000, 60},
      {"localhost:7467", 2, 0},
      {"localhost:7467", 3, 2},
      {"localhost:7467", 10, 7},
      {"localhost:7467", 1000, 732},
      {"", 2, 1},
      {"", 3, 1},
      {"", 10, 1},
      {"", 1000, 266},
  };
  for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++)
    if (shard(pinned[i].host, pinned[i].count) != pinned[i].want)
      fail_msg("%s of %u: shard %u, pinned %u", pinned[i].host, pinned[i].count,
               shard(pinned[i].host, pinned[i].count), pinned[i].want);
}

static void shard_growing_moves_hosts_only_to_the_new_shard(void **state) {
  (void)state;
  char host[64];
  for (uint32_t n = 1; n < 12; n++) {
    unsigned moved = 0;
    for (int i = 0; i < 2000; i++) {
      snprintf(host, sizeof(host), "host-%04d.example:7467", i);
      uint32_t before = shard(host, n), after = shard(host, n + 1);
      assert_true(before < n && after <= n);
      if (after != before) {
        assert_int_equal(after, n);
        moved++;
      }
    }
    /* About 2000 / (n + 1) move: well within a factor of two. */
    assert_true(moved > 1000 / (n + 1) && moved < 4000 / (n + 1));
  }
}

static void shard_spreads_a_fleet_evenly_and_owns_each_host_once(void **state) {
  (void)state;
  enum { HOSTS = 3000, N = 5 };
  unsigned per[N] = {0};
  char host[64];
  for (int i = 0; i < HOSTS; i++) {
    snprintf(host, sizeof(host), "10.0.%d.%d:7467", i / 250, i % 250);
    unsigned owners = 0;
    for (uint32_t k = 0; k < N; k++) {
      tg_coll_shard_t s = {.index = k, .count = N};
      if (tg_coll_shard_owns(&s, host, strlen(host))) {
        owners++;
        per[k]++;
      }
    }
    assert_int_equal(owners, 1);
  }
  for (int k = 0; k < N; k++)
    assert_true(per[k] > HOSTS / N * 8 / 10 && per[k] < HOSTS / N * 12 / 10);
  /* One shard takes everything. */
  assert_int_equal(shard("anything", 1), 0);
  assert_int_equal(shard("", 1), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shard_key_is_fnv1a_64),
      cmocka_unit_test(shard_values_are_pinned),
      cmocka_unit_test(shard_growing_moves_hosts_only_to_the_new_shard),
      cmocka_unit_test(shard_spreads_a_fleet_evenly_and_owns_each_host_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
