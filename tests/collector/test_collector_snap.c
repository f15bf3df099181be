/* snap.c, one fleet snapshot, driven through coll_snap_begin() in the
 * test's process (coll_unit.h): which hosts are asked (the group's, the
 * tracing ones), what each host's failure says and costs the others (a
 * host past its cap, a host silent for clone_timeout on the daemon's
 * clock, a host that trickles under clone_min_rate, a cut), the view the
 * trigger policy gets, the cap on snapshots under way, the
 * symbolize deadline on the daemon's clock for pool work, and a stop
 * that waits for the pool's jobs. Outcomes are
 * read from the store's rows. Through all of them, no host state change
 * is one snap_host.h's table refuses; the table itself is checked as the
 * header writes it out.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_unit.h"
#include "collector/daemon/coll_test.h"
#include "collector/daemon/symbols.h"
#include "collector/daemon/snap_host.h"
#include "collector/daemon/work.h"
#include "test_notice.h"
#include "test_proc.h"

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("collsnap");
}

/* What the done callback was told (the snapshot is freed after it). */
typedef struct {
  int calls;
  uint64_t id;
  int result;
  tg_coll_state_t state;
} done_t;

static void on_done(coll_t *c, coll_snap_t *s, void *ctx) {
  done_t *d = ctx;
  d->calls++;
  d->id = coll_snap_id(s);
  d->result = coll_snap_result(s, &d->state);
  /* Told once it is stored, and no longer under way. */
  assert_false(coll_snap_under_way(c, d->id));
}

static uint64_t begin(coll_unit_t *u, const char *group, done_t *d) {
  coll_trigger_req_t r = {.trigger = "operator", .reason = "unit",
                          .origin = "", .group = group};
  coll_snap_t *s;
  uint64_t id = 0;
  assert_int_equal(coll_snap_begin(&u->c, &r, on_done, d, &s, &id), 0);
  assert_true(id != 0);
  assert_int_equal(coll_snap_id(s), id);
  assert_true(coll_snap_under_way(&u->c, id));
  return id;
}

static void up(coll_unit_t *u, size_t n, const char *extra, const char *more) {
  coll_unit_open(u, n, extra, more, true);
  for (size_t i = 0; i < n; i++)
    coll_unit_wait_host(u, u->h[i].spec, COLL_HOST_TRACING, true);
}

/* A snapshot of |group| begun and waited for: its row's state, its host
 * rows in |hosts| (at most |max|, *n of them). */
static tg_coll_state_t snap_stored(coll_unit_t *u, const char *group,
                                   done_t *d, tg_coll_host_t *hosts,
                                   size_t max, size_t *n) {
  uint64_t id = begin(u, group, d);
  coll_unit_wait_idle(u);
  assert_int_equal(d->calls, 1);
  assert_int_equal(d->id, id);
  tg_coll_snapshot_t row;
  coll_unit_row(u, id, &row, hosts, max, n);
  return row.state;
}

/* The row's host spelt |spec| among |n|; fails when none. */
static const tg_coll_host_t *row_host(const tg_coll_host_t *hosts, size_t n,
                                      const char *spec) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(hosts[i].host, spec)) return &hosts[i];
  fail_msg("no host row for %s", spec);
  return NULL;
}

/* A group's snapshot asks its hosts only: the other host's standby
 * connection is not even borrowed; the snapshot's done callback runs
 * once, after the row is stored. */
static void a_snapshot_clones_the_hosts_of_its_group_only(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 2);
  char extra[128];
  snprintf(extra, sizeof(extra), "group = first %s\n", u.h[0].spec);
  up(&u, 2, extra, NULL);
  done_t d = {0};
  tg_coll_host_t hosts[2];
  size_t n;
  assert_int_equal(snap_stored(&u, "first", &d, hosts, 2, &n),
                   TG_COLL_COMPLETE);
  assert_int_equal(coll_unit_host(&u, u.h[1].spec)->sb.st, COLL_SB_READY);
  assert_int_equal(d.result, 0);
  assert_int_equal(d.state, TG_COLL_COMPLETE);
  assert_int_equal(n, 1);
  assert_string_equal(hosts[0].host, u.h[0].spec);
  assert_int_equal(hosts[0].outcome, TG_COLL_HOST_OK);
  /* The standby lent for the clone is back, ready for the next. */
  coll_unit_wait_host(&u, u.h[0].spec, COLL_HOST_TRACING, true);
  assert_int_equal(u.c.counts.snapshots[TG_COLL_COMPLETE], 1);
  assert_int_equal(u.c.counts.snap_host_bad_transitions, 0);
  assert_int_equal(u.c.counts.snap_bad_transitions, 0);
  coll_unit_close(&u);
}

