/* Two hosts' clocks from the requests between them
 * (consumer/fleet/pair_clock.h), held to simulated clocks of known offset
 * and drift (pair_sim.h):
 *   - 10,000 requests over 30 s, the server 50 us ahead and drifting
 *     20 ppm, boots apart: the line found is within 10 us of the truth
 *     over the whole span, and no server time falls outside its client's
 *     request once placed;
 *   - paths of unequal least delay: every request still in order;
 *   - a clock that steps inside the window: the fit says no line keeps
 *     them all (negative margin);
 *   - what a hostile host may write (answers before requests, a server
 *     slower than its client's wait, times at INT64's ends, bounds far
 *     from what ClockSync says): not used, counted, nothing overflows
 *     (the sanitizers watch).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "consumer/fleet/pair_clock.h"
#include "tests/consumer/pair_sim.h"

#define N 10000

static tg_pair_sample_t samples[N];

/* The largest distance of |fit| to the truth at the requests' sends. */
static double worst_error(const pair_sim_t *p, const tg_pair_fit_t *fit) {
  double worst = 0;
  for (size_t i = 0; i < p->n; i++) {
    double e = fabs(tg_pair_clock_theta(fit, samples[i].c1) -
                    pair_sim_theta(p, samples[i].c1));
    if (e > worst) worst = e;
  }
  return worst;
}

/* Requests whose server times, placed on the client's clock by |fit|,
 * fall outside the client's send and receive. */
static size_t out_of_order(const pair_sim_t *p, const tg_pair_fit_t *fit) {
  size_t bad = 0;
  for (size_t i = 0; i < p->n; i++) {
    double s1 = (double)samples[i].s1 - tg_pair_clock_theta(fit, samples[i].c1);
    double s2 = (double)samples[i].s2 - tg_pair_clock_theta(fit, samples[i].c2);
    if (s1 < (double)samples[i].c1 || s2 > (double)samples[i].c2) bad++;
  }
  return bad;
}

static pair_sim_t datacenter(void) {
  return (pair_sim_t){
      .n = N,
      .span_ns = 30000000000ll,
      .c_base = 5000000000000ll,  /* booted 5000 s ago */
      .s_base = 12345678901234ll, /* booted earlier */
      .offset_ns = 50000,
      .drift = 20e-6,
      .fwd_min = 30000,
      .back_min = 30000,
      .jitter_ns = 400000,
      .serve_max = 50000,
      .seed = 7,
  };
}

static void offset_and_drift_within_10us(void **state) {
  (void)state;
  pair_sim_t p = datacenter();
  pair_sim_run(&p, samples);
  tg_pair_fit_t fit;
  assert_int_equal(tg_pair_clock_fit(samples, N, NULL, &fit), 0);
  assert_int_equal(fit.used, N);
  assert_int_equal(fit.rejected, 0);
  assert_true(fit.margin_ns >= 0);
  assert_true(worst_error(&p, &fit) <= 10000.0);
  assert_true(fabs(fit.drift - p.drift) < 1e-6);
  assert_int_equal(out_of_order(&p, &fit), 0);
}

/* Samples in any order give the same line. */
static void order_of_samples_does_not_matter(void **state) {
  (void)state;
  pair_sim_t p = datacenter();
  pair_sim_run(&p, samples);
  tg_pair_fit_t a, b;
  assert_int_equal(tg_pair_clock_fit(samples, N, NULL, &a), 0);
  for (size_t i = 0; i < N / 2; i++) {
    tg_pair_sample_t t = samples[i];
    samples[i] = samples[N - 1 - i];
    samples[N - 1 - i] = t;
  }
  assert_int_equal(tg_pair_clock_fit(samples, N, NULL, &b), 0);
  assert_int_equal(a.t0, b.t0);
  assert_true(fabs(a.offset_ns - b.offset_ns) < 1.0);
  assert_true(fabs(a.drift - b.drift) < 1e-12);
}

/* Unequal least delays (200 us out, 20 us back) bias any estimate by
 * half their difference; the line still keeps every request in order. */
