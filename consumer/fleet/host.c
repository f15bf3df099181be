/* One remote host of a fleet: the link's side (host.h). Connects through
 * the owner's dialer, reconnects after a lost link, runs the recording,
 * and ends the host. Preparing each connection is host_prep.c's, which
 * calls back into this file by design (tg__fleet_after_prep, _fail,
 * _notice, _prep_failed): it is this engine's preparation step, split
 * out for size, and reports each part's end to the engine that asked
 * (tests/layout/cycles_allow.txt).
 *
 * Every consumer callback first checks that it belongs to the current
 * connection; calls that fail because the connection is going away
 * (TG_EPEER_CLOSED, -ECANCELED) are left to the connection's on_close,
 * which decides between reconnecting and failing once the transport is
 * fully released (the dialer's release: the TLS error or ssh's last words
 * are known by then).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "abi/consumer_port_methods.h"
#include "common/log.h"
#include "consumer/fleet/host_internal.h"
#include "tracegate/error.h"

#define STATS_PERIOD_MS 1000 /* loss counters once a second */
/* A big fleet starts before it reads: a host that traces while others
 * still connect or prepare reads first when the last one traces, or this
 * long after its own start, whichever comes first (twice the usual read
 * period): each first read is a round trip through relay and service
 * with their first compression, and many of them slow the start of the
 * hosts behind. The rest of its first clock burst waits as long (the
 * burst's round trips, taken while handshakes queue on the same cores,
 * would be long, and half of one bounds the estimate's error). */
#define START_FIRST_READ_MS 1000

static void connect_now(tg_fleet_host_t *h);
static void arm(tg_fleet_host_t *h);

static const tg_fleet_host_cbs_t *cbs(const tg_fleet_host_t *h) {
  return h->fleet->cbs;
}

void tg__fleet_format_ms(char *out, size_t n, uint64_t ms) {
  if (ms < 60000) snprintf(out, n, "%.1fs", (double)ms / 1000.0);
  else snprintf(out, n, "%llum%02llus", (unsigned long long)(ms / 60000),
                (unsigned long long)(ms / 1000 % 60));
}

void tg__fleet_notice(tg_fleet_host_t *h, tg_fleet_notice_t kind,
                      tg_notice_t code, const char *fmt, ...) {
  char text[1024];
  int n = snprintf(text, sizeof(text), "%s ", tg_notice_tag(code));
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
  va_end(ap);
  TG_INFO("fleet host %s: %s", h->name, text);
  cbs(h)->on_notice(h, kind, text);
}

/* The link's part of the report: after every event that moves it. */
static void report_link(tg_fleet_host_t *h) {
  const tg_link_t *l = &h->e->link;
  h->report.link_state = l->state;
  h->report.attempts = l->attempts;
  h->report.reconnects = l->reconnects;
  h->report.down_ms = l->down_ms;
}

/* Every change of the link (tg_link_set_state calls it): the owner hears
 * of it, and the new state's deadlines are armed. */
static void on_link_state(tg_link_t *l, tg_link_state_t from, const char *why) {
  (void)why;
  tg_fleet_host_t *h = l->data;
  report_link(h);
  h->fleet->hooks->link_changed(h, from);
  if (cbs(h)->on_state) cbs(h)->on_state(h, from);
  arm(h);
}

static bool is_finished(const tg_fleet_host_t *h) {
  return tg_link_finished(&h->e->link);
}

static bool is_failing(const tg_fleet_host_t *h) {
  return h->e->link.state == TG_LINK_FAILING;
}

/* The recording was started and has not ended yet. */
static bool rec_active(const tg_fleet_host_t *h) {
  if (!h->e->rec) return false;
  tg_rec_state_t s = tg_recording_state(h->e->rec);
  return s != TG_REC_IDLE && s != TG_REC_DONE && s != TG_REC_FAILED &&
         s != TG_REC_DETACHED;
}

static void settle_names(tg_fleet_host_t *h) {
  if (h->e->names_settled) return;
  h->e->names_settled = true;
  if (cbs(h)->on_names_settled) cbs(h)->on_names_settled(h);
}

/* --- the end of a host ------------------------------------------------------ */

