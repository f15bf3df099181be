/* Rings that wrap, end to end: two hosts of the fleet harness (tracegated
 * and a relay each), each with a tracegate-emit writing track events
 * (slices and a counter, their names interned, on the sequence's
 * incremental clock) into small rings, and the collector as a child.
 *
 * What is asserted, once the service's own counters (its TraceStats in a
 * snapshot: bytes_overwritten) say each ring wrapped many times:
 * - with the collector's ring_clear_period (its default added to a flight
 *   config without incremental_state_config), the snapshot is complete,
 *   with no loss; trace processor (PERFETTO_BIN) skips none of its packets
 *   and finds, on each host's machine, slices and counters; the same with
 *   the app tracks joined on machine 0 (the default merge), where it
 *   finds both hosts' processes with slices, and counters;
 * - with ring_clear_period = 0 (off), the same rings lose their sequences'
 *   incremental state: each host is partial, its loss and error say why
 *   ([TG-5021]), and trace processor still skips none of the file's
 *   packets (the merge left those out).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "fleet_harness.h"
#include "fleet_trace.h"
#include "test_proc.h"

#ifndef TRACEGATE_EMIT_PATH
#error "TRACEGATE_EMIT_PATH must name the tracegate-emit binary"
#endif

#define RING_KB 256u
/* The rings must have been overwritten this many times over. */
#define WRAPS 6u
/* Snapshots taken while waiting for the wraps, at most. */
#define MAX_ROUNDS 150

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("ring");
}

/* Two hosts without producers of the harness; their rings are the
 * collector's (|extra| config lines), of RING_KB with only track_event and
 * no incremental_state_config, their app tracks merged as |app_tracks|
 * says (merge_app_tracks: "machines" keeps them on each host's machine,
 * where TP_COUNTS counts them per host; "joined" puts them on machine 0,
 * where TP_JOINED_COUNTS does). */
static void ring_fleet_up(fleet_host_t h[2], collector_t *c,
                          const char *app_tracks, const char *extra) {
  for (size_t i = 0; i < 2; i++) {
    char log[64];
    snprintf(log, sizeof(log), "relay%zu.log", i);
    fleet_host_start(&h[i], fleet_in_dir(log), NULL);
  }
  char lines[512];
  snprintf(lines, sizeof(lines), "merge_app_tracks = %s\n%s", app_tracks,
           extra ? extra : "");
  write_config(h, 2, lines);
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "w");
  assert_non_null(f);
  fprintf(f, "buffers { size_kb: %u fill_policy: RING_BUFFER }\n"
             "data_sources { config { name: \"track_event\" } }\n",
          RING_KB);
  assert_int_equal(fclose(f), 0);
  collector_start(c);
  wait_hosts(c, 2, "tracing");
}

/* tracegate-emit on |h|: two threads (two sequences) of track events. */
static pid_t emit_start(const fleet_host_t *h, size_t i) {
  char log[64];
  snprintf(log, sizeof(log), "emit%zu.log", i);
  int fd = open(fleet_in_dir(log), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                0644);
  assert_true(fd >= 0);
  const char *argv[] = {TRACEGATE_EMIT_PATH, "--socket", h->ts.producer_sock,
                        "--track-events", "--rate", "1000", "--size", "48",
                        "--threads", "2", "--log-level", "error", NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_EMIT_PATH;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = TG_TEST_FD_DEVNULL;
  s.stderr_fd = fd;
  pid_t pid = tg_test_spawn(&s);
  close(fd);
  assert_true(pid > 0);
  return pid;
}

/* The ring's bytes_overwritten, as the service's TraceStats in the
 * snapshot |t| says it for machine |machine|; 0 when it is not there. */
static uint64_t overwritten(const fleet_trace_t *t, uint32_t machine) {
  uint64_t v = 0;
  for (size_t i = 0; i < t->n; i++) {
    const Perfetto__Protos__TracePacket *pk = t->pk[i];
    if (pk->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS ||
        !pk->has_machine_id || pk->machine_id != machine)
      continue;
    for (size_t b = 0; b < pk->trace_stats->n_buffer_stats; b++)
      v += pk->trace_stats->buffer_stats[b]->bytes_overwritten;
  }
  return v;
}

/* Snapshots until one shows both rings overwritten WRAPS times over (the
 * service's own counters); that one's id, its answer in |json| and its
 * trace in |trace|. */
static const char *snapshot_after_wraps(const collector_t *c, fleet_host_t h[2],
                                        const char *json, const char *trace) {
  for (int round = 0; round < MAX_ROUNDS; round++) {
    const char *id = snapshot(c, h, 0, json);
    download(c, id, trace);
    fleet_trace_t t;
    fleet_trace_load(trace, &t);
    uint64_t a = overwritten(&t, 1), b = overwritten(&t, 2);
    fleet_trace_free(&t);
    if (a >= WRAPS * RING_KB * 1024 && b >= WRAPS * RING_KB * 1024) {
      fprintf(stderr, "snapshot %s after %d rounds: %" PRIu64 " and %" PRIu64
              " bytes overwritten\n", id, round + 1, a, b);
      return id;
    }
    usleep(1000 * 1000); /* within the snapshots per minute allowed */
  }
  collector_dump_log();
  fail_msg("the rings did not wrap %u times", WRAPS);
  return NULL;
}

/* trace processor's answer to |query| on |trace| (its last line, the
 * quotes of its CSV removed) into |out|; false when PERFETTO_BIN is not
 * set (the caller skips, saying so). */
static bool tp_query(const char *trace, const char *query, char *out,
                     size_t cap) {
  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) return false;
  char cmd[2048], line[512];
  snprintf(cmd, sizeof(cmd), "'%s/trace_processor_shell' -Q \"%s\" '%s' "
           "2>/dev/null", bin, query, trace);
  FILE *tp = popen(cmd, "r");
  assert_non_null(tp);
  out[0] = 0;
  while (fgets(line, sizeof(line), tp)) {
    size_t k = 0;
    for (const char *s = line; *s && *s != '\n' && k + 1 < cap; s++)
      if (*s != '"') out[k++] = *s;
    out[k] = 0;
  }
  assert_int_equal(pclose(tp), 0);
  return true;
}

