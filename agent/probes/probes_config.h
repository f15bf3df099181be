/* The probes' view of a DataSourceConfig: what to poll and how often.
 *
 * Pure functions over the serialized DataSourceConfig the agent hands to
 * on_start, following traced_probes' reading of the same fields.
 */
#ifndef TRACEGATE_PROBES_CONFIG_H
#define TRACEGATE_PROBES_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Shorter periods are raised to these, as traced_probes does. */
#define TG_SYS_STATS_MIN_PERIOD_MS 10
#define TG_PROC_STATS_MIN_POLL_MS 100

typedef struct tg_sys_stats_cfg {
  uint32_t meminfo_period_ms; /* 0: off */
  uint64_t meminfo_mask;      /* bit i: MeminfoCounters i; none listed: all */
  uint32_t stat_period_ms;    /* 0: off */
  uint32_t stat_mask;         /* bit i: SysStatsConfig.StatCounters i */
  /* Periods set for groups tracegate-probes does not poll (vmstat,
   * devfreq, cpufreq, ...): only reported in the log. */
  unsigned unsupported;
} tg_sys_stats_cfg_t;

typedef struct tg_process_stats_cfg {
  uint32_t poll_ms;       /* 0: no ProcessStats, only the initial tree */
  bool scan_all_on_start; /* a ProcessTree of every process at start */
  bool record_runtime;    /* runtime_user_mode / runtime_kernel_mode */
} tg_process_stats_cfg_t;

/* |cfg| is a serialized DataSourceConfig (borrowed). A config without the
 * typed sub-message yields all zeros (nothing to poll). Returns 0 or
 * TG_EBAD_CONFIG when it does not decode. */
int tg_sys_stats_cfg_parse(const uint8_t *cfg, size_t len,
                           tg_sys_stats_cfg_t *out);
int tg_process_stats_cfg_parse(const uint8_t *cfg, size_t len,
                               tg_process_stats_cfg_t *out);

#endif /* TRACEGATE_PROBES_CONFIG_H */
