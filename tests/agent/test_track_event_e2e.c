/* Track events end to end: the agent in this process, a real tracegated in
 * a child, a raw consumer recording the "track_event" data source. The
 * recorded packets are read back the way a trace processor reads them: per
 * sequence, interning tables and track descriptors that an incremental
 * state clear wipes, every reference resolved on its own sequence.
 *
 * The agent is a process singleton: every test starts it and shuts it down;
 * the categories stay registered across tests. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "te_harness.h"
#include "test_service.h"
#include "track_event_reader.h"
#include "tracegate/agent.h"
#include "tracegate/track_event.h"

#define WAIT_MS TE_WAIT_MS

TG_CATEGORY(cat_render, "render");
TG_CATEGORY(cat_audio, "audio");
TG_CATEGORY(cat_a, "a");
TG_CATEGORY(cat_ab, "ab");
TG_CATEGORY(cat_abc, "abc");
TG_CATEGORY(cat_b, "b");

static void register_categories_once(void) {
  static bool done;
  if (done) return;
  static tg_category_t *const cats[] = {&cat_render, &cat_audio, &cat_a,
                                        &cat_ab,     &cat_abc,   &cat_b};
  assert_int_equal(tg_track_event_register(cats, sizeof(cats) / sizeof(*cats)),
                   0);
  done = true;
}

static void start_agent(const test_service_t *ts) {
  register_categories_once();
  te_start_agent(ts, "track-event-e2e");
}

static uint64_t boottime_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_BOOTTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static bool all_enabled(tg_category_t *const *cats, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!tg_category_enabled(cats[i])) return false;
  return true;
}

/* The agent's thread flips the category bits when an instance starts;
 * there is no callback for track_event, so poll (bounded). */
static void wait_enabled(tg_category_t *const *cats, size_t n) {
  for (int i = 0; i < WAIT_MS && !all_enabled(cats, n); i++) te_sleep_ms(1);
  assert_true(all_enabled(cats, n));
}

/* --- recording ------------------------------------------------------------ */

typedef struct te_session {
  raw_consumer_t c;
  simple_cfg_t sc;
  Perfetto__Protos__TrackEventConfig tec;
  Perfetto__Protos__TraceConfig__IncrementalStateConfig isc;
  char *enabled[4], *disabled[4];
  Perfetto__Protos__TracePacket **pk;
  size_t n;
  uint64_t t_begin, t_end; /* CLOCK_BOOTTIME around the recording */
} te_session_t;

/* A track_event session; |enabled| / |disabled| are NULL-terminated pattern
 * lists (NULL: no track_event_config at all); |clear_ms| > 0 asks for
 * periodic incremental state clears. Not movable once begun. */
static void session_config(te_session_t *s, const char *const *enabled,
                           const char *const *disabled, uint32_t clear_ms) {
  memset(s, 0, sizeof(*s));
  simple_cfg_init(&s->sc, 8 * 1024, 2 /* DISCARD */, "track_event");
  if (enabled || disabled) {
    perfetto__protos__track_event_config__init(&s->tec);
    for (size_t i = 0; enabled && enabled[i]; i++)
      s->enabled[s->tec.n_enabled_categories++] = (char *)enabled[i];
    for (size_t i = 0; disabled && disabled[i]; i++)
      s->disabled[s->tec.n_disabled_categories++] = (char *)disabled[i];
    s->tec.enabled_categories = s->enabled;
    s->tec.disabled_categories = s->disabled;
    s->sc.dsc.track_event_config = &s->tec;
  }
  if (clear_ms) {
    perfetto__protos__trace_config__incremental_state_config__init(&s->isc);
    s->isc.has_clear_period_ms = true;
    s->isc.clear_period_ms = clear_ms;
    s->sc.cfg.incremental_state_config = &s->isc;
  }
}

