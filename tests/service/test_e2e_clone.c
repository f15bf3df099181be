/* tracegated end to end: CloneSession (a read-only snapshot of a running
 * session, the original running on), CLONE_SNAPSHOT triggers, and the
 * trigger packets a fired trigger leaves in the trace (moved into the
 * next clone, whose clone_snapshot_trigger packet repeats the trigger
 * that made it), and the clone a bugreport takes. Raw producers and
 * consumers, as Perfetto's clients speak to traced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pb/common/observable_events.pb-c.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "pb/trace/test_event.pb-c.h"
#include "pb/trace/trigger.pb-c.h"
#include "test_notice.h"
#include "test_proc.h"
#include "service_scenario.h"
#include "test_service.h"

static int activate_triggers(raw_producer_t *p, char **names, size_t n) {
  Perfetto__Protos__ActivateTriggersRequest r =
      PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
  r.n_trigger_names = n;
  r.trigger_names = names;
  return raw_call(&p->conn, "ActivateTriggers", &r.base, -1, NULL, NULL, 5000);
}

static size_t count_configs(Perfetto__Protos__TracePacket **pk, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += pk[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG;
  return k;
}

/* The trigger packets among |pk| named |name|; checks who fired them. */
static size_t count_triggers(Perfetto__Protos__TracePacket **pk, size_t n,
                             const char *name, const char *producer) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER) continue;
    const Perfetto__Protos__Trigger *t = pk[i]->trigger;
    assert_non_null(t->trigger_name);
    if (strcmp(t->trigger_name, name)) continue;
    assert_non_null(t->producer_name);
    assert_string_equal(t->producer_name, producer);
    assert_true(t->has_trusted_producer_uid);
    assert_int_equal(t->trusted_producer_uid, (int32_t)getuid());
    assert_int_equal(pk[i]->trusted_packet_sequence_id, 1); /* the service's */
    k++;
  }
  return k;
}

/* The packet of field |data_case| (trigger or clone_snapshot_trigger)
 * whose trigger is |name|, or NULL; asserts there is at most one. */
static const Perfetto__Protos__TracePacket *
trigger_packet(Perfetto__Protos__TracePacket **pk, size_t n,
               Perfetto__Protos__TracePacket__DataCase data_case, const char *name) {
  const Perfetto__Protos__TracePacket *found = NULL;
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case != data_case) continue;
    const Perfetto__Protos__Trigger *t =
        data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER
            ? pk[i]->trigger : pk[i]->clone_snapshot_trigger;
    if (strcmp(t->trigger_name, name)) continue;
    assert_null(found);
    found = pk[i];
  }
  return found;
}

static size_t count_case(Perfetto__Protos__TracePacket **pk, size_t n,
                         Perfetto__Protos__TracePacket__DataCase data_case) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += pk[i]->data_case == data_case;
  return k;
}

/* A clone_snapshot_trigger packet says what its trigger packet said, and
 * when, as Perfetto's MultipleTriggersCloneSnapshot test checks. */
static void assert_same_trigger(const Perfetto__Protos__TracePacket *clone_pkt,
                                const Perfetto__Protos__TracePacket *trig_pkt) {
  const Perfetto__Protos__Trigger *a = clone_pkt->clone_snapshot_trigger;
  const Perfetto__Protos__Trigger *b = trig_pkt->trigger;
  assert_true(clone_pkt->has_timestamp && trig_pkt->has_timestamp);
  assert_true(trig_pkt->timestamp > 0);
  assert_int_equal(clone_pkt->timestamp, trig_pkt->timestamp);
  assert_string_equal(a->trigger_name, b->trigger_name);
  assert_string_equal(a->producer_name, b->producer_name);
  assert_int_equal(a->has_trusted_producer_uid, b->has_trusted_producer_uid);
  assert_int_equal(a->trusted_producer_uid, b->trusted_producer_uid);
  assert_true(a->has_stop_delay_ms && b->has_stop_delay_ms);
  assert_int_equal(a->stop_delay_ms, b->stop_delay_ms);
  assert_int_equal(clone_pkt->trusted_packet_sequence_id, 1);
}

