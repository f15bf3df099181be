/* The reader -> unwinder queue (agent/perf/perf_queue.h): bounded by its
 * bytes (a reservation past the cap fails and is counted, nothing waits),
 * the footprint counted entry by entry and back to 0 when empty, entries
 * out in the order they went in across the buffer's wrap, forgets only
 * for processes that may have a cache, a forget without room turned into
 * dropping every cache, and a stop that drains:
 * every entry committed is unwound and handed back before the unwinder
 * ends. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent/perf/perf_queue.h"

#define REGS 17

/* Queues a sample numbered |seq| with a stack copy of |stack| bytes.
 * Returns false when the queue had no room. */
static void fill(tg_perf_qentry_t *e, uint64_t seq, uint32_t stack) {
  assert_int_equal(e->kind, TG_PERF_Q_SAMPLE);
  assert_int_equal(e->size, tg_perf_qentry_bytes(2, REGS, stack));
  e->ts = seq;
  e->pid = (uint32_t)seq;
  tg_perf_qentry_ips(e)[0] = seq;
  tg_perf_qentry_regs(e)[REGS - 1] = seq;
  memset(tg_perf_qentry_stack(e), (int)(seq & 0xff), stack);
}

static bool put(tg_perf_queue_t *q, uint64_t seq, uint32_t stack) {
  tg_perf_qentry_t *e = tg_perf_queue_reserve(q, 2, REGS, stack);
  if (!e) return false;
  fill(e, seq, stack);
  tg_perf_queue_commit(q);
  return true;
}

/* What the unwinder leaves: one frame, the sequence number. */
static void one_frame(tg_perf_qentry_t *e) {
  tg_perf_qentry_pcs(e)[0] = e->ts;
  e->n_pcs = 1;
}

/* The unwinder's side for one entry: checks what the reader wrote and
 * leaves one frame, the sequence number. */
static void unwind_next(tg_perf_queue_t *q) {
  tg_perf_qentry_t *e;
  bool drop;
  assert_int_equal(tg_perf_queue_take(q, 0, &e, &drop), 1);
  if (e->kind == TG_PERF_Q_SAMPLE) {
    assert_int_equal(tg_perf_qentry_ips(e)[0], e->ts);
    assert_int_equal(tg_perf_qentry_regs(e)[REGS - 1], e->ts);
    for (uint32_t i = 0; i < e->stack_len; i++)
      assert_int_equal(tg_perf_qentry_stack(e)[i], e->ts & 0xff);
    one_frame(e);
  }
  tg_perf_queue_done(q);
}

/* The reader's side: the next entry must be sample |seq|. */
static void write_next(tg_perf_queue_t *q, uint64_t seq) {
  tg_perf_qentry_t *e = tg_perf_queue_next_done(q);
  assert_non_null(e);
  assert_int_equal(e->kind, TG_PERF_Q_SAMPLE);
  assert_int_equal(e->ts, seq);
  assert_int_equal(e->n_pcs, 1);
  assert_int_equal(tg_perf_qentry_pcs(e)[0], seq);
  tg_perf_queue_release(q);
}

static size_t used_of(tg_perf_queue_t *q) {
  tg_perf_queue_stats_t st;
  size_t used;
  tg_perf_queue_stats(q, &st, &used);
  return used;
}

static void a_full_queue_refuses_and_counts(void **state) {
  (void)state;
  size_t one = tg_perf_qentry_bytes(2, REGS, 1000);
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 3 * one + one / 2), 0);
  assert_true(put(&q, 1, 1000));
  assert_true(put(&q, 2, 1000));
  assert_true(put(&q, 3, 1000));
  assert_false(put(&q, 4, 1000));
  /* A smaller sample still fits in what is left. */
  assert_true(put(&q, 5, 100));
  assert_false(put(&q, 6, 1000));
  tg_perf_queue_stats_t st;
  size_t used;
  tg_perf_queue_stats(&q, &st, &used);
  assert_int_equal(st.committed, 4);
  assert_int_equal(st.full, 2);
  assert_int_equal(used, 3 * one + tg_perf_qentry_bytes(2, REGS, 100));
  assert_true(used <= q.cap);
  /* Unwound but not yet written still counts: the cap is on every byte
   * the queue holds. */
  for (int i = 0; i < 4; i++) unwind_next(&q);
  assert_false(put(&q, 7, 1000));
  write_next(&q, 1);
  assert_true(put(&q, 8, 1000));
  tg_perf_queue_destroy(&q);
}

