/* What the agent's ready tools (tracegate-probes, tracegate-emit) set up
 * alike before their own work, after their flags (tg_prog_flags):
 * logging, signals.
 * Process-wide; call from main() before starting any thread. */
#ifndef TRACEGATE_AGENT_TOOL_SETUP_H
#define TRACEGATE_AGENT_TOOL_SETUP_H

#include <signal.h>
#include <stddef.h>

#include "tracegate/agent.h"

/* Logs as |prog| at |log_level|, ignores SIGPIPE and blocks SIGINT and
 * SIGTERM, which are returned in |stop_sigs| for sigwait(): threads
 * started later inherit the mask, so only that wait sees them. */
void tg__tool_setup(const char *prog, int log_level, sigset_t *stop_sigs);

/* A tg_agent_log_fn printing to stderr; |ctx| is the program name. */
void tg__tool_agent_log(void *ctx, tg_log_level_t level,
                        const char *msg);

#endif /* TRACEGATE_AGENT_TOOL_SETUP_H */
