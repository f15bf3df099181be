/* Fuzzes the line grammar every config file shares (common/config_text.h):
 * the collector's configuration, the TLS defaults, hosts files and
 * authorization files read their lines through it.
 *
 * Input: [line_max][lines_max][text...]. The first byte picks line_max
 * (0..255), the second lines_max (1..256); file_max is 512, so some
 * inputs are too large. The text is parsed from an exact-size copy (no NUL
 * after it), so reads past the end show up under ASan.
 *
 * Invariants (trap on violation), against a plain reading of the grammar
 * written here again:
 * - the result is 0, -EINVAL or -EFBIG; a failure leaves a NUL-terminated
 *   message that starts "fuzz:LINE: " on the line the reference stops at
 *   ("fuzz: " for -EFBIG);
 * - the lines handed out are exactly the reference's, in order, with
 *   their numbers: inside the text, not empty, no blank at either end, no
 *   NUL, no newline, no comment left;
 * - key = value splits at the first '=' with both sides trimmed, refuses
 *   a line without '=' or without a key on its line, and echoes nothing
 *   but printable ASCII;
 * - the words of a line are its blank-separated runs, in order.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILE_MAX 512

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* The reference reader: where it is in the text, and the number of the
 * line it read last. */
typedef struct ref {
  const char *text;
  size_t len, off;
  unsigned line;
} ref_t;

/* The next non-empty line after the CRLF, comment and trimming rules into
 * |out|. Returns 1, 0 at the end, -1 for the line a limit refuses. */
static int ref_next(ref_t *r, const tg_conf_limits_t *lim, tg_conf_span_t *out) {
  while (r->off < r->len) {
    if (r->line == lim->lines_max) {
      r->line++;
      return -1;
    }
    r->line++;
    const char *s = r->text + r->off;
    size_t n = 0;
    while (r->off + n < r->len && s[n] != '\n') n++;
    r->off += n + (r->off + n < r->len);
    if (n && s[n - 1] == '\r') n--;
    if (n > lim->line_max) return -1;
    for (size_t i = 0; i < n; i++)
      if (s[i] == 0) return -1;
    for (size_t i = 0; i < n; i++)
      if (s[i] == '#' && (i == 0 || blank(s[i - 1]))) {
        n = i;
        break;
      }
    while (n && blank(s[0])) s++, n--;
    while (n && blank(s[n - 1])) n--;
    if (n) {
      *out = (tg_conf_span_t){s, n};
      return 1;
    }
  }
  return 0;
}

static void check_prefix(const char *err, size_t cap, unsigned line) {
  if (!memchr(err, 0, cap)) __builtin_trap();
  char want[32];
  if (line)
    snprintf(want, sizeof(want), "fuzz:%u: ", line);
  else
    snprintf(want, sizeof(want), "fuzz: ");
  if (strncmp(err, want, strlen(want)) != 0) __builtin_trap();
  for (const char *p = err; *p; p++)
    if ((unsigned char)*p < ' ' || (unsigned char)*p >= 0x7f) __builtin_trap();
}

static void check_key_value(tg_conf_t *r, tg_conf_span_t line, char *err,
                            size_t cap) {
  tg_conf_span_t k = {0}, v = {0};
  const char *eq = memchr(line.s, '=', line.n);
  size_t kn = eq ? (size_t)(eq - line.s) : 0;
  while (kn && blank(line.s[kn - 1])) kn--;
  int rv = tg_conf_key_value(r, line, &k, &v);
  if (!eq || kn == 0) {
    if (rv != -EINVAL) __builtin_trap();
    check_prefix(err, cap, r->line);
    return;
  }
  if (rv != 0) __builtin_trap();
  if (k.s != line.s || k.n != kn || memchr(k.s, '=', k.n)) __builtin_trap();
  const char *vs = eq + 1, *end = line.s + line.n;
  while (vs < end && blank(*vs)) vs++;
  if (v.s != vs || v.n != (size_t)(end - vs)) __builtin_trap();
  if (v.n && blank(v.s[v.n - 1])) __builtin_trap();
}

static void check_words(tg_conf_span_t line) {
  tg_conf_span_t rest = line, w;
  size_t at = 0;
  while (tg_conf_word(&rest, &w)) {
    while (at < line.n && blank(line.s[at])) at++;
    size_t e = at;
    while (e < line.n && !blank(line.s[e])) e++;
    if (w.s != line.s + at || w.n != e - at || w.n == 0) __builtin_trap();
    at = e;
  }
  while (at < line.n && blank(line.s[at])) at++;
  if (at != line.n || rest.n != 0) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const tg_conf_limits_t lim = {.file_max = FILE_MAX,
                                .line_max = data[0],
                                .lines_max = (size_t)data[1] + 1,
                                .what = "a fuzz file"};
  size_t len = size - 2;
  char *text = malloc(len ? len : 1);
  if (!text) return 0;
  memcpy(text, data + 2, len);
  char err[160];
  memset(err, 'x', sizeof(err));
  tg_conf_t r;
  int rv = tg_conf_begin(&r, text, len, "fuzz", &lim, err, sizeof(err));
  if (len > FILE_MAX) {
    if (rv != -EFBIG) __builtin_trap();
    check_prefix(err, sizeof(err), 0);
    free(text);
    return 0;
  }
  if (rv != 0) __builtin_trap();
  ref_t ref = {.text = text,
               .len = len,
               .off = len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3) ? 3 : 0};
  for (;;) {
    tg_conf_span_t got, want;
    int g = tg_conf_next(&r, &got);
    int w = ref_next(&ref, &lim, &want);
    if (r.line != ref.line) __builtin_trap();
    if (w < 0) {
      if (g != -EINVAL) __builtin_trap();
      check_prefix(err, sizeof(err), ref.line);
      break;
    }
    if (g != w) __builtin_trap();
    if (g == 0) break;
    if (got.s != want.s || got.n != want.n) __builtin_trap();
    if (got.s < text || got.s + got.n > text + len || memchr(got.s, '\n', got.n))
      __builtin_trap();
    check_words(got);
    check_key_value(&r, got, err, sizeof(err));
  }
  free(text);
  return 0;
}
