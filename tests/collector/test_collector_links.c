/* A snapshot's requests across hosts, end to end: two hosts of the fleet
 * harness (tracegated and a relay each), a tracegate-emit answering
 * requests on host 0 (--rpc-server) and one calling it from host 1
 * (--rpc-client), and the collector as a child in its default (joined)
 * app-track mode.
 *
 * What is asserted, through GET /api/v1/snapshots/ID and /metrics:
 * - with both hosts in the inventory, each host row carries its links
 *   (docs/collector.md): the client's calls matched on the server are
 *   its flows_across, its started ones are those and its unmatched, the
 *   server's ended ones are the same calls and its own unmatched; the
 *   snapshot's links sum them, and the counters of /metrics are the
 *   snapshot's;
 * - with the server's host left out of the inventory, every call of the
 *   client is an end without the other: counted in its row's links, its
 *   problems carry a "links" entry ([TG-5063]) with the count, and the
 *   host stays ok (not partial), the snapshot complete.
 * In both, a host has the links problem exactly when it has unmatched
 * ends.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "fleet_harness.h"
#include "test_proc.h"

#ifndef TRACEGATE_EMIT_PATH
#error "TRACEGATE_EMIT_PATH must name the tracegate-emit binary"
#endif

/* Problems of a host row looked at for the links entry, at most. */
#define PROBLEMS_SEEN 8

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("clinks");
}

/* The server on h[0], the client on h[1] calling it, 200 a second. */
static void emitters_start(const fleet_host_t h[2], pid_t emit[2]) {
  unsigned port = 0;
  const char *server_args[] = {"--name", "rpc-server", "--rpc-server", "0",
                               NULL};
  emit[0] =
      fleet_emit_start(TRACEGATE_EMIT_PATH, &h[0], 0, server_args, &port);
  char target[64];
  snprintf(target, sizeof(target), "127.0.0.1:%u", port);
  const char *client_args[] = {"--name",  "rpc-client", "--rpc-client",
                               target,    "--rate",     "200",
                               "--count", "1000000",    NULL};
  emit[1] =
      fleet_emit_start(TRACEGATE_EMIT_PATH, &h[1], 1, client_args, NULL);
}

/* Both hosts up and their emitters; the collector traces the first |n|
 * hosts of |inv| (its flight config: track_event in a ring). */
static void links_fleet_up(fleet_host_t h[2], collector_t *c, pid_t emit[2],
                           fleet_host_t *inv, size_t n) {
  for (size_t i = 0; i < 2; i++) {
    char log[64];
    snprintf(log, sizeof(log), "relay%zu.log", i);
    fleet_host_start(&h[i], fleet_in_dir(log), NULL);
  }
  emitters_start(h, emit);
  write_config(inv, n, "operator_snapshots_per_minute = 600\n");
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "w");
  assert_non_null(f);
  fprintf(f, "buffers { size_kb: 2048 fill_policy: RING_BUFFER }\n"
             "data_sources { config { name: \"track_event\" } }\n");
  assert_int_equal(fclose(f), 0);
  collector_start(c);
  wait_hosts(c, n, "tracing");
  /* Calls made while every ring traces. */
  usleep(2000 * 1000);
}

static void links_fleet_down(fleet_host_t h[2], collector_t *c,
                             pid_t emit[2]) {
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(tg_test_stop(emit[i], SIGTERM, FLEET_WAIT_MS), 0);
  collector_stop(c);
  for (size_t i = 0; i < 2; i++) fleet_host_stop(&h[i]);
}

/* The index of host row |row|'s links problem ([TG-5063]) among its
 * problems, or -1 for none. */
static int links_problem(const char *json, size_t row) {
  char key[96];
  snprintf(key, sizeof(key), "hosts.%zu.problems", row);
  const char *all = tg_test_json(json, key);
  assert_non_null(all);
  /* Read one by one only when it is there: past the end is an error. */
  if (!strstr(all, "\"TG-5063\"")) return -1;
  for (int k = 0; k < PROBLEMS_SEEN; k++) {
    snprintf(key, sizeof(key), "hosts.%zu.problems.%d.code", row, k);
    const char *v = tg_test_json(json, key);
    if (v && !strcmp(v, "\"TG-5063\"")) return k;
  }
  return -1;
}

/* The links problem is there exactly when the row has unmatched ends,
 * with the row's count. */
