/* The recording engine's reading side (recording_internal.h): periodic
 * ReadBuffers and GetTraceStats while tracing, and once the session
 * ended, reads until one comes back empty, then the final statistics. */
#include <errno.h>

#include "consumer/recording_internal.h"
#include "tracegate/error.h"

#define MAX_DRAIN_READS 64

/* --- statistics ----------------------------------------------------------- */

static uint64_t bytes_read_of(const Perfetto__Protos__TraceStats *st) {
  uint64_t n = 0;
  for (size_t i = 0; i < st->n_buffer_stats; i++)
    if (st->buffer_stats[i] && st->buffer_stats[i]->has_bytes_read)
      n += st->buffer_stats[i]->bytes_read;
  return n;
}

/* A stats answer: no read was in flight when it was asked, so its
 * bytes_read is what every read before it took out of the buffers. A cut
 * read is checked against the last such answer before it: unchanged
 * after the rebind, no read since (the cut one included) took anything,
 * so nothing can be missing; changed, the cut read may have taken it (or
 * an earlier read since the answer did, which then delivered it: counted
 * all the same, as the difference cannot be told). */
static void note_base(tg_recording_t *r, const Perfetto__Protos__TraceStats *st) {
  if (!st) return;
  uint64_t b = bytes_read_of(st);
  tg__rec_reader_t *rd = &r->rd;
  if (rd->cut != TG__CUT_NONE) {
    /* Unchanged: the cut read never reached the service (or found the
     * buffers empty); nothing it could have carried is missing. */
    if (rd->cut == TG__CUT_OPEN_NO_BASE || b != rd->cut_base) rd->reads_lost++;
    tg__rec_set_cut(r, TG__CUT_NONE);
  }
  rd->base_bytes = b;
}

static void on_final_stats(tg_consumer_t *c, void *ctx, int status,
                           const char *msg,
                           const Perfetto__Protos__TraceStats *st) {
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c)) return;
  tg__rec_set_stats(r, TG__STATS_IDLE);
  if (tg__rec_conn_going(status)) return;
  if (status == 0) note_base(r, st);
  if (r->state != TG_REC_STATS) return;
  /* Without final statistics the trace is still whole. */
  if (r->cbs->on_stats) r->cbs->on_stats(r, status, msg, st, true);
  tg__rec_free_at_end(r);
}

void tg__rec_final_stats(tg_recording_t *r) {
  tg__rec_set_state(r, TG_REC_STATS);
  if (r->rd.stats == TG__STATS_ASKED) return; /* on_tick_stats asks again */
  int rv = tg_consumer_get_trace_stats(r->c, on_final_stats, r);
  if (rv < 0) {
    if (r->cbs->on_stats) r->cbs->on_stats(r, rv, tg_strerror(rv), NULL, true);
    tg__rec_free_at_end(r);
    return;
  }
  r->inflight++;
  tg__rec_set_stats(r, TG__STATS_ASKED);
}

static void on_tick_stats(tg_consumer_t *c, void *ctx, int status,
                          const char *msg, const Perfetto__Protos__TraceStats *st) {
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c)) return;
  tg__rec_set_stats(r, TG__STATS_IDLE);
  if (tg__rec_conn_going(status)) return;
  if (status == 0) note_base(r, st);
  if (r->cbs->on_stats) r->cbs->on_stats(r, status, msg, st, false);
  if (r->state == TG_REC_STATS && !tg__rec_is_over(r)) tg__rec_final_stats(r);
}

void tg__rec_stats_now(tg_recording_t *r) {
  if (r->rd.stats == TG__STATS_ASKED || r->binding != TG_REC_BOUND) return;
  if (r->rd.read == TG__READ_BUSY) { /* after the read: see note_base */
    tg__rec_set_stats(r, TG__STATS_AFTER_READ);
    return;
  }
  if (tg_consumer_get_trace_stats(r->c, on_tick_stats, r) == 0) {
    r->last_rx_ms = tg_clock_ms(r->clock);
    r->inflight++;
    tg__rec_set_stats(r, TG__STATS_ASKED);
  } else if (r->cbs->on_stats) {
    r->cbs->on_stats(r, TG_ENOT_CONNECTED, "not connected", NULL, false);
  }
}