static void unequal_paths_keep_every_request_in_order(void **state) {
  (void)state;
  pair_sim_t p = datacenter();
  p.fwd_min = 200000;
  p.back_min = 20000;
  pair_sim_run(&p, samples);
  tg_pair_fit_t fit;
  assert_int_equal(tg_pair_clock_fit(samples, N, NULL, &fit), 0);
  assert_true(fit.margin_ns >= 0);
  assert_int_equal(out_of_order(&p, &fit), 0);
  /* Within half the asymmetry plus the jitter's floor. */
  assert_true(worst_error(&p, &fit) <= 90000.0 + 10000.0);
}

/* The server's clock steps 5 ms halfway: no line keeps both halves, and
 * the fit says so. */
static void a_step_leaves_no_line(void **state) {
  (void)state;
  pair_sim_t p = datacenter();
  pair_sim_run(&p, samples);
  for (size_t i = N / 2; i < N; i++) {
    samples[i].s1 += 5000000;
    samples[i].s2 += 5000000;
  }
  tg_pair_fit_t fit;
  assert_int_equal(tg_pair_clock_fit(samples, N, NULL, &fit), 0);
  assert_true(fit.margin_ns < 0);
}

static void hostile_times_are_not_used(void **state) {
  (void)state;
  pair_sim_t p = datacenter();
  p.n = 100;
  pair_sim_run(&p, samples);
  /* An answer before its request, on each side. */
  samples[0].c2 = samples[0].c1 - 1;
  samples[1].s2 = samples[1].s1 - 1;
  /* A server that took longer than its client waited. */
  samples[2].s2 = samples[2].s1 + (samples[2].c2 - samples[2].c1) + 1;
  /* Times at INT64's ends: differences that do not fit. */
  samples[3].s1 = INT64_MAX;
  samples[3].s2 = INT64_MAX;
  samples[4].c1 = INT64_MIN;
  samples[5].c2 = INT64_MAX;
  samples[6].s1 = INT64_MIN;
  /* A round trip past a day. */
  samples[7].c2 = samples[7].c1 + TG_PAIR_SPAN_MAX + 1;
  /* Bounds a whole second off what ClockSync says (+/- 1 ms). */
  samples[8].s1 += 1000000000;
  samples[8].s2 += 1000000000;
  samples[9].s1 -= 1000000000;
  samples[9].s2 -= 1000000000;
  double truth = pair_sim_theta(&p, samples[50].c1);
  tg_pair_prior_t prior = {truth - 1e6, truth + 1e6};
  tg_pair_fit_t fit;
  assert_int_equal(tg_pair_clock_fit(samples, 100, &prior, &fit), 0);
  assert_int_equal(fit.used, 90);
  assert_int_equal(fit.rejected, 10);
  assert_true(fit.margin_ns >= 0);
  assert_true(fabs(tg_pair_clock_theta(&fit, samples[50].c1) - truth) <
              100000.0);
}

static void nothing_usable_is_an_error(void **state) {
  (void)state;
  tg_pair_fit_t fit;
  assert_int_equal(tg_pair_clock_fit(samples, 0, NULL, &fit), -EINVAL);
  assert_int_equal(fit.used, 0);
  tg_pair_sample_t bad = {.c1 = 10, .c2 = 5, .s1 = 0, .s2 = 1};
  assert_int_equal(tg_pair_clock_fit(&bad, 1, NULL, &fit), -EINVAL);
  assert_int_equal(fit.rejected, 1);
}

/* One request: its bounds are the whole answer, the middle of them, and
 * no drift from a span that short. */
static void one_request_gives_the_middle_of_its_bounds(void **state) {
  (void)state;
  tg_pair_sample_t s = {.c1 = 1000, .s1 = 51000, .s2 = 52000, .c2 = 4000};
  tg_pair_fit_t fit;
  assert_int_equal(tg_pair_clock_fit(&s, 1, NULL, &fit), 0);
  /* 48000 <= theta <= 50000. */
  assert_true(fit.drift == 0);
  assert_true(fabs(tg_pair_clock_theta(&fit, 1000) - 49000.0) < 1e-6);
  assert_true(fabs(fit.margin_ns - 1000.0) < 1e-6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(offset_and_drift_within_10us),
      cmocka_unit_test(order_of_samples_does_not_matter),
      cmocka_unit_test(unequal_paths_keep_every_request_in_order),
      cmocka_unit_test(a_step_leaves_no_line),
      cmocka_unit_test(hostile_times_are_not_used),
      cmocka_unit_test(nothing_usable_is_an_error),
      cmocka_unit_test(one_request_gives_the_middle_of_its_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
