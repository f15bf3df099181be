/* Audit lines to a file or to the log. */
#include "relay/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define AUDIT_LINE_MAX 1024
#define WORD_MAX 256

struct tg_relay_audit {
  char *path; /* NULL: the log or syslog */
  int fd;
  bool syslog;
};

static int open_file(const char *path, char *err, size_t errlen) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    int e = errno;
    snprintf(err, errlen, "%s: %s", path, strerror(e));
    return -e;
  }
  return fd;
}

int tg_relay_audit_open(const char *path, tg_relay_audit_t **out, char *err,
                        size_t errlen) {
  *out = NULL;
  tg_relay_audit_t *a = calloc(1, sizeof(*a));
  if (!a) return -ENOMEM;
  a->fd = -1;
  if (path) {
    a->path = strdup(path);
    if (!a->path) {
      free(a);
      return -ENOMEM;
    }
    a->fd = open_file(path, err, errlen);
    if (a->fd < 0) {
      int rv = a->fd;
      free(a->path);
      free(a);
      return rv;
    }
  }
  *out = a;
  return 0;
}

int tg_relay_audit_open_syslog(const char *ident, tg_relay_audit_t **out) {
  *out = NULL;
  tg_relay_audit_t *a = calloc(1, sizeof(*a));
  if (!a) return -ENOMEM;
  a->fd = -1;
  a->syslog = true;
  /* LOG_NDELAY: connect now, before a sandbox could forbid it; no
   * LOG_PERROR, which would copy every line to stderr. */
  openlog(ident, LOG_PID | LOG_NDELAY, LOG_AUTHPRIV);
  *out = a;
  return 0;
}

int tg_relay_audit_reopen(tg_relay_audit_t *a, char *err, size_t errlen) {
  if (!a->path) return 0;
  int fd = open_file(a->path, err, errlen);
  if (fd < 0) return fd;
  close(a->fd);
  a->fd = fd;
  return 0;
}

void tg_relay_audit_close(tg_relay_audit_t *a) {
  if (!a) return;
  if (a->fd >= 0) close(a->fd);
  if (a->syslog) closelog();
  free(a->path);
  free(a);
}

/* One field: printable, no blanks, bounded; "-" when empty. */
static void word(char *dst, const char *src) {
  size_t i = 0;
  for (; src && src[i] && i < WORD_MAX - 1; i++) {
    unsigned char c = (unsigned char)src[i];
    dst[i] = c > 0x20 && c < 0x7f ? (char)c : '?';
  }
  dst[i] = 0;
  if (i == 0) snprintf(dst, WORD_MAX, "-");
}

void tg_relay_audit(tg_relay_audit_t *a, const char *identity,
                    const char *address, const char *what, const char *verdict,
                    tg_notice_t code, const char *fmt, ...) {
  const char *tag = tg_notice_tag(code);
  char id[WORD_MAX], addr[WORD_MAX], w[WORD_MAX], vd[WORD_MAX];
  word(id, identity);
  word(addr, address);
  word(w, what);
  word(vd, verdict);
  char reason[AUDIT_LINE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof(reason), fmt, ap);
  va_end(ap);
  for (char *p = reason; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f) *p = ' ';
  if (a && a->syslog) {
    syslog(LOG_NOTICE, "audit: %s %s %s %s %s %s", id, addr, w, vd, tag,
           reason);
    return;
  }
  if (!a || a->fd < 0) {
    TG_INFO("audit: %s %s %s %s %s %s", id, addr, w, vd, tag, reason);
    return;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char line[AUDIT_LINE_MAX + 6 * WORD_MAX];
  int n = snprintf(line, sizeof(line),
                   "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s %s %s %s %s\n",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                   tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, id, addr, w, vd,
                   tag, reason);
  if (n < 0) return;
  size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
  line[len - 1] = '\n';
  /* One write per line: O_APPEND keeps lines whole among writers. */
  if (write(a->fd, line, len) < 0)
    TG_WARN("audit: cannot write to %s: %s", a->path, strerror(errno));
}

/* --- rate limit ------------------------------------------------------------ */

bool tg_relay_audit_limit_take(tg_relay_audit_limit_t *l,
                               const tg_relay_audit_budget_t *budget,
                               uint64_t now_ms, uint64_t *suppressed_before) {
  return tg_line_limit_take(l, now_ms, budget->burst, budget->per_s,
                            suppressed_before);
}

uint64_t tg_relay_audit_limit_flush(tg_relay_audit_limit_t *l) {
  return tg_line_limit_flush(l);
}
