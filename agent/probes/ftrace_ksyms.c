/* kallsyms parsing and address lookup; see ftrace_ksyms.h. */
#include "agent/probes/ftrace_ksyms.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/proc_read.h"

/* /proc/kallsyms is read this much at a time. */
#define READ_CHUNK 65536

_Static_assert(TG_KSYMS_LINE_MAX <= TG__LINE_MAX, "lines cut short");

void tg_ksyms_init(tg_ksyms_t *k) {
  memset(k, 0, sizeof(*k));
  tg__lines_init(&k->lines, TG_KSYMS_LINE_MAX);
}

void tg_ksyms_free(tg_ksyms_t *k) {
  free(k->syms);
  free(k->names);
  tg_ksyms_init(k);
}

static bool blank(char c) { return c == ' ' || c == '\t'; }

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool ends_with(const char *s, size_t n, const char *suffix) {
  size_t sl = strlen(suffix);
  return n > sl && memcmp(s + n - sl, suffix, sl) == 0;
}

static int add_sym(tg_ksyms_t *k, uint64_t addr, const char *name, size_t len) {
  if (k->n == TG_KSYMS_MAX_SYMS || k->names_len + len > TG_KSYMS_NAMES_MAX) {
    k->dropped++;
    return 0;
  }
  if (k->n == k->cap) {
    size_t cap = k->cap ? k->cap * 2 : 16384;
    tg_ksym_t *s = realloc(k->syms, cap * sizeof(*s));
    if (!s) return -ENOMEM;
    k->syms = s;
    k->cap = cap;
  }
  if (k->names_len + len > k->names_cap) {
    size_t cap = k->names_cap ? k->names_cap : 262144;
    while (cap < k->names_len + len) cap *= 2;
    char *p = realloc(k->names, cap);
    if (!p) return -ENOMEM;
    k->names = p;
    k->names_cap = cap;
  }
  memcpy(k->names + k->names_len, name, len);
  k->syms[k->n++] = (tg_ksym_t){
      .addr = addr, .name = (uint32_t)k->names_len, .len = (uint32_t)len};
  k->names_len += len;
  return 0;
}

/* One line without its newline (a tg__line_cb). */
static int parse_line(void *ctx, int status, const char *s, size_t n) {
  tg_ksyms_t *k = ctx;
  if (status < 0) goto bad; /* too long */
  size_t i = 0;
  uint64_t addr = 0;
  unsigned digits = 0;
  for (; i < n && !blank(s[i]); i++) {
    int d = hex_digit(s[i]);
    if (d < 0 || ++digits > 16) goto bad;
    addr = addr << 4 | (uint64_t)d;
  }
  if (digits == 0 || i == n) goto bad;
  while (i < n && blank(s[i])) i++;
  if (i == n) goto bad;
  char type = s[i++];
  if (i == n || !blank(s[i])) goto bad;
  while (i < n && blank(s[i])) i++;
  size_t start = i;
  while (i < n && !blank(s[i])) i++;
  size_t len = i - start;
  if (len == 0) goto bad;
  if (type != 't' && type != 'T') return 0; /* data, absolute, weak... */
  const char *name = s + start;
  /* ARM mapping symbols ($x, $d) mark code and data, not functions. */
  if (name[0] == '$') return 0;
  if (addr == 0) {
    k->zero_addrs++;
    return 0;
  }
  /* Clang's CFI jump tables: the function's own name is what readers want. */
  if (ends_with(name, len, ".cfi_jt"))
    len -= 7;
  else if (ends_with(name, len, ".cfi"))
    len -= 4;
  if (len > TG_KSYMS_NAME_MAX) len = TG_KSYMS_NAME_MAX;
  return add_sym(k, addr, name, len);
bad:
  k->bad_lines++;
  return 0;
}

int tg_ksyms_feed(tg_ksyms_t *k, const char *text_untrusted, size_t len) {
  return tg__lines_feed(&k->lines, text_untrusted, len, parse_line, k);
}

static int by_addr(const void *a, const void *b) {
  const tg_ksym_t *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  /* Names are stored in the order listed: the first listed sorts first. */
  return x->name < y->name ? -1 : x->name > y->name;
}

int tg_ksyms_finish(tg_ksyms_t *k) {
  if (!k->finished) {
    k->finished = true;
    int rv = tg__lines_finish(&k->lines, parse_line, k);
    if (k->n) qsort(k->syms, k->n, sizeof(*k->syms), by_addr);
    size_t out = 0;
    for (size_t i = 0; i < k->n; i++)
      if (out == 0 || k->syms[i].addr != k->syms[out - 1].addr)
        k->syms[out++] = k->syms[i];
    k->n = out;
    /* Give back the growth slack: the table lives for whole sessions. */
    if (k->n && k->n < k->cap) {
      tg_ksym_t *s = realloc(k->syms, k->n * sizeof(*s));
      if (s) {
        k->syms = s;
        k->cap = k->n;
      }
    }
    if (k->names_len && k->names_len < k->names_cap) {
      char *p = realloc(k->names, k->names_len);
      if (p) {
        k->names = p;
        k->names_cap = k->names_len;
      }
    }
    if (rv < 0) return rv;
  }
  return (int)k->n;
}

int tg_ksyms_parse(tg_ksyms_t *k, const char *text_untrusted, size_t len) {
  tg_ksyms_init(k);
  int rv = tg_ksyms_feed(k, text_untrusted, len);
  int n = tg_ksyms_finish(k);
  return rv < 0 ? rv : n;
}

static int feed_chunk(void *ctx, const char *p, size_t n) {
  return tg_ksyms_feed(ctx, p, n);
}

int tg_ksyms_load(tg_ksyms_t *k, const char *path) {
  tg_ksyms_init(k);
  int rv = tg_proc_read_chunks(path, READ_CHUNK, feed_chunk, k);
  int n = tg_ksyms_finish(k);
  if (rv < 0 || n < 0) {
    tg_ksyms_free(k);
    return rv < 0 ? rv : n;
  }
  return n;
}

const char *tg_ksyms_lookup(const tg_ksyms_t *k, uint64_t addr, size_t *len) {
  /* The first symbol above |addr|; the one before it is the candidate. */
  size_t lo = 0, hi = k->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (k->syms[mid].addr <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0) return NULL;
  const tg_ksym_t *s = &k->syms[lo - 1];
  if (addr - s->addr > TG_KSYMS_MAX_FUNC_SIZE) return NULL;
  *len = s->len;
  return k->names + s->name;
}

size_t tg_ksyms_mem(const tg_ksyms_t *k) {
  return k->cap * sizeof(*k->syms) + k->names_cap;
}
