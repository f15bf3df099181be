/* tracegated end to end: the TraceConfig and port features beyond a plain
 * session. Deferred start, producer filters (and changing them), periodic
 * flushes and incremental state clears, triggers, descriptor updates,
 * service queries, packets larger than an IPC frame, per-producer SMB
 * geometry (and scraping a large one without making it resident) and the
 * service's own packets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "pb/common/observable_events.pb-c.h"
#include "pb/common/tracing_service_capabilities.pb-c.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "service_scenario.h"
#include "test_service.h"
#include "pb/trace/perfetto/tracing_service_event.pb-c.h"
#include "pb/trace/test_event.pb-c.h"
#include "common/buf.h"

/* A Sync round trip, then every command queued before its reply is
 * handled: afterwards |p| reflects everything the service had sent it by
 * the time it answered. */
static void producer_barrier(raw_producer_t *p) {
  Perfetto__Protos__SyncRequest req = PERFETTO__PROTOS__SYNC_REQUEST__INIT;
  assert_int_equal(raw_call(&p->conn, "Sync", &req.base, -1, NULL, NULL, 5000), 1);
  int rv;
  while ((rv = raw_producer_poll(p, 0)) == 1) {
  }
  assert_int_equal(rv, 0);
}

/* Handles |p|'s commands until |*counter| (one of its fields) reaches
 * |want|. */
static bool poll_until(raw_producer_t *p, const unsigned *counter, unsigned want,
                       int timeout_ms) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  while (*counter < want) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0 || raw_producer_poll(p, (int)left) < 0) return false;
  }
  return true;
}

static void register_ds(raw_producer_t *p, const char *name, bool handles_clear) {
  Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
  d.name = (char *)name;
  d.has_handles_incremental_state_clear = 1;
  d.handles_incremental_state_clear = handles_clear;
  Perfetto__Protos__RegisterDataSourceRequest r =
      PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
  r.data_source_descriptor = &d;
  assert_int_equal(raw_call(&p->conn, "RegisterDataSource", &r.base, -1, NULL, NULL, 5000), 1);
}

/* |n| test packets into (page, chunk 0) of writer 1, committed. */
static void commit_packets(raw_producer_t *p, uint32_t page, uint32_t chunk_id,
                           const char *str, uint32_t first, unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, page, 0, 1, chunk_id, str, first, n), 0);
  uint32_t chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* How many for_testing packets carry |str|; their values must run from
 * |first| up, in order. */
static size_t count_str(Perfetto__Protos__TracePacket **pk, size_t n, const char *str,
                        uint32_t first) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const Perfetto__Protos__TestEvent *ev =
        pk[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING
            ? pk[i]->for_testing : NULL;
    if (!ev || !ev->str || strcmp(ev->str, str)) continue;
    assert_int_equal(ev->seq_value, first + k);
    k++;
  }
  return k;
}

static void deferred_start_waits_for_start_tracing(void **state) {
  scenario_t s;
  scenario_open(&s, *state, (scenario_opts_t){.ds = "deferred.ds"});
  s.sc.cfg.has_deferred_start = 1;
  s.sc.cfg.deferred_start = 1;
  scenario_enable(&s);

  /* Set up at once, but not started. */
  assert_true(poll_until(&s.p, &s.p.setups, 1, 5000));
  uint64_t setup_id = s.p.instance_id;
  producer_barrier(&s.p);
  assert_false(s.p.started);
  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(&s.c, 5000);
  assert_non_null(q);
  assert_int_equal(q->service_state->n_tracing_sessions, 1);
  assert_string_equal(q->service_state->tracing_sessions[0]->state, "CONFIGURED");
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);

  Perfetto__Protos__StartTracingRequest st = PERFETTO__PROTOS__START_TRACING_REQUEST__INIT;
  assert_int_equal(raw_call(&s.c.conn, "StartTracing", &st.base, -1, NULL, NULL, 5000), 1);
  assert_int_equal(raw_producer_wait_started(&s.p, 5000), 0);
  assert_int_equal(s.p.instance_id, setup_id); /* the instance set up before */
  assert_int_equal(s.p.setups, 1);

  /* A started session cannot be started again. */
  assert_int_equal(raw_call(&s.c.conn, "StartTracing", &st.base, -1, NULL, NULL, 5000), 0);
  scenario_stop(&s);
  scenario_close(&s);
}

