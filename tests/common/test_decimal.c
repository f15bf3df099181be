/* common/decimal.h: digits and nothing else, refused past the bound. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/decimal.h"

static void u64_takes_digits_only(void **state) {
  (void)state;
  uint64_t v = 7;
  assert_int_equal(tg_decimal_u64("0", 10, &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(tg_decimal_u64("0065535", 65535, &v), 0);
  assert_int_equal(v, 65535);
  assert_int_equal(tg_decimal_u64("18446744073709551615", UINT64_MAX, &v), 0);
  assert_true(v == UINT64_MAX);
  /* What strtoull() takes and these do not: each leaves *out alone. */
  static const char *const bad[] = {"",   " 5", "5 ", "+5", "-5", "-0",
                                    "0x10", "1e3", "5.0", "\t5", "5\n", "٣"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    v = 42;
    assert_int_equal(tg_decimal_u64(bad[i], UINT64_MAX, &v), -EINVAL);
    assert_int_equal(v, 42);
  }
}

static void u64_refuses_past_the_bound(void **state) {
  (void)state;
  uint64_t v = 42;
  assert_int_equal(tg_decimal_u64("65536", 65535, &v), -ERANGE);
  /* 2^64 and far beyond: no wrap. */
  assert_int_equal(tg_decimal_u64("18446744073709551616", UINT64_MAX, &v), -ERANGE);
  assert_int_equal(tg_decimal_u64("99999999999999999999999999", UINT64_MAX, &v),
                   -ERANGE);
  /* A digit string past the range with junk after it is still junk. */
  assert_int_equal(tg_decimal_u64("99999999999999999999x", UINT64_MAX, &v), -EINVAL);
  assert_int_equal(v, 42);
}

static void i64_takes_one_minus(void **state) {
  (void)state;
  int64_t v = 42;
  assert_int_equal(tg_decimal_i64("-9223372036854775808", INT64_MIN, INT64_MAX, &v), 0);
  assert_true(v == INT64_MIN);
  assert_int_equal(tg_decimal_i64("9223372036854775807", INT64_MIN, INT64_MAX, &v), 0);
  assert_true(v == INT64_MAX);
  assert_int_equal(tg_decimal_i64("-12", -100, 100, &v), 0);
  assert_int_equal(v, -12);
  v = 42;
  assert_int_equal(tg_decimal_i64("-9223372036854775809", INT64_MIN, INT64_MAX, &v),
                   -ERANGE);
  assert_int_equal(tg_decimal_i64("9223372036854775808", INT64_MIN, INT64_MAX, &v),
                   -ERANGE);
  assert_int_equal(tg_decimal_i64("-101", -100, 100, &v), -ERANGE);
  assert_int_equal(tg_decimal_i64("0", 1, 1000, &v), -ERANGE);
  static const char *const bad[] = {"", "-", "--5", "+5", " -5", "- 5", "5-"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(tg_decimal_i64(bad[i], INT64_MIN, INT64_MAX, &v), -EINVAL);
  assert_int_equal(v, 42);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(u64_takes_digits_only),
      cmocka_unit_test(u64_refuses_past_the_bound),
      cmocka_unit_test(i64_takes_one_minus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