static void session_enable(te_session_t *s, const test_service_t *ts) {
  s->t_begin = boottime_ns();
  assert_int_equal(raw_consumer_connect(&s->c, ts), 0);
  assert_int_equal(raw_consumer_enable(&s->c, &s->sc.cfg, -1), 0);
}

/* A consumer Flush: once answered, the service holds every chunk the agent
 * had committed or could commit. */
static void flush_roundtrip(te_session_t *s) {
  Perfetto__Protos__FlushRequest fr = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  fr.has_timeout_ms = true;
  fr.timeout_ms = 5000;
  int64_t rid = raw_invoke(&s->c.conn, "Flush", &fr.base, -1, false);
  assert_true(rid > 0);
  raw_frame_t f;
  assert_int_equal(raw_wait(&s->c.conn, (uint64_t)rid, WAIT_MS, &f), 1);
  assert_true(f.frame->msg_invoke_method_reply->success);
  tg_ipc_frame_free(f.frame);
}

static void session_end(te_session_t *s) {
  flush_roundtrip(s);
  assert_int_equal(raw_consumer_disable(&s->c, WAIT_MS), 0);
  s->t_end = boottime_ns();
  s->pk = raw_consumer_read(&s->c, &s->n);
  assert_non_null(s->pk);
}

static void session_free(te_session_t *s) {
  free_packets(s->pk, s->n);
  raw_consumer_close(&s->c);
}

/* --- writer threads --------------------------------------------------------
 * Events come from threads that exit afterwards: thread exit releases their
 * writers and commits what they hold. */

typedef struct job {
  void (*fn)(struct job *);
  int32_t tid;
  int arg;
} job_t;

static void *job_main(void *p) {
  job_t *j = p;
  j->tid = (int32_t)syscall(SYS_gettid);
  j->fn(j);
  return NULL;
}

static void run_jobs(job_t *jobs, size_t n) {
  pthread_t th[8];
  assert_true(n <= 8);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(pthread_create(&th[i], NULL, job_main, &jobs[i]), 0);
  for (size_t i = 0; i < n; i++) pthread_join(th[i], NULL);
}

/* Reads |s|'s recording. The agent's clock is the TSC calibrated against
 * CLOCK_BOOTTIME: allow a little slack around the window the test saw. */
static void decode(const te_session_t *s, trace_t *t) {
  te_decode(s->pk, s->n, s->t_begin - 2000000000ull, s->t_end + 2000000000ull,
            t);
}

/* --- (1) slices from two threads ----------------------------------------- */

#define SLICE_ROUNDS 50

static void render_slices(job_t *j) {
  (void)j;
  for (int i = 0; i < SLICE_ROUNDS; i++) {
    TG_SLICE_BEGIN(cat_render, "frame", TG_ARG_INT("n", i));
    TG_SLICE_BEGIN(cat_render, "draw");
    TG_SLICE_END(cat_render);
    TG_SLICE_END(cat_render);
  }
}

static void audio_slices(job_t *j) {
  (void)j;
  for (int i = 0; i < SLICE_ROUNDS; i++) {
    TG_SLICE_BEGIN(cat_audio, "mix");
    TG_SLICE_END(cat_audio);
  }
}

/* Checks one thread's sequence: only its own names, balanced nesting. */
static void check_thread_slices(const trace_t *t, int32_t tid, const char *cat,
                                const char *const *names, size_t n_names,
                                size_t expect_begins) {
  const seq_state_t *sq = te_seq_of_tid(t, tid);
  const event_t *ev[1024];
  size_t n = te_events_of(t, sq->id, ev, 1024);
  int depth = 0;
  size_t begins = 0;
  for (size_t i = 0; i < n; i++) {
    const event_t *e = ev[i];
    assert_int_equal(e->track_kind, TRACK_THREAD);
    assert_int_equal(e->tid, tid);
    assert_string_equal(e->cat, cat);
    if (e->type == TG_TE_SLICE_BEGIN) {
      /* Nesting order: names[depth] opens at depth |depth|. */
      assert_true((size_t)depth < n_names);
      assert_string_equal(e->name, names[depth]);
      depth++;
      begins++;
    } else {
      assert_int_equal(e->type, TG_TE_SLICE_END);
      depth--;
      assert_true(depth >= 0);
    }
  }
  assert_int_equal(depth, 0);
  assert_int_equal(begins, expect_begins);
}

