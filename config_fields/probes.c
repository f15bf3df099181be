/* The probes' acted-on config fields; see probes.h. */
#include "config_fields/probes.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pb/config/data_source_config.pb-c.h"

/* What tracegate-probes reads of each typed config (the parsers in
 * agent/probes/probes_config.c, which read these and no other); every
 * other field that is set gets named. */
static const char *const sys_stats_acted[] = {
    "meminfo_period_ms", "meminfo_counters",    "vmstat_period_ms",
    "vmstat_counters",   "stat_period_ms",      "stat_counters",
    "cpufreq_period_ms", "buddyinfo_period_ms", "diskstat_period_ms",
    "psi_period_ms",     "devfreq_period_ms",   "thermal_period_ms",
    "cpuidle_period_ms", "gpufreq_period_ms",
};
static const char *const process_stats_acted[] = {
    "quirks",                 "scan_all_processes_on_start",
    "record_thread_names",    "proc_stats_poll_ms",
    "record_process_runtime", "record_process_age",
    "scan_smaps_rollup",
};

/* InodeFileConfig: all of it (the scan's pace, do_not_scan, where to
 * scan). */
static const char *const inode_file_acted[] = {
    "scan_interval_ms",  "scan_delay_ms",      "scan_batch_size",
    "do_not_scan",       "scan_mount_points",  "mount_point_mapping",
};

/* Whether |f| is present in |m|: proto2 optionals by their has_ flag or
 * pointer, repeated fields by their count. */
static bool field_is_set(const ProtobufCMessage *m,
                         const ProtobufCFieldDescriptor *f) {
  const char *base = (const char *)m;
  if (f->label == PROTOBUF_C_LABEL_REPEATED)
    return *(const size_t *)(base + f->quantifier_offset) > 0;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING)
    return *(void *const *)(base + f->offset) != NULL;
  if (f->quantifier_offset)
    return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
  return false;
}

static bool listed(const char *name, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(name, names[i]) == 0) return true;
  return false;
}

/* Appends ", name" (or "name") to |out|; counts even what does not fit. */
static void append_name(char *out, size_t cap, size_t *count, const char *name) {
  size_t used = strlen(out);
  if (used < cap)
    snprintf(out + used, cap - used, "%s%s", *count ? ", " : "", name);
  (*count)++;
}

static size_t unacted(const ProtobufCMessage *m, const char *const *acted,
                      size_t n_acted, char *out, size_t cap) {
  size_t count = 0;
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (field_is_set(m, f) && !listed(f->name, acted, n_acted))
      append_name(out, cap, &count, f->name);
  }
  /* Fields newer than our copy of the schema. */
  for (size_t i = 0; i < m->n_unknown_fields; i++) {
    char name[32];
    snprintf(name, sizeof(name), "field #%u", m->unknown_fields[i].tag);
    append_name(out, cap, &count, name);
  }
  return count;
}

size_t tg_probes_unacted_fields(const char *ds_name, const uint8_t *cfg,
                                size_t len, char *out, size_t cap) {
  if (cap) out[0] = '\0';
  Perfetto__Protos__DataSourceConfig *dsc =
      perfetto__protos__data_source_config__unpack(
          NULL, len, cfg ? cfg : (const uint8_t *)"");
  if (!dsc) return 0;
  size_t n = 0;
  if (strcmp(ds_name, "linux.sys_stats") == 0 && dsc->sys_stats_config)
    n = unacted(&dsc->sys_stats_config->base, sys_stats_acted,
                sizeof(sys_stats_acted) / sizeof(sys_stats_acted[0]), out, cap);
  else if (strcmp(ds_name, "linux.process_stats") == 0 &&
           dsc->process_stats_config)
    n = unacted(&dsc->process_stats_config->base, process_stats_acted,
                sizeof(process_stats_acted) / sizeof(process_stats_acted[0]),
                out, cap);
  else if (strcmp(ds_name, "linux.inode_file_map") == 0 &&
           dsc->inode_file_config)
    n = unacted(&dsc->inode_file_config->base, inode_file_acted,
                sizeof(inode_file_acted) / sizeof(inode_file_acted[0]), out,
                cap);
  perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
  return n;
}
