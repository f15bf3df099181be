/* tracegated end to end: how sessions begin and end. Flushes that time out
 * or succeed, producers and consumers that go away, detach/attach, configs
 * refused at the door, and sessions that end on their own. */
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "pb/common/observable_events.pb-c.h"
#include "test_notice.h"
#include "service_scenario.h"
#include "test_service.h"
#include "pb/trace/test_event.pb-c.h"

static void start_session(test_service_t *ts, raw_producer_t *p, raw_consumer_t *c,
                          simple_cfg_t *sc, const char *ds) {
  assert_int_equal(raw_producer_connect(p, ts, "test.producer", ds, 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(c, ts), 0);
  simple_cfg_init(sc, 256, 1, ds);
  assert_int_equal(raw_consumer_enable(c, &sc->cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(p, 5000), 0);
}

static int64_t invoke_flush(raw_consumer_t *c, uint32_t timeout_ms) {
  Perfetto__Protos__FlushRequest req = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  req.has_timeout_ms = 1;
  req.timeout_ms = timeout_ms;
  int64_t rid = raw_invoke(&c->conn, "Flush", &req.base, -1, false);
  assert_true(rid > 0);
  return rid;
}

/* Reads the session to the end: the for_testing values, in order. */
static size_t read_values(raw_consumer_t *c, uint32_t *values, size_t max) {
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(c, &n);
  assert_non_null(out);
  Perfetto__Protos__TracePacket *tp[256];
  size_t k = test_packets(out, n, tp, 256);
  for (size_t i = 0; i < k && i < max; i++) values[i] = tp[i]->for_testing->seq_value;
  free_packets(out, n);
  return k;
}

static void flush_times_out_without_ack_and_succeeds_with_one(void **state) {
  scenario_t s;
  scenario_open(&s, *state,
                (scenario_opts_t){.ds = "flush.ds", .buffer_kb = 256});
  scenario_start(&s);

  /* The producer gets the Flush but never answers it. */
  int64_t t0 = tg_test_now_ms();
  int64_t rid = invoke_flush(&s.c, 300);
  assert_int_equal(raw_wait_reply(&s.c.conn, (uint64_t)rid, NULL, NULL, 5000), 0);
  int64_t took = tg_test_now_ms() - t0;
  assert_true(took >= 280);
  assert_true(took < 3000);
  uint64_t first = raw_producer_wait_flush(&s.p, 0, 1000);
  assert_true(first > 0);

  /* This time it commits its data with the flush id: that is the ack. */
  t0 = tg_test_now_ms();
  rid = invoke_flush(&s.c, 5000);
  uint64_t second = raw_producer_wait_flush(&s.p, first, 5000);
  assert_true(second > first);
  scenario_commit(&s, 0, "flushed", 1, 3, second);
  assert_int_equal(raw_wait_reply(&s.c.conn, (uint64_t)rid, NULL, NULL, 5000), 1);
  assert_true(tg_test_now_ms() - t0 < 3000); /* the ack, not the timeout */

  scenario_stop(&s);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);
  Perfetto__Protos__TracePacket *tp[8];
  assert_int_equal(test_packets(out, n, tp, 8), 3);
  const Perfetto__Protos__TraceStats *st = find_trace_stats(out, n);
  assert_non_null(st);
  assert_int_equal(st->flushes_requested, 2);
  assert_int_equal(st->flushes_failed, 1);
  assert_int_equal(st->flushes_succeeded, 1);
  free_packets(out, n);
  scenario_close(&s);
}

/* Waits on an ObserveEvents stream for an instance of |ds| to stop. */
static bool wait_instance_stopped(raw_consumer_t *c, int64_t rid, const char *ds,
                                  int timeout_ms) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  for (;;) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0) return false;
    ProtobufCMessage *m = NULL;
    if (raw_wait_reply(&c->conn, (uint64_t)rid,
                       &perfetto__protos__observe_events_response__descriptor, &m,
                       (int)left) != 1)
      return false;
    Perfetto__Protos__ObserveEventsResponse *r = (void *)m;
    bool stopped = false;
    for (size_t i = 0; r && r->events && i < r->events->n_instance_state_changes; i++) {
      const Perfetto__Protos__ObservableEvents__DataSourceInstanceStateChange *ch =
          r->events->instance_state_changes[i];
      stopped |= ch->data_source_name && !strcmp(ch->data_source_name, ds) &&
                 ch->state ==
                     PERFETTO__PROTOS__OBSERVABLE_EVENTS__DATA_SOURCE_INSTANCE_STATE__DATA_SOURCE_INSTANCE_STATE_STOPPED;
    }
    if (m) protobuf_c_message_free_unpacked(m, NULL);
    if (stopped) return true;
  }
}

