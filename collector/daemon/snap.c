/* One fleet snapshot (coll.h): a store row, then for every host of the
 * trigger's group a connection of its own that clones the host's ring
 * (CloneSession by the ring's unique_session_name, which the relay scopes
 * to the collector's identity), reads the clone out, asks its loss
 * counters and frees it; every packet goes through the merge unit
 * (consumer/fleet/merge.h: machine per host, clocks from the ring
 * holder's estimate) into the store's file. When every host delivered or
 * failed, the file is synced on a worker and the row finished: COMPLETE,
 * PARTIAL (failed hosts named), or FAILED when none delivered.
 *
 * A host's clone is a clone read-out engine's (consumer/clone_read.h:
 * dial, or its standby connection, then CloneSession, the reads, its
 * loss counters, FreeBuffers); where the host stands for the snapshot is
 * its own state (snap_host.h, one setter). Any error closes the
 * connection and fails the host; the snapshot goes on. The deadline
 * timer ticks every tenth of clone_timeout and has each engine judge
 * itself on the collector's clock (tg_clone_read_check): a host silent
 * for clone_timeout at any step, or reading under clone_min_rate bytes a
 * second over clone_timeout (consumer/clone_rate.h; a reader silent that
 * long is under any floor but 0, and is told so), fails for this
 * snapshot alone, so that a host that trickles costs the others
 * clone_timeout, not the whole snapshot's deadline. The host counts as
 * finished only once its transport is released, so the snapshot never
 * outlives a callback that could still reach it.
 *
 * What one host may cost (docs/collector.md, "Sizing"): its share of the
 * file is at most the snapshot's per-host cap (snapshot_host_max_bytes,
 * else HOST_CAP_FACTOR times the ring's buffers), its packets at most
 * that cap or the consumer's default, whichever is smaller, and its
 * mapped sequences the merge's bound; passing any of them fails the host
 * with the reason, and the snapshot goes on with the others.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/consumer_port_methods.h"
#include "collector/daemon/coll.h"
#include "collector/daemon/work.h"
#include "collector/daemon/hosts.h"
#include "collector/daemon/retain.h"
#include "collector/daemon/snap.h"
#include "collector/daemon/standby.h"
#include "collector/daemon/boost.h"
#include "collector/daemon/data_window.h"
#include "collector/daemon/snap_host.h"
#include "collector/daemon/import_check.h"
#include "common/json.h"
#include "collector/daemon/symbols.h"
#include "common/fsm.h"
#include "common/log.h"
#include "common/notice.h"
#include "consumer/fleet/ds_problem.h"
#include "consumer/clone_read.h"
#include "consumer/fleet/merge_problem.h"
#include "consumer/fleet/ftrace_loss.h"
#include "consumer/fleet/merge.h"
#include "consumer/fleet/reclock.h"
#include "pb/config/trace_config.pb-c.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

/* A snapshot's hosts must have delivered by then; the rest are failed.
 * The safety under clone_timeout: a host that answers, slowly but never
 * for clone_timeout in silence, holds its snapshot no longer. */
#define SNAP_DEADLINE_MS 120000
/* Packets are gathered this much before a write to the store's file. */
#define WRITE_CHUNK (1u << 20)
/* The default per-host cap: the ring's buffers this many times over, and
 * HOST_CAP_SLACK more. A ring of small packets reads back larger than it
 * is held (the service's trusted fields, the merge's machine and sequence
 * ids, the file's framing: about twice for 20-byte packets); the factor
 * leaves room for twice that, the slack for the collector's own packets
 * about the host. */
#define HOST_CAP_FACTOR 4u
#define HOST_CAP_SLACK (1u << 20)

/* What a host was doing when it went silent (its failure says). */
static const char *step_name(tg_clone_state_t st) {
  switch (st) {
    case TG_CLONE_CONNECTING: return "connecting";
    case TG_CLONE_CLONING: return "cloning";
    case TG_CLONE_READING: return "reading the clone";
    case TG_CLONE_STATS: return "asking its loss counters";
    case TG_CLONE_FREEING: return "freeing the clone";
    default: return "closing";
  }
}

typedef struct snap_host {
  coll_snap_t *s;
  bool standby; /* on the host's standby connection (standby.c), not ours */
  coll_host_t *h;
  tg_fleet_host_t *fh; /* the ring's holder: its clock estimate and info */
  tg_consumer_t *c;
  void *conn;
  coll_sh_state_t st; /* written only by set_state() */
  tg_clone_read_t e;  /* its clone, once asked */
  bool failed, preamble;
  tg_merge_host_t mh;
  /* What the merge left out of its packets for a reason it names
   * (snap_state_end; consumer/fleet/merge_problem.h): the host's outcome is
   * PARTIAL (merge_partial) with the first as its error, each in its
   * problems. */
  tg_merge_left_outs_t left;
  bool merge_partial;
  uint64_t bytes, packets, loss;
  tg_ftrace_loss_t ftrace; /* the kernel's overruns its packets carry */
  uint64_t stored; /* bytes of the file that are this host's */
  coll_window_t win; /* the time its data covers (data_window.h) */
  char err[TG_COLL_ERROR_MAX + 1];
  /* Its row's links (snap_links_end): "" when it has none. */
  char links[TG_COLL_LINKS_MAX + 1];
} snap_host_t;

struct coll_snap {
  coll_t *c;
  uint64_t id;
  tg_coll_writer_t *w;
  tg_merge_t m;
  tg_buf_t out; /* framed packets not yet written */
  uint64_t framed; /* bytes ever put in |out|: a host's share is a difference */
  uint64_t host_cap; /* what one host may put into the file */
  /* Where each host's bytes lie in the file (collector/store/snap_index.h),
   * written with it; NULL: out of memory at the start, no index. */
  tg_coll_index_builder_t *index;
  int write_err;
  snap_host_t *hosts;
  snap_host_t *merging; /* the host whose packet the merge is writing */
  /* Its window the packet counts in; NULL: none (a boost's, boost.h). */
  coll_window_t *merging_win;
  coll_boosts_t *boost; /* boost.h; NULL: no boost */
  size_t n, asked, open, delivered;
  size_t clones_sent; /* CloneSession requests written so far */
  size_t cloned;      /* hosts whose clone was taken, or that failed first */
  uv_timer_t deadline;
  coll_work_t work; /* on the pool: counted (coll_work_queue) */
  int sync_err;
  bool finishing;
  int result;
  tg_coll_state_t state; /* the outcome: written only by set_outcome() */
  uint64_t t0; /* coll_loop_ns at the trigger */
  int64_t started_ms; /* coll_loop_ms at the trigger */
  char group[65];
  char trigger[TG_COLL_TRIGGER_MAX + 1];
  char origin[TG_COLL_HOST_MAX + 1];
  char producer[128];
  int32_t producer_uid;
  coll_snap_done_fn done;
  void *done_ctx;
  /* The second pass (docs/collector.md, "Clocks from requests"): decided
   * on the loop once the merge ended (reclock_prepare), run on the sync
   * worker (snap_reclock), read by store_result. NULL: not run. */
  tg_reclock_host_t *rc_hosts;
  tg_reclock_stats_t rc_stats;
  int rc_err;     /* its failure: the file stays as ClockSync placed it */
  bool rc_done;   /* ran to its end, whether a host moved or not */
  /* The host index of the rewritten file (index followed to its new
   * places); NULL: not rewritten, or the index could not follow. */
  tg_coll_index_builder_t *rc_index;
  const char *rc_index_why; /* why it could not: static text */
};

