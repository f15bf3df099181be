/* tracegate-collector's web page in a real headless Chromium: what an
 * operator sees and clicks, not only what the API answers. Two hosts and
 * the collector as in test_collector_e2e (coll_e2e.h), one operator
 * snapshot fetched through the API, one failed (the collector killed
 * under it), one partial (a host's relay killed) with a long reason, then
 * browser_check.py (its docstring says what it checks) drives Chromium
 * through chromedriver in a 1280x800 window: the page lists the
 * snapshots and the hosts, its download link gives the API's bytes, "Open
 * in Perfetto UI" hands the same bytes to a stand-in UI on a second
 * origin through the UI's postMessage handshake, every column fits the
 * screen, the long reason is cut and opens whole, times carry their
 * zone, the partial snapshot names its failed host and why, its detail
 * lists its hosts, the filters change the list as the API's arguments
 * do, the snapshot's detail shows each host's perf boost and the
 * snapshot's symbols state (the collector runs with perf_boost_window
 * and linux.perf in its rings, which a second raw producer on each host
 * offers: every boost runs its window and is read, a real row), and a
 * UI that never
 * answers or cannot be reached is said to be so within a bounded time,
 * with the download offered instead.
 *
 * The stand-in's port must be in the collector's config before the
 * collector starts: the script binds it first and says "ui-port N" on a
 * pipe; it gets the rest (collector URL, snapshot, file, hosts) as one
 * JSON line on its stdin once the snapshot exists.
 *
 * Chromium and chromedriver come from Debian (deploy/deps.sh installs
 * them); without them this test fails and says so, rather than passing
 * having checked nothing.
 */
#include <fcntl.h>
#include <signal.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "common/json.h"
#include "fleet_harness.h"
#include "test_proc.h"
#include "test_wait.h"

#ifndef TG_BROWSER_CHECK_PATH
#error "TG_BROWSER_CHECK_PATH must name tests/collector/browser_check.py"
#endif

#define CHROMIUM "/usr/bin/chromium"
#define CHROMEDRIVER "/usr/bin/chromedriver"
/* The script's own waits are bounded well inside this. */
#define BROWSER_CHECK_MS 120000

typedef struct browser_check {
  pid_t pid;
  int job_fd; /* its stdin */
  int ui_port;
} browser_check_t;

/* Starts browser_check.py; back once its stand-in UI listens. */
static void browser_check_start(browser_check_t *b) {
  int ready[2], job[2];
  assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
  assert_int_equal(pipe2(job, O_CLOEXEC), 0);
  char fd[16];
  snprintf(fd, sizeof(fd), "%d", ready[1]);
  const char *argv[] = {"/usr/bin/python3", TG_BROWSER_CHECK_PATH,
                        "--chromium", CHROMIUM, "--chromedriver", CHROMEDRIVER,
                        "--ready-fd", fd, "--dir", fleet_in_dir("browser"),
                        NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = "/usr/bin/python3";
  s.argv = argv;
  s.stdin_fd = job[0];
  s.keep_fd = ready[1];
  b->pid = tg_test_spawn(&s);
  assert_true(b->pid > 0);
  close(ready[1]);
  close(job[0]);
  b->job_fd = job[1];
  char line[64];
  assert_int_equal(tg_test_wait_line(ready[0], "ui-port ", FLEET_WAIT_MS, line, sizeof(line)), 1);
  close(ready[0]);
  b->ui_port = atoi(line + strlen("ui-port "));
  assert_true(b->ui_port > 0);
}

/* Hands it the job; returns its exit code once it is done. */
static int browser_check_run(browser_check_t *b, const collector_t *c,
                             const char *id, const char *failed,
                             const char *partial, const char *trace,
                             const fleet_host_t h[2]) {
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", c->port);
  json_t *job = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:[s, s]}", "url",
                          url, "snapshot", id, "failed", failed, "partial",
                          partial, "down", h[1].spec, "trace", trace,
                          "hosts", h[0].spec, h[1].spec);
  assert_non_null(job);
  FILE *f = fdopen(b->job_fd, "w");
  assert_non_null(f);
  assert_int_equal(tg_json_dumpf_line(job, f, 0), 0);
  json_decref(job);
  assert_int_equal(fclose(f), 0);
  return tg_test_exit_code(tg_test_reap(b->pid, BROWSER_CHECK_MS));
}

/* A reason as long as an alert's raw JSON: longer than any column of a
 * laptop's screen, percent-encoded for the POST. */
