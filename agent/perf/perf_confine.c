/* tracegate-perf's policy for common/sandbox (perf_confine.h). */
#include "agent/perf/perf_confine.h"

#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>

#include "common/sandbox.h"

/* LeakSanitizer stops the world at exit by ptrace-attaching a helper task
 * to the process's threads: an AddressSanitizer build (tests only, never
 * a user's) keeps ptrace. */
#if defined(__SANITIZE_ADDRESS__)
#define KEEP_PTRACE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEEP_PTRACE 1
#endif
#endif

/* Calls that reach into another process; the profiler makes none. */
static const uint32_t denied[] = {
    SYS_process_vm_writev, SYS_process_vm_readv, SYS_kcmp,
#ifndef KEEP_PTRACE
    SYS_ptrace,
#endif
#ifdef SYS_pidfd_getfd
    SYS_pidfd_getfd,
#endif
#ifdef SYS_process_madvise
    SYS_process_madvise,
#endif
};

int tg_perf_confine(tg_perf_confine_t *out) {
  tg_perf_confine_t r = {0};
  const tg_sandbox_spec_t spec = {
      .deny = denied,
      .n_deny = sizeof(denied) / sizeof(denied[0]),
  };
  tg_sandbox_t sb;
  int rv = tg_sandbox_prepare(&sb, &spec);
  if (rv == 0) {
    rv = tg_sandbox_enter(&sb, NULL);
    r.seccomp = rv == 0;
  }
  tg_sandbox_release(&sb);
  if (out) *out = r;
  return rv;
}
