/* The recording engine (recording.h): one session's life over a borrowed
 * connection. The EnableTracing reply (or, after an attach, the
 * attach_notification_only one) is the one event that says tracing ended,
 * whatever ended it.
 *
 * Every consumer callback first goes through tg__rec_answer(): a reply
 * from an older connection, or one after the end, is not news. Calls in
 * flight are counted so that the memory outlives them after
 * tg_recording_free. Reads, statistics and draining: recording_drain.c;
 * failures and the end: recording_end.c; the states' setters:
 * recording_substate.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/consumer_port_methods.h"
#include "common/log.h"
#include "consumer/recording_internal.h"
#include "tracegate/error.h"

#define N_TIMERS 6

static void request_stop(tg_recording_t *r);

static bool bound(const tg_recording_t *r) {
  return r->binding == TG_REC_BOUND;
}

/* --- the deadline ------------------------------------------------------- */

static void disable_now(tg_recording_t *r);

/* Past duration + grace: stop the session, and give it deadline_stop_ms
 * to end. Not bound, the rebind does it. */
static void on_deadline(uv_timer_t *t) {
  tg_recording_t *r = t->data;
  tg__rec_set_stop(r, TG__REC_STOP_DEADLINE);
  if (!bound(r)) return;
  if (r->state == TG_REC_TRACING) {
    request_stop(r);
  } else if (r->state == TG_REC_STOPPING) {
    disable_now(r); /* again: the flush may be what hangs */
  } else {
    return;
  }
  tg__rec_arm_guard(r, r->o.deadline_stop_ms);
}

static void on_stopper(uv_timer_t *t) { tg_recording_stop(t->data); }

/* --- stopping ------------------------------------------------------------- */

static void on_disabled(tg_consumer_t *c, void *ctx, int status,
                        const char *msg) {
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c) || !status || tg__rec_conn_going(status)) return;
  if (r->state == TG_REC_STOPPING)
    tg__rec_fail(r, status, "cannot stop tracing: %s", msg);
}

static void disable_now(tg_recording_t *r) {
  int rv = tg_consumer_disable_tracing(r->c, on_disabled, r);
  if (rv == 0) r->inflight++;
  else if (rv != TG_ENOT_CONNECTED)
    tg__rec_fail(r, rv, "cannot stop tracing: %s", tg_strerror(rv));
}

static void on_stop_flushed(tg_consumer_t *c, void *ctx, int status,
                            const char *msg) {
  (void)msg;
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c) || tg__rec_conn_going(status)) return;
  /* A failed flush still ends with what was committed. */
  if (r->state == TG_REC_STOPPING) disable_now(r);
}

/* STOPPING on this connection: flush, then disable. */
static void send_stop(tg_recording_t *r) {
  uv_timer_stop(&r->stopper);
  tg__rec_arm_guard(r, r->o.guard_ms);
  if (tg_consumer_flush(r->c, TG_REC_STOP_FLUSH_TIMEOUT_MS, on_stop_flushed,
                        r) == 0)
    r->inflight++;
  else
    disable_now(r);
}

static void request_stop(tg_recording_t *r) {
  if (r->stop == TG__REC_STOP_NONE) tg__rec_set_stop(r, TG__REC_STOP_WANTED);
  if (r->state != TG_REC_TRACING || !bound(r)) return;
  tg__rec_set_state(r, TG_REC_STOPPING);
  send_stop(r);
}

/* --- the session ended ---------------------------------------------------- */

static void on_ended(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c) || tg__rec_conn_going(status)) return;
  if (status) {
    /* The service ended it: there is no session to end. */
    tg__rec_fail_now(r, false, status < 0 ? status : TG_EREMOTE_FAILED, msg);
    return;
  }
  if (r->state == TG_REC_DRAINING || r->state == TG_REC_STATS) return;
  tg__rec_drain(r);
}

/* --- starting ------------------------------------------------------------- */

/* Tracing begins, or goes on on a new connection (STOPPING: the stop is
 * sent again there). */
static void begin_tracing(tg_recording_t *r) {
  bool stopping = r->state == TG_REC_STOPPING;
  if (!stopping) tg__rec_set_state(r, TG_REC_TRACING);
  if (r->o.stream && !r->rd.at_end_only) {
    tg__rec_pace_begin(r);
    uv_timer_start(&r->reader, tg__rec_on_read_timer, r->o.first_read_ms,
                   r->o.read_period_ms);
  }
  if (r->o.stats_period_ms)
    uv_timer_start(&r->stats, tg__rec_on_stats_timer, r->o.stats_period_ms,
                   r->o.stats_period_ms);
  if (!stopping && r->stop == TG__REC_STOP_NONE) return;
  if (stopping) send_stop(r);
  else request_stop(r);
  if (r->stop == TG__REC_STOP_DEADLINE)
    tg__rec_arm_guard(r, r->o.deadline_stop_ms);
}

