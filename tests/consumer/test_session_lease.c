/* tracegated's disconnect leases (TracegateConsumer.SetDisconnectLease,
 * service/consumer_lease.h): a session whose consumer connection dies
 * without Detach is detached under the lease's key and kept for the lease;
 * Attach takes it back with everything written meanwhile; a lease that
 * runs out frees it; a lease longer than the service allows is cut. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pb/tracegate/consumer_lease.pb-c.h"
#include "test_proc.h"
#include "test_service.h"

#define WAIT_MS 5000

static void start_session(test_service_t *ts, raw_producer_t *p,
                          raw_consumer_t *c, simple_cfg_t *sc,
                          const char *ds) {
  assert_int_equal(raw_producer_connect(p, ts, "lease.producer", ds, 4, 64,
                                        false), 0);
  assert_int_equal(raw_consumer_connect(c, ts), 0);
  simple_cfg_init(sc, 256, 1, ds);
  assert_int_equal(raw_consumer_enable(c, &sc->cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(p, WAIT_MS), 0);
}

/* SetDisconnectLease on |c|'s connection (which stays bound to
 * ConsumerPort for its other calls). Returns the lease granted. */
static uint64_t set_lease(raw_consumer_t *c, const char *key, uint64_t ms) {
  uint32_t consumer_port = c->conn.service_id;
  assert_int_equal(raw_bind(&c->conn, "TracegateConsumer"), 0);
  Perfetto__Protos__SetDisconnectLeaseRequest req =
      PERFETTO__PROTOS__SET_DISCONNECT_LEASE_REQUEST__INIT;
  req.key = (char *)key;
  req.has_lease_ms = 1;
  req.lease_ms = ms;
  ProtobufCMessage *m = NULL;
  assert_int_equal(
      raw_call(&c->conn, "SetDisconnectLease", &req.base, -1,
               &perfetto__protos__set_disconnect_lease_response__descriptor,
               &m, WAIT_MS),
      1);
  Perfetto__Protos__SetDisconnectLeaseResponse *r = (void *)m;
  assert_non_null(r);
  assert_true(r->has_lease_ms);
  uint64_t granted = r->lease_ms;
  perfetto__protos__set_disconnect_lease_response__free_unpacked(r, NULL);
  c->conn.service_id = consumer_port;
  return granted;
}

/* Attach{key} on a new connection: 1 when it returned a session. */
static int attach(test_service_t *ts, raw_consumer_t *c, const char *key) {
  assert_int_equal(raw_consumer_connect(c, ts), 0);
  Perfetto__Protos__AttachRequest att = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
  att.key = (char *)key;
  return raw_call(&c->conn, "Attach", &att.base, -1, NULL, NULL, WAIT_MS);
}

static size_t sessions(test_service_t *ts) {
  raw_consumer_t q;
  assert_int_equal(raw_consumer_connect(&q, ts), 0);
  size_t producers = 0, ds = 0, n = 0, replies = 0;
  assert_int_equal(raw_consumer_query_all(&q, WAIT_MS, &producers, &ds, &n,
                                          &replies), 0);
  raw_consumer_close(&q);
  return n;
}

static void commit(raw_producer_t *p, const char *tag, uint32_t first,
                   unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, 0, 0, 1, 0, tag, first, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

static void lost_connection_keeps_the_session_for_attach(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t a, b;
  simple_cfg_t sc;
  start_session(ts, &p, &a, &sc, "lease.ds");
  assert_int_equal(set_lease(&a, "relay/k1", 60000), 60000);
  /* Gone without Detach (as a SIGKILLed relay's connection goes); the
   * hangup returns once the service has closed its end. */
  assert_true(raw_hangup(&a.conn, WAIT_MS));
  raw_consumer_close(&a);
  /* Written while nobody is attached: kept only if the session is. */
  commit(&p, "while-away", 1, 5);
  assert_int_equal(sessions(ts), 1);

  assert_int_equal(attach(ts, &b, "relay/k1"), 1);
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.has_attach_notification_only = 1;
  en.attach_notification_only = 1;
  b.enable_req = raw_invoke(&b.conn, "EnableTracing", &en.base, -1, false);
  assert_true(b.enable_req > 0);
  assert_int_equal(raw_consumer_disable(&b, WAIT_MS), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(&b, &n);
  assert_non_null(pk);
  Perfetto__Protos__TracePacket *tp[16];
  size_t k = test_packets(pk, n, tp, 16);
  assert_int_equal(k, 5);
  for (size_t i = 0; i < k; i++)
    assert_int_equal(tp[i]->for_testing->seq_value, 1 + i);
  free_packets(pk, n);
  /* b set no lease: its session ends with it, as without leases. */
  raw_consumer_close(&b);
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (sessions(ts) != 0 && tg_test_now_ms() < deadline) usleep(10000);
  assert_int_equal(sessions(ts), 0);
  raw_producer_close(&p);
}

static void lease_that_runs_out_frees_the_session(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t a, b;
  simple_cfg_t sc;
  start_session(ts, &p, &a, &sc, "expiry.ds");
  assert_int_equal(set_lease(&a, "relay/k2", 300), 300);
  assert_true(raw_hangup(&a.conn, WAIT_MS));
  int64_t gone_at = tg_test_now_ms();
  raw_consumer_close(&a);
  /* Kept at first, freed once the lease has run out. */
  assert_int_equal(sessions(ts), 1);
  int64_t deadline = gone_at + WAIT_MS;
  while (sessions(ts) != 0 && tg_test_now_ms() < deadline) usleep(20000);
  assert_int_equal(sessions(ts), 0);
  assert_true(tg_test_now_ms() - gone_at >= 250);
  assert_int_equal(attach(ts, &b, "relay/k2"), 0);
  raw_consumer_close(&b);
  /* The producer was told to stop its instance. */
  assert_int_equal(raw_producer_wait_stopped(&p, WAIT_MS), 0);
  raw_producer_close(&p);
}

static void attach_in_time_cancels_the_lease(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t a, b;
  simple_cfg_t sc;
  start_session(ts, &p, &a, &sc, "cancel.ds");
  assert_int_equal(set_lease(&a, "relay/k3", 400), 400);
  assert_true(raw_hangup(&a.conn, WAIT_MS));
  raw_consumer_close(&a);
  assert_int_equal(attach(ts, &b, "relay/k3"), 1);
  /* Twice the lease later the session is still there: attached. */
  int64_t until = tg_test_now_ms() + 800;
  while (tg_test_now_ms() < until) {
    assert_int_equal(sessions(ts), 1);
    usleep(50000);
  }
  raw_consumer_close(&b);
  raw_producer_close(&p);
}

static void lease_is_bounded_by_the_service(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  /* 0 asks for the default; more than the maximum is cut to it (the
   * service runs with the default --session-lease-ms of 10 min). */
  assert_int_equal(set_lease(&c, "relay/k4", 0), 600000);
  assert_int_equal(set_lease(&c, "relay/k4", 1000ull * 86400 * 365), 600000);
  assert_int_equal(set_lease(&c, "relay/k4", 1234), 1234);
  raw_consumer_close(&c);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, test_service_setup, test_service_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(lost_connection_keeps_the_session_for_attach),
      T(lease_that_runs_out_frees_the_session),
      T(attach_in_time_cancels_the_lease),
      T(lease_is_bounded_by_the_service),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
