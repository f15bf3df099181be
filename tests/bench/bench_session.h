/* SPDX-License-Identifier: Apache-2.0 */
/* The session the agent benches write into: a 64 MiB ring on a test
 * tracegated with track_event (only category "bench" enabled: Perfetto's
 * idiom, disable "*" and enable the list) and one data source of the
 * bench's own. */
#ifndef TRACEGATE_TESTS_BENCH_SESSION_H
#define TRACEGATE_TESTS_BENCH_SESSION_H

#include "test_service.h"
#include "tracegate/agent.h"
#include "tracegate/track_event.h"

/* Connects |c| to |ts|, enables the session with |ds_name| beside
 * track_event, and waits (up to a second) until |cat| and |ds| are both
 * enabled in this process. 0, or -1 after saying on stderr, as |prog|,
 * that the session did not start. */
int bench_session_start(const char *prog, const test_service_t *ts,
                        raw_consumer_t *c, const char *ds_name,
                        const tg_category_t *cat, const tg_ds_t *ds);

#endif /* TRACEGATE_TESTS_BENCH_SESSION_H */
