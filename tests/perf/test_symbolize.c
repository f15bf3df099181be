/* SPDX-License-Identifier: Apache-2.0 */
/* `tracegate symbolize`'s library (consumer/symbolize/symbolize.h): the
 * build-id path, the ModuleSymbols writer against golden bytes, the
 * collector on hand-made packets (interning per sequence and machine,
 * clears, field order, malformed input), and the debug file lookup order
 * on this test's own executable (built with -g): a .build-id tree first,
 * then the module's own file, and never a file of another build id; an
 * address in its PLT named "NAME@plt" with no line, from the own file
 * when the debug file (--only-keep-debug) holds no PLT. */

#include <errno.h>
#include <link.h>
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
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

#include "consumer/symbolize/symbolize.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

static void test_build_id_path(void **state) {
  (void)state;
  const uint8_t id[] = {0xab, 0xcd, 0x01, 0xf0};
  char p[64];
  assert_int_equal(tg_sym_build_id_path("/d", id, 4, p, sizeof(p)), 0);
  assert_string_equal(p, "/d/.build-id/ab/cd01f0.debug");
  assert_int_equal(tg_sym_build_id_path("/d", id, 1, p, sizeof(p)), -EINVAL);
  assert_int_equal(tg_sym_build_id_path("/d", id, 4, p, 20), -ENAMETOOLONG);
}

static void test_write_golden(void **state) {
  (void)state;
  tg_sym_line_t line = {.function = "f", .file = "x.c", .line = 7};
  tg_sym_addr_t addr = {.rel_pc = 0x10, .lines = &line, .n_lines = 1};
  tg_sym_module_t m = {.machine_id = 2, .path = "/b", .build_id = {1, 2},
                       .build_id_len = 2, .addrs = &addr, .n_addrs = 1};
  static const uint8_t golden[] = {
      0x0a, 30,                        /* Trace.packet */
      0xea, 0x03, 24,                  /* TracePacket.module_symbols (61) */
      0x0a, 2, '/', 'b',               /* path */
      0x12, 2, 1, 2,                   /* build_id: raw bytes */
      0x1a, 14,                        /* address_symbols */
      0x08, 0x10,                      /* address: rel_pc */
      0x12, 10,                        /* lines */
      0x0a, 1, 'f', 0x12, 3, 'x', '.', 'c', 0x18, 7,
      0x90, 0x06, 2,                   /* machine_id (98) */
  };
  tg_buf_t out;
  tg_buf_init(&out, 0);
  assert_int_equal(tg_sym_write_module(&m, &out), 0);
  assert_int_equal(tg_buf_size(&out), sizeof(golden));
  assert_memory_equal(tg_buf_begin(&out), golden, sizeof(golden));

  /* Machine 0: no machine_id field; no address: no packet. */
  tg_buf_reset(&out);
  m.machine_id = 0;
  assert_int_equal(tg_sym_write_module(&m, &out), 0);
  assert_int_equal(tg_buf_size(&out), sizeof(golden) - 3);
  tg_buf_reset(&out);
  m.n_addrs = 0;
  assert_int_equal(tg_sym_write_module(&m, &out), 0);
  assert_int_equal(tg_buf_size(&out), 0);

  /* Past TG_SYM_ADDRS_PER_PACKET addresses: one more packet. */
  size_t n = TG_SYM_ADDRS_PER_PACKET + 1;
  tg_sym_addr_t *many = calloc(n, sizeof(*many));
  assert_non_null(many);
  for (size_t i = 0; i < n; i++) many[i] = addr;
  m.addrs = many;
  m.n_addrs = n;
  tg_buf_reset(&out);
  assert_int_equal(tg_sym_write_module(&m, &out), 0);
  tg_sym_t s;
  tg_sym_init(&s);
  const uint8_t *p = tg_buf_begin(&out), *end = p + tg_buf_size(&out);
  size_t packets = 0;
  while (p < end) {
    uint64_t len;
    assert_int_equal(p[0], 0x0a);
    size_t k = tg_pb_read_varint(p + 1, end, &len);
    assert_true(k > 0 && len <= (uint64_t)(end - p - 1 - k));
    assert_int_equal(tg_sym_packet(&s, p + 1 + k, (size_t)len), 0);
    p += 1 + k + len;
    packets++;
  }
  assert_int_equal(packets, 2);
  assert_int_equal(s.module_symbols_in, 2);
  tg_sym_free(&s);
  free(many);
  tg_buf_free(&out);
}

/* --- hand-made packets ------------------------------------------------------ */

