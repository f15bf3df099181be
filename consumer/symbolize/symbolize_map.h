/* SPDX-License-Identifier: Apache-2.0 */
/* The symbolizer collector's hash tables (symbolize.c): a sequence's
 * interned ids, the sequences, the modules. Every key comes from the
 * trace, which a hostile host writes: a table with a fixed hash lets it
 * choose keys that share one probe run and turn each lookup into a scan
 * (the trace then costs the square of its size). So each tg_sym_t draws a
 * secret seed (getrandom) and every hash mixes it in before a full
 * avalanche (the 64-bit finaliser of MurmurHash3), and the tables stay at
 * most half full.
 *
 * Owns: the slot arrays. Must never: keep a pointer into a table across
 * an insertion. Internal to consumer/symbolize. */
#ifndef TRACEGATE_CONSUMER_SYMBOLIZE_MAP_H
#define TRACEGATE_CONSUMER_SYMBOLIZE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* u64 -> u32, open addressing with linear probing; every key allowed. */
typedef struct tg__sym_imap {
  uint64_t *keys; /* 0 marks a free slot; key 0 itself is has_zero */
  uint32_t *vals;
  size_t cap, n; /* cap: 0 or a power of two; n: keys, 0 included */
  uint64_t seed;
  bool has_zero;
  uint32_t zero_val;
} tg__sym_imap_t;

/* A seed no trace can guess: getrandom, or the clock and an address
 * when it fails (a weaker seed, never a failure). */
uint64_t tg__sym_seed(void);
/* |x| mixed so that every input bit moves every output bit. */
uint64_t tg__sym_mix(uint64_t x);
/* |h| extended by |n| bytes at |p| (start from a seed). */
uint64_t tg__sym_hash(uint64_t h, const void *p, size_t n);

/* An empty map hashing with |seed|; allocates nothing. */
void tg__sym_imap_init(tg__sym_imap_t *m, uint64_t seed);
/* Frees the slots; |m| is empty, its seed kept. */
void tg__sym_imap_clear(tg__sym_imap_t *m);
bool tg__sym_imap_get(const tg__sym_imap_t *m, uint64_t k, uint32_t *v);
/* Inserts or updates. 0, -E2BIG when a new key would make more than
 * |max| keys, -ENOMEM (the map unchanged). */
int tg__sym_imap_put(tg__sym_imap_t *m, uint64_t k, uint32_t v, size_t max);

/* An index of records held elsewhere by their number: each slot keeps a
 * record's number + 1 and 32 bits of its hash, so a probe compares a
 * record only when those match. The caller compares the records. */
typedef struct tg__sym_index {
  uint64_t *slots; /* 0: free; else hash32 << 32 | (number + 1) */
  size_t cap, n;
} tg__sym_index_t;

void tg__sym_index_clear(tg__sym_index_t *x);
/* The first slot to look at for |h| (cap must be non-zero): the low 32
 * bits of the hash, those a slot keeps, choose it. */
static inline size_t tg__sym_index_start(const tg__sym_index_t *x,
                                         uint64_t h) {
  return (size_t)(uint32_t)h & (x->cap - 1);
}
/* The record number in slot |*i| whose hash is |h|, advancing *i past it;
 * false at the first free slot (the record is not there). */
bool tg__sym_index_next(const tg__sym_index_t *x, uint64_t h, size_t *i,
                        uint32_t *number);
/* Adds record |number| with hash |h| (not present already). 0 or
 * -ENOMEM (the index unchanged). */
int tg__sym_index_add(tg__sym_index_t *x, uint64_t h, uint32_t number);

#endif /* TRACEGATE_CONSUMER_SYMBOLIZE_MAP_H */
