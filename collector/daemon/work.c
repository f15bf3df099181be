/* SPDX-License-Identifier: Apache-2.0 */
/* The collector's counted pool jobs: see work.h. */
#include "collector/daemon/work.h"

#include "collector/daemon/coll.h"

void coll_stop_if_idle(coll_t *c) {
  if (c->stopping && !c->n_running && !c->n_work) uv_stop(c->loop);
}

/* A job back on the loop: counted off before its own callback, which may
 * free it and may queue another. */
static void work_back(uv_work_t *req, int status) {
  coll_work_t *w = (coll_work_t *)req; /* req is its first member */
  coll_t *c = w->c;
  c->n_work--;
  w->done(req, status);
  coll_stop_if_idle(c);
}

int coll_work_queue(coll_t *c, coll_work_t *w, uv_work_cb work,
                    uv_after_work_cb done) {
  w->c = c;
  w->done = done;
  int rv = uv_queue_work(c->loop, &w->req, work, work_back);
  if (rv == 0) c->n_work++;
  return rv;
}
