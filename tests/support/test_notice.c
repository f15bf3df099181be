/* Notices in a program's output (test_notice.h). */
#include "test_notice.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "test_proc.h"
#include "test_wait.h"

/* The next line of |text| from |*at| holding |n|'s tag (and |data|):
 * [start, end), or NULL; |*at| moves past it. */
static const char *next_line(const char **at, tg_notice_t n, const char *data,
                             const char **end) {
  const char *tag = tg_notice_tag(n);
  const char *p;
  while ((p = strstr(*at, tag))) {
    const char *start = p;
    while (start > *at && start[-1] != '\n') start--;
    const char *e = strchr(p, '\n');
    if (!e) e = p + strlen(p);
    *at = *e ? e + 1 : e;
    if (data) {
      /* |data| on this line only. */
      const char *d = strstr(start, data);
      if (!d || d + strlen(data) > e) continue;
    }
    *end = e;
    return start;
  }
  return NULL;
}

bool tg_test_notice_line(const char *text, tg_notice_t n, const char *data,
                         char *line, size_t cap) {
  const char *at = text, *end;
  const char *start = next_line(&at, n, data, &end);
  if (!start) return false;
  if (line && cap) snprintf(line, cap, "%.*s", (int)(end - start), start);
  return true;
}

size_t tg_test_notice_count(const char *text, tg_notice_t n, const char *data) {
  size_t k = 0;
  const char *at = text, *end;
  while (next_line(&at, n, data, &end)) k++;
  return k;
}

bool tg_test_notice_last_word(const char *text, tg_notice_t n, char *out,
                              size_t cap) {
  char line[4096];
  if (!tg_test_notice_line(text, n, NULL, line, sizeof(line))) return false;
  const char *w = strrchr(line, ' ');
  snprintf(out, cap, "%s", w ? w + 1 : line);
  return true;
}

/* Whether has(the text of |path|, |arg|) holds (a missing file is
 * empty). */
static bool file_has(const char *path, bool (*has)(const char *, void *),
                     void *arg) {
  static char buf[1 << 20];
  FILE *f = fopen(path, "r");
  size_t got = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
  if (f) fclose(f);
  buf[got] = 0;
  return has(buf, arg);
}

bool tg_test_wait_file_until(const char *path,
                             bool (*has)(const char *text, void *arg),
                             void *arg, int timeout_ms) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  /* The file first (it may not exist yet), then each change of it. */
  if (!tg_test_wait_path(path, timeout_ms)) return false;
  int in = inotify_init1(IN_CLOEXEC);
  if (in < 0) return false;
  bool found = false;
  if (inotify_add_watch(in, path, IN_MODIFY) >= 0) {
    while (!(found = file_has(path, has, arg))) {
      int64_t left = deadline - tg_test_now_ms();
      struct pollfd p = {.fd = in, .events = POLLIN};
      if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
      char ev[4096];
      if (read(in, ev, sizeof(ev)) < 0) break;
    }
  }
  close(in);
  return found || file_has(path, has, arg);
}

typedef struct notice_want {
  tg_notice_t n;
  const char *data;
} notice_want_t;

static bool has_notice(const char *text, void *arg) {
  const notice_want_t *w = arg;
  return tg_test_notice_line(text, w->n, w->data, NULL, 0);
}

bool tg_test_wait_notice(const char *path, tg_notice_t n, const char *data,
                         int timeout_ms) {
  notice_want_t w = {n, data};
  return tg_test_wait_file_until(path, has_notice, &w, timeout_ms);
}
