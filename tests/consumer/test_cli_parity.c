/* What a Perfetto user expects of `tracegate record` (issue 15): Perfetto's
 * flags (-d, -s, --is_detached, --version, --query-raw, 1m30s durations,
 * --save-for-bugreport), an empty config refused, data source names
 * checked against the service, the reason a session ended in its summary
 * and its trace_stats at the end of the trace, and the summaries that must
 * not lie. A real tracegated, a raw producer, the CLI as a child process;
 * every wait is on an event (a command from the service, the child's
 * output or exit, a pidfd) with a deadline. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_child.h"
#include "test_proc.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/trace/trace.pb-c.h"

/* The whole of |path|, decoded; NULL if it does not decode. */
static Perfetto__Protos__Trace *decode_file(const char *path) {
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  uint8_t *buf = malloc((size_t)st.st_size + 1);
  assert_non_null(buf);
  assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
  close(fd);
  Perfetto__Protos__Trace *t =
      perfetto__protos__trace__unpack(NULL, (size_t)st.st_size, buf);
  free(buf);
  return t;
}

/* Perfetto's trace ends with the session's trace_stats. */
static void assert_ends_with_trace_stats(const char *path) {
  Perfetto__Protos__Trace *t = decode_file(path);
  assert_non_null(t);
  assert_true(t->n_packet > 0);
  assert_non_null(t->packet[t->n_packet - 1]->trace_stats);
  perfetto__protos__trace__free_unpacked(t, NULL);
}

/* Waits (bounded) until process |pid|, not our child, has exited. */
static void wait_gone(pid_t pid) {
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) {
    assert_int_equal(errno, ESRCH); /* already gone */
    return;
  }
  struct pollfd p = {.fd = fd, .events = POLLIN};
  assert_int_equal(poll(&p, 1, WAIT_MS), 1);
  close(fd);
}

/* --- 15.2: Perfetto's flags ---------------------------------------------- */

static void version(void **state) {
  (void)state;
  child_t c;
  const char *top[] = {"--version", NULL};
  assert_int_equal(run_cli(&c, top), 0);
  assert_non_null(strstr(c.out, "tracegate 0."));
  const char *rec[] = {"record", "--version", NULL};
  assert_int_equal(run_cli(&c, rec), 0);
  assert_non_null(strstr(c.out, "tracegate 0."));
}

/* perfetto --save-for-bugreport on Linux: the running session with the
 * highest bugreport_score, cloned into $TMPDIR/systrace.pftrace; with no
 * such session, exit 0 and no file (Perfetto's
 * UnavailableBugreportLeavesNoEmptyFiles). */
