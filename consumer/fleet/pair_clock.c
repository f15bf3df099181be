/* Two hosts' clocks from the requests between them (pair_clock.h). */
#include "consumer/fleet/pair_clock.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

/* The search on the drift: each round keeps two thirds of the interval,
 * so 120 rounds take 2e-3 down to far below 1e-20, past double's grain. */
#define SEARCH_ROUNDS 120

/* Whether |s| is a request seen whole on both ends: each side's answer
 * after its request, the server's time inside the client's wait, every
 * difference representable and within TG_PAIR_SPAN_MAX of |t0|, its
 * bounds meeting |prior| (NULL: none). */
/* Each side's own times in order: the client's wait (*rtt) and the
 * server's time (*served), each representable and within
 * TG_PAIR_SPAN_MAX. */
static bool own_times(const tg_pair_sample_t *s, int64_t *rtt,
                      int64_t *served) {
  return !__builtin_sub_overflow(s->c2, s->c1, rtt) && *rtt >= 0 &&
         *rtt <= TG_PAIR_SPAN_MAX &&
         !__builtin_sub_overflow(s->s2, s->s1, served) && *served >= 0 &&
         *served <= TG_PAIR_SPAN_MAX;
}

static bool usable(const tg_pair_sample_t *s, int64_t t0,
                   const tg_pair_prior_t *prior) {
  int64_t rtt, served, up, lo, at;
  if (!own_times(s, &rtt, &served) || served > rtt) return false;
  if (__builtin_sub_overflow(s->s1, s->c1, &up) ||
      __builtin_sub_overflow(s->s2, s->c2, &lo))
    return false;
  if (__builtin_sub_overflow(s->c2, t0, &at) || at < 0 ||
      at > TG_PAIR_SPAN_MAX)
    return false;
  if (prior && ((double)lo > prior->hi_ns || (double)up < prior->lo_ns))
    return false;
  return true;
}

typedef struct span {
  double lo, hi; /* the offsets allowed at t0 for one drift */
} span_t;

/* For drift |d|: the smallest upper bound and the largest lower bound on
 * the offset at t0 over the usable samples. */
static span_t allowed(const tg_pair_sample_t *s, size_t n, int64_t t0,
                      const tg_pair_prior_t *prior, double d) {
  span_t a = {0, 0};
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    if (!usable(&s[i], t0, prior)) continue;
    /* theta(c1) <= s1 - c1 and theta(c2) >= s2 - c2, each moved to t0. */
    double hi = (double)(s[i].s1 - s[i].c1) - d * (double)(s[i].c1 - t0);
    double lo = (double)(s[i].s2 - s[i].c2) - d * (double)(s[i].c2 - t0);
    if (first || hi < a.hi) a.hi = hi;
    if (first || lo > a.lo) a.lo = lo;
    first = false;
  }
  return a;
}

int tg_pair_clock_fit(const tg_pair_sample_t *s, size_t n,
                      const tg_pair_prior_t *prior, tg_pair_fit_t *out) {
  memset(out, 0, sizeof(*out));
  /* t0: the earliest send of a sample usable on its own (checked against
   * itself first, then against t0 as the search does). */
  bool have = false;
  for (size_t i = 0; i < n; i++)
    if (usable(&s[i], s[i].c1, prior) && (!have || s[i].c1 < out->t0)) {
      out->t0 = s[i].c1;
      have = true;
    }
  for (size_t i = 0; i < n; i++) {
    if (have && usable(&s[i], out->t0, prior))
      out->used++;
    else
      out->rejected++;
  }
  if (!out->used) return -EINVAL;
  int64_t last = out->t0;
  for (size_t i = 0; i < n; i++)
    if (usable(&s[i], out->t0, prior) && s[i].c2 > last) last = s[i].c2;
  if (last - out->t0 < TG_PAIR_DRIFT_SPAN_MIN) {
    span_t flat = allowed(s, n, out->t0, prior, 0);
    out->offset_ns = (flat.hi + flat.lo) / 2;
    out->margin_ns = (flat.hi - flat.lo) / 2;
    return 0;
  }
  /* The width hi - lo is concave in the drift (a minimum of lines minus
   * a maximum of lines): a ternary search finds its widest. */
  double a = -TG_PAIR_DRIFT_MAX, b = TG_PAIR_DRIFT_MAX;
  for (int r = 0; r < SEARCH_ROUNDS; r++) {
    double m1 = a + (b - a) / 3, m2 = b - (b - a) / 3;
    span_t s1 = allowed(s, n, out->t0, prior, m1),
           s2 = allowed(s, n, out->t0, prior, m2);
    if (s1.hi - s1.lo < s2.hi - s2.lo)
      a = m1;
    else
      b = m2;
  }
  out->drift = (a + b) / 2;
  span_t best = allowed(s, n, out->t0, prior, out->drift);
  out->offset_ns = (best.hi + best.lo) / 2;
  out->margin_ns = (best.hi - best.lo) / 2;
  return 0;
}

bool tg_pair_clock_usable(const tg_pair_sample_t *s,
                          const tg_pair_prior_t *prior) {
  return usable(s, s->c1, prior);
}

bool tg_pair_clock_orderable(const tg_pair_sample_t *s,
                             const tg_pair_prior_t *prior) {
  int64_t rtt, served, up;
  if (!own_times(s, &rtt, &served)) return false;
  if (__builtin_sub_overflow(s->s1, s->c1, &up) || up > TG_PAIR_SPAN_MAX ||
      up < -TG_PAIR_SPAN_MAX)
    return false;
  return !prior || (double)up >= prior->lo_ns;
}

double tg_pair_clock_theta(const tg_pair_fit_t *fit, int64_t t) {
  return fit->offset_ns + fit->drift * (double)(t - fit->t0);
}
