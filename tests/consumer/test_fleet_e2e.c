/* Remote and fleet recording end to end: hosts of fleet_harness.h (a real
 * tracegated with a raw producer, a real tracegate-relay in front of it on
 * a loopback TLS port) and the tracegate CLI as a child. A link cut goes
 * through fleet_proxy.h's proxy; ssh is a script that runs the relay in
 * --stdio mode.
 *
 * Every wait is on an event (a line from a child, a command from the
 * service, bytes through the proxy, a child's exit) with a deadline, and
 * every child is stopped at the end of its test. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fleet_harness.h"
#include "fleet_proxy.h"
#include "fleet_trace.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "test_proc.h"
#include "abi/smb.h"
#include "consumer/fleet/merge.h"
#include "tracegate/error.h"
#include "tracegate/pb_writer.h"

#define MAX_HOSTS 3

/* Host |i|: its relay's log is relay<i>.log. */
static void start_host(fleet_host_t *h, int i) {
  char log[64];
  snprintf(log, sizeof(log), "relay%d.log", i);
  fleet_host_start(h, fleet_in_dir(log), NULL);
}

static void connect_producer(fleet_host_t *h, uint32_t page_kb, uint32_t smb_kb) {
  fleet_host_connect_producer(h, "fleet.producer", "fleet.ds", page_kb, smb_kb,
                              false);
}

static bool has_unknown_field(const Perfetto__Protos__TracePacket *pk, uint32_t id) {
  for (size_t i = 0; i < pk->base.n_unknown_fields; i++)
    if (pk->base.unknown_fields[i].tag == id) return true;
  return false;
}

/* The name of the root track that |pk| describes, or NULL. */
static const char *root_track_name(const Perfetto__Protos__TracePacket *pk) {
  if (pk->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR)
    return NULL;
  const Perfetto__Protos__TrackDescriptor *d = pk->track_descriptor;
  return d->has_parent_uuid ? NULL : d->name;
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* How many sessions |h|'s tracegated holds (QueryServiceState as root:
 * every session, attached or detached, of any consumer). */
static size_t host_sessions(const fleet_host_t *h) {
  raw_consumer_t rc;
  assert_int_equal(raw_consumer_connect(&rc, &h->ts), 0);
  size_t producers, sources, sessions, replies;
  assert_int_equal(raw_consumer_query_all(&rc, FLEET_WAIT_MS, &producers,
                                          &sources, &sessions, &replies), 0);
  raw_consumer_close(&rc);
  return sessions;
}

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("fleet");
}

/* --- (a) one remote host over TLS --------------------------------------------------------- */

static void remote_record_through_one_relay_over_tls(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, 0);
  connect_producer(&h, 4, 64);
  const char *out = fleet_in_dir("one.pftrace");
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("one.json"));
  const char *args[] = {"record", "-H", h.spec, FLEET_TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "1mb", "--summary-json", sum, "fleet.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  fleet_commit_packets(&h.p, 0, "one", 10, 6);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  assert_json(sum, "exit_code", "0");
  char want[96];
  snprintf(want, sizeof(want), "\"%s\"", h.spec);
  assert_json(sum, "hosts.0.host", want);
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.0.reason", "null");
  assert_json(sum, "hosts.0.loss.total", "0");
  assert_json(sum, "hosts.0.loss.counters", "{}");
  assert_json(sum, "hosts.0.reconnects", "0");
  assert_json(sum, "hosts.0.compression", "\"zstd\"");
  assert_string_not_equal(tg_test_json(sum, "hosts.0.clock_offset_ns"), "null");
  assert_string_not_equal(tg_test_json(sum, "hosts.0.packets"), "0");
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "one", 10, 6);
  /* One host and -o FILE: the packets as the service wrote them. */
  for (size_t i = 0; i < t.n; i++) assert_false(t.pk[i]->has_machine_id);
  fleet_trace_free(&t);
  unlink(out);

  /* The same relay answers query too. */
  const char *query[] = {"query", "-H", h.spec, FLEET_TLS_ARGS, NULL};
  fleet_cli_spawn(&c, query);
  assert_int_equal(fleet_cli_wait(&c), 0);
  fleet_host_stop(&h);
}

/* Issue 15.8: no TLS flags. The files come from the environment, then
 * from the per-user config file; the hosts file names each relay's
 * certificate (the host is an IP address). */
static void tls_files_from_the_environment_and_a_name_per_host(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, 0);
  connect_producer(&h, 4, 64);
  char hosts[128], pki[3][256];
  snprintf(hosts, sizeof(hosts), "%s   name=relay.test  # by IP\n", h.spec);
  FILE *f = fopen(fleet_in_dir("named-hosts.txt"), "w");
  assert_non_null(f);
  fputs(hosts, f);
  fclose(f);
  snprintf(pki[0], sizeof(pki[0]), "%s", fleet_in_dir("pki/alice.pem"));
  snprintf(pki[1], sizeof(pki[1]), "%s", fleet_in_dir("pki/alice.key"));
  snprintf(pki[2], sizeof(pki[2]), "%s", fleet_in_dir("pki/ca.pem"));
  setenv("TRACEGATE_CERT", pki[0], 1);
  setenv("TRACEGATE_KEY", pki[1], 1);
  setenv("TRACEGATE_CA", pki[2], 1);
  char out[256];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("env.pftrace"));
  const char *args[] = {"record", "--hosts", fleet_in_dir("named-hosts.txt"), "-o",
                        out, "-t", "0", "fleet.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  fleet_commit_packets(&h.p, 0, "env", 1, 3);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "env", 1, 3);
  fleet_trace_free(&t);
  unlink(out);
  unsetenv("TRACEGATE_CERT");
  unsetenv("TRACEGATE_KEY");
  unsetenv("TRACEGATE_CA");

  /* The config file: query needs only -H and the name. */
  char cfg_dir[256], cfg[1024];
  snprintf(cfg_dir, sizeof(cfg_dir), "%s", fleet_in_dir("xdg"));
  mkdir(cfg_dir, 0700);
  snprintf(cfg, sizeof(cfg), "%s/tracegate", cfg_dir);
  mkdir(cfg, 0700);
  snprintf(cfg, sizeof(cfg), "%s/tracegate/config", cfg_dir);
  f = fopen(cfg, "w");
  assert_non_null(f);
  fprintf(f, "# test\ncert = %s\nkey=%s\n  ca =  %s  \n", pki[0], pki[1], pki[2]);
  fclose(f);
  setenv("XDG_CONFIG_HOME", cfg_dir, 1);
  const char *query[] = {"query", "-H", h.spec, "--tls-server-name",
                         "relay.test", NULL};
  fleet_cli_spawn(&c, query);
  assert_int_equal(fleet_cli_wait(&c), 0);
  /* A typo in it is named, not ignored. */
  f = fopen(cfg, "w");
  assert_non_null(f);
  fprintf(f, "certt = %s\n", pki[0]);
  fclose(f);
  fleet_cli_spawn(&c, query);
  assert_int_not_equal(fleet_cli_wait(&c), 0);
  assert_notice_with(c.err, TG_N_FLEET_OPTIONS_INVALID, "config:1: ");
  unsetenv("XDG_CONFIG_HOME");
  unlink(cfg);
  fleet_host_stop(&h);
}

/* --- (b) three hosts, merged and per host -------------------------------------------------- */

static const char *const tags[MAX_HOSTS] = {"h1", "h2", "h3"};

/* Starts a session on all three hosts, commits 4 + k packets on host k,
 * stops with Ctrl-C. */