/* A host of the inventory that does not trace (nothing listens there)
 * is not asked: it fails in the row with its state, the others deliver,
 * the snapshot is PARTIAL. */
static void a_host_not_tracing_is_named_and_not_asked(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 2);
  up(&u, 2, NULL, "127.0.0.1:1 name=relay.test\n");
  done_t d = {0};
  tg_coll_host_t hosts[3];
  size_t n;
  assert_int_equal(snap_stored(&u, "all", &d, hosts, 3, &n), TG_COLL_PARTIAL);
  assert_int_equal(n, 3);
  const tg_coll_host_t *dead = row_host(hosts, n, "127.0.0.1:1");
  assert_int_equal(dead->outcome, TG_COLL_HOST_FAILED);
  assert_int_equal(dead->packets, 0);
  assert_non_null(strstr(dead->error, "not tracing"));
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(row_host(hosts, n, u.h[i].spec)->outcome, TG_COLL_HOST_OK);
  assert_int_equal(u.c.counts.snap_host_bad_transitions, 0);
  assert_int_equal(u.c.counts.snap_bad_transitions, 0);
  coll_unit_close(&u);
}

/* A host's linux.ftrace stats (start, then end) say its kernel overwrote
 * events: the row counts the overrun in the host's loss, as the CLI's
 * summaries do, and in the daemon's host_loss. */
static void ftrace_overruns_are_a_hosts_loss(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 1);
  up(&u, 1, NULL, NULL);
  assert_int_equal(raw_producer_wait_started(&u.h[0].p, FLEET_WAIT_MS), 0);
  const uint64_t start[2] = {3, 4}, end[2] = {10, 24};
  fleet_commit_ftrace_stats(&u.h[0].p, 0, start, end, 2);
  done_t d = {0};
  tg_coll_host_t hosts[1];
  size_t n;
  assert_int_equal(snap_stored(&u, "all", &d, hosts, 1, &n), TG_COLL_COMPLETE);
  assert_int_equal(n, 1);
  assert_int_equal(hosts[0].outcome, TG_COLL_HOST_OK);
  assert_int_equal(hosts[0].loss, 27);
  assert_int_equal(u.c.counts.host_loss, 27);
  assert_int_equal(u.c.counts.snap_host_bad_transitions, 0);
  assert_int_equal(u.c.counts.snap_bad_transitions, 0);
  coll_unit_close(&u);
}

/* One host's linux.ftrace did not start (its probes could not open
 * tracefs): its row is PARTIAL with the problem and its code, the
 * snapshot is PARTIAL, never COMPLETE; the other host is OK; the ring
 * shows it and the reason is counted. */
static void a_host_whose_ftrace_did_not_start_is_partial(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 2);
  up(&u, 2, NULL, NULL);
  assert_int_equal(raw_producer_wait_started(&u.h[0].p, FLEET_WAIT_MS), 0);
  char *events[] = {"sched/sched_switch", "sched/sched_waking"};
  fleet_commit_ftrace_failure(&u.h[0].p, 0, events, 2);
  done_t d = {0};
  tg_coll_host_t hosts[2];
  size_t n;
  assert_int_equal(snap_stored(&u, "all", &d, hosts, 2, &n), TG_COLL_PARTIAL);
  const tg_coll_host_t *bad = row_host(hosts, n, u.h[0].spec);
  assert_int_equal(bad->outcome, TG_COLL_HOST_PARTIAL);
  assert_true(bad->packets > 0);
  assert_true(!strncmp(bad->error, "[TG-7010] linux.ftrace: ", 24));
  assert_non_null(strstr(bad->problems, "\"code\":\"TG-7010\""));
  assert_non_null(strstr(bad->problems, "\"kind\":\"data_source\""));
  assert_non_null(strstr(bad->problems, "\"events\":2"));
  const tg_coll_host_t *good = row_host(hosts, n, u.h[1].spec);
  assert_int_equal(good->outcome, TG_COLL_HOST_OK);
  assert_string_equal(good->problems, "");
  assert_int_equal(u.c.counts.ds_failures[TG_DS_NOT_STARTED], 1);
  assert_int_equal(u.c.counts.ds_failures[TG_DS_EVENTS_REFUSED], 0);
  const coll_host_t *h0 = coll_unit_host(&u, u.h[0].spec);
  assert_non_null(h0->seen);
  assert_int_equal(h0->seen->n, 1);
  assert_null(coll_unit_host(&u, u.h[1].spec)->seen);
  assert_int_equal(u.c.counts.snap_host_bad_transitions, 0);
  assert_int_equal(u.c.counts.snap_bad_transitions, 0);
  coll_unit_close(&u);
}

