/* A clone reader's rate floor (clone_rate.h). */
#include "consumer/clone_rate.h"

#include <string.h>

void tg_clone_rate_start(tg_clone_rate_t *r, int64_t now_ms, uint64_t bytes) {
  memset(r, 0, sizeof(*r));
  r->s[0] = (tg_clone_rate_sample_t){.t_ms = now_ms, .bytes = bytes};
  r->n = 1;
  r->last_ms = now_ms;
}

/* The newest sample at least |window_ms| older than |now_ms|, or NULL. */
static const tg_clone_rate_sample_t *base_of(const tg_clone_rate_t *r, int64_t now_ms,
                                         int64_t window_ms) {
  for (unsigned i = 0; i < r->n; i++) {
    const tg_clone_rate_sample_t *s =
        &r->s[(r->head + TG_CLONE_RATE_SAMPLES - i) % TG_CLONE_RATE_SAMPLES];
    if (now_ms - s->t_ms >= window_ms) return s;
  }
  return NULL;
}

/* min_bps x span_ms / 1000, saturated. */
static uint64_t owed(uint64_t min_bps, int64_t span_ms) {
  uint64_t span = (uint64_t)span_ms;
  if (span && min_bps > UINT64_MAX / span) return UINT64_MAX;
  return min_bps * span / 1000;
}

tg_clone_rate_verdict_t tg_clone_rate_look(tg_clone_rate_t *r, int64_t now_ms,
                                   uint64_t bytes, uint64_t min_bps,
                                   int64_t window_ms) {
  tg_clone_rate_verdict_t v = {0};
  if (!r->n || window_ms <= 0) return v;
  if (now_ms < r->last_ms) now_ms = r->last_ms;
  r->last_ms = now_ms;
  const tg_clone_rate_sample_t *base = base_of(r, now_ms, window_ms);
  if (base) {
    v.judged = true;
    v.span_ms = now_ms - base->t_ms;
    v.bytes = bytes >= base->bytes ? bytes - base->bytes : 0;
    v.slow = min_bps && v.bytes < owed(min_bps, v.span_ms);
  }
  int64_t spacing = window_ms / 8 ? window_ms / 8 : 1;
  if (now_ms - r->s[r->head].t_ms >= spacing) {
    r->head = (r->head + 1) % TG_CLONE_RATE_SAMPLES;
    r->s[r->head] = (tg_clone_rate_sample_t){.t_ms = now_ms, .bytes = bytes};
    if (r->n < TG_CLONE_RATE_SAMPLES) r->n++;
  }
  return v;
}
