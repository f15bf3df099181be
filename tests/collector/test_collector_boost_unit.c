/* boost.c, a snapshot's perf boost, driven through coll_snap_begin() in
 * the test's process (coll_unit.h) against hosts whose producers are the
 * harness's raw ones: a boost fails alone where no producer offers
 * linux.perf, where it is not read by perf_boost_window + clone_timeout on
 * the daemon's clock, when the snapshot is cut, where the host's service
 * refuses its session (at its session limit), where the host's relay dies
 * during its window, and where the host sends more than its cap (a
 * hostile relay in front of it); a second snapshot during a boost starts
 * none on the same host; a boost over the host's or the fleet's budget
 * starts none, on the daemon's clock; each time the ring's clone is
 * stored and the snapshot finishes. Outcomes are read from the store's rows (the boost
 * field, as JSON). The boost's samples themselves are
 * test_collector_boost's (a real tracegate-perf).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "coll_unit.h"
#include "collector/daemon/boost.h"
#include "collector/catalog/snapshot_id.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "service/service.h"
#include "tracegate/pb_wire.h"

#define PERF_DS                                                           \
  "data_sources { config { name: \"linux.perf\" perf_event_config { "   \
  "timebase { frequency: 19 } } } }\n"

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("collboost");
}

typedef struct {
  int calls;
  uint64_t id;
} done_t;

static void on_done(coll_t *c, coll_snap_t *s, void *ctx) {
  (void)c;
  done_t *d = ctx;
  d->calls++;
  d->id = coll_snap_id(s);
}

static uint64_t begin(coll_unit_t *u, done_t *d) {
  coll_trigger_req_t r = {.trigger = "operator", .reason = "unit",
                          .origin = "", .group = "all"};
  coll_snap_t *s;
  uint64_t id = 0;
  assert_int_equal(coll_snap_begin(&u->c, &r, on_done, d, &s, &id), 0);
  return id;
}

static void up(coll_unit_t *u, size_t n, const char *extra) {
  u->flight_extra = PERF_DS;
  coll_unit_hosts(u, n);
  coll_unit_open(u, n, extra, NULL, true);
  for (size_t i = 0; i < n; i++)
    coll_unit_wait_host(u, u->h[i].spec, COLL_HOST_TRACING, true);
}

/* Host |i|'s row of snapshot |id|: its outcome, and its boost field
 * parsed (the caller's: json_decref), which must be an object. */
static json_t *boost_of(coll_unit_t *u, uint64_t id, size_t i,
                        tg_coll_host_outcome_t *outcome) {
  tg_coll_snapshot_t row;
  tg_coll_host_t hosts[COLL_UNIT_HOSTS_MAX];
  size_t n;
  coll_unit_row(u, id, &row, hosts, COLL_UNIT_HOSTS_MAX, &n);
  for (size_t k = 0; k < n; k++) {
    if (strcmp(hosts[k].host, u->h[i].spec)) continue;
    *outcome = hosts[k].outcome;
    json_error_t err;
    json_t *b = json_loads(hosts[k].boost, 0, &err);
    if (!b || !json_is_object(b))
      fail_msg("host %s: boost '%s' is no object", hosts[k].host,
               hosts[k].boost);
    return b;
  }
  fail_msg("host %s not in snapshot %" PRIu64, u->h[i].spec, id);
  return NULL;
}

static const char *str(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  if (!s) fail_msg("no string '%s'", key);
  return s;
}

/* The hosts' service offers no linux.perf (their producer registers
 * fleet.ds only): every boost fails not_offered, as the service's state
 * says, at once rather than after its window; the clones are stored
 * whole. */
static void a_boost_where_no_producer_offers_linux_perf_fails_alone(
    void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, 2, "perf_boost_window = 60s\n");
  done_t d = {0};
  uint64_t id = begin(&u, &d);
  /* Done within the harness's wait, far less than the window. */
  coll_unit_flush_until_idle(&u);
  assert_int_equal(d.calls, 1);
  for (size_t i = 0; i < 2; i++) {
    tg_coll_host_outcome_t o;
    json_t *b = boost_of(&u, id, i, &o);
    assert_int_equal(o, TG_COLL_HOST_OK);
    assert_string_equal(str(b, "state"), "failed");
    assert_string_equal(str(b, "reason"), "not_offered");
    assert_string_equal(str(b, "code"), "TG-5090");
    assert_non_null(strstr(str(b, "error"), "linux.perf"));
    assert_int_equal(json_integer_value(json_object_get(b, "samples")), 0);
    json_decref(b);
  }
  /* Released: the next snapshot boosts again. */
  for (size_t i = 0; i < 2; i++)
    assert_null(coll_unit_host(&u, u.h[i].spec)->boosting);
  assert_int_equal(u.c.counts.perf_boosts[COLL_BOOST_FAILED], 2);
  assert_int_equal(u.c.counts.perf_boosts[COLL_BOOST_SHARP], 0);
  coll_unit_close(&u);
}

