/* ELF build ids, loads and symbols: see perf_elf.h. */
#include "agent/perf/perf_elf.h"

#include "common/elf_plt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EHDR_SIZE 64
#define PHDR_SIZE 56
#define SHDR_SIZE 64
#define SYM_SIZE 24
#define PT_LOAD 1
#define PT_NOTE 4
#define PF_X 1
#define SHT_SYMTAB 2
#define SHT_NOTE 7
#define SHT_DYNSYM 11
#define STT_FUNC 2
#define STT_GNU_IFUNC 10
#define NT_GNU_BUILD_ID 3

static uint16_t rd16(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) {
  return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* [off, off + n) lies inside |len| bytes. */
static bool within(uint64_t off, uint64_t n, size_t len) {
  return off <= len && n <= len - off;
}

static uint64_t pad(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

int tg_elf_notes_build_id(const uint8_t *notes, size_t len, uint64_t align,
                          uint8_t id[TG_ELF_BUILD_ID_MAX], size_t *id_len) {
  if (align != 8) align = 4;
  uint64_t off = 0;
  while (off < len) {
    if (!within(off, 12, len)) return -EBADMSG;
    uint64_t namesz = rd32(notes + off), descsz = rd32(notes + off + 4);
    uint32_t type = rd32(notes + off + 8);
    uint64_t name_off = off + 12;
    uint64_t desc_off = name_off + pad(namesz, align);
    if (!within(name_off, namesz, len) || !within(desc_off, descsz, len))
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

static int check_header(const uint8_t *buf, size_t len) {
  if (len < EHDR_SIZE || memcmp(buf, "\x7f" "ELF", 4) != 0) return -EBADMSG;
  if (buf[4] != 2 || buf[5] != 1) return -ENOTSUP; /* 64-bit, LE */
  return 0;
}

int tg_elf_parse(const uint8_t *buf, size_t len, tg_elf_t *out) {
  memset(out, 0, sizeof(*out));
  int rv = check_header(buf, len);
  if (rv < 0) return rv;
  uint64_t phoff = rd64(buf + 32);
  uint16_t phentsize = rd16(buf + 54), phnum = rd16(buf + 56);
  if (phnum && (phentsize < PHDR_SIZE ||
                !within(phoff, (uint64_t)phentsize * phnum, len)))
    return -EBADMSG;
  bool bias_set = false;
  for (unsigned i = 0; i < phnum; i++) {
    const uint8_t *ph = buf + phoff + (uint64_t)i * phentsize;
    uint32_t type = rd32(ph), flags = rd32(ph + 4);
    uint64_t offset = rd64(ph + 8), vaddr = rd64(ph + 16);
    uint64_t filesz = rd64(ph + 32), palign = rd64(ph + 48);
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
               within(offset, filesz, len)) {
      size_t n = 0;
      if (tg_elf_notes_build_id(buf + offset, (size_t)filesz, palign,
                                out->build_id, &n) == 1)
        out->build_id_len = n;
    }
  }
  if (out->build_id_len) return 0;
  /* No PT_NOTE with the id (a debug file, or a stripped layout): look in
   * the SHT_NOTE sections. */
  uint64_t shoff = rd64(buf + 40);
  uint16_t shentsize = rd16(buf + 58), shnum = rd16(buf + 60);
  if (!shnum) return 0;
  if (shentsize < SHDR_SIZE ||
      !within(shoff, (uint64_t)shentsize * shnum, len))
    return 0;
  for (unsigned i = 0; i < shnum && !out->build_id_len; i++) {
    const uint8_t *sh = buf + shoff + (uint64_t)i * shentsize;
    if (rd32(sh + 4) != SHT_NOTE) continue;
    uint64_t offset = rd64(sh + 24), size = rd64(sh + 32);
    if (!within(offset, size, len)) continue;
    size_t n = 0;
    if (tg_elf_notes_build_id(buf + offset, (size_t)size, rd64(sh + 48),
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

void tg_elf_syms_free(tg_elf_syms_t *s) {
  free(s->v);
  free(s->pool);
  memset(s, 0, sizeof(*s));
}

static int cmp_addr(const void *a, const void *b) {
  const tg_elf_sym_t *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  /* Among aliases the sized one first: it is kept. */
  return (x->size == 0) - (y->size == 0);
}

typedef struct grow {
  tg_elf_sym_t *v;
  size_t n, cap;
  char *pool;
  size_t pool_len, pool_cap;
} grow_t;

static int add_sym(grow_t *g, uint64_t addr, uint64_t size, const char *name,
                   size_t name_len) {
  if (g->n == TG_ELF_SYMS_MAX) return 0;
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 256;
    tg_elf_sym_t *v = realloc(g->v, cap * sizeof(*v));
    if (!v) return -ENOMEM;
    g->v = v;
    g->cap = cap;
  }
  if (g->pool_len + name_len + 1 > g->pool_cap) {
    size_t cap = g->pool_cap ? g->pool_cap : 4096;
    while (cap < g->pool_len + name_len + 1) cap *= 2;
    char *p = realloc(g->pool, cap);
    if (!p) return -ENOMEM;
    g->pool = p;
    g->pool_cap = cap;
  }
  memcpy(g->pool + g->pool_len, name, name_len);
  g->pool[g->pool_len + name_len] = '\0';
  g->v[g->n++] = (tg_elf_sym_t){addr, size, (uint32_t)g->pool_len};
  g->pool_len += name_len + 1;
  return 0;
}

/* The symbols of section |sh| whose names are in section |link|. */
static int load_table(const uint8_t *buf, size_t len, const uint8_t *sh,
                      const uint8_t *strsh, grow_t *g) {
  uint64_t off = rd64(sh + 24), size = rd64(sh + 32);
  uint64_t entsize = rd64(sh + 56);
  uint64_t stroff = rd64(strsh + 24), strsize = rd64(strsh + 32);
  if (entsize < SYM_SIZE || !within(off, size, len) ||
      !within(stroff, strsize, len))
    return 0;
  const char *strs = (const char *)buf + stroff;
  for (uint64_t i = 0; i < size / entsize; i++) {
    const uint8_t *s = buf + off + i * entsize;
    uint32_t name = rd32(s);
    uint8_t type = s[4] & 0xf;
    uint16_t shndx = rd16(s + 6);
    uint64_t value = rd64(s + 8), ssize = rd64(s + 16);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || shndx == 0 ||
        value == 0 || name == 0 || name >= strsize)
      continue;
    uint64_t max = strsize - name;
    if (max > TG_ELF_SYM_NAME_MAX) max = TG_ELF_SYM_NAME_MAX;
    const char *nul = memchr(strs + name, 0, (size_t)max);
    if (!nul) continue;
    int rv = add_sym(g, value, ssize, strs + name, (size_t)(nul - strs - name));
    if (rv < 0) return rv;
  }
  return 0;
}

int tg_elf_syms_load(const uint8_t *buf, size_t len, tg_elf_syms_t *out) {
  memset(out, 0, sizeof(*out));
  int rv = check_header(buf, len);
  if (rv < 0) return rv;
  uint64_t shoff = rd64(buf + 40);
  uint16_t shentsize = rd16(buf + 58), shnum = rd16(buf + 60);
  if (!shnum) return 0;
  if (shentsize < SHDR_SIZE ||
      !within(shoff, (uint64_t)shentsize * shnum, len))
    return -EBADMSG;
  grow_t g = {0};
  for (unsigned i = 0; i < shnum; i++) {
    const uint8_t *sh = buf + shoff + (uint64_t)i * shentsize;
    uint32_t type = rd32(sh + 4), link = rd32(sh + 40);
    if ((type != SHT_SYMTAB && type != SHT_DYNSYM) || link >= shnum) continue;
    rv = load_table(buf, len, sh, buf + shoff + (uint64_t)link * shentsize, &g);
    if (rv < 0) {
      free(g.v);
      free(g.pool);
      return rv;
    }
  }
  /* The PLT entries: no table names them, and a sample in one would be
   * taken for the sizeless symbol before it or left unnamed. */
  tg_plt_t plt;
  rv = tg_plt_load(buf, len, &plt);
  for (int i = 0; i < rv; i++) {
    const char *name = plt.pool + plt.v[i].name;
    int err = add_sym(&g, plt.v[i].addr, plt.v[i].size, name, strlen(name));
    if (err < 0) {
      rv = err;
      break;
    }
  }
  tg_plt_free(&plt);
  if (rv == -ENOMEM) {
    free(g.v);
    free(g.pool);
    return rv;
  }
  if (g.n) qsort(g.v, g.n, sizeof(*g.v), cmp_addr);
  /* One symbol per address (.symtab and .dynsym repeat each other). */
  size_t k = 0;
  for (size_t i = 0; i < g.n; i++)
    if (!k || g.v[k - 1].addr != g.v[i].addr) g.v[k++] = g.v[i];
  out->v = g.v;
  out->n = k;
  out->pool = g.pool;
  out->pool_len = g.pool_len;
  return (int)k;
}

const char *tg_elf_syms_find(const tg_elf_syms_t *s, uint64_t addr) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->v[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const tg_elf_sym_t *c = &s->v[lo - 1];
  if (c->size ? addr - c->addr >= c->size
              : lo < s->n && addr >= s->v[lo].addr)
    return NULL;
  return s->pool + c->name;
}
