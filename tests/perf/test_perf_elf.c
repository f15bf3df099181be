/* ELF notes, loads and symbols (agent/perf/perf_elf.h): a golden ELF built
 * here byte by byte (two loads, a note segment, .symtab and .strtab), the
 * note parser on golden notes and their truncations, this test's own
 * executable: its build id, and its own function named from its address;
 * and a crafted file of 128 KiB whose many section headers share one
 * symbol table whose symbols share one long name, which must cost one
 * table's entries and one copy of the name. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/perf/perf_elf.h"
#include "agent/perf/perf_maps.h"
#include "common/elf_plt.h"

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static const uint8_t golden_id[20] = {0xde, 0xad, 0xbe, 0xef, 1,  2,  3,
                                      4,    5,    6,    7,    8,  9,  10,
                                      11,   12,   13,   14,   15, 16};

/* An ABI tag note, then the build id, padded to 4. */
static size_t golden_notes(uint8_t *p) {
  put32(p, 4), put32(p + 4, 16), put32(p + 8, 1);
  memcpy(p + 12, "GNU", 4);
  memset(p + 16, 0, 16);
  put32(p + 32, 4), put32(p + 36, 20), put32(p + 40, 3);
  memcpy(p + 44, "GNU", 4);
  memcpy(p + 48, golden_id, 20);
  return 68;
}

#define ELF_SIZE 0x2000
#define NOTES_AT 0x200
#define SYMTAB_AT 0x300
#define STRTAB_AT 0x400
#define SHDRS_AT 0x500

static void phdr(uint8_t *p, uint32_t type, uint32_t flags, uint64_t off,
                 uint64_t vaddr, uint64_t size, uint64_t align) {
  put32(p, type), put32(p + 4, flags), put64(p + 8, off);
  put64(p + 16, vaddr), put64(p + 24, vaddr), put64(p + 32, size);
  put64(p + 40, size), put64(p + 48, align);
}

static void sym(uint8_t *p, uint32_t name, uint8_t type, uint16_t shndx,
                uint64_t value, uint64_t size) {
  put32(p, name);
  p[4] = (uint8_t)(0x10 | type); /* STB_GLOBAL */
  p[5] = 0;
  put16(p + 6, shndx), put64(p + 8, value), put64(p + 16, size);
}

static void shdr(uint8_t *p, uint32_t type, uint64_t off, uint64_t size,
                 uint32_t link, uint64_t entsize) {
  memset(p, 0, 64);
  put32(p + 4, type), put64(p + 24, off), put64(p + 32, size);
  put32(p + 40, link), put64(p + 56, entsize);
}

static uint8_t *golden_elf(void) {
  uint8_t *e = calloc(1, ELF_SIZE);
  assert_non_null(e);
  memcpy(e, "\x7f" "ELF", 4);
  e[4] = 2, e[5] = 1, e[6] = 1;
  put16(e + 16, 3), put16(e + 18, 62), put32(e + 20, 1);
  put64(e + 32, 64), put64(e + 40, SHDRS_AT);
  put16(e + 52, 64), put16(e + 54, 56), put16(e + 56, 3);
  put16(e + 58, 64), put16(e + 60, 3);
  phdr(e + 64, 1, 4, 0, 0, 0x1000, 0x1000);              /* r */
  phdr(e + 120, 1, 5, 0x1000, 0x401000, 0x1000, 0x1000); /* r-x */
  size_t n = golden_notes(e + NOTES_AT);
  phdr(e + 176, 4, 4, NOTES_AT, NOTES_AT, n, 4);
  const char strs[] = "\0alpha\0beta\0gamma";
  memcpy(e + STRTAB_AT, strs, sizeof(strs));
  sym(e + SYMTAB_AT + 24, 1, 2, 1, 0x401000, 0x10);  /* alpha: FUNC */
  sym(e + SYMTAB_AT + 48, 7, 2, 1, 0x401010, 0);     /* beta: FUNC, no size */
  sym(e + SYMTAB_AT + 72, 12, 1, 1, 0x401800, 8);    /* gamma: OBJECT */
  shdr(e + SHDRS_AT + 64, 2, SYMTAB_AT, 4 * 24, 2, 24);
  shdr(e + SHDRS_AT + 128, 3, STRTAB_AT, sizeof(strs), 0, 0);
  return e;
}

