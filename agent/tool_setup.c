/* Logging and signals of the agent's ready tools; see tool_setup.h. */
#include "agent/tool_setup.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

void tg__tool_setup(const char *prog, int log_level, sigset_t *stop_sigs) {
  tg_log_set_prefix(prog);
  tg_log_set_level((tg_log_level_t)log_level);
  signal(SIGPIPE, SIG_IGN);
  sigemptyset(stop_sigs);
  sigaddset(stop_sigs, SIGINT);
  sigaddset(stop_sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, stop_sigs, NULL);
}

/* The agent routes every log line of the process here once it runs: lines
 * of TG_LOG arrive formatted, the agent's own ones bare. */
void tg__tool_agent_log(void *ctx, tg_log_level_t level,
                        const char *msg) {
  const char *prog = ctx;
  bool formatted = strlen(msg) > 24 && msg[4] == '-' && msg[10] == 'T' &&
                   msg[0] >= '0' && msg[0] <= '9';
  if (formatted) {
    fprintf(stderr, "%s\n", msg);
    return;
  }
  static const char *const names[] = {"error", "warn", "info", "debug"};
  fprintf(stderr, "%s %s %s\n", prog,
          names[level <= TG_LOG_DEBUG ? level : 0], msg);
}
