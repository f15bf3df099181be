/* tracegate-collector end to end: hosts of the fleet harness (a real
 * tracegated with a raw producer, a real tracegate-relay in front of it on
 * a loopback TLS port) and the collector as a child, talked to over its
 * HTTP API on a loopback port (coll_e2e.h).
 *
 * What is asserted: every host's ring reaches "tracing"; an operator's
 * snapshot holds every host's packets (machine per host), its row is
 * complete and lists both hosts, each named in the row and on its
 * machine's root track (with Perfetto's binaries, as trace processor
 * reads it); a second snapshot holds what the rings
 * kept (older and newer packets); a collector killed with SIGKILL and
 * started again finds the same rings (the packets committed before the
 * kill are in the next snapshot) and a catalog without a pending row; a
 * host that is down is named as failed in a partial snapshot.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "collector/catalog/catalog.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#include "fleet_harness.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "raw_ipc.h"
#include "fleet_trace.h"
#include "test_notice.h"
#include "test_proc.h"
#include "test_wait.h"
#include "abi/smb.h"
#include "tracegate/pb_wire.h"

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

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

/* Each of the |n| hosts of the snapshot |json| (its "hosts") is named by
 * its spec (all share name=relay.test, which gives way), in the snapshot's
 * hosts and on the root track of its machine in the trace |t| (at
 * |path|), as trace processor reads it too when PERFETTO_BIN is set. */
static void assert_names(const char *json, const fleet_trace_t *t,
                         const char *path, size_t n) {
  char names[4][TG_COLL_HOST_MAX + 3];
  assert_true(n <= 4);
  for (size_t i = 0; i < n; i++) {
    char key[32], host[TG_COLL_HOST_MAX + 3];
    snprintf(key, sizeof(key), "hosts.%zu.host", i);
    assert_non_null(tg_test_json(json, key));
    snprintf(host, sizeof(host), "%s", tg_test_json(json, key));
    snprintf(key, sizeof(key), "hosts.%zu.name", i);
    assert_json(json, key, host);
    /* The host's machine: its root track carries its name. */
    host[strlen(host) - 1] = 0;
    uint32_t mid = 0;
    for (size_t k = 0; k < t->n; k++) {
      const Perfetto__Protos__TracePacket *pk = t->pk[k];
      if (pk->data_case ==
              PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR &&
          !pk->track_descriptor->has_parent_uuid &&
          pk->track_descriptor->name &&
          !strcmp(pk->track_descriptor->name, host + 1))
        mid = pk->machine_id;
    }
    assert_true(mid > 0);
    snprintf(names[i], sizeof(names[i]), "%s", host + 1);
  }
  /* Trace processor's answer is by name. */
  qsort(names, n, sizeof(names[0]), by_name);
  char want[sizeof(names) + 8] = "\"";
  for (size_t i = 0; i < n; i++) {
    size_t at = strlen(want);
    snprintf(want + at, sizeof(want) - at, "%s%s", i ? " " : "", names[i]);
  }
  snprintf(want + strlen(want), sizeof(want) - strlen(want), "\"\n");
  char got[512];
  int tp = tg_test_tp_answer(
      path, "select group_concat(name, ' ') from (select t.name from track "
            "t join track c on c.parent_id = t.id where t.parent_id is null "
            "and c.name = 'clock sync' order by t.name)",
      got, sizeof(got));
  assert_true(tp >= 0);
  if (tp) assert_string_equal(got, want);
}

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("coll");
}

/* An operator's snapshot holds both hosts' packets; the rings keep them
 * for the next one; kill -9 and a restart re-attach to the same rings. */