void tg__rec_on_stats_timer(uv_timer_t *t) {
  tg_recording_t *r = t->data;
  if (r->state == TG_REC_TRACING || r->state == TG_REC_STOPPING) tg__rec_stats_now(r);
}

/* --- reading -------------------------------------------------------------- */

static int on_packet(tg_consumer_t *c, void *ctx, const uint8_t *p, size_t n) {
  tg_recording_t *r = ctx;
  if (r->freed || c != r->c || tg__rec_is_over(r)) return -ECANCELED;
  int rv = r->cbs->on_packet(r, p, n);
  if (rv < 0) return rv;
  r->rd.packets++;
  r->rd.read_bytes += n;
  return 0;
}

/* --- pacing the reads while tracing ------------------------------------ */

/* How long a window of reads the rate is measured over: long enough to
 * span several reads that follow each other, short enough to follow a
 * source that speeds up. */
#define RATE_WINDOW_MS 50

bool tg_recording_clone_snapshot_mode(const Perfetto__Protos__TraceConfig *cfg) {
  const Perfetto__Protos__TraceConfig__TriggerConfig *tc =
      cfg ? cfg->trigger_config : NULL;
  return tc && tc->has_trigger_mode &&
         tc->trigger_mode ==
             PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT;
}

void tg__rec_set_read_target(tg_recording_t *r,
                             const Perfetto__Protos__TraceConfig *cfg) {
  uint64_t target = TG_REC_READ_AGAIN_BYTES;
  /* Snapshots copy the buffers: reading them first would empty them. */
  r->rd.at_end_only = tg_recording_clone_snapshot_mode(cfg);
  for (size_t i = 0; cfg && i < cfg->n_buffers; i++) {
    if (!cfg->buffers[i]) continue;
    /* Reading a DISCARD buffer while tracing would free its room, and it
     * would keep more than its size: it is read once the session ended. */
    if (cfg->buffers[i]->has_fill_policy &&
        cfg->buffers[i]->fill_policy ==
            PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD)
      r->rd.at_end_only = true;
    if (!cfg->buffers[i]->has_size_kb) continue;
    /* A quarter of the smallest ring: read well before it wraps. */
    uint64_t quarter = (uint64_t)cfg->buffers[i]->size_kb * 1024u / 4u;
    if (quarter < target) target = quarter;
  }
  r->rd.read_target = target < TG_REC_MIN_READ_TARGET ? TG_REC_MIN_READ_TARGET
                                                    : target;
}

void tg__rec_pace_begin(tg_recording_t *r) {
  /* The first read brings what came since now: the first window. */
  r->rd.rate_since_ms = tg_clock_ms(r->clock);
  r->rd.rate_bytes = 0;
}

/* After a read while tracing. A read that brought the target means the
 * buffers fill faster than the reads drain them: read on at once. One
 * that brought less (the source's commits come in bursts, or it slowed
 * down) does not mean the source stopped: waiting a whole period would
 * let a fast one wrap the ring and overwrite what it holds (a period is
 * long enough for a fast source to fill a ring many times). The next read
 * comes when the target should be waiting again, at the rate the last
 * window of reads measured, and at the latest at the period. */
static void pace_reads(tg_recording_t *r) {
  tg__rec_reader_t *rd = &r->rd;
  uint64_t now = tg_clock_ms(r->clock);
  rd->rate_bytes += rd->read_bytes;
  uint64_t span = now - rd->rate_since_ms;
  if (span >= RATE_WINDOW_MS) {
    rd->rate_per_ms = (double)rd->rate_bytes / (double)span;
    rd->rate_since_ms = now;
    rd->rate_bytes = 0;
  }
  if (rd->read_bytes >= rd->read_target) {
    tg__rec_read_now(r);
    return;
  }
  uint64_t wait = r->o.read_period_ms;
  if (rd->rate_per_ms > 0) {
    double due = (double)rd->read_target / rd->rate_per_ms;
    if (due < (double)wait) wait = due < 1.0 ? 1 : (uint64_t)due;
  }
  /* The period's tick starts again from here: a slow source is read as
   * often as before. */
  uv_timer_start(&r->reader, tg__rec_on_read_timer, wait, r->o.read_period_ms);
}

