/* The session-keyed hand-over of session_feed.h. */
#include "agent/probes/session_feed.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/log.h"

struct tg_session_feed_consumer {
  uint64_t session_id;
  int32_t tag;
  uint64_t dropped; /* under the feed's mutex; all told */
  bool warned;
  void *pending;    /* ops->set_size bytes, under the feed's mutex */
};

struct tg_session_feed {
  pthread_mutex_t mu;
  const tg_session_feed_ops_t *ops;
  uint32_t cap;
  tg_session_feed_wake_cb wake;
  void *wake_ctx;
  /* Registered consumers: lets tg_session_feed_wanted skip the mutex
   * while there are none. Written under mu; a reader that sees a stale
   * count only collects one drain too many or too few. */
  atomic_uint n_consumers;
  tg_session_feed_consumer_t *consumers[TG_SESSION_FEED_MAX_CONSUMERS];
};

int tg_session_feed_new(const tg_session_feed_ops_t *ops, uint32_t cap,
                        tg_session_feed_wake_cb wake, void *wake_ctx,
                        tg_session_feed_t **out) {
  tg_session_feed_t *f = calloc(1, sizeof(*f));
  if (!f) return -ENOMEM;
  pthread_mutex_init(&f->mu, NULL);
  f->ops = ops;
  f->cap = cap;
  f->wake = wake;
  f->wake_ctx = wake_ctx;
  atomic_init(&f->n_consumers, 0);
  *out = f;
  return 0;
}

static void consumer_free(const tg_session_feed_t *f,
                          tg_session_feed_consumer_t *c) {
  if (c->pending) f->ops->free(c->pending);
  free(c->pending);
  free(c);
}

void tg_session_feed_free(tg_session_feed_t *f) {
  if (!f) return;
  for (size_t i = 0; i < TG_SESSION_FEED_MAX_CONSUMERS; i++)
    if (f->consumers[i]) consumer_free(f, f->consumers[i]);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

int tg_session_feed_register(tg_session_feed_t *f, uint64_t session_id,
                             int32_t tag, tg_session_feed_consumer_t **out) {
  if (session_id == 0) return -EINVAL;
  tg_session_feed_consumer_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  c->session_id = session_id;
  c->tag = tag;
  c->pending = calloc(1, f->ops->set_size);
  int rv = c->pending ? f->ops->init(c->pending, f->cap) : -ENOMEM;
  if (rv < 0) {
    free(c->pending);
    free(c);
    return rv;
  }
  rv = -ENOSPC;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_SESSION_FEED_MAX_CONSUMERS; i++) {
    if (!f->consumers[i]) {
      f->consumers[i] = c;
      atomic_fetch_add_explicit(&f->n_consumers, 1, memory_order_relaxed);
      rv = 0;
      break;
    }
  }
  pthread_mutex_unlock(&f->mu);
  if (rv < 0) {
    consumer_free(f, c);
    return rv;
  }
  *out = c;
  return 0;
}

void tg_session_feed_unregister(tg_session_feed_t *f,
                                tg_session_feed_consumer_t *c) {
  if (!c) return;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_SESSION_FEED_MAX_CONSUMERS; i++) {
    if (f->consumers[i] == c) {
      f->consumers[i] = NULL;
      atomic_fetch_sub_explicit(&f->n_consumers, 1, memory_order_relaxed);
    }
  }
  pthread_mutex_unlock(&f->mu);
  consumer_free(f, c);
}

bool tg_session_feed_wanted(tg_session_feed_t *f, uint64_t session_id,
                            int32_t *tag) {
  if (tag) *tag = 0;
  if (session_id == 0 ||
      atomic_load_explicit(&f->n_consumers, memory_order_relaxed) == 0)
    return false;
  bool found = false;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_SESSION_FEED_MAX_CONSUMERS && !found; i++) {
    const tg_session_feed_consumer_t *c = f->consumers[i];
    if (c && c->session_id == session_id) {
      found = true;
      if (tag) *tag = c->tag;
    }
  }
  pthread_mutex_unlock(&f->mu);
  return found;
}

size_t tg_session_feed_publish(tg_session_feed_t *f, uint64_t session_id,
                               const void *keys, size_t n) {
  if (session_id == 0) return 0;
  const tg_session_feed_ops_t *ops = f->ops;
  size_t found = 0;
  bool wake = false;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_SESSION_FEED_MAX_CONSUMERS; i++) {
    tg_session_feed_consumer_t *c = f->consumers[i];
    if (!c || c->session_id != session_id) continue;
    found++;
    uint32_t before = ops->count(c->pending);
    uint64_t dropped = ops->add(c->pending, keys, n);
    if (dropped) {
      c->dropped += dropped;
      if (!c->warned)
        TG_WARN("%s: session %llu: more than %u %s waiting to be "
                "resolved; the rest are not resolved",
                ops->owner, (unsigned long long)session_id, f->cap,
                ops->what);
      c->warned = true;
    }
    if (before == 0 && ops->count(c->pending)) wake = true;
  }
  pthread_mutex_unlock(&f->mu);
  if (wake && f->wake) f->wake(f->wake_ctx);
  return found;
}

size_t tg_session_feed_drain(tg_session_feed_t *f,
                             tg_session_feed_consumer_t *c, void *out,
                             size_t cap) {
  pthread_mutex_lock(&f->mu);
  size_t n = f->ops->take(c->pending, out, cap);
  pthread_mutex_unlock(&f->mu);
  return n;
}

uint64_t tg_session_feed_dropped(tg_session_feed_t *f,
                                 const tg_session_feed_consumer_t *c) {
  pthread_mutex_lock(&f->mu);
  uint64_t d = c->dropped;
  pthread_mutex_unlock(&f->mu);
  return d;
}
