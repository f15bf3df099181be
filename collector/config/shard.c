/* Sharding hosts (shard.h): FNV-1a 64 and the jump consistent hash. Never
 * change a constant here: shards are part of a fleet's configuration. */
#include "collector/config/shard.h"

#include <assert.h>

#define FNV64_OFFSET 0xcbf29ce484222325ull
#define FNV64_PRIME 0x100000001b3ull
/* The jump hash's linear congruential step (Lamping and Veach, 2014). */
#define JUMP_MUL 2862933555777941757ull

uint64_t tg_coll_shard_key(const char *host, size_t n) {
  uint64_t h = FNV64_OFFSET;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)host[i];
    h *= FNV64_PRIME;
  }
  return h;
}

/* The paper's j = (b + 1) * (2^31 / ((key >> 33) + 1)) computed exactly:
 * (b + 1) * 2^31 < 2^48 for counts up to 2^17, so no overflow, and no
 * floating point whose rounding could differ between machines. */
static uint32_t jump(uint64_t key, uint32_t count) {
  int64_t b = -1, j = 0;
  while (j < (int64_t)count) {
    b = j;
    key = key * JUMP_MUL + 1;
    j = (int64_t)(((uint64_t)(b + 1) << 31) / ((key >> 33) + 1));
  }
  return (uint32_t)b;
}

uint32_t tg_coll_shard_of(const char *host, size_t n, uint32_t count) {
  assert(count >= 1 && count <= TG_COLL_SHARD_COUNT_MAX);
  return jump(tg_coll_shard_key(host, n), count);
}

bool tg_coll_shard_owns(const tg_coll_shard_t *s, const char *host, size_t n) {
  return tg_coll_shard_of(host, n, s->count) == s->index;
}