/* The id of the only session the service lists. */
static uint64_t only_session_id(raw_consumer_t *c) {
  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(c, 5000);
  assert_non_null(q);
  assert_non_null(q->service_state);
  assert_int_equal(q->service_state->n_tracing_sessions, 1);
  uint64_t id = q->service_state->tracing_sessions[0]->id;
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);
  assert_true(id > 0);
  return id;
}

static int64_t clone_invoke(raw_consumer_t *c, uint64_t id, const char *name,
                            const char *trigger) {
  Perfetto__Protos__CloneSessionRequest r = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  if (name) {
    r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
    r.unique_session_name = (char *)name;
  } else {
    r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
    r.session_id = id;
  }
  r.clone_trigger_name = (char *)trigger;
  if (trigger) r.clone_trigger_producer_name = (char *)"trigger.producer";
  if (trigger) {
    r.has_clone_trigger_trusted_producer_uid = 1;
    r.clone_trigger_trusted_producer_uid = (int32_t)getuid();
  }
  return raw_invoke(&c->conn, "CloneSession", &r.base, -1, false);
}

/* The CloneSession reply: 1 if it succeeded, 0 if refused (reason copied
 * into |err|). |uuid| (may be NULL) gets {msb, lsb}, zero when absent. */
static int clone_wait_uuid(raw_consumer_t *c, int64_t rid, char *err,
                           size_t errlen, int64_t *uuid) {
  ProtobufCMessage *m = NULL;
  assert_true(rid > 0);
  assert_int_equal(raw_wait_reply(&c->conn, (uint64_t)rid,
                                  &perfetto__protos__clone_session_response__descriptor,
                                  &m, 5000), 1);
  Perfetto__Protos__CloneSessionResponse *r = (void *)m;
  assert_non_null(r);
  assert_true(r->has_success);
  int ok = r->success ? 1 : 0;
  if (err) snprintf(err, errlen, "%s", r->error ? r->error : "");
  if (ok) assert_null(r->error);
  if (uuid) {
    uuid[0] = r->has_uuid_msb ? r->uuid_msb : 0;
    uuid[1] = r->has_uuid_lsb ? r->uuid_lsb : 0;
  }
  protobuf_c_message_free_unpacked(m, NULL);
  return ok;
}

static int clone_wait(raw_consumer_t *c, int64_t rid, char *err, size_t errlen) {
  return clone_wait_uuid(c, rid, err, errlen, NULL);
}

/* The clone |rid| of |k| made once |p| acked its flush (newer than flush
 * |after|); returns that flush's id. */
static uint64_t clone_acked(raw_consumer_t *k, raw_producer_t *p, int64_t rid,
                            uint64_t after) {
  uint64_t fid = raw_producer_wait_flush(p, after, 5000);
  assert_true(fid > 0);
  assert_int_equal(raw_producer_commit_ex(p, NULL, 0, NULL, 0, fid, false), 0);
  assert_int_equal(clone_wait(k, rid, NULL, 0), 1);
  return fid;
}

/* The trace's TraceUuid packets: how many, the last one in |uuid|. */
static size_t trace_uuids(Perfetto__Protos__TracePacket **pk, size_t n,
                          int64_t *uuid) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_UUID)
      continue;
    uuid[0] = pk[i]->trace_uuid->msb;
    uuid[1] = pk[i]->trace_uuid->lsb;
    count++;
  }
  return count;
}

static void free_buffers(raw_consumer_t *c) {
  Perfetto__Protos__FreeBuffersRequest r = PERFETTO__PROTOS__FREE_BUFFERS_REQUEST__INIT;
  assert_int_equal(raw_call(&c->conn, "FreeBuffers", &r.base, -1, NULL, NULL, 5000), 1);
}

