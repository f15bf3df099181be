/* SPDX-License-Identifier: Apache-2.0 */
/* Named address ranges: see addr_names.h. */
#include "common/addr_names.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tg_addr_names_init(tg_addr_names_t *t, size_t max, size_t max_pool) {
  memset(t, 0, sizeof(*t));
  /* seq and the pool's offsets are 32-bit. */
  t->max = max < UINT32_MAX ? max : UINT32_MAX;
  t->max_pool = max_pool < UINT32_MAX ? max_pool : UINT32_MAX;
}

int tg_addr_names_add_name(tg_addr_names_t *t, const char *name,
                           size_t name_len, uint32_t *off) {
  /* max_pool <= UINT32_MAX: every offset kept fits 32 bits. */
  if (name_len >= t->max_pool || t->pool_len > t->max_pool - name_len - 1) {
    t->dropped++;
    return 0;
  }
  size_t need = name_len + 1;
  if (t->pool_len + need > t->pool_cap) {
    size_t cap = t->pool_cap ? t->pool_cap : 1024;
    while (cap < t->pool_len + need) cap *= 2;
    if (cap > t->max_pool) cap = t->max_pool;
    char *p = realloc(t->pool, cap);
    if (!p) return -ENOMEM;
    t->pool = p;
    t->pool_cap = cap;
  }
  memcpy(t->pool + t->pool_len, name, name_len);
  t->pool[t->pool_len + name_len] = '\0';
  *off = (uint32_t)t->pool_len;
  t->pool_len += need;
  return 1;
}

int tg_addr_names_add_ref(tg_addr_names_t *t, uint64_t addr, uint64_t size,
                          uint32_t off) {
  if (t->n >= t->max) {
    t->dropped++;
    return 0;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    if (cap > t->max) cap = t->max;
    tg_addr_name_t *v = realloc(t->v, cap * sizeof(*v));
    if (!v) return -ENOMEM;
    t->v = v;
    t->cap = cap;
  }
  t->v[t->n] = (tg_addr_name_t){
      .addr = addr, .size = size, .name = off, .seq = (uint32_t)t->n};
  t->n++;
  return 0;
}

int tg_addr_names_add(tg_addr_names_t *t, uint64_t addr, uint64_t size,
                      const char *name, size_t name_len) {
  if (t->n >= t->max) {
    t->dropped++;
    return 0;
  }
  uint32_t off;
  int rv = tg_addr_names_add_name(t, name, name_len, &off);
  if (rv <= 0) return rv;
  return tg_addr_names_add_ref(t, addr, size, off);
}

size_t tg_addr_names_bytes(const tg_addr_names_t *t) {
  return t->cap * sizeof(*t->v) + t->pool_cap;
}

/* By address; at one address the one kept first: sized, then added
 * first. */
static int cmp_entry(const void *a, const void *b) {
  const tg_addr_name_t *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  if ((x->size == 0) != (y->size == 0)) return x->size == 0 ? 1 : -1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

size_t tg_addr_names_finish(tg_addr_names_t *t) {
  if (t->n) qsort(t->v, t->n, sizeof(*t->v), cmp_entry);
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++)
    if (!k || t->v[k - 1].addr != t->v[i].addr) t->v[k++] = t->v[i];
  t->n = k;
  /* The doublings leave up to half unused: give it back (a failed
   * shrink keeps the larger block, which stays valid). */
  if (k == 0) {
    free(t->v);
    t->v = NULL;
    t->cap = 0;
  } else if (k < t->cap) {
    tg_addr_name_t *v = realloc(t->v, k * sizeof(*v));
    if (v) t->v = v, t->cap = k;
  }
  if (t->pool_len == 0) {
    free(t->pool);
    t->pool = NULL;
    t->pool_cap = 0;
  } else if (t->pool_len < t->pool_cap) {
    char *p = realloc(t->pool, t->pool_len);
    if (p) t->pool = p, t->pool_cap = t->pool_len;
  }
  return k;
}

const char *tg_addr_names_find(const tg_addr_names_t *t, uint64_t addr,
                               tg_addr_size0_t size0) {
  size_t lo = 0, hi = t->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->v[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  /* v[lo - 1] is the last entry at or below |addr|; the next one, if
   * any, lies above it, so a size-0 entry under TO_NEXT holds |addr|. */
  const tg_addr_name_t *c = &t->v[lo - 1];
  if (c->size ? addr - c->addr < c->size : size0 == TG_ADDR_SIZE0_TO_NEXT)
    return t->pool + c->name;
  return NULL;
}

void tg_addr_names_free(tg_addr_names_t *t) {
  free(t->v);
  free(t->pool);
  memset(t, 0, sizeof(*t));
}
