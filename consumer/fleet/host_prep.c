/* Preparing a host's connection (host.h): the relay's own service
 * (compression, host info, the resume key), a burst of clock samples, the
 * data source names; then the heartbeat, whose answers are clock samples
 * too. Its parts are asked at once and answered in any order (the relay's
 * own calls share one round trip, and the relay's service is bound next
 * to ConsumerPort); once all are in, host.c starts the session or gets
 * it back. A part that cannot be asked counts as answered.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "common/printable.h"
#include "consumer/fleet/host_internal.h"
#include "pb/tracegate/relay.pb-c.h"
#include "tracegate/error.h"

/* Samples of a clock burst (on every prepared connection). */
#define CLOCK_SYNC_SAMPLES 5

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

/* The client asks for at most this window: a fleet multiplies it (the
 * decompressor keeps a window per host). Up to ZSTD_BIG_FLEET hosts 1 MiB
 * each; beyond, 128 KiB each, which keeps 1000 hosts near 130 KiB of
 * memory per host in all (docs/operations.md: the ratio it costs). */
#define ZSTD_BIG_FLEET 64
#define ZSTD_WINDOW_LOG_SMALL_FLEET 20
#define ZSTD_WINDOW_LOG_BIG_FLEET 17

static int zstd_window_log(const tg_fleet_host_t *h) {
  return h->fleet->n > ZSTD_BIG_FLEET ? ZSTD_WINDOW_LOG_BIG_FLEET
                                      : ZSTD_WINDOW_LOG_SMALL_FLEET;
}

static void clock_next(tg_fleet_host_t *h);

static void prep_done(tg_fleet_host_t *h, unsigned part) {
  if (!(h->e->cx.prep_wait & part)) return;
  h->e->cx.prep_wait &= ~part;
  /* Not on a connection that is closing: a part may count as answered
   * because its call could not go out. */
  if (h->e->cx.prep_wait == 0 && h->e->cx.c && tg_consumer_ready(h->e->cx.c) &&
      h->e->link.state != TG_LINK_FAILING)
    tg__fleet_after_prep(h);
}

void tg__fleet_conn_reset(tg_fleet_host_t *h) {
  assert(!h->e->cx.c && !h->e->cx.conn); /* the last one is released */
  /* FREE: on_relay_bound decides whether the burst is held. */
  h->e->cx = (tg__fleet_conn_t){.prep_wait = PREP_ALL,
                                .clock_hold = TG_FLEET_CLOCK_FREE};
  tg_clock_sync_restart(&h->report.clock);
  h->report.conn_why[0] = 0;
}

/* --- the resume key ----------------------------------------------------------- */

static void on_key_set(tg_consumer_t *c, void *ctx, int status, const char *msg,
                       const uint8_t *reply, size_t len) {
  tg_fleet_host_t *h = ctx;
  if (!tg__fleet_reply_is_news(h, c, status)) return;
  h->e->cx.service_ended = false;
  if (status) {
    /* Tracing works without; only resuming after a link loss does not. */
    tg__fleet_notice(h, TG_FLEET_WARNING, TG_N_FLEET_KEY_REFUSED,
                     "the relay refused the resume key "
                     "(%s): a lost link will end this host's recording", msg);
    h->e->cx.key_set = false;
    prep_done(h, PREP_KEY);
    return;
  }
  h->e->cx.key_set = true;
  /* An older relay answers with nothing: the flag is then unknown (false),
   * and a refused Attach is tried again until the deadline. */
  Perfetto__Protos__SetSessionKeyResponse *r =
      perfetto__protos__set_session_key_response__unpack(
          NULL, len, reply ? reply : (const uint8_t *)"");
  if (r) {
    h->e->cx.service_ended = r->has_ended_with_service && r->ended_with_service;
    perfetto__protos__set_session_key_response__free_unpacked(r, NULL);
  }
  prep_done(h, PREP_KEY);
}

static void set_key(tg_fleet_host_t *h) {
  Perfetto__Protos__SetSessionKeyRequest r =
      PERFETTO__PROTOS__SET_SESSION_KEY_REQUEST__INIT;
  r.key = h->key;
  uint8_t buf[TG_RELAY_SESSION_KEY_MAX + 16];
  if (perfetto__protos__set_session_key_request__get_packed_size(&r) >
      sizeof(buf)) {
    h->e->cx.key_set = false; /* the owner bounds an attach key: not reached */
    prep_done(h, PREP_KEY);
    return;
  }
  size_t n = perfetto__protos__set_session_key_request__pack(&r, buf);
  int rv = tg_consumer_call(h->e->cx.c, TG_FLEET_RELAY_SERVICE, "SetSessionKey",
                            buf, n, on_key_set, h);
  if (rv < 0) {
    h->e->cx.key_set = false;
    prep_done(h, PREP_KEY);
  }
}