static void slices_from_two_threads_resolve_on_their_own_sequences(
    void **state) {
  test_service_t *ts = *state;
  start_agent(ts);
  te_session_t s;
  /* Perfetto's idiom for "just these categories". */
  const char *const en[] = {"render", "audio", NULL};
  const char *const all[] = {"*", NULL};
  session_config(&s, en, all, 0);
  session_enable(&s, ts);
  tg_category_t *const want[] = {&cat_render, &cat_audio};
  wait_enabled(want, 2);

  job_t jobs[2] = {{.fn = render_slices}, {.fn = audio_slices}};
  run_jobs(jobs, 2);
  session_end(&s);

  trace_t t;
  decode(&s, &t);
  assert_int_equal(t.n_ev, SLICE_ROUNDS * 4 + SLICE_ROUNDS * 2);
  const char *const render_names[] = {"frame", "draw"};
  const char *const audio_names[] = {"mix"};
  check_thread_slices(&t, jobs[0].tid, "render", render_names, 2,
                      SLICE_ROUNDS * 2);
  check_thread_slices(&t, jobs[1].tid, "audio", audio_names, 1, SLICE_ROUNDS);
  assert_int_not_equal(te_seq_of_tid(&t, jobs[0].tid)->id,
                       te_seq_of_tid(&t, jobs[1].tid)->id);
  /* The frame counter rides along as an interned-name annotation. */
  int next = 0;
  for (size_t i = 0; i < t.n_ev; i++) {
    const event_t *e = &t.ev[i];
    if (!e->name || strcmp(e->name, "frame") != 0) continue;
    assert_int_equal(e->n_args, 1);
    assert_string_equal(e->args[0].name, "n");
    assert_int_equal(e->args[0].type, TG_ARG_TYPE_INT);
    assert_int_equal(e->args[0].i, next++);
  }
  assert_int_equal(next, SLICE_ROUNDS);
  te_trace_free(&t);
  session_free(&s);
  tg_agent_shutdown();
}

/* --- (2) scoped slices, instants, annotations ----------------------------- */

static void scoped_and_instants(job_t *j) {
  (void)j;
  {
    TG_SCOPED_SLICE(cat_render, "scope", TG_ARG_STR("where", "outer"));
    TG_INSTANT(cat_render, "inside", TG_ARG_INT("i", -42),
               TG_ARG_UINT("u", UINT64_MAX), TG_ARG_DOUBLE("d", 2.5),
               TG_ARG_BOOL("b", true), TG_ARG_STR("s", "hello"));
  }
  TG_INSTANT(cat_render, "after");
}