const uint32_t coll_dur_bounds_ms[8] = {100,  500,   1000,  2500,
                                        5000, 10000, 30000, 60000};

uint64_t coll_snap_id(const coll_snap_t *s) { return s->id; }

int coll_snap_result(const coll_snap_t *s, tg_coll_state_t *state) {
  *state = s->state;
  return s->result;
}

/* --- the file ------------------------------------------------------------ */

static int flush_out(coll_snap_t *s) {
  if (!s->write_err && tg_buf_size(&s->out))
    s->write_err =
        tg_coll_writer_write(s->w, tg_buf_begin(&s->out), tg_buf_size(&s->out));
  tg_buf_reset(&s->out);
  return s->write_err;
}

/* The merge's sink: Trace.packet (field 1) framing around both pieces. A
 * host's packet counts in its window only once the merge writes it: what
 * it leaves out (a compressed wrapper's own bytes, what trace processor
 * would skip) is not what the snapshot shows. */
static int sink(void *ctx, const uint8_t *p, size_t n, const uint8_t *tail,
                size_t tail_n) {
  coll_snap_t *s = ctx;
  if (s->write_err) return s->write_err;
  /* A host's packet (the merge appends its ids; its own packets have no
   * tail), one by one out of a compressed_packets wrapper. */
  if (tail_n && s->merging_win && coll_window_packet(s->merging_win, p, n) < 0)
    return -ENOMEM;
  size_t len = n + tail_n;
  if (tg_buf_size(&s->out) + len + 16 > WRITE_CHUNK && flush_out(s) < 0)
    return s->write_err;
  uint8_t *d = tg_buf_reserve(&s->out, len + 16);
  if (!d) return s->write_err = -ENOMEM;
  size_t k = 0;
  d[k++] = 0x0a;
  k = (size_t)(tg_pb_write_varint(d + k, len) - d);
  memcpy(d + k, p, n);
  k += n;
  if (tail_n) memcpy(d + k, tail, tail_n);
  tg_buf_commit(&s->out, k + tail_n);
  s->framed += k + tail_n;
  return 0;
}

/* --- a host's clone ------------------------------------------------------- */

#define S(x) TG_FSM_BIT(COLL_SH_##x)
/* Each host state's arrows out of it (snap_host.h's diagram). */
static const uint32_t kShNext[] = {
    [COLL_SH_NEW] = S(SKIPPED) | S(ACTIVE) | S(RELEASED),
    [COLL_SH_SKIPPED] = 0,
    [COLL_SH_ACTIVE] = S(CLOSING) | S(RELEASED),
    [COLL_SH_CLOSING] = S(RELEASED),
    [COLL_SH_RELEASED] = 0,
};
#undef S
static const char *const kShNames[] = {"new", "skipped", "active", "closing",
                                       "released"};
_Static_assert(TG_FSM_COUNT(kShNext) == COLL_SH_STATE_COUNT,
               "arrows per host state");
_Static_assert(TG_FSM_COUNT(kShNames) == COLL_SH_STATE_COUNT,
               "a name per host state");
static const tg_fsm_def_t kShDef = {"snapshot host", COLL_SH_STATE_COUNT,
                                    kShNext, kShNames};

bool coll_sh_transition_ok(coll_sh_state_t from, coll_sh_state_t to) {
  return tg_fsm_allowed(&kShDef, from, to);
}

const char *coll_sh_state_name(coll_sh_state_t st) {
  return tg_fsm_name(&kShDef, st);
}

/* The one transition of a host's state (snap_host.h), under
 * common/fsm.h's policy. */
static void set_state(snap_host_t *sh, coll_sh_state_t to, const char *why) {
  char who[sizeof(sh->h->t.spec) + 32];
  snprintf(who, sizeof(who), "%s of snapshot %016" PRIx64, sh->h->t.spec,
           sh->s->id);
  unsigned st = sh->st;
  if (tg_fsm_move(&kShDef, &st, to, &sh->s->c->counts.snap_host_bad_transitions,
                  who, why))
    sh->st = to;
}

#define O(x) TG_FSM_BIT(TG_COLL_##x)
/* A snapshot's outcome: PENDING until it is finished, then once COMPLETE,
 * PARTIAL (as the catalog read them back) or FAILED. */
static const uint32_t kOutcomeNext[] = {
    [TG_COLL_PENDING] = O(COMPLETE) | O(PARTIAL) | O(FAILED),
    [TG_COLL_COMPLETE] = 0,
    [TG_COLL_PARTIAL] = 0,
    [TG_COLL_FAILED] = 0,
};
#undef O
_Static_assert(TG_FSM_COUNT(kOutcomeNext) == TG_COLL_STATE_COUNT,
               "arrows per outcome");
static const tg_fsm_def_t kOutcomeDef = {"snapshot", TG_COLL_STATE_COUNT,
                                         kOutcomeNext, tg_coll_state_names};

/* The only writer of s->state, once: under common/fsm.h's policy. */
static void set_outcome(coll_snap_t *s, tg_coll_state_t to) {
  char who[20];
  snprintf(who, sizeof(who), "%016" PRIx64, s->id);
  unsigned st = s->state;
  if (tg_fsm_move(&kOutcomeDef, &st, to,
                  &s->c->counts.snap_bad_transitions, who, NULL))
    s->state = to;
}

static void host_fail(snap_host_t *sh, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void host_close(snap_host_t *sh);

/* Whether the host's clone was not taken yet (or failed before it was):
 * it counts in |cloned| once it is, or fails first. */
static bool clone_to_come(const snap_host_t *sh) {
  tg_clone_state_t st = tg_clone_read_state(&sh->e);
  if (st == TG_CLONE_FAILED) st = tg_clone_read_failed_in(&sh->e);
  return st <= TG_CLONE_CLONING;
}

static void host_fail(snap_host_t *sh, const char *fmt, ...) {
  if (!sh->failed && clone_to_come(sh)) sh->s->cloned++;
  if (!sh->failed) {
    sh->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sh->err, sizeof(sh->err), fmt, ap);
    va_end(ap);
    TG_WARN("snapshot %016" PRIx64 ": host %s: %s", sh->s->id,
           sh->h->t.spec, sh->err);
  }
  host_close(sh);
}

