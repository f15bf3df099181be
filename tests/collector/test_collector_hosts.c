/* hosts.c, the collector's hosts, driven in the test's process
 * (coll_unit.h) through coll_hosts_start(), coll_hosts_reload() and
 * coll_host_in_group(): every host of the inventory holds a ring under a
 * key of its own, a reload keeps, adds and removes hosts (and frees the
 * removed ones), a file that does not parse changes nothing, a host that
 * cannot be reached fails with its reason and is started again, a
 * state's date is the daemon's clock's.
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
  return fleet_dir_create("collhosts");
}

/* |h|'s key: |session_key|, "-", then 16 lower-case hex digits. */
static void assert_key(const coll_host_t *h, const char *session_key) {
  size_t n = strlen(session_key);
  assert_int_equal(strncmp(h->key, session_key, n), 0);
  assert_int_equal(h->key[n], '-');
  assert_int_equal(strlen(h->key + n + 1), 16);
  assert_int_equal(strspn(h->key + n + 1, "0123456789abcdef"), 16);
}

/* Each host traces its own ring, named with a key of its own (the flight
 * config's copy carries it); the groups say who is in them. */
static void every_host_traces_under_a_key_of_its_own(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 2);
  char extra[128];
  snprintf(extra, sizeof(extra), "group = first %s\n", u.h[0].spec);
  coll_unit_open(&u, 2, extra, NULL, true);
  assert_int_equal(u.c.n, 2);
  assert_int_equal(u.c.inventory, 2);
  for (size_t i = 0; i < 2; i++)
    coll_unit_wait_host(&u, u.h[i].spec, COLL_HOST_TRACING, false);
  coll_host_t *a = coll_unit_host(&u, u.h[0].spec);
  coll_host_t *b = coll_unit_host(&u, u.h[1].spec);
  assert_key(a, "e2e-collector");
  assert_key(b, "e2e-collector");
  assert_string_not_equal(a->key, b->key);
  assert_true(a->ring_up && b->ring_up);
  assert_string_equal(a->why, "");
  assert_int_equal(a->failures, 0);
  assert_non_null(a->config);
  assert_ptr_equal(a->gen, b->gen); /* started together */
  assert_true(coll_host_in_group(&u.c, a, "all"));
  assert_true(coll_host_in_group(&u.c, b, "all"));
  assert_true(coll_host_in_group(&u.c, a, "first"));
  assert_false(coll_host_in_group(&u.c, b, "first"));
  assert_false(coll_host_in_group(&u.c, a, "none"));
  coll_unit_close(&u);
}

/* A reload keeps a host that stays untouched (same holder, no restart,
 * its label as the new inventory gives it), starts a new one in a
 * generation of its own, and removes one that left: its ring ended, its
 * memory freed once nothing holds it. */
static void a_reload_keeps_adds_and_removes(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 2);
  coll_unit_open(&u, 1, NULL, NULL, true);
  assert_int_equal(u.c.n, 1);
  coll_unit_wait_host(&u, u.h[0].spec, COLL_HOST_TRACING, false);
  coll_host_t *a = coll_unit_host(&u, u.h[0].spec);
  tg_fleet_host_t *a_holder = a->fh;
  /* Its name= is its label while no other host has it. */
  assert_string_equal(a->t.label, "relay.test");

  coll_unit_inventory(&u, 2, NULL);
  coll_hosts_reload(&u.c, "test");
  assert_int_equal(u.c.n, 2);
  assert_int_equal(u.c.inventory, 2);
  assert_ptr_equal(coll_unit_host(&u, u.h[0].spec), a);
  assert_ptr_equal(a->fh, a_holder);
  assert_int_equal(a->restarts, 0);
  assert_int_equal(a->state, COLL_HOST_TRACING);
  /* B has the same name=: both are labelled by their specs now. */
  assert_string_equal(a->t.label, u.h[0].spec);
  coll_host_t *b = coll_unit_host(&u, u.h[1].spec);
  assert_non_null(b);
  assert_ptr_not_equal(b->gen, a->gen);
  coll_unit_wait_host(&u, u.h[1].spec, COLL_HOST_TRACING, false);

  write_hosts(&u.h[1], 1); /* A leaves */
  coll_hosts_reload(&u.c, "test");
  assert_int_equal(u.c.n, 1);
  assert_ptr_equal(u.c.hosts[0], b);
  assert_null(coll_unit_host(&u, u.h[0].spec));
  assert_false(tg_list_empty(&u.c.gone)); /* until its holder finished */
  coll_unit_wait_freed(&u);
  assert_int_equal(b->state, COLL_HOST_TRACING);
  coll_unit_close(&u);
}

