/* The perf boost's duty-cycle budget (collector/daemon/boost_budget.h) on
 * a simulated clock: what a ledger counts within the window, a host's
 * limit met exactly and passed by a millisecond, when it refills, a boost
 * cut short charged what it ran, the fleet's budget over several hosts, a
 * full ledger erring toward refusing, and hours of triggers every few
 * seconds never boosting a host past its share in any window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector/daemon/boost_budget.h"

#define S 1000LL
#define HOUR (3600 * S)
/* Any time: the daemon's clock is monotonic from wherever it started. */
#define T0 (5 * HOUR + 123)

/* The defaults: 10% of an hour a host, 5% the fleet, boosts of 60 s. */
static const coll_boost_budget_t kBudget = {
    .window_ms = HOUR, .boost_ms = 60 * S, .host_percent = 10,
    .fleet_percent = 5};

/* What the daemon does per host: ask with the host's and the fleet's
 * use, and charge the whole window when a boost starts. */
static coll_boost_verdict_t ask(const coll_boost_budget_t *b,
                                coll_boost_ledger_t *const *ls, size_t n,
                                size_t k, int64_t now) {
  int64_t fleet = 0;
  for (size_t i = 0; i < n; i++)
    fleet += coll_boost_ledger_used(ls[i], now, b->window_ms);
  coll_boost_verdict_t v = coll_boost_decide(
      b, coll_boost_ledger_used(ls[k], now, b->window_ms), fleet, n);
  if (v == COLL_BOOST_BUDGET_OK)
    coll_boost_ledger_add(ls[k], now, now + b->boost_ms, b->window_ms);
  return v;
}

static void ledger_counts_the_window_and_what_is_reserved(void **state) {
  (void)state;
  coll_boost_ledger_t l = {0};
  assert_int_equal(coll_boost_ledger_used(&l, T0, HOUR), 0);
  coll_boost_ledger_add(&l, T0, T0 + 10 * S, HOUR);
  coll_boost_ledger_add(&l, T0 + 20 * S, T0 + 30 * S, HOUR);
  /* Under way: the future part counts (it is reserved). */
  assert_int_equal(coll_boost_ledger_used(&l, T0 + 5 * S, HOUR), 20 * S);
  assert_int_equal(coll_boost_ledger_used(&l, T0 + 30 * S, HOUR), 20 * S);
  /* The window's start inside the first span: its rest counts. */
  assert_int_equal(coll_boost_ledger_used(&l, T0 + HOUR + 4 * S, HOUR),
                   6 * S + 10 * S);
  /* Exactly when the first span ends a window ago: nothing of it. */
  assert_int_equal(coll_boost_ledger_used(&l, T0 + HOUR + 10 * S, HOUR),
                   10 * S);
  assert_int_equal(coll_boost_ledger_used(&l, T0 + HOUR + 30 * S, HOUR), 0);
  /* A boost a window after them drops both. */
  coll_boost_ledger_add(&l, T0 + HOUR + 30 * S, T0 + HOUR + 31 * S, HOUR);
  assert_int_equal(l.n, 1);
  assert_int_equal(coll_boost_ledger_used(&l, T0 + HOUR + 31 * S, HOUR), S);
}

/* 10% of an hour is 360 s: six boosts of 60 s back to back fill it to
 * the millisecond; the seventh is refused until the first has left the
 * window, and a millisecond before that it is still refused. (A fleet
 * of one host at 100%: only the host's budget binds.) */