/* CLOSING or FAILING, the connection gone: -> DONE or FAILED. */
static void finish(tg_fleet_host_t *h) {
  if (is_finished(h)) return;
  bool failing = is_failing(h);
  h->e->cx.clock_due_ms = 0;
  tg_link_outage_end(&h->e->link, tg__fleet_now(h)); /* one that never ended */
  if (cbs(h)->on_closing && cbs(h)->on_closing(h, failing) < 0 && !failing) {
    failing = true;
    h->report.failure = TG_FLEET_FAIL_WRITE;
    snprintf(h->report.why, sizeof(h->report.why),
             "the trace could not be written to %s",
             h->out_name ? h->out_name : "its output");
  }
  tg_link_set_state(&h->e->link, failing ? TG_LINK_FAILED : TG_LINK_DONE,
                    failing ? h->report.why : "the connection closed");
  settle_names(h); /* never asked: the others wait on none */
  if (h->e->rec) {
    h->report.reads_cut = tg_recording_reads_cut(h->e->rec);
    h->report.reads_lost = tg_recording_reads_lost(h->e->rec);
  }
  tg_recording_free(h->e->rec);
  h->e->rec = NULL;
  tg_fleet_t *fleet = h->fleet;
  cbs(h)->on_finished(h);
  fleet->hooks->place_freed(fleet); /* if it held one */
}

/* In CLOSING or FAILING: the connection goes, then finish(). */
static void close_conn(tg_fleet_host_t *h) {
  if (h->e->cx.c) tg_consumer_close(h->e->cx.c);
  else if (!h->e->cx.conn)
    finish(h); /* nothing open (a failed connect, a backoff) */
}

static void fail_why(tg_fleet_host_t *h) {
  tg_link_set_state(&h->e->link, TG_LINK_FAILING, h->report.why);
  /* The recording ends its session first; its on_end closes. */
  if (rec_active(h)) {
    tg_recording_fail(h->e->rec, true, h->report.why);
    return;
  }
  close_conn(h);
}

void tg__fleet_fail(tg_fleet_host_t *h, tg_fleet_failure_t kind,
                    const char *fmt, ...) {
  if (is_finished(h) || is_failing(h)) return;
  h->report.failure = kind;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->report.why, sizeof(h->report.why), fmt, ap);
  va_end(ap);
  fail_why(h);
}

void tg__fleet_fail_write(tg_fleet_host_t *h, int err) {
  if (!h->e->write_err) h->e->write_err = err;
  tg__fleet_fail(h, TG_FLEET_FAIL_WRITE, "cannot write %s: %s",
                 h->out_name ? h->out_name : "the trace", tg_strerror(err));
}

void tg__fleet_drop_attempt(tg_fleet_host_t *h, const char *why) {
  if (h->e->link.state != TG_LINK_RECONNECTING &&
      h->e->link.state != TG_LINK_RESUMING)
    return; /* already going: on_remote_gone decides */
  snprintf(h->report.retry_why, sizeof(h->report.retry_why), "%s", why);
  tg_link_drop(&h->e->link, TG_LINK_DROP_ATTEMPT, h->report.retry_why);
  if (h->e->cx.c) tg_consumer_close(h->e->cx.c);
}

void tg__fleet_prep_failed(tg_fleet_host_t *h, int status, const char *msg) {
  if (status == TG_EPEER_CLOSED || status == -ECANCELED) return; /* on_close */
  if (!msg || !msg[0]) msg = tg_strerror(status);
  if (tg_link_reconnecting(&h->e->link)) {
    tg__fleet_drop_attempt(h, msg);
    return;
  }
  tg__fleet_fail(h, TG_FLEET_FAIL_CONNECT, "%s", msg);
}

/* --- reconnecting ------------------------------------------------------------ */

/* One reconnection attempt failed: try again after the backoff, or give
 * up at the deadline. */
static void retry_later(tg_fleet_host_t *h, const char *why) {
  /* Never an empty reason: say at least what was tried. */
  if (!why || !why[0])
    why = h->report.conn_why[0]
              ? h->report.conn_why
              : "the connection closed before the session was back";
  if (why != h->report.retry_why)
    snprintf(h->report.retry_why, sizeof(h->report.retry_why), "%.290s", why);
  if (tg_link_attempt_failed(&h->e->link, tg__fleet_now(h), why) < 0) {
    char limit[32];
    tg__fleet_format_ms(limit, sizeof(limit), h->fleet->o.reconnect_ms);
    tg__fleet_fail(h, TG_FLEET_FAIL_LINK_LOST,
                   "lost the link and could not get the session back "
                   "within %s (last attempt: %s)", limit, why);
    return;
  }
  arm(h);
}

static bool can_resume(const tg_fleet_host_t *h) {
  return h->fleet->o.reconnect_ms > 0 && h->e->cx.key_set && h->e->rec &&
         tg_recording_resumable(h->e->rec);
}