static void pv(tg_buf_t *b, uint64_t v) {
  do {
    uint8_t c = (uint8_t)(v & 0x7F);
    v >>= 7;
    if (v) c |= 0x80;
    assert_int_equal(tg_buf_append(b, &c, 1), 0);
  } while (v);
}
static void pu(tg_buf_t *b, uint32_t f, uint64_t v) {
  pv(b, (uint64_t)f << 3);
  pv(b, v);
}
static void pb(tg_buf_t *b, uint32_t f, const void *p, size_t n) {
  pv(b, (uint64_t)f << 3 | 2);
  pv(b, n);
  assert_int_equal(tg_buf_append(b, p, n), 0);
}
static void pm(tg_buf_t *b, uint32_t f, tg_buf_t *m) {
  pb(b, f, tg_buf_begin(m), tg_buf_size(m));
  tg_buf_reset(m);
}

static void istr(tg_buf_t *in, uint32_t f, uint64_t iid, const char *s,
                 size_t n) {
  tg_buf_t m;
  tg_buf_init(&m, 0);
  pu(&m, 1, iid);
  pb(&m, 2, s, n);
  pm(in, f, &m);
  tg_buf_free(&m);
}

static void frame(tg_buf_t *in, uint64_t iid, uint64_t mapping, uint64_t pc) {
  tg_buf_t m;
  tg_buf_init(&m, 0);
  pu(&m, 1, iid);
  pu(&m, 3, mapping);
  pu(&m, 4, pc);
  pm(in, 6, &m);
  tg_buf_free(&m);
}

/* A packet on sequence |seq| of |machine| (0: none), with |flags|, and
 * the interned data |in| (may be empty). */
static void feed(tg_sym_t *s, uint64_t seq, uint64_t machine, uint64_t flags,
                 tg_buf_t *in, int want) {
  tg_buf_t p;
  tg_buf_init(&p, 0);
  pu(&p, 10, seq);
  if (flags) pu(&p, 13, flags);
  if (tg_buf_size(in)) pm(&p, 12, in);
  if (machine) pu(&p, 98, machine);
  assert_int_equal(tg_sym_packet(s, tg_buf_begin(&p), tg_buf_size(&p)), want);
  tg_buf_free(&p);
}

static void test_collect(void **state) {
  (void)state;
  tg_sym_t s;
  tg_sym_init(&s);
  tg_buf_t in, m;
  tg_buf_init(&in, 0);
  tg_buf_init(&m, 0);
  /* Frames first, the mapping and its strings after: order within one
   * InternedData does not matter. Path components packed. */
  frame(&in, 1, 5, 0x40);
  frame(&in, 2, 5, 0x30);
  frame(&in, 3, 5, 0x40);
  pu(&m, 1, 5);
  pu(&m, 2, 1);
  pb(&m, 7, "\x01\x02", 2);
  pm(&in, 19, &m);
  istr(&in, 16, 1, "\x01\x02", 2);
  istr(&in, 17, 1, "usr", 3);
  istr(&in, 17, 2, "bin", 3);
  feed(&s, 7, 3, 1, &in, 0);
  /* Another frame of the same mapping in a later packet. */
  frame(&in, 4, 5, 0x20);
  feed(&s, 7, 3, 0, &in, 0);
  /* The same sequence id on another machine knows no mapping 5. */
  frame(&in, 4, 5, 0x99);
  feed(&s, 7, 4, 0, &in, 0);
  /* After a clear, mapping 5 is gone on machine 3's sequence 7. */
  feed(&s, 7, 3, 1, &in, 0);
  frame(&in, 5, 5, 0x98);
  feed(&s, 7, 3, 0, &in, 0);
  /* Malformed: a length past the end. */
  uint8_t bad[] = {0x62, 0x05, 0x32, 0x01};
  assert_int_equal(tg_sym_packet(&s, bad, sizeof(bad)), TG_EPARSE);

  tg_sym_finish_collect(&s);
  assert_int_equal(s.n_mods, 1);
  const tg_sym_module_t *mod = &s.mods[0];
  assert_int_equal(mod->machine_id, 3);
  assert_string_equal(mod->path, "/usr/bin");
  assert_int_equal(mod->build_id_len, 2);
  assert_memory_equal(mod->build_id, "\x01\x02", 2);
  assert_int_equal(mod->n_pcs, 3);
  assert_int_equal(mod->pcs[0], 0x20);
  assert_int_equal(mod->pcs[1], 0x30);
  assert_int_equal(mod->pcs[2], 0x40);
  tg_buf_free(&in);
  tg_buf_free(&m);
  tg_sym_free(&s);
}

/* --- the lookup order on this executable ----------------------------------- */

