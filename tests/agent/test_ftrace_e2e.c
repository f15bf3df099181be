/* linux.ftrace end to end: a real tracegated, a real tracegate-probes and
 * raw consumers recording kernel events of this machine: sched events
 * consistent in full and compact form, whatever state another tracer left
 * the top-level tracefs in (its tracing_on at 0), the instance a killed
 * tracegate-probes left removed by the next, and every event failing
 * without root. On-demand process dumps are test_ftrace_pids_e2e's, kernel
 * addresses test_ftrace_ksyms_e2e's; the harness is probes_e2e.h.
 *
 * The tests depend only on the tracefs state they set themselves: the
 * probes' instances, and the top-level tracing_on that one test turns off
 * and puts back.
 *
 * Needs root and tracefs. Without them the tests are skipped with the
 * reason, unless TG_REQUIRE_FTRACE is set in the environment (CI runs as
 * root on machines with tracefs): then they fail with the reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_tracefs.h"
#include "probes_e2e.h"
#include "test_notice.h"
#include "test_proc.h"

#define KID_COMM "tg-ftrace-kid"

/* A child that renames itself KID_COMM, writes a marker into the
 * trace_marker of the tracefs directory |instance| (the session's own
 * instance, or the top level where applications write) and exits; it is
 * switched in under that name from a running task, not from the idle task:
 * on the VMs this runs on, the kernel records no switch out of the idle
 * task, so a kid that only ever woke on an idle CPU left no switch into it
 * in the trace (the test failed about one run in eight on an idle
 * machine). Parent and kid share one CPU and hand over through pipes: the
 * parent, running, wakes the kid and blocks, and the switch from it to the
 * kid is recorded. Returns its pid. */
