/* Trace writers on several threads sharing one SMB while a service thread
 * drains it. Runs under ASan and ThreadSanitizer (label tsan).
 *
 * Four threads, one writer each, write numbered packets of varying sizes,
 * some larger than a chunk (fragmented, with nested sizes patched later).
 * A service thread takes CommitData whenever woken, moves the chunks into a
 * real central trace buffer and reads packets out as they complete. In
 * stall mode every packet of every writer must arrive exactly once and in
 * order; in drop mode packets may be lost, but never duplicated, reordered
 * or torn, and the first packet after a loss says so.
 *
 * With |reclaim|, an "agent" thread also takes back chunks from writers
 * between packets as fast as it can (idle time 0), racing every packet
 * begin, fragment and patch of the writers through their handshake word.
 *
 * cmocka asserts are not thread-safe: threads count failures; the test
 * thread asserts after joining them.
 */
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tracegate/pb_wire.h"
#include "agent/smb_arbiter.h"
#include "agent/trace_writer.h"
#include "fake_service.h"

#define PAGE 4096u
#define NUM_WRITERS 4u
#define PACKETS_PER_WRITER 3000u
#define TB_SIZE (32u * 1024u * 1024u)
#define FIELD_WRITER 1
#define FIELD_SEQ 2
#define FIELD_NESTED 3
#define FIELD_BODY 4
#define FIELD_PREV_DROPPED TG_TRACE_PACKET_PREVIOUS_PACKET_DROPPED

/* Body length of packet |seq| of writer |idx|: mostly small, every 16th
 * one up to |max_body| (several chunks). */
static size_t body_len(unsigned idx, uint32_t seq, size_t max_body) {
  uint32_t h = (seq + 1u) * 2654435761u ^ (idx + 1u) * 40503u;
  if (seq % 16 == 5) return max_body / 2 + h % (max_body / 2);
  return h % 200u;
}

static uint8_t body_byte(unsigned idx, uint32_t seq, size_t i) {
  return (uint8_t)(idx * 61u + seq * 13u + i * 7u + (i >> 8));
}

typedef struct run {
  tg_arbiter_t *arb;
  fake_service_t fs;
  sem_t wake_sem;
  size_t max_body;
  _Atomic bool stop;
  _Atomic bool agent_stop;
  uint64_t agent_passes; /* agent thread's, read after join */
  /* Service thread's results, read after join. */
  uint16_t writer_ids[NUM_WRITERS];
  uint32_t next_seq[NUM_WRITERS];
  uint64_t received[NUM_WRITERS];
  unsigned bad_content, bad_order, unflagged_gaps, unknown_writer;
} run_t;

typedef struct writer_thread {
  run_t *run;
  unsigned idx;
  tg_trace_writer_t w;
  pthread_t thread;
} writer_thread_t;

static void on_wake(void *ctx) {
  run_t *r = ctx;
  sem_post(&r->wake_sem);
}

static void smb_free(void *base, size_t size) {
  (void)size;
  free(base);
}

static void *writer_main(void *arg) {
  writer_thread_t *t = arg;
  size_t max = t->run->max_body;
  uint8_t *body = malloc(max);
  if (!body) abort();
  for (uint32_t seq = 0; seq < PACKETS_PER_WRITER; seq++) {
    size_t n = body_len(t->idx, seq, max);
    for (size_t i = 0; i < n; i++) body[i] = body_byte(t->idx, seq, i);
    tg_pbw_t *pw = tg_trace_writer_begin_packet(&t->w);
    tg_pbw_append_varint(pw, FIELD_WRITER, t->idx);
    tg_pbw_append_varint(pw, FIELD_SEQ, seq);
    tg_pbw_begin_nested(pw, FIELD_NESTED);
    tg_pbw_append_bytes(pw, FIELD_BODY, body, n);
    tg_pbw_end_nested(pw);
    tg_trace_writer_end_packet(&t->w);
    if (seq % 97 == 0) tg_trace_writer_flush(&t->w);
  }
  /* Done: let the others have the chunk (with few chunks they wait for it). */
  tg_trace_writer_flush(&t->w);
  free(body);
  return NULL;
}

