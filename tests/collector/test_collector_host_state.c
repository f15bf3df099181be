/* A collector host's state (collector/daemon/coll.h): what each state of
 * its holder's link and recording make it, and how /api/v1/hosts and
 * /metrics spell each one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/hosts.h"

static void every_state_has_its_own_name(void **state) {
  (void)state;
  static const char *const want[COLL_HOST_STATE_COUNT] = {
      [COLL_HOST_CONNECTING] = "connecting",
      [COLL_HOST_PREPARING] = "preparing",
      [COLL_HOST_IDLE] = "idle",
      [COLL_HOST_STARTING] = "starting",
      [COLL_HOST_TRACING] = "tracing",
      [COLL_HOST_STOPPING] = "stopping",
      [COLL_HOST_DRAINING] = "reading the end",
      [COLL_HOST_STATS] = "statistics",
      [COLL_HOST_DETACHED] = "detached",
      [COLL_HOST_RECONNECTING] = "reconnecting",
      [COLL_HOST_CLOSING] = "closing",
      [COLL_HOST_DONE] = "done",
      [COLL_HOST_FAILED] = "failed",
  };
  for (int i = 0; i < COLL_HOST_STATE_COUNT; i++) {
    assert_non_null(want[i]); /* a new state is named here too */
    assert_string_equal(coll_host_state_name((coll_host_state_t)i), want[i]);
    for (int j = 0; j < i; j++)
      assert_string_not_equal(coll_host_state_name((coll_host_state_t)i),
                              coll_host_state_name((coll_host_state_t)j));
  }
}

/* The link says where the holder is, except while it is up. */
static void the_link_decides_unless_it_is_up(void **state) {
  (void)state;
  static const struct {
    tg_link_state_t link;
    coll_host_state_t want;
  } cases[] = {
      {TG_LINK_CONNECTING, COLL_HOST_CONNECTING},
      {TG_LINK_PREPARING, COLL_HOST_PREPARING},
      {TG_LINK_DROPPING, COLL_HOST_RECONNECTING},
      {TG_LINK_BACKOFF, COLL_HOST_RECONNECTING},
      {TG_LINK_RECONNECTING, COLL_HOST_RECONNECTING},
      {TG_LINK_RESUMING, COLL_HOST_RECONNECTING},
      {TG_LINK_CLOSING, COLL_HOST_CLOSING},
      {TG_LINK_FAILING, COLL_HOST_FAILED},
      {TG_LINK_DONE, COLL_HOST_DONE},
      {TG_LINK_FAILED, COLL_HOST_FAILED},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    for (int rec = TG_REC_IDLE; rec <= TG_REC_FAILED; rec++) {
      assert_int_equal(coll_host_state_of(cases[i].link, true, (tg_rec_state_t)rec),
                       cases[i].want);
      assert_int_equal(coll_host_state_of(cases[i].link, false, (tg_rec_state_t)rec),
                       cases[i].want);
    }
}

/* Up, the recording tells how far the ring session is. */
static void up_the_recording_decides(void **state) {
  (void)state;
  static const coll_host_state_t want[] = {
      [TG_REC_IDLE] = COLL_HOST_IDLE,
      [TG_REC_ATTACHING] = COLL_HOST_STARTING,
      [TG_REC_STARTING] = COLL_HOST_STARTING,
      [TG_REC_TRACING] = COLL_HOST_TRACING,
      [TG_REC_STOPPING] = COLL_HOST_STOPPING,
      [TG_REC_DRAINING] = COLL_HOST_DRAINING,
      [TG_REC_STATS] = COLL_HOST_STATS,
      [TG_REC_FREEING] = COLL_HOST_CLOSING,
      [TG_REC_FAILING] = COLL_HOST_FAILED,
      [TG_REC_DONE] = COLL_HOST_DONE,
      [TG_REC_DETACHED] = COLL_HOST_DETACHED,
      [TG_REC_FAILED] = COLL_HOST_FAILED,
  };
  for (int rec = TG_REC_IDLE; rec <= TG_REC_FAILED; rec++)
    assert_int_equal(coll_host_state_of(TG_LINK_UP, true, (tg_rec_state_t)rec),
                     want[rec]);
  /* A holder without a recording holds the ring by its link alone. */
  assert_int_equal(coll_host_state_of(TG_LINK_UP, false, TG_REC_IDLE),
                   COLL_HOST_TRACING);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_state_has_its_own_name),
      cmocka_unit_test(the_link_decides_unless_it_is_up),
      cmocka_unit_test(up_the_recording_decides),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