static void host_close(snap_host_t *sh) {
  if (sh->st != COLL_SH_ACTIVE) return;
  tg_clone_read_cancel(&sh->e, -ECANCELED, "closed");
  set_state(sh, COLL_SH_CLOSING, sh->failed ? "failed" : "closed");
  if (sh->standby) coll_standby_close(sh->h); /* standby.c tells us back */
  else tg_consumer_close(sh->c);
}

static void maybe_finish(coll_snap_t *s);

/* Read and freed on the standby connection: it goes back for the next
 * snapshot. */
static void standby_done(snap_host_t *sh) {
  set_state(sh, COLL_SH_RELEASED, "standby connection given back");
  sh->c = NULL;
  sh->s->delivered++;
  coll_standby_give_back(sh->h);
  sh->s->open--;
  maybe_finish(sh->s);
}

/* The host passed the snapshot's cap: failed now, before its next packet
 * reaches the file. */
static int over_cap(snap_host_t *sh) {
  host_fail(sh, "sent more than the snapshot's per-host cap of %" PRIu64
            " bytes (snapshot_host_max_bytes)", sh->s->host_cap);
  return -ECANCELED;
}

static int on_packet(tg_clone_read_t *e, const uint8_t *p, size_t n) {
  snap_host_t *sh = e->data;
  coll_snap_t *s = sh->s;
  uint64_t before = s->framed;
  int rv = 0;
  /* |n| is what the packet takes at least once framed. */
  if (sh->stored + n > s->host_cap) return over_cap(sh);
  if (!sh->preamble) {
    sh->preamble = true;
    rv = tg_merge_host_preamble(&s->m, &sh->mh, &sh->fh->report,
                                sh->h->t.label);
  }
  if (rv == 0) {
    s->merging = sh;
    s->merging_win = &sh->win;
    rv = tg_merge_packet(&s->m, &sh->mh, p, n);
    s->merging = NULL;
    s->merging_win = NULL;
  }
  sh->stored += s->framed - before;
  if (s->index)
    tg_coll_index_add(s->index, (size_t)(sh - s->hosts), before,
                      s->framed - before);
  if (rv == TG_ETOO_MANY_SEQUENCES) {
    host_fail(sh, "sent more than %u packet sequences, the most the merge "
              "maps for one host", TG_MERGE_HOST_MAX_SEQS);
    return -ECANCELED;
  }
  if (rv < 0) return rv;
  tg_ftrace_loss_scan(&sh->ftrace, p, n);
  sh->packets++;
  sh->bytes += n;
  /* A compressed_packets wrapper inflates to more than |n|. */
  if (sh->stored > s->host_cap) return over_cap(sh);
  return 0;
}

/* What the ring lost before the clone: data its writers could not put
 * in (tg_clone_loss_fold), and what the kernel's ftrace buffers
 * overwrote before the probes read them. Unknown without the counters. */
static void on_stats(tg_clone_read_t *e, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st, uint64_t loss) {
  (void)msg;
  (void)st;
  snap_host_t *sh = e->data;
  if (status) return;
  sh->loss += loss + tg_ftrace_loss_overrun(&sh->ftrace);
}

/* The clone's answer came: its reads begin. */
static void on_clone_state(tg_clone_read_t *e, tg_clone_state_t from,
                           tg_clone_state_t to) {
  snap_host_t *sh = e->data;
  if (from != TG_CLONE_CLONING || to != TG_CLONE_READING) return;
  sh->s->cloned++;
  /* No packet of the clone can be larger than its share of the file. */
  if (sh->s->host_cap < TG_CONSUMER_DEFAULT_MAX_PACKET)
    tg_consumer_set_max_packet(sh->c, (size_t)sh->s->host_cap);
  /* When each host's clone was taken, as seen here: their spread is the
   * snapshot's skew (bench_collector reads these). */
  TG_DEBUG("snapshot %016" PRIx64 ": host %s: cloned %.3f ms after the "
           "trigger", sh->s->id, sh->h->t.spec,
           (double)(coll_loop_ns(sh->s->c) - sh->s->t0) / 1e6);
}

/* The engine is over: freed (read whole, whatever FreeBuffers said), or
 * failed at the clone or a read. */
static void on_clone_end(tg_clone_read_t *e, int status, const char *msg) {
  snap_host_t *sh = e->data;
  if (status) {
    host_fail(sh, "%s: %s",
              tg_clone_read_failed_in(e) == TG_CLONE_CLONING
                  ? tg_cport_name(TG_CPORT_CloneSession)
                  : "reading the clone",
              msg);
    return;
  }
  const char *why;
  int freed = tg_clone_read_free_status(e, &why);
  if (freed && !sh->failed)
    TG_WARN("snapshot %016" PRIx64 ": host %s: freeing the clone: "
           "%s (the service frees it with the connection)", sh->s->id,
           sh->h->t.spec, why);
  if (sh->standby && !freed && sh->st == COLL_SH_ACTIVE) standby_done(sh);
  else host_close(sh);
}

static const tg_clone_read_cbs_t engine_cbs = {
    .on_state = on_clone_state,
    .on_packet = on_packet,
    .on_stats = on_stats,
    .on_end = on_clone_end,
};

static void send_clone(snap_host_t *sh, tg_consumer_t *c);

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  snap_host_t *sh = tg_consumer_data(c);
  if (status) {
    host_fail(sh, "cannot reach the host: %s", msg);
    return;
  }
  send_clone(sh, c);
}

static void send_clone(snap_host_t *sh, tg_consumer_t *c) {
  coll_snap_t *s = sh->s;
  bool origin = s->origin[0] && !strcmp(s->origin, sh->h->t.spec) &&
                strcmp(s->trigger, "operator") && strcmp(s->trigger, "schedule");
  tg_consumer_clone_args_t a = {
      .unique_session_name = sh->h->key,
      .clone_trigger_name = origin ? s->trigger : NULL,
      .clone_trigger_producer_name = origin && s->producer[0] ? s->producer : NULL,
      .clone_trigger_producer_uid = s->producer_uid,
  };
  int rv = tg_clone_read_start(&sh->e, c, &a);
  if (rv < 0) {
    host_fail(sh, "%s: %s", tg_cport_name(TG_CPORT_CloneSession),
              tg_strerror(rv));
    return;
  }
  /* The trigger's latency to the last host asked (bench_collector). */
  if (++s->clones_sent == s->asked)
    TG_DEBUG("snapshot %016" PRIx64 ": all %zu clones requested, %.3f ms "
             "after the trigger", s->id, s->asked,
             (double)(coll_loop_ns(s->c) - s->t0) / 1e6);
}

