/* SPDX-License-Identifier: Apache-2.0 */
/* PLT entry names (common/elf_plt.h) against golden ELF files built here
 * byte by byte: the lazy .plt (header, then one entry per .rela.plt
 * relocation), the IBT layout (.plt.sec), .plt.got through GLOB_DAT
 * relocations, the --only-keep-debug layout (SHT_NOBITS: no names), and
 * every length, index and count of the file made wrong in turn. The
 * layouts of real binaries are compared with objdump's in
 * test_elf_plt_objdump.sh. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/elf_plt.h"

enum {
  S_NULL, S_SHSTR, S_DYNSYM, S_DYNSTR, S_RELA_PLT, S_RELA_DYN, S_PLT,
  S_PLT_SEC, S_PLT_GOT, N_SEC
};
#define SHOFF 0x800
#define FILE_LEN (SHOFF + N_SEC * 64)

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static uint8_t *shdr(uint8_t *f, int i) { return f + SHOFF + i * 64; }

static void sec(uint8_t *f, int i, uint32_t name, uint32_t type, uint64_t addr,
                uint64_t off, uint64_t size, uint32_t link, uint64_t entsize) {
  uint8_t *s = shdr(f, i);
  put32(s, name);
  put32(s + 4, type);
  put64(s + 16, addr);
  put64(s + 24, off);
  put64(s + 32, size);
  put32(s + 40, link);
  put64(s + 56, entsize);
}

static void rela(uint8_t *p, uint64_t off, uint32_t sym, uint32_t type) {
  put64(p, off);
  put64(p + 8, (uint64_t)sym << 32 | type);
  put64(p + 16, 0);
}

/* A jmp *disp32(%rip) at ELF address |at| (|pre| bytes of endbr64 and
 * bnd before it) to GOT slot |slot|. */
static void jmp(uint8_t *p, uint64_t at, int pre, uint64_t slot) {
  if (pre >= 4) memcpy(p, "\xf3\x0f\x1e\xfa", 4);
  if (pre == 5) p[4] = 0xf2;
  p[pre] = 0xff;
  p[pre + 1] = 0x25;
  put32(p + pre + 2, (uint32_t)(slot - (at + (uint64_t)pre + 6)));
}

static const char shstr[] =
    "\0.shstrtab\0.dynsym\0.dynstr\0.rela.plt\0.rela.dyn\0.plt\0.plt.sec\0"
    ".plt.got";
static const char dynstr[] = "\0access\0puts\0__cxa_finalize\0printf";

static uint32_t name_of(const char *tab, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(tab + i, s)) return (uint32_t)i;
  fail();
  return 0;
}
#define SH(s) name_of(shstr, sizeof(shstr), s)

/* The golden file: dynsym 1 access, 2 puts, 3 __cxa_finalize, 4 printf;
 * .rela.plt: access, an IRELATIVE slot, puts; .rela.dyn: a RELATIVE and
 * __cxa_finalize's GLOB_DAT; .plt at 0x1020 (header and three entries);
 * with |ibt|, .plt.sec at 0x1100 and 16-byte .plt.got entries, else none
 * and 8-byte ones; .plt.got at 0x1200: __cxa_finalize's, then one through
 * a slot that no relocation names. */
static void build(uint8_t *f, bool ibt) {
  memset(f, 0, FILE_LEN);
  memcpy(f, "\x7f" "ELF", 4);
  f[4] = 2, f[5] = 1, f[6] = 1;
  put16(f + 16, 3);
  put16(f + 18, 62);
  put64(f + 40, SHOFF);
  put16(f + 58, 64);
  put16(f + 60, N_SEC);
  put16(f + 62, S_SHSTR);
  memcpy(f + 0x100, shstr, sizeof(shstr));
  sec(f, S_SHSTR, SH(".shstrtab"), 3, 0, 0x100, sizeof(shstr), 0, 0);
  memcpy(f + 0x180, dynstr, sizeof(dynstr));
  sec(f, S_DYNSTR, SH(".dynstr"), 3, 0, 0x180, sizeof(dynstr), 0, 0);
  const char *names[] = {"access", "puts", "__cxa_finalize", "printf"};
  for (int i = 0; i < 4; i++) {
    uint8_t *s = f + 0x200 + (i + 1) * 24;
    put32(s, name_of(dynstr, sizeof(dynstr), names[i]));
    s[4] = 0x12; /* GLOBAL FUNC, undefined */
  }
  sec(f, S_DYNSYM, SH(".dynsym"), 11, 0, 0x200, 5 * 24, S_DYNSTR, 24);
  rela(f + 0x300, 0x4000, 1, 7);
  rela(f + 0x318, 0x4008, 0, 37);
  rela(f + 0x330, 0x4010, 2, 7);
  sec(f, S_RELA_PLT, SH(".rela.plt"), 4, 0, 0x300, 3 * 24, S_DYNSYM, 24);
  rela(f + 0x380, 0x3fd0, 0, 8);
  rela(f + 0x398, 0x3fe0, 3, 6);
  sec(f, S_RELA_DYN, SH(".rela.dyn"), 4, 0, 0x380, 2 * 24, S_DYNSYM, 24);
  sec(f, S_PLT, SH(".plt"), 1, 0x1020, 0x400, 0x40, 0, 16);
  if (ibt) sec(f, S_PLT_SEC, SH(".plt.sec"), 1, 0x1100, 0x500, 0x30, 0, 16);
  uint64_t es = ibt ? 16 : 8;
  jmp(f + 0x600, 0x1200, ibt ? 5 : 0, 0x3fe0);
  jmp(f + 0x600 + es, 0x1200 + es, ibt ? 4 : 0, 0x3ff0);
  sec(f, S_PLT_GOT, SH(".plt.got"), 1, 0x1200, 0x600, 2 * es, 0, es);
}