/* How long a START_TRACING trigger may keep the session waiting before
 * its duration even begins: the deadline must not run out first. */
static uint64_t start_trigger_wait_ms(const Perfetto__Protos__TraceConfig *cfg) {
  const Perfetto__Protos__TraceConfig__TriggerConfig *t = cfg->trigger_config;
  if (!t || !t->has_trigger_mode ||
      t->trigger_mode !=
          PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING)
    return 0;
  return t->has_trigger_timeout_ms ? t->trigger_timeout_ms : 0;
}

/* The clocks that bound the session: -t on our side, and the deadline
 * (its duration after a start trigger's longest wait, then the grace). */
static void start_clocks(tg_recording_t *r) {
  if (r->o.stop_after_ms)
    uv_timer_start(&r->stopper, on_stopper, r->o.stop_after_ms, 0);
  uint64_t d = r->o.stop_after_ms ? r->o.stop_after_ms : r->duration_ms;
  r->duration_ms = d;
  if (d)
    uv_timer_start(&r->deadline, on_deadline,
                   r->start_wait_ms + d + r->o.grace_ms, 0);
}

static void on_started(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c) || !status || tg__rec_conn_going(status)) return;
  tg__rec_fail(r, status, "cannot start tracing: %s", msg);
}

static void on_detached(tg_consumer_t *c, void *ctx, int status,
                        const char *msg) {
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c)) return;
  if (status) {
    if (r->state == TG_REC_STARTING) {
      tg__rec_fail(r, status, "cannot detach: %s", msg);
    } else {
      char why[600];
      snprintf(why, sizeof(why), "could not detach again: %s", msg);
      tg__rec_end(r, TG_REC_DETACHED, status, why);
    }
    return;
  }
  tg__rec_end(r, TG_REC_DETACHED, 0, "");
}

static int enable(tg_recording_t *r, const tg_recording_opts_t *o) {
  int fd = o->fd;
  Perfetto__Protos__TraceConfig *cfg =
      perfetto__protos__trace_config__unpack(NULL, o->config_len, o->config);
  if (!cfg) {
    if (fd >= 0) close(fd);
    return TG_EPROTO_DECODE;
  }
  r->duration_ms = cfg->has_duration_ms ? cfg->duration_ms : 0;
  r->start_wait_ms = start_trigger_wait_ms(cfg);
  bool deferred_start = cfg->has_deferred_start && cfg->deferred_start;
  tg__rec_set_read_target(r, cfg);
  perfetto__protos__trace_config__free_unpacked(cfg, NULL);
  int rv = tg_consumer_enable_tracing(r->c, o->config, o->config_len, fd,
                                      on_ended, r);
  if (rv < 0) return rv;
  r->inflight++;
  tg__rec_set_state(r, TG_REC_STARTING);
  /* Requests are handled in order: each of these sees the new session. */
  if (deferred_start) {
    rv = tg_consumer_start_tracing(r->c, on_started, r);
    if (rv < 0) {
      tg__rec_fail(r, rv, "cannot start tracing: %s", tg_strerror(rv));
      return 0;
    }
    r->inflight++;
  }
  if (r->o.detach_key) {
    rv = tg_consumer_detach(r->c, r->o.detach_key, on_detached, r);
    if (rv < 0) tg__rec_fail(r, rv, "cannot detach: %s", tg_strerror(rv));
    else r->inflight++;
    return 0;
  }
  start_clocks(r);
  begin_tracing(r);
  return 0;
}

/* After an Attach (first or rebind): follow the session's end. */
static int follow(tg_recording_t *r) {
  int rv = tg_consumer_notify_on_end(r->c, on_ended, r);
  if (rv == 0) r->inflight++;
  return rv;
}

static void after_attach_sync(tg_recording_t *r);

