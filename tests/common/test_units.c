/* common/units.h: one grammar of durations and sizes, exact, and a
 * formatter whose output parses back to the same value. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/units.h"

typedef struct good {
  const char *s;
  uint64_t want;
} good_t;

typedef int (*parse_fn)(const char *, uint64_t, uint64_t *, const char **);

/* Each of |good| parses, with |bare| for a number alone, to its value. */
static void expect_good(parse_fn parse, const good_t *good, size_t n,
                        uint64_t bare) {
  for (size_t i = 0; i < n; i++) {
    uint64_t v = 7;
    const char *why = NULL;
    int rv = parse(good[i].s, bare, &v, &why);
    if (rv != 0) fail_msg("'%s': %d %s", good[i].s, rv, why ? why : "");
    if (v != good[i].want) fail_msg("'%s': %llu", good[i].s, (unsigned long long)v);
  }
}

static void duration_takes_every_spelling(void **state) {
  (void)state;
  static const good_t good[] = {
      {"500ms", 500},       {"10s", 10000},        {"1.5s", 1500},
      {".5s", 500},         {"5.s", 5000},         {"2m", 120000},
      {"2min", 120000},     {"1h", 3600000},       {"1d", 86400000},
      {"1m30s", 90000},     {"1h1m1s1ms", 3661001}, {"1.5m30s", 120000},
      {"10S", 10000},       {"1MS", 1},            {"1M", 60000},
      {"0", 0},             {"0ms", 0},            {"0.000s", 0},
      {"0.001s", 1},        {"1.25", 1250},        {"007s", 7000},
      {"1.000000000000000000000s", 1000},
      {"18446744073709551615ms", UINT64_MAX},
  };
  expect_good(tg_units_parse_duration, good, sizeof(good) / sizeof(good[0]),
              1000);
}

static void duration_bare_number_is_the_callers_unit(void **state) {
  (void)state;
  uint64_t ms = 7;
  assert_int_equal(tg_units_parse_duration("90", 1000, &ms, NULL), 0);
  assert_int_equal(ms, 90000);
  assert_int_equal(tg_units_parse_duration("90", 1, &ms, NULL), 0);
  assert_int_equal(ms, 90);
  /* No bare unit (config keys): zero only. */
  const char *why = NULL;
  ms = 7;
  assert_int_equal(tg_units_parse_duration("90", 0, &ms, &why), -EINVAL);
  assert_non_null(why);
  assert_int_equal(ms, 7);
  assert_int_equal(tg_units_parse_duration("0", 0, &ms, NULL), 0);
  assert_int_equal(ms, 0);
  /* Never as one term among several: "1m30" is 1m30s or 1m30ms? */
  assert_int_equal(tg_units_parse_duration("1m30", 1000, &ms, NULL), -EINVAL);
  /* A bare fraction finer than the bare unit's millisecond. */
  assert_int_equal(tg_units_parse_duration("1.5", 1, &ms, NULL), -EINVAL);
}

static void duration_refuses_junk(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",       " 1s",    "1s ",    "1 s",   "-1s",    "+1s",   "1",
      "s",      ".",      ".s",     "1.2.3s", "1e3s",  "0x10s", "1w",
      "1sec",   "1mss",   "1s,2s",  "1s-",   "inf",    "nan",   "1.0005s",
      "0.0001ms", "1.0000000000000000001s", "1s\n", "\xd9\xa3s", "1µs",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint64_t ms = 42;
    const char *why = NULL;
    /* bare 0: "1" alone is refused too. */
    int rv = tg_units_parse_duration(bad[i], 0, &ms, &why);
    if (rv != -EINVAL) fail_msg("'%s': %d", bad[i], rv);
    if (!why || !*why) fail_msg("'%s': no reason", bad[i]);
    assert_int_equal(ms, 42);
  }
}

static void duration_refuses_overflow(void **state) {
  (void)state;
  static const char *const big[] = {
      "18446744073709551616ms", "18446744073709552s", "213503982335d",
      "18446744073709551615ms1ms", "99999999999999999999999d",
      "213503982334d1d",
  };
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
    uint64_t ms = 42;
    const char *why = NULL;
    int rv = tg_units_parse_duration(big[i], 1000, &ms, &why);
    if (rv != -ERANGE) fail_msg("'%s': %d", big[i], rv);
    assert_non_null(why);
    assert_int_equal(ms, 42);
  }
  /* Bare numbers multiply too. */
  uint64_t ms;
  assert_int_equal(tg_units_parse_duration("18446744073709552", 1000, &ms, NULL),
                   -ERANGE);
}

