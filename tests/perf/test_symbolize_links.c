/* SPDX-License-Identifier: Apache-2.0 */
/* The files a debug file names inside itself, kept from libdw's own
 * opens (consumer/symbolize/symbolize_linked.h), on programs this test
 * builds with the system compiler:
 *
 *  - split DWARF (-gsplit-dwarf): its skeleton unit names a .dwo, made a
 *    FIFO here; the module is still named (its ELF symbol, the line from
 *    the skeleton's line table), the .dwo never opened, the skeleton
 *    counted as `split_dwarf`;
 *  - a dwz alt file (.gnu_debugaltlink, `dwz -m`): found through the
 *    checked open and used; made a FIFO, it is refused (`not_regular`)
 *    and the function is still named from its symbol.
 *
 * Each resolution runs under alarm(): a FIFO opened the way libdw opens
 * would block it for good, and the alarm ends the test as failed. Skipped
 * without a C compiler; the alt file's case without dwz, saying so. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <libelf.h>

#include "consumer/symbolize/symbolize.h"
#include "tests/perf/test_cmd.h"

/* Far above what one module takes, far below ctest's timeout. */
#define RESOLVE_ALARM_S 60

static void write_file(const char *dir, const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

/* |path|'s build id into |m| and the value of its symbol |sym| as its one
 * address: a module the symbolizer resolves from the file itself. */
static void module_of(tg_sym_module_t *m, const char *path, const char *sym) {
  memset(m, 0, sizeof(*m));
  elf_version(EV_CURRENT);
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  assert_non_null(e);
  const void *id;
  ssize_t n = dwelf_elf_gnu_build_id(e, &id);
  assert_true(n > 1 && n <= TG_SYM_MAX_BUILD_ID);
  memcpy(m->build_id, id, (size_t)n);
  m->build_id_len = (size_t)n;
  uint64_t value = 0;
  Elf_Scn *scn = NULL;
  while (!value && (scn = elf_nextscn(e, scn))) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB) continue;
    Elf_Data *d = elf_getdata(scn, NULL);
    for (size_t i = 0; d && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize;
         i++) {
      GElf_Sym s;
      const char *name;
      if (gelf_getsym(d, (int)i, &s) &&
          (name = elf_strptr(e, sh.sh_link, s.st_name)) &&
          !strcmp(name, sym))
        value = s.st_value;
    }
  }
  assert_true(value != 0);
  elf_end(e);
  close(fd);
  assert_non_null(m->path = strdup(path));
  assert_non_null(m->pcs = malloc(sizeof(*m->pcs)));
  m->pcs[0] = value;
  m->n_pcs = m->cap_pcs = 1;
}

/* |m| for |sym| of |path|, resolved from that file under the alarm:
 * found, its one address named. */
static void resolve_file(tg_sym_module_t *m, const char *path,
                         const char *sym, tg_sym_stats_t *st) {
  module_of(m, path, sym);
  tg_sym_opts_t o = {.module_files = true, .stats = st};
  alarm(RESOLVE_ALARM_S);
  assert_int_equal(tg_sym_resolve(m, &o), 0);
  alarm(0);
  assert_int_equal(m->source, TG_SYM_SRC_MODULE);
  assert_int_equal(m->n_addrs, 1);
  assert_string_equal(m->addrs[0].lines[0].function, sym);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !memcmp(s + n - k, suffix, k);
}

static void cleanup(const char *dir) {
  test_run("rm -rf '%s'", dir);
}

static const char split_src[] =
    "__attribute__((noinline)) int tg_split_fn(int x) { return x * 7; }\n"
    "int main(int c, char **v) { (void)v; return tg_split_fn(c); }\n";

