/* SPDX-License-Identifier: Apache-2.0 */
/* The one way the symbolizer opens a file (symbolize.h, tg_sym_open):
 * debug files, a module's own file, debuginfod's cached answer. A trace
 * names module paths, and the host that wrote it may be hostile, or a
 * local user may have put a FIFO or a link where a trace points: the open
 * must neither block nor read the kernel's files, whose reads have side
 * effects or never end.
 *
 * O_NOFOLLOW is not used: distributions ship .build-id entries as
 * symbolic links to the debug files, and it would guard the last
 * component only. What a link leads to is checked instead: stat and
 * statfs follow it before the open, so that a device is never opened,
 * and fstat and fstatfs check the descriptor after it, so that a path
 * swapped in between is caught too. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "consumer/symbolize/symbolize.h"

const char *tg_sym_refusal_name(tg_sym_refusal_t r) {
  switch (r) {
    case TG_SYM_REFUSED_DOTDOT: return "dotdot";
    case TG_SYM_REFUSED_KERNEL_FS: return "kernel_fs";
    case TG_SYM_REFUSED_NOT_REGULAR: return "not_regular";
    case TG_SYM_REFUSED_SPLIT_DWARF: return "split_dwarf";
    default: return "none";
  }
}

/* The kernel's file systems: their regular files are interfaces (a read
 * of /proc/self/mem, tracefs' trace_pipe), not files. */
static bool kernel_fs(long type) {
  switch ((unsigned long)type & 0xFFFFFFFFul) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case SELINUX_MAGIC:
    case SMACK_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case BPF_FS_MAGIC:
    case PSTOREFS_MAGIC:
    case EFIVARFS_MAGIC:
    case DEVPTS_SUPER_MAGIC:
      return true;
    default:
      return false;
  }
}

/* What the words of |path| say, the file system not asked: a relative
 * path or a ".." component is refused outright (no normalising could
 * know where it leads through links), and so is a first component of
 * proc, sys or dev once empty and "." components are dropped. */
static tg_sym_refusal_t lexical(const char *path) {
  if (path[0] != '/') return TG_SYM_REFUSED_DOTDOT;
  bool first = true;
  for (const char *p = path; *p;) {
    while (*p == '/') p++;
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && !memcmp(p, "..", 2)) return TG_SYM_REFUSED_DOTDOT;
    if (n && !(n == 1 && p[0] == '.')) {
      if (first && ((n == 4 && !memcmp(p, "proc", 4)) ||
                    (n == 3 && !memcmp(p, "sys", 3)) ||
                    (n == 3 && !memcmp(p, "dev", 3))))
        return TG_SYM_REFUSED_KERNEL_FS;
      first = false;
    }
    p += n;
  }
  return TG_SYM_REFUSED_NONE;
}

/* What the file at |st| on |fs| is: a refusal, or NONE. */
static tg_sym_refusal_t judge(const struct stat *st, const struct statfs *fs) {
  if (kernel_fs((long)fs->f_type)) return TG_SYM_REFUSED_KERNEL_FS;
  if (!S_ISREG(st->st_mode)) return TG_SYM_REFUSED_NOT_REGULAR;
  return TG_SYM_REFUSED_NONE;
}

int tg_sym_open(const char *path, bool named, tg_sym_refusal_t *why) {
  *why = named ? lexical(path) : TG_SYM_REFUSED_NONE;
  if (*why) return -1;
  struct stat st;
  struct statfs fs;
  if (stat(path, &st) != 0 || statfs(path, &fs) != 0) return -1;
  if ((*why = judge(&st, &fs))) return -1;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -1;
  if (fstat(fd, &st) != 0 || fstatfs(fd, &fs) != 0) {
    close(fd);
    return -1;
  }
  if ((*why = judge(&st, &fs))) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Where a debug directory keeps the file of a build id: the other way
 * the symbolizer names a file (symbolize.h). */
int tg_sym_build_id_path(const char *dir, const uint8_t *id, size_t len,
                         char *out, size_t out_size) {
  static const char hex[] = "0123456789abcdef";
  if (len < 2) return -EINVAL;
  char h[2 * TG_SYM_MAX_BUILD_ID + 1];
  if (len > TG_SYM_MAX_BUILD_ID) return -EINVAL;
  for (size_t i = 0; i < len; i++) {
    h[2 * i] = hex[id[i] >> 4];
    h[2 * i + 1] = hex[id[i] & 15];
  }
  h[2 * len] = '\0';
  int n = snprintf(out, out_size, "%s/.build-id/%.2s/%s.debug", dir, h,
                   h + 2);
  if (n < 0 || (size_t)n >= out_size) return -ENAMETOOLONG;
  return 0;
}