static void gone(snap_host_t *sh, const char *detail) {
  if (sh->failed && detail && detail[0] && strlen(sh->err) + 3 < sizeof(sh->err))
    snprintf(sh->err + strlen(sh->err), sizeof(sh->err) - strlen(sh->err),
             " (%s)", detail);
  set_state(sh, COLL_SH_RELEASED, "its connection is gone");
  sh->c = NULL;
  sh->s->open--;
  maybe_finish(sh->s);
}

static void on_gone(void *ctx, const char *detail) { gone(ctx, detail); }

/* The clone's connection closed: delivered if the clone was read. */
static void closed(snap_host_t *sh, int status, const char *msg) {
  if (!sh->failed && sh->st == COLL_SH_ACTIVE &&
      tg_clone_read_state(&sh->e) < TG_CLONE_FREEING) {
    sh->failed = true;
    snprintf(sh->err, sizeof(sh->err), "the connection closed: %s",
             status ? msg : "before the clone was read");
  }
  tg_clone_read_cancel(&sh->e, status ? status : -ECANCELED, msg);
  if (!sh->failed) sh->s->delivered++;
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  snap_host_t *sh = tg_consumer_data(c);
  closed(sh, status, msg);
  sh->s->c->dialer.release(sh->conn, on_gone, sh);
}

void coll_snap_standby_closed(snap_host_t *sh, int status, const char *msg) {
  closed(sh, status, msg);
}

void coll_snap_standby_gone(snap_host_t *sh, const char *detail) {
  gone(sh, detail);
}

static const tg_consumer_cbs_t clone_cbs = {.on_ready = on_ready,
                                            .on_close = on_close};

static void host_start(snap_host_t *sh) {
  coll_t *c = sh->s->c;
  tg_clone_read_opts_t o = {.stats = true,
                            .timeout_ms = (uint64_t)c->cfg.clone_timeout_ms,
                            .min_rate = c->cfg.clone_min_rate};
  tg_clone_read_init(&sh->e, c->clock, &o, &engine_cbs, sh->h->t.spec, sh);
  if (coll_standby_take(sh->h, sh)) {
    sh->standby = true;
    sh->c = sh->h->sb.c;
    sh->s->open++;
    set_state(sh, COLL_SH_ACTIVE, "on its standby connection");
    send_clone(sh, sh->c);
    return;
  }
  char err[512] = "";
  tg_consumer_t *cons = NULL;
  void *conn = NULL;
  int rv = c->dialer.open(c->dialer.ctx, sh->fh, &clone_cbs, &cons,
                                &conn, err, sizeof(err));
  if (rv < 0) {
    set_state(sh, COLL_SH_RELEASED, "cannot connect");
    sh->failed = true;
    sh->s->cloned++;
    snprintf(sh->err, sizeof(sh->err), "cannot connect: %.400s", err);
    return;
  }
  tg_consumer_set_data(cons, sh);
  sh->c = cons;
  sh->conn = conn;
  set_state(sh, COLL_SH_ACTIVE, "dialed");
  sh->s->open++;
}

/* --- the end --------------------------------------------------------------- */

static int64_t host_real_ms(const tg_fleet_host_t *fh, uint64_t boot_ns) {
  if (!fh || !fh->report.clock.estimates || !boot_ns) return 0;
  const tg_clock_sample_t *b = &fh->report.clock.best;
  int64_t real = (int64_t)b->remote[TG_CLK_REALTIME] +
                 ((int64_t)boot_ns - (int64_t)b->remote[TG_CLK_BOOTTIME]);
  return real / 1000000;
}

static void after_sync(uv_work_t *w, int status);

/* --- clocks from requests ----------------------------------------------- */

static tg_merge_host_t *snap_merge_host(void *ctx, size_t i) {
  coll_snap_t *s = ctx;
  return i < s->n ? &s->hosts[i].mh : NULL;
}

/* Whether to write the snapshot again with its hosts placed by the
 * requests between them (reclock.h), and their ClockSync bounds; on the
 * loop, once every host's packets are in. */
static void reclock_prepare(coll_snap_t *s) {
  if (!s->c->cfg.merge_clock_from_requests || s->write_err ||
      s->m.app_tracks != TG_MERGE_APP_JOINED ||
      !tg_merge_links_across(s->n, snap_merge_host, s))
    return;
  if (!(s->rc_hosts = calloc(s->n, sizeof(*s->rc_hosts)))) {
    TG_WARN("snapshot %016" PRIx64 ": kept as ClockSync placed its hosts: "
            "out of memory for the pass over its requests", s->id);
    return;
  }
  for (size_t i = 0; i < s->n; i++)
    if (s->hosts[i].fh)
      s->rc_hosts[i].bound_ns = tg_reclock_bound(&s->hosts[i].fh->report.clock);
}

typedef struct rc_file {
  int in;
  tg_coll_writer_t *w;
  tg_coll_index_remap_t *remap; /* NULL: no index to follow */
} rc_file_t;

static ssize_t rc_read(void *ctx, uint8_t *buf, size_t cap) {
  return tg_reclock_fd_read(((rc_file_t *)ctx)->in, buf, cap);
}

static int rc_rewind(void *ctx) {
  return tg_reclock_fd_rewind(((rc_file_t *)ctx)->in);
}

static int rc_write(void *ctx, const uint8_t *p, size_t n) {
  rc_file_t *f = ctx;
  return tg_coll_writer_write(f->w, p, n);
}

static void rc_span(void *ctx, uint64_t in, uint64_t in_n, uint64_t out,
                    uint64_t out_n) {
  rc_file_t *f = ctx;
  if (f->remap) tg_coll_index_remap_span(f->remap, in, in_n, out, out_n);
}

/* tg_coll_writer_rewrite's pass: -ECANCELED when no host moved (the file
 * is kept as it was written). */
static int rc_rewrite(void *ctx, int in, tg_coll_writer_t *w) {
  coll_snap_t *s = ctx;
  rc_file_t f = {.in = in, .w = w};
  if (s->index && !(f.remap = tg_coll_index_remap_new(s->index)))
    return -ENOMEM;
  tg_reclock_io_t io = {.read = rc_read, .rewind = rc_rewind,
                        .write = rc_write, .span = rc_span, .ctx = &f};
  int rv = tg_reclock_run(&io, s->rc_hosts, s->n, &s->rc_stats);
  if (rv == 0 && !s->rc_stats.rewritten) rv = -ECANCELED;
  if (rv == 0 && f.remap) {
    s->rc_index = tg_coll_index_remap_end(f.remap, &s->rc_index_why);
    if (!s->rc_index && !s->rc_index_why) s->rc_index_why = "out of memory";
    f.remap = NULL;
  }
  tg_coll_index_remap_free(f.remap);
  return rv;
}

