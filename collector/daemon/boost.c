/* A snapshot's perf boost (boost.h): the boost's TraceConfig, made once,
 * and per snapshot one session per host at the boost's rate, read once
 * its window ended and merged through snap.c. */
#include "collector/daemon/boost.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "abi/consumer_port_methods.h"
#include "consumer/fleet/ds_problem.h"
#include "consumer/fleet/ftrace_loss.h"
#include "collector/daemon/boost_seq.h"
#include "collector/daemon/data_window.h"
#include "collector/catalog/snapshot_id.h"
#include "consumer/clone_read.h"
#include "common/fsm.h"
#include "common/json.h"
#include "common/log.h"
#include "common/notice.h"
#include "pb/config/trace_config.pb-c.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

#define PERF_DS "linux.perf"
/* What a boost may put into the file: its buffer this many times over
 * (as snap.c's HOST_CAP_FACTOR for a ring) and CAP_SLACK more. */
#define CAP_FACTOR 4u
#define CAP_SLACK (1u << 20)

/* The boost's TraceConfig (coll_t.boost). */
struct coll_boost_cfg {
  uint8_t *wire; /* serialised, sent to every host */
  size_t len;
  Perfetto__Protos__TraceConfig *tc; /* the same, unpacked: not_offered */
};

/* A host's boost (boost.h's diagram); the read-out's own steps are the
 * engine's (consumer/clone_read.h), from TRACING to DONE, while RUN.
 * Written only by bh_set, against kNext. */
typedef enum {
  BH_NONE,   /* no boost: the host was not cloned */
  BH_HELD,   /* another snapshot's boost runs on the host: none started */
  BH_BUDGET, /* a budget had no room for it: none started */
  BH_DIAL,   /* its connection dialing */
  BH_RUN,    /* the engine at work: the session, then its read-out */
  BH_CLOSING, /* the connection closing, then its transport released */
  BH_RELEASED,
  BH_STATE_COUNT
} bh_state_t;

#define B(x) TG_FSM_BIT(BH_##x)
static const uint32_t kNext[] = {
    [BH_NONE] = B(HELD) | B(BUDGET) | B(DIAL) | B(RELEASED),
    [BH_HELD] = 0,
    [BH_BUDGET] = 0,
    [BH_DIAL] = B(RUN) | B(CLOSING),
    [BH_RUN] = B(CLOSING),
    [BH_CLOSING] = B(RELEASED),
    [BH_RELEASED] = 0,
};
#undef B
static const char *const kStateNames[] = {
    [BH_NONE] = "none",       [BH_HELD] = "held",       [BH_BUDGET] = "budget",
    [BH_DIAL] = "dial",       [BH_RUN] = "run",         [BH_CLOSING] = "closing",
    [BH_RELEASED] = "released"};
_Static_assert(TG_FSM_COUNT(kNext) == BH_STATE_COUNT, "an arrow set per state");
_Static_assert(TG_FSM_COUNT(kStateNames) == BH_STATE_COUNT, "a name per state");
static const tg_fsm_def_t kBhDef = {.what = "perf boost",
                                    .n_states = BH_STATE_COUNT,
                                    .next = kNext,
                                    .names = kStateNames};

/* Why a boost failed: a token of its row (docs/collector.md). */
typedef enum {
  BR_NONE,
  BR_UNREACHABLE, /* no connection to the host */
  BR_NOT_OFFERED, /* no producer on the host registered linux.perf */
  BR_NOT_STARTED, /* the service named linux.perf not started */
  BR_REFUSED,     /* the service refused the session or ended it failing */
  BR_TIMEOUT,     /* not read within window + clone_timeout */
  BR_LOST,        /* the connection closed, or a read failed */
  BR_TOO_BIG,     /* more than its cap, or too many sequences */
  BR_CUT,         /* the snapshot's deadline, the collector stopping */
} bh_reason_t;

static const char *const kReasons[] = {
    [BR_NONE] = "",
    [BR_UNREACHABLE] = "unreachable",
    [BR_NOT_OFFERED] = "not_offered",
    [BR_NOT_STARTED] = "not_started",
    [BR_REFUSED] = "refused",
    [BR_TIMEOUT] = "timeout",
    [BR_LOST] = "lost",
    [BR_TOO_BIG] = "too_big",
    [BR_CUT] = "cut",
};

typedef struct coll_boost_host {
  coll_boosts_t *b;
  size_t k;
  coll_host_t *h;
  tg_consumer_t *c;
  void *conn;
  bh_state_t st;      /* written only by bh_set */
  tg_clone_read_t e;  /* the session and its read-out, while RUN */
  bh_reason_t reason;
  bool failed;
  uint64_t held_by; /* BH_HELD: the snapshot whose boost runs */
  /* BH_BUDGET: which budget, what it used and its limit at the start,
   * and when (ms after the start) a boost fits again; -1: never. */
  coll_boost_verdict_t over;
  int64_t used_ms, limit_ms, refill_in_ms;
  int64_t start_ms; /* coll_loop_ms when dialed: its ledger span's start */
  uint64_t samples, packets, bytes, stored, loss;
  coll_window_t win;        /* its packets' times (data_window.h) */
  tg_ftrace_loss_t started; /* the service's not-started data sources */
  char err[TG_COLL_ERROR_MAX + 1];
  char row[TG_COLL_BOOST_MAX + 1];
  char name[TG_COLL_HOST_MAX + 32]; /* the engine's, for its log lines */
} coll_boost_host_t;

