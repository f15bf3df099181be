/* The recording engine (consumer/recording.h) against a real tracegated,
 * with a raw producer (tests/support) that commits packets, acks flushes
 * by hand, or never acks a stop: a whole session (start, stream, stop,
 * drain, final stats), a refused config, detach then attach and a rebind
 * after the connection went, the deadline of a session whose end
 * never comes, and on a simulated clock the reads' pace and how long a
 * call has waited. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "consumer/recording_internal.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "test_notice.h"
#include "test_service.h"
#include "tracegate/error.h"

#define WAIT_MS 10000
#define MAX_SEEN 64

/* --- the loop and one connection ------------------------------------------ */

static void on_late(uv_timer_t *t) { *(bool *)t->data = true; }

/* Runs |loop| until *flag (an event) or |timeout_ms| passed. */
static bool run_until(uv_loop_t *loop, const bool *flag, int timeout_ms) {
  bool late = false;
  uv_timer_t t;
  uv_timer_init(loop, &t);
  t.data = &late;
  uv_timer_start(&t, on_late, (uint64_t)timeout_ms, 0);
  while (!*flag && !late) uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  return *flag;
}

typedef struct conn {
  tg_consumer_t *c;
  bool ready, closed;
} conn_t;

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  (void)msg;
  conn_t *k = tg_consumer_data(c);
  k->ready = status == 0;
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  (void)status;
  (void)msg;
  conn_t *k = tg_consumer_data(c);
  k->closed = true;
  k->c = NULL;
}

static const tg_consumer_cbs_t conn_cbs = {.on_ready = on_ready,
                                           .on_close = on_close};

static void connect_to(conn_t *k, uv_loop_t *loop, const test_service_t *ts) {
  memset(k, 0, sizeof(*k));
  assert_int_equal(tg_consumer_connect(loop, ts->consumer_sock, &conn_cbs, k, &k->c), 0);
  assert_true(run_until(loop, &k->ready, WAIT_MS));
}

static void close_conn(conn_t *k, uv_loop_t *loop) {
  if (k->c) tg_consumer_close(k->c);
  assert_true(run_until(loop, &k->closed, WAIT_MS));
}

/* --- what the recording told its owner ------------------------------------- */

typedef struct seen {
  tg_rec_state_t states[MAX_SEEN];
  size_t n_states;
  uint32_t values[MAX_SEEN]; /* the test packets' seq_value, in order */
  char strs[MAX_SEEN][8];
  size_t n_packets;
  uint64_t packet_bytes; /* of every packet, the service's too */
  size_t n_test;         /* test packets, beyond MAX_SEEN too */
  size_t n_dropped;      /* test packets that say data was lost before */
  uint32_t last_value;   /* the last test packet's seq_value + 1 */
  bool out_of_order;     /* a test packet's seq_value went backwards */
  uint64_t overwritten;  /* chunks the last stats say were overwritten */
  unsigned stats, final_stats;
  bool attached;
  bool rebound;
  int rebound_status;
  bool ended;
  int end_status;
  char reason[600];
  bool unbind_when_freeing; /* the connection "goes" at FREEING */
} seen_t;

static void on_state(tg_recording_t *r, tg_rec_state_t from, tg_rec_state_t to) {
  (void)from;
  seen_t *s = tg_recording_data(r);
  if (s->n_states < MAX_SEEN) s->states[s->n_states++] = to;
  if (to == TG_REC_FREEING && s->unbind_when_freeing) tg_recording_unbind(r);
}

static int on_packet(tg_recording_t *r, const uint8_t *p, size_t n) {
  seen_t *s = tg_recording_data(r);
  s->packet_bytes += n;
  Perfetto__Protos__TracePacket *tp = perfetto__protos__trace_packet__unpack(NULL, n, p);
  if (!tp) return TG_EPROTO_DECODE;
  if (tp->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING) {
    /* The first packet of the (one) sequence is flagged as Perfetto's
     * service flags it; only later flags say something was lost. */
    if (s->n_test > 0 && tp->has_previous_packet_dropped &&
        tp->previous_packet_dropped)
      s->n_dropped++;
    s->n_test++;
    if (tp->for_testing->seq_value < s->last_value) s->out_of_order = true;
    s->last_value = tp->for_testing->seq_value + 1;
  }
  if (tp->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING &&
      s->n_packets < MAX_SEEN) {
    s->values[s->n_packets] = tp->for_testing->seq_value;
    snprintf(s->strs[s->n_packets], sizeof(s->strs[0]), "%s", tp->for_testing->str);
    s->n_packets++;
  }
  perfetto__protos__trace_packet__free_unpacked(tp, NULL);
  return 0;
}

static int on_attached(tg_recording_t *r, const Perfetto__Protos__TraceConfig *cfg) {
  seen_t *s = tg_recording_data(r);
  s->attached = cfg->n_buffers == 1;
  return 0;
}

static void on_stats(tg_recording_t *r, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st, bool final) {
  (void)msg;
  seen_t *s = tg_recording_data(r);
  if (status == 0 && st) {
    if (final) s->final_stats++;
    else s->stats++;
    s->overwritten = 0;
    for (size_t i = 0; i < st->n_buffer_stats; i++)
      s->overwritten += st->buffer_stats[i]->chunks_overwritten;
  }
}

