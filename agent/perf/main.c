/* tracegate-perf: the CPU profiler producer. Registers "linux.perf" with
 * the local tracing service and samples the CPUs through perf_event_open
 * for every session that enables it. A producer of its own, as Perfetto's
 * traced_perf is: it needs privileges (CAP_PERFMON, CAP_SYS_PTRACE,
 * CAP_SYSLOG) the other producers must not have. Wires flags, signals and
 * the agent together; the data source lives in perf_ds.c. */
#include <signal.h>
#include <string.h>

#include "agent/perf/perf_ds.h"
#include "agent/tool_setup.h"
#include "common/flags.h"
#include "common/log.h"
#include "ipc/channel.h"
#include "tracegate/agent.h"
#include "tracegate/error.h"

#define PROG "tracegate-perf"

static const char about[] =
    "The CPU profiler producer: data source linux.perf (Perfetto's "
    "PerfEventConfig):\nsamples every CPU with a perf event (cpu-clock by "
    "default), with kernel and\nuser callstacks (frame pointers, or DWARF "
    "unwinding in builds with libdw),\nnamed on the host from "
    ".symtab/.dynsym.\nNeeds CAP_PERFMON (CAP_SYS_ADMIN before "
    "Linux 5.8), CAP_SYS_PTRACE and\nCAP_SYSLOG, or root. SIGINT/SIGTERM stop "
    "it cleanly.\n";

static const tg_prog_t prog = {
    .name = PROG, .synopsis = "[options]", .about = about};

int main(int argc, char **argv) {
  const char *socket_path = tg_ipc_default_socket(true);
  const char *name = PROG;
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
  if (tg_prog_flags(&prog, flags, sizeof(flags) / sizeof(flags[0]), argc, argv,
                    NULL, 0, NULL, &rv))
    return rv;
  /* Before any thread starts: the signals reach only sigwait() below. */
  sigset_t sigs;
  tg__tool_setup(PROG, log_level, &sigs);

  tg_perf_ds_t *perf = NULL;
  if ((rv = tg_perf_ds_new(&perf)) < 0) {
    TG_ERROR("cannot set up linux.perf: %s", tg_strerror(rv));
    return 1;
  }
  tg_agent_options_t opts = {
      .socket_path = socket_path,
      .producer_name = name,
      /* A read round of every CPU's ring writes up to a few hundred
       * samples with their interned frames. */
      .smb_size_hint = 4u << 20,
      /* The data source commits at the end of its rounds
       * (tg_ds_flush_thread): the agent's tick need not wake an idle
       * host 100 times a second. */
      .commit_period_ms = 1000,
      .log = tg__tool_agent_log,
      .log_ctx = (void *)PROG,
      .log_level = (tg_log_level_t)log_level,
  };
  (void)tg_agent_set_commit_on_flush(true);
  if ((rv = tg_agent_init(&opts)) < 0) {
    TG_ERROR("cannot start the agent: %s", tg_strerror(rv));
    tg_perf_ds_free(perf);
    return 1;
  }
  TG_INFO("producer \"%s\" on %s", name, socket_path);

  int sig = 0;
  while (sigwait(&sigs, &sig) != 0) {
  }
  TG_INFO("%s: stopping", strsignal(sig));
  tg_agent_shutdown(); /* runs on_stop of every instance */
  tg_perf_ds_free(perf);
  return 0;
}