static const char *find(const tg_plt_t *p, uint64_t a) {
  const char *n = tg_plt_find(p, a);
  return n ? n : "(none)";
}

static void lazy_plt_and_plt_got(void **state) {
  (void)state;
  static uint8_t f[FILE_LEN];
  build(f, false);
  tg_plt_t p;
  assert_int_equal(tg_plt_load(f, sizeof(f), &p), 3);
  assert_string_equal(find(&p, 0x1020), "(none)"); /* the header */
  assert_string_equal(find(&p, 0x102f), "(none)");
  assert_string_equal(find(&p, 0x1030), "access@plt");
  assert_string_equal(find(&p, 0x103f), "access@plt");
  assert_string_equal(find(&p, 0x1040), "(none)"); /* IRELATIVE */
  assert_string_equal(find(&p, 0x1050), "puts@plt");
  assert_string_equal(find(&p, 0x1060), "(none)");
  assert_string_equal(find(&p, 0x1200), "__cxa_finalize@plt");
  assert_string_equal(find(&p, 0x1207), "__cxa_finalize@plt");
  assert_string_equal(find(&p, 0x1208), "(none)"); /* slot unnamed */
  assert_string_equal(find(&p, 0), "(none)");
  assert_string_equal(find(&p, UINT64_MAX), "(none)");
  tg_plt_free(&p);
}

static void ibt_plt_sec(void **state) {
  (void)state;
  static uint8_t f[FILE_LEN];
  build(f, true);
  tg_plt_t p;
  assert_int_equal(tg_plt_load(f, sizeof(f), &p), 5);
  assert_string_equal(find(&p, 0x1100), "access@plt");
  assert_string_equal(find(&p, 0x110f), "access@plt");
  assert_string_equal(find(&p, 0x1110), "(none)");
  assert_string_equal(find(&p, 0x1120), "puts@plt");
  assert_string_equal(find(&p, 0x1130), "(none)");
  /* The lazy PLT entries in .plt are the same functions'. */
  assert_string_equal(find(&p, 0x1030), "access@plt");
  assert_string_equal(find(&p, 0x1050), "puts@plt");
  assert_string_equal(find(&p, 0x120f), "__cxa_finalize@plt");
  assert_string_equal(find(&p, 0x1210), "(none)");
  tg_plt_free(&p);
}

/* objcopy --only-keep-debug keeps the headers, not the bytes. */
static void nobits_give_no_names(void **state) {
  (void)state;
  static uint8_t f[FILE_LEN];
  for (int s = S_DYNSYM; s <= S_RELA_DYN; s++) {
    build(f, false);
    put32(shdr(f, s) + 4, 8);
    tg_plt_t p;
    int n = tg_plt_load(f, sizeof(f), &p);
    /* .dynstr, .dynsym, .rela.* without bytes: the table they serve goes. */
    assert_int_equal(n, s == S_RELA_DYN ? 2 : s == S_RELA_PLT ? 1 : 0);
    tg_plt_free(&p);
  }
  build(f, false);
  put32(shdr(f, S_PLT_GOT) + 4, 8);
  tg_plt_t p;
  assert_int_equal(tg_plt_load(f, sizeof(f), &p), 2);
  tg_plt_free(&p);
}