static void record_three(fleet_host_t *hs, const char *const *args, int want_rc,
                         fleet_cli_t *c) {
  for (int i = 0; i < MAX_HOSTS; i++) connect_producer(&hs[i], 4, 64);
  fleet_cli_spawn(c, args);
  for (int i = 0; i < MAX_HOSTS; i++) {
    assert_int_equal(raw_producer_wait_started(&hs[i].p, FLEET_WAIT_MS), 0);
    fleet_commit_packets(&hs[i].p, 0, tags[i], 100 * (uint32_t)i, 4 + (unsigned)i);
  }
  kill(c->pid, SIGINT);
  for (int i = 0; i < MAX_HOSTS; i++) fleet_ack_flush(&hs[i].p);
  assert_int_equal(fleet_cli_wait(c), want_rc);
  for (int i = 0; i < MAX_HOSTS; i++) fleet_host_drop_producer(&hs[i]);
}

/* |names|: each host's name (its -H spec), which names a root track of
 * the host's machine. */
static void check_merged(const char *path, const char *const *names) {
  fleet_trace_t t;
  char root[MAX_HOSTS + 1][300] = {{0}};
  fleet_trace_load(path, &t);
  uint32_t mid_of[MAX_HOSTS] = {0};
  bool sysinfo[MAX_HOSTS + 1] = {0}, clock[MAX_HOSTS + 1] = {0},
       rcs[MAX_HOSTS + 1] = {0};
  /* sequence id -> machine id: no id may appear on two machines. */
  enum { MAXSEQ = 512 };
  uint32_t seq[MAXSEQ], seq_mid[MAXSEQ];
  size_t nseq = 0;
  for (size_t i = 0; i < t.n; i++) {
    Perfetto__Protos__TracePacket *pk = t.pk[i];
    uint32_t mid = pk->has_machine_id ? pk->machine_id : 0;
    /* Only the collector's own first packets are machine 0. */
    if (i >= 2) assert_true(mid >= 1 && mid <= MAX_HOSTS);
    for (int k = 0; k < MAX_HOSTS; k++) {
      if (!fleet_has_tag(pk, tags[k])) continue;
      if (!mid_of[k]) mid_of[k] = mid;
      assert_int_equal(mid_of[k], mid);
    }
    if (pk->optional_trusted_packet_sequence_id_case ==
        PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID) {
      uint32_t s = pk->trusted_packet_sequence_id;
      if (mid) assert_int_equal(s >> 20, mid);
      size_t j = 0;
      for (; j < nseq && seq[j] != s; j++) {
      }
      if (j == nseq) {
        assert_true(nseq < MAXSEQ);
        seq[nseq] = s;
        seq_mid[nseq++] = mid;
      }
      assert_int_equal(seq_mid[j], mid);
    }
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO &&
        pk->system_info->tracegate_hostname && mid <= MAX_HOSTS)
      sysinfo[mid] = true;
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT &&
        mid <= MAX_HOSTS)
      clock[mid] = true;
    if (has_unknown_field(pk, 107) && mid <= MAX_HOSTS) rcs[mid] = true;
    const char *name = root_track_name(pk);
    if (mid <= MAX_HOSTS && name) {
      assert_string_equal(root[mid], ""); /* one per machine */
      snprintf(root[mid], sizeof(root[mid]), "%s", name);
    }
  }
  for (int k = 0; k < MAX_HOSTS; k++) {
    assert_int_equal(fleet_trace_count_tag(&t, tags[k]), 4 + (size_t)k);
    fleet_trace_assert_values(&t, tags[k], 100 * (uint32_t)k, 4 + (size_t)k);
    for (int j = 0; j < k; j++) assert_int_not_equal(mid_of[j], mid_of[k]);
    assert_string_equal(root[mid_of[k]], names[k]);
  }
  /* Trace processor has each host's name on its machine's root track.
   * Its machine ids are rows in the order machines first appear; the
   * trace's own id is the row's raw_id. */
  char want[1024] = "\"", got[1024];
  for (uint32_t m = 1; m <= MAX_HOSTS; m++)
    for (int k = 0; k < MAX_HOSTS; k++) {
      if (mid_of[k] != m) continue;
      size_t at = strlen(want);
      snprintf(want + at, sizeof(want) - at, "%s%u=%s", m > 1 ? " " : "", m,
               names[k]);
    }
  snprintf(want + strlen(want), sizeof(want) - strlen(want), "\"\n");
  int tp = tg_test_tp_answer(
      path, "select group_concat(x, ' ') from (select m.raw_id || '=' || "
            "t.name as x from track t join machine m on m.id = t.machine_id "
            "where t.parent_id is null order by m.raw_id)",
      got, sizeof(got));
  assert_true(tp >= 0);
  if (tp) assert_string_equal(got, want);
  /* The collector (machine 0) and every host have system info and clocks;
   * every host a RemoteClockSync (field 107) against the collector. */
  for (int m = 0; m <= MAX_HOSTS; m++) {
    assert_true(sysinfo[m]);
    assert_true(clock[m]);
    if (m) assert_true(rcs[m]);
  }
  fleet_trace_free(&t);
}

/* Host 0's linux.ftrace stats (start, then end) say its kernel overwrote
 * events; host 1 sends plain packets. The summary JSON lists the overrun
 * as ftrace_cpu_overrun in host 0's loss, counted in its total, as a
 * local recording does, and host 1 loses nothing. */
