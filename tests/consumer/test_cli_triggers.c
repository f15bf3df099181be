/* The `tracegate` binary with triggers and clones, end to end: a real
 * tracegated, a raw producer (tests/support), the CLI as a child process.
 * `tracegate trigger` starts a session that `tracegate record` shows as
 * waiting for it; a trigger that never fires is named; `record --clone`
 * writes a snapshot of a running session, which runs on. */
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
#include <unistd.h>

#include <cmocka.h>

#include "cli_child.h"
#include "pb/trace/test_event.pb-c.h"
#include "pb/trace/trace.pb-c.h"
#include "pb/trace/trigger.pb-c.h"
#include "test_proc.h"

/* The trace file |path| decoded whole; free with
 * perfetto__protos__trace__free_unpacked. */
static Perfetto__Protos__Trace *load_trace(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  static uint8_t buf[4 << 20];
  size_t n = 0;
  ssize_t r;
  while ((r = read(fd, buf + n, sizeof(buf) - n)) > 0) n += (size_t)r;
  close(fd);
  assert_true(n < sizeof(buf));
  Perfetto__Protos__Trace *t = perfetto__protos__trace__unpack(NULL, n, buf);
  assert_non_null(t);
  return t;
}

static size_t count_triggers(const Perfetto__Protos__Trace *t, const char *name,
                             const char *producer) {
  size_t k = 0;
  for (size_t i = 0; i < t->n_packet; i++) {
    const Perfetto__Protos__Trigger *tr = t->packet[i]->trigger;
    if (t->packet[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER ||
        !tr->trigger_name || strcmp(tr->trigger_name, name))
      continue;
    assert_string_equal(tr->producer_name, producer);
    k++;
  }
  return k;
}

/* The one packet of |t| with a clone_snapshot_trigger, and the one with a
 * trigger packet: they must say the same (the trigger's |delay_ms| too),
 * at the same time, as Perfetto's MultipleTriggersCloneSnapshot checks. */
static void assert_cloned_for(const Perfetto__Protos__Trace *t, const char *name,
                              uint64_t delay_ms) {
  const Perfetto__Protos__TracePacket *clone_pkt = NULL, *trig_pkt = NULL;
  for (size_t i = 0; i < t->n_packet; i++) {
    const Perfetto__Protos__TracePacket *p = t->packet[i];
    if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CLONE_SNAPSHOT_TRIGGER) {
      assert_null(clone_pkt);
      clone_pkt = p;
    } else if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRIGGER) {
      assert_null(trig_pkt);
      trig_pkt = p;
    }
  }
  assert_non_null(clone_pkt);
  assert_non_null(trig_pkt);
  const Perfetto__Protos__Trigger *a = clone_pkt->clone_snapshot_trigger, *b = trig_pkt->trigger;
  assert_string_equal(a->trigger_name, name);
  assert_string_equal(b->trigger_name, name);
  assert_string_equal(a->producer_name, b->producer_name);
  assert_int_equal(a->trusted_producer_uid, b->trusted_producer_uid);
  assert_true(a->has_stop_delay_ms && b->has_stop_delay_ms);
  assert_int_equal(a->stop_delay_ms, delay_ms);
  assert_int_equal(b->stop_delay_ms, delay_ms);
  assert_true(trig_pkt->timestamp > 0);
  assert_int_equal(clone_pkt->timestamp, trig_pkt->timestamp);
}

static size_t count_str(const Perfetto__Protos__Trace *t, const char *str) {
  size_t k = 0;
  for (size_t i = 0; i < t->n_packet; i++)
    if (t->packet[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING &&
        t->packet[i]->for_testing->str && !strcmp(t->packet[i]->for_testing->str, str))
      k++;
  return k;
}

/* A pseudo-terminal for the CLI's stderr; |*slave| goes to the child. */
static int open_pty(int *slave) {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true(master >= 0);
  assert_int_equal(grantpt(master), 0);
  assert_int_equal(unlockpt(master), 0);
  *slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  assert_true(*slave >= 0);
  return master;
}

/* Reads the terminal into |tty| until it shows |what| (or the deadline). */
static void wait_tty(int master, char *tty, size_t cap, size_t *n, const char *what) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (!strstr(tty, what) && tg_test_now_ms() < deadline) {
    struct pollfd pf = {master, POLLIN, 0};
    if (poll(&pf, 1, 200) == 1) {
      ssize_t r = read(master, tty + *n, cap - 1 - *n);
      if (r > 0) tty[*n += (size_t)r] = 0;
    }
  }
  assert_non_null(strstr(tty, what));
}