__attribute__((noinline)) int golden_fn(int x);
__attribute__((noinline)) int golden_fn(int x) { return x * 3 + 1; }

static int base_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  if (info->dlpi_name[0] == '\0') { /* the executable */
    *(uintptr_t *)data = info->dlpi_addr;
    return 1;
  }
  return 0;
}

static void self_module(tg_sym_module_t *m, char *path, size_t n) {
  ssize_t k = readlink("/proc/self/exe", path, n - 1);
  assert_true(k > 0);
  path[k] = '\0';
  memset(m, 0, sizeof(*m));
  m->path = strdup(path);
  assert_non_null(m->path);
  elf_version(EV_CURRENT);
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  const void *id;
  ssize_t len = dwelf_elf_gnu_build_id(e, &id);
  assert_true(len > 1 && len <= TG_SYM_MAX_BUILD_ID);
  memcpy(m->build_id, id, (size_t)len);
  m->build_id_len = (size_t)len;
  elf_end(e);
  close(fd);
  uintptr_t base = 0;
  dl_iterate_phdr(base_cb, &base);
  m->pcs = malloc(sizeof(*m->pcs));
  assert_non_null(m->pcs);
  m->pcs[0] = (uintptr_t)golden_fn - base;
  m->n_pcs = m->cap_pcs = 1;
}

