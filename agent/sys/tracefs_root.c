/* tracefs's mount point; see tracefs_root.h. */
#include "agent/sys/tracefs_root.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char *const candidates[] = {TG_TRACEFS_MOUNT,
                                         TG_TRACEFS_DEBUGFS_MOUNT};

/* 0 when |dir|/events is a directory, else stat's -errno (-ENOTDIR for
 * something else there). */
static int events_dir(const char *dir) {
  char p[256];
  int n = snprintf(p, sizeof(p), "%s/events", dir);
  if (n < 0 || (size_t)n >= sizeof(p)) return -ENAMETOOLONG;
  struct stat st;
  if (stat(p, &st) != 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

bool tg_tracefs_is_root(const char *dir) { return events_dir(dir) == 0; }

/* Whether tracefs is writable is left to the opens and the mkdir that
 * follow: access(2) judges the real uid and ignores capabilities, so it
 * would refuse a producer that holds CAP_DAC_OVERRIDE (its systemd unit). */
int tg_tracefs_mounted(char *root, size_t cap) {
  int rv = -ENOENT;
  for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
    int e = events_dir(candidates[i]);
    if (e == 0) {
      if (strlen(candidates[i]) >= cap) return -ENAMETOOLONG;
      strcpy(root, candidates[i]);
      return 0;
    }
    if (e == -EACCES || e == -EPERM) rv = -EACCES;
  }
  return rv;
}
