/* The recording's state machines (consumer/recording.h): the lifecycle's
 * and the binding's tables as the header writes them out, the reader's
 * sub-states' as recording_internal.h does, and
 * a transition none has is refused, counted and logged as an error,
 * the state left as it was. No service: a recording that never starts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "common/log.h"
#include "consumer/recording_internal.h"

#define N_STATES (TG_REC_FAILED + 1)

static void the_lifecycle_table_is_recording_h_s(void **st) {
  (void)st;
  /* The way through, enabling and attaching. */
  assert_true(tg_rec_transition_ok(TG_REC_IDLE, TG_REC_STARTING));
  assert_true(tg_rec_transition_ok(TG_REC_IDLE, TG_REC_ATTACHING));
  assert_true(tg_rec_transition_ok(TG_REC_ATTACHING, TG_REC_STARTING));
  assert_true(tg_rec_transition_ok(TG_REC_STARTING, TG_REC_TRACING));
  assert_true(tg_rec_transition_ok(TG_REC_STARTING, TG_REC_DETACHED));
  assert_true(tg_rec_transition_ok(TG_REC_TRACING, TG_REC_STOPPING));
  assert_true(tg_rec_transition_ok(TG_REC_TRACING, TG_REC_DRAINING));
  assert_true(tg_rec_transition_ok(TG_REC_STOPPING, TG_REC_DRAINING));
  assert_true(tg_rec_transition_ok(TG_REC_DRAINING, TG_REC_STATS));
  assert_true(tg_rec_transition_ok(TG_REC_STATS, TG_REC_DONE));
  /* A whole trace frees its session (FREEING) before DONE. */
  assert_true(tg_rec_transition_ok(TG_REC_STATS, TG_REC_FREEING));
  assert_true(tg_rec_transition_ok(TG_REC_FREEING, TG_REC_DONE));
  assert_false(tg_rec_transition_ok(TG_REC_FREEING, TG_REC_TRACING));
  assert_false(tg_rec_transition_ok(TG_REC_DRAINING, TG_REC_FREEING));
  assert_true(tg_rec_transition_ok(TG_REC_FAILING, TG_REC_FAILED));
  /* Ending a session that may still run goes through FAILING. */
  assert_true(tg_rec_transition_ok(TG_REC_STARTING, TG_REC_FAILING));
  assert_true(tg_rec_transition_ok(TG_REC_TRACING, TG_REC_FAILING));
  assert_true(tg_rec_transition_ok(TG_REC_STOPPING, TG_REC_FAILING));
  assert_false(tg_rec_transition_ok(TG_REC_IDLE, TG_REC_FAILING));
  assert_false(tg_rec_transition_ok(TG_REC_DRAINING, TG_REC_FAILING));
  /* No going back, no skipping the end's reads. */
  assert_false(tg_rec_transition_ok(TG_REC_IDLE, TG_REC_TRACING));
  assert_false(tg_rec_transition_ok(TG_REC_STOPPING, TG_REC_TRACING));
  assert_false(tg_rec_transition_ok(TG_REC_TRACING, TG_REC_DONE));
  assert_false(tg_rec_transition_ok(TG_REC_DRAINING, TG_REC_TRACING));
  assert_false(tg_rec_transition_ok(TG_REC_ATTACHING, TG_REC_DETACHED));
  assert_false(tg_rec_transition_ok(TG_REC_FAILING, TG_REC_DONE));
  assert_false(tg_rec_transition_ok(TG_REC_FAILING, TG_REC_DETACHED));
  /* Every state but the final ones may fail; the final ones are final. */
  for (int s = 0; s < N_STATES; s++) {
    bool final = s == TG_REC_DONE || s == TG_REC_DETACHED || s == TG_REC_FAILED;
    assert_int_equal(tg_rec_transition_ok((tg_rec_state_t)s, TG_REC_FAILED),
                     !final);
    for (int to = 0; final && to < N_STATES; to++)
      assert_false(tg_rec_transition_ok((tg_rec_state_t)s, (tg_rec_state_t)to));
  }
  assert_false(tg_rec_transition_ok((tg_rec_state_t)99, TG_REC_FAILED));
  assert_false(tg_rec_transition_ok(TG_REC_IDLE, (tg_rec_state_t)99));
}

