/* PerfEventConfig (agent/perf/perf_config.h): traced_perf's defaults, the
 * timebase and callstack fields honoured, every field refused with its
 * name (UNWIND_DWARF first), the unwinder's tuning kept, the ignored ones
 * listed, and the scope; and golden configs to the perf_event_attr of the
 * leader and its followers (agent/perf/perf_events.h): tracepoint, raw,
 * followers, polling, sharding, and a tracepoint's id read from a tracefs
 * tree. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/perf/perf_config.h"
#include "agent/perf/perf_events.h"
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
  /* The guardrails are on though the config sets none. */
  assert_int_equal(out.max_daemon_memory_kb, TG_PERF_DEFAULT_DAEMON_MEMORY_KB);
  assert_int_equal(out.max_enqueued_footprint_kb, TG_PERF_DEFAULT_FOOTPRINT_KB);
  assert_false(out.footprint_given);
  tg_perf_cfg_free(&out);
  /* Set to 0, they are unset: the defaults again. */
  c.pc.has_max_daemon_memory_kb = true;
  c.pc.max_daemon_memory_kb = 0;
  c.pc.has_max_enqueued_footprint_kb = true;
  c.pc.max_enqueued_footprint_kb = 0;
  assert_int_equal(parse(&c, &out), 0);
  assert_int_equal(out.max_daemon_memory_kb, TG_PERF_DEFAULT_DAEMON_MEMORY_KB);
  assert_int_equal(out.max_enqueued_footprint_kb, TG_PERF_DEFAULT_FOOTPRINT_KB);
  assert_false(out.footprint_given);
  tg_perf_cfg_free(&out);
  /* Not even a PerfEventConfig. */
  c.dsc.perf_event_config = NULL;
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(out.frequency, TG_PERF_DEFAULT_FREQUENCY);
  assert_int_equal(out.max_daemon_memory_kb, TG_PERF_DEFAULT_DAEMON_MEMORY_KB);
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

static void poll_alone(cfgs_t *c) {
  poll_period(c);
  c->pc.callstack_sampling = NULL;
}
static void poll_with_callstacks(cfgs_t *c) {
  poll_period(c);
  c->pc.callstack_sampling = &c->cs;
}
static void poll_with_read_period(cfgs_t *c) {
  poll_alone(c);
  c->pc.has_ring_buffer_read_period_ms = true;
  c->pc.ring_buffer_read_period_ms = 5;
}
static Perfetto__Protos__FollowerEvent *many[TG_PERF_MAX_FOLLOWERS + 1];
static void too_many_followers(cfgs_t *c) {
  for (size_t i = 0; i < TG_PERF_MAX_FOLLOWERS + 1; i++) many[i] = &follower_msg;
  perfetto__protos__follower_event__init(&follower_msg);
  c->pc.n_followers = TG_PERF_MAX_FOLLOWERS + 1;
  c->pc.followers = many;
}
static void bad_tracepoint_name(cfgs_t *c) {
  tracepoint(c);
  tp_msg.name = "sched:../../x";
}
static void bare_tracepoint_name(cfgs_t *c) {
  tracepoint(c);
  tp_msg.name = "sched_switch";
}

static void refused_fields_are_named(void **state) {
  (void)state;
  if (tg_perf_cfg_dwarf_built())
    assert_string_equal(refusal(dwarf), "");
  else
    assert_non_null(strstr(refusal(dwarf), "UNWIND_DWARF"));
  /* Honoured now: a tracepoint timebase, polling, shards, a follower. */
  tp_msg.name = NULL;
  assert_non_null(strstr(refusal(tracepoint), "timebase.tracepoint.name"));
  assert_string_equal(refusal(poll_alone), "");
  assert_string_equal(refusal(shards), "");
  assert_string_equal(refusal(follower), "");
  assert_non_null(strstr(refusal(odd_pages), "ring_buffer_pages"));
  assert_non_null(strstr(refusal(zero_period), "timebase"));
  /* As traced_perf: polling samples nothing, so no callstacks. */
  assert_non_null(strstr(refusal(poll_with_callstacks), "callstack_sampling"));
  assert_non_null(
      strstr(refusal(poll_with_read_period), "ring_buffer_read_period_ms"));
  assert_non_null(strstr(refusal(too_many_followers), "followers"));
  assert_non_null(strstr(refusal(bad_tracepoint_name), "tracepoint.name"));
  assert_non_null(strstr(refusal(bare_tracepoint_name), "tracepoint.name"));
}

