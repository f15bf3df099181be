/* A u32 -> u32 hash map: open addressing with linear probing, grown at
 * half load, bounded by a maximum entry count fixed at init.
 *
 * Owns: its two slot arrays. Must never: abort or grow past its bound
 * (insertions fail with -ENOSPC), nor keep pointers into them valid across
 * an insertion. Not thread-safe; every key is allowed, 0 included.
 */
#ifndef TRACEGATE_COMMON_U32_MAP_H
#define TRACEGATE_COMMON_U32_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_u32_map {
  uint32_t *keys; /* 0 marks a free slot; key 0 itself lives in zero_val */
  uint32_t *vals;
  size_t cap;       /* slots, a power of two (0 before the first insert) */
  size_t count;     /* entries, key 0 included */
  size_t max_count; /* insertions beyond it fail; 0: no bound */
  bool has_zero;
  uint32_t zero_val;
} tg_u32_map_t;

/* An empty map holding at most |max_count| entries (0: bounded by memory
 * only). Allocates nothing; a zero-filled map is the same as init(m, 0). */
void tg_u32_map_init(tg_u32_map_t *m, size_t max_count);
/* Frees the slots; |m| is empty (same bound) and usable again. */
void tg_u32_map_free(tg_u32_map_t *m);
/* True and *val set when |key| is present; *val untouched otherwise. */
bool tg_u32_map_get(const tg_u32_map_t *m, uint32_t key, uint32_t *val);
/* Inserts |key| or updates its value. 0, -ENOMEM (map unchanged) or
 * -ENOSPC when a new key would exceed the bound. */
int tg_u32_map_put(tg_u32_map_t *m, uint32_t key, uint32_t val);
static inline size_t tg_u32_map_count(const tg_u32_map_t *m) { return m->count; }

#endif /* TRACEGATE_COMMON_U32_MAP_H */
