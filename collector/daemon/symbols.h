/* The collector's symbolization of each stored snapshot (`symbolize` in
 * the config; off by default): the frames of its CPU profiles named from
 * debug files found by build id, as `tracegate symbolize` names them
 * (consumer/symbolize/symbolize.h), per machine. docs/collector.md,
 * "Symbols of each snapshot".
 *
 * A snapshot is listed as soon as it is stored; its symbols come after,
 * beside it: "<id>.symbols" (the ModuleSymbols packets, grouped by host)
 * and "<id>.symidx" (where each host's are), which the API appends to the
 * whole trace and to each host's part (store.h). The trace, its index and
 * its row are never rewritten.
 *
 * A bucket's store: the same two objects beside the trace's, PUT by the
 * pool thread once written (store.h, tg_coll_symput_run).
 *
 * One snapshot at a time, on a thread of libuv's pool, under
 * symbolize_timeout (and the symbolizer's own bounds on what one trace may
 * make it keep); the others wait in a bounded queue (COLL_SYMBOLS_QUEUE:
 * past it the newest is refused, reported). The loop thread alone touches
 * the store: it opens the files before the work and stores the symbols
 * after. A failure leaves the snapshot as stored: it is logged
 * ([TG-5095]), counted, shown by the API and added to its hosts' rows as
 * a problem {"kind": "symbolize", "code": "TG-5095", "why"}.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_SYMBOLS_H
#define TRACEGATE_COLLECTOR_DAEMON_SYMBOLS_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "collector/daemon/coll.h"

#define COLL_SYMBOLS_QUEUE 64
/* Snapshots whose symbolization the API can tell about from memory (a
 * finished one's counts, a failure's why); older ones say only whether
 * their symbols are stored. */
#define COLL_SYMBOLS_KEPT 256

/* Checks what symbolize needs at start: DEBUGINFOD_URLS in the
 * environment for `debuginfod`. Prints what is wrong and returns -1. */
int coll_symbols_check(const coll_t *c);
/* Snapshot |id| was stored live (complete or partial): symbolize it when
 * symbolize is on; nothing otherwise. */
void coll_symbols_queue(coll_t *c, uint64_t id);
/* At start, once the store is open: of the newest COLL_SYMBOLS_QUEUE
 * live snapshots, those without symbols whose symbolization did not fail
 * before (no "symbolize" problem in their host rows) are queued again, a
 * symbolization a restart cut short among them. Nothing with symbolize
 * off, nor with a shared catalog over a shared directory. */
void coll_symbols_resume(coll_t *c);
/* The daemon stops: the symbolization under way stops at its next check,
 * the queue is forgotten. */
void coll_symbols_stop(coll_t *c);
/* The API's "symbols" object of snapshot |id| (new reference; NULL when
 * out of memory). */
json_t *coll_symbols_json(coll_t *c, uint64_t id);
/* Their Prometheus metrics. */
void coll_symbols_metrics(const coll_t *c, FILE *f);
/* Moves of the queue's entries its table refused (a bug: each logged);
 * 0 before the first snapshot is queued. */
uint64_t coll_symbols_bad_transitions(const coll_t *c);

#endif /* TRACEGATE_COLLECTOR_DAEMON_SYMBOLS_H */
