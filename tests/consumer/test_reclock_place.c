/* SPDX-License-Identifier: Apache-2.0 */
/* The placement of the re-clocking pass (consumer/fleet/reclock_place.c)
 * on requests made up here, at a window's edge: each window's line holds
 * the requests it was fitted on, and a request whose server half falls in
 * the next window (re-timed by that window's line, not its own) must be
 * held as well, or trace processor sees that server begin before its
 * client's call (seen once in CI: "early 1" in test_collector_links). */
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

static void a_request_across_a_window_edge_keeps_its_order(void **state) {
  (void)state;
  enum { PER_WINDOW = 10 };
  tg_reclock_t *rc = tg_reclock_new(2);
  assert_non_null(rc);
  rc->edges = calloc(1, sizeof(*rc->edges));
  assert_non_null(rc->edges);
  rc->n_edges = rc->cap_edges = 1;
  tg__rc_edge_t *e = &rc->edges[0];
  e->a = 0;
  e->b = 1;
  e->cap = 2 * PER_WINDOW + 1;
  e->s = calloc(e->cap, sizeof(*e->s));
  assert_non_null(e->s);
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
  /* Every request: the server's receive after the client's send, as
   * the rewrite re-times them (each host at its own half's time). */
  for (size_t i = 0; i < e->n; i++) {
    const tg_pair_sample_t *s = &e->s[i];
    double c1 = (double)s->c1 + tg__rc_corr_at(rc, 0, s->c1);
    double s1 = (double)s->s1 + tg__rc_corr_at(rc, 1, s->s1);
    if (s1 < c1 + TG_RECLOCK_BEGIN_SLACK_NS)
      fail_msg("request %zu (sent at %lld ns): the server's receive %.0f ns "
               "before its client's send", i, (long long)s->c1, c1 - s1);
  }
  /* The one across the edge included (it is the test's point). */
  assert_true((double)across.s1 + tg__rc_corr_at(rc, 1, across.s1) >
              (double)across.c1);
  assert_true(st.windows_lowered > 0);
  tg_reclock_free(rc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_request_across_a_window_edge_keeps_its_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
