/* One recording on a real tracegated: the steps service_scenario.h
 * names, each asserted. */
#include "service_scenario.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "pb/ipc/producer_port.pb-c.h"
#include "pb/trace/test_event.pb-c.h"

enum { STEP_MS = 5000 };

void scenario_open(scenario_t *s, const test_service_t *ts,
                   scenario_opts_t o) {
  memset(s, 0, sizeof(*s));
  uint32_t page_kb = o.page_kb ? o.page_kb : 4;
  uint32_t smb_kb = o.page_kb || o.smb_kb ? o.smb_kb : 64;
  assert_int_equal(
      raw_producer_connect(&s->p, ts, o.producer ? o.producer : "test.producer",
                           o.ds, page_kb, smb_kb, false),
      0);
  if (o.trigger_producer) {
    assert_int_equal(raw_producer_connect(&s->t, ts, "trigger.producer", NULL,
                                          0, 0, false),
                     0);
    s->has_t = true;
  }
  assert_int_equal(raw_consumer_connect(&s->c, ts), 0);
  simple_cfg_init(&s->sc, o.buffer_kb ? o.buffer_kb : 64,
                  o.policy ? o.policy : 1, o.ds);
}

void trigger_cfg_init(trigger_cfg_t *t, simple_cfg_t *sc,
                      scenario_trigger_mode_t mode, const char *name,
                      uint32_t timeout_ms) {
  perfetto__protos__trace_config__trigger_config__init(&t->tc);
  perfetto__protos__trace_config__trigger_config__trigger__init(&t->tr);
  t->tr.name = (char *)name;
  t->trp = &t->tr;
  t->tc.has_trigger_mode = 1;
  t->tc.trigger_mode = mode;
  t->tc.n_triggers = 1;
  t->tc.triggers = &t->trp;
  if (timeout_ms) {
    t->tc.has_trigger_timeout_ms = 1;
    t->tc.trigger_timeout_ms = timeout_ms;
  }
  sc->cfg.trigger_config = &t->tc;
}

void scenario_trigger(scenario_t *s, scenario_trigger_mode_t mode,
                      const char *name, uint32_t timeout_ms) {
  trigger_cfg_init(&s->trig, &s->sc, mode, name, timeout_ms);
}

void scenario_enable(scenario_t *s) {
  assert_int_equal(raw_consumer_enable(&s->c, &s->sc.cfg, -1), 0);
}

void scenario_start(scenario_t *s) { scenario_start_into(s, -1); }

void scenario_start_into(scenario_t *s, int fd) {
  assert_int_equal(raw_consumer_enable(&s->c, &s->sc.cfg, fd), 0);
  assert_int_equal(raw_producer_wait_started(&s->p, STEP_MS), 0);
}

void scenario_commit(scenario_t *s, uint32_t chunk_id, const char *str,
                     uint32_t first, unsigned n, uint64_t flush_id) {
  assert_int_equal(
      raw_producer_write_packets(&s->p, 0, 0, 1, chunk_id, str, first, n), 0);
  raw_move_t mv = {0, 0, s->p.target_buffer};
  assert_int_equal(
      raw_producer_commit_ex(&s->p, &mv, 1, NULL, 0, flush_id, false), 0);
}

int scenario_fire(scenario_t *s, const char *name) {
  assert_true(s->has_t);
  char *names[1] = {(char *)name};
  Perfetto__Protos__ActivateTriggersRequest r =
      PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
  r.n_trigger_names = 1;
  r.trigger_names = names;
  return raw_call(&s->t.conn, "ActivateTriggers", &r.base, -1, NULL, NULL,
                  STEP_MS);
}

void scenario_stop(scenario_t *s) {
  assert_int_equal(raw_consumer_disable(&s->c, STEP_MS), 0);
}

void scenario_wait_end(scenario_t *s) {
  assert_int_equal(raw_consumer_wait_disabled(&s->c, STEP_MS, NULL, 0), 1);
}

void scenario_read(scenario_t *s) {
  if (s->pk) free_packets(s->pk, s->n);
  s->n = 0;
  s->pk = raw_consumer_read(&s->c, &s->n);
  assert_non_null(s->pk);
}

static const char *test_str(const Perfetto__Protos__TracePacket *pk) {
  return pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING
             ? pk->for_testing->str
             : NULL;
}

size_t scenario_count(const scenario_t *s, const char *str, uint32_t first) {
  size_t k = 0;
  for (size_t i = 0; i < s->n; i++) {
    const char *got = test_str(s->pk[i]);
    if (!got || strcmp(got, str)) continue;
    assert_int_equal(s->pk[i]->for_testing->seq_value, first + k);
    k++;
  }
  return k;
}

size_t count_test_str(Perfetto__Protos__TracePacket **pk, size_t n,
                      const char *str) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const char *got = test_str(pk[i]);
    k += got && !strcmp(got, str);
  }
  return k;
}

void scenario_close(scenario_t *s) {
  if (s->pk) free_packets(s->pk, s->n);
  s->pk = NULL;
  raw_consumer_close(&s->c);
  raw_producer_close(&s->p);
  if (s->has_t) raw_producer_close(&s->t);
}
