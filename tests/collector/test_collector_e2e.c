/* tracegate-collector end to end: hosts of the fleet harness (a real
 * tracegated with a raw producer, a real tracegate-relay in front of it on
 * a loopback TLS port) and the collector as a child, talked to over its
 * HTTP API on a loopback port (requests made by python3's urllib in a
 * child, so that a request can be in flight while the test answers the
 * producers' flushes).
 *
 * What is asserted: every host's ring reaches "tracing"; an operator's
 * snapshot holds every host's packets (machine per host), its row is
 * complete and lists both hosts; a second snapshot holds what the rings
 * kept (older and newer packets); a collector killed with SIGKILL and
 * started again finds the same rings (the packets committed before the
 * kill are in the next snapshot) and a catalog without a pending row; a
 * host that is down is named as failed in a partial snapshot.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fleet_harness.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "raw_ipc.h"
#include "fleet_trace.h"
#include "test_proc.h"
#include "test_wait.h"

#ifndef TRACEGATE_COLLECTOR_PATH
#error "TRACEGATE_COLLECTOR_PATH must name the tracegate-collector binary"
#endif

typedef struct collector {
  pid_t pid;
  int port;
} collector_t;

static void write_file(const char *path, const char *fmt, ...) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  assert_int_equal(fclose(f), 0);
}

/* The inventory: |n| hosts from |hosts|, replaced by a rename as tools
 * replace files. */
static void write_hosts(fleet_host_t *hosts, size_t n) {
  char tmp[256];
  snprintf(tmp, sizeof(tmp), "%s", fleet_in_dir("hosts.txt.new"));
  FILE *f = fopen(tmp, "w");
  assert_non_null(f);
  for (size_t i = 0; i < n; i++) fprintf(f, "%s name=relay.test\n", hosts[i].spec);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(rename(tmp, fleet_in_dir("hosts.txt")), 0);
}

/* The config for |n| hosts, the store in store/. */
static void write_config(fleet_host_t *hosts, size_t n) {
  write_hosts(hosts, n);
  write_file(fleet_in_dir("flight.pbtxt"),
             "buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
             "data_sources { config { name: \"fleet.ds\" } }\n");
  write_file(fleet_in_dir("collector.conf"),
             "# the e2e test's collector\n"
             "hosts = hosts.txt\n"
             "ca = pki/ca.pem\n"
             "cert = pki/alice.pem\n"
             "key = pki/alice.key\n"
             "tls_server_name = relay.test\n"
             "trace_config = flight.pbtxt\n"
             "store = store\n"
             "listen = 127.0.0.1:0\n"
             "session_key = e2e-collector\n"
             "coalesce_window = 0s\n"
             "max_snapshots_per_minute = 100\n"
             "reconnect = 30s\n"
             "trigger = app-hit\n");
}

static void collector_start(collector_t *c) {
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  char fd[16];
  snprintf(fd, sizeof(fd), "%d", p[1]);
  int log = open(fleet_in_dir("collector.log"), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  assert_true(log >= 0);
  const char *argv[] = {"tracegate-collector", "--config",
                        fleet_in_dir("collector.conf"), "--ready-fd", fd,
                        "--log-level", "debug", NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_COLLECTOR_PATH;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = log;
  s.stderr_fd = log;
  s.keep_fd = p[1];
  c->pid = tg_test_spawn(&s);
  assert_true(c->pid > 0);
  close(p[1]);
  close(log);
  char line[64];
  assert_int_equal(tg_test_wait_line(p[0], "ready ", FLEET_WAIT_MS, line, sizeof(line)), 1);
  close(p[0]);
  c->port = atoi(line + strlen("ready "));
  assert_true(c->port > 0);
}

/* SIGTERM: it must exit 0 (and a sanitizer report would fail it). */
static void collector_stop(collector_t *c) {
  int st = tg_test_stop(c->pid, SIGTERM, FLEET_WAIT_MS);
  assert_int_equal(tg_test_exit_code(st), 0);
  c->pid = 0;
}

/* An HTTP request by python3 in a child: the body goes to |out|, the
 * status to |out|.status. Returns the child (reap with http_wait). */
static pid_t http_spawn(const collector_t *c, const char *method,
                        const char *path, const char *out) {
  static const char script[] =
      "import sys, urllib.request, urllib.error\n"
      "req = urllib.request.Request(sys.argv[1], method=sys.argv[2])\n"
      "try:\n"
      "    r = urllib.request.urlopen(req, timeout=60)\n"
      "    code, body = r.status, r.read()\n"
      "except urllib.error.HTTPError as e:\n"
      "    code, body = e.code, e.read()\n"
      "open(sys.argv[3], 'wb').write(body)\n"
      "open(sys.argv[3] + '.status', 'w').write(str(code))\n";
  char url[512];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", c->port, path);
  const char *argv[] = {"python3", "-c", script, url, method, out, NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = "/usr/bin/python3";
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  return pid;
}

/* The collector's log, for a failure's diagnosis. */
static void dump_log(void) {
  FILE *f = fopen(fleet_in_dir("collector.log"), "r");
  if (!f) return;
  char line[1024];
  fprintf(stderr, "--- collector.log\n");
  while (fgets(line, sizeof(line), f)) fputs(line, stderr);
  fclose(f);
}

/* Reaps the request; returns its HTTP status. */
static int http_wait(pid_t pid, const char *out) {
  int code = tg_test_exit_code(tg_test_reap(pid, 90000));
  if (code != 0) dump_log();
  assert_int_equal(code, 0);
  char path[512], text[16] = "";
  snprintf(path, sizeof(path), "%s.status", out);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(text, sizeof(text), f));
  fclose(f);
  return atoi(text);
}

static int http(const collector_t *c, const char *method, const char *path,
                const char *out) {
  return http_wait(http_spawn(c, method, path, out), out);
}

/* Until every one of |n| hosts says |state|. */
static void wait_hosts(const collector_t *c, size_t n, const char *state) {
  const char *out = fleet_in_dir("hosts.json");
  char want[64], key[64];
  snprintf(want, sizeof(want), "\"%s\"", state);
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(c, "GET", "/api/v1/hosts", out), 200);
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
      snprintf(key, sizeof(key), "hosts.%zu.state", i);
      const char *v = tg_test_json(out, key);
      if (v && !strcmp(v, want)) ok++;
    }
    if (ok == n) return;
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
}

