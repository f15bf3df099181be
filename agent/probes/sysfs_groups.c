/* linux.sys_stats' /sys groups; see sysfs_groups.h. */
#include "agent/probes/sysfs_groups.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sys/proc_read.h"
#include "common/buf.h"
#include "common/log.h"
#include "tracegate/error.h"

/* A sysfs attribute is at most a page; two leave room for a large one. */
#define ATTR_CAP 8192

enum { THERMAL, CPUIDLE, DEVFREQ, GPUFREQ, GROUPS };
static const char *const group_names[GROUPS] = {"thermal", "cpuidle",
                                                "devfreq", "gpufreq"};

/* A state found under cpuN/cpuidle: where it is and its name. */
typedef struct idle_file {
  uint32_t cpu, state;
  char name[TG_SYSFS_NAME_MAX];
} idle_file_t;

struct tg_sysfs_groups {
  char root[PATH_MAX / 2];
  char path[PATH_MAX];
  tg_buf_t file;
  /* Said once: bit g, a file of group g was left out; bit GROUPS + g, its
   * directory held more than the cap. */
  unsigned told;

  /* Each group: what was found (|found| false: look again next round), and
   * the values of the last round, in arrays as large as what was found. */
  bool thermal_found;
  tg_thermal_zone_t *zones, *zones_now;
  size_t n_zones, cap_zones, n_zones_now;

  bool idle_found;
  idle_file_t *idle;
  tg_cpuidle_state_t *states_now;
  size_t n_idle, cap_idle, n_states_now;
  tg_cpuidle_cpu_t *cpus_now;
  size_t cap_cpus, n_cpus_now;

  bool devfreq_found;
  tg_devfreq_t *devs, *devs_now;
  size_t n_devs, cap_devs, n_devs_now;

  int gpu_source; /* index into gpu_sources, or -1: none that reads yet */
};

int tg_sysfs_groups_new(const char *root, tg_sysfs_groups_t **out) {
  *out = NULL;
  size_t n = strnlen(root, PATH_MAX / 2);
  if (n >= PATH_MAX / 2) return -ENAMETOOLONG;
  tg_sysfs_groups_t *g = calloc(1, sizeof(*g));
  if (!g) return -ENOMEM;
  memcpy(g->root, root, n);
  tg_buf_init(&g->file, ATTR_CAP);
  g->gpu_source = -1;
  *out = g;
  return 0;
}

void tg_sysfs_groups_free(tg_sysfs_groups_t *g) {
  if (!g) return;
  tg_buf_free(&g->file);
  free(g->zones);
  free(g->zones_now);
  free(g->idle);
  free(g->states_now);
  free(g->cpus_now);
  free(g->devs);
  free(g->devs_now);
  free(g);
}

/* --- paths, files, directories -------------------------------------------- */

/* The root and then |fmt| into g->path; NULL if that does not fit. */
#define mkpath(g, ...) \
  tg_proc_path_at((g)->path, sizeof((g)->path), (g)->root, __VA_ARGS__)

/* Logs the first file of |group| left out, with why; then no more. */
static void tell_left_out(tg_sysfs_groups_t *g, int group, const char *path,
                          int rv) {
  if (g->told & (1u << group)) return;
  g->told |= 1u << group;
  TG_WARN("linux.sys_stats: %s: %s; left out of the %s group (the first "
          "such file; no more are logged)",
          path, tg_strerror(rv), group_names[group]);
}

/* Reads the file at g->path (already built) into g->file. */
static int read_attr(tg_sysfs_groups_t *g) {
  return tg_proc_read_file(g->path, &g->file);
}

static const char *attr_text(const tg_sysfs_groups_t *g) {
  return (const char *)tg_buf_begin(&g->file);
}

/* Reads g->path as one unsigned number. */
static int read_u64(tg_sysfs_groups_t *g, uint64_t *v) {
  int rv = read_attr(g);
  return rv < 0 ? rv
                : tg_sysfs_u64_parse(attr_text(g), tg_buf_size(&g->file), v);
}