static void scoped_slice_instants_and_every_annotation_type(void **state) {
  test_service_t *ts = *state;
  start_agent(ts);
  te_session_t s;
  session_config(&s, NULL, NULL, 0);
  session_enable(&s, ts);
  tg_category_t *const want[] = {&cat_render};
  wait_enabled(want, 1);
  job_t j = {.fn = scoped_and_instants};
  run_jobs(&j, 1);
  session_end(&s);

  trace_t t;
  decode(&s, &t);
  const event_t *ev[8];
  size_t n = te_events_of(&t, te_seq_of_tid(&t, j.tid)->id, ev, 8);
  assert_int_equal(n, 4);
  assert_int_equal(ev[0]->type, TG_TE_SLICE_BEGIN);
  assert_string_equal(ev[0]->name, "scope");
  assert_int_equal(ev[0]->n_args, 1);
  assert_string_equal(ev[0]->args[0].name, "where");
  assert_int_equal(ev[0]->args[0].type, TG_ARG_TYPE_STRING);
  assert_string_equal(ev[0]->args[0].s, "outer");

  const event_t *in = ev[1];
  assert_int_equal(in->type, TG_TE_INSTANT);
  assert_string_equal(in->name, "inside");
  assert_int_equal(in->n_args, 5);
  assert_string_equal(in->args[0].name, "i");
  assert_int_equal(in->args[0].type, TG_ARG_TYPE_INT);
  assert_true(in->args[0].i == -42);
  assert_string_equal(in->args[1].name, "u");
  assert_int_equal(in->args[1].type, TG_ARG_TYPE_UINT);
  assert_true(in->args[1].u == UINT64_MAX);
  assert_string_equal(in->args[2].name, "d");
  assert_int_equal(in->args[2].type, TG_ARG_TYPE_DOUBLE);
  assert_true(in->args[2].d == 2.5);
  assert_string_equal(in->args[3].name, "b");
  assert_int_equal(in->args[3].type, TG_ARG_TYPE_BOOL);
  assert_true(in->args[3].b);
  assert_string_equal(in->args[4].name, "s");
  assert_int_equal(in->args[4].type, TG_ARG_TYPE_STRING);
  assert_string_equal(in->args[4].s, "hello");

  /* The scope closed before "after". */
  assert_int_equal(ev[2]->type, TG_TE_SLICE_END);
  assert_int_equal(ev[3]->type, TG_TE_INSTANT);
  assert_string_equal(ev[3]->name, "after");
  assert_int_equal(ev[3]->n_args, 0);
  assert_true(ev[0]->ts <= ev[1]->ts && ev[1]->ts <= ev[2]->ts &&
              ev[2]->ts <= ev[3]->ts);
  te_trace_free(&t);
  session_free(&s);
  tg_agent_shutdown();
}

/* --- (3) counters ----------------------------------------------------------
 */

static void counter_values(job_t *j) {
  (void)j;
  for (int v = 0; v < 10; v++) {
    TG_COUNTER(cat_render, "queue_depth", v * 3);
    TG_COUNTER(cat_render, "in_flight", -v);
  }
}

static void counter_values_follow_their_track_descriptor(void **state) {
  test_service_t *ts = *state;
  start_agent(ts);
  te_session_t s;
  session_config(&s, NULL, NULL, 0);
  session_enable(&s, ts);
  tg_category_t *const want[] = {&cat_render};
  wait_enabled(want, 1);
  job_t j = {.fn = counter_values};
  run_jobs(&j, 1);
  session_end(&s);

  /* decode() already fails a counter whose track has no descriptor earlier
   * on its sequence; here: names, kinds and values in order. */
  trace_t t;
  decode(&s, &t);
  const event_t *ev[32];
  size_t n = te_events_of(&t, te_seq_of_tid(&t, j.tid)->id, ev, 32);
  assert_int_equal(n, 20);
  for (size_t i = 0; i < n; i++) {
    const event_t *e = ev[i];
    int v = (int)(i / 2);
    assert_int_equal(e->type, TG_TE_COUNTER);
    assert_int_equal(e->track_kind, TRACK_COUNTER);
    assert_string_equal(e->cat, "render");
    if (i % 2 == 0) {
      assert_string_equal(e->counter_name, "queue_depth");
      assert_int_equal(e->counter_value, v * 3);
    } else {
      assert_string_equal(e->counter_name, "in_flight");
      assert_true(e->counter_value == -v);
    }
  }
  te_trace_free(&t);
  session_free(&s);
  tg_agent_shutdown();
}

/* --- (4) category filtering ------------------------------------------------
 */

static void one_instant_per_category(job_t *j) {
  (void)j;
  TG_INSTANT(cat_a, "in_a");
  TG_INSTANT(cat_ab, "in_ab");
  TG_INSTANT(cat_abc, "in_abc");
  TG_INSTANT(cat_b, "in_b");
}

