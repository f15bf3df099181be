/* The trigger policy (collector/daemon/trigger_policy.h) on a simulated
 * clock: every rule, each budget, the windows, the bound of snapshots at
 * once. The state is built here as trigger.c builds it from the
 * collector's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/daemon/trigger_policy.h"

/* A collector as the policy sees it, on the test's clock. */
typedef struct sim {
  tg_trigger_snap_view_t running[4];
  size_t n_running;
  bool queued;
  const char *queued_group;
  tg_trigger_budget_t host_a, host_b, hosts, op, sched;
  int64_t now;
} sim_t;

static void sim_init(sim_t *s) {
  *s = (sim_t){.queued_group = "all"};
  s->host_a.limit = s->host_b.limit = 2;
  s->hosts.limit = 6;
  s->op.limit = 6;
  s->sched.limit = 6;
  s->now = 1000000;
}

static tg_trigger_budget_t *own(sim_t *s, tg_trigger_origin_t from,
                                tg_trigger_budget_t *host) {
  if (from == TG_TRIGGER_FROM_HOST) return host;
  return from == TG_TRIGGER_FROM_OPERATOR ? &s->op : &s->sched;
}

/* The policy's answer for a trigger from |from| (|host|: its budget). */
static tg_trigger_decision_t ask(sim_t *s, tg_trigger_origin_t from,
                                 tg_trigger_budget_t *host, const char *group) {
  tg_trigger_state_t st = {.running = s->running,
                           .n_running = s->n_running,
                           .running_max = 4,
                           .queued = s->queued,
                           .queued_group = s->queued_group,
                           .coalesce_window_ms = 10000,
                           .own = own(s, from, host),
                           .hosts = from == TG_TRIGGER_FROM_HOST ? &s->hosts : NULL};
  tg_trigger_t t = {.from = from, .group = group};
  return tg_trigger_decide(&st, &t, s->now);
}

/* What trigger.c does with the decision: charge, begin (every clone
 * requested at once, as with standby connections) or queue. */
static tg_trigger_decision_t fire(sim_t *s, tg_trigger_origin_t from,
                                  tg_trigger_budget_t *host, const char *group) {
  tg_trigger_decision_t d = ask(s, from, host, group);
  if (d.verdict == TG_TRIGGER_BEGIN || d.verdict == TG_TRIGGER_QUEUE) {
    tg_trigger_charge(own(s, from, host), s->now);
    if (from == TG_TRIGGER_FROM_HOST) tg_trigger_charge(&s->hosts, s->now);
  }
  if (d.verdict == TG_TRIGGER_BEGIN)
    s->running[s->n_running++] = (tg_trigger_snap_view_t){
        .group = group, .started_ms = s->now, .none_requested = false};
  if (d.verdict == TG_TRIGGER_QUEUE) {
    s->queued = true;
    s->queued_group = group;
  }
  return d;
}

static void a_first_trigger_begins(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_BEGIN);
  assert_int_equal(s.op.used, 1);
}

/* Point 4: the host's clone was requested already, so its data after
 * that is not in the snapshot under way: a new one begins. */
static void a_host_trigger_after_its_clone_begins_anew(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  s.running[0] = (tg_trigger_snap_view_t){
      .group = "all", .started_ms = s.now, .origin_to_come = false};
  s.n_running = 1;
  s.now += 2000;
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_HOST, &s.host_a, "all").verdict,
                   TG_TRIGGER_BEGIN);
  assert_int_equal(s.n_running, 2);
}

static void a_host_trigger_before_its_clone_is_served(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  s.running[0] = (tg_trigger_snap_view_t){.group = "all", .started_ms = s.now};
  s.running[1] = (tg_trigger_snap_view_t){
      .group = "all", .started_ms = s.now, .origin_to_come = true};
  s.n_running = 2;
  s.now += 50;
  tg_trigger_decision_t d = fire(&s, TG_TRIGGER_FROM_HOST, &s.host_a, "all");
  assert_int_equal(d.verdict, TG_TRIGGER_SERVE);
  assert_int_equal(d.snap, 1);
  assert_int_equal(s.host_a.used, 0); /* serving is free */
  assert_int_equal(s.hosts.used, 0);
}

