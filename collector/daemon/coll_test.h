/* collector/daemon/coll_test.h: the unit tests' hooks into the daemon
 * (coll.h), kept out of the header the product includes. */
#ifndef TRACEGATE_COLLECTOR_DAEMON_COLL_TEST_H
#define TRACEGATE_COLLECTOR_DAEMON_COLL_TEST_H

#include <stdint.h>

#include "collector/daemon/coll.h"

/* For tests: coll_loop_ms(c) returns now(ctx) from here on (a simulated
 * clock the test moves), instead of the loop's time. |ctx| is borrowed
 * for as long as |c| runs. */
void coll_set_clock_for_test(coll_t *c, int64_t (*now)(void *ctx), void *ctx);

#endif /* TRACEGATE_COLLECTOR_DAEMON_COLL_TEST_H */