struct coll_boosts {
  coll_t *c;
  coll_snap_t *s;    /* handed back through c->on, never called */
  uint64_t snap_id;  /* its id and trigger time (coll_loop_ms) */
  int64_t started_ms;
  size_t n, open;
  int64_t deadline_ms; /* coll_loop_ms by which every boost is released */
  /* The shard's hosts' budget used, summed at the start and grown by each
   * boost started since; the fleet's refill once a host asked (-2: not
   * yet). */
  int64_t fleet_used, fleet_refill;
  uint64_t cap;
  tg_buf_t moved; /* a packet with its sequence moved */
  coll_boost_host_t *hosts;
};

_Static_assert(COLL_BOOST_STATE_COUNT ==
                   sizeof(((coll_counts_t *)0)->perf_boosts) / sizeof(uint64_t),
               "coll_counts_t.perf_boosts has a slot per state");

const char *coll_boost_state_name(coll_boost_state_t st) {
  static const char *const names[] = {"sharp", "failed", "held", "budget"};
  return (unsigned)st < COLL_BOOST_STATE_COUNT ? names[st] : "?";
}

/* "TG-5090" for |n|, as the problems' codes are written. */
static json_t *notice_code(tg_notice_t n) {
  char code[16];
  snprintf(code, sizeof(code), "TG-%d", (int)n);
  return json_string(code);
}

/* --- the config ------------------------------------------------------------ */

static int fail_prepare(const char *path, const char *why) {
  fprintf(stderr, COLL_PROG ": %s %s: perf_boost_window: %s\n",
          TG_NOTE(COLLECTOR_CONFIG_INVALID), path, why);
  return -1;
}

/* |ds| (a copy of the flight config's linux.perf) at the boost's rate in
 * buffer 0. NULL, or why it cannot be. */
static const char *at_boost_rate(Perfetto__Protos__TraceConfig__DataSource *ds,
                                 uint32_t hz) {
  Perfetto__Protos__DataSourceConfig *dc = ds->config;
  dc->has_target_buffer = true;
  dc->target_buffer = 0;
  free(dc->target_buffer_name);
  dc->target_buffer_name = NULL;
  Perfetto__Protos__PerfEventConfig *pe = dc->perf_event_config;
  if (!pe)
    return "the flight config's linux.perf has no perf_event_config (it "
           "counts, it does not sample): nothing to sample faster";
  Perfetto__Protos__PerfEvents__Timebase *tb = pe->timebase;
  if (!tb) {
    pe->has_sampling_frequency = true;
    pe->sampling_frequency = hz;
    return NULL;
  }
  if (tb->interval_case ==
      PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_POLL_PERIOD_MS)
    return "the flight config's linux.perf polls counters "
           "(timebase.poll_period_ms): nothing to sample faster";
  tb->interval_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY;
  tb->frequency = hz;
  return NULL;
}

