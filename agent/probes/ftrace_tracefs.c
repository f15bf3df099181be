/* tracefs control; see ftrace_tracefs.h. */
#include "agent/probes/ftrace_tracefs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/sys/proc_read.h"
#include "agent/sys/tracefs_root.h"

static _Atomic unsigned instance_counter;

int tg_tracefs_find_mounted(char *root) {
  return tg_tracefs_mounted(root, TG_TRACEFS_PATH_MAX);
}

int tg_tracefs_find(char *root) {
  int rv = tg_tracefs_find_mounted(root);
  if (rv != -ENOENT) return rv;
  if (mount("nodev", TG_TRACEFS_MOUNT, "tracefs", 0, NULL) != 0) {
    int err = errno;
    return err == EPERM || err == EACCES ? -err : -ENOENT;
  }
  if (!tg_tracefs_is_root(TG_TRACEFS_MOUNT)) return -ENOENT;
  snprintf(root, TG_TRACEFS_PATH_MAX, "%s", TG_TRACEFS_MOUNT);
  return 0;
}

int tg_tracefs_write(const char *dir, const char *file, const char *value) {
  char p[TG_TRACEFS_PATH_MAX * 2];
  snprintf(p, sizeof(p), "%s/%s", dir, file);
  int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t n = strlen(value);
  ssize_t w = write(fd, value, n);
  int err = w < 0 ? -errno : (size_t)w == n ? 0 : -EIO;
  close(fd);
  return err;
}

long tg_tracefs_read(const char *dir, const char *file, char *buf, size_t cap) {
  char p[TG_TRACEFS_PATH_MAX * 2];
  snprintf(p, sizeof(p), "%s/%s", dir, file);
  return tg_proc_read_head(p, buf, cap);
}

int tg_tracefs_instance_create(const char *root, char *dir) {
  unsigned n = atomic_fetch_add_explicit(&instance_counter, 1,
                                         memory_order_relaxed);
  snprintf(dir, TG_TRACEFS_PATH_MAX, "%s/instances/" TG_TRACEFS_INSTANCE_PREFIX
           "%d-%u", root, (int)getpid(), n);
  if (mkdir(dir, 0700) != 0) return -errno;
  return 0;
}

int tg_tracefs_instance_remove(const char *dir) {
  /* Best effort before the rmdir, which is what puts things back. */
  tg_tracefs_write(dir, "tracing_on", "0");
  tg_tracefs_write(dir, "events/enable", "0");
  if (rmdir(dir) != 0) return -errno;
  return 0;
}

bool tg_tracefs_instance_is_stale(const char *name) {
  size_t pl = strlen(TG_TRACEFS_INSTANCE_PREFIX);
  if (strncmp(name, TG_TRACEFS_INSTANCE_PREFIX, pl) != 0) return false;
  char *end;
  errno = 0;
  long pid = strtol(name + pl, &end, 10);
  if (errno || end == name + pl || *end != '-' || pid <= 0 || pid > INT32_MAX)
    return false;
  if ((pid_t)pid == getpid()) return false;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int tg_tracefs_remove_stale(const char *root) {
  char p[TG_TRACEFS_PATH_MAX];
  snprintf(p, sizeof(p), "%s/instances", root);
  DIR *d = opendir(p);
  if (!d) return -errno;
  int removed = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!tg_tracefs_instance_is_stale(de->d_name)) continue;
    char dir[TG_TRACEFS_PATH_MAX * 2];
    snprintf(dir, sizeof(dir), "%s/%s", p, de->d_name);
    if (tg_tracefs_instance_remove(dir) == 0) removed++;
  }
  closedir(d);
  return removed;
}

