/* api.c, the HTTP API's shell over the daemon, in the test's process
 * (coll_unit.h) with its listener started (coll_api_start) and requests
 * made by tg-test-http children (coll_e2e.h) while the test runs the daemon's
 * loop: a POST with wait=1 answered once its snapshot is stored, waiters
 * folded into the queued snapshot told its id when it begins (or 503 when
 * it cannot), a waiter whose client left forgotten, and what /metrics and
 * /api/v1/hosts say of the daemon's counters and hosts, and the name the
 * operator gave each host in /api/v1/hosts and a snapshot's hosts.
 * Answers are read as JSON and metric samples.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_unit.h"
#include "collector/daemon/page_assets.h"
#include "collector/http/http.h"
#include "collector/catalog/snapshot_id.h"
#include "test_proc.h"
#include "test_wait.h"

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("collapi");
}

static collector_t up(coll_unit_t *u) {
  coll_unit_hosts(u, 2);
  coll_unit_open(u, 2, "clone_timeout = 90s\n", NULL, true);
  for (size_t i = 0; i < 2; i++)
    coll_unit_wait_host(u, u->h[i].spec, COLL_HOST_TRACING, true);
  assert_int_equal(coll_api_start(&u->c), 0);
  return (collector_t){.pid = 0, .port = tg_http_server_port(u->c.http)};
}

static void down(coll_unit_t *u) {
  coll_api_stop(&u->c);
  coll_unit_close(u);
}

/* A request in flight: its answer is complete once python wrote the
 * last of its files. */
typedef struct {
  pid_t pid;
  char out[256];
  char last[264];
} req_t;

static void req_start(req_t *q, const collector_t *c, const char *method,
                      const char *path, const char *out) {
  snprintf(q->out, sizeof(q->out), "%s", fleet_in_dir(out));
  snprintf(q->last, sizeof(q->last), "%s.length", q->out);
  unlink(q->last);
  q->pid = http_spawn(c, method, path, q->out);
}

static bool answered(coll_unit_t *u, void *arg) {
  (void)u;
  return access(((req_t *)arg)->last, F_OK) == 0;
}

/* Runs the loop until |q| is answered; returns its status. */
static int req_wait(coll_unit_t *u, req_t *q) {
  coll_unit_wait(u, answered, q);
  return http_wait(q->pid, q->out);
}

static int request(coll_unit_t *u, const collector_t *c, const char *method,
                   const char *path, const char *out) {
  req_t q;
  req_start(&q, c, method, path, out);
  return req_wait(u, &q);
}

static bool waiters(coll_unit_t *u, void *arg) {
  return u->c.api.n_waiters == *(size_t *)arg;
}

static void wait_waiters(coll_unit_t *u, size_t n) {
  coll_unit_wait(u, waiters, &n);
}

/* POST wait=1 is answered only once its snapshot is stored: 200 and the
 * row, complete. */
static void a_waiting_post_is_answered_once_stored(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  collector_t c = up(&u);
  req_t q;
  req_start(&q, &c, "POST", "/api/v1/snapshots?wait=1&reason=unit", "wait.json");
  wait_waiters(&u, 1);
  assert_int_equal(u.c.n_running, 1);
  assert_false(answered(&u, &q));
  coll_unit_flush_until_idle(&u);
  assert_int_equal(req_wait(&u, &q), 200);
  assert_int_equal(u.c.api.n_waiters, 0);
  assert_json(q.out, "snapshot.state", "\"complete\"");
  assert_json(q.out, "snapshot.reason", "\"unit\"");
  down(&u);
}

static uint64_t operator_snapshot(coll_unit_t *u) {
  coll_trigger_req_t r = {.trigger = "operator", .reason = "", .origin = "",
                          .group = "all"};
  uint64_t id;
  assert_int_equal(coll_trigger(&u->c, &r, &id), 0);
  return id;
}

/* Four snapshots under way and one queued: a POST wait=1 folds into the
 * queued one; once it begins, the waiter has its id, and is answered when
 * it is stored. */