/* Checks one packet read from the trace buffer (service thread). */
static void check_packet(run_t *r, const uint8_t *p, size_t len,
                         bool tb_dropped, uint16_t writer_id) {
  unsigned idx = NUM_WRITERS;
  for (unsigned i = 0; i < NUM_WRITERS; i++)
    if (r->writer_ids[i] == writer_id) idx = i;
  if (idx == NUM_WRITERS) {
    r->unknown_writer++;
    return;
  }
  tg_pb_reader_t rd;
  tg_pb_reader_init(&rd, p, len);
  tg_pb_field_t f;
  uint64_t widx = UINT64_MAX, seq = UINT64_MAX;
  bool flagged = tb_dropped, body_ok = false;
  while (tg_pb_reader_next(&rd, &f) == 1) {
    if (f.id == FIELD_PREV_DROPPED) flagged = true;
    if (f.id == FIELD_WRITER) widx = f.value;
    if (f.id == FIELD_SEQ) seq = f.value;
    if (f.id == FIELD_NESTED && seq != UINT64_MAX) {
      tg_pb_reader_t in;
      tg_pb_reader_init(&in, f.data, f.size);
      tg_pb_field_t b;
      if (tg_pb_reader_next(&in, &b) == 1 && b.id == FIELD_BODY &&
          b.size == body_len(idx, (uint32_t)seq, r->max_body) &&
          tg_pb_reader_next(&in, &b) == 0) {
        body_ok = true;
        tg_pb_reader_init(&in, f.data, f.size);
        tg_pb_reader_next(&in, &b);
        for (size_t i = 0; i < b.size; i++)
          if (b.data[i] != body_byte(idx, (uint32_t)seq, i)) body_ok = false;
      }
    }
  }
  if (widx != idx || !body_ok) {
    r->bad_content++;
    return;
  }
  if (seq < r->next_seq[idx]) {
    r->bad_order++; /* duplicate or reordered */
    return;
  }
  if (seq > r->next_seq[idx] && !flagged) r->unflagged_gaps++;
  r->next_seq[idx] = (uint32_t)seq + 1u;
  r->received[idx]++;
}

static void *service_main(void *arg) {
  run_t *r = arg;
  tg_buf_t got;
  tg_buf_init(&got, 0);
  for (;;) {
    bool stop = atomic_load_explicit(&r->stop, memory_order_acquire);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 500000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    sem_timedwait(&r->wake_sem, &ts);
    fake_service_drain(&r->fs);
    bool dropped;
    uint16_t wid;
    while (fake_service_read(&r->fs, &got, &dropped, &wid))
      check_packet(r, tg_buf_begin(&got), tg_buf_size(&got), dropped, wid);
    if (stop && !tg_arbiter_commit_pending(r->arb)) break;
  }
  tg_buf_free(&got);
  return NULL;
}

/* Takes back chunks from writers between packets until told to stop. */
static void *agent_main(void *arg) {
  run_t *r = arg;
  uint64_t t = 0;
  while (!atomic_load_explicit(&r->agent_stop, memory_order_acquire)) {
    if (tg_trace_writers_reclaim_idle(r->arb, t += 1000, 0) > 0)
      sem_post(&r->wake_sem); /* the service commits what came back */
    r->agent_passes++;
    sched_yield();
  }
  return NULL;
}