/* On the sync worker, before the file is synced: the second pass, which
 * touches only the writer, the hosts' rc_hosts and the old index (no
 * host adds bytes any more). */
static void snap_reclock(coll_snap_t *s) {
  int rv = tg_coll_writer_rewrite(s->w, rc_rewrite, s);
  s->rc_done = rv == 0 || rv == -ECANCELED;
  if (!s->rc_done) {
    s->rc_err = rv;
    return;
  }
  if (rv == 0) tg_coll_writer_set_index(s->w, s->rc_index);
}

static void sync_work(uv_work_t *w) {
  coll_snap_t *s = w->data;
  if (s->rc_hosts) snap_reclock(s);
  s->sync_err = tg_coll_writer_sync(s->w);
}

/* What the pass did, in the log and the metrics (on the loop). */
static void reclock_said(coll_snap_t *s) {
  if (!s->rc_hosts) return;
  coll_counts_t *k = &s->c->counts;
  if (s->rc_err == -ENOTSUP) {
    TG_INFO("snapshot %016" PRIx64 ": kept as ClockSync placed its hosts: "
            "a bucket's store uploads the file as it is written, so there "
            "is none to read again by its requests", s->id);
    return;
  }
  if (!s->rc_done) {
    k->snapshots_reclock_failed++;
    TG_WARN("snapshot %016" PRIx64 ": kept as ClockSync placed its hosts: "
            "the pass over its requests failed: %s", s->id,
            tg_strerror(s->rc_err));
    return;
  }
  if (!s->rc_stats.rewritten) return;
  k->snapshots_reclocked++;
  TG_INFO("snapshot %016" PRIx64 ": %zu host%s placed by %" PRIu64
          " requests seen on two hosts (%" PRIu64 " bytes written again)",
          s->id, s->rc_stats.hosts_moved,
          s->rc_stats.hosts_moved == 1 ? "" : "s", s->rc_stats.pairs,
          s->rc_stats.bytes_out);
  if (s->index && !s->rc_index)
    TG_WARN("snapshot %016" PRIx64 ": stored without its host index: it "
            "could not follow the pass over its requests (%s)", s->id,
            s->rc_index_why ? s->rc_index_why : "unknown");
}

/* |bytes|: the file's, taken before finish consumed the writer. */
static void account(coll_snap_t *s, uint64_t bytes) {
  coll_counts_t *k = &s->c->counts;
  if (s->result < 0) {
    k->snapshot_errors++;
  } else {
    k->snapshots[s->state]++;
    k->bytes_stored += s->state == TG_COLL_FAILED ? 0 : bytes;
  }
  uint64_t ms = (coll_loop_ns(s->c) - s->t0) / 1000000;
  for (size_t i = 0; i < 8; i++)
    if (ms <= coll_dur_bounds_ms[i]) k->dur_buckets[i]++;
  k->dur_count++;
  k->dur_sum_s += (double)ms / 1000.0;
}

static void snap_free(uv_handle_t *t) {
  coll_snap_t *s = t->data;
  for (size_t i = 0; i < s->n; i++) {
    tg_merge_host_free(&s->hosts[i].mh);
    coll_window_free(&s->hosts[i].win);
    coll_host_release(s->hosts[i].h);
  }
  coll_boosts_free(s->boost);
  tg_merge_free(&s->m);
  tg_buf_free(&s->out);
  tg_coll_index_builder_free(s->index);
  tg_coll_index_builder_free(s->rc_index);
  free(s->rc_hosts);
  free(s->hosts);
  free(s);
}

static void running_remove(coll_t *c, const coll_snap_t *s) {
  for (size_t i = 0; i < c->n_running; i++) {
    if (c->running[i] != s) continue;
    memmove(&c->running[i], &c->running[i + 1],
            (c->n_running - i - 1) * sizeof(c->running[0]));
    c->n_running--;
    return;
  }
}

/* The end of host |sh|'s packets for the merge (merge.h, state_edge and
 * state_lost): what its sequences left out before a clear that came
 * later is the ring's oldest edge, counted apart. What the merge left
 * out for a reason it names (state lost, off the allowlist, times it
 * could not place: consumer/fleet/merge_problem.h) is in the host's loss already
 * (the merge's malformed and state_lost counts); it makes the host
 * PARTIAL (unless it failed), the first reason its error, each one a
 * problem of its row (host_problems) and a line of the log. */
static void snap_state_end(snap_host_t *sh) {
  tg_merge_host_t *mh = &sh->mh;
  tg_merge_host_end(mh);
  sh->s->c->counts.ring_edge_packets += mh->state_edge;
  /* Every host of every snapshot of a wrapped ring has one: at debug
   * level, and summed in the metric. */
  if (mh->state_edge)
    TG_DEBUG("snapshot %016" PRIx64 ": host %s: %" PRIu64 " packets before "
            "their sequence's first clear of incremental state left out "
            "(the ring's oldest edge)", sh->s->id, sh->h->t.spec,
            mh->state_edge);
  tg_merge_left_outs(mh, &sh->left);
  for (size_t i = 0; i < sh->left.n; i++) {
    const tg_merge_left_out_t *l = &sh->left.items[i];
    char line[TG_MERGE_LEFT_WHY_MAX + 32];
    tg_merge_left_out_line(l, line, sizeof(line));
    TG_WARN("snapshot %016" PRIx64 ": host %s: %s%s", sh->s->id,
            sh->h->t.spec, line,
            l->reason == TG_MERGE_LEFT_NOT_ALLOWED
                ? "; merge_allow_fields keeps one by name"
                : "");
    if (i || sh->failed) continue;
    sh->merge_partial = true;
    snprintf(sh->err, sizeof(sh->err), "%s", line);
  }
}

/* |sh|'s problems as the row's JSON array in |text| ("" for none): what
 * the merge left out of it (snap_state_end), then its data sources that
 * did not run as asked: those its service did not offer (hosts.c) and
 * what its packets say (linux.ftrace's setup errors), counted by
 * reason. A host that delivered is PARTIAL for the failures among them
 * (tg_ds_reason_fails: its data is there, not all that was asked for),
 * its error the first failure in one line. */
