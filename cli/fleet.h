/* `tracegate record -H ...`: the CLI's front end to the fleet engine
 * (consumer/fleet/host.h), which drives each host: its connection,
 * preparation, link, reconnection and recording. Shared by the fleet
 * files here:
 *
 *   fleet.c        the run: outputs, hosts, signals, the keys file, the
 *                  end, --summary-json (the engine admits the hosts)
 *   fleet_host.c   the CLI's side of one host: what the engine's events
 *                  do here (terminal lines, the host's output or the
 *                  merge's, loss counters) and the dialer it connects
 *                  through (remote.h)
 *   fleet_names.c  data source names checked across hosts
 *   fleet_ui.c     progress lines and the summary
 *   fleet_ui_pick.c  which hosts the progress names when they are many
 *
 * The merged trace is the fleet library's (consumer/fleet/merge.h); the
 * CLI opens and commits its file and is its sink.
 *
 * One host failing never stops the others; the run ends when every host's
 * link is DONE or FAILED. Everything runs on the one loop thread.
 */
#ifndef TRACEGATE_CLI_FLEET_H
#define TRACEGATE_CLI_FLEET_H

#include "abi/protocol_limits.h"
#include "cli/record.h"
#include "client/remote.h"
#include "consumer/fleet/host.h"
#include "consumer/fleet/merge.h"
#include "consumer/fleet/reclock.h"

/* The most hosts a run takes: as many as the merge has machine ids and
 * sequence ranges for, whatever the output mode. */
#define FLEET_MAX_HOSTS TG_MERGE_MAX_HOSTS

typedef enum fleet_out_mode {
  FLEET_OUT_FILE,  /* one host, -o FILE: its packets as they are */
  FLEET_OUT_DIR,   /* -o DIR: DIR/<name>.pftrace per host */
  FLEET_OUT_MERGE, /* -o FILE --merge: one trace, machine ids */
} fleet_out_mode_t;

typedef struct fleet fleet_t;

typedef struct fleet_host {
  /* The engine's side: link, connection, recording, clock, what was sent
   * (core.data points back here). */
  tg_fleet_host_t core;
  fleet_t *f;
  /* Its machine id, sequence map and dropped packets in the merge (kept
   * in every mode: the summary names the machine). */
  tg_merge_host_t merge;
  const tg_target_t *t;
  bool names_checked; /* its data source names were checked (fleet_names.c) */
  bool names_recorded; /* its answer is noted, not yet counted */

  /* Loss counters for the summary, and what a link loss cost: the loss
   * counted between the drop and the first stats after re-attaching. */
  cli_loss_t loss;
  bool has_loss;
  tg_ftrace_loss_t ftrace; /* from the host's packets (ftrace_loss.h) */
  /* Its data sources that did not run as asked, made at the end from
   * |ftrace| and fleet_names.c's answer (consumer/fleet/ds_problem.h). */
  tg_ds_problems_t problems;
  uint64_t loss_before_drop;
  bool recheck_loss;
  uint64_t loss_while_down;

  /* Output. */
  cli_output_t own; /* FILE and DIR modes */
  bool has_own;
  char *path;
  bool kept_partial;
  /* The merged file re-clocked by its requests (fleet_reclock.c). */
  tg_reclock_host_t reclock;
  bool has_reclock;
} fleet_host_t;

/* What a host tells the run: fleet.c installs its table in fleet_t.run
 * before any host starts; fleet_host.c calls through it, never into
 * fleet.c, which drives the hosts. */
typedef struct fleet_run_events {
  /* A host reached DONE or FAILED. */
  void (*host_finished)(fleet_t *f);
  /* Tells |h|'s resume key before its session exists: on the terminal
   * with a few hosts; with many, into the keys file (OUT.keys, or
   * OUT/resume.keys with -o DIR), "HOST KEY" a line, named once on the
   * terminal. */
  void (*show_key)(fleet_t *f, fleet_host_t *h);
  /* A host's recording started tracing for the first time (counted in
   * f->core.traced). */
  void (*host_traced)(fleet_t *f);
} fleet_run_events_t;

struct fleet {
  /* What the engine's hosts share: options, the dialer, the callbacks. */
  tg_fleet_t core;
  const fleet_run_events_t *run;
  const record_opts_t *o;
  uv_loop_t *loop;
  tg_remote_env_t env;
  /* TLS sessions for resumption: always in memory (reconnections), read
   * from and written back to |sessions_path| with --session-cache. */
  struct tg_session_cache *sessions;
  char sessions_path[TG_CLIENT_PATH_MAX];
  tg_remote_tls_counts_t tls_counts;
  fleet_out_mode_t mode;
  const char *out; /* -o */
  tg_buf_t cfg;    /* the TraceConfig every host gets, serialised (empty
                      with --attach: the session has its own) */
  uint32_t duration_ms;