/* enabled ["a*"], disabled ["ab"]: "abc" and "a" through the glob, "ab"
 * named exactly as disabled, and "b", which no pattern matches, on by
 * default, as Perfetto's TrackEventConfig rules say. */
static void glob_enables_and_exact_disable_wins_over_it(void **state) {
  test_service_t *ts = *state;
  start_agent(ts);
  te_session_t s;
  const char *const en[] = {"a*", NULL};
  const char *const dis[] = {"ab", NULL};
  session_config(&s, en, dis, 0);
  session_enable(&s, ts);
  tg_category_t *const want[] = {&cat_abc, &cat_a, &cat_b};
  wait_enabled(want, 3);
  assert_false(tg_category_enabled(&cat_ab));
  job_t j = {.fn = one_instant_per_category};
  run_jobs(&j, 1);
  session_end(&s);

  trace_t t;
  decode(&s, &t);
  assert_int_equal(te_count_in_cat(&t, "abc"), 1);
  assert_int_equal(te_count_in_cat(&t, "a"), 1);
  assert_int_equal(te_count_in_cat(&t, "ab"), 0);
  assert_int_equal(te_count_in_cat(&t, "b"), 1);
  assert_int_equal(t.n_ev, 3);
  te_trace_free(&t);
  session_free(&s);
  tg_agent_shutdown();
}

static void no_track_event_config_enables_every_category(void **state) {
  test_service_t *ts = *state;
  start_agent(ts);
  te_session_t s;
  session_config(&s, NULL, NULL, 0);
  session_enable(&s, ts);
  tg_category_t *const want[] = {&cat_a, &cat_ab,     &cat_abc,
                                 &cat_b, &cat_render, &cat_audio};
  wait_enabled(want, 6);
  job_t j = {.fn = one_instant_per_category};
  run_jobs(&j, 1);
  session_end(&s);

  trace_t t;
  decode(&s, &t);
  assert_int_equal(t.n_ev, 4);
  assert_int_equal(te_count_in_cat(&t, "a"), 1);
  assert_int_equal(te_count_in_cat(&t, "ab"), 1);
  assert_int_equal(te_count_in_cat(&t, "abc"), 1);
  assert_int_equal(te_count_in_cat(&t, "b"), 1);
  te_trace_free(&t);
  session_free(&s);
  tg_agent_shutdown();
}

static int g_evaluated;
static int evaluate(void) { return ++g_evaluated; }

static void disabled_category_costs_nothing_without_a_session(void **state) {
  test_service_t *ts = *state;
  start_agent(ts);
  tg_category_t *const all[] = {&cat_a, &cat_ab,     &cat_abc,
                                &cat_b, &cat_render, &cat_audio};
  for (size_t i = 0; i < 6; i++) assert_false(tg_category_enabled(all[i]));
  tg_agent_stats_t before, after;
  tg_agent_get_stats(&before);
  g_evaluated = 0;
  for (int i = 0; i < 100000; i++) {
    TG_INSTANT(cat_b, "never", TG_ARG_INT("n", evaluate()));
    TG_COUNTER(cat_b, "never_counter", evaluate());
    TG_SLICE_BEGIN(cat_b, "never_slice", TG_ARG_STR("s", "x"));
    TG_SLICE_END(cat_b);
  }
  /* The arguments were never evaluated and nothing was written. */
  assert_int_equal(g_evaluated, 0);
  tg_agent_get_stats(&after);
  assert_true(after.packets_written == before.packets_written);
  assert_true(after.packets_dropped == before.packets_dropped);
  tg_agent_shutdown();
}

/* --- (5) incremental state clears ------------------------------------------
 */

