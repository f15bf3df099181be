/* A set of (inode, device) pairs of fixed capacity: linux.ftrace collects
 * the inodes its records name into one while it encodes pages, the inode
 * feed keeps what a linux.inode_file_map instance has yet to resolve in
 * another, and the instance remembers in a third what a full scan did not
 * find.
 *
 * The typed face of key_set.h (open addressing over at least twice as many
 * slots as members, a slot holding a member's index + 1, members in
 * insertion order in |keys|, for iteration and per-member marks through
 * tg_inode_set_find): add and find stay inline here, on the encoder's
 * path. Inode 0 is no inode and never a member, so (0, 0) in |last| stands
 * for none. Adding allocates nothing: past the capacity a pair is counted
 * in |dropped|.
 */
#ifndef TRACEGATE_PROBES_INODE_SET_H
#define TRACEGATE_PROBES_INODE_SET_H

#include <stddef.h>
#include <stdint.h>

#include "agent/probes/key_set.h"

/* An inode on a device; |dev| as stat(2)'s st_dev. */
typedef struct tg_inode_key {
  uint64_t ino, dev;
} tg_inode_key_t;

typedef struct tg_inode_set {
  tg_key_set_t base; /* slots, count, capacity, drops: key_set.h */
  tg_inode_key_t *keys; /* the members, in insertion order */
  tg_inode_key_t last;  /* the last pair added or found: runs skip the probe */
} tg_inode_set_t;

/* Room for |cap| (1 .. 2^26) members. Returns 0, -EINVAL, -ENOMEM. */
int tg_inode_set_init(tg_inode_set_t *s, uint32_t cap);
/* Frees what init allocated; a zeroed or freed set is a no-op. */
void tg_inode_set_free(tg_inode_set_t *s);
/* Empties the set and its drop count. */
void tg_inode_set_clear(tg_inode_set_t *s);

/* The probe start before masking (key_set.h's hash). */
static inline uint32_t tg__inode_hash(uint64_t ino, uint64_t dev) {
  uint64_t h = (ino ^ (dev * UINT64_C(0x9e3779b97f4a7c15))) *
               UINT64_C(0xff51afd7ed558ccd);
  return (uint32_t)(h >> 32);
}

static inline uint32_t tg__inode_set_hash(const tg_inode_set_t *s, uint64_t ino,
                                          uint64_t dev) {
  return tg__inode_hash(ino, dev) & s->base.mask;
}

/* The index of (ino, dev) among the members, or -1. */
static inline int32_t tg_inode_set_find(const tg_inode_set_t *s, uint64_t ino,
                                        uint64_t dev) {
  if (ino == 0 || !s->base.slots) return -1;
  uint32_t k = tg__inode_set_hash(s, ino, dev);
  for (;; k = (k + 1) & s->base.mask) {
    uint32_t v = s->base.slots[k];
    if (v == 0) return -1;
    if (s->keys[v - 1].ino == ino && s->keys[v - 1].dev == dev)
      return (int32_t)(v - 1);
  }
}

/* Adds (ino, dev); inode 0 is ignored. */
static inline void tg_inode_set_add(tg_inode_set_t *s, uint64_t ino,
                                    uint64_t dev) {
  if (ino == 0 || (ino == s->last.ino && dev == s->last.dev)) return;
  uint32_t k = tg__inode_set_hash(s, ino, dev);
  for (;; k = (k + 1) & s->base.mask) {
    uint32_t v = s->base.slots[k];
    if (v == 0) break;
    if (s->keys[v - 1].ino == ino && s->keys[v - 1].dev == dev) {
      s->last = s->keys[v - 1];
      return;
    }
  }
  if (s->base.n == s->base.cap) {
    s->base.dropped++;
    return;
  }
  s->keys[s->base.n] = (tg_inode_key_t){ino, dev};
  s->base.slots[k] = ++s->base.n;
  s->last = (tg_inode_key_t){ino, dev};
}

/* Moves up to |cap| members, in insertion order, to |out|; the rest stay
 * (in their order). Returns how many. */
size_t tg_inode_set_take(tg_inode_set_t *s, tg_inode_key_t *out, size_t cap);

static inline uint32_t tg_inode_set_room(const tg_inode_set_t *s) {
  return s->base.cap - s->base.n;
}

#endif /* TRACEGATE_PROBES_INODE_SET_H */
