/* Text-format TraceConfig parser: real-world configs, syntax, errors.
 *
 * Outputs are checked by decoding them with protobuf-c (or, for types our
 * protos do not use, by reading the wire fields), never by comparing bytes
 * with a hand-made encoding of the same thing.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tracegate/pb_wire.h"
#include "pb/config/trace_config.pb-c.h"
#include "consumer/pbtxt.h"
#include "tracegate/error.h"

typedef Perfetto__Protos__TraceConfig cfg_t;

/* Parses |text| as TraceConfig and decodes the result; fails the test with
 * the parser's message when it does not parse. */
static cfg_t *parse_cfg(const char *text) {
  tg_buf_t b;
  tg_pbtxt_error_t err;
  tg_buf_init(&b, 0);
  int rc = tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor, text,
                          strlen(text), &b, &err);
  if (rc != 0) fail_msg("parse failed (%d): %s", rc, err.msg);
  cfg_t *cfg = perfetto__protos__trace_config__unpack(NULL, tg_buf_size(&b),
                                                      tg_buf_begin(&b));
  assert_non_null(cfg);
  tg_buf_free(&b);
  return cfg;
}

static void free_cfg(cfg_t *cfg) {
  perfetto__protos__trace_config__free_unpacked(cfg, NULL);
}

/* Expects |text| to fail as |desc| at |line|:|col| with every word of the
 * NULL-terminated list in the message, and the output left as it was. */
static void expect_error_in(const ProtobufCMessageDescriptor *desc,
                            const char *text, unsigned line, unsigned col,
                            ...) {
  tg_buf_t b;
  tg_pbtxt_error_t err;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_buf_append(&b, "pre", 3), 0);
  int rc = tg_pbtxt_parse(desc, text, strlen(text), &b, &err);
  if (rc != TG_EPARSE) fail_msg("'%s': rc %d, want TG_EPARSE", text, rc);
  if (err.line != line || err.column != col)
    fail_msg("'%s': error at %u:%u, want %u:%u (%s)", text, err.line,
             err.column, line, col, err.msg);
  char prefix[48];
  snprintf(prefix, sizeof(prefix), "line %u, column %u: ", line, col);
  assert_memory_equal(err.msg, prefix, strlen(prefix));
  va_list ap;
  va_start(ap, col);
  for (const char *w; (w = va_arg(ap, const char *)) != NULL;)
    if (!strstr(err.msg, w)) fail_msg("'%s' not in \"%s\"", w, err.msg);
  va_end(ap);
  assert_int_equal(tg_buf_size(&b), 3);
  assert_memory_equal(tg_buf_begin(&b), "pre", 3);
  tg_buf_free(&b);
}

#define expect_error(text, line, col, ...)                                     \
  expect_error_in(&perfetto__protos__trace_config__descriptor, (text), (line), \
                  (col), __VA_ARGS__, NULL)

/* A message with every scalar type and a recursive field, for what our
 * protos do not exercise. The parser reads only names, ids, labels, types
 * and sub-descriptors. */
static const ProtobufCMessageDescriptor all_types_desc;
#define F(n, i, t) \
  { .name = n, .id = i, .label = PROTOBUF_C_LABEL_OPTIONAL, .type = t }
static const ProtobufCFieldDescriptor all_types_fields[] = {
    F("i32", 1, PROTOBUF_C_TYPE_INT32),
    F("s32", 2, PROTOBUF_C_TYPE_SINT32),
    F("sf32", 3, PROTOBUF_C_TYPE_SFIXED32),
    F("i64", 4, PROTOBUF_C_TYPE_INT64),
    F("s64", 5, PROTOBUF_C_TYPE_SINT64),
    F("sf64", 6, PROTOBUF_C_TYPE_SFIXED64),
    F("u32", 7, PROTOBUF_C_TYPE_UINT32),
    F("f32", 8, PROTOBUF_C_TYPE_FIXED32),
    F("u64", 9, PROTOBUF_C_TYPE_UINT64),
    F("f64", 10, PROTOBUF_C_TYPE_FIXED64),
    F("flt", 11, PROTOBUF_C_TYPE_FLOAT),
    F("dbl", 12, PROTOBUF_C_TYPE_DOUBLE),
    F("bytes", 13, PROTOBUF_C_TYPE_BYTES),
    {.name = "child",
     .id = 14,
     .label = PROTOBUF_C_LABEL_OPTIONAL,
     .type = PROTOBUF_C_TYPE_MESSAGE,
     .descriptor = &all_types_desc},
    {.name = "packed",
     .id = 300,
     .label = PROTOBUF_C_LABEL_REPEATED,
     .type = PROTOBUF_C_TYPE_SINT32,
     .flags = PROTOBUF_C_FIELD_FLAG_PACKED},
};
#undef F
static const ProtobufCMessageDescriptor all_types_desc = {
    .magic = PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    .name = "test.AllTypes",
    .short_name = "AllTypes",
    .n_fields = sizeof(all_types_fields) / sizeof(all_types_fields[0]),
    .fields = all_types_fields,
};

/* Reads the next wire field of |r| and checks its id and wire type. */
static tg_pb_field_t next_field(tg_pb_reader_t *r, uint32_t id, uint8_t wt) {
  tg_pb_field_t f;
  assert_int_equal(tg_pb_reader_next(r, &f), 1);
  assert_int_equal(f.id, id);
  assert_int_equal(f.type, wt);
  return f;
}

/* --- real-world configs ----------------------------------------------------
 */

static void track_event_config_from_perfetto_docs(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "# Records app instrumentation (Perfetto docs, 'Track events').\n"
      "buffers {\n"
      "  size_kb: 63488\n"
      "  fill_policy: RING_BUFFER\n"
      "}\n"
      "data_sources {\n"
      "  config {\n"
      "    name: \"track_event\"\n"
      "    track_event_config {\n"
      "      disabled_categories: \"*\"\n"
      "      enabled_categories: \"rendering\"\n"
      "      enabled_categories: \"audio*\"\n"
      "      enabled_tags: \"slow\"\n"
      "    }\n"
      "  }\n"
      "}\n"
      "duration_ms: 10000\n"
      "flush_period_ms: 5000\n");
  assert_int_equal(cfg->n_buffers, 1);
  assert_true(cfg->buffers[0]->has_size_kb);
  assert_int_equal(cfg->buffers[0]->size_kb, 63488);
  assert_int_equal(
      cfg->buffers[0]->fill_policy,
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER);
  assert_int_equal(cfg->n_data_sources, 1);
  Perfetto__Protos__DataSourceConfig *ds = cfg->data_sources[0]->config;
  assert_non_null(ds);
  assert_string_equal(ds->name, "track_event");
  Perfetto__Protos__TrackEventConfig *te = ds->track_event_config;
  assert_non_null(te);
  assert_int_equal(te->n_disabled_categories, 1);
  assert_string_equal(te->disabled_categories[0], "*");
  assert_int_equal(te->n_enabled_categories, 2);
  assert_string_equal(te->enabled_categories[0], "rendering");
  assert_string_equal(te->enabled_categories[1], "audio*");
  assert_int_equal(te->n_enabled_tags, 1);
  assert_string_equal(te->enabled_tags[0], "slow");
  assert_true(cfg->has_duration_ms);
  assert_int_equal(cfg->duration_ms, 10000);
  assert_int_equal(cfg->flush_period_ms, 5000);
  free_cfg(cfg);
}

