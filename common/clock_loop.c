/* The loop's clock (clock_loop.h). */
#include "common/clock_loop.h"

static uint64_t loop_ms(const tg_clock_t *k) { return uv_now(k->ctx); }

/* uv_hrtime has no loop: CLOCK_MONOTONIC, the origin uv_now counts from. */
static uint64_t loop_ns(const tg_clock_t *k) {
  (void)k;
  return uv_hrtime();
}

void tg_clock_loop_init(tg_clock_t *k, uv_loop_t *loop) {
  *k = (tg_clock_t){.now_ms = loop_ms, .now_ns = loop_ns,
                    .now_wall_ms = tg__clock_realtime_ms, .ctx = loop};
}
