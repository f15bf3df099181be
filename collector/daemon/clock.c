/* The daemon's clocks (clock.h). */
#include "collector/daemon/clock.h"
#include "collector/daemon/coll.h"
#include "collector/daemon/coll_test.h"
#include "common/clock.h"
#include "common/clock_loop.h"

void coll_clock_init(coll_t *c, uv_loop_t *loop) {
  tg_clock_loop_init(&c->loop_clock, loop);
  c->clock = &c->loop_clock;
  c->work_clock = &tg_clock_monotonic;
}

int64_t coll_wall_ms(const coll_t *c) {
  return (int64_t)tg_clock_wall_ms(c->clock);
}

int64_t coll_loop_ms(const coll_t *c) { return (int64_t)tg_clock_ms(c->clock); }

uint64_t coll_loop_ns(const coll_t *c) { return tg_clock_ns(c->clock); }

void coll_set_clock_for_test(coll_t *c, const tg_clock_t *clock) {
  c->clock = clock;
}

void coll_set_work_clock_for_test(coll_t *c, const tg_clock_t *clock) {
  c->work_clock = clock;
}