/* The rules between PerfEventConfig's fields (perf_config.c's table):
 * they name only its fields, and each has a config here that breaks it
 * and is refused with that rule's words. */
static int32_t pid_1 = 1;
static void poll_with_all_cpus(cfgs_t *c) {
  poll_alone(c);
  c->pc.has_all_cpus = true;
  c->pc.all_cpus = true;
}
static char *installer = "com.example";
static void installed_by(cfgs_t *c) {
  c->pc.n_target_installed_by = 1;
  c->pc.target_installed_by = &installer;
}
static void scope_additional(cfgs_t *c) {
  shards(c);
  c->sc.has_additional_cmdline_count = true;
  c->sc.additional_cmdline_count = 2;
}
static void top_additional(cfgs_t *c) {
  c->pc.callstack_sampling = NULL;
  c->pc.has_additional_cmdline_count = true;
  c->pc.additional_cmdline_count = 2;
}
static void top_additional_beside_callstacks(cfgs_t *c) {
  c->pc.has_additional_cmdline_count = true;
  c->pc.additional_cmdline_count = 2;
  c->pc.n_target_pid = 1; /* not read either: the scope is callstack's */
  c->pc.target_pid = &pid_1;
}

static void field_rules_each_broken_by_a_config(void **state) {
  (void)state;
  size_t nf, nr;
  const tg_flag_t *fields = tg_perf_cfg_fields(&nf);
  const tg_flag_rule_t *rules = tg_perf_cfg_rules(&nr);
  char err[256];
  if (tg_flag_rules_lint(fields, nf, rules, nr, err, sizeof(err)) < 0)
    fail_msg("%s", err);
  /* Rule i, broken by breaking[i] (rule 0 twice: either field). */
  static void (*const breaking[])(cfgs_t *) = {
      poll_with_callstacks, poll_with_read_period, installed_by,
      scope_additional, top_additional,
  };
  assert_int_equal(nr, sizeof(breaking) / sizeof(breaking[0]));
  for (size_t i = 0; i < nr; i++)
    assert_string_equal(refusal(breaking[i]), rules[i].why);
  assert_string_equal(refusal(poll_with_all_cpus), rules[0].why);
  assert_string_equal(refusal(top_additional_beside_callstacks), "");
}

/* A tracefs tree of one event, sched:sched_switch with id 316. */
static char tracefs[64];
static void make_tracefs(void) {
  strcpy(tracefs, "/tmp/tg_perf_tracefs_XXXXXX");
  assert_non_null(mkdtemp(tracefs));
  char p[256];
  snprintf(p, sizeof(p), "%s/events", tracefs);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/events/sched", tracefs);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/events/sched/sched_switch", tracefs);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/events/sched/sched_switch/id", tracefs);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs("316\n", f);
  fclose(f);
}
static void remove_tracefs(void) {
  char p[256];
  snprintf(p, sizeof(p), "%s/events/sched/sched_switch/id", tracefs);
  unlink(p);
  snprintf(p, sizeof(p), "%s/events/sched/sched_switch", tracefs);
  rmdir(p);
  snprintf(p, sizeof(p), "%s/events/sched", tracefs);
  rmdir(p);
  snprintf(p, sizeof(p), "%s/events", tracefs);
  rmdir(p);
  rmdir(tracefs);
}

#define SAMPLE_TYPE 0x1b7u /* IP TID TIME READ CALLCHAIN CPU */