/* DONE with a reason: the trace is whole, the session was not freed. */
static void say_not_freed(tg_fleet_host_t *h, const char *reason) {
  if (reason && reason[0])
    tg__fleet_notice(h, TG_FLEET_WARNING, TG_N_FLEET_SESSION_NOT_FREED, "%s",
                     reason);
}

static void link_lost(tg_fleet_host_t *h, const char *why) {
  if (h->e->rec && tg_recording_state(h->e->rec) == TG_REC_DONE) {
    /* Lost as the recording ended (while its session was being freed):
     * the trace is whole. The transport is released: the host ends here
     * (on_rec_end left it). */
    say_not_freed(h, tg_recording_end_reason(h->e->rec));
    tg_link_set_state(&h->e->link, TG_LINK_CLOSING, "the recording ended");
    finish(h);
    return;
  }
  if (!can_resume(h)) {
    bool started = rec_active(h);
    if (started && tg_recording_ended(h->e->rec))
      tg__fleet_fail(h, TG_FLEET_FAIL_LINK_LOST,
                     "lost the link after tracing ended; the rest of the "
                     "trace is lost (%s)", why);
    else if (started && h->fleet->o.reconnect_ms > 0)
      tg__fleet_fail(h, TG_FLEET_FAIL_LINK_LOST,
                     "lost the link, and the session cannot be resumed "
                     "(no resume key: is the peer a tracegate-relay?) (%s)",
                     why);
    else
      /* Lost before its session began: it never had a prepared link. */
      tg__fleet_fail(h, started ? TG_FLEET_FAIL_LINK_LOST
                                : TG_FLEET_FAIL_CONNECT,
                     "lost the link (%s)", why);
    return;
  }
  snprintf(h->report.lost_why, sizeof(h->report.lost_why), "%.290s", why);
  tg_link_lost(&h->e->link, tg__fleet_now(h), why);
  tg__fleet_notice(h, TG_FLEET_INFO, TG_N_FLEET_LINK_LOST,
                   "lost the link (%s); reconnecting", why);
}

/* --- the connection closed ---------------------------------------------------- */

/* The connection is released: what follows depends on why it went. */
static void on_remote_gone(void *ctx, const char *detail) {
  tg_fleet_host_t *h = ctx;
  char why[700];
  if (detail && detail[0] && !strstr(h->report.conn_why, detail))
    snprintf(why, sizeof(why), "%s: %s", h->report.conn_why, detail);
  else
    snprintf(why, sizeof(why), "%s", h->report.conn_why);
  if (is_finished(h)) return;
  if (h->e->link.state == TG_LINK_CLOSING || is_failing(h)) {
    finish(h);
    return;
  }
  if (h->e->link.state != TG_LINK_DROPPING) return; /* not reached */
  switch (h->e->link.drop) {
    case TG_LINK_DROP_ATTEMPT:
      retry_later(h, h->report.retry_why);
      return;
    case TG_LINK_DROP_DEAD: {
      char lim[32];
      tg__fleet_format_ms(lim, sizeof(lim), h->fleet->o.dead_link_ms);
      snprintf(why, sizeof(why), "no answer for %s: a dead link", lim);
      break;
    }
    case TG_LINK_DROP_PEER:
      break;
  }
  if (!h->e->cx.bound) {
    /* Never reached the service: the transport's words say why best. */
    const char *d = detail && detail[0] ? detail : h->report.conn_why;
    if (!strncmp(d, "cannot connect: ", 16)) d += 16;
    snprintf(why, sizeof(why), "cannot connect: %s", d);
  }
  if (tg_link_reconnecting(&h->e->link)) {
    retry_later(h, why);
    return;
  }
  if (!h->e->ever_connected) {
    tg__fleet_fail(h, TG_FLEET_FAIL_CONNECT, "%s", why);
    return;
  }
  link_lost(h, why);
}