static void size_takes_every_spelling(void **state) {
  (void)state;
  static const good_t good[] = {
      {"4096", 4096},       {"64k", 65536},       {"64K", 65536},
      {"64kb", 65536},      {"64KB", 65536},      {"64KiB", 65536},
      {"64kib", 65536},     {"64M", 64ull << 20}, {"64mb", 64ull << 20},
      {"2G", 2ull << 30},   {"2GiB", 2ull << 30}, {"3T", 3ull << 40},
      {"3tb", 3ull << 40},  {"1.5k", 1536},       {"1.5G", 3ull << 29},
      {"0.5K", 512},        {"7b", 7},            {"7B", 7},
      {"0", 0},             {"0k", 0},
      {"16777215T", 16777215ull << 40},
      {"18446744073709551615", UINT64_MAX},
  };
  expect_good(tg_units_parse_size, good, sizeof(good) / sizeof(good[0]), 1);
  /* A bare number in KiB (the relay's *-kb flags). */
  uint64_t b;
  assert_int_equal(tg_units_parse_size("64", 1024, &b, NULL), 0);
  assert_int_equal(b, 65536);
}

static void size_refuses_junk_and_overflow(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",     " 1k",  "1k ",  "-1k",  "+1",   "k",    "1kk",  "1k1k",
      "1x",   "1kbb", "1ki",  "1p",   "1.1k", "0.3k", "1.5",  "1e3",
      "0x10", "1 k",  ".",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint64_t b = 42;
    const char *why = NULL;
    int rv = tg_units_parse_size(bad[i], 1, &b, &why);
    if (rv != -EINVAL) fail_msg("'%s': %d", bad[i], rv);
    if (!why || !*why) fail_msg("'%s': no reason", bad[i]);
    assert_int_equal(b, 42);
  }
  static const char *const big[] = {"16777216T", "18446744073709551616",
                                    "17179869184G", "99999999999999999999999k"};
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
    uint64_t b = 42;
    int rv = tg_units_parse_size(big[i], 1, &b, NULL);
    if (rv != -ERANGE) fail_msg("'%s': %d", big[i], rv);
    assert_int_equal(b, 42);
  }
  /* A number alone where the caller has no unit for it. */
  uint64_t b = 42;
  assert_int_equal(tg_units_parse_size("64", 0, &b, NULL), -EINVAL);
  assert_int_equal(tg_units_parse_size("0", 0, &b, NULL), 0);
  assert_int_equal(b, 0);
}

static void format_reads_back(void **state) {
  (void)state;
  char out[TG_UNITS_FORMAT_MAX];
  assert_int_equal(tg_units_format_duration(0, out, sizeof(out)), 2);
  assert_string_equal(out, "0s");
  tg_units_format_duration(90000, out, sizeof(out));
  assert_string_equal(out, "1m30s");
  tg_units_format_duration(1500, out, sizeof(out));
  assert_string_equal(out, "1s500ms");
  tg_units_format_duration(86400000, out, sizeof(out));
  assert_string_equal(out, "1d");
  tg_units_format_size(0, out, sizeof(out));
  assert_string_equal(out, "0");
  tg_units_format_size(64ull << 20, out, sizeof(out));
  assert_string_equal(out, "64M");
  tg_units_format_size(1536, out, sizeof(out));
  assert_string_equal(out, "1536");
  tg_units_format_size(3ull << 19, out, sizeof(out));
  assert_string_equal(out, "1536K");
  tg_units_format_size(1ull << 50, out, sizeof(out));
  assert_string_equal(out, "1024T");
  static const uint64_t vals[] = {0, 1, 999, 1000, 1023, 1024, 60001,
                                  86400000, 123456789012345, UINT64_MAX,
                                  UINT64_MAX - 1, 1ull << 63};
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
    uint64_t v;
    assert_true(tg_units_format_duration(vals[i], out, sizeof(out)) > 0);
    assert_int_equal(tg_units_parse_duration(out, 0, &v, NULL), 0);
    assert_true(v == vals[i]);
    assert_true(tg_units_format_size(vals[i], out, sizeof(out)) > 0);
    assert_int_equal(tg_units_parse_size(out, 1, &v, NULL), 0);
    assert_true(v == vals[i]);
  }
  /* Too small a buffer is said, not silently cut. */
  assert_int_equal(tg_units_format_duration(90000, out, 4), -ENOSPC);
  assert_int_equal(tg_units_format_size(UINT64_MAX, out, 5), -ENOSPC);
  assert_int_equal(tg_units_format_duration(90000, NULL, 0), -ENOSPC);
  assert_int_equal(tg_units_format_size(1024, NULL, 0), -ENOSPC);
  /* Cut where it ran out, still a string. */
  assert_int_equal(tg_units_format_duration(90000, out, 4), -ENOSPC);
  assert_string_equal(out, "1m3");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(duration_takes_every_spelling),
      cmocka_unit_test(duration_bare_number_is_the_callers_unit),
      cmocka_unit_test(duration_refuses_junk),
      cmocka_unit_test(duration_refuses_overflow),
      cmocka_unit_test(size_takes_every_spelling),
      cmocka_unit_test(size_refuses_junk_and_overflow),
      cmocka_unit_test(format_reads_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
