/* The duration and size grammar of units.h: exact integer arithmetic, no
 * floating point, no strtod() (which takes blanks, signs, hex and "inf"). */
#include "common/units.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Past this many digits after the point, 10^k no longer fits in 64 bits;
 * a nonzero digit there is finer than any unit's smallest step anyway. */
#define MAX_FRACTION_DIGITS 18

typedef struct unit {
  const char *name; /* lower case */
  uint64_t mul;     /* base units (ms or bytes) per unit */
} unit_t;

/* A unit is the whole run of letters after a number, compared exactly
 * (any case), so "m" never matches the start of "ms" or "min". */
static const unit_t DURATION_UNITS[] = {
    {"ms", 1},        {"s", 1000},      {"m", 60000},
    {"min", 60000},   {"h", 3600000},   {"d", 86400000},
};

#define KIB 1024ull
static const unit_t SIZE_UNITS[] = {
    {"b", 1},
    {"k", KIB},       {"kb", KIB},       {"kib", KIB},
    {"m", KIB * KIB}, {"mb", KIB * KIB}, {"mib", KIB * KIB},
    {"g", KIB * KIB * KIB}, {"gb", KIB * KIB * KIB}, {"gib", KIB * KIB * KIB},
    {"t", KIB * KIB * KIB * KIB}, {"tb", KIB * KIB * KIB * KIB},
    {"tib", KIB * KIB * KIB * KIB},
};

typedef struct grammar {
  const unit_t *units;
  size_t n_units;
  bool terms;             /* several terms add up (durations) */
  const char *bad_unit;   /* the phrase for an unknown unit */
  const char *too_fine;   /* the phrase for a fraction of the base unit */
} grammar_t;

static const grammar_t DURATION = {
    DURATION_UNITS, sizeof(DURATION_UNITS) / sizeof(DURATION_UNITS[0]), true,
    "an unknown unit (ms, s, m, h or d)", "finer than a millisecond"};
static const grammar_t SIZE = {
    SIZE_UNITS, sizeof(SIZE_UNITS) / sizeof(SIZE_UNITS[0]), false,
    "an unknown unit (B, K, M, G or T, optionally followed by B or iB)",
    "not a whole number of bytes"};

/* A number read off the input: ip + frac / scale, frac < scale. */
typedef struct number {
  uint64_t ip, frac, scale;
  bool zero_tail_only; /* digits past MAX_FRACTION_DIGITS were all 0 */
} number_t;

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }

static int fail(const char **why, const char *what, int err) {
  if (why) *why = what;
  return err;
}

/* Digits, then optionally '.' and digits; at least one digit in all. */
static int read_number(const char **pp, number_t *n, const char **why) {
  const char *p = *pp;
  bool any = false;
  *n = (number_t){0, 0, 1, true};
  for (; is_digit(*p); p++, any = true) {
    uint64_t d = (uint64_t)(*p - '0');
    if (n->ip > (UINT64_MAX - d) / 10) return fail(why, "too large", -ERANGE);
    n->ip = n->ip * 10 + d;
  }
  if (*p == '.') {
    p++;
    for (unsigned k = 0; is_digit(*p); p++, k++, any = true) {
      if (k < MAX_FRACTION_DIGITS) {
        n->frac = n->frac * 10 + (uint64_t)(*p - '0');
        n->scale *= 10;
      } else if (*p != '0') {
        n->zero_tail_only = false;
      }
    }
  }
  if (!any) return fail(why, "not a number (digits, then a unit)", -EINVAL);
  *pp = p;
  return 0;
}

static uint64_t gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* n * mul in base units, exactly. */
static int scale_number(const number_t *n, uint64_t mul, const grammar_t *g,
                        uint64_t *out, const char **why) {
  if (!n->zero_tail_only) return fail(why, g->too_fine, -EINVAL);
  uint64_t part = 0;
  if (n->frac) {
    /* frac / scale in lowest terms; its denominator must divide mul. */
    uint64_t c = gcd(n->frac, n->scale), q = n->scale / c;
    if (mul % q) return fail(why, g->too_fine, -EINVAL);
    part = n->frac / c * (mul / q); /* < mul: frac < scale */
  }
  if (mul && n->ip > (UINT64_MAX - part) / mul)
    return fail(why, "too large", -ERANGE);
  *out = n->ip * mul + part;
  return 0;
}