static pid_t run_kid(const char *instance) {
  cpu_set_t old, one;
  assert_int_equal(sched_getaffinity(0, sizeof(old), &old), 0);
  int cpu = sched_getcpu();
  assert_true(cpu >= 0);
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
  int renamed[2], go[2];
  assert_int_equal(pipe2(renamed, O_CLOEXEC), 0);
  assert_int_equal(pipe2(go, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_NAME, KID_COMM);
    char c = 'r';
    if (write(renamed[1], &c, 1) != 1) _exit(4);
    if (read(go[0], &c, 1) != 1) _exit(5); /* blocks: the parent runs */
    char path[TG_TRACEFS_PATH_MAX * 2], msg[64];
    snprintf(path, sizeof(path), "%s/trace_marker", instance);
    int n = snprintf(msg, sizeof(msg), "tg-marker-%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) _exit(2);
    if (write(fd, msg, (size_t)n) != n) _exit(3);
    close(fd);
    for (int i = 0; i < 20; i++) e2e_sleep_ms(1);
    _exit(0);
  }
  assert_true(pid > 0);
  char c;
  assert_int_equal(read(renamed[0], &c, 1), 1);
  /* The kid, renamed, waits in read(); wake it and block in waitpid(). */
  assert_int_equal(write(go[1], "g", 1), 1);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(renamed[0]);
  close(renamed[1]);
  close(go[0]);
  close(go[1]);
  assert_int_equal(sched_setaffinity(0, sizeof(old), &old), 0);
  return pid;
}

/* --- checks -------------------------------------------------------------- */

#define MAX_CPUS 1024

typedef struct cpu_state {
  uint64_t last_ts;
  bool have_switch;
  int32_t last_next_pid;
} cpu_state_t;

/* How many tasks of |p| are switched in but never switched out. Some
 * kernels record no switch of certain tasks (on the sandboxed VMs this
 * runs on: the threads of pid 1; tracefs' own text output and a plain
 * reader of trace_pipe_raw show the same gaps). Where there are such
 * tasks, a gap in a CPU's chain may be theirs. */
static uint8_t g_in[1u << 22], g_out[1u << 22]; /* pid_max is at most 2^22 */

/* Whether the kernel may have left out a switch from |pid|: the idle task
 * (its switches out go unrecorded on these VMs; tracefs' text shows it),
 * or a task switched in and never out (see unrecorded_switch_outs). */
static bool switch_out_may_be_missing(int32_t pid) {
  return pid == 0 ||
         ((uint32_t)pid < sizeof(g_in) && g_in[pid] && !g_out[pid]);
}

static size_t unrecorded_switch_outs(const e2e_packets_t *p) {
  uint8_t *in = g_in, *out = g_out;
  memset(in, 0, sizeof(g_in));
  memset(out, 0, sizeof(g_out));
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__FtraceEventBundle *b =
        p->pk[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS
            ? p->pk[i]->ftrace_events
            : NULL;
    for (size_t k = 0; b && k < b->n_event; k++) {
      if (b->event[k]->event_case !=
          PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH)
        continue;
      const Perfetto__Protos__SchedSwitchFtraceEvent *s = b->event[k]->sched_switch;
      if ((uint32_t)s->next_pid < sizeof(g_in)) in[s->next_pid] = 1;
      if ((uint32_t)s->prev_pid < sizeof(g_out)) out[s->prev_pid] = 1;
    }
  }
  size_t n = 0;
  for (size_t pid = 0; pid < sizeof(g_in); pid++) n += in[pid] && !out[pid];
  return n;
}

typedef struct seen {
  size_t switches, chain_checked, unrecorded, wakings, generic, bundles, lost;
  uint64_t events_per_cpu[MAX_CPUS]; /* decoded, to match "read events" */
  size_t markers; /* the kid's, recorded */
  bool newtask, rename, exit, fork, kid_switched_in;
} seen_t;

static void check_full(const e2e_packets_t *p, pid_t kid, uint64_t t0, uint64_t t1,
                       seen_t *seen) {
  static cpu_state_t cpus[MAX_CPUS];
  memset(cpus, 0, sizeof(cpus));
  memset(seen, 0, sizeof(*seen));
  unrecorded_switch_outs(p);
  char marker[64];
  snprintf(marker, sizeof(marker), "tg-marker-%d", (int)kid);
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__FtraceEventBundle *b = e2e_bundle_of(p->pk[i]);
    if (!b) continue;
    assert_true(b->cpu < MAX_CPUS);
    cpu_state_t *c = &cpus[b->cpu];
    seen->bundles++;
    if (b->has_lost_events && b->lost_events) {
      seen->lost++;
      c->have_switch = false; /* the chain breaks where the kernel dropped */
    }
    assert_null(b->compact_sched);
    seen->events_per_cpu[b->cpu] += b->n_event;
    for (size_t k = 0; k < b->n_event; k++) {
      const Perfetto__Protos__FtraceEvent *e = b->event[k];
      assert_true(e->has_timestamp);
      assert_true(e->timestamp >= t0 && e->timestamp <= t1);
      /* Per CPU the kernel's timestamps never go back. */
      assert_true(e->timestamp >= c->last_ts);
      c->last_ts = e->timestamp;
      switch (e->event_case) {
        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH: {
          const Perfetto__Protos__SchedSwitchFtraceEvent *s = e->sched_switch;
          assert_non_null(s->prev_comm);
          assert_non_null(s->next_comm);
          assert_true(s->has_prev_pid && s->has_next_pid && s->has_prev_state);
          if (c->have_switch) {
            if (s->prev_pid == c->last_next_pid) {
              seen->chain_checked++;
            } else {
              /* Only where the kernel itself leaves switches out; every
               * event it recorded is decoded (checked against its own
               * "read events" count). */
              if (!switch_out_may_be_missing((int32_t)c->last_next_pid))
                assert_int_equal(s->prev_pid, c->last_next_pid);
              seen->unrecorded++;
            }
          }
          c->have_switch = true;
          c->last_next_pid = s->next_pid;
          seen->switches++;
          if (s->next_pid == kid && strcmp(s->next_comm, KID_COMM) == 0)
            seen->kid_switched_in = true;
          break;
        }
        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING:
          assert_non_null(e->sched_waking->comm);
          assert_true(e->sched_waking->has_pid && e->sched_waking->has_target_cpu);
          seen->wakings++;
          break;
        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_NEWTASK:
          if (e->task_newtask->pid == kid) seen->newtask = true;
          break;
        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME:
          if (e->task_rename->pid == kid &&
              strcmp(e->task_rename->newcomm, KID_COMM) == 0)
            seen->rename = true;
          break;
        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXIT:
          if (e->sched_process_exit->pid == kid &&
              strcmp(e->sched_process_exit->comm, KID_COMM) == 0)
            seen->exit = true;
          break;
        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK:
          if (e->sched_process_fork->child_pid == kid &&
              e->sched_process_fork->parent_pid == getpid())
            seen->fork = true;
          break;
        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT:
          if (e->print->buf && strstr(e->print->buf, marker) &&
              e->pid == (uint32_t)kid)
            seen->markers++;
          break;
        case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC:
          /* task/\* has events Perfetto has no message for, too. */
          assert_non_null(e->generic->event_name);
          if (strcmp(e->generic->event_name, "hrtimer_start") == 0) {
            assert_true(e->generic->n_field > 0);
            seen->generic++;
          }
          break;
        default:
          break;
      }
    }
  }
}