static void operator_snapshots_and_a_killed_collector(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, NULL);
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
  /* HEAD: the download's headers (its length), without its body. */
  {
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace", id);
    const char *head = fleet_in_dir("head.out");
    assert_int_equal(http(&c, "HEAD", path, head), 200);
    struct stat st, hs;
    assert_int_equal(stat(trace, &st), 0);
    assert_int_equal(stat(head, &hs), 0);
    assert_int_equal(hs.st_size, 0);
    assert_true(st.st_size > 0);
    assert_int_equal(http_length(head), st.st_size);
  }
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "hostA", 1, 5);
  fleet_trace_assert_values(&t, "hostB", 1, 7);
  assert_machine(&t, "hostA", 1);
  assert_machine(&t, "hostB", 2);
  assert_names(json, &t, trace, 2);
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
  /* An id that is not there: 404 naming it, not deleted under a wait. */
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots/7fffffffffffffff",
                        fleet_in_dir("bad.json")), 404);
  assert_json(fleet_in_dir("bad.json"), "id", "\"7fffffffffffffff\"");
  assert_json(fleet_in_dir("bad.json"), "deleted", "false");

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
  /* The host's state says it: reconnecting (or failed, past the
   * reconnect limit), since when and why. */
  {
    const char *hj = fleet_in_dir("down-hosts.json");
    char key[48], down[96];
    snprintf(down, sizeof(down), "\"%s\"", h[1].spec);
    int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
    for (bool seen = false; !seen;) {
      assert_int_equal(http(&c, "GET", "/api/v1/hosts", hj), 200);
      for (int i = 0; i < 2 && !seen; i++) {
        snprintf(key, sizeof(key), "hosts.%d.host", i);
        if (strcmp(tg_test_json(hj, key), down)) continue;
        snprintf(key, sizeof(key), "hosts.%d.state", i);
        const char *st = tg_test_json(hj, key);
        snprintf(key, sizeof(key), "hosts.%d.why", i);
        const char *why = tg_test_json(hj, key);
        seen = (!strcmp(st, "\"reconnecting\"") || !strcmp(st, "\"failed\"")) &&
               strcmp(why, "\"\"") != 0;
        snprintf(key, sizeof(key), "hosts.%d.since_ms", i);
        if (seen) assert_true(atoll(tg_test_json(hj, key)) > 0);
      }
      if (!seen) {
        assert_true(tg_test_now_ms() < end);
        usleep(100 * 1000);
      }
    }
  }
  /* The list's filters: by host (the down one is in this last snapshot
   * only as failed, but it is a host of every snapshot here), by time. */
  {
    const char *lj = fleet_in_dir("filter.json");
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/snapshots?host=%s&limit=1", h[1].spec);
    assert_int_equal(http(&c, "GET", path, lj), 200);
    char want_id[32];
    snprintf(want_id, sizeof(want_id), "\"%s\"", id);
    assert_json(lj, "snapshots.0.id", want_id);
    assert_json(lj, "next_before", want_id); /* a page of 1: more follow */
    assert_int_equal(http(&c, "GET", "/api/v1/snapshots?host=no.such.host:1", lj), 200);
    assert_json(lj, "snapshots", "[]");
    assert_int_equal(http(&c, "GET", "/api/v1/snapshots?from=9000000000000", lj), 200);
    assert_json(lj, "snapshots", "[]");
    assert_int_equal(http(&c, "GET", "/api/v1/snapshots?from=x", lj), 400);
    /* Arguments the request does not take, or takes once and by value, are
     * refused rather than ignored or picked from: the answer would look
     * like the one asked for. */
    static const char *const refused[][2] = {
        {"GET", "/api/v1/snapshots?limt=1"},
        {"GET", "/api/v1/snapshots?limit=1&limit=2"},
        {"GET", "/api/v1/snapshots?limit"},
        {"GET", "/api/v1/snapshots?&limit=0"}, /* 0 is out of range */
        {"GET", "/api/v1/snapshots?limit=%2B5"}, /* digits only: no sign, */
        {"GET", "/api/v1/snapshots?limit=%205"}, /* no blank */
        {"GET", "/api/v1/snapshots?wait=1"},
        {"GET", "/api/v1/hosts?state=tracing"},
        {"POST", "/api/v1/snapshots?wait=yes"},
        {"POST", "/api/v1/snapshots?limit=1"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
      print_message("%s %s\n", refused[i][0], refused[i][1]);
      assert_int_equal(http(&c, refused[i][0], refused[i][1], lj), 400);
      assert_true(strlen(tg_test_json(lj, "error")) > 2);
    }
    /* A trailing '&' is nothing to refuse. */
    assert_int_equal(http(&c, "GET", "/api/v1/snapshots?limit=1&", lj), 200);
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?x=1", id);
    assert_int_equal(http(&c, "GET", path, lj), 400);
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s?x=1", id);
    assert_int_equal(http(&c, "GET", path, lj), 400);
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s/pin?pinned=1&pinned=0", id);
    assert_int_equal(http(&c, "POST", path, lj), 400);
    /* pinned is 0 or 1 (issue 59 point 11): no other spelling. */
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s/pin?pinned=true", id);
    assert_int_equal(http(&c, "POST", path, lj), 400);
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id);
    assert_int_equal(http(&c, "GET", path, lj), 200); /* nothing was pinned */
    assert_json(lj, "snapshot.pinned", "false");
  }
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
  /* Hosts by state: the live one tracing, every state listed, none of
   * them lumped together as "other". */
  wait_metric(&c, "tracegate_collector_hosts{state=\"tracing\"} 1\n", metrics);
  assert_true(tg_test_wait_file_text(metrics, "tracegate_collector_hosts{state=\"closing\"} ", 0));
  assert_false(tg_test_wait_file_text(metrics, "state=\"other\"", 0));

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
  fleet_up(h, &c, NULL);
  fleet_commit_packets(&h[0].p, 0, "trigA", 1, 4);
  fleet_commit_packets(&h[1].p, 0, "trigB", 1, 2);
  host_fire_trigger(&h[0], "app-hit");
  for (size_t i = 0; i < 2; i++) fleet_ack_flush(&h[i].p);
  const char *list = fleet_in_dir("trig.json");
  char want[96];
  snprintf(want, sizeof(want), "\"%s\"", h[0].spec);
  char id[32];
  snprintf(id, sizeof(id), "%s",
           wait_listed(&c, "/api/v1/snapshots?trigger=app-hit&state=complete", list));
  assert_json(list, "snapshots.0.origin", want);
  assert_json(list, "snapshots.0.hosts", "2");
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
  fleet_up(h, &c, NULL);
  fleet_commit_packets(&h[0].p, 0, "midA", 1, 3);
  fleet_commit_packets(&h[1].p, 0, "midB", 1, 3);
  const char *json = fleet_in_dir("mid.json");
  char id[32];
  snprintf(id, sizeof(id), "%s", snapshot_killed_under_way(&c, h, "mid", json));

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
/* tracegate-collector --check-config of the fleet's collector.conf, its
 * output to |out_fd| (an fd or TG_TEST_FD_*): its exit code. */
