/* SPDX-License-Identifier: Apache-2.0 */
/* A table of named address ranges [addr, addr + size), built once and
 * then searched by address: the PLT entries of common/elf_plt.h and
 * tracegate-perf's function symbols (agent/perf/perf_elf.h).
 *
 * Building: tg_addr_names_init with the most entries the table keeps,
 * tg_addr_names_add for each range in any order, tg_addr_names_finish.
 * Past the cap, adds are dropped: a file cannot make the table grow
 * without bound. The names are copied into one pool; an entry names
 * its string by offset, so the pool may move while it grows.
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
  size_t cap, pool_cap, max; /* allocated entries and bytes; the cap */
} tg_addr_names_t;

typedef enum tg_addr_size0 {
  TG_ADDR_SIZE0_EMPTY,   /* a range of size 0 holds no address */
  TG_ADDR_SIZE0_TO_NEXT, /* it holds every address up to the next entry */
} tg_addr_size0_t;

/* An empty table that keeps at most |max| entries (owned by the caller:
 * tg_addr_names_free). Allocates nothing until an add. */
void tg_addr_names_init(tg_addr_names_t *t, size_t max);

/* Adds [addr, addr + size) named by the |name_len| bytes at |name|
 * (copied; a NUL is appended). Returns 0 (also when the table is full:
 * the entry is dropped), or -ENOMEM (memory, or a pool past the 4 GiB
 * that 32-bit offsets name: callers' caps on entries and names keep it
 * far below). */
int tg_addr_names_add(tg_addr_names_t *t, uint64_t addr, uint64_t size,
                      const char *name, size_t name_len);

/* Sorts and keeps one entry per address (see above). Returns t->n. */
size_t tg_addr_names_finish(tg_addr_names_t *t);

/* The name (owned by |t|) of the entry holding |addr|, of a finished
 * table: the one at the greatest address not above |addr|, when |addr|
 * lies before its end or it has size 0 under |size0|
 * TG_ADDR_SIZE0_TO_NEXT. NULL otherwise. */
const char *tg_addr_names_find(const tg_addr_names_t *t, uint64_t addr,
                               tg_addr_size0_t size0);

void tg_addr_names_free(tg_addr_names_t *t);

#endif /* TRACEGATE_COMMON_ADDR_NAMES_H */
