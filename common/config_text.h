/* The one grammar of tracegate's line-based config files: the collector's
 * configuration, the per-user TLS defaults, hosts files and authorization
 * files. Each file keeps its own keys and their meaning; this reads its
 * lines.
 *
 *   file    := [UTF-8 BOM] line*      at most limits.file_max bytes and
 *                                     limits.lines_max lines
 *   line    := text ("\n" | "\r\n" | end of file)
 *                                     text at most limits.line_max bytes,
 *                                     never a NUL byte
 *   comment := '#' at the start of the text or after a blank, to the end
 *              of the line; any other '#' is data (a password in a URI)
 *   blank   := ' ' | '\t' | '\r'
 *
 * A line is handed out with its comment cut and its blanks trimmed at both
 * ends; a line left empty is skipped. There is no quoting, no escape, no
 * continuation line and no include: a value is the bytes between its
 * blanks, as written. "key = value" lines split at the first '=' (a value
 * may hold more); "word word" lines split at blanks.
 *
 * Errors are "LABEL:LINE: why" (or "LABEL: why" for the whole file) in the
 * caller's buffer; nothing here prints, allocates or reads past |len|.
 */
#ifndef TRACEGATE_COMMON_CONFIG_TEXT_H
#define TRACEGATE_COMMON_CONFIG_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct tg_conf_limits {
  size_t file_max;  /* bytes in the file, BOM included */
  size_t line_max;  /* bytes of a line without its "\n" or "\r\n" */
  size_t lines_max; /* lines, blank and comment lines included */
  const char *what; /* the kind of file, for "is this WHAT?": "a hosts file" */
} tg_conf_limits_t;

/* Bytes of the text, not NUL-terminated. */
typedef struct tg_conf_span {
  const char *s;
  size_t n;
} tg_conf_span_t;

/* A reader over one file's text. Borrows the text, the label, the limits
 * and the error buffer for its lifetime. */
typedef struct tg_conf {
  const char *text;
  size_t len, off;
  const char *label; /* NULL: errors without "LABEL:LINE: " (the caller's
                      * API returns the line apart) */
  const tg_conf_limits_t *lim;
  unsigned line; /* of the line last handed out (or refused) */
  char *err;
  size_t errn;
} tg_conf_t;

bool tg_conf_blank(char c);

/* Starts reading |len| bytes of |text_untrusted|. Returns 0, or -EFBIG
 * ("LABEL: larger than N bytes") when the file is over limits.file_max. */
int tg_conf_begin(tg_conf_t *r, const char *text_untrusted, size_t len,
                  const char *label, const tg_conf_limits_t *lim, char *err,
                  size_t errn);

/* The next line that holds anything but blanks and a comment into |out|
 * (pointing into the text; r->line is its number). Returns 1, 0 at the
 * end of the file, or -EINVAL with the error written: a line over
 * line_max, a NUL byte, more than lines_max lines. */
int tg_conf_next(tg_conf_t *r, tg_conf_span_t *out);

/* Splits "key = value" at the first '=' into the key and the value, both
 * trimmed (the value may be empty). Returns 0, or -EINVAL with "expected
 * key = value, not '...'" written on r->line when there is no '=' or no
 * key. */
int tg_conf_key_value(tg_conf_t *r, tg_conf_span_t line, tg_conf_span_t *key,
                      tg_conf_span_t *value);

/* The next blank-separated word of *|rest| into |word|; *|rest| moves past
 * it. Returns false when none is left. */
bool tg_conf_word(tg_conf_span_t *rest, tg_conf_span_t *word);

/* How much of a key or value an error echoes. */
#define TG_CONF_ECHO_MAX 64

/* |n| bytes of |s| into |out| for an error: at most TG_CONF_ECHO_MAX of
 * them, anything but printable ASCII as '?' (a terminal obeys escapes). */
void tg_conf_echo(char out[TG_CONF_ECHO_MAX + 1], const char *s, size_t n);

/* Whether |span| is exactly the NUL-terminated |s|. */
bool tg_conf_is(tg_conf_span_t span, const char *s);

/* Writes "LABEL:LINE: " (LINE 0: "LABEL: ") and the text into the error
 * buffer; returns |rv|, for the callers' convenience. */
int tg_conf_fail(const tg_conf_t *r, unsigned line, int rv, const char *fmt,
                 ...) __attribute__((format(printf, 4, 5)));
int tg_conf_vfail(const tg_conf_t *r, unsigned line, int rv, const char *fmt,
                  va_list ap) __attribute__((format(printf, 4, 0)));

#endif /* TRACEGATE_COMMON_CONFIG_TEXT_H */