/* An operator's snapshot, waited for while the producers answer the
 * clone's flush. Returns the id (a static buffer) from |json|. */
static const char *snapshot(const collector_t *c, fleet_host_t *hosts,
                            size_t n_ack, const char *json) {
  pid_t pid = http_spawn(c, "POST", "/api/v1/snapshots?wait=1&reason=e2e", json);
  for (size_t i = 0; i < n_ack; i++) fleet_ack_flush(&hosts[i].p);
  assert_int_equal(http_wait(pid, json), 200);
  static char id[64];
  const char *v = tg_test_json(json, "snapshot.id");
  assert_non_null(v);
  assert_int_equal(strlen(v), 18); /* "0123456789abcdef" quoted */
  snprintf(id, sizeof(id), "%.16s", v + 1);
  return id;
}

static void download(const collector_t *c, const char *id, const char *out) {
  char path[128];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace", id);
  assert_int_equal(http(c, "GET", path, out), 200);
}

/* Every packet of |tag| carries machine |machine|. */
static void assert_machine(const fleet_trace_t *t, const char *tag,
                           uint32_t machine) {
  size_t seen = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (!fleet_has_tag(t->pk[i], tag)) continue;
    assert_true(t->pk[i]->has_machine_id);
    assert_int_equal(t->pk[i]->machine_id, machine);
    seen++;
  }
  assert_true(seen > 0);
}

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("coll");
}

static void start_hosts(fleet_host_t *h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char log[64];
    snprintf(log, sizeof(log), "relay%zu.log", i);
    fleet_host_start(&h[i], fleet_in_dir(log), NULL);
    fleet_host_connect_producer(&h[i], "coll.producer", "fleet.ds", 4, 64, false);
  }
}

