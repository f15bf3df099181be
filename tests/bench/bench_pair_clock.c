/* Two hosts placed against each other (issue 79 point 4): the error of
 * their relative clock over a recording, with ClockSync alone (each host
 * synced to the collector by the best of a five-call burst, then one
 * offset until the next sync, as Perfetto's RemoteClockSync is read) and
 * with the requests between them (consumer/fleet/pair_clock.h), on
 * simulated clocks of known offset and drift (tests/consumer/pair_sim.h),
 * and the CPU the fit costs per request next to a pass over the same
 * samples that only reads them.
 *
 *   bench_pair_clock [REQUESTS [SECONDS [DRIFT_PPM]]]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_args.h"
#include "consumer/fleet/pair_clock.h"
#include "tests/consumer/pair_sim.h"

/* The goal the issue sets for a host's placement. */
#define GOAL_US 10.0
/* ClockSync's re-sync period (docs/merge.md, "Re-syncs"). */
#define SYNC_PERIOD_NS 30000000000ll

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_pair_clock [REQUESTS [SECONDS [DRIFT_PPM]]]\n"
             "  the relative clock error of two hosts, ClockSync alone and "
             "with the requests\n  between them (defaults: 10000 requests "
             "over 30 s, 20 ppm)\n");
}

/* One host's ClockSync estimate of its offset to the collector at true
 * time |T|: the best (shortest) of five round trips through the same
 * network as the requests; the host's clock is |off| + |drift| * T ahead. */
static double clocksync(const pair_sim_t *p, uint64_t *x, int64_t T,
                        double off, double drift) {
  double best = 0;
  int64_t best_rtt = -1;
  for (int i = 0; i < 5; i++) {
    int64_t a = T, at = a + p->fwd_min + pair_sim_jitter(p, x);
    int64_t b = at + p->back_min + pair_sim_jitter(p, x);
    double remote = (double)at + off + drift * (double)at;
    if (best_rtt < 0 || b - a < best_rtt) {
      best_rtt = b - a;
      best = remote - (double)(a + b) / 2;
    }
    T = b;
  }
  return best;
}

int main(int argc, char **argv) {
  uint64_t requests = 10000, seconds = 30, ppm = 20;
  const bench_arg_t args[] = {{"REQUESTS", 2, 10000000, &requests},
                              {"SECONDS", 2, 86400, &seconds},
                              {"DRIFT_PPM", 0, 500, &ppm}};
  int rv = bench_args_parse("bench_pair_clock", argc, argv, args, 3, usage,
                            NULL);
  if (rv) return rv < 0 ? 2 : 0;
  /* The client is on the collector's clock; the server 50 us and |ppm|
   * ahead of it. Each host's ClockSync sees the same network. */
  pair_sim_t p = {
      .n = (size_t)requests,
      .span_ns = (int64_t)seconds * 1000000000ll,
      .c_base = 0,
      .s_base = 0,
      .offset_ns = 50000,
      .drift = (double)ppm * 1e-6,
      /* Unequal least delays, as real paths have: an error of half
       * their difference that no estimate can see. */
      .fwd_min = 30000,
      .back_min = 38000,
      .jitter_ns = 400000,
      .serve_max = 50000,
      .seed = 11,
  };
  tg_pair_sample_t *s = malloc(p.n * sizeof(*s));
  if (!s) return 1;
  pair_sim_run(&p, s);

  /* ClockSync alone: an estimate per period, used until the next. */
  uint64_t x = 0x2545f4914f6cdd1dull;
  double worst_sync = 0, sum_sync = 0;
  double est = 0;
  int64_t next = 0;
  for (size_t i = 0; i < p.n; i++) {
    int64_t T = s[i].c1;
    if (T >= next) {
      est = clocksync(&p, &x, T, p.offset_ns, p.drift) -
            clocksync(&p, &x, T, 0, 0);
      next = T + SYNC_PERIOD_NS;
    }
    double e = fabs(est - pair_sim_theta(&p, s[i].c1));
    sum_sync += e;
    if (e > worst_sync) worst_sync = e;
  }

  /* With the requests. */
  double t0 = cpu_s();
  tg_pair_fit_t fit;
  if (tg_pair_clock_fit(s, p.n, NULL, &fit) != 0) return 1;
  double fit_s = cpu_s() - t0;
  double worst = 0, sum = 0;
  size_t before = 0, before_sync = 0;
  for (size_t i = 0; i < p.n; i++) {
    double e = fabs(tg_pair_clock_theta(&fit, s[i].c1) -
                    pair_sim_theta(&p, s[i].c1));
    sum += e;
    if (e > worst) worst = e;
    if ((double)s[i].s1 - tg_pair_clock_theta(&fit, s[i].c1) <
            (double)s[i].c1 ||
        (double)s[i].s2 - tg_pair_clock_theta(&fit, s[i].c2) > (double)s[i].c2)
      before++;
  }
  /* The baseline: one pass reading every sample. */
  t0 = cpu_s();
  volatile int64_t sink = 0;
  for (size_t i = 0; i < p.n; i++)
    sink += s[i].s1 - s[i].c1 + s[i].s2 - s[i].c2;
  double pass_s = cpu_s() - t0;
  (void)sink;
  x = 0x2545f4914f6cdd1dull;
  next = 0;
  for (size_t i = 0; i < p.n; i++) {
    if (s[i].c1 >= next) {
      est = clocksync(&p, &x, s[i].c1, p.offset_ns, p.drift) -
            clocksync(&p, &x, s[i].c1, 0, 0);
      next = s[i].c1 + SYNC_PERIOD_NS;
    }
    if ((double)s[i].s1 - est < (double)s[i].c1 ||
        (double)s[i].s2 - est > (double)s[i].c2)
      before_sync++;
  }

  printf("bench_pair_clock: %zu requests over %llu s, server +50 us, "
         "%llu ppm, least delays 30/38 us (true error floor 4 us)\n", p.n,
         (unsigned long long)seconds, (unsigned long long)ppm);
  printf("  ClockSync alone (best of 5, every 30 s): worst %8.1f us, "
         "mean %8.1f us; requests out of order: %zu\n",
         worst_sync / 1e3, sum_sync / (double)p.n / 1e3, before_sync);
  printf("  with the requests:                       worst %8.1f us, "
         "mean %8.1f us; requests out of order: %zu (goal <= %.0f us, 0)\n",
         worst / 1e3, sum / (double)p.n / 1e3, before, GOAL_US);
  printf("  fit: drift %+.3f ppm (true %+.3f), margin %.1f us, %zu used, "
         "%zu rejected\n", fit.drift * 1e6, p.drift * 1e6,
         fit.margin_ns / 1e3, fit.used, fit.rejected);
  printf("  cost: %.0f ns CPU per request (a pass reading them: %.1f ns)\n",
         fit_s * 1e9 / (double)p.n, pass_s * 1e9 / (double)p.n);
  free(s);
  return 0;
}
