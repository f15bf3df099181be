/* SPDX-License-Identifier: Apache-2.0 */
/* PLT entry names of an x86-64 ELF file: see elf_plt.h. */
#include "common/elf_plt.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define EHDR_SIZE 64
#define SHDR_SIZE 64
#define SYM_SIZE 24
#define RELA_SIZE 24
#define EM_X86_64 62
#define SHT_SYMTAB 2
#define SHT_RELA 4
#define SHT_NOBITS 8
#define SHT_DYNSYM 11
#define R_X86_64_GLOB_DAT 6
#define R_X86_64_JUMP_SLOT 7
#define PLT_ENTRY 16

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

typedef struct sec {
  uint32_t type, link;
  uint64_t addr, off, size, entsize;
  const uint8_t *bytes; /* NULL: SHT_NOBITS, or past the file's end */
} sec_t;

typedef struct elf {
  const uint8_t *buf;
  size_t len;
  uint64_t shoff;
  unsigned shentsize, shnum;
  sec_t shstr;
} elf_t;

static sec_t sec_at(const elf_t *e, unsigned i) {
  const uint8_t *sh = e->buf + e->shoff + (uint64_t)i * e->shentsize;
  sec_t s = {.type = rd32(sh + 4),
             .link = rd32(sh + 40),
             .addr = rd64(sh + 16),
             .off = rd64(sh + 24),
             .size = rd64(sh + 32),
             .entsize = rd64(sh + 56)};
  if (s.type != SHT_NOBITS && within(s.off, s.size, e->len))
    s.bytes = e->buf + s.off;
  return s;
}

/* The section called |name| (exactly), or false. */
static bool sec_named(const elf_t *e, const char *name, sec_t *out) {
  if (!e->shstr.bytes) return false;
  size_t want = strlen(name) + 1;
  for (unsigned i = 1; i < e->shnum; i++) {
    const uint8_t *sh = e->buf + e->shoff + (uint64_t)i * e->shentsize;
    uint64_t n = rd32(sh);
    if (n >= e->shstr.size || e->shstr.size - n < want) continue;
    if (memcmp(e->shstr.bytes + n, name, want) == 0) {
      *out = sec_at(e, i);
      return true;
    }
  }
  return false;
}

/* A relocation section's symbols and their names. */
typedef struct symtab {
  const uint8_t *syms, *strs;
  uint64_t n_syms, entsize, strsize;
} symtab_t;

static bool symtab_of(const elf_t *e, const sec_t *rela, symtab_t *out) {
  if (rela->link == 0 || rela->link >= e->shnum) return false;
  sec_t sym = sec_at(e, rela->link);
  if ((sym.type != SHT_DYNSYM && sym.type != SHT_SYMTAB) || !sym.bytes ||
      sym.entsize < SYM_SIZE || sym.link == 0 || sym.link >= e->shnum)
    return false;
  sec_t str = sec_at(e, sym.link);
  if (!str.bytes) return false;
  *out = (symtab_t){sym.bytes, str.bytes, sym.size / sym.entsize, sym.entsize,
                    str.size};
  return true;
}

/* The name of symbol |idx|: its bytes and length, or NULL. */
static const char *sym_name(const symtab_t *t, uint64_t idx, size_t *n) {
  if (idx == 0 || idx >= t->n_syms) return NULL;
  uint64_t off = rd32(t->syms + idx * t->entsize);
  if (off >= t->strsize) return NULL;
  uint64_t max = t->strsize - off;
  if (max > TG_PLT_NAME_MAX + 1) max = TG_PLT_NAME_MAX + 1;
  const char *s = (const char *)t->strs + off;
  const char *nul = memchr(s, 0, (size_t)max);
  if (!nul || nul == s) return NULL;
  *n = (size_t)(nul - s);
  return s;
}

typedef struct grow {
  tg_plt_sym_t *v;
  size_t n, cap;
  char *pool;
  size_t pool_len, pool_cap;
} grow_t;

static int add(grow_t *g, uint64_t addr, uint64_t size, const char *name,
               size_t name_len) {
  static const char suffix[] = "@plt";
  if (g->n == TG_PLT_MAX) return 0;
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 64;
    tg_plt_sym_t *v = realloc(g->v, cap * sizeof(*v));
    if (!v) return -ENOMEM;
    g->v = v;
    g->cap = cap;
  }
  size_t need = name_len + sizeof(suffix);
  if (g->pool_len + need > g->pool_cap) {
    size_t cap = g->pool_cap ? g->pool_cap : 1024;
    while (cap < g->pool_len + need) cap *= 2;
    char *p = realloc(g->pool, cap);
    if (!p) return -ENOMEM;
    g->pool = p;
    g->pool_cap = cap;
  }
  memcpy(g->pool + g->pool_len, name, name_len);
  memcpy(g->pool + g->pool_len + name_len, suffix, sizeof(suffix));
  g->v[g->n++] = (tg_plt_sym_t){addr, size, (uint32_t)g->pool_len};
  g->pool_len += need;
  return 0;
}

/* .plt (after its header) and .plt.sec: one 16-byte entry per relocation
 * of .rela.plt, in its order. */