/* Two hosts, their config, the collector; back once both rings trace. */
static void fleet_up(fleet_host_t h[2], collector_t *c) {
  start_hosts(h, 2);
  write_config(h, 2);
  collector_start(c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  wait_hosts(c, 2, "tracing");
}

/* An operator's snapshot holds both hosts' packets; the rings keep them
 * for the next one; kill -9 and a restart re-attach to the same rings. */
static void operator_snapshots_and_a_killed_collector(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c);
  fleet_commit_packets(&h[0].p, 0, "hostA", 1, 5);
  fleet_commit_packets(&h[1].p, 0, "hostB", 1, 7);

  const char *json = fleet_in_dir("snap1.json");
  const char *id = snapshot(&c, h, 2, json);
  assert_json(json, "snapshot.state", "\"complete\"");
  assert_json(json, "snapshot.hosts", "2");
  assert_json(json, "snapshot.hosts_failed", "0");
  assert_json(json, "snapshot.trigger", "\"operator\"");
  assert_json(json, "snapshot.reason", "\"e2e\"");
  assert_json(json, "hosts.0.outcome", "\"ok\"");
  assert_json(json, "hosts.1.outcome", "\"ok\"");
  const char *trace = fleet_in_dir("snap1.pftrace");
  download(&c, id, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "hostA", 1, 5);
  fleet_trace_assert_values(&t, "hostB", 1, 7);
  assert_machine(&t, "hostA", 1);
  assert_machine(&t, "hostB", 2);
  fleet_trace_free(&t);

  /* The list shows it, newest first. */
  const char *list = fleet_in_dir("list.json");
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots", list), 200);
  char want[32];
  snprintf(want, sizeof(want), "\"%s\"", id);
  assert_json(list, "snapshots.0.id", want);
  /* Hostile ids never reach the store. */
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots/..%2f..%2fcatalog.sqlite/trace",
                        fleet_in_dir("bad.json")), 404);
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots/0000000000000000",
                        fleet_in_dir("bad.json")), 404);

  /* Killed: the relays keep the rings under the key for their lease. */
  fleet_commit_packets(&h[0].p, 1, "hostA", 6, 3);
  assert_int_equal(tg_test_exit_code(tg_test_stop(c.pid, SIGKILL, FLEET_WAIT_MS)), 128 + SIGKILL);
  collector_start(&c);
  wait_hosts(&c, 2, "tracing");
  json = fleet_in_dir("snap2.json");
  id = snapshot(&c, h, 2, json);
  assert_json(json, "snapshot.state", "\"complete\"");
  trace = fleet_in_dir("snap2.pftrace");
  download(&c, id, trace);
  fleet_trace_load(trace, &t);
  /* Older and newer packets: the same ring, never emptied. */
  fleet_trace_assert_values(&t, "hostA", 1, 8);
  fleet_trace_assert_values(&t, "hostB", 1, 7);
  fleet_trace_free(&t);

  /* A host down: the snapshot is partial and names it. */
  fleet_relay_stop(&h[1].relay, SIGKILL);
  json = fleet_in_dir("snap3.json");
  id = snapshot(&c, h, 1, json);
  assert_json(json, "snapshot.state", "\"partial\"");
  assert_json(json, "snapshot.hosts_failed", "1");
  for (int i = 0; i < 2; i++) {
    char key[32], down[96];
    snprintf(key, sizeof(key), "hosts.%d.host", i);
    snprintf(down, sizeof(down), "\"%s\"", h[1].spec);
    bool is_down = !strcmp(tg_test_json(json, key), down);
    snprintf(key, sizeof(key), "hosts.%d.outcome", i);
    assert_json(json, key, is_down ? "\"failed\"" : "\"ok\"");
  }

  /* Metrics count what happened. */
  const char *metrics = fleet_in_dir("metrics.txt");
  assert_int_equal(http(&c, "GET", "/metrics", metrics), 200);
  assert_true(tg_test_wait_file_text(metrics, "tracegate_collector_snapshots_total{outcome=\"partial\"} 1", 1000));

  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* A host's trigger: an app on host A fires "app-hit" (ActivateTriggers,
 * as tg_agent_activate_triggers does); the ring's CLONE_SNAPSHOT trigger
 * reaches the collector, which snapshots the whole fleet, the entry
 * naming the trigger and host A. */
static void a_host_trigger_snapshots_the_fleet(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c);
  fleet_commit_packets(&h[0].p, 0, "trigA", 1, 4);
  fleet_commit_packets(&h[1].p, 0, "trigB", 1, 2);
  char *names[1] = {"app-hit"};
  Perfetto__Protos__ActivateTriggersRequest at =
      PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
  at.n_trigger_names = 1;
  at.trigger_names = names;
  assert_int_equal(raw_call(&h[0].p.conn, "ActivateTriggers", &at.base, -1,
                            NULL, NULL, FLEET_WAIT_MS), 1);
  for (size_t i = 0; i < 2; i++) fleet_ack_flush(&h[i].p);
  const char *list = fleet_in_dir("trig.json");
  char want[96];
  snprintf(want, sizeof(want), "\"%s\"", h[0].spec);
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(&c, "GET", "/api/v1/snapshots?trigger=app-hit&state=complete", list), 200);
    const char *v = tg_test_json(list, "snapshots.0.id");
    if (v && strcmp(v, "null") != 0) break;
    assert_true(tg_test_now_ms() < end);
    usleep(50 * 1000);
  }
  assert_json(list, "snapshots.0.origin", want);
  assert_json(list, "snapshots.0.hosts", "2");
  char id[32];
  snprintf(id, sizeof(id), "%.16s", tg_test_json(list, "snapshots.0.id") + 1);
  const char *trace = fleet_in_dir("trig.pftrace");
  download(&c, id, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "trigA", 1, 4);
  fleet_trace_assert_values(&t, "trigB", 1, 2);
  fleet_trace_free(&t);
  /* The trigger is counted. */
  const char *metrics = fleet_in_dir("metrics2.txt");
  assert_int_equal(http(&c, "GET", "/metrics", metrics), 200);
  assert_true(tg_test_wait_file_text(metrics, "tracegate_collector_trigger_hits_total 1\n", 1000));
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* kill -9 mid-snapshot: the clones wait for the producers' flush (not
 * acknowledged yet) when the collector dies. After the restart the
 * snapshot whose id was returned is still a row (failed: interrupted),
 * nothing is pending, and the next snapshot holds every packet. */