static void on_conn_close(tg_consumer_t *c, int status, const char *msg) {
  (void)status;
  tg_fleet_host_t *h = tg_consumer_data(c);
  h->e->cx.c = NULL;
  /* The consumer is freed after this: the recording lets go now. */
  if (h->e->rec) tg_recording_unbind(h->e->rec);
  /* A close we asked for keeps our reason (retry_why, the dead link). */
  bool ours = h->e->link.state == TG_LINK_DROPPING &&
              h->e->link.drop != TG_LINK_DROP_PEER;
  bool dropped = h->e->link.state != TG_LINK_DROPPING &&
                 h->e->link.state != TG_LINK_CLOSING && !is_failing(h);
  if (msg[0] && !ours)
    snprintf(h->report.conn_why, sizeof(h->report.conn_why), "%s", msg);
  else if (!msg[0] && dropped)
    snprintf(h->report.conn_why, sizeof(h->report.conn_why),
             "the connection closed");
  tg_link_drop(&h->e->link, TG_LINK_DROP_PEER, h->report.conn_why);
  void *conn = h->e->cx.conn;
  h->e->cx.conn = NULL;
  /* on_remote_gone runs from the loop, after the transport is gone. */
  h->fleet->dialer.release(conn, on_remote_gone, h);
}

static const tg_consumer_cbs_t conn_cbs = {.on_ready = tg__fleet_on_ready,
                                           .on_close = on_conn_close};

/* The attempt (connecting and preparing) took longer than the guard. */
static void guard_expired(tg_fleet_host_t *h) {
  if (!h->e->cx.c) return;
  char why[64];
  snprintf(why, sizeof(why), "no answer within %u s",
           (unsigned)(h->e->link.tm.connect_guard_ms / 1000));
  if (tg_link_reconnecting(&h->e->link)) tg__fleet_drop_attempt(h, why);
  else tg__fleet_fail(h, TG_FLEET_FAIL_CONNECT, "cannot connect: %s", why);
}

/* The link found the connection silent too long (it is DROPPING): close
 * it; on_remote_gone then reconnects. */
static void link_dead(tg_fleet_host_t *h, uint64_t now) {
  char el[32];
  tg__fleet_format_ms(el, sizeof(el), now - h->e->link.heard_ms);
  tg__fleet_notice(h, TG_FLEET_INFO, TG_N_FLEET_LINK_DEAD,
                   "no answer for %s: the link is dead", el);
  if (h->e->cx.c) tg_consumer_close(h->e->cx.c);
}

static void connect_now(tg_fleet_host_t *h) {
  char err[512];
  tg__fleet_conn_reset(h);
  tg_link_attempt_begin(&h->e->link, tg__fleet_now(h));
  report_link(h);
  arm(h);
  const tg_fleet_dialer_t *d = &h->fleet->dialer;
  int rv = d->open(d->ctx, h, &conn_cbs, &h->e->cx.c, &h->e->cx.conn, err,
                   sizeof(err));
  if (rv < 0) {
    h->e->cx.c = NULL;
    h->e->cx.conn = NULL;
    if (!tg_link_reconnecting(&h->e->link)) {
      tg__fleet_fail(h, TG_FLEET_FAIL_CONNECT, "%s", err);
      return;
    }
    /* The attempt drops (there is nothing to release) before the next
     * waits: link.h has no arrow from RECONNECTING to BACKOFF. */
    tg_link_drop(&h->e->link, TG_LINK_DROP_ATTEMPT, err);
    retry_later(h, err);
    return;
  }
  tg__fleet_prep_begin(h);
}

/* --- the recording ------------------------------------------------------------------ */

static int on_rec_packet(tg_recording_t *rec, const uint8_t *p, size_t n) {
  tg_fleet_host_t *h = tg_recording_data(rec);
  tg_link_heard(&h->e->link, tg__fleet_now(h));
  int rv = cbs(h)->on_packet(h, p, n);
  if (rv < 0) {
    if (!h->e->write_err) h->e->write_err = rv;
    return rv;
  }
  h->report.packets++;
  h->report.bytes += n;
  return 0;
}

static void on_rec_stats(tg_recording_t *rec, int status, const char *msg,
                         const Perfetto__Protos__TraceStats *st, bool final) {
  tg_fleet_host_t *h = tg_recording_data(rec);
  if (status == 0) {
    tg_link_heard(&h->e->link, tg__fleet_now(h));
    tg_rec_replay_stats_t rs;
    tg_recording_replay_stats(rec, &rs);
    cbs(h)->on_stats(h, st, &rs);
  } else if (final) {
    tg__fleet_notice(h, TG_FLEET_WARNING, TG_N_LOSS_UNKNOWN,
                     "no final statistics: %s", msg);
  }
}

