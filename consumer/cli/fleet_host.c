/* One remote host of a fleet recording: its connection, the relay's own
 * service (host info, clock sync, resume key), and getting the session
 * back when the link drops. The link's states, its deadlines and the
 * places a dead link is detected are consumer/fleet/link.h's: this file
 * does what the link asks (dial, heartbeat, close) on one timer per host
 * and reports what happened. The session itself is the recording
 * engine's (consumer/recording.h); its packets come here to be written.
 *
 * Every consumer callback first checks that it belongs to the current
 * connection; calls that fail because the connection is going away
 * (TG_EPEER_CLOSED, -ECANCELED) are left to the connection's on_close,
 * which decides between reconnecting and failing once the transport is
 * fully released (cli_remote_release: the TLS error or ssh's last words
 * are known by then).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "consumer/cli/fleet.h"
#include "tracegate/error.h"
#include "pb/tracegate/relay.pb-c.h"

#define RELAY_SERVICE "TracegateRelay"
#define STATS_PERIOD_MS 1000 /* loss counters once a second */
/* A big fleet starts before it reads: a host that traces while others
 * still connect or prepare reads first when the last one traces, or this
 * long after its own start, whichever comes first (twice the usual read
 * period): each first read is a round trip through relay and service
 * with their first compression, and many of them slow the start of the
 * hosts behind. */
#define START_FIRST_READ_MS 1000
#define DEFER_READS_ABOVE_HOSTS 64
/* So does the rest of its first clock burst: the burst's samples are one
 * round trip each, in a row, and taken while handshakes queue on the same
 * cores their round trips (half of one bounds the estimate's error) are
 * long. The host enables tracing on its first sample and holds its reads
 * until its burst is done (fleet.c lets a few bursts run at a time): a
 * merged trace has the host's estimate ahead of its first packet. */

static void connect_now(fleet_host_t *h);
static void arm(fleet_host_t *h);

static uint64_t now_ms(const fleet_host_t *h) { return uv_now(h->f->loop); }

/* Every change of the link (tg_link_set_state calls it): fleet.c counts
 * the hosts on their way up, and the new state's deadlines are armed. */
static void on_link_state(tg_link_t *l, tg_link_state_t from, const char *why) {
  (void)why;
  fleet_host_t *h = l->data;
  fleet_host_link_changed(h->f, h, from);
  arm(h);
}

/* Whether a reply on |c| is news for the host: a reply from an older link
 * is not, nor one that only says the link went (on_close deals with
 * that). */
static bool reply_is_news(fleet_host_t *h, tg_consumer_t *c, int status) {
  return h->c == c && status != TG_EPEER_CLOSED && status != -ECANCELED;
}

static bool is_finished(const fleet_host_t *h) {
  return tg_link_finished(&h->link);
}

static bool is_failing(const fleet_host_t *h) {
  return h->link.state == TG_LINK_FAILING;
}

/* The recording was started and has not ended yet. */
static bool rec_active(const fleet_host_t *h) {
  if (!h->rec) return false;
  tg_rec_state_t s = tg_recording_state(h->rec);
  return s != TG_REC_IDLE && s != TG_REC_DONE && s != TG_REC_FAILED &&
         s != TG_REC_DETACHED;
}

/* --- the end of a host ------------------------------------------------------ */

/* CLOSING or FAILING, the connection gone: -> DONE or FAILED. */
static void finish(fleet_host_t *h) {
  if (is_finished(h)) return;
  bool failing = is_failing(h);
  h->clock_due_ms = 0;
  if (h->has_own) {
    fleet_ui_clear(h->f);
    if (!failing) {
      if (cli_output_commit(&h->own) < 0) {
        failing = true;
        snprintf(h->why, sizeof(h->why), "the trace could not be written to %s",
                 h->path);
      }
    } else if (h->own.packets > 0 && !h->f->aborting) {
      cli_output_keep_partial(&h->own);
      h->kept_partial = true;
    } else {
      cli_output_discard(&h->own);
    }
    h->has_own = false;
  }
  tg_link_set_state(&h->link, failing ? TG_LINK_FAILED : TG_LINK_DONE,
                    failing ? h->why : "the connection closed");
  fleet_names_host(h->f, h, NULL); /* never asked: the others wait on none */
  if (h->rec) {
    h->reads_cut = tg_recording_reads_cut(h->rec);
    h->reads_lost = tg_recording_reads_lost(h->rec);
  }
  tg_recording_free(h->rec);
  h->rec = NULL;
  fleet_host_finished(h->f);
}

/* In CLOSING or FAILING: the connection goes, then finish(). */
static void close_conn(fleet_host_t *h) {
  if (h->c) tg_consumer_close(h->c);
  else if (!h->rt) finish(h); /* nothing open (a failed connect, a backoff) */
}

__attribute__((format(printf, 2, 3)))
static void fail(fleet_host_t *h, const char *fmt, ...) {
  if (is_finished(h) || is_failing(h)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->why, sizeof(h->why), fmt, ap);
  va_end(ap);
  tg_link_set_state(&h->link, TG_LINK_FAILING, h->why);
  /* The recording ends its session first; its on_end closes. */
  if (rec_active(h)) {
    tg_recording_fail(h->rec, true, h->why);
    return;
  }
  close_conn(h);
}

/* A reconnection attempt did not work out (|why|): its connection goes,
 * and once released the backoff begins again (on_remote_gone). */