static void on_rebound(tg_recording_t *r, int status, const char *msg) {
  (void)msg;
  seen_t *s = tg_recording_data(r);
  s->rebound = true;
  s->rebound_status = status;
}

static void on_end(tg_recording_t *r, int status, const char *reason) {
  seen_t *s = tg_recording_data(r);
  s->ended = true;
  s->end_status = status;
  snprintf(s->reason, sizeof(s->reason), "%s", reason);
}

static const tg_recording_cbs_t rec_cbs = {
    .on_state = on_state,
    .on_packet = on_packet,
    .on_attached = on_attached,
    .on_stats = on_stats,
    .on_rebound = on_rebound,
    .on_end = on_end,
};

static bool saw_state(const seen_t *s, tg_rec_state_t st) {
  for (size_t i = 0; i < s->n_states; i++)
    if (s->states[i] == st) return true;
  return false;
}

/* Runs the loop until the recording holds |n| test packets. */
static void wait_packets(uv_loop_t *loop, seen_t *s, size_t n) {
  bool got = false;
  for (int i = 0; i < WAIT_MS / 10 && !got; i++) {
    bool never = false;
    run_until(loop, &never, 10);
    got = s->n_packets >= n;
  }
  assert_true(got);
}

static void commit(raw_producer_t *p, uint32_t chunk_id, const char *str,
                   uint32_t first, unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, 0, 0, 1, chunk_id, str, first, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

static void on_conn_detached(tg_consumer_t *c, void *ctx, int status,
                             const char *msg) {
  (void)c;
  (void)msg;
  assert_int_equal(status, 0);
  *(bool *)ctx = true;
}

static void ack_flush(raw_producer_t *p) {
  uint64_t id = raw_producer_wait_flush(p, p->last_flush_id, WAIT_MS);
  assert_true(id > 0);
  assert_int_equal(raw_producer_commit(p, NULL, NULL, 0, id), 0);
}

/* One test's world: a loop, a producer (unless none is wanted), a
 * connection, and a recording with what it saw. */
typedef struct bench {
  uv_loop_t loop;
  raw_producer_t p;
  bool has_p;
  conn_t k;
  seen_t s;
  tg_recording_t *r;
  simple_cfg_t sc;
  uint8_t buf[512];
} bench_t;

static void bench_open(bench_t *b, const test_service_t *ts, const char *producer,
                       bool will_notify_on_stop) {
  memset(b, 0, sizeof(*b));
  if (producer) {
    assert_int_equal(raw_producer_connect(&b->p, ts, producer, "rec.ds", 4, 64,
                                          will_notify_on_stop), 0);
    b->has_p = true;
  }
  uv_loop_init(&b->loop);
  connect_to(&b->k, &b->loop, ts);
  b->r = tg_recording_new(&b->loop, &tg_clock_monotonic, &rec_cbs, &b->s);
  assert_non_null(b->r);
  simple_cfg_init(&b->sc, 256, 1, "rec.ds");
}

/* |o| enables b->sc's config (packed into b->buf). */
static void bench_config(bench_t *b, tg_recording_opts_t *o) {
  size_t n = perfetto__protos__trace_config__get_packed_size(&b->sc.cfg);
  assert_true(n <= sizeof(b->buf));
  o->config = b->buf;
  o->config_len = perfetto__protos__trace_config__pack(&b->sc.cfg, b->buf);
}

/* Frees the recording, closes the connection, and checks the loop holds
 * nothing else. */
static void bench_close(bench_t *b) {
  tg_recording_free(b->r);
  close_conn(&b->k, &b->loop);
  uv_run(&b->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&b->loop), 0);
  if (b->has_p) raw_producer_close(&b->p);
}

/* --- tests ------------------------------------------------------------------- */

static void streams_stops_and_drains_a_whole_session(void **state) {
  bench_t b;
  bench_open(&b, *state, "rec.producer", false);
  tg_recording_opts_t o = {.fd = -1, .stream = true, .read_period_ms = 20,
                           .stats_period_ms = 20};
  bench_config(&b, &o);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_int_equal(tg_recording_state(b.r), TG_REC_TRACING);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);

  /* While tracing: the periodic reads bring the packets. */
  commit(&b.p, 0, "a", 1, 5);
  wait_packets(&b.loop, &b.s, 5);
  /* Written just before the stop: the drain reads them. */
  commit(&b.p, 1, "b", 10, 3);
  tg_recording_stop(b.r);
  assert_int_equal(tg_recording_state(b.r), TG_REC_STOPPING);
  ack_flush(&b.p);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  assert_int_equal(tg_recording_state(b.r), TG_REC_DONE);
  assert_true(tg_recording_ended(b.r));
  assert_int_equal(b.s.n_packets, 8);
  for (unsigned i = 0; i < 5; i++) {
    assert_string_equal(b.s.strs[i], "a");
    assert_int_equal(b.s.values[i], 1 + i);
  }
  for (unsigned i = 0; i < 3; i++) {
    assert_string_equal(b.s.strs[5 + i], "b");
    assert_int_equal(b.s.values[5 + i], 10 + i);
  }
  assert_int_equal(b.s.final_stats, 1);
  assert_true(saw_state(&b.s, TG_REC_DRAINING));
  assert_true(saw_state(&b.s, TG_REC_STATS));
  assert_true(saw_state(&b.s, TG_REC_FREEING));
  assert_int_equal(b.s.states[b.s.n_states - 1], TG_REC_DONE);
  assert_int_equal(tg_recording_reads_cut(b.r), 0);
  /* The session was freed before DONE, its connection still open. */
  raw_consumer_t rc;
  assert_int_equal(raw_consumer_connect(&rc, *state), 0);
  size_t np, nd, ns, nr;
  assert_int_equal(raw_consumer_query_all(&rc, WAIT_MS, &np, &nd, &ns, &nr), 0);
  assert_int_equal(ns, 0);
  raw_consumer_close(&rc);
  bench_close(&b);
}