static void save_for_bugreport(void **state) {
  test_service_t *ts = *state;
  char path[300], sum[256];
  snprintf(path, sizeof(path), "%s/systrace.pftrace", ts->dir);
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "br.json"));
  assert_int_equal(setenv("TMPDIR", ts->dir, 1), 0);
  child_t c;
  const char *save[] = {"--save-for-bugreport", "--socket", ts->consumer_sock,
                        "--summary-json", sum, NULL};
  assert_int_equal(run_cli(&c, save), 0);
  assert_false(exists(path));
  assert_no_temp(ts->dir);
  assert_json(sum, "exit_code", "0");
  assert_json(sum, "output", "null");

  /* A session not meant for bugreports (no score) is not taken either. */
  raw_producer_t p;
  raw_consumer_t rc, rc2;
  simple_cfg_t sc, sc2;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(&rc2, ts), 0);
  simple_cfg_init(&sc2, 256, 1, "other.ds");
  assert_int_equal(raw_consumer_enable(&rc2, &sc2.cfg, -1), 0);
  assert_int_equal(run_cli(&c, save), 0);
  assert_false(exists(path));

  assert_int_equal(raw_consumer_connect(&rc, ts), 0);
  simple_cfg_init(&sc, 256, 1, "cli.ds");
  sc.cfg.has_bugreport_score = 1;
  sc.cfg.bugreport_score = 7;
  assert_int_equal(raw_consumer_enable(&rc, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "br", 1, 3);
  spawn_cli(&c, save);
  ack_flush(&p); /* the clone's flush */
  assert_int_equal(wait_cli(&c), 0);
  char want[320];
  snprintf(want, sizeof(want), "\"%s\"", path);
  assert_json(sum, "output", want);
  Perfetto__Protos__Trace *t = decode_file(path);
  assert_non_null(t);
  size_t br = 0;
  int32_t score = 0;
  for (size_t i = 0; i < t->n_packet; i++) {
    const Perfetto__Protos__TracePacket *pk = t->packet[i];
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING &&
        pk->for_testing->str && !strcmp(pk->for_testing->str, "br"))
      br++;
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG)
      score = pk->trace_config->bugreport_score;
  }
  perfetto__protos__trace__free_unpacked(t, NULL);
  assert_int_equal(br, 3);
  assert_int_equal(score, 7);
  unlink(path);
  assert_int_equal(unsetenv("TMPDIR"), 0);

  /* It takes nothing else, as perfetto_cmd. */
  const char *mixed[] = {"--save-for-bugreport", "-t", "1s", NULL};
  assert_int_equal(run_cli(&c, mixed), 2);
  /* --clone-for-bugreport goes with --clone only. */
  const char *alone[] = {"record", "--socket", ts->consumer_sock,
                         "--clone-for-bugreport", "-o", path, NULL};
  assert_int_equal(run_cli(&c, alone), 2);
  assert_int_equal(raw_consumer_disable(&rc, WAIT_MS), 0);
  raw_consumer_close(&rc);
  raw_consumer_close(&rc2);
  raw_producer_close(&p);
}

