/* printk_formats parsing and address lookup; see ftrace_printk.h. */
#include "agent/probes/ftrace_printk.h"

#include <stdio.h>
#include <string.h>

#include "agent/probes/ftrace_tracefs.h"
#include "agent/sys/proc_read.h"
#include "agent/sys/text.h"

/* The file is read this much at a time. */
#define READ_CHUNK 16384

_Static_assert(TG_PRINTK_LINE_MAX <= TG__LINE_MAX, "lines cut short");

static const tg__addr_strs_caps_t caps = {
    .max_entries = TG_PRINTK_MAX_ENTRIES,
    .max_bytes = TG_PRINTK_STRS_MAX,
    .first_entries = 256,
    .first_bytes = 8192,
};

void tg_printk_formats_init(tg_printk_formats_t *t) {
  memset(t, 0, sizeof(*t));
  tg__addr_strs_init(&t->strs, caps);
  tg__lines_init(&t->lines, TG_PRINTK_LINE_MAX);
}

void tg_printk_formats_free(tg_printk_formats_t *t) {
  tg__addr_strs_free(&t->strs);
  tg_printk_formats_init(t);
}

/* [s, s + n) as a hex address with an optional 0x; false when it is empty,
 * holds anything else or does not fit in 64 bits. */
static bool parse_addr(const char *s, size_t n, uint64_t *out) {
  if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2, n -= 2;
  if (n == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    int d = tg__hex_digit(s[i]);
    if (d < 0 || v >> 60) return false;
    v = v << 4 | (uint64_t)d;
  }
  *out = v;
  return true;
}

/* One line without its newline (a tg__line_cb). */
static int parse_line(void *ctx, int status, const char *s, size_t n) {
  tg_printk_formats_t *t = ctx;
  if (status < 0) goto bad; /* too long */
  if (n == 0) return 0;
  const char *colon = memchr(s, ':', n);
  if (!colon) goto bad;
  size_t a = 0, b = (size_t)(colon - s);
  while (a < b && tg__is_blank(s[a])) a++;
  while (b > a && tg__is_blank(s[b - 1])) b--;
  uint64_t addr;
  if (!parse_addr(s + a, b - a, &addr)) goto bad;
  const char *v = colon + 1, *end = s + n;
  while (v < end && tg__is_blank(*v)) v++;
  /* One pair of quotes, as Perfetto strips them: an unterminated string
   * keeps what follows its opening quote, an unquoted one is taken whole. */
  if (v < end && *v == '"') v++;
  if (v < end && end[-1] == '"') end--;
  size_t len = (size_t)(end - v);
  if (len == 0) return 0; /* looks up the same as a missing entry */
  if (addr == 0) {
    t->zero_addrs++;
    return 0;
  }
  if (len > TG_PRINTK_STR_MAX) {
    len = TG_PRINTK_STR_MAX;
    t->cut++;
  }
  return tg__addr_strs_add(&t->strs, addr, v, len);
bad:
  t->bad_lines++;
  return 0;
}

int tg_printk_formats_feed(tg_printk_formats_t *t, const char *text_untrusted,
                           size_t len) {
  return tg__lines_feed(&t->lines, text_untrusted, len, parse_line, t);
}

int tg_printk_formats_finish(tg_printk_formats_t *t) {
  if (t->finished) return (int)t->strs.n;
  t->finished = true;
  int rv = tg__lines_finish(&t->lines, parse_line, t);
  tg__addr_strs_finish(&t->strs);
  return rv < 0 ? rv : (int)t->strs.n;
}

int tg_printk_formats_parse(tg_printk_formats_t *t, const char *text_untrusted,
                            size_t len) {
  tg_printk_formats_init(t);
  int rv = tg_printk_formats_feed(t, text_untrusted, len);
  int n = tg_printk_formats_finish(t);
  return rv < 0 ? rv : n;
}

static int feed_chunk(void *ctx, const char *p, size_t n) {
  return tg_printk_formats_feed(ctx, p, n);
}

int tg_printk_formats_load(tg_printk_formats_t *t, const char *tracefs_root) {
  tg_printk_formats_init(t);
  char path[TG_TRACEFS_PATH_MAX * 2];
  snprintf(path, sizeof(path), "%s/" TG_PRINTK_FILE, tracefs_root);
  int rv = tg_proc_read_chunks(path, READ_CHUNK, feed_chunk, t);
  int n = tg_printk_formats_finish(t);
  if (rv < 0 || n < 0) {
    tg_printk_formats_free(t);
    return rv < 0 ? rv : n;
  }
  return n;
}

const char *tg_printk_formats_lookup(const tg_printk_formats_t *t,
                                     uint64_t addr, size_t *len) {
  if (!t) return NULL;
  size_t i = tg__addr_strs_search(&t->strs, addr);
  if (i == TG__ADDR_STRS_NONE || tg__addr_strs_addr(&t->strs, i) != addr)
    return NULL;
  return tg__addr_strs_str(&t->strs, i, len);
}

size_t tg_printk_formats_mem(const tg_printk_formats_t *t) {
  return tg__addr_strs_mem(&t->strs);
}
