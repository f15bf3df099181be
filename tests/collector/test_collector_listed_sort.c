/* A bucket listing's entries made one per id (store_s3.h,
 * tg__coll_listed_sort), what --rebuild-catalog walks: S3 lists keys in
 * order, so an id's objects are neighbours, but a store that does not
 * keep that promise must not give one id two rows' worth of work (a
 * second insert refused, the snapshot counted twice). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/store/store_s3.h"

/* Keys in order: nothing to fold, the count is the entries with a trace
 * or a sidecar (an index alone is none). */
static void listing_in_order_is_kept(void **state) {
  (void)state;
  tg__coll_listed_t e[] = {
      {.id = 1, .trace = true, .meta = true, .meta_size = 10},
      {.id = 2, .trace = true},
      {.id = 3},
  };
  size_t snaps = 99;
  assert_int_equal(tg__coll_listed_sort(e, 3, &snaps), 3);
  assert_int_equal(snaps, 2);
  assert_int_equal(e[0].id, 1);
  assert_int_equal(e[1].id, 2);
  assert_int_equal(e[2].id, 3);
  assert_int_equal(e[0].meta_size, 10);
}

/* One id's trace, index and sidecar listed apart, between other ids:
 * one entry carries all of them, in id order, counted once. */
static void an_id_listed_apart_is_one_entry(void **state) {
  (void)state;
  tg__coll_listed_t e[] = {
      {.id = 7, .trace = true},
      {.id = 3, .trace = true, .meta = true, .meta_size = 5},
      {.id = 7},
      {.id = 9, .meta = true, .meta_size = 8},
      {.id = 7, .meta = true, .meta_size = 42},
  };
  size_t snaps = 0;
  assert_int_equal(tg__coll_listed_sort(e, 5, &snaps), 3);
  assert_int_equal(snaps, 3);
  assert_int_equal(e[0].id, 3);
  assert_int_equal(e[1].id, 7);
  assert_true(e[1].trace);
  assert_true(e[1].meta);
  assert_int_equal(e[1].meta_size, 42);
  assert_int_equal(e[2].id, 9);
  assert_false(e[2].trace);
  assert_int_equal(e[2].meta_size, 8);
}

/* An id seen only as an index, twice: one entry, no snapshot. */
static void objects_without_trace_or_sidecar_count_none(void **state) {
  (void)state;
  tg__coll_listed_t e[] = {{.id = 4}, {.id = 4}};
  size_t snaps = 1;
  assert_int_equal(tg__coll_listed_sort(e, 2, &snaps), 1);
  assert_int_equal(snaps, 0);
  assert_int_equal(tg__coll_listed_sort(e, 0, &snaps), 0);
  assert_int_equal(snaps, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(listing_in_order_is_kept),
      cmocka_unit_test(an_id_listed_apart_is_one_entry),
      cmocka_unit_test(objects_without_trace_or_sidecar_count_none),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