/* The bugreport_score of the trace_config in file |path|; -1 if none. */
static int32_t file_score(const char *path) {
  Perfetto__Protos__Trace *t = decode_file(path);
  assert_non_null(t);
  int32_t score = -1;
  for (size_t i = 0; i < t->n_packet; i++)
    if (t->packet[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG)
      score = t->packet[i]->trace_config->bugreport_score;
  perfetto__protos__trace__free_unpacked(t, NULL);
  return score;
}

/* perfetto --save-all-for-bugreport (Perfetto's SaveAllForBugreport
 * tests): every started session with a score, highest first, each into
 * its bugreport_filename, a repeated name with _1, _2; a name that is a
 * path is refused, the others still saved. */
static void save_all_for_bugreport(void **state) {
  test_service_t *ts = *state;
  char dir[300];
  snprintf(dir, sizeof(dir), "%s/br-all", ts->dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(setenv("TMPDIR", dir, 1), 0);
  child_t c;
  const char *save[] = {"--save-all-for-bugreport", "--socket",
                        ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, save), 0); /* none: nothing, exit 0 */
  assert_no_temp(dir);

  enum { N = 6 };
  static const int32_t score[N] = {1, 2, 3, 4, 0, 9};
  static const char *const name[N] = {NULL, "custom_name.pftrace",
                                      "custom_name.pftrace", NULL, NULL,
                                      "../escape.pftrace"};
  raw_consumer_t rc[N];
  simple_cfg_t sc[N];
  for (int i = 0; i < N; i++) {
    assert_int_equal(raw_consumer_connect(&rc[i], ts), 0);
    simple_cfg_init(&sc[i], 64, 1, "other.ds");
    sc[i].cfg.has_bugreport_score = score[i] != 0;
    sc[i].cfg.bugreport_score = score[i];
    sc[i].cfg.bugreport_filename = (char *)name[i];
    /* The last one (a path for a name) joins in the second round. */
    if (i < N - 1) assert_int_equal(raw_consumer_enable(&rc[i], &sc[i].cfg, -1), 0);
  }
  assert_int_equal(run_cli(&c, save), 0);
  char path[400];
  static const struct { const char *file; int32_t score; } want[] = {
      {"systrace.pftrace", 4}, {"custom_name.pftrace", 3},
      {"custom_name_1.pftrace", 2}, {"systrace_1.pftrace", 1}};
  for (size_t k = 0; k < 4; k++) {
    snprintf(path, sizeof(path), "%s/%s", dir, want[k].file);
    assert_int_equal(file_score(path), want[k].score);
    unlink(path);
  }
  assert_no_temp(dir);
  snprintf(path, sizeof(path), "%s/systrace_2.pftrace", dir);
  assert_false(exists(path)); /* the session without a score */

  assert_int_equal(raw_consumer_enable(&rc[N - 1], &sc[N - 1].cfg, -1), 0);
  assert_int_equal(run_cli(&c, save), 1);
  snprintf(path, sizeof(path), "%s/escape.pftrace", ts->dir);
  assert_false(exists(path));
  for (size_t k = 0; k < 4; k++) {
    snprintf(path, sizeof(path), "%s/%s", dir, want[k].file);
    assert_int_equal(file_score(path), want[k].score);
    unlink(path);
  }
  assert_no_temp(dir);
  /* What another user may leave in a shared TMPDIR (a symlink) is
   * refused, never followed: its target keeps its bytes. */
  char victim[400], link[400];
  snprintf(victim, sizeof(victim), "%s/victim", ts->dir);
  snprintf(link, sizeof(link), "%s/systrace.pftrace", dir);
  write_file(victim, "keep");
  assert_int_equal(symlink(victim, link), 0);
  assert_int_equal(run_cli(&c, save), 1);
  const char *one_br[] = {"--save-for-bugreport", "--socket",
                          ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, one_br), 1);
  struct stat lst;
  assert_int_equal(lstat(link, &lst), 0);
  assert_true(S_ISLNK(lst.st_mode));
  assert_int_equal(stat(victim, &lst), 0);
  assert_int_equal(lst.st_size, 4);
  unlink(link);
  unlink(victim);
  for (size_t k = 1; k < 4; k++) {
    snprintf(path, sizeof(path), "%s/%s", dir, want[k].file);
    unlink(path);
  }
  assert_int_equal(rmdir(dir), 0); /* nothing else was written there */
  /* A TMPDIR too long for a path is refused, never cut to another name. */
  static char longdir[4200];
  memset(longdir, 'd', sizeof(longdir) - 1);
  longdir[0] = '/';
  assert_int_equal(setenv("TMPDIR", longdir, 1), 0);
  assert_int_equal(run_cli(&c, save), 1);
  assert_notice_with(c.err, TG_N_OUTPUT_UNWRITABLE, strerror(ENAMETOOLONG));
  const char *one[] = {"--save-for-bugreport", "--socket", ts->consumer_sock,
                       NULL};
  assert_int_equal(run_cli(&c, one), 2);
  assert_int_equal(unsetenv("TMPDIR"), 0);

  /* It takes nothing else. */
  const char *mixed[] = {"--save-all-for-bugreport", "-o", path, NULL};
  assert_int_equal(run_cli(&c, mixed), 2);
  for (int i = 0; i < N; i++) {
    assert_int_equal(raw_consumer_disable(&rc[i], WAIT_MS), 0);
    raw_consumer_close(&rc[i]);
  }

  /* A repeat's name another session has as its own is skipped: x.pftrace
   * twice and x_1.pftrace go to x, x_2 and x_1, none written over. */
  static const int32_t sc3[3] = {3, 2, 1};
  static const char *const nm3[3] = {"x.pftrace", "x.pftrace", "x_1.pftrace"};
  static const char *const file3[3] = {"x.pftrace", "x_2.pftrace",
                                       "x_1.pftrace"};
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(setenv("TMPDIR", dir, 1), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(raw_consumer_connect(&rc[i], ts), 0);
    simple_cfg_init(&sc[i], 64, 1, "other.ds");
    sc[i].cfg.has_bugreport_score = 1;
    sc[i].cfg.bugreport_score = sc3[i];
    sc[i].cfg.bugreport_filename = (char *)nm3[i];
    assert_int_equal(raw_consumer_enable(&rc[i], &sc[i].cfg, -1), 0);
  }
  assert_int_equal(run_cli(&c, save), 0);
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof(path), "%s/%s", dir, file3[i]);
    assert_int_equal(file_score(path), sc3[i]);
    unlink(path);
    assert_int_equal(raw_consumer_disable(&rc[i], WAIT_MS), 0);
    raw_consumer_close(&rc[i]);
  }
  assert_int_equal(rmdir(dir), 0);
  assert_int_equal(unsetenv("TMPDIR"), 0);
}

