/* What tracegate-perf denies itself before it reads anything a local user
 * controls (maps, ELF files, DWARF, stacks).
 *
 * Its capabilities (CAP_SYS_PTRACE above all) would let a process that
 * took it over reach into any other process. The profiler never writes
 * into, reads the memory of, or takes descriptors from another process,
 * so a seccomp filter (common/sandbox.h) refuses it, for good and however
 * it was started (systemd, setpriv, a container): process_vm_writev,
 * process_vm_readv, ptrace, pidfd_getfd, process_madvise, kcmp, and every
 * x32 call.
 *
 * Not Landlock: a Landlock domain's process fails every ptrace access
 * check on a process outside the domain, and /proc/PID/root, through
 * which the profiler reads each process's files, is behind one. So
 * /proc/PID/mem opened for writing is closed by the unit's read-only
 * /proc (ReadOnlyPaths=), not here; docs/security.md says what remains.
 *
 * The filter binds threads created afterwards and any exec, and cannot be
 * undone. */
#ifndef TRACEGATE_AGENT_PERF_PERF_CONFINE_H
#define TRACEGATE_AGENT_PERF_PERF_CONFINE_H

#include <stdbool.h>

typedef struct {
  bool seccomp; /* the filter is installed */
} tg_perf_confine_t;

/* Installs the filter (and no_new_privs) on the calling process; call it
 * before any thread starts. Returns 0, or -errno when it could not be
 * installed (|out| says so too). |out| may be NULL. */
int tg_perf_confine(tg_perf_confine_t *out);

#endif
