/* ELF build ids, loads and symbols: see perf_elf.h. */
#include "agent/perf/perf_elf.h"

#include "common/elf_plt.h"
#include "common/elf_read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PHDR_SIZE 56
#define PT_LOAD 1
#define PT_NOTE 4
#define PF_X 1
#define SHT_NOTE 7
#define STT_FUNC 2
#define STT_GNU_IFUNC 10
#define NT_GNU_BUILD_ID 3

static uint64_t pad(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

int tg_elf_notes_build_id(const uint8_t *notes, size_t len, uint64_t align,
                          uint8_t id[TG_ELF_BUILD_ID_MAX], size_t *id_len) {
  if (align != 8) align = 4;
  uint64_t off = 0;
  while (off < len) {
    if (!tg_elf_within(off, 12, len)) return -EBADMSG;
    uint64_t namesz = tg_elf_rd32(notes + off), descsz = tg_elf_rd32(notes + off + 4);
    uint32_t type = tg_elf_rd32(notes + off + 8);
    uint64_t name_off = off + 12;
    uint64_t desc_off = name_off + pad(namesz, align);
    if (!tg_elf_within(name_off, namesz, len) || !tg_elf_within(desc_off, descsz, len))
      return -EBADMSG;
    if (type == NT_GNU_BUILD_ID && namesz == 4 &&
        memcmp(notes + name_off, "GNU", 4) == 0 && descsz > 0 &&
        descsz <= TG_ELF_BUILD_ID_MAX) {
      memcpy(id, notes + desc_off, descsz);
      *id_len = descsz;
      return 1;
    }
    uint64_t next = desc_off + pad(descsz, align);
    if (next <= off) return -EBADMSG;
    off = next;
  }
  return 0;
}

int tg_elf_parse(const uint8_t *buf, size_t len, tg_elf_t *out) {
  tg_elf_file_t f;
  tg_elf_sec_t sec;
  memset(out, 0, sizeof(*out));
  int rv = tg_elf_open(buf, len, &f);
  if (rv < 0) return rv;
  uint64_t phoff = tg_elf_rd64(buf + 32);
  uint16_t phentsize = tg_elf_rd16(buf + 54), phnum = tg_elf_rd16(buf + 56);
  if (phnum && (phentsize < PHDR_SIZE ||
                !tg_elf_within(phoff, (uint64_t)phentsize * phnum, len)))
    return -EBADMSG;
  bool bias_set = false;
  for (unsigned i = 0; i < phnum; i++) {
    const uint8_t *ph = buf + phoff + (uint64_t)i * phentsize;
    uint32_t type = tg_elf_rd32(ph), flags = tg_elf_rd32(ph + 4);
    uint64_t offset = tg_elf_rd64(ph + 8), vaddr = tg_elf_rd64(ph + 16);
    uint64_t filesz = tg_elf_rd64(ph + 32), palign = tg_elf_rd64(ph + 48);
    if (type == PT_LOAD && out->n_loads < TG_ELF_LOADS_MAX) {
      tg_elf_load_t *l = &out->loads[out->n_loads++];
      l->offset = offset;
      l->vaddr = vaddr;
      l->filesz = filesz;
      l->exec = flags & PF_X;
      if (l->exec && !bias_set) {
        out->load_bias = vaddr - offset;
        bias_set = true;
      }
    } else if (type == PT_NOTE && !out->build_id_len &&
               tg_elf_within(offset, filesz, len)) {
      size_t n = 0;
      if (tg_elf_notes_build_id(buf + offset, (size_t)filesz, palign,
                                out->build_id, &n) == 1)
        out->build_id_len = n;
    }
  }
  /* No PT_NOTE with the id (a debug file, or a stripped layout): look in
   * the SHT_NOTE sections, when the section table is whole. */
  if (out->build_id_len || tg_elf_sections(&f) < 0) return 0;
  for (unsigned i = 0; !out->build_id_len && tg_elf_sec(&f, i, &sec); i++) {
    size_t n = 0;
    if (sec.type == SHT_NOTE && sec.bytes &&
        tg_elf_notes_build_id(sec.bytes, (size_t)sec.size, sec.align,
                              out->build_id, &n) == 1)
      out->build_id_len = n;
  }
  return 0;
}

uint64_t tg_elf_vaddr(const tg_elf_t *e, uint64_t off) {
  for (size_t i = 0; i < e->n_loads; i++) {
    const tg_elf_load_t *l = &e->loads[i];
    if (off >= l->offset && off - l->offset < l->filesz)
      return off - l->offset + l->vaddr;
  }
  return off + e->load_bias;
}

/* Recent name offsets of one string table and their copies in the
 * pool: symbols naming one string by the same offset (aliases, or a
 * crafted file's million of them) share one copy. Direct-mapped: a miss
 * only costs another copy, which the pool's cap bounds. */
#define NAME_CACHE 1024

typedef struct name_cache {
  uint32_t str_off[NAME_CACHE];
  uint32_t pool_off[NAME_CACHE];
  bool used[NAME_CACHE];
} name_cache_t;

/* The defined function symbols of |t|. */
static int load_table(const tg_elf_symtab_t *t, tg_elf_syms_t *out,
                      name_cache_t *c) {
  tg_elf_symbol_t s;
  memset(c->used, 0, sizeof(c->used));
  for (uint64_t i = 0; tg_elf_symbol(t, i, &s); i++) {
    uint8_t type = s.info & 0xf;
    size_t n;
    const char *name;
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.shndx == 0 ||
        s.value == 0 || s.name == 0 ||
        !(name = tg_elf_str(t, s.name, TG_ELF_SYM_NAME_MAX - 1, &n)))
      continue;
    if (out->n >= out->max) {
      out->dropped++; /* the rest of the table is not looked at */
      return 0;
    }
    size_t h = (s.name * 2654435761u) % NAME_CACHE;
    if (!c->used[h] || c->str_off[h] != s.name) {
      int rv = tg_addr_names_add_name(out, name, n, &c->pool_off[h]);
      if (rv < 0) return rv;
      if (rv == 0) continue; /* no room for the name: dropped, counted */
      c->used[h] = true;
      c->str_off[h] = s.name;
    }
    int rv = tg_addr_names_add_ref(out, s.value, s.size, c->pool_off[h]);
    if (rv < 0) return rv;
  }
  return 0;
}