static void a_waiter_of_the_queued_snapshot_gets_its_id(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  collector_t c = up(&u);
  uint64_t ids[COLL_RUNNING_MAX];
  for (size_t i = 0; i < COLL_RUNNING_MAX; i++) {
    u.now_ms += 1; /* none serves the next: coalesce_window is 0 */
    ids[i] = operator_snapshot(&u);
    assert_true(ids[i] != 0);
  }
  assert_int_equal(operator_snapshot(&u), 0); /* queued */
  assert_true(u.c.queued);
  req_t q;
  req_start(&q, &c, "POST", "/api/v1/snapshots?wait=1", "queued.json");
  wait_waiters(&u, 1);
  assert_int_equal(u.c.counts.triggers_coalesced, 1);
  coll_unit_flush_until_idle(&u);
  assert_int_equal(req_wait(&u, &q), 200);
  assert_json(q.out, "snapshot.state", "\"complete\"");
  const char *id = tg_test_json(q.out, "snapshot.id");
  assert_non_null(id);
  for (size_t i = 0; i < COLL_RUNNING_MAX; i++) {
    char idt[TG_COLL_ID_STRLEN], quoted[TG_COLL_ID_STRLEN + 2];
    tg_coll_id_format(ids[i], idt);
    snprintf(quoted, sizeof(quoted), "\"%s\"", idt);
    assert_string_not_equal(id, quoted);
  }
  assert_int_equal(u.c.counts.snapshots[TG_COLL_COMPLETE], 5);
  down(&u);
}

/* A queued snapshot that cannot begin answers its waiters 503; a waiter
 * whose client went away is dropped once its snapshot ends (its snapshot
 * still stored). */
static void a_waiter_is_answered_503_or_dropped(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  collector_t c = up(&u);
  for (size_t i = 0; i < COLL_RUNNING_MAX; i++) {
    u.now_ms += 1;
    assert_true(operator_snapshot(&u) != 0);
  }
  assert_int_equal(operator_snapshot(&u), 0);
  req_t folded, gone;
  req_start(&folded, &c, "POST", "/api/v1/snapshots?wait=1", "folded.json");
  wait_waiters(&u, 1);
  /* As trigger.c does when the queued snapshot's begin fails. */
  u.c.queued = false;
  coll_api_queued_failed(&u.c, -ENOSPC);
  assert_int_equal(u.c.api.n_waiters, 0);
  assert_int_equal(req_wait(&u, &folded), 503);
  assert_non_null(tg_test_json(folded.out, "error"));
  /* A waiter on a snapshot under way, whose client then leaves. */
  u.now_ms += 1;
  req_start(&gone, &c, "POST", "/api/v1/snapshots?wait=1", "gone.json");
  wait_waiters(&u, 1);
  assert_int_equal(kill(gone.pid, SIGKILL), 0);
  tg_test_reap(gone.pid, FLEET_WAIT_MS);
  /* Its connection only half-closed (FIN): the client may still read, so
   * the waiter stays until its snapshot ends, and goes then. */
  coll_unit_run_for(&u, 100);
  assert_int_equal(u.c.api.n_waiters, 1);
  coll_unit_flush_until_idle(&u);
  wait_waiters(&u, 0);
  assert_int_equal(u.c.counts.snapshots[TG_COLL_COMPLETE], COLL_RUNNING_MAX + 1);
  down(&u);
}

/* The value of sample |name| in the /metrics text at |path|. */
static long long sample(const char *path, const char *name) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[512];
  size_t n = strlen(name);
  long long v = -1;
  while (v < 0 && fgets(line, sizeof(line), f))
    if (!strncmp(line, name, n) && line[n] == ' ') v = atoll(line + n + 1);
  fclose(f);
  if (v < 0) fail_msg("no sample %s", name);
  return v;
}

/* /metrics shows the daemon's counters and its hosts by state;
 * /api/v1/hosts each host with its state and ring key. */