static void on_read_done(tg_consumer_t *c, void *ctx, int status,
                         const char *msg) {
  tg_recording_t *r = ctx;
  if (!tg__rec_answer(r, c)) return;
  tg__rec_set_read(r, TG__READ_IDLE);
  r->rd.reads_done++;
  if (tg__rec_conn_going(status)) {
    tg__rec_read_cut(r);
    return;
  }
  if (status) {
    tg__rec_fail(r, status, "reading the trace failed: %s", msg);
    return;
  }
  tg__rec_ack(r, r->state == TG_REC_DRAINING);
  if (r->state != TG_REC_DRAINING) {
    if (r->rd.stats == TG__STATS_AFTER_READ || r->o.stats_period_ms) {
      if (r->rd.stats == TG__STATS_AFTER_READ)
        tg__rec_set_stats(r, TG__STATS_IDLE);
      tg__rec_stats_now(r);
    }
    if (r->state == TG_REC_TRACING || r->state == TG_REC_STOPPING)
      pace_reads(r);
    return;
  }
  /* After the end, read until a read comes back empty. */
  if (r->rd.packets > r->rd.packets_before_read &&
      ++r->rd.drain_reads < MAX_DRAIN_READS) {
    tg__rec_read_now(r);
    return;
  }
  tg__rec_final_stats(r);
}

void tg__rec_read_cut(tg_recording_t *r) {
  tg__rec_reader_t *rd = &r->rd;
  rd->reads_cut++;
  if (rd->cut != TG__CUT_NONE) rd->reads_lost++; /* never checked */
  tg__rec_set_cut(r, rd->base_bytes == TG__REC_NO_BASE ? TG__CUT_OPEN_NO_BASE
                                                     : TG__CUT_OPEN);
  rd->cut_base = rd->base_bytes;
}

void tg__rec_read_now(tg_recording_t *r) {
  tg__rec_reader_t *rd = &r->rd;
  if (rd->read == TG__READ_HELD || rd->read == TG__READ_HELD_DUE) {
    /* tg_recording_release_reads() reads */
    tg__rec_set_read(r, TG__READ_HELD_DUE);
    return;
  }
  if (rd->read == TG__READ_BUSY || r->binding != TG_REC_BOUND ||
      !tg_consumer_ready(r->c))
    return;
  rd->packets_before_read = rd->packets;
  rd->read_bytes = 0;
  int rv = tg_consumer_read_buffers_into(r->c, &rd->ra, &rd->rx_frames,
                                         &rd->rx_bytes, on_packet,
                                         on_read_done, r);
  if (rv == TG_ENOT_CONNECTED) return; /* on_close is on its way */
  if (rv < 0) {
    tg__rec_fail(r, rv, "cannot read the trace: %s", tg_strerror(rv));
    return;
  }
  if (rd->stats != TG__STATS_ASKED) r->last_rx_ms = tg_clock_ms(r->clock);
  r->inflight++;
  tg__rec_set_read(r, TG__READ_BUSY);
}

void tg__rec_on_read_timer(uv_timer_t *t) {
  tg_recording_t *r = t->data;
  if (r->state == TG_REC_TRACING || r->state == TG_REC_STOPPING) tg__rec_read_now(r);
}

/* --- the session ended: draining ------------------------------------------ */

void tg__rec_drain(tg_recording_t *r) {
  tg__rec_stop_timers(r);
  tg__rec_set_state(r, TG_REC_DRAINING);
  r->rd.drain_reads = 0;
  tg__rec_arm_guard(r, r->o.guard_ms);
  if (!r->o.stream) {
    tg__rec_final_stats(r);
    return;
  }
  if (r->rd.read != TG__READ_BUSY) tg__rec_read_now(r);
  /* else: on_read_done sees DRAINING and goes on. */
}