/* Host 0's producer now offers linux.perf: its boost session runs its
 * window (10 s of the service's real time). The daemon's clock passes the
 * trigger's perf_boost_window + clone_timeout first: the boost fails
 * timeout, its connection closed, and the snapshot is stored with the
 * clones; a second snapshot begun during the boost started none on host
 * 0 ("held", naming the first). */
static void a_boost_not_read_by_window_plus_clone_timeout_fails(
    void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, 1, "perf_boost_window = 10s\nclone_timeout = 20s\n");
  fleet_host_drop_producer(&u.h[0]);
  fleet_host_connect_producer(&u.h[0], "perf.producer", "linux.perf", 4, 64,
                              false);
  done_t d = {0}, d2 = {0};
  uint64_t id = begin(&u, &d);
  uint64_t id2 = begin(&u, &d2);
  /* The second, without a boost, is stored once its clone is. */
  coll_unit_run_for(&u, 300);
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  while (!d2.calls && tg_test_now_ms() < end) coll_unit_run_for(&u, 50);
  assert_int_equal(d2.calls, 1);
  assert_int_equal(d.calls, 0); /* the first waits for its boost */
  coll_host_t *h = coll_unit_host(&u, u.h[0].spec);
  assert_non_null(h->boosting);
  u.now_ms += 30000; /* window + clone_timeout: the deadline */
  coll_unit_wait_idle(&u);
  assert_int_equal(d.calls, 1);
  assert_null(h->boosting);
  tg_coll_host_outcome_t o;
  json_t *b = boost_of(&u, id, 0, &o);
  assert_int_equal(o, TG_COLL_HOST_OK);
  assert_string_equal(str(b, "state"), "failed");
  assert_string_equal(str(b, "reason"), "timeout");
  json_decref(b);
  b = boost_of(&u, id2, 0, &o);
  assert_int_equal(o, TG_COLL_HOST_OK);
  assert_string_equal(str(b, "state"), "held");
  char first[TG_COLL_ID_STRLEN];
  tg_coll_id_format(id, first);
  assert_string_equal(str(b, "held_by"), first);
  json_decref(b);
  assert_int_equal(u.c.counts.perf_boosts[COLL_BOOST_HELD], 1);
  assert_int_equal(u.c.counts.perf_boosts[COLL_BOOST_FAILED], 1);
  coll_unit_close(&u);
}

/* A cut (the collector stopping) ends the boosts with the clones: the
 * snapshot is stored, each boost failed "cut". */
static void a_cut_ends_the_boosts(void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, 2, "perf_boost_window = 60s\n");
  done_t d = {0};
  uint64_t id = begin(&u, &d);
  coll_snap_cut(u.c.running[0]);
  coll_unit_wait_idle(&u);
  assert_int_equal(d.calls, 1);
  for (size_t i = 0; i < 2; i++) {
    tg_coll_host_outcome_t o;
    json_t *b = boost_of(&u, id, i, &o);
    assert_string_equal(str(b, "state"), "failed");
    assert_string_equal(str(b, "reason"), "cut");
    json_decref(b);
  }
  coll_unit_close(&u);
}

/* Host 0's producer offers linux.perf (so that no not_offered comes
 * first); its first start (the ring's) seen. */
static void perf_producer(coll_unit_t *u) {
  fleet_host_drop_producer(&u->h[0]);
  fleet_host_connect_producer(&u->h[0], "perf.producer", "linux.perf", 4, 64,
                              false);
  assert_int_equal(raw_producer_wait_started(&u->h[0].p, FLEET_WAIT_MS), 0);
}

/* Host 0's row of snapshot |id| as stored with its ring's clone: the
 * snapshot complete, the host ok with bytes of its own; its boost failed
 * for |reason| with the notice's code. */
