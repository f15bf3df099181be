/* Flush bookkeeping of a session: one Flush command per producer, acks,
 * timeouts, and the flush counters of the trace stats.
 *
 * Owns: tg_session_flushes_t and its tg_pending_flush_t entries. Must
 * never answer a consumer itself (completion goes to the session observer
 * or to the internal |done| callback) nor change the session's state, nor
 * call session.c, which calls it: a flush's start goes back to the session
 * through |started|, producers are reached through the session's
 * tg_producer_ops_t.
 */
#ifndef TRACEGATE_SERVICE_SESSION_FLUSH_H
#define TRACEGATE_SERVICE_SESSION_FLUSH_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/list.h"
#include "service/service.h"

/* |status| as the observer's flush_done gets it. */
typedef void (*tg_session_flush_done_fn)(tg_session_t *s, int status);

/* A Flush in progress: waits for every producer's ack or the timeout. */
typedef struct tg_pending_flush {
  tg_list_t node;
  tg_session_t *session;
  uint64_t request_id; /* sent to producers */
  uv_timer_t timer;
  uint16_t *waiting; /* producer ids not acked yet */
  size_t n_waiting;
  uint64_t cookie;               /* != 0: reported to the observer */
  tg_session_flush_done_fn done; /* internal flushes */
} tg_pending_flush_t;

typedef struct tg_session_flushes {
  tg_list_t pending; /* tg_pending_flush_t.node */
  /* Each flush of the session, as it starts (before its Flush commands
   * go out); NULL: nothing to tell. */
  void (*started)(tg_session_t *s);
  uint64_t requested, succeeded, failed;
} tg_session_flushes_t;

/* A consumer's Flush: the observer's flush_done gets |cookie| (not 0). */
void tg__session_flush(tg_session_t *s, uint32_t timeout_ms, uint64_t cookie);
/* Producer |p| committed everything up to flush |flush_id|: every flush
 * of every session that waited for it up to there is acked. */
void tg__session_flush_ack(tg_service_t *svc, tg_producer_t *p,
                           uint64_t flush_id);

void tg__session_flushes_init(tg_session_flushes_t *fl,
                              void (*started)(tg_session_t *s));
/* Starts a flush of |s|. Completion, possibly before this returns: the
 * observer's flush_done with |cookie| if it is not 0, then |done|. */
void tg__session_flush_start(tg_session_t *s, uint32_t timeout_ms,
                             uint64_t cookie, tg_session_flush_done_fn done);
/* Producer |producer_id| can no longer answer the flushes of |s|. */
void tg__session_flushes_producer_gone(tg_session_t *s, uint16_t producer_id);
/* Fails every flush of |s| still waiting; internal |done|s are not run. */
void tg__session_flushes_abandon(tg_session_t *s);
/* The ids of |p|'s instances in |s| that |want| accepts, malloc'ed; NULL
 * (and *n = 0) when there are none. */
uint64_t *tg__session_instance_ids(tg_producer_t *p, tg_session_t *s,
                                   bool (*want)(const tg_ds_instance_t *),
                                   size_t *n);

#endif /* TRACEGATE_SERVICE_SESSION_FLUSH_H */
