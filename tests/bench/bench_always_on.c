/* What always-on kernel tracing costs a host: the same workload with no
 * tracing, under Perfetto's traced + traced_probes, and under tracegated +
 * tracegate-probes, interleaved over several rounds (the order rotates
 * each round, so that drift in the machine's load spreads over all
 * three).
 *
 * Each traced setup records the issue-62 config: a 64 MiB RING_BUFFER
 * nobody reads until the end; linux.ftrace with sched_switch,
 * sched_waking, task_newtask and sched_process_exit (compact_sched);
 * linux.process_stats scanning all processes at start. Perfetto's CLI
 * records from traced, `tracegate record` from tracegated; both stay idle
 * while the ring fills. After a warm-up (the start scan is not counted),
 * each round measures:
 * - idle: IDLE_S seconds of nothing: the tracing CPU (service + probes,
 *   every thread's run time from /proc/PID/task/TID/schedstat: utime and
 *   stime count 10 ms ticks, too coarse for tens of milliseconds) and the
 *   probes' wake-ups (voluntary context switches of all its threads);
 * - storm: the workload, a context-switch storm (`perf bench sched
 *   messaging -g 10 -l 1500` when perf is on PATH, else pairs of
 *   processes ping-ponging a byte over pipes): its wall time, its context
 *   switches (its processes', from getrusage of the reaped children), and
 *   the tracing CPU and probes' wake-ups over it and the TAIL_S seconds
 *   after it (the probes drain what the storm left in the kernel's
 *   buffers on their own schedule); that CPU per thousand of the
 *   workload's context switches (us/kcs) compares runs whose storms
 *   differ.
 * The report gives each setup's median and spread (min-max), the
 * workload's slowdown against no tracing, and the goals of issue 62:
 * tracegate-probes' CPU at most traced_probes' idle and under the storm,
 * and its idle wake-ups at most traced_probes'.
 *
 * Perfetto's side needs PERFETTO_BIN (the directory of traced,
 * traced_probes and perfetto); without it that side is skipped, and the
 * report says so. Both probes need root (tracefs).
 *
 * usage: bench_always_on [ROUNDS [IDLE_S]]
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "bench_children.h"
#include "test_service.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#ifndef TRACEGATE_PROBES_PATH
#error "TRACEGATE_PROBES_PATH must name the tracegate-probes binary"
#endif

#define PROG "bench_always_on"
#define MAX_ROUNDS 20
/* After the session starts: data sources set up, the start scan done. */
#define WARMUP_S 3.0
#define STOP_MS 10000
/* Counted with the storm: what its records cost once it is over. */
#define TAIL_S 2.0
/* Our own storm when perf is missing: pairs x round trips. */
#define PING_PAIRS 20
#define PING_TRIPS 20000

static const char config_text[] =
    "buffers { size_kb: 65536 fill_policy: RING_BUFFER }\n"
    "data_sources { config { name: \"linux.ftrace\" ftrace_config {\n"
    "  ftrace_events: \"sched/sched_switch\"\n"
    "  ftrace_events: \"sched/sched_waking\"\n"
    "  ftrace_events: \"task/task_newtask\"\n"
    "  ftrace_events: \"sched/sched_process_exit\"\n"
    "  compact_sched { enabled: true } } } }\n"
    "data_sources { config { name: \"linux.process_stats\"\n"
    "  process_stats_config { scan_all_processes_on_start: true } } }\n"
    "duration_ms: 3600000\n";

enum { SETUP_NONE, SETUP_PERFETTO, SETUP_OURS, N_SETUPS };
static const char *const setup_names[N_SETUPS] = {"no tracing", "perfetto",
                                                  "tracegate"};

/* One round's figures of one setup. */
typedef struct sample {
  double work_s, work_kcs; /* the workload's context switches / 1000 */
  double idle_cpu_ms, idle_probes_ms, idle_wakeups_s;
  /* Over the storm and the TAIL_S after it; tail_cpu_ms is that tail's. */
  double storm_cpu_ms, storm_probes_ms, storm_wakeups_s, tail_cpu_ms;
  double storm_us_kcs, storm_probes_us_kcs;
} sample_t;

typedef struct side_stack {
  char dir[160];
  pid_t service, probes, session;
  test_service_t ts;
} side_stack_t;

static char perf_path[256];
static unsigned g_idle_s = 10;

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* --- per-process figures from /proc ---------------------------------------- */

/* schedstat's first field: run time in ns. */
static double read_run_ns(FILE *f) {
  unsigned long long ns = 0;
  return fscanf(f, "%llu", &ns) == 1 ? (double)ns : 0;
}

