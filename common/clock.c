/* The real and the simulated clock of common/clock.h. */
#include "common/clock.h"

#include <time.h>

static uint64_t mono_ns(const tg_clock_t *k) {
  (void)k;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ms(const tg_clock_t *k) { return mono_ns(k) / 1000000; }

uint64_t tg__clock_realtime_ms(const tg_clock_t *k) {
  (void)k;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const tg_clock_t tg_clock_monotonic = {
    .now_ms = mono_ms, .now_ns = mono_ns, .now_wall_ms = tg__clock_realtime_ms};

static uint64_t sim_ns(const tg_clock_t *k) {
  return ((const tg_clock_sim_t *)k->ctx)->ns;
}

static uint64_t sim_ms(const tg_clock_t *k) { return sim_ns(k) / 1000000; }

static uint64_t sim_wall_ms(const tg_clock_t *k) {
  return ((const tg_clock_sim_t *)k->ctx)->wall_ms;
}

void tg_clock_sim_init(tg_clock_sim_t *sim, uint64_t start_ms) {
  sim->clock = (tg_clock_t){.now_ms = sim_ms, .now_ns = sim_ns,
                            .now_wall_ms = sim_wall_ms, .ctx = sim};
  sim->ns = start_ms * 1000000;
  sim->wall_ms = TG_CLOCK_SIM_WALL_START_MS;
}

void tg_clock_sim_advance_ms(tg_clock_sim_t *sim, uint64_t ms) {
  sim->ns += ms * 1000000;
  sim->wall_ms += ms;
}

void tg_clock_sim_set_wall_ms(tg_clock_sim_t *sim, uint64_t wall_ms) {
  sim->wall_ms = wall_ms;
}