/* What trace processor skipped for want of incremental state, then per
 * machine 1 and 2 the slices named "emit" and the counter values of
 * "emit.seq": "skipped,slices1,slices2,counters1,counters2". */
static const char TP_COUNTS[] =
    "select "
    "(select ifnull(sum(value), 0) from stats where name = "
    "'tokenizer_skipped_packets') || ',' || "
    "(select count(*) from slice join track on slice.track_id = track.id "
    "where slice.name = 'emit' and track.machine_id = 1) || ',' || "
    "(select count(*) from slice join track on slice.track_id = track.id "
    "where slice.name = 'emit' and track.machine_id = 2) || ',' || "
    "(select count(*) from counter join track on counter.track_id = track.id "
    "where track.name = 'emit.seq' and track.machine_id = 1) || ',' || "
    "(select count(*) from counter join track on counter.track_id = track.id "
    "where track.name = 'emit.seq' and track.machine_id = 2)";

/* In the joined mode, where both hosts' app tracks are on machine 0 with
 * their processes named HOST/name: what trace processor skipped, the
 * hosts whose processes hold "emit" slices, and the "emit.seq" counter
 * values there: "skipped,hosts,counters". */
static const char TP_JOINED_COUNTS[] =
    "select "
    "(select ifnull(sum(value), 0) from stats where name = "
    "'tokenizer_skipped_packets') || ',' || "
    "(select count(distinct substr(p.name, 1, instr(p.name, '/') - 1)) "
    "from slice s join thread_track tt on s.track_id = tt.id join thread "
    "using (utid) join process p using (upid) where s.name = 'emit' and "
    "p.name glob '*/*') || ',' || "
    "(select count(*) from counter join track on counter.track_id = track.id "
    "where track.name = 'emit.seq' and track.machine_id is null)";

/* |trace|: trace processor skips nothing and reads slices and counters of
 * both machines (whether the file kept them is the caller's to say). */
static void assert_tp_reads_both(const char *trace) {
  char out[256];
  if (!tp_query(trace, TP_COUNTS, out, sizeof(out))) {
    fprintf(stderr, "[ SKIPPED  ] the trace processor import: PERFETTO_BIN "
                    "(the directory of Perfetto's binaries) is not set\n");
    return;
  }
  fprintf(stderr, "trace processor: skipped,slices1,slices2,counters1,"
                  "counters2 = %s\n", out);
  unsigned long long skipped, s1, s2, c1, c2;
  assert_int_equal(sscanf(out, "%llu,%llu,%llu,%llu,%llu", &skipped, &s1, &s2,
                          &c1, &c2), 5);
  assert_int_equal(skipped, 0);
  assert_true(s1 > 0 && s2 > 0 && c1 > 0 && c2 > 0);
}

/* The same of a joined snapshot: both hosts' slices and counters, on
 * machine 0. */
static void assert_tp_reads_both_joined(const char *trace) {
  char out[256];
  if (!tp_query(trace, TP_JOINED_COUNTS, out, sizeof(out))) {
    fprintf(stderr, "[ SKIPPED  ] the trace processor import: PERFETTO_BIN "
                    "(the directory of Perfetto's binaries) is not set\n");
    return;
  }
  fprintf(stderr, "trace processor: skipped,hosts,counters = %s\n", out);
  unsigned long long skipped, hosts, counters;
  assert_int_equal(sscanf(out, "%llu,%llu,%llu", &skipped, &hosts, &counters),
                   3);
  assert_int_equal(skipped, 0);
  assert_int_equal(hosts, 2);
  assert_true(counters > 0);
}

/* The value of the series |name| (no labels) in the /metrics text at
 * |path|; fails the test when it is not there. */
