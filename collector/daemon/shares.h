/* SPDX-License-Identifier: Apache-2.0 */
/* Each stored snapshot's function shares (function_shares_top in the
 * config; 50 by default, 0: off): per host, the top functions of its CPU
 * profile by CPU time anywhere in its stacks, and one "[rest]" row, into
 * the catalog (catalog.h, set_shares), so that a function's share across
 * snapshots is one query, never a read of traces. docs/collector.md,
 * "Function shares".
 *
 * Names: what the profile gives (consumer/profile/profile.h,
 * tg_prof_function_shares): the hosts' interned function names, else the
 * snapshot's symbols (with symbolize on, a snapshot's shares are made
 * once its symbolization ended, whatever its outcome), else "[unknown]"
 * per mapping; samples without a stack keep their pseudo names.
 *
 * One snapshot at a time on a thread of libuv's pool: the whole trace,
 * then its symbols, fed to one profile (bounded by tg_prof_limits_t's
 * defaults); host index k's host is machine k + 1. The others wait in a
 * bounded queue (COLL_SHARES_QUEUE; past it the newest is dropped,
 * logged and counted). The loop alone touches the store: it opens the
 * files (a bucket's are downloaded by the work, off the store's thread)
 * and writes the rows. A failure leaves the snapshot without shares,
 * logged and counted; its trace is as stored.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_SHARES_H
#define TRACEGATE_COLLECTOR_DAEMON_SHARES_H

#include <stdint.h>
#include <stdio.h>

#include "collector/daemon/coll.h"

#define COLL_SHARES_QUEUE 64

/* Snapshot |id| is stored live and its symbols (if any) are done: make
 * its shares when function_shares_top is not 0. */
void coll_shares_queue(coll_t *c, uint64_t id);
/* The daemon stops: the queue is forgotten and freed (at once, or when
 * the work under way comes back: it ends at its next piece and stores
 * nothing); no snapshot is queued after. */
void coll_shares_stop(coll_t *c);
/* tracegate_collector_function_shares_total{outcome=stored|failed|dropped} */
void coll_shares_metrics(const coll_t *c, FILE *f);

#endif /* TRACEGATE_COLLECTOR_DAEMON_SHARES_H */
