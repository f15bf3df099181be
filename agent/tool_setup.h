/* What the agent's ready tools (tracegate-probes, tracegate-emit) set up
 * alike before their own work: flags with --help, logging, signals.
 * Process-wide; call from main() before starting any thread. */
#ifndef TRACEGATE_AGENT_TOOL_SETUP_H
#define TRACEGATE_AGENT_TOOL_SETUP_H

#include <signal.h>
#include <stddef.h>

#include "tracegate/agent.h"
#include "common/flags.h"

/* Parses argv with |flags|; on --help prints the usage and then |about|
 * to stdout. Returns 0 to go on, 1 after --help (exit 0), negative after
 * an error was printed (exit 2). */
int tg__tool_parse_flags(const char *prog, const tg_flag_t *flags, size_t n,
                         const char *about, int argc, char **argv);

/* Logs as |prog| at |log_level|, ignores SIGPIPE and blocks SIGINT and
 * SIGTERM, which are returned in |stop_sigs| for sigwait(): threads
 * started later inherit the mask, so only that wait sees them. */
void tg__tool_setup(const char *prog, int log_level, sigset_t *stop_sigs);

/* A tg_agent_log_fn printing to stderr; |ctx| is the program name. */
void tg__tool_agent_log(void *ctx, tg_log_level_t level,
                        const char *msg);

#endif /* TRACEGATE_AGENT_TOOL_SETUP_H */