static void drop_attempt(fleet_host_t *h, const char *why) {
  if (h->link.state != TG_LINK_RECONNECTING &&
      h->link.state != TG_LINK_RESUMING)
    return; /* already going: on_remote_gone decides */
  snprintf(h->retry_why, sizeof(h->retry_why), "%s", why);
  tg_link_drop(&h->link, TG_LINK_DROP_ATTEMPT, h->retry_why);
  if (h->c) tg_consumer_close(h->c);
}

/* --- reconnecting ------------------------------------------------------------ */

/* One reconnection attempt failed: try again after the backoff, or give
 * up at the deadline. */
static void retry_later(fleet_host_t *h, const char *why) {
  /* Never an empty reason: say at least what was tried. */
  if (!why || !why[0])
    why = h->conn_msg[0] ? h->conn_msg
                         : "the connection closed before the session was back";
  if (why != h->retry_why)
    snprintf(h->retry_why, sizeof(h->retry_why), "%.290s", why);
  if (tg_link_attempt_failed(&h->link, now_ms(h), why) < 0) {
    char limit[32];
    cli_format_ms(limit, sizeof(limit), h->f->reconnect_ms);
    fail(h, "lost the link and could not get the session back within %s "
         "(last attempt: %s)", limit, why);
    return;
  }
  arm(h);
}

static bool can_resume(const fleet_host_t *h) {
  return h->f->reconnect_ms > 0 && h->key_set && h->rec &&
         tg_recording_resumable(h->rec);
}

static void link_lost(fleet_host_t *h, const char *why) {
  if (!can_resume(h)) {
    bool started = rec_active(h);
    if (started && tg_recording_ended(h->rec))
      fail(h, "lost the link after tracing ended; the rest of the trace is "
           "lost (%s)", why);
    else if (started && h->f->reconnect_ms > 0)
      fail(h, "lost the link, and the session cannot be resumed (no resume "
           "key: is the peer a tracegate-relay?) (%s)", why);
    else
      fail(h, "lost the link (%s)", why);
    return;
  }
  snprintf(h->lost_why, sizeof(h->lost_why), "%.290s", why);
  h->loss_before_drop = h->loss.total;
  tg_link_lost(&h->link, now_ms(h), why);
  fleet_say(h->f, "%s: lost the link (%s); reconnecting", h->t->spec, why);
}

/* --- the connection closed ---------------------------------------------------- */

/* The connection is released: what follows depends on why it went. */
static void on_remote_gone(void *ctx, const char *detail) {
  fleet_host_t *h = ctx;
  char why[700];
  if (detail && detail[0] && !strstr(h->conn_msg, detail))
    snprintf(why, sizeof(why), "%s: %s", h->conn_msg, detail);
  else
    snprintf(why, sizeof(why), "%s", h->conn_msg);
  if (is_finished(h)) return;
  if (h->link.state == TG_LINK_CLOSING || is_failing(h)) {
    finish(h);
    return;
  }
  if (h->link.state != TG_LINK_DROPPING) return; /* not reached */
  switch (h->link.drop) {
    case TG_LINK_DROP_ATTEMPT:
      retry_later(h, h->retry_why);
      return;
    case TG_LINK_DROP_DEAD: {
      char lim[32];
      cli_format_ms(lim, sizeof(lim), h->f->dead_link_ms);
      snprintf(why, sizeof(why), "no answer for %s: a dead link", lim);
      break;
    }
    case TG_LINK_DROP_PEER:
      break;
  }
  if (!h->bound) {
    /* Never reached the service: the transport's words say why best. */
    const char *d = detail && detail[0] ? detail : h->conn_msg;
    if (!strncmp(d, "cannot connect: ", 16)) d += 16;
    snprintf(why, sizeof(why), "cannot connect: %s", d);
  }
  if (tg_link_reconnecting(&h->link)) {
    retry_later(h, why);
    return;
  }
  if (!h->ever_connected) {
    fail(h, "%s", why);
    return;
  }
  link_lost(h, why);
}

static void on_conn_close(tg_consumer_t *c, int status, const char *msg) {
  (void)status;
  fleet_host_t *h = tg_consumer_data(c);
  h->c = NULL;
  /* The consumer is freed after this: the recording lets go now. */
  if (h->rec) tg_recording_unbind(h->rec);
  /* A close we asked for keeps our reason (retry_why, the dead link). */
  bool ours = h->link.state == TG_LINK_DROPPING &&
              h->link.drop != TG_LINK_DROP_PEER;
  bool dropped = h->link.state != TG_LINK_DROPPING &&
                 h->link.state != TG_LINK_CLOSING && !is_failing(h);
  if (msg[0] && !ours)
    snprintf(h->conn_msg, sizeof(h->conn_msg), "%s", msg);
  else if (!msg[0] && dropped)
    snprintf(h->conn_msg, sizeof(h->conn_msg), "the connection closed");
  tg_link_drop(&h->link, TG_LINK_DROP_PEER, h->conn_msg);
  cli_remote_t *rt = h->rt;
  h->rt = NULL;
  /* on_remote_gone runs from the loop, after the transport is gone. */
  cli_remote_release(rt, on_remote_gone, h);
}

/* --- preparing: TracegateRelay ------------------------------------------------- */

static void clock_next(fleet_host_t *h);
static int write_preamble(fleet_host_t *h);