static void stored_with_the_clone_boost_failed(coll_unit_t *u, uint64_t id,
                                               const char *reason) {
  tg_coll_snapshot_t row;
  tg_coll_host_t hosts[COLL_UNIT_HOSTS_MAX];
  size_t n;
  coll_unit_row(u, id, &row, hosts, COLL_UNIT_HOSTS_MAX, &n);
  assert_int_equal(row.state, TG_COLL_COMPLETE);
  assert_int_equal(row.n_hosts_failed, 0);
  assert_int_equal(n, 1);
  assert_true(hosts[0].bytes > 0);
  tg_coll_host_outcome_t o;
  json_t *b = boost_of(u, id, 0, &o);
  assert_int_equal(o, TG_COLL_HOST_OK);
  assert_string_equal(str(b, "state"), "failed");
  assert_string_equal(str(b, "reason"), reason);
  assert_string_equal(str(b, "code"), "TG-5090");
  json_decref(b);
  assert_null(coll_unit_host(u, u->h[0].spec)->boosting);
  assert_int_equal(u->c.counts.perf_boosts[COLL_BOOST_FAILED], 1);
  assert_int_equal(u->c.counts.perf_boosts[COLL_BOOST_SHARP], 0);
}

/* Sessions on host |h|'s service, as it counts them (straight on its
 * socket, not through the relay's scope). */
static int32_t service_sessions(fleet_host_t *h) {
  raw_consumer_t q;
  assert_int_equal(raw_consumer_connect(&q, &h->ts), 0);
  Perfetto__Protos__QueryServiceStateResponse *r =
      raw_consumer_query(&q, FLEET_WAIT_MS);
  assert_non_null(r);
  assert_non_null(r->service_state);
  int32_t n = r->service_state->num_sessions;
  perfetto__protos__query_service_state_response__free_unpacked(r, NULL);
  raw_consumer_close(&q);
  return n;
}

/* Host |h|'s service filled to TG_SERVICE_MAX_SESSIONS: sessions of a
 * small buffer and no data source, each detached (Detach) so that its
 * consumer connection closes and the service's consumer limit is not
 * reached too. */
static void fill_sessions(fleet_host_t *h) {
  int32_t n = service_sessions(h);
  assert_true(n > 0 && n < TG_SERVICE_MAX_SESSIONS);
  Perfetto__Protos__TraceConfig__BufferConfig buf =
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__INIT;
  Perfetto__Protos__TraceConfig__BufferConfig *bufs[1] = {&buf};
  buf.has_size_kb = true;
  buf.size_kb = 4;
  Perfetto__Protos__TraceConfig tc = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  tc.n_buffers = 1;
  tc.buffers = bufs;
  for (int32_t i = n; i < TG_SERVICE_MAX_SESSIONS; i++) {
    raw_consumer_t f;
    assert_int_equal(raw_consumer_connect(&f, &h->ts), 0);
    assert_int_equal(raw_consumer_enable(&f, &tc, -1), 0);
    char key[32];
    snprintf(key, sizeof(key), "filler-%d", (int)i);
    Perfetto__Protos__DetachRequest det = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
    det.key = key;
    assert_int_equal(
        raw_call(&f.conn, "Detach", &det.base, -1, NULL, NULL, FLEET_WAIT_MS),
        1);
    raw_consumer_close(&f);
  }
  assert_int_equal(service_sessions(h), TG_SERVICE_MAX_SESSIONS);
}

/* Host 0's service runs as many sessions as it takes: it clones the ring
 * (a clone is no new session to refuse) but refuses the boost's
 * EnableTracing. The boost fails refused, at once; the clone is stored. */
static void a_boost_the_service_refuses_fails_refused(void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, 1, "perf_boost_window = 60s\n");
  perf_producer(&u);
  fill_sessions(&u.h[0]);
  done_t d = {0};
  uint64_t id = begin(&u, &d);
  /* Done within the harness's wait, far less than the window. */
  coll_unit_flush_until_idle(&u);
  assert_int_equal(d.calls, 1);
  stored_with_the_clone_boost_failed(&u, id, "refused");
  coll_unit_close(&u);
}

/* Host 0's boost runs (its producer set up for it) and its ring's clone
 * is read (the standby connection given back): answers the flushes the
 * host's producer is asked for meanwhile. */
static bool boost_running_clone_read(coll_unit_t *u, void *arg) {
  (void)arg;
  raw_producer_t *p = &u->h[0].p;
  uint64_t f = raw_producer_wait_flush(p, p->last_flush_id, 5);
  if (f) assert_int_equal(raw_producer_commit(p, NULL, NULL, 0, f), 0);
  coll_host_t *h = coll_unit_host(u, u->h[0].spec);
  return p->setups >= 2 && h->boosting && h->sb.st == COLL_SB_READY;
}