static void compound_durations(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "dur.pftrace"));
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "dur.json"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-t", "1s200ms", "--summary-json", sum, "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "dur", 1, 2);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "dur", &t);
  assert_int_equal(t.config_duration_ms, 1200);
  /* 15.5: why it ended, and the trace_stats last. */
  assert_json(sum, "hosts.0.end", "\"duration\"");
  assert_ends_with_trace_stats(out);
  unlink(sum);
  unlink(out);
  /* A bare number only alone: "1m30" is refused. */
  const char *bad[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                       "-t", "1m30", "cli.ds", NULL};
  assert_int_equal(run_cli(&c, bad), 2);
  assert_non_null(strstr(c.err, "--time"));
  raw_producer_close(&p);
}

static void is_detached_answers_by_exit_status(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  child_t c;
  const char *no[] = {"record", "--socket", ts->consumer_sock, "--is_detached",
                      "parity-key", NULL};
  assert_int_equal(run_cli(&c, no), 2);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "isdet.pftrace"));
  const char *detach[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                          "-t", "0", "--detach", "parity-key", "cli.ds", NULL};
  assert_int_equal(run_cli(&c, detach), 0);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  /* Yes, twice: asking leaves it detached. */
  assert_int_equal(run_cli(&c, no), 0);
  assert_int_equal(run_cli(&c, no), 0);
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "isdet.json"));
  const char *attach[] = {"record", "--socket", ts->consumer_sock, "--attach",
                          "parity-key", "--stop", "-o", out, "--summary-json",
                          sum, NULL};
  spawn_cli(&c, attach);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  /* 15.9: an attached session's run time is not ours to claim. */
  assert_notice_with(c.err, TG_N_TRACE_WRITTEN_ATTACHED, out);
  assert_no_notice(c.err, TG_N_TRACE_WRITTEN);
  assert_json(sum, "hosts.0.end", "\"stop\"");
  unlink(sum);
  assert_int_equal(run_cli(&c, no), 2);
  /* No service: an error, not "no". */
  const char *gone[] = {"record", "--socket", out_in(ts, "nosock"),
                        "--is_detached", "k", NULL};
  assert_int_equal(run_cli(&c, gone), 1);
  unlink(out);
  raw_producer_close(&p);
}

static void background_prints_the_pid_and_sigterm_stops_cleanly(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "bg.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-t", "0", "-d", "cli.ds", NULL};
  child_t c;
  assert_int_equal(run_cli(&c, args), 0);
  char *end;
  long pid = strtol(c.out, &end, 10);
  assert_true(pid > 1 && *end == '\n');
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "bg", 1, 3);
  assert_int_equal(kill((pid_t)pid, SIGTERM), 0);
  ack_flush(&p);
  wait_gone((pid_t)pid);
  trace_file_t t;
  read_trace(out, "bg", &t);
  assert_int_equal(t.test_packets, 3);
  assert_no_temp(ts->dir);
  unlink(out);
  /* Perfetto's exclusions. */
  const char *det[] = {"record", "--socket", ts->consumer_sock, "-o", out, "-d",
                       "--detach", "k", "cli.ds", NULL};
  assert_int_equal(run_cli(&c, det), 2);
  raw_producer_close(&p);
}

/* --background-wait: the pid comes, and the command exits 0, only once the
 * session's data sources started: a START_TRACING session holds it until
 * its trigger fires. A session that fails first makes it exit 1. */
