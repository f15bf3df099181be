/* DataSourceConfig -> what the probes poll; see probes_config.h. A field
 * read here is listed in abi/config_fields.c, or both sides warn that
 * it is ignored. */
#include "agent/probes/probes_config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/meminfo.h"
#include "abi/config_fields.h"
#include "pb/config/data_source_config.pb-c.h"
#include "common/log.h"
#include "common/notice.h"
#include "tracegate/error.h"

static uint32_t clamp_period(uint32_t ms, uint32_t min) {
  return ms && ms < min ? min : ms;
}

static Perfetto__Protos__DataSourceConfig *unpack(const uint8_t *cfg,
                                                  size_t len) {
  return perfetto__protos__data_source_config__unpack(NULL, len,
                                                      cfg ? cfg : (const uint8_t *)"");
}

int tg_sys_stats_cfg_parse(const uint8_t *cfg, size_t len,
                           tg_sys_stats_cfg_t *out) {
  memset(out, 0, sizeof(*out));
  Perfetto__Protos__DataSourceConfig *dsc = unpack(cfg, len);
  if (!dsc) return TG_EBAD_CONFIG;
  const Perfetto__Protos__SysStatsConfig *c = dsc->sys_stats_config;
  if (c) {
    const uint32_t periods[TG_SYS_GROUPS] = {
        [TG_SYS_MEMINFO] = c->meminfo_period_ms,
        [TG_SYS_VMSTAT] = c->vmstat_period_ms,
        [TG_SYS_STAT] = c->stat_period_ms,
        [TG_SYS_CPUFREQ] = c->cpufreq_period_ms,
        [TG_SYS_BUDDYINFO] = c->buddyinfo_period_ms,
        [TG_SYS_DISKSTAT] = c->diskstat_period_ms,
        [TG_SYS_PSI] = c->psi_period_ms,
        [TG_SYS_DEVFREQ] = c->devfreq_period_ms,
        [TG_SYS_THERMAL] = c->thermal_period_ms,
        [TG_SYS_CPUIDLE] = c->cpuidle_period_ms,
        [TG_SYS_GPUFREQ] = c->gpufreq_period_ms,
    };
    for (int g = 0; g < TG_SYS_GROUPS; g++)
      out->period_ms[g] = clamp_period(periods[g], TG_SYS_STATS_MIN_PERIOD_MS);
    /* No counters listed means all of them. */
    if (c->n_meminfo_counters == 0) out->meminfo_mask = ~UINT64_C(0);
    for (size_t i = 0; i < c->n_meminfo_counters; i++) {
      unsigned id = (unsigned)c->meminfo_counters[i];
      if (id > 0 && id < TG_MEMINFO_COUNTERS)
        out->meminfo_mask |= UINT64_C(1) << id;
    }
    if (c->n_vmstat_counters == 0)
      memset(out->vmstat_mask, 0xff, sizeof(out->vmstat_mask));
    for (size_t i = 0; i < c->n_vmstat_counters; i++) {
      unsigned id = (unsigned)c->vmstat_counters[i];
      if (id > 0) tg_vmstat_set(out->vmstat_mask, id);
    }
    if (c->n_stat_counters == 0) out->stat_mask = ~0u;
    for (size_t i = 0; i < c->n_stat_counters; i++) {
      unsigned id = (unsigned)c->stat_counters[i];
      if (id > 0 && id < 32) out->stat_mask |= 1u << id;
    }
  }
  perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
  return 0;
}

int tg_process_stats_cfg_parse(const uint8_t *cfg, size_t len,
                               tg_process_stats_cfg_t *out) {
  memset(out, 0, sizeof(*out));
  Perfetto__Protos__DataSourceConfig *dsc = unpack(cfg, len);
  if (!dsc) return TG_EBAD_CONFIG;
  if (dsc->has_tracing_session_id)
    out->tracing_session_id = dsc->tracing_session_id;
  /* As traced_probes: on-demand dumps unless a quirk says no, with or
   * without a typed config. */
  out->on_demand = true;
  const Perfetto__Protos__ProcessStatsConfig *c = dsc->process_stats_config;
  if (c) {
    bool no_initial = false;
    for (size_t i = 0; i < c->n_quirks; i++) {
      if (c->quirks[i] ==
          PERFETTO__PROTOS__PROCESS_STATS_CONFIG__QUIRKS__DISABLE_INITIAL_DUMP)
        no_initial = true;
      else if (c->quirks[i] ==
               PERFETTO__PROTOS__PROCESS_STATS_CONFIG__QUIRKS__DISABLE_ON_DEMAND)
        out->on_demand = false;
    }
    out->poll_ms = clamp_period(c->proc_stats_poll_ms, TG_PROC_STATS_MIN_POLL_MS);
    out->scan_all_on_start = c->scan_all_processes_on_start && !no_initial;
    out->record_runtime = c->record_process_runtime;
    out->record_age = c->record_process_age;
    out->thread_names = c->record_thread_names;
    out->smaps_rollup = c->scan_smaps_rollup;
  }
  perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
  return 0;
}