static void ticks_for_half_a_second(job_t *j) {
  uint64_t start = tg_track_event_now();
  int i = 0;
  /* ~500 ms of events, and at most 2000 rounds whatever the clock does. */
  for (; i < 2000 && tg_track_event_now() - start < 500000000ull; i++) {
    TG_SLICE_BEGIN(cat_render, "tick", TG_ARG_INT("k", i));
    TG_INSTANT(cat_audio, "beat");
    TG_COUNTER(cat_render, "ticks", i);
    TG_SLICE_END(cat_render);
    te_sleep_ms(2);
  }
  j->arg = i;
}

static void incremental_clears_reemit_descriptors_and_interned_names(
    void **state) {
  test_service_t *ts = *state;
  start_agent(ts);
  te_session_t s;
  session_config(&s, NULL, NULL, 100);
  session_enable(&s, ts);
  tg_category_t *const want[] = {&cat_render, &cat_audio};
  wait_enabled(want, 2);
  job_t j = {.fn = ticks_for_half_a_second};
  run_jobs(&j, 1);
  session_end(&s);

  /* decode() resets the interning tables and descriptors at each clear and
   * fails any name, category or track that was not sent again after it. */
  trace_t t;
  decode(&s, &t);
  const seq_state_t *sq = te_seq_of_tid(&t, j.tid);
  /* The sequence's start, then at least two periodic clears. */
  if (sq->clears < 3)
    fail_msg(
        "%u SEQ_INCREMENTAL_STATE_CLEARED in ~500 ms at a 100 ms clear "
        "period (%d rounds)",
        sq->clears, j.arg);
  /* A thread descriptor after every clear. */
  assert_int_equal(sq->thread_descriptors, sq->clears);
  const event_t **ev = calloc(t.n_ev, sizeof(*ev));
  assert_non_null(ev);
  size_t n = te_events_of(&t, sq->id, ev, t.n_ev);
  assert_int_equal(n, (size_t)j.arg * 4);
  unsigned last_clear = 0, clears_with_events = 0;
  for (size_t i = 0; i < n; i++) {
    if (i % 4 == 0) {
      int k = (int)(i / 4);
      assert_string_equal(ev[i]->name, "tick");
      assert_string_equal(ev[i]->args[0].name, "k");
      assert_int_equal(ev[i]->args[0].i, k);
      assert_string_equal(ev[i + 1]->name, "beat");
      assert_string_equal(ev[i + 1]->cat, "audio");
      assert_string_equal(ev[i + 2]->counter_name, "ticks");
      assert_int_equal(ev[i + 2]->counter_value, k);
      assert_int_equal(ev[i + 3]->type, TG_TE_SLICE_END);
    }
    if (ev[i]->clear_no != last_clear) {
      assert_true(ev[i]->clear_no > last_clear);
      last_clear = ev[i]->clear_no;
      clears_with_events++;
    }
  }
  /* Events were written (and resolved) after every clear. */
  assert_int_equal(clears_with_events, sq->clears);
  free(ev);
  te_trace_free(&t);
  session_free(&s);
  tg_agent_shutdown();
}

/* --- (6) two sessions at once ----------------------------------------------
 */

static void render_audio_and_b(job_t *j) {
  (void)j;
  for (int i = 0; i < 10; i++) {
    TG_INSTANT(cat_render, "r", TG_ARG_INT("i", i));
    TG_INSTANT(cat_audio, "au", TG_ARG_INT("i", i));
    TG_INSTANT(cat_b, "bee");
  }
}