static void host_limit_met_exactly_then_refused_until_refill(void **state) {
  (void)state;
  coll_boost_ledger_t l = {0}, *ls[1] = {&l};
  coll_boost_budget_t host_only = kBudget;
  host_only.fleet_percent = 100;
  const coll_boost_budget_t *b = &host_only;
  assert_int_equal(coll_boost_host_limit(b), 360 * S);
  int64_t now = T0;
  for (int i = 0; i < 6; i++, now += 60 * S)
    assert_int_equal(ask(b, ls, 1, 0, now), COLL_BOOST_BUDGET_OK);
  assert_int_equal(coll_boost_ledger_used(&l, now, HOUR), 360 * S);
  assert_int_equal(ask(b, ls, 1, 0, now), COLL_BOOST_BUDGET_HOST);
  /* 60 s must leave the window: the first boost's [T0, T0 + 60 s]. */
  const coll_boost_ledger_t *cl = &l;
  int64_t refill =
      coll_boost_refill(&cl, 1, now, HOUR, coll_boost_host_limit(b), 60 * S);
  assert_int_equal(refill, T0 + 60 * S + HOUR);
  assert_int_equal(ask(b, ls, 1, 0, refill - 1), COLL_BOOST_BUDGET_HOST);
  assert_int_equal(ask(b, ls, 1, 0, refill), COLL_BOOST_BUDGET_OK);
  /* Room now: the refill is now. */
  coll_boost_ledger_t empty = {0};
  const coll_boost_ledger_t *ce = &empty;
  assert_int_equal(coll_boost_refill(&ce, 1, now, HOUR, 360 * S, 60 * S), now);
  /* A boost longer than the limit never fits. */
  assert_int_equal(coll_boost_refill(&ce, 1, now, HOUR, 30 * S, 60 * S), -1);
}

/* A boost that failed after 5 s of its 60 is charged 5 s once cut; a
 * cut later than its window's end charges the window; a span merged
 * away is not found. */
static void a_boost_cut_short_is_charged_what_it_ran(void **state) {
  (void)state;
  coll_boost_ledger_t l = {0};
  coll_boost_ledger_add(&l, T0, T0 + 60 * S, HOUR);
  assert_int_equal(coll_boost_ledger_cut(&l, T0, T0 + 5 * S), 5 * S);
  assert_int_equal(coll_boost_ledger_used(&l, T0 + 5 * S, HOUR), 5 * S);
  coll_boost_ledger_add(&l, T0 + 10 * S, T0 + 70 * S, HOUR);
  assert_int_equal(coll_boost_ledger_cut(&l, T0 + 10 * S, T0 + 90 * S), 60 * S);
  assert_int_equal(coll_boost_ledger_used(&l, T0 + 90 * S, HOUR), 65 * S);
  assert_int_equal(coll_boost_ledger_cut(&l, T0 + 1, T0 + 2), 0);
  /* A cut before its start (a clock read early) leaves nothing. */
  coll_boost_ledger_add(&l, T0 + 100 * S, T0 + 160 * S, HOUR);
  assert_int_equal(coll_boost_ledger_cut(&l, T0 + 100 * S, T0), 0);
}

/* Three hosts: the fleet's 5% of three hours of host-time is 540 s. Hosts
 * 0 and 1 take 240 s each (under their own 360), host 2 the last 60 s;
 * then any host, host 2 too with 300 s of its own left, is refused by the
 * fleet's budget, until its first boosts leave the window. */
static void fleet_budget_refuses_a_host_with_room_of_its_own(void **state) {
  (void)state;
  coll_boost_ledger_t l[3] = {{.n = 0}, {.n = 0}, {.n = 0}};
  coll_boost_ledger_t *ls[3] = {&l[0], &l[1], &l[2]};
  const coll_boost_budget_t *b = &kBudget;
  assert_int_equal(coll_boost_fleet_limit(b, 3), 540 * S);
  int64_t now = T0;
  for (int i = 0; i < 4; i++, now += 60 * S) {
    assert_int_equal(ask(b, ls, 3, 0, now), COLL_BOOST_BUDGET_OK);
    assert_int_equal(ask(b, ls, 3, 1, now), COLL_BOOST_BUDGET_OK);
  }
  assert_int_equal(ask(b, ls, 3, 2, now), COLL_BOOST_BUDGET_OK);
  now += 60 * S;
  assert_int_equal(ask(b, ls, 3, 2, now), COLL_BOOST_BUDGET_FLEET);
  assert_int_equal(ask(b, ls, 3, 0, now), COLL_BOOST_BUDGET_FLEET);
  /* The host's own budget is asked first: a host over both is refused
   * by its own. */
  coll_boost_budget_t tight = *b;
  tight.host_percent = 5; /* 180 s: host 0 used 240 */
  assert_int_equal(ask(&tight, ls, 3, 0, now), COLL_BOOST_BUDGET_HOST);
  /* Room for 60 s again once the first boosts of hosts 0 and 1 (60 s
   * each, at T0) left: 30 s into them both leave 60 s together. */
  const coll_boost_ledger_t *cl[3] = {&l[0], &l[1], &l[2]};
  int64_t refill = coll_boost_refill(cl, 3, now, HOUR,
                                     coll_boost_fleet_limit(b, 3), 60 * S);
  assert_int_equal(refill, T0 + 30 * S + HOUR);
  assert_int_equal(ask(b, ls, 3, 2, refill - 1), COLL_BOOST_BUDGET_FLEET);
  assert_int_equal(ask(b, ls, 3, 2, refill), COLL_BOOST_BUDGET_OK);
}