static void clone_snapshots_a_running_session(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t k;
  scenario_t s;
  scenario_open(&s, ts, (scenario_opts_t){.ds = "clone.ds", .buffer_kb = 256});
  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  scenario_start(&s);
  assert_int_equal(raw_producer_register_writer(&s.p, 1), 0);
  scenario_commit(&s, 0, "before", 0, 5, 0);

  /* The clone flushes the session first: what the producer commits in
   * answer is in the snapshot. */
  int64_t rid = clone_invoke(&k, only_session_id(&k), NULL, NULL);
  uint64_t fid = raw_producer_wait_flush(&s.p, 0, 5000);
  assert_true(fid > 0);
  scenario_commit(&s, 1, "flushed", 0, 3, fid);
  int64_t uuid[2], in_trace[2] = {0, 0}, original[2] = {0, 0};
  assert_int_equal(clone_wait_uuid(&k, rid, NULL, 0, uuid), 1);
  /* Perfetto's reply names the clone's trace by its UUID (version 4). */
  assert_true(uuid[0] != 0 || uuid[1] != 0);
  assert_int_equal(((uint64_t)uuid[0] >> 12) & 0xf, 4);

  /* The original runs on: its producer was not stopped, and writes more. */
  assert_false(s.p.stopped);
  scenario_commit(&s, 2, "after", 0, 4, 0);

  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&k, &n);
  assert_non_null(out);
  assert_int_equal(count_test_str(out, n, "before"), 5);
  assert_int_equal(count_test_str(out, n, "flushed"), 3);
  assert_int_equal(count_test_str(out, n, "after"), 0);
  assert_int_equal(count_configs(out, n), 1); /* a trace of its own */
  /* The snapshot's trace carries the UUID the reply gave. */
  assert_int_equal(trace_uuids(out, n, in_trace), 1);
  assert_true(in_trace[0] == uuid[0] && in_trace[1] == uuid[1]);
  free_packets(out, n);
  free_buffers(&k);

  /* Reading the snapshot took nothing from the original. */
  scenario_stop(&s);
  out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);
  assert_int_equal(count_test_str(out, n, "before"), 5);
  assert_int_equal(count_test_str(out, n, "flushed"), 3);
  assert_int_equal(count_test_str(out, n, "after"), 4);
  /* The original keeps a UUID of its own: two traces, two ids. */
  assert_int_equal(trace_uuids(out, n, original), 1);
  assert_false(original[0] == uuid[0] && original[1] == uuid[1]);
  free_packets(out, n);
  raw_consumer_close(&k);
  scenario_close(&s);
}

static void clone_by_name_and_refusals(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t k;
  char err[256];
  scenario_t s;
  scenario_open(&s, ts, (scenario_opts_t){.ds = "clone.ds"});
  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  s.sc.cfg.unique_session_name = (char *)"named";
  scenario_start(&s);
  uint64_t id = only_session_id(&k);

  assert_int_equal(clone_wait(&k, clone_invoke(&k, id + 100, NULL, NULL), err, sizeof(err)), 0);
  assert_notice(err, TG_N_SERVICE_NO_SUCH_SESSION);
  assert_int_equal(clone_wait(&k, clone_invoke(&k, 0, "unnamed", NULL), err, sizeof(err)), 0);
  assert_notice(err, TG_N_SERVICE_NO_SUCH_SESSION);
  /* The session's own consumer already has a session. */
  assert_int_equal(clone_wait(&s.c, clone_invoke(&s.c, id, NULL, NULL), err, sizeof(err)), 0);
  assert_notice(err, TG_N_SERVICE_HAS_SESSION);

  /* By name; the flush has no producer data to wait for beyond the ack. */
  int64_t rid = clone_invoke(&k, 0, "named", NULL);
  uint64_t fid = raw_producer_wait_flush(&s.p, 0, 5000);
  assert_true(fid > 0);
  scenario_commit(&s, 0, "snap", 0, 2, fid);
  assert_int_equal(clone_wait(&k, rid, NULL, 0), 1);
  /* The snapshot does not hold the name: a new session may take it once
   * the original ends, and a second clone by name finds the original. */
  raw_consumer_t k2;
  assert_int_equal(raw_consumer_connect(&k2, ts), 0);
  rid = clone_invoke(&k2, 0, "named", NULL);
  fid = clone_acked(&k2, &s.p, rid, fid);
  /* A connection with a snapshot cannot clone again. */
  assert_int_equal(clone_wait(&k2, clone_invoke(&k2, id, NULL, NULL), err, sizeof(err)), 0);

  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&k, &n);
  assert_non_null(out);
  assert_int_equal(count_test_str(out, n, "snap"), 2);
  free_packets(out, n);
  raw_consumer_close(&k2); /* a snapshot ends with its connection */
  raw_consumer_close(&k);
  scenario_stop(&s);
  scenario_close(&s);
}