/* A host whose relay answers ReadBuffers without end passes the
 * snapshot's per-host cap: it fails, named by the key, and the other
 * host's data is stored (PARTIAL). */
static void a_host_past_its_cap_fails_alone(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 2);
  u.hostile = fleet_hostile_start(&u.h[0], TG_HOSTILE_ENDLESS_READ);
  up(&u, 2, "snapshot_host_max_bytes = 256K\n", NULL);
  done_t d = {0};
  tg_coll_host_t hosts[2];
  size_t n;
  assert_int_equal(snap_stored(&u, "all", &d, hosts, 2, &n), TG_COLL_PARTIAL);
  const tg_coll_host_t *bad = row_host(hosts, n, u.h[0].spec);
  assert_int_not_equal(bad->outcome, TG_COLL_HOST_OK);
  assert_non_null(strstr(bad->error, "snapshot_host_max_bytes"));
  assert_true(bad->bytes <= 256u << 10);
  assert_int_equal(row_host(hosts, n, u.h[1].spec)->outcome, TG_COLL_HOST_OK);
  assert_int_equal(u.c.counts.snap_host_bad_transitions, 0);
  assert_int_equal(u.c.counts.snap_bad_transitions, 0);
  coll_unit_close(&u);
}

static bool running(coll_unit_t *u, void *arg) {
  (void)arg;
  return u->c.n_running > 0;
}

/* Both hosts' producers hold the clone's flush (the ring's flush timeout
 * is two minutes): the hosts are silent. On the daemon's clock, one
 * millisecond short of clone_timeout nothing fails; past it both fail,
 * named by the key, and the row is FAILED (no host delivered). The
 * clone_timeout is longer than this test's waits: only the daemon's
 * clock can make it pass. The snapshot's duration (the metrics'
 * histogram) is measured on the same clock: past the last bound. */
static void clone_timeout_counts_on_the_daemons_clock(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 120000};
  coll_unit_hosts(&u, 2);
  up(&u, 2, "clone_timeout = 100s\n", NULL);
  assert_true(u.c.cfg.clone_timeout_ms > FLEET_WAIT_MS);
  done_t d = {0};
  uint64_t id = begin(&u, "all", &d);
  u.now_ms += 99999;
  /* The deadline looks every second (a tenth of clone_timeout). */
  coll_unit_run_for(&u, 1500);
  assert_true(running(&u, NULL));
  assert_int_equal(d.calls, 0);
  u.now_ms += 2;
  coll_unit_wait_idle(&u);
  assert_int_equal(d.calls, 1);
  tg_coll_snapshot_t row;
  tg_coll_host_t hosts[2];
  size_t n;
  coll_unit_row(&u, id, &row, hosts, 2, &n);
  assert_int_equal(row.state, TG_COLL_FAILED);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(hosts[i].outcome, TG_COLL_HOST_FAILED);
    assert_non_null(strstr(hosts[i].error, "clone_timeout"));
  }
  const coll_counts_t *k = &u.c.counts;
  assert_int_equal(k->dur_count, 1);
  assert_int_equal(k->dur_buckets[7], 0); /* 60 s: not within it */
  assert_true(k->dur_sum_s > 100.0 && k->dur_sum_s < 100.1);
  assert_int_equal(u.c.counts.snap_host_bad_transitions, 0);
  assert_int_equal(u.c.counts.snap_bad_transitions, 0);
  coll_unit_close(&u);
}

/* The trickler's read is made endless (its ring read whole, the trickle
 * begun) and the other host's clone is read and freed: its standby
 * connection, lent at the snapshot's start, is back. */
static bool trickling(coll_unit_t *u, void *arg) {
  const char *other = arg;
  tg_hostile_stats_t st;
  tg_hostile_relay_stats(u->hostile, &st);
  return st.endless_reads > 0 && st.forged_packets > 0 &&
         coll_unit_host(u, other)->sb.st == COLL_SB_READY;
}

