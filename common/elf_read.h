/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded reads of a 64-bit little-endian ELF file held in memory: the
 * header, the section headers, a section by index or by name, the
 * section another links to, a symbol table's entries and their names.
 * common/elf_plt.c and tracegate-perf's agent/perf/perf_elf.c read ELF
 * files through it.
 *
 * The file is untrusted (a process may map anything, a trace names any
 * file): every offset, size, entry size, index and count is checked
 * against the |len| bytes given before a byte is read, so a bad file
 * gives an error or "no such section/symbol", never a read out of
 * bounds. A section's bytes are those the file holds: none for
 * SHT_NOBITS (.bss, or every section of a debug file's stripped copy),
 * none for one that runs past the end. Pure: no I/O, no allocation. */
#ifndef TRACEGATE_COMMON_ELF_READ_H
#define TRACEGATE_COMMON_ELF_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_ELF_EHDR_SIZE 64
#define TG_ELF_SHDR_SIZE 64
#define TG_ELF_SYM_SIZE 24
#define TG_ELF_SHT_SYMTAB 2
#define TG_ELF_SHT_NOBITS 8
#define TG_ELF_SHT_DYNSYM 11

static inline uint16_t tg_elf_rd16(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t tg_elf_rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static inline uint64_t tg_elf_rd64(const uint8_t *p) {
  return (uint64_t)tg_elf_rd32(p) | (uint64_t)tg_elf_rd32(p + 4) << 32;
}

/* [off, off + n) lies inside |len| bytes (no overflow for any values). */
static inline bool tg_elf_within(uint64_t off, uint64_t n, size_t len) {
  return off <= len && n <= len - off;
}

typedef struct tg_elf_file {
  const uint8_t *buf; /* borrowed: the caller keeps it for the reads */
  size_t len;
  /* Set by tg_elf_sections only, once the table is checked: 0 before. */
  uint64_t shoff;
  unsigned shentsize, shnum;
  unsigned shstrndx; /* 0: no usable section name table */
} tg_elf_file_t;

typedef struct tg_elf_sec {
  uint32_t name, type, link;
  uint64_t addr, off, size, align, entsize;
  const uint8_t *bytes; /* |size| bytes; NULL: SHT_NOBITS or past the end */
} tg_elf_sec_t;

/* Checks the ELF header of the |len| bytes at |buf| (borrowed for the
 * life of |f|) and sets |f| up with no sections. Returns 0, -EBADMSG
 * (shorter than a header, or not ELF) or -ENOTSUP (not 64-bit LE). */
int tg_elf_open(const uint8_t *buf, size_t len, tg_elf_file_t *f);

/* Checks the section header table of |f| (opened): entries of at least
 * 64 bytes, all inside the file. Returns 0 with the sections readable
 * (none when e_shnum is 0: that is also the extended numbering of files
 * with more than 65279 sections, which no program is), or -EBADMSG with
 * none. */
int tg_elf_sections(tg_elf_file_t *f);

/* Section |i|: false when |i| is not below f->shnum. */
bool tg_elf_sec(const tg_elf_file_t *f, unsigned i, tg_elf_sec_t *out);
/* The first section from index 1 called |name| exactly, or false (also
 * when the file has no section name table). */
bool tg_elf_sec_named(const tg_elf_file_t *f, const char *name,
                      tg_elf_sec_t *out);
/* The section |s|'s sh_link names: false for link 0 or past the table. */
bool tg_elf_sec_link(const tg_elf_file_t *f, const tg_elf_sec_t *s,
                     tg_elf_sec_t *out);
/* How many entries of at least |min_entsize| bytes |s| holds: 0 when it
 * has no bytes or its entry size is below |min_entsize| (0 included). */
uint64_t tg_elf_sec_count(const tg_elf_sec_t *s, uint64_t min_entsize);

/* A symbol table and its string table, both inside the file. */
typedef struct tg_elf_symtab {
  const uint8_t *syms;
  uint64_t n, entsize;
  const char *strs;
  uint64_t strsize;
} tg_elf_symtab_t;

typedef struct tg_elf_symbol {
  uint32_t name;
  uint8_t info; /* type: info & 0xf */
  uint16_t shndx;
  uint64_t value, size;
} tg_elf_symbol_t;

/* The symbols of |s| (SHT_SYMTAB or SHT_DYNSYM, with its bytes and
 * entries of at least 24 bytes) and the string table it links to (with
 * its bytes). Returns false for anything else. */
bool tg_elf_symtab(const tg_elf_file_t *f, const tg_elf_sec_t *s,
                   tg_elf_symtab_t *out);
/* Symbol |i| of |t|: false when |i| is not below t->n. */
bool tg_elf_symbol(const tg_elf_symtab_t *t, uint64_t i,
                   tg_elf_symbol_t *out);
/* The string at offset |off| of |t|'s string table when it ends (NUL)
 * within |max| bytes of text, with its length in |*n|; NULL when |off|
 * is past the table or the string is longer. May be "". */
const char *tg_elf_str(const tg_elf_symtab_t *t, uint64_t off, size_t max,
                       size_t *n);

#endif /* TRACEGATE_COMMON_ELF_READ_H */
