/* Bounded, resumable directory walks; see inode_scan.h. */
#include "agent/probes/inode_scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* struct linux_dirent64 (getdents64(2)), read by offset: u64 d_ino,
 * s64 d_off, u16 d_reclen, u8 d_type, then the NUL-terminated name. */
#define DIRENT_INO 0
#define DIRENT_OFF 8
#define DIRENT_RECLEN 16
#define DIRENT_TYPE 18
#define DIRENT_NAME 19

#define OPEN_DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

typedef struct level {
  int fd;          /* -1 while the walk is parked */
  size_t path_len; /* the directory's path in s->path */
  uint64_t ino;    /* the directory's, to know it again when reopened */
  /* Where to read on after a park: |last_ino| (0: nothing taken yet) is
   * the last entry taken, which begins at cookie |last_at| and ends at
   * |resume| (getdents64's d_off cookies). */
  int64_t last_at, resume;
  uint64_t last_ino;
  bool restarted; /* read again from its start once already */
  uint8_t *buf;   /* TG_INODE_SCAN_BUF; kept across walks */
  size_t pos, len;
} level_t;

typedef struct root {
  char *path;
  uint64_t dev;
} root_t;

struct tg_inode_scan {
  tg_inode_scan_cbs_t cbs;
  root_t roots[TG_INODE_SCAN_MAX_ROOTS];
  size_t n_roots, next_root;
  uint64_t dev;   /* of the root being walked */
  unsigned depth; /* levels of the walk, open or parked */
  level_t levels[TG_INODE_SCAN_MAX_DEPTH];
  char path[PATH_MAX];
  tg_inode_scan_stats_t st;
};

int tg_inode_scan_new(const tg_inode_scan_cbs_t *cbs, tg_inode_scan_t **out) {
  tg_inode_scan_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->cbs = *cbs;
  for (unsigned i = 0; i < TG_INODE_SCAN_MAX_DEPTH; i++) s->levels[i].fd = -1;
  *out = s;
  return 0;
}

/* Closes levels [from, depth) and drops them from the walk. */
static void drop_levels(tg_inode_scan_t *s, unsigned from) {
  while (s->depth > from) {
    level_t *l = &s->levels[--s->depth];
    if (l->fd >= 0) close(l->fd);
    l->fd = -1;
  }
}

void tg_inode_scan_reset(tg_inode_scan_t *s) {
  drop_levels(s, 0);
  for (size_t i = 0; i < s->n_roots; i++) free(s->roots[i].path);
  s->n_roots = s->next_root = 0;
}

void tg_inode_scan_free(tg_inode_scan_t *s) {
  if (!s) return;
  tg_inode_scan_reset(s);
  for (unsigned i = 0; i < TG_INODE_SCAN_MAX_DEPTH; i++) free(s->levels[i].buf);
  free(s);
}

int tg_inode_scan_add_root(tg_inode_scan_t *s, const char *path, uint64_t dev) {
  if (s->n_roots == TG_INODE_SCAN_MAX_ROOTS) return -ENOSPC;
  /* Absolute only: a relative root would be walked from the cwd, and its
   * paths would match no mount point. */
  if (path[0] != '/') return -EINVAL;
  size_t n = strnlen(path, PATH_MAX);
  if (n >= PATH_MAX) return -ENAMETOOLONG; /* before trimming: never cut */
  /* "/a/b/" walks as "/a/b", so that children are "/a/b/c". */
  while (n > 1 && path[n - 1] == '/') n--;
  char *p = malloc(n + 1);
  if (!p) return -ENOMEM;
  memcpy(p, path, n);
  p[n] = '\0';
  s->roots[s->n_roots++] = (root_t){p, dev};
  return 0;
}

const tg_inode_scan_stats_t *tg_inode_scan_stats(const tg_inode_scan_t *s) {
  return &s->st;
}

/* Opens |name| in |dirfd| (or |name| itself, for AT_FDCWD) as level
 * s->depth with its path s->path[0, path_len): when it is a directory on
 * the walk's device that is not a symlink. */
static void push(tg_inode_scan_t *s, int dirfd, const char *name,
                 size_t path_len) {
  if (s->depth == TG_INODE_SCAN_MAX_DEPTH) {
    s->st.too_deep++;
    return;
  }
  level_t *l = &s->levels[s->depth];
  if (!l->buf && !(l->buf = malloc(TG_INODE_SCAN_BUF))) {
    s->st.open_errors++;
    return;
  }
  int fd = openat(dirfd, name, OPEN_DIR_FLAGS);
  if (fd < 0) {
    s->st.open_errors++;
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    s->st.open_errors++;
    close(fd);
    return;
  }
  if ((uint64_t)st.st_dev != s->dev) {
    s->st.other_dev++;
    close(fd);
    return;
  }
  l->fd = fd;
  l->path_len = path_len;
  l->ino = (uint64_t)st.st_ino;
  l->last_at = l->resume = 0;
  l->last_ino = 0;
  l->restarted = false;
  l->pos = l->len = 0;
  s->depth++;
  s->st.dirs++;
}

