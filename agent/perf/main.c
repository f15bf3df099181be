/* tracegate-perf: the CPU profiler producer. Registers "linux.perf" with
 * the local tracing service and samples the CPUs through perf_event_open
 * for every session that enables it. A producer of its own, as Perfetto's
 * traced_perf is: it needs privileges (CAP_PERFMON, CAP_SYS_PTRACE,
 * CAP_SYSLOG) the other producers must not have. The program is
 * tg__producer_main (agent/tool_setup.h) around the data source of
 * perf_ds.c. */
#include <errno.h>

#include "agent/perf/perf_confine.h"
#include "agent/perf/perf_ds.h"
#include "agent/tool_setup.h"
#include "common/log.h"
#include "common/notice.h"
#include "tracegate/error.h"

static const char about[] =
    "The CPU profiler producer: data source linux.perf (Perfetto's "
    "PerfEventConfig):\nsamples every CPU with a perf event (cpu-clock by "
    "default), with kernel and\nuser callstacks (frame pointers, or DWARF "
    "unwinding in builds with libdw),\nnamed on the host from "
    ".symtab/.dynsym.\nNeeds CAP_PERFMON (CAP_SYS_ADMIN before "
    "Linux 5.8), CAP_SYS_PTRACE and\nCAP_SYSLOG, or root. SIGINT/SIGTERM stop "
    "it cleanly.\n";

static const tg_prog_t prog = {
    .name = "tracegate-perf", .synopsis = "[options]", .about = about};

/* Before any thread and before the first file a user controls is read:
 * the profiler gives up reaching into other processes (perf_confine.h).
 * Without the filter it does not run. */
static int confine(void) {
  tg_perf_confine_t c;
  int rv = tg_perf_confine(&c);
  if (!c.seccomp) {
    TG_ERROR("%s seccomp: %s", TG_NOTE(PERF_CONFINE_FAILED), tg_strerror(rv));
    return rv < 0 ? rv : -EPERM;
  }
  TG_INFO("%s", TG_NOTE(PERF_CONFINED));
  return 0;
}

/* The data source's state outlives the agent: tg__producer_main frees it
 * after tg_agent_shutdown() stopped every instance. */
static int start(void *ctx) {
  int rv = confine();
  if (rv < 0) return rv;
  return tg_perf_ds_new((tg_perf_ds_t **)ctx);
}

static void stop(void *ctx) { tg_perf_ds_free(*(tg_perf_ds_t **)ctx); }

int main(int argc, char **argv) {
  tg_perf_ds_t *perf = NULL;
  const tg_producer_tool_t tool = {
      .prog = &prog,
      /* A read round of every CPU's ring writes up to a few hundred
       * samples with their interned frames. */
      .smb_size_hint = 4u << 20,
      .start = start,
      .stop = stop,
      .ctx = &perf,
  };
  return tg__producer_main(&tool, argc, argv);
}
