/* SPDX-License-Identifier: Apache-2.0 */
/* Named address ranges: see addr_names.h. */
#include "common/addr_names.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tg_addr_names_init(tg_addr_names_t *t, size_t max) {
  memset(t, 0, sizeof(*t));
  /* seq and the pool's offsets are 32-bit. */
  t->max = max < UINT32_MAX ? max : UINT32_MAX;
}

int tg_addr_names_add(tg_addr_names_t *t, uint64_t addr, uint64_t size,
                      const char *name, size_t name_len) {
  if (t->n >= t->max) return 0;
  if (name_len >= UINT32_MAX || t->pool_len > UINT32_MAX - name_len - 1)
    return -ENOMEM;
  size_t need = name_len + 1;
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    tg_addr_name_t *v = realloc(t->v, cap * sizeof(*v));
    if (!v) return -ENOMEM;
    t->v = v;
    t->cap = cap;
  }
  if (t->pool_len + need > t->pool_cap) {
    size_t cap = t->pool_cap ? t->pool_cap : 1024;
    while (cap < t->pool_len + need) cap *= 2;
    char *p = realloc(t->pool, cap);
    if (!p) return -ENOMEM;
    t->pool = p;
    t->pool_cap = cap;
  }
  memcpy(t->pool + t->pool_len, name, name_len);
  t->pool[t->pool_len + name_len] = '\0';
  t->v[t->n] = (tg_addr_name_t){.addr = addr,
                                .size = size,
                                .name = (uint32_t)t->pool_len,
                                .seq = (uint32_t)t->n};
  t->n++;
  t->pool_len += need;
  return 0;
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