static void stop_trigger_leaves_a_trigger_packet(void **state) {
  scenario_t s;
  scenario_open(&s, *state,
                (scenario_opts_t){.ds = "trig.ds", .trigger_producer = true});
  scenario_trigger(&s, SCENARIO_STOP_TRACING, "stop", 0);
  scenario_start(&s);
  assert_int_equal(scenario_fire(&s, "unrelated"), 1);
  assert_int_equal(scenario_fire(&s, "stop"), 1);
  uint64_t fid = raw_producer_wait_flush(&s.p, 0, 5000);
  assert_true(fid > 0);
  assert_int_equal(raw_producer_commit_ex(&s.p, NULL, 0, NULL, 0, fid, false), 0);
  scenario_wait_end(&s);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);
  assert_int_equal(count_triggers(out, n, "stop", "trigger.producer"), 1);
  assert_int_equal(count_triggers(out, n, "unrelated", "trigger.producer"), 0);
  free_packets(out, n);
  scenario_close(&s);
}

/* Waits on the ObserveEvents stream |orid| for a clone_trigger_hit. */
static void wait_clone_hit(raw_consumer_t *c, int64_t orid, uint64_t session_id,
                           const char *name) {
  int64_t deadline = tg_test_now_ms() + 5000;
  for (;;) {
    int64_t left = deadline - tg_test_now_ms();
    assert_true(left > 0);
    ProtobufCMessage *m = NULL;
    assert_int_equal(raw_wait_reply(&c->conn, (uint64_t)orid,
                                    &perfetto__protos__observe_events_response__descriptor,
                                    &m, (int)left), 1);
    Perfetto__Protos__ObserveEventsResponse *r = (void *)m;
    const Perfetto__Protos__ObservableEvents__CloneTriggerHit *hit =
        r && r->events ? r->events->clone_trigger_hit : NULL;
    bool got = hit != NULL;
    if (hit) {
      assert_int_equal(hit->tracing_session_id, (int64_t)session_id);
      assert_string_equal(hit->trigger_name, name);
      assert_string_equal(hit->producer_name, "trigger.producer");
      assert_int_equal(hit->producer_uid, (int32_t)getuid());
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (got) return;
  }
}

/* Starts the ObserveEvents stream of clone_trigger_hit; its request id. */
static int64_t observe_clone_hits(raw_consumer_t *c) {
  Perfetto__Protos__ObserveEventsRequest oreq = PERFETTO__PROTOS__OBSERVE_EVENTS_REQUEST__INIT;
  Perfetto__Protos__ObservableEvents__Type types[] = {
      PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_CLONE_TRIGGER_HIT};
  oreq.n_events_to_observe = 1;
  oreq.events_to_observe = types;
  int64_t orid = raw_invoke(&c->conn, "ObserveEvents", &oreq.base, -1, false);
  assert_true(orid > 0);
  return orid;
}

static void clone_snapshot_trigger_asks_the_consumer_to_clone(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t k;
  scenario_t s;
  scenario_open(&s, ts,
                (scenario_opts_t){.ds = "snap.ds", .trigger_producer = true});
  scenario_trigger(&s, SCENARIO_CLONE_SNAPSHOT, "snap", 0);
  int64_t orid = observe_clone_hits(&s.c);
  scenario_start(&s);
  assert_int_equal(raw_producer_register_writer(&s.p, 1), 0);
  scenario_commit(&s, 0, "early", 0, 3, 0);

  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  uint64_t id = only_session_id(&k);
  assert_int_equal(scenario_fire(&s, "snap"), 1);
  wait_clone_hit(&s.c, orid, id, "snap");
  /* The session was neither stopped nor flushed by the trigger itself. */
  assert_false(s.p.stopped);

  /* As perfetto_cmd does: a second connection clones, naming the trigger. */
  int64_t rid = clone_invoke(&k, id, NULL, "snap");
  clone_acked(&k, &s.p, rid, 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&k, &n);
  assert_non_null(out);
  assert_int_equal(count_test_str(out, n, "early"), 3);
  assert_int_equal(count_triggers(out, n, "snap", "trigger.producer"), 1);
  free_packets(out, n);
  raw_consumer_close(&k);

  /* The original goes on and ends normally, its trigger recorded too. */
  scenario_commit(&s, 1, "late", 0, 2, 0);
  scenario_stop(&s);
  out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);
  assert_int_equal(count_test_str(out, n, "early"), 3);
  assert_int_equal(count_test_str(out, n, "late"), 2);
  assert_int_equal(count_triggers(out, n, "snap", "trigger.producer"), 1);
  free_packets(out, n);
  scenario_close(&s);
}

