/* The hand-over of pids from linux.ftrace to linux.process_stats of the
 * same tracing session ("on-demand process dumps"): session_feed.h with
 * pid sets. The ftrace reader thread publishes the pids its records
 * named; the sampler thread drains them for each process_stats instance
 * registered under that session and resolves them in /proc. Pids of a
 * session without a registered consumer are not kept. Memory, locking and
 * the wake callback: session_feed.h.
 */
#ifndef TRACEGATE_PROBES_PID_FEED_H
#define TRACEGATE_PROBES_PID_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "agent/probes/session_feed.h"

/* Pending pids per consumer. */
#define TG_PID_FEED_CAP 16384
/* Consumers at once (process_stats instances with on-demand dumps). */
#define TG_PID_FEED_MAX_CONSUMERS TG_SESSION_FEED_MAX_CONSUMERS

typedef struct tg_session_feed tg_pid_feed_t;
typedef struct tg_session_feed_consumer tg_pid_feed_consumer_t;
typedef tg_session_feed_wake_cb tg_pid_feed_wake_cb;

/* |wake| may be NULL (the consumer polls). Returns 0 or -ENOMEM. */
int tg_pid_feed_new(tg_pid_feed_wake_cb wake, void *wake_ctx,
                    tg_pid_feed_t **out);
/* Frees |f| and every consumer still registered. NULL is a no-op. */
void tg_pid_feed_free(tg_pid_feed_t *f);

/* Registers a consumer of the pids of session |session_id| (not 0).
 * Returns 0, -EINVAL, -ENOSPC (too many consumers) or -ENOMEM. The
 * handle is the caller's until tg_pid_feed_unregister. */
int tg_pid_feed_register(tg_pid_feed_t *f, uint64_t session_id,
                         tg_pid_feed_consumer_t **out);
/* Forgets |c| and its pending pids. NULL is a no-op. */
void tg_pid_feed_unregister(tg_pid_feed_t *f, tg_pid_feed_consumer_t *c);

/* Hands |pids| (borrowed; 0 and negative ones are ignored) to every
 * consumer of |session_id|. Returns how many consumers there were. */
size_t tg_pid_feed_publish(tg_pid_feed_t *f, uint64_t session_id,
                           const int32_t *pids, size_t n);

/* Moves up to |cap| of |c|'s pending pids (each once, in the order they
 * first came) to |out|. Returns how many. */
size_t tg_pid_feed_drain(tg_pid_feed_t *f, tg_pid_feed_consumer_t *c,
                         int32_t *out, size_t cap);

/* Pids |c| dropped for want of room, all told. */
uint64_t tg_pid_feed_dropped(tg_pid_feed_t *f, const tg_pid_feed_consumer_t *c);

#endif /* TRACEGATE_PROBES_PID_FEED_H */
