/* The probes' address-keyed string table (agent/sys/addr_strs.h), under
 * kallsyms and printk_formats: the first added of an address is kept,
 * entries past the caps are counted, a search finds the greatest address at
 * or below a key, finishing shrinks the storage without changing what it
 * holds, and two tables compare equal only entry for entry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/sys/addr_strs.h"

/* Small first sizes, so that a few entries already grow the storage. */
static const tg__addr_strs_caps_t small = {
    .max_entries = 1000,
    .max_bytes = 100000,
    .first_entries = 2,
    .first_bytes = 4,
};

static void add(tg__addr_strs_t *t, uint64_t addr, const char *s) {
  assert_int_equal(tg__addr_strs_add(t, addr, s, strlen(s)), 0);
}

/* Entry |i| is |addr| with the string |s|. */
static void has(const tg__addr_strs_t *t, size_t i, uint64_t addr,
                const char *s) {
  assert_true(i < t->n);
  assert_true(tg__addr_strs_addr(t, i) == addr);
  size_t len;
  const char *got = tg__addr_strs_str(t, i, &len);
  assert_int_equal(len, strlen(s));
  assert_memory_equal(got, s, len);
}

static void addr_strs_duplicates_keep_the_first_added(void **state) {
  (void)state;
  tg__addr_strs_t t;
  tg__addr_strs_init(&t, small);
  add(&t, 0x30, "third");
  add(&t, 0x10, "first");
  add(&t, 0x30, "third again");
  add(&t, 0x20, "");
  add(&t, 0x20, "second again"); /* an empty string first: still first */
  add(&t, 0x10, "first again");
  add(&t, 0x40, "");
  add(&t, 0x40, ""); /* two empty ones at one offset */
  add(&t, 0x10, "first once more");
  tg__addr_strs_finish(&t);
  assert_int_equal(t.n, 4);
  has(&t, 0, 0x10, "first");
  has(&t, 1, 0x20, "");
  has(&t, 2, 0x30, "third");
  has(&t, 3, 0x40, "");
  assert_int_equal(t.dropped, 0);
  tg__addr_strs_free(&t);
}

static void addr_strs_past_caps_are_counted_dropped(void **state) {
  (void)state;
  tg__addr_strs_t t;
  /* Three entries at most. */
  tg__addr_strs_init(&t, (tg__addr_strs_caps_t){.max_entries = 3,
                                                .max_bytes = 100,
                                                .first_entries = 2,
                                                .first_bytes = 4});
  for (uint64_t a = 1; a <= 5; a++) add(&t, a, "x");
  assert_int_equal(t.n, 3);
  assert_int_equal(t.dropped, 2);
  assert_true(t.cap <= 3); /* growth stops at the cap */
  tg__addr_strs_finish(&t);
  assert_int_equal(tg__addr_strs_search(&t, 5), 2);
  has(&t, 2, 3, "x");
  tg__addr_strs_free(&t);
  assert_int_equal(t.dropped, 0);

  /* Ten string bytes at most: a string that does not fit is dropped, a
   * shorter one after it still fits. */
  tg__addr_strs_init(&t, (tg__addr_strs_caps_t){.max_entries = 100,
                                                .max_bytes = 10,
                                                .first_entries = 2,
                                                .first_bytes = 4});
  add(&t, 1, "abcdef");
  add(&t, 2, "ghijk"); /* 11 bytes */
  add(&t, 3, "ghij");  /* 10 */
  add(&t, 4, "l");
  add(&t, 5, "");
  assert_int_equal(t.dropped, 2);
  assert_int_equal(t.pool_len, 10);
  assert_true(t.pool_cap <= 10);
  tg__addr_strs_finish(&t);
  assert_int_equal(t.n, 3);
  has(&t, 0, 1, "abcdef");
  has(&t, 1, 3, "ghij");
  has(&t, 2, 5, "");
  tg__addr_strs_free(&t);
}

static void addr_strs_search_at_below_and_above_the_ends(void **state) {
  (void)state;
  tg__addr_strs_t t;
  tg__addr_strs_init(&t, small);
  add(&t, 300, "c");
  add(&t, 100, "a");
  add(&t, 200, "b");
  tg__addr_strs_finish(&t);
  assert_int_equal(tg__addr_strs_search(&t, 0), TG__ADDR_STRS_NONE);
  assert_int_equal(tg__addr_strs_search(&t, 99), TG__ADDR_STRS_NONE);
  assert_int_equal(tg__addr_strs_search(&t, 100), 0);
  assert_int_equal(tg__addr_strs_search(&t, 101), 0);
  assert_int_equal(tg__addr_strs_search(&t, 199), 0);
  assert_int_equal(tg__addr_strs_search(&t, 200), 1);
  assert_int_equal(tg__addr_strs_search(&t, 299), 1);
  assert_int_equal(tg__addr_strs_search(&t, 300), 2);
  assert_int_equal(tg__addr_strs_search(&t, 301), 2);
  assert_int_equal(tg__addr_strs_search(&t, UINT64_MAX), 2);
  tg__addr_strs_free(&t);

  /* Addresses at the ends of the range. */
  tg__addr_strs_init(&t, small);
  add(&t, UINT64_MAX, "top");
  add(&t, 0, "bottom");
  tg__addr_strs_finish(&t);
  assert_int_equal(tg__addr_strs_search(&t, 0), 0);
  assert_int_equal(tg__addr_strs_search(&t, UINT64_MAX - 1), 0);
  assert_int_equal(tg__addr_strs_search(&t, UINT64_MAX), 1);
  has(&t, 1, UINT64_MAX, "top");
  tg__addr_strs_free(&t);
}

