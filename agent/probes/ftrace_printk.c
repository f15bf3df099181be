/* printk_formats parsing and address lookup; see ftrace_printk.h. */
#include "agent/probes/ftrace_printk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/ftrace_tracefs.h"
#include "agent/probes/proc_read.h"

/* The file is read this much at a time. */
#define READ_CHUNK 16384

_Static_assert(TG_PRINTK_LINE_MAX <= TG__LINE_MAX, "lines cut short");

void tg_printk_formats_init(tg_printk_formats_t *t) {
  memset(t, 0, sizeof(*t));
  tg__lines_init(&t->lines, TG_PRINTK_LINE_MAX);
}

void tg_printk_formats_free(tg_printk_formats_t *t) {
  free(t->entries);
  free(t->strs);
  tg_printk_formats_init(t);
}

static bool blank(char c) { return c == ' ' || c == '\t'; }

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* [s, s + n) as a hex address with an optional 0x; false when it is empty,
 * holds anything else or does not fit in 64 bits. */
static bool parse_addr(const char *s, size_t n, uint64_t *out) {
  if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2, n -= 2;
  if (n == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    int d = hex_digit(s[i]);
    if (d < 0 || v >> 60) return false;
    v = v << 4 | (uint64_t)d;
  }
  *out = v;
  return true;
}

static int add_entry(tg_printk_formats_t *t, uint64_t addr, const char *s,
                     size_t len) {
  if (t->n == TG_PRINTK_MAX_ENTRIES || t->strs_len + len > TG_PRINTK_STRS_MAX) {
    t->dropped++;
    return 0;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    tg_printk_entry_t *e = realloc(t->entries, cap * sizeof(*e));
    if (!e) return -ENOMEM;
    t->entries = e;
    t->cap = cap;
  }
  if (t->strs_len + len > t->strs_cap) {
    size_t cap = t->strs_cap ? t->strs_cap : 8192;
    while (cap < t->strs_len + len) cap *= 2;
    char *p = realloc(t->strs, cap);
    if (!p) return -ENOMEM;
    t->strs = p;
    t->strs_cap = cap;
  }
  memcpy(t->strs + t->strs_len, s, len);
  t->entries[t->n++] = (tg_printk_entry_t){
      .addr = addr, .str = (uint32_t)t->strs_len, .len = (uint32_t)len};
  t->strs_len += len;
  return 0;
}

/* One line without its newline (a tg__line_cb). */
static int parse_line(void *ctx, int status, const char *s, size_t n) {
  tg_printk_formats_t *t = ctx;
  if (status < 0) goto bad; /* too long */
  if (n == 0) return 0;
  const char *colon = memchr(s, ':', n);
  if (!colon) goto bad;
  size_t a = 0, b = (size_t)(colon - s);
  while (a < b && blank(s[a])) a++;
  while (b > a && blank(s[b - 1])) b--;
  uint64_t addr;
  if (!parse_addr(s + a, b - a, &addr)) goto bad;
  const char *v = colon + 1, *end = s + n;
  while (v < end && blank(*v)) v++;
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
  return add_entry(t, addr, v, len);
bad:
  t->bad_lines++;
  return 0;
}

int tg_printk_formats_feed(tg_printk_formats_t *t, const char *text_untrusted,
                           size_t len) {
  return tg__lines_feed(&t->lines, text_untrusted, len, parse_line, t);
}

static int by_addr(const void *a, const void *b) {
  const tg_printk_entry_t *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  /* Strings are stored in the order listed: the first listed sorts first. */
  return x->str < y->str ? -1 : x->str > y->str;
}

int tg_printk_formats_finish(tg_printk_formats_t *t) {
  if (t->finished) return (int)t->n;
  t->finished = true;
  int rv = tg__lines_finish(&t->lines, parse_line, t);
  if (t->n) qsort(t->entries, t->n, sizeof(*t->entries), by_addr);
  size_t out = 0;
  for (size_t i = 0; i < t->n; i++)
    if (out == 0 || t->entries[i].addr != t->entries[out - 1].addr)
      t->entries[out++] = t->entries[i];
  t->n = out;
  /* Give back the growth slack: the table lives for whole sessions. (The
   * strings of dropped duplicates stay: they are few.) */
  if (t->n && t->n < t->cap) {
    tg_printk_entry_t *e = realloc(t->entries, t->n * sizeof(*e));
    if (e) {
      t->entries = e;
      t->cap = t->n;
    }
  }
  if (t->strs_len && t->strs_len < t->strs_cap) {
    char *p = realloc(t->strs, t->strs_len);
    if (p) {
      t->strs = p;
      t->strs_cap = t->strs_len;
    }
  }
  return rv < 0 ? rv : (int)t->n;
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
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint64_t a = t->entries[mid].addr;
    if (a == addr) {
      *len = t->entries[mid].len;
      return t->strs + t->entries[mid].str;
    }
    if (a < addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

size_t tg_printk_formats_mem(const tg_printk_formats_t *t) {
  return t->cap * sizeof(*t->entries) + t->strs_cap;
}