static void ftrace_overruns_are_a_hosts_loss(void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) {
    start_host(&hs[i], i);
    connect_producer(&hs[i], 4, 64);
  }
  char merged[256], sum[256];
  snprintf(merged, sizeof(merged), "%s", fleet_in_dir("overrun.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("overrun.json"));
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec,
                        FLEET_TLS_ARGS, "-o", merged, "--merge", "-t", "0",
                        "-b", "1mb", "--summary-json", sum, "fleet.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  for (int i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&hs[i].p, FLEET_WAIT_MS), 0);
  const uint64_t start[2] = {3, 4}, end[2] = {10, 24};
  fleet_commit_ftrace_stats(&hs[0].p, 0, start, end, 2);
  fleet_commit_packets(&hs[1].p, 0, "plain", 1, 3);
  kill(c.pid, SIGINT);
  for (int i = 0; i < 2; i++) fleet_ack_flush(&hs[i].p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.0.loss.counters.ftrace_cpu_overrun", "27");
  assert_json(sum, "hosts.0.loss.total", "27");
  assert_json(sum, "hosts.1.outcome", "\"ok\"");
  assert_json(sum, "hosts.1.loss.total", "0");
  unlink(merged);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

/* Host 0's linux.ftrace did not start (its stats name every event failed
 * and no CPU, as tracegate-probes write them without tracefs); host 1 is
 * fine. Both deliver: the run exits 4, host 0's summary lists the
 * problem with its code, host 1 has none; a name no host offers is
 * listed for both, and is no failure. */
static void a_hosts_data_source_that_did_not_start_exits_4(void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) {
    start_host(&hs[i], i);
    connect_producer(&hs[i], 4, 64);
  }
  char merged[256], sum[256];
  snprintf(merged, sizeof(merged), "%s", fleet_in_dir("dsfail.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("dsfail.json"));
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec,
                        FLEET_TLS_ARGS, "-o", merged, "--merge", "-t", "0",
                        "-b", "1mb", "--summary-json", sum, "fleet.ds",
                        "no.such.source", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  for (int i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&hs[i].p, FLEET_WAIT_MS), 0);
  char *events[] = {"sched/sched_switch", "sched/sched_waking"};
  fleet_commit_ftrace_failure(&hs[0].p, 0, events, 2);
  fleet_commit_packets(&hs[1].p, 0, "plain", 1, 3);
  kill(c.pid, SIGINT);
  for (int i = 0; i < 2; i++) fleet_ack_flush(&hs[i].p);
  assert_int_equal(fleet_cli_wait(&c), 4);
  assert_notice_with(c.err, TG_N_DS_NOT_STARTED, " linux.ftrace: did not start");
  assert_json(sum, "exit_code", "4");
  char want[300];
  snprintf(want, sizeof(want), "\"%s\"", merged); /* written: not a failure */
  assert_json(sum, "output", want);
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.0.problems.0.code", "\"TG-7012\"");
  assert_json(sum, "hosts.0.problems.0.data_source", "\"no.such.source\"");
  assert_json(sum, "hosts.0.problems.1.kind", "\"data_source\"");
  assert_json(sum, "hosts.0.problems.1.data_source", "\"linux.ftrace\"");
  assert_json(sum, "hosts.0.problems.1.code", "\"TG-7010\"");
  assert_json(sum, "hosts.0.problems.1.events", "2");
  assert_json(sum, "hosts.1.outcome", "\"ok\"");
  assert_json(sum, "hosts.1.problems.0.code", "\"TG-7012\"");
  assert_null(tg_test_json(sum, "hosts.1.problems.1"));
  unlink(merged);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

/* Perfetto's CLI exits 0 when linux.ftrace runs without some of its
 * events (an Android-only event on this kernel); so does `record`, which
 * names the problem (a warning), and exits 4 when none of the events the
 * config asked for were enabled, or with --strict. The config asks
 * linux.ftrace for two events; host 0's probes refuse |refused| of them
 * with their ring buffer open. */
static void ftrace_refusing_events_exits(void **state, size_t refused,
                                         bool strict, int want) {
  (void)state;
  fleet_host_t hs[1];
  start_host(&hs[0], 0);
  connect_producer(&hs[0], 4, 64);
  char merged[256], sum[256], cfg[256];
  snprintf(merged, sizeof(merged), "%s", fleet_in_dir("refused.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("refused.json"));
  snprintf(cfg, sizeof(cfg), "%s", fleet_in_dir("refused.pbtxt"));
  FILE *f = fopen(cfg, "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 1024 }\n"
        "data_sources { config { name: \"fleet.ds\" } }\n"
        "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
        "  ftrace_events: \"sched/sched_switch\"\n"
        "  ftrace_events: \"scm/scm_call_start\" } } }\n", f);
  assert_int_equal(fclose(f), 0);
  const char *args[] = {"record", "-H", hs[0].spec, FLEET_TLS_ARGS, "-o",
                        merged, "--merge", "-c", cfg, "--txt",
                        "--summary-json", sum,
                        strict ? "--strict" : NULL, NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&hs[0].p, FLEET_WAIT_MS), 0);
  char *events[] = {"scm/scm_call_start", "sched/sched_switch"};
  fleet_commit_ftrace_refused(&hs[0].p, 0, events, refused);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&hs[0].p);
  assert_int_equal(fleet_cli_wait(&c), want);
  char code[8];
  snprintf(code, sizeof(code), "%d", want);
  assert_json(sum, "exit_code", code);
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  /* Listed either way: linux.ftrace has no producer here (TG-7012),
   * and its refused events (TG-7011). */
  assert_json(sum, "hosts.0.problems.1.code", "\"TG-7011\"");
  snprintf(code, sizeof(code), "%zu", refused);
  assert_json(sum, "hosts.0.problems.1.events", code);
  unlink(merged);
  unlink(sum);
  fleet_host_stop(&hs[0]);
}

static void ftrace_without_some_events_is_a_warning(void **state) {
  ftrace_refusing_events_exits(state, 1, false, 0);
}

static void ftrace_without_some_events_fails_when_strict(void **state) {
  ftrace_refusing_events_exits(state, 1, true, 4);
}

static void ftrace_without_any_event_asked_fails(void **state) {
  ftrace_refusing_events_exits(state, 2, false, 4);
}

/* Host 0 has a producer of slow.ds that asks to confirm its start and
 * never does (tracegate-perf refusing linux.perf): the host's service
 * names it in the trace when the session stops, and `record -H` exits 4
 * with host 0's not_started problem for it; host 1, which has no such
 * producer, only lists it as not offered. */
static void a_hosts_data_source_that_never_confirms_its_start_exits_4(
    void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) {
    start_host(&hs[i], i);
    connect_producer(&hs[i], 4, 64);
  }
  raw_producer_t slow;
  assert_int_equal(raw_producer_connect(&slow, &hs[0].ts, "slow.producer",
                                        NULL, 4, 64, false), 0);
  Perfetto__Protos__DataSourceDescriptor d =
      PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
  d.name = "slow.ds";
  d.has_will_notify_on_start = d.will_notify_on_start = 1;
  d.has_no_flush = d.no_flush = 1; /* the stop's flush does not wait for it */
  Perfetto__Protos__RegisterDataSourceRequest r =
      PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
  r.data_source_descriptor = &d;
  assert_int_equal(raw_call(&slow.conn, "RegisterDataSource", &r.base, -1,
                            NULL, NULL, FLEET_WAIT_MS), 1);
  char merged[256], sum[256];
  snprintf(merged, sizeof(merged), "%s", fleet_in_dir("slow.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("slow.json"));
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec,
                        FLEET_TLS_ARGS, "-o", merged, "--merge", "-t", "0",
                        "-b", "1mb", "--summary-json", sum, "fleet.ds",
                        "slow.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  for (int i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&hs[i].p, FLEET_WAIT_MS), 0);
  assert_int_equal(raw_producer_wait_started(&slow, FLEET_WAIT_MS), 0);
  for (int i = 0; i < 2; i++)
    fleet_commit_packets(&hs[i].p, 0, "plain", 1, 3);
  kill(c.pid, SIGINT);
  for (int i = 0; i < 2; i++) fleet_ack_flush(&hs[i].p);
  assert_int_equal(fleet_cli_wait(&c), 4);
  assert_notice_with(c.err, TG_N_DS_NOT_STARTED, " slow.ds: did not start");
  assert_json(sum, "exit_code", "4");
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.0.problems.0.kind", "\"data_source\"");
  assert_json(sum, "hosts.0.problems.0.data_source", "\"slow.ds\"");
  assert_json(sum, "hosts.0.problems.0.code", "\"TG-7010\"");
  assert_json(sum, "hosts.0.problems.0.reason", "\"not_started\"");
  assert_null(tg_test_json(sum, "hosts.0.problems.1"));
  assert_json(sum, "hosts.1.outcome", "\"ok\"");
  assert_json(sum, "hosts.1.problems.0.code", "\"TG-7012\"");
  assert_json(sum, "hosts.1.problems.0.data_source", "\"slow.ds\"");
  assert_null(tg_test_json(sum, "hosts.1.problems.1"));
  unlink(merged);
  raw_producer_close(&slow);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

static void three_hosts_merged_and_one_file_each(void **state) {
  (void)state;
  fleet_host_t hs[MAX_HOSTS];
  for (int i = 0; i < MAX_HOSTS; i++) start_host(&hs[i], i);
  char merged[256], sum[256];
  snprintf(merged, sizeof(merged), "%s", fleet_in_dir("merged.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("merged.json"));
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec, "-H",
                        hs[2].spec, FLEET_TLS_ARGS, "-o", merged, "--merge", "-t", "0",
                        "-b", "1mb", "--summary-json", sum, "fleet.ds", NULL};
  fleet_cli_t c;
  record_three(hs, args, 0, &c);
  char want[300];
  snprintf(want, sizeof(want), "\"%s\"", merged);
  assert_json(sum, "output", want);
  for (int k = 0; k < MAX_HOSTS; k++) {
    char key[64];
    snprintf(key, sizeof(key), "hosts.%d.outcome", k);
    assert_json(sum, key, "\"ok\"");
    snprintf(key, sizeof(key), "hosts.%d.machine_id", k);
    assert_string_not_equal(tg_test_json(sum, key), "null");
    snprintf(key, sizeof(key), "hosts.%d.loss.total", k);
    assert_json(sum, key, "0");
    /* Given by -H only, a host is named by its spec. */
    char host[300];
    snprintf(key, sizeof(key), "hosts.%d.host", k);
    assert_non_null(tg_test_json(sum, key));
    snprintf(host, sizeof(host), "%s", tg_test_json(sum, key));
    snprintf(key, sizeof(key), "hosts.%d.name", k);
    assert_json(sum, key, host);
  }
  assert_null(tg_test_json(sum, "hosts.3")); /* three hosts, no more */
  const char *const names[MAX_HOSTS] = {hs[0].spec, hs[1].spec, hs[2].spec};
  check_merged(merged, names);
  unlink(merged);

  /* -o DIR: one file per host, named after it, each with its own packets
   * as the service wrote them. Hosts from a file this time. */
  const char *dir = fleet_in_dir("per-host");
  char hosts[512];
  snprintf(hosts, sizeof(hosts), "# the fleet\n%s\n\n%s   # second\n%s\n",
           hs[0].spec, hs[1].spec, hs[2].spec);
  FILE *f = fopen(fleet_in_dir("hosts.txt"), "w");
  assert_non_null(f);
  fputs(hosts, f);
  fclose(f);
  const char *dargs[] = {"record", "--hosts", fleet_in_dir("hosts.txt"), FLEET_TLS_ARGS,
                         "-o", dir, "-t", "0", "fleet.ds", NULL};
  record_three(hs, dargs, 0, &c);
  for (int k = 0; k < MAX_HOSTS; k++) {
    char path[256];
    snprintf(path, sizeof(path), "%s/127.0.0.1_%d.pftrace", dir, hs[k].relay.port);
    fleet_trace_t t;
    fleet_trace_load(path, &t);
    for (int j = 0; j < MAX_HOSTS; j++)
      assert_int_equal(fleet_trace_count_tag(&t, tags[j]), j == k ? 4 + (size_t)k : 0);
    fleet_trace_free(&t);
    unlink(path);
  }
  rmdir(dir);
  for (int i = 0; i < MAX_HOSTS; i++) fleet_host_stop(&hs[i]);
}

/* A recording that ended well frees every host's session before the CLI
 * exits (FreeBuffers): nothing is left for the relay to detach under the
 * resume key, or for tracegated to keep under its disconnect lease. */
static void clean_end_leaves_no_session_on_any_host(void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) start_host(&hs[i], 8 + i);
  char merged[256], sum[256];
  snprintf(merged, sizeof(merged), "%s", fleet_in_dir("freed.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("freed.json"));
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec,
                        FLEET_TLS_ARGS, "-o", merged, "--merge", "-t", "0",
                        "-b", "1mb", "--summary-json", sum, "fleet.ds", NULL};
  fleet_cli_t c;
  for (int i = 0; i < 2; i++) connect_producer(&hs[i], 4, 64);
  fleet_cli_spawn(&c, args);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(raw_producer_wait_started(&hs[i].p, FLEET_WAIT_MS), 0);
    fleet_commit_packets(&hs[i].p, 0, tags[i], 0, 3);
    assert_int_equal(host_sessions(&hs[i]), 1); /* the recording's */
  }
  kill(c.pid, SIGINT);
  for (int i = 0; i < 2; i++) fleet_ack_flush(&hs[i].p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.1.outcome", "\"ok\"");
  assert_null(strstr(c.err, TG_NOTE(FLEET_SESSION_NOT_FREED)));
  /* Right after the end, on every host: no session, attached or not. */
  for (int i = 0; i < 2; i++) assert_int_equal(host_sessions(&hs[i]), 0);
  fleet_trace_t t;
  fleet_trace_load(merged, &t);
  fleet_trace_assert_values(&t, tags[0], 0, 3);
  fleet_trace_assert_values(&t, tags[1], 0, 3);
  fleet_trace_free(&t);
  unlink(merged);
  for (int i = 0; i < 2; i++) {
    fleet_host_drop_producer(&hs[i]);
    fleet_host_stop(&hs[i]);
  }
}

/* --- (c) one host down ------------------------------------------------------------------------- */

static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
  socklen_t l = sizeof(a);
  assert_int_equal(getsockname(s, (struct sockaddr *)&a, &l), 0);
  close(s); /* nothing listens there now */
  return ntohs(a.sin_port);
}

/* The CLI runs |args| against hosts |hs| (0 and 1), each of which
 * commits values 0..2 of its tag once tracing. */
static void record_two(fleet_host_t *hs, const char *const *args,
                       fleet_cli_t *c) {
  for (int i = 0; i < 2; i++) connect_producer(&hs[i], 4, 64);
  fleet_cli_spawn(c, args);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(raw_producer_wait_started(&hs[i].p, FLEET_WAIT_MS), 0);
    fleet_commit_packets(&hs[i].p, 0, tags[i], 0, 3);
  }
}

static void a_host_down_fails_the_run_but_not_the_others(void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) start_host(&hs[i], i);
  char down[64];
  snprintf(down, sizeof(down), "127.0.0.1:%d", free_port());
  const char *dir = fleet_in_dir("partial");
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("partial.json"));
  const char *args[] = {"record", "-H", hs[0].spec, "-H", down, "-H", hs[1].spec,
                        FLEET_TLS_ARGS, "-o", dir, "-t", "0", "--summary-json",
                        sum, "fleet.ds", NULL};
  fleet_cli_t c;
  record_two(hs, args, &c);
  kill(c.pid, SIGINT);
  for (int i = 0; i < 2; i++) fleet_ack_flush(&hs[i].p);
  assert_int_not_equal(fleet_cli_wait(&c), 0);
  /* The failed host is named in the summary, its reason in the JSON. */
  char want[300];
  snprintf(want, sizeof(want), "  %s: ", down);
  assert_notice_with(c.err, TG_N_FLEET_HOST_FAILED, want);
  assert_json(sum, "hosts.1.failure", "\"connect\"");
  /* The same for scripts: hosts in the order given, each with its file. */
  assert_json(sum, "exit_code", "1");
  assert_json(sum, "output", "null");
  snprintf(want, sizeof(want), "\"%s\"", down);
  assert_json(sum, "hosts.1.host", want);
  assert_json(sum, "hosts.1.outcome", "\"failed\"");
  assert_json(sum, "hosts.1.path", "null");
  assert_string_not_equal(tg_test_json(sum, "hosts.1.reason"), "null");
  for (int i = 0; i < 2; i++) {
    char path[256];
    snprintf(path, sizeof(path), "%s/127.0.0.1_%d.pftrace", dir, hs[i].relay.port);
    snprintf(want, sizeof(want), "\"%s\"", path);
    assert_json(sum, i ? "hosts.2.path" : "hosts.0.path", want);
    assert_json(sum, i ? "hosts.2.outcome" : "hosts.0.outcome", "\"ok\"");
    fleet_trace_t t;
    fleet_trace_load(path, &t);
    fleet_trace_assert_values(&t, tags[i], 0, 3);
    fleet_trace_free(&t);
    unlink(path);
  }
  char dead[256];
  snprintf(dead, sizeof(dead), "%s/127.0.0.1_%s.pftrace", dir, strchr(down, ':') + 1);
  assert_false(exists(dead));
  rmdir(dir);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

/* A host whose every packet has a new sequence id (a hostile relay in
 * front of it): record --merge fails that host at the merge's bound, with
 * the reason, and keeps the other host's packets. */
static void merge_fails_a_host_that_floods_sequence_ids(void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) start_host(&hs[i], i);
  tg_hostile_relay_t *x = fleet_hostile_start(&hs[0], TG_HOSTILE_SEQ_FLOOD);
  char merged[256], sum[256];
  snprintf(merged, sizeof(merged), "%s", fleet_in_dir("flood.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("flood.json"));
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec,
                        FLEET_TLS_ARGS, "-o", merged, "--merge", "--compress",
                        "none", "-t", "0", "--summary-json", sum, "fleet.ds",
                        NULL};
  fleet_cli_t c;
  record_two(hs, args, &c);
  /* The flood starts at the end of the host's first read, and any read
   * after it (the last one at the stop too) floods again. */
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (tg_hostile_stats_t st = {0}; st.forged_packets <= TG_MERGE_HOST_MAX_SEQS;
       tg_hostile_relay_stats(x, &st)) {
    assert_true(tg_test_now_ms() < end);
    usleep(20 * 1000);
  }
  kill(c.pid, SIGINT);
  fleet_ack_flush(&hs[1].p);
  assert_int_not_equal(fleet_cli_wait(&c), 0);
  assert_json(sum, "hosts.0.outcome", "\"failed\"");
  assert_json(sum, "hosts.0.failure", "\"session\"");
  const char *why = tg_test_json(sum, "hosts.0.reason");
  assert_non_null(why);
  assert_non_null(strstr(why, tg_strerror(TG_ETOO_MANY_SEQUENCES)));
  assert_json(sum, "hosts.1.outcome", "\"ok\"");
  fleet_trace_t t;
  fleet_trace_load(merged, &t);
  fleet_trace_assert_values(&t, tags[1], 0, 3);
  fleet_trace_free(&t);
  unlink(merged);
  tg_hostile_relay_stop(x);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

/* The relay answers but its tracegated is not running: the relay refuses
 * ConsumerPort and answers its own service, and the host fails as a
 * refused connection, not as a peer without TracegateRelay sending plain
 * (the CLI said both when the relay refused the whole connection). */
static void a_relay_without_its_service_fails_as_refused(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, 0);
  assert_true(WIFEXITED(test_service_terminate(&h.ts)));
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("noservice.json"));
  const char *out = fleet_in_dir("noservice.pftrace");
  const char *args[] = {"record", "-H", h.spec, FLEET_TLS_ARGS, "-o", out, "-t",
                        "0", "--summary-json", sum, "fleet.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_not_equal(fleet_cli_wait(&c), 0);
  assert_json(sum, "exit_code", "1");
  assert_json(sum, "hosts.0.outcome", "\"failed\"");
  assert_json(sum, "hosts.0.failure", "\"connect\"");
  assert_json(sum, "hosts.0.compression", "\"zstd\"");
  assert_json(sum, "hosts.0.reconnects", "0");
  assert_null(strstr(c.err, "TracegateRelay"));
  assert_false(exists(out));
  unlink(sum);
  fleet_host_stop(&h);
}

/* --- (d) a link cut mid-session ------------------------------------------------------------------ */

static void link_cut_mid_session_reconnects_and_keeps_everything(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, 0);
  connect_producer(&h, 32, 256);
  fleet_proxy_t px;
  fleet_proxy_start(&px, h.relay.port);
  char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", px.port);
  const char *out = fleet_in_dir("cut.pftrace");
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("cut.json"));
  /* Uncompressed, so that the bytes through the proxy count packets. */
  const char *args[] = {"record", "-H", spec, FLEET_TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "4mb", "--compress", "none", "--summary-json",
                        sum, "fleet.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  /* Before the cut: 20 packets of 1 KB, and wait until they went through
   * the proxy to the CLI (the periodic reads fetch them). */
  unsigned long long base = atomic_load(&px.down_bytes);
  fleet_commit_big(&h.p, 0, "before", 0, 20);
  fleet_proxy_wait_down_bytes(&px, base, 20 * FLEET_BIG);
  fleet_proxy_cut(&px);
  /* After the cut: written while the CLI is away or back; either way the
   * session keeps it. */
  fleet_commit_big(&h.p, 1, "after", 0, 20);
  /* Stop once the CLI is through the proxy again. */
  int64_t deadline = tg_test_now_ms() + FLEET_WAIT_MS;
  while (atomic_load(&px.accepted) < 2) fleet_proxy_wait(&px, deadline);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  assert_json(sum, "exit_code", "0");
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.0.reconnects", "1");
  assert_json(sum, "hosts.0.loss.total", "0");
  assert_json(sum, "hosts.0.compression", "\"plain-not-asked\"");
  /* The human summary says the same. */
  assert_notice(c.err, TG_N_FLEET_RECONNECTED);
  assert_notice(c.err, TG_N_FLEET_HOST_RECONNECTS);
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "before", 0, 20);
  fleet_trace_assert_values(&t, "after", 0, 20);
  fleet_trace_free(&t);
  unlink(out);
  fleet_proxy_stop(&px);
  fleet_host_stop(&h);
}