static void tracepoint_timebase_to_attrs(void **state) {
  (void)state;
  make_tracefs();
  cfgs_t c;
  cfgs_init(&c);
  c.pc.timebase = &c.tb;
  tracepoint(&c);
  tp_msg.name = "sched/sched_switch";
  tp_msg.filter = "prev_pid > 0";
  c.tb.interval_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_PERIOD;
  c.tb.period = 1;
  c.pc.callstack_sampling = &c.cs;
  c.cs.has_kernel_frames = true;
  c.cs.kernel_frames = true;
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(out.timebase.kind, TG_PERF_EVENT_TRACEPOINT);
  assert_string_equal(out.timebase.tp_name, "sched/sched_switch");
  assert_string_equal(out.timebase.tp_filter, "prev_pid > 0");
  assert_true(tg_perf_cfg_has_tracepoints(&out));
  const tg_perf_event_t *bad;
  assert_int_equal(tg_perf_cfg_resolve(&out, tracefs, &bad), 0);
  assert_int_equal(out.timebase.attr_config, 316);
  struct perf_event_attr a;
  tg_perf_attr_leader(&out, SAMPLE_TYPE, &a);
  assert_int_equal(a.type, PERF_TYPE_TRACEPOINT);
  assert_int_equal(a.config, 316);
  assert_int_equal(a.freq, 0);
  assert_int_equal(a.sample_period, 1);
  assert_int_equal(a.sample_type, SAMPLE_TYPE);
  assert_int_equal(a.read_format, 0); /* no followers: the value alone */
  assert_int_equal(a.disabled, 1);
  assert_int_equal(a.use_clockid, 1);
  /* Not BOOTTIME: the kernel refuses it for tracepoints (not NMI-safe);
   * traced_perf's default. */
  assert_int_equal(a.clockid, CLOCK_MONOTONIC_RAW);
  assert_int_equal(out.builtin_clock, 4);
  assert_int_equal(a.exclude_callchain_kernel, 0);
  assert_int_equal(a.mmap2, 1);
  tg_perf_cfg_free(&out);

  /* Asked for, BOOTTIME is refused with the reason. */
  c.tb.has_timestamp_clock = true;
  c.tb.timestamp_clock =
      PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_BOOTTIME;
  assert_int_equal(parse(&c, &out), 0);
  assert_non_null(out.refused);
  assert_non_null(strstr(out.refused, "timestamp_clock"));
  tg_perf_cfg_free(&out);
  c.tb.has_timestamp_clock = false;

  /* "group:name" too; an unknown one says so. */
  tp_msg.name = "sched:sched_nothing";
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(tg_perf_cfg_resolve(&out, tracefs, &bad), -ENOENT);
  assert_ptr_equal(bad, &out.timebase);
  tg_perf_cfg_free(&out);
  remove_tracefs();
}

static void raw_timebase_and_followers_to_attrs(void **state) {
  (void)state;
  make_tracefs();
  cfgs_t c;
  cfgs_init(&c);
  c.pc.timebase = &c.tb;
  Perfetto__Protos__PerfEvents__RawEvent raw;
  perfetto__protos__perf_events__raw_event__init(&raw);
  raw.has_type = true, raw.type = 1; /* PERF_TYPE_SOFTWARE */
  raw.has_config = true, raw.config = 3; /* context switches */
  raw.has_config1 = true, raw.config1 = 7;
  raw.has_config2 = true, raw.config2 = 9;
  c.tb.event_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_RAW_EVENT;
  c.tb.raw_event = &raw;
  c.tb.interval_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY;
  c.tb.frequency = 99;
  Perfetto__Protos__FollowerEvent f[3], *fp[3] = {&f[0], &f[1], &f[2]};
  Perfetto__Protos__PerfEvents__Tracepoint ftp;
  for (int i = 0; i < 3; i++) perfetto__protos__follower_event__init(&f[i]);
  perfetto__protos__perf_events__tracepoint__init(&ftp);
  f[0].event_case = PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_COUNTER;
  f[0].counter = PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_PAGE_FAULTS;
  f[0].name = "faults";
  f[1].event_case = PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_TRACEPOINT;
  f[1].tracepoint = &ftp;
  ftp.name = "sched:sched_switch";
  f[2].event_case = PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_RAW_EVENT;
  f[2].raw_event = &raw;
  c.pc.n_followers = 3;
  c.pc.followers = fp;
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(out.timebase.kind, TG_PERF_EVENT_RAW);
  assert_false(out.timebase.hardware);
  assert_int_equal(out.n_followers, 3);
  assert_string_equal(out.followers[0].name, "faults");
  const tg_perf_event_t *bad;
  assert_int_equal(tg_perf_cfg_resolve(&out, tracefs, &bad), 0);
  assert_int_equal(out.followers[1].attr_config, 316);
  struct perf_event_attr a, fa;
  tg_perf_attr_leader(&out, SAMPLE_TYPE, &a);
  assert_int_equal(a.type, 1);
  assert_int_equal(a.config, 3);
  assert_int_equal(a.config1, 7);
  assert_int_equal(a.config2, 9);
  assert_int_equal(a.freq, 1);
  assert_int_equal(a.sample_freq, 99);
  assert_int_equal(a.read_format, PERF_FORMAT_GROUP);
  tg_perf_attr_follower(&out, 0, &a, &fa);
  assert_int_equal(fa.type, PERF_TYPE_SOFTWARE);
  assert_int_equal(fa.config, PERF_COUNT_SW_PAGE_FAULTS);
  assert_int_equal(fa.disabled, 0);
  assert_int_equal(fa.sample_period, 0); /* counts, never samples */
  assert_int_equal(fa.sample_type, SAMPLE_TYPE);
  assert_int_equal(fa.use_clockid, 1);
  assert_int_equal(fa.clockid, a.clockid);
  /* A tracepoint follower: the group on MONOTONIC_RAW (not BOOTTIME,
   * which the kernel refuses for it), even under a software leader. */
  assert_int_equal(a.clockid, CLOCK_MONOTONIC_RAW);
  tg_perf_attr_follower(&out, 1, &a, &fa);
  assert_int_equal(fa.type, PERF_TYPE_TRACEPOINT);
  assert_int_equal(fa.config, 316);
  tg_perf_attr_follower(&out, 2, &a, &fa);
  assert_int_equal(fa.config1, 7);
  tg_perf_cfg_free(&out);
  remove_tracefs();
}

