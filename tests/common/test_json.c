/* JSON values every program writes and reads the same way (common/json.h):
 * text that is not UTF-8 under the one rule (U+FFFD per maximal subpart),
 * counts above INT64_MAX as strings and read back in exactly their two
 * forms, a document from outside bounded by the memory of its tree, and
 * the builders that end with the whole container or none. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/json.h"

static void assert_text(const char *in, const char *want) {
  json_t *v = tg_json_text(in);
  assert_non_null(v);
  if (strcmp(json_string_value(v), want) != 0)
    fail_msg("\"%s\": got \"%s\", want \"%s\"", in, json_string_value(v), want);
  json_decref(v);
}

#define R "\xef\xbf\xbd" /* U+FFFD */

/* The Unicode Standard's examples (chapter 3, Table 3-8 and around) and
 * the edges of each lead byte's second-byte range. */
static void each_maximal_subpart_becomes_one_replacement(void **state) {
  (void)state;
  assert_text("plain ascii \t\x01\x7f", "plain ascii \t\x01\x7f");
  assert_text("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf",
              "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
  /* Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 */
  assert_text("a\xf1\x80\x80\xe1\x80\xc2" "b\x80" "c\x80\xbf" "d",
              "a" R R R "b" R "c" R R "d");
  assert_text("\xc0\xaf", R R);                 /* overlong: C0 never leads */
  assert_text("\xe0\x80\xaf", R R R);           /* E0 needs A0..BF next */
  assert_text("\xe0\xa0", R);                   /* cut after a good second */
  assert_text("\xed\xa0\x80", R R R);           /* a surrogate */
  assert_text("\xed\x9f\xbf", "\xed\x9f\xbf");  /* U+D7FF */
  assert_text("\xf0\x8f\xbf\xbf", R R R R);     /* F0 needs 90..BF next */
  assert_text("\xf0\x9f\x98", R);               /* cut: one */
  assert_text("\xf4\x90\x80\x80", R R R R);     /* above U+10FFFF */
  assert_text("\xf5\x80", R R);                 /* F5 never leads */
  assert_text("\xff\xfe", R R);
  assert_text("\xc3(", R "(");
  assert_text("", "");
  json_t *v = tg_json_text(NULL);
  assert_true(json_is_null(v));
}

static void counts_above_int64_are_strings_and_read_back(void **state) {
  (void)state;
  static const uint64_t vals[] = {0, 1, INT64_MAX, (uint64_t)INT64_MAX + 1,
                                  UINT64_MAX};
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
    json_t *v = tg_json_u64(vals[i]);
    assert_non_null(v);
    assert_true(vals[i] <= INT64_MAX ? json_is_integer(v) : json_is_string(v));
    uint64_t back = 0;
    assert_int_equal(tg_json_get_u64(v, &back), 0);
    assert_true(back == vals[i]);
    json_decref(v);
  }
  json_t *s = tg_json_u64(UINT64_MAX);
  assert_string_equal(json_string_value(s), "18446744073709551615");
  json_decref(s);
  /* One spelling per value: anything else is refused. */
  json_t *bad[] = {json_integer(-1), json_string("5"),
                   json_string("9223372036854775807"),
                   json_string("18446744073709551616"),
                   json_string("09223372036854775808"), json_string(""),
                   json_string("-9223372036854775809"), json_real(1.0),
                   json_true(), json_null(), json_array()};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint64_t out = 42;
    assert_int_equal(tg_json_get_u64(bad[i], &out), -EINVAL);
    assert_true(out == 42);
    json_decref(bad[i]);
  }
}

/* |n| bytes of a document: {"x":[U,U,...,U]} with unit |u|. */
static char *repeated(const char *u, size_t n, size_t *len) {
  char *b = malloc(n);
  assert_non_null(b);
  size_t ul = strlen(u), k = (size_t)sprintf(b, "{\"x\":[");
  while (k + ul + 3 < n) memcpy(b + k, u, ul), k += ul;
  b[k - 1] = ']'; /* the last unit's comma */
  b[k++] = '}';
  *len = k;
  return b;
}

/* The tree's memory is what is capped, not the text's length: a text a
 * half a MiB long that takes tens as a tree is refused, and the same
 * text parses under a cap it fits. */
static void a_document_is_bounded_by_its_tree(void **state) {
  (void)state;
  size_t len;
  char *text = repeated("{},", 512u << 10, &len);
  json_error_t err;
  int rv = 1;
  assert_null(tg_json_load(text, len, 0, 4u << 20, &err, &rv));
  assert_int_equal(rv, -E2BIG);
  json_t *v = tg_json_load(text, len, 0, 1u << 30, &err, &rv);
  assert_int_equal(rv, 0);
  assert_non_null(v);
  assert_int_equal(json_array_size(json_object_get(v, "x")), (len - 7) / 3);
  json_decref(v);
  free(text);
  /* Not JSON: -EINVAL with where; the cap is no longer in force after. */
  assert_null(tg_json_load("{\"a\":", 5, 0, 1024, &err, &rv));
  assert_int_equal(rv, -EINVAL);
  assert_int_equal(err.position, 5);
  json_t *big = json_array();
  for (int i = 0; i < 10000; i++) big = tg_json_push(big, json_string("after"));
  assert_non_null(big);
  json_decref(big);
  /* Duplicates, as the flags ask. */
  assert_null(tg_json_load("{\"a\":1,\"a\":1}", 13, JSON_REJECT_DUPLICATES,
                           1024, &err, &rv));
  assert_int_equal(rv, -EINVAL);
}

/* A NULL value (out of memory) drops the whole container, and a NULL
 * container drops the value: a loop ends with all or nothing. */
static void builders_end_with_all_or_nothing(void **state) {
  (void)state;
  json_t *a = json_array();
  a = tg_json_push(a, json_integer(1));
  assert_int_equal(json_array_size(a), 1);
  assert_null(tg_json_push(a, NULL));
  assert_null(tg_json_push(NULL, json_integer(2)));
  json_t *o = json_object();
  o = tg_json_put(o, "k", json_integer(1));
  assert_non_null(o);
  assert_null(tg_json_put(o, "k2", NULL));
  assert_null(tg_json_put(json_object(), "not utf-8 \xff", json_integer(1)));
  assert_null(tg_json_put(NULL, "k", json_integer(1)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_maximal_subpart_becomes_one_replacement),
      cmocka_unit_test(counts_above_int64_are_strings_and_read_back),
      cmocka_unit_test(a_document_is_bounded_by_its_tree),
      cmocka_unit_test(builders_end_with_all_or_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
