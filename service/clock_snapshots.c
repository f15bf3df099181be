/* Pending clock snapshots: Perfetto's keep-or-drop rule on a bounded ring.
 * See clock_snapshots.h for the policy. */
#include <time.h>

#include "service/clock_snapshots.h"

const uint32_t tg_clock_snapshot_builtin[TG_CLOCK_SNAPSHOT_CLOCKS] = {
    6 /* BOOTTIME */, 3 /* MONOTONIC */, 4 /* MONOTONIC_COARSE */,
    5 /* MONOTONIC_RAW */, 1 /* REALTIME */, 2 /* REALTIME_COARSE */,
};

void tg__clock_sample_now(tg_clock_sample_t *out) {
  static const clockid_t ids[TG_CLOCK_SNAPSHOT_CLOCKS] = {
      CLOCK_BOOTTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE,
      CLOCK_MONOTONIC_RAW, CLOCK_REALTIME, CLOCK_REALTIME_COARSE,
  };
  for (unsigned i = 0; i < TG_CLOCK_SNAPSHOT_CLOCKS; i++) {
    struct timespec ts;
    clock_gettime(ids[i], &ts);
    out->ns[i] = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  }
}

/* Whether some clock moved by TG_CLOCK_SNAPSHOT_DRIFT_NS or more against
 * BOOTTIME between |old| and |now|. */
static bool drifted(const tg_clock_sample_t *old, const tg_clock_sample_t *now) {
  int64_t boot = (int64_t)(now->ns[0] - old->ns[0]);
  for (unsigned i = 1; i < TG_CLOCK_SNAPSHOT_CLOCKS; i++) {
    int64_t d = boot - (int64_t)(now->ns[i] - old->ns[i]);
    if (d >= TG_CLOCK_SNAPSHOT_DRIFT_NS || d <= -TG_CLOCK_SNAPSHOT_DRIFT_NS)
      return true;
  }
  return false;
}

bool tg__clock_ring_offer(tg_clock_ring_t *r, const tg_clock_sample_t *now) {
  if (r->n) {
    unsigned newest = (r->head + r->n - 1) % TG_CLOCK_SNAPSHOT_RING;
    if (!drifted(&r->s[newest], now)) return false;
  }
  if (r->n == TG_CLOCK_SNAPSHOT_RING) { /* the oldest goes */
    r->head = (r->head + 1) % TG_CLOCK_SNAPSHOT_RING;
    r->n--;
  }
  r->s[(r->head + r->n) % TG_CLOCK_SNAPSHOT_RING] = *now;
  r->n++;
  return true;
}

bool tg__clock_ring_take(tg_clock_ring_t *r, tg_clock_sample_t *out) {
  if (!r->n) return false;
  *out = r->s[r->head];
  r->head = (r->head + 1) % TG_CLOCK_SNAPSHOT_RING;
  r->n--;
  return true;
}