/* 160 packets of FLEET_BIG bytes from one host, recorded through a proxy
 * that counts the bytes the relay sends. |relay_args| (NULL-terminated, or
 * NULL) go to the relay, |compress| to the CLI's --compress (NULL: its
 * default); |c| is left with the CLI's stderr. Checks that every packet
 * arrived; returns the bytes on the wire. */
static unsigned long long record_through_proxy(const char *const *relay_args,
                                               const char *compress,
                                               const char *name,
                                               fleet_cli_t *c) {
  fleet_host_t h;
  fleet_host_start(&h, fleet_in_dir("relay-proxied.log"), relay_args);
  connect_producer(&h, 32, 256);
  fleet_proxy_t px;
  fleet_proxy_start(&px, h.relay.port);
  char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", px.port);
  const char *out = fleet_in_dir(name);
  const char *args[24] = {"record", "-H", spec, FLEET_TLS_ARGS, "-o", out,
                          "-t", "0", "-b", "4mb", "--summary-json",
                          fleet_in_dir("proxied.json")};
  size_t n = 0;
  while (args[n]) n++;
  if (compress) {
    args[n++] = "--compress";
    args[n++] = compress;
  }
  args[n++] = "fleet.ds";
  args[n] = NULL;
  fleet_cli_spawn(c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  for (uint32_t k = 0; k < 8; k++) fleet_commit_big(&h.p, k, "z", k * 20, 20);
  kill(c->pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(c), 0);
  assert_json(fleet_in_dir("proxied.json"), "hosts.0.loss.total", "0");
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "z", 0, 160);
  fleet_trace_free(&t);
  unlink(out);
  unsigned long long wire = atomic_load(&px.down_bytes);
  fleet_proxy_stop(&px);
  fleet_host_stop(&h);
  return wire;
}