static void test_lookup_order(void **state) {
  (void)state;
  if (access("/proc/self/exe", R_OK)) skip();
  char self[4096], dir[] = "/tmp/tg_sym_XXXXXX", link_path[4200];
  assert_non_null(mkdtemp(dir));
  tg_sym_module_t m;

  /* Own file only. */
  self_module(&m, self, sizeof(self));
  tg_sym_opts_t o = {.debug_dirs = {dir}, .n_debug_dirs = 1,
                     .module_files = true};
  assert_int_equal(tg_sym_resolve(&m, &o), 0);
  assert_int_equal(m.source, TG_SYM_SRC_MODULE);
  assert_int_equal(m.n_addrs, 1);
  assert_string_equal(m.addrs[0].lines[0].function, "golden_fn");
  assert_non_null(strstr(m.addrs[0].lines[0].file, "test_symbolize.c"));
  assert_true(m.addrs[0].lines[0].line > 0);
  tg_sym_module_free(&m);

  /* The .build-id tree comes first. */
  assert_int_equal(tg_sym_build_id_path(dir, m.build_id, 0, link_path,
                                        sizeof(link_path)), -EINVAL);
  self_module(&m, self, sizeof(self));
  assert_int_equal(tg_sym_build_id_path(dir, m.build_id, m.build_id_len,
                                        link_path, sizeof(link_path)), 0);
  char sub[4200];
  snprintf(sub, sizeof(sub), "%s/.build-id", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  *strrchr(link_path, '/') = '\0';
  assert_int_equal(mkdir(link_path, 0700), 0);
  assert_int_equal(tg_sym_build_id_path(dir, m.build_id, m.build_id_len,
                                        link_path, sizeof(link_path)), 0);
  assert_int_equal(symlink(self, link_path), 0);
  assert_int_equal(tg_sym_resolve(&m, &o), 0);
  assert_int_equal(m.source, TG_SYM_SRC_BUILD_ID);
  assert_string_equal(m.debug_file, link_path);
  assert_int_equal(m.n_addrs, 1);
  tg_sym_module_free(&m);

  /* Another build id: neither the tree's file nor the own file. */
  self_module(&m, self, sizeof(self));
  m.build_id[0] ^= 0xFF;
  assert_int_equal(tg_sym_resolve(&m, &o), 0);
  assert_int_equal(m.source, TG_SYM_SRC_NONE);
  assert_int_equal(m.n_addrs, 0);
  tg_sym_module_free(&m);

  /* Own files off, no tree: nothing. */
  unlink(link_path);
  self_module(&m, self, sizeof(self));
  o.module_files = false;
  assert_int_equal(tg_sym_resolve(&m, &o), 0);
  assert_int_equal(m.source, TG_SYM_SRC_NONE);
  tg_sym_module_free(&m);
  *strrchr(link_path, '/') = '\0';
  rmdir(link_path);
  rmdir(sub);
  rmdir(dir);
  assert_int_equal(golden_fn(1), 4);
}

/* The first named PLT entry of |path|'s .rela.plt, read with libelf apart from
 * the parser under test: its entry's address (.plt.sec's, else the one
 * after .plt's header) and "NAME@plt" in |name|. False when none. */
static bool first_plt_entry(const char *path, uint64_t *addr, char *name,
                       size_t size) {
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  Elf *e = elf_begin(fd, ELF_C_READ, NULL);
  size_t shstrndx;
  assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
  GElf_Shdr plt = {0}, sec = {0}, rela = {0};
  Elf_Scn *scn = NULL, *rela_scn = NULL;
  while ((scn = elf_nextscn(e, scn))) {
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    const char *n = elf_strptr(e, shstrndx, sh.sh_name);
    if (!strcmp(n, ".plt")) plt = sh;
    if (!strcmp(n, ".plt.sec")) sec = sh;
    if (!strcmp(n, ".rela.plt")) {
      rela = sh;
      rela_scn = scn;
    }
  }
  bool found = false;
  if (rela_scn && plt.sh_addr) {
    Elf_Data *d = elf_getdata(rela_scn, NULL);
    Elf_Data *syms = elf_getdata(elf_getscn(e, rela.sh_link), NULL);
    GElf_Shdr symsh;
    gelf_getshdr(elf_getscn(e, rela.sh_link), &symsh);
    for (size_t i = 0; !found && i < rela.sh_size / rela.sh_entsize; i++) {
      GElf_Rela r;
      GElf_Sym sym;
      gelf_getrela(d, (int)i, &r);
      if (GELF_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT) continue;
      gelf_getsym(syms, (int)GELF_R_SYM(r.r_info), &sym);
      snprintf(name, size, "%s@plt",
               elf_strptr(e, symsh.sh_link, sym.st_name));
      *addr = sec.sh_addr ? sec.sh_addr + 16 * i : plt.sh_addr + 16 * (i + 1);
      found = true;
    }
  }
  elf_end(e);
  close(fd);
  return found;
}

static void test_plt_entry(void **state) {
  (void)state;
  if (access("/proc/self/exe", R_OK)) skip();
  char self[4096], dir[] = "/tmp/tg_plt_XXXXXX", dbg[4200], cmd[9000];
  tg_sym_t s;
  tg_sym_init(&s);
  s.mods = calloc(1, sizeof(*s.mods));
  assert_non_null(s.mods);
  s.n_mods = s.cap_mods = 1;
  tg_sym_module_t *m = &s.mods[0];
  self_module(m, self, sizeof(self));
  uint64_t plt_addr;
  char want[600];
  if (!first_plt_entry(self, &plt_addr, want, sizeof(want))) {
    tg_sym_free(&s);
    skip(); /* linked without a lazy PLT */
  }
  uint64_t fn = m->pcs[0];
  m->pcs = realloc(m->pcs, 2 * sizeof(*m->pcs));
  assert_non_null(m->pcs);
  m->pcs[0] = plt_addr < fn ? plt_addr : fn;
  m->pcs[1] = plt_addr < fn ? fn : plt_addr;
  m->n_pcs = m->cap_pcs = 2;
  size_t at = plt_addr < fn ? 0 : 1;

  /* The own file: the PLT entry by name, no file, no line; counted apart. */
  tg_sym_opts_t o = {.module_files = true};
  tg_sym_result_t res;
  assert_int_equal(tg_sym_resolve_all(&s, &o, &res), 0);
  assert_int_equal(m->source, TG_SYM_SRC_MODULE);
  assert_int_equal(m->n_addrs, 2);
  assert_int_equal(m->n_plt, 1);
  assert_int_equal(m->addrs[at].rel_pc, plt_addr);
  assert_int_equal(m->addrs[at].n_lines, 1);
  assert_string_equal(m->addrs[at].lines[0].function, want);
  assert_null(m->addrs[at].lines[0].file);
  assert_int_equal(m->addrs[at].lines[0].line, 0);
  assert_string_equal(m->addrs[1 - at].lines[0].function, "golden_fn");
  assert_int_equal(res.frames, 2);
  assert_int_equal(res.frames_named, 2);
  assert_int_equal(res.frames_with_line, 1);
  assert_int_equal(res.frames_plt, 1);
  /* Written as a line with only a function. */
  tg_buf_t out;
  tg_buf_init(&out, 0);
  assert_int_equal(tg_sym_write_module(m, &out), 0);
  assert_non_null(memmem(tg_buf_begin(&out), tg_buf_size(&out), want,
                         strlen(want)));
  tg_buf_free(&out);

  /* A --only-keep-debug file by build id: DWARF from it, the PLT entry from
   * the own file (its .rela.plt and .dynsym are SHT_NOBITS there). */
  assert_non_null(mkdtemp(dir));
  snprintf(cmd, sizeof(cmd), "objcopy --only-keep-debug '%s' '%s/d' 2>/dev/null",
           self, dir);
  if (system(cmd) != 0) {
    rmdir(dir);
    tg_sym_free(&s);
    skip(); /* no objcopy */
  }
  assert_int_equal(tg_sym_build_id_path(dir, m->build_id, m->build_id_len,
                                        dbg, sizeof(dbg)), 0);
  snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && mv '%s/d' '%s'",
           dbg, dir, dbg);
  assert_int_equal(system(cmd), 0);
  for (int own = 1; own >= 0; own--) {
    for (size_t i = 0; i < m->n_addrs; i++) {
      for (size_t l = 0; l < m->addrs[i].n_lines; l++) {
        free(m->addrs[i].lines[l].function);
        free(m->addrs[i].lines[l].file);
      }
      free(m->addrs[i].lines);
    }
    free(m->addrs);
    free(m->debug_file);
    m->addrs = NULL;
    m->debug_file = NULL;
    m->n_addrs = m->n_plt = 0;
    tg_sym_opts_t b = {.debug_dirs = {dir}, .n_debug_dirs = 1,
                       .module_files = own};
    assert_int_equal(tg_sym_resolve_all(&s, &b, &res), 0);
    assert_int_equal(m->source, TG_SYM_SRC_BUILD_ID);
    assert_string_equal(m->debug_file, dbg);
    assert_int_equal(res.frames_with_line, 1);
    /* Without the own file, the PLT entry has no name. */
    assert_int_equal(res.frames_plt, (size_t)own);
    assert_int_equal(res.frames_named, 1 + (size_t)own);
    if (own) assert_string_equal(m->addrs[at].lines[0].function, want);
  }
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  tg_sym_free(&s);
}

