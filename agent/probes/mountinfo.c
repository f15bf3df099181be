/* mountinfo parsing; see mountinfo.h. */
#include "agent/probes/mountinfo.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "agent/sys/proc_read.h"
#include "common/buf.h"

/* Real lines have 7 to 10 fields; optional fields are few. */
#define MAX_TOKENS 32

typedef struct token {
  const char *p;
  size_t n;
} token_t;

/* A decimal that fits in 32 bits, all of |t|. */
static bool parse_u32(const char *p, size_t n, uint32_t *out) {
  if (n == 0 || n > 10) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return false;
    v = v * 10 + (uint64_t)(p[i] - '0');
  }
  if (v > UINT32_MAX) return false;
  *out = (uint32_t)v;
  return true;
}

/* "<major>:<minor>" as makedev() gives it. */
static bool parse_dev(token_t t, uint64_t *dev) {
  const char *colon = memchr(t.p, ':', t.n);
  if (!colon) return false;
  size_t a = (size_t)(colon - t.p);
  uint32_t major, minor;
  if (!parse_u32(t.p, a, &major) || !parse_u32(colon + 1, t.n - a - 1, &minor))
    return false;
  *dev = (uint64_t)makedev(major, minor);
  return true;
}

static bool is_octal(char c) { return c >= '0' && c <= '7'; }

/* Copies |t| to |out| with \ooo escapes decoded and a NUL after it;
 * returns the bytes written before the NUL, or -1 when the result would
 * hold a NUL or reach PATH_MAX. |out| has room for t.n + 1 bytes (decoding
 * only shrinks). */
static long unescape(token_t t, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < t.n; i++) {
    char c = t.p[i];
    if (c == '\\' && t.n - i > 3 && is_octal(t.p[i + 1]) &&
        is_octal(t.p[i + 2]) && is_octal(t.p[i + 3])) {
      unsigned v = (unsigned)(t.p[i + 1] - '0') << 6 |
                   (unsigned)(t.p[i + 2] - '0') << 3 |
                   (unsigned)(t.p[i + 3] - '0');
      if (v > 0xff) return -1;
      c = (char)v;
      i += 3;
    }
    if (c == '\0') return -1;
    out[o++] = c;
  }
  if (o >= PATH_MAX) return -1;
  out[o] = '\0';
  return (long)o;
}

/* Splits a line on single blanks (the kernel's separator; an empty source
 * gives an empty field). Returns the fields, or 0 past MAX_TOKENS. */
static size_t split(const char *p, size_t n, token_t *t) {
  size_t k = 0, start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && p[i] != ' ') continue;
    if (k == MAX_TOKENS) return 0;
    t[k++] = (token_t){p + start, i - start};
    start = i + 1;
  }
  return k;
}

/* One line into |m|, its strings at |names| + *used. */
static bool parse_line(const char *p, size_t n, tg_mount_t *m, char *names,
                       size_t *used) {
  token_t t[MAX_TOKENS];
  size_t k = split(p, n, t);
  if (k < 10) return false; /* 6 fields, "-", fs type, source, options */
  size_t sep = 6;
  while (sep < k && !(t[sep].n == 1 && t[sep].p[0] == '-')) sep++;
  if (sep + 3 >= k) return false;
  if (!parse_u32(t[0].p, t[0].n, &m->id) ||
      !parse_u32(t[1].p, t[1].n, &m->parent) || !parse_dev(t[2], &m->dev))
    return false;
  /* The mount point is a path from the reader's root; root and fs type
   * are never empty. */
  if (t[3].n == 0 || t[4].n == 0 || t[4].p[0] != '/' || t[sep + 1].n == 0)
    return false;
  char *root = names + *used;
  long rl = unescape(t[3], root);
  if (rl < 0) return false;
  char *point = root + rl + 1;
  long pl = unescape(t[4], point);
  if (pl < 0) return false;
  char *fstype = point + pl + 1;
  long fl = unescape(t[sep + 1], fstype);
  if (fl < 0) return false;
  m->root = root;
  m->point = point;
  m->point_len = (uint32_t)pl;
  m->fstype = fstype;
  *used += (size_t)rl + (size_t)pl + (size_t)fl + 3;
  return true;
}

int tg_mountinfo_parse(tg_mountinfo_t *out, const char *text, size_t len) {
  tg_mountinfo_free(out);
  size_t lines = 1;
  for (const char *q = text, *end = text + len;
       (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
    lines++;
  size_t cap = lines < TG_MOUNTINFO_MAX ? lines : TG_MOUNTINFO_MAX;
  /* A line's three strings, unescaped, with their NULs fit in the bytes
   * of their fields and the blanks after them. */
  out->v = malloc(cap * sizeof(*out->v));
  out->names = malloc(len + 1);
  if (!out->v || !out->names) {
    tg_mountinfo_free(out);
    return -ENOMEM;
  }
  size_t used = 0;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = (size_t)((nl ? nl : end) - p);
    if (n > 0) {
      tg_mount_t m;
      if (out->n == cap) {
        out->skipped++;
      } else if (parse_line(p, n, &m, out->names, &used)) {
        out->v[out->n++] = m;
      } else {
        out->bad_lines++;
      }
    }
    p = nl ? nl + 1 : end;
  }
  return (int)out->n;
}

int tg_mountinfo_read(tg_mountinfo_t *out, const char *path) {
  tg_buf_t b;
  tg_buf_init(&b, TG_MOUNTINFO_FILE_MAX);
  int rv = tg_proc_read_file(path, &b);
  bool cut = rv == -ENOBUFS;
  if (rv == 0 || cut) {
    /* A file past the cap: its whole lines, and the rest skipped as past
     * TG_MOUNTINFO_MAX would be (it holds far more mounts than that). */
    const char *t = (const char *)tg_buf_begin(&b);
    size_t n = tg_buf_size(&b);
    if (cut)
      while (n && t[n - 1] != '\n') n--;
    rv = tg_mountinfo_parse(out, t, n);
    if (rv >= 0 && cut) out->skipped++;
  } else {
    tg_mountinfo_free(out);
  }
  tg_buf_free(&b);
  return rv;
}

void tg_mountinfo_free(tg_mountinfo_t *mi) {
  free(mi->v);
  free(mi->names);
  memset(mi, 0, sizeof(*mi));
}

static int cmp_point(const void *a, const void *b) {
  const tg_mount_t *x = a, *y = b;
  return strcmp(x->point, y->point);
}

void tg_mountinfo_sort(tg_mountinfo_t *mi) {
  if (mi->n > 1) qsort(mi->v, mi->n, sizeof(*mi->v), cmp_point);
}

bool tg_mountinfo_is_point(const tg_mountinfo_t *mi, const char *path,
                           size_t len) {
  size_t lo = 0, hi = mi->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const tg_mount_t *m = &mi->v[mid];
    size_t n = m->point_len < len ? m->point_len : len;
    int c = memcmp(m->point, path, n);
    if (c == 0) c = m->point_len < len ? -1 : m->point_len > len ? 1 : 0;
    if (c == 0) return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}