/* A link that ends without close_notify (the proxy closes the TCP
 * connection, as a cut on the path or a crash would leave it) is a lost
 * link, never the end of the host's data: with reconnection off the host
 * fails and the run's exit status says so. */
static void truncated_link_is_an_error_not_the_end_of_data(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, 0);
  connect_producer(&h, 32, 256);
  fleet_proxy_t px;
  fleet_proxy_start(&px, h.relay.port);
  char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", px.port);
  char out[256], sum[256];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("truncated.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("truncated.json"));
  const char *args[] = {"record", "-H", spec, FLEET_TLS_ARGS, "-o", out,
                        "-t", "0", "-b", "4mb", "--compress", "none",
                        "--reconnect-timeout", "0", "--summary-json", sum,
                        "fleet.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  unsigned long long base = atomic_load(&px.down_bytes);
  fleet_commit_big(&h.p, 0, "before", 0, 20);
  fleet_proxy_wait_down_bytes(&px, base, 20 * FLEET_BIG);
  fleet_proxy_cut(&px);
  int status = fleet_cli_wait(&c);
  assert_int_not_equal(status, 0);
  /* A FIN without close_notify, or a reset when bytes were still in
   * flight through the proxy (tests/tls tells the two apart): a lost
   * link either way. */
  assert_json(sum, "hosts.0.outcome", "\"failed\"");
  assert_json(sum, "hosts.0.failure", "\"link_lost\"");
  unlink(out);
  fleet_proxy_stop(&px);
  fleet_host_stop(&h);
}

/* Compression (the default): the same packets arrive, and the proxy in
 * the middle sees a fraction of their bytes; with --compress none it sees
 * them all. The summary says which. */
static void compressed_stream_carries_every_packet_in_fewer_bytes(void **state) {
  (void)state;
  const unsigned long long trace_bytes = 160ull * FLEET_BIG;
  fleet_cli_t c;
  unsigned long long zstd =
      record_through_proxy(NULL, "zstd:3", "zstd.pftrace", &c);
  assert_json(fleet_in_dir("proxied.json"), "hosts.0.compression",
              "\"zstd\"");
  unsigned long long plain =
      record_through_proxy(NULL, "none", "plain.pftrace", &c);
  assert_json(fleet_in_dir("proxied.json"), "hosts.0.compression",
              "\"plain-not-asked\"");
  assert_notice(c.err, TG_N_FLEET_PLAIN_NOT_ASKED);
  print_message("160 KB of packets: %llu bytes on the wire compressed, %llu "
                "plain\n", zstd, plain);
  assert_true(plain > trace_bytes);
  assert_true(zstd * 3 < trace_bytes);
}

/* Lines of the audit trail |path| (TIME IDENTITY ADDRESS WHAT VERDICT
 * REASON) with these identity, what and verdict fields whose reason holds
 * |reason|. */
static size_t audit_lines(const char *path, const char *identity,
                          const char *what, const char *verdict,
                          const char *reason) {
  FILE *f = fopen(path, "re");
  assert_non_null(f);
  char line[1024];
  size_t n = 0;
  while (fgets(line, sizeof(line), f)) {
    char id[256], w[256], vd[64];
    int at = 0;
    if (sscanf(line, "%*s %255s %*s %255s %63s %n", id, w, vd, &at) != 3 ||
        at == 0)
      continue;
    n += !strcmp(id, identity) && !strcmp(w, what) && !strcmp(vd, verdict) &&
         strstr(line + at, reason) != NULL;
  }
  fclose(f);
  return n;
}

/* A relay run with --compress never: the CLI asks (its default), is
 * refused, records everything over a plain link, and its summary tells
 * the refusal from not asking. */
static void relay_that_never_compresses_sends_plain_and_says_so(void **state) {
  (void)state;
  char audit[256];
  snprintf(audit, sizeof(audit), "%s", fleet_in_dir("never-audit.log"));
  const char *relay_args[] = {"--compress", "never", "--audit-log", audit,
                              NULL};
  fleet_cli_t c;
  unsigned long long wire =
      record_through_proxy(relay_args, NULL, "never.pftrace", &c);
  /* Plain: every byte of the packets crossed the wire. */
  assert_true(wire > 160ull * FLEET_BIG);
  assert_int_equal(audit_lines(audit, "alice", "TracegateRelay.SetCompression",
                               "deny", "(--compress never)"),
                   1);
  assert_int_equal(audit_lines(audit, "alice", "TracegateRelay.SetCompression",
                               "allow", ""),
                   0);
  assert_json(fleet_in_dir("proxied.json"), "hosts.0.compression",
              "\"plain-refused\"");
  assert_notice(c.err, TG_N_FLEET_PLAIN_REFUSED);
  unlink(audit);
}

/* A DEFLATE config (compression_type) merged: the packets inside the
 * hosts' compressed_packets get their machine and sequence ids like any
 * other, so the merged file holds them plainly. */
static void merge_rewrites_packets_inside_compressed_packets(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, 0);
  connect_producer(&h, 32, 256);
  char cfg[200];
  snprintf(cfg, sizeof(cfg), "%s", fleet_in_dir("deflate.pbtxt"));
  FILE *f = fopen(cfg, "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 4096 }\n"
        "data_sources { config { name: \"fleet.ds\" } }\n"
        "compression_type: COMPRESSION_TYPE_DEFLATE\n", f);
  fclose(f);
  const char *out = fleet_in_dir("deflate-merged.pftrace");
  const char *args[] = {"record", "-H", h.spec, FLEET_TLS_ARGS, "-c", cfg, "--txt",
                        "-o", out, "--merge", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  for (uint32_t k = 0; k < 4; k++) fleet_commit_big(&h.p, k, "d", k * 20, 20);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "d", 0, 80);
  size_t tested = 0;
  for (size_t i = 0; i < t.n; i++) {
    assert_int_not_equal(t.pk[i]->data_case,
                         PERFETTO__PROTOS__TRACE_PACKET__DATA_COMPRESSED_PACKETS);
    if (t.pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING)
      continue;
    assert_int_equal(t.pk[i]->machine_id, 1);
    assert_true(t.pk[i]->trusted_packet_sequence_id > 1);
    tested++;
  }
  assert_int_equal(tested, 80);
  fleet_trace_free(&t);
  unlink(out);
  fleet_host_stop(&h);
}