static void on_rec_rebound(tg_recording_t *rec, int status, const char *msg) {
  tg_fleet_host_t *h = tg_recording_data(rec);
  /* The new connection may have said the session cannot come back: a new
   * boot (the host's services started again, without it), another service
   * process (sessions do not survive the one that had them), or the
   * service itself ended the session's connection and has dealt with the
   * session since. The refusal is then final. */
  const char *gone =
      !status          ? NULL
      : h->e->rebooted ? "the host rebooted (its boot id changed)"
      : h->e->service_restarted
          ? "the tracing service on the host was restarted "
            "(another process answers now)"
      : h->e->cx.service_ended ? "the tracing service closed its connection "
                                 "while tracing (stopped or restarted?) and no "
                                 "longer has it"
                               : NULL;
  if (gone) {
    tg__fleet_fail(h, TG_FLEET_FAIL_SESSION, "the session is gone: %s; %s",
                   gone, msg);
    return;
  }
  if (status) {
    /* The relay may not have detached the session yet (it notices the
     * old link's end on its own time): try again until the deadline. */
    tg__fleet_prep_failed(h, TG_EREMOTE_FAILED, msg);
    return;
  }
  uint64_t down =
      tg_link_resumed(&h->e->link, tg__fleet_now(h), h->e->cx.relay);
  tg_recording_release_reads(rec);
  char el[32];
  tg__fleet_format_ms(el, sizeof(el), down);
  const tg_fleet_dialer_t *d = &h->fleet->dialer;
  tg__fleet_notice(h, TG_FLEET_INFO, TG_N_FLEET_RECONNECTED,
                   "reconnected and re-attached the session after %s%s", el,
                   h->e->cx.conn && d->resumed(h->e->cx.conn) ? " (TLS resumed)" : "");
  tg_rec_replay_stats_t rs;
  tg_recording_replay_stats(rec, &rs);
  if (rs.lost_frames)
    tg__fleet_notice(h, TG_FLEET_INFO, TG_N_FLEET_TRANSIT_LOSS,
                     "the link loss took %" PRIu64
                     " %s replies (%" PRIu64 " bytes) that the "
                     "relay's replay window no longer held: lost, counted in "
                     "the summary", rs.lost_frames,
                     tg_cport_name(TG_CPORT_ReadBuffers), rs.lost_bytes);
  else if (rs.relay_restarted)
    tg__fleet_notice(h, TG_FLEET_INFO, TG_N_FLEET_RELAY_RESTARTED,
                     "the relay was restarted: what it had "
                     "not delivered when it went away cannot be sent again");
  else if (rs.frames)
    tg__fleet_notice(h, TG_FLEET_INFO, TG_N_FLEET_RESENT,
                     "the relay sent again what the link "
                     "loss took (replies=%" PRIu64 " bytes=%" PRIu64
                     ", in all so far)", rs.frames, rs.bytes);
}

static void on_rec_end(tg_recording_t *rec, int status, const char *reason) {
  (void)status;
  tg_fleet_host_t *h = tg_recording_data(rec);
  if (is_finished(h)) return;
  if (tg_recording_state(rec) == TG_REC_DONE && !is_failing(h)) {
    /* The connection went while the session was being freed: its
     * release (on_remote_gone, link_lost) ends the host and says so. */
    if (h->e->link.state == TG_LINK_DROPPING) return;
    say_not_freed(h, reason);
    tg_link_set_state(&h->e->link, TG_LINK_CLOSING, "the recording ended");
    close_conn(h);
    return;
  }
  if (!is_failing(h)) {
    /* The merge refusing what the host sent is the host's doing, not a
     * failure to write. */
    bool refused = h->e->write_err == TG_ETOO_MANY_SEQUENCES;
    if (h->e->write_err && !refused) h->report.failure = TG_FLEET_FAIL_WRITE;
    else if (tg_recording_deadline_failed(rec))
      h->report.failure = TG_FLEET_FAIL_DEADLINE;
    else h->report.failure = TG_FLEET_FAIL_SESSION;
    if (refused)
      snprintf(h->report.why, sizeof(h->report.why), "the host sent %s",
               tg_strerror(h->e->write_err));
    else if (h->e->write_err)
      snprintf(h->report.why, sizeof(h->report.why), "cannot write %s: %s",
               h->out_name ? h->out_name : "the trace",
               tg_strerror(h->e->write_err));
    else
      snprintf(h->report.why, sizeof(h->report.why), "%s", reason);
    tg_link_set_state(&h->e->link, TG_LINK_FAILING, h->report.why);
  }
  close_conn(h);
}

static void on_rec_state(tg_recording_t *rec, tg_rec_state_t from,
                         tg_rec_state_t to) {
  (void)from;
  tg_fleet_host_t *h = tg_recording_data(rec);
  if (to != TG_REC_TRACING || h->e->has_traced) return;
  h->e->has_traced = true;
  h->fleet->traced++;
  h->fleet->hooks->traced(h);
  if (cbs(h)->on_tracing) cbs(h)->on_tracing(h);
}