static void trigger_command_starts_the_waiting_session(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "start.pbtxt"));
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "data_sources { config { name: \"cli.ds\" } }\n"
             "duration_ms: 500\n"
             "trigger_config {\n"
             "  trigger_mode: START_TRACING\n"
             "  trigger_timeout_ms: 60000\n"
             "  triggers { name: \"go\" }\n"
             "}\n");
  snprintf(out, sizeof(out), "%s", out_in(ts, "start.pftrace"));
  int slave;
  int master = open_pty(&slave);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                        "-o", out, NULL};
  child_t c;
  spawn_cli_tty(&c, args, slave);
  close(slave);
  assert_true(raw_producer_poll(&p, WAIT_MS) == 1); /* SetupDataSource */
  char tty[16384] = "";
  size_t n = 0;
  /* Armed, not tracing: the line says what it waits for, not a duration. */
  wait_tty(master, tty, sizeof(tty), &n, TG_NOTE(TRIGGER_WAITING));
  wait_tty(master, tty, sizeof(tty), &n, "'go'");
  assert_notice_with(tty, TG_N_TRIGGER_WAITING, "'go'");
  assert_no_notice(tty, TG_N_PROGRESS);
  assert_false(p.started);

  child_t t;
  const char *targs[] = {"trigger", "--socket", ts->producer_sock, "go", NULL};
  assert_int_equal(run_cli(&t, targs), 0);
  assert_notice_with(t.err, TG_N_TRIGGER_ACTIVATED, "'go'");
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "started", 1, 4);
  ack_flush(&p); /* the duration's final flush */
  char rest[16384];
  assert_int_equal(wait_cli_ex(&c, WAIT_MS, master, rest, sizeof(rest)), 0);
  close(master);
  Perfetto__Protos__Trace *tr = load_trace(out);
  assert_int_equal(count_str(tr, "started"), 4);
  assert_int_equal(count_triggers(tr, "go", "tracegate-trigger"), 1);
  perfetto__protos__trace__free_unpacked(tr, NULL);
  unlink(out);
  unlink(cfg);
  raw_producer_close(&p);
}

static void trigger_timeout_says_it_never_fired(void **state) {
  test_service_t *ts = *state;
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "never.pbtxt"));
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "data_sources { config { name: \"cli.ds\" } }\n"
             "duration_ms: 500\n"
             "trigger_config {\n"
             "  trigger_mode: START_TRACING\n"
             "  trigger_timeout_ms: 300\n"
             "  triggers { name: \"never\" }\n"
             "  triggers { name: \"nor-this\" }\n"
             "}\n");
  snprintf(out, sizeof(out), "%s", out_in(ts, "never.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                        "-o", out, NULL};
  child_t c;
  assert_int_equal(run_cli(&c, args), 1);
  char line[512];
  assert_true(tg_test_notice_line(c.err, TG_N_TRIGGER_NEVER_FIRED, "'never'",
                                  line, sizeof(line)));
  assert_non_null(strstr(line, "'nor-this'"));
  assert_non_null(strstr(line, "0.3s"));
  unlink(out);
  unlink(cfg);
}

static void trigger_command_refusals(void **state) {
  test_service_t *ts = *state;
  child_t c;
  const char *none[] = {"trigger", "--socket", ts->producer_sock, NULL};
  assert_int_equal(run_cli(&c, none), 2);
  assert_notice(c.err, TG_N_USAGE);
  const char *nosvc[] = {"trigger", "--socket", out_in(ts, "no.sock"), "x", NULL};
  assert_int_equal(run_cli(&c, nosvc), 1);
  assert_notice_with(c.err, TG_N_TRIGGER_UNREACHABLE, out_in(ts, "no.sock"));
  const char *help[] = {"help", "trigger", NULL};
  assert_int_equal(run_cli(&c, help), 0);
  assert_non_null(strstr(c.out, "trigger_perfetto"));
}

static void record_clone_writes_a_snapshot(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t rc;
  simple_cfg_t sc;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(&rc, ts), 0);
  simple_cfg_init(&sc, 256, 1, "cli.ds");
  sc.cfg.unique_session_name = (char *)"cloneme";
  assert_int_equal(raw_consumer_enable(&rc, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "snap", 1, 5);
  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(&rc, WAIT_MS);
  assert_non_null(q);
  assert_int_equal(q->service_state->n_tracing_sessions, 1);
  char id[32];
  snprintf(id, sizeof(id), "%llu",
           (unsigned long long)q->service_state->tracing_sessions[0]->id);
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);

  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "clone.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "--clone", id,
                        "-o", out, NULL};
  child_t c;
  spawn_cli(&c, args);
  ack_flush(&p); /* the clone's flush */
  assert_int_equal(wait_cli(&c), 0);
  assert_notice_with(c.err, TG_N_SNAPSHOT_WRITTEN, out);
  Perfetto__Protos__Trace *tr = load_trace(out);
  assert_int_equal(count_str(tr, "snap"), 5);
  perfetto__protos__trace__free_unpacked(tr, NULL);
  unlink(out);
  /* The clone was freed before the CLI exited: the source alone is left. */
  q = raw_consumer_query(&rc, WAIT_MS);
  assert_non_null(q);
  assert_int_equal(q->service_state->n_tracing_sessions, 1);
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);

  /* By name, too; the session still runs and still holds its data. */
  const char *by_name[] = {"record", "--socket", ts->consumer_sock, "--clone-by-name",
                           "cloneme", "-o", out, NULL};
  spawn_cli(&c, by_name);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  tr = load_trace(out);
  assert_int_equal(count_str(tr, "snap"), 5);
  perfetto__protos__trace__free_unpacked(tr, NULL);
  unlink(out);
  assert_false(p.stopped);

  /* A session that does not exist: said, and no file is left. */
  const char *missing[] = {"record", "--socket", ts->consumer_sock, "--clone", "999999",
                           "-o", out, NULL};
  assert_int_equal(run_cli(&c, missing), 1);
  assert_notice_with(c.err, TG_N_CLONE_FAILED, " 999999");
  assert_false(exists(out));
  assert_no_temp(ts->dir);
  const char *mixed[] = {"record", "--socket", ts->consumer_sock, "--clone", id,
                         "-t", "1s", "-o", out, NULL};
  assert_int_equal(run_cli(&c, mixed), 2);

  assert_int_equal(raw_consumer_disable(&rc, WAIT_MS), 0);
  size_t np = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(&rc, &np);
  assert_non_null(pk);
  size_t snap = 0;
  for (size_t i = 0; i < np; i++)
    snap += pk[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING;
  assert_int_equal(snap, 5);
  free_packets(pk, np);
  raw_consumer_close(&rc);
  raw_producer_close(&p);
}