/* An operator's trigger: served only if no clone was requested at all. */
static void an_operator_trigger_is_served_only_before_any_clone(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  s.running[0] = (tg_trigger_snap_view_t){
      .group = "all", .started_ms = s.now, .none_requested = true,
      .origin_to_come = true};
  s.n_running = 1;
  assert_int_equal(ask(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_SERVE);
  assert_int_equal(ask(&s, TG_TRIGGER_FROM_SCHEDULE, NULL, "all").verdict,
                   TG_TRIGGER_SERVE);
  s.running[0].none_requested = false;
  assert_int_equal(ask(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_BEGIN);
}

static void serving_needs_the_window_and_a_covering_group(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  s.running[0] = (tg_trigger_snap_view_t){
      .group = "web", .started_ms = s.now, .none_requested = true};
  s.n_running = 1;
  /* "web" does not cover "all"; "all" covers "web". */
  assert_int_equal(ask(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_BEGIN);
  assert_int_equal(ask(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "web").verdict,
                   TG_TRIGGER_SERVE);
  s.running[0].group = "all";
  assert_int_equal(ask(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "db").verdict,
                   TG_TRIGGER_SERVE);
  s.now += 10000; /* the window is over */
  assert_int_equal(ask(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "db").verdict,
                   TG_TRIGGER_BEGIN);
  s.now -= 20000; /* a clock that went back serves nothing */
  assert_int_equal(ask(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "db").verdict,
                   TG_TRIGGER_BEGIN);
}

/* Point 3: snapshots under way do not hold a trigger back; beyond
 * running_max it queues, and later ones fold into the queued one. */
static void beyond_the_bound_a_trigger_queues_and_others_fold(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  s.op.limit = 100;
  for (int i = 0; i < 4; i++) {
    assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                     TG_TRIGGER_BEGIN);
    s.now += 1000;
  }
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "web").verdict,
                   TG_TRIGGER_QUEUE);
  assert_int_equal(s.op.used, 5);
  tg_trigger_decision_t d = fire(&s, TG_TRIGGER_FROM_HOST, &s.host_a, "web");
  assert_int_equal(d.verdict, TG_TRIGGER_FOLD);
  assert_false(d.widen);
  d = fire(&s, TG_TRIGGER_FROM_SCHEDULE, NULL, "all");
  assert_int_equal(d.verdict, TG_TRIGGER_FOLD);
  assert_true(d.widen);
  assert_int_equal(s.host_a.used, 0); /* folding is free */
  assert_int_equal(s.sched.used, 0);
}

/* Point 5: a storm from host A spends A's budget, then is refused; host
 * B and the operator still begin snapshots. */
static void a_host_storm_spends_only_its_own_budget(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  unsigned begun = 0, refused = 0;
  for (int i = 0; i < 45; i++) {
    tg_trigger_decision_t d = fire(&s, TG_TRIGGER_FROM_HOST, &s.host_a, "all");
    if (d.verdict == TG_TRIGGER_BEGIN) {
      begun++;
      s.n_running = 0; /* each stored before the next trigger */
    } else {
      assert_int_equal(d.verdict, TG_TRIGGER_REFUSE);
      assert_int_equal(d.budget, TG_TRIGGER_BUDGET_HOST);
      refused++;
    }
    s.now += 1000;
  }
  assert_int_equal(begun, 2); /* 45 s: within one window */
  assert_int_equal(refused, 43);
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_HOST, &s.host_b, "all").verdict,
                   TG_TRIGGER_BEGIN);
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_BEGIN);
}

/* All hosts' together have a ceiling too; the operators' budget is not
 * part of it. */
static void all_hosts_share_a_ceiling_operators_do_not(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  s.hosts.limit = 2;
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_HOST, &s.host_a, "all").verdict,
                   TG_TRIGGER_BEGIN);
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_HOST, &s.host_b, "all").verdict,
                   TG_TRIGGER_BEGIN);
  tg_trigger_decision_t d = fire(&s, TG_TRIGGER_FROM_HOST, &s.host_b, "all");
  assert_int_equal(d.verdict, TG_TRIGGER_REFUSE);
  assert_int_equal(d.budget, TG_TRIGGER_BUDGET_HOSTS);
  assert_int_equal(s.host_b.used, 1); /* a refusal costs nothing */
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_BEGIN);
}

static void operators_and_the_schedule_have_their_own(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  s.op.limit = 1;
  s.sched.limit = 1;
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_BEGIN);
  tg_trigger_decision_t d = fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all");
  assert_int_equal(d.verdict, TG_TRIGGER_REFUSE);
  assert_int_equal(d.budget, TG_TRIGGER_BUDGET_OPERATOR);
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_SCHEDULE, NULL, "all").verdict,
                   TG_TRIGGER_BEGIN);
  d = fire(&s, TG_TRIGGER_FROM_SCHEDULE, NULL, "all");
  assert_int_equal(d.verdict, TG_TRIGGER_REFUSE);
  assert_int_equal(d.budget, TG_TRIGGER_BUDGET_SCHEDULE);
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_HOST, &s.host_a, "all").verdict,
                   TG_TRIGGER_BEGIN);
}

/* A budget is per fixed minute: full at 59.999 s, new at 60 s; a clock
 * that went back starts a new window rather than refusing forever. */