/* Reads g->path as one name. */
static int read_name(tg_sysfs_groups_t *g, char *out, size_t cap) {
  int rv = read_attr(g);
  return rv < 0 ? rv
                : tg_sysfs_name_parse(attr_text(g), tg_buf_size(&g->file), out,
                                      cap);
}

/* The N of "<prefix>N" (decimal digits only, below 2^31), or -1. */
static long numbered(const char *name, const char *prefix) {
  size_t p = strlen(prefix);
  if (strncmp(name, prefix, p) != 0 || name[p] == '\0') return -1;
  long v = 0;
  for (const char *s = name + p; *s; s++) {
    if (*s < '0' || *s > '9' || v > (INT32_MAX - 9) / 10) return -1;
    v = v * 10 + (*s - '0');
  }
  return v;
}

/* Room for |want| elements in *a (of |size_a| bytes) and in *b (of
 * |size_b|; none if b is NULL), which share the capacity *cap. A failure
 * may leave *a larger than *cap, which is harmless. */
static int reserve(void **a, size_t size_a, void **b, size_t size_b,
                   size_t *cap, size_t want) {
  if (want <= *cap) return 0;
  size_t n = *cap ? *cap : 8;
  while (n < want) n *= 2;
  void *p = realloc(*a, n * size_a);
  if (!p) return -ENOMEM;
  *a = p;
  if (b) {
    if (!(p = realloc(*b, n * size_b))) return -ENOMEM;
    *b = p;
  }
  *cap = n;
  return 0;
}

/* The numbers N of the "<prefix>N" entries of the directory at g->path,
 * sorted: the |max| lowest (*dropped counts the rest). Returns how many, or
 * opendir's -errno. */
static long list_numbered(tg_sysfs_groups_t *g, const char *prefix,
                          uint32_t *nums, size_t max, size_t *dropped) {
  DIR *d = opendir(g->path);
  if (!d) return -errno;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long v = numbered(e->d_name, prefix);
    if (v < 0) continue;
    if (n < max) {
      nums[n++] = (uint32_t)v;
      continue;
    }
    /* Full: readdir's order is the file system's, so keep the lowest
     * numbers, whatever order they come in. */
    (*dropped)++;
    size_t hi = 0;
    for (size_t i = 1; i < n; i++)
      if (nums[i] > nums[hi]) hi = i;
    if ((uint32_t)v < nums[hi]) nums[hi] = (uint32_t)v;
  }
  closedir(d);
  /* Insertion sort: small lists, and readdir mostly hands them in order. */
  for (size_t i = 1; i < n; i++) {
    uint32_t v = nums[i];
    size_t j = i;
    for (; j > 0 && nums[j - 1] > v; j--) nums[j] = nums[j - 1];
    nums[j] = v;
  }
  return (long)n;
}

/* Logs, once per group, that a directory held more than its cap. */
static void tell_dropped(tg_sysfs_groups_t *g, int group, size_t dropped,
                         int max, const char *what) {
  unsigned bit = 1u << (GROUPS + group);
  if (!dropped || (g->told & bit)) return;
  g->told |= bit;
  TG_WARN("linux.sys_stats: %s: %zu %s past the first %d are not polled",
          g->path, dropped, what, max);
}

/* --- thermal -------------------------------------------------------------- */