static void background_wait_returns_once_the_data_sources_started(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "bgw.pbtxt"));
  snprintf(out, sizeof(out), "%s", out_in(ts, "bgw.pftrace"));
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "data_sources { config { name: \"cli.ds\" } }\n"
             "trigger_config {\n"
             "  trigger_mode: START_TRACING\n"
             "  trigger_timeout_ms: 60000\n"
             "  triggers { name: \"go\" }\n"
             "}\n");
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-c", cfg, "--txt", "--background-wait", NULL};
  child_t c;
  spawn_cli(&c, args);
  /* Armed, not started: the command waits (it would be gone by now had
   * it not). The session exists once the service lists it. */
  child_t q;
  const char *stats[] = {"stats", "--socket", ts->consumer_sock, "--json", NULL};
  for (int64_t deadline = tg_test_now_ms() + WAIT_MS;;) {
    assert_int_equal(run_cli(&q, stats), 0);
    if (strstr(q.out, "\"id\"")) break;
    assert_true(tg_test_now_ms() < deadline);
  }
  assert_int_equal(waitpid(c.pid, NULL, WNOHANG), 0);
  const char *targs[] = {"trigger", "--socket", ts->producer_sock, "go", NULL};
  assert_int_equal(run_cli(&q, targs), 0);
  assert_int_equal(wait_cli(&c), 0);
  char *end;
  long pid = strtol(c.out, &end, 10);
  assert_true(pid > 1 && *end == '\n');
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "bgw", 1, 3);
  assert_int_equal(kill((pid_t)pid, SIGTERM), 0);
  ack_flush(&p);
  wait_gone((pid_t)pid);
  trace_file_t t;
  read_trace(out, "bgw", &t);
  assert_int_equal(t.test_packets, 3);
  unlink(out);
  /* A config the service refuses: the child ends at once, the command
   * says so with exit status 1, and no pid is printed. */
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "data_sources { config { name: \"cli.ds\" } }\n"
             "trace_filter { bytecode: \"x\" }\n");
  assert_int_equal(run_cli(&c, args), 1);
  assert_int_equal(c.n_out, 0);
  unlink(cfg);
  raw_producer_close(&p);
}

/* -s: the service stops the session at the size (it writes the file), or
 * the CLI does (it streams). */
static void size_limit(test_service_t *ts, bool streamed) {
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "size.pftrace"));
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "size.json"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-t", "0", "-s", "8kb", "--summary-json", sum, "cli.ds",
                        streamed ? "--read-buffers" : NULL, NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  /* ~20 KiB of packets (6 fill a chunk): more than the file may hold. */
  static const char str[] =
      "size-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
  for (uint32_t id = 0; id < 30; id++) commit_packets(&p, id, str, id * 6, 6);
  /* The CLI stops a streamed session (with a flush); the service stops
   * the one whose file it writes at once. */
  if (streamed) ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  assert_json(sum, "hosts.0.end",
              streamed ? "\"size\"" : "\"max_file_size\"");
  unlink(sum);
  trace_file_t t;
  read_trace(out, str, &t);
  assert_true(t.test_packets > 0);
  assert_true(t.test_packets < 200);
  /* 15.5: however it ended, the trace's last packet is its trace_stats. */
  assert_ends_with_trace_stats(out);
  unlink(out);
  raw_producer_close(&p);
}

static void size_stops_a_service_written_file(void **state) { size_limit(*state, false); }
static void size_stops_a_streamed_file(void **state) { size_limit(*state, true); }

static void query_raw_and_capabilities(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  child_t c;
  const char *raw[] = {"--query-raw", "--socket", ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, raw), 0);
  Perfetto__Protos__TracingServiceState *st =
      perfetto__protos__tracing_service_state__unpack(NULL, c.n_out,
                                                      (const uint8_t *)c.out);
  assert_non_null(st);
  assert_int_equal(st->n_data_sources, 1);
  assert_string_equal(st->data_sources[0]->ds_descriptor->name, "cli.ds");
  perfetto__protos__tracing_service_state__free_unpacked(st, NULL);
  /* 15.7: the service's capabilities. */
  const char *q[] = {"query", "--socket", ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, q), 0);
  assert_non_null(strstr(c.out, "CAPABILITIES"));
  assert_non_null(strstr(c.out, "TYPE_DATA_SOURCES_INSTANCES"));
  raw_producer_close(&p);
}

