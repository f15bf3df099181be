/* boost.c, a snapshot's perf boost, driven through coll_snap_begin() in
 * the test's process (coll_unit.h) against hosts whose producers are the
 * harness's raw ones: a boost fails alone where no producer offers
 * linux.perf, where it is not read by perf_boost_window + clone_timeout on
 * the daemon's clock, and when the snapshot is cut; a second snapshot
 * during a boost starts none on the same host; each time the ring's clone
 * is stored and the snapshot finishes. Outcomes are read from the store's
 * rows (the boost field, as JSON). The boost's samples themselves are
 * test_collector_boost's (a real tracegate-perf).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "coll_unit.h"
#include "collector/daemon/boost.h"
#include "collector/snapshot_id.h"

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

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(a_boost_where_no_producer_offers_linux_perf_fails_alone),
      FLEET_TEST(a_boost_not_read_by_window_plus_clone_timeout_fails),
      FLEET_TEST(a_cut_ends_the_boosts),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
