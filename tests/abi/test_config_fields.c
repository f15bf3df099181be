/* abi/config_fields.h: which fields of a typed config tracegate-probes
 * acts on, and the names of the others, as both the probes and the CLI
 * warn from them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "abi/config_fields.h"
#include "pb/config/data_source_config.pb-c.h"

/* |c| serialized into |b| (|cap| bytes, enough for every config here). */
static size_t pack(const Perfetto__Protos__DataSourceConfig *c, uint8_t *b,
                   size_t cap) {
  assert_true(perfetto__protos__data_source_config__get_packed_size(c) <= cap);
  return perfetto__protos__data_source_config__pack(c, b);
}

static void every_unacted_config_field_is_named(void **state) {
  (void)state;
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__SysStatsConfig ss = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
  dsc.sys_stats_config = &ss;
  ss.has_meminfo_period_ms = true;
  ss.meminfo_period_ms = 100;
  ss.has_psi_period_ms = true;
  ss.psi_period_ms = 100;
  char names[256];
  uint8_t b[256];
  size_t len = pack(&dsc, b, sizeof(b));
  /* Everything set is acted on: nothing to say. */
  assert_int_equal(tg_probes_unacted_fields("linux.sys_stats", b, len, names,
                                            sizeof(names)),
                   0);
  assert_string_equal(names, "");
  /* So are the /sys groups. */
  ss.has_thermal_period_ms = true;
  ss.thermal_period_ms = 100;
  ss.has_devfreq_period_ms = true;
  ss.devfreq_period_ms = 100;
  ss.has_cpuidle_period_ms = true;
  ss.cpuidle_period_ms = 100;
  ss.has_gpufreq_period_ms = true;
  ss.gpufreq_period_ms = 100;
  len = pack(&dsc, b, sizeof(b));
  assert_int_equal(tg_probes_unacted_fields("linux.sys_stats", b, len, names,
                                            sizeof(names)),
                   0);

  Perfetto__Protos__ProcessStatsConfig ps =
      PERFETTO__PROTOS__PROCESS_STATS_CONFIG__INIT;
  Perfetto__Protos__ProcessStatsConfig__Quirks q[] = {
      PERFETTO__PROTOS__PROCESS_STATS_CONFIG__QUIRKS__DISABLE_ON_DEMAND};
  dsc.sys_stats_config = NULL;
  dsc.process_stats_config = &ps;
  ps.has_record_thread_names = true;
  ps.record_thread_names = true;
  ps.n_quirks = 1;
  ps.quirks = q;
  ps.has_proc_stats_cache_ttl_ms = true;
  ps.proc_stats_cache_ttl_ms = 1000;
  ps.has_resolve_process_fds = true;
  ps.resolve_process_fds = true;
  len = pack(&dsc, b, sizeof(b));
  /* quirks is acted on (on-demand dumps); the cache TTL and fds are not. */
  assert_int_equal(tg_probes_unacted_fields("linux.process_stats", b, len,
                                            names, sizeof(names)),
                   2);
  assert_string_equal(names, "proc_stats_cache_ttl_ms, resolve_process_fds");
  /* Too small a buffer still counts them all and stays terminated. */
  char tiny[8];
  assert_int_equal(tg_probes_unacted_fields("linux.process_stats", b, len,
                                            tiny, sizeof(tiny)),
                   2);
  assert_true(strlen(tiny) < sizeof(tiny));
  /* The typed config of another source is not this source's business. */
  assert_int_equal(tg_probes_unacted_fields("linux.sys_stats", b, len, names,
                                            sizeof(names)),
                   0);

  /* A field newer than our schema is named by number. */
  const uint8_t newer[] = {0xba, 0x06, 0x03, /* process_stats_config (103) */
                           0xf8, 0x07, 0x01 /* field 127 = 1 */};
  assert_int_equal(tg_probes_unacted_fields("linux.process_stats", newer,
                                            sizeof(newer), names,
                                            sizeof(names)),
                   1);
  assert_string_equal(names, "field #127");
}

static void inode_file_fields_are_all_acted_on(void **state) {
  (void)state;
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__InodeFileConfig ic = PERFETTO__PROTOS__INODE_FILE_CONFIG__INIT;
  char *points[] = {(char *)"/", (char *)"/data"};
  ic.has_scan_interval_ms = true;
  ic.scan_interval_ms = 10;
  ic.has_scan_batch_size = true;
  ic.scan_batch_size = 100;
  ic.n_scan_mount_points = 2;
  ic.scan_mount_points = points;
  dsc.inode_file_config = &ic;
  uint8_t b[256];
  size_t len = pack(&dsc, b, sizeof(b));
  char names[64];
  assert_int_equal(tg_probes_unacted_fields("linux.inode_file_map", b, len,
                                            names, sizeof(names)),
                   0);
  assert_string_equal(names, "");
}

/* A source the table does not hold, a config that does not decode, one
 * without the typed config, and a buffer of no room: nothing named. */
static void other_sources_and_bad_configs_name_nothing(void **state) {
  (void)state;
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__SysStatsConfig ss = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
  ss.has_stat_period_ms = true;
  ss.stat_period_ms = 100;
  dsc.sys_stats_config = &ss;
  dsc.target_buffer = 1;
  uint8_t b[256];
  size_t len = pack(&dsc, b, sizeof(b));
  char names[64] = "x";
  assert_int_equal(tg_probes_unacted_fields("linux.ftrace", b, len, names,
                                            sizeof(names)),
                   0);
  assert_string_equal(names, "");
  /* Only the typed config's own fields count: target_buffer is the
   * service's. */
  assert_int_equal(tg_probes_unacted_fields("linux.sys_stats", b, len, names,
                                            sizeof(names)),
                   0);
  /* A field 1 (name) whose length runs past the end. */
  const uint8_t cut[] = {0x0a, 0x40, 'a'};
  strcpy(names, "x");
  assert_int_equal(tg_probes_unacted_fields("linux.sys_stats", cut,
                                            sizeof(cut), names, sizeof(names)),
                   0);
  assert_string_equal(names, "");
  assert_int_equal(tg_probes_unacted_fields("linux.sys_stats", NULL, 0, names,
                                            sizeof(names)),
                   0);
  /* An unacted field counted with no room to name it. */
  const uint8_t newer[] = {0xba, 0x06, 0x03, /* process_stats_config (103) */
                           0xf8, 0x07, 0x01 /* field 127 = 1 */};
  assert_int_equal(tg_probes_unacted_fields("linux.process_stats", newer,
                                            sizeof(newer), NULL, 0),
                   1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_unacted_config_field_is_named),
      cmocka_unit_test(inode_file_fields_are_all_acted_on),
      cmocka_unit_test(other_sources_and_bad_configs_name_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
