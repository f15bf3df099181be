/* SPDX-License-Identifier: Apache-2.0 */
/* The collector's jobs on libuv's thread pool (symbolize, the import
 * check, function shares, a snapshot's sync, the API's downloads and
 * profiles), counted in coll_t.n_work: a stop lets the loop run until
 * every job under way has come back, so that no pool thread is still at
 * work (in libcrypto, say, whose state the process's exit frees) when
 * main returns. Below every module that queues work and below coll.c,
 * which stops: it reads coll_t's fields and calls none of them.
 * Loop thread only.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_WORK_H
#define TRACEGATE_COLLECTOR_DAEMON_WORK_H

#include <uv.h>

typedef struct coll coll_t;

/* One job: |req.data| is the caller's, as with a bare uv_work_t, and the
 * callbacks get &req. The caller owns it; it must stay put from
 * coll_work_queue until |done| has run. */
typedef struct coll_work {
  uv_work_t req;
  coll_t *c;
  uv_after_work_cb done;
} coll_work_t;

/* uv_queue_work on c's loop, counted until |done| has run; 0 or libuv's
 * error (nothing queued, nothing counted). */
int coll_work_queue(coll_t *c, coll_work_t *w, uv_work_cb work,
                    uv_after_work_cb done);

/* Once stopping, with no snapshot under way and no job out, stops the
 * loop: the end of coll_stop, of a snapshot stored, of a job back. */
void coll_stop_if_idle(coll_t *c);

#endif /* TRACEGATE_COLLECTOR_DAEMON_WORK_H */