/* --- clocks and the heartbeat ---------------------------------------------------- */

/* Fills |s|'s host clocks from a ClockSyncResponse; false if it has none. */
static bool clock_parse(tg_clock_sample_t *s, const uint8_t *reply,
                        size_t len) {
  Perfetto__Protos__ClockSyncResponse *r =
      perfetto__protos__clock_sync_response__unpack(
          NULL, len, reply ? reply : (const uint8_t *)"");
  bool ok = r && r->has_boottime_ns && r->has_monotonic_ns &&
            r->has_realtime_ns;
  if (ok) {
    s->remote[TG_CLK_BOOTTIME] = r->boottime_ns;
    s->remote[TG_CLK_MONOTONIC] = r->monotonic_ns;
    s->remote[TG_CLK_REALTIME] = r->realtime_ns;
  }
  if (r) perfetto__protos__clock_sync_response__free_unpacked(r, NULL);
  return ok;
}

/* The burst or period is over: its best sample is the estimate from now
 * on, told to the owner once the host is described (the description
 * carries the first). Returns 0 or the owner's write error. */
static int clock_settle(tg_fleet_host_t *h) {
  if (!tg_clock_sync_settle(&h->report.clock, tg__fleet_now(h))) return 0;
  if (!h->e->described) return 0;
  return h->fleet->cbs->on_clock_estimate(h);
}

int tg__fleet_describe(tg_fleet_host_t *h) {
  if (h->e->described) return 0;
  h->e->described = true;
  return h->fleet->cbs->on_described(h);
}

static void on_heartbeat(tg_consumer_t *c, void *ctx, int status,
                         const char *msg, const uint8_t *reply, size_t len) {
  (void)msg;
  tg_fleet_host_t *h = ctx;
  if (h->e->cx.c != c) return;
  tg_link_heartbeat_done(&h->e->link);
  if (!tg__fleet_reply_is_news(h, c, status)) return;
  /* Any answer, even a refusal, says the link works. */
  uint64_t now = tg__fleet_now(h);
  tg_link_heard(&h->e->link, now);
  if (status) return;
  tg_clock_read(h->e->cx.hb_sample.after);
  if (clock_parse(&h->e->cx.hb_sample, reply, len))
    tg_clock_sync_keep(&h->report.clock, &h->e->cx.hb_sample);
  /* A held burst settles at its own end (clock_next). */
  if (h->e->cx.clock_hold != TG_FLEET_CLOCK_FREE ||
      !tg_clock_sync_due(&h->report.clock, now))
    return;
  int rv = clock_settle(h);
  if (rv < 0) tg__fleet_fail_write(h, rv);
}

void tg__fleet_send_heartbeat(tg_fleet_host_t *h) {
  if (!h->e->cx.c || !tg_consumer_ready(h->e->cx.c)) return;
  tg_clock_read(h->e->cx.hb_sample.before);
  if (tg_consumer_call(h->e->cx.c, TG_FLEET_RELAY_SERVICE, "ClockSync", NULL, 0,
                       on_heartbeat, h) == 0)
    tg_link_heartbeat_sent(&h->e->link);
}

static void on_clock(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     const uint8_t *reply, size_t len) {
  tg_fleet_host_t *h = ctx;
  if (h->e->cx.c != c) return;
  tg_clock_read(h->e->cx.cur.after);
  if (status == TG_EPEER_CLOSED || status == -ECANCELED) return;
  if (status) {
    /* Recording works without; a merged trace just cannot align it. */
    tg__fleet_notice(h, TG_FLEET_WARNING, TG_N_FLEET_NO_CLOCK_SYNC,
                     "no clock sync (%s)", msg);
    h->e->cx.syncs = CLOCK_SYNC_SAMPLES;
    clock_next(h);
    return;
  }
  if (clock_parse(&h->e->cx.cur, reply, len))
    tg_clock_sync_keep(&h->report.clock, &h->e->cx.cur);
  h->e->cx.syncs++;
  clock_next(h);
}

