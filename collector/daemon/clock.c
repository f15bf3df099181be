/* The daemon's clocks (clock.h). */
#include <time.h>

#include "collector/daemon/clock.h"
#include "collector/daemon/coll.h"
#include "collector/daemon/coll_test.h"
#include "common/clock.h"

int64_t coll_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t loop_clock_ms(const tg_clock_t *k) { return uv_now(k->ctx); }

static uint64_t loop_clock_ns(const tg_clock_t *k) {
  (void)k;
  return uv_hrtime();
}

void coll_clock_init(coll_t *c, uv_loop_t *loop) {
  c->loop_clock = (tg_clock_t){
      .now_ms = loop_clock_ms, .now_ns = loop_clock_ns, .ctx = loop};
  c->clock = &c->loop_clock;
}

int64_t coll_loop_ms(const coll_t *c) { return (int64_t)tg_clock_ms(c->clock); }

uint64_t coll_loop_ns(const coll_t *c) { return tg_clock_ns(c->clock); }

void coll_set_clock_for_test(coll_t *c, const tg_clock_t *clock) {
  c->clock = clock;
}