static void headers_refused_or_ignored(void **state) {
  (void)state;
  static uint8_t f[FILE_LEN];
  tg_plt_t p;
  build(f, false);
  assert_int_equal(tg_plt_load(f, 10, &p), -EBADMSG);
  f[4] = 1;
  assert_int_equal(tg_plt_load(f, sizeof(f), &p), -ENOTSUP);
  build(f, false);
  put16(f + 18, 183); /* aarch64: its layouts are not read */
  assert_int_equal(tg_plt_load(f, sizeof(f), &p), 0);
  build(f, false);
  put16(f + 58, 40);
  assert_int_equal(tg_plt_load(f, sizeof(f), &p), -EBADMSG);
  build(f, false);
  put16(f + 60, N_SEC + 1);
  assert_int_equal(tg_plt_load(f, sizeof(f), &p), -EBADMSG);
  build(f, false);
  put16(f + 62, N_SEC);
  assert_int_equal(tg_plt_load(f, sizeof(f), &p), 0);
  build(f, false);
  put16(f + 60, 0);
  assert_int_equal(tg_plt_load(f, sizeof(f), &p), 0);
}

/* Each count, offset, size, link, index and entry size made wrong: fewer
 * names, never a read past the bytes (ASan watches). */
static void untrusted_fields_are_bounded(void **state) {
  (void)state;
  static uint8_t f[FILE_LEN];
  static const struct {
    int sec, at, width;
    uint64_t v;
    int want;
  } cases[] = {
      {S_RELA_PLT, 40, 4, S_PLT_GOT + 7, 1},  /* link past the sections */
      {S_RELA_PLT, 40, 4, S_PLT, 1},          /* link to a non-table */
      {S_RELA_PLT, 32, 8, UINT64_MAX, 1},     /* size past the end */
      {S_RELA_PLT, 24, 8, FILE_LEN - 8, 1},   /* offset near the end */
      {S_RELA_PLT, 56, 8, 0, 1},              /* entry size 0 */
      {S_RELA_PLT, 56, 8, 23, 1},             /* entry size too small */
      {S_RELA_PLT, 56, 8, 1u << 20, 1},       /* fewer entries than size */
      {S_DYNSYM, 56, 8, 0, 0},
      {S_DYNSYM, 40, 4, 0, 0},                /* no string table */
      {S_DYNSYM, 32, 8, 2 * 24, 1},           /* symbols 2.. missing */
      {S_DYNSTR, 32, 8, 8, 1},                /* only "access" whole */
      {S_DYNSTR, 32, 8, 7, 0},                /* "access" unterminated */
      {S_PLT, 32, 8, 0x20, 2},                /* one entry after the header */
      {S_PLT, 32, 8, 0, 1},
      {S_PLT, 16, 8, UINT64_MAX - 0x10, 3},   /* addresses wrap */
      {S_PLT, 56, 8, 8, 1},                   /* not the x86-64 entry */
      {S_PLT_GOT, 56, 8, 4, 2},
      {S_PLT_GOT, 32, 8, 7, 2},               /* no whole entry */
      {S_PLT_GOT, 32, 8, UINT64_MAX, 2},
      {S_RELA_DYN, 40, 4, 0, 2},
      {S_SHSTR, 32, 8, 4, 0},                 /* section names cut */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    build(f, false);
    uint8_t *p = shdr(f, cases[i].sec) + cases[i].at;
    if (cases[i].width == 4) put32(p, (uint32_t)cases[i].v);
    else put64(p, cases[i].v);
    tg_plt_t t;
    int n = tg_plt_load(f, sizeof(f), &t);
    if (n != cases[i].want) fail_msg("case %zu: %d names", i, n);
    for (size_t k = 0; k < t.n; k++) {
      assert_true(t.v[k].name < t.pool_len);
      assert_non_null(tg_plt_find(&t, t.v[k].addr));
    }
    tg_plt_free(&t);
  }
  /* Symbol indexes and name offsets out of range. */
  build(f, false);
  rela(f + 0x300, 0x4000, 99, 7);
  put32(f + 0x200 + 2 * 24, 0xffff);
  tg_plt_t t;
  assert_int_equal(tg_plt_load(f, sizeof(f), &t), 1);
  tg_plt_free(&t);
  /* The file cut at every length. */
  for (size_t len = 0; len <= FILE_LEN; len++) {
    build(f, false);
    uint8_t *cut = malloc(len ? len : 1);
    assert_non_null(cut);
    memcpy(cut, f, len);
    int n = tg_plt_load(cut, len, &t);
    assert_true(n >= 0 || n == -EBADMSG);
    tg_plt_free(&t);
    free(cut);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lazy_plt_and_plt_got),
      cmocka_unit_test(ibt_plt_sec),
      cmocka_unit_test(nobits_give_no_names),
      cmocka_unit_test(headers_refused_or_ignored),
      cmocka_unit_test(untrusted_fields_are_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