typedef struct compact_seen {
  size_t switches, wakings, full_events;
  bool kid_switched_in;
} compact_seen_t;

static void check_compact(const e2e_packets_t *p, pid_t kid, uint64_t t0,
                          uint64_t t1, compact_seen_t *seen) {
  static uint64_t last_ts[MAX_CPUS];
  memset(last_ts, 0, sizeof(last_ts));
  memset(seen, 0, sizeof(*seen));
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__FtraceEventBundle *b = e2e_bundle_of(p->pk[i]);
    if (!b) continue;
    assert_true(b->cpu < MAX_CPUS);
    seen->full_events += b->n_event;
    const Perfetto__Protos__FtraceEventBundle__CompactSched *cs = b->compact_sched;
    if (!cs) continue;
    size_t n = cs->n_switch_timestamp;
    assert_int_equal(cs->n_switch_prev_state, n);
    assert_int_equal(cs->n_switch_next_pid, n);
    assert_int_equal(cs->n_switch_next_prio, n);
    assert_int_equal(cs->n_switch_next_comm_index, n);
    uint64_t ts = 0;
    for (size_t k = 0; k < n; k++) {
      ts += cs->switch_timestamp[k];
      assert_true(ts >= t0 && ts <= t1);
      assert_true(ts >= last_ts[b->cpu]);
      last_ts[b->cpu] = ts;
      assert_true(cs->switch_next_comm_index[k] < cs->n_intern_table);
      if (cs->switch_next_pid[k] == kid &&
          strcmp(cs->intern_table[cs->switch_next_comm_index[k]], KID_COMM) == 0)
        seen->kid_switched_in = true;
      seen->switches++;
    }
    size_t w = cs->n_waking_timestamp;
    assert_int_equal(cs->n_waking_pid, w);
    assert_int_equal(cs->n_waking_target_cpu, w);
    assert_int_equal(cs->n_waking_prio, w);
    assert_int_equal(cs->n_waking_comm_index, w);
    assert_int_equal(cs->n_waking_common_flags, w);
    ts = 0;
    for (size_t k = 0; k < w; k++) {
      ts += cs->waking_timestamp[k];
      assert_true(ts >= t0 && ts <= t1);
      assert_true(cs->waking_comm_index[k] < cs->n_intern_table);
      seen->wakings++;
    }
  }
}

static void check_stats(const e2e_packets_t *p) {
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (int phase = 1; phase <= 2; phase++) {
    const Perfetto__Protos__FtraceStats *s = e2e_find_stats(p, phase);
    assert_non_null(s);
    assert_int_equal(s->n_cpu_stats, (size_t)cpus);
    for (size_t i = 0; i < s->n_cpu_stats; i++) {
      assert_int_equal(s->cpu_stats[i]->cpu, i);
      assert_true(s->cpu_stats[i]->has_now_ts && s->cpu_stats[i]->now_ts > 0);
    }
  }
}

/* --- tests --------------------------------------------------------------- */

/* The top level's tracing_on as the test found it ("" when untouched),
 * put back by the teardown whether the test passed or not. */
static char g_saved_tracing_on[8];

static void top_level_tracing_on(char *out, size_t cap) {
  long n = tg_tracefs_read(e2e_tracefs_root(), "tracing_on", out, cap);
  assert_true(n > 0);
  out[strcspn(out, "\n")] = 0;
}

/* Two sessions, full and compact, of one tracegate-probes record what the
 * kernel did meanwhile, consistently. The kid writes its marker to the top
 * level's trace_marker when |top_level_marker|, else to the full
 * session's instance: recorded once either way. The top level's
 * tracing_on while the full session runs goes to |top_on| ("" if not
 * wanted). */