static void assert_problem_iff_unmatched(const char *json, size_t row) {
  long long unmatched = snapshot_row_link(json, row, "flows_unmatched");
  int k = links_problem(json, row);
  assert_int_equal(k >= 0, unmatched > 0);
  if (k < 0) return;
  char key[96];
  snprintf(key, sizeof(key), "hosts.%zu.problems.%d.kind", row, k);
  assert_json(json, key, "\"links\"");
  snprintf(key, sizeof(key), "hosts.%zu.problems.%d.flows_unmatched", row, k);
  const char *v = tg_test_json(json, key);
  assert_non_null(v);
  assert_int_equal(atoll(v), unmatched);
}

/* The snapshot's links count |field| in |json|. */
static long long total(const char *json, const char *field) {
  char key[96];
  snprintf(key, sizeof(key), "snapshot.links.%s", field);
  const char *v = tg_test_json(json, key);
  if (!v) fail_msg("%s: no %s", json, key);
  return atoll(v);
}

/* /metrics holds |name| with |value|. */
static void wait_counter(const collector_t *c, const char *name,
                         long long value) {
  char line[160];
  snprintf(line, sizeof(line), "%s %lld\n", name, value);
  wait_metric(c, line, fleet_in_dir("metrics.txt"));
}

static off_t size_of(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return st.st_size;
}

/* One host's part (its spec |host|, or two joined by a comma) of snapshot
 * |id| into |out|. */
static void download_part(const collector_t *c, const char *id,
                          const char *host, const char *out) {
  char path[1024];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s", id, host);
  assert_int_equal(http(c, "GET", path, out), 200);
}

/* The snapshot was written again with its hosts placed by their requests
 * (merge_clock_from_requests, on by default): each row says how, one host
 * the anchor and the other moved; no server slice begins before its
 * client's call; and the host index followed the packets to their new
 * places: each host's part has its own slices alone, and both parts
 * asked together are the whole file byte for byte. */
static void assert_reclocked(const collector_t *c, const char *id,
                             const char *json, const fleet_host_t h[2],
                             size_t client) {
  bool anchor[2];
  for (size_t i = 0; i < 2; i++) {
    char key[96];
    snprintf(key, sizeof(key),
             "hosts.%zu.links.clock_from_requests.samples_used", i);
    assert_true(atoll(tg_test_json(json, key)) > 0);
    snprintf(key, sizeof(key), "hosts.%zu.links.clock_from_requests.anchor",
             i);
    anchor[i] = !strcmp(tg_test_json(json, key), "true");
    snprintf(key, sizeof(key), "hosts.%zu.links.clock_from_requests.moved", i);
    assert_string_equal(tg_test_json(json, key), anchor[i] ? "false" : "true");
  }
  assert_true(anchor[0] != anchor[1]);
  wait_counter(c, "tracegate_collector_snapshots_reclocked_total", 1);
  wait_counter(c, "tracegate_collector_snapshots_reclock_failed_total", 0);

  char whole[256], part[2][256], both[256], hosts[700];
  snprintf(whole, sizeof(whole), "%s", fleet_in_dir("across.pftrace"));
  snprintf(both, sizeof(both), "%s", fleet_in_dir("across-both.pftrace"));
  download(c, id, whole);
  for (size_t i = 0; i < 2; i++) {
    char name[64];
    snprintf(name, sizeof(name), "across-%zu.pftrace", i);
    snprintf(part[i], sizeof(part[i]), "%s", fleet_in_dir(name));
    download_part(c, id, h[i].spec, part[i]);
  }
  snprintf(hosts, sizeof(hosts), "%s,%s", h[0].spec, h[1].spec);
  download_part(c, id, hosts, both);
  assert_same_file(both, whole);
  off_t head = size_of(part[0]) + size_of(part[1]) - size_of(whole);
  assert_true(head > 0 && head < size_of(part[0]));

  unsigned long long flows, calls, serves, early, pairs;
  if (!fleet_rpc_counts(whole, &flows, &calls, &serves, &early, &pairs)) {
    fprintf(stderr, "[ SKIPPED  ] the trace processor checks: PERFETTO_BIN "
                    "is not set\n");
    return;
  }
  fprintf(stderr, "snapshot: flows %llu, calls %llu, serves %llu, pairs "
          "%llu, early %llu\n", flows, calls, serves, pairs, early);
  assert_int_equal(early, 0);
  assert_true(pairs > 0);
  assert_int_equal(flows, pairs);
  assert_int_equal((long long)pairs, snapshot_row_link(json, client, "flows_across"));
  /* Each part (h[0] the server's, h[1] the client's): its host's slices,
   * all of them, and none of the other's. */
  unsigned long long p_flows, p_calls, p_serves, p_early, p_pairs;
  assert_true(fleet_rpc_counts(part[1], &p_flows, &p_calls, &p_serves,
                               &p_early, &p_pairs));
  assert_int_equal(p_calls, calls);
  assert_int_equal(p_serves, 0);
  assert_true(fleet_rpc_counts(part[0], &p_flows, &p_calls, &p_serves,
                               &p_early, &p_pairs));
  assert_int_equal(p_serves, serves);
  assert_int_equal(p_calls, 0);
}