/* The same frames interned again and again (after each clear, in a long
 * trace) keep the collector's memory at the distinct addresses. */
static void test_collect_repeats(void **state) {
  (void)state;
  tg_sym_t s;
  tg_sym_init(&s);
  tg_buf_t in, m;
  tg_buf_init(&in, 0);
  tg_buf_init(&m, 0);
  for (int round = 0; round < 2000; round++) {
    pu(&m, 1, 5);
    pb(&m, 7, "\x01", 1);
    pm(&in, 19, &m);
    istr(&in, 17, 1, "w", 1);
    for (uint64_t f = 1; f <= 50; f++) frame(&in, f, 5, 0x10 * (f % 3 + 1));
    feed(&s, 7, 0, 1, &in, 0);
    tg_buf_reset(&in);
  }
  assert_int_equal(s.n_mods, 1);
  assert_true(s.n_pcs <= 64);
  tg_sym_finish_collect(&s);
  assert_int_equal(s.mods[0].n_pcs, 3);
  assert_int_equal(s.n_pcs, 3);
  tg_buf_free(&in);
  tg_buf_free(&m);
  tg_sym_free(&s);
}

/* A deadline past, or the cancel flag set, stops the walk of a trace and
 * the resolution of a module with their own codes (the collector's
 * symbolize_timeout and its stop), before any work. */
static void test_deadline_and_cancel(void **state) {
  (void)state;
  char path[] = "/tmp/tg_sym_trace_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  tg_sym_t s;
  tg_sym_init(&s);
  char why[128];
  tg_sym_opts_t o = {.deadline_ns = 1};
  assert_int_equal(tg_sym_should_stop(&o), -ETIMEDOUT);
  assert_int_equal(tg_sym_collect_fd(&s, fd, -1, &o, why, sizeof(why)),
                   -ETIMEDOUT);
  _Atomic bool stop = true;
  tg_sym_opts_t c = {.cancel = &stop};
  assert_int_equal(tg_sym_collect_fd(&s, fd, -1, &c, why, sizeof(why)),
                   -ECANCELED);
  /* No deadline, not cancelled: an empty trace walks to its end. */
  stop = false;
  assert_int_equal(tg_sym_should_stop(&c), 0);
  assert_int_equal(tg_sym_collect_fd(&s, fd, -1, &c, why, sizeof(why)), 0);
  close(fd);
  if (!access("/proc/self/exe", R_OK)) {
    char self[4096];
    tg_sym_module_t m;
    self_module(&m, self, sizeof(self));
    tg_sym_opts_t r = {.module_files = true, .deadline_ns = 1};
    assert_int_equal(tg_sym_resolve(&m, &r), -ETIMEDOUT);
    assert_int_equal(m.n_addrs, 0);
    tg_sym_module_free(&m);
  }
  tg_sym_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deadline_and_cancel),
      cmocka_unit_test(test_build_id_path),
      cmocka_unit_test(test_write_golden),
      cmocka_unit_test(test_collect),
      cmocka_unit_test(test_collect_repeats),
      cmocka_unit_test(test_lookup_order),
      cmocka_unit_test(test_plt_entry),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
