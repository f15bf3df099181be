/* Fuzzes tracegate-perf's ELF readers (agent/perf/perf_elf.h): a process
 * may map any file, so the headers, notes and symbol tables are anything.
 *
 * The input is the file; its first byte also picks the note alignment for
 * a direct run of the note parser over the whole input. A build id must
 * be at most TG_ELF_BUILD_ID_MAX bytes, the loads at most
 * TG_ELF_LOADS_MAX; symbols must come sorted by address with
 * NUL-terminated names inside the pool, every symbol's address must
 * name a symbol, and the table must stay within its caps (entries, name
 * bytes, and what both hold allocated). Nothing may crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/perf/perf_elf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t id[TG_ELF_BUILD_ID_MAX];
  size_t id_len = 0;
  int rv = tg_elf_notes_build_id(data, size, size && (data[0] & 1) ? 8 : 4,
                                 id, &id_len);
  if (rv == 1 && (id_len == 0 || id_len > TG_ELF_BUILD_ID_MAX)) abort();

  tg_elf_t elf;
  if (tg_elf_parse(data, size, &elf) == 0) {
    if (elf.build_id_len > TG_ELF_BUILD_ID_MAX ||
        elf.n_loads > TG_ELF_LOADS_MAX)
      abort();
    for (size_t i = 0; i < elf.n_loads; i++)
      (void)tg_elf_vaddr(&elf, elf.loads[i].offset);
  }
  tg_elf_syms_t s;
  int n = tg_elf_syms_load(data, size, &s);
  if (n > 0) {
    if ((size_t)n != s.n || s.n > TG_ELF_SYMS_MAX ||
        s.pool_len > TG_ELF_NAMES_MAX_BYTES ||
        tg_addr_names_bytes(&s) > TG_ELF_SYMS_MAX * sizeof(tg_elf_sym_t) +
                                      TG_ELF_NAMES_MAX_BYTES)
      abort();
    for (size_t i = 0; i < s.n; i++) {
      if (s.v[i].name >= s.pool_len) abort();
      if (!memchr(s.pool + s.v[i].name, 0, s.pool_len - s.v[i].name)) abort();
      if (i && s.v[i - 1].addr >= s.v[i].addr) abort();
      if (!tg_elf_syms_find(&s, s.v[i].addr)) abort();
    }
    tg_elf_syms_free(&s);
  }
  return 0;
}