static void long_trace_into_file_with_trigger(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "# Long trace (Perfetto docs): periodic flushes into the output file.\n"
      "write_into_file: true\n"
      "file_write_period_ms: 2500\n"
      "flush_period_ms: 30000\n"
      "max_file_size_bytes: 10000000000\n"
      "\n"
      "buffers: {\n"
      "    size_kb: 65536\n"
      "    fill_policy: RING_BUFFER\n"
      "}\n"
      "data_sources: {\n"
      "    config {\n"
      "        name: \"linux.process_stats\"\n"
      "        target_buffer: 0\n"
      "        process_stats_config {\n"
      "            scan_all_processes_on_start: true\n"
      "            proc_stats_poll_ms: 1000\n"
      "            quirks: DISABLE_ON_DEMAND\n"
      "        }\n"
      "    }\n"
      "    producer_name_filter: \"perfetto.traced_probes\"\n"
      "}\n"
      "trigger_config {\n"
      "    trigger_mode: STOP_TRACING\n"
      "    triggers {\n"
      "        name: \"jank\"\n"
      "        stop_delay_ms: 500\n"
      "        skip_probability: 0.25\n"
      "    }\n"
      "    trigger_timeout_ms: 3600000\n"
      "}\n"
      "unique_session_name: \"long_trace\"\n");
  assert_true(cfg->has_write_into_file);
  assert_true(cfg->write_into_file);
  assert_int_equal(cfg->file_write_period_ms, 2500);
  assert_int_equal(cfg->flush_period_ms, 30000);
  assert_true(cfg->max_file_size_bytes == 10000000000ull);
  assert_int_equal(cfg->n_buffers, 1);
  assert_int_equal(cfg->buffers[0]->size_kb, 65536);
  assert_int_equal(cfg->n_data_sources, 1);
  Perfetto__Protos__TraceConfig__DataSource *ds = cfg->data_sources[0];
  assert_string_equal(ds->config->name, "linux.process_stats");
  assert_true(ds->config->has_target_buffer);
  assert_int_equal(ds->config->target_buffer, 0);
  assert_true(ds->config->process_stats_config->scan_all_processes_on_start);
  assert_int_equal(ds->config->process_stats_config->proc_stats_poll_ms, 1000);
  assert_int_equal(ds->config->process_stats_config->n_quirks, 1);
  assert_int_equal(
      ds->config->process_stats_config->quirks[0],
      PERFETTO__PROTOS__PROCESS_STATS_CONFIG__QUIRKS__DISABLE_ON_DEMAND);
  assert_int_equal(ds->n_producer_name_filter, 1);
  assert_string_equal(ds->producer_name_filter[0], "perfetto.traced_probes");
  Perfetto__Protos__TraceConfig__TriggerConfig *tc = cfg->trigger_config;
  assert_non_null(tc);
  assert_int_equal(
      tc->trigger_mode,
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING);
  assert_int_equal(tc->n_triggers, 1);
  assert_string_equal(tc->triggers[0]->name, "jank");
  assert_int_equal(tc->triggers[0]->stop_delay_ms, 500);
  assert_true(tc->triggers[0]->skip_probability == 0.25);
  assert_int_equal(tc->trigger_timeout_ms, 3600000);
  assert_string_equal(cfg->unique_session_name, "long_trace");
  free_cfg(cfg);
}

static const char two_buffers_text[] =
    "buffers: {\n"
    "    size_kb: 63488\n"
    "    fill_policy: DISCARD\n"
    "}\n"
    "buffers: {\n"
    "    size_kb: 2048\n"
    "    fill_policy: RING_BUFFER\n"
    "}\n"
    "data_sources: {\n"
    "    config {\n"
    "        name: \"linux.process_stats\"\n"
    "        target_buffer: 1\n"
    "        process_stats_config {\n"
    "            scan_all_processes_on_start: true\n"
    "        }\n"
    "    }\n"
    "}\n"
    "data_sources: {\n"
    "    config {\n"
    "        name: \"linux.sys_stats\"\n"
    "        target_buffer: 0\n"
    "        sys_stats_config {\n"
    "            meminfo_period_ms: 1000\n"
    "            meminfo_counters: MEMINFO_MEM_TOTAL\n"
    "            meminfo_counters: MEMINFO_MEM_FREE\n"
    "            stat_period_ms: 500\n"
    "            stat_counters: STAT_CPU_TIMES\n"
    "            stat_counters: STAT_FORK_COUNT\n"
    "        }\n"
    "    }\n"
    "}\n"
    "duration_ms: 10000\n";

static void two_buffers_route_two_data_sources(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(two_buffers_text);
  assert_int_equal(cfg->n_buffers, 2);
  assert_int_equal(cfg->buffers[0]->size_kb, 63488);
  assert_int_equal(
      cfg->buffers[0]->fill_policy,
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD);
  assert_int_equal(cfg->buffers[1]->size_kb, 2048);
  assert_int_equal(
      cfg->buffers[1]->fill_policy,
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER);
  assert_int_equal(cfg->n_data_sources, 2);
  Perfetto__Protos__DataSourceConfig *ps = cfg->data_sources[0]->config;
  Perfetto__Protos__DataSourceConfig *ss = cfg->data_sources[1]->config;
  assert_string_equal(ps->name, "linux.process_stats");
  assert_int_equal(ps->target_buffer, 1);
  assert_true(ps->process_stats_config->scan_all_processes_on_start);
  assert_string_equal(ss->name, "linux.sys_stats");
  assert_true(ss->has_target_buffer);
  assert_int_equal(ss->target_buffer, 0);
  Perfetto__Protos__SysStatsConfig *sys = ss->sys_stats_config;
  assert_non_null(sys);
  assert_int_equal(sys->meminfo_period_ms, 1000);
  assert_int_equal(sys->n_meminfo_counters, 2);
  assert_int_equal(sys->meminfo_counters[0],
                   PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL);
  assert_int_equal(sys->meminfo_counters[1],
                   PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE);
  assert_int_equal(sys->stat_period_ms, 500);
  assert_int_equal(sys->n_stat_counters, 2);
  assert_int_equal(
      sys->stat_counters[0],
      PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__STAT_CPU_TIMES);
  assert_int_equal(
      sys->stat_counters[1],
      PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__STAT_FORK_COUNT);
  assert_int_equal(cfg->duration_ms, 10000);
  free_cfg(cfg);
}

/* Perfetto's Android system-trace config (docs: "Recording system traces",
 * the record page's default): ftrace with atrace, process and sys stats,
 * power, logcat, package list. */