static void requests_across_hosts_are_counted_per_host(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  pid_t emit[2];
  links_fleet_up(h, &c, emit, h, 2);
  /* A copy: fleet_in_dir's buffer is the next call's. */
  char json[512];
  snprintf(json, sizeof(json), "%s", fleet_in_dir("across.json"));
  char id[32];
  snprintf(id, sizeof(id), "%s", snapshot(&c, h, 0, json));
  assert_json(json, "snapshot.state", "\"complete\"");
  size_t server = snapshot_host_row(json, h[0].spec, 2);
  size_t client = snapshot_host_row(json, h[1].spec, 2);
  assert_json(json, "hosts.0.links.mode", "\"joined\"");
  assert_json(json, "hosts.1.links.mode", "\"joined\"");
  long long across = snapshot_row_link(json, client, "flows_across");
  fprintf(stderr, "client: %lld started, %lld across, %lld unmatched; "
                  "server: %lld ended, %lld unmatched\n",
          snapshot_row_link(json, client, "flows_started"), across,
          snapshot_row_link(json, client, "flows_unmatched"),
          snapshot_row_link(json, server, "flows_terminated"),
          snapshot_row_link(json, server, "flows_unmatched"));
  assert_true(across > 0);
  assert_true(snapshot_row_link(json, client, "joined") > 0);
  /* Each call is one flow id: started on the client, ended on the
   * server, counted across once, on the client. */
  assert_int_equal(snapshot_row_link(json, client, "flows_unfollowed"), 0);
  assert_int_equal(snapshot_row_link(json, client, "flows_started"),
                   across + snapshot_row_link(json, client, "flows_unmatched"));
  assert_int_equal(snapshot_row_link(json, client, "flows_terminated"), 0);
  assert_int_equal(snapshot_row_link(json, server, "flows_started"), 0);
  assert_int_equal(snapshot_row_link(json, server, "flows_across"), 0);
  assert_int_equal(snapshot_row_link(json, server, "flows_terminated"),
                   across + snapshot_row_link(json, server, "flows_unmatched"));
  assert_int_equal(total(json, "flows_across"), across);
  assert_int_equal(total(json, "flows_unmatched"),
                   snapshot_row_link(json, client, "flows_unmatched") +
                       snapshot_row_link(json, server, "flows_unmatched"));
  for (size_t i = 0; i < 2; i++) assert_problem_iff_unmatched(json, i);
  /* The collector's first snapshot: its counters are this one's. */
  wait_counter(&c, "tracegate_collector_flows_across_hosts_total", across);
  wait_counter(&c, "tracegate_collector_flow_ends_unmatched_total",
               total(json, "flows_unmatched"));
  assert_reclocked(&c, id, json, h, client);
  links_fleet_down(h, &c, emit);
}

static void calls_to_a_host_not_in_the_snapshot_are_unmatched(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  pid_t emit[2];
  /* Only the client's host: its server answers, untraced. */
  links_fleet_up(h, &c, emit, &h[1], 1);
  const char *json = fleet_in_dir("unmatched.json");
  snapshot(&c, &h[1], 0, json);
  assert_json(json, "snapshot.state", "\"complete\"");
  assert_json(json, "hosts.0.outcome", "\"ok\"");
  assert_json(json, "hosts.0.loss", "0");
  long long started = snapshot_row_link(json, 0, "flows_started");
  fprintf(stderr, "client: %lld started\n", started);
  assert_true(started > 0);
  assert_int_equal(snapshot_row_link(json, 0, "flows_unmatched"), started);
  assert_int_equal(snapshot_row_link(json, 0, "flows_across"), 0);
  assert_int_equal(total(json, "flows_across"), 0);
  assert_int_equal(total(json, "flows_unmatched"), started);
  assert_true(links_problem(json, 0) >= 0);
  assert_problem_iff_unmatched(json, 0);
  wait_counter(&c, "tracegate_collector_flow_ends_unmatched_total", started);
  links_fleet_down(h, &c, emit);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(requests_across_hosts_are_counted_per_host),
      FLEET_TEST(calls_to_a_host_not_in_the_snapshot_are_unmatched),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
