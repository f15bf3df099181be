/* Logging: one level-checked macro, a fixed prefix, bounded lines.
 *
 * Daemons log to stderr (journald picks it up). Libraries never print: the
 * agent installs a sink callback that forwards to the application, or nothing.
 * The level check is a relaxed load and a branch, so a disabled TG_LOG costs
 * nothing measurable on hot paths (arguments are not evaluated).
 */
#ifndef TRACEGATE_COMMON_LOG_H
#define TRACEGATE_COMMON_LOG_H

#include <stdarg.h>
#include <stdatomic.h>

#include "tracegate/log_level.h"

/* Longest line a sink ever receives, including the prefix; longer messages are
 * truncated with a trailing "...". */
#define TG_LOG_LINE_MAX 1024

/* |line| is NUL-terminated, without trailing newline, owned by the caller and
 * valid only during the call. Sinks may be called from any thread. */
typedef void (*tg_log_sink_fn)(void *ctx, tg_log_level_t level,
                               const char *line);

/* Process-wide threshold; messages above it are skipped. Default: INFO. */
extern _Atomic int tg__log_threshold;

void tg_log_set_level(tg_log_level_t level);
/* Parses "error", "warn", "info", "debug"; returns 0 or -EINVAL. */
int tg_log_parse_level(const char *name, tg_log_level_t *out);
/* |prefix| is copied (at most 31 bytes), e.g. "tracegated". */
void tg_log_set_prefix(const char *prefix);
/* NULL restores the default stderr sink. |ctx| is borrowed until the next
 * call, which waits for the lines being handed to the old sink: once it
 * returns, the old sink is not called again. A sink must not log, nor set
 * the sink. */
void tg_log_set_sink(tg_log_sink_fn sink, void *ctx);

void tg__log(tg_log_level_t level, const char *file, int line,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define TG_LOG(level, ...)                                             \
  do {                                                                 \
    if ((int)(level) <=                                                \
        atomic_load_explicit(&tg__log_threshold, memory_order_relaxed)) \
      tg__log((level), __FILE__, __LINE__, __VA_ARGS__);               \
  } while (0)

#define TG_ERROR(...) TG_LOG(TG_LOG_ERROR, __VA_ARGS__)
#define TG_WARN(...) TG_LOG(TG_LOG_WARN, __VA_ARGS__)
#define TG_INFO(...) TG_LOG(TG_LOG_INFO, __VA_ARGS__)
#define TG_DEBUG(...) TG_LOG(TG_LOG_DEBUG, __VA_ARGS__)

#endif /* TRACEGATE_COMMON_LOG_H */
