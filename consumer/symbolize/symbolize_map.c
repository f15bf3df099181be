/* SPDX-License-Identifier: Apache-2.0 */
/* The collector's seeded hash tables (symbolize_map.h). */
#include "consumer/symbolize/symbolize_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

uint64_t tg__sym_seed(void) {
  uint64_t s = 0;
  if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32 ^
        (uint64_t)(uintptr_t)&s;
  }
  return s;
}

uint64_t tg__sym_mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

uint64_t tg__sym_hash(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  /* Eight bytes at a time, each word folded into a state the seed has
   * already made secret; the length last, so that "a" and "a\0" differ. */
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, b, 8);
    h = tg__sym_mix(h ^ w);
    b += 8;
    n -= 8;
  }
  uint64_t w = 0;
  if (n) memcpy(&w, b, n); /* b may be NULL when n is 0 */
  h = tg__sym_mix(h ^ w);
  return tg__sym_mix(h ^ (uint64_t)n << 56);
}

/* --- u64 -> u32 --------------------------------------------------------- */

void tg__sym_imap_init(tg__sym_imap_t *m, uint64_t seed) {
  memset(m, 0, sizeof(*m));
  m->seed = seed;
}

void tg__sym_imap_clear(tg__sym_imap_t *m) {
  free(m->keys);
  free(m->vals);
  tg__sym_imap_init(m, m->seed);
}

static size_t imap_slot(const uint64_t *keys, size_t cap, uint64_t seed,
                        uint64_t k) {
  size_t i = (size_t)tg__sym_mix(k ^ seed) & (cap - 1);
  while (keys[i] && keys[i] != k) i = (i + 1) & (cap - 1);
  return i;
}

bool tg__sym_imap_get(const tg__sym_imap_t *m, uint64_t k, uint32_t *v) {
  if (!k) {
    if (m->has_zero) *v = m->zero_val;
    return m->has_zero;
  }
  if (!m->cap) return false;
  size_t i = imap_slot(m->keys, m->cap, m->seed, k);
  if (!m->keys[i]) return false;
  *v = m->vals[i];
  return true;
}

static int imap_grow(tg__sym_imap_t *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  uint64_t *keys = calloc(cap, sizeof(*keys));
  uint32_t *vals = calloc(cap, sizeof(*vals));
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return -ENOMEM;
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i]) {
      size_t j = imap_slot(keys, cap, m->seed, m->keys[i]);
      keys[j] = m->keys[i];
      vals[j] = m->vals[i];
    }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = cap;
  return 0;
}

int tg__sym_imap_put(tg__sym_imap_t *m, uint64_t k, uint32_t v, size_t max) {
  uint32_t old;
  bool fresh = !tg__sym_imap_get(m, k, &old);
  if (fresh && m->n >= max) return -E2BIG;
  if (!k) {
    m->has_zero = true;
    m->zero_val = v;
    m->n += fresh;
    return 0;
  }
  /* At most half full, so that a probe run stays short. */
  if (fresh && (m->n + 1) * 2 > m->cap) {
    int err = imap_grow(m);
    if (err) return err;
  }
  size_t i = imap_slot(m->keys, m->cap, m->seed, k);
  m->keys[i] = k;
  m->vals[i] = v;
  m->n += fresh;
  return 0;
}

/* --- records by hash ------------------------------------------------------ */

void tg__sym_index_clear(tg__sym_index_t *x) {
  free(x->slots);
  memset(x, 0, sizeof(*x));
}

bool tg__sym_index_next(const tg__sym_index_t *x, uint64_t h, size_t *i,
                        uint32_t *number) {
  for (;;) {
    uint64_t s = x->slots[*i];
    if (!s) return false;
    *i = (*i + 1) & (x->cap - 1);
    if ((uint32_t)(s >> 32) == (uint32_t)h) {
      *number = (uint32_t)s - 1;
      return true;
    }
  }
}

static void index_place(uint64_t *slots, size_t cap, uint64_t s) {
  size_t i = (size_t)(uint32_t)(s >> 32) & (cap - 1);
  while (slots[i]) i = (i + 1) & (cap - 1);
  slots[i] = s;
}

int tg__sym_index_add(tg__sym_index_t *x, uint64_t h, uint32_t number) {
  if ((x->n + 1) * 2 > x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 64;
    uint64_t *slots = calloc(cap, sizeof(*slots));
    if (!slots) return -ENOMEM;
    for (size_t i = 0; i < x->cap; i++)
      if (x->slots[i]) index_place(slots, cap, x->slots[i]);
    free(x->slots);
    x->slots = slots;
    x->cap = cap;
  }
  index_place(x->slots, x->cap, (uint64_t)(uint32_t)h << 32 | (number + 1u));
  x->n++;
  return 0;
}