static void metrics_and_hosts_say_what_the_daemon_counts(void **state) {
  (void)state;
  coll_unit_t u = {0};
  collector_t c = up(&u);
  coll_counts_t *k = &u.c.counts;
  k->trigger_hits = 7;
  k->triggers_coalesced = 2;
  k->triggers_capped[TG_TRIGGER_BUDGET_HOST] = 3;
  k->triggers_capped[TG_TRIGGER_BUDGET_SCHEDULE] = 1;
  k->snapshots[TG_COLL_PARTIAL] = 4;
  k->snapshot_errors = 5;
  k->standby_bad_transitions = 6;
  const char *m = fleet_in_dir("metrics.txt");
  assert_int_equal(request(&u, &c, "GET", "/metrics", "metrics.txt"), 200);
  assert_int_equal(sample(m, "tracegate_collector_trigger_hits_total"), 7);
  assert_int_equal(sample(m, "tracegate_collector_triggers_coalesced_total"), 2);
  assert_int_equal(sample(m, "tracegate_collector_triggers_capped_total{budget=\"host\"}"), 3);
  assert_int_equal(sample(m, "tracegate_collector_triggers_capped_total{budget=\"hosts\"}"), 0);
  assert_int_equal(sample(m, "tracegate_collector_triggers_capped_total{budget=\"schedule\"}"), 1);
  assert_int_equal(sample(m, "tracegate_collector_snapshots_total{outcome=\"partial\"}"), 4);
  assert_int_equal(sample(m, "tracegate_collector_snapshots_total{outcome=\"error\"}"), 5);
  assert_int_equal(sample(m, "tracegate_collector_hosts{state=\"tracing\"}"), 2);
  assert_int_equal(sample(m, "tracegate_collector_hosts{state=\"failed\"}"), 0);
  assert_int_equal(sample(m, "tracegate_collector_state_moves_refused_total{machine=\"standby\"}"), 6);
  assert_int_equal(sample(m, "tracegate_collector_state_moves_refused_total{machine=\"symbolize\"}"), 0);
  k->standby_bad_transitions = 0; /* set by hand: the close checks none */

  const char *h = fleet_in_dir("hosts.json");
  assert_int_equal(request(&u, &c, "GET", "/api/v1/hosts", "hosts.json"), 200);
  for (size_t i = 0; i < 2; i++) {
    char key[32], want[TG_COLL_HOST_MAX + 3];
    snprintf(key, sizeof(key), "hosts.%zu.host", i);
    const char *spec = tg_test_json(h, key);
    assert_non_null(spec);
    coll_host_t *ch = NULL;
    for (size_t j = 0; j < u.c.n; j++) {
      snprintf(want, sizeof(want), "\"%s\"", u.c.hosts[j]->t.spec);
      if (!strcmp(spec, want)) ch = u.c.hosts[j];
    }
    assert_non_null(ch);
    snprintf(key, sizeof(key), "hosts.%zu.state", i);
    assert_json(h, key, "\"tracing\"");
  }
  down(&u);
}

/* The index of the host |spec| in the "hosts" array of the JSON answer at
 * |path| (|n| entries, at |prefix|: "hosts" or "snapshot.hosts"). */
static size_t host_at(const char *path, const char *prefix, size_t n,
                      const char *spec) {
  char want[TG_COLL_HOST_MAX + 3];
  snprintf(want, sizeof(want), "\"%s\"", spec);
  for (size_t i = 0; i < n; i++) {
    char key[64];
    snprintf(key, sizeof(key), "%s.%zu.host", prefix, i);
    const char *got = tg_test_json(path, key);
    if (got && !strcmp(got, want)) return i;
  }
  fail_msg("host %s is not in %s", spec, path);
  return n;
}

/* Each host's name, the operator's (hosts file: label=, else a name= no
 * other host has, else the spec), in /api/v1/hosts and in each host of a
 * stored snapshot (/api/v1/snapshots/ID), beside the spec and apart from
 * the hostname the host reports. */
