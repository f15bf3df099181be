/* Decimal numbers from outside; see decimal.h. */
#include "common/decimal.h"

#include <errno.h>
#include <stddef.h>

/* Digits only, up to UINT64_MAX; *over when it went past that. */
static int digits(const char *s, uint64_t *v, int *over) {
  if (!*s) return -EINVAL;
  uint64_t x = 0;
  *over = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -EINVAL;
    unsigned d = (unsigned)(*s - '0');
    if (x > (UINT64_MAX - d) / 10) *over = 1; /* keep checking the rest */
    else x = x * 10 + d;
  }
  *v = x;
  return 0;
}

int tg_decimal_u64(const char *s_untrusted, uint64_t max, uint64_t *out) {
  uint64_t v;
  int over;
  int rv = digits(s_untrusted, &v, &over);
  if (rv < 0) return rv;
  if (over || v > max) return -ERANGE;
  *out = v;
  return 0;
}

int tg_decimal_i64(const char *s_untrusted, int64_t min, int64_t max,
                   int64_t *out) {
  int neg = s_untrusted[0] == '-';
  uint64_t v;
  int over;
  int rv = digits(s_untrusted + neg, &v, &over);
  if (rv < 0) return rv;
  /* |INT64_MIN| is INT64_MAX + 1: the one magnitude only a '-' allows. */
  if (over || v > (uint64_t)INT64_MAX + (uint64_t)neg) return -ERANGE;
  int64_t x = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v)
                  : (int64_t)v;
  if (x < min || x > max) return -ERANGE;
  *out = x;
  return 0;
}
