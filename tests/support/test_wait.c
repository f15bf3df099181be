/* Waits on events with deadlines (test_wait.h). */
#include "test_wait.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_proc.h"

/* Polls |fd| for input until |deadline|: 1 ready, 0 timeout, -errno. */
static int wait_readable(int fd, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - tg_test_now_ms();
    if (left < 0) left = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rv = poll(&p, 1, (int)left);
    if (rv >= 0) return rv;
    if (errno != EINTR) return -errno;
  }
}

/* Finds a complete line holding |needle| in buf[0..n), or, with |at_eof|,
 * the unterminated rest too; copies it to |line|. */
static bool find_line(const char *buf, size_t n, bool at_eof,
                      const char *needle, char *line, size_t cap) {
  for (size_t start = 0; start < n;) {
    const char *nl = memchr(buf + start, '\n', n - start);
    if (!nl && !at_eof) return false;
    size_t end = nl ? (size_t)(nl - buf) : n;
    char one[1024];
    size_t len = end - start < sizeof(one) - 1 ? end - start : sizeof(one) - 1;
    memcpy(one, buf + start, len);
    one[len] = '\0';
    if (strstr(one, needle)) {
      if (line && cap) snprintf(line, cap, "%s", one);
      return true;
    }
    start = end + 1;
  }
  return false;
}

int tg_test_wait_line(int fd, const char *needle, int timeout_ms, char *line,
                      size_t cap) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  char buf[8192];
  size_t n = 0;
  for (;;) {
    int rv = wait_readable(fd, deadline);
    if (rv <= 0) return rv;
    if (n == sizeof(buf)) n = 0; /* a line this long is not what we wait for */
    ssize_t got = read(fd, buf + n, sizeof(buf) - n);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -errno;
    }
    n += (size_t)got;
    if (find_line(buf, n, got == 0, needle, line, cap)) return 1;
    if (got == 0) return 0;
  }
}

/* Drains pending inotify events (their content does not matter: every
 * wake-up re-checks the condition). */
static void drain(int in) {
  char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  while (read(in, ev, sizeof(ev)) > 0) {
  }
}

static bool file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "re");
  if (!f) return false;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  bool found = false;
  for (size_t got; buf && (got = fread(buf + len, 1, cap - 1 - len, f)) > 0;) {
    len += got;
    if (cap - 1 - len == 0) {
      char *grown = realloc(buf, cap *= 2);
      if (!grown) break;
      buf = grown;
    }
  }
  if (buf) {
    buf[len] = '\0';
    found = strstr(buf, needle) != NULL;
  }
  free(buf);
  fclose(f);
  return found;
}

/* Waits until check(path, needle) with inotify watches on |path|'s
 * directory (creation, renames) and on |path| itself once it exists
 * (writes). The watches are in place before each look, so no change slips
 * between the look and the wait. */
static bool wait_for(const char *path, const char *needle, int timeout_ms,
                     bool (*check)(const char *, const char *)) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  char dir[PATH_MAX];
  snprintf(dir, sizeof(dir), "%s", path);
  int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (in >= 0)
    inotify_add_watch(in, dirname(dir),
                      IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY);
  bool file_watched = false;
  bool ok = false;
  for (;;) {
    if (in >= 0 && !file_watched)
      file_watched =
          inotify_add_watch(in, path, IN_MODIFY | IN_CLOSE_WRITE) >= 0;
    if (check(path, needle)) {
      ok = true;
      break;
    }
    if (in < 0 || wait_readable(in, deadline) <= 0) break;
    drain(in);
  }
  if (in >= 0) close(in);
  return ok;
}

static bool exists(const char *path, const char *unused) {
  (void)unused;
  struct stat st;
  return lstat(path, &st) == 0;
}

bool tg_test_wait_path(const char *path, int timeout_ms) {
  return wait_for(path, NULL, timeout_ms, exists);
}

bool tg_test_wait_file_text(const char *path, const char *needle,
                            int timeout_ms) {
  return wait_for(path, needle, timeout_ms, file_has);
}

static void on_deadline(uv_timer_t *t) { *(bool *)t->data = true; }

bool tg_test_run_loop_until(uv_loop_t *loop, bool (*cond)(void *), void *arg,
                            int timeout_ms) {
  if (cond(arg)) return true;
  bool expired = false;
  uv_timer_t deadline;
  uv_update_time(loop); /* the deadline counts from now, not the last tick */
  uv_timer_init(loop, &deadline);
  deadline.data = &expired;
  uv_timer_start(&deadline, on_deadline, (uint64_t)timeout_ms, 0);
  while (!cond(arg) && !expired) uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&deadline, NULL);
  uv_run(loop, UV_RUN_NOWAIT); /* the timer's close callback */
  return cond(arg);
}