static void change_trace_config_adds_matching_producers(void **state) {
  test_service_t *ts = *state;
  raw_producer_t a, b;
  raw_consumer_t c;
  simple_cfg_t sc;
  assert_int_equal(raw_producer_connect(&a, ts, "a", "filt.ds", 4, 64, false), 0);
  assert_int_equal(raw_producer_connect(&b, ts, "b", "filt.ds", 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 256, 1, "filt.ds");
  char *only_a[] = {"a"}, *both[] = {"a", "b"};
  sc.ds.n_producer_name_filter = 1;
  sc.ds.producer_name_filter = only_a;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&a, 5000), 0);
  producer_barrier(&b);
  assert_int_equal(b.setups, 0);
  assert_false(b.started);

  sc.ds.n_producer_name_filter = 2;
  sc.ds.producer_name_filter = both;
  Perfetto__Protos__ChangeTraceConfigRequest ch =
      PERFETTO__PROTOS__CHANGE_TRACE_CONFIG_REQUEST__INIT;
  ch.trace_config = &sc.cfg;
  assert_int_equal(raw_call(&c.conn, "ChangeTraceConfig", &ch.base, -1, NULL, NULL, 5000),
                   1);
  assert_int_equal(raw_producer_wait_started(&b, 5000), 0);
  assert_int_equal(b.setups, 1);
  /* "a" matched before and keeps its one instance. */
  producer_barrier(&a);
  assert_int_equal(a.setups, 1);

  commit_packets(&a, 0, 0, "from-a", 0, 4);
  commit_packets(&b, 0, 0, "from-b", 100, 6);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&c, &n);
  assert_non_null(out);
  assert_int_equal(count_str(out, n, "from-a", 0), 4);
  assert_int_equal(count_str(out, n, "from-b", 100), 6);
  free_packets(out, n);
  raw_consumer_close(&c);
  raw_producer_close(&a);
  raw_producer_close(&b);
}

static void producer_name_regex_filter_matches_whole_names(void **state) {
  test_service_t *ts = *state;
  raw_producer_t in, out;
  raw_consumer_t c;
  simple_cfg_t sc;
  assert_int_equal(raw_producer_connect(&in, ts, "prod1", "re.ds", 4, 64, false), 0);
  assert_int_equal(raw_producer_connect(&out, ts, "xprod", "re.ds", 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 64, 1, "re.ds");
  char *re[] = {"pro.*"};
  sc.ds.n_producer_name_regex_filter = 1;
  sc.ds.producer_name_regex_filter = re;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&in, 5000), 0);
  /* "xprod" contains a match but is not one. */
  producer_barrier(&out);
  assert_int_equal(out.setups, 0);
  assert_false(out.started);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  raw_consumer_close(&c);
  raw_producer_close(&in);
  raw_producer_close(&out);
}

/* EnableTracing with |sc| is refused, the error naming |words|. */
static void expect_config_refused(test_service_t *ts, simple_cfg_t *sc,
                                  const char *words) {
  raw_consumer_t c;
  char err[512] = "";
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_int_equal(raw_consumer_enable(&c, &sc->cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 20000, err, sizeof(err)), 0);
  if (!strstr(err, words)) fail_msg("refused with '%s', not '%s'", err, words);
  raw_consumer_close(&c);
}

/* Producer name patterns come from consumers, remote ones through a relay:
 * those that would take glibc's regcomp() seconds and gigabytes, or its
 * stack (tracegated died), are refused naming the field, and the service
 * goes on serving (service/name_regex.h). */
static void producer_name_patterns_past_the_limits_are_refused(void **state) {
  test_service_t *ts = *state;
  enum { LEVELS = 20000 };
  char *deep = malloc(2 * LEVELS + 2);
  assert_non_null(deep);
  memset(deep, '(', LEVELS);
  deep[LEVELS] = 'a';
  memset(deep + LEVELS + 1, ')', LEVELS);
  deep[2 * LEVELS + 1] = 0;
  char *hostile[] = {"(((.*){1,16}){1,16}){1,16}", deep};
  for (size_t i = 0; i < 2; i++) {
    simple_cfg_t sc;
    simple_cfg_init(&sc, 64, 1, "re.ds");
    sc.ds.n_producer_name_regex_filter = 1;
    sc.ds.producer_name_regex_filter = &hostile[i];
    expect_config_refused(ts, &sc,
                          "data_sources[0].producer_name_regex_filter[0]: "
                          "refused: ");
    trigger_cfg_t tc;
    simple_cfg_init(&sc, 64, 1, "re.ds");
    trigger_cfg_init(&tc, &sc,
                     PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING,
                     "go", 5000);
    tc.tr.producer_name_regex = hostile[i];
    expect_config_refused(ts, &sc,
                          "trigger_config.triggers[0].producer_name_regex: "
                          "refused: ");
  }
  free(deep);
  /* Each within the limits, together past them: the fifth is refused. */
  char *many[5];
  for (size_t i = 0; i < 5; i++) many[i] = "[a-z]{255}[a-z]{255}[a-z]{255}[a-z]{255}";
  simple_cfg_t sc;
  simple_cfg_init(&sc, 64, 1, "re.ds");
  sc.ds.n_producer_name_regex_filter = 5;
  sc.ds.producer_name_regex_filter = many;
  expect_config_refused(ts, &sc,
                        "producer_name_regex_filter[4]: the config's producer "
                        "name patterns together cost more than 4096");
  /* The service is whole: a session with a pattern in the limits runs. */
  scenario_t s;
  scenario_open(&s, ts, (scenario_opts_t){.producer = "prod1", .ds = "re.ds"});
  char *ok[] = {"pro[a-z]{0,8}[0-9]"};
  s.sc.ds.n_producer_name_regex_filter = 1;
  s.sc.ds.producer_name_regex_filter = ok;
  scenario_start(&s);
  scenario_stop(&s);
  scenario_close(&s);
}