static void android_system_trace_config_from_perfetto_docs(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "buffers: {\n"
      "    size_kb: 63488\n"
      "    fill_policy: DISCARD\n"
      "}\n"
      "buffers: {\n"
      "    size_kb: 2048\n"
      "    fill_policy: DISCARD\n"
      "}\n"
      "data_sources: {\n"
      "    config {\n"
      "        name: \"android.packages_list\"\n"
      "        target_buffer: 1\n"
      "        packages_list_config {\n"
      "            package_name_filter: \"com.android.systemui\"\n"
      "        }\n"
      "    }\n"
      "}\n"
      "data_sources: {\n"
      "    config {\n"
      "        name: \"linux.process_stats\"\n"
      "        target_buffer: 1\n"
      "        process_stats_config {\n"
      "            scan_all_processes_on_start: true\n"
      "        }\n"
      "    }\n"
      "}\n"
      "data_sources: {\n"
      "    config {\n"
      "        name: \"android.log\"\n"
      "        android_log_config {\n"
      "            log_ids: LID_EVENTS\n"
      "            log_ids: LID_CRASH\n"
      "            log_ids: LID_KERNEL\n"
      "            log_ids: LID_DEFAULT\n"
      "            log_ids: LID_SYSTEM\n"
      "            min_prio: PRIO_INFO\n"
      "            filter_tags: \"ActivityManager\"\n"
      "        }\n"
      "    }\n"
      "}\n"
      "data_sources: {\n"
      "    config {\n"
      "        name: \"android.power\"\n"
      "        android_power_config {\n"
      "            battery_poll_ms: 1000\n"
      "            battery_counters: BATTERY_COUNTER_CAPACITY_PERCENT\n"
      "            battery_counters: BATTERY_COUNTER_CHARGE\n"
      "            battery_counters: BATTERY_COUNTER_CURRENT\n"
      "            collect_power_rails: true\n"
      "        }\n"
      "    }\n"
      "}\n"
      "data_sources: {\n"
      "    config {\n"
      "        name: \"linux.sys_stats\"\n"
      "        sys_stats_config {\n"
      "            meminfo_period_ms: 1000\n"
      "            meminfo_counters: MEMINFO_MEM_AVAILABLE\n"
      "            meminfo_counters: MEMINFO_SWAP_CACHED\n"
      "            vmstat_period_ms: 1000\n"
      "            vmstat_counters: VMSTAT_NR_FREE_PAGES\n"
      "            vmstat_counters: VMSTAT_PGFAULT\n"
      "            stat_period_ms: 1000\n"
      "            stat_counters: STAT_CPU_TIMES\n"
      "            stat_counters: STAT_FORK_COUNT\n"
      "            cpufreq_period_ms: 1000\n"
      "            devfreq_period_ms: 1000\n"
      "            buddyinfo_period_ms: 2000\n"
      "            diskstat_period_ms: 2000\n"
      "            psi_period_ms: 1000\n"
      "        }\n"
      "    }\n"
      "}\n"
      "data_sources: {\n"
      "    config {\n"
      "        name: \"linux.ftrace\"\n"
      "        ftrace_config {\n"
      "            ftrace_events: \"sched/sched_switch\"\n"
      "            ftrace_events: \"power/suspend_resume\"\n"
      "            ftrace_events: \"sched/sched_waking\"\n"
      "            ftrace_events: \"power/cpu_frequency\"\n"
      "            ftrace_events: \"power/cpu_idle\"\n"
      "            ftrace_events: \"task/task_newtask\"\n"
      "            ftrace_events: \"ftrace/print\"\n"
      "            atrace_categories: \"gfx\"\n"
      "            atrace_categories: \"view\"\n"
      "            atrace_categories: \"wm\"\n"
      "            atrace_apps: \"*\"\n"
      "            buffer_size_kb: 2048\n"
      "            drain_period_ms: 250\n"
      "            compact_sched {\n"
      "                enabled: true\n"
      "            }\n"
      "            symbolize_ksyms: true\n"
      "        }\n"
      "    }\n"
      "}\n"
      "duration_ms: 10000\n");
  assert_int_equal(cfg->n_buffers, 2);
  assert_int_equal(cfg->n_data_sources, 6);
  Perfetto__Protos__DataSourceConfig *ds[6];
  for (size_t i = 0; i < 6; i++) ds[i] = cfg->data_sources[i]->config;

  assert_string_equal(ds[0]->name, "android.packages_list");
  assert_int_equal(ds[0]->target_buffer, 1);
  assert_non_null(ds[0]->packages_list_config);
  assert_int_equal(ds[0]->packages_list_config->n_package_name_filter, 1);
  assert_string_equal(ds[0]->packages_list_config->package_name_filter[0],
                      "com.android.systemui");

  assert_true(ds[1]->process_stats_config->scan_all_processes_on_start);

  Perfetto__Protos__AndroidLogConfig *log = ds[2]->android_log_config;
  assert_non_null(log);
  assert_int_equal(log->n_log_ids, 5);
  assert_int_equal(log->log_ids[0],
                   PERFETTO__PROTOS__ANDROID_LOG_ID__LID_EVENTS);
  assert_int_equal(log->log_ids[3],
                   PERFETTO__PROTOS__ANDROID_LOG_ID__LID_DEFAULT);
  assert_int_equal(log->log_ids[4],
                   PERFETTO__PROTOS__ANDROID_LOG_ID__LID_SYSTEM);
  assert_true(log->has_min_prio);
  assert_int_equal(log->min_prio,
                   PERFETTO__PROTOS__ANDROID_LOG_PRIORITY__PRIO_INFO);
  assert_int_equal(log->n_filter_tags, 1);
  assert_string_equal(log->filter_tags[0], "ActivityManager");

  Perfetto__Protos__AndroidPowerConfig *pw = ds[3]->android_power_config;
  assert_non_null(pw);
  assert_int_equal(pw->battery_poll_ms, 1000);
  assert_int_equal(pw->n_battery_counters, 3);
  assert_int_equal(
      pw->battery_counters[0],
      PERFETTO__PROTOS__ANDROID_POWER_CONFIG__BATTERY_COUNTERS__BATTERY_COUNTER_CAPACITY_PERCENT);
  assert_int_equal(
      pw->battery_counters[1],
      PERFETTO__PROTOS__ANDROID_POWER_CONFIG__BATTERY_COUNTERS__BATTERY_COUNTER_CHARGE);
  assert_int_equal(
      pw->battery_counters[2],
      PERFETTO__PROTOS__ANDROID_POWER_CONFIG__BATTERY_COUNTERS__BATTERY_COUNTER_CURRENT);
  assert_true(pw->has_collect_power_rails && pw->collect_power_rails);

  Perfetto__Protos__SysStatsConfig *sys = ds[4]->sys_stats_config;
  assert_int_equal(sys->meminfo_period_ms, 1000);
  assert_int_equal(sys->n_meminfo_counters, 2);
  assert_int_equal(sys->meminfo_counters[1],
                   PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_SWAP_CACHED);
  assert_int_equal(sys->vmstat_period_ms, 1000);
  assert_int_equal(sys->n_vmstat_counters, 2);
  assert_int_equal(sys->vmstat_counters[0],
                   PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_NR_FREE_PAGES);
  assert_int_equal(sys->vmstat_counters[1],
                   PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_PGFAULT);
  assert_int_equal(sys->n_stat_counters, 2);
  assert_int_equal(sys->cpufreq_period_ms, 1000);
  assert_int_equal(sys->devfreq_period_ms, 1000);
  assert_int_equal(sys->buddyinfo_period_ms, 2000);
  assert_int_equal(sys->diskstat_period_ms, 2000);
  assert_int_equal(sys->psi_period_ms, 1000);

  Perfetto__Protos__FtraceConfig *ft = ds[5]->ftrace_config;
  assert_non_null(ft);
  assert_int_equal(ft->n_ftrace_events, 7);
  assert_string_equal(ft->ftrace_events[0], "sched/sched_switch");
  assert_string_equal(ft->ftrace_events[6], "ftrace/print");
  assert_int_equal(ft->n_atrace_categories, 3);
  assert_string_equal(ft->atrace_categories[2], "wm");
  assert_int_equal(ft->n_atrace_apps, 1);
  assert_string_equal(ft->atrace_apps[0], "*");
  assert_int_equal(ft->buffer_size_kb, 2048);
  assert_int_equal(ft->drain_period_ms, 250);
  assert_non_null(ft->compact_sched);
  assert_true(ft->compact_sched->has_enabled && ft->compact_sched->enabled);
  assert_true(ft->has_symbolize_ksyms && ft->symbolize_ksyms);
  assert_int_equal(cfg->duration_ms, 10000);
  free_cfg(cfg);
}

/* Perfetto's memory-profiling docs: native and Java heap profiles next to
 * rss_stat ftrace events and polled memory counters, with a print filter. */