/* --- (e) ssh ---------------------------------------------------------------------------------------- */

static void ssh_transport_runs_the_relay_in_stdio_mode(void **state) {
  (void)state;
  fleet_host_t h;
  memset(&h, 0, sizeof(h));
  assert_int_equal(test_service_start(&h.ts), 0);
  connect_producer(&h, 4, 64);
  /* "ssh" here: the relay in --stdio mode on this host's service; its
   * arguments (-o BatchMode=yes, user@host, the remote command) are
   * recorded for the check below. */
  setenv("TRACEGATE_SSH", fleet_fake_ssh(h.ts.consumer_sock), 1);
  const char *out = fleet_in_dir("ssh.pftrace");
  const char *args[] = {"record", "-H", "ssh://tester@fakehost:2222", "-o", out,
                        "-t", "0", "fleet.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  unsetenv("TRACEGATE_SSH");
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  fleet_commit_packets(&h.p, 0, "ssh", 7, 5);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "ssh", 7, 5);
  fleet_trace_free(&t);
  unlink(out);
  char line[256] = "";
  FILE *f = fopen(fleet_in_dir("ssh-args"), "r");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof(line), f));
  fclose(f);
  assert_non_null(strstr(line, "-p 2222 tester@fakehost tracegate-relay --stdio"));
  fleet_host_drop_producer(&h);
  assert_int_equal(test_service_stop(&h.ts), 0);
}

/* --- (f) a CLI that dies: its session taken back with --attach ------------------------- */

/* Issue 15.1 through relays: the names each host lacks, said once per name
 * with the hosts that lack it. Host 0 registers fleet.ds, host 1 nothing;
 * "fleet.dz" is a typo on both. */
static void unregistered_names_said_once_with_the_hosts_lacking_them(void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) start_host(&hs[i], i);
  connect_producer(&hs[0], 4, 64);
  const char *merged = fleet_in_dir("names.pftrace");
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec, FLEET_TLS_ARGS,
                        "-o", merged, "--merge", "-t", "0", "-b", "1mb",
                        "fleet.ds", "fleet.dz", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&hs[0].p, FLEET_WAIT_MS), 0);
  fleet_commit_packets(&hs[0].p, 0, "n0", 0, 3);
  /* Said once both hosts answered, just before the last one enables. */
  fleet_cli_read_until(&c, "'fleet.dz'", FLEET_WAIT_MS);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&hs[0].p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  /* One warning per name, naming the hosts that lack it. */
  char line[512];
  assert_true(tg_test_notice_line(c.err, TG_N_UNKNOWN_DATA_SOURCE, "'fleet.ds'",
                                  line, sizeof(line)));
  assert_non_null(strstr(line, hs[1].spec));
  assert_null(strstr(line, hs[0].spec));
  assert_true(tg_test_notice_line(c.err, TG_N_UNKNOWN_DATA_SOURCE, "'fleet.dz'",
                                  line, sizeof(line)));
  assert_non_null(strstr(line, hs[0].spec));
  assert_non_null(strstr(line, hs[1].spec));
  /* The suggestion comes from the host that has the near name. */
  assert_non_null(strstr(line, " fleet.ds?"));
  assert_int_equal(tg_test_notice_count(c.err, TG_N_UNKNOWN_DATA_SOURCE,
                                        "'fleet.ds'"), 1);
  assert_int_equal(tg_test_notice_count(c.err, TG_N_UNKNOWN_DATA_SOURCE,
                                        "'fleet.dz'"), 1);
  fleet_trace_t t;
  fleet_trace_load(merged, &t);
  assert_int_equal(fleet_trace_count_tag(&t, "n0"), 3);
  fleet_trace_free(&t);
  unlink(merged);
  fleet_host_drop_producer(&hs[0]);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

