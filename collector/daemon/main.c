/* tracegate-collector: the always-on fleet flight recorder
 * (docs/collector.md). Flags, the config, signals and the loop; the work
 * is in coll.c, snap.c, trigger.c and api.c. */
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/access.h"
#include "collector/daemon/check_runner.h"
#include "collector/daemon/hosts.h"
#include "common/flags.h"
#include "common/libcrypto_init.h"
#include "common/log.h"
#include "common/notice.h"

/* The process's one collector; static so that what it holds at exit is
 * reachable (the rings stay on the hosts: nothing to tear down). */
static coll_t coll;
static coll_runner_t runner;
static uv_signal_t sig_int, sig_term, sig_hup;

static void on_warning(void *ctx, const char *text) {
  (void)ctx;
  fprintf(stderr, COLL_PROG ": warning: %s\n", text);
}

static void on_signal(uv_signal_t *s, int signum) {
  TG_INFO("%s: stopping", signum == SIGINT ? "SIGINT" : "SIGTERM");
  (void)s;
  coll_stop(&coll);
}

static void on_hup(uv_signal_t *s, int signum) {
  (void)s;
  (void)signum;
  coll_hosts_reload(&coll, "SIGHUP");
  coll_access_reload(&coll, "SIGHUP");
}

/* Each host holds a connection and, during a snapshot, one more: raise
 * the soft limit on descriptors to the hard one, and say when even that
 * is short for the shard (connections would fail with EMFILE). */
static void raise_fd_limit(size_t hosts) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) getrlimit(RLIMIT_NOFILE, &rl);
  }
  rlim_t want = (rlim_t)hosts * 2 + 64;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
    TG_WARN("%zu hosts need about %llu file descriptors, the limit is %llu: "
            "raise LimitNOFILE (systemd) or ulimit -n", hosts,
            (unsigned long long)want, (unsigned long long)rl.rlim_cur);
}

static const char about[] =
      "Keeps a flight-recorder session (ring buffers) on every host of the\n"
      "inventory through its tracegate-relay and, on a trigger, snapshots\n"
      "them all at once into one merged Perfetto trace in the store, listed\n"
      "in the catalog. Triggers: a host's (`trigger` lines of the config,\n"
      "fired by an app or `tracegate trigger NAME` there), an operator's\n"
      "(POST /api/v1/snapshots, `tracegate snapshot --collector ADDR`), or\n"
      "the schedule (snapshot_every).\n"
      "\n"
      "The config file's keys, the HTTP API and the metrics: docs/collector.md.\n"
      "  tracegate-collector --config /etc/tracegate-collector/collector.conf\n"
      "  tracegate-collector --config collector.conf --check-config\n"
      "  tracegate-collector --config collector.conf --rebuild-catalog\n"
      "\n"
      "SIGHUP, or a change of the inventory file, reads the inventory again:\n"
      "hosts that stay are not touched, new ones start, removed ones have\n"
      "their ring ended. SIGHUP also reads authz and http_crl again: HTTPS\n"
      "connections they no longer allow end.\n"
      "\n"
      "--rebuild-catalog makes a lost catalog again from the bucket's\n"
      "sidecars (docs/collector.md, \"Rebuilding the catalog from the\n"
      "bucket\"), with no collector running on it; progress on stderr, one\n"
      "JSON line of what was done on stdout. Running it again inserts\n"
      "nothing new.\n"
      "\n"
      "Exit status: 0 stopped by SIGTERM/SIGINT (or --check-config passed, or\n"
      "--rebuild-catalog gave every snapshot its row), 1 could not start\n"
      "(config, store, TLS, listener), 2 usage, 3 --rebuild-catalog done but\n"
      "some snapshots were refused, failed or had no sidecar (the JSON line\n"
      "names them).\n";

