/* DWARF unwinding (agent/perf/perf_unwind.h) on real samples, without a
 * service: a child spins in main -> unwind_level1 -> unwind_level2 ->
 * unwind_leaf; a task-clock event on it (user mode only, which
 * perf_event_paranoid 2 allows any user) copies its registers and stack;
 * each sample is parsed (perf_record.h), unwound and named
 * (perf_procs.h). Some sample must name the whole chain, leaf first;
 * every sample's first frame is its own ip. Then programs built here
 * whose DWARF names a dwz alt file and a split-DWARF .dwo, both FIFOs,
 * unwind as well: libdw opens neither. Skipped where perf_event_open is
 * refused. */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/perf/perf_procs.h"
#include "agent/perf/perf_record.h"
#include "agent/perf/perf_unwind.h"
#include "tests/perf/test_cmd.h"

/* Each sample holds a 16 KiB stack copy: 32 pages hold about seven. */
#define PAGES 32
#define WANT_SAMPLES 4

static volatile uint64_t sink;

__attribute__((noinline)) void unwind_leaf(void);
__attribute__((noinline)) void unwind_leaf(void) {
  for (;;) sink++;
}
__attribute__((noinline)) void unwind_level2(void);
__attribute__((noinline)) void unwind_level2(void) {
  unwind_leaf();
  sink++;
}
__attribute__((noinline)) void unwind_level1(void);
__attribute__((noinline)) void unwind_level1(void) {
  unwind_level2();
  sink++;
}

static int open_on(pid_t pid) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = 1000000; /* every ms of the child's CPU time */
  a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                  PERF_SAMPLE_CPU | PERF_SAMPLE_READ | PERF_SAMPLE_REGS_USER |
                  PERF_SAMPLE_STACK_USER;
  a.sample_regs_user = tg_perf_unwind_regs_mask();
  a.sample_stack_user = TG_PERF_UNWIND_STACK_BYTES;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.sample_id_all = 1;
  return (int)syscall(SYS_perf_event_open, &a, pid, -1, -1,
                      PERF_FLAG_FD_CLOEXEC);
}

/* Samples |child| (which spins, and is killed here), unwinds each sample
 * and returns how many name |want| (|n_want| functions, innermost first)
 * in order; *samples counts them. Skips the test where perf_event_open is
 * refused. */
static unsigned unwind_child(pid_t child, const char *const *want,
                             size_t n_want, unsigned *samples_out) {
  int fd = open_on(child);
  if (fd < 0) {
    int err = errno;
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    if (err == EACCES || err == EPERM || err == ENOENT) {
      fprintf(stderr, "perf_event_open on a child refused (%s): skipped\n",
              strerror(err));
      skip();
    }
    fail_msg("perf_event_open: %s", strerror(err));
  }
  long page = sysconf(_SC_PAGESIZE);
  size_t len = (size_t)(PAGES + 1) * (size_t)page;
  uint8_t *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  assert_true(base != MAP_FAILED);
  struct perf_event_mmap_page *meta = (void *)base;

  /* Until the ring holds WANT_SAMPLES samples or 10 s pass. */
  uint64_t bytes = (uint64_t)WANT_SAMPLES * TG_PERF_UNWIND_STACK_BYTES;
  for (int i = 0; i < 1000; i++) {
    if (__atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) >= bytes) break;
    usleep(10000);
  }
  ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);

  tg_perf_unwinder_t *u = tg_perf_unwinder_new();
  tg_perf_procs_t *procs = tg_perf_procs_new(NULL, NULL);
  uint8_t *scratch = malloc(65536);
  assert_non_null(u);
  assert_non_null(procs);
  assert_non_null(scratch);
  tg_perf_ring_view_t v = {base + page, (uint64_t)PAGES * (uint64_t)page,
                           __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE)};
  tg_perf_layout_t lay = {
      .sample_type = TG_PERF_SAMPLE_IP | TG_PERF_SAMPLE_TID |
                     TG_PERF_SAMPLE_TIME | TG_PERF_SAMPLE_CPU |
                     TG_PERF_SAMPLE_READ | TG_PERF_SAMPLE_REGS_USER |
                     TG_PERF_SAMPLE_STACK_USER,
      .sample_id_all = true,
      .n_user_regs = tg_perf_unwind_n_regs()};
  uint64_t tail = meta->data_tail;
  const uint8_t *rec;
  size_t rlen;
  unsigned samples = 0, whole = 0;
  /* A file opened the way libdw opens (a FIFO, blocking) would hold the
   * unwinder for good: the alarm ends the test as failed instead. */
  alarm(60);
  while (tg_perf_ring_next(&v, &tail, scratch, 65536, &rec, &rlen) == 1) {
    tg_perf_record_t r;
    assert_int_equal(tg_perf_record_parse(rec, rlen, &lay, &r), 0);
    if (r.type != TG_PERF_RECORD_SAMPLE) continue;
    samples++;
    assert_int_equal(r.u.sample.pid, child);
    assert_int_equal(r.u.sample.n_regs, tg_perf_unwind_n_regs());
    uint64_t regs[TG_PERF_MAX_USER_REGS], pcs[64];
    for (uint32_t i = 0; i < r.u.sample.n_regs; i++)
      regs[i] = tg_perf_user_reg_at(&r, i);
    /* As if the child mapped code at every other sample: its Dwfl is
     * rebuilt or, past the rate limit, kept; either unwinds. */
    if (samples % 2) tg_perf_unwinder_forget(u, (uint32_t)child);
    int n = tg_perf_unwind(u, (uint32_t)child, r.u.sample.tid, regs,
                           r.u.sample.stack, r.u.sample.stack_dyn_size, pcs,
                           64);
    assert_true(n >= 1);
    assert_true(pcs[0] == r.u.sample.ip);
    size_t k = 0;
    for (int i = 0; i < n && k < n_want; i++) {
      tg_perf_emit_mapping_t m;
      tg_perf_emit_frame_t f;
      tg_perf_procs_frame(procs, (uint32_t)child, pcs[i], i > 0, &m, &f);
      /* The chain's functions in order; others between them (cmocka's,
       * libc's) are passed over. */
      if (f.function && strcmp(f.function, want[k]) == 0) k++;
    }
    if (k == n_want) whole++;
  }
  alarm(0);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  fprintf(stderr, "%u samples, %u unwound to main\n", samples, whole);
  free(scratch);
  tg_perf_procs_free(procs);
  tg_perf_unwinder_free(u);
  munmap(base, len);
  close(fd);
  *samples_out = samples;
  return whole;
}

