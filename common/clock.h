/* The clock a daemon's decisions read: deadlines compared, ages, rates,
 * leases. One per daemon, wired by its main.c to a real clock and
 * replaced by tests with a simulated one, so that a scenario of minutes
 * runs in microseconds (as Perfetto's base::GetWallTimeNs behind its
 * service's dependencies).
 *
 * What it never covers: the timestamps a trace carries (BOOTTIME,
 * REALTIME of the machine in ClockSnapshot and the service's packets) are
 * data, read from the kernel's clocks where they are written; and timers
 * (uv_timer_t) stay the loop's. Where a timer's period is a decision, the
 * timer only wakes the owner, which decides from (state, tg_clock_ms()).
 *
 * Both readings are monotonic and share one origin: now_ns / 1e6 is
 * now_ms, give or take what a cached reading lags.
 */
#ifndef TRACEGATE_COMMON_CLOCK_H
#define TRACEGATE_COMMON_CLOCK_H

#include <stdint.h>

typedef struct tg_clock tg_clock_t;

struct tg_clock {
  uint64_t (*now_ms)(const tg_clock_t *k);
  uint64_t (*now_ns)(const tg_clock_t *k);
  void *ctx; /* the implementation's; borrowed */
};

static inline uint64_t tg_clock_ms(const tg_clock_t *k) { return k->now_ms(k); }
static inline uint64_t tg_clock_ns(const tg_clock_t *k) { return k->now_ns(k); }

/* CLOCK_MONOTONIC, read on every call. */
extern const tg_clock_t tg_clock_monotonic;

/* A clock that moves only when its owner moves it. The struct is the
 * owner's and must not move while a daemon holds &clock. */
typedef struct tg_clock_sim {
  tg_clock_t clock;
  uint64_t ns;
} tg_clock_sim_t;

/* |sim| reads |start_ms| until moved. */
void tg_clock_sim_init(tg_clock_sim_t *sim, uint64_t start_ms);
void tg_clock_sim_advance_ms(tg_clock_sim_t *sim, uint64_t ms);

#endif /* TRACEGATE_COMMON_CLOCK_H */