static void two_sessions_each_get_only_their_categories(void **state) {
  test_service_t *ts = *state;
  start_agent(ts);
  te_session_t s1, s2;
  const char *const en1[] = {"render", NULL};
  const char *const en2[] = {"audio", NULL};
  const char *const all[] = {"*", NULL};
  session_config(&s1, en1, all, 0);
  session_config(&s2, en2, all, 0);
  session_enable(&s1, ts);
  session_enable(&s2, ts);
  tg_category_t *const want[] = {&cat_render, &cat_audio};
  wait_enabled(want, 2);
  assert_false(tg_category_enabled(&cat_b));
  job_t j = {.fn = render_audio_and_b};
  run_jobs(&j, 1);
  session_end(&s1);
  session_end(&s2);

  trace_t t1, t2;
  decode(&s1, &t1);
  decode(&s2, &t2);
  assert_int_equal(t1.n_ev, 10);
  assert_int_equal(te_count_in_cat(&t1, "render"), 10);
  assert_int_equal(t2.n_ev, 10);
  assert_int_equal(te_count_in_cat(&t2, "audio"), 10);
  /* Each session's sequence is self-contained: its own descriptors and
   * interned names (decode() resolved them per session). */
  assert_int_equal(te_seq_of_tid(&t1, j.tid)->thread_descriptors, 1);
  assert_int_equal(te_seq_of_tid(&t2, j.tid)->thread_descriptors, 1);
  for (size_t i = 0; i < 10; i++) {
    assert_string_equal(t1.ev[i].name, "r");
    assert_int_equal(t1.ev[i].args[0].i, (int64_t)i);
    assert_string_equal(t2.ev[i].name, "au");
    assert_int_equal(t2.ev[i].args[0].i, (int64_t)i);
  }
  te_trace_free(&t1);
  te_trace_free(&t2);
  session_free(&s1);
  session_free(&s2);
  tg_agent_shutdown();
}

/* --- (9) incremental timestamps place events as BOOTTIME does ------------ */

#define CLOCK_ROUNDS 200

static void frames_and_counters(job_t *j) {
  (void)j;
  for (int i = 0; i < CLOCK_ROUNDS; i++) {
    TG_SLICE_BEGIN(cat_render, "frame", TG_ARG_INT("n", i));
    TG_SLICE_BEGIN(cat_render, "draw");
    TG_SLICE_END(cat_render);
    TG_COUNTER(cat_render, "queued", i % 7);
    TG_SLICE_END(cat_render);
    if (i % 4 == 0) te_sleep_ms(1); /* deltas of every size, clears between */
  }
}

/* Writes |s|'s packets as a trace file (Trace.packet, field 1). */
static void write_trace_file(const te_session_t *s, const char *path) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  for (size_t i = 0; i < s->n; i++) {
    size_t len = perfetto__protos__trace_packet__get_packed_size(s->pk[i]);
    uint8_t *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    perfetto__protos__trace_packet__pack(s->pk[i], buf);
    uint8_t hdr[11];
    size_t h = 0;
    hdr[h++] = 0x0A; /* field 1, length-delimited */
    for (size_t v = len; ; v >>= 7) {
      hdr[h++] = (uint8_t)((v & 0x7F) | (v >= 0x80 ? 0x80 : 0));
      if (v < 0x80) break;
    }
    assert_int_equal(fwrite(hdr, 1, h, f), h);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    free(buf);
  }
  assert_int_equal(fclose(f), 0);
}

/* With PERFETTO_BIN: Perfetto's trace processor imports both recordings
 * and finds the same slices and counter values at the same times. */
static void compare_in_trace_processor(const te_session_t *inc,
                                       const te_session_t *abs) {
  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) {
    fprintf(stderr, "PERFETTO_BIN not set: trace_processor comparison "
                    "skipped\n");
    return;
  }
  char dir[] = "/tmp/te_clock_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char inc_path[64], abs_path[64];
  snprintf(inc_path, sizeof(inc_path), "%s/inc.pftrace", dir);
  snprintf(abs_path, sizeof(abs_path), "%s/abs.pftrace", dir);
  write_trace_file(inc, inc_path);
  write_trace_file(abs, abs_path);
  static const char sql[] =
      "select s.ts, s.dur, s.depth, s.name from slice s "
      "union all select c.ts, cast(c.value as int), -1, t.name "
      "from counter c join counter_track t on c.track_id = t.id "
      "order by 1, 3, 4;\n";
  static char a[1 << 20], b[1 << 20];
  te_tp_query(bin, dir, sql, inc_path, a, sizeof(a));
  te_tp_query(bin, dir, sql, abs_path, b, sizeof(b));
  /* Header and one row per begin (slices) or value (counters). */
  size_t rows = 0;
  for (const char *c = a; *c; c++) rows += *c == '\n';
  assert_int_equal(rows, 1 + CLOCK_ROUNDS * 3);
  assert_string_equal(a, b);
  unlink(inc_path);
  unlink(abs_path);
  rmdir(dir);
}

