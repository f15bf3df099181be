/* The real clock of a daemon that runs on a libuv loop (common/clock.h):
 * the loop's time, uv_now (cached at each loop iteration, no syscall)
 * and uv_hrtime, with CLOCK_REALTIME for the wall. It reads the loop, so
 * only the loop's thread may read it; work on a pool thread reads
 * tg_clock_monotonic (or a clock its owner gives it for that thread).
 * Apart from clock.c so that only the daemons that have a loop link
 * libuv through it. */
#ifndef TRACEGATE_COMMON_CLOCK_LOOP_H
#define TRACEGATE_COMMON_CLOCK_LOOP_H

#include <uv.h>

#include "common/clock.h"

/* |k| (the caller's, not moved while read) reads |loop| (borrowed for as
 * long as |k| is read). */
void tg_clock_loop_init(tg_clock_t *k, uv_loop_t *loop);

#endif /* TRACEGATE_COMMON_CLOCK_LOOP_H */
