/* A data source that does not run on one host is a visible failure in the
 * collector, end to end: two hosts (tracegated, relay, a producer of
 * "fleet.ds"), each with a real tracegate-probes, and a flight config
 * that asks for linux.ftrace too. Host 0's probes run as nobody and
 * cannot open tracefs: its linux.ftrace does not start. The snapshot is
 * partial, host 0's row carries the problem (its code, its data source)
 * in /api/v1/snapshots/ID, /api/v1/hosts shows it on host 0's ring, the
 * metric counts it by reason, and host 1 is ok with no problem;
 * `tracegate snapshot` exits 3 naming the problem with its code. And a
 * data source no producer offers is listed, not a failure, until a
 * reconnection finds it offered. A data source whose producer never
 * confirms its start (the service's slow_starting_data_sources) makes the
 * snapshot partial too, as tracegate-perf without CAP_PERFMON would.
 *
 * The first needs root and tracefs (probes_e2e.h's e2e_require_ftrace:
 * skipped without them unless TG_REQUIRE_FTRACE is set).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "probes_e2e.h"
#include "test_proc.h"
#include "test_wait.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("colldsf");
}

/* fleet.ds's producer and the probes' data sources, at least. */
#define DATA_SOURCES 4

static void a_host_whose_ftrace_cannot_start_makes_the_snapshot_partial(
    void **state) {
  (void)state;
  e2e_require_ftrace();
  TG_TEST_REQUIRE_OTHER_USER();
  fleet_host_t h[2];
  start_hosts(h, 2);
  /* nobody must reach host 0's producer socket. */
  assert_int_equal(tg_test_other_user_dir(h[0].ts.dir, 0755), 0);
  char err[2][160];
  pid_t probes[2];
  for (int i = 0; i < 2; i++)
    probes[i] = e2e_start_probes(&h[i].ts, err[i], sizeof(err[i]),
                                 "probes.err", i == 0, DATA_SOURCES);
  write_config(h, 2, NULL);
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
        "data_sources { config { name: \"fleet.ds\" } }\n"
        "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
        "  ftrace_events: \"ftrace/print\" } } }\n", f);
  assert_int_equal(fclose(f), 0);
  collector_t c;
  collector_start(&c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 2, "tracing");

  const char *posted = fleet_in_dir("dsfail-post.json");
  char id[32];
  snprintf(id, sizeof(id), "%s", snapshot(&c, h, 2, posted));
  const char *row = fleet_in_dir("dsfail-row.json");
  char path[64];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id);
  assert_int_equal(http(&c, "GET", path, row), 200);
  assert_json(row, "snapshot.state", "\"partial\"");
  size_t bad = snapshot_host_row(row, h[0].spec, 2), good = 1 - bad;
  char key[64];
#define ROW(i, k) (snprintf(key, sizeof(key), "hosts.%zu.%s", (i), (k)), key)
  assert_json(row, ROW(bad, "outcome"), "\"partial\"");
  assert_json(row, ROW(bad, "problems.0.kind"), "\"data_source\"");
  assert_json(row, ROW(bad, "problems.0.data_source"), "\"linux.ftrace\"");
  assert_json(row, ROW(bad, "problems.0.code"), "\"TG-7010\"");
  assert_json(row, ROW(bad, "problems.0.reason"), "\"not_started\"");
  assert_json(row, ROW(bad, "problems.0.events"), "1");
  const char *error = tg_test_json(row, ROW(bad, "error"));
  assert_non_null(error);
  assert_true(!strncmp(error, "\"[TG-7010] linux.ftrace: ", 25));
  assert_true(tg_test_json(row, ROW(bad, "packets")) != NULL);
  assert_json(row, ROW(good, "outcome"), "\"ok\"");
  assert_json(row, ROW(good, "problems"), "[]");

  const char *hosts = fleet_in_dir("dsfail-hosts.json");
  assert_int_equal(http(&c, "GET", "/api/v1/hosts", hosts), 200);
  size_t ring = snapshot_host_row(hosts, h[0].spec, 2), other = 1 - ring;
  assert_json(hosts, ROW(ring, "state"), "\"tracing\"");
  assert_json(hosts, ROW(ring, "problems.0.code"), "\"TG-7010\"");
  assert_json(hosts, ROW(ring, "problems.0.data_source"), "\"linux.ftrace\"");
  assert_json(hosts, ROW(other, "problems"), "[]");