/* A burst of samples on every prepared connection: after a reconnection
 * the host may be another boot, or its clock may have stepped. A held
 * burst lets the preparation go on after its first sample and goes on
 * from tg_fleet_host_resume_clock(). */
static void clock_next(tg_fleet_host_t *h) {
  if (h->e->cx.syncs >= CLOCK_SYNC_SAMPLES) {
    bool was_held = h->e->cx.clock_hold != TG_FLEET_CLOCK_FREE;
    h->e->cx.clock_hold = TG_FLEET_CLOCK_FREE;
    int rv = clock_settle(h);
    /* Done while preparing (a reconnection, say): after_prep describes. */
    if (rv == 0 && was_held && !(h->e->cx.prep_wait & PREP_CLOCK)) {
      rv = tg__fleet_describe(h);
      if (h->e->rec) tg_recording_release_reads(h->e->rec);
      h->fleet->hooks->burst_ended(h);
      if (h->fleet->cbs->on_burst_ended) h->fleet->cbs->on_burst_ended(h);
    }
    if (rv < 0) {
      tg__fleet_fail_write(h, rv);
      return;
    }
    prep_done(h, PREP_CLOCK);
    return;
  }
  if (h->e->cx.clock_hold == TG_FLEET_CLOCK_HELD && h->e->cx.syncs > 0) {
    prep_done(h, PREP_CLOCK);
    return;
  }
  tg_clock_read(h->e->cx.cur.before);
  int rv = tg_consumer_call(h->e->cx.c, TG_FLEET_RELAY_SERVICE, "ClockSync",
                            NULL, 0, on_clock, h);
  if (rv < 0) {
    h->e->cx.syncs = CLOCK_SYNC_SAMPLES;
    clock_next(h);
  }
}

/* The rest of a held burst, once the fleet traces or the host has waited
 * long enough, on the connection it started on (a reconnection makes a
 * whole burst of its own). */
bool tg_fleet_host_resume_clock(tg_fleet_host_t *h) {
  if (h->e->cx.clock_hold != TG_FLEET_CLOCK_HELD ||
      h->e->link.state != TG_LINK_UP || !h->e->cx.c ||
      !tg_consumer_ready(h->e->cx.c))
    return false;
  h->e->cx.clock_hold = TG_FLEET_CLOCK_RESUMED;
  h->e->cx.clock_due_ms = 0;
  clock_next(h);
  /* It may have ended at once (a call that could not go out). */
  return h->e->cx.clock_hold != TG_FLEET_CLOCK_FREE;
}

/* --- host info and compression ------------------------------------------------- */

/* Whether the relay now names another thing than |first| (what it said
 * the first time, kept in |cap| bytes): an exact comparison, where ""
 * on either side is unknown, never a change. */
static bool changed(const char *first, size_t cap, const char *now_untrusted) {
  char now[64];
  tg_printable(now, cap < sizeof(now) ? cap : sizeof(now), now_untrusted);
  return first[0] && now[0] && strcmp(now, first) != 0;
}

static void on_host_info(tg_consumer_t *c, void *ctx, int status,
                         const char *msg, const uint8_t *reply, size_t len) {
  tg_fleet_host_t *h = ctx;
  if (!tg__fleet_reply_is_news(h, c, status)) return;
  if (status) {
    if (!h->report.has_info)
      tg__fleet_notice(h, TG_FLEET_WARNING, TG_N_FLEET_NO_HOST_INFO,
                       "no host info (%s)", msg);
    prep_done(h, PREP_INFO);
    return;
  }
  Perfetto__Protos__RelayHostInfo *r =
      perfetto__protos__relay_host_info__unpack(
          NULL, len, reply ? reply : (const uint8_t *)"");
  if (r && !h->report.has_info) {
    h->report.has_info = true;
    tg_printable(h->report.hostname, sizeof(h->report.hostname), r->hostname);
    tg_printable(h->report.host_machine_id, sizeof(h->report.host_machine_id),
                 r->machine_id);
    tg_printable(h->report.kernel, sizeof(h->report.kernel), r->kernel);
    tg_printable(h->e->boot_id, sizeof(h->e->boot_id), r->boot_id);
    tg_printable(h->e->service_instance, sizeof(h->e->service_instance),
                 r->service_instance);
    h->report.num_cpus = r->has_num_cpus ? r->num_cpus : 0;
  } else if (r) {
    /* Asked again after a reconnection: the same boot, or a reboot; the
     * same tracing service, or a restarted one. */
    if (changed(h->e->boot_id, sizeof(h->e->boot_id), r->boot_id))
      h->e->rebooted = true;
    if (changed(h->e->service_instance, sizeof(h->e->service_instance),
                r->service_instance))
      h->e->service_restarted = true;
    /* Nothing listens on the service's socket: its sessions, ours among
     * them, went with it. The relay refuses ConsumerPort, so no re-attach
     * would come to say so: waiting for the reconnect deadline would only
     * delay the same end. */
    if (r->has_service_down && r->service_down) {
      perfetto__protos__relay_host_info__free_unpacked(r, NULL);
      tg__fleet_fail(h, TG_FLEET_FAIL_SESSION, "the session is gone: %s",
                     h->e->rebooted ? "the host rebooted (its boot id changed) "
                                      "and its tracing service is not running"
                                    : "the tracing service on the host is not "
                                      "running (it stopped, and its sessions "
                                      "with it)");
      return;
    }
  }
  if (r) perfetto__protos__relay_host_info__free_unpacked(r, NULL);
  prep_done(h, PREP_INFO);
}