/* As perfetto_cmd: each CLONE_SNAPSHOT trigger clones the session into
 * OUT.0, OUT.1, ...; the session runs on and ends in OUT. Each snapshot
 * holds the triggers since the one before, and says which one made it. */
static void clone_snapshot_trigger_writes_numbered_snapshots(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char cfg[256], out[256], snap0[300], snap1[300];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "snap.pbtxt"));
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "data_sources { config { name: \"cli.ds\" } }\n"
             "trigger_config {\n"
             "  trigger_mode: CLONE_SNAPSHOT\n"
             "  triggers { name: \"snap\" stop_delay_ms: 20 }\n"
             "}\n");
  snprintf(out, sizeof(out), "%s", out_in(ts, "snap.pftrace"));
  snprintf(snap0, sizeof(snap0), "%s.0", out);
  snprintf(snap1, sizeof(snap1), "%s.1", out);
  int slave;
  int master = open_pty(&slave);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                        "-t", "0", "-o", out, NULL};
  child_t c;
  spawn_cli_tty(&c, args, slave);
  close(slave);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "pre", 1, 3);

  child_t t;
  const char *targs[] = {"trigger", "--socket", ts->producer_sock, "snap", NULL};
  assert_int_equal(run_cli(&t, targs), 0);
  ack_flush(&p); /* the clone's flush */
  char tty[16384] = "";
  size_t n = 0;
  wait_tty(master, tty, sizeof(tty), &n, TG_NOTE(SNAPSHOT_WRITTEN));
  assert_notice_with(tty, TG_N_SNAPSHOT_WRITTEN, ".0 (trigger 'snap')");
  assert_false(p.stopped);

  commit_packets(&p, 1, "post", 4, 2);
  assert_int_equal(run_cli(&t, targs), 0);
  ack_flush(&p);
  wait_tty(master, tty, sizeof(tty), &n, ".1 (trigger 'snap')");
  kill(c.pid, SIGINT);
  ack_flush(&p);
  char rest[16384];
  assert_int_equal(wait_cli_ex(&c, WAIT_MS, master, rest, sizeof(rest)), 0);
  close(master);
  Perfetto__Protos__Trace *tr = load_trace(snap0);
  assert_int_equal(count_str(tr, "pre"), 3);
  assert_int_equal(count_str(tr, "post"), 0);
  assert_int_equal(count_triggers(tr, "snap", "tracegate-trigger"), 1);
  assert_cloned_for(tr, "snap", 20);
  perfetto__protos__trace__free_unpacked(tr, NULL);
  /* The first trigger went with OUT.0: OUT.1 has the second alone. */
  tr = load_trace(snap1);
  assert_int_equal(count_str(tr, "post"), 2);
  assert_int_equal(count_triggers(tr, "snap", "tracegate-trigger"), 1);
  assert_cloned_for(tr, "snap", 20);
  perfetto__protos__trace__free_unpacked(tr, NULL);
  tr = load_trace(out);
  assert_int_equal(count_str(tr, "pre"), 3);
  assert_int_equal(count_str(tr, "post"), 2);
  assert_int_equal(count_triggers(tr, "snap", "tracegate-trigger"), 2);
  perfetto__protos__trace__free_unpacked(tr, NULL);
  unlink(snap0);
  unlink(snap1);
  unlink(out);

  /* Nobody would be left to take the snapshots. */
  const char *detach[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                          "--detach", "k", NULL};
  assert_int_equal(run_cli(&c, detach), 2);
  assert_notice(c.err, TG_N_CLONE_SNAPSHOT_UNSUPPORTED);
  unlink(cfg);
  raw_producer_close(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(trigger_command_starts_the_waiting_session,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(trigger_timeout_says_it_never_fired,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(trigger_command_refusals, test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(record_clone_writes_a_snapshot,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_snapshot_trigger_writes_numbered_snapshots,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
