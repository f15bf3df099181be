/* The read-out engine (consumer/clone_read.h) on its own: its table as
 * the header writes it out, the way through (reads until one brings
 * nothing, max_reads, statistics or none; a clone, or a session of its
 * own read once it ends), each step's failure,
 * a refused transition counted and not made, the silence and the rate
 * floor judged on a simulated clock, a cancel, late replies ignored and
 * the loss counters folded. No service: the consumer calls are a fake
 * whose replies the test sends. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "consumer/clone_read.h"
#include "tracegate/error.h"

/* --- the fake consumer: calls noted, replies sent by the test ------------- */

typedef struct fake {
  int clone_rv, read_rv, stats_rv, free_rv; /* what each call returns */
  unsigned clones, reads, stats, frees;     /* calls made */
  unsigned enables;
  size_t config_len; /* the last EnableTracing's */
  tg_consumer_done_cb done;                 /* the pending call's */
  tg_consumer_packet_cb packet;
  tg_consumer_stats_cb stats_cb;
  void *ctx;
  char trigger[64];
} fake_t;

static fake_t F;

static int fake_clone(tg_consumer_t *c, const tg_consumer_clone_args_t *a,
                      tg_consumer_done_cb cb, void *ctx) {
  (void)c;
  if (F.clone_rv) return F.clone_rv;
  F.clones++;
  F.done = cb;
  F.ctx = ctx;
  snprintf(F.trigger, sizeof(F.trigger), "%s",
           a->clone_trigger_name ? a->clone_trigger_name : "");
  return 0;
}

static int fake_read(tg_consumer_t *c, tg_consumer_packet_cb on_packet,
                     tg_consumer_done_cb on_done, void *ctx) {
  (void)c;
  if (F.read_rv) return F.read_rv;
  F.reads++;
  F.packet = on_packet;
  F.done = on_done;
  F.ctx = ctx;
  return 0;
}

static int fake_stats(tg_consumer_t *c, tg_consumer_stats_cb cb, void *ctx) {
  (void)c;
  if (F.stats_rv) return F.stats_rv;
  F.stats++;
  F.stats_cb = cb;
  F.ctx = ctx;
  return 0;
}

static int fake_free(tg_consumer_t *c, tg_consumer_done_cb cb, void *ctx) {
  (void)c;
  if (F.free_rv) return F.free_rv;
  F.frees++;
  F.done = cb;
  F.ctx = ctx;
  return 0;
}

static int fake_enable(tg_consumer_t *c, const uint8_t *config, size_t len,
                       int fd, tg_consumer_done_cb on_ended, void *ctx) {
  (void)c;
  (void)config;
  assert_int_equal(fd, -1); /* the engine never writes into a file */
  F.enables++;
  F.config_len = len;
  F.done = on_ended;
  F.ctx = ctx;
  return 0;
}

static const tg_clone_ops_t kFakeOps = {fake_clone, fake_read, fake_stats,
                                        fake_free, fake_enable};

/* The pending clone, read or free answers. */
static void answer(int status, const char *msg) {
  F.done(NULL, F.ctx, status, msg);
}

/* The pending read brings |n| packets of |size| bytes, then ends. */
static void bring(unsigned n, size_t size) {
  uint8_t p[256] = {0};
  for (unsigned i = 0; i < n; i++)
    if (F.packet(NULL, F.ctx, p, size) < 0) {
      answer(-ECANCELED, "stopped");
      return;
    }
  answer(0, "");
}

/* --- what the engine told its caller ---------------------------------------- */

typedef struct seen {
  tg_clone_state_t states[16];
  unsigned n_states;
  uint64_t packets, bytes;
  unsigned progress;
  int progress_rv; /* what on_progress returns */
  unsigned stats_calls;
  int stats_status;
  uint64_t loss;
  unsigned ends;
  int end_status;
  char end_msg[TG_CLONE_MSG_MAX];
} seen_t;

static seen_t W;

static void on_state(tg_clone_read_t *e, tg_clone_state_t from,
                     tg_clone_state_t to) {
  (void)e;
  (void)from;
  if (W.n_states < 16) W.states[W.n_states++] = to;
}

static int on_packet(tg_clone_read_t *e, const uint8_t *p, size_t n) {
  (void)e;
  (void)p;
  W.packets++;
  W.bytes += n;
  return 0;
}

static int on_progress(tg_clone_read_t *e, uint64_t packets) {
  (void)e;
  (void)packets;
  W.progress++;
  return W.progress_rv;
}

