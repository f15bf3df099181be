/* Logging, signals and the main() of the agent's ready tools; see
 * tool_setup.h. */
#include "agent/tool_setup.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "ipc/channel.h"
#include "tracegate/error.h"

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

int tg__producer_main(const tg_producer_tool_t *tool, int argc, char **argv) {
  const char *prog = tool->prog->name;
  const char *socket_path = tg_ipc_default_socket(true);
  const char *name = prog;
  int log_level = TG_LOG_INFO;
  const tg_flag_t flags[] = {
      {"socket", TG_FLAG_STRING, &socket_path, "PATH",
       "producer socket of the service: a path or @abstract name", 0, 0},
      {"name", TG_FLAG_STRING, &name, "NAME",
       "producer name shown by the service", 0, 0},
      {"log-level", TG_FLAG_LOG_LEVEL, &log_level, "LEVEL",
       "error, warn, info or debug", 0, 0},
  };
  int rv;
  if (tg_prog_flags(tool->prog, flags, sizeof(flags) / sizeof(flags[0]), argc,
                    argv, NULL, 0, NULL, &rv))
    return rv;
  /* Before any thread starts: the signals reach only sigwait() below. */
  sigset_t sigs;
  tg__tool_setup(prog, log_level, &sigs);
  if ((rv = tool->start(tool->ctx)) < 0) {
    TG_ERROR("cannot set up the data sources: %s", tg_strerror(rv));
    return 1;
  }
  tg_agent_options_t opts = {
      .socket_path = socket_path,
      .producer_name = name,
      .smb_size_hint = tool->smb_size_hint,
      /* Every data source commits at the end of each of its rounds
       * (tg_ds_flush_thread): the agent's own tick only takes back idle
       * chunks, which these writers never leave behind, so it need not
       * wake an idle host 100 times a second. */
      .commit_period_ms = 1000,
      .log = tg__tool_agent_log,
      .log_ctx = (void *)prog,
      .log_level = (tg_log_level_t)log_level,
  };
  /* Nor once a second: only after a round flushed something. The agent
   * does not run yet, so this cannot fail. */
  (void)tg_agent_set_commit_on_flush(true);
  if ((rv = tg_agent_init(&opts)) < 0) {
    TG_ERROR("cannot start the agent: %s", tg_strerror(rv));
    tool->stop(tool->ctx);
    return 1;
  }
  TG_INFO("producer \"%s\" on %s", name, socket_path);
  int sig = 0;
  while (sigwait(&sigs, &sig) != 0) {
  }
  TG_INFO("%s: stopping", strsignal(sig));
  tg_agent_shutdown(); /* runs on_stop of every instance */
  tool->stop(tool->ctx);
  return 0;
}