/* The raw event's perf_event_attr.type of a timebase (|follower| false) or
 * of a follower: the refusal, "" when accepted. */
static const char *raw_type_refusal(uint32_t type, bool follower) {
  static char why[256];
  cfgs_t c;
  cfgs_init(&c);
  Perfetto__Protos__PerfEvents__RawEvent raw;
  perfetto__protos__perf_events__raw_event__init(&raw);
  raw.has_type = true, raw.type = type;
  raw.has_config = true, raw.config = 3;
  Perfetto__Protos__FollowerEvent f, *fp = &f;
  perfetto__protos__follower_event__init(&f);
  if (follower) {
    f.event_case = PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_RAW_EVENT;
    f.raw_event = &raw;
    c.pc.n_followers = 1;
    c.pc.followers = &fp;
  } else {
    c.pc.timebase = &c.tb;
    c.tb.event_case = PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_RAW_EVENT;
    c.tb.raw_event = &raw;
  }
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  why[0] = '\0';
  if (out.refused) strncat(why, out.refused, sizeof(why) - 1);
  else assert_int_equal(follower ? out.followers[0].attr_type
                                 : out.timebase.attr_type, type);
  tg_perf_cfg_free(&out);
  return why;
}

static void raw_event_types_are_the_listed_ones(void **state) {
  (void)state;
  for (int fol = 0; fol < 2; fol++) {
    const char *where = fol ? "followers.raw_event.type" : "timebase.raw_event.type";
    /* Hardware, software, hardware cache, raw: docs/perf.md's list. */
    const uint32_t ok[] = {PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE,
                           PERF_TYPE_HW_CACHE, PERF_TYPE_RAW};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
      assert_string_equal(raw_type_refusal(ok[i], fol), "");
    /* A tracepoint by id (past tracefs' by-name lookup), a breakpoint, a
     * dynamic PMU (kprobe, uprobe, msr... are 6 and up) and a type no
     * kernel has. */
    const uint32_t no[] = {PERF_TYPE_TRACEPOINT, PERF_TYPE_BREAKPOINT, 6, 8,
                           UINT32_MAX};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
      assert_non_null(strstr(raw_type_refusal(no[i], fol), where));
  }
}