static void on_stats(tg_clone_read_t *e, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st, uint64_t loss) {
  (void)e;
  (void)msg;
  W.stats_calls++;
  W.stats_status = status;
  W.loss = loss;
  if (status) assert_null(st);
}

static void on_end(tg_clone_read_t *e, int status, const char *msg) {
  (void)e;
  W.ends++;
  W.end_status = status;
  snprintf(W.end_msg, sizeof(W.end_msg), "%s", msg);
}

static const tg_clone_read_cbs_t kCbs = {on_state, on_packet, on_progress,
                                         on_stats, on_end};

static tg_clock_sim_t clk;
/* A stand-in connection: the fake never looks at it. */
static tg_consumer_t *const kConn = (tg_consumer_t *)&clk;

static int setup(void **st) {
  (void)st;
  memset(&F, 0, sizeof(F));
  memset(&W, 0, sizeof(W));
  tg_clock_sim_init(&clk, 1000);
  return 0;
}

static void begin(tg_clone_read_t *e, tg_clone_read_opts_t o) {
  o.ops = &kFakeOps;
  tg_clone_read_init(e, &clk.clock, &o, &kCbs, "test", NULL);
  tg_consumer_clone_args_t a = {.unique_session_name = "ring",
                                .clone_trigger_name = "oom"};
  assert_int_equal(tg_clone_read_start(e, kConn, &a), 0);
  assert_int_equal(tg_clone_read_state(e), TG_CLONE_CLONING);
  assert_string_equal(F.trigger, "oom");
}

/* --- the table ---------------------------------------------------------------- */

static void the_table_is_clone_read_h_s(void **st) {
  (void)st;
  static const struct {
    tg_clone_state_t from, to;
  } arrows[] = {
      {TG_CLONE_CONNECTING, TG_CLONE_CLONING},
      {TG_CLONE_CONNECTING, TG_CLONE_TRACING},
      {TG_CLONE_CONNECTING, TG_CLONE_FAILED},
      {TG_CLONE_CLONING, TG_CLONE_READING},
      {TG_CLONE_CLONING, TG_CLONE_FAILED},
      {TG_CLONE_TRACING, TG_CLONE_READING},
      {TG_CLONE_TRACING, TG_CLONE_FAILED},
      {TG_CLONE_READING, TG_CLONE_STATS},
      {TG_CLONE_READING, TG_CLONE_FREEING},
      {TG_CLONE_READING, TG_CLONE_FAILED},
      {TG_CLONE_STATS, TG_CLONE_FREEING},
      {TG_CLONE_STATS, TG_CLONE_DONE},
      {TG_CLONE_STATS, TG_CLONE_FAILED},
      {TG_CLONE_FREEING, TG_CLONE_DONE},
      {TG_CLONE_FREEING, TG_CLONE_FAILED},
  };
  for (int f = 0; f <= TG_CLONE_STATE_COUNT; f++)
    for (int t = 0; t <= TG_CLONE_STATE_COUNT; t++) {
      bool want = false;
      for (size_t i = 0; i < sizeof(arrows) / sizeof(arrows[0]); i++)
        want |= arrows[i].from == (tg_clone_state_t)f &&
                arrows[i].to == (tg_clone_state_t)t;
      assert_int_equal(tg_clone_read_transition_ok(f, t), want);
    }
  assert_string_equal(tg_clone_state_name(TG_CLONE_READING), "reading");
  assert_string_equal(tg_clone_state_name(TG_CLONE_TRACING), "tracing");
  assert_string_equal(tg_clone_state_name(TG_CLONE_STATE_COUNT), "?");
}

/* --- the way through ---------------------------------------------------------- */