static void flush_period_sends_periodic_flushes(void **state) {
  scenario_t s;
  scenario_open(&s, *state, (scenario_opts_t){.ds = "period.ds"});
  s.sc.cfg.has_flush_period_ms = 1;
  s.sc.cfg.flush_period_ms = 100;
  scenario_start(&s);

  /* Nobody asks for them: the period does. */
  uint64_t first = raw_producer_wait_flush(&s.p, 0, 3000);
  assert_true(first > 0);
  uint64_t second = raw_producer_wait_flush(&s.p, first, 3000);
  assert_true(second > first);
  /* One ack answers both (acks are cumulative). */
  assert_int_equal(raw_producer_commit_ex(&s.p, NULL, 0, NULL, 0, second, false), 0);
  Perfetto__Protos__GetTraceStatsResponse *gs = raw_consumer_stats(&s.c);
  assert_non_null(gs);
  assert_true(gs->trace_stats->flushes_requested >= 2);
  assert_true(gs->trace_stats->flushes_succeeded >= 2);
  perfetto__protos__get_trace_stats_response__free_unpacked(gs, NULL);
  scenario_stop(&s);
  scenario_close(&s);
}

static void incremental_state_clear_period_reaches_producers_that_handle_it(
    void **state) {
  test_service_t *ts = *state;
  raw_producer_t a, b;
  raw_consumer_t c;
  simple_cfg_t sc;
  assert_int_equal(raw_producer_connect(&a, ts, "a", NULL, 4, 64, false), 0);
  register_ds(&a, "inc.ds", true);
  assert_int_equal(raw_producer_connect(&b, ts, "b", NULL, 4, 64, false), 0);
  register_ds(&b, "inc.ds", false);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 64, 1, "inc.ds");
  Perfetto__Protos__TraceConfig__IncrementalStateConfig ic =
      PERFETTO__PROTOS__TRACE_CONFIG__INCREMENTAL_STATE_CONFIG__INIT;
  ic.has_clear_period_ms = 1;
  ic.clear_period_ms = 100;
  sc.cfg.incremental_state_config = &ic;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&a, 5000), 0);
  assert_int_equal(raw_producer_wait_started(&b, 5000), 0);

  assert_true(poll_until(&a, &a.clears, 2, 3000));
  assert_int_equal(a.n_last_clear_ids, 1);
  assert_int_equal(a.last_clear_ids[0], a.instance_id);
  /* Both are told in the same tick: by B's barrier it would have one. */
  producer_barrier(&b);
  assert_int_equal(b.clears, 0);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  raw_consumer_close(&c);
  raw_producer_close(&a);
  raw_producer_close(&b);
}

static void start_trigger_starts_the_session(void **state) {
  scenario_t s;
  scenario_open(&s, *state,
                (scenario_opts_t){.ds = "trig.ds", .trigger_producer = true});
  scenario_trigger(&s, SCENARIO_START_TRACING, "go", 5000);
  scenario_enable(&s);
  assert_true(poll_until(&s.p, &s.p.setups, 1, 5000));

  /* Triggers are handled before ActivateTriggers answers. */
  assert_int_equal(scenario_fire(&s, "not-go"), 1);
  producer_barrier(&s.p);
  assert_false(s.p.started);
  assert_int_equal(scenario_fire(&s, "go"), 1);
  producer_barrier(&s.p);
  assert_true(s.p.started);
  scenario_stop(&s);
  scenario_close(&s);
}

static void stop_trigger_ends_the_session(void **state) {
  scenario_t s;
  scenario_open(&s, *state,
                (scenario_opts_t){.ds = "trig.ds", .trigger_producer = true});
  scenario_trigger(&s, SCENARIO_STOP_TRACING, "stop", 0);
  s.trig.tr.has_stop_delay_ms = 1;
  s.trig.tr.stop_delay_ms = 0;
  scenario_start(&s);

  assert_int_equal(scenario_fire(&s, "not-stop"), 1);
  producer_barrier(&s.p);
  assert_int_equal(s.p.last_flush_id, 0);
  assert_false(s.p.stopped);

  /* The stop begins with a final flush; the producer answers with data. */
  assert_int_equal(scenario_fire(&s, "stop"), 1);
  uint64_t fid = raw_producer_wait_flush(&s.p, 0, 5000);
  assert_true(fid > 0);
  scenario_commit(&s, 0, "last", 1, 3, fid);
  scenario_wait_end(&s);
  assert_int_equal(raw_producer_wait_stopped(&s.p, 5000), 0);
  scenario_read(&s);
  assert_int_equal(scenario_count(&s, "last", 1), 3);
  scenario_close(&s);
}