static void the_binding_table_is_recording_h_s(void **st) {
  (void)st;
  assert_true(tg_rec_binding_ok(TG_REC_BOUND, TG_REC_UNBOUND));
  assert_true(tg_rec_binding_ok(TG_REC_BOUND, TG_REC_SYNCING));
  assert_true(tg_rec_binding_ok(TG_REC_UNBOUND, TG_REC_REATTACHING));
  assert_true(tg_rec_binding_ok(TG_REC_REATTACHING, TG_REC_RESUMING));
  assert_true(tg_rec_binding_ok(TG_REC_REATTACHING, TG_REC_BOUND));
  assert_true(tg_rec_binding_ok(TG_REC_RESUMING, TG_REC_RESUMING_CUT));
  assert_true(tg_rec_binding_ok(TG_REC_RESUMING_CUT, TG_REC_RESUMING));
  assert_true(tg_rec_binding_ok(TG_REC_RESUMING, TG_REC_BOUND));
  assert_true(tg_rec_binding_ok(TG_REC_SYNCING, TG_REC_BOUND));
  /* Every state that holds a connection can lose it. */
  for (int b = TG_REC_BOUND; b <= TG_REC_SYNCING; b++)
    assert_int_equal(tg_rec_binding_ok((tg_rec_binding_t)b, TG_REC_UNBOUND),
                     b != TG_REC_UNBOUND);
  /* Back only through a re-attach; a resume only after one. */
  assert_false(tg_rec_binding_ok(TG_REC_UNBOUND, TG_REC_BOUND));
  assert_false(tg_rec_binding_ok(TG_REC_UNBOUND, TG_REC_RESUMING));
  assert_false(tg_rec_binding_ok(TG_REC_BOUND, TG_REC_RESUMING));
  assert_false(tg_rec_binding_ok(TG_REC_SYNCING, TG_REC_RESUMING_CUT));
  assert_false(tg_rec_binding_ok(TG_REC_BOUND, (tg_rec_binding_t)99));
}

/* --- a refused transition ------------------------------------------------- */

typedef struct seen {
  unsigned errors;  /* error lines logged */
  unsigned changes; /* on_state calls */
} seen_t;

static void sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)line;
  seen_t *s = ctx;
  if (level == TG_LOG_ERROR) s->errors++;
}

static void on_state(tg_recording_t *r, tg_rec_state_t from,
                     tg_rec_state_t to) {
  (void)from;
  (void)to;
  ((seen_t *)tg_recording_data(r))->changes++;
}

static void on_end(tg_recording_t *r, int status, const char *reason) {
  (void)r;
  (void)status;
  (void)reason;
}

static const tg_recording_cbs_t cbs = {.on_state = on_state, .on_end = on_end};

/* A recording that never starts, its errors and changes told to |seen|. */
static tg_recording_t *open_recording(uv_loop_t *loop, seen_t *seen) {
  assert_int_equal(uv_loop_init(loop), 0);
  tg_recording_t *r = tg_recording_new(loop, &tg_clock_monotonic, &cbs, seen);
  assert_non_null(r);
  tg_log_set_sink(sink, seen);
  return r;
}

static void close_recording(uv_loop_t *loop, tg_recording_t *r) {
  tg_log_set_sink(NULL, NULL);
  tg_recording_free(r);
  assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(loop), 0);
}

static void an_illegal_transition_is_refused_counted_and_logged(void **st) {
  (void)st;
  uv_loop_t loop;
  seen_t seen = {0};
  tg_recording_t *r = open_recording(&loop, &seen);

  tg__rec_set_state(r, TG_REC_DONE); /* IDLE has no arrow to DONE */
  assert_int_equal(tg_recording_state(r), TG_REC_IDLE);
  assert_int_equal(tg_recording_bad_transitions(r), 1);
  assert_int_equal(seen.errors, 1);
  assert_int_equal(seen.changes, 0);

  tg__rec_set_binding(r, TG_REC_RESUMING); /* BOUND has none to RESUMING */
  assert_int_equal(tg_recording_binding(r), TG_REC_BOUND);
  assert_int_equal(tg_recording_bad_transitions(r), 2);
  assert_int_equal(seen.errors, 2);

  /* A legal one is made and told, and counts nothing. */
  tg__rec_set_state(r, TG_REC_ATTACHING);
  assert_int_equal(tg_recording_state(r), TG_REC_ATTACHING);
  assert_int_equal(seen.changes, 1);
  assert_int_equal(tg_recording_bad_transitions(r), 2);
  assert_int_equal(seen.errors, 2);

  close_recording(&loop, r);
}

/* The reader's sub-states and the stop's latch: recording_internal.h's
 * arrows, and no other. */