static void memory_profiling_config_from_perfetto_docs(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "buffers { size_kb: 65536 fill_policy: RING_BUFFER }\n"
      "data_sources {\n"
      "  config {\n"
      "    name: \"android.heapprofd\"\n"
      "    target_buffer: 0\n"
      "    heapprofd_config {\n"
      "      sampling_interval_bytes: 4096\n"
      "      process_cmdline: \"com.google.android.apps.nexuslauncher\"\n"
      "      shmem_size_bytes: 8388608\n"
      "      block_client: true\n"
      "      heaps: \"libc.malloc\"\n"
      "      heaps: \"com.android.art\"\n"
      "      heap_sampling_intervals: 4096\n"
      "      heap_sampling_intervals: 65536\n"
      "      continuous_dump_config {\n"
      "        dump_phase_ms: 0\n"
      "        dump_interval_ms: 1000\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n"
      "data_sources {\n"
      "  config {\n"
      "    name: \"android.java_hprof\"\n"
      "    java_hprof_config {\n"
      "      process_cmdline: \"com.google.android.apps.nexuslauncher\"\n"
      "      dump_smaps: true\n"
      "      ignored_types: \"sun.misc.Cleaner\"\n"
      "    }\n"
      "  }\n"
      "}\n"
      "data_sources {\n"
      "  config {\n"
      "    name: \"linux.ftrace\"\n"
      "    ftrace_config {\n"
      "      ftrace_events: \"kmem/rss_stat\"\n"
      "      ftrace_events: \"mm_event/mm_event_record\"\n"
      "      ftrace_events: \"oom/oom_score_adj_update\"\n"
      "      throttle_rss_stat: true\n"
      "      ksyms_mem_policy: KSYMS_RETAIN\n"
      "      print_filter {\n"
      "        rules { prefix: \"noisy:\" allow: false }\n"
      "        rules {\n"
      "          atrace_msg { type: \"C\" prefix: \"mem.\" }\n"
      "          allow: true\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n"
      "data_sources {\n"
      "  config {\n"
      "    name: \"linux.process_stats\"\n"
      "    process_stats_config {\n"
      "      scan_all_processes_on_start: true\n"
      "      proc_stats_poll_ms: 100\n"
      "    }\n"
      "  }\n"
      "}\n"
      "duration_ms: 30000\n");
  assert_int_equal(cfg->n_data_sources, 4);
  Perfetto__Protos__HeapprofdConfig *hp =
      cfg->data_sources[0]->config->heapprofd_config;
  assert_non_null(hp);
  assert_true(hp->sampling_interval_bytes == 4096);
  assert_int_equal(hp->n_process_cmdline, 1);
  assert_string_equal(hp->process_cmdline[0],
                      "com.google.android.apps.nexuslauncher");
  assert_true(hp->shmem_size_bytes == 8388608);
  assert_true(hp->block_client);
  assert_int_equal(hp->n_heaps, 2);
  assert_string_equal(hp->heaps[1], "com.android.art");
  assert_int_equal(hp->n_heap_sampling_intervals, 2);
  assert_true(hp->heap_sampling_intervals[1] == 65536);
  assert_non_null(hp->continuous_dump_config);
  assert_true(hp->continuous_dump_config->has_dump_phase_ms);
  assert_int_equal(hp->continuous_dump_config->dump_phase_ms, 0);
  assert_int_equal(hp->continuous_dump_config->dump_interval_ms, 1000);

  Perfetto__Protos__JavaHprofConfig *jh =
      cfg->data_sources[1]->config->java_hprof_config;
  assert_non_null(jh);
  assert_int_equal(jh->n_process_cmdline, 1);
  assert_true(jh->dump_smaps);
  assert_int_equal(jh->n_ignored_types, 1);
  assert_string_equal(jh->ignored_types[0], "sun.misc.Cleaner");

  Perfetto__Protos__FtraceConfig *ft =
      cfg->data_sources[2]->config->ftrace_config;
  assert_int_equal(ft->n_ftrace_events, 3);
  assert_string_equal(ft->ftrace_events[0], "kmem/rss_stat");
  assert_true(ft->throttle_rss_stat);
  assert_int_equal(
      ft->ksyms_mem_policy,
      PERFETTO__PROTOS__FTRACE_CONFIG__KSYMS_MEM_POLICY__KSYMS_RETAIN);
  Perfetto__Protos__FtraceConfig__PrintFilter *pf = ft->print_filter;
  assert_non_null(pf);
  assert_int_equal(pf->n_rules, 2);
  assert_int_equal(
      pf->rules[0]->match_case,
      PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__MATCH_PREFIX);
  assert_string_equal(pf->rules[0]->prefix, "noisy:");
  assert_true(pf->rules[0]->has_allow && !pf->rules[0]->allow);
  assert_int_equal(
      pf->rules[1]->match_case,
      PERFETTO__PROTOS__FTRACE_CONFIG__PRINT_FILTER__RULE__MATCH_ATRACE_MSG);
  assert_string_equal(pf->rules[1]->atrace_msg->type, "C");
  assert_string_equal(pf->rules[1]->atrace_msg->prefix, "mem.");
  assert_true(pf->rules[1]->allow);

  assert_int_equal(
      cfg->data_sources[3]->config->process_stats_config->proc_stats_poll_ms,
      100);
  assert_int_equal(cfg->duration_ms, 30000);
  free_cfg(cfg);
}

/* CPU profiling on Linux (docs: "CPU profiling", traced_perf) alongside
 * Chrome, GPU counters and the inode map, with the session-wide options
 * long-running and Android deployments set. */