static int from_rela_plt(const elf_t *e, grow_t *g) {
  sec_t rela, plt, sec;
  symtab_t t;
  if (!sec_named(e, ".rela.plt", &rela) || rela.type != SHT_RELA ||
      !rela.bytes || rela.entsize < RELA_SIZE || !symtab_of(e, &rela, &t))
    return 0;
  bool has_plt = sec_named(e, ".plt", &plt) &&
                 (plt.entsize == 0 || plt.entsize == PLT_ENTRY);
  bool has_sec = sec_named(e, ".plt.sec", &sec) &&
                 (sec.entsize == 0 || sec.entsize == PLT_ENTRY);
  uint64_t n_plt = has_plt && plt.size >= PLT_ENTRY
                       ? plt.size / PLT_ENTRY - 1 : 0;
  uint64_t n_sec = has_sec ? sec.size / PLT_ENTRY : 0;
  uint64_t count = rela.size / rela.entsize;
  for (uint64_t i = 0; i < count && (i < n_plt || i < n_sec); i++) {
    const uint8_t *r = rela.bytes + i * rela.entsize;
    uint64_t info = rd64(r + 8);
    if ((info & 0xffffffffu) != R_X86_64_JUMP_SLOT) continue;
    size_t n;
    const char *name = sym_name(&t, info >> 32, &n);
    if (!name) continue;
    int rv = 0;
    if (i < n_plt) rv = add(g, plt.addr + (i + 1) * PLT_ENTRY, PLT_ENTRY, name, n);
    if (!rv && i < n_sec) rv = add(g, sec.addr + i * PLT_ENTRY, PLT_ENTRY, name, n);
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
  int32_t disp = (int32_t)rd32(at + p + 2);
  *slot = addr + p + 6 + (uint64_t)(int64_t)disp;
  return true;
}

/* .plt.got: each entry named by the GLOB_DAT relocation of its GOT slot. */
static int from_plt_got(const elf_t *e, grow_t *g) {
  sec_t got, rela;
  symtab_t t;
  if (!sec_named(e, ".plt.got", &got) || !got.bytes ||
      (got.entsize != 8 && got.entsize != 16) ||
      !sec_named(e, ".rela.dyn", &rela) || rela.type != SHT_RELA ||
      !rela.bytes || rela.entsize < RELA_SIZE || !symtab_of(e, &rela, &t))
    return 0;
  uint64_t count = rela.size / rela.entsize, n = 0;
  slot_t *slots = malloc((count ? count : 1) * sizeof(*slots));
  if (!slots) return -ENOMEM;
  for (uint64_t i = 0; i < count; i++) {
    const uint8_t *r = rela.bytes + i * rela.entsize;
    uint64_t info = rd64(r + 8);
    if ((info & 0xffffffffu) == R_X86_64_GLOB_DAT)
      slots[n++] = (slot_t){rd64(r), info >> 32};
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
    if (name) rv = add(g, addr, got.entsize, name, len);
  }
  free(slots);
  return rv;
}

static int cmp_addr(const void *a, const void *b) {
  const tg_plt_sym_t *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int tg_plt_load(const uint8_t *buf, size_t len, tg_plt_t *out) {
  memset(out, 0, sizeof(*out));
  if (len < EHDR_SIZE || memcmp(buf, "\x7f" "ELF", 4) != 0) return -EBADMSG;
  if (buf[4] != 2 || buf[5] != 1) return -ENOTSUP; /* 64-bit, LE */
  if (rd16(buf + 18) != EM_X86_64) return 0;
  elf_t e = {.buf = buf,
             .len = len,
             .shoff = rd64(buf + 40),
             .shentsize = rd16(buf + 58),
             .shnum = rd16(buf + 60)};
  /* e_shnum 0 with sections is the extended numbering of files with more
   * than 65279 sections: none of them is a program's. */
  if (e.shnum == 0) return 0;
  if (e.shentsize < SHDR_SIZE ||
      !within(e.shoff, (uint64_t)e.shentsize * e.shnum, len))
    return -EBADMSG;
  unsigned shstrndx = rd16(buf + 62);
  if (shstrndx == 0 || shstrndx >= e.shnum) return 0;
  e.shstr = sec_at(&e, shstrndx);
  grow_t g = {0};
  int rv = from_rela_plt(&e, &g);
  if (!rv) rv = from_plt_got(&e, &g);
  if (rv) {
    free(g.v);
    free(g.pool);
    return rv;
  }
  if (g.n) qsort(g.v, g.n, sizeof(*g.v), cmp_addr);
  /* One name per address (a file may list a slot twice). */
  size_t k = 0;
  for (size_t i = 0; i < g.n; i++)
    if (!k || g.v[k - 1].addr != g.v[i].addr) g.v[k++] = g.v[i];
  out->v = g.v;
  out->n = k;
  out->pool = g.pool;
  out->pool_len = g.pool_len;
  return (int)k;
}

const char *tg_plt_find(const tg_plt_t *p, uint64_t addr) {
  size_t lo = 0, hi = p->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->v[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const tg_plt_sym_t *c = &p->v[lo - 1];
  return addr - c->addr < c->size ? p->pool + c->name : NULL;
}

void tg_plt_free(tg_plt_t *p) {
  free(p->v);
  free(p->pool);
  memset(p, 0, sizeof(*p));
}