static void a_clone_is_read_until_a_read_brings_nothing(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.stats = true});
  answer(0, "");
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_READING);
  bring(3, 10);
  bring(2, 20);
  assert_int_equal(F.reads, 3);
  bring(0, 0);
  assert_int_equal(W.packets, 5);
  assert_int_equal(W.bytes, 70);
  assert_int_equal(W.progress, 3);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_STATS);

  Perfetto__Protos__TraceStats__BufferStats b0 =
      PERFETTO__PROTOS__TRACE_STATS__BUFFER_STATS__INIT;
  Perfetto__Protos__TraceStats__BufferStats b1 =
      PERFETTO__PROTOS__TRACE_STATS__BUFFER_STATS__INIT;
  b0.chunks_discarded = 1;
  b0.patches_failed = 2;
  b1.abi_violations = 4;
  b1.trace_writer_packet_loss = 8;
  b1.chunks_overwritten = 1000; /* a ring's overwriting is no loss */
  Perfetto__Protos__TraceStats__BufferStats *bs[] = {&b0, &b1};
  Perfetto__Protos__TraceStats ts = PERFETTO__PROTOS__TRACE_STATS__INIT;
  ts.n_buffer_stats = 2;
  ts.buffer_stats = bs;
  F.stats_cb(NULL, F.ctx, 0, "", &ts);
  assert_int_equal(W.stats_calls, 1);
  assert_int_equal(W.stats_status, 0);
  assert_int_equal(W.loss, 15);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_FREEING);
  answer(0, "");
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_DONE);
  assert_int_equal(W.ends, 1);
  assert_int_equal(W.end_status, 0);
  assert_int_equal(tg_clone_read_free_status(&e, NULL), 0);
  tg_clone_state_t want[] = {TG_CLONE_CLONING, TG_CLONE_READING,
                             TG_CLONE_STATS, TG_CLONE_FREEING, TG_CLONE_DONE};
  assert_int_equal(W.n_states, 5);
  assert_memory_equal(W.states, want, sizeof(want));
  assert_int_equal(tg_clone_read_bad_transitions(&e), 0);
}

/* A session of its own (the collector's perf boost): EnableTracing, and
 * once its answer says the session ended, the same read-out as a
 * clone's. */
static void a_session_is_read_out_once_it_ends(void **st) {
  (void)st;
  tg_clone_read_t e;
  tg_clone_read_init(&e, &clk.clock,
                     &(tg_clone_read_opts_t){.stats = true, .ops = &kFakeOps},
                     &kCbs, "test", NULL);
  static const uint8_t cfg[] = {0x08, 0x01};
  assert_int_equal(tg_clone_read_start_session(&e, kConn, cfg, sizeof(cfg)), 0);
  assert_int_equal(F.enables, 1);
  assert_int_equal(F.config_len, sizeof(cfg));
  assert_int_equal(F.clones, 0);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_TRACING);
  answer(0, ""); /* the session's duration is over */
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_READING);
  bring(2, 10);
  bring(0, 0);
  F.stats_cb(NULL, F.ctx, 0, "", &(Perfetto__Protos__TraceStats)
                                       PERFETTO__PROTOS__TRACE_STATS__INIT);
  answer(0, "");
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_DONE);
  assert_int_equal(W.packets, 2);
  assert_int_equal(W.ends, 1);
  assert_int_equal(W.end_status, 0);
  tg_clone_state_t want[] = {TG_CLONE_TRACING, TG_CLONE_READING,
                             TG_CLONE_STATS, TG_CLONE_FREEING, TG_CLONE_DONE};
  assert_int_equal(W.n_states, 5);
  assert_memory_equal(W.states, want, sizeof(want));
  assert_int_equal(tg_clone_read_bad_transitions(&e), 0);
  /* Ops without sessions: refused, the state untouched, nothing counted. */
  static const tg_clone_ops_t kNoEnable = {fake_clone, fake_read, fake_stats,
                                           fake_free, NULL};
  tg_clone_read_t q;
  tg_clone_read_init(&q, &clk.clock,
                     &(tg_clone_read_opts_t){.ops = &kNoEnable}, &kCbs,
                     "test", NULL);
  assert_int_equal(tg_clone_read_start_session(&q, kConn, cfg, sizeof(cfg)),
                   -EOPNOTSUPP);
  assert_int_equal(tg_clone_read_state(&q), TG_CLONE_CONNECTING);
  assert_int_equal(tg_clone_read_bad_transitions(&q), 0);
  /* Once started, neither start is accepted again. */
  assert_int_equal(tg_clone_read_start_session(&e, kConn, cfg, sizeof(cfg)),
                   -EINVAL);
}

/* A refused or failed session ends FAILED in TRACING, nothing read or
 * freed; its silence counts only past run_ms. */