/* Preparing a connection: its parts are asked at once and answered in any
 * order (the relay's own calls share one round trip, and the relay's
 * service is bound next to ConsumerPort), then the session starts or
 * comes back. A part that cannot be asked counts as answered. */
enum prep_part {
  PREP_CONSUMER = 1u << 0,    /* ConsumerPort bound (on_ready) */
  PREP_RELAY = 1u << 1,       /* TracegateRelay bound, or known absent */
  PREP_COMPRESSION = 1u << 2, /* SetCompression */
  PREP_INFO = 1u << 3,        /* GetHostInfo */
  PREP_CLOCK = 1u << 4,       /* the burst of ClockSync samples */
  PREP_KEY = 1u << 5,         /* SetSessionKey */
  PREP_NAMES = 1u << 6,       /* QueryServiceState: data source names */
  PREP_ALL = (1u << 7) - 1,
};

static void prep_done(fleet_host_t *h, unsigned part);
static void on_names_state(tg_consumer_t *c, void *ctx, int status,
                           const char *msg, bool has_more,
                           const Perfetto__Protos__TracingServiceState *st);

static void prep_failed(fleet_host_t *h, tg_consumer_t *c, int status,
                        const char *msg) {
  if (status == TG_EPEER_CLOSED || status == -ECANCELED) return; /* on_close */
  if (!msg || !msg[0]) msg = tg_strerror(status);
  (void)c;
  if (tg_link_reconnecting(&h->link)) {
    drop_attempt(h, msg);
    return;
  }
  fail(h, "%s", msg);
}

static void on_key_set(tg_consumer_t *c, void *ctx, int status, const char *msg,
                       const uint8_t *reply, size_t len) {
  (void)reply;
  (void)len;
  fleet_host_t *h = ctx;
  if (!reply_is_news(h, c, status)) return;
  if (status) {
    /* Tracing works without; only resuming after a link loss does not. */
    fleet_say(h->f, "%s: warning: the relay refused the resume key (%s): a "
              "lost link will end this host's recording", h->t->spec, msg);
    h->key_set = false;
  } else {
    h->key_set = true;
  }
  prep_done(h, PREP_KEY);
}

static void set_key(fleet_host_t *h) {
  Perfetto__Protos__SetSessionKeyRequest r =
      PERFETTO__PROTOS__SET_SESSION_KEY_REQUEST__INIT;
  r.key = h->key;
  uint8_t buf[TG_RELAY_SESSION_KEY_MAX + 16];
  if (perfetto__protos__set_session_key_request__get_packed_size(&r) > sizeof(buf)) {
    h->key_set = false; /* record.c bounds --attach KEY: not reached */
    prep_done(h, PREP_KEY);
    return;
  }
  size_t n = perfetto__protos__set_session_key_request__pack(&r, buf);
  int rv = tg_consumer_call(h->c, RELAY_SERVICE, "SetSessionKey", buf, n,
                            on_key_set, h);
  if (rv < 0) {
    h->key_set = false;
    prep_done(h, PREP_KEY);
  }
}

/* --- clocks and the heartbeat ---------------------------------------------------- */

/* Fills |s|'s host clocks from a ClockSyncResponse; false if it has none. */
static bool clock_parse(tg_clock_sample_t *s, const uint8_t *reply, size_t len) {
  Perfetto__Protos__ClockSyncResponse *r =
      perfetto__protos__clock_sync_response__unpack(
          NULL, len, reply ? reply : (const uint8_t *)"");
  bool ok = r && r->has_boottime_ns && r->has_monotonic_ns && r->has_realtime_ns;
  if (ok) {
    s->remote[TG_CLK_BOOTTIME] = r->boottime_ns;
    s->remote[TG_CLK_MONOTONIC] = r->monotonic_ns;
    s->remote[TG_CLK_REALTIME] = r->realtime_ns;
  }
  if (r) perfetto__protos__clock_sync_response__free_unpacked(r, NULL);
  return ok;
}

/* The burst or period is over: its best sample is the estimate from now
 * on, written into a merged trace once the host's preamble is there (the
 * preamble carries the first). Returns 0 or a write error. */
static int clock_settle(fleet_host_t *h) {
  if (!tg_clock_sync_settle(&h->clock, now_ms(h))) return 0;
  if (h->f->mode != FLEET_OUT_MERGE || !h->preamble_written) return 0;
  return fleet_merge_clock_sync(h->f, h);
}

static void on_heartbeat(tg_consumer_t *c, void *ctx, int status,
                         const char *msg, const uint8_t *reply, size_t len) {
  (void)msg;
  fleet_host_t *h = ctx;
  if (h->c != c) return;
  tg_link_heartbeat_done(&h->link);
  if (!reply_is_news(h, c, status)) return;
  /* Any answer, even a refusal, says the link works. */
  uint64_t now = now_ms(h);
  tg_link_heard(&h->link, now);
  if (status) return;
  tg_clock_read(h->hb_sample.after);
  if (clock_parse(&h->hb_sample, reply, len))
    tg_clock_sync_keep(&h->clock, &h->hb_sample);
  /* A held burst settles at its own end (clock_next). */
  if (h->clock_hold != CLOCK_FREE || !tg_clock_sync_due(&h->clock, now)) return;
  int rv = clock_settle(h);
  if (rv < 0) fail(h, "cannot write %s: %s", h->f->out, tg_strerror(rv));
}

