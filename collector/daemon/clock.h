/* The daemon's clocks (clock.c), below every other file of the daemon:
 * one tg_clock_t (common/clock.h) that its decisions read on the loop,
 * the loop's own (common/clock_loop.h) or a simulated one in tests
 * (coll_test.h), giving both its monotonic time and the wall-clock
 * milliseconds of what it writes down as dates; and the clock its work on
 * pool threads reads (c->work_clock). Calls nothing of the daemon's.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_CLOCK_H
#define TRACEGATE_COLLECTOR_DAEMON_CLOCK_H

#include <stdint.h>
#include <uv.h>

typedef struct coll coll_t;

/* c->clock becomes the time of |loop| (c->loop_clock), c->work_clock
 * tg_clock_monotonic: coll_prepare's first step. */
void coll_clock_init(coll_t *c, uv_loop_t *loop);
/* Epoch milliseconds from c->clock: a date written down (a host's state
 * "since"), never a span. */
int64_t coll_wall_ms(const coll_t *c);
/* The daemon's monotonic milliseconds: c->clock, the loop's time
 * (uv_now, no syscall) unless a test set its own clock (coll_test.h). The
 * trigger budgets and the coalescing window (trigger.c), a snapshot's
 * start, its hosts' clone_timeout and its duration (snap.c), the HTTP
 * servers' rates and ages all read this one. */
int64_t coll_loop_ms(const coll_t *c);
/* The same clock in nanoseconds (uv_hrtime on the loop's). */
uint64_t coll_loop_ns(const coll_t *c);

#endif /* TRACEGATE_COLLECTOR_DAEMON_CLOCK_H */
