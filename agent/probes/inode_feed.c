/* ftrace -> inode_file_map inode hand-over; see inode_feed.h. */
#include "agent/probes/inode_feed.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct tg_inode_feed_consumer {
  uint64_t session_id;
  int32_t scanner_tid;
  tg_inode_set_t pending; /* under the feed's mutex */
  uint64_t dropped;       /* under the feed's mutex; all told */
  bool warned;
};

struct tg_inode_feed {
  pthread_mutex_t mu;
  tg_inode_feed_wake_cb wake;
  void *wake_ctx;
  /* Registered consumers: lets tg_inode_feed_wanted skip the mutex while
   * there are none. Written under mu; a reader that sees a stale count
   * only collects one drain too many or too few. */
  atomic_uint n_consumers;
  tg_inode_feed_consumer_t *consumers[TG_INODE_FEED_MAX_CONSUMERS]; /* mu */
};

int tg_inode_feed_new(tg_inode_feed_wake_cb wake, void *wake_ctx,
                      tg_inode_feed_t **out) {
  tg_inode_feed_t *f = calloc(1, sizeof(*f));
  if (!f) return -ENOMEM;
  pthread_mutex_init(&f->mu, NULL);
  f->wake = wake;
  f->wake_ctx = wake_ctx;
  atomic_init(&f->n_consumers, 0);
  *out = f;
  return 0;
}

static void consumer_free(tg_inode_feed_consumer_t *c) {
  tg_inode_set_free(&c->pending);
  free(c);
}

void tg_inode_feed_free(tg_inode_feed_t *f) {
  if (!f) return;
  for (size_t i = 0; i < TG_INODE_FEED_MAX_CONSUMERS; i++)
    if (f->consumers[i]) consumer_free(f->consumers[i]);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

int tg_inode_feed_register(tg_inode_feed_t *f, uint64_t session_id,
                           int32_t scanner_tid,
                           tg_inode_feed_consumer_t **out) {
  if (session_id == 0) return -EINVAL;
  tg_inode_feed_consumer_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  c->session_id = session_id;
  c->scanner_tid = scanner_tid;
  int rv = tg_inode_set_init(&c->pending, TG_INODE_FEED_CAP);
  if (rv < 0) {
    free(c);
    return rv;
  }
  rv = -ENOSPC;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_INODE_FEED_MAX_CONSUMERS; i++) {
    if (!f->consumers[i]) {
      f->consumers[i] = c;
      atomic_fetch_add_explicit(&f->n_consumers, 1, memory_order_relaxed);
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

void tg_inode_feed_unregister(tg_inode_feed_t *f, tg_inode_feed_consumer_t *c) {
  if (!c) return;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_INODE_FEED_MAX_CONSUMERS; i++) {
    if (f->consumers[i] == c) {
      f->consumers[i] = NULL;
      atomic_fetch_sub_explicit(&f->n_consumers, 1, memory_order_relaxed);
    }
  }
  pthread_mutex_unlock(&f->mu);
  consumer_free(c);
}

bool tg_inode_feed_wanted(tg_inode_feed_t *f, uint64_t session_id,
                          int32_t *skip_tid) {
  *skip_tid = 0;
  if (session_id == 0 ||
      atomic_load_explicit(&f->n_consumers, memory_order_relaxed) == 0)
    return false;
  bool found = false;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_INODE_FEED_MAX_CONSUMERS && !found; i++) {
    const tg_inode_feed_consumer_t *c = f->consumers[i];
    if (c && c->session_id == session_id) {
      found = true;
      *skip_tid = c->scanner_tid;
    }
  }
  pthread_mutex_unlock(&f->mu);
  return found;
}

size_t tg_inode_feed_publish(tg_inode_feed_t *f, uint64_t session_id,
                             const tg_inode_key_t *keys, size_t n) {
  if (session_id == 0) return 0;
  size_t found = 0;
  bool wake = false;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < TG_INODE_FEED_MAX_CONSUMERS; i++) {
    tg_inode_feed_consumer_t *c = f->consumers[i];
    if (!c || c->session_id != session_id) continue;
    found++;
    uint32_t before = c->pending.n;
    for (size_t k = 0; k < n; k++)
      tg_inode_set_add(&c->pending, keys[k].ino, keys[k].dev);
    if (c->pending.dropped) {
      c->dropped += c->pending.dropped;
      c->pending.dropped = 0;
      if (!c->warned)
        TG_WARN(
            "linux.inode_file_map: session %llu: more than %d inodes "
            "waiting to be resolved; the rest are not resolved",
            (unsigned long long)session_id, TG_INODE_FEED_CAP);
      c->warned = true;
    }
    if (before == 0 && c->pending.n) wake = true;
  }
  pthread_mutex_unlock(&f->mu);
  if (wake && f->wake) f->wake(f->wake_ctx);
  return found;
}

size_t tg_inode_feed_drain(tg_inode_feed_t *f, tg_inode_feed_consumer_t *c,
                           tg_inode_key_t *out, size_t cap) {
  pthread_mutex_lock(&f->mu);
  tg_inode_set_t *p = &c->pending;
  size_t n = p->n < cap ? p->n : cap;
  memcpy(out, p->keys, n * sizeof(*out));
  if (n == p->n) {
    tg_inode_set_clear(p);
  } else {
    /* The rest move to the front and are added again (each add writes at
     * or before where it reads). */
    uint32_t rest = p->n - (uint32_t)n;
    memmove(p->keys, p->keys + n, rest * sizeof(*p->keys));
    memset(p->slots, 0, ((size_t)p->mask + 1) * sizeof(*p->slots));
    p->n = 0;
    p->last = (tg_inode_key_t){0, 0};
    for (uint32_t i = 0; i < rest; i++)
      tg_inode_set_add(p, p->keys[i].ino, p->keys[i].dev);
  }
  pthread_mutex_unlock(&f->mu);
  return n;
}

uint64_t tg_inode_feed_dropped(tg_inode_feed_t *f,
                               const tg_inode_feed_consumer_t *c) {
  pthread_mutex_lock(&f->mu);
  uint64_t d = c->dropped;
  pthread_mutex_unlock(&f->mu);
  return d;
}
