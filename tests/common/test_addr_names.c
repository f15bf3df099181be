/* SPDX-License-Identifier: Apache-2.0 */
/* The table of named address ranges (common/addr_names.h): one name per
 * address (sized over size 0, then the first added), both rules for a
 * range of size 0, the caps on entries and on name bytes (drops
 * counted), a name shared by many entries costing its bytes once, the
 * allocations shrunk to what is kept, an empty table, long names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/addr_names.h"

static void add(tg_addr_names_t *t, uint64_t addr, uint64_t size,
                const char *name) {
  assert_int_equal(tg_addr_names_add(t, addr, size, name, strlen(name)), 0);
}

static void empty_table_finds_nothing(void **state) {
  (void)state;
  tg_addr_names_t t;
  tg_addr_names_init(&t, 16, 1u << 20);
  assert_int_equal(tg_addr_names_finish(&t), 0);
  assert_null(t.v);
  assert_null(t.pool);
  assert_null(tg_addr_names_find(&t, 0, TG_ADDR_SIZE0_EMPTY));
  assert_null(tg_addr_names_find(&t, UINT64_MAX, TG_ADDR_SIZE0_TO_NEXT));
  tg_addr_names_free(&t);
  /* A cap of 0 keeps nothing and allocates nothing. */
  tg_addr_names_init(&t, 0, 1u << 20);
  add(&t, 0x10, 4, "a");
  assert_int_equal(tg_addr_names_finish(&t), 0);
  assert_null(t.v);
  assert_null(t.pool);
  tg_addr_names_free(&t);
}

static void one_name_per_address(void **state) {
  (void)state;
  tg_addr_names_t t;
  tg_addr_names_init(&t, 64, 1u << 20);
  add(&t, 0x100, 0, "unsized");
  add(&t, 0x100, 16, "first");
  add(&t, 0x100, 16, "second");
  add(&t, 0x50, 8, "low");
  add(&t, 0x200, 0, "u1");
  add(&t, 0x200, 0, "u2");
  add(&t, 0x300, 4, "s");
  add(&t, 0x300, 0, "u");
  assert_int_equal(tg_addr_names_finish(&t), 4);
  assert_int_equal(t.n, 4);
  for (size_t i = 1; i < t.n; i++) assert_true(t.v[i - 1].addr < t.v[i].addr);
  /* Sized over size 0, whatever the order of the adds. */
  assert_string_equal(tg_addr_names_find(&t, 0x100, TG_ADDR_SIZE0_EMPTY),
                      "first");
  assert_string_equal(tg_addr_names_find(&t, 0x300, TG_ADDR_SIZE0_EMPTY), "s");
  /* Among alike entries, the first added. */
  assert_string_equal(tg_addr_names_find(&t, 0x200, TG_ADDR_SIZE0_TO_NEXT),
                      "u1");
  assert_string_equal(tg_addr_names_find(&t, 0x57, TG_ADDR_SIZE0_EMPTY),
                      "low");
  tg_addr_names_free(&t);
  assert_null(t.v);
  assert_int_equal(t.n, 0);
}

static void size0_holds_nothing_or_runs_to_the_next(void **state) {
  (void)state;
  tg_addr_names_t t;
  tg_addr_names_init(&t, 64, 1u << 20);
  add(&t, 0x1000, 0x10, "sized");
  add(&t, 0x1010, 0, "open");
  add(&t, 0x1800, 8, "after");
  add(&t, 0x2000, 0, "last");
  assert_int_equal(tg_addr_names_finish(&t), 4);

  const tg_addr_size0_t empty = TG_ADDR_SIZE0_EMPTY;
  assert_null(tg_addr_names_find(&t, 0xfff, empty));
  assert_string_equal(tg_addr_names_find(&t, 0x1000, empty), "sized");
  assert_string_equal(tg_addr_names_find(&t, 0x100f, empty), "sized");
  assert_null(tg_addr_names_find(&t, 0x1010, empty));
  assert_null(tg_addr_names_find(&t, 0x17ff, empty));
  assert_string_equal(tg_addr_names_find(&t, 0x1807, empty), "after");
  assert_null(tg_addr_names_find(&t, 0x1808, empty));
  assert_null(tg_addr_names_find(&t, 0x2000, empty));

  const tg_addr_size0_t next = TG_ADDR_SIZE0_TO_NEXT;
  assert_null(tg_addr_names_find(&t, 0xfff, next));
  assert_string_equal(tg_addr_names_find(&t, 0x100f, next), "sized");
  assert_string_equal(tg_addr_names_find(&t, 0x1010, next), "open");
  assert_string_equal(tg_addr_names_find(&t, 0x17ff, next), "open");
  assert_string_equal(tg_addr_names_find(&t, 0x1800, next), "after");
  /* A sized entry ends at its size under either rule. */
  assert_null(tg_addr_names_find(&t, 0x1808, next));
  /* The last one of size 0 runs to the end of the address space. */
  assert_string_equal(tg_addr_names_find(&t, 0x2000, next), "last");
  assert_string_equal(tg_addr_names_find(&t, UINT64_MAX, next), "last");
  tg_addr_names_free(&t);
}