static void a_refused_session_fails_at_tracing(void **st) {
  (void)st;
  tg_clone_read_t e;
  tg_clone_read_init(&e, &clk.clock,
                     &(tg_clone_read_opts_t){.stats = true,
                                             .free_on_error = true,
                                             .timeout_ms = 500,
                                             .run_ms = 2000,
                                             .ops = &kFakeOps},
                     &kCbs, "test", NULL);
  static const uint8_t cfg[] = {0x08, 0x01};
  assert_int_equal(tg_clone_read_start_session(&e, kConn, cfg, sizeof(cfg)), 0);
  tg_clock_sim_advance_ms(&clk, 2499);
  assert_int_equal(tg_clone_read_check(&e).cut, TG_CLONE_CUT_NONE);
  answer(TG_EREMOTE_FAILED, "no producer");
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_FAILED);
  assert_int_equal(tg_clone_read_failed_in(&e), TG_CLONE_TRACING);
  assert_int_equal(W.end_status, TG_EREMOTE_FAILED);
  assert_string_equal(W.end_msg, "no producer");
  assert_int_equal(F.reads + F.frees + F.stats, 0);

  /* Another one, silent past run_ms + timeout_ms: cut in TRACING. */
  tg_clone_read_t q;
  tg_clone_read_init(&q, &clk.clock,
                     &(tg_clone_read_opts_t){.timeout_ms = 500,
                                             .run_ms = 2000,
                                             .ops = &kFakeOps},
                     &kCbs, "test", NULL);
  assert_int_equal(tg_clone_read_start_session(&q, kConn, cfg, sizeof(cfg)), 0);
  tg_clock_sim_advance_ms(&clk, 2500);
  tg_clone_verdict_t v = tg_clone_read_check(&q);
  assert_int_equal(v.cut, TG_CLONE_CUT_SILENT);
  assert_int_equal(v.step, TG_CLONE_TRACING);
}

static void max_reads_ends_the_reads_and_no_stats_skips_them(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.max_reads = 2});
  answer(0, "");
  bring(1, 1);
  bring(1, 1); /* the second and last: it still brought one */
  assert_int_equal(F.reads, 2);
  assert_int_equal(F.stats, 0);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_FREEING);
  answer(0, "");
  assert_int_equal(W.ends, 1);
  assert_int_equal(W.stats_calls, 0);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_DONE);
}

/* --- failures ------------------------------------------------------------------ */

static void a_refused_clone_fails_at_cloning(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.stats = true, .free_on_error = true});
  answer(TG_EREMOTE_FAILED, "no such session");
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_FAILED);
  assert_int_equal(tg_clone_read_failed_in(&e), TG_CLONE_CLONING);
  assert_int_equal(W.ends, 1);
  assert_int_equal(W.end_status, TG_EREMOTE_FAILED);
  assert_string_equal(W.end_msg, "no such session");
  assert_int_equal(F.reads + F.frees, 0);
}

static void a_failed_read_frees_first_when_asked(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.stats = true, .free_on_error = true});
  answer(0, "");
  answer(TG_EPEER_CLOSED, "lost");
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_FREEING);
  assert_int_equal(W.ends, 0);
  answer(0, "");
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_FAILED);
  assert_int_equal(tg_clone_read_failed_in(&e), TG_CLONE_READING);
  assert_int_equal(W.end_status, TG_EPEER_CLOSED);
  assert_int_equal(F.stats, 0);
  assert_int_equal(tg_clone_read_bad_transitions(&e), 0);
}

static void a_failed_read_ends_at_once_without_free_on_error(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.stats = true});
  answer(0, "");
  W.progress_rv = -ENOSPC; /* the caller's file is full */
  bring(1, 1);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_FAILED);
  assert_int_equal(W.end_status, -ENOSPC);
  assert_int_equal(F.frees, 0);
}

static void missing_stats_and_a_failed_free_still_end_done(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.stats = true});
  answer(0, "");
  bring(0, 0);
  F.stats_cb(NULL, F.ctx, TG_EPROTO_DECODE, "garbled", NULL);
  assert_int_equal(W.stats_status, TG_EPROTO_DECODE);
  assert_int_equal(W.loss, 0);
  answer(TG_EREMOTE_FAILED, "cannot free");
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_DONE);
  assert_int_equal(W.end_status, 0);
  const char *why;
  assert_int_equal(tg_clone_read_free_status(&e, &why), TG_EREMOTE_FAILED);
  assert_string_equal(why, "cannot free");
}

