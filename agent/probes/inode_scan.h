/* Walks of directory trees for linux.inode_file_map, a bounded number of
 * entries at a time: the walk stops after a step's budget and picks up
 * where it left off at the next step, so a scan of a large file system
 * is spread over many short sampler ticks.
 *
 * Each root is walked depth first on the device it was queued for: a
 * directory on another device (another mount) is never entered, nor one
 * the skip_dir callback names (a mount point of the same device), nor a
 * symlink (every open is O_NOFOLLOW). During a step the walk holds one
 * directory fd and one TG_INODE_SCAN_BUF buffer per level, at most
 * TG_INODE_SCAN_MAX_DEPTH levels; deeper directories and paths of PATH_MAX
 * bytes or more are counted and left out. Between steps it holds no fd
 * (a file system being scanned can be unmounted): each level is opened
 * again by its name, known again by its inode and device, and read on from
 * where it was left, once its last entry is found there again. Not
 * thread-safe: the sampler thread owns a scan.
 */
#ifndef TRACEGATE_PROBES_INODE_SCAN_H
#define TRACEGATE_PROBES_INODE_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_INODE_SCAN_MAX_DEPTH 64
#define TG_INODE_SCAN_MAX_ROOTS 256
/* getdents64 buffer per level. */
#define TG_INODE_SCAN_BUF 4096

/* InodeFileMap.Entry.Type */
typedef enum tg_inode_type {
  TG_INODE_TYPE_UNKNOWN = 0,
  TG_INODE_TYPE_FILE = 1,
  TG_INODE_TYPE_DIRECTORY = 2,
} tg_inode_type_t;

typedef struct tg_inode_scan_cbs {
  /* An entry of the walk: inode |ino| of device |dev| at |path| (|len|
   * bytes, NUL-terminated, borrowed for the call). Returns false to end
   * the whole walk. */
  bool (*found)(void *ctx, uint64_t dev, uint64_t ino, const char *path,
                size_t len, tg_inode_type_t type);
  /* Optional: true to stay out of directory |path|. */
  bool (*skip_dir)(void *ctx, const char *path, size_t len);
  void *ctx;
} tg_inode_scan_cbs_t;

typedef struct tg_inode_scan_stats {
  uint64_t entries;     /* passed to found() */
  uint64_t dirs;        /* entered */
  uint64_t too_deep;    /* directories below TG_INODE_SCAN_MAX_DEPTH */
  uint64_t too_long;    /* entries whose path would reach PATH_MAX */
  uint64_t other_dev;   /* directories (or roots) on another device */
  uint64_t open_errors; /* directories (or roots) that did not open */
  uint64_t changed;     /* directories found changed between two steps:
                         * read again from their start (entries that
                         * shifted) or left with what lies below them
                         * (gone, moved, shifted twice) */
} tg_inode_scan_stats_t;

typedef struct tg_inode_scan tg_inode_scan_t;

/* |cbs| is copied. Returns 0 or -ENOMEM. */
int tg_inode_scan_new(const tg_inode_scan_cbs_t *cbs, tg_inode_scan_t **out);
/* Closes what the walk holds and frees |s|. NULL is a no-op. */
void tg_inode_scan_free(tg_inode_scan_t *s);

/* Queues directory |path| (absolute, copied) to be walked for the inodes
 * of device |dev| (st_dev). Returns 0, -ENOSPC (TG_INODE_SCAN_MAX_ROOTS
 * queued), -EINVAL (not absolute), -ENAMETOOLONG (PATH_MAX or more) or
 * -ENOMEM. */
int tg_inode_scan_add_root(tg_inode_scan_t *s, const char *path, uint64_t dev);

/* Walks on for up to |budget| entries. Returns the entries visited; sets
 * |*done| once every queued root is walked or found() ended the walk
 * (then the queue is empty and roots may be queued for a new walk). */
size_t tg_inode_scan_step(tg_inode_scan_t *s, size_t budget, bool *done);

/* Abandons the walk: closes its directories and empties the queue. */
void tg_inode_scan_reset(tg_inode_scan_t *s);

/* All told since tg_inode_scan_new. */
const tg_inode_scan_stats_t *tg_inode_scan_stats(const tg_inode_scan_t *s);

#endif /* TRACEGATE_PROBES_INODE_SCAN_H */
