/* Where tracefs is mounted, for tracegate-probes (linux.ftrace) and
 * tracegate-perf (tracepoint events' ids): one answer for both programs.
 *
 * A candidate is tracefs's root when it holds an events/ directory, which
 * both read. Nothing here mounts or writes.
 */
#ifndef TRACEGATE_AGENT_SYS_TRACEFS_ROOT_H
#define TRACEGATE_AGENT_SYS_TRACEFS_ROOT_H

#include <stdbool.h>
#include <stddef.h>

/* Where a kernel mounts tracefs (the first) or debugfs shows it. */
#define TG_TRACEFS_MOUNT "/sys/kernel/tracing"
#define TG_TRACEFS_DEBUGFS_MOUNT "/sys/kernel/debug/tracing"

/* Whether |dir| holds an events/ directory. */
bool tg_tracefs_is_root(const char *dir);

/* Writes the first candidate that is tracefs's root into |root| of |cap|
 * bytes. Returns 0, -ENAMETOOLONG when it does not fit, -EACCES when a
 * candidate exists but may not be searched (tracefs is root's, 0700,
 * unless mounted with gid=), or -ENOENT. */
int tg_tracefs_mounted(char *root, size_t cap);

#endif /* TRACEGATE_AGENT_SYS_TRACEFS_ROOT_H */