/* The connection goes while the session is being freed: the trace is
 * whole, so the recording is DONE all the same, and says the session was
 * not freed (a service holding it under a lease keeps it). */
static void connection_lost_while_freeing_is_done_not_freed(void **state) {
  bench_t b;
  bench_open(&b, *state, "rec.producer", false);
  tg_recording_opts_t o = {.fd = -1, .stream = true, .read_period_ms = 20};
  bench_config(&b, &o);
  b.s.unbind_when_freeing = true;
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);
  commit(&b.p, 0, "a", 1, 3);
  tg_recording_stop(b.r);
  ack_flush(&b.p);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  assert_int_equal(tg_recording_state(b.r), TG_REC_DONE);
  assert_true(b.s.reason[0]); /* DONE with a reason: not freed */
  assert_int_equal(b.s.n_packets, 3);
  bench_close(&b);
}

/* A world whose producer has an SMB of |pages| 4 KiB pages, and whose
 * config has one buffer of |ring_kb|; the recording reads |clock| (NULL:
 * the machine's, tg_clock_monotonic). */
static void bench_open_smb(bench_t *b, const test_service_t *ts,
                           const char *producer, unsigned pages,
                           uint32_t ring_kb, const tg_clock_t *clock) {
  memset(b, 0, sizeof(*b));
  assert_int_equal(
      raw_producer_connect(&b->p, ts, producer, "rec.ds", 4, pages * 4, false),
      0);
  b->has_p = true;
  uv_loop_init(&b->loop);
  connect_to(&b->k, &b->loop, ts);
  b->r = tg_recording_new(&b->loop, clock ? clock : &tg_clock_monotonic,
                          &rec_cbs, &b->s);
  assert_non_null(b->r);
  simple_cfg_init(&b->sc, ring_kb, 1, "rec.ds");
}

/* One test packet carrying |payload| in each of the first |pages| pages
 * (chunk ids from round * pages on), committed at once. Returns the
 * packet bytes written. */
static uint64_t commit_round(bench_t *b, unsigned round, unsigned pages,
                             const char *payload) {
  enum { MAX_PAGES = 16 };
  assert_true(pages <= MAX_PAGES);
  uint8_t pkt[4096];
  uint32_t pg_ids[MAX_PAGES], chunks[MAX_PAGES];
  uint64_t written = 0;
  for (unsigned pg = 0; pg < pages; pg++) {
    size_t n = make_test_packet(pkt, sizeof(pkt), payload, round * pages + pg);
    assert_true(n > 0);
    const uint8_t *frag = pkt;
    assert_int_equal(
        raw_producer_write_chunk(&b->p, pg, 0, 1, 1, round * pages + pg, 0,
                                 &frag, &n, 1),
        0);
    pg_ids[pg] = pg;
    chunks[pg] = 0;
    written += n;
  }
  assert_int_equal(raw_producer_commit(&b->p, pg_ids, chunks, pages, 0), 0);
  return written;
}

/* A read that brings a lot (the buffer fills faster than the period
 * drains it) is followed by the next read at once, not a period later;
 * one that brings little waits for the period again. */
