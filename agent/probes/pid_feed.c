/* ftrace -> process_stats pid hand-over: session_feed.c over pid sets;
 * see pid_feed.h. */
#include "agent/probes/pid_feed.h"

#include "agent/probes/pid_set.h"

static int set_init(void *s, uint32_t cap) { return tg_pid_set_init(s, cap); }
static void set_free(void *s) { tg_pid_set_free(s); }
static uint32_t set_count(const void *s) {
  return ((const tg_pid_set_t *)s)->base.n;
}
static size_t set_take(void *s, void *out, size_t cap) {
  return tg_pid_set_take(s, out, cap);
}

static uint64_t set_add(void *set, const void *keys, size_t n) {
  tg_pid_set_t *s = set;
  const int32_t *pids = keys;
  for (size_t k = 0; k < n; k++) tg_pid_set_add(s, pids[k]);
  uint64_t dropped = s->base.dropped;
  s->base.dropped = 0;
  return dropped;
}

static const tg_session_feed_ops_t pid_ops = {
    .set_size = sizeof(tg_pid_set_t),
    .init = set_init,
    .free = set_free,
    .add = set_add,
    .count = set_count,
    .take = set_take,
    .owner = "linux.process_stats",
    .what = "pids",
};

int tg_pid_feed_new(tg_pid_feed_wake_cb wake, void *wake_ctx,
                    tg_pid_feed_t **out) {
  return tg_session_feed_new(&pid_ops, TG_PID_FEED_CAP, wake, wake_ctx, out);
}

void tg_pid_feed_free(tg_pid_feed_t *f) { tg_session_feed_free(f); }

int tg_pid_feed_register(tg_pid_feed_t *f, uint64_t session_id,
                         tg_pid_feed_consumer_t **out) {
  return tg_session_feed_register(f, session_id, 0, out);
}

void tg_pid_feed_unregister(tg_pid_feed_t *f, tg_pid_feed_consumer_t *c) {
  tg_session_feed_unregister(f, c);
}

size_t tg_pid_feed_publish(tg_pid_feed_t *f, uint64_t session_id,
                           const int32_t *pids, size_t n) {
  return tg_session_feed_publish(f, session_id, pids, n);
}

size_t tg_pid_feed_drain(tg_pid_feed_t *f, tg_pid_feed_consumer_t *c,
                         int32_t *out, size_t cap) {
  return tg_session_feed_drain(f, c, out, cap);
}

uint64_t tg_pid_feed_dropped(tg_pid_feed_t *f,
                             const tg_pid_feed_consumer_t *c) {
  return tg_session_feed_dropped(f, c);
}