int coll_boost_prepare(coll_t *c) {
  const tg_coll_config_t *g = &c->cfg;
  if (!g->perf_boost_window_ms) return 0;
  const Perfetto__Protos__TraceConfig *fl = c->flight;
  Perfetto__Protos__TraceConfig__DataSource **dss =
      calloc(fl->n_data_sources ? fl->n_data_sources : 1, sizeof(*dss));
  size_t n = 0;
  const char *why = dss ? NULL : "out of memory";
  for (size_t i = 0; !why && i < fl->n_data_sources; i++) {
    const Perfetto__Protos__TraceConfig__DataSource *d = fl->data_sources[i];
    if (!d->config || !d->config->name || strcmp(d->config->name, PERF_DS))
      continue;
    /* A copy through the wire: the flight config stays as it is. */
    size_t len = protobuf_c_message_get_packed_size(&d->base);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
      why = "out of memory";
      break;
    }
    protobuf_c_message_pack(&d->base, buf);
    dss[n] = (Perfetto__Protos__TraceConfig__DataSource *)protobuf_c_message_unpack(
        &perfetto__protos__trace_config__data_source__descriptor, NULL, len, buf);
    free(buf);
    if (!dss[n]) {
      why = "out of memory";
      break;
    }
    why = at_boost_rate(dss[n++], g->perf_boost_frequency);
  }
  if (!why && !n)
    why = "the flight config has no linux.perf data source to sample "
          "faster (docs/collector.md, CPU profiles in the rings)";
  struct coll_boost_cfg *bc = NULL;
  if (!why) {
    Perfetto__Protos__TraceConfig__BufferConfig buf =
        PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__INIT;
    Perfetto__Protos__TraceConfig__BufferConfig *bufs[1] = {&buf};
    buf.has_size_kb = true;
    buf.size_kb = (uint32_t)(g->perf_boost_buffer / 1024);
    /* The window's start kept whole: its first packets hold the interned
     * data every later sample refers to (a ring could lose them). What
     * does not fit is counted (chunks_discarded) in the row's loss. */
    buf.has_fill_policy = true;
    buf.fill_policy =
        PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD;
    Perfetto__Protos__TraceConfig tc = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
    tc.n_buffers = 1;
    tc.buffers = bufs;
    tc.n_data_sources = n;
    tc.data_sources = dss;
    tc.has_duration_ms = true;
    tc.duration_ms = (uint32_t)g->perf_boost_window_ms;
    bc = calloc(1, sizeof(*bc));
    size_t len = perfetto__protos__trace_config__get_packed_size(&tc);
    if (bc) bc->wire = malloc(len);
    if (bc && bc->wire) {
      bc->len = perfetto__protos__trace_config__pack(&tc, bc->wire);
      bc->tc = perfetto__protos__trace_config__unpack(NULL, bc->len, bc->wire);
    }
    if (!bc || !bc->wire || !bc->tc) why = "out of memory";
  }
  for (size_t i = 0; i < n; i++)
    protobuf_c_message_free_unpacked(&dss[i]->base, NULL);
  free(dss);
  if (why) {
    if (bc) free(bc->wire);
    free(bc);
    return fail_prepare(g->trace_config, why);
  }
  c->boost = bc;
  TG_INFO("perf boost: on a trigger, each host of the snapshot samples "
          PERF_DS " at %" PRIu32 " Hz for %" PRId64 " ms in a buffer of "
          "%" PRIu64 " KiB", g->perf_boost_frequency, g->perf_boost_window_ms,
          g->perf_boost_buffer / 1024);
  return 0;
}

void coll_boost_config_free(coll_t *c) {
  struct coll_boost_cfg *bc = c->boost;
  if (!bc) return;
  perfetto__protos__trace_config__free_unpacked(bc->tc, NULL);
  free(bc->wire);
  free(bc);
  c->boost = NULL;
}

const uint8_t *coll_boost_config(const coll_t *c, size_t *len) {
  *len = c->boost ? c->boost->len : 0;
  return c->boost ? c->boost->wire : NULL;
}

/* --- one host's boost --------------------------------------------------------- */

static void bh_set(coll_boost_host_t *bh, bh_state_t to) {
  char who[TG_COLL_HOST_MAX + 40];
  snprintf(who, sizeof(who), "%s of snapshot %016" PRIx64, bh->h->t.spec,
           bh->b->snap_id);
  unsigned st = bh->st;
  if (tg_fsm_move(&kBhDef, &st, to, &bh->b->c->counts.boost_bad_transitions,
                  who, NULL))
    bh->st = to;
}

/* The boost's first failure: what its row says. Logged once. */
static void bh_vnote(coll_boost_host_t *bh, bh_reason_t reason,
                     const char *fmt, va_list ap) {
  if (bh->failed) return;
  bh->failed = true;
  bh->reason = reason;
  vsnprintf(bh->err, sizeof(bh->err), fmt, ap);
  TG_WARN("snapshot %016" PRIx64 ": host %s: %s perf boost: %s",
          bh->b->snap_id, bh->h->t.spec, TG_NOTE(COLLECTOR_PERF_BOOST_FAILED),
          bh->err);
}