/* Perfetto's MultipleTriggersCloneSnapshot, at the service: two triggers
 * fired together, "t2" cloning after its short delay and "t1" after its
 * longer one. The first clone has both trigger packets and a
 * clone_snapshot_trigger for t2; the session then holds no trigger, so
 * the second has none and a clone_snapshot_trigger for t1 saying what
 * t1's packet said, its stop_delay_ms included. */
static void clone_snapshot_triggers_move_to_the_first_clone(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t k1, k2, k3;
  scenario_t s;
  scenario_open(&s, ts,
                (scenario_opts_t){.ds = "snap.ds", .trigger_producer = true});
  scenario_trigger(&s, SCENARIO_CLONE_SNAPSHOT, "t1", 0);
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger t2 =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER__INIT;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *trs[2] = {&s.trig.tr, &t2};
  /* The service's timers run out in the order of their delays, however
   * late its loop runs: t2 clones first. */
  s.trig.tr.has_stop_delay_ms = 1;
  s.trig.tr.stop_delay_ms = 150;
  t2.name = (char *)"t2";
  t2.has_stop_delay_ms = 1;
  t2.stop_delay_ms = 50;
  s.trig.tc.n_triggers = 2;
  s.trig.tc.triggers = trs;
  int64_t orid = observe_clone_hits(&s.c);
  scenario_start(&s);
  assert_int_equal(raw_consumer_connect(&k1, ts), 0);
  assert_int_equal(raw_consumer_connect(&k2, ts), 0);
  uint64_t id = only_session_id(&k1);
  char *names[2] = {(char *)"t1", (char *)"t2"};
  assert_int_equal(activate_triggers(&s.t, names, 2), 1);

  /* Clones as tracegate's CLI makes them: naming the trigger, without its
   * time, which the service then takes from the hit it told. */
  wait_clone_hit(&s.c, orid, id, "t2");
  int64_t rid = clone_invoke(&k1, id, NULL, "t2");
  uint64_t fid = clone_acked(&k1, &s.p, rid, 0);
  wait_clone_hit(&s.c, orid, id, "t1");
  rid = clone_invoke(&k2, id, NULL, "t1");
  fid = clone_acked(&k2, &s.p, rid, fid);

  size_t n1 = 0, n2 = 0;
  Perfetto__Protos__TracePacket **s1 = raw_consumer_read(&k1, &n1);
  Perfetto__Protos__TracePacket **s2 = raw_consumer_read(&k2, &n2);
  assert_non_null(s1);
  assert_non_null(s2);
  const Perfetto__Protos__TracePacket *tr1 =
      trigger_packet(s1, n1, PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER, "t1");
  const Perfetto__Protos__TracePacket *tr2 =
      trigger_packet(s1, n1, PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER, "t2");
  assert_non_null(tr1);
  assert_non_null(tr2);
  assert_int_equal(count_triggers(s1, n1, "t1", "trigger.producer"), 1);
  assert_int_equal(count_case(s1, n1, PERFETTO__PROTOS__TRACE_PACKET__DATA_CLONE_SNAPSHOT_TRIGGER), 1);
  const Perfetto__Protos__TracePacket *ct2 = trigger_packet(
      s1, n1, PERFETTO__PROTOS__TRACE_PACKET__DATA_CLONE_SNAPSHOT_TRIGGER, "t2");
  assert_non_null(ct2);
  assert_int_equal(ct2->clone_snapshot_trigger->stop_delay_ms, 50);
  assert_same_trigger(ct2, tr2);
  assert_int_equal(count_case(s2, n2, PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER), 0);
  assert_int_equal(count_case(s2, n2, PERFETTO__PROTOS__TRACE_PACKET__DATA_CLONE_SNAPSHOT_TRIGGER), 1);
  const Perfetto__Protos__TracePacket *ct1 = trigger_packet(
      s2, n2, PERFETTO__PROTOS__TRACE_PACKET__DATA_CLONE_SNAPSHOT_TRIGGER, "t1");
  assert_non_null(ct1);
  assert_int_equal(ct1->clone_snapshot_trigger->stop_delay_ms, 150);
  assert_same_trigger(ct1, tr1);
  free_packets(s1, n1);
  free_packets(s2, n2);

  /* As a Perfetto CLI sends it: the trigger's time and delay in the
   * request (fields 8 and 9) are what the packet says. */
  assert_int_equal(raw_consumer_connect(&k3, ts), 0);
  Perfetto__Protos__CloneSessionRequest r = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
  r.session_id = id;
  r.clone_trigger_name = (char *)"by.request";
  r.has_clone_trigger_boot_time_ns = 1;
  r.clone_trigger_boot_time_ns = 123456789;
  r.has_clone_trigger_delay_ms = 1;
  r.clone_trigger_delay_ms = 7;
  rid = raw_invoke(&k3.conn, "CloneSession", &r.base, -1, false);
  fid = clone_acked(&k3, &s.p, rid, fid);
  size_t n3 = 0;
  Perfetto__Protos__TracePacket **s3 = raw_consumer_read(&k3, &n3);
  assert_non_null(s3);
  const Perfetto__Protos__TracePacket *ct = trigger_packet(
      s3, n3, PERFETTO__PROTOS__TRACE_PACKET__DATA_CLONE_SNAPSHOT_TRIGGER, "by.request");
  assert_non_null(ct);
  assert_int_equal(ct->timestamp, 123456789);
  assert_int_equal(ct->clone_snapshot_trigger->stop_delay_ms, 7);
  assert_false(ct->clone_snapshot_trigger->producer_name != NULL);
  free_packets(s3, n3);

  raw_consumer_close(&k3);
  raw_consumer_close(&k2);
  raw_consumer_close(&k1);
  scenario_close(&s);
}