static int check_config(int out_fd) {
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", fleet_in_dir("collector.conf"));
  const char *argv[] = {"tracegate-collector", "--config", conf,
                        "--check-config", NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_COLLECTOR_PATH;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = out_fd;
  s.stderr_fd = out_fd;
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  return tg_test_exit_code(tg_test_reap(pid, FLEET_WAIT_MS));
}

static void the_inventory_changes_while_running(void **state) {
  (void)state;
  fleet_host_t h[2];
  start_hosts(h, 2);
  write_config(h, 1, NULL);
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

  /* The inventory turned into a FIFO nobody writes: reading it would
   * block the loop for good. SIGHUP (and the watch) refuse it, the hosts
   * stay as they were and the API keeps answering; a --check-config of
   * it exits 1 at once. */
  char inventory[256], answer[256]; /* fleet_in_dir() reuses its buffer */
  snprintf(inventory, sizeof(inventory), "%s", fleet_in_dir("hosts.txt"));
  snprintf(answer, sizeof(answer), "%s", fleet_in_dir("inv.json"));
  out = answer;
  assert_int_equal(unlink(inventory), 0);
  assert_int_equal(mkfifo(inventory, 0600), 0);
  assert_int_equal(kill(c.pid, SIGHUP), 0);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(http(&c, "GET", "/api/v1/hosts", out), 200);
    assert_json(out, "hosts.0.host", want);
    usleep(100 * 1000);
  }
  assert_int_equal(check_config(TG_TEST_FD_DEVNULL), 1);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* The value of the unlabelled metric |name| in the /metrics text at
 * |path|; fails the test when it is not there. */
static int64_t metric(const char *path, const char *name) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[512];
  size_t n = strlen(name);
  long long v = -1;
  while (fgets(line, sizeof(line), f))
    if (!strncmp(line, name, n) && line[n] == ' ' &&
        sscanf(line + n + 1, "%lld", &v) == 1)
      break;
  fclose(f);
  if (v < 0) fail_msg("%s: no %s", path, name);
  return v;
}

/* HTTPS with client certificates: beyond what the layer's own test
 * checks, the roles: an observe identity reads but may not trigger, a
 * record identity triggers, an identity the authz file does not list is
 * refused, a client without a certificate never gets an answer. SIGHUP
 * reads authz and http_crl again: an identity taken out of the one, or a
 * certificate revoked in the other, is refused from then on. */
