/* standby.c, the connection kept open to each host for its next clone,
 * driven in the test's process (coll_unit.h) through coll_standby_*():
 * dialed once the host traces, lent to one user at a time and given back,
 * dialed again after it closed, closed for good with its host, and never
 * dialed for a host that does not trace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "coll_unit.h"
#include "test_proc.h"

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("collstandby");
}

/* Only compared, never called back: nothing closes the connection while
 * the test holds it. */
static struct snap_host *const USER = (struct snap_host *)&group_setup;

static coll_host_t *up_one(coll_unit_t *u) {
  coll_unit_hosts(u, 1);
  coll_unit_open(u, 1, NULL, NULL, true);
  coll_unit_wait_host(u, u->h[0].spec, COLL_HOST_TRACING, true);
  return u->c.hosts[0];
}

/* READY once the host traces; lent to one user (BUSY), refused to a
 * second, given back READY; a second give-back changes nothing. */
static void a_ready_standby_is_lent_once_and_given_back(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_host_t *h = up_one(&u);
  assert_non_null(h->sb.c);
  assert_false(coll_standby_idle(h));
  tg_consumer_t *cons = h->sb.c;
  assert_true(coll_standby_take(h, USER));
  assert_int_equal(h->sb.st, COLL_SB_BUSY);
  assert_ptr_equal(h->sb.user, USER);
  assert_false(coll_standby_take(h, USER));
  coll_standby_want(h); /* one connection per host */
  assert_ptr_equal(h->sb.c, cons);
  coll_standby_give_back(h);
  assert_int_equal(h->sb.st, COLL_SB_READY);
  assert_null(h->sb.user);
  coll_standby_give_back(h);
  assert_int_equal(h->sb.st, COLL_SB_READY);
  assert_ptr_equal(h->sb.c, cons);
  assert_int_equal(u.c.counts.standby_bad_transitions, 0);
  coll_unit_close(&u);
}

static bool standby_none(coll_unit_t *u, void *arg) {
  (void)u;
  return ((coll_host_t *)arg)->sb.st == COLL_SB_NONE;
}

/* Closed, it goes (CLOSING, then NONE once its transport is released)
 * and is not lent meanwhile; it is dialed again after its retry period
 * and READY again. */
static void a_closed_standby_is_dialed_again(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_host_t *h = up_one(&u);
  coll_standby_close(h);
  assert_false(coll_standby_take(h, USER));
  coll_unit_wait(&u, standby_none, h);
  assert_true(coll_standby_idle(h));
  assert_null(h->sb.c);
  assert_true(uv_is_active((uv_handle_t *)&h->sb.retry));
  coll_unit_wait_host(&u, u.h[0].spec, COLL_HOST_TRACING, true);
  assert_non_null(h->sb.c);
  coll_unit_close(&u);
}

/* A host out of the inventory has its standby closed and not dialed
 * again; the host is freed only once its standby is gone. */
static void a_removed_hosts_standby_closes_for_good(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_host_t *h = up_one(&u);
  coll_unit_inventory(&u, 0, NULL);
  coll_hosts_reload(&u.c, "test");
  assert_true(h->removed);
  assert_false(uv_is_active((uv_handle_t *)&h->sb.retry));
  assert_false(coll_standby_take(h, USER));
  assert_false(tg_list_empty(&u.c.gone));
  coll_unit_wait_freed(&u); /* freed: ASan checks the rest */
  coll_unit_close(&u);
}

/* A host that does not trace is never given a standby (hosts.c asks for
 * one when it traces), and one without a holder dials nothing. */
static void a_host_not_tracing_gets_no_standby(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_open(&u, 0, NULL, "127.0.0.1:1 name=relay.test\n", true);
  coll_host_t *h = u.c.hosts[0];
  coll_unit_wait_host(&u, "127.0.0.1:1", COLL_HOST_FAILED, false);
  tg_fleet_host_t *fh = h->fh;
  h->fh = NULL; /* as between a failure and the restart that ran out of memory */
  coll_standby_want(h);
  assert_int_equal(h->sb.st, COLL_SB_NONE);
  h->fh = fh;
  assert_int_equal(h->sb.st, COLL_SB_NONE);
  assert_false(coll_standby_take(h, USER));
  assert_true(coll_standby_idle(h));
  coll_unit_close(&u);
}

/* standby.c's diagram, arrow by arrow, and nothing else. */
static void the_standby_table_is_standby_c_s(void **state) {
  (void)state;
  static const struct { coll_standby_state_t from, to; } arrows[] = {
      {COLL_SB_NONE, COLL_SB_DIALING},    {COLL_SB_DIALING, COLL_SB_READY},
      {COLL_SB_DIALING, COLL_SB_CLOSING}, {COLL_SB_READY, COLL_SB_BUSY},
      {COLL_SB_READY, COLL_SB_CLOSING},   {COLL_SB_BUSY, COLL_SB_READY},
      {COLL_SB_BUSY, COLL_SB_CLOSING},    {COLL_SB_CLOSING, COLL_SB_NONE},
  };
  for (int f = 0; f <= COLL_SB_CLOSING; f++)
    for (int t = 0; t <= COLL_SB_CLOSING; t++) {
      bool want = false;
      for (size_t i = 0; i < sizeof(arrows) / sizeof(arrows[0]); i++)
        want |= (int)arrows[i].from == f && (int)arrows[i].to == t;
      assert_int_equal(coll_standby_transition_ok(f, t), want);
    }
  assert_false(coll_standby_transition_ok(COLL_SB_CLOSING + 1, COLL_SB_NONE));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(a_ready_standby_is_lent_once_and_given_back),
      FLEET_TEST(a_closed_standby_is_dialed_again),
      FLEET_TEST(a_removed_hosts_standby_closes_for_good),
      FLEET_TEST(a_host_not_tracing_gets_no_standby),
      cmocka_unit_test(the_standby_table_is_standby_c_s),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
