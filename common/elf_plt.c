/* SPDX-License-Identifier: Apache-2.0 */
/* PLT entry names of an x86-64 ELF file: see elf_plt.h. */
#include "common/elf_plt.h"

#include "common/elf_read.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define RELA_SIZE 24
#define EM_X86_64 62
#define SHT_RELA 4
#define R_X86_64_GLOB_DAT 6
#define R_X86_64_JUMP_SLOT 7
#define PLT_ENTRY 16

/* A relocation section's symbols and their names. */
static bool symtab_of(const tg_elf_file_t *e, const tg_elf_sec_t *rela,
                      tg_elf_symtab_t *out) {
  tg_elf_sec_t sym;
  return tg_elf_sec_link(e, rela, &sym) && tg_elf_symtab(e, &sym, out);
}

/* The relocations of the SHT_RELA section called |name|, or 0. */
static uint64_t rela_named(const tg_elf_file_t *e, const char *name,
                           tg_elf_sec_t *rela, tg_elf_symtab_t *t) {
  if (!tg_elf_sec_named(e, name, rela) || rela->type != SHT_RELA)
    return 0;
  uint64_t n = tg_elf_sec_count(rela, RELA_SIZE);
  return n && symtab_of(e, rela, t) ? n : 0;
}

/* The name of symbol |idx|: its bytes and length, or NULL. */
static const char *sym_name(const tg_elf_symtab_t *t, uint64_t idx,
                            size_t *n) {
  tg_elf_symbol_t sym;
  if (idx == 0 || !tg_elf_symbol(t, idx, &sym)) return NULL;
  const char *s = tg_elf_str(t, sym.name, TG_PLT_NAME_MAX, n);
  return s && *n ? s : NULL;
}

/* Adds "NAME@plt" for the |name_len| bytes at |name|: at most
 * TG_PLT_NAME_MAX, the bound sym_name reads names under. */
static int add(tg_plt_t *p, uint64_t addr, uint64_t size, const char *name,
               size_t name_len) {
  static const char suffix[] = "@plt";
  char full[TG_PLT_NAME_MAX + sizeof(suffix)];
  memcpy(full, name, name_len);
  memcpy(full + name_len, suffix, sizeof(suffix) - 1);
  return tg_addr_names_add(p, addr, size, full,
                           name_len + sizeof(suffix) - 1);
}

/* .plt (after its header) and .plt.sec: one 16-byte entry per relocation
 * of .rela.plt, in its order. */
static int from_rela_plt(const tg_elf_file_t *e, tg_plt_t *p) {
  tg_elf_sec_t rela, plt, sec;
  tg_elf_symtab_t t;
  uint64_t count = rela_named(e, ".rela.plt", &rela, &t);
  if (count == 0) return 0;
  bool has_plt = tg_elf_sec_named(e, ".plt", &plt) &&
                 (plt.entsize == 0 || plt.entsize == PLT_ENTRY);
  bool has_sec = tg_elf_sec_named(e, ".plt.sec", &sec) &&
                 (sec.entsize == 0 || sec.entsize == PLT_ENTRY);
  uint64_t n_plt = has_plt && plt.size >= PLT_ENTRY
                       ? plt.size / PLT_ENTRY - 1 : 0;
  uint64_t n_sec = has_sec ? sec.size / PLT_ENTRY : 0;
  for (uint64_t i = 0; i < count && (i < n_plt || i < n_sec); i++) {
    const uint8_t *r = rela.bytes + i * rela.entsize;
    uint64_t info = tg_elf_rd64(r + 8);
    if ((info & 0xffffffffu) != R_X86_64_JUMP_SLOT) continue;
    size_t n;
    const char *name = sym_name(&t, info >> 32, &n);
    if (!name) continue;
    int rv = 0;
    if (i < n_plt) rv = add(p, plt.addr + (i + 1) * PLT_ENTRY, PLT_ENTRY, name, n);
    if (!rv && i < n_sec) rv = add(p, sec.addr + i * PLT_ENTRY, PLT_ENTRY, name, n);
    if (rv) return rv;
  }
  return 0;
}

