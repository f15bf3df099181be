/* What the agent's ready tools (tracegate-probes, tracegate-perf,
 * tracegate-emit) set up alike before their own work, after their flags
 * (tg_prog_flags): logging, signals; and the whole life of the two
 * long-running producers (tg__producer_main).
 * Process-wide; call from main() before starting any thread. */
#ifndef TRACEGATE_AGENT_TOOL_SETUP_H
#define TRACEGATE_AGENT_TOOL_SETUP_H

#include <signal.h>
#include <stddef.h>

#include "common/flags.h"
#include "tracegate/agent.h"

/* Logs as |prog| at |log_level|, ignores SIGPIPE and blocks SIGINT and
 * SIGTERM, which are returned in |stop_sigs| for sigwait(): threads
 * started later inherit the mask, so only that wait sees them. */
void tg__tool_setup(const char *prog, int log_level, sigset_t *stop_sigs);

/* A tg_agent_log_fn printing to stderr; |ctx| is the program name. */
void tg__tool_agent_log(void *ctx, tg_log_level_t level,
                        const char *msg);

/* A long-running producer program: its data sources, set up before the
 * agent connects and freed after it shut down. */
typedef struct tg_producer_tool {
  const tg_prog_t *prog; /* name, synopsis, --help's text */
  /* The shared memory size asked of the service (the program's write
   * bursts between two commits must fit). */
  size_t smb_size_hint;
  /* Registers the data sources; 0 or a negative errno-style code, after
   * which nothing of them is left (|stop| is not called). */
  int (*start)(void *ctx);
  /* Frees what |start| set up; runs after tg_agent_shutdown() stopped
   * every instance, or when the agent did not start. */
  void (*stop)(void *ctx);
  void *ctx;
} tg_producer_tool_t;

/* The main() of tracegate-probes and tracegate-perf: the flags every
 * producer takes (--socket, --name, --log-level, --help), logging and
 * signals, |tool|'s data sources, the agent (commits at the end of the
 * data sources' rounds, not on a timer), then a wait for SIGINT/SIGTERM
 * and a clean stop. Returns the process's exit status: 0, 1 when
 * something could not start (logged with why), or tg_prog_flags' status
 * for --help and bad flags. */
int tg__producer_main(const tg_producer_tool_t *tool, int argc, char **argv);

#endif /* TRACEGATE_AGENT_TOOL_SETUP_H */
