/* SPDX-License-Identifier: Apache-2.0 */
/* The placement of the re-clocking pass (consumer/fleet/reclock_place.c)
 * on requests made up here, at a window's edge: each window's line holds
 * the requests it was fitted on, and a request whose server half falls in
 * the next window (re-timed by that window's line, not its own) must be
 * held as well, or trace processor sees that server begin before its
 * client's call (seen once in CI: "early 1" in test_collector_links); and
 * so must a request the fit did not use, whose server's slice ended after
 * its client's (seen again in CI). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "consumer/fleet/reclock_internal.h"

#define US 1000ll
#define S (1000000000ll)

/* A request sent at |c1| by host 0 (the client) and read by host 1 at
 * its send plus 20 us plus |theta| (host 1's clock ahead by |theta| as
 * pass 1 placed it), answered 30 us later, the answer read 100 us after
 * the send. */
static tg_pair_sample_t request(int64_t c1, int64_t theta) {
  int64_t s1 = c1 + 20 * US + theta;
  return (tg_pair_sample_t){.c1 = c1, .c2 = c1 + 100 * US, .s1 = s1,
                            .s2 = s1 + 30 * US};
}

/* Two hosts and one edge, client 0 to server 1, room for |cap| samples. */
static tg_reclock_t *two_hosts(size_t cap) {
  tg_reclock_t *rc = tg_reclock_new(2);
  assert_non_null(rc);
  rc->edges = calloc(1, sizeof(*rc->edges));
  assert_non_null(rc->edges);
  rc->n_edges = rc->cap_edges = 1;
  tg__rc_edge_t *e = &rc->edges[0];
  e->a = 0;
  e->b = 1;
  e->cap = cap;
  e->s = calloc(e->cap, sizeof(*e->s));
  assert_non_null(e->s);
  return rc;
}

/* Every request of the edge as the rewrite re-times it (each host at
 * its own half's time): the server's receive after the client's send. */
static void assert_every_server_after_its_client(const tg_reclock_t *rc) {
  const tg__rc_edge_t *e = &rc->edges[0];
  for (size_t i = 0; i < e->n; i++) {
    const tg_pair_sample_t *s = &e->s[i];
    double c1 = (double)s->c1 + tg__rc_corr_at(rc, 0, s->c1);
    double s1 = (double)s->s1 + tg__rc_corr_at(rc, 1, s->s1);
    if (s1 < c1 + TG_RECLOCK_BEGIN_SLACK_NS)
      fail_msg("request %zu (sent at %lld ns): the server's receive %.0f ns "
               "before its client's send", i, (long long)s->c1, c1 - s1);
  }
}

static void a_request_across_a_window_edge_keeps_its_order(void **state) {
  (void)state;
  enum { PER_WINDOW = 10 };
  tg_reclock_t *rc = two_hosts(2 * PER_WINDOW + 1);
  tg__rc_edge_t *e = &rc->edges[0];
  /* The first window: host 1's clock where pass 1 put it. The second:
   * 100 us ahead (a host's drift, or its ClockSync estimate's error). */
  for (int64_t i = 0; i < PER_WINDOW; i++) {
    e->s[e->n++] = request(i * S, 0);
    e->s[e->n++] = request(TG_RECLOCK_WINDOW_NS + i * S, 100 * US);
  }
  /* Sent 10 us before the edge: fitted in the first window, read 10 us
   * after it, where the second window's line re-times the server. */
  const tg_pair_sample_t across = request(TG_RECLOCK_WINDOW_NS - 10 * US, 0);
  e->s[e->n++] = across;

  tg_reclock_host_t h[2] = {{.bound_ns = 1000 * US}, {.bound_ns = 1000 * US}};
  tg_reclock_stats_t st = {0};
  assert_int_equal(tg_reclock_place(rc, h, &st), 1);
  assert_true(h[0].anchor);
  assert_true(h[1].moved);
  assert_every_server_after_its_client(rc);
  /* The one across the edge included (it is the test's point). */
  assert_true((double)across.s1 + tg__rc_corr_at(rc, 1, across.s1) >
              (double)across.c1);
  assert_true(st.windows_lowered > 0);
  tg_reclock_free(rc);
}

/* A request whose server went on past its client's end (served longer
 * than the client waited: the server's slice ends after it answered, on a
 * loaded machine) is not fitted on, yet trace processor joins it only if
 * its server begins after its client: its upper bound holds the line all
 * the same (seen in CI: "early 1", flows one short of the pairs, in
 * test_collector_links). */
static void a_request_not_fitted_on_keeps_its_order(void **state) {
  (void)state;
  enum { N = 20 };
  tg_reclock_t *rc = two_hosts(N + 1);
  tg__rc_edge_t *e = &rc->edges[0];
  /* Bounds [-50 us, 20 us] each: the fitted line is their middle. */
  for (int64_t i = 0; i < N; i++) e->s[e->n++] = request(i * S / 4, 0);
  /* Read 20 us before its send as pass 1 placed it (theta at most -20
   * us, which every other request allows), answered 200 us later, its
   * client having waited 100 us: not usable for the fit. */
  int64_t c1 = 2 * S + S / 8;
  const tg_pair_sample_t late = {.c1 = c1, .c2 = c1 + 100 * US,
                                 .s1 = c1 - 20 * US,
                                 .s2 = c1 - 20 * US + 200 * US};
  e->s[e->n++] = late;
  assert_false(tg_pair_clock_usable(&late, NULL));
  assert_true(tg_pair_clock_orderable(&late, NULL));

  tg_reclock_host_t h[2] = {{.bound_ns = 1000 * US}, {.bound_ns = 1000 * US}};
  tg_reclock_stats_t st = {0};
  assert_int_equal(tg_reclock_place(rc, h, &st), 1);
  assert_every_server_after_its_client(rc);
  assert_true(st.windows_lowered > 0);
  tg_reclock_free(rc);
}

/* What is held and what is not: a request whose own times contradict
 * themselves, or whose upper bound lies below what ClockSync allows,
 * moves no line. */
static void only_sane_upper_bounds_hold(void **state) {
  (void)state;
  tg_pair_prior_t prior = {-1000 * US, 1000 * US};
  tg_pair_sample_t ok = request(S, 0);
  assert_true(tg_pair_clock_orderable(&ok, &prior));
  tg_pair_sample_t back = ok;
  back.c2 = back.c1 - 1; /* an answer before its request */
  assert_false(tg_pair_clock_orderable(&back, &prior));
  back = ok;
  back.s2 = back.s1 - 1;
  assert_false(tg_pair_clock_orderable(&back, &prior));
  tg_pair_sample_t past = request(S, -2000 * US); /* below the prior */
  assert_false(tg_pair_clock_orderable(&past, &prior));
  assert_true(tg_pair_clock_orderable(&past, NULL));
  tg_pair_sample_t wild = {.c1 = INT64_MIN + 1, .c2 = INT64_MIN + 2,
                           .s1 = INT64_MAX - 2, .s2 = INT64_MAX - 1};
  assert_false(tg_pair_clock_orderable(&wild, NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_request_across_a_window_edge_keeps_its_order),
      cmocka_unit_test(a_request_not_fitted_on_keeps_its_order),
      cmocka_unit_test(only_sane_upper_bounds_hold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