static void bh_note(coll_boost_host_t *bh, bh_reason_t reason,
                    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void bh_note(coll_boost_host_t *bh, bh_reason_t reason,
                    const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bh_vnote(bh, reason, fmt, ap);
  va_end(ap);
}

/* The connection goes: the engine hears no more of it. */
static void bh_close(coll_boost_host_t *bh) {
  if (bh->st != BH_DIAL && bh->st != BH_RUN) return;
  tg_clone_read_cancel(&bh->e, TG_EPEER_CLOSED, "the boost's connection closed");
  bh_set(bh, BH_CLOSING);
  tg_consumer_close(bh->c);
}

/* A failure noted, then the connection closed. */
static void bh_fail(coll_boost_host_t *bh, bh_reason_t reason,
                    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void bh_fail(coll_boost_host_t *bh, bh_reason_t reason,
                    const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bh_vnote(bh, reason, fmt, ap);
  va_end(ap);
  bh_close(bh);
}

static void on_gone(void *ctx, const char *detail) {
  coll_boost_host_t *bh = ctx;
  coll_boosts_t *b = bh->b;
  /* The transport's account matters where it ended the boost. */
  bool lost = bh->reason == BR_LOST || bh->reason == BR_UNREACHABLE;
  if (bh->failed && lost && detail && detail[0] &&
      strlen(bh->err) + 3 < sizeof(bh->err))
    snprintf(bh->err + strlen(bh->err), sizeof(bh->err) - strlen(bh->err),
             " (%s)", detail);
  bh_set(bh, BH_RELEASED);
  bh->c = NULL;
  if (bh->h->boosting == bh) bh->h->boosting = NULL;
  /* Its session is gone with the connection: a boost that ended before
   * its window is charged only what it ran. */
  int64_t ran = coll_boost_ledger_cut(&bh->h->boost_ledger, bh->start_ms,
                                      coll_loop_ms(b->c));
  bh->h->boost_ms += (uint64_t)ran;
  b->c->counts.perf_boost_ms += (uint64_t)ran;
  b->c->counts.perf_boosts[bh->failed ? COLL_BOOST_FAILED : COLL_BOOST_SHARP]++;
  b->open--;
  b->c->on.boost_released(b->s);
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  coll_boost_host_t *bh = tg_consumer_data(c);
  if (!tg_clone_read_whole(&bh->e))
    bh_note(bh, BR_LOST, "the connection closed: %s",
            status ? msg : "before the boost was read");
  tg_clone_read_cancel(&bh->e, status ? status : TG_EPEER_CLOSED, msg);
  /* The consumer is freed once this returns: nothing may close it again
   * (a tick, a cut) until the transport is released. */
  bh_set(bh, BH_CLOSING); /* a no-move when closing already */
  bh->c = NULL;
  bh->b->c->dialer.release(bh->conn, on_gone, bh);
}

/* The service's word on linux.perf, read from the boost's packets: a
 * not-started data source fails the boost (its producer refused to
 * sample, e.g. without CAP_PERFMON: its log says why). */
static void check_started(coll_boost_host_t *bh) {
  tg_ds_problems_t ps = {0};
  tg_ds_problems_from_ftrace(&ps, &bh->started);
  for (size_t i = 0; i < ps.n; i++) {
    const tg_ds_problem_t *p = &ps.items[i];
    if (p->reason != TG_DS_NOT_STARTED || strcmp(p->data_source, PERF_DS))
      continue;
    char line[TG_DS_WHY_MAX + TG_DS_NAME_MAX + 32];
    bh_note(bh, BR_NOT_STARTED, "%s",
            tg_ds_problem_line(p, line, sizeof(line)));
    return;
  }
}

/* |p| with its sequence moved (boost_seq.h) in b->moved, or as it is.
 * 0, 1 when the packet is left out, or an error.
 *
 * Left out: the service's ClockSnapshots of the boost session. Trace
 * processor wants a machine's clock snapshots in time order, and the
 * ring's, read from its clone while the boost already ran, can be later
 * than the boost's first (invalid_clock_snapshots); the host's clocks
 * are tied by its ring's snapshots and the merge's estimate (merge.h),
 * on the same clocks. */
static int move_seq(coll_boost_host_t *bh, const uint8_t *p, size_t n,
                    const uint8_t **out, size_t *out_n, bool *sample) {
  coll_boost_seq_scan_t sc;
  coll_boost_seq_verdict_t v = coll_boost_seq_scan(p, n, &sc);
  *sample = sc.sample;
  *out = p;
  *out_n = n;
  switch (v) {
    case COLL_BOOST_SEQ_KEEP: /* the merge counts what does not decode */
      return 0;
    case COLL_BOOST_SEQ_DROP:
      return 1;
    case COLL_BOOST_SEQ_TOO_HIGH:
      bh_note(bh, BR_TOO_BIG, "sequence id %" PRIu64 " is past the %u a "
              "boost may number", sc.seq, COLL_BOOST_SEQ_MAX);
      return -ECANCELED;
    case COLL_BOOST_SEQ_MOVE:
      break;
  }
  tg_buf_t *m = &bh->b->moved;
  tg_buf_reset(m);
  uint8_t *d = tg_buf_reserve(m, n + COLL_BOOST_SEQ_EXTRA);
  if (!d) return -ENOMEM;
  tg_buf_commit(m, coll_boost_seq_append(p, n, sc.seq, d));
  *out = tg_buf_begin(m);
  *out_n = tg_buf_size(m);
  return 0;
}

/* --- the engine's callbacks (consumer/clone_read.h) ------------------------------ */

static int on_packet(tg_clone_read_t *e, const uint8_t *p, size_t n) {
  coll_boost_host_t *bh = e->data;
  coll_boosts_t *b = bh->b;
  if (bh->stored + n > b->cap) {
    bh_note(bh, BR_TOO_BIG, "sent more than its cap of %" PRIu64 " bytes "
            "(4 times perf_boost_buffer and 1 MiB)", b->cap);
    return -ECANCELED;
  }
  /* The service's packets say what did not start; its sequence 1 is
   * known to the window as the service's. */
  tg_ftrace_loss_scan(&bh->started, p, n);
  if (coll_window_packet(&bh->win, p, n) < 0) return -ENOMEM;
  const uint8_t *q;
  size_t qn;
  bool sample;
  int rv = move_seq(bh, p, n, &q, &qn, &sample);
  if (rv < 0) return rv;
  bh->packets++;
  bh->bytes += n;
  if (rv == 1) return 0;
  rv = b->c->on.boost_packet(b->s, bh->k, q, qn, &bh->stored);
  if (rv == TG_ETOO_MANY_SEQUENCES) {
    bh_note(bh, BR_TOO_BIG, "sent more packet sequences than the merge "
            "maps for one host");
    return -ECANCELED;
  }
  if (rv < 0) {
    bh_note(bh, BR_LOST, "merging its packets: %s", tg_strerror(rv));
    return -ECANCELED;
  }
  bh->samples += sample;
  return 0;
}

/* A read answered: the last one (it brought nothing) is where the
 * session's packets have all said whether linux.perf started. */
static int on_progress(tg_clone_read_t *e, uint64_t packets) {
  coll_boost_host_t *bh = e->data;
  if (packets) return 0;
  check_started(bh);
  return bh->failed ? -ECANCELED : 0;
}

/* What the boost's buffer could not hold: its window's tail. */
static void on_stats(tg_clone_read_t *e, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st, uint64_t loss) {
  (void)msg;
  (void)st;
  coll_boost_host_t *bh = e->data;
  if (!status) bh->loss = loss;
}

static void on_step(tg_clone_read_t *e, tg_clone_state_t from,
                    tg_clone_state_t to) {
  coll_boost_host_t *bh = e->data;
  if (from == TG_CLONE_TRACING && to == TG_CLONE_READING)
    TG_DEBUG("snapshot %016" PRIx64 ": host %s: perf boost ended, %.3f s "
             "after the trigger", bh->b->snap_id, bh->h->t.spec,
             (double)(coll_loop_ms(bh->b->c) - bh->b->started_ms) / 1e3);
}

/* DONE: read, counted and freed. FAILED: the session was refused or
 * failed, or its connection was lost under it (the call's reply never
 * came: not the service's refusal), or a read failed. */
static void on_end(tg_clone_read_t *e, int status, const char *msg) {
  coll_boost_host_t *bh = e->data;
  if (status) {
    if (tg_clone_read_failed_in(e) == TG_CLONE_TRACING)
      bh_note(bh, status == TG_EPEER_CLOSED ? BR_LOST : BR_REFUSED,
              "the boost session: %s", msg);
    else
      bh_note(bh, BR_LOST, "reading the boost: %s", msg);
  }
  bh_close(bh);
}

static const tg_clone_read_cbs_t kEngineCbs = {.on_state = on_step,
                                               .on_packet = on_packet,
                                               .on_progress = on_progress,
                                               .on_stats = on_stats,
                                               .on_end = on_end};

/* --- the connection --------------------------------------------------------------- */

/* Whether any producer on the host offers linux.perf: without one the
 * session would run its window with nothing in it. */
static void on_service_state(tg_consumer_t *c, void *ctx, int status,
                             const char *msg, bool has_more,
                             const Perfetto__Protos__TracingServiceState *st) {
  (void)c;
  (void)has_more;
  coll_boost_host_t *bh = ctx;
  if (bh->st != BH_RUN || tg_clone_read_state(&bh->e) != TG_CLONE_TRACING)
    return;
  if (status || !st) {
    /* The session's own packets will say whether it started. */
    TG_DEBUG("snapshot %016" PRIx64 ": host %s: perf boost: the service's "
             "state: %s", bh->b->snap_id, bh->h->t.spec, msg);
    return;
  }
  tg_ds_problems_t ps = {0};
  tg_ds_problems_not_offered(&ps, bh->b->c->boost->tc, st);
  if (!ps.n) return;
  char line[TG_DS_WHY_MAX + TG_DS_NAME_MAX + 32];
  bh_fail(bh, BR_NOT_OFFERED, "%s",
          tg_ds_problem_line(&ps.items[0], line, sizeof(line)));
}

/* The session runs for the window (duration_ms) on the engine, and is
 * read out once its end is answered. */
static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  coll_boost_host_t *bh = tg_consumer_data(c);
  if (bh->st != BH_DIAL) return;
  if (status) {
    bh_fail(bh, BR_UNREACHABLE, "cannot reach the host: %s", msg);
    return;
  }
  const struct coll_boost_cfg *bc = bh->b->c->boost;
  int rv = tg_clone_read_start_session(&bh->e, c, bc->wire, bc->len);
  if (rv < 0) {
    bh_fail(bh, BR_REFUSED, "%s: %s", tg_cport_name(TG_CPORT_EnableTracing),
            tg_strerror(rv));
    return;
  }
  bh_set(bh, BH_RUN);
  rv = tg_consumer_query_service_state(c, false, true, on_service_state, bh);
  if (rv < 0)
    TG_DEBUG("snapshot %016" PRIx64 ": host %s: perf boost: cannot ask the "
             "service's state: %s", bh->b->snap_id, bh->h->t.spec,
             tg_strerror(rv));
}

static const tg_consumer_cbs_t boost_cbs = {.on_ready = on_ready,
                                            .on_close = on_close};

/* --- the budget (boost_budget.h) ------------------------------------------------ */

coll_boost_budget_t coll_boost_budget(const coll_t *c) {
  const tg_coll_config_t *g = &c->cfg;
  return (coll_boost_budget_t){.window_ms = g->perf_boost_budget_window_ms,
                               .boost_ms = g->perf_boost_window_ms,
                               .host_percent = g->perf_boost_host_percent,
                               .fleet_percent = g->perf_boost_fleet_percent};
}

/* When (ms from |now|) |h|'s own budget has room for a boost; -1: never. */
static int64_t host_refill_in(const coll_t *c, const coll_host_t *h,
                              int64_t now) {
  coll_boost_budget_t bb = coll_boost_budget(c);
  const coll_boost_ledger_t *l = &h->boost_ledger;
  int64_t t = coll_boost_refill(&l, 1, now, bb.window_ms,
                                coll_boost_host_limit(&bb), bb.boost_ms);
  return t < 0 ? -1 : t - now;
}

/* The same for the shard's hosts together: computed once per snapshot,
 * when its first host is refused by it. */
static int64_t fleet_refill_in(coll_boosts_t *b, int64_t now) {
  if (b->fleet_refill != -2) return b->fleet_refill;
  coll_t *c = b->c;
  coll_boost_budget_t bb = coll_boost_budget(c);
  const coll_boost_ledger_t **ls = calloc(c->n ? c->n : 1, sizeof(*ls));
  if (!ls) return -1; /* the row says "never"; the next snapshot asks again */
  for (size_t i = 0; i < c->n; i++) ls[i] = &c->hosts[i]->boost_ledger;
  int64_t t = coll_boost_refill(ls, c->n, now, bb.window_ms,
                                coll_boost_fleet_limit(&bb, c->n), bb.boost_ms);
  free(ls);
  b->fleet_refill = t < 0 ? -1 : t - now;
  return b->fleet_refill;
}

/* Whether a budget refuses |bh|'s boost: then it is BH_BUDGET, counted,
 * and said at the 1st, 2nd, 4th... refusal of each budget in the
 * collector's life (a trigger storm costs a counter, not a log line). */
static bool over_budget(coll_boost_host_t *bh) {
  coll_boosts_t *b = bh->b;
  coll_t *c = b->c;
  coll_boost_budget_t bb = coll_boost_budget(c);
  int64_t now = coll_loop_ms(c);
  int64_t used = coll_boost_ledger_used(&bh->h->boost_ledger, now,
                                        bb.window_ms);
  coll_boost_verdict_t v = coll_boost_decide(&bb, used, b->fleet_used, c->n);
  if (v == COLL_BOOST_BUDGET_OK) return false;
  bool host = v == COLL_BOOST_BUDGET_HOST;
  bh_set(bh, BH_BUDGET);
  bh->over = v;
  bh->used_ms = host ? used : b->fleet_used;
  bh->limit_ms = host ? coll_boost_host_limit(&bb)
                      : coll_boost_fleet_limit(&bb, c->n);
  bh->refill_in_ms = host ? host_refill_in(c, bh->h, now)
                          : fleet_refill_in(b, now);
  bh->h->boost_refused++;
  c->counts.perf_boosts[COLL_BOOST_BUDGET]++;
  uint64_t k = ++c->counts.perf_boost_refused[v];
  if ((k & (k - 1)) == 0)
    TG_WARN("snapshot %016" PRIx64 ": host %s: %s no perf boost: the %s "
            "budget used %" PRId64 " of its %" PRId64 " ms in the last "
            "%" PRId64 " s; room again in %" PRId64 " s (%" PRIu64 " refused "
            "by it so far)", b->snap_id, bh->h->t.spec,
            TG_NOTE(COLLECTOR_PERF_BOOST_BUDGET), coll_boost_budget_name(v),
            bh->used_ms, bh->limit_ms, bb.window_ms / 1000,
            (bh->refill_in_ms + 999) / 1000, k);
  return true;
}

json_t *coll_boost_host_json(const coll_t *c, const coll_host_t *h) {
  if (!c->boost) return json_null();
  coll_boost_budget_t bb = coll_boost_budget(c);
  int64_t now = coll_loop_ms(c);
  int64_t refill = host_refill_in(c, h, now);
  return json_pack(
      "{s:I, s:I, s:I, s:I, s:o, s:o}", "used_ms",
      (json_int_t)coll_boost_ledger_used(&h->boost_ledger, now, bb.window_ms),
      "limit_ms", (json_int_t)coll_boost_host_limit(&bb), "window_ms",
      (json_int_t)bb.window_ms, "refill_in_ms", (json_int_t)refill,
      "boosted_ms", tg_json_u64(h->boost_ms), "refused",
      tg_json_u64(h->boost_refused));
}

void coll_boost_fleet(const coll_t *c, coll_boost_fleet_t *out) {
  *out = (coll_boost_fleet_t){0};
  if (!c->boost) return;
  coll_boost_budget_t bb = coll_boost_budget(c);
  int64_t now = coll_loop_ms(c), host_limit = coll_boost_host_limit(&bb);
  for (size_t i = 0; i < c->n; i++) {
    int64_t used = coll_boost_ledger_used(&c->hosts[i]->boost_ledger, now,
                                          bb.window_ms);
    out->used_ms += used;
    out->hosts_full += used + bb.boost_ms > host_limit;
  }
  out->limit_ms = coll_boost_fleet_limit(&bb, c->n);
}

/* --- a snapshot's boosts ------------------------------------------------------ */

coll_boosts_t *coll_boosts_new(coll_t *c, coll_snap_t *s, uint64_t snap_id,
                               int64_t started_ms, size_t n) {
  if (!c->boost || !n) return NULL;
  coll_boosts_t *b = calloc(1, sizeof(*b));
  if (b) b->hosts = calloc(n, sizeof(*b->hosts));
  if (!b || !b->hosts) {
    free(b);
    TG_WARN("snapshot %016" PRIx64 ": %s out of memory for its perf boosts: "
            "none started", snap_id,
            TG_NOTE(COLLECTOR_PERF_BOOST_FAILED));
    return NULL;
  }
  b->c = c;
  b->s = s;
  b->snap_id = snap_id;
  b->started_ms = started_ms;
  b->n = n;
  b->deadline_ms = started_ms + c->cfg.perf_boost_window_ms +
                   c->cfg.clone_timeout_ms;
  b->cap = c->cfg.perf_boost_buffer * CAP_FACTOR + CAP_SLACK;
  coll_boost_fleet_t f;
  coll_boost_fleet(c, &f);
  b->fleet_used = f.used_ms;
  b->fleet_refill = -2;
  tg_buf_init(&b->moved, TG_CONSUMER_DEFAULT_MAX_PACKET + 64);
  for (size_t i = 0; i < n; i++) {
    b->hosts[i].b = b;
    b->hosts[i].k = i;
    coll_window_init(&b->hosts[i].win);
  }
  return b;
}

void coll_boosts_start(coll_boosts_t *b, size_t k, coll_host_t *h) {
  if (!b || k >= b->n) return;
  coll_boost_host_t *bh = &b->hosts[k];
  bh->h = h;
  if (h->boosting) {
    bh_set(bh, BH_HELD);
    bh->held_by = h->boosting->b->snap_id;
    b->c->counts.perf_boosts[COLL_BOOST_HELD]++;
    TG_INFO("snapshot %016" PRIx64 ": host %s: its perf boost runs for "
            "snapshot %016" PRIx64 ": none started", b->snap_id,
            h->t.spec, bh->held_by);
    return;
  }
  if (over_budget(bh)) return;
  /* The engine reads the whole window once its session ends, with the
   * loss counters; nothing is freed after a failure: the connection
   * goes, and the service frees the session with it. */
  snprintf(bh->name, sizeof(bh->name), "perf boost of %s", h->t.spec);
  tg_clone_read_init(&bh->e, b->c->clock,
                     &(tg_clone_read_opts_t){.stats = true}, &kEngineCbs,
                     bh->name, bh);
  char err[512] = "";
  tg_consumer_t *cons = NULL;
  void *conn = NULL;
  int rv = b->c->dialer.open(b->c->dialer.ctx, h->fh, &boost_cbs, &cons, &conn,
                             err, sizeof(err));
  if (rv < 0) {
    bh_set(bh, BH_RELEASED);
    b->c->counts.perf_boosts[COLL_BOOST_FAILED]++;
    bh_note(bh, BR_UNREACHABLE, "cannot connect: %.400s", err);
    return;
  }
  tg_consumer_set_data(cons, bh);
  bh->c = cons;
  bh->conn = conn;
  bh_set(bh, BH_DIAL);
  /* Charged its whole window now (boost_budget.h), cut at its release. */
  const tg_coll_config_t *g = &b->c->cfg;
  bh->start_ms = coll_loop_ms(b->c);
  coll_boost_ledger_add(&h->boost_ledger, bh->start_ms,
                        bh->start_ms + g->perf_boost_window_ms,
                        g->perf_boost_budget_window_ms);
  b->fleet_used += g->perf_boost_window_ms;
  h->boosting = bh;
  b->open++;
}

size_t coll_boosts_open(const coll_boosts_t *b) { return b ? b->open : 0; }

void coll_boosts_tick(coll_boosts_t *b, int64_t now_ms) {
  if (!b || !b->open || now_ms < b->deadline_ms) return;
  const tg_coll_config_t *g = &b->c->cfg;
  for (size_t i = 0; i < b->n; i++) {
    coll_boost_host_t *bh = &b->hosts[i];
    if (bh->st != BH_DIAL && bh->st != BH_RUN) continue;
    bh_fail(bh, BR_TIMEOUT, "not read within perf_boost_window + "
            "clone_timeout (%" PRId64 " ms) of the trigger",
            g->perf_boost_window_ms + g->clone_timeout_ms);
  }
}

void coll_boosts_end(coll_boosts_t *b, const char *why) {
  for (size_t i = 0; b && i < b->n; i++) {
    coll_boost_host_t *bh = &b->hosts[i];
    if (bh->st != BH_DIAL && bh->st != BH_RUN) continue;
    if (tg_clone_read_whole(&bh->e)) bh_close(bh);
    else bh_fail(bh, BR_CUT, "%s", why);
  }
}

/* As snap.c's: the host's BOOTTIME |boot_ns| in epoch ms through its
 * holder's clock estimate; 0 without one. */
static int64_t host_real_ms(const tg_fleet_host_t *fh, uint64_t boot_ns) {
  if (!fh || !fh->report.clock.estimates || !boot_ns) return 0;
  const tg_clock_sample_t *b = &fh->report.clock.best;
  int64_t real = (int64_t)b->remote[TG_CLK_REALTIME] +
                 ((int64_t)boot_ns - (int64_t)b->remote[TG_CLK_BOOTTIME]);
  return real / 1000000;
}

const char *coll_boosts_row(coll_boosts_t *b, size_t k) {
  if (!b || k >= b->n) return NULL;
  coll_boost_host_t *bh = &b->hosts[k];
  if (bh->st == BH_NONE) return NULL;
  const tg_coll_config_t *g = &b->c->cfg;
  json_t *o = json_pack("{s:s, s:I, s:I}",
                        "state", coll_boost_state_name(
                                     bh->st == BH_HELD     ? COLL_BOOST_HELD
                                     : bh->st == BH_BUDGET ? COLL_BOOST_BUDGET
                                     : bh->failed          ? COLL_BOOST_FAILED
                                                           : COLL_BOOST_SHARP),
                        "frequency_hz", (json_int_t)g->perf_boost_frequency,
                        "window_ms", (json_int_t)g->perf_boost_window_ms);
  if (o && bh->st == BH_HELD) {
    char id[TG_COLL_ID_STRLEN];
    tg_coll_id_format(bh->held_by, id);
    json_object_set_new(o, "held_by", json_string(id));
  } else if (o && bh->st == BH_BUDGET) {
    json_object_set_new(o, "budget",
                        json_string(coll_boost_budget_name(bh->over)));
    json_object_set_new(o, "code", notice_code(TG_N_COLLECTOR_PERF_BOOST_BUDGET));
    json_object_set_new(o, "used_ms", json_integer(bh->used_ms));
    json_object_set_new(o, "limit_ms", json_integer(bh->limit_ms));
    json_object_set_new(o, "refill_in_ms", json_integer(bh->refill_in_ms));
  } else if (o) {
    const tg_fleet_host_t *fh = bh->h->fh;
    json_object_set_new(o, "first_ms",
                        json_integer(host_real_ms(fh, bh->win.first_ns)));
    json_object_set_new(o, "last_ms",
                        json_integer(host_real_ms(fh, bh->win.last_ns)));
    json_object_set_new(o, "samples", tg_json_u64(bh->samples));
    json_object_set_new(o, "packets", tg_json_u64(bh->packets));
    json_object_set_new(o, "bytes", tg_json_u64(bh->bytes));
    json_object_set_new(o, "loss", tg_json_u64(bh->loss));
  }
  if (o && bh->failed) {
    json_object_set_new(o, "reason", json_string(kReasons[bh->reason]));
    json_object_set_new(o, "code", notice_code(TG_N_COLLECTOR_PERF_BOOST_FAILED));
    json_object_set_new(o, "error", tg_json_text(bh->err));
  }
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  /* The error is cut until the row fits: it must hold the state. */
  for (size_t cut = strlen(bh->err) / 2;
       o && text && strlen(text) > TG_COLL_BOOST_MAX && bh->failed && cut;
       cut /= 2) {
    free(text);
    bh->err[cut] = 0;
    json_object_set_new(o, "error", tg_json_text(bh->err));
    text = json_dumps(o, JSON_COMPACT);
  }
  json_decref(o);
  if (!text || strlen(text) > TG_COLL_BOOST_MAX) {
    free(text);
    TG_WARN("snapshot %016" PRIx64 ": host %s: its perf boost's row field "
            "could not be made (out of memory)", b->snap_id,
            bh->h->t.spec);
    return NULL;
  }
  snprintf(bh->row, sizeof(bh->row), "%s", text);
  free(text);
  return bh->row;
}

void coll_boosts_free(coll_boosts_t *b) {
  if (!b) return;
  for (size_t i = 0; i < b->n; i++) coll_window_free(&b->hosts[i].win);
  tg_buf_free(&b->moved);
  free(b->hosts);
  free(b);
}