#undef ROW

  const char *metrics = fleet_in_dir("dsfail-metrics.txt");
  assert_int_equal(http(&c, "GET", "/metrics", metrics), 200);
  assert_true(tg_test_wait_file_text(
      metrics,
      "tracegate_collector_data_source_failures_total{reason=\"not_started\"} 1\n",
      1000));
  assert_true(tg_test_wait_file_text(
      metrics,
      "tracegate_collector_data_source_failures_total{reason=\"not_offered\"} 0\n",
      1000));

  /* The CLI's snapshot: partial (exit 3), the problem on its own line
   * under the host, with its code. */
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", c.port);
  const char *cli_err = fleet_in_dir("dsfail-cli.err");
  const char *argv[] = {"snapshot", "--collector", addr, NULL};
  int efd = open(cli_err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(efd >= 0);
  pid_t cli = tg_test_spawn_cli(TRACEGATE_CLI_PATH, argv, TG_TEST_FD_DEVNULL, efd);
  close(efd);
  assert_true(cli > 0);
  for (size_t i = 0; i < 2; i++) fleet_ack_flush(&h[i].p);
  assert_int_equal(tg_test_exit_code(tg_test_reap(cli, FLEET_WAIT_MS)), 3);
  assert_true(tg_test_wait_file_text(cli_err, "    [TG-7010] linux.ftrace: ", 1000));

  collector_stop(&c);
  for (int i = 0; i < 2; i++) e2e_stop_probes(probes[i], err[i]);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* Until |hosts| (GET /api/v1/hosts into it) shows host 0 tracing on its
 * first holder with |problems| (JSON text). */
static void wait_ring_problems(const collector_t *c, const char *hosts,
                               const char *problems) {
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(c, "GET", "/api/v1/hosts", hosts), 200);
    const char *st = tg_test_json(hosts, "hosts.0.state");
    bool tracing = st && !strcmp(st, "\"tracing\"");
    const char *r = tg_test_json(hosts, "hosts.0.restarts");
    bool same = r && !strcmp(r, "0");
    const char *p = tg_test_json(hosts, "hosts.0.problems");
    if (tracing && same && p && !strcmp(p, problems)) return;
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
}

/* The flight config asks for a data source no producer on the host
 * offers: the ring's /api/v1/hosts entry and the snapshot's row list it
 * (TG-7012), the row stays ok and the snapshot complete (a producer may
 * register it later). One does, and the relay restarts: the holder asks
 * again as it reconnects, and the entry no longer lists it. */
static void a_source_not_offered_is_listed_until_a_reconnect_finds_it(
    void **state) {
  (void)state;
  fleet_host_t h[1];
  start_hosts(h, 1);
  write_config(h, 1, NULL);
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
        "data_sources { config { name: \"fleet.ds\" } }\n"
        "data_sources { config { name: \"late.ds\" } }\n", f);
  assert_int_equal(fclose(f), 0);
  collector_t c;
  collector_start(&c);
  assert_int_equal(raw_producer_wait_started(&h[0].p, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 1, "tracing");
  /* Its own copy: fleet_in_dir's buffers are reused (the relay's restart
   * below takes several), and this path is written until the end. */
  char hosts[256];
  snprintf(hosts, sizeof(hosts), "%s", fleet_in_dir("late-hosts.json"));
  assert_int_equal(http(&c, "GET", "/api/v1/hosts", hosts), 200);
  assert_json(hosts, "hosts.0.problems.0.data_source", "\"late.ds\"");
  assert_json(hosts, "hosts.0.problems.0.code", "\"TG-7012\"");
  assert_json(hosts, "hosts.0.problems.0.reason", "\"not_offered\"");

  const char *posted = fleet_in_dir("late-post.json");
  char id[32];
  snprintf(id, sizeof(id), "%s", snapshot(&c, h, 1, posted));
  const char *row = fleet_in_dir("late-row.json");
  char path[64];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id);
  assert_int_equal(http(&c, "GET", path, row), 200);
  assert_json(row, "snapshot.state", "\"complete\"");
  assert_json(row, "hosts.0.outcome", "\"ok\"");
  const char *error = tg_test_json(row, "hosts.0.error");
  assert_true(error && (!strcmp(error, "null") || !strcmp(error, "\"\"")));
  assert_json(row, "hosts.0.problems.0.data_source", "\"late.ds\"");
  const char *metrics = fleet_in_dir("late-metrics.txt");
  assert_int_equal(http(&c, "GET", "/metrics", metrics), 200);
  assert_true(tg_test_wait_file_text(
      metrics,
      "tracegate_collector_data_source_failures_total{reason=\"not_offered\"} 1\n",
      1000));

  raw_producer_t late;
  assert_int_equal(raw_producer_connect(&late, &h[0].ts, "late.producer",
                                        "late.ds", 4, 64, false), 0);
  int port = h[0].relay.port;
  fleet_relay_stop(&h[0].relay, SIGKILL);
  fleet_relay_start(&h[0].relay, h[0].ts.consumer_sock, port,
                    fleet_in_dir("relay0-again.log"), NULL);
  wait_ring_problems(&c, hosts, "[]");

  collector_stop(&c);
  raw_producer_close(&late);
  fleet_host_stop(&h[0]);
}