static void a_large_read_is_followed_at_once(void **state) {
  enum { PERIOD_MS = 1500, PAGES = 16, ROUNDS = 24, PAYLOAD = 3800 };
  bench_t b;
  bench_open_smb(&b, *state, "rec.big", PAGES, 4096, NULL);
  tg_recording_opts_t o = {.fd = -1, .stream = true, .read_period_ms = PERIOD_MS,
                           .first_read_ms = PERIOD_MS};
  bench_config(&b, &o);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);

  /* ~1.4 MiB committed before the first period ends: one packet of
   * PAYLOAD bytes per 4 KiB chunk, a whole SMB per commit. */
  static char payload[PAYLOAD + 1];
  memset(payload, 'x', PAYLOAD);
  uint64_t written = 0;
  for (unsigned round = 0; round < ROUNDS; round++)
    written += commit_round(&b, round, PAGES, payload);
  assert_true(written >= TG_REC_READ_AGAIN_BYTES);

  /* The first read, at the first period, brings all of it, so the second
   * follows at once: both are answered before half of the next period
   * has gone (without reading again at once, the second read would come
   * a whole period after the first). */
  uint64_t t0 = uv_now(&b.loop);
  while (tg_recording_reads(b.r) < 2 &&
         uv_now(&b.loop) - t0 < PERIOD_MS + PERIOD_MS / 2) {
    bool never = false;
    run_until(&b.loop, &never, 10);
  }
  assert_int_equal(tg_recording_reads(b.r), 2);
  assert_int_equal(b.s.n_test, ROUNDS * PAGES);
  assert_true(b.s.packet_bytes >= written);
  /* The second brought nothing: no third before the next period. */
  bool never = false;
  run_until(&b.loop, &never, PERIOD_MS / 3);
  assert_int_equal(tg_recording_reads(b.r), 2);

  tg_recording_stop(b.r);
  ack_flush(&b.p);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  assert_int_equal(b.s.n_test, ROUNDS * PAGES);
  bench_close(&b);
}

/* A source that would fill the ring many times within a period: the
 * reads keep pace with it (after a read that brought less than a quarter
 * of the ring, the next comes when that much should be waiting, at the
 * rate the reads measured). Reading again at once only after reads of
 * 1 MiB, at the period otherwise, lost all but the last ring's worth of
 * it. Whether they keep pace depends on the machine's load, so what is
 * asserted holds at any speed: every chunk is either read or counted as
 * overwritten, in order, and a loss is flagged on the packet after it;
 * how much was lost is printed. */
static void reads_keep_pace_with_a_source_faster_than_the_period(void **state) {
  enum { PERIOD_MS = 5000, PAGES = 16, ROUNDS = 150, PAYLOAD = 3800 };
  bench_t b;
  bench_open_smb(&b, *state, "rec.pace", PAGES, 1024, NULL); /* 1 MiB ring */
  tg_recording_opts_t o = {.fd = -1, .stream = true, .read_period_ms = PERIOD_MS};
  bench_config(&b, &o);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);

  /* ~60 KiB every 10 ms of the loop, ~9 MiB in all, well within the
   * period: nine rings' worth. */
  static char payload[PAYLOAD + 1];
  memset(payload, 'p', PAYLOAD);
  uint64_t t0 = uv_now(&b.loop);
  for (unsigned round = 0; round < ROUNDS; round++) {
    commit_round(&b, round, PAGES, payload);
    bool never = false;
    run_until(&b.loop, &never, 10);
  }
  uint64_t took = uv_now(&b.loop) - t0;
  tg_recording_stop(b.r);
  ack_flush(&b.p);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  /* One test packet per chunk: read, or overwritten and counted (in the
   * stats the recording ends with). */
  assert_int_equal(b.s.final_stats, 1);
  assert_int_equal(b.s.n_test + b.s.overwritten, ROUNDS * PAGES);
  assert_false(b.s.out_of_order);
  if (b.s.overwritten) assert_true(b.s.n_dropped > 0);
  print_message("%u chunks in %llu ms (period %u ms): %zu read, %llu "
                "overwritten\n", ROUNDS * PAGES, (unsigned long long)took,
                PERIOD_MS, b.s.n_test, (unsigned long long)b.s.overwritten);
  bench_close(&b);
}

/* Polls the loop until |r| answered |reads| reads and |s| holds |n_test|
 * test packets, or WAIT_MS of the loop went by. */
static void wait_reads(bench_t *b, uint64_t reads, size_t n_test) {
  uv_update_time(&b->loop);
  uint64_t t0 = uv_now(&b->loop);
  while ((tg_recording_reads(b->r) < reads || b->s.n_test < n_test) &&
         uv_now(&b->loop) - t0 < WAIT_MS) {
    bool never = false;
    run_until(&b->loop, &never, 10);
  }
}

/* Polls the loop until the recording traces (WAIT_MS of the loop at
 * most). */
static void wait_tracing(bench_t *b) {
  uv_update_time(&b->loop);
  uint64_t t0 = uv_now(&b->loop);
  while (tg_recording_state(b->r) != TG_REC_TRACING &&
         uv_now(&b->loop) - t0 < WAIT_MS) {
    bool never = false;
    run_until(&b->loop, &never, 10);
  }
  assert_int_equal(tg_recording_state(b->r), TG_REC_TRACING);
}

/* The reads' pace follows the recording's clock, a simulated one here:
 * a read that brought less than the target, SPAN_MS of that clock after
 * tracing began, measures the rate over those SPAN_MS (whatever the
 * machine's time did meanwhile), and the next read is due when the
 * target should be waiting at that rate, long before the period. */
