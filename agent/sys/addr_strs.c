/* The address-keyed string table; see addr_strs.h. */
#include "agent/sys/addr_strs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tg__addr_strs_init(tg__addr_strs_t *t, tg__addr_strs_caps_t caps) {
  /* Offsets and lengths are 32-bit. */
  assert(caps.max_bytes <= UINT32_MAX);
  assert(caps.first_entries > 0 && caps.first_bytes > 0);
  memset(t, 0, sizeof(*t));
  t->caps = caps;
}

void tg__addr_strs_free(tg__addr_strs_t *t) {
  free(t->v);
  free(t->pool);
  tg__addr_strs_caps_t caps = t->caps;
  memset(t, 0, sizeof(*t));
  t->caps = caps;
}

int tg__addr_strs_add(tg__addr_strs_t *t, uint64_t addr, const char *s,
                      size_t len) {
  const tg__addr_strs_caps_t *c = &t->caps;
  if (t->n >= c->max_entries || len > c->max_bytes - t->pool_len) {
    t->dropped++;
    return 0;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : c->first_entries;
    if (cap > c->max_entries) cap = c->max_entries;
    tg__addr_str_t *v = realloc(t->v, cap * sizeof(*v));
    if (!v) return -ENOMEM;
    t->v = v;
    t->cap = cap;
  }
  size_t need = t->pool_len + len;
  if (need > t->pool_cap) {
    size_t cap = t->pool_cap ? t->pool_cap : c->first_bytes;
    while (cap < need) cap *= 2;
    if (cap > c->max_bytes) cap = c->max_bytes;
    char *p = realloc(t->pool, cap);
    if (!p) return -ENOMEM;
    t->pool = p;
    t->pool_cap = cap;
  }
  if (len) memcpy(t->pool + t->pool_len, s, len);
  t->v[t->n++] = (tg__addr_str_t){
      .addr = addr, .off = (uint32_t)t->pool_len, .len = (uint32_t)len};
  t->pool_len = need;
  return 0;
}

static int by_addr(const void *a, const void *b) {
  const tg__addr_str_t *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  /* The pool only grows, so of two entries the one added first has the
   * lower offset, or the same one and no bytes. Two that tie on both are
   * the same entry. */
  if (x->off != y->off) return x->off < y->off ? -1 : 1;
  return x->len < y->len ? -1 : x->len > y->len;
}

/* |p| resized to |n| elements of |size|, and |*cap| with it: NULL at 0,
 * |p| itself when realloc fails. */
static void *shrink(void *p, size_t *cap, size_t n, size_t size) {
  if (n == *cap) return p;
  if (n == 0) {
    free(p);
    *cap = 0;
    return NULL;
  }
  void *q = realloc(p, n * size);
  if (!q) return p;
  *cap = n;
  return q;
}

void tg__addr_strs_finish(tg__addr_strs_t *t) {
  if (t->n) qsort(t->v, t->n, sizeof(*t->v), by_addr);
  size_t out = 0;
  for (size_t i = 0; i < t->n; i++)
    if (out == 0 || t->v[i].addr != t->v[out - 1].addr) t->v[out++] = t->v[i];
  t->n = out;
  /* The strings of dropped duplicates stay in the pool: they are few. */
  t->v = shrink(t->v, &t->cap, t->n, sizeof(*t->v));
  t->pool = shrink(t->pool, &t->pool_cap, t->pool_len, 1);
}

size_t tg__addr_strs_search(const tg__addr_strs_t *t, uint64_t key) {
  /* The first entry above |key|; the one before it is the answer. */
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->v[mid].addr <= key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo ? lo - 1 : TG__ADDR_STRS_NONE;
}

size_t tg__addr_strs_mem(const tg__addr_strs_t *t) {
  return t->cap * sizeof(*t->v) + t->pool_cap;
}

bool tg__addr_strs_equal(const tg__addr_strs_t *a, const tg__addr_strs_t *b) {
  if (a->n != b->n) return false;
  for (size_t i = 0; i < a->n; i++) {
    size_t al, bl;
    const char *as = tg__addr_strs_str(a, i, &al);
    const char *bs = tg__addr_strs_str(b, i, &bl);
    if (a->v[i].addr != b->v[i].addr || al != bl || memcmp(as, bs, al) != 0)
      return false;
  }
  return true;
}
