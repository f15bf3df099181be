/* SPDX-License-Identifier: Apache-2.0 */
/* Names of an x86-64 ELF file's PLT entries ("NAME@plt", as perf and
 * objdump call them), synthesized from the PLT sections and their
 * relocations: no symbol table holds them, stripped or not.
 *
 * The layouts read (x86-64 psABI, GNU ld):
 *
 *   .plt      16-byte entries; entry 0 is the resolver's header, entry
 *             i + 1 belongs to relocation i of .rela.plt. With IBT
 *             (-fcf-protection and -z ibtplt, or every input marked)
 *             these are the lazy-binding PLT entries and the calls go to
 *   .plt.sec  16-byte entries, no header, entry i for relocation i.
 *   .plt.got  8-byte (16 with IBT) entries for functions bound at load
 *             time: each is a `jmp *disp32(%rip)` (after an endbr64,
 *             with or without a bnd prefix) through a GOT slot that an
 *             R_X86_64_GLOB_DAT relocation of .rela.dyn names.
 *
 * The relocations' symbols are those of the table .rela.plt / .rela.dyn
 * link to (.dynsym), their names in the table that links to (.dynstr).
 * The header and the IRELATIVE slots (no symbol) stay unnamed. A file
 * whose sections hold no bytes (SHT_NOBITS: the debug files of objcopy
 * --only-keep-debug) gives no names: the stripped binary keeps them.
 *
 * The file is untrusted: it is read through common/elf_read.h, which
 * checks every offset, size, entry size, index and count against the
 * |len| bytes given, so a bad file gives fewer names or -EBADMSG, never
 * a read out of bounds. Pure: no I/O. */
#ifndef TRACEGATE_COMMON_ELF_PLT_H
#define TRACEGATE_COMMON_ELF_PLT_H

#include <stddef.h>
#include <stdint.h>

#include "common/addr_names.h"

/* Bounds of what one file may make the table keep. */
#define TG_PLT_MAX (1u << 18)
#define TG_PLT_NAME_MAX 1024 /* bytes of a symbol's name, "@plt" apart */
/* Bytes of names in all: every relocation may name one long symbol, and
 * TG_PLT_MAX of them would otherwise cost 256 MiB; a real PLT holds a
 * few thousand names of tens of bytes. */
#define TG_PLT_NAMES_MAX_BYTES (4u << 20)

/* An entry: the PLT entry's ELF address and length, "NAME@plt" in the
 * pool. The table is sorted by address, one entry per address. */
typedef tg_addr_name_t tg_plt_sym_t;
typedef tg_addr_names_t tg_plt_t;

/* Loads the named PLT entries of the file of |len| bytes at |buf| (borrowed for
 * the call) into |out| (owned by the caller: tg_plt_free). Returns the
 * number kept (0 for a file without PLT names or not x86-64), -EBADMSG
 * for a header that runs past the bytes, -ENOTSUP for an ELF that is not
 * 64-bit little-endian, -ENOMEM. */
int tg_plt_load(const uint8_t *buf, size_t len, tg_plt_t *out);

/* "NAME@plt" for the PLT entry holding ELF address |addr| (owned by |p|), or
 * NULL: tg_addr_names_find under TG_ADDR_SIZE0_EMPTY (every entry has
 * its size). When a file lists one address twice, the first listed
 * (.rela.plt's before .plt.got's, each in its order) names it. */
const char *tg_plt_find(const tg_plt_t *p, uint64_t addr);

void tg_plt_free(tg_plt_t *p);

#endif /* TRACEGATE_COMMON_ELF_PLT_H */
