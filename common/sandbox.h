/* What a process gives up before it handles hostile input: a seccomp
 * filter over system calls and, when the caller asks, a Landlock domain
 * over the file system (and, where the kernel has it, over signals).
 * tracegate-perf installs the filter alone (agent/perf/perf_confine.c);
 * the trace processor child that checks a snapshot gets both before exec
 * (common/tp_import.c).
 *
 * Two steps, so that a child between fork and exec does nothing but
 * async-signal-safe system calls: tg_sandbox_prepare (in the parent: opens
 * the paths, builds the ruleset and the filter) and tg_sandbox_enter (in
 * the process to confine). Both the domain and the filter are inherited by
 * threads created afterwards and by exec, and cannot be undone.
 *
 * The policy is the caller's (tg_sandbox_spec_t); this module only makes
 * the kernel enforce it, and says which parts the kernel could enforce. */
#ifndef TRACEGATE_COMMON_SANDBOX_H
#define TRACEGATE_COMMON_SANDBOX_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_sandbox_spec {
  /* A Landlock domain at all. A process that reads other processes'
   * /proc/PID/root or /proc/PID/mem cannot have one: Landlock refuses a
   * domain's process every ptrace access check on a process outside it,
   * and those files are behind one. */
  bool landlock;
  /* File system (Landlock). Writes of every kind (writing, truncating,
   * creating, removing, renaming, device ioctls) are always refused.
   * NULL: reads and execution stay free. Else a NULL-terminated list of
   * paths beneath which (or at which, for a file) reading and executing
   * are allowed, and nowhere else; a path that does not exist is
   * skipped. */
  const char *const *read_beneath;
  /* Landlock ABI 6 and later: no signal to a process outside the domain.
   * Where the kernel is older this part is not enforced (said by
   * tg_sandbox_t.signals_scoped). */
  bool scope_signals;
  /* System calls (seccomp) answered EPERM; x32 calls and calls of a
   * foreign architecture always are. |deny| is copied. */
  const uint32_t *deny;
  size_t n_deny;
} tg_sandbox_spec_t;

#define TG_SANDBOX_MAX_DENY 24
#define TG_SANDBOX_MAX_INSNS (TG_SANDBOX_MAX_DENY + 16)

typedef struct tg_sandbox {
  int ruleset_fd;       /* the Landlock ruleset, or -1 */
  int landlock_abi;     /* the kernel's ABI version, or -errno */
  bool signals_scoped;  /* scope_signals asked and the kernel has it */
  bool have_filter;     /* a seccomp filter for this architecture */
  unsigned short n_insns;
  struct sock_filter insns[TG_SANDBOX_MAX_INSNS];
} tg_sandbox_t;

/* Builds what |spec| asks for into |sb|. Returns 0; -E2BIG for more than
 * TG_SANDBOX_MAX_DENY calls; -errno when a Landlock rule cannot be made.
 * A kernel without Landlock is not an error here: sb->ruleset_fd is -1
 * and sb->landlock_abi says why. Release with tg_sandbox_release. */
int tg_sandbox_prepare(tg_sandbox_t *sb, const tg_sandbox_spec_t *spec);

/* Confines the calling process: no_new_privs, the Landlock domain (when
 * prepared), the seccomp filter. Async-signal-safe (system calls only):
 * for a child between fork and exec. Sets *landlock (may be NULL) to
 * whether the domain is in force. Returns 0 when the seccomp filter is
 * installed (whatever Landlock could do), else -errno. */
int tg_sandbox_enter(const tg_sandbox_t *sb, bool *landlock);

/* Closes the ruleset; |sb| may then be prepared again. */
void tg_sandbox_release(tg_sandbox_t *sb);

#endif