static void record_consistent_sched_events(test_service_t *ts,
                                           bool top_level_marker,
                                           char *top_on, size_t top_on_cap) {
  char err_path[160];
  pid_t probes = e2e_start_probes(ts, err_path, sizeof(err_path),
                                  "probes.err", false, 3);

  uint64_t t0 = e2e_boottime_ns();
  char *full_events[] = {"sched/sched_switch", "sched/sched_waking",
                         "sched/sched_process_fork", "sched/sched_process_exit",
                         "task/*", "ftrace/print", "timer/hrtimer_start",
                         "no_such_group/no_such_event"};
  char *compact_events[] = {"sched/sched_switch", "sched_waking"};
  e2e_session_t a, b;
  e2e_session_begin(&a, ts, full_events, 8, false);
  e2e_wait_started(&a);
  /* The kid's marker goes to the full session only (the compact one
   * records no ftrace/print). */
  char a_dir[TG_TRACEFS_PATH_MAX];
  e2e_only_instance_of(probes, a_dir, sizeof(a_dir));
  e2e_session_begin(&b, ts, compact_events, 2, true);
  e2e_wait_started(&b);
  /* Each session has an instance of its own. */
  assert_int_equal(e2e_instances_of(probes), 2);
  const Perfetto__Protos__FtraceStats *st = e2e_find_stats(&a.got, 1);
  assert_int_equal(st->n_unknown_ftrace_events, 1);
  assert_string_equal(st->unknown_ftrace_events[0], "no_such_group/no_such_event");

  if (top_on_cap) top_level_tracing_on(top_on, top_on_cap);
  pid_t kid = run_kid(top_level_marker ? e2e_tracefs_root() : a_dir);
  e2e_flush(&a.c);
  e2e_flush(&b.c);
  assert_int_equal(raw_consumer_disable(&a.c, E2E_WAIT_MS), 0);
  assert_int_equal(raw_consumer_disable(&b.c, E2E_WAIT_MS), 0);
  e2e_read_more(&a.c, &a.got);
  e2e_read_more(&b.c, &b.got);
  uint64_t t1 = e2e_boottime_ns();

  seen_t s;
  check_full(&a.got, kid, t0, t1, &s);
  print_message("full: %zu bundles (%zu lost), %zu switches (%zu chained, "
                "%zu gaps of unrecorded switches), %zu wakings, %zu generic\n",
                s.bundles, s.lost, s.switches, s.chain_checked, s.unrecorded,
                s.wakings, s.generic);
  assert_true(s.switches > 10);
  assert_true(s.chain_checked > 0);
  /* Nothing the kernel handed over was lost in decoding: per CPU, the
   * events decoded are exactly what the kernel counts as read. */
  const Perfetto__Protos__FtraceStats *st0 = e2e_find_stats(&a.got, 1),
                                      *st1 = e2e_find_stats(&a.got, 2);
  assert_non_null(st0);
  assert_non_null(st1);
  for (size_t i = 0; i < st1->n_cpu_stats && i < MAX_CPUS; i++) {
    uint64_t before = i < st0->n_cpu_stats ? st0->cpu_stats[i]->read_events : 0;
    assert_int_equal(s.events_per_cpu[i], st1->cpu_stats[i]->read_events - before);
  }
  assert_true(s.wakings > 0);
  assert_true(s.generic > 0);
  assert_true(s.newtask);
  assert_true(s.fork);
  assert_true(s.rename);
  assert_int_equal(s.markers, 1);
  assert_true(s.exit);
  assert_true(s.kid_switched_in);
  check_stats(&a.got);

  compact_seen_t c;
  check_compact(&b.got, kid, t0, t1, &c);
  print_message("compact: %zu switches, %zu wakings\n", c.switches, c.wakings);
  assert_int_equal(c.full_events, 0);
  assert_true(c.switches > 10);
  assert_true(c.wakings > 0);
  assert_true(c.kid_switched_in);
  check_stats(&b.got);

  /* Stopping put tracefs back: the instances are gone. */
  assert_true(e2e_wait_instances(probes, 0));
  e2e_session_close(&a);
  e2e_session_close(&b);
  e2e_stop_probes(probes, err_path);
}

static void ftrace_sessions_record_consistent_sched_events(void **state) {
  e2e_require_ftrace();
  record_consistent_sched_events(*state, false, NULL, 0);
}

/* Another tracer (Perfetto's traced_probes, for one) may leave the top
 * level's tracing_on at 0: the probes trace in their own instances and
 * still record everything; a session recording ftrace/print holds the top
 * level on meanwhile, so that applications' markers written there do not
 * fail (Perfetto's TestFtraceFlush waits for it and checks the write), and
 * puts it back to 0 at its end. */
static void ftrace_records_with_top_level_tracing_off(void **state) {
  e2e_require_ftrace();
  top_level_tracing_on(g_saved_tracing_on, sizeof(g_saved_tracing_on));
  assert_int_equal(tg_tracefs_write(e2e_tracefs_root(), "tracing_on", "0"), 0);
  char during[8];
  record_consistent_sched_events(*state, true, during, sizeof(during));
  assert_string_equal(during, "1");
  char now[8];
  top_level_tracing_on(now, sizeof(now));
  assert_string_equal(now, "0");
}