/* 15.7: a running session's counters, without --attach. */
static void stats_shows_live_counters_of_running_sessions(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "live.pftrace"));
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "live.json"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-t", "0", "--summary-json", sum, "cli.ds", NULL};
  child_t rec;
  spawn_cli(&rec, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "live", 1, 4);
  child_t c;
  const char *stats[] = {"stats", "--socket", ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, stats), 0);
  assert_non_null(strstr(c.out, "TRACING SESSIONS (1"));
  assert_non_null(strstr(c.out, "\nsession "));
  assert_non_null(strstr(c.out, "bytes_written"));
  assert_non_null(strstr(c.out, "buffer 0"));
  kill(rec.pid, SIGINT);
  ack_flush(&p);
  assert_int_equal(wait_cli(&rec), 0);
  assert_json(sum, "hosts.0.end", "\"sigint\"");
  unlink(sum);
  unlink(out);
  raw_producer_close(&p);
}

/* --- 15.1: names and fields ------------------------------------------------ */

static void unknown_data_sources_are_named_with_close_matches(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.dsx", 4, 64, false), 0);
  char out[256], cfg[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "names.pftrace"));
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "names.pbtxt"));
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "data_sources { config { name: \"cli.dsx\" } }\n"
             "data_sources { config { name: \"cli.dsy\" } }\n"
             "data_sources { config { name: \"linux.process_stats\"\n"
             "  process_stats_config { proc_stats_poll_ms: 100\n"
             "    proc_stats_cache_ttl_ms: 100 } } }\n"
             "duration_ms: 500\n");
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg,
                        "--txt", "-o", out, NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "names", 1, 1);
  ack_flush(&p);
  /* Warned, not refused: the recording goes on. */
  assert_int_equal(wait_cli(&c), 0);
  char line[512];
  assert_true(tg_test_notice_line(c.err, TG_N_UNKNOWN_DATA_SOURCE, "'cli.dsy'",
                                  line, sizeof(line)));
  /* The closest registered name is offered, after the unknown one. */
  assert_non_null(strstr(strstr(line, "'cli.dsy'") + 9, " cli.dsx"));
  assert_null(strstr(c.err, "'cli.dsx'"));
  /* linux.process_stats is unknown here too, and the cache TTL is not
   * acted on. */
  assert_notice_with(c.err, TG_N_UNKNOWN_DATA_SOURCE, "'linux.process_stats'");
  assert_notice_with(c.err, TG_N_UNACTED_FIELDS, "proc_stats_cache_ttl_ms");
  assert_null(strstr(c.err, "proc_stats_poll_ms"));
  unlink(out);
  unlink(cfg);
  raw_producer_close(&p);
}

/* --- 15.9: summaries that do not lie -------------------------------------- */

static void service_gone_is_not_no_data_loss(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "gone.pftrace"));
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "gone.json"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-t", "0", "--read-buffers", "--summary-json", sum,
                        "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "gone", 1, 2);
  raw_producer_close(&p);
  /* The teardown checks the service's exit status. */
  test_service_terminate(ts);
  assert_true(wait_cli(&c) >= 0);
  /* Whatever the outcome, it never claims what it cannot know: without
   * the final statistics there is no loss figure. */
  if (tg_test_notice_count(c.err, TG_N_LOSS_UNKNOWN, NULL)) {
    assert_no_notice(c.err, TG_N_NO_LOSS);
    assert_json(sum, "hosts.0.loss", "null");
  }
  /* 15.5: the summary says the service is why: it ended the session, or
   * went away first. */
  const char *end = tg_test_json(sum, "hosts.0.end");
  assert_non_null(end);
  assert_true(!strcmp(end, "\"service\"") || !strcmp(end, "\"service_gone\""));
  unlink(sum);
  unlink(out);
}

