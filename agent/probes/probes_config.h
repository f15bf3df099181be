/* The probes' view of a DataSourceConfig: what to poll and how often.
 *
 * Pure functions over the serialized DataSourceConfig the agent hands to
 * on_start, following traced_probes' reading of the same fields. Every
 * field of the typed config that tracegate-probes does not act on is
 * named in a warning when the config is parsed, never dropped quietly;
 * the fields read here are the table of abi/config_fields.c, which
 * the CLI warns from too.
 */
#ifndef TRACEGATE_PROBES_CONFIG_H
#define TRACEGATE_PROBES_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probes/kernel_files.h"

/* Shorter periods are raised to these, as traced_probes does. */
#define TG_SYS_STATS_MIN_PERIOD_MS 10
#define TG_PROC_STATS_MIN_POLL_MS 100

/* The sys_stats groups tracegate-probes polls, each on its own period. */
typedef enum tg_sys_group {
  TG_SYS_MEMINFO,   /* /proc/meminfo */
  TG_SYS_VMSTAT,    /* /proc/vmstat */
  TG_SYS_STAT,      /* /proc/stat: cpu times, irqs, softirqs, forks */
  TG_SYS_CPUFREQ,   /* /sys/devices/system/cpu/cpuN/cpufreq */
  TG_SYS_BUDDYINFO, /* /proc/buddyinfo */
  TG_SYS_DISKSTAT,  /* /proc/diskstats */
  TG_SYS_PSI,       /* /proc/pressure/{cpu,io,memory} */
  TG_SYS_DEVFREQ,   /* /sys/class/devfreq/<device>/cur_freq */
  TG_SYS_THERMAL,   /* /sys/class/thermal/thermal_zoneN */
  TG_SYS_CPUIDLE,   /* /sys/devices/system/cpu/cpuN/cpuidle/stateM */
  TG_SYS_GPUFREQ,   /* the GPU's frequency (sysfs_groups.h) */
  TG_SYS_GROUPS
} tg_sys_group_t;

typedef struct tg_sys_stats_cfg {
  uint32_t period_ms[TG_SYS_GROUPS]; /* 0: off */
  uint64_t meminfo_mask; /* bit i: MeminfoCounters i; none listed: all */
  uint64_t vmstat_mask[TG_VMSTAT_IDS / 64]; /* VmstatCounters; none: all */
  uint32_t stat_mask;    /* bit i: SysStatsConfig.StatCounters i */
} tg_sys_stats_cfg_t;

typedef struct tg_process_stats_cfg {
  uint32_t poll_ms;       /* 0: no ProcessStats, only the initial tree */
  /* A ProcessTree of every process at start: scan_all_processes_on_start
   * unless quirks has DISABLE_INITIAL_DUMP. */
  bool scan_all_on_start;
  /* Resolve the pids linux.ftrace of the same session sees: unless quirks
   * has DISABLE_ON_DEMAND. */
  bool on_demand;
  uint64_t tracing_session_id; /* DataSourceConfig's; 0: not said */
  bool record_runtime;    /* runtime_user_mode / runtime_kernel_mode */
  bool record_age;        /* ProcessTree.Process.process_start_from_boot */
  bool thread_names;      /* ProcessTree.Thread.name */
  bool smaps_rollup;      /* ProcessStats.Process.smr_*_kb */
} tg_process_stats_cfg_t;

/* linux.inode_file_map: InodeFileConfig with traced_probes' defaults for
 * what is not set (or 0). Lists past TG_INODE_CFG_LIST_MAX entries are
 * cut (|truncated|). */
#define TG_INODE_SCAN_INTERVAL_MS 10000
#define TG_INODE_SCAN_DELAY_MS 10000
#define TG_INODE_SCAN_BATCH 15000
/* Larger values are lowered to these: a tick stays short, a wait bounded. */
#define TG_INODE_SCAN_BATCH_MAX 1000000
#define TG_INODE_SCAN_PERIOD_MAX_MS 3600000
#define TG_INODE_CFG_LIST_MAX 64

/* mount_point_mapping: scan |roots| instead of |mountpoint|. */
typedef struct tg_inode_mapping {
  char *mountpoint;
  char **roots;
  size_t n_roots;
} tg_inode_mapping_t;

typedef struct tg_inode_file_cfg {
  uint64_t tracing_session_id; /* DataSourceConfig's; 0: not said */
  uint32_t scan_interval_ms, scan_delay_ms, scan_batch_size;
  bool do_not_scan;
  bool truncated;
  char **scan_mount_points;
  size_t n_scan_mount_points;
  tg_inode_mapping_t *mappings;
  size_t n_mappings;
} tg_inode_file_cfg_t;

/* |cfg| is a serialized DataSourceConfig (borrowed). A config without the
 * typed sub-message yields all zeros (nothing to poll). Returns 0 or
 * TG_EBAD_CONFIG when it does not decode. */
int tg_sys_stats_cfg_parse(const uint8_t *cfg, size_t len,
                           tg_sys_stats_cfg_t *out);
int tg_process_stats_cfg_parse(const uint8_t *cfg, size_t len,
                               tg_process_stats_cfg_t *out);

/* The same for linux.inode_file_map into a new |*out| (the caller's, for
 * tg_inode_file_cfg_free). Returns 0, TG_EBAD_CONFIG (does not decode, or
 * a path of PATH_MAX bytes or more) or -ENOMEM. */
int tg_inode_file_cfg_parse(const uint8_t *cfg, size_t len,
                            tg_inode_file_cfg_t **out);
/* NULL is a no-op. */
void tg_inode_file_cfg_free(tg_inode_file_cfg_t *c);

/* Logs the warning naming the fields of |cfg| that tracegate-probes does
 * not act on (abi/config_fields.h; nothing when there are none). */
void tg_probes_warn_unacted(const char *ds_name, const uint8_t *cfg,
                            size_t len);

#endif /* TRACEGATE_PROBES_CONFIG_H */
