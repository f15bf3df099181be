/* trigger.c, the shell of the trigger policy, driven through
 * coll_trigger() in the test's process (coll_unit.h) on the daemon's
 * simulated clock: what each trigger becomes (a snapshot begun, served
 * by one under way, queued, folded into the queued one, refused) and what
 * it costs (the budgets, the counters /metrics shows). The e2e tests
 * (test_collector_triggers) cannot hold the clock still: here a minute
 * passes only when the test says so.
 */
#include <errno.h>
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
  return fleet_dir_create("colltrigger");
}

/* A host's trigger "app-hit", as trigger.c's on_events makes it. */
static int host_trigger(coll_unit_t *u, size_t i, uint64_t *id) {
  coll_host_t *h = coll_unit_host(u, u->h[i].spec);
  assert_non_null(h);
  coll_trigger_req_t r = {.trigger = "app-hit",
                          .reason = "test",
                          .origin = h->t.spec,
                          .from = h,
                          .group = "all"};
  return coll_trigger(&u->c, &r, id);
}

static int operator_trigger(coll_unit_t *u, uint64_t *id) {
  coll_trigger_req_t r = {.trigger = "operator", .reason = "test",
                          .origin = "", .group = "all"};
  return coll_trigger(&u->c, &r, id);
}

static void up(coll_unit_t *u, const char *extra) {
  coll_unit_hosts(u, 2);
  coll_unit_open(u, 2, extra, NULL, true);
  for (size_t i = 0; i < 2; i++)
    coll_unit_wait_host(u, u->h[i].spec, COLL_HOST_TRACING, true);
}

/* Snapshot |id| stored complete. */
static void assert_complete(coll_unit_t *u, uint64_t id) {
  tg_coll_snapshot_t row;
  tg_coll_host_t hosts[2];
  size_t n;
  coll_unit_row(u, id, &row, hosts, 2, &n);
  assert_int_equal(row.state, TG_COLL_COMPLETE);
  assert_int_equal(n, 2);
}

/* Host A fires 5 triggers within one minute of the daemon's clock, each
 * once the last one's snapshot is stored: its budget (2) takes 2 and
 * refuses 3, and neither all hosts' budget (3) nor the operators' is
 * touched: host B and an operator still get theirs. A minute later A has
 * its 2 again. */
static void a_host_spends_its_own_budget_per_minute(void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, "host_snapshots_per_minute = 2\n");
  tg_coll_config_t *cfg = &u.c.cfg;
  assert_int_equal(cfg->host_snapshots_per_minute, 2);
  u.c.budgets[TG_TRIGGER_BUDGET_HOSTS].limit = 3;
  const coll_counts_t *k = &u.c.counts;
  uint64_t id;
  for (int i = 0; i < 5; i++) {
    int rv = host_trigger(&u, 0, &id);
    if (i < 2) {
      assert_int_equal(rv, 0);
      assert_true(id != 0);
      coll_unit_wait_idle(&u);
      assert_complete(&u, id);
    } else {
      assert_int_equal(rv, -EAGAIN);
      assert_int_equal(u.c.n_running, 0); /* nothing begun */
    }
    u.now_ms += 10000; /* 5 triggers in 50 s */
  }
  assert_int_equal(k->trigger_hits, 5);
  assert_int_equal(k->triggers_capped[TG_TRIGGER_BUDGET_HOST], 3);
  assert_int_equal(k->triggers_capped[TG_TRIGGER_BUDGET_HOSTS], 0);
  assert_int_equal(k->triggers_coalesced, 0);
  /* Host B's own budget, and the last of all hosts' (3). */
  assert_int_equal(host_trigger(&u, 1, &id), 0);
  assert_true(id != 0);
  coll_unit_wait_idle(&u);
  /* All hosts' budget is spent now: B's next is refused by it. */
  assert_int_equal(host_trigger(&u, 1, &id), -EAGAIN);
  assert_int_equal(k->triggers_capped[TG_TRIGGER_BUDGET_HOSTS], 1);
  /* The operators' budget is their own. */
  assert_int_equal(operator_trigger(&u, &id), 0);
  assert_true(id != 0);
  coll_unit_wait_idle(&u);
  assert_int_equal(k->triggers_capped[TG_TRIGGER_BUDGET_OPERATOR], 0);
  /* A new minute of A's window (it began at its first trigger). */
  u.now_ms += 10000;
  assert_int_equal(host_trigger(&u, 0, &id), 0);
  assert_true(id != 0);
  coll_unit_wait_idle(&u);
  assert_int_equal(k->snapshots[TG_COLL_COMPLETE], 5);
  assert_int_equal(k->trigger_hits, 9);
  coll_unit_close(&u);
}

