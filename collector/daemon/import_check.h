/* The collector's own check of each stored snapshot (check_trace_processor
 * in the config; off by default): Perfetto's trace processor imports the
 * whole trace, and when it fails each host's part alone, and the hosts
 * whose part fails get a problem {"kind": "import", "code": "TG-5070",
 * "why": trace processor's error} in their row (the API and the page show
 * it). docs/collector.md, "Checking each snapshot".
 *
 * One check at a time, on a thread of libuv's pool (an import blocks its
 * thread for up to check_timeout); the others wait in a bounded queue
 * (COLL_ICHECK_QUEUE: past it the newest is dropped, logged). Each import
 * is a child of the check runner (check_runner.h: as uid 65534) under
 * check_memory and check_timeout (common/tp_import.h); the thread waits
 * for the runner's verdict.
 * The loop thread alone touches the store: it opens the snapshot's file
 * and index before the work, and writes the verdicts after.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_IMPORT_CHECK_H
#define TRACEGATE_COLLECTOR_DAEMON_IMPORT_CHECK_H

#include <stdint.h>

#include <jansson.h>

#include "collector/daemon/coll.h"

#define COLL_ICHECK_QUEUE 64

/* Snapshot |id| was stored live (complete or partial): check it when
 * check_trace_processor is set; nothing otherwise. */
void coll_import_check_queue(coll_t *c, uint64_t id);
/* The daemon stops: the import under way is killed (its process group),
 * the queue forgotten. */
void coll_import_check_stop(coll_t *c);

/* |existing| (a host row's problems: "" or a JSON array) with |p|
 * appended, as text of at most TG_COLL_PROBLEMS_MAX bytes (malloc'ed), or
 * NULL. A row whose problems do not parse is replaced by the one problem.
 * The import check's and the symbolization's (symbols.h). */
char *coll_problem_append(const char *existing, const json_t *p);

#endif /* TRACEGATE_COLLECTOR_DAEMON_IMPORT_CHECK_H */