/* status's voluntary context switches: the thread's wake-ups. */
static double read_wakeups(FILE *f) {
  char line[128];
  unsigned long long v;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1) return (double)v;
  return 0;
}

/* |read| of /proc/PID/task/TID/|file|, summed over the threads of |pid|;
 * -1 when no thread of |pid| could be read (it is gone): a reading of 0
 * would pass for a process that cost nothing. */
static double sum_tasks(pid_t pid, const char *file, double (*read)(FILE *)) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  double sum = 0;
  bool any = false;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[sizeof(path) + sizeof(e->d_name) + 16];
    snprintf(p, sizeof(p), "%s/%s/%s", path, e->d_name, file);
    FILE *f = fopen(p, "re");
    if (!f) continue;
    sum += read(f);
    any = true;
    fclose(f);
  }
  closedir(d);
  return any ? sum : -1;
}

typedef struct reading {
  double service_ns, probes_ns, probes_wakeups, t_ms;
  bool gone; /* the service or the probes could not be read */
} reading_t;

static reading_t read_stack(const side_stack_t *s) {
  reading_t r = {0, 0, 0, bench_now_ms(), false};
  if (s->service > 0) r.service_ns = sum_tasks(s->service, "schedstat", read_run_ns);
  if (s->probes > 0) {
    r.probes_ns = sum_tasks(s->probes, "schedstat", read_run_ns);
    r.probes_wakeups = sum_tasks(s->probes, "status", read_wakeups);
  }
  r.gone = r.service_ns < 0 || r.probes_ns < 0 || r.probes_wakeups < 0;
  return r;
}

/* --- the workload -------------------------------------------------------- */

static int wait_status(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return st;
}

/* One pair: a byte there and back |trips| times. */
static void ping_pair(unsigned trips) {
  int a[2], b[2];
  if (pipe(a) < 0 || pipe(b) < 0) _exit(1);
  pid_t child = fork();
  if (child < 0) _exit(1);
  char c = 0;
  for (unsigned i = 0; i < trips; i++) {
    if (child == 0) {
      if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1) _exit(1);
    } else {
      if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) _exit(1);
    }
  }
  if (child == 0) _exit(0);
  _exit(wait_status(child) == 0 ? 0 : 1);
}

/* Context switches of the children reaped so far (and of theirs). */
static double children_csw(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_CHILDREN, &ru) != 0) return 0;
  return (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
}

/* Runs the storm once; its wall time in seconds, or -1. */
static double run_workload(void) {
  double t0 = bench_now_ms();
  if (perf_path[0]) {
    const char *argv[] = {perf_path, "bench", "sched", "messaging", "-g",
                          "10", "-l", "1500", NULL};
    pid_t p = bench_spawn(argv, -1, NULL);
    double cpu;
    if (p < 0 || bench_wait_cpu(p, 600000, &cpu) != 0) return -1;
    return (bench_now_ms() - t0) / 1000.0;
  }
  pid_t kids[PING_PAIRS];
  for (unsigned i = 0; i < PING_PAIRS; i++) {
    kids[i] = fork();
    if (kids[i] < 0) return -1;
    if (kids[i] == 0) ping_pair(PING_TRIPS);
  }
  bool ok = true;
  for (unsigned i = 0; i < PING_PAIRS; i++) ok &= wait_status(kids[i]) == 0;
  return ok ? (bench_now_ms() - t0) / 1000.0 : -1;
}

/* --- the stacks ------------------------------------------------------------ */

static int write_config(const char *dir, char *path, size_t len) {
  snprintf(path, len, "%s/always_on.pbtxt", dir);
  FILE *f = fopen(path, "we");
  if (!f) return -1;
  fputs(config_text, f);
  return fclose(f) == 0 ? 0 : -1;
}

static int ours_start(side_stack_t *s) {
  if (test_service_start(&s->ts) < 0) return -1;
  bench_adopt(s->ts.pid);
  bench_remove_at_exit(s->ts.dir);
  s->service = s->ts.pid;
  snprintf(s->dir, sizeof(s->dir), "%s", s->ts.dir);
  char log[200], cfg[200], out[200];
  snprintf(log, sizeof(log), "%s/probes.log", s->dir);
  const char *probes[] = {TRACEGATE_PROBES_PATH, "--socket",
                          s->ts.producer_sock, "--log-level", "warn", NULL};
  if ((s->probes = bench_spawn(probes, -1, log)) < 0) return -1;
  if (write_config(s->dir, cfg, sizeof(cfg)) < 0) return -1;
  snprintf(out, sizeof(out), "%s/trace.pftrace", s->dir);
  snprintf(log, sizeof(log), "%s/record.log", s->dir);
  const char *rec[] = {TRACEGATE_CLI_PATH, "record", "--socket",
                       s->ts.consumer_sock, "--txt", "-c", cfg, "-o", out, NULL};
  return (s->session = bench_spawn(rec, -1, log)) > 0 ? 0 : -1;
}