/* Host 0's relay is killed during the boost's window, after the ring's
 * clone was read: the boost's connection drops before its read. The
 * boost fails lost; the snapshot is stored with the clone. */
static void a_boost_whose_relay_dies_in_its_window_fails_lost(void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, 1, "perf_boost_window = 60s\n");
  perf_producer(&u);
  assert_int_equal(u.h[0].p.setups, 1); /* the ring's */
  done_t d = {0};
  uint64_t id = begin(&u, &d);
  /* The clone was asked on the standby connection at the trigger. */
  assert_int_equal(coll_unit_host(&u, u.h[0].spec)->sb.st, COLL_SB_BUSY);
  coll_unit_wait(&u, boost_running_clone_read, NULL);
  assert_int_equal(d.calls, 0); /* the snapshot waits for its boost */
  fleet_relay_stop(&u.h[0].relay, SIGKILL);
  coll_unit_wait_idle(&u);
  assert_int_equal(d.calls, 1);
  stored_with_the_clone_boost_failed(&u, id, "lost");
  coll_unit_close(&u);
}

/* The boost's cap: 4 times perf_boost_buffer and 1 MiB (boost.c). */
#define TINY_BOOST_BUFFER (64u * 1024)
#define TINY_BOOST_CAP (4u * TINY_BOOST_BUFFER + (1u << 20))
/* What the hostile host adds to each read: more than the boost's cap,
 * far less than the clone's (4 times the ring's 1 MiB and 1 MiB). */
#define FORGED_PAD (32u * 1024)
#define FORGED_PKTS (TINY_BOOST_CAP / FORGED_PAD + 4)

/* TracePacket { trusted_packet_sequence_id: 1, for_testing { str: "boost:"
 * and 'x's } } of about FORGED_PAD bytes, as a host's service could write
 * (the hostile relay's forged ones are alike); the caller frees it. */
static uint8_t *forged_packet(size_t *len) {
  uint8_t *p = malloc(FORGED_PAD + 32);
  assert_non_null(p);
  uint8_t *e = tg_pb_write_varint(p, TG_PB_TAG(10, TG_PB_WT_VARINT));
  e = tg_pb_write_varint(e, 1);
  e = tg_pb_write_varint(e, TG_PB_TAG(900, TG_PB_WT_LEN));
  e = tg_pb_write_varint(e, 1 + tg_pb_varint_size(FORGED_PAD) + FORGED_PAD);
  e = tg_pb_write_varint(e, TG_PB_TAG(1, TG_PB_WT_LEN));
  e = tg_pb_write_varint(e, FORGED_PAD);
  memset(e, 'x', FORGED_PAD);
  memcpy(e, "boost:", 6);
  *len = (size_t)(e + FORGED_PAD - p);
  return p;
}

/* Host 0 behind a hostile relay that ends every read with more than the
 * boost's cap (perf_boost_buffer at its least, 64 KiB): the ring's clone
 * takes them within its own cap, the boost's read passes its cap and
 * fails too_big, before the bytes past it reach the file; the snapshot
 * is stored with the clone. */
static void a_boost_past_its_cap_fails_too_big(void **state) {
  (void)state;
  coll_unit_t u = {0};
  u.flight_extra = PERF_DS;
  coll_unit_hosts(&u, 1);
  u.hostile = fleet_hostile_start(&u.h[0], TG_HOSTILE_INJECT);
  const uint8_t *pkts[FORGED_PKTS];
  size_t lens[FORGED_PKTS];
  size_t len;
  uint8_t *pkt = forged_packet(&len);
  for (size_t i = 0; i < FORGED_PKTS; i++) {
    pkts[i] = pkt;
    lens[i] = len;
  }
  assert_true(FORGED_PKTS * len > TINY_BOOST_CAP);
  assert_int_equal(
      tg_hostile_relay_set_packets(u.hostile, pkts, lens, FORGED_PKTS), 0);
  free(pkt);
  /* Uncompressed, so that the hostile relay can read every reply. */
  coll_unit_open(&u, 1,
                 "compress_level = 0\nperf_boost_window = 1s\n"
                 "perf_boost_buffer = 64K\n",
                 NULL, true);
  coll_unit_wait_host(&u, u.h[0].spec, COLL_HOST_TRACING, true);
  assert_int_equal(u.c.cfg.perf_boost_buffer, TINY_BOOST_BUFFER);
  perf_producer(&u);
  done_t d = {0};
  uint64_t id = begin(&u, &d);
  coll_unit_flush_until_idle(&u);
  assert_int_equal(d.calls, 1);
  stored_with_the_clone_boost_failed(&u, id, "too_big");
  tg_coll_host_outcome_t o;
  json_t *b = boost_of(&u, id, 0, &o);
  /* It stopped taking packets at its cap, well before the set's end. */
  assert_true(json_integer_value(json_object_get(b, "bytes")) <
              (json_int_t)(FORGED_PKTS * len));
  json_decref(b);
  tg_hostile_stats_t st;
  tg_hostile_relay_stats(u.hostile, &st);
  /* The clone's read took the whole set (counted before its read's last
   * reply); the boost's was cut by the collector, counted once the
   * relay's writes end. */
  assert_true(st.injected >= FORGED_PKTS);
  coll_unit_close(&u);
}

