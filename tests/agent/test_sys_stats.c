/* linux.sys_stats' /sys groups (thermal, cpuidle, devfreq, gpufreq): the
 * parsers of their files on fixtures and garbage, and the data source's
 * rounds on a fake /proc and /sys in a temporary directory
 * (tg__sys_stats_set_root), decoded back with protobuf-c; then this
 * machine's cpuidle files when it has them. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/probes.h"
#include "agent/probes/probes_config.h"
#include "agent/sys/proc_read.h"
#include "agent/probes/sys_stats.h"
#include "agent/probes/sysfs_files.h"
#include "agent/probes/sysfs_groups.h"
#include "common/log.h"
#include "probes_fixtures.h"
#include "tracegate/error.h"

/* --- the parsers ----------------------------------------------------------- */

static int u64(const char *s, uint64_t *v) {
  return tg_sysfs_u64_parse(s, strlen(s), v);
}
static int i64(const char *s, int64_t *v) {
  return tg_sysfs_i64_parse(s, strlen(s), v);
}
static int name(const char *s, char *out, size_t cap) {
  return tg_sysfs_name_parse(s, strlen(s), out, cap);
}
static int sclk(const char *s, uint64_t *mhz) {
  return tg_amdgpu_sclk_parse(s, strlen(s), mhz);
}

