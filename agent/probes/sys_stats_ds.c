/* "linux.sys_stats": each counter group of SysStatsConfig on its own
 * period, one SysStats packet per round holding the groups that were due.
 * Runs on the sampler thread; see sys_stats.h.
 *
 * A group the kernel does not have (no /proc/pressure, no cpufreq or
 * thermal zones on a VM) is said once in the log and then skipped quietly
 * each round.
 */
#include "agent/probes/sys_stats.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/clock.h"
#include "agent/probes/kernel_files.h"
#include "agent/probes/meminfo.h"
#include "agent/probes/metatrace.h"
#include "agent/probes/probes.h"
#include "agent/probes/probes_config.h"
#include "agent/probes/probes_packets.h"
#include "agent/sys/proc_read.h"
#include "agent/probes/proc_stat.h"
#include "agent/probes/sysfs_groups.h"
#include "common/log.h"
#include "common/notice.h"
#include "tracegate/error.h"

_Static_assert(sizeof(tg_sys_stats_cfg_t) <= TG_PROBE_CFG_MAX,
               "config does not fit the sampler's slot");

/* /proc/stat grows with cpus and interrupts; 4 MiB is far past any real
 * machine and bounds a runaway read. */
#define READ_CAP (4u << 20)
/* cpufreq_khz entries: one per cpu. */
#define MAX_CPUS 4096

static const char *const group_names[TG_SYS_GROUPS] = {
    [TG_SYS_MEMINFO] = "/proc/meminfo",
    [TG_SYS_VMSTAT] = "/proc/vmstat",
    [TG_SYS_STAT] = "/proc/stat",
    [TG_SYS_CPUFREQ] = "cpufreq (/sys/devices/system/cpu)",
    [TG_SYS_BUDDYINFO] = "/proc/buddyinfo",
    [TG_SYS_DISKSTAT] = "/proc/diskstats",
    [TG_SYS_PSI] = "/proc/pressure",
    [TG_SYS_DEVFREQ] = "devfreq (/sys/class/devfreq)",
    [TG_SYS_THERMAL] = "thermal (/sys/class/thermal)",
    [TG_SYS_CPUIDLE] = "cpuidle (/sys/devices/system/cpu/cpu*/cpuidle)",
    [TG_SYS_GPUFREQ] = "gpufreq (/sys/class/kgsl, /sys/class/drm/card0)",
};
static const char *const psi_files[3] = {
    "/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory"};

typedef struct sys_stats {
  tg_sys_stats_cfg_t cfg;
  uint64_t ns_per_tick;
  long n_cpus;
  uint64_t next_ms[TG_SYS_GROUPS]; /* 0: due now */
  int last_err[TG_SYS_GROUPS];     /* log each new error once */
  char root[PATH_MAX / 2];         /* before every path: "" but in tests */
  char path[PATH_MAX];
  tg_buf_t file;
  tg_meminfo_t meminfo;
  tg_vmstat_t vmstat;
  tg_proc_stat_t stat;
  uint32_t cpufreq_khz[MAX_CPUS];
  tg_buddyinfo_t buddyinfo;
  tg_diskstats_t diskstats;
  tg_psi_t psi[3];
  tg_sysfs_groups_t *sysfs;
} sys_stats_t;

static int parse_cfg(const uint8_t *cfg, size_t len, void *out) {
  int rv = tg_sys_stats_cfg_parse(cfg, len, out);
  if (rv == 0) tg_probes_warn_unacted("linux.sys_stats", cfg, len);
  return rv;
}

static int create(const void *cfg, void *ctx, void **state) {
  (void)ctx;
  sys_stats_t *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  memcpy(&st->cfg, cfg, sizeof(st->cfg));
  st->ns_per_tick = tg_probes_ns_per_tick();
  st->n_cpus = sysconf(_SC_NPROCESSORS_CONF);
  if (st->n_cpus < 1) st->n_cpus = 1;
  if (st->n_cpus > MAX_CPUS) st->n_cpus = MAX_CPUS;
  tg_buf_init(&st->file, READ_CAP);
  int rv = tg_sysfs_groups_new("", &st->sysfs);
  if (rv < 0) {
    tg_buf_free(&st->file);
    free(st);
    return rv;
  }
  bool any = false;
  for (int g = 0; g < TG_SYS_GROUPS; g++) any |= st->cfg.period_ms[g] != 0;
  if (!any) TG_INFO("linux.sys_stats: no *_period_ms set; nothing to poll");
  *state = st;
  return 0;
}

