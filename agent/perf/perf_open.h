/* Opening the file behind a process's mapping, as tracegate-perf must:
 * the path comes from /proc/PID/maps and the tree it names belongs to the
 * process (any local user, any container), while the profiler holds
 * CAP_SYS_PTRACE and CAP_PERFMON. So the open
 *
 *  - resolves the path inside the process's own root (a directory fd of
 *    /proc/PID/root): openat2 with RESOLVE_IN_ROOT and
 *    RESOLVE_NO_MAGICLINKS, so that "..", an absolute symlink or
 *    /proc/self/root lead back to that root, never to the host's files;
 *    where the kernel has no openat2 (before 5.6), a walk one component
 *    at a time that refuses every symlink and "..", which also never
 *    leaves the root;
 *  - never blocks and never opens anything but the file: the path is
 *    resolved to an O_PATH descriptor (no open of a FIFO, socket or
 *    device takes place), fstat then requires a regular file that is the
 *    mapping's own (its device and inode, or for a stacked filesystem
 *    such as overlayfs the backing file a mapping of it shows), and only
 *    that inode is then opened for reading, through /proc/self/fd,
 *    O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
 *  - never falls back to the path in the profiler's own mount namespace.
 *
 * Every refusal says why (tg_perf_open_why_t), for the callers' stats.
 * Pure of global state but for a flag remembering that openat2 is
 * missing; thread-safe.
 */
#ifndef TRACEGATE_PERF_PERF_OPEN_H
#define TRACEGATE_PERF_PERF_OPEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

typedef enum tg_perf_open_why {
  TG_PERF_OPEN_OK = 0,
  TG_PERF_OPEN_MISSING,     /* no such file there, or not readable */
  TG_PERF_OPEN_NOT_REGULAR, /* a FIFO, socket, device or directory */
  TG_PERF_OPEN_OTHER_FILE,  /* a regular file, but not the one mapped */
  TG_PERF_OPEN_ESCAPE,      /* a magic link, or (without openat2) a
                               symlink or "..": refused, not followed */
  TG_PERF_OPEN_N
} tg_perf_open_why_t;

/* The short name of |why| for logs ("missing", "not_regular", ...). */
const char *tg_perf_open_why_name(tg_perf_open_why_t why);

/* A directory fd (O_PATH) of the root |root_fmt| names for |pid| (a
 * printf format taking the pid, e.g. "/proc/%d/root"), or -errno. */
int tg_perf_open_root(const char *root_fmt, int pid);

/* Opens |path| (absolute, as the maps line names it) inside |root_fd|
 * for reading, when it is the regular file of device |maj|:|min| and
 * inode |inode| (the maps line's; |inode| 0 cannot be checked and is
 * refused as TG_PERF_OPEN_OTHER_FILE). Returns the fd (owned by the
 * caller) with |*st| its fstat, or -errno with |*why| set (never
 * TG_PERF_OPEN_OK then). */
int tg_perf_open_mapped(int root_fd, const char *path, uint32_t maj,
                        uint32_t min, uint64_t inode, struct stat *st,
                        tg_perf_open_why_t *why);

/* For tests: the resolution alone (an O_PATH fd of |path| inside
 * |root_fd|, or -errno), by openat2 or, |walk| true, by the walk used
 * where openat2 is missing. */
int tg__perf_open_resolve(int root_fd, const char *path, bool walk);

#endif /* TRACEGATE_PERF_PERF_OPEN_H */