static void start_trigger_timeout_ends_the_session(void **state) {
  scenario_t s;
  scenario_open(&s, *state, (scenario_opts_t){.ds = "trig.ds"});
  scenario_trigger(&s, SCENARIO_START_TRACING, "go", 200);
  int64_t t0 = tg_test_now_ms();
  scenario_enable(&s);
  scenario_wait_end(&s);
  assert_true(tg_test_now_ms() - t0 >= 180);
  /* Set up, never started, then stopped. */
  assert_int_equal(raw_producer_wait_stopped(&s.p, 5000), 0);
  assert_int_equal(s.p.setups, 1);
  assert_false(s.p.started);
  scenario_close(&s);
}

/* STOP_TRACING with no trigger within trigger_timeout_ms: the session
 * ends by itself, and its trace holds no producer data (as Perfetto's). */
static void stop_trigger_timeout_ends_the_session_without_data(void **state) {
  scenario_t s;
  scenario_open(&s, *state, (scenario_opts_t){.ds = "trig.ds"});
  scenario_trigger(&s, SCENARIO_STOP_TRACING, "stop", 200);
  scenario_start(&s);
  assert_int_equal(raw_producer_write_packets(&s.p, 0, 0, 1, 0, "early", 1, 3), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&s.p, &page, &chunk, 1, 0), 0);
  scenario_wait_end(&s);
  scenario_read(&s);
  assert_int_equal(scenario_count(&s, "early", 1), 0);
  scenario_close(&s);
}

/* START_TRACING: the trigger's stop_delay_ms is the session's duration
 * once it fires (Perfetto's StartTracingTrigger). */
static void start_trigger_stop_delay_is_the_duration(void **state) {
  scenario_t s;
  scenario_open(&s, *state,
                (scenario_opts_t){.ds = "trig.ds", .trigger_producer = true});
  scenario_trigger(&s, SCENARIO_START_TRACING, "go", 60000);
  s.trig.tr.has_stop_delay_ms = 1;
  s.trig.tr.stop_delay_ms = 100;
  scenario_enable(&s);
  assert_int_equal(scenario_fire(&s, "go"), 1);
  assert_int_equal(raw_producer_wait_started(&s.p, 5000), 0);
  /* It stops by itself: the final flush, then the end. */
  uint64_t fid = raw_producer_wait_flush(&s.p, 0, 5000);
  assert_true(fid > 0);
  scenario_commit(&s, 0, "during", 1, 2, fid);
  scenario_wait_end(&s);
  scenario_read(&s);
  assert_int_equal(scenario_count(&s, "during", 1), 2);
  scenario_close(&s);
}

/* STOP_TRACING: the first trigger's delay holds; a later trigger with a
 * longer one does not put the stop off (Perfetto's StopTracingTrigger). */
static void stop_trigger_keeps_the_first_delay(void **state) {
  scenario_t s;
  scenario_open(&s, *state,
                (scenario_opts_t){.ds = "trig.ds", .trigger_producer = true});
  scenario_trigger(&s, SCENARIO_STOP_TRACING, "fast", 0);
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger slow =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER__INIT;
  slow.name = "slow";
  slow.has_stop_delay_ms = 1;
  slow.stop_delay_ms = 600000;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *both[2] = {&s.trig.tr, &slow};
  s.trig.tr.has_stop_delay_ms = 1;
  s.trig.tr.stop_delay_ms = 100;
  s.trig.tc.n_triggers = 2;
  s.trig.tc.triggers = both;
  scenario_start(&s);
  assert_int_equal(scenario_fire(&s, "fast"), 1);
  assert_int_equal(scenario_fire(&s, "slow"), 1);
  uint64_t fid = raw_producer_wait_flush(&s.p, 0, 5000);
  assert_true(fid > 0);
  assert_int_equal(raw_producer_commit_ex(&s.p, NULL, 0, NULL, 0, fid, false), 0);
  scenario_wait_end(&s);
  scenario_close(&s);
}

static void update_data_source_changes_the_descriptor(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c;
  simple_cfg_t sc;
  assert_int_equal(raw_producer_connect(&p, ts, "test.producer", "upd.ds", 4, 64, false),
                   0);
  Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
  d.name = "upd.ds";
  d.has_will_notify_on_stop = 1;
  d.will_notify_on_stop = 1;
  Perfetto__Protos__UpdateDataSourceRequest u =
      PERFETTO__PROTOS__UPDATE_DATA_SOURCE_REQUEST__INIT;
  u.data_source_descriptor = &d;
  assert_int_equal(raw_call(&p.conn, "UpdateDataSource", &u.base, -1, NULL, NULL, 5000), 1);
  d.name = "unknown.ds";
  assert_int_equal(raw_call(&p.conn, "UpdateDataSource", &u.base, -1, NULL, NULL, 5000), 0);

  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 64, 1, "upd.ds");
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);

  /* Now the session waits for the producer to say it stopped. */
  Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
  assert_int_equal(raw_call(&c.conn, "DisableTracing", &dis.base, -1, NULL, NULL, 5000), 1);
  assert_int_equal(raw_producer_wait_stopped(&p, 5000), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 300, NULL, 0), -1);
  Perfetto__Protos__NotifyDataSourceStoppedRequest ns =
      PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;
  ns.has_data_source_id = 1;
  ns.data_source_id = p.instance_id;
  assert_int_equal(raw_call(&p.conn, "NotifyDataSourceStopped", &ns.base, -1, NULL, NULL,
                            5000), 1);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, NULL, 0), 1);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

