/* linux.ftrace end to end: a real tracegated, a real tracegate-probes and
 * raw consumers recording kernel events of this machine.
 *
 * Needs root and tracefs. Without them the tests are skipped with the
 * reason, unless TG_REQUIRE_FTRACE is set in the environment (CI runs as
 * root on machines with tracefs): then they fail with the reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_kaddr.h"
#include "agent/probes/ftrace_ksyms.h"
#include "agent/probes/ftrace_tracefs.h"
#include "test_service.h"

#ifndef PROBES_PATH
#error "PROBES_PATH must name the tracegate-probes binary"
#endif

#define WAIT_MS 20000
#define KID_COMM "tg-ftrace-kid"
#define NOBODY 65534

static char tracefs_root[TG_TRACEFS_PATH_MAX];

/* --- environment --------------------------------------------------------- */

static bool have_ftrace(char *why, size_t n) {
  if (geteuid() != 0) {
    snprintf(why, n, "not root (euid %d): tracefs needs root", (int)geteuid());
    return false;
  }
  int rv = tg_tracefs_find(tracefs_root);
  if (rv < 0) {
    snprintf(why, n, "tracefs is not available: %s", strerror(-rv));
    return false;
  }
  return true;
}

static void require_ftrace(void) {
  char why[160];
  if (have_ftrace(why, sizeof(why))) return;
  if (getenv("TG_REQUIRE_FTRACE"))
    fail_msg("TG_REQUIRE_FTRACE is set but %s", why);
  fprintf(stderr, "skipped: %s\n", why);
  skip();
}

/* --- children ------------------------------------------------------------ */

/* Runs tracegate-probes on |ts| (as nobody if |drop_root|), stderr into
 * |err_path|. */
static pid_t spawn_probes(const test_service_t *ts, const char *err_path,
                          bool drop_root) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) dup2(fd, STDERR_FILENO);
  if (drop_root && (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 ||
                    setuid(NOBODY) != 0))
    _exit(126);
  execl(PROBES_PATH, PROBES_PATH, "--socket", ts->producer_sock, "--log-level",
        "info", (char *)NULL);
  _exit(127);
}

/* The child's wait status, or -1 if it did not exit within |ms| (then it
 * is killed). */
static int wait_exit(pid_t pid, int ms) {
  int pidfd = pidfd_open(pid, 0);
  struct pollfd p = {.fd = pidfd, .events = POLLIN};
  bool killed = pidfd < 0 || poll(&p, 1, ms) != 1;
  if (killed) kill(pid, SIGKILL);
  if (pidfd >= 0) close(pidfd);
  int status = -1;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return killed ? -1 : status;
}