static void on_attached(tg_consumer_t *c, void *ctx, int status,
                        const char *msg, const uint8_t *config, size_t len) {
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c) || tg__rec_conn_going(status)) return;
  uint8_t *absent = r->o.absent_cfg;
  r->o.absent_cfg = NULL;
  if (status == TG_EREMOTE_FAILED && absent) {
    /* Nothing detached under the key: make the session. */
    tg_recording_opts_t o = {
        .config = absent, .config_len = r->o.absent_cfg_len, .fd = -1};
    int rv = enable(r, &o);
    free(absent);
    if (rv < 0 && !tg__rec_is_over(r))
      tg__rec_fail(r, rv, "no session under '%s', and cannot enable one: %s",
                   r->o.attach_key, tg_strerror(rv));
    return;
  }
  free(absent);
  if (status) {
    tg__rec_fail(r, status, "cannot attach to the session '%s': %s",
                 r->o.attach_key, msg);
    return;
  }
  r->attached_cfg = perfetto__protos__trace_config__unpack(NULL, len, config);
  if (!r->attached_cfg) {
    tg__rec_fail(r, TG_EPROTO_DECODE,
                 "the service sent a TraceConfig that does not decode");
    return;
  }
  tg__rec_set_state(r, TG_REC_STARTING); /* the session is ours now */
  r->duration_ms = r->attached_cfg->has_duration_ms ? r->attached_cfg->duration_ms : 0;
  r->start_wait_ms = start_trigger_wait_ms(r->attached_cfg);
  tg__rec_set_read_target(r, r->attached_cfg);
  int want = r->cbs->on_attached ? r->cbs->on_attached(r, r->attached_cfg) : 0;
  if (tg__rec_is_over(r)) return;
  if (want < 0) {
    tg__rec_fail(r, want, "cannot record the session '%s': %s",
                 r->o.attach_key, tg_strerror(want));
    return;
  }
  int rv;
  if (want > 0) { /* give it back rather than end it */
    rv = tg_consumer_detach(c, r->o.attach_key, on_detached, r);
    if (rv == 0) {
      r->inflight++;
      return;
    }
    tg__rec_end(r, TG_REC_DETACHED, rv, "could not detach again");
    return;
  }
  /* The relay may have numbered this key's replies for a client before
   * us (one that crashed): take its numbering first. */
  if ((rv = tg__rec_replay_sync(r, after_attach_sync)) < 0)
    tg__rec_fail(r, rv, "cannot resume the trace numbering: %s",
                 tg_strerror(rv));
}

static void after_attach_sync(tg_recording_t *r) {
  tg__rec_set_binding(r, TG_REC_BOUND);
  int rv = follow(r);
  if (rv < 0) {
    tg__rec_fail(r, rv, "cannot follow the session: %s", tg_strerror(rv));
    return;
  }
  start_clocks(r);
  begin_tracing(r);
}

/* Copies what the owner asked for (keys, the absent config, the
 * periods with their defaults). Returns 0 or -ENOMEM. */
static int take_opts(tg_recording_t *r, const tg_recording_opts_t *o) {
  tg__rec_opts_t *k = &r->o;
  if ((o->detach_key && !(k->detach_key = strdup(o->detach_key))) ||
      (o->resume_key && !(k->resume_key = strdup(o->resume_key))) ||
      (o->attach_key && !(k->attach_key = strdup(o->attach_key))))
    return -ENOMEM;
  if (o->attach_key && o->enable_if_absent && o->config && o->config_len) {
    if (!(k->absent_cfg = malloc(o->config_len))) return -ENOMEM;
    memcpy(k->absent_cfg, o->config, o->config_len);
    k->absent_cfg_len = o->config_len;
  }
  k->stream = o->stream;
  k->read_period_ms = o->read_period_ms ? o->read_period_ms
                                        : TG_REC_DEFAULT_READ_PERIOD_MS;
  k->first_read_ms = o->first_read_ms ? o->first_read_ms
                                      : TG_REC_DEFAULT_FIRST_READ_MS;
  if (!o->first_read_ms && k->first_read_ms > k->read_period_ms)
    k->first_read_ms = k->read_period_ms;
  k->stats_period_ms = o->stats_period_ms;
  k->guard_ms = o->guard_ms ? o->guard_ms : TG_REC_DEFAULT_GUARD_MS;
  k->deadline_stop_ms = o->deadline_stop_ms ? o->deadline_stop_ms
                                            : TG_REC_DEFAULT_DEADLINE_STOP_MS;
  k->grace_ms = o->grace_ms ? o->grace_ms : TG_REC_DEFAULT_GRACE_MS;
  k->stop_after_ms = o->stop_after_ms;
  k->replay = o->replay && k->resume_key;
  return 0;
}