static void host_problems(coll_snap_t *s, snap_host_t *sh, char *text,
                          tg_coll_host_result_t *r) {
  coll_host_t *h = sh->h;
  tg_ds_problems_t seen = {0};
  tg_ds_problems_from_ftrace(&seen, &sh->ftrace);
  /* A clone read at all says what the ring holds now. */
  if (sh->packets) coll_host_set_problems(h, &h->seen, &seen);
  tg_ds_problems_t ps = {0};
  if (h->not_offered) ps = *h->not_offered;
  for (size_t i = 0; i < seen.n; i++) {
    const tg_ds_problem_t *p = &seen.items[i];
    if (ps.n < TG_DS_PROBLEMS_MAX) ps.items[ps.n++] = *p;
    else ps.omitted++;
  }
  /* Flow ends without the other: said, never a loss nor PARTIAL. */
  json_t *links = tg_merge_links_problem_json(&sh->mh);
  if (!ps.n && !sh->left.n && !links) return;
  /* The merge's first: they explain the host's loss, and a few fit
   * whatever the data sources' take. */
  json_t *left = json_array();
  for (size_t i = 0; left && i < sh->left.n; i++)
    left = tg_json_push(left, tg_merge_left_out_json(&sh->left.items[i]));
  if (links) left = tg_json_push(left, links);
  if (!left || tg_problems_text(left, &ps, text, TG_COLL_PROBLEMS_MAX + 1) < 0)
    text[0] = 0;
  json_decref(left);
  r->problems = text;
  if (!ps.n) return;
  for (size_t i = 0; i < ps.n; i++) s->c->counts.ds_failures[ps.items[i].reason]++;
  const tg_ds_problem_t *first;
  bool fails = tg_ds_problems_failures(&ps, &first) > 0;
  char line[TG_COLL_ERROR_MAX + 1];
  tg_ds_problem_line(fails ? first : &ps.items[0], line, sizeof(line));
  /* What is not offered was warned about as the holder connected. */
  if (fails)
    TG_WARN("snapshot %016" PRIx64 ": host %s: %s%s", s->id, h->t.spec, line,
            ps.n + ps.omitted > 1 ? " (and more: see its row)" : "");
  if (sh->failed || !fails) return;
  r->outcome = TG_COLL_HOST_PARTIAL;
  /* A host already PARTIAL for what the merge left out keeps that error;
   * its problems say the rest. */
  if (sh->merge_partial) return;
  snprintf(sh->err, sizeof(sh->err), "%s", line);
  r->error = sh->err;
}

/* The end of the snapshot's merge: flows whose other end is not in it
 * (merge.h), each host's flows as its row's links and in the metrics,
 * and what the joined mode left out of each host's app tracks, in the log
 * (docs/merge.md, "Links across hosts"). */
static void snap_links_end(coll_snap_t *s) {
  for (size_t i = 0; i < s->n; i++) {
    snap_host_t *sh = &s->hosts[i];
    const tg_merge_host_t *mh = &sh->mh;
    s->c->counts.flows_across += mh->flows_across;
    s->c->counts.flow_ends_unmatched += mh->flows_unmatched;
    sh->links[0] = 0;
    json_t *o = sh->st == COLL_SH_SKIPPED
                    ? NULL
                    : tg_merge_links_json(s->m.app_tracks, mh);
    /* How the second pass placed the host, when it ran. */
    if (o && s->rc_done &&
        json_object_set_new(o, "clock_from_requests",
                            tg_reclock_host_json(&s->rc_hosts[i])) < 0) {
      json_decref(o);
      o = NULL;
    }
    /* Nine counts, a mode and the pass's eight values fit the column
     * (catalog.h); a row without them says "none". */
    size_t n = o ? json_dumpb(o, sh->links, TG_COLL_LINKS_MAX,
                              JSON_COMPACT | JSON_REAL_PRECISION(9))
                 : 0;
    sh->links[n <= TG_COLL_LINKS_MAX ? n : 0] = 0;
    json_decref(o);
    uint64_t left = tg_merge_joined_left_out(mh);
    if (!left && !mh->flows_unmatched && !mh->flows_unfollowed &&
        !mh->joined_unclocked && !mh->joined_shared)
      continue;
    TG_INFO("snapshot %016" PRIx64 ": host %s: app tracks: %" PRIu64
            " packets on the collector's machine, %" PRIu64 " kept on the "
            "host's for want of a clock estimate, %" PRIu64 " kept there as "
            "another host has their tracks, %" PRIu64 " left out "
            "(fields %" PRIu64 ", clocks %" PRIu64 ", pids %" PRIu64
            ", track uuids %" PRIu64 "); flows %" PRIu64 " started, %" PRIu64
            " ended, %" PRIu64 " ended by another host, %" PRIu64 " ends "
            "without the other, %" PRIu64 " not followed",
            s->id, sh->h->t.spec, mh->joined, mh->joined_unclocked,
            mh->joined_shared, left,
            mh->joined_refused, mh->joined_clock, mh->joined_pids,
            mh->joined_uuid, mh->flows_started, mh->flows_terminated,
            mh->flows_across, mh->flows_unmatched, mh->flows_unfollowed);
  }
}

static void store_result(coll_snap_t *s) {
  coll_t *c = s->c;
  tg_coll_host_result_t *rs = calloc(s->n ? s->n : 1, sizeof(*rs));
  char (*texts)[TG_COLL_PROBLEMS_MAX + 1] =
      calloc(s->n ? s->n : 1, sizeof(*texts));
  if (!texts) {
    free(rs);
    rs = NULL;
  }
  uint64_t packets = 0;
  reclock_said(s);
  snap_links_end(s);
  for (size_t i = 0; rs && i < s->n; i++) {
    snap_host_t *sh = &s->hosts[i];
    bool whole = !sh->failed && !sh->merge_partial;
    rs[i] = (tg_coll_host_result_t){
        .host = sh->h->t.spec,
        .name = sh->h->t.label,
        .outcome = whole         ? TG_COLL_HOST_OK
                   : sh->packets ? TG_COLL_HOST_PARTIAL
                                 : TG_COLL_HOST_FAILED,
        .error = whole ? NULL : sh->err,
        .bytes = sh->bytes,
        .packets = sh->packets,
        .loss = sh->loss + sh->mh.malformed + sh->mh.state_lost +
                tg_merge_joined_left_out(&sh->mh),
        .window_first_ms = host_real_ms(sh->fh, sh->win.first_ns),
        .window_last_ms = host_real_ms(sh->fh, sh->win.last_ns),
        .boost = coll_boosts_row(s->boost, i),
        .links = sh->links,
    };
    if (sh->st != COLL_SH_SKIPPED) host_problems(s, sh, texts[i], &rs[i]);
    packets += sh->packets;
    c->counts.host_loss += rs[i].loss;
  }
  tg_coll_result_t r = {.packets = packets, .hosts = rs, .n_hosts = s->n};
  uint64_t bytes = tg_coll_writer_bytes(s->w);
  tg_coll_state_t outcome = TG_COLL_FAILED;
  if (!rs) {
    s->result = tg_coll_store_abort(c->store, s->w, "out of memory");
    s->result = s->result ? s->result : -ENOMEM;
  } else if (s->write_err || s->sync_err) {
    char why[160];
    snprintf(why, sizeof(why), "cannot write the snapshot: %s",
             tg_strerror(s->write_err ? s->write_err : s->sync_err));
    TG_ERROR("snapshot %016" PRIx64 ": %s", s->id, why);
    s->result = tg_coll_store_abort(c->store, s->w, why);
  } else {
    s->result = tg_coll_store_finish(c->store, s->w, &r);
    /* The catalog decides the state from the hosts' outcomes (catalog.h):
     * read it back rather than decide it twice. */
    tg_coll_snapshot_t row;
    if (s->result == 0 && tg_coll_store_get(c->store, s->id, &row) == 0)
      outcome = row.state;
    if (outcome == TG_COLL_COMPLETE || outcome == TG_COLL_PARTIAL) {
      coll_import_check_queue(c, s->id);
      coll_symbols_queue(c, s->id);
    }
  }
  set_outcome(s, outcome);
  account(s, bytes);
  s->w = NULL;
  free(rs);
  free(texts);
  TG_INFO("snapshot %016" PRIx64 " (%s): %s, %zu of %zu hosts, "
         "%" PRIu64 " packets, %" PRIu64 " bytes", s->id, s->trigger,
         s->result < 0 ? "not stored" : tg_coll_state_name(s->state),
         s->delivered, s->n, packets, bytes);
  running_remove(c, s);
  c->on.snapshot_done(c, s);
  if (s->done) s->done(c, s, s->done_ctx);
  uv_close((uv_handle_t *)&s->deadline, snap_free);
  if (c->stopping) {
    coll_stop_if_idle(c); /* coll_stop() waited for these */
    return;
  }
  coll_retain(c);
}

