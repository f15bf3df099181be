/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded reads of a 64-bit little-endian ELF file: see elf_read.h. */
#include "common/elf_read.h"

#include <errno.h>
#include <string.h>

int tg_elf_open(const uint8_t *buf, size_t len, tg_elf_file_t *f) {
  memset(f, 0, sizeof(*f));
  if (len < TG_ELF_EHDR_SIZE || memcmp(buf, "\x7f" "ELF", 4) != 0)
    return -EBADMSG;
  if (buf[4] != 2 || buf[5] != 1) return -ENOTSUP; /* 64-bit, LE */
  f->buf = buf;
  f->len = len;
  return 0;
}

int tg_elf_sections(tg_elf_file_t *f) {
  uint64_t shoff = tg_elf_rd64(f->buf + 40);
  unsigned shentsize = tg_elf_rd16(f->buf + 58);
  unsigned shnum = tg_elf_rd16(f->buf + 60);
  unsigned shstrndx = tg_elf_rd16(f->buf + 62);
  f->shnum = 0;
  if (shnum == 0) return 0;
  if (shentsize < TG_ELF_SHDR_SIZE ||
      !tg_elf_within(shoff, (uint64_t)shentsize * shnum, f->len))
    return -EBADMSG;
  f->shoff = shoff;
  f->shentsize = shentsize;
  f->shnum = shnum;
  f->shstrndx = shstrndx < shnum ? shstrndx : 0;
  return 0;
}

/* Section header |i| < f->shnum: inside the checked table. */
static const uint8_t *shdr(const tg_elf_file_t *f, unsigned i) {
  return f->buf + f->shoff + (uint64_t)i * f->shentsize;
}

bool tg_elf_sec(const tg_elf_file_t *f, unsigned i, tg_elf_sec_t *out) {
  if (i >= f->shnum) return false;
  const uint8_t *sh = shdr(f, i);
  *out = (tg_elf_sec_t){.name = tg_elf_rd32(sh),
                        .type = tg_elf_rd32(sh + 4),
                        .addr = tg_elf_rd64(sh + 16),
                        .off = tg_elf_rd64(sh + 24),
                        .size = tg_elf_rd64(sh + 32),
                        .link = tg_elf_rd32(sh + 40),
                        .align = tg_elf_rd64(sh + 48),
                        .entsize = tg_elf_rd64(sh + 56)};
  if (out->type != TG_ELF_SHT_NOBITS &&
      tg_elf_within(out->off, out->size, f->len))
    out->bytes = f->buf + out->off;
  return true;
}

bool tg_elf_sec_named(const tg_elf_file_t *f, const char *name,
                      tg_elf_sec_t *out) {
  tg_elf_sec_t names;
  if (f->shstrndx == 0 || !tg_elf_sec(f, f->shstrndx, &names) ||
      !names.bytes)
    return false;
  size_t want = strlen(name) + 1;
  for (unsigned i = 1; i < f->shnum; i++) {
    uint64_t n = tg_elf_rd32(shdr(f, i));
    if (n >= names.size || names.size - n < want) continue;
    if (memcmp(names.bytes + n, name, want) == 0) return tg_elf_sec(f, i, out);
  }
  return false;
}

bool tg_elf_sec_link(const tg_elf_file_t *f, const tg_elf_sec_t *s,
                     tg_elf_sec_t *out) {
  return s->link != 0 && tg_elf_sec(f, s->link, out);
}

uint64_t tg_elf_sec_count(const tg_elf_sec_t *s, uint64_t min_entsize) {
  if (!s->bytes || min_entsize == 0 || s->entsize < min_entsize) return 0;
  return s->size / s->entsize;
}

bool tg_elf_symtab(const tg_elf_file_t *f, const tg_elf_sec_t *s,
                   tg_elf_symtab_t *out) {
  tg_elf_sec_t str;
  if (s->type != TG_ELF_SHT_SYMTAB && s->type != TG_ELF_SHT_DYNSYM)
    return false;
  uint64_t n = tg_elf_sec_count(s, TG_ELF_SYM_SIZE);
  if (n == 0 || !tg_elf_sec_link(f, s, &str) || !str.bytes) return false;
  *out = (tg_elf_symtab_t){.syms = s->bytes,
                           .n = n,
                           .entsize = s->entsize,
                           .strs = (const char *)str.bytes,
                           .strsize = str.size};
  return true;
}

bool tg_elf_symbol(const tg_elf_symtab_t *t, uint64_t i,
                   tg_elf_symbol_t *out) {
  if (i >= t->n) return false;
  const uint8_t *p = t->syms + i * t->entsize;
  *out = (tg_elf_symbol_t){.name = tg_elf_rd32(p),
                           .info = p[4],
                           .shndx = tg_elf_rd16(p + 6),
                           .value = tg_elf_rd64(p + 8),
                           .size = tg_elf_rd64(p + 16)};
  return true;
}

const char *tg_elf_str(const tg_elf_symtab_t *t, uint64_t off, size_t max,
                       size_t *n) {
  if (off >= t->strsize) return NULL;
  uint64_t room = t->strsize - off;
  if (room > max) room = (uint64_t)max + 1; /* max < room: no wrap */
  const char *s = t->strs + off;
  const char *nul = memchr(s, 0, (size_t)room);
  if (!nul) return NULL;
  *n = (size_t)(nul - s);
  return s;
}