/* The victim, in a child process: commits packets 0..3, then commits the
 * start of packet 99 and leaves its continuation BeingWritten; tells the
 * parent, then waits to be killed. */
static void victim_main(const test_service_t *ts, int sync_fd) {
  raw_producer_t v;
  if (raw_producer_connect(&v, ts, "victim", "kill.ds", 4, 64, false) < 0) _exit(10);
  if (raw_producer_wait_started(&v, 5000) < 0) _exit(11);
  if (raw_producer_register_writer(&v, 1) < 0) _exit(12);
  if (raw_producer_write_packets(&v, 0, 0, 1, 0, "victim", 0, 3) < 0) _exit(13);
  /* Packet 99 is ~410 bytes: 100 go into chunk 1, 200 into chunk 2, and
   * the rest is never written. */
  uint8_t whole[64], big[512];
  char str[401];
  memset(str, 'v', 400);
  str[400] = 0;
  size_t lw = make_test_packet(whole, sizeof(whole), "victim", 3);
  if (make_test_packet(big, sizeof(big), str, 99) < 400) _exit(14);
  const uint8_t *f1[2] = {whole, big};
  size_t l1[2] = {lw, 100};
  const uint8_t *f2 = big + 100;
  size_t l2 = 200;
  uint32_t pages[2] = {0, 0}, chunks[2] = {0, 1};
  if (raw_producer_write_chunk(&v, 0, 1, TG_PAGE_DIV_4, 1, 1,
                               TG_CHUNK_LAST_PACKET_CONTINUES, f1, l1, 2) < 0)
    _exit(15);
  if (raw_producer_commit(&v, pages, chunks, 2, 0) < 0) _exit(16);
  if (raw_producer_write_chunk_ex(&v, 0, 2, TG_PAGE_DIV_4, 1, 2,
                                  TG_CHUNK_FIRST_PACKET_CONTINUES |
                                      TG_CHUNK_LAST_PACKET_CONTINUES,
                                  &f2, &l2, 1, false) < 0)
    _exit(17);
  if (write(sync_fd, "x", 1) != 1) _exit(18);
  for (;;) pause();
}

static void killed_producer_loses_only_its_unfinished_packet(void **state) {
  test_service_t *ts = *state;
  raw_producer_t good;
  raw_consumer_t c;
  simple_cfg_t sc;
  start_session(ts, &good, &c, &sc, "kill.ds");
  Perfetto__Protos__ObserveEventsRequest oreq = PERFETTO__PROTOS__OBSERVE_EVENTS_REQUEST__INIT;
  Perfetto__Protos__ObservableEvents__Type types[] = {
      PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_DATA_SOURCES_INSTANCES};
  oreq.n_events_to_observe = 1;
  oreq.events_to_observe = types;
  int64_t orid = raw_invoke(&c.conn, "ObserveEvents", &oreq.base, -1, false);
  assert_true(orid > 0);

  int sync[2];
  assert_int_equal(pipe(sync), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(sync[0]);
    victim_main(ts, sync[1]);
  }
  close(sync[1]);
  struct pollfd pf = {.fd = sync[0], .events = POLLIN};
  char ch = 0;
  bool ready = poll(&pf, 1, 10000) == 1 && read(sync[0], &ch, 1) == 1 && ch == 'x';
  close(sync[0]);
  int status = tg_test_stop(pid, SIGKILL, 10000);
  if (!ready) fail_msg("the victim failed before the kill: status %#x", status);

  /* The service notices (its instance stops) and keeps serving. */
  assert_true(wait_instance_stopped(&c, orid, "kill.ds", 5000));
  assert_int_equal(raw_producer_write_packets(&good, 0, 0, 1, 0, "good", 10, 5), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&good, &page, &chunk, 1, 0), 0);

  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&c, &n);
  assert_non_null(out);
  Perfetto__Protos__TracePacket *tp[32];
  size_t k = test_packets(out, n, tp, 32);
  uint32_t victim_next = 0, good_next = 10;
  for (size_t i = 0; i < k; i++) {
    const Perfetto__Protos__TestEvent *ev = tp[i]->for_testing;
    if (!strcmp(ev->str, "victim"))
      assert_int_equal(ev->seq_value, victim_next++);
    else if (!strcmp(ev->str, "good"))
      assert_int_equal(ev->seq_value, good_next++);
    else
      fail_msg("unexpected packet %u (%zu bytes of str)", ev->seq_value, strlen(ev->str));
  }
  assert_int_equal(victim_next, 4); /* 0..3; never the unfinished 99 */
  assert_int_equal(good_next, 15);
  free_packets(out, n);
  raw_consumer_close(&c);
  raw_producer_close(&good);
}

