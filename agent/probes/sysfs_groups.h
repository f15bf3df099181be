/* linux.sys_stats' /sys groups: thermal zones, cpuidle residencies, devfreq
 * devices and the GPU's frequency, read as traced_probes reads them.
 *
 * Each group finds its files once (which zones, cpus, states, devices; the
 * names that never change) and then reads only their values each round,
 * into arrays it owns. A round that reads nothing forgets what was found,
 * and the next one looks again: a device that came or went is picked up
 * then. Every directory is read under a cap, and every file through
 * sysfs_files.h's parsers; an entry that does not read or parse is left
 * out of the round, and the first such entry of each group is logged.
 *
 * Owns: the lists of files and the values of the last round. Must never:
 * follow a name read from a file into a path, or allocate in a round once
 * the lists are found. Not thread-safe: one instance, one thread (the
 * sampler's).
 */
#ifndef TRACEGATE_PROBES_SYSFS_GROUPS_H
#define TRACEGATE_PROBES_SYSFS_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probes/sysfs_files.h"

/* Caps on what one group keeps; more is dropped and logged once. */
#define TG_THERMAL_MAX_ZONES 128
#define TG_CPUIDLE_MAX_CPUS 1024
#define TG_CPUIDLE_MAX_STATES 16 /* per cpu; the kernel has at most 10 */
#define TG_DEVFREQ_MAX 64

typedef struct tg_sysfs_groups tg_sysfs_groups_t;

/* |root| (borrowed for the call, copied) is prepended to every path: "" for
 * this machine, a directory holding a fake sys/ tree in tests. Returns 0,
 * -ENOMEM, or -ENAMETOOLONG (|root| of PATH_MAX / 2 bytes or more). */
int tg_sysfs_groups_new(const char *root, tg_sysfs_groups_t **out);
/* NULL is a no-op. */
void tg_sysfs_groups_free(tg_sysfs_groups_t *g);

/* One round of a group. Each returns 0 with at least one value, valid until
 * the group's next round or tg_sysfs_groups_free; otherwise nothing (*n is
 * 0) and -ENOENT (the kernel has none: no directory, or an empty one), the
 * -errno of a directory or file that did not read, or TG_EPARSE (every
 * file was malformed). */

/* /sys/class/thermal/thermal_zoneN with a type and a temp, by N. */
int tg_sysfs_thermal_read(tg_sysfs_groups_t *g, const tg_thermal_zone_t **zones,
                          size_t *n);
/* /sys/devices/system/cpu/cpuN/cpuidle/stateM with a name and a time, by
 * N then M; a cpu without a state that reads is left out. */
int tg_sysfs_cpuidle_read(tg_sysfs_groups_t *g, const tg_cpuidle_cpu_t **cpus,
                          size_t *n);
/* /sys/class/devfreq/<name>/cur_freq, by name. */
int tg_sysfs_devfreq_read(tg_sysfs_groups_t *g, const tg_devfreq_t **devs,
                          size_t *n);
/* The first of these that reads, as traced_probes tries them: Adreno's
 * /sys/class/kgsl/kgsl-3d0/devfreq/cur_freq (Hz), Intel's
 * /sys/class/drm/card0/gt_act_freq_mhz, AMD's
 * /sys/class/drm/card0/device/pp_dpm_sclk (the level marked '*'). */
int tg_sysfs_gpufreq_read(tg_sysfs_groups_t *g, uint64_t *mhz);

#endif /* TRACEGATE_PROBES_SYSFS_GROUPS_H */
