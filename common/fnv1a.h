/* FNV-1a, 64 bits: a fast hash for in-memory indexes keyed by short
 * strings (host names, cache keys). Not for untrusted keys that could be
 * chosen to collide where that costs more than a longer probe. */
#ifndef TRACEGATE_COMMON_FNV1A_H
#define TRACEGATE_COMMON_FNV1A_H

#include <stddef.h>
#include <stdint.h>

#define TG_FNV1A_SEED 1469598103934665603ull

/* |h| extended by |n| bytes at |p|; start from TG_FNV1A_SEED. */
static inline uint64_t tg_fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

#endif /* TRACEGATE_COMMON_FNV1A_H */