static void cpu_profiling_and_session_options_from_perfetto_docs(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "buffers { size_kb: 131072 fill_policy: DISCARD }\n"
      "data_sources {\n"
      "  config {\n"
      "    name: \"linux.perf\"\n"
      "    perf_event_config {\n"
      "      timebase {\n"
      "        counter: SW_CPU_CLOCK\n"
      "        frequency: 100\n"
      "        timestamp_clock: PERF_CLOCK_MONOTONIC\n"
      "      }\n"
      "      followers { counter: HW_INSTRUCTIONS }\n"
      "      followers { tracepoint { name: \"sched/sched_switch\" } }\n"
      "      callstack_sampling {\n"
      "        scope {\n"
      "          target_cmdline: \"surfaceflinger\"\n"
      "          target_cmdline: \"system_server\"\n"
      "        }\n"
      "        kernel_frames: true\n"
      "        user_frames: UNWIND_DWARF\n"
      "      }\n"
      "      ring_buffer_pages: 2048\n"
      "      max_daemon_memory_kb: 1048576\n"
      "    }\n"
      "  }\n"
      "}\n"
      "data_sources {\n"
      "  config {\n"
      "    name: \"org.chromium.trace_event\"\n"
      "    chrome_config {\n"
      "      trace_config: "
      "\"{\\\"record_mode\\\":\\\"record-until-full\\\"}\"\n"
      "      privacy_filtering_enabled: true\n"
      "      client_priority: USER_INITIATED\n"
      "    }\n"
      "  }\n"
      "}\n"
      "data_sources {\n"
      "  config {\n"
      "    name: \"gpu.counters\"\n"
      "    gpu_counter_config {\n"
      "      counter_period_ns: 1000000\n"
      "      counter_ids: 1\n"
      "      counter_ids: 3\n"
      "    }\n"
      "  }\n"
      "}\n"
      "data_sources {\n"
      "  config {\n"
      "    name: \"linux.inode_file_map\"\n"
      "    inode_file_config {\n"
      "      scan_interval_ms: 1000\n"
      "      mount_point_mapping {\n"
      "        mountpoint: \"/data\"\n"
      "        scan_roots: \"/data/app\"\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n"
      "builtin_data_sources {\n"
      "  primary_trace_clock: BUILTIN_CLOCK_MONOTONIC\n"
      "  snapshot_interval_ms: 5000\n"
      "}\n"
      "producers {\n"
      "  producer_name: \"perfetto.traced_probes\"\n"
      "  shm_size_kb: 4096\n"
      "  page_size_kb: 4\n"
      "}\n"
      "statsd_metadata {\n"
      "  triggering_alert_id: 42\n"
      "  triggering_config_uid: 1000\n"
      "}\n"
      "data_source_stop_timeout_ms: 5000\n"
      "incremental_state_config { clear_period_ms: 5000 }\n"
      "unique_session_name: \"cpu_profile\"\n"
      "notify_traceur: true\n"
      "compression_type: COMPRESSION_TYPE_DEFLATE\n"
      "incident_report_config { skip_incidentd: true }\n"
      "trace_filter {\n"
      "  bytecode_v2: \"\\x0b\\x01\"\n"
      "  string_filter_chain {\n"
      "    rules {\n"
      "      policy: SFP_MATCH_REDACT_GROUPS\n"
      "      regex_pattern: \"^secret=(.*)$\"\n"
      "    }\n"
      "  }\n"
      "}\n"
      "duration_ms: 20000\n");
  assert_int_equal(cfg->n_data_sources, 4);
  Perfetto__Protos__PerfEventConfig *pe =
      cfg->data_sources[0]->config->perf_event_config;
  assert_non_null(pe);
  assert_non_null(pe->timebase);
  assert_int_equal(pe->timebase->event_case,
                   PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_COUNTER);
  assert_int_equal(pe->timebase->counter,
                   PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_CPU_CLOCK);
  assert_int_equal(pe->timebase->interval_case,
                   PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY);
  assert_true(pe->timebase->frequency == 100);
  assert_int_equal(
      pe->timebase->timestamp_clock,
      PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_MONOTONIC);
  assert_int_equal(pe->n_followers, 2);
  assert_int_equal(pe->followers[0]->event_case,
                   PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_COUNTER);
  assert_int_equal(pe->followers[0]->counter,
                   PERFETTO__PROTOS__PERF_EVENTS__COUNTER__HW_INSTRUCTIONS);
  assert_int_equal(pe->followers[1]->event_case,
                   PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_TRACEPOINT);
  assert_string_equal(pe->followers[1]->tracepoint->name, "sched/sched_switch");
  Perfetto__Protos__PerfEventConfig__CallstackSampling *cs =
      pe->callstack_sampling;
  assert_non_null(cs);
  assert_int_equal(cs->scope->n_target_cmdline, 2);
  assert_string_equal(cs->scope->target_cmdline[1], "system_server");
  assert_true(cs->kernel_frames);
  assert_int_equal(
      cs->user_frames,
      PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_DWARF);
  assert_int_equal(pe->ring_buffer_pages, 2048);
  assert_int_equal(pe->max_daemon_memory_kb, 1048576);

  Perfetto__Protos__ChromeConfig *cc =
      cfg->data_sources[1]->config->chrome_config;
  assert_non_null(cc);
  assert_string_equal(cc->trace_config,
                      "{\"record_mode\":\"record-until-full\"}");
  assert_true(cc->privacy_filtering_enabled);
  assert_int_equal(
      cc->client_priority,
      PERFETTO__PROTOS__CHROME_CONFIG__CLIENT_PRIORITY__USER_INITIATED);

  Perfetto__Protos__GpuCounterConfig *gc =
      cfg->data_sources[2]->config->gpu_counter_config;
  assert_true(gc->counter_period_ns == 1000000);
  assert_int_equal(gc->n_counter_ids, 2);
  assert_int_equal(gc->counter_ids[1], 3);

  Perfetto__Protos__InodeFileConfig *ic =
      cfg->data_sources[3]->config->inode_file_config;
  assert_int_equal(ic->scan_interval_ms, 1000);
  assert_int_equal(ic->n_mount_point_mapping, 1);
  assert_string_equal(ic->mount_point_mapping[0]->mountpoint, "/data");
  assert_string_equal(ic->mount_point_mapping[0]->scan_roots[0], "/data/app");

  assert_int_equal(cfg->builtin_data_sources->primary_trace_clock,
                   PERFETTO__PROTOS__BUILTIN_CLOCK__BUILTIN_CLOCK_MONOTONIC);
  assert_int_equal(cfg->builtin_data_sources->snapshot_interval_ms, 5000);
  assert_int_equal(cfg->n_producers, 1);
  assert_string_equal(cfg->producers[0]->producer_name,
                      "perfetto.traced_probes");
  assert_int_equal(cfg->producers[0]->shm_size_kb, 4096);
  assert_int_equal(cfg->producers[0]->page_size_kb, 4);
  assert_true(cfg->statsd_metadata->triggering_alert_id == 42);
  assert_int_equal(cfg->statsd_metadata->triggering_config_uid, 1000);
  assert_int_equal(cfg->data_source_stop_timeout_ms, 5000);
  assert_int_equal(cfg->incremental_state_config->clear_period_ms, 5000);
  assert_string_equal(cfg->unique_session_name, "cpu_profile");
  assert_true(cfg->has_notify_traceur && cfg->notify_traceur);
  assert_int_equal(
      cfg->compression_type,
      PERFETTO__PROTOS__TRACE_CONFIG__COMPRESSION_TYPE__COMPRESSION_TYPE_DEFLATE);
  assert_true(cfg->incident_report_config->skip_incidentd);
  Perfetto__Protos__TraceConfig__TraceFilter *tf = cfg->trace_filter;
  assert_non_null(tf);
  assert_true(tf->has_bytecode_v2);
  assert_int_equal(tf->bytecode_v2.len, 2);
  assert_memory_equal(tf->bytecode_v2.data, "\x0b\x01", 2);
  assert_int_equal(tf->string_filter_chain->n_rules, 1);
  assert_int_equal(
      tf->string_filter_chain->rules[0]->policy,
      PERFETTO__PROTOS__TRACE_CONFIG__TRACE_FILTER__STRING_FILTER_POLICY__SFP_MATCH_REDACT_GROUPS);
  assert_string_equal(tf->string_filter_chain->rules[0]->regex_pattern,
                      "^secret=(.*)$");
  assert_int_equal(cfg->duration_ms, 20000);
  free_cfg(cfg);
}

/* --- syntax ----------------------------------------------------------------
 */

static void comments_separators_and_brace_forms(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "# leading comment\n"
      "buffers: { size_kb: 1; fill_policy: DISCARD }  # trailing comment\n"
      "buffers < size_kb: 2, >\n"
      "buffers: < size_kb: 3 >;\n"
      "buffers{size_kb:4}buffers{}\n"
      "builtin_data_sources # comment between name and brace\n"
      "{\n"
      "  disable_clock_snapshotting: true # after a value\n"
      "}\n"
      "duration_ms: 5; flush_period_ms: 6,\n"
      "\t\r\f\v# every kind of blank\n"
      "data_sources{config{name:\"x\"}}");
  assert_int_equal(cfg->n_buffers, 5);
  for (unsigned i = 0; i < 4; i++)
    assert_int_equal(cfg->buffers[i]->size_kb, i + 1);
  assert_int_equal(
      cfg->buffers[0]->fill_policy,
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD);
  assert_false(cfg->buffers[4]->has_size_kb);
  assert_true(cfg->builtin_data_sources->disable_clock_snapshotting);
  assert_int_equal(cfg->duration_ms, 5);
  assert_int_equal(cfg->flush_period_ms, 6);
  assert_string_equal(cfg->data_sources[0]->config->name, "x");
  free_cfg(cfg);
}

static void list_syntax_for_scalars_and_messages(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "activate_triggers: [\"a\", 'b' \"c\"]\n"
      "activate_triggers: []\n"
      "buffers [{size_kb: 1}, <size_kb: 2>]\n"
      "buffers: [{ size_kb: 3 }]\n"
      "data_sources { config { sys_stats_config {\n"
      "  stat_counters: [STAT_CPU_TIMES, 2, STAT_FORK_COUNT]\n"
      "} } }\n");
  assert_int_equal(cfg->n_activate_triggers, 2);
  assert_string_equal(cfg->activate_triggers[0], "a");
  assert_string_equal(cfg->activate_triggers[1], "bc");
  assert_int_equal(cfg->n_buffers, 3);
  for (unsigned i = 0; i < 3; i++)
    assert_int_equal(cfg->buffers[i]->size_kb, i + 1);
  Perfetto__Protos__SysStatsConfig *sys =
      cfg->data_sources[0]->config->sys_stats_config;
  assert_int_equal(sys->n_stat_counters, 3);
  assert_int_equal(sys->stat_counters[0], 1);
  assert_int_equal(sys->stat_counters[1], 2);
  assert_int_equal(sys->stat_counters[2], 4);
  free_cfg(cfg);
}

