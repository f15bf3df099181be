/* The logger: formats one bounded line and hands it to the sink. */
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

_Atomic int tg__log_threshold = TG_LOG_INFO;

static char log_prefix[32] = "tracegate";
/* The sink and its ctx change together under the write lock; a line is
 * handed over under the read lock, so once tg_log_set_sink returns no
 * thread is still in the old sink (its ctx may go). */
static pthread_rwlock_t sink_lock = PTHREAD_RWLOCK_INITIALIZER;
static tg_log_sink_fn log_sink;
static void *log_sink_ctx;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void tg_log_set_level(tg_log_level_t level) {
  atomic_store_explicit(&tg__log_threshold, (int)level, memory_order_relaxed);
}

int tg_log_parse_level(const char *name, tg_log_level_t *out) {
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(name, level_names[i]) == 0) {
      *out = (tg_log_level_t)i;
      return 0;
    }
  }
  return -EINVAL;
}

void tg_log_set_prefix(const char *prefix) {
  snprintf(log_prefix, sizeof(log_prefix), "%s", prefix);
}

void tg_log_set_sink(tg_log_sink_fn sink, void *ctx) {
  pthread_rwlock_wrlock(&sink_lock);
  log_sink = sink;
  log_sink_ctx = ctx;
  pthread_rwlock_unlock(&sink_lock);
}

void tg__log(tg_log_level_t level, const char *file, int line, const char *fmt,
             ...) {
  char buf[TG_LOG_LINE_MAX];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  int lvl = (int)level;
  if (lvl < 0 || lvl > 3) lvl = 0;

  int n = snprintf(buf, sizeof(buf),
                   "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s %s:%d: ",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                   tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_prefix,
                   level_names[lvl], base, line);
  if (n < 0) return;
  if ((size_t)n < sizeof(buf)) {
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    if (m >= 0 && (size_t)(n + m) >= sizeof(buf))
      memcpy(buf + sizeof(buf) - 4, "...", 4);
  }
  /* No embedded newlines: one event, one line (untrusted strings end up in
   * log messages; a newline must not forge a second entry). */
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';

  pthread_rwlock_rdlock(&sink_lock);
  if (log_sink) log_sink(log_sink_ctx, level, buf);
  else fprintf(stderr, "%s\n", buf);
  pthread_rwlock_unlock(&sink_lock);
}
