/* DataSourceConfig -> what the probes poll; see probes_config.h. */
#include "agent/probes/probes_config.h"

#include <string.h>

#include "agent/probes/meminfo.h"
#include "pb/config/data_source_config.pb-c.h"
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
    out->meminfo_period_ms =
        clamp_period(c->meminfo_period_ms, TG_SYS_STATS_MIN_PERIOD_MS);
    out->stat_period_ms =
        clamp_period(c->stat_period_ms, TG_SYS_STATS_MIN_PERIOD_MS);
    /* No counters listed means all of them. */
    if (c->n_meminfo_counters == 0) out->meminfo_mask = ~UINT64_C(0);
    for (size_t i = 0; i < c->n_meminfo_counters; i++) {
      unsigned id = (unsigned)c->meminfo_counters[i];
      if (id > 0 && id < TG_MEMINFO_COUNTERS)
        out->meminfo_mask |= UINT64_C(1) << id;
    }
    if (c->n_stat_counters == 0) out->stat_mask = ~0u;
    for (size_t i = 0; i < c->n_stat_counters; i++) {
      unsigned id = (unsigned)c->stat_counters[i];
      if (id > 0 && id < 32) out->stat_mask |= 1u << id;
    }
    const uint32_t others[] = {c->vmstat_period_ms,   c->devfreq_period_ms,
                               c->cpufreq_period_ms,  c->buddyinfo_period_ms,
                               c->diskstat_period_ms, c->psi_period_ms,
                               c->thermal_period_ms,  c->cpuidle_period_ms,
                               c->gpufreq_period_ms};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
      if (others[i]) out->unsupported++;
  }
  perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
  return 0;
}

int tg_process_stats_cfg_parse(const uint8_t *cfg, size_t len,
                               tg_process_stats_cfg_t *out) {
  memset(out, 0, sizeof(*out));
  Perfetto__Protos__DataSourceConfig *dsc = unpack(cfg, len);
  if (!dsc) return TG_EBAD_CONFIG;
  const Perfetto__Protos__ProcessStatsConfig *c = dsc->process_stats_config;
  if (c) {
    out->poll_ms = clamp_period(c->proc_stats_poll_ms, TG_PROC_STATS_MIN_POLL_MS);
    out->scan_all_on_start = c->scan_all_processes_on_start;
    out->record_runtime = c->record_process_runtime;
  }
  perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
  return 0;
}
