/* The unwinder thread (agent/perf/perf_unwind_thread.h) over its queue,
 * without a service: every sample committed comes back to the reader in
 * order with at least its leaf, forgets come back in their place, the
 * stop lets the thread finish everything queued, and the caches are
 * dropped on the period and on request. Samples of this process and of
 * a pid that does not exist: the unwinding itself is test_perf_unwind's. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/perf/perf_queue.h"
#include "agent/perf/perf_unwind.h"
#include "agent/perf/perf_unwind_thread.h"

/* x86-64: the sample's IP and SP among perf's registers (perf_unwind.c). */
#define IDX_SP 7
#define IDX_IP 8
#define NO_SUCH_PID 0x7ffffff0u

static void put_sample(tg_perf_queue_t *q, uint64_t seq, uint32_t pid) {
  uint32_t n_regs = tg_perf_unwind_n_regs();
  tg_perf_qentry_t *e = tg_perf_queue_reserve(q, 0, n_regs, 64);
  assert_non_null(e);
  e->ts = seq;
  e->pid = pid;
  e->tid = pid;
  uint64_t *regs = tg_perf_qentry_regs(e);
  memset(regs, 0, n_regs * sizeof(*regs));
  regs[IDX_IP] = 0x1000 + seq;
  regs[IDX_SP] = 0x7ff000000000ull;
  memset(tg_perf_qentry_stack(e), 0, 64);
  tg_perf_queue_commit(q);
}

static void everything_queued_comes_back_in_order(void **state) {
  (void)state;
  if (!tg_perf_unwind_supported()) skip();
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 1 << 20), 0);
  tg_perf_unwind_thread_t *t;
  assert_int_equal(tg_perf_unwind_thread_start(&q, 0, 512, &t), 0);
  uint32_t self = (uint32_t)getpid();
  for (uint64_t i = 0; i < 200; i++) {
    put_sample(&q, i, i % 2 ? self : NO_SUCH_PID);
    if (i % 50 == 0) tg_perf_queue_forget(&q, self);
  }
  tg_perf_queue_wait_idle(&q);
  uint64_t next = 0, forgets = 0;
  tg_perf_qentry_t *e;
  while ((e = tg_perf_queue_next_done(&q))) {
    if (e->kind == TG_PERF_Q_FORGET) {
      forgets++;
    } else {
      assert_int_equal(e->ts, next);
      /* The leaf at least, whether or not the process could be walked. */
      assert_true(e->n_pcs >= 1);
      assert_int_equal(tg_perf_qentry_pcs(e)[0], 0x1000 + next);
      next++;
    }
    tg_perf_queue_release(&q);
  }
  assert_int_equal(next, 200);
  /* The first forget came before any sample of this process: it has no
   * cache to forget, and the queue keeps that forget from the unwinder. */
  assert_int_equal(forgets, 3);
  tg_perf_unwind_thread_stats_t st;
  tg_perf_unwind_thread_stop(t, &st);
  assert_int_equal(st.unwind_failed, 0);
  tg_perf_queue_destroy(&q);
}

/* Stopped with samples still queued: the thread unwinds them all before
 * it ends; the reader writes them after. */
static void the_stop_finishes_the_queue(void **state) {
  (void)state;
  if (!tg_perf_unwind_supported()) skip();
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 1 << 20), 0);
  tg_perf_unwind_thread_t *t;
  assert_int_equal(tg_perf_unwind_thread_start(&q, 0, 512, &t), 0);
  for (uint64_t i = 0; i < 100; i++) put_sample(&q, i, NO_SUCH_PID);
  tg_perf_unwind_thread_stop(t, NULL);
  uint64_t n = 0;
  tg_perf_qentry_t *e;
  while ((e = tg_perf_queue_next_done(&q))) {
    assert_int_equal(e->ts, n++);
    tg_perf_queue_release(&q);
  }
  assert_int_equal(n, 100);
  tg_perf_queue_destroy(&q);
}

static void caches_drop_on_the_period_and_on_request(void **state) {
  (void)state;
  if (!tg_perf_unwind_supported()) skip();
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 1 << 16), 0);
  tg_perf_unwind_thread_t *t;
  assert_int_equal(tg_perf_unwind_thread_start(&q, 10, 512, &t), 0);
  /* Past one period: the thread clears at the latest when it sees the
   * stop, however late it is scheduled. */
  struct timespec ts = {0, 30 * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  tg_perf_queue_request_drop(&q);
  tg_perf_unwind_thread_stats_t st;
  tg_perf_unwind_thread_stop(t, &st);
  assert_true(st.periodic_clears >= 1);
  assert_int_equal(st.requested_drops, 1);
  tg_perf_queue_destroy(&q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(everything_queued_comes_back_in_order),
      cmocka_unit_test(the_stop_finishes_the_queue),
      cmocka_unit_test(caches_drop_on_the_period_and_on_request),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
