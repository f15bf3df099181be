/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the PLT entry names of an ELF file (common/elf_plt.h), which
 * tracegate-perf reads from any file a process maps and `tracegate
 * symbolize` from debug files and modules: headers, sections, relocations
 * and symbol tables are anything.
 *
 * The input is the file. The names must come sorted by address, one per
 * address, at most TG_PLT_MAX, each inside the pool, NUL-terminated and
 * ending in "@plt", and every entry's first and last byte must find its
 * own name. Nothing may crash or leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/elf_plt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_plt_t p;
  int n = tg_plt_load(data, size, &p);
  if (n <= 0) {
    if (p.v || p.pool || p.n) abort();
    return 0;
  }
  if ((size_t)n != p.n || p.n > TG_PLT_MAX) abort();
  for (size_t i = 0; i < p.n; i++) {
    const tg_plt_sym_t *s = &p.v[i];
    if (s->name >= p.pool_len || s->size == 0) abort();
    const char *name = p.pool + s->name;
    const char *nul = memchr(name, 0, p.pool_len - s->name);
    if (!nul || nul - name < 5 || memcmp(nul - 4, "@plt", 4) != 0) abort();
    if (i && p.v[i - 1].addr >= s->addr) abort();
    /* Entries may overlap in a crafted file: the first byte is its own. */
    if (tg_plt_find(&p, s->addr) != name) abort();
  }
  tg_plt_free(&p);
  return 0;
}