static unsigned long long metric_value(const char *path, const char *name) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[512];
  size_t n = strlen(name);
  unsigned long long v = 0;
  bool seen = false;
  while (fgets(line, sizeof(line), f))
    if (!strncmp(line, name, n) && line[n] == ' ') {
      v = strtoull(line + n + 1, NULL, 10);
      seen = true;
    }
  fclose(f);
  if (!seen) fail_msg("%s: no %s", path, name);
  return v;
}

static void stop_all(fleet_host_t h[2], collector_t *c, pid_t emit[2]) {
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(tg_test_exit_code(tg_test_stop(emit[i], SIGTERM,
                                                    FLEET_WAIT_MS)), 0);
  collector_stop(c);
  for (size_t i = 0; i < 2; i++) fleet_host_stop(&h[i]);
}

/* The collector's default: a ring config without incremental_state_config
 * gets ring_clear_period's clear, said once in its log ([TG-5020]); the
 * wrapped rings' snapshot is complete, lossless, and reads whole, with the
 * app tracks on each host's machine (|app_tracks| "machines") or on
 * machine 0 ("joined", the default), where a sequence's packets before
 * its first clear are a ring's edge too, not a loss. */
static void rings_that_clear_read_whole(const char *app_tracks) {
  fleet_host_t h[2];
  collector_t c;
  ring_fleet_up(h, &c, app_tracks, "ring_clear_period = 100ms\n"
                                   "operator_snapshots_per_minute = 600\n");
  fleet_wait_log(fleet_in_dir("collector.log"), "[TG-5020]");
  pid_t emit[2] = {emit_start(&h[0], 0), emit_start(&h[1], 1)};
  char json[256], trace[256], name[64];
  snprintf(name, sizeof(name), "clear-%s.json", app_tracks);
  snprintf(json, sizeof(json), "%s", fleet_in_dir(name));
  snprintf(name, sizeof(name), "clear-%s.pftrace", app_tracks);
  snprintf(trace, sizeof(trace), "%s", fleet_in_dir(name));
  snapshot_after_wraps(&c, h, json, trace);
  assert_json(json, "snapshot.state", "\"complete\"");
  assert_json(json, "snapshot.loss", "0");
  for (size_t i = 0; i < 2; i++) {
    char key[48];
    snprintf(key, sizeof(key), "hosts.%zu.outcome", i);
    assert_json(json, key, "\"ok\"");
    snprintf(key, sizeof(key), "hosts.%zu.loss", i);
    assert_json(json, key, "0");
  }
  if (!strcmp(app_tracks, "joined"))
    assert_tp_reads_both_joined(trace);
  else
    assert_tp_reads_both(trace);
  /* The rings' oldest edge was left out, and counted apart from loss. */
  const char *metrics = fleet_in_dir("metrics.txt");
  assert_int_equal(http(&c, "GET", "/metrics", metrics), 200);
  assert_true(metric_value(metrics, "tracegate_collector_ring_edge_packets_total") >
              0);
  stop_all(h, &c, emit);
}

static void wrapped_rings_that_clear_read_whole(void **state) {
  (void)state;
  rings_that_clear_read_whole("machines");
}

static void wrapped_rings_that_clear_read_whole_joined(void **state) {
  (void)state;
  rings_that_clear_read_whole("joined");
}

/* ring_clear_period = 0: nothing clears, the wrapped rings keep packets
 * whose state is gone; each host is partial with the reason, and the file
 * still has nothing trace processor skips. */
static void wrapped_rings_without_clears_are_partial(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  ring_fleet_up(h, &c, "machines", "ring_clear_period = 0\n"
                         "operator_snapshots_per_minute = 600\n");
  pid_t emit[2] = {emit_start(&h[0], 0), emit_start(&h[1], 1)};
  const char *json = fleet_in_dir("noclear.json");
  const char *trace = fleet_in_dir("noclear.pftrace");
  snapshot_after_wraps(&c, h, json, trace);
  assert_json(json, "snapshot.state", "\"partial\"");
  for (size_t i = 0; i < 2; i++) {
    char key[48];
    snprintf(key, sizeof(key), "hosts.%zu.outcome", i);
    assert_json(json, key, "\"partial\"");
    snprintf(key, sizeof(key), "hosts.%zu.error", i);
    const char *err = tg_test_json(json, key);
    assert_non_null(err);
    assert_non_null(strstr(err, "[TG-5021]"));
    snprintf(key, sizeof(key), "hosts.%zu.loss", i);
    const char *loss = tg_test_json(json, key);
    assert_non_null(loss);
    assert_true(strtoull(loss, NULL, 10) > 0);
  }
  char out[256];
  if (tp_query(trace, TP_COUNTS, out, sizeof(out))) {
    fprintf(stderr, "trace processor: %s\n", out);
    assert_int_equal(strtoull(out, NULL, 10), 0);
  } else {
    fprintf(stderr, "[ SKIPPED  ] the trace processor import: PERFETTO_BIN "
                    "is not set\n");
  }
  stop_all(h, &c, emit);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(wrapped_rings_that_clear_read_whole),
      FLEET_TEST(wrapped_rings_that_clear_read_whole_joined),
      FLEET_TEST(wrapped_rings_without_clears_are_partial),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