/* Host A's relay, once A's ring is read, sends one small packet every
 * 10 ms of real time, endlessly: never silent, far under the floor. All
 * real waits happen with the daemon's clock still; then it moves a
 * quarter of clone_timeout at a time. A fails with the rate's code once
 * a clone_timeout has passed on the daemon's clock since its clone's
 * answer, what it sent before kept (PARTIAL, its bytes counted); B's
 * data is stored whole; the snapshot ends long before its 120 s
 * deadline, which was all that ended it before the floor. */
static void a_host_that_trickles_fails_at_the_rate_floor(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 2);
  u.hostile = fleet_hostile_start(&u.h[0], TG_HOSTILE_TRICKLE);
  up(&u, 2, "clone_timeout = 1s\nclone_min_rate = 1M\n", NULL);
  for (size_t i = 0; i < 2; i++) {
    assert_int_equal(raw_producer_wait_started(&u.h[i].p, FLEET_WAIT_MS), 0);
    fleet_commit_packets(&u.h[i].p, 0, i ? "fastB" : "slowA", 1, 3);
  }
  done_t d = {0};
  const int64_t t0 = u.now_ms;
  uint64_t id = begin(&u, "all", &d);
  coll_unit_wait(&u, trickling, u.h[1].spec);
  assert_true(running(&u, NULL));
  while (running(&u, NULL)) {
    /* Half the snapshot's deadline: the floor has long failed A. */
    assert_true(u.now_ms - t0 < 60000);
    u.now_ms += 250;
    coll_unit_run_for(&u, 150);
  }
  /* Not judged before a whole clone_timeout since the clone's answer. */
  assert_true(u.now_ms - t0 >= 1000);
  coll_unit_wait_idle(&u);
  assert_int_equal(d.calls, 1);
  tg_coll_snapshot_t row;
  tg_coll_host_t hosts[2];
  size_t n;
  coll_unit_row(&u, id, &row, hosts, 2, &n);
  assert_int_equal(row.state, TG_COLL_PARTIAL);
  const tg_coll_host_t *slow = row_host(hosts, n, u.h[0].spec);
  assert_int_equal(slow->outcome, TG_COLL_HOST_PARTIAL);
  assert_true(slow->packets >= 3);
  assert_true(slow->bytes > 0);
  assert_notice(slow->error, TG_N_COLLECTOR_HOST_TOO_SLOW);
  const tg_coll_host_t *fast = row_host(hosts, n, u.h[1].spec);
  assert_int_equal(fast->outcome, TG_COLL_HOST_OK);
  assert_true(fast->packets >= 3);
  assert_int_equal(u.c.counts.snap_host_bad_transitions, 0);
  assert_int_equal(u.c.counts.snap_bad_transitions, 0);
  coll_unit_close(&u);
}

/* What the trigger policy sees: a snapshot whose clones wait on a dial
 * has none requested and the origin's still to come; once the clones are
 * sent, neither. At most COLL_RUNNING_MAX run at once (-EBUSY, nothing
 * begun); a cut ends the hosts still at work, and the snapshots with
 * them. */
static void the_policy_sees_what_is_to_come_and_a_cut_ends_all(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  coll_unit_hosts(&u, 2);
  up(&u, 2, "clone_timeout = 90s\n", NULL);
  coll_host_t *a = coll_unit_host(&u, u.h[0].spec);
  coll_host_t *b = coll_unit_host(&u, u.h[1].spec);
  for (size_t i = 0; i < 2; i++) coll_standby_close(u.c.hosts[i]);
  done_t d[COLL_RUNNING_MAX] = {{0}};
  begin(&u, "all", &d[0]);
  tg_trigger_snap_view_t v;
  coll_snap_view(u.c.running[0], a, &v);
  assert_string_equal(v.group, "all");
  assert_int_equal(v.started_ms, u.now_ms);
  assert_true(v.none_requested);
  assert_true(v.origin_to_come);
  /* Dialed, then CloneSession sent on each connection. */
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    coll_unit_run_for(&u, 20);
    coll_snap_view(u.c.running[0], b, &v);
    if (!v.none_requested && !v.origin_to_come) break;
    assert_true(tg_test_now_ms() < end);
  }
  coll_snap_view(u.c.running[0], NULL, &v);
  assert_false(v.origin_to_come); /* not a host's trigger */
  for (size_t i = 1; i < COLL_RUNNING_MAX; i++) begin(&u, "all", &d[i]);
  coll_trigger_req_t r = {.trigger = "operator", .origin = "", .group = "all"};
  coll_snap_t *s;
  uint64_t id = 0;
  assert_int_equal(coll_snap_begin(&u.c, &r, on_done, NULL, &s, &id), -EBUSY);
  assert_int_equal(id, 0);
  assert_int_equal(u.c.n_running, COLL_RUNNING_MAX);
  coll_snap_t *cut[COLL_RUNNING_MAX];
  memcpy(cut, u.c.running, sizeof(cut));
  for (size_t i = 0; i < COLL_RUNNING_MAX; i++) coll_snap_cut(cut[i]);
  coll_unit_wait_idle(&u);
  for (size_t i = 0; i < COLL_RUNNING_MAX; i++) {
    assert_int_equal(d[i].calls, 1);
    tg_coll_snapshot_t row;
    tg_coll_host_t hosts[2];
    size_t n;
    coll_unit_row(&u, d[i].id, &row, hosts, 2, &n);
    assert_int_equal(d[i].state, TG_COLL_FAILED);
    assert_int_equal(row.state, TG_COLL_FAILED);
    for (size_t j = 0; j < n; j++)
      assert_non_null(strstr(hosts[j].error, "stopping"));
  }
  assert_int_equal(u.c.counts.snap_host_bad_transitions, 0);
  assert_int_equal(u.c.counts.snap_bad_transitions, 0);
  coll_unit_close(&u);
}

