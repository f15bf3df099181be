/* The read-out engine (clone_read.h): its table, its one setter and
 * the replies that move it. */
#include "consumer/clone_read.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/fsm.h"
#include "tracegate/error.h"

#define S(x) TG_FSM_BIT(TG_CLONE_##x)
/* Each state's arrows out of it (clone_read.h's diagram). */
static const uint32_t kNext[] = {
    [TG_CLONE_CONNECTING] = S(CLONING) | S(TRACING) | S(FAILED),
    [TG_CLONE_CLONING] = S(READING) | S(FAILED),
    [TG_CLONE_TRACING] = S(READING) | S(FAILED),
    [TG_CLONE_READING] = S(STATS) | S(FREEING) | S(FAILED),
    [TG_CLONE_STATS] = S(FREEING) | S(DONE) | S(FAILED),
    [TG_CLONE_FREEING] = S(DONE) | S(FAILED),
    [TG_CLONE_DONE] = 0,
    [TG_CLONE_FAILED] = 0,
};
#undef S

static const char *const kNames[] = {
    [TG_CLONE_CONNECTING] = "connecting", [TG_CLONE_CLONING] = "cloning",
    [TG_CLONE_TRACING] = "tracing",       [TG_CLONE_READING] = "reading",
    [TG_CLONE_STATS] = "stats",           [TG_CLONE_FREEING] = "freeing",
    [TG_CLONE_DONE] = "done",             [TG_CLONE_FAILED] = "failed"};

_Static_assert(TG_FSM_COUNT(kNext) == TG_CLONE_STATE_COUNT,
               "an arrow set per state");
_Static_assert(TG_FSM_COUNT(kNames) == TG_CLONE_STATE_COUNT,
               "a name per state");

static const tg_fsm_def_t kDef = {.what = "clone",
                                  .n_states = TG_CLONE_STATE_COUNT,
                                  .next = kNext,
                                  .names = kNames};

bool tg_clone_read_transition_ok(tg_clone_state_t from, tg_clone_state_t to) {
  return tg_fsm_allowed(&kDef, from, to);
}

const char *tg_clone_state_name(tg_clone_state_t st) {
  return tg_fsm_name(&kDef, st);
}

const tg_clone_ops_t tg_clone_read_consumer_ops = {
    .clone = tg_consumer_clone_session,
    .read = tg_consumer_read_buffers,
    .stats = tg_consumer_get_trace_stats,
    .free = tg_consumer_free_buffers,
    .enable = tg_consumer_enable_tracing,
};

static uint64_t now_ms(const tg_clone_read_t *e) {
  return tg_clock_ms(e->clock);
}

/* The one transition (common/fsm.h's policy: a refused one is not made,
 * counted and logged). Returns whether it was made. */
static bool set_state(tg_clone_read_t *e, tg_clone_state_t to) {
  tg_clone_state_t from = e->st;
  unsigned st = from;
  if (!tg_fsm_move(&kDef, &st, to, &e->bad_transitions, e->name, NULL))
    return false;
  e->st = to;
  if (e->cbs->on_state) e->cbs->on_state(e, from, to);
  return true;
}

static void heard(tg_clone_read_t *e) { e->heard_ms = now_ms(e); }

/* The first failure is the one the caller is told. */
static void note_failure(tg_clone_read_t *e, int status, const char *msg) {
  if (e->status) return;
  e->status = status ? status : -EIO;
  e->failed_in = e->st;
  snprintf(e->msg, sizeof(e->msg), "%s",
           msg && msg[0] ? msg : tg_strerror(e->status));
}

/* DONE, or FAILED for a failure noted on the way; on_end once. */
static void finish(tg_clone_read_t *e) {
  if (!set_state(e, e->status ? TG_CLONE_FAILED : TG_CLONE_DONE)) return;
  e->cbs->on_end(e, e->status, e->status ? e->msg : "");
}

static void fail(tg_clone_read_t *e, int status, const char *msg) {
  note_failure(e, status, msg);
  finish(e);
}