static void notes_give_the_build_id(void **state) {
  (void)state;
  uint8_t notes[128];
  size_t n = golden_notes(notes);
  uint8_t id[TG_ELF_BUILD_ID_MAX];
  size_t len = 0;
  assert_int_equal(tg_elf_notes_build_id(notes, n, 4, id, &len), 1);
  assert_int_equal(len, 20);
  assert_memory_equal(id, golden_id, 20);
  /* Only the ABI tag. */
  assert_int_equal(tg_elf_notes_build_id(notes, 32, 4, id, &len), 0);
  /* Every cut inside the build id note. */
  for (size_t cut = 33; cut < n; cut++)
    assert_int_equal(tg_elf_notes_build_id(notes, cut, 4, id, &len),
                     -EBADMSG);
  /* A name size that runs past the end. */
  put32(notes, 0xfffffff0u);
  assert_int_equal(tg_elf_notes_build_id(notes, n, 4, id, &len), -EBADMSG);
  /* Another owner's note of the same type is not a build id. */
  n = golden_notes(notes);
  memcpy(notes + 44, "XYZ", 4);
  assert_int_equal(tg_elf_notes_build_id(notes, n, 4, id, &len), 0);
}

static void golden_elf_loads_and_id(void **state) {
  (void)state;
  uint8_t *e = golden_elf();
  tg_elf_t elf;
  assert_int_equal(tg_elf_parse(e, ELF_SIZE, &elf), 0);
  assert_int_equal(elf.build_id_len, 20);
  assert_memory_equal(elf.build_id, golden_id, 20);
  assert_int_equal(elf.n_loads, 2);
  assert_true(elf.load_bias == 0x400000);
  assert_true(tg_elf_vaddr(&elf, 0x1005) == 0x401005);
  assert_true(tg_elf_vaddr(&elf, 0x10) == 0x10);
  assert_true(tg_elf_vaddr(&elf, 0x3000) == 0x403000); /* off + bias */

  /* Without the note segment, the SHT_NOTE section gives it. */
  put16(e + 56, 2);
  shdr(e + SHDRS_AT, 7, NOTES_AT, 68, 0, 0);
  put64(e + SHDRS_AT + 48, 4);
  assert_int_equal(tg_elf_parse(e, ELF_SIZE, &elf), 0);
  assert_int_equal(elf.build_id_len, 20);
  free(e);
}

static void golden_elf_symbols(void **state) {
  (void)state;
  uint8_t *e = golden_elf();
  tg_elf_syms_t s;
  assert_int_equal(tg_elf_syms_load(e, ELF_SIZE, &s), 2);
  assert_string_equal(tg_elf_syms_find(&s, 0x401000), "alpha");
  assert_string_equal(tg_elf_syms_find(&s, 0x40100f), "alpha");
  assert_string_equal(tg_elf_syms_find(&s, 0x401010), "beta");
  /* Without a size, a symbol runs to the next (here: to the end). */
  assert_string_equal(tg_elf_syms_find(&s, 0x401800), "beta");
  assert_null(tg_elf_syms_find(&s, 0x400fff));
  tg_elf_syms_free(&s);
  /* A string table offset past its section: that symbol is skipped. */
  put32(e + SYMTAB_AT + 24, 0x1000);
  assert_int_equal(tg_elf_syms_load(e, ELF_SIZE, &s), 1);
  tg_elf_syms_free(&s);
  /* A string table of SHT_NOBITS has no bytes in the file to name by. */
  put32(e + SHDRS_AT + 128 + 4, 8);
  assert_int_equal(tg_elf_syms_load(e, ELF_SIZE, &s), 0);
  tg_elf_syms_free(&s);
  free(e);
}

static void broken_headers_are_refused(void **state) {
  (void)state;
  uint8_t *e = golden_elf();
  tg_elf_t elf;
  tg_elf_syms_t s;
  assert_int_equal(tg_elf_parse(e, 63, &elf), -EBADMSG);
  e[4] = 1; /* 32-bit */
  assert_int_equal(tg_elf_parse(e, ELF_SIZE, &elf), -ENOTSUP);
  assert_int_equal(tg_elf_syms_load(e, ELF_SIZE, &s), -ENOTSUP);
  e[4] = 2;
  put64(e + 32, ELF_SIZE - 100); /* program headers past the end */
  assert_int_equal(tg_elf_parse(e, ELF_SIZE, &elf), -EBADMSG);
  put64(e + 40, ELF_SIZE - 10); /* section headers past the end */
  assert_int_equal(tg_elf_syms_load(e, ELF_SIZE, &s), -EBADMSG);
  e[1] = 'X';
  assert_int_equal(tg_elf_parse(e, ELF_SIZE, &elf), -EBADMSG);
  free(e);
}

/* noinline and global: its address is in .symtab under this name. */
__attribute__((noinline)) int tg_test_perf_elf_marker(int x);
__attribute__((noinline)) int tg_test_perf_elf_marker(int x) {
  return x * 3 + 1;
}

