/* The type-free part of a fixed-capacity set of keys: allocation, clear
 * and take. pid_set.h and inode_set.h are its typed faces; each keeps its
 * members in an array of its own key type and its add, has and find
 * inline over the fields here, and hands this file the array with a
 * tg_key_set_type_t that says how to hash a member.
 *
 * Open addressing with linear probing over at least twice as many slots
 * as members, so a probe always ends at an empty slot. A slot holds a
 * member's index + 1 in the array (0: empty): the array keeps insertion
 * order, for iteration, per-member marks and clearing only the slots in
 * use. A typed face adds a key at the first empty slot of its probe from
 * hash & mask, and adds each key at most once. Adding allocates nothing:
 * past the capacity a key is counted in |dropped|.
 */
#ifndef TRACEGATE_PROBES_KEY_SET_H
#define TRACEGATE_PROBES_KEY_SET_H

#include <stddef.h>
#include <stdint.h>

/* The largest capacity any set may have: its slots (a power of two at
 * least twice the capacity) and indexes + 1 stay within uint32_t. */
#define TG_KEY_SET_MAX_CAP (UINT32_C(1) << 30)

/* What a typed face tells the core about its members (static, const). */
typedef struct tg_key_set_type {
  size_t size;      /* bytes per member (> 0) */
  uint32_t max_cap; /* the largest cap init accepts; <= TG_KEY_SET_MAX_CAP */
  /* The start of |member|'s probe before masking: what the typed face's
   * inline add starts from. */
  uint32_t (*hash)(const void *member);
} tg_key_set_type_t;

/* Embedded as |base| in each typed face, which alone writes it through
 * this file and its inline add. */
typedef struct tg_key_set {
  uint32_t *slots;  /* member index + 1; 0: empty */
  uint32_t n, cap;  /* members, and how many fit */
  uint32_t mask;    /* slots - 1 (a power of two >= 2 * cap) */
  uint64_t dropped; /* keys not added for want of room */
} tg_key_set_t;

/* Room for |cap| (1 .. t->max_cap) members: |s|'s slots, and the member
 * array in |*members| (t->size bytes each), which the caller keeps beside
 * |s| and passes back to every call. Zeroes |s| and |*members| first.
 * Returns 0, -EINVAL, -ENOMEM. */
int tg_key_set_init(tg_key_set_t *s, const tg_key_set_type_t *t, uint32_t cap,
                    void **members);
/* Frees what init allocated and zeroes |s|; a zeroed or freed set (and
 * |members| NULL) is a no-op. */
void tg_key_set_free(tg_key_set_t *s, void *members);
/* Empties the set and its drop count; a zeroed set is a no-op. */
void tg_key_set_clear(tg_key_set_t *s, const tg_key_set_type_t *t,
                      const void *members);
/* Copies up to |cap| members, in insertion order, to |out| (room for |cap|
 * members) and removes them; the rest stay, in their order, and so does
 * the drop count. Returns how many. */
size_t tg_key_set_take(tg_key_set_t *s, const tg_key_set_type_t *t,
                       void *members, void *out, size_t cap);

#endif /* TRACEGATE_PROBES_KEY_SET_H */