int main(int argc, char **argv) {
  /* First: libwebsockets, libcurl and tls/ start libcrypto too, and its
   * exit handler would race the pool threads (libcrypto_init.h). */
  (void)tg_libcrypto_init();
  const char *config = NULL, *shard = NULL;
  int log_level = TG_LOG_INFO;
  bool check = false, rebuild = false;
  uint64_t ready_fd = 0;
  const tg_flag_t flags[] = {
      {"config", TG_FLAG_STRING, &config, "FILE",
       "-c: the config file (docs/collector.md, \"Config\")", 0, 0},
      {"shard", TG_FLAG_STRING, &shard, "I/N",
       "take shard I of N of the inventory, overriding the config's shard "
       "(a Kubernetes StatefulSet passes its pod's ordinal)", 0, 0},
      {"check-config", TG_FLAG_BOOL, &check, NULL,
       "read the config, the inventory and the flight config, say what is "
       "wrong, and exit (0: all good)", 0, 0},
      {"rebuild-catalog", TG_FLAG_BOOL, &rebuild, NULL,
       "make the catalog again from the bucket's snapshot sidecars, print "
       "a JSON summary, and exit (no collector may run on the catalog)", 0,
       0},
      {"ready-fd", TG_FLAG_UINT, &ready_fd, "FD",
       "write \"ready PORT\\n\" to this fd once the HTTP listener is up "
       "(PORT: its port, for listen = ...:0; with health_listen \"ready PORT "
       "health PORT\\n\"), then close it (0: none)", 0, 1024},
      {"log-level", TG_FLAG_LOG_LEVEL, &log_level, "LEVEL",
       "error, warn, info or debug", 0, 0},
  };
  static const tg_prog_t prog = {
      .name = COLL_PROG, .synopsis = "--config FILE [options]", .about = about};
  int status;
  if (tg_prog_flags(&prog, flags, sizeof(flags) / sizeof(flags[0]), argc, argv,
                    NULL, 0, NULL, &status))
    return status;
  if (!config) {
    fprintf(stderr, COLL_PROG ": --config FILE is required (see --help)\n");
    return TG_EXIT_USAGE;
  }
  tg_log_set_prefix(COLL_PROG);
  tg_log_set_level((tg_log_level_t)log_level);
  signal(SIGPIPE, SIG_IGN);
  /* The daemon's check runner, forked before anything is read (the
   * config may name a catalog password; the TLS key and the bucket's keys
   * come later) while this process has one thread; then this process
   * gives up every capability: only the runner may change its uid
   * (check_runner.h). As root it keeps them: uid 0 owns root's files with
   * or without them, and a root deployment may rely on the rest (another
   * user's socket directory, a port below 1024). */
  if (!check && !rebuild) {
    int rv = coll_runner_start(&runner);
    if (rv < 0)
      TG_WARN("%s cannot start the check runner: %s: check_trace_processor "
              "will not check", tg_notice_tag(TG_N_COLLECTOR_CHECK_NOT_MADE),
              strerror(-rv));
    if (geteuid() != 0 && (rv = coll_runner_drop_caps()) < 0) {
      fprintf(stderr, COLL_PROG ": cannot give up its capabilities: %s\n",
              strerror(-rv));
      coll_runner_close(&runner);
      return TG_EXIT_FAIL;
    }
  }

  tg_coll_config_t cfg;
  char err[1024] = "";
  if (tg_coll_config_load(config, &cfg, on_warning, NULL, err, sizeof(err)) < 0) {
    fprintf(stderr, COLL_PROG ": %s %s\n", TG_NOTE(COLLECTOR_CONFIG_INVALID),
            err);
    coll_runner_close(&runner);
    return TG_EXIT_FAIL;
  }
  if (shard && tg_coll_config_set_shard(&cfg, shard) < 0) {
    fprintf(stderr, COLL_PROG ": --shard: expected I/N with 0 <= I < N <= "
            "65536, not '%.64s'\n", shard);
    tg_coll_config_free(&cfg);
    coll_runner_close(&runner);
    return TG_EXIT_USAGE;
  }
  if (rebuild) return coll_rebuild(&coll, &cfg);
  /* Without checks the runner has nothing to do: it ends now. */
  if (!cfg.check_trace_processor[0]) coll_runner_close(&runner);
  coll.runner = runner.pid > 0 ? &runner : NULL;
  coll.ready_fd = (int)ready_fd;
  coll.check_only = check;
  uv_loop_t *loop = uv_default_loop();
  if (coll_start(&coll, loop, &cfg) < 0) {
    tg_coll_config_free(&cfg);
    coll_runner_close(&runner);
    return TG_EXIT_FAIL;
  }
  raise_fd_limit(coll.n);
  if (check) {
    printf("%s: ok (%zu of %zu hosts in this shard)\n", config, coll.n,
           coll.inventory);
    return 0;
  }
  uv_signal_init(loop, &sig_int);
  uv_signal_init(loop, &sig_term);
  uv_signal_start(&sig_int, on_signal, SIGINT);
  uv_signal_start(&sig_term, on_signal, SIGTERM);
  uv_signal_init(loop, &sig_hup);
  uv_signal_start(&sig_hup, on_hup, SIGHUP);
  uv_run(loop, UV_RUN_DEFAULT);
  coll_runner_close(&runner);
  TG_INFO("stopped");
  return 0;
}