static void destroy(void *state) {
  sys_stats_t *st = state;
  tg_buf_free(&st->file);
  tg_proc_stat_free(&st->stat);
  tg_sysfs_groups_free(st->sysfs);
  free(st);
}

int tg__sys_stats_set_root(void *state, const char *root) {
  sys_stats_t *st = state;
  size_t n = strnlen(root, sizeof(st->root));
  if (n == sizeof(st->root)) return -ENAMETOOLONG;
  tg_sysfs_groups_t *g;
  int rv = tg_sysfs_groups_new(root, &g);
  if (rv < 0) return rv;
  tg_sysfs_groups_free(st->sysfs);
  st->sysfs = g;
  memcpy(st->root, root, n + 1);
  return 0;
}

/* |fmt| under the root, in st->path; NULL if that does not fit. */
#define at_root(st, ...) \
  tg_proc_path_at((st)->path, sizeof((st)->path), (st)->root, __VA_ARGS__)

static void note_error(sys_stats_t *st, int g, int rv) {
  if (rv != st->last_err[g] && rv < 0)
    TG_WARN("%s linux.sys_stats: %s: %s%s", TG_NOTE(PROBES_SOURCE_MISSING),
            group_names[g], tg_strerror(rv),
            rv == -ENOENT ? " (this kernel does not have it; skipped)" : "");
  st->last_err[g] = rv;
}

/* Reads |rel| (under the root) into st->file and hands its text to
 * |parse|. */
static int read_parse(sys_stats_t *st, const char *rel,
                      int (*parse)(const char *, size_t, void *), void *out) {
  const char *path = at_root(st, "%s", rel);
  if (!path) return -ENAMETOOLONG;
  int rv = tg_proc_read_file(path, &st->file);
  if (rv == 0)
    rv = parse((const char *)tg_buf_begin(&st->file), tg_buf_size(&st->file),
               out);
  return rv;
}

/* The parsers take typed outputs; these adapt them to read_parse. */
static int parse_meminfo(const char *t, size_t n, void *o) { return tg_meminfo_parse(t, n, o); }
static int parse_vmstat(const char *t, size_t n, void *o) { return tg_vmstat_parse(t, n, o); }
static int parse_stat(const char *t, size_t n, void *o) { return tg_proc_stat_parse(t, n, o); }
static int parse_buddy(const char *t, size_t n, void *o) { return tg_buddyinfo_parse(t, n, o); }
static int parse_disks(const char *t, size_t n, void *o) { return tg_diskstats_parse(t, n, o); }
static int parse_psi(const char *t, size_t n, void *o) { return tg_psi_parse(t, n, o); }

/* cpuN/cpufreq/scaling_cur_freq for every cpu, 0 for one without it.
 * -ENOENT when no cpu has cpufreq at all. */
static int read_cpufreq(sys_stats_t *st) {
  bool any = false;
  for (long cpu = 0; cpu < st->n_cpus; cpu++) {
    const char *path = at_root(
        st, "/sys/devices/system/cpu/cpu%ld/cpufreq/scaling_cur_freq", cpu);
    uint64_t khz = 0;
    if (path && tg_proc_read_file(path, &st->file) == 0) {
      char *end;
      khz = strtoull((const char *)tg_buf_begin(&st->file), &end, 10);
      if (khz > UINT32_MAX) khz = 0;
      any = true;
    }
    st->cpufreq_khz[cpu] = (uint32_t)khz;
  }
  return any ? 0 : -ENOENT;
}