static void after_sync(uv_work_t *w, int status) {
  coll_snap_t *s = w->data;
  if (status) s->sync_err = status;
  store_result(s);
}

static void maybe_finish(coll_snap_t *s) {
  if (s->open || coll_boosts_open(s->boost) || s->finishing) return;
  s->finishing = true;
  uv_timer_stop(&s->deadline);
  flush_out(s);
  /* Every host's packets are in: the merge's ends, then whether the file
   * is to be written again by its requests (on the worker). */
  for (size_t i = 0; i < s->n; i++) snap_state_end(&s->hosts[i]);
  tg_merge_links_end(&s->m, s->n, snap_merge_host, s);
  reclock_prepare(s);
  s->work.req.data = s;
  if (s->write_err ||
      coll_work_queue(s->c, &s->work, sync_work, after_sync) != 0)
    store_result(s); /* finish syncs on this thread */
}

/* Ends the hosts still at work: those whose clone is read whole (asking
 * its loss counters, freeing it) delivered and are only closed; the
 * others fail with |why|. */
static void end_hosts(coll_snap_t *s, const char *why) {
  for (size_t i = 0; i < s->n; i++) {
    snap_host_t *sh = &s->hosts[i];
    if (sh->st != COLL_SH_ACTIVE) continue;
    if (tg_clone_read_whole(&sh->e)) host_close(sh);
    else host_fail(sh, "%s", why);
  }
  coll_boosts_end(s->boost, why);
}

/* How often the deadline timer looks for silent hosts and samples the
 * readers' rates: a tenth of clone_timeout, so that a host fails within
 * 1.1 times it. */
static uint64_t tick_ms(const coll_t *c) {
  uint64_t t = (uint64_t)c->cfg.clone_timeout_ms / 10;
  return t < 10 ? 10 : t > 1000 ? 1000 : t;
}

/* Fails |sh| if its engine cut its clone (tg_clone_read_check): silent
 * for clone_timeout, or reading under clone_min_rate over it. The floor
 * judges silence too: a window without a byte is under any floor but 0,
 * and a reader is judged no later than its silence would fail it (its
 * window starts at the clone's answer, which is no later than its last
 * answer). */
static void judge(snap_host_t *sh) {
  const tg_coll_config_t *cfg = &sh->s->c->cfg;
  tg_clone_verdict_t v = tg_clone_read_check(&sh->e);
  if (v.cut == TG_CLONE_CUT_SLOW)
    host_fail(sh, "%s sent %" PRIu64 " bytes in the last %" PRId64 " ms of "
              "reading its clone, under clone_min_rate (%" PRIu64 " bytes a "
              "second over clone_timeout)", TG_NOTE(COLLECTOR_HOST_TOO_SLOW),
              v.bytes, v.span_ms, cfg->clone_min_rate);
  else if (v.cut == TG_CLONE_CUT_SILENT)
    host_fail(sh, "no answer within clone_timeout (%" PRId64 " ms) while %s",
              cfg->clone_timeout_ms, step_name(v.step));
}

static void on_deadline(uv_timer_t *t) {
  coll_snap_t *s = t->data;
  int64_t now = coll_loop_ms(s->c);
  if (now - s->started_ms >= SNAP_DEADLINE_MS) {
    char why[64];
    snprintf(why, sizeof(why), "not delivered within %d s",
             SNAP_DEADLINE_MS / 1000);
    end_hosts(s, why);
    return;
  }
  for (size_t i = 0; i < s->n; i++)
    if (s->hosts[i].st == COLL_SH_ACTIVE) judge(&s->hosts[i]);
  coll_boosts_tick(s->boost, now);
}

void coll_snap_cut(coll_snap_t *s) {
  end_hosts(s, "the collector is stopping");
}

void coll_snap_view(const coll_snap_t *s, const coll_host_t *from,
                    tg_trigger_snap_view_t *v) {
  /* None requested, and some still to come: a snapshot whose every host
   * failed before its clone serves nothing. */
  *v = (tg_trigger_snap_view_t){
      .group = s->group,
      .started_ms = s->started_ms,
      .none_requested = s->clones_sent == 0 && s->cloned < s->asked};
  if (!from || s->clones_sent >= s->asked) return;
  /* Still dialing: its CloneSession is not sent yet. */
  for (size_t i = 0; i < s->n; i++)
    if (s->hosts[i].h == from)
      v->origin_to_come = s->hosts[i].st == COLL_SH_ACTIVE &&
                          tg_clone_read_state(&s->hosts[i].e) ==
                              TG_CLONE_CONNECTING;
}

bool coll_snap_under_way(const coll_t *c, uint64_t id) {
  for (size_t i = 0; i < c->n_running; i++)
    if (c->running[i]->id == id) return true;
  return false;
}

/* --- the perf boost (boost.h) ------------------------------------------------ */

/* Once every clone is asked for (sent, or its connection dialing), so
 * that no boost's dial comes before a clone: the hosts cloned get a
 * boost each. The schedule's snapshots take none: they mark no moment. */
static void boost_start(coll_snap_t *s) {
  if (!s->asked || !strcmp(s->trigger, "schedule") ||
      !(s->boost = coll_boosts_new(s->c, s, s->id, s->started_ms, s->n)))
    return;
  for (size_t i = 0; i < s->n; i++)
    if (s->hosts[i].st != COLL_SH_SKIPPED && !s->hosts[i].failed)
      coll_boosts_start(s->boost, i, s->hosts[i].h);
}

