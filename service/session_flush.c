/* Flush bookkeeping; see session_flush.h. */
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "service/producer_port.h"
#include "service/readout.h"
#include "service/session.h"
#include "service/session_flush.h"

void tg__session_flushes_init(tg_session_flushes_t *fl,
                              void (*started)(tg_session_t *s)) {
  tg_list_init(&fl->pending);
  fl->started = started;
  fl->requested = fl->succeeded = fl->failed = 0;
}

static bool wants_flush(const tg_ds_instance_t *inst) {
  return !(inst->ds && inst->ds->no_flush);
}

uint64_t *tg__session_instance_ids(tg_producer_t *p, tg_session_t *s,
                                   bool (*want)(const tg_ds_instance_t *),
                                   size_t *n) {
  size_t count = 0;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &p->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, producer_node);
    if (inst->session == s && want(inst)) count++;
  }
  *n = 0;
  uint64_t *ids = count ? malloc(count * sizeof(*ids)) : NULL;
  if (!ids) return NULL;
  tg_list_foreach_safe(it, tmp, &p->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, producer_node);
    if (inst->session == s && want(inst)) ids[(*n)++] = inst->id;
  }
  return ids;
}

static void on_flush_closed(uv_handle_t *h) {
  tg_pending_flush_t *f = h->data;
  free(f->waiting);
  free(f);
}

static void flush_complete(tg_pending_flush_t *f, int status) {
  tg_session_t *s = f->session;
  bool ok = status == 0;
  tg_list_remove(&f->node);
  uv_timer_stop(&f->timer);
  if (ok) s->flushes.succeeded++; else s->flushes.failed++;
  if (f->cookie && s->observer.flush_done)
    s->observer.flush_done(s, status, f->cookie, s->observer.ctx);
  tg_session_flush_done_fn done = f->done;
  uv_close((uv_handle_t *)&f->timer, on_flush_closed);
  if (ok) tg__readout_service_event(s, 3 /* all_data_sources_flushed */);
  if (done) done(s, status);
}

static void on_flush_timeout(uv_timer_t *t) {
  tg_pending_flush_t *f = t->data;
  tg_session_t *s = f->session;
  const tg_producer_ops_t *ops = s->svc->producer_ops;
  TG_WARN("session %llu: flush %llu timed out, %zu producer(s) did not ack",
          (unsigned long long)s->id, (unsigned long long)f->request_id,
          f->n_waiting);
  for (size_t i = 0; i < f->n_waiting; i++) {
    tg_producer_t *p = ops->by_id(s->svc, f->waiting[i]);
    if (p) ops->scrape(p, s);
  }
  flush_complete(f, -ETIMEDOUT);
}

void tg__session_flush_start(tg_session_t *s, uint32_t timeout_ms,
                             uint64_t cookie, tg_session_flush_done_fn done) {
  tg_pending_flush_t *f = calloc(1, sizeof(*f));
  size_t max_p = s->svc->n_producers;
  if (f && max_p) f->waiting = calloc(max_p, sizeof(uint16_t));
  if (!f || (max_p && !f->waiting)) {
    free(f);
    if (cookie && s->observer.flush_done)
      s->observer.flush_done(s, -ENOMEM, cookie, s->observer.ctx);
    if (done) done(s, -ENOMEM);
    return;
  }
  f->session = s;
  f->request_id = ++s->svc->last_flush_id;
  f->done = done;
  f->cookie = cookie;
  s->flushes.requested++;
  uv_timer_init(s->svc->loop, &f->timer);
  f->timer.data = f;
  tg_list_insert_tail(&s->flushes.pending, &f->node);
  tg__readout_service_event(s, 9 /* flush_started */);
  if (s->flushes.started) s->flushes.started(s);

  /* One Flush command per producer, naming its instances of this session. */
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->svc->producers) {
    tg_producer_t *p = TG_CONTAINER_OF(it, tg_producer_t, node);
    size_t n;
    uint64_t *ids = tg__session_instance_ids(p, s, wants_flush, &n);
    if (!ids) continue;
    f->waiting[f->n_waiting++] = p->ident.producer_id;
    s->svc->producer_ops->flush(p, f->request_id, ids, n);
    free(ids);
  }
  if (f->n_waiting == 0) { /* no producer to wait for */
    flush_complete(f, 0);
    return;
  }
  if (timeout_ms == 0)
    timeout_ms = s->config->has_flush_timeout_ms && s->config->flush_timeout_ms
                     ? s->config->flush_timeout_ms
                     : TG_SERVICE_DEFAULT_FLUSH_TIMEOUT_MS;
  uv_timer_start(&f->timer, on_flush_timeout, timeout_ms, 0);
}

/* |producer_id| answered (or can no longer answer) flush |f|. */
static void flush_producer_done(tg_pending_flush_t *f, uint16_t producer_id) {
  for (size_t i = 0; i < f->n_waiting; i++) {
    if (f->waiting[i] != producer_id) continue;
    f->waiting[i] = f->waiting[--f->n_waiting];
    /* Threads that were idle still hold partial chunks the producer could
     * not commit for them: read those too, as Perfetto's service does
     * when a flush completes. */
    const tg_producer_ops_t *ops = f->session->svc->producer_ops;
    tg_producer_t *p = ops->by_id(f->session->svc, producer_id);
    if (p) ops->scrape(p, f->session);
    break;
  }
  if (f->n_waiting == 0) flush_complete(f, 0);
}

void tg__session_flush(tg_session_t *s, uint32_t timeout_ms, uint64_t cookie) {
  tg__session_flush_start(s, timeout_ms, cookie, NULL);
}

void tg__session_flush_ack(tg_service_t *svc, tg_producer_t *p,
                           uint64_t flush_id) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    tg_list_t *jt, *jtmp;
    tg_list_foreach_safe(jt, jtmp, &s->flushes.pending) {
      tg_pending_flush_t *f = TG_CONTAINER_OF(jt, tg_pending_flush_t, node);
      /* Acks are cumulative: a producer that answers flush N has also
       * committed what earlier flushes asked for. */
      if (f->request_id <= flush_id) flush_producer_done(f, p->ident.producer_id);
    }
  }
}

void tg__session_flushes_producer_gone(tg_session_t *s, uint16_t producer_id) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->flushes.pending) {
    flush_producer_done(TG_CONTAINER_OF(it, tg_pending_flush_t, node), producer_id);
  }
}

void tg__session_flushes_abandon(tg_session_t *s) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->flushes.pending) {
    tg_pending_flush_t *f = TG_CONTAINER_OF(it, tg_pending_flush_t, node);
    f->done = NULL;
    flush_complete(f, -ECANCELED);
  }
}