/* |flags|' program, every .dwo of it a FIFO: resolved all the same. */
static void split_case(const char *flags) {
  char dir[] = "/tmp/tg_sym_split_XXXXXX";
  assert_non_null(mkdtemp(dir));
  write_file(dir, "split.c", split_src);
  if (test_run("cd '%s' && %s -O1 %s -o split split.c", dir, test_cc(),
               flags)) {
    print_message("no C compiler with %s (%s): skipped\n", flags, test_cc());
    cleanup(dir);
    skip();
  }
  /* Every .dwo the build left becomes a FIFO of the same name. */
  DIR *d = opendir(dir);
  assert_non_null(d);
  int fifos = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (ends_with(de->d_name, ".dwo")) {
      char p[512];
      snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
      assert_int_equal(unlink(p), 0);
      assert_int_equal(mkfifo(p, 0600), 0);
      fifos++;
    }
  closedir(d);
  assert_true(fifos >= 1);

  char bin[512];
  snprintf(bin, sizeof(bin), "%s/split", dir);
  /* Named all the same: the symbol, and the skeleton's own lines. */
  tg_sym_module_t m;
  tg_sym_stats_t st = {0};
  resolve_file(&m, bin, "tg_split_fn", &st);
  assert_int_equal(m.refused, TG_SYM_REFUSED_SPLIT_DWARF);
  assert_int_equal(st.refused[TG_SYM_REFUSED_SPLIT_DWARF], 1);
  assert_int_equal(st.refused[TG_SYM_REFUSED_NOT_REGULAR], 0);
  assert_int_equal(m.addrs[0].n_lines, 1);
  assert_non_null(m.addrs[0].lines[0].file);
  assert_true(ends_with(m.addrs[0].lines[0].file, "split.c"));
  assert_int_equal(m.addrs[0].lines[0].line, 1);
  tg_sym_module_free(&m);
  cleanup(dir);
}

/* DWARF 5's skeleton units (DW_UT_skeleton), and GNU's DWARF 4 form
 * (DW_AT_GNU_dwo_name on a compile unit). */
static void split_dwarf_dwo_never_opened(void **state) {
  (void)state;
  split_case("-g -gsplit-dwarf");
  split_case("-gdwarf-4 -gsplit-dwarf");
}

/* The function's name is in both programs: dwz moves it to the alt file. */
static const char shared_h[] =
    "struct tg_shape { int w, h; const char *name; };\n"
    "static __attribute__((noinline)) int tg_shared_area(struct tg_shape *s)\n"
    "{ return s->w * s->h; }\n";
static const char prog1[] =
    "#include \"shared.h\"\n"
    "int main(int c, char **v) { struct tg_shape s = {c, 3, v[0]};\n"
    "  return tg_shared_area(&s); }\n";
static const char prog2[] =
    "#include \"shared.h\"\n"
    "int main(int c, char **v) { struct tg_shape s = {c, 5, v[0]};\n"
    "  return tg_shared_area(&s) + 1; }\n";

static void dwz_alt_file_checked(void **state) {
  (void)state;
  if (test_run("command -v dwz >/dev/null 2>&1")) {
    print_message("dwz is not installed: the alt file's case is skipped\n");
    skip();
  }
  char dir[] = "/tmp/tg_sym_alt_XXXXXX";
  assert_non_null(mkdtemp(dir));
  write_file(dir, "shared.h", shared_h);
  write_file(dir, "p1.c", prog1);
  write_file(dir, "p2.c", prog2);
  if (test_run("cd '%s' && %s -O1 -g -o p1 p1.c && %s -O1 -g -o p2 p2.c",
               dir, test_cc(), test_cc())) {
    print_message("no C compiler (%s): skipped\n", test_cc());
    cleanup(dir);
    skip();
  }
  char alt[512], bin[512];
  snprintf(alt, sizeof(alt), "%s/common.debug", dir);
  snprintf(bin, sizeof(bin), "%s/p1", dir);
  /* -M: the link names the alt file by its absolute path. */
  if (test_run("cd '%s' && dwz -m '%s' -M '%s' p1 p2", dir, alt, alt) ||
      access(alt, R_OK)) {
    print_message("dwz made no alt file here: skipped\n");
    cleanup(dir);
    skip();
  }

  /* The alt file where the link says: opened through the checked open,
   * its names used. */
  tg_sym_module_t m;
  tg_sym_stats_t st = {0};
  resolve_file(&m, bin, "tg_shared_area", &st);
  assert_int_equal(m.refused, TG_SYM_REFUSED_NONE);
  assert_true(m.addrs[0].lines[0].line > 0);
  tg_sym_module_free(&m);

  /* A FIFO in its place: refused, never opened by libdw, and the
   * function named from its symbol. */
  char real[600];
  snprintf(real, sizeof(real), "%s.real", alt);
  assert_int_equal(rename(alt, real), 0);
  assert_int_equal(mkfifo(alt, 0600), 0);
  resolve_file(&m, bin, "tg_shared_area", &st);
  assert_int_equal(m.refused, TG_SYM_REFUSED_NOT_REGULAR);
  assert_int_equal(st.refused[TG_SYM_REFUSED_NOT_REGULAR], 1);
  tg_sym_module_free(&m);
  cleanup(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(split_dwarf_dwo_never_opened),
      cmocka_unit_test(dwz_alt_file_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
