/* A disconnect lease (service/session.h) on the service's simulated clock
 * (common/clock.h): the decision to free a detached session is a pure
 * function of the session and the clock, so leases of minutes are walked
 * through without waiting for them. The end to end version, on the real
 * clock, is tests/consumer/test_session_lease.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "service/service.h"
#include "service/session.h"

#define START_MS 5000000
#define TEN_MINUTES_MS (10u * 60 * 1000)

typedef struct fixture {
  uv_loop_t loop;
  tg_clock_sim_t clock;
  tg_service_t svc;
  tg_session_t s;
  tg_ipc_host_conn_t conn;
} fixture_t;

/* A service that holds one session, attached to |f->conn|, with no
 * instance, no buffer and no timer but its lease's. */
static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof(*f));
  if (!f) return -1;
  if (uv_loop_init(&f->loop) != 0) {
    free(f);
    return -1;
  }
  tg_clock_sim_init(&f->clock, START_MS);
  f->svc.loop = &f->loop;
  f->svc.opt.clock = &f->clock.clock;
  tg_list_init(&f->svc.sessions);
  f->s.svc = &f->svc;
  f->s.id = 1;
  f->s.consumer = &f->conn;
  uv_timer_init(&f->loop, &f->s.lease_timer);
  f->s.lease_timer.data = &f->s;
  tg_list_insert_tail(&f->svc.sessions, &f->s.node);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  uv_close((uv_handle_t *)&f->s.lease_timer, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  int rv = uv_loop_close(&f->loop);
  free(f->s.detach_key);
  free(f);
  return rv == 0 ? 0 : -1;
}

/* The consumer's connection died under a lease of |lease_ms|. */
static void lose_consumer(fixture_t *f, uint64_t lease_ms) {
  assert_int_equal(tg__session_detach(&f->s, "relay/k"), 0);
  tg__session_lease_start(&f->s, lease_ms);
}

static uint64_t left(fixture_t *f) {
  return tg__session_lease_left_ms(&f->s, tg_clock_ms(&f->clock.clock));
}

static void a_ten_minute_lease_runs_out_at_its_last_millisecond(void **state) {
  fixture_t *f = *state;
  assert_int_equal(left(f), UINT64_MAX); /* attached: no lease holds it */
  lose_consumer(f, TEN_MINUTES_MS);
  assert_int_equal(left(f), TEN_MINUTES_MS);
  tg_clock_sim_advance_ms(&f->clock, TEN_MINUTES_MS - 1);
  assert_int_equal(left(f), 1);
  tg_clock_sim_advance_ms(&f->clock, 1);
  assert_int_equal(left(f), 0);
  tg_clock_sim_advance_ms(&f->clock, 3600 * 1000);
  assert_int_equal(left(f), 0);
}

static void attach_in_time_cancels_the_lease(void **state) {
  fixture_t *f = *state;
  lose_consumer(f, TEN_MINUTES_MS);
  tg_clock_sim_advance_ms(&f->clock, TEN_MINUTES_MS - 1);
  assert_ptr_equal(tg__session_attach(&f->svc, "relay/k", &f->conn), &f->s);
  /* Twice the lease later: attached, nothing decides to free it. */
  tg_clock_sim_advance_ms(&f->clock, 2 * TEN_MINUTES_MS);
  assert_int_equal(left(f), UINT64_MAX);
  /* A later loss starts a lease of its own, from the clock's now. */
  lose_consumer(f, 300);
  assert_int_equal(left(f), 300);
}

static void a_detached_session_without_lease_is_kept(void **state) {
  fixture_t *f = *state;
  assert_int_equal(tg__session_detach(&f->s, "relay/k"), 0);
  tg_clock_sim_advance_ms(&f->clock, 24ull * 3600 * 1000);
  assert_int_equal(left(f), UINT64_MAX);
}

static void a_session_being_freed_is_not_freed_again(void **state) {
  fixture_t *f = *state;
  lose_consumer(f, 300);
  f->s.freeing = true;
  tg_clock_sim_advance_ms(&f->clock, 300);
  assert_int_equal(left(f), UINT64_MAX);
}

/* The lease's timer runs on the loop's time, the decision on the
 * service's clock: a timer that fires while the service's clock has not
 * reached the lease's end keeps the session and sleeps for what is left. */
static void an_early_timer_keeps_the_session_until_the_clock_says(void **state) {
  fixture_t *f = *state;
  lose_consumer(f, 5);
  tg_clock_sim_advance_ms(&f->clock, 2);
  assert_int_equal(uv_run(&f->loop, UV_RUN_ONCE), 1); /* the timer fired */
  assert_false(f->s.freeing);
  assert_true(uv_is_active((uv_handle_t *)&f->s.lease_timer));
  assert_int_equal(left(f), 3);
  uv_timer_stop(&f->s.lease_timer);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(a_ten_minute_lease_runs_out_at_its_last_millisecond),
      T(attach_in_time_cancels_the_lease),
      T(a_detached_session_without_lease_is_kept),
      T(a_session_being_freed_is_not_freed_again),
      T(an_early_timer_keeps_the_session_until_the_clock_says),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