static bool has_event(const Perfetto__Protos__TracingServiceCapabilities *cap,
                      Perfetto__Protos__ObservableEvents__Type t) {
  for (size_t i = 0; i < cap->n_observable_events; i++)
    if (cap->observable_events[i] == t) return true;
  return false;
}

static void query_capabilities_and_service_state_describe_the_service(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  scenario_open(&s, ts,
                (scenario_opts_t){.producer = "state.producer",
                                  .ds = "state.ds", .buffer_kb = 256});
  scenario_start(&s);

  Perfetto__Protos__QueryCapabilitiesRequest qc =
      PERFETTO__PROTOS__QUERY_CAPABILITIES_REQUEST__INIT;
  ProtobufCMessage *m = NULL;
  assert_int_equal(raw_call(&s.c.conn, "QueryCapabilities", &qc.base, -1,
                            &perfetto__protos__query_capabilities_response__descriptor,
                            &m, 5000), 1);
  Perfetto__Protos__QueryCapabilitiesResponse *cr = (void *)m;
  assert_non_null(cr);
  assert_non_null(cr->capabilities);
  assert_true(cr->capabilities->has_query_capabilities);
  assert_true(has_event(cr->capabilities,
                        PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_DATA_SOURCES_INSTANCES));
  assert_true(has_event(cr->capabilities,
                        PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED));
  perfetto__protos__query_capabilities_response__free_unpacked(cr, NULL);

  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(&s.c, 5000);
  assert_non_null(q);
  const Perfetto__Protos__TracingServiceState *st = q->service_state;
  assert_non_null(st);
  assert_int_equal(st->n_producers, 1);
  const Perfetto__Protos__TracingServiceState__Producer *pr = st->producers[0];
  assert_string_equal(pr->name, "state.producer");
  assert_int_equal(pr->pid, getpid());
  assert_int_equal(pr->uid, (int32_t)getuid());
  assert_int_equal(st->n_data_sources, 1);
  assert_string_equal(st->data_sources[0]->ds_descriptor->name, "state.ds");
  assert_int_equal(st->data_sources[0]->producer_id, pr->id);
  assert_int_equal(st->n_tracing_sessions, 1);
  const Perfetto__Protos__TracingServiceState__TracingSession *ses =
      st->tracing_sessions[0];
  assert_string_equal(ses->state, "STARTED");
  assert_int_equal(ses->n_buffer_size_kb, 1);
  assert_int_equal(ses->buffer_size_kb[0], 256);
  assert_int_equal(ses->num_data_sources, 1);
  assert_int_equal(st->num_sessions_started, 1);
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);
  scenario_stop(&s);
  scenario_close(&s);
}

/* A streaming read-out fills more than the default socket send buffer
 * before it waits for the reader: the service asks for a bigger one at the
 * first ReadBuffers (the kernel caps it at net.core.wmem_max, and grants
 * at least twice the default). Seen from the reader: bytes queued on its
 * socket while it reads nothing. Measured here: 240 KB with the default
 * buffer (wmem_default 208 KiB), 430 KB with wmem_max at that default
 * too, all 2 MB with wmem_max at 4 MiB; the test asks for 1.5 times
 * wmem_default. */