static void on_compression(tg_consumer_t *c, void *ctx, int status,
                           const char *msg, const uint8_t *reply, size_t len) {
  tg_fleet_host_t *h = ctx;
  if (!tg__fleet_reply_is_news(h, c, status)) return;
  if (status) {
    /* The relay said no (its operator's --compress never, or an ask it
     * does not take): what it sends stays plain. */
    h->report.compression = TG_FLEET_COMP_REFUSED;
    if (!tg_link_reconnecting(&h->e->link))
      tg__fleet_notice(h, TG_FLEET_NOTE, TG_N_FLEET_PLAIN,
                       "the relay sends uncompressed (%s)", msg);
    prep_done(h, PREP_COMPRESSION);
    return;
  }
  Perfetto__Protos__SetCompressionResponse *r =
      perfetto__protos__set_compression_response__unpack(
          NULL, len, reply ? reply : (const uint8_t *)"");
  if (!r || !r->has_window_log || r->window_log > zstd_window_log(h)) {
    /* It did switch, to something this side cannot read. */
    if (r) perfetto__protos__set_compression_response__free_unpacked(r, NULL);
    tg__fleet_prep_failed(h, TG_EBAD_COMPRESSED,
                          "the relay's compression answer is garbled or "
                          "exceeds the window asked for");
    return;
  }
  /* This reply was the last plain frame: inflate from the next one on. */
  int rv = tg_zstd_transport_start_decompress(
      h->fleet->dialer.zstd(h->e->cx.conn), zstd_window_log(h));
  perfetto__protos__set_compression_response__free_unpacked(r, NULL);
  if (rv < 0) {
    tg__fleet_prep_failed(h, rv, "cannot start decompressing");
    return;
  }
  h->report.compression = TG_FLEET_COMP_ZSTD;
  prep_done(h, PREP_COMPRESSION);
}

/* Asks the relay to compress, before any bulk data flows. False when
 * nothing was asked (the answer is settled already). */
static bool ask_compression(tg_fleet_host_t *h) {
  int level = h->fleet->o.compress_level;
  if (!level) {
    h->report.compression = TG_FLEET_COMP_NOT_ASKED;
    return false;
  }
  Perfetto__Protos__SetCompressionRequest r =
      PERFETTO__PROTOS__SET_COMPRESSION_REQUEST__INIT;
  r.algorithm = "zstd";
  r.has_level = r.has_window_log = true;
  r.level = level;
  r.window_log = zstd_window_log(h);
  uint8_t buf[64];
  size_t n = perfetto__protos__set_compression_request__pack(&r, buf);
  int rv = tg_consumer_call(h->e->cx.c, TG_FLEET_RELAY_SERVICE,
                            "SetCompression", buf, n, on_compression, h);
  /* An older relay has no such method: it sends plain. */
  if (rv == TG_ENOT_SUPPORTED)
    h->report.compression = TG_FLEET_COMP_UNSUPPORTED;
  else if (rv < 0) h->report.compression = TG_FLEET_COMP_UNKNOWN;
  return rv == 0;
}

/* Once for the host's description, and again after each reconnection
 * (in the same flight: no round trip more) to tell a host that rebooted,
 * or a tracing service that was restarted, whose sessions are gone, from
 * a link that came back. */
