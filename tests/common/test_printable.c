/* common/printable.c: untrusted text copied for a terminal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/printable.h"

static void printable_keeps_plain_text(void **state) {
  (void)state;
  char out[64];
  assert_int_equal(tg_printable(out, sizeof(out), "host-1: ok (42%)"), 16);
  assert_string_equal(out, "host-1: ok (42%)");
}

static void printable_null_and_empty_give_empty(void **state) {
  (void)state;
  char out[8] = "junk";
  assert_int_equal(tg_printable(out, sizeof(out), NULL), 0);
  assert_string_equal(out, "");
  memcpy(out, "junk", 5);
  assert_int_equal(tg_printable(out, sizeof(out), ""), 0);
  assert_string_equal(out, "");
}

static void printable_escapes_terminal_sequences(void **state) {
  (void)state;
  char out[128];
  /* Clear screen, retitle the window, carriage return, bell, DEL. */
  tg_printable(out, sizeof(out), "a\033[2Jb\033]0;pwned\007c\rd\x7f");
  assert_string_equal(out, "a\\x1b[2Jb\\x1b]0;pwned\\x07c\\x0dd\\x7f");
  assert_null(strchr(out, '\033'));
  tg_printable(out, sizeof(out), "line1\nline2\t.");
  assert_string_equal(out, "line1\\x0aline2\\x09.");
}

static void printable_keeps_utf8_text(void **state) {
  (void)state;
  char out[64];
  const char *s = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"; /* café € 😀 */
  assert_int_equal(tg_printable(out, sizeof(out), s), strlen(s));
  assert_string_equal(out, s);
}

static void printable_escapes_c1_bidi_and_malformed_utf8(void **state) {
  (void)state;
  char out[128];
  /* U+009B (CSI as a C1 control, well-formed UTF-8). */
  tg_printable(out, sizeof(out), "x\xc2\x9by");
  assert_string_equal(out, "x\\xc2\\x9by");
  /* A lone 0x9b byte: 8-bit CSI to some terminals. */
  tg_printable(out, sizeof(out), "x\x9by");
  assert_string_equal(out, "x\\x9by");
  /* U+202E RIGHT-TO-LEFT OVERRIDE reorders what follows. */
  tg_printable(out, sizeof(out), "a\xe2\x80\xae" "b");
  assert_string_equal(out, "a\\xe2\\x80\\xaeb");
  /* Overlong '/', a surrogate, past U+10FFFF, a truncated sequence. */
  tg_printable(out, sizeof(out), "\xc0\xaf");
  assert_string_equal(out, "\\xc0\\xaf");
  tg_printable(out, sizeof(out), "\xed\xa0\x80");
  assert_string_equal(out, "\\xed\\xa0\\x80");
  tg_printable(out, sizeof(out), "\xf4\x90\x80\x80");
  assert_string_equal(out, "\\xf4\\x90\\x80\\x80");
  tg_printable(out, sizeof(out), "\xe2\x82");
  assert_string_equal(out, "\\xe2\\x82");
}

static void printable_truncates_without_cutting_a_unit(void **state) {
  (void)state;
  char out[6];
  /* "abc" fits, the 4-byte escape of ESC does not: cut before it. */
  assert_int_equal(tg_printable(out, sizeof(out), "abc\033d"), 3);
  assert_string_equal(out, "abc");
  /* Neither is a multi-byte character cut in half. */
  assert_int_equal(tg_printable(out, sizeof(out), "abcd\xc3\xa9"), 4);
  assert_string_equal(out, "abcd");
  assert_int_equal(tg_printable(out, sizeof(out), "abcdefgh"), 5);
  assert_string_equal(out, "abcde");
  char one[1] = {'x'};
  assert_int_equal(tg_printable(one, sizeof(one), "abc"), 0);
  assert_int_equal(one[0], 0);
  /* cap 0 writes nothing. */
  assert_int_equal(tg_printable(one, 0, "abc"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(printable_keeps_plain_text),
      cmocka_unit_test(printable_null_and_empty_give_empty),
      cmocka_unit_test(printable_escapes_terminal_sequences),
      cmocka_unit_test(printable_keeps_utf8_text),
      cmocka_unit_test(printable_escapes_c1_bidi_and_malformed_utf8),
      cmocka_unit_test(printable_truncates_without_cutting_a_unit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
