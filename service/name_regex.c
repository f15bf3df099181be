/* Producer name patterns: the limits checked before regcomp(); see
 * name_regex.h. */
#include "service/name_regex.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* One level of parentheses (the pattern itself is level 0). */
typedef struct level {
  long sum;      /* cost so far at this level, all branches */
  long raw;      /* its positions, each counted once */
  long last;     /* cost of the last atom; -1: none to repeat */
  long last_raw; /* its positions */
  int last_h;    /* star height of the last atom: repetitions nested in it */
  int max_h;     /* the most of any atom at this level */
  bool repeated; /* the last token was a repetition operator */
  /* Whether what is read can match nothing: the atoms of the current
   * branch before the last, the last, and any branch before it. */
  bool rest_null, last_null, alt_null;
} level_t;

#define LEVEL_INIT {.last = -1, .rest_null = true, .last_null = true}

static long refuse(char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static long refuse(char *why, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
  return -E2BIG;
}

static void atom(level_t *l, long cost, long positions, int height,
                 bool nullable) {
  l->rest_null = l->rest_null && l->last_null;
  l->last_null = nullable;
  l->sum += cost;
  l->raw += positions;
  l->last = cost;
  l->last_raw = positions;
  l->last_h = height;
  if (height > l->max_h) l->max_h = height;
  l->repeated = false;
}

/* The last atom, repeated to make |copies| of it at most: under a
 * repetition its positions cost TG_NAME_REGEX_LOOSE each (regexec() keeps
 * them all live at once, where it walks literal characters one by one),
 * unless |exact| ({m}: plain copies). */
static void loosen(level_t *l, long copies, bool exact) {
  long positions = l->last_raw * copies;
  long cost = exact ? l->last * copies : positions * TG_NAME_REGEX_LOOSE;
  l->sum += cost - l->last;
  l->raw += positions - l->last_raw;
  l->last = cost;
  l->last_raw = positions;
}

static long over(char *why, size_t n) {
  return refuse(why, n, "costs more than %d: a position counts 1, %d under "
                "a repetition, and a bound makes copies (list exact names "
                "in producer_name_filter instead)", TG_NAME_REGEX_MAX_POSITIONS,
                TG_NAME_REGEX_LOOSE);
}

/* Marks the last atom repeated; refuses a repetition right after another
 * ("a*+", "()++": glibc nests one in the other, at exponential cost when
 * what they repeat can be empty). */
static long repeat(level_t *l, const char *pat, const char *p, char *why,
                   size_t n) {
  if (l->repeated)
    return refuse(why, n, "'%c' at byte %zu repeats a repetition (as in "
                  "a*+)", *p, (size_t)(p - pat));
  /* regcomp()'s epsilon closures grow exponentially with runs of these. */
  if (l->last_null)
    return refuse(why, n, "'%c' at byte %zu repeats something that can "
                  "match nothing (as in (a*)*)", *p, (size_t)(p - pat));
  if (l->last_h + 1 > TG_NAME_REGEX_MAX_HEIGHT)
    return refuse(why, n, "the '%c' at byte %zu nests repetitions %d deep "
                  "(as in ((a*)*)*), at most %d", *p, (size_t)(p - pat),
                  l->last_h + 1, TG_NAME_REGEX_MAX_HEIGHT);
  l->last_h++;
  if (l->last_h > l->max_h) l->max_h = l->last_h;
  l->repeated = true;
  return 0;
}

/* Where the bracket expression starting at |p| ('[') ends: just past its
 * ']', or at the NUL if it has none (regcomp refuses that). */
static const char *bracket_end(const char *p) {
  p++;
  if (*p == '^') p++;
  if (*p == ']') p++; /* a leading ']' is a member */
  while (*p && *p != ']') {
    if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
      char close[3] = {p[1], ']', 0};
      const char *e = strstr(p + 2, close);
      if (!e) return p + strlen(p);
      p = e + 2;
    } else {
      p++;
    }
  }
  return *p ? p + 1 : p;
}

/* Reads "{m}", "{m,}" or "{m,n}" at |p| (digits only). Returns where it
 * ends, or NULL; *max is n, m for "{m}", or -1 for "{m,}". */
static const char *read_bound(const char *p, long *min, long *max) {
  long m = 0, x;
  const char *q = p + 1;
  if (*q < '0' || *q > '9') return NULL;
  for (; *q >= '0' && *q <= '9'; q++)
    if ((m = m * 10 + (*q - '0')) > 100000) return NULL;
  x = m;
  if (*q == ',') {
    q++;
    x = -1;
    if (*q >= '0' && *q <= '9')
      for (x = 0; *q >= '0' && *q <= '9'; q++)
        if ((x = x * 10 + (*q - '0')) > 100000) return NULL;
  }
  if (*q != '}') return NULL;
  *min = m;
  *max = x;
  return q + 1;
}

