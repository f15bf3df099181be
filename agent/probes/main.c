/* tracegate-probes: the system producer. Registers "linux.sys_stats",
 * "linux.process_stats", "linux.system_info", "linux.inode_file_map" and
 * "linux.ftrace" with the local tracing service;
 * samples /proc and reads the kernel's ring buffers for every session that
 * enables them. Wires flags, signals, the agent and
 * the sampler together; the data sources live in *_ds.c. */
#include <signal.h>
#include <string.h>

#include "agent/probes/ftrace_ds.h"
#include "agent/probes/inode_feed.h"
#include "agent/probes/pid_feed.h"
#include "agent/probes/probes.h"
#include "agent/tool_setup.h"
#include "ipc/channel.h"
#include "tracegate/agent.h"
#include "tracegate/error.h"
#include "common/flags.h"
#include "common/log.h"

#define PROG "tracegate-probes"

static void wake_sampler(void *ctx) { tg_sampler_wake(ctx); }

/* linux.ftrace hands pids over once a drain: resolving them on its
 * thread, as traced_probes does on its one thread, spares a wake of the
 * sampler's (and of the agent's, for the sampler's commit) at every drain
 * that names a new process. */
static void resolve_pids_here(void *ctx) {
  tg_sampler_run_wakes_here(ctx, &tg_process_stats_probe);
}

static const char about[] =
    "The system producer: data sources linux.sys_stats (/proc/meminfo, "
    "/proc/stat),\nlinux.process_stats (process tree, per-process "
    "memory and cpu time),\nlinux.system_info (the CPUs, once), "
    "linux.ftrace (kernel tracepoints through "
    "tracefs; needs root),\nlinux.inode_file_map (the paths of the inodes "
    "linux.ftrace sees)\nand perfetto.metatrace (how long its own "
    "work takes).\nSIGINT/SIGTERM stop it cleanly.\n";

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

  /* linux.ftrace hands the pids it sees to linux.process_stats of the
   * same session through |feed| (resolved on its own thread), and the
   * inodes to linux.inode_file_map through |inodes| (which wakes the
   * sampler). The feeds outlive the data
   * sources, and the sampler the ftrace thread. */
  tg_sampler_t *sampler = NULL;
  tg_pid_feed_t *feed = NULL;
  tg_inode_feed_t *inodes = NULL;
  tg_ftrace_ds_t *ftrace = NULL;
  if ((rv = tg_sampler_new(&sampler)) < 0 ||
      (rv = tg_pid_feed_new(resolve_pids_here, sampler, &feed)) < 0 ||
      (rv = tg_inode_feed_new(wake_sampler, sampler, &inodes)) < 0 ||
      (rv = tg_sampler_add(sampler, &tg_sys_stats_probe, NULL)) < 0 ||
      (rv = tg_sampler_add(sampler, &tg_process_stats_probe, feed)) < 0 ||
      (rv = tg_sampler_add(sampler, &tg_system_info_probe, NULL)) < 0 ||
      (rv = tg_sampler_add(sampler, &tg_inode_file_probe, inodes)) < 0 ||
      (rv = tg_sampler_add(sampler, &tg_metatrace_probe, NULL)) < 0 ||
      (rv = tg_sampler_start(sampler)) < 0 ||
      (rv = tg_ftrace_ds_new(feed, inodes, &ftrace)) < 0) {
    TG_ERROR("cannot set up the data sources: %s", tg_strerror(rv));
    tg_sampler_free(sampler);
    tg_inode_feed_free(inodes);
    tg_pid_feed_free(feed);
    return 1;
  }
  tg_agent_options_t opts = {
      .socket_path = socket_path,
      .producer_name = name,
      /* linux.ftrace writes in bursts of up to a ring buffer page per CPU
       * per read; the default 256 KiB fills up between two commits. */
      .smb_size_hint = 4u << 20,
      /* Every data source commits at the end of each of its rounds
       * (tg_ds_flush_thread): the agent's own tick only takes back idle
       * chunks, which these writers never leave behind, so it need not
       * wake an idle host 100 times a second. */
      .commit_period_ms = 1000,
      .log = tg__tool_agent_log,
      .log_ctx = (void *)PROG,
      .log_level = (tg_log_level_t)log_level,
  };
  /* Nor once a second: only after a round flushed something. The agent
   * does not run yet, so this cannot fail. */
  (void)tg_agent_set_commit_on_flush(true);
  if ((rv = tg_agent_init(&opts)) < 0) {
    TG_ERROR("cannot start the agent: %s", tg_strerror(rv));
    tg_ftrace_ds_free(ftrace);
    tg_sampler_free(sampler);
    tg_inode_feed_free(inodes);
    tg_pid_feed_free(feed);
    return 1;
  }
  TG_INFO("producer \"%s\" on %s", name, socket_path);

  int sig = 0;
  while (sigwait(&sigs, &sig) != 0) {
  }
  TG_INFO("%s: stopping", strsignal(sig));
  tg_agent_shutdown(); /* runs on_stop of every instance */
  tg_ftrace_ds_free(ftrace);
  tg_sampler_free(sampler);
  tg_inode_feed_free(inodes);
  tg_pid_feed_free(feed);
  return 0;
}
