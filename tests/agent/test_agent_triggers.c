/* tg_agent_activate_triggers against a real tracegated: a session with a
 * STOP_TRACING trigger ends when the agent activates it, and its trace
 * names the agent as the producer that fired it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pb/trace/trigger.pb-c.h"
#include "test_service.h"
#include "tracegate/agent.h"
#include "tracegate/error.h"

#define PRODUCER "agent-triggers"

static void test_log(void *ctx, tg_log_level_t level, const char *msg) {
  (void)ctx;
  fprintf(stderr, "agent[%d]: %s\n", (int)level, msg);
}

static void start_agent(const test_service_t *ts) {
  tg_agent_options_t o = {
      .socket_path = ts->producer_sock,
      .producer_name = PRODUCER,
      .reconnect_min_ms = 20,
      .reconnect_max_ms = 200,
      .log = test_log,
      .log_level = TG_LOG_INFO,
  };
  assert_int_equal(tg_agent_init(&o), 0);
}

static void bad_arguments_are_refused(void **state) {
  (void)state;
  const char *one[] = {"x"};
  /* No agent running: nothing could ever send them. */
  assert_int_equal(tg_agent_activate_triggers(one, 1), TG_ENOT_CONNECTED);
  assert_int_equal(tg_agent_activate_triggers(NULL, 1), -EINVAL);
  assert_int_equal(tg_agent_activate_triggers(one, 0), -EINVAL);
  const char *empty[] = {"ok", ""};
  assert_int_equal(tg_agent_activate_triggers(empty, 2), -EINVAL);
  const char *null_name[] = {"ok", NULL};
  assert_int_equal(tg_agent_activate_triggers(null_name, 2), -EINVAL);
  static char long_name[TG_AGENT_MAX_TRIGGER_NAME + 2];
  memset(long_name, 'a', sizeof(long_name) - 1);
  const char *too_long[] = {long_name};
  assert_int_equal(tg_agent_activate_triggers(too_long, 1), -EINVAL);
}

static size_t count_triggers(Perfetto__Protos__TracePacket **pk, size_t n,
                             const char *name) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER) continue;
    const Perfetto__Protos__Trigger *t = pk[i]->trigger;
    if (!t->trigger_name || strcmp(t->trigger_name, name)) continue;
    assert_non_null(t->producer_name);
    assert_string_equal(t->producer_name, PRODUCER);
    assert_int_equal(t->trusted_producer_uid, (int32_t)getuid());
    k++;
  }
  return k;
}

static void activated_trigger_stops_the_session(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t c;
  simple_cfg_t sc;
  Perfetto__Protos__TraceConfig__TriggerConfig tc =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__INIT;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger tr =
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER__INIT;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *trp = &tr;
  tr.name = (char *)"agent.stop";
  tc.has_trigger_mode = 1;
  tc.trigger_mode = PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING;
  tc.n_triggers = 1;
  tc.triggers = &trp;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 64, 1, "no.such.ds");
  sc.cfg.trigger_config = &tc;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);

  /* Activated before the agent is connected: queued, sent on connect. */
  start_agent(ts);
  const char *names[] = {"unrelated", "agent.stop"};
  assert_int_equal(tg_agent_activate_triggers(names, 2), 0);
  char err[256] = "";
  assert_int_equal(raw_consumer_wait_disabled(&c, 10000, err, sizeof(err)), 1);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&c, &n);
  assert_non_null(out);
  assert_int_equal(count_triggers(out, n, "agent.stop"), 1);
  assert_int_equal(count_triggers(out, n, "unrelated"), 0);
  free_packets(out, n);
  raw_consumer_close(&c);
  tg_agent_shutdown();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_arguments_are_refused),
      cmocka_unit_test_setup_teardown(activated_trigger_stops_the_session,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