/* Reads group |g| into |s|. */
static void read_group(sys_stats_t *st, int g, tg_sys_stats_sample_t *s) {
  const tg_sys_stats_cfg_t *c = &st->cfg;
  int rv = 0;
  switch (g) {
    case TG_SYS_MEMINFO:
      rv = read_parse(st, "/proc/meminfo", parse_meminfo, &st->meminfo);
      if (rv == 0) s->meminfo = &st->meminfo;
      s->meminfo_mask = c->meminfo_mask;
      break;
    case TG_SYS_VMSTAT:
      rv = read_parse(st, "/proc/vmstat", parse_vmstat, &st->vmstat);
      if (rv == 0) s->vmstat = &st->vmstat;
      s->vmstat_mask = c->vmstat_mask;
      break;
    case TG_SYS_STAT:
      rv = read_parse(st, "/proc/stat", parse_stat, &st->stat);
      if (rv == 0) s->stat = &st->stat;
      s->stat_mask = c->stat_mask;
      break;
    case TG_SYS_CPUFREQ:
      rv = read_cpufreq(st);
      if (rv == 0) {
        s->cpufreq_khz = st->cpufreq_khz;
        s->n_cpufreq = (size_t)st->n_cpus;
      }
      break;
    case TG_SYS_BUDDYINFO:
      rv = read_parse(st, "/proc/buddyinfo", parse_buddy, &st->buddyinfo);
      if (rv == 0) s->buddyinfo = &st->buddyinfo;
      break;
    case TG_SYS_DISKSTAT:
      rv = read_parse(st, "/proc/diskstats", parse_disks, &st->diskstats);
      if (rv == 0) s->diskstats = &st->diskstats;
      break;
    case TG_SYS_PSI:
      rv = -ENOENT;
      for (int k = 0; k < 3; k++) {
        int r = read_parse(st, psi_files[k], parse_psi, &st->psi[k]);
        if (r == 0) s->psi[k] = &st->psi[k];
        if (r == 0 || rv == -ENOENT) rv = r;
      }
      break;
    case TG_SYS_DEVFREQ:
      rv = tg_sysfs_devfreq_read(st->sysfs, &s->devfreq, &s->n_devfreq);
      break;
    case TG_SYS_THERMAL:
      rv = tg_sysfs_thermal_read(st->sysfs, &s->thermal, &s->n_thermal);
      break;
    case TG_SYS_CPUIDLE:
      rv = tg_sysfs_cpuidle_read(st->sysfs, &s->cpuidle, &s->n_cpuidle);
      break;
    case TG_SYS_GPUFREQ:
      rv = tg_sysfs_gpufreq_read(st->sysfs, &s->gpufreq_mhz);
      s->has_gpufreq = rv == 0;
      break;
  }
  note_error(st, g, rv);
}

/* Next due time after a round at |now|: keep the cadence, but never
 * schedule in the past after a stall. */
static uint64_t advance(uint64_t due, uint32_t period, uint64_t now) {
  uint64_t next = (due ? due : now) + period;
  return next <= now ? now + period : next;
}

uint64_t tg__sys_stats_round(void *state, const tg_probes_sink_t *sink,
                             uint64_t now) {
  sys_stats_t *st = state;
  const tg_sys_stats_cfg_t *c = &st->cfg;
  uint64_t meta = tg_meta_begin();
  tg_sys_stats_sample_t s = {.ts_ns = tg__clock_boottime(),
                             .ns_per_tick = st->ns_per_tick};
  bool due[TG_SYS_GROUPS];
  for (int g = 0; g < TG_SYS_GROUPS; g++) {
    due[g] = c->period_ms[g] && st->next_ms[g] <= now;
    if (due[g]) read_group(st, g, &s);
  }
  s.end_ts_ns = tg__clock_boottime();
  if (!tg_sys_stats_sample_empty(&s)) {
    tg_pbw_t *w = sink->begin(sink->ctx);
    if (w) {
      tg_probes_write_sys_stats(w, &s);
      sink->end(sink->ctx);
    }
  }
  tg_meta_end(TG_META_SYS_STATS, meta);
  uint64_t next = UINT64_MAX;
  for (int g = 0; g < TG_SYS_GROUPS; g++) {
    if (!c->period_ms[g]) continue;
    if (due[g]) st->next_ms[g] = advance(st->next_ms[g], c->period_ms[g], now);
    if (st->next_ms[g] < next) next = st->next_ms[g];
  }
  return next;
}

static uint64_t tick(void *state, tg_ds_t *ds, unsigned inst, uint64_t now) {
  tg_probes_ds_target_t t = {ds, inst};
  tg_probes_sink_t sink = tg_probes_ds_sink(&t);
  return tg__sys_stats_round(state, &sink, now);
}

const tg_probe_ops_t tg_sys_stats_probe = {
    .name = "linux.sys_stats",
    .parse_cfg = parse_cfg,
    .create = create,
    .tick = tick,
    .destroy = destroy,
};