static int theirs_start(side_stack_t *s, const char *bin) {
  if (bench_tempdir(s->dir, sizeof(s->dir), "always-on") < 0) return -1;
  char psock[200], csock[200], path[400], log[200], cfg[200], out[200];
  snprintf(psock, sizeof(psock), "%s/p.sock", s->dir);
  snprintf(csock, sizeof(csock), "%s/c.sock", s->dir);
  /* Perfetto's binaries find their sockets in the environment only. */
  setenv("PERFETTO_PRODUCER_SOCK_NAME", psock, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", csock, 1);
  snprintf(path, sizeof(path), "%s/traced", bin);
  snprintf(log, sizeof(log), "%s/traced.log", s->dir);
  const char *svc[] = {path, NULL};
  if ((s->service = bench_spawn(svc, -1, log)) < 0) return -1;
  for (int i = 0; i < 200 && (access(csock, F_OK) || access(psock, F_OK)); i++)
    sleep_s(0.05);
  if (access(csock, F_OK) != 0 || access(psock, F_OK) != 0) return -1;
  snprintf(path, sizeof(path), "%s/traced_probes", bin);
  snprintf(log, sizeof(log), "%s/traced_probes.log", s->dir);
  const char *probes[] = {path, NULL};
  if ((s->probes = bench_spawn(probes, -1, log)) < 0) return -1;
  if (write_config(s->dir, cfg, sizeof(cfg)) < 0) return -1;
  snprintf(path, sizeof(path), "%s/perfetto", bin);
  snprintf(out, sizeof(out), "%s/trace.pftrace", s->dir);
  snprintf(log, sizeof(log), "%s/perfetto.log", s->dir);
  const char *rec[] = {path, "--txt", "-c", cfg, "-o", out, NULL};
  return (s->session = bench_spawn(rec, -1, log)) > 0 ? 0 : -1;
}

/* The session ends first (its CLI writes the ring out), then the probes,
 * then the service. */
static void stack_stop(side_stack_t *s) {
  if (s->session > 0) bench_stop(s->session, STOP_MS);
  if (s->probes > 0) bench_stop(s->probes, STOP_MS);
  if (s->service > 0) bench_stop(s->service, STOP_MS);
  s->session = s->probes = s->service = 0;
}

/* One round of |setup|: start, warm up, idle, storm, stop. */
static int run_setup(int setup, const char *bin, sample_t *out) {
  side_stack_t s;
  memset(&s, 0, sizeof(s));
  int rv = 0;
  if (setup == SETUP_OURS) rv = ours_start(&s);
  else if (setup == SETUP_PERFETTO) rv = theirs_start(&s, bin);
  if (rv < 0) {
    fprintf(stderr, PROG ": cannot start the %s setup (logs in %s)\n",
            setup_names[setup], s.dir[0] ? s.dir : "-");
    stack_stop(&s);
    return -1;
  }
  if (setup != SETUP_NONE) {
    sleep_s(WARMUP_S);
    /* The recording CLI must still run: its session is what costs. */
    if (waitpid(s.session, NULL, WNOHANG) != 0) {
      fprintf(stderr, PROG ": the %s session ended early (logs in %s)\n",
              setup_names[setup], s.dir);
      s.session = 0;
      stack_stop(&s);
      return -1;
    }
  }
  reading_t a = read_stack(&s);
  if (setup != SETUP_NONE) sleep_s(g_idle_s);
  reading_t b = read_stack(&s);
  double csw0 = children_csw();
  out->work_s = run_workload();
  out->work_kcs = (children_csw() - csw0) / 1000.0;
  reading_t c = read_stack(&s);
  if (setup != SETUP_NONE) sleep_s(TAIL_S);
  reading_t d = read_stack(&s);
  if (a.gone || b.gone || c.gone || d.gone) {
    /* A service or probes that exited mid-round (see its log) would read
     * as costing nothing: the round is not counted. */
    fprintf(stderr, PROG ": the %s setup's service or probes exited during "
            "the round (logs in %s)\n", setup_names[setup], s.dir);
    stack_stop(&s);
    return -1;
  }
  stack_stop(&s);
  double idle_s = (b.t_ms - a.t_ms) / 1000.0, storm_s = (d.t_ms - b.t_ms) / 1000.0;
  out->idle_probes_ms = (b.probes_ns - a.probes_ns) / 1e6;
  out->idle_cpu_ms = out->idle_probes_ms + (b.service_ns - a.service_ns) / 1e6;
  out->idle_wakeups_s =
      idle_s > 0 ? (b.probes_wakeups - a.probes_wakeups) / idle_s : 0;
  out->storm_probes_ms = (d.probes_ns - b.probes_ns) / 1e6;
  out->storm_cpu_ms = out->storm_probes_ms + (d.service_ns - b.service_ns) / 1e6;
  out->tail_cpu_ms = (d.probes_ns - c.probes_ns + d.service_ns - c.service_ns) / 1e6;
  out->storm_wakeups_s =
      storm_s > 0 ? (d.probes_wakeups - b.probes_wakeups) / storm_s : 0;
  if (out->work_kcs > 0) {
    out->storm_us_kcs = out->storm_cpu_ms * 1000.0 / out->work_kcs;
    out->storm_probes_us_kcs = out->storm_probes_ms * 1000.0 / out->work_kcs;
  }
  return out->work_s > 0 ? 0 : -1;
}

/* --- report ----------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct spread {
  double med, lo, hi;
} spread_t;

/* Median and range of field |off| (a double of sample_t) over |n|. */
static spread_t spread_of(const sample_t *v, size_t n, size_t off) {
  double x[MAX_ROUNDS];
  for (size_t i = 0; i < n; i++)
    memcpy(&x[i], (const char *)&v[i] + off, sizeof(double));
  qsort(x, n, sizeof(double), cmp_double);
  spread_t s = {n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2, x[0],
                x[n - 1]};
  return s;
}

#define SPREAD(v, n, field) spread_of((v), (n), offsetof(sample_t, field))

static void print_spread(const char *fmt, spread_t s) {
  char b[64];
  snprintf(b, sizeof(b), fmt, s.med);
  printf(" %8s (", b);
  printf(fmt, s.lo);
  printf("-");
  printf(fmt, s.hi);
  printf(")");
}

static void goal(const char *what, double ours, double theirs, const char *unit) {
  printf("  goal %-44s: tracegate %8.1f %s, perfetto %8.1f %s: %s\n", what,
         ours, unit, theirs, unit, ours <= theirs ? "met" : "NOT met");
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROG " [ROUNDS [IDLE_S]]\n"
          "  ROUNDS (1-%d, default 3) rounds of three setups in rotating order:\n"
          "  no tracing, Perfetto's traced + traced_probes (PERFETTO_BIN; skipped\n"
          "  without it), tracegated + tracegate-probes; each records the issue-62\n"
          "  config, idles IDLE_S seconds (1-120, default 10), then runs a\n"
          "  context-switch storm. Prints the storm's slowdown and each side's\n"
          "  tracing CPU and probes' wake-ups, idle and under the storm (and\n"
          "  2 s after it), and the storm's CPU per 1000 of the workload's\n"
          "  context switches. Root.\n",
          MAX_ROUNDS);
}