int coll_snap_merge_boost(coll_snap_t *s, size_t k, const uint8_t *p,
                          size_t n, uint64_t *stored) {
  snap_host_t *sh = &s->hosts[k];
  uint64_t before = s->framed;
  int rv = 0;
  /* A host whose clone failed before its first packet is described by
   * the boost's first one. */
  if (!sh->preamble) {
    sh->preamble = true;
    rv = tg_merge_host_preamble(&s->m, &sh->mh, &sh->fh->report,
                                sh->h->t.label);
  }
  if (rv == 0) rv = tg_merge_packet(&s->m, &sh->mh, p, n);
  *stored += s->framed - before;
  if (s->index)
    tg_coll_index_add(s->index, k, before, s->framed - before);
  return rv;
}

void coll_snap_boost_released(coll_snap_t *s) { maybe_finish(s); }

/* --- the start --------------------------------------------------------------- */

/* snapshot_host_max_bytes, else HOST_CAP_FACTOR times the flight config's
 * buffers plus HOST_CAP_SLACK. */
static uint64_t host_cap(const coll_t *c) {
  if (c->cfg.snapshot_host_max_bytes) return c->cfg.snapshot_host_max_bytes;
  uint64_t ring = 0;
  for (size_t i = 0; c->flight && i < c->flight->n_buffers; i++)
    ring += (uint64_t)c->flight->buffers[i]->size_kb * 1024;
  return ring * HOST_CAP_FACTOR + HOST_CAP_SLACK;
}

/* Whether |h| is one of |r|'s hosts: its list, else its group. */
static bool takes(const coll_t *c, const coll_trigger_req_t *r,
                  const coll_host_t *h) {
  if (!r->n_hosts) return coll_host_in_group(c, h, r->group);
  for (size_t i = 0; i < r->n_hosts; i++)
    if (r->hosts[i] == h) return true;
  return false;
}

int coll_snap_begin(coll_t *c, const coll_trigger_req_t *r,
                    coll_snap_done_fn done, void *ctx, coll_snap_t **out,
                    uint64_t *id) {
  if (c->n_running >= COLL_RUNNING_MAX) return -EBUSY;
  coll_snap_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->c = c;
  s->t0 = coll_loop_ns(c);
  s->started_ms = coll_loop_ms(c);
  /* A host list's snapshot covers no group's trigger: "(hosts)" is no
   * group's name (names have no parentheses). */
  snprintf(s->group, sizeof(s->group), "%s", r->n_hosts ? "(hosts)" : r->group);
  s->done = done;
  s->done_ctx = ctx;
  snprintf(s->trigger, sizeof(s->trigger), "%s", r->trigger);
  snprintf(s->origin, sizeof(s->origin), "%s", r->origin ? r->origin : "");
  snprintf(s->producer, sizeof(s->producer), "%s",
           r->producer_name ? r->producer_name : "");
  s->producer_uid = r->producer_uid;
  s->host_cap = host_cap(c);
  for (size_t i = 0; i < c->n; i++)
    if (takes(c, r, c->hosts[i])) s->n++;
  s->hosts = calloc(s->n ? s->n : 1, sizeof(*s->hosts));
  tg_buf_init(&s->out, WRITE_CHUNK + (64u << 20));
  if (!s->hosts) {
    free(s);
    return -ENOMEM;
  }
  tg_coll_begin_t b = {.trigger = r->trigger,
                       .reason = r->reason,
                       .origin = r->origin};
  int rv = tg_coll_store_begin(c->store, &b, &s->w, &s->id);
  if (rv < 0) {
    c->counts.snapshot_errors++;
    TG_ERROR("snapshot (%s): the store refused to begin: %s",
           r->trigger, tg_strerror(rv));
    free(s->hosts);
    tg_buf_free(&s->out);
    free(s);
    return rv;
  }
  tg_merge_init(&s->m, sink, s);
  /* Checked when the config was read: every name is known. */
  (void)tg_merge_allow_fields(&s->m, c->cfg.merge_allow_fields, NULL, 0);
  tg_merge_set_app_tracks(&s->m, c->cfg.merge_app_tracks ==
                                         TG_COLL_APP_TRACKS_MACHINES
                                     ? TG_MERGE_APP_MACHINES
                                     : TG_MERGE_APP_JOINED);
  tg_merge_self_t self;
  tg_merge_self_read(&self);
  rv = tg_merge_head(&s->m, &self);
  if (s->n && (s->index = tg_coll_index_builder_new(s->n)) != NULL) {
    tg_coll_index_head(s->index, s->framed);
    tg_coll_writer_set_index(s->w, s->index);
  } else if (s->n) {
    TG_WARN("snapshot %016" PRIx64 ": out of memory for its host index: "
            "stored without one", s->id);
  }
  uv_timer_init(c->loop, &s->deadline);
  s->deadline.data = s;
  c->running[c->n_running++] = s;
  size_t k = 0;
  for (size_t i = 0; i < c->n; i++) {
    coll_host_t *h = c->hosts[i];
    if (!takes(c, r, h)) continue;
    snap_host_t *sh = &s->hosts[k];
    sh->s = s;
    sh->h = h;
    h->busy++; /* not freed under the snapshot, even if removed */
    sh->fh = h->fh;
    tg_merge_host_init(&sh->mh, k);
    if (s->index && tg_coll_index_name(s->index, k, h->t.spec) < 0) {
      TG_WARN("snapshot %016" PRIx64 ": host %s: cannot name it in the host "
              "index: stored without one", s->id, h->t.spec);
      tg_coll_writer_set_index(s->w, NULL);
      tg_coll_index_builder_free(s->index);
      s->index = NULL;
    }
    coll_window_init(&sh->win);
    k++;
    if (!h->fh || !h->ring_up || !tg_fleet_host_tracing(h->fh)) {
      set_state(sh, COLL_SH_SKIPPED, "its ring is not up");
      sh->failed = true;
      snprintf(sh->err, sizeof(sh->err), "not tracing (%s%s%.400s)",
               coll_host_state_name(h->state),
               h->why[0] ? ": " : "", h->why);
      continue;
    }
    s->asked++;
    host_start(sh);
  }
  TG_INFO("snapshot %016" PRIx64 " (%s%s%s): cloning %zu of %zu "
         "hosts, at most %" PRIu64 " bytes each", s->id, r->trigger,
         s->origin[0] ? " from " : "", s->origin, s->asked, s->n, s->host_cap);
  boost_start(s);
  *out = s;
  *id = s->id;
  if (rv < 0) s->write_err = rv;
  uv_timer_start(&s->deadline, on_deadline, tick_ms(c), tick_ms(c));
  maybe_finish(s); /* no host to ask */
  return 0;
}