static const tg_recording_cbs_t rec_cbs = {
    .on_state = on_rec_state,
    .on_packet = on_rec_packet,
    .on_stats = on_rec_stats,
    .on_rebound = on_rec_rebound,
    .on_end = on_rec_end,
};

/* The first start on this host: enable, or attach. */
static void start_recording(tg_fleet_host_t *h) {
  const tg_fleet_t *f = h->fleet;
  const tg_fleet_opts_t *o = &f->o;
  tg_recording_opts_t ro = {
      .config = h->config ? h->config : o->config,
      .config_len = h->config ? h->config_len : o->config_len,
      /* h->key: the fleet's attach key, or the owner's for this host. */
      .attach_key = o->attach_key ? h->key : NULL,
      .enable_if_absent = o->enable_if_absent,
      .resume_key = h->e->cx.key_set ? h->key : NULL,
      /* Through a relay with the key set: exactly once across reconnects. */
      .replay = h->e->cx.relay && h->e->cx.key_set,
      .fd = -1,
      .stream = !o->hold,
      .first_read_ms = f->n > TG_FLEET_DEFER_ABOVE_HOSTS && f->traced + 1 < f->n
                           ? START_FIRST_READ_MS
                           : 0,
      /* Not before the estimate: a merged trace needs it ahead of the
       * host's packets, and a first read would slow the burst's round
       * trips (each one bounds the estimate's error). */
      .hold_reads = h->e->cx.clock_hold != TG_FLEET_CLOCK_FREE,
      .stats_period_ms =
          o->stats_period_ms ? o->stats_period_ms : STATS_PERIOD_MS,
      .grace_ms = o->grace_ms,
      .stop_after_ms = o->stop_after_ms,
  };
  if (h->e->cx.key_set && !h->e->key_shown) {
    /* Told before the session exists: if the owner dies, it can be taken
     * back. */
    h->e->key_shown = true;
    cbs(h)->on_key_ready(h);
  }
  uint64_t now = tg__fleet_now(h);
  /* The held burst goes on when the fleet traces, or after this long. */
  if (h->e->cx.clock_hold != TG_FLEET_CLOCK_FREE)
    h->e->cx.clock_due_ms = now + START_FIRST_READ_MS;
  tg_link_up(&h->e->link, now, h->e->cx.relay);
  int rv = tg_recording_start(h->e->rec, h->e->cx.c, &ro);
  if (rv < 0) {
    tg__fleet_fail(h, TG_FLEET_FAIL_SESSION, "cannot %s: %s",
                   o->attach_key ? "attach" : "enable tracing",
                   tg_strerror(rv));
    return;
  }
  if (h->e->stop_requested || o->stop_at_start) tg_recording_stop(h->e->rec);
}

/* Every part is in: the owner gets the host's description (its first
 * clock estimate), then the session starts, or comes back (with its
 * reads, if a lost link had cut a held burst short: this connection made
 * a whole one). */
void tg__fleet_after_prep(tg_fleet_host_t *h) {
  if (h->e->cx.clock_hold == TG_FLEET_CLOCK_FREE) {
    int rv = tg__fleet_describe(h);
    if (rv < 0) {
      tg__fleet_fail_write(h, rv);
      return;
    }
  }
  if (tg_link_reconnecting(&h->e->link)) {
    int rv = tg_recording_rebind(h->e->rec, h->e->cx.c);
    if (rv < 0) {
      char why[128];
      snprintf(why, sizeof(why), "cannot attach: %s", tg_strerror(rv));
      tg__fleet_drop_attempt(h, why);
    }
    return;
  }
  settle_names(h);
  if (h->e->stop_requested) {
    /* Stopped before this host started: nothing to record. */
    tg__fleet_fail(h, TG_FLEET_FAIL_STOPPED, "stopped before tracing began");
    return;
  }
  start_recording(h);
}

/* --- the host's one timer ------------------------------------------------------ */

/* What the link asks for at |now| (link.h), and the end of a held clock
 * burst's wait. */