static int find_zones(tg_sysfs_groups_t *g) {
  uint32_t nums[TG_THERMAL_MAX_ZONES];
  size_t dropped = 0;
  if (!mkpath(g, "/sys/class/thermal")) return -ENAMETOOLONG;
  long n = list_numbered(g, "thermal_zone", nums, TG_THERMAL_MAX_ZONES,
                         &dropped);
  if (n < 0) return (int)n;
  tell_dropped(g, THERMAL, dropped, TG_THERMAL_MAX_ZONES, "thermal zones");
  g->n_zones = 0;
  int err = -ENOENT;
  for (long i = 0; i < n; i++) {
    if (reserve((void **)&g->zones, sizeof(*g->zones), (void **)&g->zones_now,
                sizeof(*g->zones_now), &g->cap_zones, g->n_zones + 1) < 0)
      return -ENOMEM;
    tg_thermal_zone_t *z = &g->zones[g->n_zones];
    snprintf(z->name, sizeof(z->name), "thermal_zone%u", nums[i]);
    if (!mkpath(g, "/sys/class/thermal/%s/type", z->name)) continue;
    /* The type names the zone in trace_processor: a zone without one
     * could not be told apart. */
    int rv = read_name(g, z->type, sizeof(z->type));
    if (rv < 0) {
      tell_left_out(g, THERMAL, g->path, rv);
      err = rv;
      continue;
    }
    g->n_zones++;
  }
  return g->n_zones ? 0 : err;
}

int tg_sysfs_thermal_read(tg_sysfs_groups_t *g, const tg_thermal_zone_t **zones,
                          size_t *n) {
  *zones = NULL;
  *n = 0;
  int rv = 0;
  if (!g->thermal_found && (rv = find_zones(g)) < 0) return rv;
  g->thermal_found = true;
  g->n_zones_now = 0;
  int err = -ENOENT;
  for (size_t i = 0; i < g->n_zones; i++) {
    const tg_thermal_zone_t *z = &g->zones[i];
    if (!mkpath(g, "/sys/class/thermal/%s/temp", z->name)) continue;
    int64_t milli = 0;
    rv = read_attr(g);
    if (rv == 0)
      rv = tg_sysfs_i64_parse(attr_text(g), tg_buf_size(&g->file), &milli);
    /* SysStats.ThermalZone.temp is unsigned: a zone below zero cannot be
     * written as it is. */
    if (rv == 0 && milli < 0) rv = -ERANGE;
    if (rv < 0) {
      tell_left_out(g, THERMAL, g->path, rv);
      err = rv;
      continue;
    }
    tg_thermal_zone_t *out = &g->zones_now[g->n_zones_now++];
    *out = *z;
    out->temp_c = (uint64_t)milli / 1000;
  }
  if (!g->n_zones_now) {
    g->thermal_found = false;
    return err;
  }
  *zones = g->zones_now;
  *n = g->n_zones_now;
  return 0;
}

/* --- cpuidle -------------------------------------------------------------- */

/* The states of cpu |cpu| into g->idle. */
static int find_cpu_states(tg_sysfs_groups_t *g, uint32_t cpu, int *err) {
  uint32_t nums[TG_CPUIDLE_MAX_STATES];
  size_t dropped = 0;
  if (!mkpath(g, "/sys/devices/system/cpu/cpu%u/cpuidle", cpu)) return 0;
  long n = list_numbered(g, "state", nums, TG_CPUIDLE_MAX_STATES, &dropped);
  if (n < 0) return 0; /* an offline or idle-less cpu */
  tell_dropped(g, CPUIDLE, dropped, TG_CPUIDLE_MAX_STATES, "idle states");
  if (reserve((void **)&g->idle, sizeof(*g->idle), (void **)&g->states_now,
              sizeof(*g->states_now), &g->cap_idle, g->n_idle + (size_t)n) < 0)
    return -ENOMEM;
  for (long i = 0; i < n; i++) {
    idle_file_t *f = &g->idle[g->n_idle];
    f->cpu = cpu;
    f->state = nums[i];
    if (!mkpath(g, "/sys/devices/system/cpu/cpu%u/cpuidle/state%u/name", cpu,
                f->state))
      continue;
    int rv = read_name(g, f->name, sizeof(f->name));
    if (rv < 0) {
      tell_left_out(g, CPUIDLE, g->path, rv);
      *err = rv;
      continue;
    }
    g->n_idle++;
  }
  return 0;
}

