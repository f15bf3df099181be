/* The processes and files behind samples (agent/perf/perf_procs.h), on
 * this test process itself: its own function named from its address with
 * the mapping, build id and rel_pc a symbolizer needs; an address outside
 * every mapping; argv[0]; maps read again only when told or once per
 * round, and then at most a burst and one per period (an exec refills);
 * fixtures for a maps file that names a file missing, a FIFO, another
 * inode at the mapped path, and a file of a root of its own (opened
 * there and checked against the line's device and inode). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/perf/perf_procs.h"

__attribute__((noinline)) int tg_test_perf_procs_marker(int x);
__attribute__((noinline)) int tg_test_perf_procs_marker(int x) {
  return x * 5 + 2;
}

static void own_function_is_named(void **state) {
  (void)state;
  tg_perf_procs_t *p = tg_perf_procs_new(NULL, NULL);
  assert_non_null(p);
  uint32_t pid = (uint32_t)getpid();
  uint64_t pc = (uint64_t)(uintptr_t)&tg_test_perf_procs_marker + 4;
  tg_perf_emit_mapping_t m;
  tg_perf_emit_frame_t f;
  tg_perf_procs_frame(p, pid, pc, false, &m, &f);
  assert_ptr_equal(f.mapping, &m);
  assert_non_null(f.function);
  assert_string_equal(f.function, "tg_test_perf_procs_marker");
  assert_non_null(strstr(m.path, "test_perf_procs"));
  assert_true(m.build_id_len >= 8);
  assert_true(pc >= m.start && pc < m.end);
  /* rel_pc: the file offset in the ELF's own addresses (through the
   * executable load, whose p_vaddr - p_offset is the load bias). */
  assert_true(f.rel_pc == pc - m.start + m.exact_offset + m.load_bias);
  /* The same address as a return address looks up pc - 1: the same
   * function, as pc is 4 bytes into it. */
  tg_perf_procs_frame(p, pid, pc, true, &m, &f);
  assert_string_equal(f.function, "tg_test_perf_procs_marker");
  assert_int_equal(tg_test_perf_procs_marker(1), 7);

  const tg_perf_procs_stats_t *st = tg_perf_procs_stats(p);
  assert_int_equal(st->maps_reads, 1);
  assert_int_equal(st->files_read, 1);
  assert_int_equal(st->named_pcs, 2);

  /* An address in no mapping: read again once this round, then not. */
  tg_perf_procs_frame(p, pid, 0x10, false, &m, &f);
  assert_string_equal(m.path, "[unknown]");
  assert_int_equal(f.rel_pc, 0x10);
  assert_null(f.function);
  tg_perf_procs_frame(p, pid, 0x20, false, &m, &f);
  assert_int_equal(st->maps_reads, 2);
  assert_int_equal(st->unknown_pcs, 2);
  tg_perf_procs_new_round(p, 0);
  tg_perf_procs_frame(p, pid, 0x20, false, &m, &f);
  assert_int_equal(st->maps_reads, 3);
  /* Told the maps changed: read again at the next frame. */
  tg_perf_procs_invalidate(p, pid, false);
  tg_perf_procs_frame(p, pid, pc, false, &m, &f);
  assert_int_equal(st->maps_reads, 4);
  assert_int_equal(st->files_read, 1); /* the file is kept */

  assert_non_null(strstr(tg_perf_procs_argv0(p, pid), "test_perf_procs"));
  assert_int_equal(tg_perf_procs_load(p, pid), 0);
  /* A process that is gone (pids never reach 2^31 - 2). */
  assert_int_equal(tg_perf_procs_load(p, 0x7ffffffe), -ENOENT);
  tg_perf_procs_free(p);
}

