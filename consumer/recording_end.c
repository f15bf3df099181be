/* How a recording ends (recording_internal.h): failures, the end and its
 * report to the owner, the session freed at the end, the guard on an
 * answer that does not come, and the memory once nothing can reach it.
 *
 * The engine's other files (recording.c, recording_drain.c,
 * recording_replay.c) call it; it calls none of them, only the state
 * setters below it (recording_substate.c), so an end never re-enters the
 * file that asked for it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "abi/consumer_port_methods.h"
#include "common/log.h"
#include "consumer/recording_internal.h"
#include "tracegate/error.h"

#define FREE_GUARD_MS 2000

/* A session that may still run: enabled or attached, not ended. */
static bool session_may_run(const tg_recording_t *r) {
  return r->state == TG_REC_STARTING || r->state == TG_REC_TRACING ||
         r->state == TG_REC_STOPPING;
}

void tg__rec_maybe_release(tg_recording_t *r) {
  if (!r->freed || r->open_timers || r->inflight) return;
  if (r->attached_cfg)
    perfetto__protos__trace_config__free_unpacked(r->attached_cfg, NULL);
  tg_slice_reassembler_free(&r->rd.ra);
  free(r->o.detach_key);
  free(r->o.resume_key);
  free(r->o.attach_key);
  free(r->o.absent_cfg);
  free(r);
}

/* One callback of a call on |c| ran: true if it is news for the
 * recording. Any reply on the current connection is a sign of life.
 * FAILING waits for FreeBuffers alone (on_freed). */
bool tg__rec_answer(tg_recording_t *r, tg_consumer_t *c) {
  r->inflight--;
  if (r->freed) {
    tg__rec_maybe_release(r);
    return false;
  }
  if (c != r->c || tg__rec_is_over(r) || r->state == TG_REC_FAILING)
    return false;
  r->last_rx_ms = tg_clock_ms(r->clock);
  return true;
}

/* A status that only says the connection went: the owner's on_close
 * deals with that (unbind or fail). */
bool tg__rec_conn_going(int status) {
  return status == TG_EPEER_CLOSED || status == -ECANCELED;
}

static void format_ms(char *out, size_t n, uint64_t ms) {
  if (ms % 1000 == 0) snprintf(out, n, "%llus", (unsigned long long)(ms / 1000));
  else snprintf(out, n, "%llums", (unsigned long long)ms);
}

/* --- the end -------------------------------------------------------------- */

void tg__rec_stop_timers(tg_recording_t *r) {
  uv_timer_stop(&r->reader);
  uv_timer_stop(&r->stats);
  uv_timer_stop(&r->stopper);
  uv_timer_stop(&r->deadline);
  uv_timer_stop(&r->guard);
}

static void on_ender(uv_timer_t *t) {
  tg_recording_t *r = t->data;
  r->cbs->on_end(r, r->end_status, r->reason);
}

/* on_end runs from the loop: the end may come from inside an owner's
 * call (tg_recording_fail, unbind). */
void tg__rec_end(tg_recording_t *r, tg_rec_state_t state, int status,
                const char *reason) {
  if (tg__rec_is_over(r)) return;
  tg__rec_stop_timers(r);
  r->end_status = status;
  if (reason != r->reason) snprintf(r->reason, sizeof(r->reason), "%s", reason);
  tg__rec_set_state(r, state);
  /* Refused (logged): the end is an end all the same. */
  if (r->state != state) tg__rec_set_state(r, TG_REC_FAILED);
  uv_timer_start(&r->ender, on_ender, 0, 0);
}

/* A failure found here: a session that may still run is ended with it. */
void tg__rec_fail(tg_recording_t *r, int status, const char *fmt, ...) {
  if (tg__rec_is_over(r)) return;
  char why[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  tg__rec_fail_now(r, true, status < 0 ? status : TG_EREMOTE_FAILED, why);
}

static void on_freed(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)status;
  (void)msg;
  tg_recording_t *r = ctx;
  r->inflight--;
  if (r->freed) {
    tg__rec_maybe_release(r);
    return;
  }
  if (c == r->c && r->state == TG_REC_FAILING)
    tg__rec_end(r, TG_REC_FAILED, r->end_status, r->reason);
}

/* --- the session freed at the end ------------------------------------------ */

