/* PerfEventConfig (agent/perf/perf_config.h): traced_perf's defaults, the
 * timebase and callstack fields honoured, every field refused with its
 * name (UNWIND_DWARF first), the unwinder's tuning kept, the ignored ones
 * listed, and the scope. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "agent/perf/perf_config.h"
#include "pb/config/data_source_config.pb-c.h"
#include "tracegate/error.h"

typedef struct cfgs {
  Perfetto__Protos__DataSourceConfig dsc;
  Perfetto__Protos__PerfEventConfig pc;
  Perfetto__Protos__PerfEvents__Timebase tb;
  Perfetto__Protos__PerfEventConfig__CallstackSampling cs;
  Perfetto__Protos__PerfEventConfig__Scope sc;
} cfgs_t;

static void cfgs_init(cfgs_t *c) {
  perfetto__protos__data_source_config__init(&c->dsc);
  perfetto__protos__perf_event_config__init(&c->pc);
  perfetto__protos__perf_events__timebase__init(&c->tb);
  perfetto__protos__perf_event_config__callstack_sampling__init(&c->cs);
  perfetto__protos__perf_event_config__scope__init(&c->sc);
  c->dsc.name = "linux.perf";
  c->dsc.perf_event_config = &c->pc;
}

static int parse(const cfgs_t *c, tg_perf_cfg_t *out) {
  size_t n = perfetto__protos__data_source_config__get_packed_size(&c->dsc);
  uint8_t *buf = malloc(n ? n : 1);
  assert_non_null(buf);
  perfetto__protos__data_source_config__pack(&c->dsc, buf);
  int rv = tg_perf_cfg_parse(buf, n, out);
  free(buf);
  return rv;
}

static void traced_perf_defaults(void **state) {
  (void)state;
  cfgs_t c;
  cfgs_init(&c);
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(out.counter, 1); /* SW_CPU_CLOCK */
  assert_int_equal(out.attr_type, 1);
  assert_int_equal(out.attr_config, 0);
  assert_false(out.hardware);
  assert_int_equal(out.frequency, TG_PERF_DEFAULT_FREQUENCY);
  assert_int_equal(out.ring_pages, TG_PERF_DEFAULT_RING_PAGES);
  assert_int_equal(out.read_period_ms, TG_PERF_DEFAULT_READ_PERIOD_MS);
  assert_int_equal(out.clockid, CLOCK_BOOTTIME);
  assert_int_equal(out.builtin_clock, 6);
  assert_false(out.callstacks); /* counter only */
  tg_perf_cfg_free(&out);
  /* Not even a PerfEventConfig. */
  c.dsc.perf_event_config = NULL;
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(out.frequency, TG_PERF_DEFAULT_FREQUENCY);
  tg_perf_cfg_free(&out);
  assert_int_equal(tg_perf_cfg_parse((const uint8_t *)"\xff", 1, &out),
                   TG_EBAD_CONFIG);
}

