/* The probes' metatrace ring (agent/probes/metatrace.c): records come out
 * once each, in each writer's order; nothing is recorded while off; a full
 * ring drops and counts, and the next packet says so; what a past session
 * left is not the next one's; writers on many threads lose nothing they
 * were not told they lost. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/probes/metatrace.h"
#include "pb/trace/trace_packet.pb-c.h"

/* A sink that decodes each packet and keeps what the tests look at. */
typedef struct rec {
  uint64_t ts, dur;
  uint32_t tid;
  bool overran;
  char name[48];
} rec_t;

typedef struct sink_buf {
  uint8_t buf[4096];
  tg_pbw_t w;
  rec_t *recs;
  size_t n, cap;
} sink_buf_t;

static tg_pbw_t *buf_begin(void *ctx) {
  sink_buf_t *b = ctx;
  tg_pbw_init(&b->w, b->buf, sizeof(b->buf), NULL, NULL);
  return &b->w;
}

static void buf_end(void *ctx) {
  sink_buf_t *b = ctx;
  assert_int_equal(tg_pbw_error(&b->w), 0);
  Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(
      NULL, (size_t)tg_pbw_written(&b->w), b->buf);
  assert_non_null(p);
  assert_int_equal(p->data_case,
                   PERFETTO__PROTOS__TRACE_PACKET__DATA_PERFETTO_METATRACE);
  const Perfetto__Protos__PerfettoMetatrace *m = p->perfetto_metatrace;
  if (b->n == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 1024;
    b->recs = realloc(b->recs, b->cap * sizeof(*b->recs));
    assert_non_null(b->recs);
  }
  rec_t *r = &b->recs[b->n++];
  r->ts = p->timestamp;
  r->dur = m->event_duration_ns;
  r->tid = m->thread_id;
  r->overran = m->has_has_overruns && m->has_overruns;
  assert_int_equal(m->record_type_case,
                   PERFETTO__PROTOS__PERFETTO_METATRACE__RECORD_TYPE_EVENT_NAME);
  snprintf(r->name, sizeof(r->name), "%s", m->event_name);
  perfetto__protos__trace_packet__free_unpacked(p, NULL);
}

static size_t drain(sink_buf_t *b) {
  tg_probes_sink_t s = {buf_begin, buf_end, b};
  return tg_meta_drain(&s);
}

static void reset(sink_buf_t *b) {
  free(b->recs);
  memset(b, 0, sizeof(*b));
}

static sink_buf_t g_b;

static void records_come_out_once_in_order(void **state) {
  (void)state;
  tg_meta_enable();
  uint64_t t0 = tg_meta_begin();
  assert_true(t0 > 0);
  /* Starts given by the caller: the order is visible in them. */
  for (uint64_t i = 0; i < 100; i++)
    tg_meta_end(i % 2 ? TG_META_SYS_STATS : TG_META_PS_SCAN, t0 + i);
  assert_int_equal(drain(&g_b), 100);
  for (size_t i = 0; i < 100; i++) {
    assert_int_equal(g_b.recs[i].ts, t0 + i);
    assert_string_equal(g_b.recs[i].name,
                        tg_meta_event_name(i % 2 ? TG_META_SYS_STATS
                                                 : TG_META_PS_SCAN));
    assert_true(g_b.recs[i].tid > 0);
    assert_false(g_b.recs[i].overran);
  }
  /* Drained: nothing twice. */
  assert_int_equal(drain(&g_b), 0);
  tg_meta_disable();
  reset(&g_b);
}

static void nothing_is_recorded_while_off(void **state) {
  (void)state;
  assert_int_equal(tg_meta_begin(), 0);
  tg_meta_end(TG_META_SYS_STATS, 0);
  /* A writer that began while recording was on ends after the session
   * stopped: its record lands in the ring, but the next session starts
   * clean of it. */
  tg_meta_end(TG_META_SYS_STATS, 12345);
  tg_meta_enable();
  assert_int_equal(drain(&g_b), 0);
  tg_meta_disable();
  reset(&g_b);
}

static void a_full_ring_drops_counts_and_says_so(void **state) {
  (void)state;
  tg_meta_enable();
  uint64_t before = tg_meta_overruns();
  uint64_t t0 = tg_meta_begin();
  for (uint64_t i = 0; i < TG_META_RING + 10; i++)
    tg_meta_end(TG_META_FTRACE_DRAIN, t0 + i);
  assert_int_equal(tg_meta_overruns() - before, 10);
  assert_int_equal(drain(&g_b), TG_META_RING);
  /* The oldest kept, the newest dropped; the first packet after the
   * drops says there were some, the others do not. */
  assert_int_equal(g_b.recs[0].ts, t0);
  assert_int_equal(g_b.recs[TG_META_RING - 1].ts, t0 + TG_META_RING - 1);
  assert_true(g_b.recs[0].overran);
  for (size_t i = 1; i < g_b.n; i++) assert_false(g_b.recs[i].overran);
  /* Room again. */
  tg_meta_end(TG_META_FTRACE_DRAIN, t0);
  assert_int_equal(drain(&g_b), 1);
  assert_false(g_b.recs[g_b.n - 1].overran);
  tg_meta_disable();
  reset(&g_b);
}

#define WRITERS 4
#define PER_WRITER 20000

static void *writer_main(void *arg) {
  uint64_t w = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < PER_WRITER; i++)
    tg_meta_end(TG_META_SYS_STATS, (w + 1) << 32 | i);
  return NULL;
}

/* Four writers and a reader at once: every record is read once or counted
 * as dropped, and each writer's records come in its order. */
static void many_writers_lose_only_what_is_counted(void **state) {
  (void)state;
  tg_meta_enable();
  uint64_t before = tg_meta_overruns();
  pthread_t t[WRITERS];
  for (uintptr_t i = 0; i < WRITERS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, writer_main, (void *)i), 0);
  size_t read = 0;
  for (int k = 0; k < 200; k++) read += drain(&g_b);
  for (int i = 0; i < WRITERS; i++) pthread_join(t[i], NULL);
  read += drain(&g_b);
  uint64_t dropped = tg_meta_overruns() - before;
  assert_int_equal(read + dropped, (uint64_t)WRITERS * PER_WRITER);
  uint64_t last[WRITERS];
  memset(last, 0xff, sizeof(last));
  for (size_t i = 0; i < g_b.n; i++) {
    uint64_t w = (g_b.recs[i].ts >> 32) - 1, seq = g_b.recs[i].ts & 0xffffffffu;
    assert_true(w < WRITERS);
    if (last[w] != UINT64_MAX) assert_true(seq > last[w]);
    last[w] = seq;
  }
  tg_meta_disable();
  reset(&g_b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(records_come_out_once_in_order),
      cmocka_unit_test(nothing_is_recorded_while_off),
      cmocka_unit_test(a_full_ring_drops_counts_and_says_so),
      cmocka_unit_test(many_writers_lose_only_what_is_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