/* DONE, the session not freed: said to the owner in the reason. */
void tg__rec_done_not_freed(tg_recording_t *r, const char *fmt, ...) {
  char why[400], reason[500];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  snprintf(reason, sizeof(reason), "the trace is whole, but the session "
           "was not freed: %s", why);
  TG_WARN("recording %p: %s", (void *)r, reason);
  tg__rec_end(r, TG_REC_DONE, 0, reason);
}

static void on_freed_at_end(tg_consumer_t *c, void *ctx, int status,
                            const char *msg) {
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c) || r->state != TG_REC_FREEING) return;
  if (tg__rec_conn_going(status)) return; /* tg_recording_unbind ends it */
  if (status) {
    tg__rec_done_not_freed(r, "%s", msg && msg[0] ? msg : tg_strerror(status));
    return;
  }
  tg__rec_end(r, TG_REC_DONE, 0, "");
}

/* The trace is whole: the session is freed now rather than left to the
 * connection's end, which a relay holding a resume key, or tracegated
 * under a disconnect lease, takes for a lost link: either keeps the
 * session, buffers and all, for the lease (10 min by default). */
void tg__rec_free_at_end(tg_recording_t *r) {
  if (tg__rec_is_over(r) || r->state != TG_REC_STATS) return;
  int rv = r->c && r->binding == TG_REC_BOUND
               ? tg_consumer_free_buffers(r->c, on_freed_at_end, r)
               : TG_ENOT_CONNECTED;
  if (rv < 0) {
    tg__rec_done_not_freed(r, "cannot send %s: %s",
                           tg_cport_name(TG_CPORT_FreeBuffers), tg_strerror(rv));
    return;
  }
  r->inflight++;
  /* Before the state: on_state may end the recording (an unbind). */
  tg__rec_arm_guard(r, FREE_GUARD_MS);
  tg__rec_set_state(r, TG_REC_FREEING);
}

/* --- the guard ------------------------------------------------------------ */

static void on_guard(uv_timer_t *t) {
  tg_recording_t *r = t->data;
  char d[32], g[32], s[32];
  if (r->state == TG_REC_FAILING) { /* FreeBuffers unanswered: end anyway */
    tg__rec_end(r, TG_REC_FAILED, r->end_status, r->reason);
    return;
  }
  if (r->state == TG_REC_FREEING) { /* the trace is whole all the same */
    format_ms(g, sizeof(g), FREE_GUARD_MS);
    tg__rec_done_not_freed(r, "no answer to %s within %s",
                           tg_cport_name(TG_CPORT_FreeBuffers), g);
    return;
  }
  if (r->stop == TG__REC_STOP_DEADLINE && r->state == TG_REC_STOPPING) {
    format_ms(d, sizeof(d), r->duration_ms);
    format_ms(g, sizeof(g), r->o.grace_ms);
    format_ms(s, sizeof(s), r->o.deadline_stop_ms);
    r->deadline_failed = true;
    tg__rec_fail(r, -ETIMEDOUT, "the session did not end by its deadline "
                 "(duration %s + grace %s), and not within %s of being "
                 "stopped", d, g, s);
    return;
  }
  tg__rec_fail(r, -ETIMEDOUT, "no answer in time (%s)",
               r->state == TG_REC_STOPPING ? "stopping the session"
                                           : "reading the end of the trace");
}

void tg__rec_arm_guard(tg_recording_t *r, uint64_t ms) {
  uv_timer_start(&r->guard, on_guard, ms, 0);
}

void tg__rec_fail_now(tg_recording_t *r, bool end_session, int status,
                     const char *reason) {
  if (tg__rec_is_over(r) || r->state == TG_REC_FAILING) return;
  /* A session that may still run is ended rather than left behind: a
   * relay would detach it under our key, for nobody to take back. */
  if (end_session && r->c && session_may_run(r) &&
      tg_consumer_free_buffers(r->c, on_freed, r) == 0) {
    r->inflight++;
    r->end_status = status;
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
    tg__rec_set_state(r, TG_REC_FAILING);
    tg__rec_stop_timers(r);
    tg__rec_arm_guard(r, FREE_GUARD_MS);
    return;
  }
  tg__rec_end(r, TG_REC_FAILED, status, reason);
}

void tg_recording_fail(tg_recording_t *r, bool end_session, const char *reason) {
  tg__rec_fail_now(r, end_session, TG_EREMOTE_FAILED, reason);
}
