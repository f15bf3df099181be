/* SPDX-License-Identifier: Apache-2.0 */
/* The deduplicating table of a profile (profile_intern.h). */
#include "consumer/profile/profile_intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

uint64_t tg__prof_seed(void) {
  uint64_t s = 0;
  if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
  }
  return s;
}

static uint64_t hash(uint64_t seed, const uint8_t *p, size_t n) {
  uint64_t h = seed ^ 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  /* A final mix: FNV's low bits alone pick the slot. */
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

void tg__prof_itab_init(tg__prof_itab_t *t, uint64_t seed, size_t max_n,
                        size_t max_bytes) {
  memset(t, 0, sizeof(*t));
  t->seed = seed;
  t->max_n = max_n;
  t->max_bytes = max_bytes;
}

void tg__prof_itab_free(tg__prof_itab_t *t) {
  free(t->slots);
  free(t->hashes);
  free(t->offs);
  free(t->arena);
  size_t max_n = t->max_n, max_bytes = t->max_bytes;
  uint64_t seed = t->seed;
  tg__prof_itab_init(t, seed, max_n, max_bytes);
}

static int grow_slots(tg__prof_itab_t *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  uint32_t *s = calloc(cap, sizeof(*s));
  if (!s) return -ENOMEM;
  for (size_t i = 0; i < t->n; i++) {
    size_t j = t->hashes[i] & (cap - 1);
    while (s[j]) j = (j + 1) & (cap - 1);
    s[j] = (uint32_t)i + 1;
  }
  free(t->slots);
  t->slots = s;
  t->cap = cap;
  return 0;
}

static int find(const tg__prof_itab_t *t, uint64_t h, const void *key,
                size_t len, uint32_t *idx) {
  if (!t->cap) return -ENOENT;
  for (size_t j = h & (t->cap - 1); t->slots[j]; j = (j + 1) & (t->cap - 1)) {
    uint32_t i = t->slots[j] - 1;
    size_t klen;
    const uint8_t *k = tg__prof_itab_key(t, i, &klen);
    if (t->hashes[i] == h && klen == len && (!len || !memcmp(k, key, len))) {
      *idx = i;
      return 0;
    }
  }
  return -ENOENT;
}

int tg__prof_itab_find(const tg__prof_itab_t *t, const void *key, size_t len,
                       uint32_t *idx) {
  return find(t, hash(t->seed, key, len), key, len, idx);
}

int tg__prof_itab_add(tg__prof_itab_t *t, const void *key, size_t len,
                      uint32_t *idx, int *added) {
  *added = 0;
  uint64_t h = hash(t->seed, key, len);
  if (find(t, h, key, len, idx) == 0) return 0;
  if (t->n >= t->max_n || len > t->max_bytes - t->arena_len) return -ENOSPC;
  if ((t->n + 1) * 2 > t->cap && grow_slots(t) < 0) return -ENOMEM;
  if (t->n + 2 > t->cap_entries) {
    size_t c = t->cap_entries ? t->cap_entries * 2 : 64;
    uint64_t *hs = realloc(t->hashes, c * sizeof(*hs));
    if (!hs) return -ENOMEM;
    t->hashes = hs;
    size_t *os = realloc(t->offs, c * sizeof(*os));
    if (!os) return -ENOMEM;
    t->offs = os;
    t->cap_entries = c;
  }
  if (len > t->arena_cap - t->arena_len) {
    size_t c = t->arena_cap ? t->arena_cap : 4096;
    while (c - t->arena_len < len) c *= 2;
    uint8_t *a = realloc(t->arena, c);
    if (!a) return -ENOMEM;
    t->arena = a;
    t->arena_cap = c;
  }
  if (len) memcpy(t->arena + t->arena_len, key, len);
  t->offs[t->n] = t->arena_len;
  t->arena_len += len;
  t->offs[t->n + 1] = t->arena_len;
  t->hashes[t->n] = h;
  size_t j = h & (t->cap - 1);
  while (t->slots[j]) j = (j + 1) & (t->cap - 1);
  t->slots[j] = (uint32_t)t->n + 1;
  *idx = (uint32_t)t->n++;
  *added = 1;
  return 0;
}