/* Past three hosts lacking a name: one summary line with a count and the
 * first three, not a line (or a list) per host. Four hosts: each relay
 * twice, by address and by name. */
static void many_hosts_lacking_a_name_give_one_summary_line(void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) start_host(&hs[i], i);
  char specs[4][64];
  for (int i = 0; i < 2; i++) {
    snprintf(specs[2 * i], sizeof(specs[0]), "127.0.0.1:%d", hs[i].relay.port);
    snprintf(specs[2 * i + 1], sizeof(specs[0]), "localhost:%d", hs[i].relay.port);
  }
  const char *merged = fleet_in_dir("many.pftrace");
  const char *args[] = {"record", "-H", specs[0], "-H", specs[1], "-H", specs[2],
                        "-H", specs[3], FLEET_TLS_ARGS, "-o", merged, "--merge", "-t",
                        "0", "-b", "1mb", "nope.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  char want[400];
  snprintf(want, sizeof(want), "(%s, %s, %s, ...)", specs[0], specs[1],
           specs[2]);
  fleet_cli_read_until(&c, want, FLEET_WAIT_MS);
  kill(c.pid, SIGINT);
  fleet_cli_wait(&c);
  assert_notice_with(c.err, TG_N_UNKNOWN_DATA_SOURCE, want);
  assert_int_equal(tg_test_notice_count(c.err, TG_N_UNKNOWN_DATA_SOURCE,
                                        "'nope.ds'"), 1);
  unlink(merged);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

/* Above 64 hosts a host enables tracing on its first clock sample and
 * takes the rest of its burst once the fleet traces, its reads held until
 * then: its preamble (the estimate) must still come before every packet
 * of its own in the merged trace, whatever the order the hosts came up
 * in. 80 hosts: 40 spellings of 127.0.0.1 for each of two relays; no
 * producer, the service's own packets are the hosts'. Stopped (Ctrl-C) as
 * soon as all trace, so that some drains wait for their held burst. */
#define BIG_FLEET 80
/* docs/merge.md: a host's preamble has the sequence id (k+1) << 20 | this. */
#define PREAMBLE_SEQ_LOW 0xFFFFFu

static void big_fleet_clock_before_every_host_packet(void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) start_host(&hs[i], i);
  static const char *const zero[] = {"0", "00", "000", "0000"};
  static const char *const one[] = {"1", "01", "001", "0001"};
  FILE *f = fopen(fleet_in_dir("big.hosts"), "w");
  assert_non_null(f);
  for (int k = 0; k < BIG_FLEET; k++) {
    int s = k / 2; /* the spelling */
    fprintf(f, "127.%s.%s.%s:%d\n", zero[s % 4], zero[(s / 4) % 4],
            one[(s / 16) % 4], hs[k % 2].relay.port);
  }
  fclose(f);
  const char *merged = fleet_in_dir("big.pftrace");
  const char *args[] = {"record", "--hosts", fleet_in_dir("big.hosts"),
                        FLEET_TLS_ARGS, "-o", merged, "--merge", "-t", "0",
                        "-b", "1mb", "nope.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  fleet_cli_read_until(&c, TG_NOTE(FLEET_ALL_TRACING), FLEET_WAIT_MS);
  kill(c.pid, SIGINT);
  assert_int_equal(fleet_cli_wait(&c), 0);
  /* Every host's clock was aligned: no count of hosts without. */
  char line[512];
  assert_true(tg_test_notice_line(c.err, TG_N_FLEET_CLOCKS, NULL, line,
                                  sizeof(line)));
  assert_null(strchr(line, ';'));

  fleet_trace_t t;
  fleet_trace_load(merged, &t);
  size_t rcs_at[BIG_FLEET + 1], first_own[BIG_FLEET + 1];
  for (int m = 0; m <= BIG_FLEET; m++) rcs_at[m] = first_own[m] = SIZE_MAX;
  for (size_t i = 0; i < t.n; i++) {
    Perfetto__Protos__TracePacket *pk = t.pk[i];
    uint32_t mid = pk->has_machine_id ? pk->machine_id : 0;
    if (!mid) continue;
    assert_true(mid <= BIG_FLEET);
    if (has_unknown_field(pk, 107) && rcs_at[mid] == SIZE_MAX) rcs_at[mid] = i;
    bool collector_seq =
        pk->optional_trusted_packet_sequence_id_case ==
            PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID &&
        (pk->trusted_packet_sequence_id & PREAMBLE_SEQ_LOW) == PREAMBLE_SEQ_LOW;
    if (!collector_seq && first_own[mid] == SIZE_MAX) first_own[mid] = i;
  }
  for (int m = 1; m <= BIG_FLEET; m++) {
    assert_true(rcs_at[m] != SIZE_MAX);    /* every host is aligned */
    assert_true(first_own[m] != SIZE_MAX); /* and has packets of its own */
    assert_true(rcs_at[m] < first_own[m]);
  }
  fleet_trace_free(&t);
  unlink(merged);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

static void killed_cli_session_taken_back_with_attach_and_merge(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, 5);
  connect_producer(&h, 4, 64);
  /* Copied: fleet_in_dir's buffers are reused by the calls below. */
  char out[256], merged[256];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("killed.pftrace"));
  snprintf(merged, sizeof(merged), "%s", fleet_in_dir("taken-back.pftrace"));
  const char *args[] = {"record", "-H", h.spec, FLEET_TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "1mb", "fleet.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  /* The key is printed with the command that takes the session back. */
  char line[512], key[64] = "";
  fleet_cli_read_notice(&c, TG_N_FLEET_RESUME_KEY, line, sizeof(line),
                        FLEET_WAIT_MS);
  assert_int_equal(sscanf(strstr(line, " --attach ") + 10, "%63[^)]", key), 1);
  assert_true(!strncmp(key, "tg-", 3));
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "record -H %s --attach %s)", h.spec, key);
  assert_non_null(strstr(line, cmd));
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  kill(c.pid, SIGKILL);
  assert_int_equal(fleet_cli_wait(&c), 128 + SIGKILL);
  /* The relay keeps the session under the key once it saw the link go. */
  fleet_wait_log(fleet_in_dir("relay5.log"), TG_NOTE(RELAY_SESSION_DETACHED));
  /* A link that broke keeps its session, to be taken back. */
  assert_int_equal(host_sessions(&h), 1);
  fleet_commit_packets(&h.p, 0, "post", 0, 10);

  char sum[256];
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("taken-back.json"));
  const char *again[] = {"record", "-H", h.spec, FLEET_TLS_ARGS, "--attach", key,
                         "-o", merged, "--merge", "--summary-json", sum, NULL};
  fleet_cli_spawn(&c, again);
  fleet_cli_read_until(&c, TG_NOTE(FLEET_RESUME_KEY), FLEET_WAIT_MS);
  fleet_commit_packets(&h.p, 1, "live", 0, 5);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.0.machine_id", "1");
  fleet_trace_t t;
  fleet_trace_load(merged, &t);
  fleet_trace_assert_values(&t, "post", 0, 10);
  fleet_trace_assert_values(&t, "live", 0, 5);
  for (size_t i = 2; i < t.n; i++) assert_int_equal(t.pk[i]->machine_id, 1);
  fleet_trace_free(&t);
  /* Taken back and ended well: freed. */
  assert_int_equal(host_sessions(&h), 0);
  unlink(merged);
  unlink(out);
  /* The first run's temporary file is what it had read; not ours to check. */
  fleet_host_stop(&h);
}

/* --- (g) a host whose session never ends: its deadline ------------------------------- */