static void consumer_disconnect_ends_its_session(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t a, b;
  simple_cfg_t sc;
  assert_int_equal(raw_producer_connect(&p, ts, "test.producer", "disc.ds", 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(&a, ts), 0);
  assert_int_equal(raw_consumer_connect(&b, ts), 0);
  simple_cfg_init(&sc, 64, 1, "disc.ds");
  sc.cfg.unique_session_name = "the-session";
  assert_int_equal(raw_consumer_enable(&a, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);

  /* While A traces, the name is taken. */
  char err[256];
  assert_int_equal(raw_consumer_enable(&b, &sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&b, 5000, err, sizeof(err)), 0);
  assert_notice_with(err, TG_N_SERVICE_BUSY, "unique_session_name: ");
  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(&b, 5000);
  assert_non_null(q);
  assert_int_equal(q->service_state->n_tracing_sessions, 1);
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);

  /* Another uid sees none of it (root sees all): a child as nobody. */
  const char *no_other = tg_test_other_user_unavailable();
  if (no_other) {
    print_message("skipped part: another uid's view: cannot run as another "
                  "user: %s\n", no_other);
  } else {
    assert_int_equal(tg_test_other_user_dir(ts->dir, 0755), 0);
    assert_int_equal(chmod(ts->consumer_sock, 0666), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      raw_consumer_t n;
      if (tg_test_become_nobody() != 0) _exit(10);
      if (raw_consumer_connect(&n, ts) != 0) _exit(11);
      Perfetto__Protos__QueryServiceStateResponse *nq = raw_consumer_query(&n, 5000);
      if (!nq) _exit(12);
      _exit(nq->service_state->n_tracing_sessions == 0 ? 0 : 13);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(chmod(ts->dir, 0700), 0);
  }

  /* Names longer than QueryServiceState's entry can carry are refused. */
  static char long_name[2001];
  memset(long_name, 'n', sizeof(long_name) - 1);
  raw_consumer_t c;
  simple_cfg_t lc;
  simple_cfg_init(&lc, 64, 1, "disc.ds");
  lc.cfg.bugreport_filename = long_name;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_int_equal(raw_consumer_enable(&c, &lc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_notice_with(err, TG_N_SERVICE_CONFIG_REFUSED, "bugreport_filename");
  raw_consumer_close(&c);

  /* A goes away without detaching: its session ends, the producer is
   * told to stop, and the name is free again. */
  assert_true(raw_hangup(&a.conn, 5000));
  assert_int_equal(raw_producer_wait_stopped(&p, 5000), 0);
  q = raw_consumer_query(&b, 5000);
  assert_non_null(q);
  assert_int_equal(q->service_state->n_tracing_sessions, 0);
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);

  p.started = false;
  assert_int_equal(raw_consumer_enable(&b, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  assert_int_equal(raw_consumer_disable(&b, 5000), 0);
  raw_consumer_close(&b);
  raw_producer_close(&p);
}

static void detached_session_survives_and_attach_returns_it(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t a, b, wrong;
  simple_cfg_t sc;
  start_session(ts, &p, &a, &sc, "attach.ds");

  Perfetto__Protos__DetachRequest det = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
  det.key = "the-key";
  assert_int_equal(raw_call(&a.conn, "Detach", &det.base, -1, NULL, NULL, 5000), 1);
  assert_true(raw_hangup(&a.conn, 5000));

  /* Written after its consumer left: kept only if the session lives on. */
  assert_int_equal(raw_producer_write_packets(&p, 0, 0, 1, 0, "detached", 1, 3), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&p, &page, &chunk, 1, 0), 0);

  assert_int_equal(raw_consumer_connect(&wrong, ts), 0);
  Perfetto__Protos__AttachRequest att = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
  att.key = "not-the-key";
  assert_int_equal(raw_call(&wrong.conn, "Attach", &att.base, -1, NULL, NULL, 5000), 0);
  raw_consumer_close(&wrong);

  assert_int_equal(raw_consumer_connect(&b, ts), 0);
  att.key = "the-key";
  ProtobufCMessage *m = NULL;
  assert_int_equal(raw_call(&b.conn, "Attach", &att.base, -1,
                            &perfetto__protos__attach_response__descriptor, &m, 5000),
                   1);
  Perfetto__Protos__AttachResponse *ar = (void *)m;
  assert_non_null(ar);
  assert_non_null(ar->trace_config);
  assert_int_equal(ar->trace_config->n_buffers, 1);
  assert_int_equal(ar->trace_config->buffers[0]->size_kb, 256);
  assert_int_equal(ar->trace_config->n_data_sources, 1);
  assert_string_equal(ar->trace_config->data_sources[0]->config->name, "attach.ds");
  perfetto__protos__attach_response__free_unpacked(ar, NULL);

  Perfetto__Protos__EnableTracingRequest en = PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.has_attach_notification_only = 1;
  en.attach_notification_only = 1;
  b.enable_req = raw_invoke(&b.conn, "EnableTracing", &en.base, -1, false);
  assert_true(b.enable_req > 0);
  assert_int_equal(raw_consumer_disable(&b, 5000), 0);
  uint32_t values[8];
  assert_int_equal(read_values(&b, values, 8), 3);
  assert_int_equal(values[0], 1);
  assert_int_equal(values[2], 3);

  /* The key was used up. */
  raw_consumer_t again;
  assert_int_equal(raw_consumer_connect(&again, ts), 0);
  assert_int_equal(raw_call(&again.conn, "Attach", &att.base, -1, NULL, NULL, 5000), 0);
  raw_consumer_close(&again);
  raw_consumer_close(&b);
  raw_producer_close(&p);
}

static void invalid_configs_are_refused_naming_the_field(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  char err[512];
  simple_cfg_t sc;

  simple_cfg_init(&sc, 64, 1, "x.ds");
  sc.dsc.has_target_buffer = 1;
  sc.dsc.target_buffer = 1; /* one buffer: only 0 is valid */
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_notice_with(err, TG_N_SERVICE_CONFIG_REFUSED,
                     "data_sources[0].config.target_buffer: 1, ");

  /* No buffers: then a data source has none to target. */
  simple_cfg_init(&sc, 64, 1, "x.ds");
  sc.cfg.n_buffers = 0;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_notice_with(err, TG_N_SERVICE_CONFIG_REFUSED,
                     "data_sources[0].config.target_buffer: 0, ");

  /* A trace_filter without bytecode does not load: refused, as Perfetto
   * refuses it. */
  simple_cfg_init(&sc, 64, 1, "x.ds");
  Perfetto__Protos__TraceConfig__TraceFilter tf =
      PERFETTO__PROTOS__TRACE_CONFIG__TRACE_FILTER__INIT;
  sc.cfg.trace_filter = &tf;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_notice_with(err, TG_N_SERVICE_CONFIG_REFUSED, "trace_filter");

  simple_cfg_init(&sc, 0, 1, "x.ds");
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_notice_with(err, TG_N_SERVICE_CONFIG_REFUSED, "size_kb");

  simple_cfg_init(&sc, 64, 1, "x.ds");
  sc.cfg.has_write_into_file = 1;
  sc.cfg.write_into_file = 1;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_notice_with(err, TG_N_SERVICE_CONFIG_REFUSED, "write_into_file");

  simple_cfg_init(&sc, 64, 1, "x.ds");
  Perfetto__Protos__TraceConfig__TriggerConfig tc =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__INIT;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger tr =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER__INIT;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *ptr = &tr;
  tr.name = "go";
  tr.producer_name_regex = "prod(";
  tc.has_trigger_mode = 1;
  tc.trigger_mode = PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING;
  tc.n_triggers = 1;
  tc.triggers = &ptr;
  sc.cfg.trigger_config = &tc;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_notice_with(err, TG_N_SERVICE_CONFIG_REFUSED, "producer_name_regex");

  /* A trigger may be waited for 7 days at most, as in Perfetto. */
  tr.producer_name_regex = NULL;
  tc.has_trigger_timeout_ms = 1;
  tc.trigger_timeout_ms = 7u * 24 * 3600 * 1000 + 1;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_notice_with(err, TG_N_SERVICE_CONFIG_REFUSED, "trigger_timeout_ms");

  /* None of them left a session behind. */
  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(&c, 5000);
  assert_non_null(q);
  assert_int_equal(q->service_state->n_tracing_sessions, 0);
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);
  raw_consumer_close(&c);
}

/* A config with no buffers and no data source (Perfetto's tests run
 * duration_ms alone) is a session that records nothing of producers: it
 * runs for its duration and ends well, and its read-out holds the
 * service's own packets only. */
static void a_session_without_buffers_runs_and_ends(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  cfg.has_duration_ms = 1;
  cfg.duration_ms = 100;
  assert_int_equal(raw_consumer_enable(&c, &cfg, -1), 0);
  char err[256] = "";
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 1);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&c, &n);
  assert_non_null(out);
  Perfetto__Protos__TracePacket *tp[8];
  assert_int_equal(test_packets(out, n, tp, 8), 0);
  free_packets(out, n);
  raw_consumer_close(&c);
}

static void duration_ms_ends_the_session_by_itself(void **state) {
  scenario_t s;
  scenario_open(&s, *state, (scenario_opts_t){.ds = "dur.ds"});
  s.sc.cfg.has_duration_ms = 1;
  s.sc.cfg.duration_ms = 300;
  int64_t t0 = tg_test_now_ms();
  scenario_start(&s);

  /* At the end the service flushes: the producer answers with its data. */
  uint64_t fid = raw_producer_wait_flush(&s.p, 0, 5000);
  assert_true(fid > 0);
  assert_true(tg_test_now_ms() - t0 >= 280);
  scenario_commit(&s, 0, "last", 1, 2, fid);
  scenario_wait_end(&s);
  assert_true(tg_test_now_ms() - t0 < 3000);
  assert_int_equal(raw_producer_wait_stopped(&s.p, 5000), 0);
  uint32_t values[4];
  assert_int_equal(read_values(&s.c, values, 4), 2);
  scenario_close(&s);
}

/* One local user holding every producer slot does not keep another's
 * producer out: the producer socket shares its limit by uid (ipc/host.h).
 * Needs root, to be two users. */
static void a_user_holding_every_producer_slot_keeps_no_one_out(void **state) {
  TG_TEST_REQUIRE_OTHER_USER();
  test_service_t *ts = *state;
  assert_int_equal(tg_test_other_user_dir(ts->dir, 0711), 0);
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* nobody: both slots, idle, until the test is done with them */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(ready[0]);
    if (tg_test_become_nobody() != 0) _exit(10);
    raw_conn_t held[2];
    for (int i = 0; i < 2; i++)
      if (raw_connect(&held[i], ts->producer_sock) != 0) _exit(11);
    if (write(ready[1], "R", 1) != 1) _exit(12);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char r = 0;
  assert_int_equal(read(ready[0], &r, 1), 1);
  close(ready[0]);
  raw_producer_t p;
  int rv = raw_producer_connect(&p, ts, "root-producer", "share.ds", 0, 0,
                                false);
  kill(pid, SIGKILL);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_int_equal(rv, 0);
  raw_producer_close(&p);
}

static int setup_two_producer_slots(void **state) {
  test_service_t *ts = calloc(1, sizeof(*ts));
  const char *args[] = {"--max-producers", "2", NULL};
  if (!ts || test_service_start_with(ts, args, 10000) < 0) {
    free(ts);
    return -1;
  }
  *state = ts;
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(flush_times_out_without_ack_and_succeeds_with_one,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(killed_producer_loses_only_its_unfinished_packet,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(consumer_disconnect_ends_its_session,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(detached_session_survives_and_attach_returns_it,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(invalid_configs_are_refused_naming_the_field,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(a_session_without_buffers_runs_and_ends,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(duration_ms_ends_the_session_by_itself,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          a_user_holding_every_producer_slot_keeps_no_one_out,
          setup_two_producer_slots, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