static void a_sample_larger_than_the_cap_is_refused(void **state) {
  (void)state;
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 1024), 0);
  assert_false(put(&q, 1, 16384));
  tg_perf_queue_stats_t st;
  tg_perf_queue_stats(&q, &st, NULL);
  assert_int_equal(st.full, 1);
  assert_int_equal(st.committed, 0);
  /* Empty: the unwinder has nothing and times out. */
  tg_perf_qentry_t *e;
  bool drop;
  assert_int_equal(tg_perf_queue_take(&q, 0, &e, &drop), 0);
  assert_null(e);
  assert_false(drop);
  tg_perf_queue_destroy(&q);
}

static void the_footprint_counts_each_entry_and_empties(void **state) {
  (void)state;
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 1 << 20), 0);
  size_t want = 0;
  for (uint32_t i = 0; i < 10; i++) {
    assert_true(put(&q, i, 100 * i + 3));
    want += tg_perf_qentry_bytes(2, REGS, 100 * i + 3);
    assert_int_equal(used_of(&q), want);
  }
  size_t peak = want;
  for (uint32_t i = 0; i < 10; i++) unwind_next(&q);
  assert_int_equal(used_of(&q), want);
  for (uint32_t i = 0; i < 10; i++) {
    write_next(&q, i);
    want -= tg_perf_qentry_bytes(2, REGS, 100 * i + 3);
    assert_int_equal(used_of(&q), want);
  }
  tg_perf_queue_stats_t st;
  tg_perf_queue_stats(&q, &st, NULL);
  assert_int_equal(st.released, 10);
  assert_int_equal(st.peak_bytes, peak);
  /* Empty again: the next entry starts at the buffer's start. */
  assert_int_equal(q.head, 0);
  assert_int_equal(q.tail, 0);
  tg_perf_queue_destroy(&q);
}

static void the_area_holds_the_stack_or_its_frames(void **state) {
  (void)state;
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 1 << 16), 0);
  static const uint32_t lens[] = {0, 1, 7, 8, 9, 16384};
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
    tg_perf_qentry_t *e = tg_perf_queue_reserve(&q, 2, REGS, lens[i]);
    assert_non_null(e);
    fill(e, i, lens[i]);
    assert_true(e->area >= lens[i]);
    /* One frame per 8 bytes of stack walked, and the leaf. */
    assert_true(tg_perf_qentry_pcs_cap(e) >= lens[i] / 8 + 1);
    assert_int_equal(e->size % 8, 0);
    assert_int_equal((uintptr_t)tg_perf_qentry_regs(e) % 8, 0);
    tg_perf_queue_commit(&q);
    unwind_next(&q);
    write_next(&q, i);
  }
  tg_perf_queue_destroy(&q);
}

/* Sizes that do not divide the buffer: entries wrap around its end many
 * times while some are queued, some unwound, some written. */
static void order_is_kept_across_the_wrap(void **state) {
  (void)state;
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 10000), 0);
  uint64_t put_seq = 0, unwound = 0, written = 0;
  uint64_t refused = 0;
  for (int round = 0; round < 2000; round++) {
    uint32_t stack = (uint32_t)((round * 733) % 1700);
    if (put(&q, put_seq, stack))
      put_seq++;
    else
      refused++;
    if (round % 3 != 0 && unwound < put_seq) {
      unwind_next(&q);
      unwound++;
    }
    if (round % 2 == 0 && written < unwound) {
      write_next(&q, written);
      written++;
    }
    assert_true(used_of(&q) <= q.cap);
  }
  while (unwound < put_seq) {
    unwind_next(&q);
    unwound++;
  }
  while (written < unwound) write_next(&q, written++);
  assert_null(tg_perf_queue_next_done(&q));
  assert_int_equal(used_of(&q), 0);
  tg_perf_queue_stats_t st;
  tg_perf_queue_stats(&q, &st, NULL);
  /* Each sample went in and out, or was refused and counted. */
  assert_int_equal(st.committed, put_seq);
  assert_int_equal(st.released, put_seq);
  assert_int_equal(st.full, refused);
  assert_true(refused > 0);
  assert_true(put_seq > 500);
  tg_perf_queue_destroy(&q);
}