/* The link asks for a heartbeat (a ClockSync: its answer is also a clock
 * sample between bursts). */
static void send_heartbeat(fleet_host_t *h) {
  if (!h->c || !tg_consumer_ready(h->c)) return;
  tg_clock_read(h->hb_sample.before);
  if (tg_consumer_call(h->c, RELAY_SERVICE, "ClockSync", NULL, 0, on_heartbeat,
                       h) == 0)
    tg_link_heartbeat_sent(&h->link);
}

/* The link found the connection silent too long (it is DROPPING): close
 * it; on_remote_gone then reconnects. */
static void link_dead(fleet_host_t *h, uint64_t now) {
  char el[32];
  cli_format_ms(el, sizeof(el), now - h->link.heard_ms);
  fleet_say(h->f, "%s: no answer for %s: the link is dead", h->t->spec, el);
  if (h->c) tg_consumer_close(h->c);
}

static void on_clock(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     const uint8_t *reply, size_t len) {
  fleet_host_t *h = ctx;
  if (h->c != c) return;
  tg_clock_read(h->cur.after);
  if (status == TG_EPEER_CLOSED || status == -ECANCELED) return;
  if (status) {
    /* Recording works without; the merged trace just cannot align it. */
    fleet_say(h->f, "%s: warning: no clock sync (%s)", h->t->spec, msg);
    h->syncs = FLEET_CLOCK_SYNC_SAMPLES;
    clock_next(h);
    return;
  }
  if (clock_parse(&h->cur, reply, len)) tg_clock_sync_keep(&h->clock, &h->cur);
  h->syncs++;
  clock_next(h);
}

/* A burst of samples on every prepared connection: after a reconnection
 * the host may be another boot, or its clock may have stepped. A held
 * burst (DEFER_READS_ABOVE_HOSTS) lets the preparation go on after its
 * first sample and goes on from fleet_host_resume_clock(). */
static void clock_next(fleet_host_t *h) {
  if (h->syncs >= FLEET_CLOCK_SYNC_SAMPLES) {
    bool was_held = h->clock_hold != CLOCK_FREE;
    h->clock_hold = CLOCK_FREE;
    int rv = clock_settle(h);
    /* Done while preparing (a reconnection, say): after_prep writes it. */
    if (rv == 0 && was_held && !(h->prep_wait & PREP_CLOCK)) {
      rv = write_preamble(h);
      if (h->rec) tg_recording_release_reads(h->rec);
      fleet_host_burst_ended(h->f, h);
    }
    if (rv < 0) {
      fail(h, "cannot write %s: %s", h->f->out, tg_strerror(rv));
      return;
    }
    prep_done(h, PREP_CLOCK);
    return;
  }
  if (h->clock_hold == CLOCK_HELD && h->syncs > 0) {
    prep_done(h, PREP_CLOCK);
    return;
  }
  tg_clock_read(h->cur.before);
  int rv = tg_consumer_call(h->c, RELAY_SERVICE, "ClockSync", NULL, 0,
                            on_clock, h);
  if (rv < 0) {
    h->syncs = FLEET_CLOCK_SYNC_SAMPLES;
    clock_next(h);
  }
}

/* The merged trace gets the host's preamble (its first clock estimate)
 * once, ahead of every packet of the host. Returns 0 or a write error. */
static int write_preamble(fleet_host_t *h) {
  if (h->f->mode != FLEET_OUT_MERGE || h->preamble_written) return 0;
  h->preamble_written = true;
  return fleet_merge_host_preamble(h->f, h);
}

/* The rest of a held burst, once the fleet traces or the host has waited
 * START_FIRST_READ_MS, on the connection it started on (a reconnection
 * makes a whole burst of its own). */
bool fleet_host_resume_clock(fleet_host_t *h) {
  if (h->clock_hold != CLOCK_HELD || h->link.state != TG_LINK_UP || !h->c ||
      !tg_consumer_ready(h->c))
    return false;
  h->clock_hold = CLOCK_RESUMED;
  h->clock_due_ms = 0;
  clock_next(h);
  return true;
}

static void on_host_info(tg_consumer_t *c, void *ctx, int status,
                         const char *msg, const uint8_t *reply, size_t len) {
  fleet_host_t *h = ctx;
  if (!reply_is_news(h, c, status)) return;
  if (status) {
    fleet_say(h->f, "%s: warning: no host info (%s)", h->t->spec, msg);
    prep_done(h, PREP_INFO);
    return;
  }
  Perfetto__Protos__RelayHostInfo *r = perfetto__protos__relay_host_info__unpack(
      NULL, len, reply ? reply : (const uint8_t *)"");
  if (r) {
    h->has_info = true;
    tg_printable(h->hostname, sizeof(h->hostname), r->hostname);
    tg_printable(h->host_machine_id, sizeof(h->host_machine_id), r->machine_id);
    tg_printable(h->kernel, sizeof(h->kernel), r->kernel);
    h->num_cpus = r->has_num_cpus ? r->num_cpus : 0;
    perfetto__protos__relay_host_info__free_unpacked(r, NULL);
  }
  prep_done(h, PREP_INFO);
}

/* The client asks for at most this window: a fleet multiplies it (the
 * decompressor keeps a window per host). Up to ZSTD_BIG_FLEET hosts 1 MiB
 * each; beyond, 128 KiB each, which keeps 1000 hosts near 130 KiB of
 * memory per host in all (docs/operations.md: the ratio it costs). */
