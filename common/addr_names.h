/* SPDX-License-Identifier: Apache-2.0 */
/* A table of named address ranges [addr, addr + size), built once and
 * then searched by address: the PLT entries of common/elf_plt.h and
 * tracegate-perf's function symbols (agent/perf/perf_elf.h).
 *
 * Building: tg_addr_names_init with the most entries and name bytes the
 * table keeps, tg_addr_names_add for each range in any order,
 * tg_addr_names_finish. Past either cap, adds are dropped and counted: a
 * file cannot make the table grow without bound. The names are copied
 * into one pool; an entry names its string by offset, so the pool may
 * move while it grows, and entries may share one copy of a name
 * (tg_addr_names_add_name, then tg_addr_names_add_ref for each), so
 * that a name repeated costs its bytes once. finish gives back what the
 * growth left unused.
 *
 * One name per address: finish sorts by address and keeps, of the
 * entries at one address, a sized one over one of size 0 and, among
 * those alike, the one added first.
 *
 * Two rules for what a range of size 0 holds (tg_addr_names_find):
 * nothing (a PLT entry always has its size), or every address up to the
 * next entry (an ELF symbol without st_size, as hand-written assembly
 * leaves them: perf and addr2line name the addresses after it by it). */
#ifndef TRACEGATE_COMMON_ADDR_NAMES_H
#define TRACEGATE_COMMON_ADDR_NAMES_H

#include <stddef.h>
#include <stdint.h>

typedef struct tg_addr_name {
  uint64_t addr, size;
  uint32_t name; /* offset of the NUL-terminated name in the pool */
  uint32_t seq;  /* order of the add, which finish's choice among alike
                    entries at one address follows */
} tg_addr_name_t;

typedef struct tg_addr_names {
  tg_addr_name_t *v; /* sorted by addr, one per addr, after finish */
  size_t n;
  char *pool;
  size_t pool_len;
  size_t cap, pool_cap; /* allocated entries and bytes */
  size_t max, max_pool; /* the caps on entries and on the pool's bytes */
  size_t dropped;       /* adds refused by a cap */
} tg_addr_names_t;

typedef enum tg_addr_size0 {
  TG_ADDR_SIZE0_EMPTY,   /* a range of size 0 holds no address */
  TG_ADDR_SIZE0_TO_NEXT, /* it holds every address up to the next entry */
} tg_addr_size0_t;

/* An empty table that keeps at most |max| entries and |max_pool| bytes
 * of names, NULs included (owned by the caller: tg_addr_names_free).
 * Allocates nothing until an add. */
void tg_addr_names_init(tg_addr_names_t *t, size_t max, size_t max_pool);

/* Adds [addr, addr + size) named by the |name_len| bytes at |name|
 * (copied; a NUL is appended). Returns 0 (also when a cap is reached:
 * the entry is dropped and counted), or -ENOMEM. */
int tg_addr_names_add(tg_addr_names_t *t, uint64_t addr, uint64_t size,
                      const char *name, size_t name_len);
/* Copies a name into the pool alone, for tg_addr_names_add_ref. Returns
 * 1 with its offset in |*off|, 0 when the pool's cap leaves no room for
 * it (counted as a drop), or -ENOMEM. */
int tg_addr_names_add_name(tg_addr_names_t *t, const char *name,
                           size_t name_len, uint32_t *off);
/* Adds [addr, addr + size) named by the name at |off|, which
 * tg_addr_names_add_name gave for |t|. Returns 0 (also when full:
 * dropped and counted), or -ENOMEM. */
int tg_addr_names_add_ref(tg_addr_names_t *t, uint64_t addr, uint64_t size,
                          uint32_t off);
/* The bytes |t| holds allocated (entries and pool). */
size_t tg_addr_names_bytes(const tg_addr_names_t *t);

/* Sorts, keeps one entry per address (see above) and shrinks the
 * allocations to what is kept. Returns t->n. */
size_t tg_addr_names_finish(tg_addr_names_t *t);

/* The name (owned by |t|) of the entry holding |addr|, of a finished
 * table: the one at the greatest address not above |addr|, when |addr|
 * lies before its end or it has size 0 under |size0|
 * TG_ADDR_SIZE0_TO_NEXT. NULL otherwise. */
const char *tg_addr_names_find(const tg_addr_names_t *t, uint64_t addr,
                               tg_addr_size0_t size0);

void tg_addr_names_free(tg_addr_names_t *t);

#endif /* TRACEGATE_COMMON_ADDR_NAMES_H */
