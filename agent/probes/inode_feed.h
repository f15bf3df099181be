/* The hand-over of inodes from linux.ftrace to linux.inode_file_map of the
 * same tracing session: session_feed.h with (inode, device) sets.
 *
 * The ftrace reader thread asks, once per drain, whether the session has a
 * consumer (tg_inode_feed_wanted): without one its encoder collects no
 * inodes at all. With one it publishes the pairs its records named; the
 * sampler thread drains them for each inode_file_map instance registered
 * under that session. Memory, locking and the wake callback:
 * session_feed.h.
 */
#ifndef TRACEGATE_PROBES_INODE_FEED_H
#define TRACEGATE_PROBES_INODE_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probes/inode_set.h"
#include "agent/probes/session_feed.h"

/* Pending pairs per consumer. */
#define TG_INODE_FEED_CAP 16384
/* Consumers at once (inode_file_map instances). */
#define TG_INODE_FEED_MAX_CONSUMERS TG_SESSION_FEED_MAX_CONSUMERS

typedef struct tg_session_feed tg_inode_feed_t;
typedef struct tg_session_feed_consumer tg_inode_feed_consumer_t;
typedef tg_session_feed_wake_cb tg_inode_feed_wake_cb;

/* |wake| may be NULL (the consumer polls). Returns 0 or -ENOMEM. */
int tg_inode_feed_new(tg_inode_feed_wake_cb wake, void *wake_ctx,
                      tg_inode_feed_t **out);
/* Frees |f| and every consumer still registered. NULL is a no-op. */
void tg_inode_feed_free(tg_inode_feed_t *f);

/* Registers a consumer of the inodes of session |session_id| (not 0).
 * Records of task |scanner_tid| (the thread that scans for the consumer:
 * its own reads name inodes too) are not collected for the session; 0:
 * none. Returns 0, -EINVAL, -ENOSPC (too many consumers) or -ENOMEM. The
 * handle is the caller's until tg_inode_feed_unregister. */
int tg_inode_feed_register(tg_inode_feed_t *f, uint64_t session_id,
                           int32_t scanner_tid, tg_inode_feed_consumer_t **out);
/* Forgets |c| and its pending pairs. NULL is a no-op. */
void tg_inode_feed_unregister(tg_inode_feed_t *f, tg_inode_feed_consumer_t *c);

/* Whether session |session_id| has a consumer; if so, |*skip_tid| gets a
 * task whose records are not to be collected (0: none). Without any
 * consumer at all this takes no lock. */
bool tg_inode_feed_wanted(tg_inode_feed_t *f, uint64_t session_id,
                          int32_t *skip_tid);

/* Hands |keys| (borrowed; inode 0 is ignored) to every consumer of
 * |session_id|. Returns how many consumers there were. */
size_t tg_inode_feed_publish(tg_inode_feed_t *f, uint64_t session_id,
                             const tg_inode_key_t *keys, size_t n);

/* Moves up to |cap| of |c|'s pending pairs (each once, in the order they
 * first came) to |out|. Returns how many. */
size_t tg_inode_feed_drain(tg_inode_feed_t *f, tg_inode_feed_consumer_t *c,
                           tg_inode_key_t *out, size_t cap);

/* Pairs |c| dropped for want of room, all told. */
uint64_t tg_inode_feed_dropped(tg_inode_feed_t *f,
                               const tg_inode_feed_consumer_t *c);

#endif /* TRACEGATE_PROBES_INODE_FEED_H */
