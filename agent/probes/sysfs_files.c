/* Parsers of single-value /sys files; see sysfs_files.h. */
#include "agent/probes/sysfs_files.h"

#include <string.h>

#include "agent/sys/text.h"
#include "tracegate/error.h"

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* [*p, *end) without the whitespace around it. */
static void trim(const char **p, const char **end) {
  while (*p < *end && is_space(**p)) (*p)++;
  while (*end > *p && is_space((*end)[-1])) (*end)--;
}

int tg_sysfs_u64_parse(const char *text, size_t len, uint64_t *out) {
  const char *p = text, *end = text + len;
  trim(&p, &end);
  uint64_t v;
  if (p == end || tg__parse_u64(&p, end, &v) < 0 || p != end) return TG_EPARSE;
  *out = v;
  return 0;
}

int tg_sysfs_i64_parse(const char *text, size_t len, int64_t *out) {
  const char *p = text, *end = text + len;
  trim(&p, &end);
  int64_t v;
  if (p == end || tg__parse_i64(&p, end, &v) < 0 || p != end) return TG_EPARSE;
  *out = v;
  return 0;
}

int tg_sysfs_name_parse(const char *text, size_t len, char *out, size_t cap) {
  out[0] = '\0';
  const char *p = text, *end = text + len;
  trim(&p, &end);
  if (p == end) return TG_EPARSE;
  for (const char *q = p; q < end; q++)
    if (*q < 0x20 || *q > 0x7e) return TG_EPARSE; /* also an inner '\n' */
  size_t n = (size_t)(end - p);
  if (n >= cap) n = cap - 1;
  memcpy(out, p, n);
  out[n] = '\0';
  return 0;
}

/* The frequency of "<n>Mhz" (any case of "mhz"), or false. */
static bool mhz_word(const char *w, size_t n, uint64_t *mhz) {
  if (n <= 3) return false;
  const char *unit = w + n - 3;
  if ((unit[0] | 0x20) != 'm' || (unit[1] | 0x20) != 'h' ||
      (unit[2] | 0x20) != 'z')
    return false;
  const char *q = w;
  return tg__parse_u64(&q, unit, mhz) == 0 && q == unit;
}

int tg_amdgpu_sclk_parse(const char *text, size_t len, uint64_t *mhz) {
  tg__text_t t;
  tg__text_init(&t, text, len);
  const char *line;
  size_t n;
  while (tg__text_next_line(&t, &line, &n)) {
    const char *p = line, *end = line + n;
    trim(&p, &end);
    if (p == end || end[-1] != '*') continue;
    const char *w;
    size_t wn;
    while (tg__next_word(&p, end, &w, &wn))
      if (mhz_word(w, wn, mhz)) return 0;
    return TG_EPARSE;
  }
  return TG_EPARSE;
}
