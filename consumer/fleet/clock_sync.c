/* A host's clock estimate (clock_sync.h). */
#include "consumer/fleet/clock_sync.h"

#include <time.h>

void tg_clock_read(uint64_t out[TG_CLK_N]) {
  static const clockid_t ids[TG_CLK_N] = {CLOCK_BOOTTIME, CLOCK_MONOTONIC,
                                          CLOCK_REALTIME};
  for (int i = 0; i < TG_CLK_N; i++) {
    struct timespec ts;
    clock_gettime(ids[i], &ts);
    out[i] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  }
}

void tg_clock_sync_init(tg_clock_sync_t *cs, uint64_t period_ms) {
  *cs = (tg_clock_sync_t){.period_ms = period_ms};
}

uint64_t tg_clock_rtt(const tg_clock_sample_t *s) {
  return s->after[TG_CLK_BOOTTIME] - s->before[TG_CLK_BOOTTIME];
}

int64_t tg_clock_offset(const tg_clock_sample_t *s, uint64_t *uncertainty_ns) {
  uint64_t rtt = tg_clock_rtt(s);
  if (uncertainty_ns) *uncertainty_ns = rtt / 2;
  return (int64_t)(s->remote[TG_CLK_BOOTTIME] -
                   (s->before[TG_CLK_BOOTTIME] + rtt / 2));
}

void tg_clock_sync_keep(tg_clock_sync_t *cs, const tg_clock_sample_t *s) {
  if (!cs->has_pending || tg_clock_rtt(s) < tg_clock_rtt(&cs->pending))
    cs->pending = *s;
  cs->has_pending = true;
}

bool tg_clock_sync_settle(tg_clock_sync_t *cs, uint64_t now_ms) {
  cs->next_ms = now_ms + cs->period_ms;
  if (!cs->has_pending) return false;
  cs->best = cs->pending;
  cs->has_pending = false;
  if (!cs->estimates) cs->first = cs->best;
  cs->estimates++;
  return true;
}
