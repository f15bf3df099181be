/* What tracegate-perf reads of an ELF file: its build id (from the notes),
 * its loadable segments (to turn a file offset into the address a
 * symbolizer knows, Perfetto's rel_pc), its load bias, and the function
 * symbols of .symtab and .dynsym and the PLT entries' "NAME@plt" (to name
 * frames on the host).
 *
 * Every parser here works on bytes the caller holds (a file mapped or
 * read whole) and checks every offset, size and count against them
 * (the sections through common/elf_read.h):
 * files are untrusted (a process may map anything), so a bad one yields
 * -EBADMSG or fewer symbols, never a read out of bounds. Only 64-bit
 * little-endian ELF is read (-ENOTSUP otherwise).
 */
#ifndef TRACEGATE_PERF_PERF_ELF_H
#define TRACEGATE_PERF_PERF_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/addr_names.h"

#define TG_ELF_BUILD_ID_MAX 64
#define TG_ELF_LOADS_MAX 16
/* Bounds of what one file's symbols may cost, whatever the file holds:
 * entries (24 bytes each: 24 MiB), and bytes of names (a large unstripped
 * C++ program holds some millions of bytes of function names; a crafted
 * file could point a million symbols at one 1 KiB name). One copy of a
 * name serves every symbol of a table that names it by the same offset
 * (as far as a small cache of recent offsets sees), and of the tables
 * only the first SHT_SYMTAB and the first SHT_DYNSYM are read: the ELF
 * specification allows one of each, and a file repeating a section
 * header must not multiply the cost. */
#define TG_ELF_SYMS_MAX (1u << 20)
#define TG_ELF_NAMES_MAX_BYTES (32u << 20)
#define TG_ELF_SYM_NAME_MAX 1024 /* bytes of a name, its NUL included */

/* Finds the GNU build id (NT_GNU_BUILD_ID, owner "GNU") among the notes
 * of |len| bytes at |notes| (a PT_NOTE segment or SHT_NOTE section whose
 * entries are padded to |align|: 4 or 8; other values count as 4).
 * Returns 1 with the id in |id| (|*id_len| bytes), 0 when the notes hold
 * none, -EBADMSG when a note's sizes run past the end. */
int tg_elf_notes_build_id(const uint8_t *notes, size_t len, uint64_t align,
                          uint8_t id[TG_ELF_BUILD_ID_MAX], size_t *id_len);

typedef struct tg_elf_load {
  uint64_t offset, vaddr, filesz;
  bool exec;
} tg_elf_load_t;

typedef struct tg_elf {
  uint8_t build_id[TG_ELF_BUILD_ID_MAX];
  size_t build_id_len; /* 0: none */
  uint64_t load_bias;  /* p_vaddr - p_offset of the first executable load */
  tg_elf_load_t loads[TG_ELF_LOADS_MAX];
  size_t n_loads;
} tg_elf_t;

/* Parses the ELF header, program headers and notes of the file of |len|
 * bytes at |buf|. Returns 0, -EBADMSG or -ENOTSUP. */
int tg_elf_parse(const uint8_t *buf, size_t len, tg_elf_t *out);
/* The address in the ELF's own terms of file offset |off|: through the
 * load holding it, else |off| + load_bias. */
uint64_t tg_elf_vaddr(const tg_elf_t *e, uint64_t off);

/* An entry: a function's ELF address and size, its name in the pool.
 * The table is sorted by address, one entry per address. */
typedef tg_addr_name_t tg_elf_sym_t;
typedef tg_addr_names_t tg_elf_syms_t;

/* Loads the function symbols (STT_FUNC, STT_GNU_IFUNC, defined) of
 * .symtab and .dynsym (each table with its bytes in the file and linked
 * to a string table that has them), and the PLT entries as "NAME@plt"
 * (common/elf_plt.h), into |out| (owned by the caller:
 * tg_elf_syms_free). Of the entries at one address the sized one is
 * kept, else the first in section order (.dynsym before .symtab as
 * linkers lay them out, PLT entries last). Past TG_ELF_SYMS_MAX entries
 * or TG_ELF_NAMES_MAX_BYTES of names, symbols are dropped and counted
 * (|out->dropped|). Returns the number kept, -EBADMSG, -ENOTSUP or
 * -ENOMEM. A file without symbols gives 0. */
int tg_elf_syms_load(const uint8_t *buf, size_t len, tg_elf_syms_t *out);
/* The name of the function holding |addr| (ELF address), or NULL: the
 * symbol at or below it, when |addr| lies within its size or it has
 * none (then it runs to the next symbol): tg_addr_names_find under
 * TG_ADDR_SIZE0_TO_NEXT. */
const char *tg_elf_syms_find(const tg_elf_syms_t *s, uint64_t addr);
void tg_elf_syms_free(tg_elf_syms_t *s);

#endif /* TRACEGATE_PERF_PERF_ELF_H */
