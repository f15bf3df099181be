/* A table of strings keyed by kernel address, as /proc/kallsyms and
 * tracefs' printk_formats list them (ftrace_ksyms.h, ftrace_printk.h).
 *
 * Entries are added in the order their text lists them, then
 * tg__addr_strs_finish sorts them by address, keeps the first added of
 * each address and gives back the growth slack: the tables live for whole
 * sessions. After that the table is read only, and a search is a binary
 * search that allocates nothing. Strings are copied into one pool (not
 * NUL-terminated) that grows by doubling, never per entry; past the caps
 * an entry is counted in |dropped|, not kept. Parsing, and what an owner's
 * lookup accepts as a match, belong to the owners: this table never reads
 * text or does I/O.
 */
#ifndef TRACEGATE_AGENT_SYS_ADDR_STRS_H
#define TRACEGATE_AGENT_SYS_ADDR_STRS_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits (entries past them are dropped) and first allocation sizes. */
typedef struct tg__addr_strs_caps {
  size_t max_entries;
  size_t max_bytes; /* of strings in all; at most UINT32_MAX */
  size_t first_entries;
  size_t first_bytes;
} tg__addr_strs_caps_t;

typedef struct tg__addr_str {
  uint64_t addr;
  uint32_t off; /* in pool */
  uint32_t len;
} tg__addr_str_t;

/* Owners read |n| and |dropped|; entries only through the functions below. */
typedef struct tg__addr_strs {
  tg__addr_str_t *v;
  size_t n, cap;
  char *pool;
  size_t pool_len, pool_cap;
  tg__addr_strs_caps_t caps;
  uint64_t dropped; /* entries past the caps */
} tg__addr_strs_t;

/* What tg__addr_strs_search returns when no entry is at or below a key. */
#define TG__ADDR_STRS_NONE SIZE_MAX

/* An empty table; allocates nothing. |caps|' first sizes are non-zero. */
void tg__addr_strs_init(tg__addr_strs_t *t, tg__addr_strs_caps_t caps);
/* Copies [s, s + len) in as the string of |addr|. Returns 0 (also when the
 * entry is dropped past the caps) or -ENOMEM, with the table unchanged. */
int tg__addr_strs_add(tg__addr_strs_t *t, uint64_t addr, const char *s,
                      size_t len);
/* Sorts by address, keeps the first added of each, shrinks to size (a
 * failed shrink keeps the larger blocks). Entries added afterwards are
 * searched only after another finish. */
void tg__addr_strs_finish(tg__addr_strs_t *t);
/* Frees everything; the table is empty again, with the same caps. A
 * zero-filled table (never initialised) may be freed too. */
void tg__addr_strs_free(tg__addr_strs_t *t);

/* After finish: the index of the entry with the greatest address <= |key|,
 * or TG__ADDR_STRS_NONE. */
size_t tg__addr_strs_search(const tg__addr_strs_t *t, uint64_t key);

static inline uint64_t tg__addr_strs_addr(const tg__addr_strs_t *t, size_t i) {
  assert(i < t->n);
  return t->v[i].addr;
}

/* The string of entry |i|: |*len| bytes, not NUL-terminated, valid until
 * tg__addr_strs_free. */
static inline const char *tg__addr_strs_str(const tg__addr_strs_t *t, size_t i,
                                            size_t *len) {
  assert(i < t->n);
  *len = t->v[i].len;
  /* Only empty strings were added: no pool to point into. */
  return t->pool ? t->pool + t->v[i].off : "";
}

/* Bytes held. */
size_t tg__addr_strs_mem(const tg__addr_strs_t *t);

/* Whether |a| and |b| hold the same entries in the same order: addresses,
 * and strings byte for byte (caps, storage and |dropped| aside). For the
 * tests that parse a file whole and in pieces. */
bool tg__addr_strs_equal(const tg__addr_strs_t *a, const tg__addr_strs_t *b);

#endif /* TRACEGATE_AGENT_SYS_ADDR_STRS_H */
