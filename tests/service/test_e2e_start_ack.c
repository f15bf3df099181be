/* SPDX-License-Identifier: Apache-2.0 */
/* A data source that confirms its start (will_notify_on_start) and never
 * does is named in the trace (TracingServiceEvent.slow_starting_data_sources,
 * as Perfetto's traced writes it): when the start timeout runs out, again
 * at each flush while it has not started, in a clone, and when the
 * session stops. One that confirms is never named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "test_proc.h"
#include "test_service.h"

#define DS "start.ds"
#define PRODUCER "start.producer"

/* Connects a producer whose data source DS confirms its start. */
static void connect_notifying(raw_producer_t *p, const test_service_t *ts) {
  assert_int_equal(raw_producer_connect(p, ts, PRODUCER, NULL, 4, 64, false), 0);
  Perfetto__Protos__DataSourceDescriptor d =
      PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
  d.name = DS;
  d.has_will_notify_on_start = 1;
  d.will_notify_on_start = 1;
  Perfetto__Protos__RegisterDataSourceRequest r =
      PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
  r.data_source_descriptor = &d;
  assert_int_equal(raw_call(&p->conn, "RegisterDataSource", &r.base, -1, NULL,
                            NULL, 5000),
                   1);
}

static void flush(raw_consumer_t *c) {
  Perfetto__Protos__FlushRequest req = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  req.has_timeout_ms = 1;
  req.timeout_ms = 100; /* the producer never acks it: a short wait */
  int64_t rid = raw_invoke(&c->conn, "Flush", &req.base, -1, false);
  assert_true(rid > 0);
  assert_true(raw_wait_reply(&c->conn, (uint64_t)rid, NULL, NULL, 5000) >= 0);
}

/* The slow_starting_data_sources events of the trace; each must name
 * exactly PRODUCER's DS. */
static size_t count_slow_start_events(raw_consumer_t *c) {
  size_t n = 0, events = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(c, &n);
  assert_non_null(out);
  for (size_t i = 0; i < n; i++) {
    if (out[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT)
      continue;
    const Perfetto__Protos__TracingServiceEvent *ev = out[i]->service_event;
    if (!ev ||
        ev->event_type_case !=
            PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_SLOW_STARTING_DATA_SOURCES)
      continue;
    const Perfetto__Protos__TracingServiceEvent__DataSources *ds =
        ev->slow_starting_data_sources;
    assert_int_equal(ds->n_data_source, 1);
    assert_string_equal(ds->data_source[0]->producer_name, PRODUCER);
    assert_string_equal(ds->data_source[0]->data_source_name, DS);
    assert_int_equal(out[i]->trusted_packet_sequence_id, 1);
    events++;
  }
  free_packets(out, n);
  return events;
}

static void never_acked_start_is_in_the_trace(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c;
  simple_cfg_t sc;
  connect_notifying(&p, ts);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 256, 1, DS);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  /* The start timeout (1 ms here) is due long before the flushes reach
   * the service's loop, which runs due timers first. */
  usleep(100 * 1000);
  flush(&c);
  flush(&c);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  /* The timeout, two flushes and the stop. */
  assert_int_equal(count_slow_start_events(&c), 4);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

static void acked_start_is_not_reported(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c;
  simple_cfg_t sc;
  connect_notifying(&p, ts);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 256, 1, DS);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  Perfetto__Protos__NotifyDataSourceStartedRequest n =
      PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STARTED_REQUEST__INIT;
  n.has_data_source_id = 1;
  n.data_source_id = p.instance_id;
  assert_int_equal(raw_call(&p.conn, "NotifyDataSourceStarted", &n.base, -1,
                            NULL, NULL, 5000),
                   1);
  flush(&c);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  assert_int_equal(count_slow_start_events(&c), 0);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

/* A session shorter than the (default, 20 s) start timeout: the stop
 * names what never started. */
static void never_acked_start_is_reported_at_the_stop(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c;
  simple_cfg_t sc;
  connect_notifying(&p, ts);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 256, 1, DS);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  assert_int_equal(count_slow_start_events(&c), 1);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

/* A clone of a session whose start timeout ran out (a collector's
 * snapshot of its ring) carries the report, however long ago the
 * session's own was written. */
static void clone_carries_the_report(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c, k;
  simple_cfg_t sc;
  connect_notifying(&p, ts);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  simple_cfg_init(&sc, 256, 1, DS);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  usleep(100 * 1000); /* past the 1 ms start timeout, as above */

  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(&k, 5000);
  assert_non_null(q);
  assert_non_null(q->service_state);
  assert_int_equal(q->service_state->n_tracing_sessions, 1);
  Perfetto__Protos__CloneSessionRequest r =
      PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
  r.session_id = q->service_state->tracing_sessions[0]->id;
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);
  int64_t rid = raw_invoke(&k.conn, "CloneSession", &r.base, -1, false);
  assert_true(rid > 0);
  /* The clone flushes first: the producer acks that flush. */
  uint64_t fid = raw_producer_wait_flush(&p, 0, 5000);
  assert_true(fid > 0);
  assert_int_equal(raw_producer_commit_ex(&p, NULL, 0, NULL, 0, fid, false), 0);
  ProtobufCMessage *m = NULL;
  assert_int_equal(raw_wait_reply(&k.conn, (uint64_t)rid,
                                  &perfetto__protos__clone_session_response__descriptor,
                                  &m, 5000),
                   1);
  Perfetto__Protos__CloneSessionResponse *cr = (void *)m;
  assert_true(cr && cr->has_success && cr->success);
  protobuf_c_message_free_unpacked(m, NULL);
  assert_int_equal(count_slow_start_events(&k), 1);
  raw_consumer_close(&k);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

static int setup_short_start_timeout(void **state) {
  test_service_t *ts = calloc(1, sizeof(*ts));
  const char *args[] = {"--ds-start-timeout-ms", "1", NULL};
  if (!ts || test_service_start_with(ts, args, 10000) < 0) {
    free(ts);
    return -1;
  }
  *state = ts;
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(never_acked_start_is_in_the_trace,
                                      setup_short_start_timeout,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_carries_the_report,
                                      setup_short_start_timeout,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(acked_start_is_not_reported,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(never_acked_start_is_reported_at_the_stop,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