int tg_elf_syms_load(const uint8_t *buf, size_t len, tg_elf_syms_t *out) {
  tg_elf_file_t f;
  tg_elf_sec_t sec;
  tg_elf_symtab_t t;
  tg_plt_t plt;
  int n;
  bool seen_symtab = false, seen_dynsym = false;
  name_cache_t *cache = NULL;
  tg_addr_names_init(out, TG_ELF_SYMS_MAX, TG_ELF_NAMES_MAX_BYTES);
  int rv = tg_elf_open(buf, len, &f);
  if (rv == 0) rv = tg_elf_sections(&f);
  if (rv < 0) return rv;
  for (unsigned i = 0; rv == 0 && tg_elf_sec(&f, i, &sec); i++) {
    bool *seen = sec.type == TG_ELF_SHT_SYMTAB   ? &seen_symtab
                 : sec.type == TG_ELF_SHT_DYNSYM ? &seen_dynsym
                                                 : NULL;
    if (!seen || *seen || !tg_elf_symtab(&f, &sec, &t)) continue;
    *seen = true;
    if (!cache && !(cache = malloc(sizeof(*cache)))) rv = -ENOMEM;
    else rv = load_table(&t, out, cache);
  }
  free(cache);
  if (rv < 0) goto fail;
  /* The PLT entries: no table names them, and a sample in one would be
   * taken for the sizeless symbol before it or left unnamed. Its other
   * errors are tg_elf_sections' and returned above. */
  n = tg_plt_load(buf, len, &plt);
  if (n == -ENOMEM) rv = n;
  out->dropped += plt.dropped;
  for (int i = 0; i < n && rv == 0; i++) {
    const char *name = plt.pool + plt.v[i].name;
    rv = tg_addr_names_add(out, plt.v[i].addr, plt.v[i].size, name,
                           strlen(name));
  }
  tg_plt_free(&plt);
  if (rv < 0) goto fail;
  /* One symbol per address (.symtab and .dynsym repeat each other). */
  return (int)tg_addr_names_finish(out);
fail:
  tg_elf_syms_free(out);
  return rv;
}

const char *tg_elf_syms_find(const tg_elf_syms_t *s, uint64_t addr) {
  return tg_addr_names_find(s, addr, TG_ADDR_SIZE0_TO_NEXT);
}

void tg_elf_syms_free(tg_elf_syms_t *s) { tg_addr_names_free(s); }