static void own_executable_names_own_function(void **state) {
  (void)state;
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  uint8_t *buf = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  assert_true(buf != MAP_FAILED);
  tg_elf_t elf;
  assert_int_equal(tg_elf_parse(buf, (size_t)st.st_size, &elf), 0);
  assert_true(elf.build_id_len >= 8); /* gcc and ld write one by default */
  tg_elf_syms_t syms;
  assert_true(tg_elf_syms_load(buf, (size_t)st.st_size, &syms) > 0);
  /* Its PLT entries (cmocka's functions, libc's) by "NAME@plt", the same
   * names as common/elf_plt.h gives (test_elf_plt checks those). */
  tg_plt_t plt;
  assert_true(tg_plt_load(buf, (size_t)st.st_size, &plt) > 0);
  for (size_t i = 0; i < plt.n; i++) {
    const char *n = tg_elf_syms_find(&syms, plt.v[i].addr + plt.v[i].size - 1);
    assert_non_null(n);
    assert_string_equal(n, plt.pool + plt.v[i].name);
    assert_non_null(strstr(n, "@plt"));
  }
  tg_plt_free(&plt);
  munmap(buf, (size_t)st.st_size);

  uint64_t addr = (uint64_t)(uintptr_t)&tg_test_perf_elf_marker;
  tg_perf_maps_t maps = {0};
  assert_true(tg_perf_maps_read(getpid(), NULL, true, &maps) > 0);
  const tg_perf_map_t *m = tg_perf_maps_find(&maps, addr);
  assert_non_null(m);
  uint64_t vaddr = tg_elf_vaddr(&elf, addr - m->start + m->pgoff);
  const char *name = tg_elf_syms_find(&syms, vaddr + 4);
  assert_non_null(name);
  assert_string_equal(name, "tg_test_perf_elf_marker");
  assert_int_equal(tg_test_perf_elf_marker(1), 4);
  tg_perf_maps_free(&maps);
  tg_elf_syms_free(&syms);
}

/* 128 KiB: a string table with one name of 1000 bytes, a symbol table
 * filling the first 64 KiB whose every symbol names it, and 1000 section
 * headers: the string table, then SHT_SYMTAB (and one SHT_DYNSYM) over
 * that one symbol table. Read table by table without bounds it gave a
 * million entries and a GiB of copies of the name. */
#define CRAFT_SIZE 0x20000
#define CRAFT_STRTAB 0x100
#define CRAFT_SYMTAB 0x800
#define CRAFT_SHDRS 0x10000
#define CRAFT_SECTIONS 1000
#define CRAFT_NAME 1000

static void repeated_tables_and_names_cost_once(void **state) {
  (void)state;
  uint8_t *e = calloc(1, CRAFT_SIZE);
  assert_non_null(e);
  memcpy(e, "\x7f" "ELF", 4);
  e[4] = 2, e[5] = 1, e[6] = 1;
  put16(e + 16, 3), put16(e + 18, 62), put32(e + 20, 1);
  put64(e + 40, CRAFT_SHDRS);
  put16(e + 52, 64), put16(e + 58, 64), put16(e + 60, CRAFT_SECTIONS);
  memset(e + CRAFT_STRTAB + 1, 'n', CRAFT_NAME);
  uint64_t n_syms = (CRAFT_SHDRS - CRAFT_SYMTAB) / 24;
  for (uint64_t i = 1; i < n_syms; i++)
    sym(e + CRAFT_SYMTAB + i * 24, 1, 2, 1, 0x1000 + i * 16, 16);
  shdr(e + CRAFT_SHDRS + 64, 3, CRAFT_STRTAB, CRAFT_NAME + 2, 0, 0);
  for (unsigned i = 2; i < CRAFT_SECTIONS; i++)
    shdr(e + CRAFT_SHDRS + (uint64_t)i * 64, i == 500 ? 11 : 2,
         CRAFT_SYMTAB, CRAFT_SHDRS - CRAFT_SYMTAB, 1, 24);
  tg_elf_syms_t s;
  /* One entry per symbol of the table (.dynsym repeats its addresses),
   * one copy of the name per table read (two), nothing dropped. */
  assert_int_equal(tg_elf_syms_load(e, CRAFT_SIZE, &s), (int)(n_syms - 1));
  assert_int_equal(s.dropped, 0);
  assert_int_equal(s.pool_len, 2 * (CRAFT_NAME + 1));
  assert_true(tg_addr_names_bytes(&s) <=
              n_syms * sizeof(tg_elf_sym_t) + 2 * (CRAFT_NAME + 1));
  const char *name = tg_elf_syms_find(&s, 0x1000 + 16 * 7 + 3);
  assert_non_null(name);
  assert_int_equal(strlen(name), CRAFT_NAME);
  tg_elf_syms_free(&s);
  free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(repeated_tables_and_names_cost_once),
      cmocka_unit_test(notes_give_the_build_id),
      cmocka_unit_test(golden_elf_loads_and_id),
      cmocka_unit_test(golden_elf_symbols),
      cmocka_unit_test(broken_headers_are_refused),
      cmocka_unit_test(own_executable_names_own_function),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