static void the_reads_pace_follows_the_recording_clock(void **state) {
  enum { PERIOD_MS = 600000, SPAN_MS = 100, PAGES = 16, ROUND_PAGES = 2 };
  tg_clock_sim_t sim;
  tg_clock_sim_init(&sim, 1000);
  bench_t b;
  bench_open_smb(&b, *state, "rec.clock", PAGES, 1024, &sim.clock);
  tg_recording_opts_t o = {.fd = -1, .stream = true,
                           .read_period_ms = PERIOD_MS,
                           .first_read_ms = PERIOD_MS};
  bench_config(&b, &o);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);
  wait_tracing(&b);
  /* The window began at TRACING, at 1000 ms of the clock. */
  assert_int_equal(b.r->rd.rate_since_ms, 1000);
  static char payload[1001];
  memset(payload, 'c', 1000);
  commit_round(&b, 0, ROUND_PAGES, payload); /* answered: in the buffer */
  tg_clock_sim_advance_ms(&sim, SPAN_MS);
  tg_recording_read_first_now(b.r);
  wait_reads(&b, 1, ROUND_PAGES);
  assert_int_equal(tg_recording_reads(b.r), 1);
  assert_int_equal(b.s.n_test, ROUND_PAGES);
  /* Every byte the read brought (the service's packets too) over the
   * clock's SPAN_MS; the next window starts at the clock's now. */
  uint64_t bytes = b.s.packet_bytes;
  assert_true(bytes > 0 && bytes < b.r->rd.read_target);
  assert_true(b.r->rd.rate_per_ms == (double)bytes / (double)SPAN_MS);
  assert_int_equal(b.r->rd.rate_since_ms, 1000 + SPAN_MS);
  /* The next read: due at the target over that rate, not at the period
   * (the timer's due only shrinks as the machine's time goes). */
  uint64_t due = (uint64_t)((double)b.r->rd.read_target / b.r->rd.rate_per_ms);
  assert_true(due < PERIOD_MS);
  assert_true(uv_timer_get_due_in(&b.r->reader) <= due);

  tg_recording_stop(b.r);
  ack_flush(&b.p);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  bench_close(&b);
}

/* How long a call has gone unanswered is counted on the recording's
 * clock (a fleet host judges its link by it): a statistics call asked at
 * 1000 ms of a simulated clock has waited exactly what the clock moved
 * since, whatever the machine's time did, and nothing once answered. */
static void a_call_waits_on_the_recording_clock(void **state) {
  enum { PERIOD_MS = 600000, WAITED_MS = 7000 };
  tg_clock_sim_t sim;
  tg_clock_sim_init(&sim, 1000);
  bench_t b;
  bench_open_smb(&b, *state, "rec.wait", 4, 256, &sim.clock);
  tg_recording_opts_t o = {.fd = -1, .stream = true,
                           .read_period_ms = PERIOD_MS,
                           .first_read_ms = PERIOD_MS};
  bench_config(&b, &o);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  wait_tracing(&b);
  assert_int_equal(tg_recording_waiting_ms(b.r, tg_clock_ms(&sim.clock)), 0);
  /* Asked now; the loop does not run until the clock moved. */
  tg__rec_stats_now(b.r);
  assert_int_equal(b.r->rd.stats, TG__STATS_ASKED);
  tg_clock_sim_advance_ms(&sim, WAITED_MS);
  assert_int_equal(tg_recording_waiting_ms(b.r, tg_clock_ms(&sim.clock)),
                   WAITED_MS);
  uv_update_time(&b.loop);
  uint64_t t0 = uv_now(&b.loop);
  while (b.s.stats < 1 && uv_now(&b.loop) - t0 < WAIT_MS) {
    bool never = false;
    run_until(&b.loop, &never, 10);
  }
  assert_int_equal(b.s.stats, 1);
  assert_int_equal(tg_recording_waiting_ms(b.r, tg_clock_ms(&sim.clock)), 0);

  tg_recording_stop(b.r);
  ack_flush(&b.p);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  bench_close(&b);
}

/* A first read given beyond the period waits for it (a fleet's start
 * defers it), unless tg_recording_read_first_now() brings it forward; a
 * recording that has read already is not hurried by it. */
static void a_deferred_first_read_comes_when_asked(void **state) {
  enum { PERIOD_MS = 200, FIRST_MS = 60000 };
  bench_t b;
  bench_open(&b, *state, "rec.defer", false);
  tg_recording_opts_t o = {.fd = -1,
                           .stream = true,
                           .read_period_ms = PERIOD_MS,
                           .first_read_ms = FIRST_MS};
  bench_config(&b, &o);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);
  commit(&b.p, 1, "late", 1, 3);
  /* Three periods: no read (the default would have read at 100 ms). */
  bool never = false;
  run_until(&b.loop, &never, 3 * PERIOD_MS);
  assert_int_equal(tg_recording_reads(b.r), 0);
  assert_int_equal(b.s.n_test, 0);
  tg_recording_read_first_now(b.r);
  uv_update_time(&b.loop);
  uint64_t t0 = uv_now(&b.loop);
  while ((b.s.n_test < 3 || tg_recording_reads(b.r) < 1) &&
         uv_now(&b.loop) - t0 < WAIT_MS) {
    never = false;
    run_until(&b.loop, &never, 10);
  }
  assert_int_equal(b.s.n_test, 3);
  assert_int_equal(tg_recording_reads(b.r), 1);
  /* Then at the period, and asking again changes nothing. */
  uint64_t reads = tg_recording_reads(b.r);
  tg_recording_read_first_now(b.r);
  never = false;
  run_until(&b.loop, &never, PERIOD_MS / 4);
  assert_int_equal(tg_recording_reads(b.r), reads);
  never = false;
  run_until(&b.loop, &never, 3 * PERIOD_MS);
  assert_true(tg_recording_reads(b.r) > reads);
  tg_recording_stop(b.r);
  ack_flush(&b.p);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  bench_close(&b);
}