static void a_collector_killed_mid_snapshot(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c);
  fleet_commit_packets(&h[0].p, 0, "midA", 1, 3);
  fleet_commit_packets(&h[1].p, 0, "midB", 1, 3);
  const char *json = fleet_in_dir("mid.json");
  assert_int_equal(http(&c, "POST", "/api/v1/snapshots?reason=mid", json), 202);
  char id[32];
  snprintf(id, sizeof(id), "%.16s", tg_test_json(json, "id") + 1);
  uint64_t flush[2];
  for (size_t i = 0; i < 2; i++) {
    flush[i] = raw_producer_wait_flush(&h[i].p, h[i].p.last_flush_id, FLEET_WAIT_MS);
    assert_true(flush[i] > 0);
  }
  assert_int_equal(tg_test_exit_code(tg_test_stop(c.pid, SIGKILL, FLEET_WAIT_MS)),
                   128 + SIGKILL);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_commit(&h[i].p, NULL, NULL, 0, flush[i]), 0);

  collector_start(&c);
  char path[64];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id);
  assert_int_equal(http(&c, "GET", path, json), 200);
  assert_json(json, "snapshot.state", "\"failed\"");
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots?state=pending", json), 200);
  assert_json(json, "snapshots", "[]");
  wait_hosts(&c, 2, "tracing");
  json = fleet_in_dir("mid2.json");
  const char *id2 = snapshot(&c, h, 2, json);
  assert_json(json, "snapshot.state", "\"complete\"");
  const char *trace = fleet_in_dir("mid.pftrace");
  download(&c, id2, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "midA", 1, 3);
  fleet_trace_assert_values(&t, "midB", 1, 3);
  fleet_trace_free(&t);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* The inventory changes while the collector runs: a host added by
 * replacing the file starts, the other keeps its ring untouched (same
 * state since, no restart, its packets still there); a host removed with
 * SIGHUP leaves. */
static void the_inventory_changes_while_running(void **state) {
  (void)state;
  fleet_host_t h[2];
  start_hosts(h, 2);
  write_config(h, 1);
  collector_t c;
  collector_start(&c);
  assert_int_equal(raw_producer_wait_started(&h[0].p, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 1, "tracing");
  const char *out = fleet_in_dir("inv.json");
  assert_int_equal(http(&c, "GET", "/api/v1/hosts", out), 200);
  char since[32];
  snprintf(since, sizeof(since), "%s", tg_test_json(out, "hosts.0.since_ms"));
  fleet_commit_packets(&h[0].p, 0, "invA", 1, 3);

  write_hosts(h, 2); /* the watch reads it again */
  assert_int_equal(raw_producer_wait_started(&h[1].p, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 2, "tracing");
  assert_int_equal(http(&c, "GET", "/api/v1/hosts", out), 200);
  char want[96];
  snprintf(want, sizeof(want), "\"%s\"", h[0].spec);
  assert_json(out, "hosts.0.host", want); /* kept first, untouched */
  assert_json(out, "hosts.0.since_ms", since);
  assert_json(out, "hosts.0.restarts", "0");
  const char *json = fleet_in_dir("inv-snap.json");
  const char *id = snapshot(&c, h, 2, json);
  assert_json(json, "snapshot.state", "\"complete\"");
  assert_json(json, "snapshot.hosts", "2");
  const char *trace = fleet_in_dir("inv.pftrace");
  download(&c, id, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "invA", 1, 3);
  fleet_trace_free(&t);

  /* Host A out, read on SIGHUP (the watch may see the file first). */
  FILE *f = fopen(fleet_in_dir("hosts.txt"), "w");
  assert_non_null(f);
  fprintf(f, "%s name=relay.test\n", h[1].spec);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(kill(c.pid, SIGHUP), 0);
  snprintf(want, sizeof(want), "\"%s\"", h[1].spec);
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(&c, "GET", "/api/v1/hosts", out), 200);
    const char *v = tg_test_json(out, "hosts.0.host");
    if (v && !strcmp(v, want) && !tg_test_json(out, "hosts.1.host")) break;
    assert_true(tg_test_now_ms() < end);
    usleep(50 * 1000);
  }
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(operator_snapshots_and_a_killed_collector),
      cmocka_unit_test(a_host_trigger_snapshots_the_fleet),
      cmocka_unit_test(a_collector_killed_mid_snapshot),
      cmocka_unit_test(the_inventory_changes_while_running),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
