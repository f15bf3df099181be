/* tracegate-collector's core (docs/collector.md, "The daemon"): one libuv
 * loop holding a flight-recorder session on every host of its shard of
 * the inventory, snapshotting them all on a trigger into the store.
 *
 *   coll.c     set-up from the config, the hosts' rings (a fleet of
 *              hosts in "hold" mode: enabled or re-attached under the
 *              session key, never read), a failed host started again
 *   snap.c     one fleet snapshot: CloneSession on every host of a group
 *              over a connection of its own, each clone read out, freed
 *              and merged into one store file
 *   boost.c    a snapshot's perf boost: linux.perf at a higher rate on
 *              its hosts for a window, merged into it (boost.h)
 *   trigger.c  where snapshots come from (operators, hosts' triggers, the
 *              schedule): the shell of trigger_policy.h (serving, folding,
 *              queueing, the budgets)
 *   api.c      the HTTP API, /metrics and the web page
 *   alertmanager.c  Alertmanager's webhook: alerts to snapshots of the
 *              hosts they name (alertmanager.h, its pure half)
 *   access.c   who may use it: the authz file and the CRL, SIGHUP
 *   hosts.c, standby.c  the hosts' holders; each one's standby connection
 *   retain.c   the store's retention steps
 *   clock.c    the daemon's clocks (clock.h)
 *
 * Each file's functions are in a header of its own (hosts.h, standby.h,
 * snap.h, trigger.h, retain.h, access.h, webhook.h for alertmanager.c,
 * api.h for api.c, page.c and health.c, clock.h); this one holds coll_t,
 * the types those files share, the events and coll.c's functions.
 * Layers (docs/architecture.md, "Inside the collector"): each file calls
 * only files below it; what a lower one tells a higher one goes through
 * coll_t.on (coll_events_t), which coll.c fills. boost.c calling snap.c
 * back is the one designed exception (boost.h).
 * Threads: everything runs on the loop thread; the store's fsync of a
 * finished snapshot runs on a libuv worker (snap.c).
 * One writer per struct: coll_t's fields are coll.c's, except the
 * counters each unit names below.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_COLL_H
#define TRACEGATE_COLLECTOR_DAEMON_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "client/remote.h"
#include "collector/config/config.h"
#include "collector/daemon/alertmanager.h"
#include "collector/daemon/boost_budget.h"
#include "collector/daemon/clock.h"
#include "collector/daemon/trigger_policy.h"
#include "collector/store/store.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/list.h"
#include "consumer/fleet/ds_problem.h"
#include "consumer/fleet/host.h"

#define COLL_PROG "tracegate-collector"

/* Snapshots under way at once: each holds a clone of every host of its
 * group on the hosts (a copy of the ring each) and a connection per host
 * here, so their number bounds the memory a trigger storm can cost. */
#define COLL_RUNNING_MAX 4

typedef struct coll coll_t;
typedef struct coll_snap coll_snap_t;

/* The hosts started together: a fleet of the fleet library (which admits
 * the hosts it was made with). Kept until the process ends. */
typedef struct coll_gen {
  tg_fleet_t fleet;
  struct coll_gen *next;
} coll_gen_t;

/* A connection kept open to a host for its next clone (standby.c), so
 * that a trigger sends CloneSession at once instead of dialing first (a
 * thousand TLS connections take most of a second). A snapshot borrows it
 * (BUSY) and gives it back after FreeBuffers; a connection that closes is
 * dialed again later. */
typedef enum coll_standby_state {
  COLL_SB_NONE,    /* no connection (a dial is due after |retry|) */
  COLL_SB_DIALING, /* dialed, ConsumerPort not bound yet */
  COLL_SB_READY,   /* bound, idle */
  COLL_SB_BUSY,    /* a snapshot's clone runs on it (|user|) */
  COLL_SB_CLOSING, /* closing; released when the transport is gone */
} coll_standby_state_t;

