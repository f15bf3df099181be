/* SPDX-License-Identifier: Apache-2.0 */
/* The symbolizer against a hostile trace (consumer/symbolize/symbolize.h):
 * 20,000 mappings whose iids collide under a fixed hash and 100,000
 * frames are all kept (seeded hash tables: the bench bench_symbolize
 * times it); the deadline is asked at every packet (an injected clock);
 * paths the trace names that are FIFOs, directories, under /proc, /sys
 * or /dev (also through a link or after "//" and "."), or hold "..",
 * are refused, each counted by reason, and a link to a regular file is
 * still used; debuginfod is not asked past its lookup cap, nor at all
 * once its time is spent. */

#include <dlfcn.h>
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
#include <libelf.h>

#include "consumer/symbolize/symbolize.h"
#include "tests/perf/sym_hostile_trace.h"

#define N_MAPS 20000u
#define N_FRAMES 100000u

/* |b|'s bytes in an unlinked temporary file, at its start. */
static int temp_trace(const tg_buf_t *b) {
  char path[] = "/tmp/tg_sym_guard_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(write(fd, tg_buf_begin(b), tg_buf_size(b)),
                   (ssize_t)tg_buf_size(b));
  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
  return fd;
}

static void many_colliding_mappings_all_kept(void **state) {
  (void)state;
  tg_buf_t t;
  tg_buf_init(&t, 0);
  assert_int_equal(hostile_trace(&t, N_MAPS, N_FRAMES), 0);
  int fd = temp_trace(&t);
  tg_sym_t s;
  tg_sym_init(&s);
  char why[256] = "";
  tg_sym_opts_t o = {.module_files = true};
  assert_int_equal(tg_sym_collect_fd(&s, fd, -1, &o, why, sizeof(why)), 0);
  assert_int_equal(s.n_mods, N_MAPS);
  assert_int_equal(s.n_pcs, N_FRAMES);
  assert_int_equal(s.packets, (N_MAPS + 99) / 100);
  /* Every module its own five frames, in order. */
  assert_int_equal(s.mods[N_MAPS - 1].n_pcs, N_FRAMES / N_MAPS);
  assert_int_equal(s.mods[N_MAPS - 1].pcs[4], 0x1000 + 16 * 4);
  assert_string_equal(s.mods[N_MAPS - 1].path, "/lib19999.so");
  /* Their paths exist nowhere: resolved to nothing, each once. */
  tg_sym_result_t r;
  assert_int_equal(tg_sym_resolve_all(&s, &o, &r), 0);
  assert_int_equal(r.modules, N_MAPS);
  assert_int_equal(r.frames, N_FRAMES);
  assert_int_equal(r.modules_found, 0);
  close(fd);
  tg_sym_free(&s);
  tg_buf_free(&t);
}

/* A clock that moves 1 ns each time it is read. */
static uint64_t tick_ns(const tg_clock_t *k) {
  return ++*(uint64_t *)k->ctx;
}
static uint64_t tick_ms(const tg_clock_t *k) { return tick_ns(k) / 1000000u; }

static void deadline_asked_at_every_packet(void **state) {
  (void)state;
  tg_buf_t t;
  tg_buf_init(&t, 0);
  /* 100 packets of about 6 KB: ten or so per 64 KiB read. */
  assert_int_equal(hostile_trace(&t, 10000, 0), 0);
  int fd = temp_trace(&t);
  uint64_t now = 0;
  tg_clock_t clock = {.now_ms = tick_ms,
                      .now_ns = tick_ns,
                      .now_wall_ms = tg__clock_realtime_ms,
                      .ctx = &now};
  tg_sym_t s;
  tg_sym_init(&s);
  char why[256] = "";
  tg_sym_opts_t o = {.clock = &clock, .deadline_ns = 50};
  assert_int_equal(tg_sym_collect_fd(&s, fd, -1, &o, why, sizeof(why)),
                   -ETIMEDOUT);
  /* One reading before each read, one per packet: stopped within the
   * 50 readings, not at the end of a read. */
  assert_true(s.packets >= 40 && s.packets < 50);
  assert_null(s.stop);
  close(fd);
  tg_sym_free(&s);
  tg_buf_free(&t);
}