/* Only a process with a sample committed since its last forget can have
 * a cache: the other forgets never reach the unwinder. */
static void forgets_of_processes_without_a_cache_are_dropped(void **state) {
  (void)state;
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 1 << 20), 0);
  tg_perf_queue_forget(&q, 7); /* never sampled */
  assert_true(put(&q, 7, 8));
  tg_perf_queue_forget(&q, 7); /* queued */
  tg_perf_queue_forget(&q, 7); /* nothing since the last one */
  assert_true(put(&q, 7, 8));
  tg_perf_queue_forget(&q, 7); /* queued again */
  tg_perf_queue_stats_t st;
  tg_perf_queue_stats(&q, &st, NULL);
  assert_int_equal(st.committed, 4);
  assert_int_equal(st.forgets_filtered, 2);
  /* Many processes, removed in another order than added: each is still
   * found (the table's deletions keep every chain whole). */
  for (uint32_t pid = 100; pid < 100 + TG_PERF_QUEUE_PIDS - 1; pid++) {
    tg_perf_qentry_t *e = tg_perf_queue_reserve(&q, 0, 0, 0);
    assert_non_null(e);
    e->pid = pid;
    tg_perf_queue_commit(&q);
  }
  for (uint32_t pid = 100 + TG_PERF_QUEUE_PIDS - 2; pid >= 100; pid -= 2)
    tg_perf_queue_forget(&q, pid);
  for (uint32_t pid = 101; pid < 100 + TG_PERF_QUEUE_PIDS - 1; pid += 2)
    tg_perf_queue_forget(&q, pid);
  tg_perf_queue_stats(&q, &st, NULL);
  assert_int_equal(st.forgets_filtered, 2);
  assert_int_equal(q.n_pids, 0);
  assert_false(st.filter_off);
  /* Past TG_PERF_QUEUE_PIDS processes the filter is off: every forget
   * goes to the unwinder. */
  for (uint32_t pid = 5000; pid < 5000 + TG_PERF_QUEUE_PIDS + 1; pid++) {
    tg_perf_qentry_t *e = tg_perf_queue_reserve(&q, 0, 0, 0);
    assert_non_null(e);
    e->pid = pid;
    tg_perf_queue_commit(&q);
  }
  tg_perf_queue_stats(&q, &st, NULL);
  assert_true(st.filter_off);
  uint64_t before = st.committed;
  tg_perf_queue_forget(&q, 3);
  tg_perf_queue_stats(&q, &st, NULL);
  assert_int_equal(st.committed, before + 1);
  assert_int_equal(st.forgets_filtered, 2);
  tg_perf_queue_destroy(&q);
}