static void chain_of_a_spinning_child(void **state) {
  (void)state;
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    unwind_level1();
    _exit(0);
  }
  static const char *const want[] = {"unwind_leaf", "unwind_level2",
                                     "unwind_level1", "main"};
  unsigned samples;
  unsigned whole = unwind_child(child, want, 4, &samples);
  assert_true(samples > 0);
  assert_true(whole > 0);
}

/* Its functions' CFI in .debug_frame alone (no unwind tables): unwinding
 * them loads the file's DWARF, the one path on which libdw could look for
 * the files it names. */
static const char spin_src[] =
    "static volatile unsigned long sink;\n"
    "__attribute__((noinline)) void tg_spin_leaf(void) { for (;;) sink++; }\n"
    "__attribute__((noinline)) void tg_spin_mid(void) { tg_spin_leaf(); "
    "sink++; }\n"
    "int main(void) { tg_spin_mid(); return SPIN; }\n";
#define SPIN_FLAGS                                                     \
  "-O2 -fomit-frame-pointer -g -fno-asynchronous-unwind-tables "       \
  "-fno-unwind-tables"

/* Runs |dir|/|prog| and requires its samples to unwind to main. */
static void unwinds_to_main(const char *dir, const char *prog) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, prog);
  /* Sampled once it runs |prog|: the pipe closes at the exec. */
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    close(p[0]);
    execl(path, path, (char *)NULL);
    (void)!write(p[1], "x", 1);
    _exit(127);
  }
  close(p[1]);
  char c;
  assert_int_equal(read(p[0], &c, 1), 0);
  close(p[0]);
  static const char *const want[] = {"tg_spin_leaf", "tg_spin_mid", "main"};
  unsigned samples;
  unsigned whole = unwind_child(child, want, 3, &samples);
  assert_true(samples > 0);
  assert_true(whole > 0);
}

/* Programs whose DWARF names files as FIFOs: a dwz alt file
 * (.gnu_debugaltlink) and a split-DWARF .dwo. The unwinder reads only
 * call frame information and declines every file libdwfl asks for, so
 * libdw opens neither, and the samples unwind as ever. Skipped without
 * a C compiler; the alt file's case without dwz, saying so. */
static void named_files_never_opened(void **state) {
  (void)state;
  const char *cc = test_cc();
  char dir[] = "/tmp/tg_unwind_links_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char src[600];
  snprintf(src, sizeof(src), "%s/spin.c", dir);
  FILE *f = fopen(src, "w");
  assert_non_null(f);
  assert_true(fputs(spin_src, f) >= 0);
  assert_int_equal(fclose(f), 0);
  if (test_run("cd '%s' && %s " SPIN_FLAGS " -DSPIN=0 -gsplit-dwarf -o "
               "split spin.c && for d in *.dwo; do rm \"$d\" && "
               "mkfifo \"$d\"; done",
               dir, cc)) {
    fprintf(stderr, "no C compiler with -gsplit-dwarf (%s): skipped\n", cc);
    test_run("rm -rf '%s'", dir);
    skip();
  }
  unwinds_to_main(dir, "split");
  if (test_run("command -v dwz >/dev/null 2>&1")) {
    fprintf(stderr, "dwz is not installed: the alt file's case is skipped\n");
  } else if (test_run("cd '%s' && %s " SPIN_FLAGS " -DSPIN=1 -o alt1 "
                      "spin.c && %s " SPIN_FLAGS " -DSPIN=2 -o alt2 spin.c && "
                      "dwz -m \"$PWD/common.debug\" -M "
                      "\"$PWD/common.debug\" alt1 alt2 && test -f "
                      "common.debug && rm common.debug && mkfifo common.debug",
                      dir, cc, cc)) {
    fprintf(stderr, "dwz made no alt file here: its case is skipped\n");
  } else {
    unwinds_to_main(dir, "alt1");
  }
  test_run("rm -rf '%s'", dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chain_of_a_spinning_child),
      cmocka_unit_test(named_files_never_opened),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
