/* SPDX-License-Identifier: Apache-2.0 */
/* A profile's deduplicating table: byte keys to dense indices (0, 1, ...)
 * in the order they were first added. Open addressing over a keyed hash
 * (the seed is drawn per profile, so a host cannot line its keys up on one
 * chain); keys live in one arena. Bounded by entry count and key bytes:
 * past either, adding fails with -ENOSPC and the table is unchanged. */
#ifndef TRACEGATE_CONSUMER_PROFILE_PROFILE_INTERN_H
#define TRACEGATE_CONSUMER_PROFILE_PROFILE_INTERN_H

#include <stddef.h>
#include <stdint.h>

typedef struct tg__prof_itab {
  uint32_t *slots;  /* index + 1; 0: free */
  uint64_t *hashes; /* per entry */
  size_t *offs;     /* per entry: its key in |arena|; offs[i + 1] ends it */
  size_t cap, n, cap_entries;
  uint8_t *arena;
  size_t arena_len, arena_cap;
  size_t max_n, max_bytes;
  uint64_t seed;
} tg__prof_itab_t;

void tg__prof_itab_init(tg__prof_itab_t *t, uint64_t seed, size_t max_n,
                        size_t max_bytes);
void tg__prof_itab_free(tg__prof_itab_t *t);
/* |key|'s index, added if new (*added). 0, -ENOSPC, -ENOMEM. */
int tg__prof_itab_add(tg__prof_itab_t *t, const void *key, size_t len,
                      uint32_t *idx, int *added);
/* |key|'s index: 0, or -ENOENT. */
int tg__prof_itab_find(const tg__prof_itab_t *t, const void *key, size_t len,
                       uint32_t *idx);
static inline const uint8_t *tg__prof_itab_key(const tg__prof_itab_t *t,
                                               uint32_t i, size_t *len) {
  *len = t->offs[i + 1] - t->offs[i];
  return t->arena + t->offs[i];
}
uint64_t tg__prof_seed(void);

#endif /* TRACEGATE_CONSUMER_PROFILE_PROFILE_INTERN_H */
