/* The line grammar every config file shares (common/config_text.c): one
 * case per rule, the edge cases where the four files' own readers used to
 * disagree included (docs/architecture.md, "Config files"). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/config_text.h"

static const tg_conf_limits_t kLim = {
    .file_max = 256, .line_max = 16, .lines_max = 8, .what = "a test file"};

/* The lines |text| gives, each as "N:text|", into |out|; the result. */
static int lines_of(const char *text, size_t len, char *out, size_t cap,
                    char *err, size_t errn) {
  tg_conf_t r;
  int rv = tg_conf_begin(&r, text, len, "t.conf", &kLim, err, errn);
  out[0] = 0;
  tg_conf_span_t l;
  while (rv == 0 && (rv = tg_conf_next(&r, &l)) == 1) {
    size_t at = strlen(out);
    snprintf(out + at, cap - at, "%u:%.*s|", r.line, (int)l.n, l.s);
    rv = 0;
  }
  return rv;
}

static void expect_lines(const char *text, const char *want) {
  char got[512], err[128];
  assert_int_equal(lines_of(text, strlen(text), got, sizeof(got), err,
                            sizeof(err)),
                   0);
  assert_string_equal(got, want);
}

static void expect_error(const char *text, size_t len, int rv,
                         const char *want) {
  char got[512], err[128];
  assert_int_equal(lines_of(text, len, got, sizeof(got), err, sizeof(err)),
                   rv);
  assert_string_equal(err, want);
}

static void config_text_skips_blanks_and_comments(void **state) {
  (void)state;
  expect_lines("# head\n\n  \t\na = 1\n   # indented\nb=2 # tail\n",
               "4:a = 1|6:b=2|");
  expect_lines("", "");
  expect_lines("last", "1:last|");
}

static void config_text_hash_is_data_unless_after_a_blank(void **state) {
  (void)state;
  /* A password in a URI, a label: the '#' is the value's. */
  expect_lines("u = a#b\nv=#c\nw = x\t#y\n#z\n", "1:u = a#b|2:v=#c|3:w = x|");
}

static void config_text_crlf_bom_and_cr_as_blank(void **state) {
  (void)state;
  expect_lines("\xef\xbb\xbf" "a = 1\r\nb = 2\r\n", "1:a = 1|2:b = 2|");
  /* A CR anywhere is a blank: it ends a word, it is trimmed. */
  expect_lines("\ra\rb \r\n", "1:a\rb|");
  /* A BOM only at the very start. */
  expect_lines("a\n\xef\xbb\xbf" "b\n", "1:a|2:\xef\xbb\xbf" "b|");
}

static void config_text_limits_name_the_line(void **state) {
  (void)state;
  /* line_max counts the bytes without "\n" or "\r\n". */
  expect_lines("0123456789abcdef\r\n", "1:0123456789abcdef|");
  expect_error("ok\n0123456789abcdefg\n", 20, -EINVAL,
               "t.conf:2: line longer than 16 bytes");
  expect_error("a\nb\0c\n", 6, -EINVAL,
               "t.conf:2: a NUL byte (is this a test file?)");
  /* Even in a comment: a NUL says the file is not text. */
  expect_error("a # \0\n", 6, -EINVAL,
               "t.conf:1: a NUL byte (is this a test file?)");
  expect_lines("1\n2\n3\n4\n5\n6\n7\n8\n", "1:1|2:2|3:3|4:4|5:5|6:6|7:7|8:8|");
  expect_error("1\n2\n3\n4\n5\n6\n7\n8\n\n", 17, -EINVAL,
               "t.conf:9: more than 8 lines");
  char big[257];
  memset(big, '\n', sizeof(big));
  expect_error(big, sizeof(big), -EFBIG, "t.conf: larger than 256 bytes");
}

static void config_text_splits_key_and_value(void **state) {
  (void)state;
  static const char text[] = "key \t=  a = b ";
  char err[128];
  tg_conf_t r;
  assert_int_equal(tg_conf_begin(&r, text, sizeof(text) - 1, "t.conf", &kLim,
                                 err, sizeof(err)),
                   0);
  tg_conf_span_t l, k, v;
  assert_int_equal(tg_conf_next(&r, &l), 1);
  assert_int_equal(tg_conf_key_value(&r, l, &k, &v), 0);
  assert_true(tg_conf_is(k, "key"));
  assert_true(tg_conf_is(v, "a = b"));
  tg_conf_span_t empty = {"k =", 3};
  assert_int_equal(tg_conf_key_value(&r, empty, &k, &v), 0);
  assert_int_equal(v.n, 0);
  static const char words[] = "just \x1b[31mwords";
  tg_conf_span_t none = {words, sizeof(words) - 1};
  assert_int_equal(tg_conf_key_value(&r, none, &k, &v), -EINVAL);
  assert_string_equal(err, "t.conf:1: expected key = value, not "
                           "'just ?[31mwords'");
  tg_conf_span_t nokey = {"= v", 3};
  assert_int_equal(tg_conf_key_value(&r, nokey, &k, &v), -EINVAL);
  assert_string_equal(err, "t.conf:1: expected key = value, not '= ...'");
}

static void config_text_words_split_at_blanks(void **state) {
  (void)state;
  tg_conf_span_t rest = {" a\tbb \rccc ", 11}, w;
  assert_true(tg_conf_word(&rest, &w));
  assert_true(tg_conf_is(w, "a"));
  assert_true(tg_conf_word(&rest, &w));
  assert_true(tg_conf_is(w, "bb"));
  assert_true(tg_conf_word(&rest, &w));
  assert_true(tg_conf_is(w, "ccc"));
  assert_false(tg_conf_word(&rest, &w));
  assert_int_equal(rest.n, 0);
}

static void config_text_without_label_gives_why_alone(void **state) {
  (void)state;
  char err[64];
  tg_conf_t r;
  assert_int_equal(tg_conf_begin(&r, "a\0", 2, NULL, &kLim, err, sizeof(err)),
                   0);
  tg_conf_span_t l;
  assert_int_equal(tg_conf_next(&r, &l), -EINVAL);
  assert_int_equal(r.line, 1);
  assert_string_equal(err, "a NUL byte (is this a test file?)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_text_skips_blanks_and_comments),
      cmocka_unit_test(config_text_hash_is_data_unless_after_a_blank),
      cmocka_unit_test(config_text_crlf_bom_and_cr_as_blank),
      cmocka_unit_test(config_text_limits_name_the_line),
      cmocka_unit_test(config_text_splits_key_and_value),
      cmocka_unit_test(config_text_words_split_at_blanks),
      cmocka_unit_test(config_text_without_label_gives_why_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
