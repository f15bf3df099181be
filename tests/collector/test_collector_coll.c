/* coll.c's set-up, driven through coll_prepare(): the flight config it
 * accepts and refuses (rings only, running until stopped, read by clones
 * only, no trigger_config of its own), the trigger_config it makes from
 * the config's trigger lines, TLS and the dialer; and coll_loop_ms(), the
 * daemon's one clock. Files in the fleet directory (pki/ from tg-certs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client/session_cache.h"
#include "collector/daemon/boost.h"
#include "collector/daemon/coll.h"
#include "collector/daemon/coll_test.h"
#include "fleet_harness.h"
#include "pb/config/trace_config.pb-c.h"

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("collprep");
}

#define RING "buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
#define DS "data_sources { config { name: \"fleet.ds\" } }\n"

/* The config (with |config_extra| lines) and |flight| as its trace_config. */
static void load(tg_coll_config_t *cfg, const char *flight,
                 const char *config_extra) {
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "w");
  assert_non_null(f);
  fputs(flight, f);
  assert_int_equal(fclose(f), 0);
  f = fopen(fleet_in_dir("hosts.txt"), "w");
  assert_non_null(f);
  assert_int_equal(fclose(f), 0);
  f = fopen(fleet_in_dir("collector.conf"), "w");
  assert_non_null(f);
  fprintf(f, "hosts = hosts.txt\nca = pki/ca.pem\ncert = pki/alice.pem\n"
             "key = pki/alice.key\ntrace_config = flight.pbtxt\n"
             "store = store\nsession_key = unit\n%s",
          config_extra ? config_extra : "");
  assert_int_equal(fclose(f), 0);
  char err[512];
  if (tg_coll_config_load(fleet_in_dir("collector.conf"), cfg, NULL, NULL,
                          err, sizeof(err)) < 0)
    fail_msg("the config: %s", err);
}

static void unprepare(coll_t *c) {
  perfetto__protos__trace_config__free_unpacked(c->flight, NULL);
  coll_boost_config_free(c);
  tg_session_cache_free(c->sessions);
  tg_tls_config_free(c->tls);
  tg_coll_config_free(&c->cfg);
}

/* Each flight config a flight recorder cannot use is refused; nothing
 * is left allocated (LeakSanitizer watches). */