static void pop(tg_inode_scan_t *s) { drop_levels(s, s->depth - 1); }

/* Between steps the walk holds no directory open: a file system being
 * scanned can still be unmounted, and a long scan costs no fds while it
 * waits. Each level keeps its path (a prefix of s->path), its inode and
 * where it was in its entries; entries read ahead into its buffer are read
 * again. */
static void park(tg_inode_scan_t *s) {
  for (unsigned i = 0; i < s->depth; i++) {
    level_t *l = &s->levels[i];
    close(l->fd);
    l->fd = -1;
    l->pos = l->len = 0;
  }
}

static bool is_parked(const tg_inode_scan_t *s) {
  return s->depth > 0 && s->levels[0].fd < 0;
}

/* Opens level |i| again: the root by its path, a deeper level by its name
 * in its parent (O_NOFOLLOW, as the walk opened it). Returns the fd, -1
 * when it is no longer there or no longer the directory the walk left
 * (counted in |changed|), -2 when it did not open for another reason
 * (counted in |open_errors|: out of fds...). A directory removed and made
 * again under its name with a reused inode number passes for the one the
 * walk left; seek_back() then finds its last entry missing and reads it
 * from its start (or gives it up), so that the walk still reports only
 * what is there. */
static int reopen_fd(tg_inode_scan_t *s, unsigned i) {
  level_t *l = &s->levels[i];
  int fd;
  if (i == 0) {
    /* The root's path is s->path's prefix: cut there for the open only,
     * since deeper levels' paths go on past it. */
    char keep = s->path[l->path_len];
    s->path[l->path_len] = '\0';
    fd = open(s->path, OPEN_DIR_FLAGS);
    s->path[l->path_len] = keep;
  } else {
    const level_t *up = &s->levels[i - 1];
    size_t from = up->path_len + (s->path[up->path_len - 1] == '/' ? 0 : 1);
    char name[NAME_MAX + 1];
    if (l->path_len <= from || l->path_len - from > NAME_MAX) return -1;
    memcpy(name, s->path + from, l->path_len - from);
    name[l->path_len - from] = '\0';
    fd = openat(up->fd, name, OPEN_DIR_FLAGS);
  }
  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? -1 : -2;
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != s->dev ||
      (uint64_t)st.st_ino != l->ino) {
    close(fd);
    return -1;
  }
  return fd;
}

static ssize_t read_dents(level_t *l) {
  ssize_t n;
  do n = getdents64(l->fd, l->buf, TG_INODE_SCAN_BUF);
  while (n < 0 && errno == EINTR);
  return n;
}

/* Puts reopened level |l| back where it was. A cookie is only as good as
 * its file system makes it: ext4's and btrfs's name an entry for good,
 * while tmpfs before Linux 6.6, overlayfs' merged directories and vfat
 * count positions, which shift when entries before them go or come. So
 * the last entry taken is read again at its cookie and must be the same
 * inode; when it is not, the directory is read again from its start, once
 * (entries found twice cost nothing, entries skipped would stay unfound),
 * and a second time it is given up. False: given up. */
static bool seek_back(tg_inode_scan_t *s, level_t *l) {
  if (l->last_ino == 0)
    return lseek(l->fd, (off_t)l->resume, SEEK_SET) != (off_t)-1;
  if (lseek(l->fd, (off_t)l->last_at, SEEK_SET) != (off_t)-1) {
    ssize_t n = read_dents(l);
    uint16_t reclen = 0;
    uint64_t ino = 0;
    if (n > DIRENT_NAME) {
      memcpy(&reclen, l->buf + DIRENT_RECLEN, 2);
      memcpy(&ino, l->buf + DIRENT_INO, 8);
    }
    if (reclen > DIRENT_NAME && reclen <= (size_t)n && ino == l->last_ino) {
      /* Found again: the rest of this read comes next. */
      l->pos = reclen;
      l->len = (size_t)n;
      return true;
    }
  }
  s->st.changed++;
  if (l->restarted || lseek(l->fd, 0, SEEK_SET) == (off_t)-1) return false;
  l->restarted = true;
  l->last_at = l->resume = 0;
  l->last_ino = 0;
  l->pos = l->len = 0;
  return true;
}

/* Takes the parked walk up again; a level that cannot be is given up with
 * all below it, and the walk goes on in its parent. */