/* A clone that fails leaves the trigger hit it named for the next one:
 * on one connection a clone naming no trigger and one naming "snap" are
 * sent together; the first succeeds, so the second is refused (the
 * connection has a session by then). A clone from another connection
 * then still gets the hit's time in its clone_snapshot_trigger packet,
 * though it sends a time and delay of 0 (as a client that copies the
 * hit's fields, which ours does not carry, into its request). */
static void a_failed_clone_leaves_the_trigger_hit(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t k, k2;
  scenario_t s;
  scenario_open(&s, ts,
                (scenario_opts_t){.ds = "snap.ds", .trigger_producer = true});
  scenario_trigger(&s, SCENARIO_CLONE_SNAPSHOT, "snap", 0);
  int64_t orid = observe_clone_hits(&s.c);
  scenario_start(&s);
  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  assert_int_equal(raw_consumer_connect(&k2, ts), 0);
  uint64_t id = only_session_id(&k);
  assert_int_equal(scenario_fire(&s, "snap"), 1);
  wait_clone_hit(&s.c, orid, id, "snap");

  int64_t rid1 = clone_invoke(&k, id, NULL, NULL);
  int64_t rid2 = clone_invoke(&k, id, NULL, "snap");
  uint64_t f1 = raw_producer_wait_flush(&s.p, 0, 5000);
  assert_true(f1 > 0);
  uint64_t f2 = raw_producer_wait_flush(&s.p, f1, 5000);
  assert_true(f2 > f1);
  /* Acks are cumulative: the two clones finish in the order they came. */
  assert_int_equal(raw_producer_commit_ex(&s.p, NULL, 0, NULL, 0, f2, false), 0);
  assert_int_equal(clone_wait(&k, rid1, NULL, 0), 1);
  char err[256];
  assert_int_equal(clone_wait(&k, rid2, err, sizeof(err)), 0);

  Perfetto__Protos__CloneSessionRequest r = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
  r.session_id = id;
  r.clone_trigger_name = (char *)"snap";
  r.clone_trigger_producer_name = (char *)"trigger.producer";
  r.has_clone_trigger_trusted_producer_uid = 1;
  r.clone_trigger_trusted_producer_uid = (int32_t)getuid();
  r.has_clone_trigger_boot_time_ns = 1;
  r.has_clone_trigger_delay_ms = 1;
  int64_t rid3 = raw_invoke(&k2.conn, "CloneSession", &r.base, -1, false);
  clone_acked(&k2, &s.p, rid3, f2);
  size_t n1 = 0, n2 = 0;
  Perfetto__Protos__TracePacket **s1 = raw_consumer_read(&k, &n1);
  Perfetto__Protos__TracePacket **s2 = raw_consumer_read(&k2, &n2);
  assert_non_null(s1);
  assert_non_null(s2);
  const Perfetto__Protos__TracePacket *tr =
      trigger_packet(s1, n1, PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER, "snap");
  assert_non_null(tr);
  assert_int_equal(count_case(s1, n1, PERFETTO__PROTOS__TRACE_PACKET__DATA_CLONE_SNAPSHOT_TRIGGER), 0);
  const Perfetto__Protos__TracePacket *ct = trigger_packet(
      s2, n2, PERFETTO__PROTOS__TRACE_PACKET__DATA_CLONE_SNAPSHOT_TRIGGER, "snap");
  assert_non_null(ct);
  assert_same_trigger(ct, tr);
  free_packets(s1, n1);
  free_packets(s2, n2);
  raw_consumer_close(&k2);
  raw_consumer_close(&k);
  scenario_close(&s);
}

