/* The recording's two state machines (consumer/recording.h): the
 * lifecycle's and the binding's tables as the header writes them out, and
 * a transition neither has is refused, counted and logged as an error,
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

static void an_illegal_transition_is_refused_counted_and_logged(void **st) {
  (void)st;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  seen_t seen = {0};
  tg_recording_t *r = tg_recording_new(&loop, &cbs, &seen);
  assert_non_null(r);
  tg_log_set_sink(sink, &seen);

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

  tg_log_set_sink(NULL, NULL);
  tg_recording_free(r);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_lifecycle_table_is_recording_h_s),
      cmocka_unit_test(the_binding_table_is_recording_h_s),
      cmocka_unit_test(an_illegal_transition_is_refused_counted_and_logged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
