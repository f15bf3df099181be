/* Requests between a client and a server whose clocks differ by a known
 * offset and drift, on simulated time: the truth test_pair_clock and
 * bench_pair_clock hold the estimates to. Deterministic (a seeded
 * xorshift), so a run is the same on any machine.
 *
 * True time T runs from 0. The client's clock reads c_base + T; the
 * server's s_base + T + offset_ns + drift * T. A request leaves the client
 * at T_i = i * span_ns / n, reaches the server after fwd_min + jitter, is
 * answered after up to serve_max, and the answer reaches the client after
 * back_min + jitter. Jitter is mostly small with a long tail (u^4 of
 * jitter_ns), as delays on a busy network are.
 */
#ifndef TRACEGATE_TESTS_CONSUMER_PAIR_SIM_H
#define TRACEGATE_TESTS_CONSUMER_PAIR_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/fleet/pair_clock.h"

typedef struct pair_sim {
  size_t n;
  int64_t span_ns;
  int64_t c_base, s_base;
  double offset_ns, drift;
  int64_t fwd_min, back_min, jitter_ns, serve_max;
  uint64_t seed;
} pair_sim_t;

static inline uint64_t pair_sim_next(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* Uniform in [0, 1). */
static inline double pair_sim_u(uint64_t *x) {
  return (double)(pair_sim_next(x) >> 11) / 9007199254740992.0;
}

static inline int64_t pair_sim_client(const pair_sim_t *p, int64_t T) {
  return p->c_base + T;
}

static inline int64_t pair_sim_server(const pair_sim_t *p, int64_t T) {
  return p->s_base + T + (int64_t)(p->offset_ns + p->drift * (double)T);
}

/* The server's clock minus the client's at client time |t|: the truth. */
static inline double pair_sim_theta(const pair_sim_t *p, int64_t t) {
  int64_t T = t - p->c_base;
  return (double)(p->s_base - p->c_base) + p->offset_ns + p->drift * (double)T;
}

static inline int64_t pair_sim_jitter(const pair_sim_t *p, uint64_t *x) {
  double u = pair_sim_u(x);
  return (int64_t)((double)p->jitter_ns * u * u * u * u);
}

/* The |p->n| requests into |out|. */
static inline void pair_sim_run(const pair_sim_t *p, tg_pair_sample_t *out) {
  uint64_t x = p->seed ? p->seed : 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < p->n; i++) {
    int64_t T = (int64_t)((double)p->span_ns * (double)i / (double)p->n);
    int64_t at = T + p->fwd_min + pair_sim_jitter(p, &x);
    int64_t done = at + (int64_t)(pair_sim_u(&x) * (double)p->serve_max);
    int64_t back = done + p->back_min + pair_sim_jitter(p, &x);
    out[i].c1 = pair_sim_client(p, T);
    out[i].s1 = pair_sim_server(p, at);
    out[i].s2 = pair_sim_server(p, done);
    out[i].c2 = pair_sim_client(p, back);
  }
}

#endif