/* A bugreport clone (session_id kBugreportSessionId, or for_bugreport
 * naming no session): the STARTED session with the highest positive
 * bugreport_score the caller may clone; refused when there is none. */
static int clone_for_bugreport(raw_consumer_t *k, bool magic_id, char *err,
                               size_t errlen) {
  Perfetto__Protos__CloneSessionRequest r = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  r.has_for_bugreport = 1;
  r.for_bugreport = 1;
  r.has_skip_trace_filter = 1;
  r.skip_trace_filter = 1;
  if (magic_id) {
    r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
    r.session_id = UINT64_MAX;
  }
  return clone_wait(k, raw_invoke(&k->conn, "CloneSession", &r.base, -1, false), err,
                    errlen);
}

static int32_t cloned_score(raw_consumer_t *k) {
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(k, &n);
  assert_non_null(pk);
  int32_t score = -1;
  for (size_t i = 0; i < n; i++)
    if (pk[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG)
      score = pk[i]->trace_config->bugreport_score;
  free_packets(pk, n);
  return score;
}

static void clone_for_bugreport_takes_the_highest_score(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t c[3], k;
  simple_cfg_t sc;
  char err[256];
  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  assert_int_equal(clone_for_bugreport(&k, true, err, sizeof(err)), 0);
  assert_notice(err, TG_N_SERVICE_NO_BUGREPORT_SESSION);

  /* Scores 0 (never a bugreport's), 3 and 2. */
  const int32_t scores[3] = {0, 3, 2};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(raw_consumer_connect(&c[i], ts), 0);
    simple_cfg_init(&sc, 64, 1, "br.ds");
    sc.cfg.has_bugreport_score = scores[i] != 0;
    sc.cfg.bugreport_score = scores[i];
    assert_int_equal(raw_consumer_enable(&c[i], &sc.cfg, -1), 0);
  }
  assert_int_equal(clone_for_bugreport(&k, true, NULL, 0), 1);
  assert_int_equal(cloned_score(&k), 3);
  raw_consumer_close(&k);
  /* The best one gone, the next best; for_bugreport alone works too. */
  assert_int_equal(raw_consumer_disable(&c[1], 5000), 0);
  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  assert_int_equal(clone_for_bugreport(&k, false, NULL, 0), 1);
  assert_int_equal(cloned_score(&k), 2);
  raw_consumer_close(&k);
  /* Only the score 0 left: nothing is a bugreport's. */
  assert_int_equal(raw_consumer_disable(&c[2], 5000), 0);
  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  assert_int_equal(clone_for_bugreport(&k, true, err, sizeof(err)), 0);
  assert_notice(err, TG_N_SERVICE_NO_BUGREPORT_SESSION);
  raw_consumer_close(&k);
  for (int i = 0; i < 3; i++) raw_consumer_close(&c[i]);
}

