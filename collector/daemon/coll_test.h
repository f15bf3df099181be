/* collector/daemon/coll_test.h: the unit tests' hooks into the daemon
 * (coll.h), kept out of the header the product includes. */
#ifndef TRACEGATE_COLLECTOR_DAEMON_COLL_TEST_H
#define TRACEGATE_COLLECTOR_DAEMON_COLL_TEST_H

#include <stdint.h>

#include "collector/daemon/coll.h"
#include "common/clock.h"

/* For tests: coll_loop_ms(c) and coll_loop_ns(c) read |clock| from here
 * on (a simulated one the test moves, common/clock.h), instead of the
 * loop's time. |clock| is borrowed for as long as |c| runs. */
void coll_set_clock_for_test(coll_t *c, const tg_clock_t *clock);
/* For tests: the work on pool threads (symbols.c's deadline) reads
 * |clock| instead of tg_clock_monotonic; it must be safe to read from
 * another thread (a simulated one the test does not move while a job
 * runs, or one of its own). Borrowed for as long as |c| runs. */
void coll_set_work_clock_for_test(coll_t *c, const tg_clock_t *clock);

#endif /* TRACEGATE_COLLECTOR_DAEMON_COLL_TEST_H */