static int tracing_off_teardown(void **state) {
  if (g_saved_tracing_on[0]) {
    int rv = tg_tracefs_write(e2e_tracefs_root(), "tracing_on",
                              g_saved_tracing_on);
    if (rv < 0)
      fprintf(stderr, "cannot put back the top-level tracing_on (%s): %s\n",
              g_saved_tracing_on, strerror(-rv));
    g_saved_tracing_on[0] = 0;
  }
  return test_service_teardown(state);
}

static void ftrace_instance_of_killed_probes_is_removed_on_restart(void **state) {
  e2e_require_ftrace();
  test_service_t *ts = *state;
  char err_path[160];
  pid_t probes = e2e_start_probes(ts, err_path, sizeof(err_path),
                                  "probes.err", false, 3);
  char *events[] = {"sched/sched_switch"};
  e2e_session_t a;
  e2e_session_begin(&a, ts, events, 1, true);
  e2e_wait_started(&a);
  assert_int_equal(e2e_instances_of(probes), 1);

  /* A crash leaves the instance (and its ring buffers) behind... */
  kill(probes, SIGKILL);
  assert_int_equal(tg_test_reap(probes, E2E_WAIT_MS), SIGKILL);
  assert_int_equal(e2e_instances_of(probes), 1);
  /* ...and the next run removes it as it starts. */
  pid_t again = e2e_spawn_probes(ts, err_path, false);
  assert_true(again > 0);
  assert_true(e2e_wait_instances(probes, 0));
  assert_int_equal(raw_consumer_disable(&a.c, E2E_WAIT_MS), 0);
  e2e_session_close(&a);
  e2e_stop_probes(again, err_path);
  assert_int_equal(e2e_instances_of(again), 0);
}

/* The stats packets of |p| that name two failed events and no CPU. */
static size_t failures_in(const e2e_packets_t *p) {
  size_t n = 0;
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__TracePacket *pk = p->pk[i];
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS &&
        pk->ftrace_stats->n_failed_ftrace_events == 2 &&
        pk->ftrace_stats->n_cpu_stats == 0)
      n++;
  }
  return n;
}

static void ftrace_without_root_reports_every_event_failed(void **state) {
  e2e_require_ftrace();
  TG_TEST_REQUIRE_OTHER_USER();
  test_service_t *ts = *state;
  /* nobody must reach the producer socket. */
  assert_int_equal(tg_test_other_user_dir(ts->dir, 0755), 0);
  char err_path[160];
  pid_t probes = e2e_start_probes(ts, err_path, sizeof(err_path),
                                  "probes-nobody.err", true, 3);
  char *events[] = {"sched/sched_switch", "sched/sched_waking"};
  e2e_session_t a;
  e2e_session_begin(&a, ts, events, 2, false);
  e2e_wait_started(&a);
  const Perfetto__Protos__FtraceStats *st = e2e_find_stats(&a.got, 1);
  assert_int_equal(st->n_failed_ftrace_events, 2);
  assert_string_equal(st->failed_ftrace_events[0], "sched/sched_switch");
  assert_int_equal(st->n_cpu_stats, 0);
  /* Said again at every flush, so that a ring that wrapped past the first
   * still holds it (a collector's clone flushes first). */
  size_t before = failures_in(&a.got);
  e2e_flush(&a.c);
  e2e_read_more(&a.c, &a.got);
  assert_true(failures_in(&a.got) > before);
  assert_int_equal(raw_consumer_disable(&a.c, E2E_WAIT_MS), 0);
  e2e_read_more(&a.c, &a.got);
  for (size_t i = 0; i < a.got.n; i++) assert_null(e2e_bundle_of(a.got.pk[i]));
  e2e_session_close(&a);
  e2e_stop_probes(probes, err_path);
  char err[8192];
  e2e_read_text(err_path, err, sizeof(err));
  assert_notice_with(err, TG_N_PROBES_FTRACE_UNAVAILABLE,
                     "linux.ftrace: instance 0: ");
  /* Refused for want of permission, and said so. */
  char line[512];
  assert_true(tg_test_notice_line(err, TG_N_PROBES_FTRACE_UNAVAILABLE, NULL,
                                  line, sizeof(line)));
  assert_true(strstr(line, strerror(EACCES)) || strstr(line, strerror(EPERM)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          ftrace_sessions_record_consistent_sched_events, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(ftrace_records_with_top_level_tracing_off,
                                      test_service_setup, tracing_off_teardown),
      cmocka_unit_test_setup_teardown(
          ftrace_instance_of_killed_probes_is_removed_on_restart,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          ftrace_without_root_reports_every_event_failed, test_service_setup,
          test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