void tg_ftrace_cpu_stats_parse(const char *text, size_t len,
                               tg_ftrace_cpu_stats_t *out) {
  memset(out, 0, sizeof(*out));
  static const struct {
    const char *key;
    size_t off;
    bool is_double;
  } keys[] = {
      {"entries:", offsetof(tg_ftrace_cpu_stats_t, entries), false},
      {"overrun:", offsetof(tg_ftrace_cpu_stats_t, overrun), false},
      {"commit overrun:", offsetof(tg_ftrace_cpu_stats_t, commit_overrun), false},
      {"bytes:", offsetof(tg_ftrace_cpu_stats_t, bytes), false},
      {"oldest event ts:", offsetof(tg_ftrace_cpu_stats_t, oldest_event_ts), true},
      {"now ts:", offsetof(tg_ftrace_cpu_stats_t, now_ts), true},
      {"dropped events:", offsetof(tg_ftrace_cpu_stats_t, dropped_events), false},
      {"read events:", offsetof(tg_ftrace_cpu_stats_t, read_events), false},
  };
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    char line[96];
    size_t n = (size_t)(le - p);
    if (n >= sizeof(line)) n = sizeof(line) - 1;
    memcpy(line, p, n);
    line[n] = 0;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
      size_t kl = strlen(keys[i].key);
      if (strncmp(line, keys[i].key, kl) != 0) continue;
      char *v = (char *)out + keys[i].off;
      if (keys[i].is_double) {
        double d = strtod(line + kl, NULL);
        memcpy(v, &d, sizeof(d));
      } else {
        unsigned long long u = strtoull(line + kl, NULL, 10);
        uint64_t x = u;
        memcpy(v, &x, sizeof(x));
      }
      break;
    }
    p = nl ? nl + 1 : end;
  }
}

static bool valid_name(const char *s) {
  if (!*s || strlen(s) >= 64 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
    return false;
  return strchr(s, '/') == NULL;
}

/* stat(2), not access(2), for the reason agent/sys/tracefs_root.c gives:
 * an event that exists but cannot be read fails later, where it is read,
 * with the errno that says why. */
static bool is_event_dir(const char *events, const char *group,
                         const char *name) {
  char p[TG_TRACEFS_PATH_MAX * 2];
  snprintf(p, sizeof(p), "%s/%s/%s/format", events, group, name);
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Every event of |group| (or those called |only|), in directory order. */
static int each_in_group(const char *events, const char *group, const char *only,
                         tg_tracefs_event_fn fn, void *ctx) {
  if (only) {
    if (!is_event_dir(events, group, only)) return 0;
    int rv = fn(ctx, group, only);
    return rv < 0 ? rv : 1;
  }
  char p[TG_TRACEFS_PATH_MAX * 2];
  snprintf(p, sizeof(p), "%s/%s", events, group);
  DIR *d = opendir(p);
  if (!d) return 0;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!valid_name(de->d_name) || !is_event_dir(events, group, de->d_name))
      continue;
    int rv = fn(ctx, group, de->d_name);
    if (rv < 0) {
      closedir(d);
      return rv;
    }
    n++;
  }
  closedir(d);
  return n;
}

int tg_tracefs_resolve_events(const char *root, const char *spec,
                              tg_tracefs_event_fn fn, void *ctx) {
  char events[TG_TRACEFS_PATH_MAX];
  snprintf(events, sizeof(events), "%s/events", root);
  char group[64], name[64];
  const char *slash = strchr(spec, '/');
  if (slash) {
    size_t gl = (size_t)(slash - spec);
    if (gl >= sizeof(group) || strlen(slash + 1) >= sizeof(name)) return 0;
    memcpy(group, spec, gl);
    group[gl] = 0;
    snprintf(name, sizeof(name), "%s", slash + 1);
    if (!valid_name(group)) return 0;
    if (strcmp(name, "*") == 0) return each_in_group(events, group, NULL, fn, ctx);
    return valid_name(name) ? each_in_group(events, group, name, fn, ctx) : 0;
  }
  if (!valid_name(spec)) return 0;
  DIR *d = opendir(events);
  if (!d) return -errno;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!valid_name(de->d_name)) continue;
    int rv = each_in_group(events, de->d_name, spec, fn, ctx);
    if (rv < 0) {
      closedir(d);
      return rv;
    }
    n += rv;
  }
  closedir(d);
  return n;
}