static void ask_host_info(tg_fleet_host_t *h) {
  bool want = tg_link_reconnecting(&h->e->link)
                  ? h->e->boot_id[0] != 0 || h->e->service_instance[0] != 0
                  : !h->report.has_info;
  if (!want || tg_consumer_call(h->e->cx.c, TG_FLEET_RELAY_SERVICE,
                                "GetHostInfo", NULL, 0, on_host_info, h) < 0)
    prep_done(h, PREP_INFO);
}

/* --- binding ---------------------------------------------------------------------- */

/* Bound next to ConsumerPort, whose answer may come before or after. */
static void on_relay_bound(tg_consumer_t *c, void *ctx, int status,
                           const char *msg) {
  tg_fleet_host_t *h = ctx;
  if (h->e->cx.c != c) return;
  if (status == TG_EUNKNOWN_SERVICE) {
    if (!tg_link_reconnecting(&h->e->link))
      tg__fleet_notice(h, TG_FLEET_WARNING, TG_N_FLEET_NOT_A_RELAY,
                       "the peer does not offer "
                       TG_FLEET_RELAY_SERVICE " (not a tracegate-relay?): no "
                       "host info, no clock alignment, no resume after a link "
                       "loss");
    h->e->cx.relay = false;
    h->e->cx.key_set = false;
    h->report.compression = h->fleet->o.compress_level
                                ? TG_FLEET_COMP_UNSUPPORTED
                                : TG_FLEET_COMP_NOT_ASKED;
    h->e->cx.syncs = CLOCK_SYNC_SAMPLES;
    prep_done(h, PREP_RELAY | PREP_COMPRESSION | PREP_INFO | PREP_KEY);
    clock_next(h);
    return;
  }
  if (status) {
    tg__fleet_prep_failed(h, status, msg);
    return;
  }
  h->e->cx.relay = true;
  h->e->cx.clock_hold = !tg_link_reconnecting(&h->e->link) &&
                                !h->report.clock.estimates &&
                                h->fleet->n > TG_FLEET_DEFER_ABOVE_HOSTS
                            ? TG_FLEET_CLOCK_HELD
                            : TG_FLEET_CLOCK_FREE;
  tg_link_bound(&h->e->link);
  /* One flight, answered in this order: compression first, so that the
   * switch comes before the other answers; the first clock sample last. */
  if (!ask_compression(h)) prep_done(h, PREP_COMPRESSION);
  ask_host_info(h);
  set_key(h);
  clock_next(h);
  prep_done(h, PREP_RELAY);
}

void tg__fleet_prep_begin(tg_fleet_host_t *h) {
  tg_consumer_t *c = h->e->cx.c;
  int rv =
      tg_consumer_bind_service(c, TG_FLEET_RELAY_SERVICE, on_relay_bound, h);
  if (rv < 0) on_relay_bound(c, h, TG_EUNKNOWN_SERVICE, "");
}

static void on_names_state(tg_consumer_t *c, void *ctx, int status,
                           const char *msg, bool has_more,
                           const Perfetto__Protos__TracingServiceState *st) {
  (void)msg;
  (void)has_more;
  tg_fleet_host_t *h = ctx;
  if (!tg__fleet_reply_is_news(h, c, status)) return;
  /* Settled once the host is about to enable (after_prep): an owner that
   * warns once every host is settled warns just before the last starts. */
  if (!status && h->fleet->cbs->on_service_state)
    h->fleet->cbs->on_service_state(h, st);
  prep_done(h, PREP_NAMES);
}

void tg__fleet_on_ready(tg_consumer_t *c, int status, const char *msg) {
  (void)msg;
  tg_fleet_host_t *h = tg_consumer_data(c);
  if (status || h->e->cx.c != c) return; /* on_close follows */
  h->e->ever_connected = h->e->cx.bound = true;
  tg_link_bound(&h->e->link);
  /* The host's registered data sources, before enabling. A failed query
   * (a role without QueryServiceState) only leaves the check out. */
  bool ask = h->fleet->o.check_names &&
             (h->fleet->o.check_names_always ||
              (!tg_link_reconnecting(&h->e->link) && !h->e->names_settled));
  if (ask &&
      tg_consumer_query_service_state(c, false, true, on_names_state, h) == 0) {
    prep_done(h, PREP_CONSUMER);
    return;
  }
  prep_done(h, PREP_CONSUMER | PREP_NAMES);
}