static void https_roles_decide_who_reads_and_who_triggers(void **state) {
  (void)state;
  assert_int_equal(tg_test_certs(fleet_in_dir(""), "client pki bob --role observe"), 0);
  assert_int_equal(tg_test_certs(fleet_in_dir(""), "client pki eve --role observe"), 0);
  assert_int_equal(tg_test_certs(fleet_in_dir(""), "client pki dave"), 0);
  FILE *f = fopen(fleet_in_dir("http-authz"), "w");
  assert_non_null(f);
  fputs("alice record\nbob observe\ndave observe\n", f); /* eve: not listed */
  assert_int_equal(fclose(f), 0);
  fleet_host_t h[2];
  collector_t c;
  start_hosts(h, 2);
  write_config(h, 2, "http_cert = pki/relay.test.pem\nhttp_key = pki/relay.test.key\n"
                     "http_ca = pki/ca.pem\nauthz = http-authz\n"
                     "http_crl = pki/crl.pem\n");
  collector_start(&c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  /* A copy: fleet_in_dir() reuses its buffer, and https_as() calls it for
   * the certificate's paths (the answer would overwrite the key). */
  char out_path[512];
  snprintf(out_path, sizeof(out_path), "%s", fleet_in_dir("tls.json"));
  const char *out = out_path;
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) { /* both rings tracing, read as bob */
    assert_int_equal(https_as(&c, "bob", "GET", "/api/v1/hosts", out), 200);
    const char *a = tg_test_json(out, "hosts.0.state");
    const char *b = tg_test_json(out, "hosts.1.state");
    if (a && b && !strcmp(a, "\"tracing\"") && !strcmp(b, "\"tracing\"")) break;
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
  assert_int_equal(https_as(&c, "bob", "POST", "/api/v1/snapshots", out), 403);
  assert_int_equal(https_as(&c, "eve", "GET", "/api/v1/hosts", out), 403);
  assert_int_equal(https_as(&c, "-", "GET", "/api/v1/hosts", out), 0);
  assert_int_equal(http(&c, "GET", "/api/v1/hosts", out), 0); /* plain */
  pid_t pid = http_spawn_as(&c, "alice", "POST", "/api/v1/snapshots?wait=1", out);
  for (size_t i = 0; i < 2; i++) fleet_ack_flush(&h[i].p);
  assert_int_equal(http_wait(pid, out), 200);
  assert_json(out, "snapshot.state", "\"complete\"");

  /* bob out of authz, dave's certificate revoked: both refused once the
   * collector has read them again (SIGHUP is handled from its loop). */
  assert_int_equal(https_as(&c, "dave", "GET", "/api/v1/hosts", out), 200);
  f = fopen(fleet_in_dir("http-authz"), "w");
  assert_non_null(f);
  fputs("alice record\ndave observe\n", f);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(tg_test_certs(fleet_in_dir(""), "revoke pki dave"), 0);
  assert_int_equal(kill(c.pid, SIGHUP), 0);
  end = tg_test_now_ms() + FLEET_WAIT_MS;
  while (https_as(&c, "bob", "GET", "/api/v1/hosts", out) != 403) {
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
  assert_int_equal(https_as(&c, "dave", "GET", "/api/v1/hosts", out), 403);
  assert_int_equal(https_as(&c, "alice", "GET", "/api/v1/hosts", out), 200);
  /* The HTTP layer's counters in /metrics: eve, then bob and dave after
   * the reload, each refused for its certificate once per connection. A
   * connection of bob's open across the reload is ended by it and
   * counted in both; none was evicted. */
  assert_int_equal(https_as(&c, "alice", "GET", "/metrics", out), 200);
  int64_t refused = metric(out, "tracegate_collector_http_refused_peers_total");
  int64_t ended = metric(out, "tracegate_collector_http_ended_by_reload_total");
  assert_true(ended == 0 || ended == 1);
  assert_int_equal(refused, 3 + ended);
  assert_int_equal(metric(out, "tracegate_collector_http_evictions_total"), 0);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* A config with a bad value: --check-config exits 1 and names the file,
 * the line and the key. */
static void a_bad_config_names_its_line(void **state) {
  (void)state;
  fleet_host_t h[1];
  memset(h, 0, sizeof(h));
  snprintf(h[0].spec, sizeof(h[0].spec), "127.0.0.1:9");
  write_config(h, 1, "shard = 2/2\n");
  const char *err = fleet_in_dir("check.err");
  int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(check_config(fd), 1);
  close(fd);
  /* The line after the base config's 14: shard's. */
  assert_true(tg_test_wait_notice(err, TG_N_COLLECTOR_CONFIG_INVALID,
                                  "collector.conf:15: shard:", 1000));
}

/* A relay crash: tracegated keeps the ring for the relay's lease (the
 * relay set SetDisconnectLease for the key), the holder reconnects to the
 * restarted relay and re-attaches; the next snapshot holds what the ring
 * held before the crash and what came after. */
static void a_relay_crash_keeps_the_ring(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, NULL);
  fleet_commit_packets(&h[0].p, 0, "crash", 1, 4);
  int port = h[0].relay.port;
  fleet_relay_stop(&h[0].relay, SIGKILL);
  fleet_relay_start(&h[0].relay, h[0].ts.consumer_sock, port,
                    fleet_in_dir("relay0-again.log"), NULL);
  fleet_commit_packets(&h[0].p, 1, "crash", 5, 2);
  /* Tracing, the holder never restarted (a restart would enable a new
   * ring); the packets from before the crash prove it is the same one. */
  const char *out = fleet_in_dir("crash-hosts.json");
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(&c, "GET", "/api/v1/hosts", out), 200);
    const char *st = tg_test_json(out, "hosts.0.state");
    const char *r = tg_test_json(out, "hosts.0.restarts");
    /* tracing again without a restart of the holder: the same ring */
    if (st && !strcmp(st, "\"tracing\"") && r && !strcmp(r, "0")) break;
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
  const char *json = fleet_in_dir("crash.json");
  const char *id = snapshot(&c, h, 2, json);
  assert_json(json, "snapshot.state", "\"complete\"");
  const char *trace = fleet_in_dir("crash.pftrace");
  download(&c, id, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "crash", 1, 6);
  fleet_trace_free(&t);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* Retention at the daemon: with retention_max_bytes = 1 every snapshot
 * goes once stored, but a pinned one stays. The first is pinned while
 * still pending (its clones wait on the producers' flush). */
static void retention_deletes_all_but_the_pinned(void **state) {
  (void)state;
  fleet_host_t h[2];
  start_hosts(h, 2);
  write_config(h, 2, "retention_max_bytes = 1\n");
  collector_t c;
  collector_start(&c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 2, "tracing");
  fleet_commit_packets(&h[0].p, 0, "kept", 1, 2);
  const char *out = fleet_in_dir("ret.json");
  assert_int_equal(http(&c, "POST", "/api/v1/snapshots?reason=pinned", out), 202);
  char pinned[32], path[96];
  snprintf(pinned, sizeof(pinned), "%.16s", tg_test_json(out, "id") + 1);
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/pin?pinned=1", pinned);
  assert_int_equal(http(&c, "POST", path, out), 200);
  assert_json(out, "snapshot.pinned", "true");
  for (size_t i = 0; i < 2; i++) fleet_ack_flush(&h[i].p);
  /* The next one, not pinned: gone right after it is stored. */
  const char *json = fleet_in_dir("ret2.json");
  const char *id = snapshot(&c, h, 2, json);
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id);
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  while (http(&c, "GET", path, out) != 404) {
    assert_true(tg_test_now_ms() < end);
    usleep(50 * 1000);
  }
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", pinned);
  assert_int_equal(http(&c, "GET", path, out), 200);
  assert_json(out, "snapshot.state", "\"complete\"");
  const char *trace = fleet_in_dir("ret.pftrace");
  download(&c, pinned, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "kept", 1, 2);
  fleet_trace_free(&t);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* Lines of the collector's log with notice |n| that name |spec|. */
static size_t log_lines(tg_notice_t n, const char *spec) {
  FILE *f = fopen(fleet_in_dir("collector.log"), "r");
  assert_non_null(f);
  static char text[1 << 20];
  size_t got = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[got] = 0;
  return tg_test_notice_count(text, n, spec);
}

/* Issue 59 point 12: a host that cannot be reached was warned about at
 * every restart (each RESTART_MS) forever. It is said once, and then
 * only when the reason changes; /api/v1/hosts counts the failures. */
static void an_unreachable_host_is_warned_about_once(void **state) {
  (void)state;
  fleet_host_t h[1];
  start_hosts(h, 1);
  write_config(h, 1, NULL);
  /* A second host on a port nothing listens on (a relay's, stopped). */
  fleet_host_t dead[1];
  start_hosts(dead, 1);
  char spec[64];
  snprintf(spec, sizeof(spec), "%s", dead[0].spec);
  fleet_host_stop(&dead[0]);
  fleet_host_t both[2] = {h[0], dead[0]};
  write_hosts(both, 2);
  collector_t c;
  collector_start(&c);
  const char *out = fleet_in_dir("hosts.json");
  int64_t end = tg_test_now_ms() + 4 * FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(&c, "GET", "/api/v1/hosts", out), 200);
    const char *f0 = tg_test_json(out, "hosts.0.failures");
    const char *f1 = tg_test_json(out, "hosts.1.failures");
    assert_non_null(f0);
    assert_non_null(f1);
    if (atoi(f0) >= 3 || atoi(f1) >= 3) break;
    assert_true(tg_test_now_ms() < end);
    usleep(200 * 1000);
  }
  collector_stop(&c);
  assert_int_equal(log_lines(TG_N_COLLECTOR_HOST_FAILING, spec), 1);
  fleet_host_stop(&h[0]);
}

/* Issue 59 point 12: a relay certificate of another CA was reported as
 * "not signed by the CA given with --ca", the CLI's flag; the collector's
 * setting is its config key `ca`, and the host's why names that. */
static void a_relay_of_another_ca_names_the_config_key(void **state) {
  (void)state;
  assert_int_equal(tg_test_certs(fleet_in_dir(""), "ca other"), 0);
  fleet_host_t h[1];
  start_hosts(h, 1);
  write_config_ca(h, 1, "other/ca.pem", NULL);
  collector_t c;
  collector_start(&c);
  const char *out = fleet_in_dir("hosts-ca.json");
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(&c, "GET", "/api/v1/hosts", out), 200);
    const char *failures = tg_test_json(out, "hosts.0.failures");
    assert_non_null(failures);
    if (atoi(failures) >= 1) break;
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
  const char *why = tg_test_json(out, "hosts.0.why");
  assert_non_null(why);
  if (!strstr(why, "`ca`") || strstr(why, "--ca"))
    fail_msg("the host's why does not name the config key: %s", why);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
}