#define ZSTD_BIG_FLEET 64
#define ZSTD_WINDOW_LOG_SMALL_FLEET 20
#define ZSTD_WINDOW_LOG_BIG_FLEET 17
#define ZSTD_WINDOW_LOG(h)                                      \
  ((h)->f->n > ZSTD_BIG_FLEET ? ZSTD_WINDOW_LOG_BIG_FLEET \
                              : ZSTD_WINDOW_LOG_SMALL_FLEET)

static void on_compression(tg_consumer_t *c, void *ctx, int status,
                           const char *msg, const uint8_t *reply, size_t len) {
  fleet_host_t *h = ctx;
  if (!reply_is_news(h, c, status)) return;
  if (status) {
    /* The relay said no (its operator's --compress never, or an ask it
     * does not take): what it sends stays plain. */
    h->compression = HC_REFUSED;
    if (!tg_link_reconnecting(&h->link))
      fleet_say(h->f, "%s: note: the relay sends uncompressed (%s)",
                h->t->spec, msg);
    prep_done(h, PREP_COMPRESSION);
    return;
  }
  Perfetto__Protos__SetCompressionResponse *r =
      perfetto__protos__set_compression_response__unpack(
          NULL, len, reply ? reply : (const uint8_t *)"");
  if (!r || !r->has_window_log || r->window_log > ZSTD_WINDOW_LOG(h)) {
    /* It did switch, to something this side cannot read. */
    if (r) perfetto__protos__set_compression_response__free_unpacked(r, NULL);
    prep_failed(h, c, TG_EBAD_COMPRESSED,
                "the relay's compression answer is garbled or exceeds the "
                "window asked for");
    return;
  }
  /* This reply was the last plain frame: inflate from the next one on. */
  int rv = tg_zstd_transport_start_decompress(cli_remote_zstd(h->rt),
                                              ZSTD_WINDOW_LOG(h));
  perfetto__protos__set_compression_response__free_unpacked(r, NULL);
  if (rv < 0) {
    prep_failed(h, c, rv, "cannot start decompressing");
    return;
  }
  h->compression = HC_ZSTD;
  prep_done(h, PREP_COMPRESSION);
}

/* Asks the relay to compress (--compress), before any bulk data flows.
 * False when nothing was asked (the answer is settled already). */
static bool ask_compression(fleet_host_t *h) {
  if (!h->f->o->compress_level) {
    h->compression = HC_NOT_ASKED;
    return false;
  }
  Perfetto__Protos__SetCompressionRequest r =
      PERFETTO__PROTOS__SET_COMPRESSION_REQUEST__INIT;
  r.algorithm = "zstd";
  r.has_level = r.has_window_log = true;
  r.level = h->f->o->compress_level;
  r.window_log = ZSTD_WINDOW_LOG(h);
  uint8_t buf[64];
  size_t n = perfetto__protos__set_compression_request__pack(&r, buf);
  int rv = tg_consumer_call(h->c, RELAY_SERVICE, "SetCompression", buf, n,
                            on_compression, h);
  /* An older relay has no such method: it sends plain. */
  if (rv == TG_ENOT_SUPPORTED) h->compression = HC_UNSUPPORTED;
  else if (rv < 0) h->compression = HC_UNKNOWN;
  return rv == 0;
}

static void ask_host_info(fleet_host_t *h) {
  if (h->has_info || tg_link_reconnecting(&h->link) ||
      tg_consumer_call(h->c, RELAY_SERVICE, "GetHostInfo", NULL, 0,
                       on_host_info, h) < 0)
    prep_done(h, PREP_INFO);
}

/* Bound next to ConsumerPort, whose answer may come before or after. */
static void on_relay_bound(tg_consumer_t *c, void *ctx, int status,
                           const char *msg) {
  fleet_host_t *h = ctx;
  if (h->c != c) return;
  if (status == TG_EUNKNOWN_SERVICE) {
    if (!tg_link_reconnecting(&h->link))
      fleet_say(h->f, "%s: warning: the peer does not offer " RELAY_SERVICE
                " (not a tracegate-relay?): no host info, no clock alignment, "
                "no resume after a link loss", h->t->spec);
    h->relay = false;
    h->key_set = false;
    h->compression =
        h->f->o->compress_level ? HC_UNSUPPORTED : HC_NOT_ASKED;
    h->syncs = FLEET_CLOCK_SYNC_SAMPLES;
    prep_done(h, PREP_RELAY | PREP_COMPRESSION | PREP_INFO | PREP_KEY);
    clock_next(h);
    return;
  }
  if (status) {
    prep_failed(h, c, status, msg);
    return;
  }
  h->relay = true;
  h->clock_hold = !tg_link_reconnecting(&h->link) && !h->clock.estimates &&
                          h->f->n > DEFER_READS_ABOVE_HOSTS
                      ? CLOCK_HELD
                      : CLOCK_FREE;
  tg_link_bound(&h->link);
  /* One flight, answered in this order: compression first, so that the
   * switch comes before the other answers; the first clock sample last. */
  if (!ask_compression(h)) prep_done(h, PREP_COMPRESSION);
  ask_host_info(h);
  set_key(h);
  clock_next(h);
  prep_done(h, PREP_RELAY);
}

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  (void)msg;
  fleet_host_t *h = tg_consumer_data(c);
  if (status || h->c != c) return; /* on_close follows */
  h->ever_connected = h->bound = true;
  tg_link_bound(&h->link);
  /* The host's registered data sources, before enabling: the names it
   * lacks are said once every host has answered (fleet_names.c). A failed
   * query (a role without QueryServiceState) only leaves the check out. */
  if (!tg_link_reconnecting(&h->link) && !h->names_checked && h->f->pcfg &&
      h->f->pcfg->n_data_sources &&
      tg_consumer_query_service_state(c, false, true, on_names_state, h) == 0) {
    prep_done(h, PREP_CONSUMER);
    return;
  }
  prep_done(h, PREP_CONSUMER | PREP_NAMES);
}

