/* u64 -> u32 map; see u64_map.h. */
#include "common/u64_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static uint64_t random_seed(void) {
  uint64_t s = 0;
  if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
  }
  return s | 1;
}

void tg_u64_map_init(tg_u64_map_t *mp, size_t max_count) {
  memset(mp, 0, sizeof(*mp));
  mp->max_count = max_count;
  mp->seed = random_seed();
}

void tg_u64_map_free(tg_u64_map_t *mp) {
  free(mp->keys);
  free(mp->vals);
  mp->keys = NULL;
  mp->vals = NULL;
  mp->cap = mp->count = 0;
}

static size_t map_slot(const uint64_t *keys, const uint32_t *vals, size_t cap,
                       uint64_t seed, uint64_t key) {
  uint64_t h = (key ^ seed) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  size_t i = (size_t)(h >> 32) & (cap - 1);
  while (vals[i] && keys[i] != key) i = (i + 1) & (cap - 1);
  return i;
}

uint32_t tg_u64_map_get(const tg_u64_map_t *mp, uint64_t key) {
  if (!mp->cap) return 0;
  return mp->vals[map_slot(mp->keys, mp->vals, mp->cap, mp->seed, key)];
}

int tg_u64_map_put(tg_u64_map_t *mp, uint64_t key, uint32_t val) {
  if (mp->cap) {
    size_t i = map_slot(mp->keys, mp->vals, mp->cap, mp->seed, key);
    if (mp->vals[i]) {
      mp->vals[i] = val;
      return 0;
    }
  }
  if (mp->count >= mp->max_count) return -ENOSPC;
  if ((mp->count + 1) * 2 > mp->cap) { /* half load at most */
    size_t cap = mp->cap ? mp->cap * 2 : 64;
    uint64_t *k = calloc(cap, sizeof(*k));
    uint32_t *v = calloc(cap, sizeof(*v));
    if (!k || !v) {
      free(k);
      free(v);
      return -ENOMEM;
    }
    for (size_t i = 0; i < mp->cap; i++) {
      if (!mp->vals[i]) continue;
      size_t j = map_slot(k, v, cap, mp->seed, mp->keys[i]);
      k[j] = mp->keys[i];
      v[j] = mp->vals[i];
    }
    free(mp->keys);
    free(mp->vals);
    mp->keys = k;
    mp->vals = v;
    mp->cap = cap;
  }
  size_t i = map_slot(mp->keys, mp->vals, mp->cap, mp->seed, key);
  mp->keys[i] = key;
  mp->vals[i] = val;
  mp->count++;
  return 0;
}