/* A data source whose producer never confirms its start (as
 * tracegate-perf does not when perf_event_open is refused): the host's
 * service names it in the trace once its start timeout runs out (1 ms
 * here), every clone of the ring carries that report, and the snapshot's
 * row is partial with a not_started problem for it, as /api/v1/hosts and
 * the metric say. */
static void a_source_that_never_confirms_its_start_makes_the_snapshot_partial(
    void **state) {
  (void)state;
  fleet_host_t h[1];
  memset(h, 0, sizeof(h));
  const char *args[] = {"--ds-start-timeout-ms", "1", NULL};
  assert_int_equal(test_service_start_with(&h[0].ts, args, FLEET_WAIT_MS), 0);
  fleet_host_start_relay(&h[0], fleet_in_dir("relay-slow.log"), NULL);
  fleet_host_connect_producer(&h[0], "coll.producer", "fleet.ds", 4, 64, false);
  /* slow.ds asks to confirm its start and never does; no_flush, so that a
   * clone's flush does not wait for it. */
  raw_producer_t slow;
  assert_int_equal(raw_producer_connect(&slow, &h[0].ts, "slow.producer", NULL,
                                        4, 64, false), 0);
  Perfetto__Protos__DataSourceDescriptor d =
      PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
  d.name = "slow.ds";
  d.has_will_notify_on_start = d.will_notify_on_start = 1;
  d.has_no_flush = d.no_flush = 1;
  Perfetto__Protos__RegisterDataSourceRequest r =
      PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
  r.data_source_descriptor = &d;
  assert_int_equal(raw_call(&slow.conn, "RegisterDataSource", &r.base, -1,
                            NULL, NULL, FLEET_WAIT_MS), 1);
  write_config(h, 1, NULL);
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
        "data_sources { config { name: \"fleet.ds\" } }\n"
        "data_sources { config { name: \"slow.ds\" } }\n", f);
  assert_int_equal(fclose(f), 0);
  collector_t c;
  collector_start(&c);
  assert_int_equal(raw_producer_wait_started(&h[0].p, FLEET_WAIT_MS), 0);
  assert_int_equal(raw_producer_wait_started(&slow, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 1, "tracing");
  /* The 1 ms start timeout is due long before the snapshot's clone
   * reaches the service's loop, which runs due timers first. */
  usleep(100 * 1000);

  const char *posted = fleet_in_dir("slow-post.json");
  char id[32];
  snprintf(id, sizeof(id), "%s", snapshot(&c, h, 1, posted));
  const char *row = fleet_in_dir("slow-row.json");
  char path[64];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id);
  assert_int_equal(http(&c, "GET", path, row), 200);
  assert_json(row, "snapshot.state", "\"partial\"");
  assert_json(row, "hosts.0.outcome", "\"partial\"");
  assert_json(row, "hosts.0.problems.0.kind", "\"data_source\"");
  assert_json(row, "hosts.0.problems.0.data_source", "\"slow.ds\"");
  assert_json(row, "hosts.0.problems.0.code", "\"TG-7010\"");
  assert_json(row, "hosts.0.problems.0.reason", "\"not_started\"");
  const char *error = tg_test_json(row, "hosts.0.error");
  assert_non_null(error);
  assert_true(!strncmp(error, "\"[TG-7010] slow.ds: ", 20));
  const char *hosts = fleet_in_dir("slow-hosts.json");
  assert_int_equal(http(&c, "GET", "/api/v1/hosts", hosts), 200);
  assert_json(hosts, "hosts.0.problems.0.data_source", "\"slow.ds\"");
  assert_json(hosts, "hosts.0.problems.0.reason", "\"not_started\"");
  const char *metrics = fleet_in_dir("slow-metrics.txt");
  assert_int_equal(http(&c, "GET", "/metrics", metrics), 200);
  assert_true(tg_test_wait_file_text(
      metrics,
      "tracegate_collector_data_source_failures_total{reason=\"not_started\"} 1\n",
      1000));

  collector_stop(&c);
  raw_producer_close(&slow);
  fleet_host_stop(&h[0]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(a_host_whose_ftrace_cannot_start_makes_the_snapshot_partial),
      FLEET_TEST(a_source_not_offered_is_listed_until_a_reconnect_finds_it),
      FLEET_TEST(
          a_source_that_never_confirms_its_start_makes_the_snapshot_partial),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