static void addr_strs_empty_table_finds_nothing(void **state) {
  (void)state;
  tg__addr_strs_t t;
  tg__addr_strs_init(&t, small);
  assert_int_equal(tg__addr_strs_mem(&t), 0);
  tg__addr_strs_finish(&t);
  assert_int_equal(t.n, 0);
  assert_int_equal(tg__addr_strs_mem(&t), 0);
  assert_int_equal(tg__addr_strs_search(&t, 0), TG__ADDR_STRS_NONE);
  assert_int_equal(tg__addr_strs_search(&t, UINT64_MAX), TG__ADDR_STRS_NONE);
  tg__addr_strs_free(&t);
  /* Freed, then used again with the same caps. */
  add(&t, 7, "again");
  tg__addr_strs_finish(&t);
  has(&t, 0, 7, "again");
  tg__addr_strs_free(&t);
  assert_int_equal(tg__addr_strs_mem(&t), 0);
  /* A zero-filled table, never initialised, as an owner calloc'd. */
  tg__addr_strs_t z = {0};
  tg__addr_strs_free(&z);
}

static void addr_strs_finish_shrinks_and_keeps_content(void **state) {
  (void)state;
  tg__addr_strs_t t;
  tg__addr_strs_init(&t, small);
  char s[32];
  /* 500 entries, added from the top down, every tenth address twice. */
  for (unsigned i = 500; i-- > 0;) {
    snprintf(s, sizeof(s), "entry %u", i);
    add(&t, 0x1000 + 16 * (uint64_t)i, s);
    if (i % 10 == 0) add(&t, 0x1000 + 16 * (uint64_t)i, "late");
  }
  assert_true(t.cap > 500 || t.pool_cap > t.pool_len); /* slack to give */
  size_t bytes = t.pool_len;
  tg__addr_strs_finish(&t);
  assert_int_equal(t.n, 500);
  assert_int_equal(t.cap, 500);
  assert_int_equal(t.pool_len, bytes);
  assert_int_equal(t.pool_cap, bytes);
  assert_int_equal(tg__addr_strs_mem(&t), 500 * sizeof(tg__addr_str_t) + bytes);
  for (unsigned i = 0; i < 500; i++) {
    snprintf(s, sizeof(s), "entry %u", i);
    has(&t, i, 0x1000 + 16 * (uint64_t)i, s);
    assert_int_equal(tg__addr_strs_search(&t, 0x1000 + 16 * (uint64_t)i + 15),
                     i);
  }
  /* A second finish changes nothing. */
  tg__addr_strs_finish(&t);
  assert_int_equal(t.n, 500);
  has(&t, 499, 0x1000 + 16 * 499, "entry 499");
  tg__addr_strs_free(&t);
}

/* Equal: the same entries in the same order, whatever their storage; a
 * different address, string, length or count is not. */
static void addr_strs_equal_compares_entries_not_storage(void **state) {
  (void)state;
  static const tg__addr_strs_caps_t roomy = {
      .max_entries = 1000,
      .max_bytes = 100000,
      .first_entries = 64,
      .first_bytes = 1024,
  };
  tg__addr_strs_t a, b;
  tg__addr_strs_init(&a, small);
  tg__addr_strs_init(&b, roomy);
  assert_true(tg__addr_strs_equal(&a, &b)); /* both empty */
  add(&a, 0x20, "two");
  add(&a, 0x10, "one");
  add(&a, 0x30, "");
  add(&b, 0x30, "");
  add(&b, 0x10, "one");
  add(&b, 0x20, "two");
  tg__addr_strs_finish(&a);
  tg__addr_strs_finish(&b);
  assert_true(tg__addr_strs_equal(&a, &b));
  assert_true(tg__addr_strs_equal(&b, &a));

  tg__addr_strs_t c;
  tg__addr_strs_init(&c, small);
  add(&c, 0x10, "one");
  add(&c, 0x20, "twO"); /* a byte */
  add(&c, 0x30, "");
  tg__addr_strs_finish(&c);
  assert_false(tg__addr_strs_equal(&a, &c));
  tg__addr_strs_free(&c);
  add(&c, 0x10, "one");
  add(&c, 0x21, "two"); /* an address */
  add(&c, 0x30, "");
  tg__addr_strs_finish(&c);
  assert_false(tg__addr_strs_equal(&a, &c));
  tg__addr_strs_free(&c);
  add(&c, 0x10, "one");
  add(&c, 0x20, "tw"); /* a length */
  add(&c, 0x30, "");
  tg__addr_strs_finish(&c);
  assert_false(tg__addr_strs_equal(&a, &c));
  tg__addr_strs_free(&c);
  add(&c, 0x10, "one");
  add(&c, 0x20, "two"); /* one entry fewer */
  tg__addr_strs_finish(&c);
  assert_false(tg__addr_strs_equal(&a, &c));
  assert_false(tg__addr_strs_equal(&c, &a));
  tg__addr_strs_free(&c);
  tg__addr_strs_free(&a);
  tg__addr_strs_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(addr_strs_duplicates_keep_the_first_added),
      cmocka_unit_test(addr_strs_past_caps_are_counted_dropped),
      cmocka_unit_test(addr_strs_search_at_below_and_above_the_ends),
      cmocka_unit_test(addr_strs_empty_table_finds_nothing),
      cmocka_unit_test(addr_strs_finish_shrinks_and_keeps_content),
      cmocka_unit_test(addr_strs_equal_compares_entries_not_storage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
