/* /proc/PID/maps: see perf_maps.h. */
#include "agent/perf/perf_maps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sys/proc_read.h"
#include "agent/sys/text.h"
#include "common/buf.h"

/* A hex number of 1 to 16 digits at |*p|, ending before |end|. */
static bool hex(const char **p, const char *end, uint64_t *out) {
  uint64_t v = 0;
  int n = 0;
  while (*p < end) {
    int d = tg__hex_digit(**p);
    if (d < 0) break;
    if (++n > 16) return false;
    v = v << 4 | (unsigned)d;
    (*p)++;
  }
  *out = v;
  return n > 0;
}

static bool dec(const char **p, const char *end, uint64_t *out) {
  uint64_t v = 0;
  int n = 0;
  while (*p < end && **p >= '0' && **p <= '9') {
    if (++n > 19) return false;
    v = v * 10 + (uint64_t)(**p - '0');
    (*p)++;
  }
  *out = v;
  return n > 0;
}

static bool eat(const char **p, const char *end, char ch) {
  if (*p >= end || **p != ch) return false;
  (*p)++;
  return true;
}

static void skip_spaces(const char **p, const char *end) {
  while (*p < end && **p == ' ') (*p)++;
}

int tg_perf_map_parse_line(const char *line, size_t len, tg_perf_map_t *out) {
  memset(out, 0, sizeof(*out));
  const char *p = line, *end = line + len;
  uint64_t maj, min;
  if (!hex(&p, end, &out->start) || !eat(&p, end, '-') ||
      !hex(&p, end, &out->end) || !eat(&p, end, ' '))
    return -EBADMSG;
  if (out->end < out->start) return -EBADMSG;
  if (end - p < 5) return -EBADMSG;
  if ((p[0] != 'r' && p[0] != '-') || (p[1] != 'w' && p[1] != '-') ||
      (p[2] != 'x' && p[2] != '-') || (p[3] != 'p' && p[3] != 's'))
    return -EBADMSG;
  out->r = p[0] == 'r';
  out->w = p[1] == 'w';
  out->x = p[2] == 'x';
  out->shared = p[3] == 's';
  p += 4;
  if (!eat(&p, end, ' ') || !hex(&p, end, &out->pgoff) ||
      !eat(&p, end, ' ') || !hex(&p, end, &maj) || !eat(&p, end, ':') ||
      !hex(&p, end, &min) || !eat(&p, end, ' ') ||
      !dec(&p, end, &out->inode))
    return -EBADMSG;
  if (maj > UINT32_MAX || min > UINT32_MAX) return -EBADMSG;
  out->dev_major = (uint32_t)maj;
  out->dev_minor = (uint32_t)min;
  if (p < end && *p != ' ') return -EBADMSG;
  skip_spaces(&p, end);
  size_t n = (size_t)(end - p);
  if (n >= TG_PERF_MAP_PATH_MAX) n = TG_PERF_MAP_PATH_MAX - 1;
  if (memchr(p, 0, n)) return -EBADMSG;
  if (!(out->path = malloc(n + 1))) return -ENOMEM;
  memcpy(out->path, p, n);
  out->path[n] = '\0';
  return 0;
}

static int cmp_start(const void *a, const void *b) {
  const tg_perf_map_t *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

void tg_perf_maps_free(tg_perf_maps_t *m) {
  for (size_t i = 0; i < m->n; i++) free(m->v[i].path);
  free(m->v);
  memset(m, 0, sizeof(*m));
}

int tg_perf_maps_parse(const char *text, size_t len, bool exec_only,
                       tg_perf_maps_t *out) {
  tg_perf_maps_free(out);
  const char *p = text, *end = text + len;
  bool sorted = true;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    tg_perf_map_t m;
    int rv = tg_perf_map_parse_line(p, (size_t)(le - p), &m);
    p = nl ? nl + 1 : end;
    if (rv == -ENOMEM) return rv;
    if (rv < 0) {
      out->bad_lines++;
      continue;
    }
    if (exec_only && !m.x) {
      free(m.path);
      continue;
    }
    if (out->n == TG_PERF_MAPS_MAX) {
      out->truncated = true;
      free(m.path);
      break;
    }
    if (out->n == out->cap) {
      size_t cap = out->cap ? out->cap * 2 : 32;
      tg_perf_map_t *v = realloc(out->v, cap * sizeof(*v));
      if (!v) {
        free(m.path);
        return -ENOMEM;
      }
      out->v = v;
      out->cap = cap;
    }
    if (out->n && out->v[out->n - 1].start > m.start) sorted = false;
    out->v[out->n++] = m;
  }
  if (!sorted) qsort(out->v, out->n, sizeof(*out->v), cmp_start);
  /* The kernel's mappings are disjoint and never empty: a line that breaks
   * that is not trusted (counted as bad), so that an address has at most
   * one mapping. */
  size_t k = 0;
  for (size_t i = 0; i < out->n; i++) {
    tg_perf_map_t *m = &out->v[i];
    if (m->start == m->end || (k && m->start < out->v[k - 1].end)) {
      free(m->path);
      out->bad_lines++;
      continue;
    }
    out->v[k++] = *m;
  }
  out->n = k;
  return (int)out->n;
}

/* A maps file of 64 MiB is far past TG_PERF_MAPS_MAX lines. */
#define MAPS_FILE_CAP (64u << 20)

int tg_perf_maps_read(int pid, const char *path, bool exec_only,
                      tg_perf_maps_t *out) {
  char buf[64];
  if (!path) {
    snprintf(buf, sizeof(buf), "/proc/%d/maps", pid);
    path = buf;
  }
  tg_buf_t text;
  tg_buf_init(&text, MAPS_FILE_CAP);
  int rv = tg_proc_read_file(path, &text);
  const char *t = (const char *)tg_buf_begin(&text);
  size_t len = tg_buf_size(&text);
  bool cut = rv == -ENOBUFS;
  if (cut) {
    /* Past the cap: parse the whole lines read, never a cut last one,
     * which would parse as a different mapping. */
    const char *nl = len ? memrchr(t, '\n', len) : NULL;
    len = nl ? (size_t)(nl - t) + 1 : 0;
    rv = 0;
  }
  if (rv == 0) rv = tg_perf_maps_parse(t, len, exec_only, out);
  if (rv >= 0 && cut) out->truncated = true;
  tg_buf_free(&text);
  return rv;
}

const tg_perf_map_t *tg_perf_maps_find(const tg_perf_maps_t *m, uint64_t addr) {
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->v[mid].start <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const tg_perf_map_t *c = &m->v[lo - 1];
  return addr < c->end ? c : NULL;
}

void tg_perf_reread_fill(tg_perf_reread_limit_t *l, uint64_t now_ms) {
  l->left = TG_PERF_MAPS_REREAD_BURST;
  l->refill_ms = now_ms;
}

bool tg_perf_reread_take(tg_perf_reread_limit_t *l, uint64_t now_ms) {
  if (now_ms > l->refill_ms) {
    uint64_t gained = (now_ms - l->refill_ms) / TG_PERF_MAPS_REREAD_MS;
    if (gained >= (uint64_t)(TG_PERF_MAPS_REREAD_BURST - l->left)) {
      tg_perf_reread_fill(l, now_ms);
    } else if (gained) {
      l->left = (uint8_t)(l->left + gained);
      l->refill_ms += gained * TG_PERF_MAPS_REREAD_MS;
    }
  }
  if (!l->left) return false;
  l->left--;
  return true;
}
