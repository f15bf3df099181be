/* tracegate-perf's seccomp filter and Landlock domain (perf_confine.h). */
#include "agent/perf/perf_confine.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Rights newer than the oldest header we build with; the kernel tells
 * which it knows (its ABI version), and only those are asked for. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
/* x32 calls carry this bit in their number under the same arch. */
#define X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/* LeakSanitizer stops the world at exit by ptrace-attaching a helper task
 * to the process's threads: an AddressSanitizer build (tests only, never
 * a user's) keeps ptrace, which Landlock still limits to this process's
 * own domain. */
#if defined(__SANITIZE_ADDRESS__)
#define KEEP_PTRACE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEEP_PTRACE 1
#endif
#endif

#ifdef NATIVE_ARCH
/* Calls that reach into another process; the profiler makes none. */
static const uint32_t denied[] = {
    __NR_process_vm_writev, __NR_process_vm_readv, __NR_kcmp,
#ifndef KEEP_PTRACE
    __NR_ptrace,
#endif
#ifdef __NR_pidfd_getfd
    __NR_pidfd_getfd,
#endif
#ifdef __NR_process_madvise
    __NR_process_madvise,
#endif
};
#define N_DENIED (sizeof(denied) / sizeof(denied[0]))

static int install_seccomp(void) {
  /* arch check, number load, x32 check, one test per denied call, allow,
   * deny. Jump offsets count from the next instruction. */
  struct sock_filter prog[4 + N_DENIED + 2];
  size_t n = 0;
  const uint8_t to_deny_from_end = 1; /* the deny is the last instruction */
  prog[n++] = (struct sock_filter)BPF_STMT(
      BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  /* A foreign arch (int 0x80 from this process) is refused whole. */
  prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                           NATIVE_ARCH, 0,
                                           (uint8_t)(2 + N_DENIED + 1));
  prog[n++] = (struct sock_filter)BPF_STMT(
      BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#ifdef X32_BIT
  prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_BIT,
                                           (uint8_t)(N_DENIED + 1), 0);
#else
  prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0);
#endif
  for (size_t i = 0; i < N_DENIED; i++)
    prog[n++] = (struct sock_filter)BPF_JUMP(
        BPF_JMP | BPF_JEQ | BPF_K, denied[i],
        (uint8_t)(N_DENIED - i - 1 + to_deny_from_end), 0);
  prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                           SECCOMP_RET_ERRNO | EPERM);
  struct sock_fprog fprog = {.len = (unsigned short)n, .filter = prog};
  /* TSYNC: any thread a library started already gets it too. */
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
              &fprog) != 0)
    return -errno;
  return 0;
}
#else
static int install_seccomp(void) { return -ENOSYS; }
#endif

/* Every write right the kernel's Landlock ABI |abi| knows. */
static uint64_t write_rights(int abi) {
  uint64_t m = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
               LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
               LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
               LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
               LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) m |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) m |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) m |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return m;
}

/* A domain that handles every write right and grants none. */
static int install_landlock(int *abi_out) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
                     LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 0) {
    *abi_out = -errno;
    return *abi_out;
  }
  *abi_out = (int)abi;
  struct landlock_ruleset_attr attr = {.handled_access_fs =
                                           write_rights((int)abi)};
  long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
  if (fd < 0) return -errno;
  int rv = 0;
  if (syscall(SYS_landlock_restrict_self, (int)fd, 0) != 0) rv = -errno;
  close((int)fd);
  return rv;
}

int tg_perf_confine(tg_perf_confine_t *out) {
  tg_perf_confine_t r = {0};
  /* Both need it when not CAP_SYS_ADMIN; the profiler never gains
   * privileges by exec anyway. */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    if (out) *out = r;
    return -errno;
  }
  int rv = install_landlock(&r.landlock_abi);
  r.landlock = rv == 0;
  int sv = install_seccomp();
  r.seccomp = sv == 0;
  if (out) *out = r;
  if (sv < 0) return sv;
  return rv;
}