static void cap_keeps_the_first_added(void **state) {
  (void)state;
  tg_addr_names_t t;
  tg_addr_names_init(&t, 3, 1u << 20);
  char name[16];
  for (int i = 0; i < 10; i++) {
    snprintf(name, sizeof(name), "f%d", i);
    /* Descending addresses: the cap counts adds, not sorted places. */
    add(&t, 0x1000 - (uint64_t)i * 0x10, 0x10, name);
  }
  assert_int_equal(tg_addr_names_finish(&t), 3);
  assert_string_equal(tg_addr_names_find(&t, 0x1000, TG_ADDR_SIZE0_EMPTY),
                      "f0");
  assert_string_equal(tg_addr_names_find(&t, 0xfe0, TG_ADDR_SIZE0_EMPTY),
                      "f2");
  assert_null(tg_addr_names_find(&t, 0xfd0, TG_ADDR_SIZE0_EMPTY));
  tg_addr_names_free(&t);
}

static void names_are_copied_whole(void **state) {
  (void)state;
  tg_addr_names_t t;
  tg_addr_names_init(&t, 1u << 12, 1u << 20);
  /* Long names past the pool's first allocation, and an empty one. */
  char big[1029];
  memset(big, 'x', sizeof(big));
  for (uint64_t i = 0; i < 100; i++) {
    big[0] = (char)('a' + i % 26);
    assert_int_equal(
        tg_addr_names_add(&t, 0x10000 + i * 0x10, 0x10, big, sizeof(big)), 0);
  }
  assert_int_equal(tg_addr_names_add(&t, 0x10, 4, "not this", 0), 0);
  assert_int_equal(tg_addr_names_finish(&t), 101);
  assert_string_equal(tg_addr_names_find(&t, 0x10, TG_ADDR_SIZE0_EMPTY), "");
  for (uint64_t i = 0; i < 100; i++) {
    const char *n = tg_addr_names_find(&t, 0x10000 + i * 0x10 + 0xf,
                                       TG_ADDR_SIZE0_EMPTY);
    assert_non_null(n);
    assert_int_equal(strlen(n), sizeof(big));
    assert_int_equal(n[0], 'a' + i % 26);
  }
  tg_addr_names_free(&t);
}

static void pool_cap_drops_and_counts(void **state) {
  (void)state;
  tg_addr_names_t t;
  /* Room for two names of 9 bytes and their NULs, not three. */
  tg_addr_names_init(&t, 100, 21);
  add(&t, 0x10, 4, "123456789");
  add(&t, 0x20, 4, "abcdefghi");
  add(&t, 0x30, 4, "zzzzzzzzz");
  add(&t, 0x40, 4, "");
  assert_int_equal(t.dropped, 1);
  assert_true(t.pool_len <= 21);
  assert_true(t.pool_cap <= 21);
  assert_int_equal(tg_addr_names_finish(&t), 3);
  assert_string_equal(tg_addr_names_find(&t, 0x20, TG_ADDR_SIZE0_EMPTY),
                      "abcdefghi");
  assert_null(tg_addr_names_find(&t, 0x30, TG_ADDR_SIZE0_EMPTY));
  assert_string_equal(tg_addr_names_find(&t, 0x40, TG_ADDR_SIZE0_EMPTY), "");
  /* An entry past the entry cap is counted too. */
  tg_addr_names_t u;
  tg_addr_names_init(&u, 1, 100);
  add(&u, 0x10, 4, "a");
  add(&u, 0x20, 4, "b");
  assert_int_equal(u.dropped, 1);
  assert_int_equal(u.n, 1);
  tg_addr_names_free(&u);
  tg_addr_names_free(&t);
}

static void shared_name_costs_its_bytes_once(void **state) {
  (void)state;
  tg_addr_names_t t;
  tg_addr_names_init(&t, 1u << 16, 4096);
  char big[1000];
  memset(big, 'n', sizeof(big));
  uint32_t off;
  assert_int_equal(tg_addr_names_add_name(&t, big, sizeof(big), &off), 1);
  for (uint64_t i = 0; i < 10000; i++)
    assert_int_equal(tg_addr_names_add_ref(&t, 0x1000 + i * 8, 8, off), 0);
  assert_int_equal(t.pool_len, sizeof(big) + 1);
  assert_int_equal(t.dropped, 0);
  assert_int_equal(tg_addr_names_finish(&t), 10000);
  /* Shrunk to what is kept: no doubling's slack. */
  assert_int_equal(t.cap, 10000);
  assert_int_equal(t.pool_cap, sizeof(big) + 1);
  assert_int_equal(tg_addr_names_bytes(&t),
                   10000 * sizeof(tg_addr_name_t) + sizeof(big) + 1);
  const char *n = tg_addr_names_find(&t, 0x1000 + 9999 * 8,
                                     TG_ADDR_SIZE0_EMPTY);
  assert_non_null(n);
  assert_int_equal(strlen(n), sizeof(big));
  tg_addr_names_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pool_cap_drops_and_counts),
      cmocka_unit_test(shared_name_costs_its_bytes_once),
      cmocka_unit_test(empty_table_finds_nothing),
      cmocka_unit_test(one_name_per_address),
      cmocka_unit_test(size0_holds_nothing_or_runs_to_the_next),
      cmocka_unit_test(cap_keeps_the_first_added),
      cmocka_unit_test(names_are_copied_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