static void string_escapes_each_kind(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "activate_triggers: \"\\n\\t\\\\\\\"\\'\\r\\a\\b\\f\\v\\?\"\n"
      "activate_triggers: '\\101\\60\\7x\\1234'\n"
      "activate_triggers: \"\\x41\\x4a\\X7e\\xfg\"\n"
      "activate_triggers: \"\\u00e9\\u20AC\\U0001F600\"\n"
      "activate_triggers: 'say \"hi\"' \" it's\"\n"
      "activate_triggers: \"a\" 'b'\n"
      "  # a comment between literals\n"
      "  \"c\"\n"
      "activate_triggers: \"\"\n");
  assert_int_equal(cfg->n_activate_triggers, 7);
  assert_string_equal(cfg->activate_triggers[0], "\n\t\\\"'\r\a\b\f\v?");
  assert_string_equal(cfg->activate_triggers[1], "A0\ax\1234");
  assert_string_equal(cfg->activate_triggers[2], "AJ~\x0fg");
  assert_string_equal(cfg->activate_triggers[3],
                      "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  assert_string_equal(cfg->activate_triggers[4], "say \"hi\" it's");
  assert_string_equal(cfg->activate_triggers[5], "abc");
  assert_string_equal(cfg->activate_triggers[6], "");
  free_cfg(cfg);

  /* Bytes may hold NULs and any octet. */
  tg_buf_t b;
  tg_pbtxt_error_t err;
  tg_buf_init(&b, 0);
  const char *text = "bytes: '\\0\\377\\x80a'";
  assert_int_equal(
      tg_pbtxt_parse(&all_types_desc, text, strlen(text), &b, &err), 0);
  tg_pb_reader_t r;
  tg_pb_reader_init(&r, tg_buf_begin(&b), tg_buf_size(&b));
  tg_pb_field_t f = next_field(&r, 13, TG_PB_WT_LEN);
  assert_int_equal(f.size, 4);
  assert_memory_equal(f.data, "\0\377\200a", 4);
  tg_buf_free(&b);
}

static void integers_hex_octal_negative_and_extremes(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "duration_ms: 0xFFFFFFFF\n"
      "flush_period_ms: 010\n"
      "file_write_period_ms: 0x10\n"
      "exclusive_prio: 0\n"
      "max_file_size_bytes: 18446744073709551615\n"
      "trace_uuid_msb: -9223372036854775808\n"
      "trace_uuid_lsb: 0x7fffffffffffffff\n"
      "bugreport_score: -2147483648\n"
      "statsd_metadata {\n"
      "  triggering_config_uid: 2147483647\n"
      "  triggering_alert_id: -1\n"
      "  triggering_config_id: -0x10\n"
      "  triggering_subscription_id: - 017\n"
      "}\n");
  assert_int_equal(cfg->duration_ms, 4294967295u);
  assert_int_equal(cfg->flush_period_ms, 8);
  assert_int_equal(cfg->file_write_period_ms, 16);
  assert_true(cfg->has_exclusive_prio);
  assert_int_equal(cfg->exclusive_prio, 0);
  assert_true(cfg->max_file_size_bytes == UINT64_MAX);
  assert_true(cfg->trace_uuid_msb == INT64_MIN);
  assert_true(cfg->trace_uuid_lsb == INT64_MAX);
  assert_int_equal(cfg->bugreport_score, INT32_MIN);
  assert_int_equal(cfg->statsd_metadata->triggering_config_uid, INT32_MAX);
  assert_true(cfg->statsd_metadata->triggering_alert_id == -1);
  assert_true(cfg->statsd_metadata->triggering_config_id == -16);
  assert_true(cfg->statsd_metadata->triggering_subscription_id == -15);
  free_cfg(cfg);
}

static void every_scalar_type_uses_its_wire_encoding(void **state) {
  (void)state;
  const char *text =
      "i32: -1 s32: -1 s32: -2147483648 sf32: -2 i64: -9223372036854775808\n"
      "s64: -9223372036854775808 sf64: -3 u32: 4294967295 f32: 0xdeadbeef\n"
      "u64: 18446744073709551615 f64: 0x0123456789abcdef\n"
      "flt: 1.5f dbl: -inf packed: [-1, 1] child { i32: 7 child { } }\n";
  tg_buf_t b;
  tg_pbtxt_error_t err;
  tg_buf_init(&b, 0);
  int rc = tg_pbtxt_parse(&all_types_desc, text, strlen(text), &b, &err);
  if (rc) fail_msg("%s", err.msg);
  tg_pb_reader_t r;
  tg_pb_reader_init(&r, tg_buf_begin(&b), tg_buf_size(&b));
  const uint8_t *before = r.cur;
  /* int32 -1 is sign-extended to 64 bits: a 10-byte varint. */
  assert_true(next_field(&r, 1, TG_PB_WT_VARINT).value == UINT64_MAX);
  assert_int_equal(r.cur - before, 11);
  assert_int_equal(next_field(&r, 2, TG_PB_WT_VARINT).value, 1);
  assert_int_equal(next_field(&r, 2, TG_PB_WT_VARINT).value, 0xFFFFFFFFu);
  assert_int_equal(next_field(&r, 3, TG_PB_WT_FIXED32).value, 0xFFFFFFFEu);
  assert_true(next_field(&r, 4, TG_PB_WT_VARINT).value == 1ull << 63);
  assert_true(next_field(&r, 5, TG_PB_WT_VARINT).value == UINT64_MAX);
  assert_true(next_field(&r, 6, TG_PB_WT_FIXED64).value == (uint64_t)-3);
  assert_int_equal(next_field(&r, 7, TG_PB_WT_VARINT).value, 0xFFFFFFFFu);
  assert_int_equal(next_field(&r, 8, TG_PB_WT_FIXED32).value, 0xdeadbeefu);
  assert_true(next_field(&r, 9, TG_PB_WT_VARINT).value == UINT64_MAX);
  assert_true(next_field(&r, 10, TG_PB_WT_FIXED64).value ==
              0x0123456789abcdefull);
  float fl = 1.5f;
  uint32_t fbits;
  memcpy(&fbits, &fl, 4);
  assert_int_equal(next_field(&r, 11, TG_PB_WT_FIXED32).value, fbits);
  double d = -INFINITY;
  uint64_t dbits;
  memcpy(&dbits, &d, 8);
  assert_true(next_field(&r, 12, TG_PB_WT_FIXED64).value == dbits);
  /* Repeated scalars come out unpacked even when declared packed. */
  assert_int_equal(next_field(&r, 300, TG_PB_WT_VARINT).value, 1);
  assert_int_equal(next_field(&r, 300, TG_PB_WT_VARINT).value, 2);
  tg_pb_field_t child = next_field(&r, 14, TG_PB_WT_LEN);
  static const uint8_t want_child[] = {0x08, 7, 0x72, 0};
  assert_int_equal(child.size, sizeof(want_child));
  assert_memory_equal(child.data, want_child, sizeof(want_child));
  tg_pb_field_t end;
  assert_int_equal(tg_pb_reader_next(&r, &end), 0);
  tg_buf_free(&b);

  /* Each type's range, one past each end. */
  const ProtobufCMessageDescriptor *at = &all_types_desc;
  expect_error_in(at, "i32: 2147483648", 1, 6, "out of range", "int32", NULL);
  expect_error_in(at, "i32: -2147483649", 1, 6, "out of range", NULL);
  expect_error_in(at, "s32: 0x80000000", 1, 6, "out of range", "sint32", NULL);
  expect_error_in(at, "sf32: -2147483649", 1, 7, "sfixed32", NULL);
  expect_error_in(at, "i64: 9223372036854775808", 1, 6, "int64", NULL);
  expect_error_in(at, "s64: -9223372036854775809", 1, 6, "sint64", NULL);
  expect_error_in(at, "u32: -1", 1, 6, "out of range", "uint32", NULL);
  expect_error_in(at, "f32: 4294967296", 1, 6, "fixed32", NULL);
  expect_error_in(at, "u64: 18446744073709551616", 1, 6, "uint64", NULL);
  expect_error_in(at, "f64: 0x10000000000000000", 1, 6, "fixed64", NULL);
  expect_error_in(at, "flt: 3.5e38", 1, 6, "out of range", "float", NULL);
  expect_error_in(at, "dbl: -1e309", 1, 6, "out of range", "double", NULL);
  expect_error_in(at, "dbl: 0x1p3", 1, 6, "expected a number", NULL);
  expect_error_in(at, "i32: 1.0", 1, 6, "expected an integer", "1.0", NULL);
  expect_error_in(at, "i32: 09", 1, 6, "expected an integer", NULL);
}