/* An inventory that does not parse leaves the hosts as they were. */
static void an_inventory_that_does_not_parse_changes_nothing(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 1);
  coll_unit_open(&u, 1, NULL, NULL, true);
  coll_unit_wait_host(&u, u.h[0].spec, COLL_HOST_TRACING, false);
  coll_host_t *a = u.c.hosts[0];
  coll_unit_inventory(&u, 0, "127.0.0.1:99999999\n");
  coll_hosts_reload(&u.c, "test");
  assert_int_equal(u.c.n, 1);
  assert_ptr_equal(u.c.hosts[0], a);
  assert_int_equal(u.c.inventory, 1);
  assert_true(tg_list_empty(&u.c.gone));
  coll_unit_run_for(&u, 100);
  assert_int_equal(a->state, COLL_HOST_TRACING);
  coll_unit_close(&u);
}

static bool failed_twice(coll_unit_t *u, void *arg) {
  coll_host_t *h = arg;
  (void)u;
  return h->failures >= 2 && h->state == COLL_HOST_FAILED;
}

/* A host nobody answers for fails with the reason, is counted, and is
 * started again (a new holder) after its restart period; the reason is
 * warned about once while it stays the same. */
static void an_unreachable_host_fails_and_starts_again(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_open(&u, 0, NULL, "127.0.0.1:1 name=relay.test\n", true);
  assert_int_equal(u.c.n, 1);
  coll_host_t *h = u.c.hosts[0];
  coll_unit_wait_host(&u, "127.0.0.1:1", COLL_HOST_FAILED, false);
  assert_int_equal(h->failures, 1);
  assert_true(h->finished);
  assert_false(h->ring_up);
  assert_string_not_equal(h->why, "");
  assert_string_equal(h->warned, h->fh->report.why);
  assert_true(uv_is_active((uv_handle_t *)&h->restart));
  assert_int_equal(h->restarts, 0);
  assert_int_equal(h->sb.st, COLL_SB_NONE); /* no standby for it */
  coll_unit_wait(&u, failed_twice, h);
  assert_int_equal(h->restarts, 1);
  assert_string_equal(h->warned, h->fh->report.why);
  coll_unit_close(&u);
}

/* A host's state says since when on the daemon's clock (its wall
 * reading, coll_wall_ms), not the machine's: the date of each change,
 * and none while the state stays. */
static void a_state_is_dated_by_the_daemon_clock(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 1);
  coll_unit_open(&u, 1, NULL, NULL, false);
  u.now_ms += 5000;
  assert_int_equal(coll_hosts_start(&u.c), 0);
  coll_host_t *a = u.c.hosts[0];
  assert_int_equal(a->state, COLL_HOST_CONNECTING);
  u.now_ms += 7000;
  coll_unit_wait_host(&u, u.h[0].spec, COLL_HOST_TRACING, false);
  assert_int_equal(a->since_ms, COLL_UNIT_WALL_START_MS + u.now_ms);
  int64_t since = a->since_ms;
  u.now_ms += 60000;
  coll_unit_run_for(&u, 100);
  assert_int_equal(a->state, COLL_HOST_TRACING);
  assert_int_equal(a->since_ms, since);
  coll_unit_close(&u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(every_host_traces_under_a_key_of_its_own),
      FLEET_TEST(a_reload_keeps_adds_and_removes),
      FLEET_TEST(an_inventory_that_does_not_parse_changes_nothing),
      FLEET_TEST(an_unreachable_host_fails_and_starts_again),
      FLEET_TEST(a_state_is_dated_by_the_daemon_clock),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