/* Held reads: none at the first read's time, none at the periods, none
 * to drain after a stop, until tg_recording_release_reads(); then the
 * drain reads every packet and the recording ends well. */
static void held_reads_wait_for_the_release(void **state) {
  enum { PERIOD_MS = 100 };
  bench_t b;
  bench_open(&b, *state, "rec.hold", false);
  tg_recording_opts_t o = {.fd = -1,
                           .stream = true,
                           .read_period_ms = PERIOD_MS,
                           .hold_reads = true};
  bench_config(&b, &o);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);
  commit(&b.p, 1, "held", 1, 4);
  bool never = false;
  run_until(&b.loop, &never, 4 * PERIOD_MS);
  assert_int_equal(tg_recording_reads(b.r), 0);
  /* Stopped: the session ends, its drain waits too. */
  tg_recording_stop(b.r);
  ack_flush(&b.p);
  uv_update_time(&b.loop);
  uint64_t t0 = uv_now(&b.loop);
  while (tg_recording_state(b.r) != TG_REC_DRAINING && !b.s.ended &&
         uv_now(&b.loop) - t0 < WAIT_MS) {
    never = false;
    run_until(&b.loop, &never, 10);
  }
  assert_int_equal(tg_recording_state(b.r), TG_REC_DRAINING);
  never = false;
  run_until(&b.loop, &never, 2 * PERIOD_MS);
  assert_int_equal(tg_recording_reads(b.r), 0);
  assert_int_equal(b.s.n_test, 0);
  assert_false(b.s.ended);
  tg_recording_release_reads(b.r);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  assert_int_equal(b.s.n_test, 4);
  assert_true(tg_recording_reads(b.r) >= 1);
  bench_close(&b);
}

/* The first read does not wait a whole period: a source that fills the
 * ring within one would lose its start. It comes TG_REC_DEFAULT_FIRST_READ_MS
 * after tracing starts; with nothing more to read, the next waits for the
 * period. */
static void the_first_read_comes_before_the_period(void **state) {
  enum { PERIOD_MS = 3000 };
  bench_t b;
  bench_open(&b, *state, "rec.first", false);
  tg_recording_opts_t o = {.fd = -1, .stream = true, .read_period_ms = PERIOD_MS};
  bench_config(&b, &o);
  uv_update_time(&b.loop);
  uint64_t t0 = uv_now(&b.loop);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);
  assert_int_equal(raw_producer_write_packets(&b.p, 0, 0, 1, 1, "early", 1, 3), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&b.p, &page, &chunk, 1, 0), 0);

  /* The packets come in slices before the read's last reply: wait for
   * both, or a slow machine sees the packets with the read still open. */
  while ((b.s.n_test < 3 || tg_recording_reads(b.r) < 1) &&
         uv_now(&b.loop) - t0 < PERIOD_MS / 2) {
    bool never = false;
    run_until(&b.loop, &never, 10);
  }
  assert_int_equal(b.s.n_test, 3);
  assert_int_equal(tg_recording_reads(b.r), 1);
  /* Little came: the next read waits for the period. */
  bool never = false;
  run_until(&b.loop, &never, PERIOD_MS / 4);
  assert_int_equal(tg_recording_reads(b.r), 1);

  tg_recording_stop(b.r);
  ack_flush(&b.p);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  assert_int_equal(b.s.n_test, 3);
  bench_close(&b);
}

static void refused_config_fails_with_the_service_text(void **state) {
  bench_t b;
  bench_open(&b, *state, NULL, false);
  b.sc.buf.size_kb = 1; /* under the 4 KiB minimum */
  tg_recording_opts_t o = {.fd = -1, .stream = true};
  bench_config(&b, &o);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_false(b.s.ended); /* never inside the call */
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, TG_EREMOTE_FAILED);
  /* The service's refusal, passed on whole: its code and the field. */
  assert_true(tg_test_notice_line(b.s.reason, TG_N_SERVICE_CONFIG_REFUSED,
                                  "buffers[0].size_kb", NULL, 0));
  assert_int_equal(tg_recording_state(b.r), TG_REC_FAILED);
  /* A config that does not decode is refused by the call, no callback. */
  tg_recording_t *r2 = tg_recording_new(&b.loop, &tg_clock_monotonic, &rec_cbs, &b.s);
  static const uint8_t junk[] = {0xff, 0xff, 0xff};
  tg_recording_opts_t bad = {.fd = -1, .config = junk, .config_len = sizeof(junk)};
  assert_int_equal(tg_recording_start(r2, b.k.c, &bad), TG_EPROTO_DECODE);
  tg_recording_free(r2);
  bench_close(&b);
}

