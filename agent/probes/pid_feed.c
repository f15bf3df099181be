/* ftrace -> process_stats pid hand-over; see pid_feed.h. */
#include "agent/probes/pid_feed.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/pid_set.h"
#include "common/log.h"

struct tg_pid_feed_consumer {
  uint64_t session_id;
  tg_pid_set_t pending; /* under the feed's mutex */
  uint64_t dropped;     /* under the feed's mutex; all told */
  bool warned;
};

struct tg_pid_feed {
  pthread_mutex_t mu;
  tg_pid_feed_wake_cb wake;
  void *wake_ctx;
  tg_pid_feed_consumer_t *consumers[TG_PID_FEED_MAX_CONSUMERS]; /* under mu */
};

int tg_pid_feed_new(tg_pid_feed_wake_cb wake, void *wake_ctx,
                    tg_pid_feed_t **out) {
  tg_pid_feed_t *f = calloc(1, sizeof(*f));
  if (!f) return -ENOMEM;
  pthread_mutex_init(&f->mu, NULL);
  f->wake = wake;
  f->wake_ctx = wake_ctx;
  *out = f;
  return 0;
}

static void consumer_free(tg_pid_feed_consumer_t *c) {
  tg_pid_set_free(&c->pending);
  free(c);
}

void tg_pid_feed_free(tg_pid_feed_t *f) {
  if (!f) return;
  for (size_t i = 0; i < TG_PID_FEED_MAX_CONSUMERS; i++)
    if (f->consumers[i]) consumer_free(f->consumers[i]);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

int tg_pid_feed_register(tg_pid_feed_t *f, uint64_t session_id,
                         tg_pid_feed_consumer_t **out) {
  if (session_id == 0) return -EINVAL;
  tg_pid_feed_consumer_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  c->session_id = session_id;
  int rv = tg_pid_set_init(&c->pending, TG_PID_FEED_CAP);
  if (rv < 0) {
    free(c);
    return rv;
  }
  rv = -ENOSPC;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_PID_FEED_MAX_CONSUMERS; i++) {
    if (!f->consumers[i]) {
      f->consumers[i] = c;
      rv = 0;
      break;
    }
  }
  pthread_mutex_unlock(&f->mu);
  if (rv < 0) {
    consumer_free(c);
    return rv;
  }
  *out = c;
  return 0;
}

void tg_pid_feed_unregister(tg_pid_feed_t *f, tg_pid_feed_consumer_t *c) {
  if (!c) return;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_PID_FEED_MAX_CONSUMERS; i++)
    if (f->consumers[i] == c) f->consumers[i] = NULL;
  pthread_mutex_unlock(&f->mu);
  consumer_free(c);
}

size_t tg_pid_feed_publish(tg_pid_feed_t *f, uint64_t session_id,
                           const int32_t *pids, size_t n) {
  if (session_id == 0) return 0;
  size_t found = 0;
  bool wake = false;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_PID_FEED_MAX_CONSUMERS; i++) {
    tg_pid_feed_consumer_t *c = f->consumers[i];
    if (!c || c->session_id != session_id) continue;
    found++;
    uint32_t before = c->pending.n;
    for (size_t k = 0; k < n; k++) tg_pid_set_add(&c->pending, pids[k]);
    if (c->pending.dropped) {
      c->dropped += c->pending.dropped;
      c->pending.dropped = 0;
      if (!c->warned)
        TG_WARN("linux.process_stats: session %llu: more than %d pids "
                "waiting to be resolved; the rest are not resolved",
                (unsigned long long)session_id, TG_PID_FEED_CAP);
      c->warned = true;
    }
    if (before == 0 && c->pending.n) wake = true;
  }
  pthread_mutex_unlock(&f->mu);
  if (wake && f->wake) f->wake(f->wake_ctx);
  return found;
}

size_t tg_pid_feed_drain(tg_pid_feed_t *f, tg_pid_feed_consumer_t *c,
                         int32_t *out, size_t cap) {
  pthread_mutex_lock(&f->mu);
  size_t n = c->pending.n < cap ? c->pending.n : cap;
  memcpy(out, c->pending.pids, n * sizeof(*out));
  if (n == c->pending.n) {
    tg_pid_set_clear(&c->pending);
  } else {
    tg_pid_set_t *p = &c->pending;
    uint32_t rest = p->n - (uint32_t)n;
    /* The rest move to the front and are added again (each add writes at or
     * before where it reads). */
    memmove(p->pids, p->pids + n, rest * sizeof(*p->pids));
    memset(p->slots, 0, ((size_t)p->mask + 1) * sizeof(*p->slots));
    p->n = 0;
    p->last = 0;
    for (uint32_t i = 0; i < rest; i++) tg_pid_set_add(p, p->pids[i]);
  }
  pthread_mutex_unlock(&f->mu);
  return n;
}

uint64_t tg_pid_feed_dropped(tg_pid_feed_t *f,
                             const tg_pid_feed_consumer_t *c) {
  pthread_mutex_lock(&f->mu);
  uint64_t d = c->dropped;
  pthread_mutex_unlock(&f->mu);
  return d;
}