/* Operators' storm: the snapshots wait on the producers' flushes (which
 * the test holds), so 4 run at once (COLL_RUNNING_MAX), the 5th trigger
 * is queued, the next fold into it; once they ran, the operators' budget
 * (5) refuses the next, until a minute has passed. */
static void operators_run_four_queue_one_fold_the_rest(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  up(&u, "operator_snapshots_per_minute = 5\nclone_timeout = 90s\n");
  const coll_counts_t *k = &u.c.counts;
  uint64_t ids[4], id;
  for (int i = 0; i < 4; i++) {
    assert_int_equal(operator_trigger(&u, &ids[i]), 0);
    assert_true(ids[i] != 0);
    for (int j = 0; j < i; j++) assert_true(ids[i] != ids[j]);
  }
  assert_int_equal(u.c.n_running, 4);
  for (int i = 0; i < 6; i++) {
    assert_int_equal(operator_trigger(&u, &id), 0);
    assert_int_equal(id, 0); /* queued, then folded into it */
  }
  assert_true(u.c.queued);
  assert_int_equal(k->triggers_coalesced, 5);
  coll_unit_flush_until_idle(&u);
  assert_int_equal(k->snapshots[TG_COLL_COMPLETE], 5);
  for (int i = 0; i < 4; i++) assert_complete(&u, ids[i]);
  assert_int_equal(operator_trigger(&u, &id), -EAGAIN);
  assert_int_equal(k->triggers_capped[TG_TRIGGER_BUDGET_OPERATOR], 1);
  u.now_ms += 60000;
  assert_int_equal(operator_trigger(&u, &id), 0);
  assert_true(id != 0);
  coll_unit_flush_until_idle(&u);
  assert_int_equal(k->trigger_hits, 12);
  assert_int_equal(k->snapshots[TG_COLL_COMPLETE], 6);
  coll_unit_close(&u);
}

/* While host A's clone is still to come (its connection dialing), A's
 * next trigger is served by the snapshot under way, free; once A's clone
 * was requested, A's next trigger begins a snapshot of its own. The
 * window is the coalescing window on the daemon's clock. */
static void a_host_trigger_is_served_only_while_its_clone_is_to_come(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  up(&u, "clone_timeout = 90s\n");
  u.c.cfg.coalesce_window_ms = 10000; /* the config's is 0 (write_config) */
  coll_host_t *a = coll_unit_host(&u, u.h[0].spec);
  /* No standby: the snapshot dials A, so A's clone is still to come. */
  coll_standby_close(a);
  uint64_t first, id;
  assert_int_equal(host_trigger(&u, 0, &first), 0);
  tg_trigger_snap_view_t v;
  coll_snap_view(u.c.running[0], a, &v);
  assert_true(v.origin_to_come);
  assert_int_equal(host_trigger(&u, 0, &id), 0);
  assert_int_equal(id, first);
  assert_int_equal(u.c.counts.triggers_coalesced, 1);
  /* Past the window, the same state serves nothing. */
  u.now_ms += 10000;
  assert_int_equal(host_trigger(&u, 0, &id), 0);
  assert_true(id != first);
  assert_int_equal(u.c.n_running, 2);
  assert_int_equal(u.c.counts.triggers_coalesced, 1);
  coll_unit_flush_until_idle(&u);
  assert_int_equal(u.c.counts.snapshots[TG_COLL_COMPLETE], 2);
  coll_unit_close(&u);
}