static void the_host_table_is_snap_host_h_s(void **state) {
  (void)state;
  static const struct {
    coll_sh_state_t from, to;
  } arrows[] = {
      {COLL_SH_NEW, COLL_SH_SKIPPED},      {COLL_SH_NEW, COLL_SH_ACTIVE},
      {COLL_SH_NEW, COLL_SH_RELEASED},     {COLL_SH_ACTIVE, COLL_SH_CLOSING},
      {COLL_SH_ACTIVE, COLL_SH_RELEASED},  {COLL_SH_CLOSING, COLL_SH_RELEASED},
  };
  for (int f = 0; f <= COLL_SH_STATE_COUNT; f++)
    for (int t = 0; t <= COLL_SH_STATE_COUNT; t++) {
      bool want = false;
      for (size_t i = 0; i < sizeof(arrows) / sizeof(arrows[0]); i++)
        want |= (int)arrows[i].from == f && (int)arrows[i].to == t;
      assert_int_equal(coll_sh_transition_ok(f, t), want);
    }
  assert_string_equal(coll_sh_state_name(COLL_SH_CLOSING), "closing");
  assert_string_equal(coll_sh_state_name(COLL_SH_STATE_COUNT), "?");
}

/* A clock for work on a pool thread that moves by |step_ns| at each
 * reading: the job's second reading of its clock is already past a
 * deadline of |step_ns| from its first, however fast the machine. */
typedef struct step_clock {
  tg_clock_t clock;
  _Atomic uint64_t ns;
  uint64_t step_ns;
  _Atomic unsigned reads;
} step_clock_t;

static uint64_t step_ns(const tg_clock_t *k) {
  step_clock_t *sc = k->ctx;
  atomic_fetch_add(&sc->reads, 1);
  return atomic_fetch_add(&sc->ns, sc->step_ns) + sc->step_ns;
}

static uint64_t step_ms(const tg_clock_t *k) { return step_ns(k) / 1000000u; }

static uint64_t step_wall_ms(const tg_clock_t *k) {
  (void)k;
  return TG_CLOCK_SIM_WALL_START_MS;
}

/* Whether the symbolize job of |arg| (a snapshot id) ended. */
static bool symbolized(coll_unit_t *u, void *arg) {
  json_t *j = coll_symbols_json(&u->c, *(uint64_t *)arg);
  const char *st = json_string_value(json_object_get(j, "state"));
  bool over = st && (!strcmp(st, "failed") || !strcmp(st, "done"));
  json_decref(j);
  return over;
}

/* The symbolize deadline (symbolize_timeout) reads the daemon's clock for
 * pool work (coll_t.work_clock): once that clock passed it, the job gives
 * up and says so in the snapshot's symbols state, with no time spent. */
