/* A hand-over from linux.ftrace's reader thread to the data sources of
 * the same tracing session on the sampler thread: what the records named
 * (pids for linux.process_stats, inodes for linux.inode_file_map), keyed
 * by DataSourceConfig.tracing_session_id. pid_feed.h and inode_feed.h are
 * its two typed faces; the set that holds a consumer's pending keys is
 * theirs, through tg_session_feed_ops_t.
 *
 * Publishing never blocks on the consumers' work: a few set inserts (and
 * a consumer's first overflow warning) under the feed's mutex, then the
 * wake callback. Memory is bounded: each
 * consumer holds at most |cap| pending keys; more are counted as dropped
 * (and logged once per consumer). Unregistering frees what it held.
 *
 * Lock order: register and unregister may run under the sampler's mutex;
 * the wake callback runs after the feed's mutex is released, so it may
 * take the sampler's.
 */
#ifndef TRACEGATE_PROBES_SESSION_FEED_H
#define TRACEGATE_PROBES_SESSION_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Consumers at once. */
#define TG_SESSION_FEED_MAX_CONSUMERS 16

typedef struct tg_session_feed tg_session_feed_t;
typedef struct tg_session_feed_consumer tg_session_feed_consumer_t;

/* Called (without the feed's mutex) when a consumer that had nothing
 * pending gets keys; |ctx| must outlive every publisher. */
typedef void (*tg_session_feed_wake_cb)(void *ctx);

/* The pending set of one consumer; every call is under the feed's mutex. */
typedef struct tg_session_feed_ops {
  size_t set_size;
  int (*init)(void *set, uint32_t cap); /* 0 or a negative errno */
  void (*free)(void *set);
  /* Adds |n| keys; returns how many found no room. */
  uint64_t (*add)(void *set, const void *keys, size_t n);
  uint32_t (*count)(const void *set);
  /* Moves up to |cap| members, each once and in the order they first
   * came, to |out|; the rest stay. Returns how many. */
  size_t (*take)(void *set, void *out, size_t cap);
  /* For the warning: "linux.process_stats", "pids". */
  const char *owner, *what;
} tg_session_feed_ops_t;

/* |ops| (static) and |cap| (pending keys per consumer) are the typed
 * face's; |wake| may be NULL (the consumer polls). Returns 0 or -ENOMEM. */
int tg_session_feed_new(const tg_session_feed_ops_t *ops, uint32_t cap,
                        tg_session_feed_wake_cb wake, void *wake_ctx,
                        tg_session_feed_t **out);
/* Frees |f| and every consumer still registered. NULL is a no-op. */
void tg_session_feed_free(tg_session_feed_t *f);

/* Registers a consumer of session |session_id| (not 0) with a |tag| the
 * publisher may ask for (tg_session_feed_wanted). Returns 0, -EINVAL,
 * -ENOSPC (too many consumers) or -ENOMEM. The handle is the caller's
 * until tg_session_feed_unregister. */
int tg_session_feed_register(tg_session_feed_t *f, uint64_t session_id,
                             int32_t tag, tg_session_feed_consumer_t **out);
/* Forgets |c| and its pending keys. NULL is a no-op. */
void tg_session_feed_unregister(tg_session_feed_t *f,
                                tg_session_feed_consumer_t *c);

/* Whether session |session_id| has a consumer; if so |*tag| (may be NULL)
 * gets the first one's tag. Without any consumer this takes no lock. */
bool tg_session_feed_wanted(tg_session_feed_t *f, uint64_t session_id,
                            int32_t *tag);

/* Hands |keys| (borrowed) to every consumer of |session_id|. Returns how
 * many consumers there were. */
size_t tg_session_feed_publish(tg_session_feed_t *f, uint64_t session_id,
                               const void *keys, size_t n);

/* Moves up to |cap| of |c|'s pending keys to |out|. Returns how many. */
size_t tg_session_feed_drain(tg_session_feed_t *f,
                             tg_session_feed_consumer_t *c, void *out,
                             size_t cap);

/* Keys |c| dropped for want of room, all told. */
uint64_t tg_session_feed_dropped(tg_session_feed_t *f,
                                 const tg_session_feed_consumer_t *c);

#endif /* TRACEGATE_PROBES_SESSION_FEED_H */