static void polling_to_attrs(void **state) {
  (void)state;
  cfgs_t c;
  cfgs_init(&c);
  c.pc.timebase = &c.tb;
  poll_period(&c);
  c.tb.poll_period_ms = 250;
  c.tb.has_timestamp_clock = true;
  c.tb.timestamp_clock = PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_MONOTONIC;
  follower(&c);
  follower_msg.event_case = PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_COUNTER;
  follower_msg.counter = PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_CONTEXT_SWITCHES;
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(out.poll_period_ms, 250);
  assert_int_equal(out.read_period_ms, 250);
  assert_int_equal(out.frequency, 0);
  assert_int_equal(out.period, 0);
  /* Readings are stamped by the producer on the boot clock. */
  assert_int_equal(out.clockid, CLOCK_BOOTTIME);
  assert_int_equal(out.builtin_clock, 6);
  struct perf_event_attr a, fa;
  tg_perf_attr_leader(&out, SAMPLE_TYPE, &a);
  assert_int_equal(a.type, PERF_TYPE_SOFTWARE);
  assert_int_equal(a.config, PERF_COUNT_SW_CPU_CLOCK);
  assert_int_equal(a.sample_period, 0);
  assert_int_equal(a.freq, 0);
  assert_int_equal(a.sample_type, 0);
  assert_int_equal(a.read_format, PERF_FORMAT_GROUP);
  assert_int_equal(a.disabled, 1);
  tg_perf_attr_follower(&out, 0, &a, &fa);
  assert_int_equal(fa.config, PERF_COUNT_SW_CONTEXT_SWITCHES);
  assert_int_equal(fa.disabled, 0);
  tg_perf_cfg_free(&out);
  /* Alone too: the group format even for one counter. */
  c.pc.n_followers = 0;
  assert_int_equal(parse(&c, &out), 0);
  tg_perf_attr_leader(&out, SAMPLE_TYPE, &a);
  assert_int_equal(a.read_format, PERF_FORMAT_GROUP);
  tg_perf_cfg_free(&out);
}

static void shards_keep_one_pid_class(void **state) {
  (void)state;
  cfgs_t c;
  cfgs_init(&c);
  c.pc.callstack_sampling = &c.cs;
  shards(&c);
  c.sc.process_shard_count = 2;
  tg_perf_cfg_t out;
  assert_int_equal(parse(&c, &out), 0);
  assert_null(out.refused);
  assert_int_equal(out.shard_count, 2);
  assert_true(tg_perf_cfg_has_scope(&out));
  out.chosen_shard = 1;
  assert_true(tg_perf_cfg_in_scope(&out, 101, NULL));
  assert_false(tg_perf_cfg_in_scope(&out, 100, NULL));
  out.chosen_shard = 0;
  assert_false(tg_perf_cfg_in_scope(&out, 101, NULL));
  assert_true(tg_perf_cfg_in_scope(&out, 100, NULL));
  tg_perf_cfg_free(&out);
  /* Explicit targets and exclusions still count, as in traced_perf. */
  int32_t tp[] = {7}, ep[] = {8};
  c.sc.n_target_pid = 1, c.sc.target_pid = tp;
  c.sc.n_exclude_pid = 1, c.sc.exclude_pid = ep;
  assert_int_equal(parse(&c, &out), 0);
  out.chosen_shard = 0;
  assert_true(tg_perf_cfg_in_scope(&out, 7, NULL));  /* a target, odd */
  assert_false(tg_perf_cfg_in_scope(&out, 8, NULL)); /* excluded, even */
  assert_true(tg_perf_cfg_in_scope(&out, 10, NULL)); /* the shard */
  assert_false(tg_perf_cfg_in_scope(&out, 9, NULL));
  tg_perf_cfg_free(&out);
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
  assert_true(out.footprint_given);
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
      cmocka_unit_test(field_rules_each_broken_by_a_config),
      cmocka_unit_test(dwarf_when_built_with_it),
      cmocka_unit_test(unwinder_tuning_is_kept_and_descriptor_timeout_ignored),
      cmocka_unit_test(scope_by_pid_and_cmdline),
      cmocka_unit_test(tracepoint_timebase_to_attrs),
      cmocka_unit_test(raw_timebase_and_followers_to_attrs),
      cmocka_unit_test(raw_event_types_are_the_listed_ones),
      cmocka_unit_test(polling_to_attrs),
      cmocka_unit_test(shards_keep_one_pid_class),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
