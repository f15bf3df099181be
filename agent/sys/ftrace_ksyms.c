/* kallsyms parsing and address lookup; see ftrace_ksyms.h. */
#include "agent/sys/ftrace_ksyms.h"

#include <string.h>

#include "agent/sys/proc_read.h"
#include "agent/sys/text.h"

/* /proc/kallsyms is read this much at a time. */
#define READ_CHUNK 65536

_Static_assert(TG_KSYMS_LINE_MAX <= TG__LINE_MAX, "lines cut short");

static const tg__addr_strs_caps_t caps = {
    .max_entries = TG_KSYMS_MAX_SYMS,
    .max_bytes = TG_KSYMS_NAMES_MAX,
    .first_entries = 16384,
    .first_bytes = 262144,
};

void tg_ksyms_init(tg_ksyms_t *k) {
  memset(k, 0, sizeof(*k));
  tg__addr_strs_init(&k->syms, caps);
  tg__lines_init(&k->lines, TG_KSYMS_LINE_MAX);
}

void tg_ksyms_free(tg_ksyms_t *k) {
  tg__addr_strs_free(&k->syms);
  tg_ksyms_init(k);
}

static bool ends_with(const char *s, size_t n, const char *suffix) {
  size_t sl = strlen(suffix);
  return n > sl && memcmp(s + n - sl, suffix, sl) == 0;
}

/* One line without its newline (a tg__line_cb). */
static int parse_line(void *ctx, int status, const char *s, size_t n) {
  tg_ksyms_t *k = ctx;
  if (status < 0) goto bad; /* too long */
  size_t i = 0;
  uint64_t addr = 0;
  unsigned digits = 0;
  for (; i < n && !tg__is_blank(s[i]); i++) {
    int d = tg__hex_digit(s[i]);
    if (d < 0 || ++digits > 16) goto bad;
    addr = addr << 4 | (uint64_t)d;
  }
  if (digits == 0 || i == n) goto bad;
  while (i < n && tg__is_blank(s[i])) i++;
  if (i == n) goto bad;
  char type = s[i++];
  if (i == n || !tg__is_blank(s[i])) goto bad;
  while (i < n && tg__is_blank(s[i])) i++;
  size_t start = i;
  while (i < n && !tg__is_blank(s[i])) i++;
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
  return tg__addr_strs_add(&k->syms, addr, name, len);
bad:
  k->bad_lines++;
  return 0;
}

int tg_ksyms_feed(tg_ksyms_t *k, const char *text_untrusted, size_t len) {
  return tg__lines_feed(&k->lines, text_untrusted, len, parse_line, k);
}

int tg_ksyms_finish(tg_ksyms_t *k) {
  if (!k->finished) {
    k->finished = true;
    int rv = tg__lines_finish(&k->lines, parse_line, k);
    tg__addr_strs_finish(&k->syms);
    if (rv < 0) return rv;
  }
  return (int)k->syms.n;
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
  size_t i = tg__addr_strs_search(&k->syms, addr);
  if (i == TG__ADDR_STRS_NONE ||
      addr - tg__addr_strs_addr(&k->syms, i) > TG_KSYMS_MAX_FUNC_SIZE)
    return NULL;
  return tg__addr_strs_str(&k->syms, i, len);
}

size_t tg_ksyms_mem(const tg_ksyms_t *k) { return tg__addr_strs_mem(&k->syms); }