static void unpark(tg_inode_scan_t *s) {
  for (unsigned i = 0; i < s->depth; i++) {
    level_t *l = &s->levels[i];
    int fd = reopen_fd(s, i);
    if (fd >= 0) {
      l->fd = fd;
      if (seek_back(s, l)) continue;
    } else if (fd == -1) {
      s->st.changed++;
    } else {
      s->st.open_errors++;
    }
    drop_levels(s, i);
    return;
  }
}

/* The entry's type: from the directory entry, else (file systems that do
 * not say) from fstatat without following a symlink. */
static tg_inode_type_t type_of(int dirfd, const char *name, uint8_t d_type) {
  if (d_type == DT_DIR) return TG_INODE_TYPE_DIRECTORY;
  if (d_type == DT_REG) return TG_INODE_TYPE_FILE;
  if (d_type != DT_UNKNOWN) return TG_INODE_TYPE_UNKNOWN;
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return TG_INODE_TYPE_UNKNOWN;
  return S_ISDIR(st.st_mode)   ? TG_INODE_TYPE_DIRECTORY
         : S_ISREG(st.st_mode) ? TG_INODE_TYPE_FILE
                               : TG_INODE_TYPE_UNKNOWN;
}

/* Visits the next entry of the deepest level (reading more of it when its
 * buffer is used up, closing it at its end). Returns 1 for an entry
 * visited, 0 for none (".", "..", the level's end), -1 when found() ended
 * the walk. */
static int visit_next(tg_inode_scan_t *s) {
  level_t *l = &s->levels[s->depth - 1];
  if (l->pos >= l->len) {
    ssize_t n = read_dents(l);
    if (n <= 0) {
      pop(s);
      return 0;
    }
    l->pos = 0;
    l->len = (size_t)n;
  }
  const uint8_t *d = l->buf + l->pos;
  size_t room = l->len - l->pos;
  uint16_t reclen = 0;
  if (room > DIRENT_NAME) memcpy(&reclen, d + DIRENT_RECLEN, 2);
  if (reclen <= DIRENT_NAME || reclen > room) {
    pop(s); /* not what getdents64 writes: give the directory up */
    return 0;
  }
  l->pos += reclen;
  l->last_at = l->resume;
  memcpy(&l->resume, d + DIRENT_OFF, 8);
  memcpy(&l->last_ino, d + DIRENT_INO, 8);
  const char *name = (const char *)d + DIRENT_NAME;
  size_t name_max = (size_t)reclen - DIRENT_NAME;
  size_t name_len = strnlen(name, name_max);
  if (name_len == 0 || name_len == name_max ||
      (name[0] == '.' && (name_len == 1 || (name_len == 2 && name[1] == '.'))))
    return 0;
  uint64_t ino;
  memcpy(&ino, d + DIRENT_INO, 8);
  /* The entry's path: the directory's, a slash (unless it is "/"), the
   * name. */
  size_t base = l->path_len;
  size_t sep = s->path[base - 1] == '/' ? 0 : 1;
  if (base + sep + name_len >= PATH_MAX) {
    s->st.too_long++;
    return 1;
  }
  if (sep) s->path[base] = '/';
  memcpy(s->path + base + sep, name, name_len);
  size_t len = base + sep + name_len;
  s->path[len] = '\0';
  tg_inode_type_t type = type_of(l->fd, name, d[DIRENT_TYPE]);
  s->st.entries++;
  if (!s->cbs.found(s->cbs.ctx, s->dev, ino, s->path, len, type)) return -1;
  if (type == TG_INODE_TYPE_DIRECTORY &&
      !(s->cbs.skip_dir && s->cbs.skip_dir(s->cbs.ctx, s->path, len)))
    push(s, l->fd, name, len);
  return 1;
}

size_t tg_inode_scan_step(tg_inode_scan_t *s, size_t budget, bool *done) {
  size_t visited = 0;
  *done = false;
  if (is_parked(s)) unpark(s);
  while (visited < budget) {
    if (s->depth == 0) {
      if (s->next_root == s->n_roots) break;
      const root_t *r = &s->roots[s->next_root++];
      size_t n = strlen(r->path);
      memcpy(s->path, r->path, n + 1);
      s->dev = r->dev;
      push(s, AT_FDCWD, r->path, n);
      continue;
    }
    int rv = visit_next(s);
    if (rv < 0) {
      tg_inode_scan_reset(s);
      *done = true;
      return visited + 1;
    }
    visited += (size_t)rv;
  }
  if (s->depth == 0 && s->next_root == s->n_roots) {
    tg_inode_scan_reset(s);
    *done = true;
  } else {
    park(s);
  }
  return visited;
}