/* One thread's events go to two sessions at once, read from the clock
 * once: one with the incremental clock (the default), one with
 * disable_incremental_timestamps (absolute BOOTTIME). Resolved as a trace
 * processor does, every event lands at the same nanosecond in both
 * (tolerance 0), across incremental state clears that restart the clock
 * with a new snapshot. */
static void incremental_timestamps_place_events_as_boottime(void **state) {
  test_service_t *ts = *state;
  start_agent(ts);
  te_session_t inc, abs;
  const char *const en[] = {"render", NULL};
  const char *const all[] = {"*", NULL};
  session_config(&inc, en, all, 20);
  session_config(&abs, en, all, 0);
  abs.tec.has_disable_incremental_timestamps = true;
  abs.tec.disable_incremental_timestamps = true;
  session_enable(&inc, ts);
  session_enable(&abs, ts);
  /* Both instances on, not just one: every event must reach both. */
  for (int i = 0; i < WAIT_MS &&
                  __builtin_popcount(atomic_load(&cat_render.enabled)) < 2;
       i++)
    te_sleep_ms(1);
  assert_int_equal(__builtin_popcount(atomic_load(&cat_render.enabled)), 2);
  job_t j = {.fn = frames_and_counters};
  run_jobs(&j, 1);
  session_end(&inc);
  session_end(&abs);

  trace_t ti, ta;
  decode(&inc, &ti);
  decode(&abs, &ta);
  assert_int_equal(ti.n_ev, CLOCK_ROUNDS * 5);
  assert_int_equal(ta.n_ev, ti.n_ev);
  const seq_state_t *si = te_seq_of_tid(&ti, j.tid);
  const seq_state_t *sa = te_seq_of_tid(&ta, j.tid);
  assert_int_equal(si->default_clock, 64); /* deltas on the incremental clock */
  assert_true(si->seq_clock_incremental);
  assert_int_equal(sa->default_clock, 0); /* absolute BOOTTIME */
  assert_int_equal(sa->seq_clock, 0);
  for (size_t i = 0; i < ti.n_ev; i++) {
    const event_t *a = &ti.ev[i], *b = &ta.ev[i];
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->ts, b->ts);
    if (a->name || b->name) assert_string_equal(a->name, b->name);
    assert_int_equal(a->counter_value, b->counter_value);
  }
  compare_in_trace_processor(&inc, &abs);
  te_trace_free(&ti);
  te_trace_free(&ta);
  session_free(&inc);
  session_free(&abs);
  tg_agent_shutdown();
}

int main(void) {
#define T(fn) \
  cmocka_unit_test_setup_teardown(fn, test_service_setup, te_teardown)
  const struct CMUnitTest tests[] = {
      T(slices_from_two_threads_resolve_on_their_own_sequences),
      T(scoped_slice_instants_and_every_annotation_type),
      T(counter_values_follow_their_track_descriptor),
      T(glob_enables_and_exact_disable_wins_over_it),
      T(no_track_event_config_enables_every_category),
      T(disabled_category_costs_nothing_without_a_session),
      T(incremental_clears_reemit_descriptors_and_interned_names),
      T(two_sessions_each_get_only_their_categories),
      T(incremental_timestamps_place_events_as_boottime),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