static void calls_that_cannot_be_sent_fail_their_step(void **st) {
  (void)st;
  tg_clone_read_t e;
  /* The clone not sent: no callback, still CONNECTING. */
  tg_clone_read_opts_t o = {.stats = true, .ops = &kFakeOps};
  tg_clone_read_init(&e, &clk.clock, &o, &kCbs, "test", NULL);
  F.clone_rv = TG_ENOT_CONNECTED;
  tg_consumer_clone_args_t a = {.session_id = 3};
  assert_int_equal(tg_clone_read_start(&e, kConn, &a), TG_ENOT_CONNECTED);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_CONNECTING);
  assert_int_equal(W.ends + W.n_states, 0);
  /* Stats not sent: loss unknown, then freed; the free not sent: DONE. */
  F.clone_rv = 0;
  assert_int_equal(tg_clone_read_start(&e, kConn, &a), 0);
  answer(0, "");
  F.stats_rv = F.free_rv = TG_ENOT_CONNECTED;
  bring(0, 0);
  assert_int_equal(W.stats_status, TG_ENOT_CONNECTED);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_DONE);
  assert_int_equal(tg_clone_read_free_status(&e, NULL), TG_ENOT_CONNECTED);
}

/* --- refused transitions ------------------------------------------------------ */

static void a_second_start_is_refused_and_counted(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){0});
  answer(0, "");
  tg_consumer_clone_args_t a = {.session_id = 1};
  assert_int_equal(tg_clone_read_start(&e, kConn, &a), -EINVAL);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_READING);
  assert_int_equal(tg_clone_read_bad_transitions(&e), 1);
  assert_int_equal(F.clones, 1);
  bring(0, 0);
  answer(0, "");
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_DONE);
  assert_int_equal(tg_clone_read_start(&e, kConn, &a), -EINVAL);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_DONE);
  assert_int_equal(tg_clone_read_bad_transitions(&e), 2);
}

/* --- time --------------------------------------------------------------------- */

static void a_silent_clone_is_cut_after_timeout_ms(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.stats = true, .timeout_ms = 500});
  tg_clock_sim_advance_ms(&clk, 499);
  assert_int_equal(tg_clone_read_check(&e).cut, TG_CLONE_CUT_NONE);
  tg_clock_sim_advance_ms(&clk, 1);
  tg_clone_verdict_t v = tg_clone_read_check(&e);
  assert_int_equal(v.cut, TG_CLONE_CUT_SILENT);
  assert_int_equal(v.step, TG_CLONE_CLONING);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_FAILED);
  assert_int_equal(W.ends, 0); /* the caller knows */
  answer(0, "");               /* late: ignored */
  assert_int_equal(F.reads, 0);
  assert_int_equal(tg_clone_read_check(&e).cut, TG_CLONE_CUT_NONE);
}

static void an_answer_restarts_the_silence(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.stats = true, .timeout_ms = 500});
  tg_clock_sim_advance_ms(&clk, 400);
  answer(0, "");
  tg_clock_sim_advance_ms(&clk, 400);
  bring(0, 0);
  tg_clock_sim_advance_ms(&clk, 499);
  assert_int_equal(tg_clone_read_check(&e).cut, TG_CLONE_CUT_NONE);
  tg_clock_sim_advance_ms(&clk, 1);
  tg_clone_verdict_t v = tg_clone_read_check(&e);
  assert_int_equal(v.cut, TG_CLONE_CUT_SILENT);
  assert_int_equal(v.step, TG_CLONE_STATS);
  F.stats_cb(NULL, F.ctx, 0, "", NULL); /* late: ignored */
  assert_int_equal(W.stats_calls, 0);
}

static void a_trickling_reader_is_cut_at_the_rate_floor(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.timeout_ms = 1000, .min_rate = 1000});
  answer(0, "");
  /* 10 bytes every 100 ms: never silent, 100 bytes a second. */
  tg_clone_verdict_t v = {0};
  for (int i = 0; i < 30 && v.cut == TG_CLONE_CUT_NONE; i++) {
    tg_clock_sim_advance_ms(&clk, 100);
    F.packet(NULL, F.ctx, (const uint8_t *)"0123456789", 10);
    v = tg_clone_read_check(&e);
  }
  assert_int_equal(v.cut, TG_CLONE_CUT_SLOW);
  assert_int_equal(v.step, TG_CLONE_READING);
  assert_true(v.span_ms >= 1000);
  assert_true(v.bytes < 1000 * (uint64_t)v.span_ms / 1000);
  assert_int_equal(tg_clone_read_state(&e), TG_CLONE_FAILED);
  /* The read in flight goes on no further. */
  assert_true(F.packet(NULL, F.ctx, (const uint8_t *)"x", 1) < 0);
}