static void a_budget_comes_back_each_minute(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  s.op.limit = 1;
  int64_t t0 = s.now;
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_BEGIN);
  s.n_running = 0;
  s.now = t0 + TG_TRIGGER_WINDOW_MS - 1;
  assert_int_equal(ask(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_REFUSE);
  s.now = t0 + TG_TRIGGER_WINDOW_MS;
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_BEGIN);
  s.n_running = 0;
  assert_int_equal(tg_trigger_left(&s.op, s.now), 0);
  s.now = t0;
  assert_int_equal(tg_trigger_left(&s.op, s.now), 1);
}

/* A queued snapshot is paid for when queued: over budget, a trigger that
 * would queue is refused; one that folds is not (it costs nothing). */
static void queueing_is_paid_folding_is_not(void **state) {
  (void)state;
  sim_t s;
  sim_init(&s);
  s.op.limit = 4;
  for (int i = 0; i < 4; i++)
    assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                     TG_TRIGGER_BEGIN);
  tg_trigger_decision_t d = fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all");
  assert_int_equal(d.verdict, TG_TRIGGER_REFUSE);
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_HOST, &s.host_a, "all").verdict,
                   TG_TRIGGER_QUEUE);
  assert_int_equal(fire(&s, TG_TRIGGER_FROM_OPERATOR, NULL, "all").verdict,
                   TG_TRIGGER_FOLD);
}

/* What folding a trigger does to the queued snapshot, host lists among
 * them: |queued_list| says the queued one is of a host list, else of
 * |queued_group|; the trigger is of a host list (|in_group|: within the
 * queued group) when |list|, else of |group|. */
static tg_trigger_decision_t fold(bool queued_list, const char *queued_group,
                                  bool list, bool in_group, const char *group) {
  tg_trigger_budget_t op = {.limit = 6};
  tg_trigger_state_t st = {.running_max = 4,
                           .queued = true,
                           .queued_host_list = queued_list,
                           .queued_group = queued_group,
                           .own = &op};
  tg_trigger_t t = {.from = TG_TRIGGER_FROM_ALERTMANAGER,
                    .group = list ? "" : group,
                    .host_list = list,
                    .in_queued_group = in_group};
  tg_trigger_decision_t d = tg_trigger_decide(&st, &t, 1000000);
  assert_int_equal(d.verdict, TG_TRIGGER_FOLD);
  assert_false(d.widen && d.join);
  return d;
}

static void a_host_list_joins_a_queued_list_and_widens_past_a_group(void **state) {
  (void)state;
  /* List into list: the union. */
  assert_true(fold(true, "", true, false, NULL).join);
  assert_false(fold(true, "", true, false, NULL).widen);
  /* A group into a list: every host. */
  assert_true(fold(true, "", false, false, "db").widen);
  assert_true(fold(true, "", false, false, "all").widen);
  assert_false(fold(true, "", false, false, "all").join);
  /* A list into a group holding its hosts: the group as it is. */
  tg_trigger_decision_t d = fold(false, "db", true, true, NULL);
  assert_false(d.widen);
  assert_false(d.join);
  assert_false(fold(false, "all", true, true, NULL).widen);
  /* A list into a group without all its hosts: every host. */
  assert_true(fold(false, "db", true, false, NULL).widen);
  assert_false(fold(false, "db", true, false, NULL).join);
  /* Groups as before. */
  assert_false(fold(false, "db", false, false, "db").widen);
  assert_true(fold(false, "db", false, false, "web").widen);
}

static void budget_names_are_the_metric_labels(void **state) {
  (void)state;
  assert_string_equal(tg_trigger_budget_name(TG_TRIGGER_BUDGET_HOST), "host");
  assert_string_equal(tg_trigger_budget_name(TG_TRIGGER_BUDGET_HOSTS), "hosts");
  assert_string_equal(tg_trigger_budget_name(TG_TRIGGER_BUDGET_OPERATOR),
                      "operator");
  assert_string_equal(tg_trigger_budget_name(TG_TRIGGER_BUDGET_SCHEDULE),
                      "schedule");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_first_trigger_begins),
      cmocka_unit_test(a_host_trigger_after_its_clone_begins_anew),
      cmocka_unit_test(a_host_trigger_before_its_clone_is_served),
      cmocka_unit_test(an_operator_trigger_is_served_only_before_any_clone),
      cmocka_unit_test(serving_needs_the_window_and_a_covering_group),
      cmocka_unit_test(beyond_the_bound_a_trigger_queues_and_others_fold),
      cmocka_unit_test(a_host_storm_spends_only_its_own_budget),
      cmocka_unit_test(all_hosts_share_a_ceiling_operators_do_not),
      cmocka_unit_test(operators_and_the_schedule_have_their_own),
      cmocka_unit_test(a_budget_comes_back_each_minute),
      cmocka_unit_test(queueing_is_paid_folding_is_not),
      cmocka_unit_test(a_host_list_joins_a_queued_list_and_widens_past_a_group),
      cmocka_unit_test(budget_names_are_the_metric_labels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
