/* linux.ftrace's kernel losses end to end: a real tracegated, a real
 * tracegate-probes, and clones of a running session taken by the CLI
 * (`tracegate record --clone-by-name`). The probes write the START stats
 * (the counters of the session's start) and an END at every flush and at
 * stop, and consumer/fleet/ftrace_loss.c takes each sequence's last END against
 * its START, so:
 *   - a clone of a session whose kernel buffers overran carries that
 *     overrun (it holds no stop), as our loss counter and the CLI's
 *     summary report it;
 *   - a clone of a session that lost nothing reports 0, known (an END is
 *     there), not merely unknown;
 *   - the session's own trace, stopped after the clone, holds both pairs
 *     and counts the loss once.
 * The overrun is made, whatever the CPU's speed, by stopping the probes
 * (SIGSTOP) while markers flood the session's tiny per-CPU buffers; the
 * kernel's own per_cpu/cpuN/stats confirm it. Harness: probes_e2e.h.
 *
 * Needs root and tracefs. Without them the tests are skipped with the
 * reason, unless TG_REQUIRE_FTRACE is set in the environment (CI runs as
 * root on machines with tracefs): then they fail with the reason.
 */
#include <fcntl.h>
#include <sys/stat.h>
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

#include "agent/probes/ftrace_tracefs.h"
#include "consumer/fleet/ftrace_loss.h"
#include "probes_e2e.h"
#include "test_proc.h"
#include "tracegate/pb_wire.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

#define SESSION "ftrace_loss_e2e"
/* Per CPU: a few pages, which the flood overruns many times over. */
#define TINY_BUFFER_KB 16
#define FLOOD_MARKERS 20000

/* What a trace's packets say of linux.ftrace's overruns. */
typedef struct trace_loss {
  tg_ftrace_loss_t counted; /* by consumer/fleet/ftrace_loss.c */
  /* Read here from the decoded packets: the last END's overruns minus
   * those of the START before it, all on one sequence. */
  uint64_t start, end;
  bool has_start, has_end;
  size_t ends;
  uint32_t seq; /* the sequence of the stats (0: none seen) */
} trace_loss_t;

static void add_packet(trace_loss_t *t, const uint8_t *p, size_t n) {
  tg_ftrace_loss_scan(&t->counted, p, n);
  Perfetto__Protos__TracePacket *pk =
      perfetto__protos__trace_packet__unpack(NULL, n, p);
  assert_non_null(pk);
  if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS) {
    const Perfetto__Protos__FtraceStats *st = pk->ftrace_stats;
    uint32_t seq = pk->trusted_packet_sequence_id;
    if (t->seq) assert_int_equal(seq, t->seq); /* one linux.ftrace */
    t->seq = seq;
    uint64_t sum = 0;
    for (size_t i = 0; i < st->n_cpu_stats; i++) sum += st->cpu_stats[i]->overrun;
    if (st->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE) {
      t->start = sum;
      t->has_start = true;
    } else if (st->phase ==
               PERFETTO__PROTOS__FTRACE_STATS__PHASE__END_OF_TRACE) {
      assert_true(t->has_start);
      t->end = sum;
      t->has_end = true;
      t->ends++;
    }
  }
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
}

/* The overrun the trace carries, as read here. */
static uint64_t carried(const trace_loss_t *t) {
  assert_true(t->has_end);
  return t->end > t->start ? t->end - t->start : 0;
}

/* The packets of the trace file |path| (field 1 of Trace). */
static void file_loss(const char *path, trace_loss_t *t) {
  memset(t, 0, sizeof(*t));
  size_t len;
  uint8_t *buf = tg_test_read_file(path, &len);
  assert_non_null(buf);
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, buf, len);
  int rv;
  while ((rv = tg_pb_reader_next(&r, &f)) == 1)
    if (f.id == 1 && f.type == TG_PB_WT_LEN) add_packet(t, f.data, f.size);
  assert_int_equal(rv, 0);
  free(buf);
}