static long read_sysctl(const char *path) {
  FILE *f = fopen(path, "r");
  long v = -1;
  if (f) {
    if (fscanf(f, "%ld", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

static void read_out_fills_a_larger_send_buffer(void **state) {
  test_service_t *ts = *state;
  long wmem_default = read_sysctl("/proc/sys/net/core/wmem_default");
  assert_true(wmem_default > 0);
  scenario_t s;
  scenario_open(&s, ts,
                (scenario_opts_t){.ds = "big.ds", .buffer_kb = 4096,
                                  .page_kb = 32, .smb_kb = 256});
  scenario_start(&s);
  /* 2 MiB of packets of 28 KiB, one per whole-page chunk. */
  enum { STR_LEN = 28 * 1024, PACKETS = 72 };
  char *str = malloc(STR_LEN + 1);
  assert_non_null(str);
  memset(str, 'x', STR_LEN);
  str[STR_LEN] = 0;
  uint8_t *pkt = malloc(STR_LEN + 64);
  assert_non_null(pkt);
  for (uint32_t i = 0; i < PACKETS; i++) {
    const uint8_t *one = pkt;
    size_t len = make_test_packet(pkt, STR_LEN + 64, str, i);
    assert_int_equal(raw_producer_write_chunk(&s.p, 0, 0, TG_PAGE_DIV_1, 1, i, 0,
                                              &one, &len, 1), 0);
    uint32_t page = 0, chunk = 0;
    assert_int_equal(raw_producer_commit(&s.p, &page, &chunk, 1, 0), 0);
  }
  scenario_stop(&s);
  Perfetto__Protos__ReadBuffersRequest req = PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;
  assert_true(raw_invoke(&s.c.conn, "ReadBuffers", &req.base, -1, false) > 0);
  /* Not reading: the service fills the socket, then waits. */
  const long want = wmem_default * 3 / 2;
  int64_t deadline = tg_test_now_ms() + 5000;
  int queued = 0;
  while (queued <= want && tg_test_now_ms() < deadline) {
    assert_int_equal(ioctl(s.c.conn.fd, FIONREAD, &queued), 0);
    if (queued <= want) usleep(2000); /* the kernel has no event for it */
  }
  assert_true(queued > want);
  free(pkt);
  free(str);
  scenario_close(&s);
}

/* ReadBuffers to the end, looking for the packet that begins with |want|:
 * returns how many replies carried its slices (0 if it never came). */
static unsigned read_replies_of(raw_consumer_t *c, const uint8_t *want, size_t len,
                                Perfetto__Protos__TracePacket **found) {
  *found = NULL;
  Perfetto__Protos__ReadBuffersRequest req = PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;
  int64_t rid = raw_invoke(&c->conn, "ReadBuffers", &req.base, -1, false);
  assert_true(rid > 0);
  tg_buf_t cur;
  tg_buf_init(&cur, 0);
  unsigned cur_replies = 0, result = 0;
  bool more = true;
  while (more) {
    raw_frame_t f;
    assert_int_equal(raw_wait(&c->conn, (uint64_t)rid, 10000, &f), 1);
    assert_int_equal(f.frame->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
    Perfetto__Protos__IPCFrame__InvokeMethodReply *r = f.frame->msg_invoke_method_reply;
    assert_true(r->success);
    more = r->has_more;
    Perfetto__Protos__ReadBuffersResponse *rb = perfetto__protos__read_buffers_response__unpack(
        NULL, r->reply_proto.len, r->reply_proto.data);
    assert_non_null(rb);
    bool counted = false;
    for (size_t i = 0; i < rb->n_slices; i++) {
      if (!counted) cur_replies++;
      counted = true;
      tg_buf_append(&cur, rb->slices[i]->data.data, rb->slices[i]->data.len);
      if (!rb->slices[i]->last_slice_for_packet) continue;
      /* The service appends its trusted fields after the producer's bytes. */
      if (tg_buf_size(&cur) >= len && !memcmp(tg_buf_begin(&cur), want, len)) {
        assert_null(*found);
        result = cur_replies;
        *found = perfetto__protos__trace_packet__unpack(NULL, tg_buf_size(&cur),
                                                        tg_buf_begin(&cur));
        assert_non_null(*found);
      }
      tg_buf_reset(&cur);
      cur_replies = 0;
      counted = false;
    }
    perfetto__protos__read_buffers_response__free_unpacked(rb, NULL);
    tg_ipc_frame_free(f.frame);
    if (f.fd >= 0) close(f.fd);
  }
  tg_buf_free(&cur);
  return result;
}

static void large_packet_is_sliced_across_read_buffers_replies(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  scenario_open(&s, ts,
                (scenario_opts_t){.ds = "big.ds", .buffer_kb = 1024,
                                  .page_kb = 32, .smb_kb = 256});
  scenario_start(&s);
  assert_int_equal(s.p.smb.page_size, 32768);

  enum { STR_LEN = 300 * 1024 };
  char *str = malloc(STR_LEN + 1);
  assert_non_null(str);
  for (size_t i = 0; i < STR_LEN; i++) str[i] = (char)('a' + (i * 7 + i / 4096) % 26);
  str[STR_LEN] = 0;
  size_t cap = STR_LEN + 64;
  uint8_t *pkt = malloc(cap);
  assert_non_null(pkt);
  size_t total = make_test_packet(pkt, cap, str, 42);
  assert_true(total > STR_LEN);

  /* One fragment per whole-page chunk, each committed before the next is
   * written into the same slot. */
  const size_t room = tg_smb_chunk_size(s.p.smb.page_size, TG_PAGE_DIV_1) -
                      TG_SMB_CHUNK_HEADER_SIZE - TG_PACKET_HEADER_SIZE;
  uint32_t chunk_id = 0;
  for (size_t off = 0; off < total; off += room, chunk_id++) {
    const uint8_t *frag = pkt + off;
    size_t len = total - off < room ? total - off : room;
    unsigned flags = (off ? TG_CHUNK_FIRST_PACKET_CONTINUES : 0) |
                     (off + len < total ? TG_CHUNK_LAST_PACKET_CONTINUES : 0);
    assert_int_equal(raw_producer_write_chunk(&s.p, 0, 0, TG_PAGE_DIV_1, 1, chunk_id, flags,
                                              &frag, &len, 1), 0);
    uint32_t page = 0, chunk = 0;
    assert_int_equal(raw_producer_commit(&s.p, &page, &chunk, 1, 0), 0);
  }
  assert_true(chunk_id >= 10);
  /* And a small one after it on the same sequence. */
  commit_packets(&s.p, 0, chunk_id, "after", 43, 1);

  scenario_stop(&s);
  Perfetto__Protos__TracePacket *big = NULL;
  unsigned replies = read_replies_of(&s.c, pkt, total, &big);
  assert_true(replies >= 3); /* 300 KiB through frames of at most 128 KiB */
  assert_non_null(big);
  assert_int_equal(big->for_testing->seq_value, 42);
  assert_int_equal(strlen(big->for_testing->str), STR_LEN);
  assert_memory_equal(big->for_testing->str, str, STR_LEN);
  assert_int_equal(big->trusted_pid, getpid());
  perfetto__protos__trace_packet__free_unpacked(big, NULL);
  free(pkt);
  free(str);
  scenario_close(&s);
}

static void producer_config_sets_the_smb_size(void **state) {
  test_service_t *ts = *state;
  raw_producer_t big, small;
  raw_consumer_t c;
  simple_cfg_t sc;
  /* The config overrides big's hints; small's page hint is not a power of
   * two and there is no config for it: defaults. */
  assert_int_equal(raw_producer_connect(&big, ts, "big", "smb.ds", 4, 64, false), 0);
  assert_int_equal(raw_producer_connect(&small, ts, "small", "smb.ds", 12, 0, false), 0);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 256, 1, "smb.ds");
  Perfetto__Protos__TraceConfig__ProducerConfig pc =
      PERFETTO__PROTOS__TRACE_CONFIG__PRODUCER_CONFIG__INIT, *pcp = &pc;
  pc.producer_name = "big";
  pc.has_shm_size_kb = 1;
  pc.shm_size_kb = 1024;
  pc.has_page_size_kb = 1;
  pc.page_size_kb = 16;
  sc.cfg.n_producers = 1;
  sc.cfg.producers = &pcp;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&big, 5000), 0);
  assert_int_equal(raw_producer_wait_started(&small, 5000), 0);

  assert_int_equal(big.page_size_kb, 16);
  assert_int_equal(big.smb_size, 1024 * 1024);
  assert_int_equal(small.page_size_kb, 4);
  assert_int_equal(small.smb_size, 256 * 1024);

  /* The service sees the same geometry: big's last page is committable. */
  uint32_t last = (uint32_t)(big.smb_size / (16 * 1024)) - 1;
  commit_packets(&big, last, 0, "big", 0, 3);
  commit_packets(&small, 0, 0, "small", 0, 2);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&c, &n);
  assert_non_null(out);
  assert_int_equal(count_str(out, n, "big", 0), 3);
  assert_int_equal(count_str(out, n, "small", 0), 2);
  free_packets(out, n);
  raw_consumer_close(&c);
  raw_producer_close(&big);
  raw_producer_close(&small);
}

/* Pages of |p|'s SMB in memory (the memfd's, whoever touched them). */
static size_t smb_resident_pages(const raw_producer_t *p, bool *which,
                                 size_t n) {
  size_t sys = (size_t)sysconf(_SC_PAGESIZE), pages = p->smb_size / sys;
  unsigned char *v = calloc(pages, 1);
  assert_non_null(v);
  assert_int_equal(mincore(p->smb_map, p->smb_size, v), 0);
  size_t k = 0;
  for (size_t i = 0; i < pages; i++) {
    if (i < n) which[i] = v[i] & 1;
    k += v[i] & 1;
  }
  free(v);
  return k;
}

/* A producer that asked for a large SMB and wrote two pages of it: the
 * scrape at stop finds both uncommitted chunks, past the hole between
 * them, and leaves the rest of the memfd unallocated (a read of a hole
 * through a shared mapping would allocate it). */
static void scrape_does_not_make_untouched_smb_pages_resident(void **state) {
  test_service_t *ts = *state;
  enum { FAR_PAGE = 1500 };
  scenario_t s;
  scenario_open(&s, ts,
                (scenario_opts_t){.producer = "big", .ds = "scrape.ds",
                                  .buffer_kb = 256, .page_kb = 4, .smb_kb = 8192});
  scenario_start(&s);
  assert_int_equal(s.p.smb_size, 8192 * 1024);
  assert_int_equal(raw_producer_register_writer(&s.p, 1), 0);
  assert_int_equal(raw_producer_register_writer(&s.p, 2), 0);
  /* One writer each, two packets each: a scraped chunk that is still being written keeps
   * its last packet back (it may be unfinished). */
  uint8_t pk[2][64];
  const uint8_t *f[2] = {pk[0], pk[1]};
  size_t l[2];
  const char *names[2] = {"near", "far"};
  const uint32_t pages[2] = {2, FAR_PAGE};
  for (uint32_t i = 0; i < 2; i++) {
    l[0] = make_test_packet(pk[0], sizeof(pk[0]), names[i], 0);
    l[1] = make_test_packet(pk[1], sizeof(pk[1]), names[i], 1);
    assert_int_equal(raw_producer_write_chunk_ex(&s.p, pages[i], 0, TG_PAGE_DIV_1,
                                                 (uint16_t)(1 + i), 0, 0, f, l,
                                                 2, false), 0);
  }
  bool res[FAR_PAGE + 1];
  assert_int_equal(smb_resident_pages(&s.p, res, FAR_PAGE + 1), 2);

  scenario_stop(&s);
  scenario_read(&s);
  assert_int_equal(scenario_count(&s, "near", 0), 1);
  assert_int_equal(scenario_count(&s, "far", 0), 1);
  assert_int_equal(smb_resident_pages(&s.p, res, FAR_PAGE + 1), 2);
  assert_true(res[2] && res[FAR_PAGE]);
  scenario_close(&s);
}

static void sync_marker_and_service_events_are_in_the_trace(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  scenario_open(&s, ts, (scenario_opts_t){.ds = "svc.ds", .buffer_kb = 256});
  scenario_start(&s);
  commit_packets(&s.p, 0, 0, "data", 0, 2);
  scenario_stop(&s);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);

  static const uint8_t marker[16] = {0x82, 0x47, 0x7a, 0x76, 0xb2, 0x8d, 0x42, 0xba,
                                     0x81, 0xdc, 0x33, 0x32, 0x6d, 0x57, 0xa0, 0x79};
  size_t markers = 0, started = 0, disabled = 0, data = 0;
  for (size_t i = 0; i < n; i++) {
    const Perfetto__Protos__TracePacket *pk = out[i];
    bool service = false;
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SYNCHRONIZATION_MARKER) {
      assert_int_equal(pk->synchronization_marker.len, sizeof(marker));
      assert_memory_equal(pk->synchronization_marker.data, marker, sizeof(marker));
      markers++;
      service = true;
    } else if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT) {
      const Perfetto__Protos__TracingServiceEvent *ev = pk->service_event;
      if (ev->event_type_case ==
          PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_STARTED) {
        assert_true(ev->tracing_started);
        started++;
      } else if (ev->event_type_case ==
                 PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_TRACING_DISABLED) {
        assert_true(ev->tracing_disabled);
        disabled++;
      }
      service = true;
    } else if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING) {
      data++;
    } else {
      continue;
    }
    assert_int_equal(
        pk->optional_trusted_packet_sequence_id_case,
        PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID);
    /* Sequence 1 is the service's and only the service's. */
    if (service)
      assert_int_equal(pk->trusted_packet_sequence_id, 1);
    else
      assert_int_not_equal(pk->trusted_packet_sequence_id, 1);
  }
  assert_true(markers >= 1);
  assert_int_equal(started, 1);
  assert_int_equal(disabled, 1);
  assert_int_equal(data, 2);
  free_packets(out, n);
  scenario_close(&s);
}