static void floats_take_exponents_suffix_inf_nan(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "trigger_config {\n"
      "  triggers { skip_probability: 0.5 }\n"
      "  triggers { skip_probability: 1e-3 }\n"
      "  triggers { skip_probability: 2.5E+2 }\n"
      "  triggers { skip_probability: 1.5f }\n"
      "  triggers { skip_probability: .25 }\n"
      "  triggers { skip_probability: 5 }\n"
      "  triggers { skip_probability: 0x10 }\n"
      "  triggers { skip_probability: -inf }\n"
      "  triggers { skip_probability: Infinity }\n"
      "  triggers { skip_probability: nan }\n"
      "  triggers { skip_probability: -0.0 }\n"
      "}\n");
  Perfetto__Protos__TraceConfig__TriggerConfig *tc = cfg->trigger_config;
  assert_int_equal(tc->n_triggers, 11);
  const double want[] = {0.5, 1e-3, 250, 1.5, 0.25, 5, 16};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    assert_true(tc->triggers[i]->skip_probability == want[i]);
  assert_true(isinf(tc->triggers[7]->skip_probability) &&
              tc->triggers[7]->skip_probability < 0);
  assert_true(isinf(tc->triggers[8]->skip_probability) &&
              tc->triggers[8]->skip_probability > 0);
  assert_true(isnan(tc->triggers[9]->skip_probability));
  assert_true(tc->triggers[10]->skip_probability == 0 &&
              signbit(tc->triggers[10]->skip_probability));
  free_cfg(cfg);
}

static void enums_by_number_and_bools_in_every_form(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "buffers { fill_policy: 2 }\n"
      "buffers { fill_policy: 0x1 }\n"
      "write_into_file: t\n"
      "deferred_start: True\n"
      "notify_traceur: 1\n"
      "enable_extra_guardrails: false\n"
      "allow_user_build_tracing: f\n"
      "prefer_suspend_clock_for_duration: 0\n"
      "no_flush_before_write_into_file: False\n"
      "builtin_data_sources { disable_trace_config: f\n"
      "  disable_system_info: true }\n");
  assert_int_equal(
      cfg->buffers[0]->fill_policy,
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD);
  assert_int_equal(
      cfg->buffers[1]->fill_policy,
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER);
  assert_true(cfg->write_into_file);
  assert_true(cfg->deferred_start);
  assert_true(cfg->notify_traceur);
  assert_true(cfg->has_enable_extra_guardrails);
  assert_false(cfg->enable_extra_guardrails);
  assert_true(cfg->has_no_flush_before_write_into_file);
  assert_false(cfg->no_flush_before_write_into_file);
  assert_true(cfg->has_prefer_suspend_clock_for_duration);
  assert_false(cfg->prefer_suspend_clock_for_duration);
  assert_true(cfg->builtin_data_sources->has_disable_trace_config);
  assert_false(cfg->builtin_data_sources->disable_trace_config);
  assert_true(cfg->builtin_data_sources->disable_system_info);
  assert_true(cfg->has_allow_user_build_tracing);
  assert_false(cfg->allow_user_build_tracing);
  free_cfg(cfg);
  /* Only protobuf's own spellings: no "F", "yes" or 2. */
  expect_error("write_into_file: F", 1, 18, "expected true or false");
}

static void repeated_scalars_last_wins_and_messages_merge(void **state) {
  (void)state;
  cfg_t *cfg = parse_cfg(
      "duration_ms: 1 duration_ms: 2\n"
      "builtin_data_sources { disable_clock_snapshotting: true }\n"
      "builtin_data_sources { disable_trace_config: true }\n");
  assert_int_equal(cfg->duration_ms, 2);
  assert_true(cfg->builtin_data_sources->disable_clock_snapshotting);
  assert_true(cfg->builtin_data_sources->disable_trace_config);
  free_cfg(cfg);
}

static void long_values_widen_lengths_and_output_appends(void **state) {
  (void)state;
  /* A 300-byte name in a nested message needs 2-byte lengths on the way up;
   * the output goes after what the buffer already held. */
  char text[512];
  char name[301];
  memset(name, 'n', 300);
  name[300] = '\0';
  snprintf(text, sizeof(text),
           "data_sources { config { name: \"%s\" } } duration_ms: 3", name);
  tg_buf_t b;
  tg_pbtxt_error_t err;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_buf_append(&b, "pre", 3), 0);
  assert_int_equal(tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                                  text, strlen(text), &b, &err),
                   0);
  assert_memory_equal(tg_buf_begin(&b), "pre", 3);
  cfg_t *cfg = perfetto__protos__trace_config__unpack(NULL, tg_buf_size(&b) - 3,
                                                      tg_buf_begin(&b) + 3);
  assert_non_null(cfg);
  assert_string_equal(cfg->data_sources[0]->config->name, name);
  assert_int_equal(cfg->duration_ms, 3);
  free_cfg(cfg);

  /* Empty and comment-only inputs are the empty message. */
  tg_buf_reset(&b);
  assert_int_equal(tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                                  "", 0, &b, &err),
                   0);
  assert_int_equal(tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                                  " # nothing\n", 11, &b, NULL),
                   0);
  assert_int_equal(tg_buf_size(&b), 0);
  tg_buf_free(&b);
}

/* --- errors ----------------------------------------------------------------
 */

static void unknown_field_names_the_message_type(void **state) {
  (void)state;
  expect_error("duration_msx: 5", 1, 1, "unknown field 'duration_msx'",
               "in perfetto.protos.TraceConfig;", "did you mean 'duration_ms'");
  expect_error("buffers {\n  sizekb: 5\n}", 2, 3, "unknown field 'sizekb'",
               "perfetto.protos.TraceConfig.BufferConfig", "'size_kb'");
  expect_error("buffers { zzz: 1 }", 1, 11, "unknown field 'zzz'",
               "expected one of: size_kb, fill_policy, transfer_on_clone",
               NULL);
  expect_error("[perfetto.protos.ext] { }", 1, 1, "not supported");
}

static void unknown_enum_value_lists_valid_names(void **state) {
  (void)state;
  expect_error("buffers {\n  fill_policy: RING\n}", 2, 16,
               "unknown value 'RING' for enum field 'fill_policy'",
               "expected one of: UNSPECIFIED, RING_BUFFER, DISCARD");
  expect_error("buffers { fill_policy: RING_BUFER }", 1, 24,
               "did you mean 'RING_BUFFER'");
  expect_error("buffers { fill_policy: 7 }", 1, 24, "unknown value 7",
               "RING_BUFFER");
  expect_error("buffers { fill_policy: -1 }", 1, 24, "unknown value -1");
  expect_error("buffers { fill_policy: \"DISCARD\" }", 1, 24,
               "expected an enum value name or number for field "
               "'fill_policy'",
               "got a string");
  expect_error("buffers { fill_policy: 4294967296 }", 1, 24, "out of range");
}

static void out_of_range_uint32_is_rejected(void **state) {
  (void)state;
  expect_error("duration_ms: 4294967296", 1, 14,
               "value 4294967296 is out of range for field 'duration_ms' "
               "(uint32)");
  expect_error("\n  duration_ms: -1", 2, 16, "value -1 is out of range",
               "uint32");
  expect_error("duration_ms: 99999999999999999999999", 1, 14, "out of range");
}

static void wrong_value_kinds_name_field_and_type(void **state) {
  (void)state;
  expect_error("duration_ms: \"10\"", 1, 14,
               "expected an integer for field 'duration_ms' (uint32), got a "
               "string");
  expect_error("duration_ms: 10ms", 1, 14, "expected an integer",
               "got number 10ms");
  expect_error("duration_ms: ten", 1, 14, "got 'ten'");
  expect_error("unique_session_name: 5", 1, 22, "expected a quoted string",
               "(string)", "got number 5");
  expect_error("write_into_file: yes", 1, 18, "expected true or false",
               "(bool)");
  expect_error("write_into_file: 2", 1, 18, "expected true or false");
  expect_error("trigger_config { triggers { skip_probability: \"x\" } }", 1, 47,
               "expected a number", "(double)");
  expect_error("buffers: 5", 1, 10, "expected '{' or '<' for field 'buffers'",
               "perfetto.protos.TraceConfig.BufferConfig");
  expect_error("duration_ms 5", 1, 13,
               "expected ':' after field "
               "'duration_ms'");
  expect_error("duration_ms: [1, 2]", 1, 14, "not repeated");
  expect_error("activate_triggers: [\"a\" 5]", 1, 25, "expected ',' or ']'");
  expect_error("activate_triggers: [\"a\",]", 1, 25,
               "expected a quoted "
               "string");
  expect_error("duration_ms: 1 ;; flush_period_ms: 2", 1, 17,
               "expected a field name", "got ';'");
  expect_error("duration_ms: 1 @", 1, 16, "unexpected character '@'");
  expect_error("duration_ms:\x01", 1, 13, "unexpected byte 0x01");
}