static void on_freed(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  tg_clone_read_t *e = ctx;
  if (e->st != TG_CLONE_FREEING) return; /* cut or cancelled meanwhile */
  heard(e);
  e->free_status = status;
  snprintf(e->free_msg, sizeof(e->free_msg), "%s", status ? msg : "");
  finish(e);
}

static void free_clone(tg_clone_read_t *e) {
  if (!set_state(e, TG_CLONE_FREEING) || e->st != TG_CLONE_FREEING) return;
  int rv = e->o.ops->free(e->c, on_freed, e);
  if (rv < 0) {
    e->free_status = rv;
    snprintf(e->free_msg, sizeof(e->free_msg), "%s", tg_strerror(rv));
    finish(e);
  }
}

uint64_t tg_clone_loss_fold(const Perfetto__Protos__TraceStats *st) {
  uint64_t loss = 0;
  for (size_t i = 0; st && i < st->n_buffer_stats; i++) {
    const Perfetto__Protos__TraceStats__BufferStats *b = st->buffer_stats[i];
    loss += b->chunks_discarded + b->patches_failed + b->abi_violations +
            b->trace_writer_packet_loss;
  }
  return loss;
}

static void on_stats(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st) {
  (void)c;
  tg_clone_read_t *e = ctx;
  if (e->st != TG_CLONE_STATS) return;
  heard(e);
  if (status == 0 && !st) status = TG_EPROTO_DECODE;
  if (e->cbs->on_stats)
    e->cbs->on_stats(e, status, msg, status ? NULL : st,
                     status ? 0 : tg_clone_loss_fold(st));
  if (e->st == TG_CLONE_STATS) free_clone(e); /* unless on_stats ended it */
}

/* The reads are over: the loss counters, or straight to FreeBuffers. */
static void after_reads(tg_clone_read_t *e) {
  if (!e->o.stats) {
    free_clone(e);
    return;
  }
  if (!set_state(e, TG_CLONE_STATS)) return;
  int rv = e->o.ops->stats(e->c, on_stats, e);
  if (rv >= 0) return;
  if (e->cbs->on_stats) e->cbs->on_stats(e, rv, tg_strerror(rv), NULL, 0);
  if (e->st == TG_CLONE_STATS) free_clone(e);
}

/* A read failed: the clone is freed first when asked for. */
static void read_failed(tg_clone_read_t *e, int status, const char *msg) {
  note_failure(e, status, msg);
  if (e->o.free_on_error) free_clone(e);
  else finish(e);
}

static int on_packet(tg_consumer_t *c, void *ctx, const uint8_t *p, size_t n) {
  (void)c;
  tg_clone_read_t *e = ctx;
  if (e->st != TG_CLONE_READING) return -ECANCELED;
  heard(e);
  e->packets++;
  e->read_packets++;
  e->bytes += n;
  return e->cbs->on_packet(e, p, n);
}

static void read_next(tg_clone_read_t *e);

static void on_read(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  tg_clone_read_t *e = ctx;
  if (e->st != TG_CLONE_READING) return;
  heard(e);
  if (status) {
    read_failed(e, status, msg);
    return;
  }
  int rv = e->cbs->on_progress ? e->cbs->on_progress(e, e->read_packets) : 0;
  if (e->st != TG_CLONE_READING) return; /* the caller ended it */
  if (rv < 0) {
    read_failed(e, rv, tg_strerror(rv));
    return;
  }
  /* The clone does not grow: a read that brings nothing ends it. */
  if (e->read_packets && (!e->o.max_reads || e->reads < e->o.max_reads))
    read_next(e);
  else
    after_reads(e);
}

static void read_next(tg_clone_read_t *e) {
  e->read_packets = 0;
  e->reads++;
  int rv = e->o.ops->read(e->c, on_packet, on_read, e);
  if (rv < 0) read_failed(e, rv, tg_strerror(rv));
}