struct snap_host;
typedef struct coll_standby {
  coll_standby_state_t st; /* written only by standby.c's set_state() */
  tg_consumer_t *c;
  void *conn;             /* the dialer's */
  uv_timer_t retry;
  struct snap_host *user; /* BUSY, and CLOSING while a snapshot used it */
} coll_standby_t;

/* Where a host's ring holder stands (hosts.c writes it from the holder's
 * events). Its link (consumer/fleet/link.h) says most; while the link is
 * up, its recording (consumer/recording.h) says how far the ring session
 * is. /api/v1/hosts and /metrics spell it with coll_host_state_name. */
typedef enum coll_host_state {
  COLL_HOST_CONNECTING,   /* dialing: where a host starts */
  COLL_HOST_PREPARING,    /* connected, binding ConsumerPort */
  COLL_HOST_IDLE,         /* link up, its ring not asked for yet */
  COLL_HOST_STARTING,     /* its ring being attached, or enabled */
  COLL_HOST_TRACING,      /* its ring runs: snapshots clone it */
  COLL_HOST_STOPPING,     /* its ring session stopping */
  COLL_HOST_DRAINING,     /* its ring session ended: the last reads */
  COLL_HOST_STATS,        /* the ring session's final statistics */
  COLL_HOST_DETACHED,     /* its ring left detached in the service */
  COLL_HOST_RECONNECTING, /* the link lost: dialing again */
  COLL_HOST_CLOSING,      /* the holder closing its link */
  COLL_HOST_DONE,         /* the holder done */
  COLL_HOST_FAILED,       /* the holder failed: started again later */
  COLL_HOST_STATE_COUNT
} coll_host_state_t;


/* One host of the collector's shard (hosts.c). */
typedef struct coll_host {
  coll_t *c;
  coll_gen_t *gen;
  size_t index; /* in its generation's fleet */
  tg_target_t t;
  /* Its ring's resume key and session name: "<session_key>-<16 hex of
   * FNV-1a 64 of its spec>", so that inventory entries reaching one relay
   * never share a ring. */
  char key[TG_COLL_CONFIG_NAME_MAX + 18];
  uint8_t *config; /* the flight config named |key|, serialised; owned */
  size_t config_len;
  tg_fleet_host_t *fh;  /* the ring's holder (NULL before the first start) */
  tg_fleet_host_t *old; /* the holder before a restart, until it is closed */
  uv_timer_t restart;   /* a failed holder starts again when it fires */
  uint64_t restarts;
  uint64_t failures;    /* its holder's failures since it last traced */
  char warned[600];     /* the failure last warned about ("" since it traced) */
  int64_t since_ms;     /* when the host entered its current state */
  coll_host_state_t state;
  char why[600];        /* why it is not tracing ("" when it is) */
  bool ring_up;         /* its ring session is known to exist */
  bool finished;        /* its holder finished (a restart is due) */
  bool removed;         /* out of the inventory: freed once let go */
  tg_trigger_budget_t budget; /* its triggers' snapshots (trigger.c) */
  bool freeing;
  unsigned busy;        /* snapshots holding it (coll_host_release) */
  tg_list_t gone;       /* in coll_t.gone once removed */
  coll_standby_t sb;    /* standby.c */
  unsigned closing;     /* its handles being closed before it is freed */
  /* Data sources its ring asked for that do not run (consumer/fleet/ds_problem.h):
   * those its service did not offer when the holder last connected
   * (hosts.c), and what the last snapshot that read its ring found in the
   * packets (snap.c). NULL for none (most hosts: a few KiB each else); a
   * new holder clears both; /api/v1/hosts shows them. Owned. */
  tg_ds_problems_t *not_offered, *seen;
  /* The perf boost running on it (boost.c), NULL for none: one at a
   * time, whichever snapshot started it. */
  struct coll_boost_host *boosting;
  /* boost.c: its boosts within perf_boost_budget_window (boost_budget.h),
   * the ms it was boosted and the boosts its budgets refused, since it
   * joined the inventory (/api/v1/hosts). */
  coll_boost_ledger_t boost_ledger;
  uint64_t boost_ms;
  uint64_t boost_refused;
} coll_host_t;