static void hosts_and_snapshot_hosts_carry_the_operators_name(void **state) {
  (void)state;
  coll_unit_t u = {.flush_timeout_ms = 60000};
  coll_unit_hosts(&u, 2);
  char more[160];
  snprintf(more, sizeof(more), "%s name=relay.test label=db-primary\n",
           u.h[1].spec);
  coll_unit_open(&u, 1, "clone_timeout = 90s\n", more, true);
  for (size_t i = 0; i < 2; i++)
    coll_unit_wait_host(&u, u.h[i].spec, COLL_HOST_TRACING, true);
  assert_int_equal(coll_api_start(&u.c), 0);
  collector_t c = {.pid = 0, .port = tg_http_server_port(u.c.http)};
  static const char *const want[2] = {"\"relay.test\"", "\"db-primary\""};

  const char *h = fleet_in_dir("hosts.json");
  assert_int_equal(request(&u, &c, "GET", "/api/v1/hosts", "hosts.json"), 200);
  for (size_t i = 0; i < 2; i++) {
    char key[64];
    snprintf(key, sizeof(key), "hosts.%zu.name",
             host_at(h, "hosts", 2, u.h[i].spec));
    assert_json(h, key, want[i]);
  }

  req_t q;
  req_start(&q, &c, "POST", "/api/v1/snapshots?wait=1&reason=names",
            "names.json");
  wait_waiters(&u, 1);
  coll_unit_flush_until_idle(&u);
  assert_int_equal(req_wait(&u, &q), 200);
  const char *id = tg_test_json(q.out, "snapshot.id");
  assert_non_null(id);
  char path[64];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%.*s", (int)strlen(id) - 2,
           id + 1);
  const char *snap = fleet_in_dir("snap.json");
  assert_int_equal(request(&u, &c, "GET", path, "snap.json"), 200);
  for (size_t i = 0; i < 2; i++) {
    char key[64];
    snprintf(key, sizeof(key), "hosts.%zu.name",
             host_at(snap, "hosts", 2, u.h[i].spec));
    assert_json(snap, key, want[i]);
  }
  down(&u);
}

/* The file the request wrote is |n| bytes of |want|. */
static void assert_body(const char *path, const void *want, size_t n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char *got = malloc(n + 1);
  assert_non_null(got);
  assert_int_equal(fread(got, 1, n + 1, f), n);
  fclose(f);
  assert_memory_equal(got, want, n);
  free(got);
}

/* page.c over the listener: the page (at / and /index.html) rendered
 * with the config's UI URL, its script and style byte for byte as
 * embedded. */
static void the_page_and_its_files_are_served_whole(void **state) {
  (void)state;
  coll_unit_t u = {0};
  collector_t c = up(&u);
  char *page = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&page, &len);
  assert_non_null(f);
  assert_int_equal(coll_page_render(f, u.c.cfg.ui_url), 0);
  assert_int_equal(fclose(f), 0);
  static const char *const at[] = {"/", "/index.html"};
  for (size_t i = 0; i < 2; i++) {
    assert_int_equal(request(&u, &c, "GET", at[i], "page.html"), 200);
    assert_int_equal(http_length(fleet_in_dir("page.html")), (long long)len);
    assert_body(fleet_in_dir("page.html"), page, len);
  }
  free(page);
  static const char *const files[] = {"app.js", "style.css"};
  for (size_t i = 0; i < 2; i++) {
    char path[32];
    snprintf(path, sizeof(path), "/%s", files[i]);
    const coll_page_asset_t *a = coll_page_asset(files[i]);
    assert_non_null(a);
    assert_int_equal(request(&u, &c, "GET", path, "asset"), 200);
    assert_body(fleet_in_dir("asset"), a->bytes, a->len);
  }
  down(&u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(a_waiting_post_is_answered_once_stored),
      FLEET_TEST(a_waiter_of_the_queued_snapshot_gets_its_id),
      FLEET_TEST(a_waiter_is_answered_503_or_dropped),
      FLEET_TEST(metrics_and_hosts_say_what_the_daemon_counts),
      FLEET_TEST(the_page_and_its_files_are_served_whole),
      FLEET_TEST(hosts_and_snapshot_hosts_carry_the_operators_name),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