static void run_writers(size_t pages, unsigned layout, bool stall,
                        size_t max_body, bool reclaim) {
  run_t *r = calloc(1, sizeof(*r));
  assert_non_null(r);
  sem_init(&r->wake_sem, 0, 0);
  r->max_body = max_body;
  atomic_init(&r->stop, false);
  size_t size = pages * PAGE;
  void *mem = aligned_alloc(PAGE, size);
  assert_non_null(mem);
  memset(mem, 0, size);
  tg_arbiter_opts_t o = {.smb_base = mem,
                         .smb_size = size,
                         .page_size = PAGE,
                         .free_fn = smb_free,
                         .stall_when_full = stall,
                         .layout = layout,
                         .wake = on_wake,
                         .wake_ctx = r,
                         .commit_threshold = 2};
  assert_int_equal(tg_arbiter_new(&o, &r->arb), 0);
  fake_service_init(&r->fs, r->arb, TB_SIZE, false);
  assert_non_null(r->fs.tb);

  writer_thread_t wt[NUM_WRITERS];
  for (unsigned i = 0; i < NUM_WRITERS; i++) {
    wt[i].run = r;
    wt[i].idx = i;
    assert_int_equal(tg_trace_writer_init(&wt[i].w, r->arb, 1), 0);
    r->writer_ids[i] = wt[i].w.writer_id;
  }
  pthread_t service, agent;
  assert_int_equal(pthread_create(&service, NULL, service_main, r), 0);
  atomic_init(&r->agent_stop, false);
  if (reclaim)
    assert_int_equal(pthread_create(&agent, NULL, agent_main, r), 0);
  for (unsigned i = 0; i < NUM_WRITERS; i++)
    assert_int_equal(pthread_create(&wt[i].thread, NULL, writer_main, &wt[i]),
                     0);
  uint64_t written = 0, dropped = 0;
  for (unsigned i = 0; i < NUM_WRITERS; i++) {
    pthread_join(wt[i].thread, NULL);
    written += wt[i].w.packets_written;
    dropped += wt[i].w.packets_dropped;
    assert_int_equal(wt[i].w.packets_written + wt[i].w.packets_dropped,
                     PACKETS_PER_WRITER);
    tg_trace_writer_fini(&wt[i].w); /* returns the last chunk */
  }
  if (reclaim) {
    atomic_store_explicit(&r->agent_stop, true, memory_order_release);
    pthread_join(agent, NULL);
    assert_true(r->agent_passes > 0);
  }
  atomic_store_explicit(&r->stop, true, memory_order_release);
  sem_post(&r->wake_sem);
  pthread_join(service, NULL);

  uint64_t received = 0;
  for (unsigned i = 0; i < NUM_WRITERS; i++) received += r->received[i];
  assert_int_equal(r->bad_content, 0);
  assert_int_equal(r->bad_order, 0);
  assert_int_equal(r->unflagged_gaps, 0);
  assert_int_equal(r->unknown_writer, 0);
  assert_int_equal(r->fs.errors, 0);
  assert_int_equal(received, written);
  const tg_trace_buffer_stats_t *st = tg_trace_buffer_stats(r->fs.tb);
  assert_int_equal(st->abi_violations, 0);
  assert_int_equal(st->patches_failed, 0);
  assert_int_equal(st->chunks_overwritten, 0);
  if (stall) {
    assert_int_equal(dropped, 0);
    for (unsigned i = 0; i < NUM_WRITERS; i++)
      assert_int_equal(r->next_seq[i], PACKETS_PER_WRITER);
  }
  fake_service_free(&r->fs);
  tg_arbiter_unref(r->arb);
  sem_destroy(&r->wake_sem);
  free(r);
}

/* 16 chunks of 4 KiB; bodies up to 3 chunks. */
static void threads_stall_every_packet_once_in_order(void **state) {
  (void)state;
  run_writers(16, TG_PAGE_DIV_1, true, 12000, false);
}

/* 56 chunks of 292 bytes; bodies up to 8 chunks. */
static void threads_stall_small_chunks(void **state) {
  (void)state;
  run_writers(4, TG_PAGE_DIV_14, true, 2000, false);
}

/* Fewer chunks than writers: stall mode must not deadlock. */
static void threads_stall_fewer_chunks_than_writers(void **state) {
  (void)state;
  run_writers(1, TG_PAGE_DIV_2, true, 6000, false);
}

/* Drop mode: losses allowed, flagged, never torn or duplicated. */
static void threads_drop_losses_are_flagged(void **state) {
  (void)state;
  run_writers(4, TG_PAGE_DIV_4, false, 3000, false);
}

/* The agent takes chunks back between packets while the writers write
 * fragmented packets with patched nested sizes: every packet still
 * arrives once, whole and in order. */
static void threads_reclaim_races_keep_every_packet(void **state) {
  (void)state;
  run_writers(4, TG_PAGE_DIV_4, true, 3000, true);
}

/* The same in drop mode with small adaptive chunks: losses flagged,
 * nothing torn. */
static void threads_reclaim_drop_mode_losses_are_flagged(void **state) {
  (void)state;
  run_writers(2, 0, false, 1500, true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(threads_stall_every_packet_once_in_order),
      cmocka_unit_test(threads_stall_small_chunks),
      cmocka_unit_test(threads_stall_fewer_chunks_than_writers),
      cmocka_unit_test(threads_drop_losses_are_flagged),
      cmocka_unit_test(threads_reclaim_races_keep_every_packet),
      cmocka_unit_test(threads_reclaim_drop_mode_losses_are_flagged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