/* QueryServiceState with many producers gives every producer and data
 * source once, however many replies it takes (replies are cut by size:
 * test_e2e_service_state.c has states larger than a frame). */
static void many_producers_and_data_sources_are_listed_once_each(void **state) {
  test_service_t *ts = *state;
  enum { N = 140 };
  raw_producer_t *p = calloc(N, sizeof(*p));
  assert_non_null(p);
  for (int i = 0; i < N; i++) {
    char name[32], ds[32];
    snprintf(name, sizeof(name), "many.%d", i);
    snprintf(ds, sizeof(ds), "many.ds.%d", i);
    assert_int_equal(raw_producer_connect(&p[i], ts, name, ds, 4, 64, false), 0);
  }
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  size_t np, nd, ns, replies;
  assert_int_equal(raw_consumer_query_all(&c, 10000, &np, &nd, &ns, &replies), 0);
  assert_int_equal(np, N);
  assert_int_equal(nd, N);
  assert_int_equal(ns, 0);
  assert_true(replies >= 1);
  raw_consumer_close(&c);
  for (int i = 0; i < N; i++) raw_producer_close(&p[i]);
  free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(deferred_start_waits_for_start_tracing,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(change_trace_config_adds_matching_producers,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(producer_name_regex_filter_matches_whole_names,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          producer_name_patterns_past_the_limits_are_refused,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(flush_period_sends_periodic_flushes,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          incremental_state_clear_period_reaches_producers_that_handle_it,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(start_trigger_starts_the_session,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(stop_trigger_ends_the_session,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(start_trigger_timeout_ends_the_session,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(stop_trigger_timeout_ends_the_session_without_data,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(start_trigger_stop_delay_is_the_duration,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(stop_trigger_keeps_the_first_delay,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(update_data_source_changes_the_descriptor,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          query_capabilities_and_service_state_describe_the_service,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          many_producers_and_data_sources_are_listed_once_each,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(read_out_fills_a_larger_send_buffer,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(large_packet_is_sliced_across_read_buffers_replies,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(producer_config_sets_the_smb_size,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          scrape_does_not_make_untouched_smb_pages_resident,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(sync_marker_and_service_events_are_in_the_trace,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
