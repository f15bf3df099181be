/* Requests across hosts in a real merged recording: two hosts of
 * fleet_harness.h (tracegated and a tracegate-relay each), a
 * tracegate-emit answering requests on host 0 (--rpc-server) and one
 * calling it from host 1 (--rpc-client), recorded by `tracegate record -H
 * -H --merge` in its default (joined) app-track mode. The summary says
 * the flows each host started and ended and none unmatched past the
 * recording's edges; with Perfetto's binaries (PERFETTO_BIN), trace
 * processor joins the client's "rpc.call" slices to the server's
 * "rpc.serve" ones (docs/merge.md, "Links across hosts"), none of them
 * beginning before its client's once the file is re-clocked by its requests
 * (reclock.h, on by default: the summary's clock_from_requests), and with
 * --app-tracks=machines it joins none. */
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

#include "fleet_harness.h"
#include "test_proc.h"

#define CALLS 300 /* per session, at 200 a second */

/* One recording of |hs| with the emitters running, in |mode| (NULL: the
 * default); the merged file at |out|, the summary at |sum|. */
static void record_requests(fleet_host_t *hs, const char *mode,
                            const char *out, const char *sum) {
  unsigned port = 0;
  const char *server_args[] = {"--name", "rpc-server", "--rpc-server", "0",
                               NULL};
  pid_t server =
      fleet_emit_start(TRACEGATE_EMIT_PATH, &hs[0], 0, server_args, &port);
  char target[64], count[16];
  snprintf(target, sizeof(target), "127.0.0.1:%u", port);
  snprintf(count, sizeof(count), "%d", CALLS);
  const char *client_args[] = {"--name", "rpc-client", "--rpc-client", target,
                               "--rate", "200", "--count", count, NULL};
  pid_t client =
      fleet_emit_start(TRACEGATE_EMIT_PATH, &hs[1], 1, client_args, NULL);
  char app[64];
  snprintf(app, sizeof(app), "--app-tracks=%s", mode ? mode : "");
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec,
                        FLEET_TLS_ARGS, "--merge", "-o", out, "-t", "4s",
                        "--summary-json", sum, "track_event", NULL, NULL};
  if (mode) { /* the data source last */
    size_t n = sizeof(args) / sizeof(args[0]) - 3;
    args[n] = app;
    args[n + 1] = "track_event";
  }
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(fleet_cli_wait(&c), 0);
  assert_int_equal(tg_test_stop(client, SIGTERM, FLEET_WAIT_MS), 0);
  assert_int_equal(tg_test_stop(server, SIGTERM, FLEET_WAIT_MS), 0);
}

/* Two hosts, their relays' logs relay-TAG<i>.log. */
static void start_two(fleet_host_t hs[2], const char *tag) {
  for (int i = 0; i < 2; i++) {
    char log[64];
    snprintf(log, sizeof(log), "relay-%s%d.log", tag, i);
    fleet_host_start(&hs[i], fleet_in_dir(log), NULL);
  }
}

static void requests_across_hosts_are_joined_by_default(void **state) {
  (void)state;
  fleet_host_t hs[2];
  start_two(hs, "joined");
  char out[256], sum[256];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("joined.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("joined.json"));
  record_requests(hs, NULL, out, sum);
  assert_json(sum, "hosts.0.links.mode", "\"joined\"");
  long long served = atoll(tg_test_json(sum, "hosts.0.links.flows_terminated"));
  long long called = atoll(tg_test_json(sum, "hosts.1.links.flows_started"));
  assert_true(served > 0 && called > 0);
  /* The calls made before the server's session began, or answered after
   * it ended, have one end only: a few, at the recording's edges. */
  long long unmatched =
      atoll(tg_test_json(sum, "hosts.0.links.flows_unmatched")) +
      atoll(tg_test_json(sum, "hosts.1.links.flows_unmatched"));
  assert_true(unmatched * 10 <= called);
  assert_json(sum, "hosts.0.links.uuid", "0");
  assert_json(sum, "hosts.1.links.clock", "0");
  /* The file was re-clocked by its requests (on by default): both hosts
   * say how, by the requests seen on both. */
  for (int i = 0; i < 2; i++) {
    char key[64];
    snprintf(key, sizeof(key), "hosts.%d.clock_from_requests.samples_used", i);
    assert_true(atoll(tg_test_json(sum, key)) > 0);
  }
  /* One anchor, and the other host placed against it. */
  bool anchor0 =
      !strcmp(tg_test_json(sum, "hosts.0.clock_from_requests.anchor"), "true");
  bool anchor1 =
      !strcmp(tg_test_json(sum, "hosts.1.clock_from_requests.anchor"), "true");
  assert_true(anchor0 != anchor1);
  unsigned long long flows, calls, serves, early, pairs;
  if (fleet_rpc_counts(out, &flows, &calls, &serves, &early, &pairs)) {
    fprintf(stderr, "joined: flows %llu, calls %llu, serves %llu, pairs "
            "%llu, early %llu\n", flows, calls, serves, pairs, early);
    /* No server slice before its client's request, of all the requests
     * on both ends. */
    assert_int_equal(early, 0);
    /* Every request the summary says both ends of is an arrow. */
    assert_true(flows > 0);
    assert_int_equal((long long)pairs, called - (long long)atoll(tg_test_json(
                                           sum, "hosts.1.links.flows_unmatched")));
    assert_int_equal(flows, pairs);
  }
  unlink(out);
  unlink(sum);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

static void machines_mode_joins_no_request_across_hosts(void **state) {
  (void)state;
  fleet_host_t hs[2];
  start_two(hs, "machines");
  char out[256], sum[256];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("machines.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("machines.json"));
  record_requests(hs, "machines", out, sum);
  assert_json(sum, "hosts.0.links.mode", "\"machines\"");
  assert_json(sum, "hosts.0.links.joined", "0");
  assert_json(sum, "hosts.0.clock_from_requests", "null");
  unsigned long long flows, calls, serves, early, pairs;
  if (fleet_rpc_counts(out, &flows, &calls, &serves, &early, &pairs)) {
    assert_true(calls > 0 && serves > 0 && pairs > 0);
    assert_int_equal(flows, 0);
  }
  unlink(out);
  unlink(sum);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("links");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(requests_across_hosts_are_joined_by_default),
      FLEET_TEST(machines_mode_joins_no_request_across_hosts),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
