/* A host's clock estimate: how the host's clocks relate to the
 * collector's, from ClockSync round trips. Pure: the owner takes the
 * samples (reads its clocks around the call, parses the answer) and says
 * when a burst or a re-sync period ends; this unit keeps the best sample
 * (the smallest round trip: half of it bounds the error) and the
 * estimates made from it. One estimator per host, written only by its
 * host's owner, on the loop thread.
 */
#ifndef TRACEGATE_CONSUMER_FLEET_CLOCK_SYNC_H
#define TRACEGATE_CONSUMER_FLEET_CLOCK_SYNC_H

#include <stdbool.h>
#include <stdint.h>

/* The builtin clocks read on both sides, in this order. */
enum { TG_CLK_BOOTTIME, TG_CLK_MONOTONIC, TG_CLK_REALTIME, TG_CLK_N };

typedef struct tg_clock_sample {
  uint64_t before[TG_CLK_N]; /* the collector's clocks, before the call */
  uint64_t remote[TG_CLK_N]; /* the host's, from ClockSyncResponse */
  uint64_t after[TG_CLK_N];  /* the collector's, after the reply */
} tg_clock_sample_t;

typedef struct tg_clock_sync {
  uint64_t period_ms; /* a new estimate at most this often between bursts */
  uint64_t next_ms;   /* the period ends then (owner's milliseconds) */
  /* The current burst's or period's best sample so far. */
  tg_clock_sample_t pending;
  bool has_pending;
  /* The estimate (the best of the last burst or period), the first one,
   * and how many were made; valid once |estimates| > 0. */
  tg_clock_sample_t best, first;
  unsigned estimates;
} tg_clock_sync_t;

/* Reads the collector's BOOTTIME, MONOTONIC and REALTIME (ns). */
void tg_clock_read(uint64_t out[TG_CLK_N]);

void tg_clock_sync_init(tg_clock_sync_t *cs, uint64_t period_ms);
/* The round trip of |s| (BOOTTIME, ns). */
uint64_t tg_clock_rtt(const tg_clock_sample_t *s);
/* The host's BOOTTIME minus the collector's at the middle of the round
 * trip; *uncertainty_ns: half the round trip. The host's reading is its
 * relay's word: subtracted unsigned, so a wild value cannot overflow. */
int64_t tg_clock_offset(const tg_clock_sample_t *s, uint64_t *uncertainty_ns);
/* Keeps |s| if it is the best of the current burst or period. */
void tg_clock_sync_keep(tg_clock_sync_t *cs, const tg_clock_sample_t *s);
/* Forgets the current burst's samples (a new connection starts its own). */
static inline void tg_clock_sync_restart(tg_clock_sync_t *cs) {
  cs->has_pending = false;
}
/* Whether a heartbeat's sample at |now_ms| ends the re-sync period. */
static inline bool tg_clock_sync_due(const tg_clock_sync_t *cs,
                                     uint64_t now_ms) {
  return now_ms >= cs->next_ms;
}
/* The burst or period ends at |now_ms|: its best sample becomes the
 * estimate, and the next period begins. True when a new estimate was
 * made (false: no sample came). */
bool tg_clock_sync_settle(tg_clock_sync_t *cs, uint64_t now_ms);

#endif /* TRACEGATE_CONSUMER_FLEET_CLOCK_SYNC_H */
