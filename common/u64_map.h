/* A u64 -> u32 hash map: open addressing with linear probing, grown at
 * half load, bounded by a maximum entry count fixed at init. Keys are
 * mixed with a random key drawn at init before they are hashed, so that
 * whoever picks the keys (a host's flow ids, track uuids) cannot line
 * them up on one probe chain.
 *
 * Owns: its two slot arrays. Must never: abort or grow past its bound
 * (insertions fail with -ENOSPC). Values are never 0: 0 is a free slot,
 * and "no value" for tg_u64_map_get. Not thread-safe.
 */
#ifndef TRACEGATE_COMMON_U64_MAP_H
#define TRACEGATE_COMMON_U64_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct tg_u64_map {
  uint64_t *keys;
  uint32_t *vals; /* 0: a free slot */
  size_t cap;     /* slots, a power of two (0 before the first insert) */
  size_t count, max_count;
  uint64_t seed;
} tg_u64_map_t;

/* An empty map of at most |max_count| entries; allocates nothing. */
void tg_u64_map_init(tg_u64_map_t *mp, size_t max_count);
/* Frees the slots; |mp| is empty (same bound) and usable again. */
void tg_u64_map_free(tg_u64_map_t *mp);
/* |key|'s value, or 0 when it has none. */
uint32_t tg_u64_map_get(const tg_u64_map_t *mp, uint64_t key);
/* Sets |key| to |val| (not 0): 0, -ENOSPC past the bound, -ENOMEM (the
 * map unchanged). */
int tg_u64_map_put(tg_u64_map_t *mp, uint64_t key, uint32_t val);

#endif /* TRACEGATE_COMMON_U64_MAP_H */