/* Stopping, a trigger is counted and refused; nothing begins. */
static void a_trigger_while_stopping_begins_nothing(void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, NULL);
  u.c.stopping = true;
  uint64_t id = 1;
  assert_int_equal(operator_trigger(&u, &id), -ESHUTDOWN);
  assert_int_equal(host_trigger(&u, 0, &id), -ESHUTDOWN);
  assert_int_equal(id, 0);
  assert_int_equal(u.c.n_running, 0);
  assert_int_equal(u.c.counts.trigger_hits, 2);
  u.c.stopping = false;
  coll_unit_close(&u);
}

/* --- a queued snapshot of a host list ------------------------------------- */

/* Three hosts (A, B, C), group "ab" of A and B, and budgets that the
 * scenarios below do not reach. */
static void up3(coll_unit_t *u) {
  coll_unit_hosts(u, 3);
  char extra[1024];
  snprintf(extra, sizeof(extra),
           "clone_timeout = 90s\noperator_snapshots_per_minute = 20\n"
           "alertmanager_snapshots_per_minute = 20\ngroup = ab %s %s\n",
           u->h[0].spec, u->h[1].spec);
  coll_unit_open(u, 3, extra, NULL, true);
  for (size_t i = 0; i < 3; i++)
    coll_unit_wait_host(u, u->h[i].spec, COLL_HOST_TRACING, true);
}

/* An Alertmanager alert |name| naming the hosts u->h[idx[0..n)], as
 * alertmanager.c makes it. */
static int alert(coll_unit_t *u, const char *name, const size_t *idx,
                 size_t n, uint64_t *id) {
  coll_host_t *hosts[COLL_UNIT_HOSTS_MAX];
  for (size_t i = 0; i < n; i++) {
    hosts[i] = coll_unit_host(u, u->h[idx[i]].spec);
    assert_non_null(hosts[i]);
  }
  coll_trigger_req_t r = {.trigger = name, .reason = "test", .origin = "",
                          .group = "all", .alertmanager = true,
                          .hosts = hosts, .n_hosts = n};
  return coll_trigger(&u->c, &r, id);
}

static int group_trigger(coll_unit_t *u, const char *name, const char *group,
                         uint64_t *id) {
  coll_trigger_req_t r = {.trigger = name, .reason = "test", .origin = "",
                          .group = group};
  return coll_trigger(&u->c, &r, id);
}

/* COLL_RUNNING_MAX operators' snapshots under way (they wait on the
 * producers' flushes, which the test holds): the next one queues. */
static void fill(coll_unit_t *u) {
  uint64_t id;
  while (u->c.n_running < COLL_RUNNING_MAX) {
    u->now_ms += 1; /* none serves the next: coalesce_window is 0 */
    assert_int_equal(operator_trigger(u, &id), 0);
    assert_true(id != 0);
  }
}

/* The one snapshot stored under trigger |name| holds exactly the hosts
 * u->h[idx[0..n)], complete. */
static void assert_snapshot_of(coll_unit_t *u, const char *name,
                               const size_t *idx, size_t n) {
  tg_coll_filter_t f = TG_COLL_FILTER_INIT;
  f.trigger = name;
  tg_coll_snapshot_t rows[2];
  size_t n_rows;
  assert_int_equal(tg_coll_store_list(u->c.store, &f, rows, 2, &n_rows), 0);
  assert_int_equal(n_rows, 1);
  tg_coll_snapshot_t row;
  tg_coll_host_t hosts[COLL_UNIT_HOSTS_MAX];
  size_t n_hosts;
  coll_unit_row(u, rows[0].id, &row, hosts, COLL_UNIT_HOSTS_MAX, &n_hosts);
  assert_int_equal(row.state, TG_COLL_COMPLETE);
  assert_int_equal(n_hosts, n);
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < n_hosts && strcmp(hosts[j].host, u->h[idx[i]].spec)) j++;
    assert_true(j < n_hosts);
  }
}