static void detach_attach_and_rebind_keep_every_packet(void **state) {
  test_service_t *ts = *state;
  /* A: enable, then detach under the key. */
  bench_t a;
  bench_open(&a, ts, "rec.producer", false);
  tg_recording_opts_t o = {.fd = -1, .detach_key = "rec-key"};
  bench_config(&a, &o);
  assert_int_equal(tg_recording_start(a.r, a.k.c, &o), 0);
  assert_true(run_until(&a.loop, &a.s.ended, WAIT_MS));
  assert_int_equal(a.s.end_status, 0);
  assert_int_equal(tg_recording_state(a.r), TG_REC_DETACHED);
  tg_recording_free(a.r);
  a.r = tg_recording_new(&a.loop, &tg_clock_monotonic, &rec_cbs, &a.s);
  memset(&a.s, 0, sizeof(a.s));
  close_conn(&a.k, &a.loop);
  assert_int_equal(raw_producer_wait_started(&a.p, WAIT_MS), 0);
  commit(&a.p, 0, "a", 0, 4);

  /* B: attach by key and stream. */
  connect_to(&a.k, &a.loop, ts);
  tg_recording_opts_t ao = {.fd = -1, .attach_key = "rec-key",
                            .resume_key = "rec-key", .stream = true,
                            .read_period_ms = 20, .stats_period_ms = 50};
  assert_int_equal(tg_recording_start(a.r, a.k.c, &ao), 0);
  wait_packets(&a.loop, &a.s, 4);
  assert_true(a.s.attached);
  assert_non_null(tg_recording_config(a.r));
  assert_int_equal(tg_recording_state(a.r), TG_REC_TRACING);
  assert_true(tg_recording_resumable(a.r));

  /* B goes away with the session detached (as a relay does when its
   * client's link drops); the recording waits, unbound. */
  tg_recording_unbind(a.r);
  assert_int_equal(tg_recording_binding(a.r), TG_REC_UNBOUND);
  /* Its lifecycle stays where the connection left it. */
  assert_int_equal(tg_recording_state(a.r), TG_REC_TRACING);
  bool detached = false;
  assert_int_equal(tg_consumer_detach(a.k.c, "rec-key", on_conn_detached, &detached), 0);
  assert_true(run_until(&a.loop, &detached, WAIT_MS));
  close_conn(&a.k, &a.loop);
  commit(&a.p, 1, "b", 4, 3);

  /* C: rebind; stopping is remembered across it. */
  connect_to(&a.k, &a.loop, ts);
  tg_recording_stop(a.r);
  assert_int_equal(tg_recording_rebind(a.r, a.k.c), 0);
  assert_true(run_until(&a.loop, &a.s.rebound, WAIT_MS));
  assert_int_equal(a.s.rebound_status, 0);
  assert_int_equal(tg_recording_binding(a.r), TG_REC_BOUND);
  assert_int_equal(tg_recording_state(a.r), TG_REC_STOPPING);
  ack_flush(&a.p);
  assert_true(run_until(&a.loop, &a.s.ended, WAIT_MS));
  assert_int_equal(a.s.end_status, 0);
  assert_int_equal(tg_recording_state(a.r), TG_REC_DONE);
  /* Every packet once, in order. */
  assert_int_equal(a.s.n_packets, 7);
  for (unsigned i = 0; i < 7; i++) {
    assert_string_equal(a.s.strs[i], i < 4 ? "a" : "b");
    assert_int_equal(a.s.values[i], i);
  }
  bench_close(&a);
}

static void session_that_never_ends_fails_at_its_deadline(void **state) {
  /* will_notify_on_stop, and neither flushes nor stops are ever acked:
   * with long service timeouts the session's end never comes. */
  bench_t b;
  bench_open(&b, *state, "stuck.producer", true);
  b.sc.cfg.has_duration_ms = 1;
  b.sc.cfg.duration_ms = 200;
  b.sc.cfg.has_flush_timeout_ms = 1;
  b.sc.cfg.flush_timeout_ms = 60000;
  b.sc.cfg.has_data_source_stop_timeout_ms = 1;
  b.sc.cfg.data_source_stop_timeout_ms = 60000;
  tg_recording_opts_t o = {.fd = -1, .stream = true, .read_period_ms = 50,
                           .grace_ms = 300, .deadline_stop_ms = 300};
  bench_config(&b, &o);
  uint64_t t0 = uv_now(&b.loop);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  uv_update_time(&b.loop);
  uint64_t took = uv_now(&b.loop) - t0;
  assert_int_equal(tg_recording_state(b.r), TG_REC_FAILED);
  assert_int_equal(b.s.end_status, -ETIMEDOUT);
  /* -ETIMEDOUT says why; the reason names the deadline's two parts. */
  assert_non_null(strstr(b.s.reason, "200ms"));
  assert_non_null(strstr(b.s.reason, "300ms"));
  assert_true(saw_state(&b.s, TG_REC_STOPPING)); /* it was stopped first */
  /* duration + grace + the stop bound, well before any service timeout. */
  assert_true(took >= 800);
  assert_true(took < 5000);
  bench_close(&b);
}

/* A START_TRACING session waits for its trigger (up to trigger_timeout_ms)
 * before its duration begins: the deadline makes room for that wait. */