/* The clone answered, or the session ended (TRACING): read it out. */
static void on_cloned(tg_consumer_t *c, void *ctx, int status,
                      const char *msg) {
  (void)c;
  tg_clone_read_t *e = ctx;
  if (e->st != TG_CLONE_CLONING && e->st != TG_CLONE_TRACING) return;
  heard(e);
  if (status) {
    fail(e, status, msg);
    return;
  }
  /* The floor's clock starts at the clone's answer (clone_rate.h). */
  tg_clone_rate_start(&e->rate, (int64_t)e->heard_ms, e->bytes);
  if (!set_state(e, TG_CLONE_READING) || e->st != TG_CLONE_READING) return;
  read_next(e);
}

void tg_clone_read_init(tg_clone_read_t *e, const tg_clock_t *clock,
                        const tg_clone_read_opts_t *opts,
                        const tg_clone_read_cbs_t *cbs, const char *name,
                        void *data) {
  memset(e, 0, sizeof(*e));
  e->st = TG_CLONE_CONNECTING;
  e->clock = clock;
  e->o = *opts;
  if (!e->o.ops) e->o.ops = &tg_clone_read_consumer_ops;
  e->cbs = cbs;
  e->name = name;
  e->data = data;
  heard(e);
}

int tg_clone_read_start(tg_clone_read_t *e, tg_consumer_t *c,
                        const tg_consumer_clone_args_t *args) {
  if (e->st != TG_CLONE_CONNECTING) {
    set_state(e, TG_CLONE_CLONING); /* refused: counted, logged */
    return -EINVAL;
  }
  int rv = e->o.ops->clone(c, args, on_cloned, e);
  if (rv < 0) return rv;
  e->c = c;
  heard(e);
  set_state(e, TG_CLONE_CLONING);
  return 0;
}

int tg_clone_read_start_session(tg_clone_read_t *e, tg_consumer_t *c,
                                const uint8_t *config, size_t len) {
  if (!e->o.ops->enable) return -EOPNOTSUPP; /* ops without sessions */
  if (e->st != TG_CLONE_CONNECTING) {
    set_state(e, TG_CLONE_TRACING); /* refused: counted, logged */
    return -EINVAL;
  }
  int rv = e->o.ops->enable(c, config, len, -1, on_cloned, e);
  if (rv < 0) return rv;
  e->c = c;
  heard(e);
  set_state(e, TG_CLONE_TRACING);
  return 0;
}

tg_clone_state_t tg_clone_read_cancel(tg_clone_read_t *e, int status,
                                      const char *msg) {
  if (tg_clone_read_over(e)) return e->st;
  if (tg_clone_read_whole(e)) {
    set_state(e, TG_CLONE_DONE);
  } else {
    note_failure(e, status ? status : -ECANCELED, msg);
    set_state(e, TG_CLONE_FAILED);
  }
  return e->st;
}

tg_clone_verdict_t tg_clone_read_check(tg_clone_read_t *e) {
  tg_clone_verdict_t v = {.step = e->st};
  if (tg_clone_read_over(e) || !e->o.timeout_ms) return v;
  int64_t now = (int64_t)now_ms(e);
  if (e->st == TG_CLONE_READING && e->o.min_rate) {
    tg_clone_rate_verdict_t r =
        tg_clone_rate_look(&e->rate, now, e->bytes, e->o.min_rate,
                           (int64_t)e->o.timeout_ms);
    if (r.slow) {
      v.cut = TG_CLONE_CUT_SLOW;
      v.bytes = r.bytes;
      v.span_ms = r.span_ms;
    }
  }
  uint64_t quiet_ms = e->o.timeout_ms;
  if (e->st == TG_CLONE_TRACING) quiet_ms += e->o.run_ms;
  if (v.cut == TG_CLONE_CUT_NONE &&
      now - (int64_t)e->heard_ms >= (int64_t)quiet_ms)
    v.cut = TG_CLONE_CUT_SILENT;
  if (v.cut == TG_CLONE_CUT_NONE) return v;
  note_failure(e, -ETIMEDOUT,
               v.cut == TG_CLONE_CUT_SLOW ? "under the rate floor"
                                          : "no answer in time");
  set_state(e, TG_CLONE_FAILED);
  return v;
}
