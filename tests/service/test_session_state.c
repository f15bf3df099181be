/* A session's state (service/session.h, Lifecycle): which transitions
 * tg__session_set_state allows, that it refuses the others without a
 * change and counts them, and the spellings QueryServiceState reports. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "service/session.h"

#define N_STATES (TG_SESSION_DISABLED + 1)

/* allowed[from][to] for a session that is not a clone. */
static const bool allowed[N_STATES][N_STATES] = {
    [TG_SESSION_CONFIGURED] = {[TG_SESSION_STARTED] = true,
                               [TG_SESSION_DISABLING] = true},
    [TG_SESSION_STARTED] = {[TG_SESSION_DISABLING] = true},
    [TG_SESSION_DISABLING] = {[TG_SESSION_DISABLED] = true},
};

static void only_the_lifecycle_transitions_are_allowed(void **state) {
  (void)state;
  for (int from = 0; from < N_STATES; from++)
    for (int to = 0; to < N_STATES; to++) {
      bool clone_ok = allowed[from][to] ||
                      (from == TG_SESSION_CONFIGURED && to == TG_SESSION_DISABLED);
      if (tg__session_transition_ok(from, to, false) != allowed[from][to] ||
          tg__session_transition_ok(from, to, true) != clone_ok)
        fail_msg("%s -> %s", tg__session_state_name(from),
                 tg__session_state_name(to));
    }
}

static void set_state_walks_the_lifecycle_and_refuses_the_rest(void **state) {
  (void)state;
  tg_service_t svc;
  memset(&svc, 0, sizeof(svc));
  tg_session_t s;
  memset(&s, 0, sizeof(s));
  s.svc = &svc;
  s.id = 7;
  assert_int_equal(s.state, TG_SESSION_CONFIGURED); /* a new session */
  /* Not a clone: never DISABLED without stopping first. */
  assert_int_equal(tg__session_set_state(&s, TG_SESSION_DISABLED, "test"), -EINVAL);
  assert_int_equal(s.state, TG_SESSION_CONFIGURED);
  assert_int_equal(tg__session_set_state(&s, TG_SESSION_STARTED, "test"), 0);
  assert_int_equal(tg__session_set_state(&s, TG_SESSION_STARTED, "test"), -EINVAL);
  assert_int_equal(tg__session_set_state(&s, TG_SESSION_CONFIGURED, "test"), -EINVAL);
  assert_int_equal(s.state, TG_SESSION_STARTED);
  assert_int_equal(tg__session_set_state(&s, TG_SESSION_DISABLING, "test"), 0);
  assert_int_equal(tg__session_set_state(&s, TG_SESSION_STARTED, "test"), -EINVAL);
  assert_int_equal(tg__session_set_state(&s, TG_SESSION_DISABLED, "test"), 0);
  /* The end: only freed from here. */
  for (int to = 0; to < N_STATES; to++)
    assert_int_equal(tg__session_set_state(&s, to, "test"), -EINVAL);
  assert_int_equal(s.state, TG_SESSION_DISABLED);
  /* Each refusal counted, but a state to itself (common/fsm.h). */
  assert_int_equal(svc.bad_transitions, 6);
}

static void a_clone_is_born_disabled(void **state) {
  (void)state;
  tg_service_t svc;
  memset(&svc, 0, sizeof(svc));
  tg_session_t s;
  memset(&s, 0, sizeof(s));
  s.svc = &svc;
  s.cloned = true;
  assert_int_equal(tg__session_set_state(&s, TG_SESSION_DISABLED, "test"), 0);
  assert_int_equal(s.state, TG_SESSION_DISABLED);
}

/* A data source instance goes forward only, and may stop from any state. */
static void a_data_source_instance_goes_forward_only(void **state) {
  (void)state;
  assert_true(tg__ds_transition_ok(TG_DS_SETUP, TG_DS_STARTING));
  assert_true(tg__ds_transition_ok(TG_DS_SETUP, TG_DS_STARTED));
  assert_true(tg__ds_transition_ok(TG_DS_STARTING, TG_DS_STARTED));
  assert_true(tg__ds_transition_ok(TG_DS_STARTED, TG_DS_STOPPING));
  assert_true(tg__ds_transition_ok(TG_DS_STOPPING, TG_DS_STOPPED));
  for (int from = TG_DS_SETUP; from < TG_DS_STOPPED; from++)
    assert_true(tg__ds_transition_ok(from, TG_DS_STOPPED));
  for (int to = TG_DS_SETUP; to <= TG_DS_STOPPED; to++) {
    assert_false(tg__ds_transition_ok(TG_DS_STOPPED, to));
    assert_false(tg__ds_transition_ok(to, to));
  }
  assert_false(tg__ds_transition_ok(TG_DS_STARTED, TG_DS_STARTING));
  assert_false(tg__ds_transition_ok(TG_DS_STOPPING, TG_DS_STARTED));
  assert_false(tg__ds_transition_ok(TG_DS_SETUP, TG_DS_STOPPED + 1));
}

static void state_names_are_perfettos(void **state) {
  (void)state;
  assert_string_equal(tg__session_state_name(TG_SESSION_CONFIGURED), "CONFIGURED");
  assert_string_equal(tg__session_state_name(TG_SESSION_STARTED), "STARTED");
  assert_string_equal(tg__session_state_name(TG_SESSION_DISABLING),
                      "DISABLING_WAITING_STOP_ACKS");
  assert_string_equal(tg__session_state_name(TG_SESSION_DISABLED), "DISABLED");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(only_the_lifecycle_transitions_are_allowed),
      cmocka_unit_test(set_state_walks_the_lifecycle_and_refuses_the_rest),
      cmocka_unit_test(a_clone_is_born_disabled),
      cmocka_unit_test(a_data_source_instance_goes_forward_only),
      cmocka_unit_test(state_names_are_perfettos),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
