/* /proc/<pid>/mountinfo: which device is mounted where, for
 * linux.inode_file_map (the mount points of each device it resolves
 * inodes on, and the mounts its scans must not cross into).
 *
 * A line is
 *   <id> <parent> <major>:<minor> <root> <mount point> <options>
 *   [<optional field>...] - <fs type> <source> <super options>
 * with blanks, tabs, newlines and backslashes in paths escaped as \ooo
 * (octal). The parser does no I/O and takes any bytes (the text is the
 * kernel's, or a fuzzer's): every line is checked field by field, a line
 * that does not parse is skipped and counted, and the table is bounded
 * (TG_MOUNTINFO_MAX mounts, paths below PATH_MAX).
 */
#ifndef TRACEGATE_PROBES_MOUNTINFO_H
#define TRACEGATE_PROBES_MOUNTINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Mounts kept; the rest of a longer table is counted in |skipped|. */
#define TG_MOUNTINFO_MAX 8192
/* The file is read up to this size (a container host has thousands of
 * mounts of ~150 bytes each); the lines of a longer one past its last
 * whole line in it count as one skipped. */
#define TG_MOUNTINFO_FILE_MAX (4u << 20)

typedef struct tg_mount {
  uint64_t dev; /* makedev(major, minor): stat(2)'s st_dev */
  uint32_t id, parent;
  const char *point; /* unescaped, into the table's names */
  const char *root;  /* the directory of the file system mounted there */
  const char *fstype;
  uint32_t point_len;
} tg_mount_t;

typedef struct tg_mountinfo {
  tg_mount_t *v;
  size_t n;
  char *names;      /* every mount's strings, NUL-terminated */
  size_t bad_lines; /* lines that did not parse */
  size_t skipped;   /* good lines past TG_MOUNTINFO_MAX (or the file cap) */
} tg_mountinfo_t;

/* Parses |len| bytes of |text| into |out| (replacing what it held; a
 * zeroed table is a valid empty one). Returns the mounts kept, or
 * -ENOMEM (then |out| is empty). */
int tg_mountinfo_parse(tg_mountinfo_t *out, const char *text, size_t len);

/* Reads and parses |path| (e.g. "/proc/self/mountinfo") into |out|,
 * which is left empty when that fails. Returns the mounts kept (of the
 * first TG_MOUNTINFO_FILE_MAX bytes at most), or -errno. */
int tg_mountinfo_read(tg_mountinfo_t *out, const char *path);

void tg_mountinfo_free(tg_mountinfo_t *mi);

/* Whether |path| (|len| bytes, no NUL needed) is a mount point of |mi|.
 * Needs tg_mountinfo_sort first. */
bool tg_mountinfo_is_point(const tg_mountinfo_t *mi, const char *path,
                           size_t len);

/* Orders the mounts by mount point, for tg_mountinfo_is_point. */
void tg_mountinfo_sort(tg_mountinfo_t *mi);

#endif /* TRACEGATE_PROBES_MOUNTINFO_H */