static void timebase_and_callstacks(void **state) {
  (void)state;
  cfgs_t c;
  cfgs_init(&c);
  c.pc.timebase = &c.tb;
  c.tb.event_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_COUNTER;
  c.tb.counter = PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_PAGE_FAULTS;
  c.tb.interval_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_PERIOD;
  c.tb.period = 1000;
  c.tb.name = "faults";
  c.tb.has_timestamp_clock = true;
  c.tb.timestamp_clock =
      PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_MONOTONIC;
  c.pc.callstack_sampling = &c.cs;
  c.cs.has_kernel_frames = c.cs.kernel_frames = true;
  c.cs.has_user_frames = true;
  c.cs.user_frames =
      PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_FRAME_POINTER;
  uint32_t cpus[] = {1};
  c.pc.n_target_cpu = 1;
  c.pc.target_cpu = cpus;
  c.pc.has_ring_buffer_pages = true;
  c.pc.ring_buffer_pages = 64;
  c.pc.has_ring_buffer_read_period_ms = true;
  c.pc.ring_buffer_read_period_ms = 50;
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(out.attr_type, 1);
  assert_int_equal(out.attr_config, 2); /* PERF_COUNT_SW_PAGE_FAULTS */
  assert_int_equal(out.frequency, 0);
  assert_int_equal(out.period, 1000);
  assert_string_equal(out.name, "faults");
  assert_int_equal(out.clockid, CLOCK_MONOTONIC);
  assert_int_equal(out.builtin_clock, 3);
  assert_true(out.callstacks && out.kernel_frames);
  assert_int_equal(out.user_frames, TG_PERF_USER_FRAME_POINTER);
  assert_false(out.user_frames_defaulted);
  assert_int_equal(out.n_cpus, 1);
  assert_int_equal(out.cpus[0], 1);
  assert_int_equal(out.ring_pages, 64);
  assert_int_equal(out.read_period_ms, 50);
  tg_perf_cfg_free(&out);

  /* A hardware counter is accepted here and flagged: opening it says
   * whether this machine has one. */
  c.tb.counter = PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_CPU_CYCLES;
  c.cs.has_user_frames = false; /* unset: frame pointer, said so */
  assert_int_equal(parse(&c, &out), 0);
  assert_true(out.hardware);
  assert_int_equal(out.attr_type, 0);
  assert_true(out.user_frames_defaulted);
  tg_perf_cfg_free(&out);
}

/* Parses with one change applied by |f| and returns the refusal. */
static const char *refusal(void (*f)(cfgs_t *)) {
  static char why[256];
  cfgs_t c;
  cfgs_init(&c);
  c.pc.callstack_sampling = &c.cs;
  c.pc.timebase = &c.tb;
  f(&c);
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  why[0] = '\0';
  if (out.refused) strncat(why, out.refused, sizeof(why) - 1);
  tg_perf_cfg_free(&out);
  return why;
}

static void dwarf(cfgs_t *c) {
  c->cs.has_user_frames = true;
  c->cs.user_frames = PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_DWARF;
}
static Perfetto__Protos__PerfEvents__Tracepoint tp_msg;
static void tracepoint(cfgs_t *c) {
  perfetto__protos__perf_events__tracepoint__init(&tp_msg);
  c->tb.event_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_TRACEPOINT;
  c->tb.tracepoint = &tp_msg;
}
static void poll_period(cfgs_t *c) {
  c->tb.interval_case =
      PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_POLL_PERIOD_MS;
  c->tb.poll_period_ms = 10;
}
static void odd_pages(cfgs_t *c) {
  c->pc.has_ring_buffer_pages = true;
  c->pc.ring_buffer_pages = 3;
}
static void shards(cfgs_t *c) {
  c->cs.scope = &c->sc;
  c->sc.has_process_shard_count = true;
  c->sc.process_shard_count = 4;
}
static void zero_period(cfgs_t *c) {
  c->tb.interval_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_PERIOD;
  c->tb.period = 0;
}
static Perfetto__Protos__FollowerEvent follower_msg, *followers[1];
static void follower(cfgs_t *c) {
  perfetto__protos__follower_event__init(&follower_msg);
  followers[0] = &follower_msg;
  c->pc.n_followers = 1;
  c->pc.followers = followers;
}

static void refused_fields_are_named(void **state) {
  (void)state;
  if (tg_perf_cfg_dwarf_built())
    assert_string_equal(refusal(dwarf), "");
  else
    assert_non_null(strstr(refusal(dwarf), "UNWIND_DWARF"));
  assert_non_null(strstr(refusal(tracepoint), "timebase.tracepoint"));
  assert_non_null(strstr(refusal(poll_period), "poll_period_ms"));
  assert_non_null(strstr(refusal(odd_pages), "ring_buffer_pages"));
  assert_non_null(strstr(refusal(shards), "process_shard_count"));
  assert_non_null(strstr(refusal(zero_period), "timebase"));
  assert_non_null(strstr(refusal(follower), "followers"));
}

