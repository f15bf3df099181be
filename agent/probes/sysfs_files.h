/* The /sys files of linux.sys_stats' thermal, cpuidle, devfreq and gpufreq
 * groups, and the values a round keeps of them.
 *
 * Pure parsers over a file's content, as kernel_files.h is for /proc: tests
 * and the fuzz target feed them fixtures and hostile bytes. A sysfs
 * attribute is one value and a newline; anything else is refused, never
 * guessed at. Names are bounded and printable, so they go into a packet as
 * they are.
 */
#ifndef TRACEGATE_PROBES_SYSFS_FILES_H
#define TRACEGATE_PROBES_SYSFS_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A thermal zone's type or an idle state's name, with its NUL (the kernel's
 * own limits are 20 and 16). */
#define TG_SYSFS_NAME_MAX 32
/* A devfreq device's directory name, with its NUL; longer ones are left
 * out (they name no device we know of). */
#define TG_DEVFREQ_NAME_MAX 64

/* One unsigned decimal ("12345\n"), blanks and newlines around it allowed.
 * Returns 0, or TG_EPARSE: empty, not a number, past UINT64_MAX, or
 * anything else in the file. */
int tg_sysfs_u64_parse(const char *text, size_t len, uint64_t *out);
/* The same with an optional '-' (a temperature below zero). */
int tg_sysfs_i64_parse(const char *text, size_t len, int64_t *out);

/* One line of printable ASCII (spaces allowed: "haltpoll idle") into |out|
 * of |cap| (> 0) bytes, without the newline and blanks around it, cut to
 * cap - 1 bytes. Returns 0, or TG_EPARSE: empty, more than one line, or a
 * byte outside 0x20..0x7e (then |out| is ""). */
int tg_sysfs_name_parse(const char *text, size_t len, char *out, size_t cap);

/* amdgpu's pp_dpm_sclk: one "<level>: <n>Mhz" line per level, the current
 * one ending in '*'. Returns 0 with its frequency, or TG_EPARSE: no line
 * marked, or the marked one has no "<n>Mhz" word. */
int tg_amdgpu_sclk_parse(const char *text, size_t len, uint64_t *mhz);

/* SysStats.ThermalZone: /sys/class/thermal/thermal_zoneN. */
typedef struct tg_thermal_zone {
  char name[TG_SYSFS_NAME_MAX]; /* "thermal_zoneN" */
  char type[TG_SYSFS_NAME_MAX]; /* its type file: "x86_pkg_temp" */
  uint64_t temp_c;              /* temp (millidegrees) / 1000 */
} tg_thermal_zone_t;

/* SysStats.CpuIdleStateEntry: cpuN/cpuidle/stateM. */
typedef struct tg_cpuidle_state {
  char name[TG_SYSFS_NAME_MAX]; /* its name file: "C1", "POLL" */
  uint64_t time_us;             /* its time file: residency since boot */
} tg_cpuidle_state_t;

/* SysStats.CpuIdleState: the states of one cpu, state0 first. */
typedef struct tg_cpuidle_cpu {
  uint32_t cpu;
  const tg_cpuidle_state_t *states;
  size_t n_states;
} tg_cpuidle_cpu_t;

/* SysStats.DevfreqValue: /sys/class/devfreq/<name>/cur_freq. */
typedef struct tg_devfreq {
  char name[TG_DEVFREQ_NAME_MAX];
  uint64_t cur_freq; /* as the kernel prints it (Hz) */
} tg_devfreq_t;

#endif /* TRACEGATE_PROBES_SYSFS_FILES_H */
