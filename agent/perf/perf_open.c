/* The file behind a process's mapping, opened safely: see perf_open.h. */
#include "agent/perf/perf_open.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/perf/perf_maps.h"

/* openat2 returns EAGAIN when a rename raced the resolution of "..";
 * a few tries, then the file counts as missing. */
#define OPENAT2_TRIES 4

/* Set once openat2 proved missing: the walk serves from then on. */
static atomic_bool no_openat2;

const char *tg_perf_open_why_name(tg_perf_open_why_t why) {
  switch (why) {
    case TG_PERF_OPEN_OK: return "ok";
    case TG_PERF_OPEN_MISSING: return "missing";
    case TG_PERF_OPEN_NOT_REGULAR: return "not_regular";
    case TG_PERF_OPEN_OTHER_FILE: return "other_file";
    case TG_PERF_OPEN_ESCAPE: return "escape";
    default: return "?";
  }
}

int tg_perf_open_root(const char *root_fmt, int pid) {
  char path[256];
  int n = snprintf(path, sizeof(path), root_fmt, pid);
  if (n < 0 || (size_t)n >= sizeof(path)) return -ENAMETOOLONG;
  int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

static int resolve_openat2(int root_fd, const char *path) {
  struct open_how how = {
      .flags = O_PATH | O_CLOEXEC,
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  };
  for (int i = 0; i < OPENAT2_TRIES; i++) {
    long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
    if (fd >= 0) return (int)fd;
    if (errno != EAGAIN && errno != EINTR) return -errno;
  }
  return -EAGAIN;
}

/* Without openat2: one component at a time from |root_fd|, each opened
 * O_PATH | O_NOFOLLOW, so that no symlink is ever followed (a maps path
 * is the kernel's d_path of the file: it holds none of its own) and ".."
 * is refused: the walk stays below the root by construction. */
static int resolve_walk(int root_fd, const char *path) {
  int cur = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cur < 0) return -errno;
  const char *p = path;
  char comp[NAME_MAX + 1];
  for (;;) {
    while (*p == '/') p++;
    if (!*p) return cur;
    size_t len = strcspn(p, "/");
    if (len > NAME_MAX) {
      close(cur);
      return -ENAMETOOLONG;
    }
    memcpy(comp, p, len);
    comp[len] = '\0';
    p += len;
    if (strcmp(comp, ".") == 0) continue;
    if (strcmp(comp, "..") == 0) {
      close(cur);
      return -EXDEV;
    }
    int next = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int err = next < 0 ? -errno : 0;
    close(cur);
    if (err) return err;
    struct stat st;
    if (fstat(next, &st) < 0 || S_ISLNK(st.st_mode)) {
      err = S_ISLNK(st.st_mode) ? -ELOOP : -errno;
      close(next);
      return err;
    }
    cur = next;
  }
}

int tg__perf_open_resolve(int root_fd, const char *path, bool walk) {
  return walk ? resolve_walk(root_fd, path) : resolve_openat2(root_fd, path);
}

/* openat2 where the kernel has it, the walk otherwise: ENOSYS, or EPERM
 * from a seccomp filter older than openat2 (systemd's
 * SystemCallErrorNumber=EPERM); a resolution with O_PATH has no EPERM of
 * its own to confuse with it, and the walk is as safe, only stricter. */
static int resolve(int root_fd, const char *path) {
  if (!atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
    int fd = resolve_openat2(root_fd, path);
    if (fd != -ENOSYS && fd != -EPERM) return fd;
    atomic_store_explicit(&no_openat2, true, memory_order_relaxed);
  }
  return resolve_walk(root_fd, path);
}

/* The device and inode a mapping of |fd| shows in this process's own
 * maps: on a stacked filesystem (overlayfs, as containers use) the
 * mapped file is the backing one and /proc/PID/maps names its device and
 * inode, while fstat gives the upper file's; btrfs subvolumes differ the
 * same way. Mapping the file here shows what the process's line shows
 * for the same file. Nothing of the file is read. */
static bool backing_matches(int fd, uint32_t maj, uint32_t min,
                            uint64_t inode) {
  long page = sysconf(_SC_PAGESIZE);
  void *at = mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE, fd, 0);
  if (at == MAP_FAILED) return false;
  tg_perf_maps_t self = {0};
  bool same = false;
  if (tg_perf_maps_read(0, "/proc/self/maps", false, &self) >= 0) {
    const tg_perf_map_t *m = tg_perf_maps_find(&self, (uint64_t)(uintptr_t)at);
    same = m && m->dev_major == maj && m->dev_minor == min &&
           m->inode == inode;
  }
  tg_perf_maps_free(&self);
  munmap(at, (size_t)page);
  return same;
}

int tg_perf_open_mapped(int root_fd, const char *path, uint32_t maj,
                        uint32_t min, uint64_t inode, struct stat *st,
                        tg_perf_open_why_t *why) {
  int pfd = resolve(root_fd, path);
  if (pfd < 0) {
    *why = pfd == -ELOOP || pfd == -EXDEV ? TG_PERF_OPEN_ESCAPE
                                          : TG_PERF_OPEN_MISSING;
    return pfd;
  }
  int err;
  if (fstat(pfd, st) < 0) {
    err = -errno;
    *why = TG_PERF_OPEN_MISSING;
    goto fail;
  }
  if (!S_ISREG(st->st_mode)) {
    err = -EINVAL;
    *why = TG_PERF_OPEN_NOT_REGULAR;
    goto fail;
  }
  /* The O_PATH fd pins the inode just checked: reopening it through its
   * /proc/self/fd link opens that inode, whatever the path holds now. */
  char self[64];
  snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
  int fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    err = -errno;
    *why = TG_PERF_OPEN_MISSING;
    goto fail;
  }
  close(pfd);
  struct stat st2;
  if (fstat(fd, &st2) < 0 || st2.st_dev != st->st_dev ||
      st2.st_ino != st->st_ino || !S_ISREG(st2.st_mode)) {
    close(fd);
    *why = TG_PERF_OPEN_OTHER_FILE;
    return -ESTALE;
  }
  *st = st2;
  bool same = inode != 0 &&
              ((major(st->st_dev) == maj && minor(st->st_dev) == min &&
                (uint64_t)st->st_ino == inode) ||
               backing_matches(fd, maj, min, inode));
  if (!same) {
    close(fd);
    *why = TG_PERF_OPEN_OTHER_FILE;
    return -ESTALE;
  }
  *why = TG_PERF_OPEN_OK;
  return fd;
fail:
  close(pfd);
  return err;
}