/* A module of this test's own build id at |path|, with one address. */
static void module_at(tg_sym_module_t *m, const char *path) {
  static uint8_t id[TG_SYM_MAX_BUILD_ID];
  static size_t id_len;
  if (!id_len) {
    elf_version(EV_CURRENT);
    int fd = open("/proc/self/exe", O_RDONLY);
    assert_true(fd >= 0);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    const void *p;
    ssize_t n = dwelf_elf_gnu_build_id(e, &p);
    assert_true(n > 1 && n <= TG_SYM_MAX_BUILD_ID);
    memcpy(id, p, (size_t)n);
    id_len = (size_t)n;
    elf_end(e);
    close(fd);
  }
  memset(m, 0, sizeof(*m));
  assert_non_null(m->path = strdup(path));
  memcpy(m->build_id, id, id_len);
  m->build_id_len = id_len;
  assert_non_null(m->pcs = malloc(sizeof(*m->pcs)));
  m->pcs[0] = 0x1000;
  m->n_pcs = m->cap_pcs = 1;
}

static void named_files_refused_by_reason(void **state) {
  (void)state;
  char dir[] = "/tmp/tg_sym_named_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char fifo[64], link_mem[64], link_self[64], self[4096];
  snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
  snprintf(link_mem, sizeof(link_mem), "%s/mem", dir);
  snprintf(link_self, sizeof(link_self), "%s/self", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(symlink("/proc/self/mem", link_mem), 0);
  ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
  assert_true(k > 0);
  self[k] = '\0';
  assert_int_equal(symlink(self, link_self), 0);
  char dotdot[128];
  snprintf(dotdot, sizeof(dotdot), "%s/../%s", dir, dir + 5);
  const struct {
    const char *path;
    tg_sym_refusal_t why;
  } cases[] = {
      {fifo, TG_SYM_REFUSED_NOT_REGULAR},
      {dir, TG_SYM_REFUSED_NOT_REGULAR},
      {"/proc/self/mem", TG_SYM_REFUSED_KERNEL_FS},
      {"//proc/./self/mem", TG_SYM_REFUSED_KERNEL_FS},
      {"/./dev//null", TG_SYM_REFUSED_KERNEL_FS},
      {"/sys/kernel/notes", TG_SYM_REFUSED_KERNEL_FS},
      {link_mem, TG_SYM_REFUSED_KERNEL_FS},
      {dotdot, TG_SYM_REFUSED_DOTDOT},
      {"/usr/../proc/self/mem", TG_SYM_REFUSED_DOTDOT},
      {"relative/lib.so", TG_SYM_REFUSED_DOTDOT},
  };
  size_t n = sizeof(cases) / sizeof(cases[0]);
  tg_sym_stats_t st = {0};
  uint64_t want[TG_SYM_REFUSED_N] = {0};
  for (size_t i = 0; i < n; i++) {
    tg_sym_refusal_t why;
    assert_int_equal(tg_sym_open(cases[i].path, true, &why), -1);
    assert_int_equal(why, cases[i].why);
    /* A relative module path is never even tried (trace_processor's are
     * all "/" + components). */
    if (cases[i].path[0] != '/') continue;
    /* Through the resolution: nothing named, the reason counted. */
    tg_sym_module_t m;
    module_at(&m, cases[i].path);
    tg_sym_opts_t o = {.module_files = true, .stats = &st};
    assert_int_equal(tg_sym_resolve(&m, &o), 0);
    assert_int_equal(m.source, TG_SYM_SRC_NONE);
    assert_int_equal(m.n_addrs, 0);
    assert_int_equal(m.refused, cases[i].why);
    want[cases[i].why]++;
    tg_sym_module_free(&m);
  }
  assert_memory_equal(st.refused, want, sizeof(want));
  /* Not refused: a missing file, and a link to a regular file (used). */
  tg_sym_refusal_t why;
  assert_int_equal(tg_sym_open("/nonexistent/lib.so", true, &why), -1);
  assert_int_equal(why, TG_SYM_REFUSED_NONE);
  int fd = tg_sym_open(link_self, true, &why);
  assert_true(fd >= 0);
  assert_int_equal(why, TG_SYM_REFUSED_NONE);
  close(fd);
  tg_sym_module_t m;
  module_at(&m, link_self);
  tg_sym_opts_t o = {.module_files = true, .stats = &st};
  assert_int_equal(tg_sym_resolve(&m, &o), 0);
  assert_int_equal(m.source, TG_SYM_SRC_MODULE);
  assert_int_equal(m.refused, TG_SYM_REFUSED_NONE);
  tg_sym_module_free(&m);
  /* Paths the operator gave (a debug dir) may be relative. */
  assert_int_equal(chdir(dir), 0);
  assert_true((fd = tg_sym_open("self", false, &why)) >= 0);
  close(fd);
  assert_int_equal(chdir("/"), 0);
  unlink(fifo);
  unlink(link_mem);
  unlink(link_self);
  rmdir(dir);
}

/* Modules of made-up build ids, found nowhere locally: each would be a
 * debuginfod lookup. */
static void debuginfod_capped(void **state) {
  (void)state;
  void *lib = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    /* Without it no lookup is made: nothing to cap. */
    skip();
    return;
  }
  dlclose(lib);
  char cache[] = "/tmp/tg_sym_dbgf_XXXXXX";
  assert_non_null(mkdtemp(cache));
  /* A server that answers nothing, at once; its cache of this test's. */
  setenv("DEBUGINFOD_URLS", "file:///nonexistent-tg-debuginfod", 1);
  setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
  tg_sym_stats_t st = {0};
  tg_sym_opts_t o = {.debuginfod = true, .debuginfod_max_lookups = 2,
                     .stats = &st};
  for (int i = 0; i < 5; i++) {
    tg_sym_module_t m;
    char path[32];
    snprintf(path, sizeof(path), "/nonexistent/l%d.so", i);
    module_at(&m, path);
    m.build_id[0] = (uint8_t)(0xA0 + i); /* not this test's */
    assert_int_equal(tg_sym_resolve(&m, &o), 0);
    assert_int_equal(m.source, TG_SYM_SRC_NONE);
    tg_sym_module_free(&m);
  }
  assert_int_equal(st.debuginfod_lookups, 2);
  assert_int_equal(st.debuginfod_found, 0);
  assert_int_equal(st.debuginfod_refused, 3);
  /* Its time spent: no lookup at all. */
  tg_sym_stats_t spent = {.debuginfod_ns = 5000000000ull};
  tg_sym_opts_t t = {.debuginfod = true, .debuginfod_max_ns = 5000000000ull,
                     .stats = &spent};
  tg_sym_module_t m;
  module_at(&m, "/nonexistent/t.so");
  m.build_id[0] ^= 0xFF;
  assert_int_equal(tg_sym_resolve(&m, &t), 0);
  tg_sym_module_free(&m);
  assert_int_equal(spent.debuginfod_lookups, 0);
  assert_int_equal(spent.debuginfod_refused, 1);
  /* And without stats to count against, never. */
  tg_sym_opts_t none = {.debuginfod = true};
  module_at(&m, "/nonexistent/u.so");
  m.build_id[0] ^= 0xFF;
  assert_int_equal(tg_sym_resolve(&m, &none), 0);
  tg_sym_module_free(&m);
  unsetenv("DEBUGINFOD_URLS");
  unsetenv("DEBUGINFOD_CACHE_PATH");
  char cmd[96];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cache);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(many_colliding_mappings_all_kept),
      cmocka_unit_test(deadline_asked_at_every_packet),
      cmocka_unit_test(named_files_refused_by_reason),
      cmocka_unit_test(debuginfod_capped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