static void on_timer(uv_timer_t *t) {
  tg_fleet_host_t *h = t->data;
  uint64_t now = tg__fleet_now(h);
  if (h->e->cx.clock_due_ms && now >= h->e->cx.clock_due_ms) {
    h->e->cx.clock_due_ms = 0;
    tg_fleet_host_resume_clock(h);
  }
  /* Without heartbeats, a read or stats call unanswered is the sign. */
  uint64_t waiting =
      h->e->rec && h->e->cx.c && tg_consumer_ready(h->e->cx.c)
          ? tg_recording_waiting_ms(h->e->rec, now)
          : 0;
  switch (tg_link_due(&h->e->link, now, waiting)) {
    case TG_LINK_DUE_NONE:
      break;
    case TG_LINK_DUE_HEARTBEAT:
      tg__fleet_send_heartbeat(h);
      break;
    case TG_LINK_DUE_DEAD:
      link_dead(h, now);
      break;
    case TG_LINK_DUE_GUARD:
      guard_expired(h);
      break;
    case TG_LINK_DUE_ATTEMPT:
      connect_now(h);
      break;
  }
  arm(h);
}

/* Arms the timer for the link's next deadline or the clock's, whichever
 * comes first. */
static void arm(tg_fleet_host_t *h) {
  if (uv_is_closing((uv_handle_t *)&h->e->timer)) return;
  uint64_t at = tg_link_deadline(&h->e->link);
  if (h->e->cx.clock_due_ms && h->e->cx.clock_due_ms < at)
    at = h->e->cx.clock_due_ms;
  if (at == TG_LINK_NEVER) {
    uv_timer_stop(&h->e->timer);
    return;
  }
  uint64_t now = tg__fleet_now(h);
  uv_timer_start(&h->e->timer, on_timer, at > now ? at - now : 0, 0);
}

/* --- the owner's calls ------------------------------------------------------------- */

/* A host without an engine (out of memory at init) ends at its start, or
 * when stopped: FAILED, told as any end is. */
static void fail_without_engine(tg_fleet_host_t *h) {
  if (h->report.link_state == TG_LINK_FAILED) return;
  h->report.failure = TG_FLEET_FAIL_INTERNAL;
  snprintf(h->report.why, sizeof(h->report.why), "out of memory");
  h->report.link_state = TG_LINK_FAILED;
  if (cbs(h)->on_closing) (void)cbs(h)->on_closing(h, true);
  tg_fleet_t *fleet = h->fleet;
  cbs(h)->on_finished(h);
  fleet->hooks->place_freed(fleet);
}

void tg_fleet_host_stop(tg_fleet_host_t *h) {
  if (!h->e) {
    fail_without_engine(h);
    return;
  }
  h->e->stop_requested = true;
  if (rec_active(h)) {
    tg_recording_stop(h->e->rec); /* unbound: once re-attached */
    return;
  }
  if (tg_link_starting(h->e->link.state))
    tg__fleet_fail(h, TG_FLEET_FAIL_STOPPED, "stopped before tracing began");
}

void tg_fleet_host_abort(tg_fleet_host_t *h) {
  if (!h->e) {
    fail_without_engine(h);
    return;
  }
  tg__fleet_fail(h, TG_FLEET_FAIL_STOPPED, "aborted (Ctrl-C)");
}

const char *tg_fleet_failure_name(tg_fleet_failure_t f) {
  switch (f) {
    case TG_FLEET_FAIL_CONNECT: return "connect";
    case TG_FLEET_FAIL_LINK_LOST: return "link_lost";
    case TG_FLEET_FAIL_SESSION: return "session";
    case TG_FLEET_FAIL_DEADLINE: return "deadline";
    case TG_FLEET_FAIL_WRITE: return "write";
    case TG_FLEET_FAIL_STOPPED: return "stopped";
    case TG_FLEET_FAIL_INTERNAL: return "internal";
    case TG_FLEET_FAIL_NONE: break;
  }
  return NULL;
}

const char *tg_fleet_host_state(const tg_fleet_host_t *h) {
  const tg_recording_t *rec = tg_fleet_host_recording(h);
  switch (h->report.link_state) {
    case TG_LINK_CONNECTING: return "connecting";
    case TG_LINK_PREPARING: return "preparing";
    case TG_LINK_UP:
      return rec ? tg_recording_state_name(tg_recording_state(rec)) : "tracing";
    case TG_LINK_DROPPING:
      return tg_fleet_host_reconnecting(h) ? "reconnecting" : "link lost";
    case TG_LINK_BACKOFF:
    case TG_LINK_RECONNECTING:
    case TG_LINK_RESUMING: return "reconnecting";
    case TG_LINK_CLOSING:
    case TG_LINK_FAILING: return "closing";
    case TG_LINK_DONE: return "done";
    case TG_LINK_FAILED: return "FAILED";
  }
  return "?";
}