/* Snapshots and triggers, for /metrics (trigger.c, snap.c write them). */
typedef struct coll_counts {
  uint64_t trigger_hits;       /* triggers received, every origin */
  uint64_t triggers_coalesced; /* served by a snapshot under way or queued */
  /* Refused, by the budget that had nothing left. */
  uint64_t triggers_capped[TG_TRIGGER_BUDGET_COUNT];
  uint64_t snapshots[TG_COLL_STATE_COUNT]; /* finished, by outcome */
  uint64_t snapshot_errors;    /* could not begin or finish in the store */
  uint64_t bytes_stored;       /* bytes of snapshots finished */
  uint64_t host_loss;          /* loss counters of hosts in snapshots */
  /* Packets left out of snapshots before their sequence's first clear of
   * incremental state (merge.h, state_edge): the rings' oldest edge. */
  uint64_t ring_edge_packets;
  /* Flows of snapshots' hosts (merge.h, tg_merge_links_end): those whose
   * two ends are on two hosts, and ends whose other end is not in the
   * snapshot. */
  uint64_t flows_across, flow_ends_unmatched;
  /* Snapshots written again with their hosts placed by their requests
   * (snap.c, "clocks from requests"), and those whose pass failed (kept
   * as ClockSync placed them). */
  uint64_t snapshots_reclocked, snapshots_reclock_failed;
  /* Host state changes snap_host.h's table refused (a bug: logged). */
  uint64_t snap_host_bad_transitions;
  /* A snapshot's outcome its table refused (snap.c): a bug, logged. */
  uint64_t snap_bad_transitions;
  /* A perf boost's state its table refused (boost.c): a bug, logged. */
  uint64_t boost_bad_transitions;
  /* A standby connection's state its table refused (standby.c), every
   * host's, removed ones' included: a bug, logged. */
  uint64_t standby_bad_transitions;
  /* Data-source problems in snapshots' host rows, by reason. */
  uint64_t ds_failures[TG_DS_REASON_COUNT];
  /* Perf boosts (boost.c) ended, by how: sharp, failed, held (none
   * started: another snapshot's ran on the host), budget (none started:
   * over a budget). */
  uint64_t perf_boosts[4];
  /* Boosts refused, by the budget (coll_boost_verdict_t; the OK slot
   * unused), and the ms hosts were boosted, counted as boosts end. */
  uint64_t perf_boost_refused[3];
  uint64_t perf_boost_ms;
  /* Snapshot durations (trigger to stored) by le bucket, in ms. */
  uint64_t dur_buckets[8];
  uint64_t dur_count;
  double dur_sum_s;
} coll_counts_t;
extern const uint32_t coll_dur_bounds_ms[8];

/* The HTTP API's own state (api.c writes it): the POSTs with wait=1
 * waiting for their snapshot, at most api.c's WAIT_MAX. */
typedef struct coll_api {
  tg_list_t waiters; /* of api.c's waiter_t */
  size_t n_waiters;
  tg_list_t fetches; /* of api.c's fetch_t: bucket downloads on workers */
  tg_list_t profiles; /* of api_profile.c's job_t: profiles on workers */
  size_t n_profiles;
} coll_api_t;

/* The Alertmanager webhook's state (alertmanager.c writes it). */
typedef struct coll_am {
  tg_am_seen_t *seen; /* the repeat window, made at the first payload */
  uint64_t alerts[TG_AM_R_COUNT]; /* alerts, by what became of them */
  uint64_t malformed;             /* payloads answered 400 */
  uint64_t oversized;             /* payloads answered 413 here */
} coll_am_t;

/* The calls that go back up (docs/architecture.md, "Inside the
 * collector"): a lower file tells the one above it what happened through
 * these, never by a call into that file. coll.c fills them once, in
 * coll_prepare, with the functions each names. */
