/* tracefs: finding (or mounting) it, the per-session instances under
 * instances/, their control files and per-CPU counters.
 *
 * Each session gets an instance of its own, "tracegate-<pid>-<n>", so
 * sessions (and other tools) never share a ring buffer or an event switch;
 * removing the instance puts everything back. An instance whose <pid> is no
 * longer alive was left by a run that crashed, and is removed at start.
 *
 * Blocking file I/O: call from the probes' ftrace thread, never from the
 * agent's callbacks.
 */
#ifndef TRACEGATE_PROBES_FTRACE_TRACEFS_H
#define TRACEGATE_PROBES_FTRACE_TRACEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_TRACEFS_PATH_MAX 256
#define TG_TRACEFS_INSTANCE_PREFIX "tracegate-"

/* Writes tracefs' root into |root| (TG_TRACEFS_PATH_MAX bytes): an existing
 * mount (agent/sys/tracefs_root.h, which tracegate-perf asks too), else a
 * fresh mount at /sys/kernel/tracing. Returns 0, -ENOENT (no tracefs),
 * -EACCES or -EPERM (not root). */
int tg_tracefs_find(char *root);
/* The same without mounting: -ENOENT when tracefs is not mounted, -EACCES
 * when it is but may not be searched. */
int tg_tracefs_find_mounted(char *root);

/* Creates instances/tracegate-<getpid()>-<n> with a process-wide counter n.
 * |dir| receives its path. Returns 0 or -errno. */
int tg_tracefs_instance_create(const char *root, char *dir);
/* Stops tracing in the instance and removes it. Returns 0 or -errno. */
int tg_tracefs_instance_remove(const char *dir);
/* Removes every instance of ours whose pid is not alive. Returns how many
 * were removed, or -errno when instances/ cannot be read. */
int tg_tracefs_remove_stale(const char *root);
/* True if |name| is one of ours ("tracegate-<pid>-<n>") and its pid does not
 * exist. */
bool tg_tracefs_instance_is_stale(const char *name);

/* Writes |value| to <dir>/<file> (truncating). Returns 0 or -errno. */
int tg_tracefs_write(const char *dir, const char *file, const char *value);
/* Reads <dir>/<file> into |buf| (NUL-terminated, at most cap - 1 bytes).
 * Returns the length or -errno. */
long tg_tracefs_read(const char *dir, const char *file, char *buf, size_t cap);

/* per_cpu/cpuN/stats. */
typedef struct tg_ftrace_cpu_stats {
  uint64_t entries, overrun, commit_overrun, bytes, dropped_events,
      read_events;
  double oldest_event_ts, now_ts; /* seconds */
} tg_ftrace_cpu_stats_t;

/* Parses the text of a stats file; missing lines stay 0. */
void tg_ftrace_cpu_stats_parse(const char *text, size_t len,
                               tg_ftrace_cpu_stats_t *out);

/* Calls |fn| for each event a config entry names: "group/name",
 * "group/\*" (every event of the group) or a bare "name" (searched in every
 * group). Returns how many matched (0: none) or -errno. */
typedef int (*tg_tracefs_event_fn)(void *ctx, const char *group,
                                   const char *name);
int tg_tracefs_resolve_events(const char *root, const char *spec,
                              tg_tracefs_event_fn fn, void *ctx);

#endif /* TRACEGATE_PROBES_FTRACE_TRACEFS_H */