static void several_hosts_refuse_a_trace_file_name(void **state) {
  test_service_t *ts = *state;
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "fleet.pftrace"));
  const char *args[] = {"record", "-H", "127.0.0.1:1", "-H", "127.0.0.1:2",
                        "--ca", out_in(ts, "none.pem"), "-o", out, "cli.ds", NULL};
  child_t c;
  assert_int_equal(run_cli(&c, args), 2);
  assert_non_null(strstr(c.err, "--merge"));
  assert_false(exists(out));
}

/* Perfetto's CLI refuses a config of no bytes ("The TraceConfig is
 * empty", exit 1), from a file, with --txt, or on stdin; so does record:
 * exit 1, failure "config" in the summary, no output file, no session.
 * A text config of comments only is not empty: it records. */
static void empty_config_is_refused(void **state) {
  test_service_t *ts = *state;
  char cfg[256], out[256], sum[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "empty.cfg"));
  snprintf(out, sizeof(out), "%s", out_in(ts, "empty.pftrace"));
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "empty.json"));
  write_file(cfg, "");
  const char *binary[] = {"record", "--socket", ts->consumer_sock, "-c", cfg,
                          "-o", out, "--summary-json", sum, NULL};
  const char *text[] = {"record", "--socket", ts->consumer_sock, "-c", cfg,
                        "--txt", "-o", out, "--summary-json", sum, NULL};
  const char *in[] = {"record", "--socket", ts->consumer_sock, "-c", "-",
                      "-o", out, "--summary-json", sum, NULL};
  const char *const *runs[] = {binary, text, in};
  /* The child's stdin is ours: the empty file for the run that reads it. */
  int saved = dup(STDIN_FILENO);
  assert_true(saved >= 0);
  for (size_t i = 0; i < 3; i++) {
    int fd = open(cfg, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(dup2(fd, STDIN_FILENO), STDIN_FILENO);
    close(fd);
    child_t c;
    int rc = run_cli(&c, runs[i]);
    assert_int_equal(dup2(saved, STDIN_FILENO), STDIN_FILENO);
    assert_int_equal(rc, 1);
    assert_json(sum, "exit_code", "1");
    assert_json(sum, "hosts.0.failure", "\"config\"");
    assert_false(exists(out));
    unlink(sum);
  }
  close(saved);
  raw_consumer_t rc;
  assert_int_equal(raw_consumer_connect(&rc, ts), 0);
  size_t producers, sources, sessions, replies;
  assert_int_equal(raw_consumer_query_all(&rc, WAIT_MS, &producers, &sources,
                                          &sessions, &replies), 0);
  assert_int_equal(sessions, 0);
  raw_consumer_close(&rc);

  write_file(cfg, "# nothing but a comment\n");
  const char *comments[] = {"record", "--socket", ts->consumer_sock, "-c", cfg,
                            "--txt", "-t", "100ms", "-o", out, NULL};
  child_t c;
  assert_int_equal(run_cli(&c, comments), 0);
  assert_true(exists(out));
  unlink(out);
  unlink(cfg);
}

int main(void) {
#define SVC(t) cmocka_unit_test_setup_teardown(t, test_service_setup, test_service_teardown)
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(version),
      SVC(save_for_bugreport),
      SVC(save_all_for_bugreport),
      SVC(compound_durations),
      SVC(is_detached_answers_by_exit_status),
      SVC(background_prints_the_pid_and_sigterm_stops_cleanly),
      SVC(background_wait_returns_once_the_data_sources_started),
      SVC(size_stops_a_service_written_file),
      SVC(size_stops_a_streamed_file),
      SVC(query_raw_and_capabilities),
      SVC(stats_shows_live_counters_of_running_sessions),
      SVC(unknown_data_sources_are_named_with_close_matches),
      SVC(service_gone_is_not_no_data_loss),
      SVC(several_hosts_refuse_a_trace_file_name),
      SVC(empty_config_is_refused),
  };
#undef SVC
  return cmocka_run_group_tests(tests, NULL, NULL);
}