/* More boosts than a ledger holds within one window (short ones, cut at
 * 1 s): it keeps COLL_BOOST_LEDGER_MAX spans and counts at least what
 * they ran, never less, and all of it once the window passes. */
static void a_full_ledger_merges_toward_refusing(void **state) {
  (void)state;
  coll_boost_ledger_t l = {0};
  int64_t now = T0, ran = 0;
  for (int i = 0; i < 3 * COLL_BOOST_LEDGER_MAX; i++, now += 10 * S) {
    coll_boost_ledger_add(&l, now, now + 60 * S, HOUR);
    ran += coll_boost_ledger_cut(&l, now, now + S);
    assert_true(l.n <= COLL_BOOST_LEDGER_MAX);
    assert_int_equal(coll_boost_ledger_used(&l, now + S, HOUR), ran);
    for (uint32_t k = 1; k < l.n; k++)
      assert_true(l.spans[k - 1].end_ms <= l.spans[k].start_ms);
  }
  assert_int_equal(ran, 3 * COLL_BOOST_LEDGER_MAX * S);
  /* Later, within a window of the first: the merged spans count no less
   * than the boosts themselves would. */
  int64_t later = T0 + HOUR + 5 * S;
  int64_t exact = 0;
  for (int i = 0; i < 3 * COLL_BOOST_LEDGER_MAX; i++) {
    int64_t s = T0 + i * 10 * S, e = s + S, from = later - HOUR;
    if (e > from) exact += e - (s > from ? s : from);
  }
  assert_true(coll_boost_ledger_used(&l, later, HOUR) >= exact);
  assert_int_equal(coll_boost_ledger_used(&l, now + HOUR, HOUR), 0);
}

/* A host firing a trigger every 30 s for six hours (a local user on the
 * producer socket), each starting a 10 s boost: in every window-long
 * stretch it is boosted at most 10%, and it does use its share (36
 * boosts a window: the ledger holds them all, so it is refused only when
 * the next boost would not fit by the next trigger). */
static void six_hours_of_triggers_keep_a_host_to_its_share(void **state) {
  (void)state;
  coll_boost_budget_t b = {.window_ms = HOUR, .boost_ms = 10 * S,
                           .host_percent = 10, .fleet_percent = 100};
  coll_boost_ledger_t l = {0}, *ls[1] = {&l};
  /* Every boost started, to measure each stretch against. */
  static int64_t starts[6 * 120];
  size_t n = 0, refused = 0;
  for (int64_t now = T0; now < T0 + 6 * HOUR; now += 30 * S) {
    if (ask(&b, ls, 1, 0, now) == COLL_BOOST_BUDGET_OK) starts[n++] = now;
    else refused++;
  }
  assert_true(refused > 0);
  int64_t limit = coll_boost_host_limit(&b);
  for (int64_t end = T0 + HOUR; end <= T0 + 6 * HOUR; end += 5 * S) {
    int64_t boosted = 0;
    for (size_t i = 0; i < n; i++) {
      int64_t s = starts[i], e = s + b.boost_ms, from = end - HOUR;
      s = s > from ? s : from;
      e = e < end ? e : end;
      if (e > s) boosted += e - s;
    }
    assert_true(boosted <= limit);
    /* Refusals only when the next boost would not fit. */
    assert_true(boosted + b.boost_ms + 30 * S > limit);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ledger_counts_the_window_and_what_is_reserved),
      cmocka_unit_test(host_limit_met_exactly_then_refused_until_refill),
      cmocka_unit_test(a_boost_cut_short_is_charged_what_it_ran),
      cmocka_unit_test(fleet_budget_refuses_a_host_with_room_of_its_own),
      cmocka_unit_test(a_full_ledger_merges_toward_refusing),
      cmocka_unit_test(six_hours_of_triggers_keep_a_host_to_its_share),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