static uint32_t or_default(bool has, uint64_t v, uint32_t def, uint32_t max) {
  if (!has || v == 0) return def;
  return v > max ? max : (uint32_t)v;
}

/* A copy of |s| (NULL: none), or NULL with *rv set: too long, or no
 * memory. */
static char *copy_path(const char *s, int *rv) {
  size_t n = s ? strnlen(s, PATH_MAX) : 0;
  if (n >= PATH_MAX) {
    *rv = TG_EBAD_CONFIG;
    return NULL;
  }
  char *c = malloc(n + 1);
  if (!c) {
    *rv = -ENOMEM;
    return NULL;
  }
  memcpy(c, s ? s : "", n);
  c[n] = '\0';
  return c;
}

/* Copies |n| strings (at most TG_INODE_CFG_LIST_MAX) into |*out|. */
static int copy_list(char *const *v, size_t n, char ***out, size_t *n_out,
                     bool *truncated) {
  *out = NULL;
  *n_out = 0;
  if (n > TG_INODE_CFG_LIST_MAX) {
    n = TG_INODE_CFG_LIST_MAX;
    *truncated = true;
  }
  if (n == 0) return 0;
  if (!(*out = calloc(n, sizeof(**out)))) return -ENOMEM;
  int rv = 0;
  for (size_t i = 0; i < n; i++) {
    if (!((*out)[i] = copy_path(v[i], &rv))) return rv;
    (*n_out)++;
  }
  return 0;
}

int tg_inode_file_cfg_parse(const uint8_t *cfg, size_t len,
                            tg_inode_file_cfg_t **out) {
  *out = NULL;
  Perfetto__Protos__DataSourceConfig *dsc = unpack(cfg, len);
  if (!dsc) return TG_EBAD_CONFIG;
  tg_inode_file_cfg_t *o = calloc(1, sizeof(*o));
  int rv = o ? 0 : -ENOMEM;
  const Perfetto__Protos__InodeFileConfig *c = dsc->inode_file_config;
  if (o) {
    if (dsc->has_tracing_session_id)
      o->tracing_session_id = dsc->tracing_session_id;
    o->scan_interval_ms =
        or_default(c && c->has_scan_interval_ms, c ? c->scan_interval_ms : 0,
              TG_INODE_SCAN_INTERVAL_MS, TG_INODE_SCAN_PERIOD_MAX_MS);
    o->scan_delay_ms =
        or_default(c && c->has_scan_delay_ms, c ? c->scan_delay_ms : 0,
              TG_INODE_SCAN_DELAY_MS, TG_INODE_SCAN_PERIOD_MAX_MS);
    o->scan_batch_size =
        or_default(c && c->has_scan_batch_size, c ? c->scan_batch_size : 0,
              TG_INODE_SCAN_BATCH, TG_INODE_SCAN_BATCH_MAX);
  }
  if (o && c) {
    o->do_not_scan = c->has_do_not_scan && c->do_not_scan;
    rv = copy_list(c->scan_mount_points, c->n_scan_mount_points,
                   &o->scan_mount_points, &o->n_scan_mount_points,
                   &o->truncated);
    size_t n = c->n_mount_point_mapping;
    if (n > TG_INODE_CFG_LIST_MAX) {
      n = TG_INODE_CFG_LIST_MAX;
      o->truncated = true;
    }
    if (rv == 0 && n && !(o->mappings = calloc(n, sizeof(*o->mappings))))
      rv = -ENOMEM;
    for (size_t i = 0; rv == 0 && i < n; i++) {
      const Perfetto__Protos__InodeFileConfig__MountPointMappingEntry *e =
          c->mount_point_mapping[i];
      tg_inode_mapping_t *m = &o->mappings[i];
      o->n_mappings++;
      if ((m->mountpoint = copy_path(e->mountpoint, &rv)))
        rv = copy_list(e->scan_roots, e->n_scan_roots, &m->roots, &m->n_roots,
                       &o->truncated);
    }
  }
  perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
  if (rv < 0) {
    tg_inode_file_cfg_free(o);
    return rv;
  }
  *out = o;
  return 0;
}

static void free_list(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

void tg_inode_file_cfg_free(tg_inode_file_cfg_t *c) {
  if (!c) return;
  free_list(c->scan_mount_points, c->n_scan_mount_points);
  for (size_t i = 0; i < c->n_mappings; i++) {
    free(c->mappings[i].mountpoint);
    free_list(c->mappings[i].roots, c->mappings[i].n_roots);
  }
  free(c->mappings);
  free(c);
}

void tg_probes_warn_unacted(const char *ds_name, const uint8_t *cfg,
                            size_t len) {
  char names[512];
  size_t n = tg_probes_unacted_fields(ds_name, cfg, len, names, sizeof(names));
  if (n)
    TG_WARN("%s %s: %zu config field(s) not acted on by tracegate-probes: %s",
            TG_NOTE(PROBES_UNACTED_FIELDS), ds_name, n, names);
}