/* Host |i|'s budget as /api/v1/hosts shows it: field |key|. */
static json_int_t budget_of(coll_unit_t *u, size_t i, const char *key) {
  json_t *o = coll_boost_host_json(&u->c, coll_unit_host(u, u->h[i].spec));
  assert_true(json_is_object(o));
  json_t *v = json_object_get(o, key);
  if (!json_is_integer(v)) fail_msg("host budget: no integer '%s'", key);
  json_int_t n = json_integer_value(v);
  json_decref(o);
  return n;
}

/* Host |i|'s boost in snapshot |id| was refused by budget |which|: the
 * clone stored whole beside it; used, limit and refill as given. */
static void refused_by(coll_unit_t *u, uint64_t id, size_t i,
                       const char *which, json_int_t used, json_int_t limit,
                       json_int_t refill_in) {
  tg_coll_host_outcome_t o;
  json_t *b = boost_of(u, id, i, &o);
  assert_int_equal(o, TG_COLL_HOST_OK);
  assert_string_equal(str(b, "state"), "budget");
  assert_string_equal(str(b, "budget"), which);
  assert_string_equal(str(b, "code"), "TG-5091");
  assert_int_equal(json_integer_value(json_object_get(b, "used_ms")), used);
  assert_int_equal(json_integer_value(json_object_get(b, "limit_ms")), limit);
  assert_int_equal(json_integer_value(json_object_get(b, "refill_in_ms")),
                   refill_in);
  json_decref(b);
}

/* The host's budget on the daemon's clock: 2% of a minute (1.2 s) holds
 * one boost of 1 s. Host 0's first boost runs its window (the daemon's
 * clock moved by it) and is charged 1 s; a second snapshot a second
 * later clones the ring whole and starts no boost ("budget": the host's,
 * 1000 of 1200 ms used; room again once 800 ms of it left the window,
 * 58.8 s after this trigger); /api/v1/hosts' view and the counters say
 * the same. At that refill, a third snapshot boosts again. */