static void forgets_keep_their_place_or_drop_everything(void **state) {
  (void)state;
  size_t one = tg_perf_qentry_bytes(2, REGS, 64);
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 2 * one + sizeof(tg_perf_qentry_t)),
                   0);
  assert_true(put(&q, 1, 64));
  tg_perf_queue_forget(&q, 1);
  assert_true(put(&q, 2, 64));
  tg_perf_qentry_t *e;
  bool drop;
  assert_int_equal(tg_perf_queue_take(&q, 0, &e, &drop), 1);
  assert_int_equal(e->ts, 1);
  one_frame(e);
  tg_perf_queue_done(&q);
  assert_int_equal(tg_perf_queue_take(&q, 0, &e, &drop), 1);
  assert_int_equal(e->kind, TG_PERF_Q_FORGET);
  assert_int_equal(e->pid, 1);
  assert_false(drop);
  tg_perf_queue_done(&q);
  /* Full now: the next forget cannot queue, every cache goes instead. */
  tg_perf_queue_forget(&q, 2);
  assert_int_equal(tg_perf_queue_take(&q, 0, &e, &drop), 1);
  assert_true(drop);
  assert_int_equal(e->ts, 2);
  one_frame(e);
  tg_perf_queue_done(&q);
  tg_perf_queue_stats_t st;
  tg_perf_queue_stats(&q, &st, NULL);
  assert_int_equal(st.forgets_folded, 1);
  /* The reader gets the forget back too, in its place, and skips it. */
  write_next(&q, 1);
  e = tg_perf_queue_next_done(&q);
  assert_non_null(e);
  assert_int_equal(e->kind, TG_PERF_Q_FORGET);
  tg_perf_queue_release(&q);
  write_next(&q, 2);
  /* A drop asked for with nothing queued wakes the unwinder. */
  tg_perf_queue_request_drop(&q);
  assert_int_equal(tg_perf_queue_take(&q, -1, &e, &drop), 0);
  assert_true(drop);
  assert_null(e);
  tg_perf_queue_destroy(&q);
}

typedef struct unwinder {
  tg_perf_queue_t *q;
  uint64_t done;
  int end;
} unwinder_t;

static void *unwinder_main(void *arg) {
  unwinder_t *u = arg;
  for (;;) {
    tg_perf_qentry_t *e;
    bool drop;
    int rv = tg_perf_queue_take(u->q, -1, &e, &drop);
    if (rv < 0) {
      u->end = rv;
      return NULL;
    }
    if (rv == 0) continue;
    one_frame(e);
    tg_perf_queue_done(u->q);
    u->done++;
  }
}

/* Stop: the reader waits until the unwinder has done every entry, writes
 * them all, then closes; the unwinder ends only with nothing left. */
static void the_stop_drains_everything_read(void **state) {
  (void)state;
  tg_perf_queue_t q;
  assert_int_equal(tg_perf_queue_init(&q, 64 * 1024), 0);
  unwinder_t u = {&q, 0, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, unwinder_main, &u), 0);
  uint64_t queued = 0, skipped = 0, written = 0;
  for (uint64_t i = 0; i < 5000; i++) {
    if (put(&q, queued, (uint32_t)(i % 4096)))
      queued++;
    else
      skipped++;
    tg_perf_qentry_t *e;
    while ((e = tg_perf_queue_next_done(&q))) {
      assert_int_equal(e->ts, written);
      written++;
      tg_perf_queue_release(&q);
    }
  }
  tg_perf_queue_wait_idle(&q);
  tg_perf_qentry_t *e;
  while ((e = tg_perf_queue_next_done(&q))) {
    assert_int_equal(e->ts, written);
    written++;
    tg_perf_queue_release(&q);
  }
  tg_perf_queue_close(&q);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(u.end, -EPIPE);
  /* Every sample read is written unwound or counted as skipped. */
  assert_int_equal(written, queued);
  assert_int_equal(u.done, queued);
  assert_int_equal(queued + skipped, 5000);
  tg_perf_queue_stats_t st;
  tg_perf_queue_stats(&q, &st, NULL);
  assert_int_equal(st.full, skipped);
  /* Closed: nothing more goes in, and that is not a full queue. */
  assert_false(put(&q, 0, 8));
  tg_perf_queue_stats(&q, &st, NULL);
  assert_int_equal(st.full, skipped);
  tg_perf_queue_destroy(&q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_full_queue_refuses_and_counts),
      cmocka_unit_test(a_sample_larger_than_the_cap_is_refused),
      cmocka_unit_test(the_footprint_counts_each_entry_and_empties),
      cmocka_unit_test(the_area_holds_the_stack_or_its_frames),
      cmocka_unit_test(order_is_kept_across_the_wrap),
      cmocka_unit_test(forgets_of_processes_without_a_cache_are_dropped),
      cmocka_unit_test(forgets_keep_their_place_or_drop_everything),
      cmocka_unit_test(the_stop_drains_everything_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
