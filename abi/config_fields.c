/* The probes' acted-on config fields; see config_fields.h. */
#include "abi/config_fields.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pb/config/data_source_config.pb-c.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

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

/* One data source the probes check: where its typed config sits in a
 * DataSourceConfig (a pointer to a message whose first member is its
 * ProtobufCMessage base) and the fields of it they act on. */
typedef struct source {
  const char *ds_name;
  size_t config_offset;
  const char *const *acted;
  size_t n_acted;
} source_t;

static const source_t sources[] = {
    {"linux.sys_stats",
     offsetof(Perfetto__Protos__DataSourceConfig, sys_stats_config),
     sys_stats_acted, COUNT(sys_stats_acted)},
    {"linux.process_stats",
     offsetof(Perfetto__Protos__DataSourceConfig, process_stats_config),
     process_stats_acted, COUNT(process_stats_acted)},
    {"linux.inode_file_map",
     offsetof(Perfetto__Protos__DataSourceConfig, inode_file_config),
     inode_file_acted, COUNT(inode_file_acted)},
};

/* The row of |ds_name|, or NULL for a source the probes do not check. */
static const source_t *source_named(const char *ds_name) {
  for (size_t i = 0; i < COUNT(sources); i++)
    if (strcmp(ds_name, sources[i].ds_name) == 0) return &sources[i];
  return NULL;
}

/* |src|'s typed config in |dsc|, or NULL when it is not set. */
static const ProtobufCMessage *typed_config(
    const Perfetto__Protos__DataSourceConfig *dsc, const source_t *src) {
  return *(const ProtobufCMessage *const *)((const char *)dsc +
                                            src->config_offset);
}

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

static bool acted_on(const source_t *src, const char *name) {
  for (size_t i = 0; i < src->n_acted; i++)
    if (strcmp(name, src->acted[i]) == 0) return true;
  return false;
}

/* Appends ", name" (or "name") to |out|; counts even what does not fit. */
static void append_name(char *out, size_t cap, size_t *count, const char *name) {
  size_t used = cap ? strlen(out) : 0;
  if (used < cap)
    snprintf(out + used, cap - used, "%s%s", *count ? ", " : "", name);
  (*count)++;
}

/* Names the fields of our schema set in |m| that |src| does not act on. */
static void name_known_unacted(const ProtobufCMessage *m, const source_t *src,
                               char *out, size_t cap, size_t *count) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (field_is_set(m, f) && !acted_on(src, f->name))
      append_name(out, cap, count, f->name);
  }
}

/* Names the fields newer than our copy of the schema by their number:
 * nothing acts on a field it does not know. */
static void name_unknown(const ProtobufCMessage *m, char *out, size_t cap,
                         size_t *count) {
  for (size_t i = 0; i < m->n_unknown_fields; i++) {
    char name[32];
    snprintf(name, sizeof(name), "field #%u", m->unknown_fields[i].tag);
    append_name(out, cap, count, name);
  }
}

size_t tg_probes_unacted_fields(const char *ds_name, const uint8_t *cfg,
                                size_t len, char *out, size_t cap) {
  if (cap) out[0] = '\0';
  const source_t *src = source_named(ds_name);
  if (!src) return 0;
  Perfetto__Protos__DataSourceConfig *dsc =
      perfetto__protos__data_source_config__unpack(
          NULL, len, cfg ? cfg : (const uint8_t *)"");
  if (!dsc) return 0;
  size_t count = 0;
  const ProtobufCMessage *m = typed_config(dsc, src);
  if (m) {
    name_known_unacted(m, src, out, cap, &count);
    name_unknown(m, out, cap, &count);
  }
  perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
  return count;
}
