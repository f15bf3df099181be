/* ftrace -> inode_file_map inode hand-over: session_feed.c over
 * (inode, device) sets; see inode_feed.h. */
#include "agent/probes/inode_feed.h"

static int set_init(void *s, uint32_t cap) { return tg_inode_set_init(s, cap); }
static void set_free(void *s) { tg_inode_set_free(s); }
static uint32_t set_count(const void *s) {
  return ((const tg_inode_set_t *)s)->base.n;
}
static size_t set_take(void *s, void *out, size_t cap) {
  return tg_inode_set_take(s, out, cap);
}

static uint64_t set_add(void *set, const void *keys, size_t n) {
  tg_inode_set_t *s = set;
  const tg_inode_key_t *k = keys;
  for (size_t i = 0; i < n; i++) tg_inode_set_add(s, k[i].ino, k[i].dev);
  uint64_t dropped = s->base.dropped;
  s->base.dropped = 0;
  return dropped;
}

static const tg_session_feed_ops_t inode_ops = {
    .set_size = sizeof(tg_inode_set_t),
    .init = set_init,
    .free = set_free,
    .add = set_add,
    .count = set_count,
    .take = set_take,
    .owner = "linux.inode_file_map",
    .what = "inodes",
};

int tg_inode_feed_new(tg_inode_feed_wake_cb wake, void *wake_ctx,
                      tg_inode_feed_t **out) {
  return tg_session_feed_new(&inode_ops, TG_INODE_FEED_CAP, wake, wake_ctx,
                             out);
}

void tg_inode_feed_free(tg_inode_feed_t *f) { tg_session_feed_free(f); }

int tg_inode_feed_register(tg_inode_feed_t *f, uint64_t session_id,
                           int32_t scanner_tid,
                           tg_inode_feed_consumer_t **out) {
  return tg_session_feed_register(f, session_id, scanner_tid, out);
}

void tg_inode_feed_unregister(tg_inode_feed_t *f, tg_inode_feed_consumer_t *c) {
  tg_session_feed_unregister(f, c);
}

bool tg_inode_feed_wanted(tg_inode_feed_t *f, uint64_t session_id,
                          int32_t *skip_tid) {
  return tg_session_feed_wanted(f, session_id, skip_tid);
}

size_t tg_inode_feed_publish(tg_inode_feed_t *f, uint64_t session_id,
                             const tg_inode_key_t *keys, size_t n) {
  return tg_session_feed_publish(f, session_id, keys, n);
}

size_t tg_inode_feed_drain(tg_inode_feed_t *f, tg_inode_feed_consumer_t *c,
                           tg_inode_key_t *out, size_t cap) {
  return tg_session_feed_drain(f, c, out, cap);
}

uint64_t tg_inode_feed_dropped(tg_inode_feed_t *f,
                               const tg_inode_feed_consumer_t *c) {
  return tg_session_feed_dropped(f, c);
}
