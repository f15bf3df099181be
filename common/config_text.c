/* The line grammar of config files (config_text.h). Works on a length:
 * the text need not be NUL-terminated, and nothing past |len| is read. */
#include "common/config_text.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char kBom[] = "\xef\xbb\xbf";

bool tg_conf_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

int tg_conf_vfail(const tg_conf_t *r, unsigned line, int rv, const char *fmt,
                  va_list ap) {
  if (r->errn == 0) return rv;
  int w = 0;
  if (r->label)
    w = line ? snprintf(r->err, r->errn, "%s:%u: ", r->label, line)
             : snprintf(r->err, r->errn, "%s: ", r->label);
  if (w < 0 || (size_t)w >= r->errn) return rv;
  vsnprintf(r->err + w, r->errn - (size_t)w, fmt, ap);
  return rv;
}

int tg_conf_fail(const tg_conf_t *r, unsigned line, int rv, const char *fmt,
                 ...) {
  va_list ap;
  va_start(ap, fmt);
  tg_conf_vfail(r, line, rv, fmt, ap);
  va_end(ap);
  return rv;
}

int tg_conf_begin(tg_conf_t *r, const char *text_untrusted, size_t len,
                  const char *label, const tg_conf_limits_t *lim, char *err,
                  size_t errn) {
  *r = (tg_conf_t){.text = text_untrusted,
                   .len = len,
                   .label = label,
                   .lim = lim,
                   .err = err,
                   .errn = errn};
  if (errn) err[0] = 0;
  if (len > lim->file_max)
    return tg_conf_fail(r, 0, -EFBIG, "larger than %zu bytes", lim->file_max);
  if (len >= 3 && !memcmp(text_untrusted, kBom, 3)) r->off = 3;
  return 0;
}

/* |span| without the blanks around it. */
static tg_conf_span_t trim(tg_conf_span_t span) {
  while (span.n && tg_conf_blank(span.s[0])) span.s++, span.n--;
  while (span.n && tg_conf_blank(span.s[span.n - 1])) span.n--;
  return span;
}

/* |span| without its comment, trimmed. */
static tg_conf_span_t content(tg_conf_span_t span) {
  for (size_t i = 0; i < span.n; i++)
    if (span.s[i] == '#' && (i == 0 || tg_conf_blank(span.s[i - 1]))) {
      span.n = i;
      break;
    }
  return trim(span);
}

int tg_conf_next(tg_conf_t *r, tg_conf_span_t *out) {
  while (r->off < r->len) {
    if (r->line >= r->lim->lines_max) {
      r->line++;
      return tg_conf_fail(r, r->line, -EINVAL, "more than %zu lines",
                          r->lim->lines_max);
    }
    r->line++;
    const char *s = r->text + r->off;
    const char *nl = memchr(s, '\n', r->len - r->off);
    size_t n = nl ? (size_t)(nl - s) : r->len - r->off;
    r->off += n + (nl ? 1 : 0);
    if (n && s[n - 1] == '\r') n--;
    if (n > r->lim->line_max)
      return tg_conf_fail(r, r->line, -EINVAL, "line longer than %zu bytes",
                          r->lim->line_max);
    if (memchr(s, 0, n))
      return tg_conf_fail(r, r->line, -EINVAL, "a NUL byte (is this %s?)",
                          r->lim->what);
    *out = content((tg_conf_span_t){s, n});
    if (out->n) return 1;
  }
  return 0;
}

void tg_conf_echo(char out[TG_CONF_ECHO_MAX + 1], const char *s, size_t n) {
  if (n > TG_CONF_ECHO_MAX) n = TG_CONF_ECHO_MAX;
  for (size_t i = 0; i < n; i++)
    out[i] = s[i] >= ' ' && s[i] < 0x7f ? s[i] : '?';
  out[n] = 0;
}

int tg_conf_key_value(tg_conf_t *r, tg_conf_span_t line, tg_conf_span_t *key,
                      tg_conf_span_t *value) {
  const char *eq = memchr(line.s, '=', line.n);
  if (!eq) {
    char echo[TG_CONF_ECHO_MAX + 1];
    tg_conf_echo(echo, line.s, line.n);
    return tg_conf_fail(r, r->line, -EINVAL,
                        "expected key = value, not '%s'", echo);
  }
  size_t kn = (size_t)(eq - line.s);
  *key = trim((tg_conf_span_t){line.s, kn});
  *value = trim((tg_conf_span_t){eq + 1, line.n - kn - 1});
  if (!key->n)
    return tg_conf_fail(r, r->line, -EINVAL,
                        "expected key = value, not '= ...'");
  return 0;
}

bool tg_conf_word(tg_conf_span_t *rest, tg_conf_span_t *word) {
  size_t i = 0;
  while (i < rest->n && tg_conf_blank(rest->s[i])) i++;
  if (i == rest->n) {
    rest->s += i;
    rest->n = 0;
    return false;
  }
  size_t start = i;
  while (i < rest->n && !tg_conf_blank(rest->s[i])) i++;
  word->s = rest->s + start;
  word->n = i - start;
  rest->s += i;
  rest->n -= i;
  return true;
}

bool tg_conf_is(tg_conf_span_t span, const char *s) {
  return strlen(s) == span.n && !memcmp(span.s, s, span.n);
}