static void a_fast_reader_and_no_timeout_are_never_cut(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.timeout_ms = 1000, .min_rate = 1000});
  answer(0, "");
  for (int i = 0; i < 50; i++) {
    tg_clock_sim_advance_ms(&clk, 100);
    F.packet(NULL, F.ctx, (const uint8_t[200]){0}, 200);
    assert_int_equal(tg_clone_read_check(&e).cut, TG_CLONE_CUT_NONE);
  }
  tg_clone_read_t quiet;
  begin(&quiet, (tg_clone_read_opts_t){0});
  tg_clock_sim_advance_ms(&clk, 1000000);
  assert_int_equal(tg_clone_read_check(&quiet).cut, TG_CLONE_CUT_NONE);
  assert_int_equal(tg_clone_read_state(&quiet), TG_CLONE_CLONING);
}

/* --- cancel and the loss ---------------------------------------------------- */

static void a_cancel_ends_done_once_the_clone_is_read(void **st) {
  (void)st;
  tg_clone_read_t e;
  begin(&e, (tg_clone_read_opts_t){.stats = true});
  answer(0, "");
  bring(0, 0);
  assert_int_equal(tg_clone_read_cancel(&e, -ECANCELED, "closing"),
                   TG_CLONE_DONE);
  F.stats_cb(NULL, F.ctx, 0, "", NULL); /* late: ignored */
  assert_int_equal(W.stats_calls + W.ends, 0);

  tg_clone_read_t r;
  begin(&r, (tg_clone_read_opts_t){.stats = true});
  answer(0, "");
  assert_int_equal(tg_clone_read_cancel(&r, -ECANCELED, "closing"),
                   TG_CLONE_FAILED);
  assert_int_equal(tg_clone_read_failed_in(&r), TG_CLONE_READING);
  assert_int_equal(tg_clone_read_cancel(&r, -EIO, "again"), TG_CLONE_FAILED);
  assert_int_equal(tg_clone_read_bad_transitions(&e) +
                       tg_clone_read_bad_transitions(&r),
                   0);
}

static void the_loss_folds_writer_losses_only(void **st) {
  (void)st;
  assert_int_equal(tg_clone_loss_fold(NULL), 0);
  Perfetto__Protos__TraceStats ts = PERFETTO__PROTOS__TRACE_STATS__INIT;
  assert_int_equal(tg_clone_loss_fold(&ts), 0);
  Perfetto__Protos__TraceStats__BufferStats b =
      PERFETTO__PROTOS__TRACE_STATS__BUFFER_STATS__INIT;
  b.chunks_discarded = 5;
  b.bytes_overwritten = 1 << 20;
  b.chunks_overwritten = 7;
  Perfetto__Protos__TraceStats__BufferStats *bs[] = {&b, &b, &b};
  ts.n_buffer_stats = 3;
  ts.buffer_stats = bs;
  assert_int_equal(tg_clone_loss_fold(&ts), 15);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(the_table_is_clone_read_h_s, setup),
      cmocka_unit_test_setup(a_clone_is_read_until_a_read_brings_nothing,
                             setup),
      cmocka_unit_test_setup(a_session_is_read_out_once_it_ends, setup),
      cmocka_unit_test_setup(a_refused_session_fails_at_tracing, setup),
      cmocka_unit_test_setup(max_reads_ends_the_reads_and_no_stats_skips_them,
                             setup),
      cmocka_unit_test_setup(a_refused_clone_fails_at_cloning, setup),
      cmocka_unit_test_setup(a_failed_read_frees_first_when_asked, setup),
      cmocka_unit_test_setup(a_failed_read_ends_at_once_without_free_on_error,
                             setup),
      cmocka_unit_test_setup(missing_stats_and_a_failed_free_still_end_done,
                             setup),
      cmocka_unit_test_setup(calls_that_cannot_be_sent_fail_their_step, setup),
      cmocka_unit_test_setup(a_second_start_is_refused_and_counted, setup),
      cmocka_unit_test_setup(a_silent_clone_is_cut_after_timeout_ms, setup),
      cmocka_unit_test_setup(an_answer_restarts_the_silence, setup),
      cmocka_unit_test_setup(a_trickling_reader_is_cut_at_the_rate_floor,
                             setup),
      cmocka_unit_test_setup(a_fast_reader_and_no_timeout_are_never_cut,
                             setup),
      cmocka_unit_test_setup(a_cancel_ends_done_once_the_clone_is_read, setup),
      cmocka_unit_test_setup(the_loss_folds_writer_losses_only, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