static const tg_consumer_cbs_t conn_cbs = {.on_ready = on_ready,
                                           .on_close = on_conn_close};

/* The attempt (connecting and preparing) took longer than the guard. */
static void guard_expired(fleet_host_t *h) {
  if (!h->c) return;
  char why[64];
  snprintf(why, sizeof(why), "no answer within %u s",
           (unsigned)(h->link.tm.connect_guard_ms / 1000));
  if (tg_link_reconnecting(&h->link)) drop_attempt(h, why);
  else fail(h, "cannot connect: %s", why);
}

static void connect_now(fleet_host_t *h) {
  char err[512];
  h->relay = h->bound = false;
  h->syncs = 0;
  h->clock_hold = CLOCK_FREE; /* on_relay_bound decides */
  h->clock_due_ms = 0;
  tg_clock_sync_restart(&h->clock);
  h->conn_msg[0] = 0;
  h->prep_wait = PREP_ALL;
  tg_link_attempt_begin(&h->link, now_ms(h));
  arm(h);
  int rv = cli_remote_open(&h->f->env, h->t, &conn_cbs, h, &h->c, &h->rt, err,
                           sizeof(err));
  if (rv < 0) {
    h->c = NULL;
    h->rt = NULL;
    if (tg_link_reconnecting(&h->link)) retry_later(h, err);
    else fail(h, "%s", err);
    return;
  }
  /* In the same round trip as ConsumerPort's bind. */
  tg_consumer_t *c = h->c;
  rv = tg_consumer_bind_service(c, RELAY_SERVICE, on_relay_bound, h);
  if (rv < 0) on_relay_bound(c, h, TG_EUNKNOWN_SERVICE, "");
}

/* --- the recording ------------------------------------------------------------------ */

static int on_rec_packet(tg_recording_t *rec, const uint8_t *p, size_t n) {
  fleet_host_t *h = tg_recording_data(rec);
  tg_link_heard(&h->link, now_ms(h));
  int rv = h->f->mode == FLEET_OUT_MERGE ? fleet_merge_packet(h->f, h, p, n)
                                         : cli_output_packet(&h->own, p, n);
  if (rv < 0) return rv;
  h->packets++;
  h->bytes += n;
  return 0;
}

/* Loss items in the summary's list, next to the service's counters (not
 * in their total: these are replies, bytes and packets, not chunks). */
static void add_loss_item(cli_loss_t *l, const char *name, uint64_t v) {
  if (!v) return;
  if (l->n == sizeof(l->items) / sizeof(l->items[0])) return;
  snprintf(l->items[l->n].name, sizeof(l->items[0].name), "%s", name);
  l->items[l->n].value = v;
  l->n++;
}

static void note_stats(fleet_host_t *h, const Perfetto__Protos__TraceStats *st) {
  cli_loss_collect(st, &h->loss);
  if (h->rec) {
    /* What a lost link took and the relay's window could not give back:
     * the service never saw it, so only the relay's count says it. */
    tg_rec_replay_stats_t rs;
    tg_recording_replay_stats(h->rec, &rs);
    add_loss_item(&h->loss, "lost in transit: frames (relay replay window)",
                  rs.lost_frames);
    add_loss_item(&h->loss, "lost in transit: bytes", rs.lost_bytes);
    add_loss_item(&h->loss, "lost in transit: packets cut", rs.lost_packets);
  }
  h->has_loss = true;
  if (h->recheck_loss) {
    h->recheck_loss = false;
    if (h->loss.total > h->loss_before_drop)
      h->loss_while_down += h->loss.total - h->loss_before_drop;
  }
}

static void on_rec_stats(tg_recording_t *rec, int status, const char *msg,
                         const Perfetto__Protos__TraceStats *st, bool final) {
  fleet_host_t *h = tg_recording_data(rec);
  if (status == 0) tg_link_heard(&h->link, now_ms(h));
  if (status == 0) note_stats(h, st);
  else if (final)
    fleet_say(h->f, "%s: warning: no final statistics: %s", h->t->spec, msg);
}