/* A producer that fires one CLONE_SNAPSHOT trigger over and over: at most
 * TG_SESSION_MAX_CLONE_WAITS wait for their delay, the rest are ignored,
 * and once the waits ended a new trigger clones again. */
static void a_trigger_storm_waits_for_a_bounded_number_of_clones(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t k;
  scenario_t s;
  scenario_open(&s, ts,
                (scenario_opts_t){.ds = "storm.ds", .trigger_producer = true});
  scenario_trigger(&s, SCENARIO_CLONE_SNAPSHOT, "storm", 0);
  /* A second trigger, to tell the hits after the storm apart. */
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger after =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER__INIT;
  after.name = "after";
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *both[] = {&s.trig.tr, &after};
  s.trig.tc.n_triggers = 2;
  s.trig.tc.triggers = both;
  s.trig.tr.has_stop_delay_ms = 1;
  s.trig.tr.stop_delay_ms = 100;
  int64_t orid = observe_clone_hits(&s.c);
  scenario_start(&s);
  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  uint64_t id = only_session_id(&k);
  raw_consumer_close(&k);
  /* One request: every trigger arrives before any delay runs out. */
  enum { STORM = 40, WAITS = 16 };
  char *names[STORM];
  for (int i = 0; i < STORM; i++) names[i] = "storm";
  assert_int_equal(activate_triggers(&s.t, names, STORM), 1);
  for (int i = 0; i < WAITS; i++) wait_clone_hit(&s.c, orid, id, "storm");
  /* The next hit is the new trigger's, not a 17th of the storm's. */
  assert_int_equal(scenario_fire(&s, "after"), 1);
  wait_clone_hit(&s.c, orid, id, "after");
  scenario_stop(&s);
  scenario_close(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(a_trigger_storm_waits_for_a_bounded_number_of_clones,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_snapshots_a_running_session,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_by_name_and_refusals, test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(stop_trigger_leaves_a_trigger_packet,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_snapshot_trigger_asks_the_consumer_to_clone,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_snapshot_triggers_move_to_the_first_clone,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(a_failed_clone_leaves_the_trigger_hit,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_for_bugreport_takes_the_highest_score,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