/* The schedule: snapshot_every = 1s gives snapshots whose trigger is
 * "schedule", with every host's packets. */
static void the_schedule_snapshots_the_fleet(void **state) {
  (void)state;
  fleet_host_t h[2];
  start_hosts(h, 2);
  write_config(h, 2, "snapshot_every = 1s\n");
  collector_t c;
  collector_start(&c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  fleet_commit_packets(&h[0].p, 0, "schedA", 1, 2);
  fleet_commit_packets(&h[1].p, 0, "schedB", 1, 3);
  const char *out = fleet_in_dir("sched.json");
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) { /* answer the scheduled clones' flushes until one is stored */
    for (size_t i = 0; i < 2; i++) {
      uint64_t id = raw_producer_wait_flush(&h[i].p, h[i].p.last_flush_id, 200);
      if (id) assert_int_equal(raw_producer_commit(&h[i].p, NULL, NULL, 0, id), 0);
    }
    assert_int_equal(http(&c, "GET", "/api/v1/snapshots?trigger=schedule&state=complete", out), 200);
    const char *v = tg_test_json(out, "snapshots.0.id");
    if (v && strcmp(v, "null") != 0) break;
    assert_true(tg_test_now_ms() < end);
  }
  assert_json(out, "snapshots.0.hosts", "2");
  char id[32];
  snprintf(id, sizeof(id), "%.16s", tg_test_json(out, "snapshots.0.id") + 1);
  const char *trace = fleet_in_dir("sched.pftrace");
  download(&c, id, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "schedA", 1, 2);
  fleet_trace_assert_values(&t, "schedB", 1, 3);
  fleet_trace_free(&t);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* A group: a snapshot of group "first" clones only its host; each host's
 * row says what time window its packets cover (epoch ms, on the
 * collector's clock through the host's clock estimate). */
/* Wall-clock milliseconds (the catalog's times are epoch ms). */
static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void a_group_snapshots_only_its_hosts(void **state) {
  (void)state;
  fleet_host_t h[2];
  start_hosts(h, 2);
  char extra[160];
  snprintf(extra, sizeof(extra), "group = first %s\n", h[0].spec);
  write_config(h, 2, extra);
  collector_t c;
  collector_start(&c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 2, "tracing");
  fleet_commit_packets(&h[0].p, 0, "grpA", 1, 3);
  fleet_commit_packets(&h[1].p, 0, "grpB", 1, 3);
  const char *out = fleet_in_dir("group.json");
  pid_t pid = http_spawn(&c, "POST", "/api/v1/snapshots?wait=1&group=first", out);
  fleet_ack_flush(&h[0].p); /* only host A is asked */
  assert_int_equal(http_wait(pid, out), 200);
  assert_json(out, "snapshot.state", "\"complete\"");
  assert_json(out, "snapshot.hosts", "1");
  char want[96];
  snprintf(want, sizeof(want), "\"%s\"", h[0].spec);
  assert_json(out, "hosts.0.host", want);
  /* The test packets carry no timestamp, and the service's own packets
   * (the clone's preamble, clock snapshots, stats) are not the ring's
   * data: no window (window_is_the_time_of_the_rings_data has one). */
  assert_json(out, "hosts.0.window_first_ms", "0");
  assert_json(out, "hosts.0.window_last_ms", "0");
  char id[32];
  snprintf(id, sizeof(id), "%.16s", tg_test_json(out, "snapshot.id") + 1);
  const char *trace = fleet_in_dir("group.pftrace");
  download(&c, id, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "grpA", 1, 3);
  assert_int_equal(fleet_trace_count_tag(&t, "grpB"), 0);
  fleet_trace_free(&t);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* --- a host's window is its ring's data -------------------------------------- */

typedef struct te_pkt {
  uint8_t b[160];
  size_t n;
} te_pkt_t;

static void te_varint(te_pkt_t *p, uint32_t field, uint64_t v) {
  uint8_t *e = tg_pb_write_varint(p->b + p->n, TG_PB_TAG(field, TG_PB_WT_VARINT));
  p->n = (size_t)(tg_pb_write_varint(e, v) - p->b);
}

static void te_nested(te_pkt_t *p, uint32_t field, const te_pkt_t *in) {
  uint8_t *e = tg_pb_write_varint(p->b + p->n, TG_PB_TAG(field, TG_PB_WT_LEN));
  e = tg_pb_write_varint(e, in->n);
  memcpy(e, in->b, in->n);
  p->n = (size_t)(e - p->b) + in->n;
}

static uint64_t boot_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What the agent writes for track events, in one chunk: the sequence
 * cleared with its default clock the incremental 64, a ClockSnapshot at
 * now (BOOTTIME and clock 64 read the same; its own time BOOTTIME, said),
 * then two events 1 ms apart written as deltas (1000000 ns each): taken
 * for BOOTTIME values they would be a millisecond after the boot. */
static void commit_track_events(raw_producer_t *p) {
  uint64_t t = boot_ns();
  te_pkt_t pk[4] = {{.n = 0}};
  te_pkt_t defaults = {.n = 0}, boot = {.n = 0}, inc = {.n = 0}, snap = {.n = 0};
  te_varint(&defaults, 58, 64);
  te_varint(&pk[0], 13, 1); /* SEQ_INCREMENTAL_STATE_CLEARED */
  te_nested(&pk[0], 59, &defaults);
  te_varint(&boot, 1, 6);
  te_varint(&boot, 2, t);
  te_varint(&inc, 1, 64);
  te_varint(&inc, 2, t);
  te_varint(&inc, 3, 1);
  te_nested(&snap, 1, &boot);
  te_nested(&snap, 1, &inc);
  te_varint(&pk[1], 8, t);
  te_varint(&pk[1], 58, 6);
  te_nested(&pk[1], 6, &snap);
  for (int i = 2; i < 4; i++) {
    te_varint(&pk[i], 8, 1000000);
    te_varint(&pk[i], 13, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
  }
  const uint8_t *frags[4];
  size_t lens[4];
  for (int i = 0; i < 4; i++) frags[i] = pk[i].b, lens[i] = pk[i].n;
  assert_int_equal(raw_producer_write_chunk(p, 0, 0, TG_PAGE_DIV_4, 1, 0, 0,
                                            frags, lens, 4),
                   0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* Each host's window_first_ms / window_last_ms is the time of its ring's
 * first and last data packet, in epoch ms: within the test's wall-clock
 * bounds around the writes (not the host's boot, not the clone's own
 * packets), and exactly the 2 ms the events span. */
static void window_is_the_time_of_the_rings_data(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, NULL);
  int64_t before = wall_ms();
  for (size_t i = 0; i < 2; i++) commit_track_events(&h[i].p);
  int64_t written = wall_ms();
  const char *out = fleet_in_dir("window.json");
  snapshot(&c, h, 2, out);
  assert_json(out, "snapshot.state", "\"complete\"");
  for (size_t i = 0; i < 2; i++) {
    char key[64];
    snprintf(key, sizeof(key), "hosts.%zu.window_first_ms", i);
    long long first = atoll(tg_test_json(out, key));
    snprintf(key, sizeof(key), "hosts.%zu.window_last_ms", i);
    long long last = atoll(tg_test_json(out, key));
    /* The clock estimate's error is well under a second. */
    assert_true(first >= before - 1000);
    assert_true(last <= written + 1000);
    assert_in_range(last - first, 1, 3); /* 2 ms, rounded either way */
  }
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* A request with one header of the test's choosing (python's http.client,
 * which sends it as given); returns the status. */
static int http_with(const collector_t *c, const char *method,
                     const char *path, const char *name, const char *value) {
  static const char script[] =
      "import http.client, sys\n"
      "port, method, path, name, value = sys.argv[1:6]\n"
      "h = http.client.HTTPConnection('127.0.0.1', int(port), timeout=30)\n"
      "h.putrequest(method, path, skip_host=(name.lower() == 'host'))\n"
      "h.putheader(name, value)\n"
      "h.putheader('Content-Length', '0')\n"
      "h.endheaders()\n"
      "sys.exit(h.getresponse().status // 100)\n";
  char port[16];
  snprintf(port, sizeof(port), "%d", c->port);
  const char *argv[] = {"/usr/bin/python3", "-c", script, port, method, path, name,
                        value, NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = "/usr/bin/python3";
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  return tg_test_exit_code(tg_test_reap(pid, 60000)) * 100;
}

/* Another site's page can reach a loopback listener (a form, a no-cors
 * fetch, DNS rebinding): a foreign Origin or a Host that is not this
 * listener's is refused before anything is done; the listener's own
 * origin and plain tools are served. */
static void requests_of_other_sites_are_refused(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, NULL);
  char own[64], host[64];
  snprintf(own, sizeof(own), "http://127.0.0.1:%d", c.port);
  snprintf(host, sizeof(host), "evil.example:%d", c.port);
  assert_int_equal(http_with(&c, "POST", "/api/v1/snapshots", "Origin",
                             "https://evil.example"), 400);
  assert_int_equal(http_with(&c, "GET", "/api/v1/hosts", "Host", host), 400);
  /* The port written only in digits: -(2^64 - port) wraps to it in
   * strtoul(). */
  snprintf(host, sizeof(host), "127.0.0.1:-%llu",
           (unsigned long long)(0ull - (unsigned long long)c.port));
  assert_int_equal(http_with(&c, "GET", "/api/v1/hosts", "Host", host), 400);
  snprintf(host, sizeof(host), "127.0.0.1:%d", c.port);
  assert_int_equal(http_with(&c, "GET", "/api/v1/hosts", "Host", host), 200);
  assert_int_equal(http_with(&c, "GET", "/api/v1/hosts", "Origin", own), 200);
  /* Nothing was triggered by the refused POST (this collector's count;
   * the store holds earlier tests' snapshots). */
  const char *metrics = fleet_in_dir("sites-metrics.txt");
  assert_int_equal(http(&c, "GET", "/metrics", metrics), 200);
  assert_true(tg_test_wait_file_text(metrics,
                                     "tracegate_collector_trigger_hits_total 0\n", 1000));
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* A file of the test's directory on stderr, for a failure's diagnosis. */
static void dump_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  fprintf(stderr, "--- %s\n", path);
  while (fgets(line, sizeof(line), f)) fputs(line, stderr);
  fclose(f);
}

/* `tracegate snapshot --collector 127.0.0.1:PORT ...` with |args| after
 * the address, its stderr into |err|, while the first |n_ack| hosts'
 * producers answer the clone's flush. Returns its exit status. */
static int cli_snapshot(const collector_t *c, fleet_host_t *hosts,
                        size_t n_ack, const char *const *args,
                        const char *err) {
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", c->port);
  const char *argv[16] = {"snapshot", "--collector", addr};
  size_t n = 3;
  for (; *args && n + 1 < sizeof(argv) / sizeof(argv[0]); args++) argv[n++] = *args;
  argv[n] = NULL;
  int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(efd >= 0);
  pid_t pid = tg_test_spawn_cli(TRACEGATE_CLI_PATH, argv, TG_TEST_FD_DEVNULL, efd);
  close(efd);
  assert_true(pid > 0);
  for (size_t i = 0; i < n_ack; i++) fleet_ack_flush(&hosts[i].p);
  return tg_test_exit_code(tg_test_reap(pid, 90000));
}

/* The CLI's snapshot: complete (exit 0, the reply in --json), partial
 * (exit 3, the failed host named), and no collector at all (exit 1). */
static void the_cli_asks_for_a_snapshot(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, NULL);
  fleet_commit_packets(&h[0].p, 0, "cliA", 1, 3);
  fleet_commit_packets(&h[1].p, 0, "cliB", 1, 2);

  const char *json = fleet_in_dir("cli1.json"), *err = fleet_in_dir("cli1.err");
  const char *const args1[] = {"--reason", "cli", "--json", json, NULL};
  int code = cli_snapshot(&c, h, 2, args1, err);
  if (code != 0) collector_dump_log(), dump_file(err);
  assert_int_equal(code, 0);
  assert_json(json, "snapshot.reason", "\"cli\"");
  assert_json(json, "snapshot.state", "\"complete\"");
  assert_json(json, "snapshot.trigger", "\"operator\"");
  assert_json(json, "snapshot.hosts", "2");

  /* A host down: partial, exit 3, the host named; the reason's bytes
   * arrive as they were (percent-encoded on the way) and come back under
   * the rule for bytes that are not UTF-8 (docs/collector.md). */
  fleet_relay_stop(&h[1].relay, SIGKILL);
  json = fleet_in_dir("cli2.json");
  err = fleet_in_dir("cli2.err");
  const char *const args2[] = {"--reason", "a&b c/%+=\xc3\xa9\xff\xc3", "--group", "all",
                               "--json", json, NULL};
  code = cli_snapshot(&c, h, 1, args2, err);
  if (code != 3) collector_dump_log(), dump_file(err);
  assert_int_equal(code, 3);
  assert_json(json, "snapshot.state", "\"partial\"");
  /* UTF-8 stays the text it spells (Python writes it back escaped); each
   * maximal subpart of what is not, \xff and the cut \xc3, is U+FFFD. */
  assert_json(json, "snapshot.reason", "\"a&b c/%+=\\u00e9\\ufffd\\ufffd\"");
  assert_json(json, "snapshot.hosts_failed", "1");

  /* An unknown group is the collector's refusal: exit 1, nothing written. */
  json = fleet_in_dir("cli3.json");
  err = fleet_in_dir("cli3.err");
  const char *const args3[] = {"--group", "nosuch", "--json", json, NULL};
  assert_int_equal(cli_snapshot(&c, h, 0, args3, err), 1);
  assert_int_equal(access(json, F_OK), -1);

  /* No collector there any more: exit 1, saying so. */
  collector_stop(&c);
  const char *const none[] = {NULL};
  err = fleet_in_dir("cli4.err");
  assert_int_equal(cli_snapshot(&c, h, 0, none, err), 1);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* Addresses that are none are usage errors (exit 2), before any request. */
static void the_cli_refuses_a_bad_collector_address(void **state) {
  (void)state;
  const char *bad[] = {"ftp://127.0.0.1:80", "127.0.0.1", "http://127.0.0.1:80/x",
                       "http://127.0.0.1:0", "", "http://user@127.0.0.1:80"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *err = fleet_in_dir("usage.err");
    const char *args[] = {"snapshot", "--collector", bad[i], NULL};
    int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(efd >= 0);
    pid_t pid = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL, efd);
    close(efd);
    assert_int_equal(tg_test_exit_code(tg_test_reap(pid, 30000)), 2);
    assert_true(tg_test_wait_file_text(err, "--collector", 1000));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(operator_snapshots_and_a_killed_collector),
      FLEET_TEST(a_host_trigger_snapshots_the_fleet),
      FLEET_TEST(a_collector_killed_mid_snapshot),
      FLEET_TEST(the_inventory_changes_while_running),
      FLEET_TEST(https_roles_decide_who_reads_and_who_triggers),
      FLEET_TEST(a_bad_config_names_its_line),
      FLEET_TEST(a_relay_crash_keeps_the_ring),
      FLEET_TEST(retention_deletes_all_but_the_pinned),
      FLEET_TEST(an_unreachable_host_is_warned_about_once),
      FLEET_TEST(a_relay_of_another_ca_names_the_config_key),
      FLEET_TEST(the_schedule_snapshots_the_fleet),
      FLEET_TEST(a_group_snapshots_only_its_hosts),
      FLEET_TEST(window_is_the_time_of_the_rings_data),
      FLEET_TEST(requests_of_other_sites_are_refused),
      FLEET_TEST(the_cli_asks_for_a_snapshot),
      FLEET_TEST(the_cli_refuses_a_bad_collector_address),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