static void the_reader_tables_are_recording_internal_h_s(void **st) {
  (void)st;
  static const struct { int from, to; } read[] = {
      {TG__READ_IDLE, TG__READ_BUSY},     {TG__READ_IDLE, TG__READ_HELD},
      {TG__READ_BUSY, TG__READ_IDLE},     {TG__READ_HELD, TG__READ_HELD_DUE},
      {TG__READ_HELD, TG__READ_IDLE},     {TG__READ_HELD_DUE, TG__READ_IDLE},
  };
  for (int f = 0; f <= TG__READ_HELD_DUE; f++)
    for (int t = 0; t <= TG__READ_HELD_DUE; t++) {
      bool want = false;
      for (size_t i = 0; i < sizeof(read) / sizeof(read[0]); i++)
        want |= read[i].from == f && read[i].to == t;
      assert_int_equal(tg__rec_read_ok(f, t), want);
    }
  static const struct { int from, to; } stats[] = {
      {TG__STATS_IDLE, TG__STATS_AFTER_READ}, {TG__STATS_IDLE, TG__STATS_ASKED},
      {TG__STATS_AFTER_READ, TG__STATS_ASKED},
      {TG__STATS_AFTER_READ, TG__STATS_IDLE}, {TG__STATS_ASKED, TG__STATS_IDLE},
  };
  for (int f = 0; f <= TG__STATS_ASKED; f++)
    for (int t = 0; t <= TG__STATS_ASKED; t++) {
      bool want = false;
      for (size_t i = 0; i < sizeof(stats) / sizeof(stats[0]); i++)
        want |= stats[i].from == f && stats[i].to == t;
      assert_int_equal(tg__rec_stats_ok(f, t), want);
    }
  for (int f = 0; f <= TG__CUT_OPEN_NO_BASE; f++)
    for (int t = 0; t <= TG__CUT_OPEN_NO_BASE; t++)
      assert_int_equal(tg__rec_cut_ok(f, t),
                       (f == TG__CUT_NONE) != (t == TG__CUT_NONE));
  assert_true(tg__rec_stop_ok(TG__REC_STOP_NONE, TG__REC_STOP_WANTED));
  assert_true(tg__rec_stop_ok(TG__REC_STOP_NONE, TG__REC_STOP_DEADLINE));
  assert_true(tg__rec_stop_ok(TG__REC_STOP_WANTED, TG__REC_STOP_DEADLINE));
  assert_false(tg__rec_stop_ok(TG__REC_STOP_DEADLINE, TG__REC_STOP_WANTED));
  assert_false(tg__rec_stop_ok(TG__REC_STOP_WANTED, TG__REC_STOP_NONE));
  assert_false(tg__rec_stop_ok(TG__REC_STOP_DEADLINE, TG__REC_STOP_NONE));
  assert_false(tg__rec_read_ok(TG__READ_HELD_DUE + 1, TG__READ_IDLE));
}

static void an_illegal_reader_transition_is_refused_and_counted(void **st) {
  (void)st;
  uv_loop_t loop;
  seen_t seen = {0};
  tg_recording_t *r = open_recording(&loop, &seen);

  tg__rec_set_read(r, TG__READ_HELD_DUE); /* IDLE has no arrow to it */
  assert_int_equal(r->rd.read, TG__READ_IDLE);
  tg__rec_set_stop(r, TG__REC_STOP_DEADLINE);
  tg__rec_set_stop(r, TG__REC_STOP_WANTED); /* latched */
  assert_int_equal(r->stop, TG__REC_STOP_DEADLINE);
  assert_int_equal(tg_recording_bad_transitions(r), 2);
  assert_int_equal(seen.errors, 2);

  /* Legal ones are made and count nothing. */
  tg__rec_set_read(r, TG__READ_BUSY);
  tg__rec_set_stats(r, TG__STATS_AFTER_READ);
  tg__rec_set_cut(r, TG__CUT_OPEN);
  assert_int_equal(r->rd.read, TG__READ_BUSY);
  assert_int_equal(r->rd.stats, TG__STATS_AFTER_READ);
  assert_int_equal(r->rd.cut, TG__CUT_OPEN);
  assert_int_equal(tg_recording_bad_transitions(r), 2);
  assert_int_equal(seen.errors, 2);
  assert_int_equal(seen.changes, 0); /* on_state is the lifecycle's */

  close_recording(&loop, r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_lifecycle_table_is_recording_h_s),
      cmocka_unit_test(the_binding_table_is_recording_h_s),
      cmocka_unit_test(an_illegal_transition_is_refused_counted_and_logged),
      cmocka_unit_test(the_reader_tables_are_recording_internal_h_s),
      cmocka_unit_test(an_illegal_reader_transition_is_refused_and_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