typedef struct coll_events {
  /* standby.c: the connection lent to |sh| closed (|status|, |msg| as the
   * consumer's on_close gave them), then its transport was released:
   * snap.c's coll_snap_standby_closed, coll_snap_standby_gone. */
  void (*standby_closed)(struct snap_host *sh, int status, const char *msg);
  void (*standby_gone)(struct snap_host *sh, const char *detail);
  /* standby.c: a removed host's connection is gone, the host may be
   * freed: hosts.c's coll_host_check_free. */
  void (*standby_released)(coll_host_t *h);
  /* hosts.c: |h|'s holder reached tracing: trigger.c's coll_watch_host. */
  void (*host_tracing)(coll_t *c, coll_host_t *h);
  /* boost.c: one boost packet of snapshot |s|'s host |k| to merge, and a
   * boost's connection released: snap.c's coll_snap_merge_boost,
   * coll_snap_boost_released (boost.h). */
  int (*boost_packet)(coll_snap_t *s, size_t k, const uint8_t *p, size_t n,
                      uint64_t *stored);
  void (*boost_released)(coll_snap_t *s);
  /* snap.c: |s| ended, stored or not: api.c's coll_api_snapshot_done. */
  void (*snapshot_done)(coll_t *c, coll_snap_t *s);
  /* trigger.c: the queued snapshot began as |id|, or could not (|err|):
   * api.c's coll_api_queued_begun, coll_api_queued_failed. */
  void (*queued_begun)(coll_t *c, uint64_t id);
  void (*queued_failed)(coll_t *c, int err);
} coll_events_t;

struct coll {
  uv_loop_t *loop;
  tg_coll_config_t cfg;
  /* The ring's TraceConfig, checked, with its trigger_config made: each
   * host's copy is this, named with the host's key (coll_host_t). */
  struct Perfetto__Protos__TraceConfig *flight;
  /* The perf boost's TraceConfig (boost.c); NULL: perf_boost_window 0. */
  struct coll_boost_cfg *boost;
  tg_tls_config_t *tls;
  struct tg_session_cache *sessions; /* TLS sessions saved, in memory */
  tg_remote_env_t env;
  tg_fleet_dialer_t dialer; /* over env: the holders' and the clones' */
  /* hosts.c: the shard's hosts (n, in an array of cap), the generations
   * they were started in, the removed ones not yet freed, the inventory
   * file's watch. */
  coll_host_t **hosts;
  size_t n, cap;
  size_t inventory; /* hosts in the inventory, all shards */
  coll_gen_t *gens;
  tg_list_t gone;
  uv_fs_event_t watch;
  uv_timer_t reload_timer;
  char hosts_base[TG_COLL_CONFIG_PATH_MAX + 1]; /* the file's name */
  tg_coll_catalog_t *shared; /* PostgreSQL, or NULL (the store's SQLite) */
  tg_coll_store_t *store;
  /* snap.c: the snapshots under way, in the order they began (added by
   * coll_snap_begin, removed once stored). */
  coll_snap_t *running[COLL_RUNNING_MAX];
  size_t n_running;
  /* work.c: jobs queued on the pool (coll_work_queue) and not back yet. */
  size_t n_work;
  /* trigger.c */
  bool queued; /* a snapshot waits for one under way to end */
  char queued_trigger[TG_COLL_TRIGGER_MAX + 1];
  char queued_reason[TG_COLL_REASON_MAX + 1];
  char queued_origin[TG_COLL_HOST_MAX + 1];
  char queued_group[65]; /* "" while it is of a host list */
  char queued_producer[128];
  int32_t queued_producer_uid;
  /* A queued snapshot of a host list (an Alertmanager alert's): its
   * hosts' specs, |n_queued_hosts| NUL-terminated strings, each once, in
   * |queued_hosts| (0: of |queued_group|). Specs, not coll_host_t
   * pointers: an inventory reload may free a host while it waits; they
   * are looked up when it begins. At most one per host of the inventory
   * (trigger.c drops those no longer in it before it would hold more). */
  tg_buf_t queued_hosts;
  size_t n_queued_hosts;
  /* All hosts' together, the operators', the schedule's (the per-host
   * ones are in coll_host_t); indexed by tg_trigger_budget_id_t, the
   * HOST slot unused. */
  tg_trigger_budget_t budgets[TG_TRIGGER_BUDGET_COUNT];
  uv_timer_t schedule;
  uv_timer_t retention;
  coll_counts_t counts;
  struct tg_http_server *http;
  struct tg_http_server *health; /* health.c; NULL without health_listen */
  coll_api_t api;
  coll_am_t am;
  /* What the daemon's decisions read (common/clock.h): &loop_clock from
   * coll_prepare, a simulated one in tests (coll_test.h). Handed to the
   * HTTP servers too. */
  const tg_clock_t *clock;
  tg_clock_t loop_clock; /* uv_now / uv_hrtime of |loop| (clock_loop.h) */
  /* What work on a pool thread reads (the symbolize deadline, symbols.c),
   * which must not read the loop's: tg_clock_monotonic from coll_prepare,
   * one of the test's (coll_test.h). */
  const tg_clock_t *work_clock;
  /* "ready PORT\n" once listening, "ready PORT health PORT\n" with
   * health_listen; 0: none */
  int ready_fd;
  struct coll_icheck *icheck; /* import_check.c; NULL until first used */
  /* main's check runner (check_runner.h), which runs each import check;
   * NULL: none (a collector in a test's process), the checks then run
   * from this process. */
  struct coll_runner *runner;
  struct coll_symbols *symbols; /* symbols.c; NULL until first used */
  struct coll_shares *shares;   /* shares.c; NULL until first used */
  coll_events_t on; /* coll.c's wiring, read by the files below it */
  bool check_only;  /* --check-config: set up nothing that runs */
  bool stopping;
};