static const unit_t *find_unit(const grammar_t *g, const char *s, size_t len) {
  for (size_t i = 0; i < g->n_units; i++) {
    const char *name = g->units[i].name;
    if (strlen(name) != len) continue;
    size_t k = 0;
    while (k < len && lower(s[k]) == name[k]) k++;
    if (k == len) return &g->units[i];
  }
  return NULL;
}

static int parse(const grammar_t *g, const char *s, uint64_t bare,
                 uint64_t *out, const char **why) {
  if (!s || !*s) return fail(why, "empty", -EINVAL);
  if (*s == '-' || *s == '+')
    return fail(why, "signed (a value here is never negative)", -EINVAL);
  uint64_t total = 0;
  for (const char *p = s; *p;) {
    const char *term = p;
    number_t n;
    int rv = read_number(&p, &n, why);
    if (rv < 0) return rv;
    const char *u = p;
    while (is_letter(*p)) p++;
    uint64_t mul, v;
    if (p == u) {
      /* A number alone: only as the whole value, and zero or in |bare|. */
      bool zero = !n.ip && !n.frac && n.zero_tail_only;
      if (term != s || *p)
        return fail(why, *p ? "not a number then a unit"
                            : "a number without a unit after another term",
                    -EINVAL);
      if (!bare && !zero) return fail(why, "a number without a unit", -EINVAL);
      mul = bare;
    } else {
      const unit_t *unit = find_unit(g, u, (size_t)(p - u));
      if (!unit) return fail(why, g->bad_unit, -EINVAL);
      mul = unit->mul;
      if (*p && (!g->terms || !(is_digit(*p) || *p == '.')))
        return fail(why, "bytes after the unit", -EINVAL);
    }
    rv = scale_number(&n, mul, g, &v, why);
    if (rv < 0) return rv;
    if (v > UINT64_MAX - total) return fail(why, "too large", -ERANGE);
    total += v;
  }
  *out = total;
  return 0;
}

int tg_units_parse_duration(const char *s_untrusted, uint64_t bare_ms,
                            uint64_t *ms, const char **why) {
  return parse(&DURATION, s_untrusted, bare_ms, ms, why);
}

int tg_units_parse_size(const char *s_untrusted, uint64_t bare_bytes,
                        uint64_t *bytes, const char **why) {
  return parse(&SIZE, s_untrusted, bare_bytes, bytes, why);
}

static int finish(int len, size_t n) {
  return len < 0 || (size_t)len >= n ? -ENOSPC : len;
}

int tg_units_format_duration(uint64_t ms, char *out, size_t n) {
  static const unit_t parts[] = {
      {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
  if (!n) return -ENOSPC;
  if (!ms) return finish(snprintf(out, n, "0s"), n);
  size_t len = 0;
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    uint64_t k = ms / parts[i].mul;
    if (!k) continue;
    ms -= k * parts[i].mul;
    /* Past the end, snprintf() only counts: |out| keeps its NUL. */
    int w = snprintf(out + (len < n ? len : n - 1), len < n ? n - len : 0,
                     "%" PRIu64 "%s", k, parts[i].name);
    if (w < 0) return -ENOSPC;
    len += (size_t)w;
  }
  return finish(len > (size_t)INT32_MAX ? -1 : (int)len, n);
}

int tg_units_format_size(uint64_t bytes, char *out, size_t n) {
  static const char names[] = "KMGT";
  int shift = 0;
  while (bytes && shift < 4 && !(bytes & ((KIB << (10 * shift)) - 1))) shift++;
  if (!shift) return finish(snprintf(out, n, "%" PRIu64, bytes), n);
  return finish(snprintf(out, n, "%" PRIu64 "%c", bytes >> (10 * shift),
                         names[shift - 1]),
                n);
}
