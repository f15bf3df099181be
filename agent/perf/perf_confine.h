/* What tracegate-perf denies itself before it reads anything a local user
 * controls (maps, ELF files, DWARF, stacks).
 *
 * Its capabilities (CAP_SYS_PTRACE above all) would let a process that
 * took it over write into any other process: process_vm_writev(2), or
 * open(2) of /proc/PID/mem for writing. The profiler never writes into
 * another process nor opens any file for writing, so it gives both up for
 * good, whoever started it (systemd, setpriv, a container):
 *
 *   - a seccomp filter refuses (EPERM) the calls that reach into another
 *     process: process_vm_writev, process_vm_readv, ptrace, pidfd_getfd,
 *     process_madvise, kcmp, and every x32 call;
 *   - a Landlock domain refuses every write access to the file system
 *     (writing, truncating, creating, removing, renaming a file, device
 *     ioctls), so /proc/PID/mem opens read-only at most. Reading and
 *     executing stay allowed; memfds and the sockets it connects to are
 *     not path opens and stay usable.
 *
 * Both are inherited by threads created afterwards, and cannot be undone.
 * docs/security.md says why parsing stays in this process. */
#ifndef TRACEGATE_AGENT_PERF_PERF_CONFINE_H
#define TRACEGATE_AGENT_PERF_PERF_CONFINE_H

#include <stdbool.h>

typedef struct {
  bool seccomp;  /* the filter is installed */
  bool landlock; /* the write-denying domain is in force */
  int landlock_abi; /* the kernel's Landlock ABI version, or -errno */
} tg_perf_confine_t;

/* Installs both on the calling thread; call it before any thread starts
 * (Landlock binds the caller and what it creates later). Sets
 * no_new_privs. Returns 0 when both are in force; -ENOSYS or
 * -EOPNOTSUPP when the kernel has no Landlock (the seccomp filter is then
 * still installed: |out| says which holds); another -errno when either
 * could not be installed. |out| may be NULL. */
int tg_perf_confine(tg_perf_confine_t *out);

#endif
