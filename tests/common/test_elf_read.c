/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded reads of ELF files (common/elf_read.h) on a file built here
 * byte by byte: the header, the section table, sections by index, name
 * and link, a symbol table and its names; then each count, size, entry
 * size and offset made wrong in turn, which must give an error or "no
 * such thing", never a read past the bytes (the build's ASan sees to
 * that: the file is allocated to its exact length). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/elf_read.h"

enum { S_NULL, S_SHSTR, S_SYMTAB, S_STRTAB, S_BSS, N_SEC };
#define SHSTR_AT 0x40
#define SYMTAB_AT 0x80
#define STRTAB_AT 0x100
#define SHOFF 0x200
#define FILE_LEN (SHOFF + N_SEC * 64)

static const char shstrs[] = "\0.shstrtab\0.symtab\0.strtab\0.bss";
static const char strs[] = "\0alpha\0beta";

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static uint8_t *shdr(uint8_t *f, int i) { return f + SHOFF + i * 64; }

static void sec(uint8_t *f, int i, uint32_t name, uint32_t type, uint64_t off,
                uint64_t size, uint32_t link, uint64_t entsize) {
  uint8_t *s = shdr(f, i);
  put32(s, name), put32(s + 4, type), put64(s + 16, 0x400000 + off);
  put64(s + 24, off), put64(s + 32, size), put32(s + 40, link);
  put64(s + 48, 8), put64(s + 56, entsize);
}

/* Null section, .shstrtab, .symtab (null symbol, alpha, beta), .strtab,
 * .bss (SHT_NOBITS). Malloc'd to its exact length. */
static uint8_t *golden(void) {
  uint8_t *f = calloc(1, FILE_LEN);
  assert_non_null(f);
  memcpy(f, "\x7f" "ELF", 4);
  f[4] = 2, f[5] = 1, f[6] = 1;
  put16(f + 18, 62);
  put64(f + 40, SHOFF);
  put16(f + 58, 64), put16(f + 60, N_SEC), put16(f + 62, S_SHSTR);
  memcpy(f + SHSTR_AT, shstrs, sizeof(shstrs));
  memcpy(f + STRTAB_AT, strs, sizeof(strs));
  uint8_t *s = f + SYMTAB_AT + 24;
  put32(s, 1), s[4] = 0x12, put16(s + 6, 1), put64(s + 8, 0x401000);
  put64(s + 16, 0x20);
  s += 24;
  put32(s, 7), s[4] = 0x12, put16(s + 6, 1), put64(s + 8, 0x401020);
  sec(f, S_SHSTR, 1, 3, SHSTR_AT, sizeof(shstrs), 0, 0);
  sec(f, S_SYMTAB, 11, TG_ELF_SHT_SYMTAB, SYMTAB_AT, 3 * 24, S_STRTAB, 24);
  sec(f, S_STRTAB, 19, 3, STRTAB_AT, sizeof(strs), 0, 0);
  sec(f, S_BSS, 27, TG_ELF_SHT_NOBITS, 0, 0x1000, 0, 0);
  return f;
}

static void open_sections(const uint8_t *f, size_t len, tg_elf_file_t *e) {
  assert_int_equal(tg_elf_open(f, len, e), 0);
  assert_int_equal(tg_elf_sections(e), 0);
}

static void golden_file_reads_whole(void **state) {
  (void)state;
  uint8_t *f = golden();
  tg_elf_file_t e;
  tg_elf_sec_t s, l;
  tg_elf_symtab_t t;
  tg_elf_symbol_t sym;
  size_t n;
  open_sections(f, FILE_LEN, &e);
  assert_int_equal(e.shnum, N_SEC);
  assert_true(tg_elf_sec(&e, S_STRTAB, &s));
  assert_ptr_equal(s.bytes, f + STRTAB_AT);
  assert_false(tg_elf_sec(&e, N_SEC, &s));

  assert_true(tg_elf_sec_named(&e, ".symtab", &s));
  assert_int_equal(s.type, TG_ELF_SHT_SYMTAB);
  assert_int_equal(tg_elf_sec_count(&s, TG_ELF_SYM_SIZE), 3);
  assert_true(tg_elf_sec_link(&e, &s, &l));
  assert_ptr_equal(l.bytes, f + STRTAB_AT);
  /* Exact names only: no prefix, no suffix. */
  assert_false(tg_elf_sec_named(&e, ".symta", &l));
  assert_false(tg_elf_sec_named(&e, ".symtabs", &l));
  /* SHT_NOBITS: the section is there, its bytes are not. */
  assert_true(tg_elf_sec_named(&e, ".bss", &l));
  assert_null(l.bytes);
  assert_int_equal(tg_elf_sec_count(&l, 1), 0);

  assert_true(tg_elf_symtab(&e, &s, &t));
  assert_int_equal(t.n, 3);
  assert_true(tg_elf_symbol(&t, 1, &sym));
  assert_int_equal(sym.info & 0xf, 2);
  assert_true(sym.value == 0x401000 && sym.size == 0x20 && sym.shndx == 1);
  assert_string_equal(tg_elf_str(&t, sym.name, 64, &n), "alpha");
  assert_int_equal(n, 5);
  assert_false(tg_elf_symbol(&t, 3, &sym));
  /* Not a symbol table: the string table itself. */
  assert_true(tg_elf_sec(&e, S_STRTAB, &l));
  assert_false(tg_elf_symtab(&e, &l, &t));
  free(f);
}

