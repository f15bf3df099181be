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
 * now_ms and now_ns are monotonic and share one origin: now_ns / 1e6 is
 * now_ms, give or take what a cached reading lags. now_wall_ms is the
 * other kind: milliseconds since the epoch (CLOCK_REALTIME), for what a
 * decision writes down or compares as a date (a catalog's times, a state's
 * "since", an expiry in epoch seconds). It may jump either way when the
 * machine's time is set: never subtract two wall readings to measure a
 * span; that is what now_ms is for.
 */
#ifndef TRACEGATE_COMMON_CLOCK_H
#define TRACEGATE_COMMON_CLOCK_H

#include <stdint.h>

typedef struct tg_clock tg_clock_t;

struct tg_clock {
  uint64_t (*now_ms)(const tg_clock_t *k);
  uint64_t (*now_ns)(const tg_clock_t *k);
  uint64_t (*now_wall_ms)(const tg_clock_t *k);
  void *ctx; /* the implementation's; borrowed */
};

static inline uint64_t tg_clock_ms(const tg_clock_t *k) { return k->now_ms(k); }
static inline uint64_t tg_clock_ns(const tg_clock_t *k) { return k->now_ns(k); }
static inline uint64_t tg_clock_wall_ms(const tg_clock_t *k) {
  return k->now_wall_ms(k);
}

/* CLOCK_MONOTONIC (and CLOCK_REALTIME for the wall), read on every
 * call, from any thread. */
extern const tg_clock_t tg_clock_monotonic;

/* CLOCK_REALTIME in milliseconds: the wall reading of tg_clock_monotonic
 * and of the loop's clock (clock_loop.h); not for owners. */
uint64_t tg__clock_realtime_ms(const tg_clock_t *k);

/* A clock that moves only when its owner moves it. The struct is the
 * owner's and must not move while a daemon holds &clock. */
typedef struct tg_clock_sim {
  tg_clock_t clock;
  uint64_t ns;
  uint64_t wall_ms;
} tg_clock_sim_t;

/* The wall reading a simulated clock starts at: 2023-11-14T22:13:20Z, a
 * date far from 0 so that a reading mistaken for a span shows. */
#define TG_CLOCK_SIM_WALL_START_MS 1700000000000ull

/* |sim| reads |start_ms| (and TG_CLOCK_SIM_WALL_START_MS on the wall)
 * until moved. */
void tg_clock_sim_init(tg_clock_sim_t *sim, uint64_t start_ms);
/* Both readings move by |ms|, as time going by moves them. */
void tg_clock_sim_advance_ms(tg_clock_sim_t *sim, uint64_t ms);
/* The wall alone is set (either way), as an operator or NTP setting the
 * machine's time would; the monotonic readings do not move. */
void tg_clock_sim_set_wall_ms(tg_clock_sim_t *sim, uint64_t wall_ms);

#endif /* TRACEGATE_COMMON_CLOCK_H */