static void a_flight_config_that_is_no_ring_is_refused(void **state) {
  (void)state;
  static const char *const bad[] = {
      DS,                                                      /* no buffers */
      "buffers { size_kb: 1024 fill_policy: DISCARD }\n" DS,    /* not a ring */
      RING DS "duration_ms: 10000\n",                          /* ends */
      RING DS "write_into_file: true\n",                       /* not a ring */
      RING,                                                    /* no source */
      RING DS "trigger_config { trigger_timeout_ms: 1000 }\n", /* its own */
      "buffers { size_kb: \n",                                 /* no pbtxt */
  };
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tg_coll_config_t cfg;
    load(&cfg, bad[i], NULL);
    coll_t c;
    memset(&c, 0, sizeof(c));
    if (coll_prepare(&c, &loop, &cfg) != -1)
      fail_msg("flight config %zu accepted:\n%s", i, bad[i]);
    assert_null(c.flight);
    unprepare(&c);
  }
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* The config's triggers become the ring's trigger_config: CLONE_SNAPSHOT
 * (the service tells the ring's holder, never stops the ring), the
 * longest timeout Perfetto's traced takes, every trigger by name. The
 * client TLS and its session cache are made, the dialer set. */
static void the_triggers_become_the_rings_trigger_config(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  tg_coll_config_t cfg;
  load(&cfg, RING DS, "trigger = app-hit\ntrigger = oom\n");
  coll_t c;
  memset(&c, 0, sizeof(c));
  assert_int_equal(coll_prepare(&c, &loop, &cfg), 0);
  const Perfetto__Protos__TraceConfig__TriggerConfig *t = c.flight->trigger_config;
  assert_non_null(t);
  assert_int_equal(t->trigger_mode,
                   PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT);
  assert_int_equal(t->trigger_timeout_ms, 7u * 24 * 3600 * 1000);
  assert_int_equal(t->n_triggers, 2);
  assert_string_equal(t->triggers[0]->name, "app-hit");
  assert_string_equal(t->triggers[1]->name, "oom");
  assert_non_null(c.tls);
  assert_non_null(c.sessions);
  assert_non_null(c.dialer.open);
  assert_ptr_equal(c.loop, &loop);
  assert_ptr_equal(c.env.loop, &loop);
  /* The config was moved in: the caller's copy is empty. */
  assert_string_equal(cfg.store, "");
  assert_string_equal(c.cfg.session_key, "unit");
  unprepare(&c);
  /* No trigger lines: no trigger_config. */
  load(&cfg, RING DS, NULL);
  memset(&c, 0, sizeof(c));
  assert_int_equal(coll_prepare(&c, &loop, &cfg), 0);
  assert_null(c.flight->trigger_config);
  unprepare(&c);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* The daemon's clock is the loop's (coll_prepare wires it), unless a
 * test set its own. */
static void the_daemons_clock_is_the_loops_unless_a_test_sets_one(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  tg_coll_config_t cfg;
  load(&cfg, RING DS, NULL);
  coll_t c;
  memset(&c, 0, sizeof(c));
  assert_int_equal(coll_prepare(&c, &loop, &cfg), 0);
  uv_update_time(&loop);
  assert_int_equal(coll_loop_ms(&c), (int64_t)uv_now(&loop));
  tg_clock_sim_t t;
  tg_clock_sim_init(&t, 123456789);
  coll_set_clock_for_test(&c, &t.clock);
  assert_int_equal(coll_loop_ms(&c), 123456789);
  tg_clock_sim_advance_ms(&t, 60000);
  assert_int_equal(coll_loop_ms(&c), 123516789);
  assert_int_equal(coll_loop_ns(&c), 123516789ull * 1000000);
  unprepare(&c);
  assert_int_equal(uv_loop_close(&loop), 0);
}

#define PERF(body) \
  "data_sources { config { name: \"linux.perf\" target_buffer: 1 " body \
  " } }\n"
#define BOOST "perf_boost_window = 3s\nperf_boost_frequency = 997\n" \
  "perf_boost_buffer = 2M\n"

/* The perf boost's TraceConfig (boost.h): the flight config's linux.perf
 * alone, at perf_boost_frequency whatever its timebase's interval was,
 * into the one DISCARD buffer of perf_boost_buffer, for the window; a
 * flight config without linux.perf, or whose linux.perf samples nothing,
 * is refused with the boost on; without it there is no boost config. */
static void the_perf_boost_config_comes_from_the_rings_linux_perf(
    void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  static const char *const flights[] = {
      RING RING DS PERF("perf_event_config { timebase { period: 1000 "
                        "counter: SW_CPU_CLOCK } }"),
      RING RING DS PERF("perf_event_config { timebase { frequency: 19 } }"),
      RING RING DS PERF("perf_event_config { }"),
  };
  for (size_t i = 0; i < sizeof(flights) / sizeof(flights[0]); i++) {
    tg_coll_config_t cfg;
    load(&cfg, flights[i], BOOST);
    coll_t c;
    memset(&c, 0, sizeof(c));
    assert_int_equal(coll_prepare(&c, &loop, &cfg), 0);
    size_t len;
    const uint8_t *wire = coll_boost_config(&c, &len);
    assert_non_null(wire);
    Perfetto__Protos__TraceConfig *tc =
        perfetto__protos__trace_config__unpack(NULL, len, wire);
    assert_non_null(tc);
    assert_int_equal(tc->n_buffers, 1);
    assert_int_equal(tc->buffers[0]->size_kb, 2048);
    assert_int_equal(tc->buffers[0]->fill_policy,
                     PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD);
    assert_int_equal(tc->duration_ms, 3000);
    assert_int_equal(tc->n_data_sources, 1);
    const Perfetto__Protos__DataSourceConfig *d = tc->data_sources[0]->config;
    assert_string_equal(d->name, "linux.perf");
    assert_int_equal(d->target_buffer, 0);
    const Perfetto__Protos__PerfEventConfig *pe = d->perf_event_config;
    assert_non_null(pe);
    if (pe->timebase) {
      assert_int_equal(pe->timebase->interval_case,
                       PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY);
      assert_int_equal(pe->timebase->frequency, 997);
    } else {
      assert_int_equal(pe->sampling_frequency, 997);
    }
    perfetto__protos__trace_config__free_unpacked(tc, NULL);
    /* The ring's own config is untouched. */
    assert_int_equal(c.flight->data_sources[1]->config->target_buffer, 1);
    unprepare(&c);
  }
  /* No boost: no boost config. */
  tg_coll_config_t cfg;
  load(&cfg, flights[0], NULL);
  coll_t c;
  memset(&c, 0, sizeof(c));
  assert_int_equal(coll_prepare(&c, &loop, &cfg), 0);
  size_t len;
  assert_null(coll_boost_config(&c, &len));
  unprepare(&c);
  static const char *const bad[] = {
      RING DS,                                   /* no linux.perf */
      RING PERF(""),                             /* counts only */
      RING PERF("perf_event_config { timebase { poll_period_ms: 100 } }"),
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    load(&cfg, bad[i], BOOST);
    memset(&c, 0, sizeof(c));
    if (coll_prepare(&c, &loop, &cfg) != -1)
      fail_msg("flight config %zu accepted with a boost:\n%s", i, bad[i]);
    assert_null(c.boost);
    unprepare(&c);
  }
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_flight_config_that_is_no_ring_is_refused),
      cmocka_unit_test(the_triggers_become_the_rings_trigger_config),
      cmocka_unit_test(the_daemons_clock_is_the_loops_unless_a_test_sets_one),
      cmocka_unit_test(the_perf_boost_config_comes_from_the_rings_linux_perf),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