static void read_text(const char *path, char *out, size_t cap) {
  out[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = 0;
  fclose(f);
}

static void stop_probes(pid_t probes, const char *err_path) {
  kill(probes, SIGTERM);
  int status = wait_exit(probes, WAIT_MS);
  static char err[65536];
  read_text(err_path, err, sizeof(err));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("tracegate-probes exit status %#x; stderr:\n%s", status, err);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t boottime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* tracefs instances of tracegate-probes |pid|. */
static size_t instances_of(pid_t pid) {
  char dir[TG_TRACEFS_PATH_MAX + 16], prefix[48];
  snprintf(dir, sizeof(dir), "%s/instances", tracefs_root);
  snprintf(prefix, sizeof(prefix), TG_TRACEFS_INSTANCE_PREFIX "%d-", (int)pid);
  DIR *d = opendir(dir);
  assert_non_null(d);
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

/* Waits (bounded) until |pid| has |n| instances. tracefs has no change
 * notification, so this polls. */
static bool wait_instances(pid_t pid, size_t n) {
  uint64_t end = now_ms() + WAIT_MS;
  while (now_ms() < end) {
    if (instances_of(pid) == n) return true;
    sleep_ms(10);
  }
  return false;
}

/* --- recording ----------------------------------------------------------- */

typedef struct packets {
  Perfetto__Protos__TracePacket **pk;
  size_t n, cap;
} packets_t;

static void read_more(raw_consumer_t *c, packets_t *all) {
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(c, &n);
  assert_non_null(pk);
  for (size_t i = 0; i < n; i++) {
    if (all->n == all->cap) {
      all->cap = all->cap ? all->cap * 2 : 1024;
      all->pk = realloc(all->pk, all->cap * sizeof(*all->pk));
      assert_non_null(all->pk);
    }
    all->pk[all->n++] = pk[i];
  }
  free(pk);
}

static void packets_free(packets_t *all) {
  free_packets(all->pk, all->n);
  memset(all, 0, sizeof(*all));
}

static bool wait_data_sources(const test_service_t *ts, size_t n) {
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  uint64_t end = now_ms() + WAIT_MS;
  bool ok = false;
  while (!ok && now_ms() < end) {
    size_t p, d, s, r;
    ok = raw_consumer_query_all(&c, WAIT_MS, &p, &d, &s, &r) == 0 && d >= n;
    if (!ok) sleep_ms(20);
  }
  raw_consumer_close(&c);
  return ok;
}

/* tracegate-probes on |ts|, its stderr into ts->dir/|name| (kept in
 * |err_path|, |cap| bytes), started once the service lists its data
 * sources. */
static pid_t start_probes(const test_service_t *ts, char *err_path,
                          size_t cap, const char *name, bool drop_root) {
  snprintf(err_path, cap, "%s/%s", ts->dir, name);
  pid_t probes = spawn_probes(ts, err_path, drop_root);
  assert_true(probes > 0);
  assert_true(wait_data_sources(ts, 3));
  return probes;
}

static void flush(raw_consumer_t *c) {
  Perfetto__Protos__FlushRequest fr = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  fr.has_timeout_ms = true;
  fr.timeout_ms = 5000;
  int64_t rid = raw_invoke(&c->conn, "Flush", &fr.base, -1, false);
  assert_true(rid > 0);
  raw_frame_t f;
  assert_int_equal(raw_wait(&c->conn, (uint64_t)rid, WAIT_MS, &f), 1);
  tg_ipc_frame_free(f.frame);
}

typedef struct session {
  raw_consumer_t c;
  simple_cfg_t sc;
  Perfetto__Protos__FtraceConfig fc;
  Perfetto__Protos__FtraceConfig__CompactSchedConfig cs;
  packets_t got;
} session_t;

/* A linux.ftrace session's config in |s| (tests may add to it before
 * session_enable). */
static void session_config(session_t *s, char **events, size_t n,
                           bool compact) {
  memset(s, 0, sizeof(*s));
  simple_cfg_init(&s->sc, 32 * 1024,
                  PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD,
                  "linux.ftrace");
  perfetto__protos__ftrace_config__init(&s->fc);
  s->fc.n_ftrace_events = n;
  s->fc.ftrace_events = events;
  s->fc.has_buffer_size_kb = true;
  s->fc.buffer_size_kb = 2048;
  s->fc.has_drain_period_ms = true;
  s->fc.drain_period_ms = 50;
  perfetto__protos__ftrace_config__compact_sched_config__init(&s->cs);
  s->cs.has_enabled = true;
  s->cs.enabled = compact;
  s->fc.compact_sched = &s->cs;
  s->sc.dsc.ftrace_config = &s->fc;
}

static void session_enable(session_t *s, const test_service_t *ts) {
  assert_int_equal(raw_consumer_connect(&s->c, ts), 0);
  assert_int_equal(raw_consumer_enable(&s->c, &s->sc.cfg, -1), 0);
}

static void session_begin(session_t *s, const test_service_t *ts,
                          char **events, size_t n, bool compact) {
  session_config(s, events, n, compact);
  session_enable(s, ts);
}

static const Perfetto__Protos__FtraceStats *stats_of(
    const Perfetto__Protos__TracePacket *p) {
  return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS
             ? p->ftrace_stats
             : NULL;
}

static const Perfetto__Protos__FtraceEventBundle *bundle_of(
    const Perfetto__Protos__TracePacket *p) {
  return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS
             ? p->ftrace_events
             : NULL;
}

static const Perfetto__Protos__FtraceStats *find_stats(const packets_t *p,
                                                       int phase) {
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__FtraceStats *s = stats_of(p->pk[i]);
    if (s && (int)s->phase == phase) return s;
  }
  return NULL;
}

/* Reads until the session's start stats arrived: the instance records. */
static void wait_started(session_t *s) {
  uint64_t end = now_ms() + WAIT_MS;
  while (!find_stats(&s->got, 1) && now_ms() < end) {
    sleep_ms(20);
    read_more(&s->c, &s->got);
  }
  assert_non_null(find_stats(&s->got, 1));
}

/* A short-lived child that renames itself, writes a marker, sleeps a few
 * times (context switches and wake-ups) and exits. Returns its pid. */
/* A child that renames itself KID_COMM, writes a marker and exits; it is
 * switched in under that name from a running task, not from the idle task:
 * on the VMs this runs on, the kernel records no switch out of the idle
 * task, so a kid that only ever woke on an idle CPU left no switch into it
 * in the trace (the test failed about one run in eight on an idle
 * machine). Parent and kid share one CPU and hand over through pipes: the
 * parent, running, wakes the kid and blocks, and the switch from it to the
 * kid is recorded. */
static pid_t run_kid(void) {
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
    char path[TG_TRACEFS_PATH_MAX + 16], msg[64];
    snprintf(path, sizeof(path), "%s/trace_marker", tracefs_root);
    int n = snprintf(msg, sizeof(msg), "tg-marker-%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      if (write(fd, msg, (size_t)n) != n) _exit(3);
      close(fd);
    }
    for (int i = 0; i < 20; i++) sleep_ms(1);
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

static size_t unrecorded_switch_outs(const packets_t *p) {
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
  bool newtask, rename, exit, fork, marker, kid_switched_in;
} seen_t;

static void check_full(const packets_t *p, pid_t kid, uint64_t t0, uint64_t t1,
                       seen_t *seen) {
  static cpu_state_t cpus[MAX_CPUS];
  memset(cpus, 0, sizeof(cpus));
  memset(seen, 0, sizeof(*seen));
  unrecorded_switch_outs(p);
  char marker[64];
  snprintf(marker, sizeof(marker), "tg-marker-%d", (int)kid);
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__FtraceEventBundle *b = bundle_of(p->pk[i]);
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
            seen->marker = true;
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

static void check_compact(const packets_t *p, pid_t kid, uint64_t t0,
                          uint64_t t1, compact_seen_t *seen) {
  static uint64_t last_ts[MAX_CPUS];
  memset(last_ts, 0, sizeof(last_ts));
  memset(seen, 0, sizeof(*seen));
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__FtraceEventBundle *b = bundle_of(p->pk[i]);
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

static void check_stats(const packets_t *p) {
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (int phase = 1; phase <= 2; phase++) {
    const Perfetto__Protos__FtraceStats *s = find_stats(p, phase);
    assert_non_null(s);
    assert_int_equal(s->n_cpu_stats, (size_t)cpus);
    for (size_t i = 0; i < s->n_cpu_stats; i++) {
      assert_int_equal(s->cpu_stats[i]->cpu, i);
      assert_true(s->cpu_stats[i]->has_now_ts && s->cpu_stats[i]->now_ts > 0);
    }
  }
}

/* --- tests --------------------------------------------------------------- */

static void ftrace_sessions_record_consistent_sched_events(void **state) {
  require_ftrace();
  test_service_t *ts = *state;
  char err_path[160];
  pid_t probes = start_probes(ts, err_path, sizeof(err_path),
                              "probes.err", false);

  uint64_t t0 = boottime_ns();
  char *full_events[] = {"sched/sched_switch", "sched/sched_waking",
                         "sched/sched_process_fork", "sched/sched_process_exit",
                         "task/*", "ftrace/print", "timer/hrtimer_start",
                         "no_such_group/no_such_event"};
  char *compact_events[] = {"sched/sched_switch", "sched_waking"};
  session_t a, b;
  session_begin(&a, ts, full_events, 8, false);
  session_begin(&b, ts, compact_events, 2, true);
  wait_started(&a);
  wait_started(&b);
  /* Each session has an instance of its own. */
  assert_int_equal(instances_of(probes), 2);
  const Perfetto__Protos__FtraceStats *st = find_stats(&a.got, 1);
  assert_int_equal(st->n_unknown_ftrace_events, 1);
  assert_string_equal(st->unknown_ftrace_events[0], "no_such_group/no_such_event");

  pid_t kid = run_kid();
  flush(&a.c);
  flush(&b.c);
  assert_int_equal(raw_consumer_disable(&a.c, WAIT_MS), 0);
  assert_int_equal(raw_consumer_disable(&b.c, WAIT_MS), 0);
  read_more(&a.c, &a.got);
  read_more(&b.c, &b.got);
  uint64_t t1 = boottime_ns();

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
  const Perfetto__Protos__FtraceStats *st0 = find_stats(&a.got, 1),
                                      *st1 = find_stats(&a.got, 2);
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
  assert_true(s.marker);
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
  assert_true(wait_instances(probes, 0));
  packets_free(&a.got);
  packets_free(&b.got);
  raw_consumer_close(&a.c);
  raw_consumer_close(&b.c);
  stop_probes(probes, err_path);
}

static void ftrace_instance_of_killed_probes_is_removed_on_restart(void **state) {
  require_ftrace();
  test_service_t *ts = *state;
  char err_path[160];
  pid_t probes = start_probes(ts, err_path, sizeof(err_path),
                              "probes.err", false);
  char *events[] = {"sched/sched_switch"};
  session_t a;
  session_begin(&a, ts, events, 1, true);
  wait_started(&a);
  assert_int_equal(instances_of(probes), 1);

  /* A crash leaves the instance (and its ring buffers) behind... */
  kill(probes, SIGKILL);
  assert_int_equal(wait_exit(probes, WAIT_MS), SIGKILL);
  assert_int_equal(instances_of(probes), 1);
  /* ...and the next run removes it as it starts. */
  pid_t again = spawn_probes(ts, err_path, false);
  assert_true(again > 0);
  assert_true(wait_instances(probes, 0));
  assert_int_equal(raw_consumer_disable(&a.c, WAIT_MS), 0);
  packets_free(&a.got);
  raw_consumer_close(&a.c);
  stop_probes(again, err_path);
  assert_int_equal(instances_of(again), 0);
}

static void ftrace_without_root_reports_every_event_failed(void **state) {
  require_ftrace();
  test_service_t *ts = *state;
  /* nobody must reach the producer socket. */
  assert_int_equal(chmod(ts->dir, 0755), 0);
  char err_path[160];
  pid_t probes = start_probes(ts, err_path, sizeof(err_path),
                              "probes-nobody.err", true);
  char *events[] = {"sched/sched_switch", "sched/sched_waking"};
  session_t a;
  session_begin(&a, ts, events, 2, false);
  wait_started(&a);
  const Perfetto__Protos__FtraceStats *st = find_stats(&a.got, 1);
  assert_int_equal(st->n_failed_ftrace_events, 2);
  assert_string_equal(st->failed_ftrace_events[0], "sched/sched_switch");
  assert_int_equal(st->n_cpu_stats, 0);
  assert_int_equal(raw_consumer_disable(&a.c, WAIT_MS), 0);
  read_more(&a.c, &a.got);
  for (size_t i = 0; i < a.got.n; i++) assert_null(bundle_of(a.got.pk[i]));
  packets_free(&a.got);
  raw_consumer_close(&a.c);
  stop_probes(probes, err_path);
  char err[8192];
  read_text(err_path, err, sizeof(err));
  assert_non_null(strstr(err, "linux.ftrace: instance 0: cannot trace the kernel"));
  assert_non_null(strstr(err, "needs root"));
}

/* --- on-demand process dumps --------------------------------------------- */

#define OD_THREAD "tg-od-thread"

typedef struct od_kid {
  pid_t pid;
  int32_t tid;  /* its named thread */
  int quit_fd;  /* write a byte: the kid exits */
} od_kid_t;

static int g_od_tid_fd, g_od_quit_fd;

/* The kid's thread: named, reports its tid, then blocks and wakes every
 * millisecond (so it is switched in and out) until told to quit. */
static void *od_thread(void *arg) {
  (void)arg;
  prctl(PR_SET_NAME, OD_THREAD);
  int32_t tid = gettid();
  if (write(g_od_tid_fd, &tid, sizeof(tid)) != (ssize_t)sizeof(tid)) _exit(3);
  struct pollfd p = {.fd = g_od_quit_fd, .events = POLLIN};
  while (poll(&p, 1, 1) == 0) {
  }
  return NULL;
}

/* A child process, started while recording, with a named thread that runs
 * until od_kid_stop. */
static void od_kid_start(od_kid_t *k) {
  int tid_pipe[2], quit_pipe[2];
  assert_int_equal(pipe2(tid_pipe, O_CLOEXEC), 0);
  assert_int_equal(pipe2(quit_pipe, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    g_od_tid_fd = tid_pipe[1];
    g_od_quit_fd = quit_pipe[0];
    pthread_t t;
    if (pthread_create(&t, NULL, od_thread, NULL) != 0) _exit(2);
    pthread_join(t, NULL);
    _exit(0);
  }
  assert_true(pid > 0);
  close(tid_pipe[1]);
  close(quit_pipe[0]);
  k->pid = pid;
  assert_int_equal(read(tid_pipe[0], &k->tid, sizeof(k->tid)),
                   (ssize_t)sizeof(k->tid));
  close(tid_pipe[0]);
  k->quit_fd = quit_pipe[1];
}

static void od_kid_stop(od_kid_t *k) {
  assert_int_equal(write(k->quit_fd, "q", 1), 1);
  close(k->quit_fd);
  int status;
  assert_int_equal(waitpid(k->pid, &status, 0), k->pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

typedef struct od_found {
  bool thread, process;
  size_t thread_entries, process_entries;
  const char *thread_name;
} od_found_t;

static void od_find(const packets_t *p, const od_kid_t *k, od_found_t *f) {
  memset(f, 0, sizeof(*f));
  for (size_t i = 0; i < p->n; i++) {
    if (p->pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
      continue;
    const Perfetto__Protos__ProcessTree *t = p->pk[i]->process_tree;
    for (size_t j = 0; j < t->n_threads; j++) {
      if (t->threads[j]->tid != k->tid) continue;
      f->thread_entries++;
      f->thread = t->threads[j]->tgid == k->pid;
      f->thread_name = t->threads[j]->name;
    }
    for (size_t j = 0; j < t->n_processes; j++)
      if (t->processes[j]->pid == k->pid) {
        f->process_entries++;
        f->process = true;
      }
  }
}

/* linux.ftrace and linux.process_stats (no scan at start, no polling) in
 * one session: a process started while recording gets its ProcessTree
 * entries because its thread showed up in sched_switch. */
static void ftrace_pids_are_resolved_by_process_stats(void **state) {
  require_ftrace();
  test_service_t *ts = *state;
  char err_path[160];
  pid_t probes = start_probes(ts, err_path, sizeof(err_path),
                              "probes.err", false);

  char *events[] = {"sched/sched_switch"};
  session_t s;
  session_config(&s, events, 1, true);
  Perfetto__Protos__TraceConfig__DataSource ds2, *dsp[2];
  Perfetto__Protos__DataSourceConfig dsc2;
  Perfetto__Protos__ProcessStatsConfig psc;
  perfetto__protos__trace_config__data_source__init(&ds2);
  perfetto__protos__data_source_config__init(&dsc2);
  perfetto__protos__process_stats_config__init(&psc);
  psc.has_record_thread_names = true;
  psc.record_thread_names = true;
  dsc2.name = "linux.process_stats";
  dsc2.process_stats_config = &psc;
  ds2.config = &dsc2;
  dsp[0] = &s.sc.ds;
  dsp[1] = &ds2;
  s.sc.cfg.n_data_sources = 2;
  s.sc.cfg.data_sources = dsp;
  session_enable(&s, ts);
  wait_started(&s);

  od_kid_t k;
  od_kid_start(&k);
  /* The entries come once the ftrace pages naming the thread are read and
   * the pids resolved; the kid lives until then. */
  od_found_t f;
  uint64_t end = now_ms() + WAIT_MS;
  do {
    sleep_ms(20);
    read_more(&s.c, &s.got);
    od_find(&s.got, &k, &f);
  } while (!(f.thread && f.process) && now_ms() < end);
  od_kid_stop(&k);
  flush(&s.c);
  assert_int_equal(raw_consumer_disable(&s.c, WAIT_MS), 0);
  read_more(&s.c, &s.got);
  od_find(&s.got, &k, &f);
  assert_true(f.thread);
  assert_true(f.process);
  /* Seen in page after page, written once. */
  assert_int_equal(f.thread_entries, 1);
  assert_int_equal(f.process_entries, 1);
  assert_non_null(f.thread_name);
  assert_string_equal(f.thread_name, OD_THREAD);

  assert_true(wait_instances(probes, 0));
  packets_free(&s.got);
  raw_consumer_close(&s.c);
  stop_probes(probes, err_path);
}


/* --- kernel addresses ---------------------------------------------------- */

/* Every varint and fixed64 in |p|, and in whatever of its length-delimited
 * fields parses as a message, checked against the kernel's function
 * addresses. Returns false where |p| is not a message. */
static bool no_kernel_address(const uint8_t *p, size_t n, const tg_ksyms_t *ks,
                              unsigned depth, size_t *values) {
  size_t i = 0;
  while (i < n) {
    uint64_t key = 0;
    unsigned shift = 0;
    do {
      if (i == n || shift > 63) return false;
      key |= (uint64_t)(p[i] & 0x7f) << shift;
      shift += 7;
    } while (p[i++] & 0x80);
    uint64_t v = 0;
    switch (key & 7) {
      case 0:
        shift = 0;
        do {
          if (i == n || shift > 63) return false;
          v |= (uint64_t)(p[i] & 0x7f) << shift;
          shift += 7;
        } while (p[i++] & 0x80);
        break;
      case 1:
        if (n - i < 8) return false;
        memcpy(&v, p + i, 8);
        i += 8;
        break;
      case 5:
        if (n - i < 4) return false;
        i += 4;
        continue;
      case 2: {
        uint64_t len = 0;
        shift = 0;
        do {
          if (i == n || shift > 63) return false;
          len |= (uint64_t)(p[i] & 0x7f) << shift;
          shift += 7;
        } while (p[i++] & 0x80);
        if (len > n - i) return false;
        if (depth < 8) no_kernel_address(p + i, (size_t)len, ks, depth + 1, values);
        i += (size_t)len;
        continue;
      }
      default:
        return false;
    }
    (*values)++;
    size_t l;
    const char *name = tg_ksyms_lookup(ks, v, &l);
    /* A value equal to a function's own address would be the address. */
    if (name) {
      size_t lo = 0, hi = ks->n;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ks->syms[mid].addr < v) lo = mid + 1;
        else hi = mid;
      }
      if (lo < ks->n && ks->syms[lo].addr == v)
        fail_msg("field %llu carries %#llx, the address of %.*s",
                 (unsigned long long)(key >> 3), (unsigned long long)v, (int)l,
                 name);
    }
  }
  return true;
}

typedef struct wq_seen {
  size_t starts, named, unnamed, symbols, cleared, generic;
} wq_seen_t;

/* Follows the packets as trace_processor does: kernel_symbols accumulate
 * along the sequence and SEQ_INCREMENTAL_STATE_CLEARED drops them; each
 * workqueue_execute_start's function is looked up in what its packet (or an
 * earlier one) interned. */
static void check_workqueue(const packets_t *p, wq_seen_t *seen) {
  memset(seen, 0, sizeof(*seen));
  static char *names[TG_FTRACE_KADDRS_CAP + 1];
  memset(names, 0, sizeof(names));
  bool first_interned = true;
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__TracePacket *pk = p->pk[i];
    bool cleared =
        pk->has_sequence_flags &&
        (pk->sequence_flags &
         PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED);
    if (cleared) {
      seen->cleared++;
      for (size_t k = 0; k <= TG_FTRACE_KADDRS_CAP; k++) {
        free(names[k]);
        names[k] = NULL;
      }
    }
    if (pk->interned_data && pk->interned_data->n_kernel_symbols) {
      /* The first names of the sequence clear the state first. */
      if (first_interned) assert_true(cleared);
      first_interned = false;
      for (size_t k = 0; k < pk->interned_data->n_kernel_symbols; k++) {
        const Perfetto__Protos__InternedString *s =
            pk->interned_data->kernel_symbols[k];
        assert_true(s->iid > 0 && s->iid <= TG_FTRACE_KADDRS_CAP);
        assert_true(s->str.len > 0);
        assert_null(names[s->iid]); /* an index is named once per state */
        names[s->iid] = strndup((const char *)s->str.data, s->str.len);
        seen->symbols++;
      }
    }
    const Perfetto__Protos__FtraceEventBundle *b = bundle_of(pk);
    for (size_t k = 0; b && k < b->n_event; k++) {
      const Perfetto__Protos__FtraceEvent *e = b->event[k];
      if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC) {
        seen->generic++;
        continue;
      }
      if (e->event_case !=
          PERFETTO__PROTOS__FTRACE_EVENT__EVENT_WORKQUEUE_EXECUTE_START)
        continue;
      const Perfetto__Protos__WorkqueueExecuteStartFtraceEvent *w =
          e->workqueue_execute_start;
      assert_true(w->has_function && w->has_work);
      /* Indices, never addresses. */
      assert_true(w->function <= TG_FTRACE_KADDRS_CAP);
      assert_true(w->work <= TG_FTRACE_KADDRS_CAP);
      seen->starts++;
      if (w->function && names[w->function] && names[w->function][0])
        seen->named++;
      else
        seen->unnamed++;
    }
  }
  for (size_t k = 0; k <= TG_FTRACE_KADDRS_CAP; k++) free(names[k]);
}

static void ftrace_kernel_addresses_are_indices_named_by_kallsyms(void **state) {
  require_ftrace();
  test_service_t *ts = *state;
  char path[TG_TRACEFS_PATH_MAX + 64];
  snprintf(path, sizeof(path),
           "%s/events/workqueue/workqueue_execute_start/format", tracefs_root);
  if (access(path, R_OK) != 0) {
    print_message("skipped: this kernel has no workqueue events (%s)\n", path);
    skip();
  }
  tg_ksyms_t ks;
  int nsyms = tg_ksyms_load(&ks, "/proc/kallsyms");
  if (nsyms <= 0) {
    print_message("skipped: /proc/kallsyms gives no function addresses (%s)\n",
                  nsyms < 0 ? strerror(-nsyms) : "all read as 0: kptr_restrict");
    tg_ksyms_free(&ks);
    skip();
  }
  char err_path[160];
  pid_t probes = start_probes(ts, err_path, sizeof(err_path),
                              "probes.err", false);

  char *events[] = {"workqueue/*", "timer/hrtimer_start", "sched/sched_switch"};
  session_t a;
  session_config(&a, events, 3, true);
  a.fc.has_symbolize_ksyms = true;
  a.fc.symbolize_ksyms = true;
  session_enable(&a, ts);
  wait_started(&a);

  /* Work items run on their own; writeback on sync() adds some. Wait for
   * named ones, across several drains (each starts the indices again). */
  wq_seen_t s;
  memset(&s, 0, sizeof(s));
  uint64_t end = now_ms() + WAIT_MS;
  while (now_ms() < end && (s.named < 5 || s.cleared < 2)) {
    sync();
    sleep_ms(100);
    flush(&a.c);
    read_more(&a.c, &a.got);
    check_workqueue(&a.got, &s);
  }
  assert_int_equal(raw_consumer_disable(&a.c, WAIT_MS), 0);
  read_more(&a.c, &a.got);
  check_workqueue(&a.got, &s);
  print_message("%zu workqueue_execute_start, %zu named, %zu not; %zu symbols "
                "interned, %zu state clears, %zu generic\n",
                s.starts, s.named, s.unnamed, s.symbols, s.cleared, s.generic);
  if (s.starts == 0) {
    print_message("skipped: no work item ran in %d ms\n", WAIT_MS);
  } else {
    assert_true(s.named > 0);
    assert_true(s.cleared > 0);
  }
  size_t values = 0;
  for (size_t i = 0; i < a.got.n; i++) {
    size_t len = perfetto__protos__trace_packet__get_packed_size(a.got.pk[i]);
    uint8_t *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    perfetto__protos__trace_packet__pack(a.got.pk[i], buf);
    assert_true(no_kernel_address(buf, len, &ks, 0, &values));
    free(buf);
  }
  assert_true(values > 0);
  packets_free(&a.got);
  raw_consumer_close(&a.c);
  stop_probes(probes, err_path);
  tg_ksyms_free(&ks);
  if (s.starts == 0) skip();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          ftrace_sessions_record_consistent_sched_events, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(
          ftrace_instance_of_killed_probes_is_removed_on_restart,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          ftrace_without_root_reports_every_event_failed, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(
          ftrace_pids_are_resolved_by_process_stats, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(
          ftrace_kernel_addresses_are_indices_named_by_kallsyms,
          test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