static int find_idle_states(tg_sysfs_groups_t *g) {
  uint32_t cpus[TG_CPUIDLE_MAX_CPUS];
  size_t dropped = 0;
  if (!mkpath(g, "/sys/devices/system/cpu")) return -ENAMETOOLONG;
  long n = list_numbered(g, "cpu", cpus, TG_CPUIDLE_MAX_CPUS, &dropped);
  if (n < 0) return (int)n;
  tell_dropped(g, CPUIDLE, dropped, TG_CPUIDLE_MAX_CPUS, "cpus");
  if (reserve((void **)&g->cpus_now, sizeof(*g->cpus_now), NULL, 0,
              &g->cap_cpus, n ? (size_t)n : 1) < 0)
    return -ENOMEM;
  g->n_idle = 0;
  int err = -ENOENT;
  for (long i = 0; i < n; i++) {
    int rv = find_cpu_states(g, cpus[i], &err);
    if (rv < 0) return rv;
  }
  return g->n_idle ? 0 : err;
}

int tg_sysfs_cpuidle_read(tg_sysfs_groups_t *g, const tg_cpuidle_cpu_t **cpus,
                          size_t *n) {
  *cpus = NULL;
  *n = 0;
  int rv = 0;
  if (!g->idle_found && (rv = find_idle_states(g)) < 0) return rv;
  g->idle_found = true;
  g->n_states_now = g->n_cpus_now = 0;
  int err = -ENOENT;
  for (size_t i = 0; i < g->n_idle; i++) {
    const idle_file_t *f = &g->idle[i];
    if (!mkpath(g, "/sys/devices/system/cpu/cpu%u/cpuidle/state%u/time",
                f->cpu, f->state))
      continue;
    uint64_t us;
    if ((rv = read_u64(g, &us)) < 0) {
      tell_left_out(g, CPUIDLE, g->path, rv);
      err = rv;
      continue;
    }
    /* g->idle is sorted by cpu: a new cpu starts a new CpuIdleState. */
    tg_cpuidle_cpu_t *c =
        g->n_cpus_now ? &g->cpus_now[g->n_cpus_now - 1] : NULL;
    if (!c || c->cpu != f->cpu) {
      c = &g->cpus_now[g->n_cpus_now++];
      *c = (tg_cpuidle_cpu_t){.cpu = f->cpu,
                              .states = &g->states_now[g->n_states_now]};
    }
    tg_cpuidle_state_t *s = &g->states_now[g->n_states_now++];
    memcpy(s->name, f->name, sizeof(s->name));
    s->time_us = us;
    c->n_states++;
  }
  if (!g->n_states_now) {
    g->idle_found = false;
    return err;
  }
  *cpus = g->cpus_now;
  *n = g->n_cpus_now;
  return 0;
}

/* --- devfreq -------------------------------------------------------------- */

static int cmp_dev(const void *a, const void *b) {
  return strcmp(((const tg_devfreq_t *)a)->name,
                ((const tg_devfreq_t *)b)->name);
}

static int find_devs(tg_sysfs_groups_t *g) {
  if (!mkpath(g, "/sys/class/devfreq")) return -ENAMETOOLONG;
  DIR *d = opendir(g->path);
  if (!d) return -errno;
  g->n_devs = 0;
  size_t dropped = 0, too_long = 0;
  int rv = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    size_t len = strnlen(e->d_name, TG_DEVFREQ_NAME_MAX);
    if (len == TG_DEVFREQ_NAME_MAX) {
      too_long++;
      continue;
    }
    if (g->n_devs == TG_DEVFREQ_MAX) {
      dropped++;
      continue;
    }
    if (reserve((void **)&g->devs, sizeof(*g->devs), (void **)&g->devs_now,
                sizeof(*g->devs_now), &g->cap_devs, g->n_devs + 1) < 0) {
      rv = -ENOMEM;
      break;
    }
    memcpy(g->devs[g->n_devs++].name, e->d_name, len + 1);
  }
  closedir(d);
  if (rv < 0) return rv;
  unsigned bit = 1u << (GROUPS + DEVFREQ);
  if ((too_long || dropped) && !(g->told & bit)) {
    g->told |= bit;
    TG_WARN("linux.sys_stats: %s: %zu device(s) past the first %d and %zu "
            "with a name of %d bytes or more are not polled",
            g->path, dropped, TG_DEVFREQ_MAX, too_long, TG_DEVFREQ_NAME_MAX);
  }
  if (g->n_devs > 1) qsort(g->devs, g->n_devs, sizeof(*g->devs), cmp_dev);
  return g->n_devs ? 0 : -ENOENT;
}