long tg_name_regex_check(const char *pat, char *why, size_t n) {
  size_t len = strnlen(pat, TG_NAME_REGEX_MAX_LEN + 1);
  if (len > TG_NAME_REGEX_MAX_LEN)
    return refuse(why, n, "longer than %d bytes", TG_NAME_REGEX_MAX_LEN);
  level_t lv[TG_NAME_REGEX_MAX_DEPTH + 1];
  int d = 0;
  lv[0] = (level_t)LEVEL_INIT;
  for (const char *p = pat; *p;) {
    level_t *l = &lv[d];
    switch (*p) {
      case '(':
        if (d == TG_NAME_REGEX_MAX_DEPTH)
          return refuse(why, n, "more than %d levels of parentheses",
                        TG_NAME_REGEX_MAX_DEPTH);
        lv[++d] = (level_t)LEVEL_INIT;
        p++;
        break;
      case ')':
        if (d == 0) {
          /* Not only malformed: tracegated compiles "^(PAT)$", where it
           * would close that group ("a)|(b" would match "abc"). */
          return refuse(why, n, "the ')' at byte %zu closes no '('",
                        (size_t)(p - pat));
        } else {
          /* The group is the atom a repetition after it applies to. */
          level_t in = lv[d--];
          atom(&lv[d], in.sum, in.raw, in.max_h,
               in.alt_null || (in.rest_null && in.last_null));
        }
        p++;
        break;
      case '|':
        l->alt_null |= l->rest_null && l->last_null;
        l->rest_null = l->last_null = true;
        /* fall through */
      case '^':
      case '$':
        l->last = -1;
        l->repeated = false;
        p++;
        break;
      case '*':
      case '?':
      case '+':
        /* What glibc would make of one with nothing before it is not
         * counted here: refused. */
        if (l->last < 0)
          return refuse(why, n, "the '%c' at byte %zu repeats nothing", *p,
                        (size_t)(p - pat));
        /* glibc compiles X+ as X X*: a copy, as a bound makes; '*' and
         * '?' copy nothing, and any nesting of them is cheap. */
        if (*p == '+' && l->last_h > 0 && !l->repeated)
          return refuse(why, n, "the '+' at byte %zu repeats something "
                        "that holds a repetition (as in (a+)+, whose "
                        "copies double at each level); use '*' there",
                        (size_t)(p - pat));
        if (repeat(l, pat, p, why, n) < 0) return -E2BIG;
        if (*p != '+') l->last_null = true;
        loosen(l, *p == '+' ? 2 : 1, false);
        if (l->sum > TG_NAME_REGEX_MAX_POSITIONS) return over(why, n);
        p++;
        break;
      case '{': {
        long min, max;
        const char *end = read_bound(p, &min, &max);
        if (!end)
          return refuse(why, n, "'{' at byte %zu does not start a bound "
                        "{m}, {m,} or {m,n} (a literal brace is \\{)",
                        (size_t)(p - pat));
        if (l->last < 0)
          return refuse(why, n, "the bound at byte %zu repeats nothing",
                        (size_t)(p - pat));
        if (l->last_h > 0 && !l->repeated)
          return refuse(why, n, "the bound at byte %zu repeats something "
                        "that holds a repetition (as in (a*){2}); bound "
                        "only a character, a bracket expression or a "
                        "group without repetition", (size_t)(p - pat));
        if (repeat(l, pat, p, why, n) < 0) return -E2BIG;
        if (min > TG_NAME_REGEX_MAX_BOUND || max > TG_NAME_REGEX_MAX_BOUND)
          return refuse(why, n, "the bound at byte %zu is over %d",
                        (size_t)(p - pat), TG_NAME_REGEX_MAX_BOUND);
        /* The most copies it makes ("{m,}": m, and the rest as one more
         * starred copy); "{2,1}" is regcomp's to refuse. */
        long mult = max < 0 ? min + 1 : max > min ? max : min;
        if (min == 0) l->last_null = true;
        loosen(l, mult, max == min);
        if (l->sum > TG_NAME_REGEX_MAX_POSITIONS) return over(why, n);
        p = end;
        break;
      }
      case '\\':
        if (p[1] >= '1' && p[1] <= '9')
          return refuse(why, n, "back-reference \\%c at byte %zu (their "
                        "matching takes exponential time)", p[1],
                        (size_t)(p - pat));
        atom(l, 1, 1, 0, false);
        p += p[1] ? 2 : 1;
        break;
      case '[':
        atom(l, 1, 1, 0, false);
        p = bracket_end(p);
        break;
      default:
        atom(l, 1, 1, 0, false);
        p++;
        break;
    }
  }
  if (d > 0)
    return refuse(why, n, "%d '(' without their ')'", d);
  long total = lv[0].sum;
  if (total > TG_NAME_REGEX_MAX_POSITIONS) return over(why, n);
  return total > 0 ? total : 1;
}