/* The packets a raw consumer read, packed again. */
static void read_loss(const e2e_packets_t *got, trace_loss_t *t) {
  memset(t, 0, sizeof(*t));
  for (size_t i = 0; i < got->n; i++) {
    size_t n = perfetto__protos__trace_packet__get_packed_size(got->pk[i]);
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    perfetto__protos__trace_packet__pack(got->pk[i], p);
    add_packet(t, p, n);
    free(p);
  }
}

/* The overruns the kernel counts in the instance |dir|, over its CPUs. */
static uint64_t kernel_overrun(const char *dir) {
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  uint64_t sum = 0;
  for (long c = 0; c < cpus; c++) {
    char rel[64], text[4096];
    snprintf(rel, sizeof(rel), "per_cpu/cpu%ld/stats", c);
    long n = tg_tracefs_read(dir, rel, text, sizeof(text));
    if (n < 0) continue;
    tg_ftrace_cpu_stats_t cs;
    tg_ftrace_cpu_stats_parse(text, (size_t)n, &cs);
    sum += cs.overrun;
  }
  return sum;
}

/* tracegate-probes (its log in |err_path|) and a linux.ftrace session
 * named SESSION recording ftrace/print in a tiny buffer per CPU, started
 * (its START stats read). Returns the probes' pid. */
static pid_t begin_session(test_service_t *ts, char *err_path, size_t cap,
                           e2e_session_t *s) {
  pid_t probes =
      e2e_start_probes(ts, err_path, cap, "probes.err", false, 3);
  static char *events[] = {"ftrace/print"};
  e2e_session_config(s, events, 1, false);
  s->fc.buffer_size_kb = TINY_BUFFER_KB;
  s->sc.cfg.unique_session_name = SESSION;
  e2e_session_enable(s, ts);
  e2e_wait_started(s);
  return probes;
}

/* Clones SESSION with the CLI into |name|.pftrace (and its summary JSON
 * into |name|.json, whose path goes to |summary|) and reads the clone. */
static void clone_session_rc(const test_service_t *ts, const char *name,
                             char *summary, size_t cap, trace_loss_t *t,
                             int want_rc) {
  char trace[256];
  snprintf(trace, sizeof(trace), "%s/%s.pftrace", ts->dir, name);
  snprintf(summary, cap, "%s/%s.json", ts->dir, name);
  const char *args[] = {"record", "--socket", ts->consumer_sock,
                        "--clone-by-name", SESSION, "-o", trace,
                        "--summary-json", summary, NULL};
  pid_t cl = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL,
                               TG_TEST_FD_INHERIT);
  assert_true(cl > 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(cl, E2E_WAIT_MS)), want_rc);
  file_loss(trace, t);
}

static void clone_session(const test_service_t *ts, const char *name,
                          char *summary, size_t cap, trace_loss_t *t) {
  clone_session_rc(ts, name, summary, cap, t, 0);
}

/* Floods the instance |dir| with markers while the probes (|probes|)
 * cannot read: the kernel overwrites most of them. */
static void overrun_with_probes_stopped(pid_t probes, const char *dir) {
  char path[TG_TRACEFS_PATH_MAX * 2];
  snprintf(path, sizeof(path), "%s/trace_marker", dir);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(kill(probes, SIGSTOP), 0);
  for (int i = 0; i < FLOOD_MARKERS; i++)
    assert_true(write(fd, "tg-flood-marker", 15) == 15);
  assert_int_equal(kill(probes, SIGCONT), 0);
  close(fd);
}

/* A clone of a session that lost nothing says so: an END is there (the
 * loss is known) and it is 0, in our counter and the CLI's summary. */