static void headers_past_the_bytes_are_refused(void **state) {
  (void)state;
  uint8_t *f = golden();
  tg_elf_file_t e;
  tg_elf_sec_t s;
  assert_int_equal(tg_elf_open(f, TG_ELF_EHDR_SIZE - 1, &e), -EBADMSG);
  f[4] = 1;
  assert_int_equal(tg_elf_open(f, FILE_LEN, &e), -ENOTSUP);
  f[4] = 2;
  /* The section table one byte past the end. */
  assert_int_equal(tg_elf_open(f, FILE_LEN - 1, &e), 0);
  assert_int_equal(tg_elf_sections(&e), -EBADMSG);
  assert_int_equal(e.shnum, 0);
  assert_false(tg_elf_sec(&e, 0, &s));
  /* Its offset past the end, with the sum wrapping. */
  put64(f + 40, UINT64_MAX - 16);
  assert_int_equal(tg_elf_open(f, FILE_LEN, &e), 0);
  assert_int_equal(tg_elf_sections(&e), -EBADMSG);
  put64(f + 40, SHOFF);
  /* Entries shorter than a section header. */
  put16(f + 58, 40);
  assert_int_equal(tg_elf_open(f, FILE_LEN, &e), 0);
  assert_int_equal(tg_elf_sections(&e), -EBADMSG);
  put16(f + 58, 64);
  /* No sections at all is no error. */
  put16(f + 60, 0);
  open_sections(f, FILE_LEN, &e);
  assert_int_equal(e.shnum, 0);
  assert_false(tg_elf_sec_named(&e, ".symtab", &s));
  put16(f + 60, N_SEC);
  /* A name table index past the table: no names. */
  put16(f + 62, N_SEC);
  open_sections(f, FILE_LEN, &e);
  assert_false(tg_elf_sec_named(&e, ".symtab", &s));
  free(f);
}

static void sections_and_links_out_of_bounds(void **state) {
  (void)state;
  uint8_t *f = golden();
  tg_elf_file_t e;
  tg_elf_sec_t s, l;
  tg_elf_symtab_t t;
  /* A section whose bytes run past the end: it has none. */
  put64(shdr(f, S_STRTAB) + 32, FILE_LEN);
  open_sections(f, FILE_LEN, &e);
  assert_true(tg_elf_sec(&e, S_STRTAB, &s));
  assert_null(s.bytes);
  assert_true(tg_elf_sec(&e, S_SYMTAB, &s));
  assert_false(tg_elf_symtab(&e, &s, &t));
  put64(shdr(f, S_STRTAB) + 32, sizeof(strs));
  /* An entry size of 0, and one short of a symbol. */
  put64(shdr(f, S_SYMTAB) + 56, 0);
  assert_true(tg_elf_sec(&e, S_SYMTAB, &s));
  assert_int_equal(tg_elf_sec_count(&s, TG_ELF_SYM_SIZE), 0);
  assert_int_equal(tg_elf_sec_count(&s, 0), 0);
  assert_false(tg_elf_symtab(&e, &s, &t));
  put64(shdr(f, S_SYMTAB) + 56, TG_ELF_SYM_SIZE - 1);
  assert_true(tg_elf_sec(&e, S_SYMTAB, &s));
  assert_false(tg_elf_symtab(&e, &s, &t));
  put64(shdr(f, S_SYMTAB) + 56, TG_ELF_SYM_SIZE);
  /* A link of 0 and one past the table. */
  put32(shdr(f, S_SYMTAB) + 40, 0);
  assert_true(tg_elf_sec(&e, S_SYMTAB, &s));
  assert_false(tg_elf_sec_link(&e, &s, &l));
  assert_false(tg_elf_symtab(&e, &s, &t));
  put32(shdr(f, S_SYMTAB) + 40, N_SEC);
  assert_true(tg_elf_sec(&e, S_SYMTAB, &s));
  assert_false(tg_elf_symtab(&e, &s, &t));
  /* A string table that is SHT_NOBITS. */
  put32(shdr(f, S_SYMTAB) + 40, S_BSS);
  assert_true(tg_elf_sec(&e, S_SYMTAB, &s));
  assert_false(tg_elf_symtab(&e, &s, &t));
  put32(shdr(f, S_SYMTAB) + 40, S_STRTAB);
  /* A section name offset past the name table. */
  put32(shdr(f, S_SYMTAB), sizeof(shstrs));
  assert_false(tg_elf_sec_named(&e, ".symtab", &s));
  free(f);
}

static void names_are_bounded(void **state) {
  (void)state;
  uint8_t *f = golden();
  tg_elf_file_t e;
  tg_elf_sec_t s;
  tg_elf_symtab_t t;
  size_t n;
  open_sections(f, FILE_LEN, &e);
  assert_true(tg_elf_sec(&e, S_SYMTAB, &s));
  assert_true(tg_elf_symtab(&e, &s, &t));
  /* A name offset past its string table, and at its very end. */
  assert_null(tg_elf_str(&t, sizeof(strs), 64, &n));
  assert_null(tg_elf_str(&t, UINT64_MAX, 64, &n));
  assert_string_equal(tg_elf_str(&t, sizeof(strs) - 1, 64, &n), "");
  assert_int_equal(n, 0);
  /* A name at the cap is read; one byte longer is not. */
  assert_string_equal(tg_elf_str(&t, 1, 5, &n), "alpha");
  assert_null(tg_elf_str(&t, 1, 4, &n));
  assert_string_equal(tg_elf_str(&t, 1, SIZE_MAX, &n), "alpha");
  /* A string table whose last name has no NUL. */
  f[STRTAB_AT + sizeof(strs) - 1] = 'x';
  assert_null(tg_elf_str(&t, 7, 64, &n));
  assert_string_equal(tg_elf_str(&t, 1, 64, &n), "alpha");
  free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(golden_file_reads_whole),
      cmocka_unit_test(headers_past_the_bytes_are_refused),
      cmocka_unit_test(sections_and_links_out_of_bounds),
      cmocka_unit_test(names_are_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
