/* DWARF unwinding (agent/perf/perf_unwind.h) on real samples, without a
 * service: a child spins in main -> unwind_level1 -> unwind_level2 ->
 * unwind_leaf; a task-clock event on it (user mode only, which
 * perf_event_paranoid 2 allows any user) copies its registers and stack;
 * each sample is parsed (perf_record.h), unwound and named
 * (perf_procs.h). Some sample must name the whole chain, leaf first;
 * every sample's first frame is its own ip. Skipped where perf_event_open
 * is refused. */
#include <errno.h>
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

static void chain_of_a_spinning_child(void **state) {
  (void)state;
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    unwind_level1();
    _exit(0);
  }
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
  uint64_t want = (uint64_t)WANT_SAMPLES * TG_PERF_UNWIND_STACK_BYTES;
  for (int i = 0; i < 1000; i++) {
    if (__atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) >= want) break;
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
    const char *want_names[] = {"unwind_leaf", "unwind_level2",
                                "unwind_level1", "main"};
    size_t k = 0;
    for (int i = 0; i < n && k < 4; i++) {
      tg_perf_emit_mapping_t m;
      tg_perf_emit_frame_t f;
      tg_perf_procs_frame(procs, (uint32_t)child, pcs[i], i > 0, &m, &f);
      /* The chain's functions in order; others between them (cmocka's,
       * libc's) are passed over. */
      if (f.function && strcmp(f.function, want_names[k]) == 0) k++;
    }
    if (k == 4) whole++;
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  fprintf(stderr, "%u samples, %u unwound to main\n", samples, whole);
  assert_true(samples > 0);
  assert_true(whole > 0);
  free(scratch);
  tg_perf_procs_free(procs);
  tg_perf_unwinder_free(u);
  munmap(base, len);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chain_of_a_spinning_child),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