static void stuck_host_fails_at_its_deadline_and_the_other_finishes(void **state) {
  (void)state;
  fleet_host_t hs[2];
  for (int i = 0; i < 2; i++) start_host(&hs[i], 6 + i);
  connect_producer(&hs[0], 4, 64);
  /* Host 2's producer says it will ack the stop, and never acks anything:
   * with long service timeouts its session never ends. */
  fleet_host_connect_producer(&hs[1], "stuck.producer", "fleet.ds", 4, 64, true);
  char cfg[200], dir[200], sum[200];
  snprintf(cfg, sizeof(cfg), "%s", fleet_in_dir("stuck.pbtxt"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("stuck.json"));
  snprintf(dir, sizeof(dir), "%s", fleet_in_dir("deadline"));
  FILE *f = fopen(cfg, "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 1024 }\n"
        "data_sources { config { name: \"fleet.ds\" } }\n"
        "duration_ms: 1000\n"
        "flush_timeout_ms: 60000\n"
        "data_source_stop_timeout_ms: 60000\n", f);
  fclose(f);
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec, FLEET_TLS_ARGS,
                        "-c", cfg, "--txt", "-o", dir, "--grace", "1s",
                        "--summary-json", sum, NULL};
  fleet_cli_t c;
  int64_t t0 = tg_test_now_ms();
  fleet_cli_spawn(&c, args);
  for (int i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&hs[i].p, FLEET_WAIT_MS), 0);
  fleet_commit_packets(&hs[0].p, 0, "fine", 0, 3);
  fleet_ack_flush(&hs[0].p); /* the service's own flush at the duration */
  assert_int_equal(fleet_cli_wait(&c), 1);
  int64_t took = tg_test_now_ms() - t0;
  assert_json(sum, "exit_code", "1");
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.1.outcome", "\"failed\"");
  assert_json(sum, "hosts.1.failure", "\"deadline\"");
  /* The reason names the limits (its words are the feature). */
  const char *why = tg_test_json(sum, "hosts.1.reason");
  assert_non_null(why);
  assert_non_null(strstr(why, "(duration 1s + grace 1s)"));
  /* Well before the service's own 60 s timeouts. */
  assert_true(took < 20000);
  char path[300];
  snprintf(path, sizeof(path), "%s/127.0.0.1_%d.pftrace", dir, hs[0].relay.port);
  fleet_trace_t t;
  fleet_trace_load(path, &t);
  fleet_trace_assert_values(&t, "fine", 0, 3);
  fleet_trace_free(&t);
  unlink(path);
  /* The stuck host's partial trace, if it kept one. */
  snprintf(path, sizeof(path), "%s/127.0.0.1_%d.pftrace", dir, hs[1].relay.port);
  unlink(path);
  rmdir(dir);
  for (int i = 0; i < 2; i++) fleet_host_stop(&hs[i]);
}

/* --- (h) packets that need incremental state their sequence lost ----------------------- */

/* A test packet "tag" with |flags| in sequence_flags (13). */
static size_t state_test_packet(uint8_t *buf, size_t cap, const char *tag,
                                uint32_t flags) {
  tg_pbw_t w;
  tg_pbw_init(&w, buf, cap, NULL, NULL);
  tg_pbw_begin_nested(&w, 900); /* for_testing */
  tg_pbw_append_string(&w, 1, tag);
  tg_pbw_end_nested(&w);
  tg_pbw_append_varint(&w, 13, flags);
  assert_int_equal(tg_pbw_error(&w), 0);
  return (size_t)tg_pbw_written(&w);
}

/* record -H --merge leaves out what trace processor would skip for want
 * of incremental state: a sequence that never clears (writer 1) is loss,
 * counted in the summary's incremental_state_lost and said with
 * [TG-2049]; what a sequence (writer 2) sent before its first clear is the
 * edge, said with [TG-2048] and not counted as loss. */
static void merge_counts_packets_whose_incremental_state_is_lost(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, 8);
  connect_producer(&h, 4, 64);
  char out[256], sum[256];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("state.pftrace"));
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir("state.json"));
  const char *args[] = {"record", "-H", h.spec, FLEET_TLS_ARGS, "-o", out,
                        "--merge", "-t", "0", "-b", "1mb", "--summary-json",
                        sum, "fleet.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  uint8_t pk[5][64];
  const size_t lost_lens[2] = {
      state_test_packet(pk[0], sizeof(pk[0]), "lost", 2),
      state_test_packet(pk[1], sizeof(pk[1]), "lost", 2)};
  const size_t kept_lens[3] = {
      state_test_packet(pk[2], sizeof(pk[2]), "edge", 2),
      state_test_packet(pk[3], sizeof(pk[3]), "kept", 3),
      state_test_packet(pk[4], sizeof(pk[4]), "kept", 2)};
  const uint8_t *lost[2] = {pk[0], pk[1]}, *kept[3] = {pk[2], pk[3], pk[4]};
  assert_int_equal(raw_producer_write_chunk(&h.p, 0, 0, TG_PAGE_DIV_4, 1, 0, 0,
                                            lost, lost_lens, 2), 0);
  assert_int_equal(raw_producer_write_chunk(&h.p, 0, 1, TG_PAGE_DIV_4, 2, 0, 0,
                                            kept, kept_lens, 3), 0);
  uint32_t pages[2] = {0, 0}, chunks[2] = {0, 1};
  assert_int_equal(raw_producer_commit(&h.p, pages, chunks, 2, 0), 0);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  assert_non_null(strstr(c.err, TG_NOTE(FLEET_STATE_LOST)));
  assert_non_null(strstr(c.err, TG_NOTE(FLEET_STATE_EDGE)));
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.0.loss.counters.incremental_state_lost", "2");
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  assert_int_equal(fleet_trace_count_tag(&t, "kept"), 2);
  assert_int_equal(fleet_trace_count_tag(&t, "lost"), 0);
  assert_int_equal(fleet_trace_count_tag(&t, "edge"), 0);
  fleet_trace_free(&t);
  unlink(out);
  fleet_host_stop(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(remote_record_through_one_relay_over_tls),
      FLEET_TEST(tls_files_from_the_environment_and_a_name_per_host),
      FLEET_TEST(three_hosts_merged_and_one_file_each),
      FLEET_TEST(clean_end_leaves_no_session_on_any_host),
      FLEET_TEST(ftrace_overruns_are_a_hosts_loss),
      FLEET_TEST(a_hosts_data_source_that_did_not_start_exits_4),
      FLEET_TEST(ftrace_without_some_events_is_a_warning),
      FLEET_TEST(ftrace_without_some_events_fails_when_strict),
      FLEET_TEST(ftrace_without_any_event_asked_fails),
      FLEET_TEST(a_hosts_data_source_that_never_confirms_its_start_exits_4),
      FLEET_TEST(
          unregistered_names_said_once_with_the_hosts_lacking_them),
      FLEET_TEST(many_hosts_lacking_a_name_give_one_summary_line),
      FLEET_TEST(big_fleet_clock_before_every_host_packet),
      FLEET_TEST(a_host_down_fails_the_run_but_not_the_others),
      FLEET_TEST(merge_fails_a_host_that_floods_sequence_ids),
      FLEET_TEST(a_relay_without_its_service_fails_as_refused),
      FLEET_TEST(link_cut_mid_session_reconnects_and_keeps_everything),
      FLEET_TEST(truncated_link_is_an_error_not_the_end_of_data),
      FLEET_TEST(compressed_stream_carries_every_packet_in_fewer_bytes),
      FLEET_TEST(relay_that_never_compresses_sends_plain_and_says_so),
      FLEET_TEST(merge_rewrites_packets_inside_compressed_packets),
      FLEET_TEST(ssh_transport_runs_the_relay_in_stdio_mode),
      FLEET_TEST(killed_cli_session_taken_back_with_attach_and_merge),
      FLEET_TEST(stuck_host_fails_at_its_deadline_and_the_other_finishes),
      FLEET_TEST(merge_counts_packets_whose_incremental_state_is_lost),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
