/* Line and number scanning for /proc text; see text.h. */
#include "agent/sys/text.h"

#include <errno.h>
#include <string.h>

#include "tracegate/error.h"

bool tg__text_next_line(tg__text_t *t, const char **line, size_t *len) {
  if (t->p >= t->end) return false;
  const char *nl = memchr(t->p, '\n', (size_t)(t->end - t->p));
  const char *stop = nl ? nl : t->end;
  *line = t->p;
  *len = (size_t)(stop - t->p);
  t->p = nl ? nl + 1 : t->end;
  return true;
}

void tg__skip_blanks(const char **p, const char *end) {
  const char *q = *p;
  while (q < end && (*q == ' ' || *q == '\t')) q++;
  *p = q;
}

int tg__parse_u64(const char **p, const char *end, uint64_t *out) {
  const char *q = *p;
  tg__skip_blanks(&q, end);
  if (q >= end || *q < '0' || *q > '9') return TG_EPARSE;
  uint64_t v = 0;
  while (q < end && *q >= '0' && *q <= '9') {
    unsigned d = (unsigned)(*q - '0');
    if (v > (UINT64_MAX - d) / 10) return TG_EPARSE;
    v = v * 10 + d;
    q++;
  }
  *out = v;
  *p = q;
  return 0;
}

int tg__parse_i64(const char **p, const char *end, int64_t *out) {
  const char *q = *p;
  tg__skip_blanks(&q, end);
  bool neg = q < end && *q == '-';
  if (neg) q++;
  uint64_t u;
  if (q >= end || *q < '0' || *q > '9') return TG_EPARSE;
  if (tg__parse_u64(&q, end, &u) < 0) return TG_EPARSE;
  if (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX)
    return TG_EPARSE;
  *out = neg ? (int64_t)(0 - u) : (int64_t)u;
  *p = q;
  return 0;
}

bool tg__next_word(const char **p, const char *end, const char **w,
                   size_t *n) {
  const char *q = *p;
  tg__skip_blanks(&q, end);
  if (q >= end) return false;
  const char *s = q;
  while (q < end && *q != ' ' && *q != '\t') q++;
  *w = s;
  *n = (size_t)(q - s);
  *p = q;
  return true;
}

bool tg__only_blanks(const char *p, const char *end) {
  tg__skip_blanks(&p, end);
  return p >= end;
}

int tg__text_next_field(tg__text_t *t, tg__text_field_t *f) {
  const char *line;
  size_t n;
  do {
    if (!tg__text_next_line(t, &line, &n)) return 0;
  } while (tg__only_blanks(line, line + n));
  const char *colon = memchr(line, ':', n);
  if (!colon || colon == line) return TG_EPARSE;
  f->key = line;
  f->key_len = (size_t)(colon - line);
  f->value = colon + 1;
  f->end = line + n;
  return 1;
}

int tg__parse_kb(const char *p, const char *end, uint64_t *out,
                 bool *has_unit) {
  if (tg__parse_u64(&p, end, out) < 0) return TG_EPARSE;
  const char *unit;
  size_t un;
  *has_unit = tg__next_word(&p, end, &unit, &un);
  if (*has_unit && (!tg__word_is(unit, un, "kB") || !tg__only_blanks(p, end)))
    return TG_EPARSE;
  return 0;
}

void tg__lines_init(tg__lines_t *l, size_t cap) {
  l->cap = cap < TG__LINE_MAX ? cap : TG__LINE_MAX;
  l->len = 0;
}

/* A line too long for the cap goes over as its length alone. */
static int hand_over(const tg__lines_t *l, const char *s, size_t n,
                     tg__line_cb on_line, void *ctx) {
  if (n > l->cap) return on_line(ctx, -ENOBUFS, NULL, n);
  return on_line(ctx, 0, s, n);
}

/* The pending line, which nothing may extend any more. */
static int flush(tg__lines_t *l, tg__line_cb on_line, void *ctx) {
  size_t n = l->len;
  l->len = 0;
  return hand_over(l, l->buf, n, on_line, ctx);
}

int tg__lines_feed(tg__lines_t *l, const char *text, size_t len,
                   tg__line_cb on_line, void *ctx) {
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = (size_t)((nl ? nl : end) - p);
    int rv;
    if (nl && l->len == 0) {
      rv = hand_over(l, p, n, on_line, ctx);
    } else {
      /* Past the cap only the length is kept: the line is skipped. */
      if (l->len + n <= l->cap) memcpy(l->buf + l->len, p, n);
      l->len += n;
      if (!nl) break;
      rv = flush(l, on_line, ctx);
    }
    if (rv < 0) return rv;
    p = nl + 1;
  }
  return 0;
}

int tg__lines_finish(tg__lines_t *l, tg__line_cb on_line, void *ctx) {
  return l->len ? flush(l, on_line, ctx) : 0;
}