/* No snapshot stored under trigger |name|. */
static void assert_no_snapshot(coll_unit_t *u, const char *name) {
  tg_coll_filter_t f = TG_COLL_FILTER_INIT;
  f.trigger = name;
  tg_coll_snapshot_t row;
  size_t n_rows;
  assert_int_equal(tg_coll_store_list(u->c.store, &f, &row, 1, &n_rows), 0);
  assert_int_equal(n_rows, 0);
}

/* An alert naming A waits behind 4 snapshots: queued with A alone; an
 * alert naming B and A folds into it, free: the snapshot that begins
 * holds A and B, each once, and not C. */
static void a_queued_host_list_keeps_its_hosts_and_joins_the_next(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  up3(&u);
  fill(&u);
  uint64_t id = 1;
  const size_t a[] = {0}, ba[] = {1, 0}, ab[] = {0, 1};
  assert_int_equal(alert(&u, "Queued", a, 1, &id), 0);
  assert_int_equal(id, 0);
  assert_true(u.c.queued);
  assert_int_equal(u.c.n_queued_hosts, 1);
  assert_int_equal(alert(&u, "Joined", ba, 2, &id), 0);
  assert_int_equal(id, 0);
  assert_int_equal(u.c.n_queued_hosts, 2);
  assert_int_equal(u.c.counts.triggers_coalesced, 1);
  assert_int_equal(u.c.budgets[TG_TRIGGER_BUDGET_ALERTMANAGER].used, 1);
  coll_unit_flush_until_idle(&u);
  assert_int_equal(u.c.counts.snapshots[TG_COLL_COMPLETE], 5);
  assert_snapshot_of(&u, "Queued", ab, 2);
  assert_no_snapshot(&u, "Joined");
  assert_int_equal(u.c.n_queued_hosts, 0);
  coll_unit_close(&u);
}

/* A group's trigger folded into a queued host list widens it to every
 * host; a host list folded into a queued group keeps the group while
 * the group holds all its hosts, and widens it to every host once not. */
static void folding_a_group_and_a_host_list_widens_only_past_the_group(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  up3(&u);
  const size_t a[] = {0}, c[] = {2}, ab[] = {0, 1}, abc[] = {0, 1, 2};
  uint64_t id;
  /* A host list, then a group: every host. */
  fill(&u);
  assert_int_equal(alert(&u, "ListThenGroup", a, 1, &id), 0);
  assert_int_equal(group_trigger(&u, "GroupFolded", "ab", &id), 0);
  assert_int_equal(u.c.n_queued_hosts, 0);
  assert_string_equal(u.c.queued_group, "all");
  coll_unit_flush_until_idle(&u);
  assert_snapshot_of(&u, "ListThenGroup", abc, 3);
  /* A group, then a host list within it: the group as it was. */
  fill(&u);
  assert_int_equal(group_trigger(&u, "GroupThenList", "ab", &id), 0);
  assert_int_equal(id, 0);
  assert_int_equal(alert(&u, "ListInGroup", a, 1, &id), 0);
  assert_string_equal(u.c.queued_group, "ab");
  assert_int_equal(u.c.n_queued_hosts, 0);
  coll_unit_flush_until_idle(&u);
  assert_snapshot_of(&u, "GroupThenList", ab, 2);
  /* A group, then a host list out of it: every host. */
  fill(&u);
  assert_int_equal(group_trigger(&u, "GroupThenOut", "ab", &id), 0);
  assert_int_equal(alert(&u, "ListOutOfGroup", c, 1, &id), 0);
  assert_string_equal(u.c.queued_group, "all");
  coll_unit_flush_until_idle(&u);
  assert_snapshot_of(&u, "GroupThenOut", abc, 3);
  assert_int_equal(u.c.counts.triggers_coalesced, 3);
  assert_int_equal(u.c.counts.snapshots[TG_COLL_COMPLETE], 15);
  coll_unit_close(&u);
}