static void dwarf_when_built_with_it(void **state) {
  (void)state;
  cfgs_t c;
  cfgs_init(&c);
  c.pc.callstack_sampling = &c.cs;
  dwarf(&c);
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  if (tg_perf_cfg_dwarf_built()) {
    assert_null(out.refused);
    assert_int_equal(out.user_frames, TG_PERF_USER_DWARF);
  } else {
    assert_non_null(strstr(out.refused, "not supported in this build"));
  }
  tg_perf_cfg_free(&out);
}

static void unwinder_tuning_is_kept_and_descriptor_timeout_ignored(
    void **state) {
  (void)state;
  cfgs_t c;
  cfgs_init(&c);
  c.pc.has_max_enqueued_footprint_kb = true;
  c.pc.max_enqueued_footprint_kb = 64;
  c.pc.has_max_daemon_memory_kb = true;
  c.pc.max_daemon_memory_kb = 1;
  c.pc.has_unwind_state_clear_period_ms = true;
  c.pc.unwind_state_clear_period_ms = 250;
  c.pc.has_remote_descriptor_timeout_ms = true;
  c.pc.remote_descriptor_timeout_ms = 100;
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(out.max_enqueued_footprint_kb, 64);
  assert_int_equal(out.max_daemon_memory_kb, 1);
  assert_int_equal(out.unwind_state_clear_period_ms, 250);
  assert_int_equal(out.n_ignored, 1);
  assert_string_equal(out.ignored[0], "remote_descriptor_timeout_ms");
  tg_perf_cfg_free(&out);
}

static void scope_by_pid_and_cmdline(void **state) {
  (void)state;
  cfgs_t c;
  cfgs_init(&c);
  c.pc.callstack_sampling = &c.cs;
  c.cs.scope = &c.sc;
  int32_t pids[] = {42};
  char *cmds[] = {"work*", "/opt/*/srv"};
  char *excl[] = {"workhorse"};
  c.sc.n_target_pid = 1, c.sc.target_pid = pids;
  c.sc.n_target_cmdline = 2, c.sc.target_cmdline = cmds;
  c.sc.n_exclude_cmdline = 1, c.sc.exclude_cmdline = excl;
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  assert_true(tg_perf_cfg_has_scope(&out));
  assert_true(tg_perf_cfg_in_scope(&out, 42, NULL));
  assert_true(tg_perf_cfg_in_scope(&out, 7, "/tmp/x/work"));
  assert_true(tg_perf_cfg_in_scope(&out, 7, "worker"));
  assert_false(tg_perf_cfg_in_scope(&out, 7, "/usr/bin/workhorse"));
  assert_true(tg_perf_cfg_in_scope(&out, 7, "/opt/a/srv"));
  assert_false(tg_perf_cfg_in_scope(&out, 7, "srv")); /* '/': whole argv0 */
  assert_false(tg_perf_cfg_in_scope(&out, 7, "bash"));
  assert_false(tg_perf_cfg_in_scope(&out, 7, NULL));
  tg_perf_cfg_free(&out);

  /* Exclusions alone: everything else is in. */
  int32_t ex[] = {9};
  c.sc.n_target_pid = 0, c.sc.n_target_cmdline = 0, c.sc.n_exclude_cmdline = 0;
  c.sc.n_exclude_pid = 1, c.sc.exclude_pid = ex;
  assert_int_equal(parse(&c, &out), 0);
  assert_true(tg_perf_cfg_in_scope(&out, 8, NULL));
  assert_false(tg_perf_cfg_in_scope(&out, 9, NULL));
  tg_perf_cfg_free(&out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(traced_perf_defaults),
      cmocka_unit_test(timebase_and_callstacks),
      cmocka_unit_test(refused_fields_are_named),
      cmocka_unit_test(dwarf_when_built_with_it),
      cmocka_unit_test(unwinder_tuning_is_kept_and_descriptor_timeout_ignored),
      cmocka_unit_test(scope_by_pid_and_cmdline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