void tg_fleet_host_fleet_started(tg_fleet_host_t *h) {
  if (h->e && h->e->rec) tg_recording_read_first_now(h->e->rec);
}

tg_consumer_t *tg_fleet_host_consumer(const tg_fleet_host_t *h) {
  return h->e ? h->e->cx.c : NULL;
}

const tg_recording_t *tg_fleet_host_recording(const tg_fleet_host_t *h) {
  return h->e ? h->e->rec : NULL;
}

bool tg_fleet_host_tracing(const tg_fleet_host_t *h) {
  const tg_recording_t *rec = tg_fleet_host_recording(h);
  return h->report.link_state == TG_LINK_UP && rec &&
         tg_recording_state(rec) == TG_REC_TRACING;
}

bool tg_fleet_host_reconnecting(const tg_fleet_host_t *h) {
  if (h->e) return tg_link_reconnecting(&h->e->link);
  /* Closed (or never had an engine): the report's state alone. */
  tg_link_t l = {.state = h->report.link_state};
  return tg_link_reconnecting(&l);
}

/* --- setup ---------------------------------------------------------------------------- */

static void make_key(tg_fleet_host_t *h) {
  uint8_t rnd[12];
  size_t got = 0;
  while (got < sizeof(rnd)) {
    ssize_t r = getrandom(rnd + got, sizeof(rnd) - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  if (got < sizeof(rnd)) { /* no entropy source: still unique enough */
    uint64_t x = uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ h->index;
    memcpy(rnd, &x, sizeof(x));
  }
  int off = snprintf(h->key, sizeof(h->key), "tg-");
  for (size_t i = 0; i < sizeof(rnd); i++)
    off += snprintf(h->key + off, sizeof(h->key) - (size_t)off, "%02x", rnd[i]);
}

int tg_fleet_host_init(tg_fleet_t *fleet, tg_fleet_host_t *h, size_t index,
                       const char *name, const void *target, void *data) {
  memset(h, 0, sizeof(*h));
  h->fleet = fleet;
  h->index = index;
  h->name = name;
  h->target = target;
  h->data = data;
  if (fleet->hosts && index < fleet->n) fleet->hosts[index] = h;
  /* Attaching: the session is the one the key names. */
  if (fleet->o.attach_key)
    snprintf(h->key, sizeof(h->key), "%s", fleet->o.attach_key);
  else
    make_key(h);
  tg_clock_sync_init(&h->report.clock, fleet->o.clock_sync_ms);
  h->report.link_state = TG_LINK_CONNECTING;
  if (!(h->e = calloc(1, sizeof(*h->e)))) return -ENOMEM;
  h->e->h = h;
  uv_timer_init(fleet->loop, &h->e->timer);
  h->e->timer.data = h;
  tg_link_timing_t tm = {.dead_link_ms = fleet->o.dead_link_ms,
                         .reconnect_ms = fleet->o.reconnect_ms,
                         .heartbeat_max_ms = fleet->o.heartbeat_max_ms};
  tg_link_init(&h->e->link, &tm, name, on_link_state, h);
  report_link(h);
  h->e->rec = tg_recording_new(fleet->loop, &fleet->clock, &rec_cbs, h);
  return h->e->rec ? 0 : -ENOMEM;
}

void tg_fleet_host_start(tg_fleet_host_t *h) {
  if (!h->e) {
    fail_without_engine(h);
    return;
  }
  if (!h->e->rec) {
    tg__fleet_fail(h, TG_FLEET_FAIL_INTERNAL, "out of memory");
    return;
  }
  connect_now(h);
}

void tg_fleet_host_close(tg_fleet_host_t *h) { tg_fleet_host_close_cb(h, NULL); }

/* The engine's last handle is closed: it goes, the report stays. */
static void on_engine_closed(uv_handle_t *t) {
  tg_fleet_host_t *h = t->data;
  tg_fleet_host_closed_cb cb = h->e->closed;
  free(h->e);
  h->e = NULL;
  if (cb) cb(h);
}

void tg_fleet_host_close_cb(tg_fleet_host_t *h, tg_fleet_host_closed_cb cb) {
  if (!h->e) {
    if (cb) cb(h);
    return;
  }
  if (uv_is_closing((uv_handle_t *)&h->e->timer)) return; /* closed before */
  h->e->closed = cb;
  uv_close((uv_handle_t *)&h->e->timer, on_engine_closed);
  tg_recording_free(h->e->rec);
  h->e->rec = NULL;
}