static void ftrace_clean_clone_reports_no_overrun(void **state) {
  e2e_require_ftrace();
  test_service_t *ts = *state;
  char err_path[160];
  e2e_session_t s;
  pid_t probes = begin_session(ts, err_path, sizeof(err_path), &s);

  trace_loss_t t;
  char summary[256];
  clone_session(ts, "clean", summary, sizeof(summary), &t);
  assert_true(t.ends >= 1);
  assert_int_equal(carried(&t), 0);
  assert_int_equal(tg_ftrace_loss_overrun(&t.counted), 0);
  assert_json(summary, "hosts.0.loss.total", "0");

  assert_int_equal(raw_consumer_disable(&s.c, E2E_WAIT_MS), 0);
  e2e_session_close(&s);
  e2e_stop_probes(probes, err_path);
}

/* The kernel overran the session's buffers: a live clone carries the
 * overrun (the pair its flush wrote), our counter finds exactly what the
 * trace carries, and the CLI lists it; the session's own trace, stopped
 * afterwards, holds the clone's pair and the stop's and counts it once. */
static void ftrace_clone_then_stop_report_the_overrun_once(void **state) {
  e2e_require_ftrace();
  test_service_t *ts = *state;
  char err_path[160];
  e2e_session_t s;
  pid_t probes = begin_session(ts, err_path, sizeof(err_path), &s);
  char dir[TG_TRACEFS_PATH_MAX];
  e2e_only_instance_of(probes, dir, sizeof(dir));

  overrun_with_probes_stopped(probes, dir);
  uint64_t kernel = kernel_overrun(dir);
  print_message("the kernel counts %llu overruns\n", (unsigned long long)kernel);
  assert_true(kernel > 0);

  trace_loss_t cl;
  char summary[256];
  clone_session(ts, "overrun", summary, sizeof(summary), &cl);
  uint64_t counted = tg_ftrace_loss_overrun(&cl.counted);
  print_message("the clone carries %llu, counted %llu\n",
                (unsigned long long)carried(&cl), (unsigned long long)counted);
  assert_int_equal(counted, carried(&cl));
  /* The clone's END was read after the kernel's count above. */
  assert_true(counted >= kernel);
  char want[32];
  snprintf(want, sizeof(want), "%llu", (unsigned long long)counted);
  assert_json(summary, "hosts.0.loss.counters.ftrace_cpu_overrun", want);

  /* Nothing overruns after the flood: the stop's pair says what the
   * clone's did, and the final trace holds both, counted once. */
  e2e_read_more(&s.c, &s.got);
  assert_int_equal(raw_consumer_disable(&s.c, E2E_WAIT_MS), 0);
  e2e_read_more(&s.c, &s.got);
  trace_loss_t fin;
  read_loss(&s.got, &fin);
  assert_true(fin.ends >= 2);
  assert_int_equal(carried(&fin), counted);
  assert_int_equal(tg_ftrace_loss_overrun(&fin.counted), counted);

  e2e_session_close(&s);
  e2e_stop_probes(probes, err_path);
}

/* The probes cannot open tracefs (they run as nobody): linux.ftrace does
 * not start, and `tracegate record` says so in its summary JSON, with
 * the notice code, beside a data source no producer offers, and exits
 * with the status of a trace written without all it asked for. */
