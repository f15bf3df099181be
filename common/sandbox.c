/* Landlock domains and seccomp filters (sandbox.h). */
#include "common/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Rights and scopes newer than the oldest header we build with; only
 * those the kernel's ABI knows are asked for. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define SCOPE_SIGNAL (1ULL << 1) /* LANDLOCK_SCOPE_SIGNAL, ABI 6 */

/* The kernel's landlock_ruleset_attr as of ABI 6; older kernels are given
 * its first 8 (ABI 1-3) or 16 (ABI 4-5) bytes. */
typedef struct {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
} ruleset_attr_t;

#define READ_RIGHTS                                                  \
  (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |       \
   LANDLOCK_ACCESS_FS_READ_DIR)
/* The rights a rule on a file (not a directory) may carry. */
#define FILE_RIGHTS \
  (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE)

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

/* Allows reading and executing beneath (or at) |path|; a missing path is
 * skipped. */
static int allow_beneath(int ruleset, const char *path) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
  struct stat st;
  int rv = 0;
  if (fstat(fd, &st) != 0) {
    rv = -errno;
  } else {
    struct landlock_path_beneath_attr pb = {
        .allowed_access = S_ISDIR(st.st_mode) ? READ_RIGHTS : FILE_RIGHTS,
        .parent_fd = fd,
    };
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH,
                &pb, 0) != 0)
      rv = -errno;
  }
  close(fd);
  return rv;
}

static int prepare_landlock(tg_sandbox_t *sb, const tg_sandbox_spec_t *spec) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
                     LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 0) {
    sb->landlock_abi = -errno;
    return 0;
  }
  sb->landlock_abi = (int)abi;
  ruleset_attr_t attr = {.handled_access_fs = write_rights((int)abi)};
  if (spec->read_beneath) attr.handled_access_fs |= READ_RIGHTS;
  size_t size = abi >= 4 ? 16 : 8;
  if (spec->scope_signals && abi >= 6) {
    attr.scoped = SCOPE_SIGNAL;
    size = sizeof(attr);
    sb->signals_scoped = true;
  }
  long fd = syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (fd < 0) return -errno;
  sb->ruleset_fd = (int)fd;
  for (const char *const *p = spec->read_beneath; p && *p; p++) {
    int rv = allow_beneath(sb->ruleset_fd, *p);
    if (rv < 0) return rv;
  }
  return 0;
}

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
/* x32 calls carry this bit in their number under the same arch. */
#define X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef NATIVE_ARCH
/* Jump targets of the filter being built: the next instruction, or the
 * allow and deny returns at its end. */
enum { NEXT = -1, ALLOW = -2, DENY = -3 };

typedef struct {
  struct sock_filter insn;
  int jt, jf; /* NEXT, ALLOW, DENY (jumps only) */
  bool jump;
} op_t;

static void stmt(op_t *ops, size_t *n, uint16_t code, uint32_t k) {
  ops[(*n)++] = (op_t){.insn = BPF_STMT(code, k)};
}

static void jump(op_t *ops, size_t *n, uint16_t code, uint32_t k, int jt,
                 int jf) {
  ops[(*n)++] = (op_t){.insn = BPF_JUMP(code, k, 0, 0), .jt = jt, .jf = jf,
                       .jump = true};
}

static uint8_t offset_to(int target, size_t from, size_t n_ops) {
  if (target == NEXT) return 0;
  size_t idx = target == ALLOW ? n_ops : n_ops + 1;
  return (uint8_t)(idx - from - 1);
}

static int build_filter(tg_sandbox_t *sb, const tg_sandbox_spec_t *spec) {
  op_t ops[TG_SANDBOX_MAX_INSNS];
  size_t n = 0;
  stmt(ops, &n, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  jump(ops, &n, BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, NEXT, DENY);
  stmt(ops, &n, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#ifdef X32_BIT
  jump(ops, &n, BPF_JMP | BPF_JGE | BPF_K, X32_BIT, DENY, NEXT);
#endif
  for (size_t i = 0; i < spec->n_deny; i++)
    jump(ops, &n, BPF_JMP | BPF_JEQ | BPF_K, spec->deny[i], DENY, NEXT);
  /* Resolve the targets: ALLOW and DENY are the two returns after ops. */
  for (size_t i = 0; i < n; i++) {
    sb->insns[i] = ops[i].insn;
    if (!ops[i].jump) continue;
    sb->insns[i].jt = offset_to(ops[i].jt, i, n);
    sb->insns[i].jf = offset_to(ops[i].jf, i, n);
  }
  sb->insns[n] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                              SECCOMP_RET_ALLOW);
  sb->insns[n + 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                                  SECCOMP_RET_ERRNO | EPERM);
  sb->n_insns = (unsigned short)(n + 2);
  sb->have_filter = true;
  return 0;
}
#else
static int build_filter(tg_sandbox_t *sb, const tg_sandbox_spec_t *spec) {
  (void)sb;
  (void)spec;
  return 0; /* have_filter stays false: tg_sandbox_enter says -ENOSYS */
}
#endif

int tg_sandbox_prepare(tg_sandbox_t *sb, const tg_sandbox_spec_t *spec) {
  memset(sb, 0, sizeof(*sb));
  sb->ruleset_fd = -1;
  sb->landlock_abi = -EOPNOTSUPP;
  if (spec->n_deny > TG_SANDBOX_MAX_DENY) return -E2BIG;
  int rv = build_filter(sb, spec);
  if (rv == 0 && spec->landlock) rv = prepare_landlock(sb, spec);
  if (rv < 0) tg_sandbox_release(sb);
  return rv;
}

int tg_sandbox_enter(const tg_sandbox_t *sb, bool *landlock) {
  if (landlock) *landlock = false;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -errno;
  if (sb->ruleset_fd >= 0 &&
      syscall(SYS_landlock_restrict_self, sb->ruleset_fd, 0) == 0 && landlock)
    *landlock = true;
  if (!sb->have_filter) return -ENOSYS;
  struct sock_fprog prog = {.len = sb->n_insns,
                            .filter = (struct sock_filter *)sb->insns};
  /* TSYNC: a thread a library already started gets it too. */
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
              &prog) != 0)
    return -errno;
  return 0;
}

void tg_sandbox_release(tg_sandbox_t *sb) {
  if (sb->ruleset_fd >= 0) close(sb->ruleset_fd);
  sb->ruleset_fd = -1;
}