int tg_recording_start(tg_recording_t *r, tg_consumer_t *c,
                       const tg_recording_opts_t *o) {
  int fd = o->fd;
  int rv = r->state != TG_REC_IDLE || !c ||
                   (o->stream && !r->cbs->on_packet) ||
                   (!o->attach_key && (!o->config || !o->config_len))
               ? -EINVAL
               : take_opts(r, o);
  if (rv < 0) {
    if (fd >= 0) close(fd);
    return rv;
  }
  r->c = c;
  if (o->hold_reads) tg__rec_set_read(r, TG__READ_HELD);
  tg__rec_set_read_target(r, NULL);
  r->last_rx_ms = tg_clock_ms(r->clock);
  if (!o->attach_key) return enable(r, o);
  if (fd >= 0) close(fd); /* an attached session has its own output */
  rv = tg_consumer_attach(c, r->o.attach_key, on_attached, r);
  if (rv < 0) return rv;
  r->inflight++;
  tg__rec_set_state(r, TG_REC_ATTACHING);
  return 0;
}

/* --- the owner's calls ---------------------------------------------------- */

void tg_recording_set_stream(tg_recording_t *r, bool stream) {
  r->o.stream = stream && r->cbs->on_packet;
}

void tg_recording_stop(tg_recording_t *r) {
  if (tg__rec_is_over(r)) return;
  request_stop(r);
}

bool tg_recording_resumable(const tg_recording_t *r) {
  if (!r->o.resume_key) return false;
  /* STARTING: attached, the session ours, not followed yet; what the lost
   * link cut is taken up there. */
  return r->state == TG_REC_TRACING || r->state == TG_REC_STOPPING ||
         (r->state == TG_REC_STARTING && !bound(r));
}

void tg_recording_unbind(tg_recording_t *r) {
  if (tg__rec_is_over(r) || r->state == TG_REC_IDLE) return;
  r->c = NULL;
  tg__rec_set_binding(r, TG_REC_UNBOUND);
  /* Its answer, if it ever comes, is no longer news (tg__rec_answer). */
  if (r->rd.read == TG__READ_BUSY) {
    tg__rec_read_cut(r);
    tg__rec_set_read(r, TG__READ_IDLE);
  }
  tg__rec_set_stats(r, TG__STATS_IDLE);
  if (r->state == TG_REC_FAILING) {
    tg__rec_end(r, TG_REC_FAILED, r->end_status, r->reason);
    return;
  }
  if (r->state == TG_REC_FREEING) {
    tg__rec_done_not_freed(r, "the connection went before the service "
                           "answered %s", tg_cport_name(TG_CPORT_FreeBuffers));
    return;
  }
  uv_timer_stop(&r->reader);
  uv_timer_stop(&r->stats);
  uv_timer_stop(&r->guard);
}

static void after_resume(tg_recording_t *r);

static void on_reattached(tg_consumer_t *c, void *ctx, int status,
                          const char *msg, const uint8_t *config, size_t len) {
  (void)config;
  (void)len;
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c) || tg__rec_conn_going(status)) return;
  if (status) {
    /* Not on this connection: the owner rebinds again, or fails. */
    r->c = NULL;
    tg__rec_set_binding(r, TG_REC_UNBOUND);
    if (r->cbs->on_rebound) r->cbs->on_rebound(r, status, msg);
    return;
  }
  /* What the lost link swallowed comes first (the relay sends it again),
   * then the recording goes on where it was. */
  int rv = tg__rec_resume(r, after_resume);
  if (rv < 0)
    tg__rec_fail(r, rv, "cannot resume the trace after re-attaching: %s",
                 tg_strerror(rv));
}

static void after_resume(tg_recording_t *r) {
  tg__rec_set_binding(r, TG_REC_BOUND);
  int rv = follow(r);
  if (rv < 0) {
    tg__rec_fail(r, rv, "cannot follow the session after re-attaching: %s",
                 tg_strerror(rv));
    return;
  }
  begin_tracing(r);
  if (r->cbs->on_rebound) r->cbs->on_rebound(r, 0, "");
  /* What was lost while away shows in the counters now. */
  if (!tg__rec_is_over(r) && r->o.stats_period_ms) tg__rec_stats_now(r);
}

int tg_recording_rebind(tg_recording_t *r, tg_consumer_t *c) {
  if (tg__rec_is_over(r) || r->binding != TG_REC_UNBOUND ||
      !r->o.resume_key || !c)
    return -EINVAL;
  int rv = tg_consumer_attach(c, r->o.resume_key, on_reattached, r);
  if (rv < 0) return rv;
  r->inflight++;
  r->c = c;
  tg__rec_set_binding(r, TG_REC_REATTACHING);
  r->last_rx_ms = tg_clock_ms(r->clock);
  return 0;
}

