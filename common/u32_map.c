/* u32 -> u32 map; see u32_map.h. */
#include "common/u32_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_CAP 64

/* Fibonacci hashing: consecutive keys (writer ids) spread over the table. */
static size_t slot_of(const uint32_t *keys, size_t cap, uint32_t key) {
  size_t i = (key * 2654435761u) & (cap - 1);
  while (keys[i] && keys[i] != key) i = (i + 1) & (cap - 1);
  return i;
}

void tg_u32_map_init(tg_u32_map_t *m, size_t max_count) {
  memset(m, 0, sizeof(*m));
  m->max_count = max_count;
}

static bool full(const tg_u32_map_t *m) {
  return m->max_count && m->count >= m->max_count;
}

void tg_u32_map_free(tg_u32_map_t *m) {
  free(m->keys);
  free(m->vals);
  tg_u32_map_init(m, m->max_count);
}

bool tg_u32_map_get(const tg_u32_map_t *m, uint32_t key, uint32_t *val) {
  if (key == 0) {
    if (m->has_zero) *val = m->zero_val;
    return m->has_zero;
  }
  if (!m->cap) return false;
  size_t i = slot_of(m->keys, m->cap, key);
  if (!m->keys[i]) return false;
  *val = m->vals[i];
  return true;
}

static int grow(tg_u32_map_t *m) {
  if (m->cap > SIZE_MAX / 2 / sizeof(uint32_t)) return -ENOMEM;
  size_t cap = m->cap ? m->cap * 2 : FIRST_CAP;
  uint32_t *k = calloc(cap, sizeof(*k)), *v = calloc(cap, sizeof(*v));
  if (!k || !v) {
    free(k);
    free(v);
    return -ENOMEM;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = slot_of(k, cap, m->keys[i]);
    k[j] = m->keys[i];
    v[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = k;
  m->vals = v;
  m->cap = cap;
  return 0;
}

int tg_u32_map_put(tg_u32_map_t *m, uint32_t key, uint32_t val) {
  if (key == 0) {
    if (!m->has_zero) {
      if (full(m)) return -ENOSPC;
      m->has_zero = true;
      m->count++;
    }
    m->zero_val = val;
    return 0;
  }
  if (m->cap) {
    size_t i = slot_of(m->keys, m->cap, key);
    if (m->keys[i]) {
      m->vals[i] = val;
      return 0;
    }
  }
  if (full(m)) return -ENOSPC;
  /* Half load at most keeps probe chains short. */
  if ((m->count + 1) * 2 > m->cap) {
    int rv = grow(m);
    if (rv < 0) return rv;
  }
  size_t i = slot_of(m->keys, m->cap, key);
  m->keys[i] = key;
  m->vals[i] = val;
  m->count++;
  return 0;
}