#define LONG_REASON                                                        \
  "%7B%22alertname%22%3A%22HighTailLatency%22%2C%22instance%22%3A%22"     \
  "checkout-7f9c.prod.example%3A9100%22%2C%22summary%22%3A%22p99%20"      \
  "latency%20of%20%2Fapi%2Fcart%20above%202s%20for%205%20minutes%22%2C"  \
  "%22runbook%22%3A%22https%3A%2F%2Frunbooks.example%2Flatency%23cart"   \
  "-p99-above-budget-check-upstreams-first%22%7D"

/* An operator's snapshot with LONG_REASON while host 1's relay is down:
 * partial, host 1 failed. Returns the id (a static buffer). */
static const char *partial_snapshot(const collector_t *c, fleet_host_t h[2],
                                    const char *json) {
  pid_t pid = http_spawn(c, "POST", "/api/v1/snapshots?wait=1&reason=" LONG_REASON,
                         json);
  fleet_ack_flush(&h[0].p);
  assert_int_equal(http_wait(pid, json), 200);
  assert_json(json, "snapshot.state", "\"partial\"");
  assert_json(json, "snapshot.hosts_failed", "1");
  static char id[32];
  const char *v = tg_test_json(json, "snapshot.id");
  assert_non_null(v);
  snprintf(id, sizeof(id), "%.16s", v + 1);
  return id;
}

/* fleet_up() with the rings' flight config holding linux.perf and a perf
 * boost on each snapshot (perf_boost_window), which |perf| (a producer
 * on each host, the caller's to close) offers: it writes nothing, so a
 * boost is sharp with no sample, and the rings have no problem. */
static void fleet_up_boosted(fleet_host_t h[2], raw_producer_t perf[2],
                             collector_t *c, const char *extra) {
  start_hosts(h, 2);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_connect(&perf[i], &h[i].ts, "perf.producer",
                                          "linux.perf", 4, 64, false), 0);
  char cfg[256];
  snprintf(cfg, sizeof(cfg), "%sperf_boost_window = 1s\n", extra);
  write_config(h, 2, cfg);
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "a");
  assert_non_null(f);
  fputs("data_sources { config { name: \"linux.perf\" perf_event_config { "
        "timebase { frequency: 19 } } } }\n", f);
  assert_int_equal(fclose(f), 0);
  collector_start(c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  wait_hosts(c, 2, "tracing");
}

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("coll-browser");
}

/* The page lists the fleet's snapshot and hosts; its download link and
 * its "Open in Perfetto UI" deliver the snapshot's exact bytes. */
static void the_page_in_chromium_shows_downloads_and_opens_the_ui(void **state) {
  (void)state;
  if (access(CHROMIUM, X_OK) != 0 || access(CHROMEDRIVER, X_OK) != 0)
    fail_msg("%s and %s are needed (Debian's chromium and chromium-driver): "
             "run deploy/deps.sh, which installs them", CHROMIUM, CHROMEDRIVER);
  browser_check_t b;
  browser_check_start(&b);
  char ui[96];
  snprintf(ui, sizeof(ui), "ui_url = http://127.0.0.1:%d/ui.html\n", b.ui_port);
  fleet_host_t h[2];
  collector_t c;
  raw_producer_t perf[2];
  fleet_up_boosted(h, perf, &c, ui);
  fleet_commit_packets(&h[0].p, 0, "pageA", 1, 5);
  fleet_commit_packets(&h[1].p, 0, "pageB", 1, 3);
  const char *json = fleet_in_dir("snap.json");
  const char *id = snapshot(&c, h, 2, json);
  assert_json(json, "snapshot.state", "\"complete\"");
  const char *trace = fleet_in_dir("snap.pftrace");
  download(&c, id, trace);

  /* A failed snapshot: the collector killed while one is under way (its
   * row says "interrupted" once it restarts). */
  const char *failed = snapshot_killed_under_way(&c, h, "killed", json);
  collector_start(&c);
  wait_hosts(&c, 2, "tracing");

  /* A partial one: host 1's relay killed. */
  fleet_relay_stop(&h[1].relay, SIGKILL);
  char partial[32];
  snprintf(partial, sizeof(partial), "%s",
           partial_snapshot(&c, h, fleet_in_dir("partial.json")));

  int code = browser_check_run(&b, &c, id, failed, partial, trace, h);
  if (code != 0) collector_dump_log();
  assert_int_equal(code, 0);

  collector_stop(&c);
  for (size_t i = 0; i < 2; i++) raw_producer_close(&perf[i]);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(the_page_in_chromium_shows_downloads_and_opens_the_ui),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