static void a_boost_over_the_host_budget_is_refused_the_clone_stored(
    void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, 1, "perf_boost_window = 1s\nperf_boost_budget_window = 1m\n"
            "perf_boost_host_percent = 2\nperf_boost_fleet_percent = 100\n");
  perf_producer(&u);
  int64_t t0 = u.now_ms;
  done_t d = {0};
  uint64_t id = begin(&u, &d);
  u.now_ms += 1000; /* its window, on the daemon's clock */
  coll_unit_flush_until_idle(&u);
  assert_int_equal(d.calls, 1);
  tg_coll_host_outcome_t o;
  json_t *b = boost_of(&u, id, 0, &o);
  assert_string_not_equal(str(b, "state"), "budget");
  json_decref(b);
  assert_int_equal(budget_of(&u, 0, "used_ms"), 1000);
  assert_int_equal(budget_of(&u, 0, "boosted_ms"), 1000);
  assert_int_equal(budget_of(&u, 0, "refill_in_ms"), 59800);

  u.now_ms = t0 + 2000;
  done_t d2 = {0};
  uint64_t id2 = begin(&u, &d2);
  coll_unit_flush_until_idle(&u);
  assert_int_equal(d2.calls, 1);
  tg_coll_snapshot_t row;
  tg_coll_host_t hosts[COLL_UNIT_HOSTS_MAX];
  size_t n;
  coll_unit_row(&u, id2, &row, hosts, COLL_UNIT_HOSTS_MAX, &n);
  assert_int_equal(row.state, TG_COLL_COMPLETE);
  assert_true(hosts[0].bytes > 0);
  refused_by(&u, id2, 0, "host", 1000, 1200, 58800);
  assert_int_equal(budget_of(&u, 0, "refused"), 1);
  assert_int_equal(budget_of(&u, 0, "limit_ms"), 1200);
  assert_int_equal(budget_of(&u, 0, "window_ms"), 60000);
  assert_int_equal(u.c.counts.perf_boosts[COLL_BOOST_BUDGET], 1);
  assert_int_equal(u.c.counts.perf_boost_refused[COLL_BOOST_BUDGET_HOST], 1);
  assert_int_equal(u.c.counts.perf_boost_refused[COLL_BOOST_BUDGET_FLEET], 0);
  assert_int_equal(u.c.counts.perf_boost_ms, 1000);
  coll_boost_fleet_t f;
  coll_boost_fleet(&u.c, &f);
  assert_int_equal(f.used_ms, 1000);
  assert_int_equal(f.limit_ms, 60000);
  assert_int_equal(f.hosts_full, 1);

  u.now_ms = t0 + 60800;
  assert_int_equal(budget_of(&u, 0, "refill_in_ms"), 0);
  done_t d3 = {0};
  uint64_t id3 = begin(&u, &d3);
  u.now_ms += 1000;
  coll_unit_flush_until_idle(&u);
  b = boost_of(&u, id3, 0, &o);
  assert_string_not_equal(str(b, "state"), "budget");
  json_decref(b);
  assert_int_equal(budget_of(&u, 0, "boosted_ms"), 2000);
  assert_int_equal(budget_of(&u, 0, "refused"), 1);
  coll_unit_close(&u);
}

/* The fleet's budget: 2% of a minute each of two hosts, 2.4 s together,
 * each host's own 100%. Both boosts of a first snapshot (failing
 * not_offered once the daemon's clock passed their 1 s window) are
 * charged 1 s each; a second snapshot's boosts would take the hosts past
 * 2.4 s: both refused by the fleet's budget, each with room of its own.
 * Room again once 600 ms left the window: both first boosts leave it
 * together, so 300 ms past them, 58.3 s after the second trigger. */
static void boosts_over_the_fleet_budget_are_refused(void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, 2, "perf_boost_window = 1s\nperf_boost_budget_window = 1m\n"
            "perf_boost_host_percent = 100\nperf_boost_fleet_percent = 2\n");
  int64_t t0 = u.now_ms;
  done_t d = {0};
  uint64_t id = begin(&u, &d);
  u.now_ms += 1000;
  coll_unit_flush_until_idle(&u);
  for (size_t i = 0; i < 2; i++) {
    tg_coll_host_outcome_t o;
    json_t *b = boost_of(&u, id, i, &o);
    assert_string_equal(str(b, "state"), "failed");
    json_decref(b);
    assert_int_equal(budget_of(&u, i, "used_ms"), 1000);
  }
  u.now_ms = t0 + 2000;
  done_t d2 = {0};
  uint64_t id2 = begin(&u, &d2);
  coll_unit_flush_until_idle(&u);
  assert_int_equal(d2.calls, 1);
  for (size_t i = 0; i < 2; i++) {
    refused_by(&u, id2, i, "fleet", 2000, 2400, 58300);
    assert_int_equal(budget_of(&u, i, "refill_in_ms"), 0); /* its own */
  }
  assert_int_equal(u.c.counts.perf_boost_refused[COLL_BOOST_BUDGET_FLEET], 2);
  coll_boost_fleet_t f;
  coll_boost_fleet(&u.c, &f);
  assert_int_equal(f.used_ms, 2000);
  assert_int_equal(f.limit_ms, 2400);
  assert_int_equal(f.hosts_full, 0);
  coll_unit_close(&u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(a_boost_where_no_producer_offers_linux_perf_fails_alone),
      FLEET_TEST(a_boost_not_read_by_window_plus_clone_timeout_fails),
      FLEET_TEST(a_cut_ends_the_boosts),
      FLEET_TEST(a_boost_the_service_refuses_fails_refused),
      FLEET_TEST(a_boost_whose_relay_dies_in_its_window_fails_lost),
      FLEET_TEST(a_boost_past_its_cap_fails_too_big),
      FLEET_TEST(a_boost_over_the_host_budget_is_refused_the_clone_stored),
      FLEET_TEST(boosts_over_the_fleet_budget_are_refused),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