int main(int argc, char **argv) {
  uint64_t rounds = 3, idle = 10;
  const bench_arg_t args[] = {
      {"ROUNDS", 1, MAX_ROUNDS, &rounds},
      {"IDLE_S", 1, 120, &idle},
  };
  int rv = bench_args_parse(PROG, argc, argv, args, 2, usage, NULL);
  if (rv != 0) return rv > 0 ? 0 : 2;
  g_idle_s = (unsigned)idle;
  if (geteuid() != 0) {
    printf(PROG ": skipped: both probes need root (tracefs)\n");
    return 0;
  }
  bench_children_init();
  bench_deadline((unsigned)(rounds * 3 * (idle + 120)));
  const char *bin = getenv("PERFETTO_BIN");
  bool with_perfetto = bin && *bin;
  if (access("/usr/bin/perf", X_OK) == 0)
    snprintf(perf_path, sizeof(perf_path), "/usr/bin/perf");
  /* perf's wrapper exits non-zero when no perf matches the kernel. */
  if (perf_path[0]) {
    const char *probe[] = {perf_path, "bench", "sched", "messaging", "-g", "1",
                           "-l", "1", NULL};
    pid_t p = bench_spawn(probe, -1, NULL);
    double cpu;
    if (p < 0 || bench_wait_cpu(p, 30000, &cpu) != 0) perf_path[0] = 0;
  }
  printf(PROG ": %" PRIu64 " rounds; idle %" PRIu64 " s, then the storm: %s\n",
         rounds, idle,
         perf_path[0] ? "perf bench sched messaging -g 10 -l 1500"
                      : "20 process pairs x 20000 pipe round trips (no perf)");
  if (!with_perfetto)
    printf(PROG ": PERFETTO_BIN not set: Perfetto's traced and traced_probes "
           "are not measured\n");
  fflush(stdout);

  static sample_t v[N_SETUPS][MAX_ROUNDS];
  size_t n[N_SETUPS] = {0};
  for (uint64_t r = 0; r < rounds; r++) {
    for (int k = 0; k < N_SETUPS; k++) {
      int setup = (int)((k + r) % N_SETUPS);
      if (setup == SETUP_PERFETTO && !with_perfetto) continue;
      sample_t s;
      if (run_setup(setup, bin, &s) < 0) return 1;
      v[setup][n[setup]++] = s;
      printf("  round %" PRIu64 " %-10s: storm %.2f s, %.0f kcs; tracing CPU "
             "idle %.1f ms, storm %.1f ms (%.1f of it after), %.1f us/kcs; "
             "probes' wake-ups idle %.1f/s\n",
             r + 1, setup_names[setup], s.work_s, s.work_kcs, s.idle_cpu_ms,
             s.storm_cpu_ms, s.tail_cpu_ms, s.storm_us_kcs, s.idle_wakeups_s);
      fflush(stdout);
    }
  }

  printf("\nmedian (min-max) over %" PRIu64 " rounds; tracing CPU = service + "
         "probes, all threads' run time; storm = the workload and %.0f s "
         "after it; us/kcs = storm CPU per 1000 of the workload's context "
         "switches\n", rounds, TAIL_S);
  printf("%-11s %-23s %-9s %-23s %-23s %-23s %-23s %-23s %-23s\n", "setup",
         "storm s", "slowdown", "idle CPU ms", "idle probes wakeups/s",
         "storm CPU ms", "storm probes ms", "storm us/kcs",
         "storm probes us/kcs");
  spread_t base = SPREAD(v[SETUP_NONE], n[SETUP_NONE], work_s);
  for (int k = 0; k < N_SETUPS; k++) {
    if (!n[k]) {
      printf("%-11s not measured (PERFETTO_BIN not set)\n", setup_names[k]);
      continue;
    }
    spread_t w = SPREAD(v[k], n[k], work_s);
    printf("%-11s", setup_names[k]);
    print_spread("%.2f", w);
    printf(" %+6.1f%%", 100.0 * (w.med / base.med - 1.0));
    if (k == SETUP_NONE) {
      printf("\n");
      continue;
    }
    print_spread("%.1f", SPREAD(v[k], n[k], idle_cpu_ms));
    print_spread("%.1f", SPREAD(v[k], n[k], idle_wakeups_s));
    print_spread("%.1f", SPREAD(v[k], n[k], storm_cpu_ms));
    print_spread("%.1f", SPREAD(v[k], n[k], storm_probes_ms));
    print_spread("%.1f", SPREAD(v[k], n[k], storm_us_kcs));
    print_spread("%.1f", SPREAD(v[k], n[k], storm_probes_us_kcs));
    printf("\n");
  }
  if (n[SETUP_PERFETTO] && n[SETUP_OURS]) {
    const sample_t *o = v[SETUP_OURS], *p = v[SETUP_PERFETTO];
    size_t no = n[SETUP_OURS], np = n[SETUP_PERFETTO];
    goal("probes' CPU idle <= traced_probes'",
         SPREAD(o, no, idle_probes_ms).med, SPREAD(p, np, idle_probes_ms).med,
         "ms");
    goal("probes' CPU under the storm <= traced_probes'",
         SPREAD(o, no, storm_probes_ms).med, SPREAD(p, np, storm_probes_ms).med,
         "ms");
    goal("probes' CPU per 1000 storm csw <= traced_probes'",
         SPREAD(o, no, storm_probes_us_kcs).med,
         SPREAD(p, np, storm_probes_us_kcs).med, "us");
    goal("probes' wake-ups idle <= traced_probes'",
         SPREAD(o, no, idle_wakeups_s).med, SPREAD(p, np, idle_wakeups_s).med,
         "/s");
  } else {
    printf("  goals: not compared (Perfetto's side not measured)\n");
  }
  return 0;
}
