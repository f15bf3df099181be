/* Snapshot ids (collector/catalog/snapshot_id.h): the one form accepted, hostile
 * text refused, file names made from values only. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "collector/catalog/snapshot_id.h"

static int parse(const char *s, uint64_t *id) {
  return tg_coll_id_parse(s, strlen(s), id);
}

static void id_accepts_sixteen_lowercase_hex_digits(void **state) {
  (void)state;
  uint64_t id = 0;
  assert_int_equal(parse("0000000000000001", &id), 0);
  assert_int_equal(id, 1);
  assert_int_equal(parse("000000000000002a", &id), 0);
  assert_int_equal(id, 42);
  assert_int_equal(parse("7fffffffffffffff", &id), 0);
  assert_int_equal(id, INT64_MAX);
  assert_int_equal(parse("0123456789abcdef", &id), 0);
  assert_int_equal(id, 0x0123456789abcdefull);
}

static void id_refuses_hostile_text(void **state) {
  (void)state;
  const char *bad[] = {
      "",
      "0",
      "2a",
      "000000000000002A",
      "0x00000000000002a",
      "000000000000002a\n",
      " 000000000000002a",
      "000000000000002a ",
      "00000000000002a",
      "0000000000000002a",
      "0000000000000000",
      "8000000000000000",
      "ffffffffffffffff",
      "-000000000000001",
      "+000000000000001",
      "../../etc/passwd..",
      "0000000000000/2a",
      "00000000000000.a",
      "000000000000002g",
      "00000000000002a%",
      "%30000000000002a",
      "00000000000002a\xc3\xa9",
      "000000000000002a.pftrace",
      "'; DROP TABLE x;--",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint64_t id = 77;
    if (parse(bad[i], &id) != -EINVAL) fail_msg("'%s' accepted", bad[i]);
    assert_int_equal(id, 77); /* untouched */
  }
  /* A NUL inside the counted bytes is not a terminator. */
  uint64_t id;
  assert_int_equal(tg_coll_id_parse("000000000000002\0a", 16, &id), -EINVAL);
  assert_int_equal(tg_coll_id_parse(NULL, 16, &id), -EINVAL);
}

static void id_formats_what_it_parses(void **state) {
  (void)state;
  const uint64_t values[] = {1, 42, 0xdeadbeef, INT64_MAX};
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    char text[TG_COLL_ID_STRLEN];
    tg_coll_id_format(values[i], text);
    assert_int_equal(strlen(text), TG_COLL_ID_DIGITS);
    uint64_t back;
    assert_int_equal(parse(text, &back), 0);
    assert_int_equal(back, values[i]);
  }
  assert_false(tg_coll_id_valid(0));
  assert_false(tg_coll_id_valid((uint64_t)INT64_MAX + 1));
}

static void id_file_names_come_from_the_value(void **state) {
  (void)state;
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(42, 0, name);
  assert_string_equal(name, "000000000000002a.pftrace");
  tg_coll_id_file_name(42, 1, name);
  assert_string_equal(name, "000000000000002a.pftrace.partial");
  uint64_t id;
  assert_int_equal(
      tg_coll_id_parse_file_name("000000000000002a.pftrace", 0, &id), 0);
  assert_int_equal(id, 42);
  assert_int_equal(
      tg_coll_id_parse_file_name("000000000000002a.pftrace.partial", 1, &id),
      0);
  const char *bad[] = {"000000000000002a.pftrace.partial",
                       "catalog.sqlite",
                       "000000000000002A.pftrace",
                       "2a.pftrace",
                       "000000000000002a.pftrace~",
                       ".pftrace",
                       ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (tg_coll_id_parse_file_name(bad[i], 0, &id) == 0)
      fail_msg("'%s' taken for a snapshot file", bad[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(id_accepts_sixteen_lowercase_hex_digits),
      cmocka_unit_test(id_refuses_hostile_text),
      cmocka_unit_test(id_formats_what_it_parses),
      cmocka_unit_test(id_file_names_come_from_the_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