static void start_trigger_wait_is_not_cut_by_the_deadline(void **state) {
  bench_t b;
  bench_open(&b, *state, "trig.producer", false);
  Perfetto__Protos__TraceConfig__TriggerConfig tc =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__INIT;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger tr =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER__INIT, *trp = &tr;
  tr.name = "go";
  tc.has_trigger_mode = 1;
  tc.trigger_mode =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING;
  tc.has_trigger_timeout_ms = 1;
  tc.trigger_timeout_ms = 10000;
  tc.n_triggers = 1;
  tc.triggers = &trp;
  b.sc.cfg.trigger_config = &tc;
  b.sc.cfg.has_duration_ms = 1;
  b.sc.cfg.duration_ms = 200;
  tg_recording_opts_t o = {.fd = -1, .stream = true, .read_period_ms = 50,
                           .grace_ms = 300, .deadline_stop_ms = 300};
  bench_config(&b, &o);
  assert_int_equal(tg_recording_start(b.r, b.k.c, &o), 0);
  /* Past duration + grace (500 ms) with no trigger yet. */
  bool never = false;
  run_until(&b.loop, &never, 900);
  assert_false(b.s.ended);
  char *names[1] = {"go"};
  Perfetto__Protos__ActivateTriggersRequest at =
      PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
  at.n_trigger_names = 1;
  at.trigger_names = names;
  assert_int_equal(raw_call(&b.p.conn, "ActivateTriggers", &at.base, -1, NULL,
                            NULL, WAIT_MS), 1);
  assert_int_equal(raw_producer_wait_started(&b.p, WAIT_MS), 0);
  commit(&b.p, 0, "after", 0, 5);
  assert_true(run_until(&b.loop, &b.s.ended, WAIT_MS));
  assert_int_equal(b.s.end_status, 0);
  assert_int_not_equal(tg_recording_state(b.r), TG_REC_FAILED);
  bench_close(&b);
}

/* enable_if_absent: nothing under the key, so the config is enabled; the
 * session, detached under the key, is then found by a second recording
 * with the same options (a collector's restart), which attaches and
 * enables nothing new. */
static void attach_or_enable_takes_back_the_same_session(void **state) {
  test_service_t *ts = *state;
  bench_t a;
  bench_open(&a, ts, "rec.producer", false);
  tg_recording_opts_t o = {.fd = -1, .attach_key = "ring-key",
                           .enable_if_absent = true};
  bench_config(&a, &o);
  assert_int_equal(tg_recording_start(a.r, a.k.c, &o), 0);
  for (int i = 0; i < WAIT_MS / 10 && tg_recording_state(a.r) != TG_REC_TRACING; i++) {
    bool never = false;
    run_until(&a.loop, &never, 10);
  }
  assert_int_equal(tg_recording_state(a.r), TG_REC_TRACING);
  assert_false(a.s.attached); /* enabled, not attached */
  assert_null(tg_recording_config(a.r));
  assert_int_equal(raw_producer_wait_started(&a.p, WAIT_MS), 0);
  commit(&a.p, 0, "ring", 0, 3);
  /* The connection leaves the session under the key (as a relay does). */
  bool detached = false;
  assert_int_equal(tg_consumer_detach(a.k.c, "ring-key", on_conn_detached, &detached), 0);
  assert_true(run_until(&a.loop, &detached, WAIT_MS));
  tg_recording_free(a.r);
  close_conn(&a.k, &a.loop);

  /* The same options again: the Attach succeeds; streaming reads what the
   * first session holds, so it is the same one. */
  memset(&a.s, 0, sizeof(a.s));
  a.r = tg_recording_new(&a.loop, &tg_clock_monotonic, &rec_cbs, &a.s);
  connect_to(&a.k, &a.loop, ts);
  o.stream = true;
  o.read_period_ms = 20;
  assert_int_equal(tg_recording_start(a.r, a.k.c, &o), 0);
  wait_packets(&a.loop, &a.s, 3);
  assert_true(a.s.attached);
  assert_non_null(tg_recording_config(a.r));
  for (unsigned i = 0; i < 3; i++) assert_int_equal(a.s.values[i], i);
  tg_recording_fail(a.r, true, "test over");
  assert_true(run_until(&a.loop, &a.s.ended, WAIT_MS));
  bench_close(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(streams_stops_and_drains_a_whole_session,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(
          connection_lost_while_freeing_is_done_not_freed, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(
          reads_keep_pace_with_a_source_faster_than_the_period,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(a_large_read_is_followed_at_once,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(a_deferred_first_read_comes_when_asked,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(held_reads_wait_for_the_release,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(the_first_read_comes_before_the_period,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(
          the_reads_pace_follows_the_recording_clock, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(a_call_waits_on_the_recording_clock,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(
          refused_config_fails_with_the_service_text, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(
          detach_attach_and_rebind_keep_every_packet, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(
          attach_or_enable_takes_back_the_same_session, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(
          start_trigger_wait_is_not_cut_by_the_deadline, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(
          session_that_never_ends_fails_at_its_deadline, test_service_setup,
          test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
