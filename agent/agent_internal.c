/* What every file of the agent's thread uses, below all of them: the one
 * struct tg__agent (each part written by the file agent_internal.h names),
 * the log line to the app's sink, and the wake-up of the agent's thread.
 *
 * It calls no other file of the agent, so that connection.c, commands.c,
 * commit.c, clock.c and triggers.c can log and wake without calling back
 * into agent.c, which drives them (docs/architecture.md).
 */
#include <stdarg.h>
#include <stdio.h>

#include "agent/agent_internal.h"
#include "agent/agent_log.h"

tg__agent_t tg__agent = {
    .readiness = {.mu = PTHREAD_MUTEX_INITIALIZER,
                  .cv = PTHREAD_COND_INITIALIZER},
};

void tg__agent_log(tg_log_level_t level, const char *fmt, ...) {
  const tg_agent_options_t *o = &tg__agent.cfg.opts;
  tg_agent_log_fn fn = o->log;
  if (!fn || level > o->log_level) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  fn(o->log_ctx, level, line);
}

void tg__agent_wake(void *ctx) {
  (void)ctx;
  /* uv_async_send coalesces: a pending wake costs an atomic check. */
  if (__atomic_load_n(&tg__agent.th.running, __ATOMIC_ACQUIRE))
    uv_async_send(&tg__agent.th.async);
}