typedef struct slot {
  uint64_t got;
  uint64_t sym;
} slot_t;

static int cmp_slot(const void *a, const void *b) {
  const slot_t *x = a, *y = b;
  return x->got < y->got ? -1 : x->got > y->got;
}

/* The GOT slot entry |at| (|es| bytes, ELF address |addr|) jumps through:
 * [endbr64] [bnd] jmp *disp32(%rip). */
static bool plt_got_slot(const uint8_t *at, uint64_t es, uint64_t addr,
                         uint64_t *slot) {
  uint64_t p = 0;
  if (es >= 4 && at[0] == 0xf3 && at[1] == 0x0f && at[2] == 0x1e &&
      at[3] == 0xfa)
    p = 4;
  if (p < es && at[p] == 0xf2) p++;
  if (es < p + 6 || at[p] != 0xff || at[p + 1] != 0x25) return false;
  int32_t disp = (int32_t)tg_elf_rd32(at + p + 2);
  *slot = addr + p + 6 + (uint64_t)(int64_t)disp;
  return true;
}

/* .plt.got: each entry named by the GLOB_DAT relocation of its GOT slot. */
static int from_plt_got(const tg_elf_file_t *e, tg_plt_t *p) {
  tg_elf_sec_t got, rela;
  tg_elf_symtab_t t;
  uint64_t count, n = 0;
  if (!tg_elf_sec_named(e, ".plt.got", &got) || !got.bytes ||
      (got.entsize != 8 && got.entsize != 16) ||
      (count = rela_named(e, ".rela.dyn", &rela, &t)) == 0)
    return 0;
  slot_t *slots = malloc(count * sizeof(*slots));
  if (!slots) return -ENOMEM;
  for (uint64_t i = 0; i < count; i++) {
    const uint8_t *r = rela.bytes + i * rela.entsize;
    uint64_t info = tg_elf_rd64(r + 8);
    if ((info & 0xffffffffu) == R_X86_64_GLOB_DAT)
      slots[n++] = (slot_t){tg_elf_rd64(r), info >> 32};
  }
  qsort(slots, n, sizeof(*slots), cmp_slot);
  int rv = 0;
  for (uint64_t j = 0; j < got.size / got.entsize && !rv; j++) {
    uint64_t addr = got.addr + j * got.entsize;
    slot_t key;
    if (!plt_got_slot(got.bytes + j * got.entsize, got.entsize, addr, &key.got))
      continue;
    const slot_t *s = bsearch(&key, slots, n, sizeof(*slots), cmp_slot);
    size_t len;
    const char *name = s ? sym_name(&t, s->sym, &len) : NULL;
    if (name) rv = add(p, addr, got.entsize, name, len);
  }
  free(slots);
  return rv;
}

int tg_plt_load(const uint8_t *buf, size_t len, tg_plt_t *out) {
  tg_elf_file_t e;
  tg_addr_names_init(out, TG_PLT_MAX, TG_PLT_NAMES_MAX_BYTES);
  int rv = tg_elf_open(buf, len, &e);
  if (rv < 0) return rv;
  if (tg_elf_rd16(buf + 18) != EM_X86_64) return 0;
  rv = tg_elf_sections(&e);
  if (rv < 0) return rv;
  rv = from_rela_plt(&e, out);
  if (!rv) rv = from_plt_got(&e, out);
  if (rv) {
    tg_addr_names_free(out);
    return rv;
  }
  /* One name per address (a file may list a slot twice): the first. */
  return (int)tg_addr_names_finish(out);
}

const char *tg_plt_find(const tg_plt_t *p, uint64_t addr) {
  return tg_addr_names_find(p, addr, TG_ADDR_SIZE0_EMPTY);
}

void tg_plt_free(tg_plt_t *p) { tg_addr_names_free(p); }
