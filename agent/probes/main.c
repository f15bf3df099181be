/* tracegate-probes: the system producer. Registers "linux.sys_stats",
 * "linux.process_stats", "linux.system_info", "linux.inode_file_map" and
 * "linux.ftrace" with the local tracing service;
 * samples /proc and reads the kernel's ring buffers for every session that
 * enables them. The program is
 * tg__producer_main (agent/tool_setup.h) around the sampler and the data
 * sources of *_ds.c. */
#include "agent/probes/ftrace_ds.h"
#include "agent/probes/inode_feed.h"
#include "agent/probes/pid_feed.h"
#include "agent/probes/probes.h"
#include "agent/tool_setup.h"

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
    .name = "tracegate-probes", .synopsis = "[options]", .about = about};

/* linux.ftrace hands the pids it sees to linux.process_stats of the same
 * session through |feed| (resolved on its own thread), and the inodes to
 * linux.inode_file_map through |inodes| (which wakes the sampler). The
 * feeds outlive the data sources, and the sampler the ftrace thread. */
typedef struct probes {
  tg_sampler_t *sampler;
  tg_pid_feed_t *feed;
  tg_inode_feed_t *inodes;
  tg_ftrace_ds_t *ftrace;
} probes_t;

static void stop(void *ctx) {
  probes_t *p = ctx;
  tg_ftrace_ds_free(p->ftrace);
  tg_sampler_free(p->sampler);
  tg_inode_feed_free(p->inodes);
  tg_pid_feed_free(p->feed);
  *p = (probes_t){0};
}

static int start(void *ctx) {
  probes_t *p = ctx;
  int rv;
  if ((rv = tg_sampler_new(&p->sampler)) < 0 ||
      (rv = tg_pid_feed_new(resolve_pids_here, p->sampler, &p->feed)) < 0 ||
      (rv = tg_inode_feed_new(wake_sampler, p->sampler, &p->inodes)) < 0 ||
      (rv = tg_sampler_add(p->sampler, &tg_sys_stats_probe, NULL)) < 0 ||
      (rv = tg_sampler_add(p->sampler, &tg_process_stats_probe, p->feed)) <
          0 ||
      (rv = tg_sampler_add(p->sampler, &tg_system_info_probe, NULL)) < 0 ||
      (rv = tg_sampler_add(p->sampler, &tg_inode_file_probe, p->inodes)) < 0 ||
      (rv = tg_sampler_add(p->sampler, &tg_metatrace_probe, NULL)) < 0 ||
      (rv = tg_sampler_start(p->sampler)) < 0 ||
      (rv = tg_ftrace_ds_new(p->feed, p->inodes, &p->ftrace)) < 0) {
    stop(p);
    return rv;
  }
  return 0;
}

int main(int argc, char **argv) {
  probes_t probes = {0};
  const tg_producer_tool_t tool = {
      .prog = &prog,
      /* linux.ftrace writes in bursts of up to a ring buffer page per CPU
       * per read; the default 256 KiB fills up between two commits. */
      .smb_size_hint = 4u << 20,
      .start = start,
      .stop = stop,
      .ctx = &probes,
  };
  return tg__producer_main(&tool, argc, argv);
}
