/* Bounded scanning of /proc and tracefs text for the probes' parsers.
 *
 * /proc content is read with one read() loop and may end anywhere (a process
 * exits mid-read, a buffer cap is hit), so nothing here assumes a NUL
 * terminator or a final newline: every pointer stays inside [p, end).
 */
#ifndef TRACEGATE_AGENT_SYS_TEXT_H
#define TRACEGATE_AGENT_SYS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg__text {
  const char *p;
  const char *end;
} tg__text_t;

static inline void tg__text_init(tg__text_t *t, const char *s, size_t len) {
  t->p = s;
  t->end = s + len;
}

/* The next line without its '\n' in [*line, *line + *len). False at the end
 * of the text. */
bool tg__text_next_line(tg__text_t *t, const char **line, size_t *len);

static inline bool tg__is_blank(char c) { return c == ' ' || c == '\t'; }

/* The value of a hex digit of either case, or -1. */
static inline int tg__hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Skips spaces and tabs. */
void tg__skip_blanks(const char **p, const char *end);

/* Parses a decimal unsigned number after optional blanks; *p moves past it.
 * Returns 0, or TG_EPARSE (no digits, overflow) with *p unchanged. */
int tg__parse_u64(const char **p, const char *end, uint64_t *out);
/* The same with an optional leading '-'. */
int tg__parse_i64(const char **p, const char *end, int64_t *out);

/* The next blank-separated word after optional blanks, or false. */
bool tg__next_word(const char **p, const char *end, const char **w, size_t *n);

/* True if only blanks remain. */
bool tg__only_blanks(const char *p, const char *end);

/* One "Key: value" line (/proc/meminfo, /proc/<pid>/status): the key in
 * [key, key + key_len), the value in [value, end), from just past the
 * colon. */
typedef struct tg__text_field {
  const char *key;
  size_t key_len;
  const char *value;
  const char *end;
} tg__text_field_t;

/* The next "Key: value" line, blank lines skipped. Returns 1, 0 at the end
 * of the text, or TG_EPARSE for a line without a key before a ':'. */
int tg__text_next_field(tg__text_t *t, tg__text_field_t *f);

/* A value "<n>" or "<n> kB" filling [p, end), as /proc prints sizes.
 * *|has_unit| tells whether "kB" was there. Returns 0 or TG_EPARSE. */
int tg__parse_kb(const char *p, const char *end, uint64_t *out,
                 bool *has_unit);

/* Whole lines out of text that arrives in pieces of any size, as a file
 * read in chunks does. A line that lies whole in a piece, with nothing
 * pending, is handed over in place; one that a piece cuts is assembled in
 * |buf|. A line longer than |cap| is skipped whole, never cut: a cut line
 * would parse as a different one. The buffer is inline, not borrowed, so
 * an owner may be copied or moved between feeds. */
#define TG__LINE_MAX 2048

typedef struct tg__lines {
  size_t cap; /* at most TG__LINE_MAX */
  size_t len; /* bytes of the pending line so far; past |cap| it is skipped */
  char buf[TG__LINE_MAX];
} tg__lines_t;

/* Called once per line. |status| is 0 with the line, without its '\n', in
 * [line, line + n); or -ENOBUFS for a line longer than the cap, with |line|
 * NULL and |n| its length. '\r' and NULs are the line's own bytes. A
 * negative return stops the feed and is returned from it. */
typedef int (*tg__line_cb)(void *ctx, int status, const char *line,
                           size_t n);

/* Nothing pending; lines up to |cap| bytes (held to TG__LINE_MAX). */
void tg__lines_init(tg__lines_t *l, size_t cap);
/* Hands |on_line| each line that [text, text + len) completes. Returns 0,
 * or the first negative value |on_line| returned: that line is consumed
 * and the rest of this piece is not read. */
int tg__lines_feed(tg__lines_t *l, const char *text, size_t len,
                   tg__line_cb on_line, void *ctx);
/* Ends the text: a pending last line without a newline is handed over.
 * Returns 0 or |on_line|'s negative value; nothing stays pending. */
int tg__lines_finish(tg__lines_t *l, tg__line_cb on_line, void *ctx);

/* True if [w, w + n) equals the C string |lit| (|w| may hold NULs). */
static inline bool tg__word_is(const char *w, size_t n, const char *lit) {
  size_t i = 0;
  for (; i < n; i++)
    if (lit[i] == '\0' || lit[i] != w[i]) return false;
  return lit[i] == '\0';
}

#endif /* TRACEGATE_AGENT_SYS_TEXT_H */