/* --- life and queries ----------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h) {
  tg_recording_t *r = h->data;
  r->open_timers--;
  tg__rec_maybe_release(r);
}

tg_recording_t *tg_recording_new(uv_loop_t *loop, const tg_clock_t *clock,
                                 const tg_recording_cbs_t *cbs, void *data) {
  tg_recording_t *r = calloc(1, sizeof(*r));
  if (!r) return NULL;
  r->loop = loop;
  r->clock = clock;
  r->cbs = cbs;
  r->data = data;
  r->state = TG_REC_IDLE;
  r->binding = TG_REC_BOUND; /* to the connection tg_recording_start gives */
  r->rd.base_bytes = TG__REC_NO_BASE;
  tg_slice_reassembler_init(&r->rd.ra, TG_CONSUMER_DEFAULT_MAX_PACKET);
  uv_timer_t *timers[N_TIMERS] = {&r->reader, &r->stats, &r->stopper,
                                  &r->deadline, &r->guard, &r->ender};
  for (size_t i = 0; i < N_TIMERS; i++) {
    uv_timer_init(loop, timers[i]);
    timers[i]->data = r;
  }
  r->open_timers = N_TIMERS;
  return r;
}

void tg_recording_free(tg_recording_t *r) {
  if (!r || r->freed) return;
  r->freed = true;
  uv_timer_t *timers[N_TIMERS] = {&r->reader, &r->stats, &r->stopper,
                                  &r->deadline, &r->guard, &r->ender};
  for (size_t i = 0; i < N_TIMERS; i++)
    uv_close((uv_handle_t *)timers[i], on_timer_closed);
}

void *tg_recording_data(const tg_recording_t *r) { return r->data; }
tg_rec_state_t tg_recording_state(const tg_recording_t *r) { return r->state; }
tg_rec_binding_t tg_recording_binding(const tg_recording_t *r) {
  return r->binding;
}
uint64_t tg_recording_bad_transitions(const tg_recording_t *r) {
  return r->bad_transitions;
}
/* The service said the session ended: its end is read, or was. */
bool tg_recording_ended(const tg_recording_t *r) {
  return r->state == TG_REC_DRAINING || r->state == TG_REC_STATS ||
         r->state == TG_REC_FREEING || r->state == TG_REC_DONE;
}
const char *tg_recording_end_reason(const tg_recording_t *r) {
  return tg__rec_is_over(r) ? r->reason : "";
}
bool tg_recording_deadline_failed(const tg_recording_t *r) {
  return r->deadline_failed;
}
uint64_t tg_recording_reads(const tg_recording_t *r) {
  return r->rd.reads_done;
}

void tg_recording_read_first_now(tg_recording_t *r) {
  if (!r->o.stream || r->rd.at_end_only || r->state != TG_REC_TRACING ||
      !bound(r) || r->rd.read == TG__READ_BUSY || r->rd.reads_done > 0)
    return;
  uv_timer_start(&r->reader, tg__rec_on_read_timer, 0, r->o.read_period_ms);
}

void tg_recording_release_reads(tg_recording_t *r) {
  if (r->rd.read != TG__READ_HELD && r->rd.read != TG__READ_HELD_DUE) return;
  bool due = r->rd.read == TG__READ_HELD_DUE;
  tg__rec_set_read(r, TG__READ_IDLE);
  if (!due || !bound(r)) return;
  if (r->state == TG_REC_TRACING || r->state == TG_REC_STOPPING ||
      r->state == TG_REC_DRAINING)
    tg__rec_read_now(r);
}
unsigned tg_recording_reads_cut(const tg_recording_t *r) {
  return r->rd.reads_cut - r->rd.reads_recovered;
}
unsigned tg_recording_reads_lost(const tg_recording_t *r) {
  /* A cut read the replay made whole lost nothing. */
  unsigned lost = r->rd.reads_lost + (r->rd.cut != TG__CUT_NONE ? 1u : 0u);
  return lost > r->rd.reads_recovered ? lost - r->rd.reads_recovered : 0;
}

const Perfetto__Protos__TraceConfig *tg_recording_config(const tg_recording_t *r) {
  return r->attached_cfg;
}

uint64_t tg_recording_waiting_ms(const tg_recording_t *r, uint64_t now_ms) {
  if (r->rd.read != TG__READ_BUSY && r->rd.stats != TG__STATS_ASKED) return 0;
  return now_ms > r->last_rx_ms ? now_ms - r->last_rx_ms : 0;
}

void tg_recording_replay_stats(const tg_recording_t *r,
                               tg_rec_replay_stats_t *out) {
  *out = r->rd.replay_stats;
}