int tg_sysfs_devfreq_read(tg_sysfs_groups_t *g, const tg_devfreq_t **devs,
                          size_t *n) {
  *devs = NULL;
  *n = 0;
  int rv = 0;
  if (!g->devfreq_found && (rv = find_devs(g)) < 0) return rv;
  g->devfreq_found = true;
  g->n_devs_now = 0;
  int err = -ENOENT;
  for (size_t i = 0; i < g->n_devs; i++) {
    if (!mkpath(g, "/sys/class/devfreq/%s/cur_freq", g->devs[i].name))
      continue;
    uint64_t v;
    if ((rv = read_u64(g, &v)) < 0) {
      tell_left_out(g, DEVFREQ, g->path, rv);
      err = rv;
      continue;
    }
    tg_devfreq_t *out = &g->devs_now[g->n_devs_now++];
    memcpy(out->name, g->devs[i].name, sizeof(out->name));
    out->cur_freq = v;
  }
  if (!g->n_devs_now) {
    g->devfreq_found = false;
    return err;
  }
  *devs = g->devs_now;
  *n = g->n_devs_now;
  return 0;
}

/* --- gpufreq -------------------------------------------------------------- */

enum { GPU_HZ, GPU_MHZ, GPU_AMD_SCLK };
static const struct {
  const char *path;
  int kind;
} gpu_sources[] = {
    {"/sys/class/kgsl/kgsl-3d0/devfreq/cur_freq", GPU_HZ},
    {"/sys/class/drm/card0/gt_act_freq_mhz", GPU_MHZ},
    {"/sys/class/drm/card0/device/pp_dpm_sclk", GPU_AMD_SCLK},
};
#define GPU_SOURCES (int)(sizeof(gpu_sources) / sizeof(gpu_sources[0]))

static int read_gpu(tg_sysfs_groups_t *g, int i, uint64_t *mhz) {
  if (!mkpath(g, "%s", gpu_sources[i].path)) return -ENAMETOOLONG;
  int rv = read_attr(g);
  if (rv < 0) return rv;
  const char *t = attr_text(g);
  size_t n = tg_buf_size(&g->file);
  uint64_t v;
  switch (gpu_sources[i].kind) {
    case GPU_HZ:
      if ((rv = tg_sysfs_u64_parse(t, n, &v)) == 0) *mhz = v / 1000000;
      break;
    case GPU_MHZ:
      rv = tg_sysfs_u64_parse(t, n, mhz);
      break;
    default:
      rv = tg_amdgpu_sclk_parse(t, n, mhz);
      break;
  }
  if (rv < 0) tell_left_out(g, GPUFREQ, g->path, rv);
  return rv;
}

int tg_sysfs_gpufreq_read(tg_sysfs_groups_t *g, uint64_t *mhz) {
  if (g->gpu_source >= 0 && read_gpu(g, g->gpu_source, mhz) == 0) return 0;
  g->gpu_source = -1;
  /* A file that is there but does not read says more than one that is
   * not. */
  int err = -ENOENT;
  for (int i = 0; i < GPU_SOURCES; i++) {
    int rv = read_gpu(g, i, mhz);
    if (rv == 0) {
      g->gpu_source = i;
      return 0;
    }
    if (err == -ENOENT) err = rv;
  }
  return err;
}