static void record_reports_ftrace_that_did_not_start(void **state) {
  e2e_require_ftrace();
  TG_TEST_REQUIRE_OTHER_USER();
  test_service_t *ts = *state;
  /* nobody must reach the producer socket. */
  assert_int_equal(tg_test_other_user_dir(ts->dir, 0755), 0);
  char err_path[160];
  pid_t probes = e2e_start_probes(ts, err_path, sizeof(err_path),
                                  "probes-nobody.err", true, 3);
  char cfg[256], trace[256], summary[256];
  snprintf(cfg, sizeof(cfg), "%s/refused.pbtxt", ts->dir);
  snprintf(trace, sizeof(trace), "%s/refused.pftrace", ts->dir);
  snprintf(summary, sizeof(summary), "%s/refused.json", ts->dir);
  FILE *f = fopen(cfg, "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 1024 }\n"
        "duration_ms: 500\n"
        "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
        "  ftrace_events: \"sched/sched_switch\"\n"
        "  ftrace_events: \"sched/sched_waking\" } } }\n"
        "data_sources { config { name: \"no.such.source\" } }\n", f);
  assert_int_equal(fclose(f), 0);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg,
                        "--txt", "-o", trace, "--summary-json", summary,
                        NULL};
  pid_t cl = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL,
                               TG_TEST_FD_INHERIT);
  assert_true(cl > 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(cl, E2E_WAIT_MS)), 4);
  assert_json(summary, "exit_code", "4");
  assert_json(summary, "hosts.0.outcome", "\"ok\"");
  assert_json(summary, "hosts.0.problems.0.kind", "\"data_source\"");
  assert_json(summary, "hosts.0.problems.0.data_source", "\"no.such.source\"");
  assert_json(summary, "hosts.0.problems.0.code", "\"TG-7012\"");
  assert_json(summary, "hosts.0.problems.1.kind", "\"data_source\"");
  assert_json(summary, "hosts.0.problems.1.data_source", "\"linux.ftrace\"");
  assert_json(summary, "hosts.0.problems.1.code", "\"TG-7010\"");
  assert_json(summary, "hosts.0.problems.1.reason", "\"not_started\"");
  assert_json(summary, "hosts.0.problems.1.events", "2");
  e2e_stop_probes(probes, err_path);
}

/* A clone of a session whose linux.ftrace did not start says so too:
 * the failure rewritten at the clone's flush is in it. */
static void clone_reports_ftrace_that_did_not_start(void **state) {
  e2e_require_ftrace();
  TG_TEST_REQUIRE_OTHER_USER();
  test_service_t *ts = *state;
  assert_int_equal(tg_test_other_user_dir(ts->dir, 0755), 0);
  char err_path[160];
  pid_t probes = e2e_start_probes(ts, err_path, sizeof(err_path),
                                  "probes-nobody.err", true, 3);
  e2e_session_t s;
  static char *events[] = {"ftrace/print"};
  e2e_session_config(&s, events, 1, false);
  s.sc.cfg.unique_session_name = SESSION;
  e2e_session_enable(&s, ts);
  e2e_wait_started(&s);
  trace_loss_t t;
  char summary[256];
  clone_session_rc(ts, "refused-clone", summary, sizeof(summary), &t, 4);
  assert_json(summary, "exit_code", "4");
  assert_json(summary, "hosts.0.outcome", "\"ok\"");
  assert_json(summary, "hosts.0.problems.0.code", "\"TG-7010\"");
  assert_json(summary, "hosts.0.problems.0.events", "1");
  assert_int_equal(raw_consumer_disable(&s.c, E2E_WAIT_MS), 0);
  e2e_session_close(&s);
  e2e_stop_probes(probes, err_path);
}

/* As root, with only events this kernel has: no problem, exit 0. */
static void record_reports_no_problem_when_ftrace_runs(void **state) {
  e2e_require_ftrace();
  test_service_t *ts = *state;
  char err_path[160];
  pid_t probes = e2e_start_probes(ts, err_path, sizeof(err_path),
                                  "probes.err", false, 3);
  char trace[256], summary[256];
  snprintf(trace, sizeof(trace), "%s/fine.pftrace", ts->dir);
  snprintf(summary, sizeof(summary), "%s/fine.json", ts->dir);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-t", "500ms",
                        "-o", trace, "--summary-json", summary,
                        "linux.ftrace", NULL};
  pid_t cl = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL,
                               TG_TEST_FD_INHERIT);
  assert_true(cl > 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(cl, E2E_WAIT_MS)), 0);
  assert_json(summary, "hosts.0.problems", "[]");
  e2e_stop_probes(probes, err_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(ftrace_clean_clone_reports_no_overrun,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(
          ftrace_clone_then_stop_report_the_overrun_once, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(record_reports_ftrace_that_did_not_start,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(
          record_reports_no_problem_when_ftrace_runs, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_reports_ftrace_that_did_not_start,
                                      test_service_setup,
                                      test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