static void on_rec_rebound(tg_recording_t *rec, int status, const char *msg) {
  fleet_host_t *h = tg_recording_data(rec);
  if (status) {
    /* The relay may not have detached the session yet (it notices the
     * old link's end on its own time): try again until the deadline. */
    prep_failed(h, h->c, TG_EREMOTE_FAILED, msg);
    return;
  }
  uint64_t down = tg_link_resumed(&h->link, now_ms(h), h->relay);
  h->recheck_loss = true;
  tg_recording_release_reads(rec);
  char el[32];
  cli_format_ms(el, sizeof(el), down);
  fleet_say(h->f, "%s: reconnected and re-attached the session after %s%s",
            h->t->spec, el,
            h->rt && cli_remote_resumed(h->rt) ? " (TLS resumed)" : "");
  tg_rec_replay_stats_t rs;
  tg_recording_replay_stats(rec, &rs);
  if (rs.lost_frames)
    fleet_say(h->f, "%s: the link loss took %" PRIu64 " ReadBuffers replies "
              "(%" PRIu64 " bytes) that the relay's replay window no longer "
              "held: lost, counted in the summary", h->t->spec,
              rs.lost_frames, rs.lost_bytes);
  else if (rs.relay_restarted)
    fleet_say(h->f, "%s: the relay was restarted: what it had not delivered "
              "when it went away cannot be sent again", h->t->spec);
  else if (rs.frames)
    fleet_say(h->f, "%s: the relay sent again what the link loss took: %"
              PRIu64 " replies, %" PRIu64 " bytes in all so far", h->t->spec,
              rs.frames, rs.bytes);
}

static void on_rec_end(tg_recording_t *rec, int status, const char *reason) {
  (void)status;
  fleet_host_t *h = tg_recording_data(rec);
  if (is_finished(h)) return;
  if (tg_recording_state(rec) == TG_REC_DONE && !is_failing(h)) {
    tg_link_set_state(&h->link, TG_LINK_CLOSING, "the recording ended");
    close_conn(h);
    return;
  }
  if (!is_failing(h)) {
    const cli_output_t *o =
        h->f->mode == FLEET_OUT_MERGE ? &h->f->merged : &h->own;
    if (o->err)
      snprintf(h->why, sizeof(h->why), "cannot write %s: %s",
               h->f->mode == FLEET_OUT_MERGE ? h->f->out : h->path,
               tg_strerror(o->err));
    else
      snprintf(h->why, sizeof(h->why), "%s", reason);
    tg_link_set_state(&h->link, TG_LINK_FAILING, h->why);
  }
  close_conn(h);
}

static void on_rec_state(tg_recording_t *rec, tg_rec_state_t from,
                         tg_rec_state_t to) {
  (void)from;
  fleet_host_t *h = tg_recording_data(rec);
  if (to == TG_REC_TRACING) fleet_host_traced(h->f, h);
}

static const tg_recording_cbs_t rec_cbs = {
    .on_state = on_rec_state,
    .on_packet = on_rec_packet,
    .on_stats = on_rec_stats,
    .on_rebound = on_rec_rebound,
    .on_end = on_rec_end,
};

/* The first start on this host: enable, or --attach KEY. */
static void start_recording(fleet_host_t *h) {
  const record_opts_t *o = h->f->o;
  tg_recording_opts_t ro = {
      .config = tg_buf_begin(&h->f->cfg),
      .config_len = tg_buf_size(&h->f->cfg),
      .attach_key = o->attach,
      .resume_key = h->key_set ? h->key : NULL,
      /* Through a relay with the key set: exactly once across reconnects. */
      .replay = h->relay && h->key_set,
      .fd = -1,
      .stream = true,
      .first_read_ms =
          h->f->n > DEFER_READS_ABOVE_HOSTS && h->f->traced + 1 < h->f->n
              ? START_FIRST_READ_MS
              : 0,
      /* Not before the estimate: a merged trace needs it ahead of the
       * host's packets, and a first read would slow the burst's round
       * trips (each one bounds the estimate's error). */
      .hold_reads = h->clock_hold != CLOCK_FREE,
      .stats_period_ms = STATS_PERIOD_MS,
      .grace_ms = o->grace_ms,
      .stop_after_ms = o->attach && o->has_duration ? o->duration_ms : 0,
  };
  if (h->key_set && !h->key_shown) {
    /* Printed before the session exists: if we die, it can be taken back. */
    h->key_shown = true;
    fleet_show_key(h->f, h);
  }
  uint64_t now = now_ms(h);
  /* The held burst goes on when the fleet traces, or after this long. */
  if (h->clock_hold != CLOCK_FREE) h->clock_due_ms = now + START_FIRST_READ_MS;
  tg_link_up(&h->link, now, h->relay);
  int rv = tg_recording_start(h->rec, h->c, &ro);
  if (rv < 0) {
    fail(h, "cannot %s: %s", o->attach ? "attach" : "enable tracing",
         tg_strerror(rv));
    return;
  }
  if (h->stop_requested || o->stop) tg_recording_stop(h->rec);
}

static void start_or_not(fleet_host_t *h) {
  if (h->stop_requested) {
    /* Ctrl-C came before this host started: nothing to record. */
    fail(h, "stopped before tracing began");
    return;
  }
  start_recording(h);
}

static void on_names_state(tg_consumer_t *c, void *ctx, int status,
                           const char *msg, bool has_more,
                           const Perfetto__Protos__TracingServiceState *st) {
  (void)msg;
  (void)has_more;
  fleet_host_t *h = ctx;
  if (!reply_is_news(h, c, status)) return;
  /* Counted once the host is about to enable: the warnings, said when the
   * last host is counted, come just before it starts. */
  if (!status) fleet_names_record(h->f, h, st);
  prep_done(h, PREP_NAMES);
}