static void sysfs_numbers_parse_and_refuse_garbage(void **state) {
  (void)state;
  uint64_t v = 7;
  assert_int_equal(u64("45500\n", &v), 0);
  assert_int_equal(v, 45500);
  assert_int_equal(u64("  0 \n\n", &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(u64("18446744073709551615", &v), 0);
  assert_int_equal(v, UINT64_MAX);
  v = 7;
  assert_int_equal(u64("18446744073709551616\n", &v), TG_EPARSE);
  assert_int_equal(u64("99999999999999999999999\n", &v), TG_EPARSE);
  assert_int_equal(u64("", &v), TG_EPARSE);
  assert_int_equal(u64("\n", &v), TG_EPARSE);
  assert_int_equal(u64("hot\n", &v), TG_EPARSE);
  assert_int_equal(u64("12x\n", &v), TG_EPARSE);
  assert_int_equal(u64("12 34\n", &v), TG_EPARSE);
  assert_int_equal(u64("12\n34\n", &v), TG_EPARSE);
  assert_int_equal(u64("-5\n", &v), TG_EPARSE);
  assert_int_equal(v, 7); /* untouched by a failure */
  /* A NUL inside is not the end of the number. */
  assert_int_equal(tg_sysfs_u64_parse("12\0" "3", 4, &v), TG_EPARSE);

  int64_t t;
  assert_int_equal(i64("-5000\n", &t), 0);
  assert_int_equal(t, -5000);
  assert_int_equal(i64("27800\n", &t), 0);
  assert_int_equal(t, 27800);
  assert_int_equal(i64("-\n", &t), TG_EPARSE);
  assert_int_equal(i64("--1\n", &t), TG_EPARSE);
  assert_int_equal(i64("9223372036854775808\n", &t), TG_EPARSE);
}

static void sysfs_names_are_one_printable_line(void **state) {
  (void)state;
  char out[TG_SYSFS_NAME_MAX];
  assert_int_equal(name("x86_pkg_temp\n", out, sizeof(out)), 0);
  assert_string_equal(out, "x86_pkg_temp");
  assert_int_equal(name("haltpoll idle\n", out, sizeof(out)), 0);
  assert_string_equal(out, "haltpoll idle");
  /* Cut to the bound, still terminated. */
  assert_int_equal(
      name("a-name-much-longer-than-any-the-kernel-gives\n", out, sizeof(out)),
      0);
  assert_int_equal(strlen(out), sizeof(out) - 1);
  assert_int_equal(name("", out, sizeof(out)), TG_EPARSE);
  assert_int_equal(name(" \n", out, sizeof(out)), TG_EPARSE);
  assert_int_equal(name("two\nlines\n", out, sizeof(out)), TG_EPARSE);
  assert_int_equal(name("bell\a\n", out, sizeof(out)), TG_EPARSE);
  assert_string_equal(out, "");
  assert_int_equal(name("caf\xc3\xa9\n", out, sizeof(out)), TG_EPARSE);
  assert_int_equal(tg_sysfs_name_parse("a\0b", 3, out, sizeof(out)),
                   TG_EPARSE);
}

static void amdgpu_sclk_finds_the_marked_level(void **state) {
  (void)state;
  uint64_t mhz = 0;
  assert_int_equal(sclk("0: 500Mhz \n1: 800Mhz *\n2: 1000Mhz \n", &mhz), 0);
  assert_int_equal(mhz, 800);
  assert_int_equal(sclk("0: 300MHz *\n", &mhz), 0);
  assert_int_equal(mhz, 300);
  assert_int_equal(sclk("0: 500Mhz\n1: 800Mhz\n", &mhz), TG_EPARSE);
  assert_int_equal(sclk("1: fastMhz *\n", &mhz), TG_EPARSE);
  assert_int_equal(sclk("1: *\n", &mhz), TG_EPARSE);
  assert_int_equal(sclk("*", &mhz), TG_EPARSE);
  assert_int_equal(sclk("", &mhz), TG_EPARSE);
}

/* --- a fake tree ----------------------------------------------------------- */

static char g_root[64]; /* "/tmp/tg-sys-stats-XXXXXX" */

static void tree_new(void) {
  snprintf(g_root, sizeof(g_root), "/tmp/tg-sys-stats-XXXXXX");
  assert_non_null(mkdtemp(g_root));
}

static int rm_one(const char *p, const struct stat *sb, int flag,
                  struct FTW *f) {
  (void)sb;
  (void)f;
  return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void tree_free(void) {
  assert_int_equal(nftw(g_root, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* mkdir -p of <root>/<rel>. */
static void mkdirs(const char *rel) {
  char p[PATH_MAX];
  snprintf(p, sizeof(p), "%s/%s", g_root, rel);
  for (char *s = p + strlen(g_root) + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    assert_true(mkdir(p, 0755) == 0 || errno == EEXIST);
    *s = '/';
  }
  assert_true(mkdir(p, 0755) == 0 || errno == EEXIST);
}

/* <root>/<rel> holding |text| (|len| bytes), its directories made. */
static void put_n(const char *rel, const char *text, size_t len) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof(dir), "%s", rel);
  char *slash = strrchr(dir, '/');
  if (slash) {
    *slash = '\0';
    mkdirs(dir);
  }
  char p[PATH_MAX];
  snprintf(p, sizeof(p), "%s/%s", g_root, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

static void put(const char *rel, const char *text) {
  put_n(rel, text, strlen(text));
}

__attribute__((format(printf, 2, 3))) static void putf(const char *text,
                                                       const char *fmt, ...) {
  char rel[PATH_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rel, sizeof(rel), fmt, ap);
  va_end(ap);
  put(rel, text);
}

/* <root>/<rel> a symlink to |target|, as /sys/class entries are. */
static void link_at(const char *rel, const char *target) {
  char p[PATH_MAX];
  snprintf(p, sizeof(p), "%s/%s", g_root, rel);
  assert_int_equal(symlink(target, p), 0);
}

/* --- the log --------------------------------------------------------------- */

static struct {
  char lines[64][TG_LOG_LINE_MAX];
  size_t n;
} g_log;

static void log_sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  (void)level;
  if (g_log.n < 64) snprintf(g_log.lines[g_log.n], TG_LOG_LINE_MAX, "%s", line);
  g_log.n++;
}

static void log_start(void) {
  memset(&g_log, 0, sizeof(g_log));
  tg_log_set_sink(log_sink, NULL);
}

static void log_stop(void) { tg_log_set_sink(NULL, NULL); }

/* How many lines logged so far hold |needle|. */
static size_t logged(const char *needle) {
  size_t k = 0;
  for (size_t i = 0; i < g_log.n && i < 64; i++)
    k += strstr(g_log.lines[i], needle) != NULL;
  return k;
}

/* --- the data source ------------------------------------------------------- */

#define PERIOD_MS 100

static sink_buf_t g_sb;

/* A linux.sys_stats instance reading under g_root: meminfo if |meminfo|,
 * and the four /sys groups, every PERIOD_MS. */
static void *instance(bool meminfo) {
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__SysStatsConfig ss = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
  dsc.name = "linux.sys_stats";
  dsc.sys_stats_config = &ss;
  ss.has_meminfo_period_ms = meminfo;
  ss.meminfo_period_ms = PERIOD_MS;
  ss.has_thermal_period_ms = ss.has_cpuidle_period_ms = true;
  ss.has_devfreq_period_ms = ss.has_gpufreq_period_ms = true;
  ss.thermal_period_ms = ss.cpuidle_period_ms = PERIOD_MS;
  ss.devfreq_period_ms = ss.gpufreq_period_ms = PERIOD_MS;
  _Alignas(max_align_t) unsigned char cfg[TG_PROBE_CFG_MAX];
  probe_parse_cfg(&tg_sys_stats_probe, &dsc, cfg);
  void *st = NULL;
  assert_int_equal(tg_sys_stats_probe.create(cfg, NULL, &st), 0);
  assert_int_equal(tg__sys_stats_set_root(st, g_root), 0);
  return st;
}

/* One round at |now_ms|; the SysStats it wrote, or NULL for none. */
static const Perfetto__Protos__SysStats *round_at(void *st, uint64_t now_ms) {
  tg_probes_sink_t sink = sink_buf_sink(&g_sb);
  size_t before = g_sb.n;
  assert_int_equal(tg__sys_stats_round(st, &sink, now_ms), now_ms + PERIOD_MS);
  if (g_sb.n == before) return NULL;
  const Perfetto__Protos__TracePacket *p = sink_buf_last(&g_sb);
  assert_non_null(p->sys_stats);
  assert_true(p->has_timestamp);
  assert_true(p->sys_stats->collection_end_timestamp >= p->timestamp);
  return p->sys_stats;
}

static void sys_stats_config_reads_the_sysfs_periods(void **state) {
  (void)state;
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__SysStatsConfig ss = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
  dsc.sys_stats_config = &ss;
  ss.has_devfreq_period_ms = ss.has_thermal_period_ms = true;
  ss.has_cpuidle_period_ms = ss.has_gpufreq_period_ms = true;
  ss.devfreq_period_ms = 200;
  ss.thermal_period_ms = 1000;
  ss.cpuidle_period_ms = 3; /* raised to the minimum */
  ss.gpufreq_period_ms = 50;
  tg_sys_stats_cfg_t c;
  probe_parse_cfg(&tg_sys_stats_probe, &dsc, &c);
  assert_int_equal(c.period_ms[TG_SYS_DEVFREQ], 200);
  assert_int_equal(c.period_ms[TG_SYS_THERMAL], 1000);
  assert_int_equal(c.period_ms[TG_SYS_CPUIDLE], TG_SYS_STATS_MIN_PERIOD_MS);
  assert_int_equal(c.period_ms[TG_SYS_GPUFREQ], 50);
  assert_int_equal(c.period_ms[TG_SYS_PSI], 0);
}

/* Two zones behind /sys/class symlinks as the kernel lays them out, two
 * cpus of three idle states, two devfreq devices, an Intel GPU; and what
 * must be passed over. */
static void fake_sys_tree(void) {
  static const char *const types[] = {"x86_pkg_temp\n", "acpitz\n"};
  static const char *const temps[] = {"45500\n", "27800\n"};
  mkdirs("sys/class/thermal");
  for (int z = 0; z < 2; z++) {
    putf(types[z], "sys/devices/virtual/thermal/thermal_zone%d/type", z);
    putf(temps[z], "sys/devices/virtual/thermal/thermal_zone%d/temp", z);
    char rel[64], target[96];
    snprintf(rel, sizeof(rel), "sys/class/thermal/thermal_zone%d", z);
    snprintf(target, sizeof(target),
             "../../devices/virtual/thermal/thermal_zone%d", z);
    link_at(rel, target);
  }
  put("sys/devices/virtual/thermal/cooling_device0/type", "Processor\n");
  link_at("sys/class/thermal/cooling_device0",
          "../../devices/virtual/thermal/cooling_device0");

  static const char *const states[] = {"POLL\n", "C1\n", "C2\n"};
  for (int cpu = 0; cpu < 2; cpu++)
    for (int s = 0; s < 3; s++) {
      char us[32];
      snprintf(us, sizeof(us), "%d\n", 1000 * (cpu + 1) + s);
      putf(states[s], "sys/devices/system/cpu/cpu%d/cpuidle/state%d/name", cpu,
           s);
      putf(us, "sys/devices/system/cpu/cpu%d/cpuidle/state%d/time", cpu, s);
    }
  /* Not cpus, or a cpu without cpuidle. */
  mkdirs("sys/devices/system/cpu/cpufreq/policy0");
  mkdirs("sys/devices/system/cpu/cpuidle");
  mkdirs("sys/devices/system/cpu/cpu2");
  put("sys/devices/system/cpu/online", "0-2\n");

  put("sys/devices/platform/soc/1d84000.ufshc/devfreq/1d84000.ufshc/cur_freq",
      "300000000\n");
  put("sys/devices/platform/soc/soc:qcom,cpubw/devfreq/soc:qcom,cpubw/cur_freq",
      "762\n");
  mkdirs("sys/class/devfreq");
  link_at("sys/class/devfreq/soc:qcom,cpubw",
          "../../devices/platform/soc/soc:qcom,cpubw/devfreq/soc:qcom,cpubw");
  link_at("sys/class/devfreq/1d84000.ufshc",
          "../../devices/platform/soc/1d84000.ufshc/devfreq/1d84000.ufshc");

  put("sys/class/drm/card0/gt_act_freq_mhz", "1150\n");
}

static void check_fake_sys(const Perfetto__Protos__SysStats *ss) {
  assert_non_null(ss);
  assert_int_equal(ss->n_thermal_zone, 2);
  assert_string_equal(ss->thermal_zone[0]->name, "thermal_zone0");
  assert_string_equal(ss->thermal_zone[0]->type, "x86_pkg_temp");
  assert_true(ss->thermal_zone[0]->has_temp);
  assert_int_equal(ss->thermal_zone[0]->temp, 45);
  assert_string_equal(ss->thermal_zone[1]->name, "thermal_zone1");
  assert_string_equal(ss->thermal_zone[1]->type, "acpitz");
  assert_int_equal(ss->thermal_zone[1]->temp, 27);

  assert_int_equal(ss->n_cpuidle_state, 2);
  static const char *const states[] = {"POLL", "C1", "C2"};
  for (uint32_t cpu = 0; cpu < 2; cpu++) {
    const Perfetto__Protos__SysStats__CpuIdleState *c = ss->cpuidle_state[cpu];
    assert_true(c->has_cpu_id);
    assert_int_equal(c->cpu_id, cpu);
    assert_int_equal(c->n_cpuidle_state_entry, 3);
    for (int s = 0; s < 3; s++) {
      assert_string_equal(c->cpuidle_state_entry[s]->state, states[s]);
      assert_true(c->cpuidle_state_entry[s]->has_duration_us);
      assert_int_equal(c->cpuidle_state_entry[s]->duration_us,
                       1000 * (cpu + 1) + (uint32_t)s);
    }
  }

  assert_int_equal(ss->n_devfreq, 2);
  assert_string_equal(ss->devfreq[0]->key, "1d84000.ufshc");
  assert_int_equal(ss->devfreq[0]->value, 300000000);
  assert_string_equal(ss->devfreq[1]->key, "soc:qcom,cpubw");
  assert_int_equal(ss->devfreq[1]->value, 762);

  assert_int_equal(ss->n_gpufreq_mhz, 1);
  assert_int_equal(ss->gpufreq_mhz[0], 1150);
}

static void sys_stats_reads_sysfs_groups_from_a_fake_tree(void **state) {
  (void)state;
  tree_new();
  fake_sys_tree();
  log_start();
  void *st = instance(false);
  check_fake_sys(round_at(st, 1000));
  /* Next round: new values in the files found the first time. */
  put("sys/devices/virtual/thermal/thermal_zone0/temp", "51999\n");
  put("sys/devices/system/cpu/cpu1/cpuidle/state2/time", "987654321\n");
  put("sys/class/drm/card0/gt_act_freq_mhz", "300\n");
  const Perfetto__Protos__SysStats *ss = round_at(st, 1000 + PERIOD_MS);
  assert_non_null(ss);
  assert_int_equal(ss->thermal_zone[0]->temp, 51);
  assert_int_equal(ss->cpuidle_state[1]->cpuidle_state_entry[2]->duration_us,
                   987654321);
  assert_int_equal(ss->gpufreq_mhz[0], 300);
  /* Nothing was amiss: nothing said. */
  assert_int_equal(g_log.n, 0);
  tg_sys_stats_probe.destroy(st);
  log_stop();
  sink_buf_clear(&g_sb);
  tree_free();
}

static void sys_stats_missing_sysfs_groups_write_no_field(void **state) {
  (void)state;
  tree_new();
  put("proc/meminfo", "MemTotal: 1000 kB\nMemFree: 500 kB\n");
  log_start();
  void *st = instance(true);
  for (uint64_t r = 0; r < 3; r++) {
    const Perfetto__Protos__SysStats *ss = round_at(st, 1000 + r * PERIOD_MS);
    assert_non_null(ss);
    assert_int_equal(ss->n_meminfo, 2);
    assert_int_equal(ss->n_thermal_zone, 0);
    assert_int_equal(ss->n_cpuidle_state, 0);
    assert_int_equal(ss->n_devfreq, 0);
    assert_int_equal(ss->n_gpufreq_mhz, 0);
  }
  /* Each group said once that this machine has none, then quiet. */
  assert_int_equal(g_log.n, 4);
  assert_int_equal(logged("thermal (/sys/class/thermal)"), 1);
  assert_int_equal(logged("cpuidle ("), 1);
  assert_int_equal(logged("devfreq (/sys/class/devfreq)"), 1);
  assert_int_equal(logged("gpufreq ("), 1);
  assert_int_equal(logged("does not have it"), 4);
  tg_sys_stats_probe.destroy(st);

  /* Only the /sys groups, and none there: no packet at all. An empty
   * directory is no better than none. */
  mkdirs("sys/class/devfreq");
  mkdirs("sys/class/thermal");
  st = instance(false);
  assert_null(round_at(st, 1000));
  assert_null(round_at(st, 1000 + PERIOD_MS));
  tg_sys_stats_probe.destroy(st);
  log_stop();
  sink_buf_clear(&g_sb);
  tree_free();
}

static void sys_stats_skips_malformed_sysfs_files(void **state) {
  (void)state;
  tree_new();
  /* Zones 0-3 do not read as a temperature, 4 does; 5 and 6 have no type
   * that reads. */
  static const char *const temps[] = {"hot\n", "99999999999999999999999\n", "",
                                      "-5000\n", "41000\n", "1000\n", "1000\n"};
  for (int z = 0; z < 7; z++) {
    putf(temps[z], "sys/class/thermal/thermal_zone%d/temp", z);
    if (z < 5) putf("zone\n", "sys/class/thermal/thermal_zone%d/type", z);
  }
  put("sys/class/thermal/thermal_zone5/type", "bad\001type\n");
  /* cpu0: state0 time garbled, state1 good, state2 without a name. */
  put("sys/devices/system/cpu/cpu0/cpuidle/state0/name", "POLL\n");
  put("sys/devices/system/cpu/cpu0/cpuidle/state0/time", "x\n");
  put("sys/devices/system/cpu/cpu0/cpuidle/state1/name", "C1\n");
  put("sys/devices/system/cpu/cpu0/cpuidle/state1/time", "5\n");
  put("sys/devices/system/cpu/cpu0/cpuidle/state2/name", "\n");
  put("sys/devices/system/cpu/cpu0/cpuidle/state2/time", "6\n");
  /* cpu1: every time empty, so it is left out. */
  put("sys/devices/system/cpu/cpu1/cpuidle/state0/name", "POLL\n");
  put("sys/devices/system/cpu/cpu1/cpuidle/state0/time", "");
  /* Directory names that are no cpu. */
  mkdirs("sys/devices/system/cpu/cpu99999999999/cpuidle/state0");
  mkdirs("sys/devices/system/cpu/cpu-1/cpuidle/state0");
  put("sys/class/devfreq/a/cur_freq", "");
  put("sys/class/devfreq/b/cur_freq", "12\n");
  put("sys/class/devfreq/c/cur_freq", "1e9\n");
  /* No GPU file that parses: no gpufreq. */
  put("sys/class/drm/card0/gt_act_freq_mhz", "abc\n");
  put("sys/class/drm/card0/device/pp_dpm_sclk", "0: 300Mhz\n1: 600Mhz\n");
  log_start();
  void *st = instance(false);
  for (uint64_t r = 0; r < 2; r++) {
    const Perfetto__Protos__SysStats *ss = round_at(st, 1000 + r * PERIOD_MS);
    assert_non_null(ss);
    assert_int_equal(ss->n_thermal_zone, 1);
    assert_string_equal(ss->thermal_zone[0]->name, "thermal_zone4");
    assert_int_equal(ss->thermal_zone[0]->temp, 41);
    assert_int_equal(ss->n_cpuidle_state, 1);
    assert_int_equal(ss->cpuidle_state[0]->cpu_id, 0);
    assert_int_equal(ss->cpuidle_state[0]->n_cpuidle_state_entry, 1);
    assert_string_equal(ss->cpuidle_state[0]->cpuidle_state_entry[0]->state,
                        "C1");
    assert_int_equal(ss->cpuidle_state[0]->cpuidle_state_entry[0]->duration_us,
                     5);
    assert_int_equal(ss->n_devfreq, 1);
    assert_string_equal(ss->devfreq[0]->key, "b");
    assert_int_equal(ss->n_gpufreq_mhz, 0);
  }
  /* The first bad file of each group, once; gpufreq also failed as a
   * group (no file parsed), once. */
  assert_int_equal(logged("left out of the thermal group"), 1);
  assert_int_equal(logged("left out of the cpuidle group"), 1);
  assert_int_equal(logged("left out of the devfreq group"), 1);
  assert_int_equal(logged("left out of the gpufreq group"), 1);
  assert_int_equal(logged("gpufreq (/sys"), 1);
  assert_int_equal(g_log.n, 5);
  tg_sys_stats_probe.destroy(st);
  log_stop();
  sink_buf_clear(&g_sb);
  tree_free();
}

static void gpufreq_reads_adreno_then_intel_then_amd(void **state) {
  (void)state;
  tree_new();
  tg_sysfs_groups_t *g;
  assert_int_equal(tg_sysfs_groups_new(g_root, &g), 0);
  uint64_t mhz = 0;
  assert_int_equal(tg_sysfs_gpufreq_read(g, &mhz), -ENOENT);
  put("sys/class/drm/card0/device/pp_dpm_sclk",
      "0: 500Mhz \n1: 800Mhz *\n2: 1000Mhz \n");
  assert_int_equal(tg_sysfs_gpufreq_read(g, &mhz), 0);
  assert_int_equal(mhz, 800);
  put("sys/class/drm/card0/gt_act_freq_mhz", "1150\n");
  /* The file found keeps being read while it reads... */
  assert_int_equal(tg_sysfs_gpufreq_read(g, &mhz), 0);
  assert_int_equal(mhz, 800);
  /* ...and when it stops, the first that reads, in traced_probes' order. */
  put("sys/class/drm/card0/device/pp_dpm_sclk", "");
  put("sys/class/kgsl/kgsl-3d0/devfreq/cur_freq", "587000000\n");
  assert_int_equal(tg_sysfs_gpufreq_read(g, &mhz), 0);
  assert_int_equal(mhz, 587);
  tg_sysfs_groups_free(g);
  tree_free();
}

static void sysfs_directories_are_read_under_a_cap(void **state) {
  (void)state;
  tree_new();
  for (int z = 0; z < TG_THERMAL_MAX_ZONES + 2; z++) {
    putf("zone\n", "sys/class/thermal/thermal_zone%d/type", z);
    putf("1000\n", "sys/class/thermal/thermal_zone%d/temp", z);
  }
  for (int s = 0; s < TG_CPUIDLE_MAX_STATES + 1; s++) {
    putf("C\n", "sys/devices/system/cpu/cpu0/cpuidle/state%d/name", s);
    putf("1\n", "sys/devices/system/cpu/cpu0/cpuidle/state%d/time", s);
  }
  char longname[TG_DEVFREQ_NAME_MAX + 8];
  memset(longname, 'd', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  putf("1\n", "sys/class/devfreq/%s/cur_freq", longname);
  put("sys/class/devfreq/short/cur_freq", "2\n");
  log_start();
  tg_sysfs_groups_t *g;
  assert_int_equal(tg_sysfs_groups_new(g_root, &g), 0);
  const tg_thermal_zone_t *zones;
  size_t n;
  assert_int_equal(tg_sysfs_thermal_read(g, &zones, &n), 0);
  assert_int_equal(n, TG_THERMAL_MAX_ZONES);
  /* The lowest numbers, in order. */
  assert_string_equal(zones[0].name, "thermal_zone0");
  assert_string_equal(zones[n - 1].name, "thermal_zone127");
  assert_int_equal(logged("2 thermal zones past the first 128"), 1);
  const tg_cpuidle_cpu_t *cpus;
  assert_int_equal(tg_sysfs_cpuidle_read(g, &cpus, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(cpus[0].n_states, TG_CPUIDLE_MAX_STATES);
  assert_int_equal(logged("1 idle states past the first 16"), 1);
  const tg_devfreq_t *devs;
  assert_int_equal(tg_sysfs_devfreq_read(g, &devs, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(devs[0].name, "short");
  assert_int_equal(logged("1 with a name of 64 bytes or more"), 1);
  tg_sysfs_groups_free(g);
  log_stop();
  tree_free();
}

/* --- this machine ---------------------------------------------------------- */

static void real_cpuidle_reads_when_present(void **state) {
  (void)state;
  if (access("/sys/devices/system/cpu/cpu0/cpuidle/state0/name", R_OK) != 0)
    skip();
  tg_buf_t file;
  tg_buf_init(&file, 4096);
  char want[TG_SYSFS_NAME_MAX];
  assert_int_equal(
      tg_proc_read_file("/sys/devices/system/cpu/cpu0/cpuidle/state0/name",
                        &file),
      0);
  assert_int_equal(tg_sysfs_name_parse((const char *)tg_buf_begin(&file),
                                       tg_buf_size(&file), want, sizeof(want)),
                   0);
  tg_buf_free(&file);
  tg_sysfs_groups_t *g;
  assert_int_equal(tg_sysfs_groups_new("", &g), 0);
  const tg_cpuidle_cpu_t *cpus;
  size_t n;
  assert_int_equal(tg_sysfs_cpuidle_read(g, &cpus, &n), 0);
  assert_true(n >= 1);
  assert_int_equal(cpus[0].cpu, 0);
  assert_true(cpus[0].n_states >= 1);
  assert_string_equal(cpus[0].states[0].name, want);
  uint64_t before = cpus[0].states[cpus[0].n_states - 1].time_us;
  size_t n_states = cpus[0].n_states;
  /* Residencies only grow. */
  assert_int_equal(tg_sysfs_cpuidle_read(g, &cpus, &n), 0);
  assert_int_equal(cpus[0].n_states, n_states);
  assert_true(cpus[0].states[n_states - 1].time_us >= before);
  tg_sysfs_groups_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sysfs_numbers_parse_and_refuse_garbage),
      cmocka_unit_test(sysfs_names_are_one_printable_line),
      cmocka_unit_test(amdgpu_sclk_finds_the_marked_level),
      cmocka_unit_test(sys_stats_config_reads_the_sysfs_periods),
      cmocka_unit_test(sys_stats_reads_sysfs_groups_from_a_fake_tree),
      cmocka_unit_test(sys_stats_missing_sysfs_groups_write_no_field),
      cmocka_unit_test(sys_stats_skips_malformed_sysfs_files),
      cmocka_unit_test(gpufreq_reads_adreno_then_intel_then_amd),
      cmocka_unit_test(sysfs_directories_are_read_under_a_cap),
      cmocka_unit_test(real_cpuidle_reads_when_present),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