static void symbolize_gives_up_past_its_deadline_on_the_daemons_clock(
    void **state) {
  (void)state;
  enum { TIMEOUT_S = 600 };
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 1);
  char extra[96];
  snprintf(extra, sizeof(extra), "symbolize = local\nsymbolize_timeout = %ds\n",
           TIMEOUT_S);
  up(&u, 1, extra, NULL);
  step_clock_t sc = {.step_ns = (uint64_t)TIMEOUT_S * 1000000000u};
  sc.clock = (tg_clock_t){.now_ms = step_ms, .now_ns = step_ns,
                          .now_wall_ms = step_wall_ms, .ctx = &sc};
  coll_set_work_clock_for_test(&u.c, &sc.clock);
  done_t d = {0};
  tg_coll_host_t hosts[1];
  size_t n;
  assert_int_equal(snap_stored(&u, "all", &d, hosts, 1, &n), TG_COLL_COMPLETE);
  coll_unit_wait(&u, symbolized, &d.id);
  json_t *j = coll_symbols_json(&u.c, d.id);
  assert_string_equal(json_string_value(json_object_get(j, "state")), "failed");
  assert_string_equal(json_string_value(json_object_get(j, "why")),
                      "out of time (symbolize_timeout)");
  json_decref(j);
  /* The deadline taken, then one look at it: nothing read past it. */
  assert_int_equal(atomic_load(&sc.reads), 2);
  coll_unit_close(&u);
}

/* A job on the pool (coll_work_queue) when the collector stops: the loop
 * stops only once the job has come back, so that no pool thread is still
 * at work when main returns (a function shares job once met, in
 * libcrypto, the process exit's OpenSSL cleanup). The host's connection
 * keeps the loop alive: only coll_stop_if_idle's uv_stop ends the run,
 * or the guard past FLEET_WAIT_MS. */
typedef struct {
  coll_work_t w;
  atomic_bool release, worked;
  bool back, timed_out;
} slow_job_t;

static void slow_work(uv_work_t *r) {
  slow_job_t *j = r->data;
  while (!atomic_load(&j->release)) usleep(1000);
  atomic_store(&j->worked, true);
}

static void slow_back(uv_work_t *r, int status) {
  slow_job_t *j = r->data;
  assert_int_equal(status, 0);
  assert_true(atomic_load(&j->worked));
  j->back = true;
}

static void on_release(uv_timer_t *t) {
  atomic_store(&((slow_job_t *)t->data)->release, true);
}

static void on_guard(uv_timer_t *t) {
  ((slow_job_t *)t->data)->timed_out = true;
  uv_stop(t->loop);
}

static void a_stop_waits_for_the_jobs_on_the_pool(void **state) {
  (void)state;
  coll_unit_t u = {0};
  coll_unit_hosts(&u, 1);
  up(&u, 1, NULL, NULL);
  slow_job_t j = {0};
  j.w.req.data = &j;
  uv_timer_t release, guard;
  uv_timer_init(&u.loop, &release);
  uv_timer_init(&u.loop, &guard);
  release.data = guard.data = &j;
  assert_int_equal(coll_work_queue(&u.c, &j.w, slow_work, slow_back), 0);
  assert_int_equal(u.c.n_work, 1);
  uv_timer_start(&release, on_release, 50, 0);
  uv_timer_start(&guard, on_guard, FLEET_WAIT_MS, 0);
  /* coll_stop's last step (the rest of it needs the HTTP API and the
   * schedule, which this harness has not). */
  u.c.stopping = true;
  coll_stop_if_idle(&u.c);
  uv_run(&u.loop, UV_RUN_DEFAULT);
  assert_false(j.timed_out);
  assert_true(j.back);
  assert_int_equal(u.c.n_work, 0);
  uv_close((uv_handle_t *)&release, NULL);
  uv_close((uv_handle_t *)&guard, NULL);
  u.c.stopping = false; /* coll_unit_close ends the hosts its own way */
  coll_unit_close(&u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(a_snapshot_clones_the_hosts_of_its_group_only),
      FLEET_TEST(a_host_not_tracing_is_named_and_not_asked),
      FLEET_TEST(a_host_past_its_cap_fails_alone),
      FLEET_TEST(ftrace_overruns_are_a_hosts_loss),
      FLEET_TEST(a_host_whose_ftrace_did_not_start_is_partial),
      FLEET_TEST(clone_timeout_counts_on_the_daemons_clock),
      FLEET_TEST(symbolize_gives_up_past_its_deadline_on_the_daemons_clock),
      FLEET_TEST(a_host_that_trickles_fails_at_the_rate_floor),
      FLEET_TEST(the_policy_sees_what_is_to_come_and_a_cut_ends_all),
      FLEET_TEST(a_stop_waits_for_the_jobs_on_the_pool),
      cmocka_unit_test(the_host_table_is_snap_host_h_s),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