static void unterminated_string_points_at_its_quote(void **state) {
  (void)state;
  expect_error("data_sources {\n  config {\n    name: \"track_event\n  }\n}", 3,
               11, "unterminated string");
  expect_error("activate_triggers: 'abc", 1, 20, "unterminated string");
  expect_error("activate_triggers: \"abc\\\"", 1, 20, "unterminated string");
  expect_error("activate_triggers: \"abc\\\n\"", 1, 20, "unterminated string");
}

static void missing_closing_brace_at_end_of_input(void **state) {
  (void)state;
  expect_error("buffers {\n  size_kb: 1\n", 3, 1, "missing '}' at end of input",
               "'buffers' opened at line 1, column 9");
  expect_error("data_sources { config < name: \"x\"", 1, 34,
               "missing '>' at end of input",
               "'config' opened at line 1, "
               "column 23");
}

static void stray_or_mismatched_closing_brace(void **state) {
  (void)state;
  expect_error("duration_ms: 1\n}", 2, 1, "unexpected '}'",
               "no message is open");
  expect_error("buffers { size_kb: 1 }\n>", 2, 1, "unexpected '>'");
  expect_error("buffers < size_kb: 1 }", 1, 22,
               "expected '>' to close "
               "'buffers'",
               "got '}'");
}

static void bad_escapes_point_at_the_backslash(void **state) {
  (void)state;
  expect_error("unique_session_name: \"ab\\qc\"", 1, 25, "bad escape '\\q'");
  expect_error("unique_session_name: \"\\xg\"", 1, 23, "bad escape '\\x'",
               "hex digits");
  expect_error("unique_session_name: \"\\u12\"", 1, 23, "bad escape '\\u'",
               "4 hex digits");
  expect_error("unique_session_name: \"\\U0011ffff\"", 1, 23,
               "U+11FFFF is not a Unicode scalar value");
  expect_error("unique_session_name: \"\\ud800\"", 1, 23,
               "U+D800 is not a Unicode scalar value");
  expect_error("unique_session_name: \"ok\" \"\\400\"", 1, 28,
               "bad escape '\\400'");
}

static void nesting_is_bounded(void **state) {
  (void)state;
  /* TG_PBTXT_MAX_DEPTH levels are fine; one more is an error at its '{'. */
  char text[1024];
  for (unsigned levels = TG_PBTXT_MAX_DEPTH; levels <= TG_PBTXT_MAX_DEPTH + 1;
       levels++) {
    size_t n = 0;
    for (unsigned i = 0; i < levels; i++)
      n += (size_t)sprintf(text + n, "child{");
    for (unsigned i = 0; i < levels; i++) text[n++] = '}';
    text[n] = '\0';
    tg_buf_t b;
    tg_pbtxt_error_t err;
    tg_buf_init(&b, 0);
    int rc = tg_pbtxt_parse(&all_types_desc, text, n, &b, &err);
    if (levels == TG_PBTXT_MAX_DEPTH) {
      assert_int_equal(rc, 0);
    } else {
      assert_int_equal(rc, TG_EPARSE);
      assert_int_equal(err.line, 1);
      assert_int_equal(err.column, 6 * TG_PBTXT_MAX_DEPTH + 6);
      assert_non_null(strstr(err.msg, "nested deeper than 64"));
      assert_int_equal(tg_buf_size(&b), 0);
    }
    tg_buf_free(&b);
  }
}

static void scalar_field_given_a_message(void **state) {
  (void)state;
  expect_error("duration_ms {\n}", 1, 13,
               "field 'duration_ms' (uint32) is not a message",
               "expected ':' and a value");
  expect_error("buffers { fill_policy: { } }", 1, 24,
               "field 'fill_policy' "
               "(perfetto.protos.TraceConfig.BufferConfig.FillPolicy) is not "
               "a message");
  expect_error("activate_triggers: [{}]", 1, 21, "expected a quoted string",
               "got '{'");
}

/* Every prefix of a real config, in an exact-size heap block so ASan sees
 * any read past |len|, either parses or fails cleanly. */
static void truncated_inputs_never_read_past_len(void **state) {
  (void)state;
  size_t len = strlen(two_buffers_text);
  unsigned ok = 0;
  for (size_t n = 0; n <= len; n++) {
    char *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, two_buffers_text, n);
    tg_buf_t b;
    tg_pbtxt_error_t err;
    tg_buf_init(&b, 0);
    int rc = tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor, copy,
                            n, &b, &err);
    if (rc == 0) {
      ok++;
    } else {
      assert_int_equal(rc, TG_EPARSE);
      assert_true(err.line >= 1 && err.column >= 1);
      assert_int_equal(tg_buf_size(&b), 0);
    }
    tg_buf_free(&b);
    free(copy);
  }
  assert_true(ok > 2); /* the empty prefix, the full text, and some more */
}

static void output_cap_is_reported_and_output_restored(void **state) {
  (void)state;
  tg_buf_t b;
  tg_pbtxt_error_t err;
  tg_buf_init(&b, 16);
  assert_int_equal(tg_buf_append(&b, "pre", 3), 0);
  int rc = tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                          two_buffers_text, strlen(two_buffers_text), &b, &err);
  assert_int_equal(rc, -ENOBUFS);
  assert_non_null(strstr(err.msg, "cannot grow the output"));
  assert_int_equal(tg_buf_size(&b), 3);
  tg_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(track_event_config_from_perfetto_docs),
      cmocka_unit_test(long_trace_into_file_with_trigger),
      cmocka_unit_test(two_buffers_route_two_data_sources),
      cmocka_unit_test(android_system_trace_config_from_perfetto_docs),
      cmocka_unit_test(memory_profiling_config_from_perfetto_docs),
      cmocka_unit_test(cpu_profiling_and_session_options_from_perfetto_docs),
      cmocka_unit_test(comments_separators_and_brace_forms),
      cmocka_unit_test(list_syntax_for_scalars_and_messages),
      cmocka_unit_test(string_escapes_each_kind),
      cmocka_unit_test(integers_hex_octal_negative_and_extremes),
      cmocka_unit_test(every_scalar_type_uses_its_wire_encoding),
      cmocka_unit_test(floats_take_exponents_suffix_inf_nan),
      cmocka_unit_test(enums_by_number_and_bools_in_every_form),
      cmocka_unit_test(repeated_scalars_last_wins_and_messages_merge),
      cmocka_unit_test(long_values_widen_lengths_and_output_appends),
      cmocka_unit_test(unknown_field_names_the_message_type),
      cmocka_unit_test(unknown_enum_value_lists_valid_names),
      cmocka_unit_test(out_of_range_uint32_is_rejected),
      cmocka_unit_test(wrong_value_kinds_name_field_and_type),
      cmocka_unit_test(unterminated_string_points_at_its_quote),
      cmocka_unit_test(missing_closing_brace_at_end_of_input),
      cmocka_unit_test(stray_or_mismatched_closing_brace),
      cmocka_unit_test(bad_escapes_point_at_the_backslash),
      cmocka_unit_test(nesting_is_bounded),
      cmocka_unit_test(scalar_field_given_a_message),
      cmocka_unit_test(truncated_inputs_never_read_past_len),
      cmocka_unit_test(output_cap_is_reported_and_output_restored),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