/* Queues alert |name| of the hosts u->h[idx[0..n)] behind a full set of
 * snapshots, then reloads an inventory of the first |keep| of u->h and
 * |more|, which leaves the collector |left| hosts. */
static void queue_then_reload(coll_unit_t *u, const char *name,
                              const size_t *idx, size_t n, size_t keep,
                              const char *more, size_t left) {
  uint64_t id;
  fill(u);
  assert_int_equal(alert(u, name, idx, n, &id), 0);
  assert_int_equal(id, 0);
  assert_int_equal(u->c.n_queued_hosts, n);
  coll_unit_inventory(u, keep, more);
  coll_hosts_reload(&u->c, "the test");
  assert_int_equal(u->c.n, left);
}

/* The inventory reloaded while a host list is queued: a host no longer
 * in it is dropped from the list, before the list would hold more specs
 * than the inventory has hosts, and when the snapshot begins; once none
 * is left, the queued snapshot fails without beginning. */
static void a_reload_drops_queued_hosts_it_removed(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  up3(&u);
  const size_t a[] = {0}, ab[] = {0, 1}, c[] = {2}, ac[] = {0, 2};
  uint64_t id;
  char c_line[400];
  snprintf(c_line, sizeof(c_line), "%s name=relay.test\n", u.h[2].spec);
  /* B leaves (A and C stay), then C joins: B's spec goes first, the
   * list stays within the inventory's 2 hosts. */
  queue_then_reload(&u, "Shrunk", ab, 2, 1, c_line, 2);
  assert_int_equal(alert(&u, "JoinsC", c, 1, &id), 0);
  assert_int_equal(u.c.n_queued_hosts, 2);
  coll_unit_flush_until_idle(&u);
  assert_snapshot_of(&u, "Shrunk", ac, 2);
  /* A and C queued, C leaves: the snapshot that begins holds A. */
  queue_then_reload(&u, "LostC", ac, 2, 1, NULL, 1);
  assert_int_equal(u.c.n_queued_hosts, 2); /* looked up when it begins */
  coll_unit_flush_until_idle(&u);
  assert_snapshot_of(&u, "LostC", a, 1);
  /* A alone queued, A leaves: nothing begins, counted as an error. */
  queue_then_reload(&u, "AllGone", a, 1, 0, NULL, 0);
  coll_unit_flush_until_idle(&u);
  assert_false(u.c.queued);
  assert_int_equal(u.c.n_queued_hosts, 0);
  assert_no_snapshot(&u, "AllGone");
  assert_int_equal(u.c.counts.snapshot_errors, 1);
  /* 14 stored (those under way lost the removed hosts' clones). */
  uint64_t stored = 0;
  for (int i = 0; i < TG_COLL_STATE_COUNT; i++)
    stored += u.c.counts.snapshots[i];
  assert_int_equal(stored, 14);
  coll_unit_close(&u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(a_host_spends_its_own_budget_per_minute),
      FLEET_TEST(operators_run_four_queue_one_fold_the_rest),
      FLEET_TEST(a_host_trigger_is_served_only_while_its_clone_is_to_come),
      FLEET_TEST(a_trigger_while_stopping_begins_nothing),
      FLEET_TEST(a_queued_host_list_keeps_its_hosts_and_joins_the_next),
      FLEET_TEST(folding_a_group_and_a_host_list_widens_only_past_the_group),
      FLEET_TEST(a_reload_drops_queued_hosts_it_removed),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