  fleet_host_t *hosts;
  size_t n;
  /* fleet_names.c: the data source names each host has not registered. */
  const Perfetto__Protos__TraceConfig *pcfg; /* NULL with --attach */
  uint8_t *ds_missing; /* [host * n_data_sources + ds]: 1 if unregistered */
  char **ds_near;      /* per data source: "; did you mean ..." or NULL */
  size_t names_checked; /* hosts whose answer (or failure) is in */
  size_t finished;
  FILE *keys;     /* many hosts: their resume keys (run->show_key) */
  char *keys_path;
  bool keys_failed;
  /* --merge: the merge writes into |merged| (its sink is fleet.c's). */
  tg_merge_t merge;
  cli_output_t merged;
  bool has_merged;

  uv_signal_t sigint;
  uv_signal_t sigterm; /* stops as Ctrl-C does */
  uv_timer_t tick;   /* progress */
  unsigned sigints;
  bool aborting;
  uv_timer_t abort_timer; /* exits if aborting takes too long */
  bool closed; /* timers and signal closed */
  bool tty;
  size_t lines_shown;
  uint64_t t0;
};

/* --- fleet.c ------------------------------------------------------------- */

/* Records from |targets| (|n|, named) with |cfg| into o->out. Returns the
 * exit code. */
int fleet_record(const record_opts_t *o, Perfetto__Protos__TraceConfig *cfg,
                 const tg_target_t *targets, size_t n,
                 tg_tls_config_t *tls);
/* Prints "tracegate: [TG-nnnn] " + the text on its own line (no code for
 * TG_N_NONE), clearing the progress lines first. */
void fleet_say(fleet_t *f, tg_notice_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --- fleet_reclock.c ----------------------------------------------------- */

/* Once the merged file is committed: unless --clock-from-requests=off,
 * and when the joined mode wrote flows across hosts, re-clocks it by its
 * requests in place (OUT.reclock.tmp renamed over it); each host's
 * outcome goes to its |reclock|. On failure the file stays as it is and
 * a notice says why; the run's outcome does not change. */
void fleet_reclock(fleet_t *f);

/* --- fleet_names.c ------------------------------------------------------- */

/* Data source names checked against each host's registered ones: once
 * every host has answered or failed, one warning per name
 * that some host lacks, naming those hosts (a count and the first few
 * when they are many). */
int fleet_names_init(fleet_t *f, const Perfetto__Protos__TraceConfig *cfg);
/* |h|'s QueryServiceState answer noted, |h| not yet counted as checked
 * (its other preparations may still be under way). */
void fleet_names_record(fleet_t *f, fleet_host_t *h,
                        const Perfetto__Protos__TracingServiceState *st);
/* |h| is checked: with its answer |st|, or the one fleet_names_record()
 * noted, or none (NULL, nothing noted: the query failed or was refused).
 * Once per host; the last host's call says the warnings. */
void fleet_names_host(fleet_t *f, fleet_host_t *h,
                      const Perfetto__Protos__TracingServiceState *st);
/* Adds to |ps| a "not_offered" problem per data source of the config
 * that host |host| (its index) had not registered when it was asked. */
void fleet_names_problems(const fleet_t *f, size_t host, tg_ds_problems_t *ps);
void fleet_names_free(fleet_t *f);

/* --- fleet_host.c -------------------------------------------------------- */

/* The engine's host |index| of |f| for target |t|, with the CLI's side. */
void fleet_host_init(fleet_t *f, fleet_host_t *h, size_t index,
                     const tg_target_t *t);
/* The events of every host (the engine's callback table). */
extern const tg_fleet_host_cbs_t fleet_host_cbs;
/* Frees what the host holds (after the loop ended). */
void fleet_host_free(fleet_host_t *h);
/* The end of host |h|'s packets in a merge (merge.h, tg_merge_host_end):
 * what its sequences lost for want of incremental state joins its loss
 * list as "incremental_state_lost". Once, before the summary. */
void fleet_host_merge_end(fleet_host_t *h);

/* --- fleet_ui.c ---------------------------------------------------------- */

void fleet_ui_draw(fleet_t *f);

/* --- fleet_ui_pick.c ----------------------------------------------------- */

/* The hosts a progress display of |f| names, in order, into |idx| (at
 * most |cap|): every host when they fit, else the failing ones, then
 * those whose link is not up (connecting, preparing, reconnecting), then
 * those under half the median host's bytes. *total: how many hosts
 * qualified. Returns how many were picked. */
size_t fleet_ui_pick(const fleet_t *f, size_t *idx, size_t cap,
                     size_t *total);
void fleet_ui_clear(fleet_t *f);
/* The per-host summary; returns the number of hosts that failed. */
size_t fleet_ui_summary(fleet_t *f);

#endif /* TRACEGATE_CLI_FLEET_H */