/* --- coll.c ---------------------------------------------------------- */

/* Everything from |cfg| (moved in: the caller's copy is emptied): the
 * flight config, TLS, the inventory's shard, the store, the hosts' rings
 * started. Prints what is wrong to stderr and returns -1. */
int coll_start(coll_t *c, uv_loop_t *loop, tg_coll_config_t *cfg);
/* coll_start's first step: |cfg| moved in, the flight config checked and
 * made, TLS and the dialer; nothing started, nothing on the loop yet. The
 * daemon's modules can be driven from here (the unit tests do). Prints
 * what is wrong to stderr and returns -1. */
int coll_prepare(coll_t *c, uv_loop_t *loop, tg_coll_config_t *cfg);
/* coll_start's store: c->cfg's catalog (SQLite in the store directory,
 * or PostgreSQL: c->shared) and store, recovered (store.h). Prints what
 * is wrong to stderr and returns -1. */
int coll_store_open(coll_t *c);
/* --rebuild-catalog (rebuild.c): |cfg| moved in; the store opened, the
 * catalog rebuilt from the bucket's sidecars, progress on stderr, one
 * JSON line of what was done on stdout. Returns the exit status: 0 every
 * snapshot in the bucket has its row as its sidecar says, 3 done but
 * some were refused, failed or had no sidecar, 1 could not run. */
int coll_rebuild(coll_t *c, tg_coll_config_t *cfg);
/* Stops the listener, the triggers and the restarts; the snapshots under
 * way are finished with what has come (coll_snap_cut), the jobs on the
 * pool come back (each told to stop where it can: a download under way
 * ends by itself); then the loop stops.
 * Nothing is torn down: the process exits, its connections with it, and
 * each relay keeps its ring under the key for its lease, as after a
 * crash, for the next start to attach to. What the process holds stays
 * reachable from its one static coll_t until then. */
void coll_stop(coll_t *c);

#endif /* TRACEGATE_COLLECTOR_DAEMON_COLL_H */