static void a_missing_file_gives_an_unnamed_frame(void **state) {
  (void)state;
  char dir[] = "/tmp/tg_perf_procs_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[64], maps[80], fmt[64];
  snprintf(sub, sizeof(sub), "%s/4242", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  snprintf(maps, sizeof(maps), "%s/maps", sub);
  snprintf(fmt, sizeof(fmt), "%s/%%d/maps", dir);
  FILE *f = fopen(maps, "w");
  assert_non_null(f);
  fputs("1000-3000 r-xp 00002000 08:01 77 /nonexistent/lib.so\n"
        "5000-6000 r-xp 00000000 00:00 0 [vdso]\n", f);
  fclose(f);
  tg_perf_procs_t *p = tg_perf_procs_new(dir, fmt);
  assert_non_null(p);
  tg_perf_emit_mapping_t m;
  tg_perf_emit_frame_t fr;
  tg_perf_procs_frame(p, 4242, 0x1010, false, &m, &fr);
  assert_string_equal(m.path, "/nonexistent/lib.so");
  assert_int_equal(m.start, 0x1000);
  assert_int_equal(m.end, 0x3000);
  assert_int_equal(m.exact_offset, 0x2000);
  assert_int_equal(m.build_id_len, 0);
  assert_int_equal(fr.rel_pc, 0x2010); /* the file offset */
  assert_null(fr.function);
  assert_int_equal(tg_perf_procs_stats(p)->files_failed, 1);
  assert_int_equal(tg_perf_procs_stats(p)->files_refused[TG_PERF_OPEN_MISSING],
                   1);
  tg_perf_procs_frame(p, 4242, 0x5008, false, &m, &fr);
  assert_string_equal(m.path, "[vdso]");
  assert_int_equal(fr.rel_pc, 8);
  tg_perf_procs_free(p);
  unlink(maps);
  rmdir(sub);
  rmdir(dir);
}

static void rereads_are_rate_limited(void **state) {
  (void)state;
  tg_perf_procs_t *p = tg_perf_procs_new(NULL, NULL);
  assert_non_null(p);
  const tg_perf_procs_stats_t *st = tg_perf_procs_stats(p);
  uint32_t pid = (uint32_t)getpid();
  uint64_t pc = (uint64_t)(uintptr_t)&tg_test_perf_procs_marker + 4;
  tg_perf_emit_mapping_t m;
  tg_perf_emit_frame_t f;
  uint64_t t0 = 1000000;
  tg_perf_procs_new_round(p, t0);
  tg_perf_procs_frame(p, pid, pc, false, &m, &f);
  assert_int_equal(st->maps_reads, 1);
  /* A process looping on executable mmaps: the burst, then none. */
  for (int i = 0; i < 10; i++) {
    tg_perf_procs_invalidate(p, pid, false);
    tg_perf_procs_frame(p, pid, pc, false, &m, &f);
    assert_string_equal(f.function, "tg_test_perf_procs_marker");
  }
  assert_int_equal(st->maps_reads, 1 + TG_PERF_MAPS_REREAD_BURST);
  assert_int_equal(st->maps_rereads_deferred, 10 - TG_PERF_MAPS_REREAD_BURST);
  /* Nor for an address outside every mapping. */
  tg_perf_procs_frame(p, pid, 0x10, false, &m, &f);
  assert_int_equal(st->maps_reads, 1 + TG_PERF_MAPS_REREAD_BURST);
  /* Just before the period: still none; at it, one. */
  tg_perf_procs_new_round(p, t0 + TG_PERF_MAPS_REREAD_MS - 1);
  tg_perf_procs_frame(p, pid, pc, false, &m, &f);
  assert_int_equal(st->maps_reads, 1 + TG_PERF_MAPS_REREAD_BURST);
  tg_perf_procs_new_round(p, t0 + TG_PERF_MAPS_REREAD_MS);
  tg_perf_procs_frame(p, pid, pc, false, &m, &f);
  assert_int_equal(st->maps_reads, 2 + TG_PERF_MAPS_REREAD_BURST);
  tg_perf_procs_frame(p, pid, pc, false, &m, &f);
  assert_int_equal(st->maps_reads, 2 + TG_PERF_MAPS_REREAD_BURST);
  /* An exec: read at once. */
  tg_perf_procs_invalidate(p, pid, true);
  tg_perf_procs_frame(p, pid, pc, false, &m, &f);
  assert_int_equal(st->maps_reads, 3 + TG_PERF_MAPS_REREAD_BURST);
  tg_perf_procs_free(p);
}

/* A root of its own under a temporary directory, with a maps fixture. */
typedef struct root_fixture {
  char dir[64], root[96], maps[160], maps_fmt[96];
} root_fixture_t;

static void root_fixture(root_fixture_t *fx) {
  snprintf(fx->dir, sizeof(fx->dir), "/tmp/tg_perf_procs_XXXXXX");
  assert_non_null(mkdtemp(fx->dir));
  char sub[128];
  snprintf(fx->root, sizeof(fx->root), "%s/root", fx->dir);
  assert_int_equal(mkdir(fx->root, 0700), 0);
  snprintf(sub, sizeof(sub), "%s/lib", fx->root);
  assert_int_equal(mkdir(sub, 0700), 0);
  snprintf(sub, sizeof(sub), "%s/4242", fx->dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  snprintf(fx->maps, sizeof(fx->maps), "%s/maps", sub);
  snprintf(fx->maps_fmt, sizeof(fx->maps_fmt), "%s/%%d/maps", fx->dir);
}

static void root_fixture_done(root_fixture_t *fx) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
  assert_int_equal(system(cmd), 0);
}

static void map_line(FILE *f, uint64_t start, const char *root,
                     const char *path) {
  char full[256];
  snprintf(full, sizeof(full), "%s%s", root, path);
  struct stat st;
  assert_int_equal(stat(full, &st), 0);
  fprintf(f, "%llx-%llx r-xp 00000000 %02x:%02x %llu %s\n",
          (unsigned long long)start, (unsigned long long)start + 0x1000,
          major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino,
          path);
}

static void files_are_opened_in_their_root_and_checked(void **state) {
  (void)state;
  /* A blocked open fails the test instead of hanging it. */
  alarm(60);
  root_fixture_t fx;
  root_fixture(&fx);
  char p[256], cmd[512];
  /* The test's own executable, as the root's library. */
  char self[256];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  assert_true(n > 0);
  self[n] = '\0';
  snprintf(cmd, sizeof(cmd), "cp '%s' '%s/lib/own.so'", self, fx.root);
  assert_int_equal(system(cmd), 0);
  snprintf(p, sizeof(p), "%s/lib/fifo.so", fx.root);
  assert_int_equal(mkfifo(p, 0644), 0);
  snprintf(p, sizeof(p), "%s/lib/swap.so", fx.root);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs("mapped", f);
  fclose(f);
  f = fopen(fx.maps, "w");
  assert_non_null(f);
  map_line(f, 0x10000, fx.root, "/lib/own.so");
  map_line(f, 0x20000, fx.root, "/lib/fifo.so");
  map_line(f, 0x30000, fx.root, "/lib/swap.so");
  fclose(f);
  /* The mapped file moves away (its inode stays taken) and another
   * takes its path. */
  char kept[256];
  snprintf(kept, sizeof(kept), "%s/kept.so", fx.root);
  assert_int_equal(rename(p, kept), 0);
  f = fopen(p, "w");
  assert_non_null(f);
  fputs("swapped", f);
  fclose(f);

  tg_perf_procs_t *pp = tg_perf_procs_new(fx.root, fx.maps_fmt);
  assert_non_null(pp);
  const tg_perf_procs_stats_t *st = tg_perf_procs_stats(pp);
  tg_perf_emit_mapping_t m;
  tg_perf_emit_frame_t fr;
  tg_perf_procs_frame(pp, 4242, 0x10010, false, &m, &fr);
  assert_string_equal(m.path, "/lib/own.so");
  assert_true(m.build_id_len >= 8);
  assert_int_equal(st->files_read, 1);
  tg_perf_procs_frame(pp, 4242, 0x20010, false, &m, &fr);
  assert_string_equal(m.path, "/lib/fifo.so");
  assert_int_equal(m.build_id_len, 0);
  assert_int_equal(st->files_refused[TG_PERF_OPEN_NOT_REGULAR], 1);
  tg_perf_procs_frame(pp, 4242, 0x30010, false, &m, &fr);
  assert_int_equal(m.build_id_len, 0);
  assert_int_equal(st->files_refused[TG_PERF_OPEN_OTHER_FILE], 1);
  assert_int_equal(st->files_failed, 2);
  assert_int_equal(st->files_read, 1);
  tg_perf_procs_free(pp);
  root_fixture_done(&fx);
  alarm(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rereads_are_rate_limited),
      cmocka_unit_test(files_are_opened_in_their_root_and_checked),
      cmocka_unit_test(own_function_is_named),
      cmocka_unit_test(a_missing_file_gives_an_unnamed_frame),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