/* Every part is in: the merged trace gets the host's preamble (its first
 * clock estimate), then the session starts, or comes back (with its reads,
 * if a lost link had cut a held burst short: this connection made a whole
 * one). */
static void after_prep(fleet_host_t *h) {
  if (h->clock_hold == CLOCK_FREE) {
    int rv = write_preamble(h);
    if (rv < 0) {
      fail(h, "cannot write %s: %s", h->f->out, tg_strerror(rv));
      return;
    }
  }
  if (tg_link_reconnecting(&h->link)) {
    int rv = tg_recording_rebind(h->rec, h->c);
    if (rv < 0) {
      char why[128];
      snprintf(why, sizeof(why), "cannot attach: %s", tg_strerror(rv));
      drop_attempt(h, why);
    }
    return;
  }
  fleet_names_host(h->f, h, NULL);
  start_or_not(h);
}

static void prep_done(fleet_host_t *h, unsigned part) {
  if (!(h->prep_wait & part)) return;
  h->prep_wait &= ~part;
  /* Not on a connection that is closing: a part may count as answered
   * because its call could not go out. */
  if (h->prep_wait == 0 && h->c && tg_consumer_ready(h->c) && !is_failing(h))
    after_prep(h);
}

/* --- the host's one timer ------------------------------------------------------ */

/* What the link asks for at |now| (link.h), and the end of a held clock
 * burst's wait. */
static void on_timer(uv_timer_t *t) {
  fleet_host_t *h = t->data;
  uint64_t now = now_ms(h);
  if (h->clock_due_ms && now >= h->clock_due_ms) {
    h->clock_due_ms = 0;
    fleet_host_resume_clock(h);
  }
  /* Without heartbeats, a read or stats call unanswered is the sign. */
  uint64_t waiting =
      h->rec && h->c && tg_consumer_ready(h->c)
          ? tg_recording_waiting_ms(h->rec, now)
          : 0;
  switch (tg_link_due(&h->link, now, waiting)) {
    case TG_LINK_DUE_NONE:
      break;
    case TG_LINK_DUE_HEARTBEAT:
      send_heartbeat(h);
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
static void arm(fleet_host_t *h) {
  if (uv_is_closing((uv_handle_t *)&h->timer)) return;
  uint64_t at = tg_link_deadline(&h->link);
  if (h->clock_due_ms && h->clock_due_ms < at) at = h->clock_due_ms;
  if (at == TG_LINK_NEVER) {
    uv_timer_stop(&h->timer);
    return;
  }
  uint64_t now = now_ms(h);
  uv_timer_start(&h->timer, on_timer, at > now ? at - now : 0, 0);
}

void fleet_host_stop(fleet_host_t *h) {
  h->stop_requested = true;
  if (rec_active(h)) {
    tg_recording_stop(h->rec); /* unbound: once re-attached */
    return;
  }
  if (tg_link_starting(h->link.state))
    fail(h, "stopped before tracing began");
}

void fleet_host_abort(fleet_host_t *h) { fail(h, "aborted (Ctrl-C)"); }

const char *fleet_host_state(const fleet_host_t *h) {
  switch (h->link.state) {
    case TG_LINK_CONNECTING: return "connecting";
    case TG_LINK_PREPARING: return "preparing";
    case TG_LINK_UP:
      return h->rec ? tg_recording_state_name(tg_recording_state(h->rec))
                    : "tracing";
    case TG_LINK_DROPPING:
      return tg_link_reconnecting(&h->link) ? "reconnecting" : "link lost";
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

void fleet_host_fleet_started(fleet_host_t *h) {
  if (h->rec) tg_recording_read_first_now(h->rec);
}

bool fleet_host_tracing(const fleet_host_t *h) {
  return h->link.state == TG_LINK_UP && h->rec &&
         tg_recording_state(h->rec) == TG_REC_TRACING;
}

/* --- setup ---------------------------------------------------------------------------- */

static void make_key(fleet_host_t *h) {
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

void fleet_host_init(fleet_t *f, fleet_host_t *h, size_t index,
                     const cli_target_t *t) {
  memset(h, 0, sizeof(*h));
  h->f = f;
  h->index = index;
  h->machine_id = (uint32_t)index + 1;
  h->t = t;
  uv_timer_init(f->loop, &h->timer);
  h->timer.data = h;
  tg_link_timing_t tm = {.dead_link_ms = f->dead_link_ms,
                         .reconnect_ms = f->reconnect_ms};
  tg_link_init(&h->link, &tm, t->spec, on_link_state, h);
  tg_clock_sync_init(&h->clock, f->clock_sync_ms);
  h->rec = tg_recording_new(f->loop, &rec_cbs, h);
  /* --attach KEY: the session is the one the key names. */
  if (f->o->attach) snprintf(h->key, sizeof(h->key), "%s", f->o->attach);
  else make_key(h);
}

void fleet_host_start(fleet_host_t *h) {
  if (!h->rec) {
    fail(h, "out of memory");
    return;
  }
  connect_now(h);
}

void fleet_host_close(fleet_host_t *h) {
  uv_close((uv_handle_t *)&h->timer, NULL);
  tg_recording_free(h->rec);
  h->rec = NULL;
}

void fleet_host_free(fleet_host_t *h) {
  if (h->has_own) cli_output_discard(&h->own);
  h->has_own = false;
  free(h->path);
  h->path = NULL;
  fleet_seq_map_free(&h->seqs);
}
