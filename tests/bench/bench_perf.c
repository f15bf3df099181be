/* What CPU profiling costs: tracegate-perf (linux.perf through tracegated
 * and `tracegate record`) against Linux's own `perf record`, in one run.
 *
 * 1. Slowdown at 100 Hz with DWARF unwinding. A fixed amount of CPU work
 *    (perf_workload: two threads, each spinning a small call tree) is
 *    run (a) alone, (b) while tracegate-perf samples every CPU at 100 Hz
 *    with UNWIND_DWARF, scoped to the workload's cmdline, and (c) under
 *    `perf record --call-graph dwarf -F 100` (which samples the workload's
 *    threads and copies their stacks, unwinding nothing until `perf
 *    report`). The three alternate over ROUNDS rounds (the order rotates
 *    each round, so that drift in the machine's load spreads over all);
 *    each round gives the work's wall time, and the profiler's CPU over it
 *    (tracegate-perf's threads' run time from /proc/PID/task/TID/schedstat;
 *    perf's CPU less the workload's). Goal: tracegate-perf's slowdown at
 *    most perf's.
 * 2. Always-on cost at 19 Hz. tracegate-perf samples every CPU at 19 Hz
 *    with UNWIND_DWARF and no scope for WALL_S seconds while the workload
 *    keeps both threads busy (whatever else the machine runs is sampled
 *    and unwound too): its CPU in percent of one core per sampled CPU, and
 *    its peak resident memory (VmHWM). Goals: at most 0.5% per CPU and
 *    64 MiB. Peer: `perf record -a -F 19 --call-graph dwarf` for the same
 *    time (it writes the stacks to its file without unwinding them).
 *    Anchor: the OpenTelemetry eBPF profiler promises at most 1% CPU and
 *    250 MB.
 *
 * perf's side needs Debian's linux-perf (/usr/bin/perf); without it that
 * side is skipped and the report says so. Both need root (or CAP_PERFMON).
 *
 * usage: bench_perf [ROUNDS [WALL_S [UNITS]]]
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "bench_children.h"
#include "test_service.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#ifndef TRACEGATE_PERF_PATH
#error "TRACEGATE_PERF_PATH must name the tracegate-perf binary"
#endif
#ifndef PERF_WORKLOAD_PATH
#error "PERF_WORKLOAD_PATH must name the perf_workload binary"
#endif

#define PROG "bench_perf"
#define MAX_ROUNDS 20
/* After the session starts: the producer has opened its events. */
#define WARMUP_S 2.0
#define STOP_MS 10000
#define GOAL_CPU_PCT 0.5
#define GOAL_MEM_MIB 64.0

enum { SETUP_ALONE, SETUP_OURS, SETUP_PERF, N_SETUPS };
static const char *const setup_names[N_SETUPS] = {"alone", "tracegate-perf",
                                                  "perf record"};

static char perf_path[64];

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* Run time of every thread of |pid| in seconds (schedstat's first field);
 * -1 when it is gone. */
static double run_s(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  double sum = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[sizeof(path) + sizeof(e->d_name) + 16];
    snprintf(p, sizeof(p), "%s/%s/schedstat", path, e->d_name);
    FILE *f = fopen(p, "re");
    if (!f) continue;
    unsigned long long ns = 0;
    if (fscanf(f, "%llu", &ns) == 1) sum += (double)ns / 1e9;
    fclose(f);
  }
  closedir(d);
  return sum;
}

/* The workload's "work_s W cpu_s C" line from |log|. */
static int read_work(const char *log, double *work_s, double *cpu_s) {
  FILE *f = fopen(log, "re");
  if (!f) return -1;
  char line[256];
  int rv = -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "work_s %lf cpu_s %lf", work_s, cpu_s) == 2) rv = 0;
  fclose(f);
  return rv;
}

/* --- tracegated + tracegate-perf ----------------------------------------- */

typedef struct stack {
  test_service_t ts;
  pid_t perf, session;
} stack_t_;

static int stack_start(stack_t_ *s) {
  memset(s, 0, sizeof(*s));
  if (test_service_start(&s->ts) < 0) return -1;
  bench_adopt(s->ts.pid);
  bench_remove_at_exit(s->ts.dir);
  char log[200], out[200];
  snprintf(log, sizeof(log), "%s/perf.log", s->ts.dir);
  const char *perf[] = {TRACEGATE_PERF_PATH, "--socket", s->ts.producer_sock,
                        "--log-level", "warn", NULL};
  if ((s->perf = bench_spawn(perf, -1, log)) < 0) return -1;
  /* Registered once `tracegate query` lists linux.perf. */
  snprintf(out, sizeof(out), "%s/query.json", s->ts.dir);
  const char *query[] = {TRACEGATE_CLI_PATH, "query", "--json", "--socket",
                         s->ts.consumer_sock, NULL};
  for (int i = 0; i < 200; i++) {
    unlink(out);
    pid_t q = bench_spawn(query, -1, out);
    double cpu;
    if (q < 0 || bench_wait_cpu(q, 10000, &cpu) != 0) return -1;
    FILE *f = fopen(out, "re");
    char buf[8192];
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    if (strstr(buf, "\"linux.perf\"")) return 0;
    sleep_s(0.05);
  }
  fprintf(stderr, PROG ": linux.perf was not registered (logs in %s)\n",
          s->ts.dir);
  return -1;
}

/* A session of linux.perf at |hz| per CPU, DWARF unwinding, scoped to the
 * workload's cmdline when |scoped|. */
static int session_start(stack_t_ *s, unsigned hz, bool scoped) {
  char cfg[200], out[200], log[200];
  snprintf(cfg, sizeof(cfg), "%s/perf.pbtxt", s->ts.dir);
  FILE *f = fopen(cfg, "we");
  if (!f) return -1;
  fprintf(f,
          "buffers { size_kb: 65536 fill_policy: RING_BUFFER }\n"
          "duration_ms: 3600000\n"
          "data_sources { config { name: \"linux.perf\" perf_event_config {\n"
          "  timebase { frequency: %u counter: SW_CPU_CLOCK }\n"
          "  callstack_sampling {\n"
          "    %s\n"
          "    user_frames: UNWIND_DWARF\n"
          "  }\n"
          "} } }\n",
          hz, scoped ? "scope { target_cmdline: \"perf_workload\" }" : "");
  if (fclose(f) != 0) return -1;
  snprintf(out, sizeof(out), "%s/trace.pftrace", s->ts.dir);
  snprintf(log, sizeof(log), "%s/record.log", s->ts.dir);
  const char *rec[] = {TRACEGATE_CLI_PATH, "record", "--socket",
                       s->ts.consumer_sock, "--txt", "-c", cfg, "-o", out, NULL};
  if ((s->session = bench_spawn(rec, -1, log)) < 0) return -1;
  sleep_s(WARMUP_S);
  return 0;
}

static void stack_stop(stack_t_ *s) {
  if (s->session > 0) bench_stop(s->session, STOP_MS);
  if (s->perf > 0) bench_stop(s->perf, STOP_MS);
  if (s->ts.pid > 0) bench_stop(s->ts.pid, STOP_MS);
  s->session = s->perf = s->ts.pid = 0;
}

/* --- 1. slowdown ------------------------------------------------------------- */

typedef struct sample {
  double work_s, work_cpu_s, profiler_cpu_s;
} sample_t;

static int run_setup(int setup, const char *units, sample_t *out) {
  char dir[160], log[200], data[200];
  if (bench_tempdir(dir, sizeof(dir), "perf") < 0) return -1;
  snprintf(log, sizeof(log), "%s/work.log", dir);
  const char *work[] = {PERF_WORKLOAD_PATH, units, NULL};
  double cpu = 0;
  out->profiler_cpu_s = 0;
  if (setup == SETUP_ALONE) {
    pid_t w = bench_spawn(work, -1, log);
    if (w < 0 || bench_wait_cpu(w, 600000, &cpu) != 0) return -1;
  } else if (setup == SETUP_OURS) {
    stack_t_ s;
    if (stack_start(&s) < 0 || session_start(&s, 100, true) < 0) {
      stack_stop(&s);
      return -1;
    }
    double c0 = run_s(s.perf);
    pid_t w = bench_spawn(work, -1, log);
    int st = w < 0 ? -1 : bench_wait_cpu(w, 600000, &cpu);
    double c1 = run_s(s.perf);
    stack_stop(&s);
    if (st != 0 || c0 < 0 || c1 < 0) return -1;
    out->profiler_cpu_s = c1 - c0;
  } else {
    snprintf(data, sizeof(data), "%s/perf.data", dir);
    const char *rec[] = {perf_path, "record", "-q", "--call-graph", "dwarf",
                         "-F", "100", "-o", data, "--", PERF_WORKLOAD_PATH,
                         units, NULL};
    pid_t p = bench_spawn(rec, -1, log);
    if (p < 0 || bench_wait_cpu(p, 600000, &cpu) != 0) return -1;
  }
  if (read_work(log, &out->work_s, &out->work_cpu_s) < 0) {
    fprintf(stderr, PROG ": %s: no figures from the workload (%s)\n",
            setup_names[setup], log);
    return -1;
  }
  /* perf record's CPU: all of it less its child's, the workload's. */
  if (setup == SETUP_PERF) out->profiler_cpu_s = cpu - out->work_cpu_s;
  return 0;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, size_t n) {
  double s[MAX_ROUNDS];
  memcpy(s, v, n * sizeof(*v));
  qsort(s, n, sizeof(*s), cmp_d);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double min_d(const double *v, size_t n) {
  double m = v[0];
  for (size_t i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

static double max_d(const double *v, size_t n) {
  double m = v[0];
  for (size_t i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
  return m;
}

/* --- 2. always on at 19 Hz ---------------------------------------------------- */

typedef struct always {
  double cpu_pct_per_cpu, hwm_mib, service_cpu_pct;
  /* At the end: resident anonymous memory and mapped files. */
  double anon_mib, file_mib;
} always_t;

static int always_ours(unsigned wall_s, long ncpu, always_t *a) {
  stack_t_ s;
  if (stack_start(&s) < 0 || session_start(&s, 19, false) < 0) {
    stack_stop(&s);
    return -1;
  }
  double c0 = run_s(s.perf), v0 = run_s(s.ts.pid), t0 = bench_now_ms();
  sleep_s(wall_s);
  double c1 = run_s(s.perf), v1 = run_s(s.ts.pid), t1 = bench_now_ms();
  long hwm = bench_proc_status_kb(s.perf, "VmHWM");
  a->anon_mib = (double)bench_proc_status_kb(s.perf, "RssAnon") / 1024.0;
  a->file_mib = (double)bench_proc_status_kb(s.perf, "RssFile") / 1024.0;
  stack_stop(&s);
  if (c0 < 0 || c1 < 0 || hwm < 0) return -1;
  double wall = (t1 - t0) / 1000.0;
  a->cpu_pct_per_cpu = 100.0 * (c1 - c0) / wall / (double)ncpu;
  a->service_cpu_pct = 100.0 * (v1 - v0) / wall / (double)ncpu;
  a->hwm_mib = (double)hwm / 1024.0;
  return 0;
}

static int always_perf(unsigned wall_s, long ncpu, always_t *a) {
  char dir[160], data[200], log[200], secs[16];
  if (bench_tempdir(dir, sizeof(dir), "perf-a") < 0) return -1;
  snprintf(data, sizeof(data), "%s/perf.data", dir);
  snprintf(log, sizeof(log), "%s/perf.log", dir);
  snprintf(secs, sizeof(secs), "%u", wall_s);
  const char *rec[] = {perf_path, "record", "-q", "-a", "-F", "19",
                       "--call-graph", "dwarf", "-o", data, "--",
                       "sleep", secs, NULL};
  double t0 = bench_now_ms();
  pid_t p = bench_spawn(rec, -1, log);
  if (p < 0) return -1;
  /* Its peak memory just before the end (its own, not sleep's). */
  sleep_s((double)wall_s - 0.5);
  long hwm = bench_proc_status_kb(p, "VmHWM");
  double cpu;
  if (bench_wait_cpu(p, (int)(wall_s + 60) * 1000, &cpu) != 0 || hwm < 0)
    return -1;
  double wall = (bench_now_ms() - t0) / 1000.0;
  a->cpu_pct_per_cpu = 100.0 * cpu / wall / (double)ncpu;
  a->service_cpu_pct = 0;
  a->hwm_mib = (double)hwm / 1024.0;
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROG " [ROUNDS [WALL_S [UNITS]]]\n"
          "  1. A fixed CPU workload (two threads, UNITS million spins each,\n"
          "  default 3000) alone, under tracegate-perf at 100 Hz per CPU with\n"
          "  DWARF unwinding, and under `perf record --call-graph dwarf -F 100`,\n"
          "  ROUNDS times (1-%d, default 3): the slowdown of each.\n"
          "  2. tracegate-perf at 19 Hz on every CPU with DWARF unwinding for\n"
          "  WALL_S seconds (5-600, default 30), the workload running: its CPU\n"
          "  per sampled CPU and its peak memory, beside `perf record -a`'s.\n"
          "  Root.\n",
          MAX_ROUNDS);
}

int main(int argc, char **argv) {
  uint64_t rounds = 3, wall = 30, units = 3000;
  const bench_arg_t args[] = {
      {"ROUNDS", 1, MAX_ROUNDS, &rounds},
      {"WALL_S", 5, 600, &wall},
      {"UNITS", 10, 1000000, &units},
  };
  int rv = bench_args_parse(PROG, argc, argv, args, 3, usage, NULL);
  if (rv != 0) return rv > 0 ? 0 : 2;
  if (geteuid() != 0) {
    printf(PROG ": skipped: sampling every CPU needs root\n");
    return 0;
  }
  bench_children_init();
  bench_deadline((unsigned)(rounds * 3 * 600 + 2 * wall + 120));
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  char units_s[24];
  snprintf(units_s, sizeof(units_s), "%" PRIu64, units);
  /* Debian's /usr/bin/perf is a wrapper that fails when no perf matches
   * the running kernel. */
  if (access("/usr/bin/perf", X_OK) == 0) {
    snprintf(perf_path, sizeof(perf_path), "/usr/bin/perf");
    const char *probe[] = {perf_path, "--version", NULL};
    pid_t p = bench_spawn(probe, -1, NULL);
    double cpu;
    if (p < 0 || bench_wait_cpu(p, 30000, &cpu) != 0) perf_path[0] = 0;
  }
  printf(PROG ": %ld CPUs; %" PRIu64 " rounds of the workload (2 threads x %"
         PRIu64 " million spins); then %" PRIu64 " s at 19 Hz\n",
         ncpu, rounds, units, wall);
  if (!perf_path[0])
    printf(PROG ": no working perf (Debian's linux-perf): its side is not "
           "measured\n");
  fflush(stdout);

  double work[N_SETUPS][MAX_ROUNDS], wcpu[N_SETUPS][MAX_ROUNDS],
      pcpu[N_SETUPS][MAX_ROUNDS];
  size_t n[N_SETUPS] = {0};
  for (uint64_t r = 0; r < rounds; r++) {
    for (int k = 0; k < N_SETUPS; k++) {
      int setup = (int)((k + r) % N_SETUPS);
      if (setup == SETUP_PERF && !perf_path[0]) continue;
      sample_t s;
      if (run_setup(setup, units_s, &s) < 0) {
        fprintf(stderr, PROG ": the %s setup failed\n", setup_names[setup]);
        return 1;
      }
      work[setup][n[setup]] = s.work_s;
      wcpu[setup][n[setup]] = s.work_cpu_s;
      pcpu[setup][n[setup]++] = s.profiler_cpu_s;
      printf("  round %" PRIu64 " %-15s: work %.2f s wall, %.2f s CPU; "
             "profiler CPU %.3f s\n",
             r + 1, setup_names[setup], s.work_s, s.work_cpu_s,
             s.profiler_cpu_s);
      fflush(stdout);
    }
  }
  /* On a machine others share, the wall time swings with their load, and
   * on a VM the work's CPU time swings too (the same work has taken from
   * 5.7 to 8.9 s here): the cost is the work's extra CPU (the sampling
   * interrupts and stack copies run in its context) plus the profiler's
   * own, and a difference of costs smaller than the spread of the work's
   * CPU alone is not a measurement. */
  double alone = median(work[SETUP_ALONE], n[SETUP_ALONE]);
  double alone_cpu = median(wcpu[SETUP_ALONE], n[SETUP_ALONE]);
  printf("\n1. 100 Hz, DWARF: the workload, median (min-max) over %" PRIu64
         " rounds\n", rounds);
  printf("  %-15s %-20s %-8s %-20s %-9s %-12s %s\n", "setup", "wall s", "slower",
         "work CPU s", "slower", "profiler s", "cost (work + profiler CPU)");
  double cost[N_SETUPS] = {0}, slow[N_SETUPS] = {0};
  for (int k = 0; k < N_SETUPS; k++) {
    if (n[k] == 0) continue;
    double m = median(work[k], n[k]), c = median(wcpu[k], n[k]);
    double p = median(pcpu[k], n[k]);
    slow[k] = 100.0 * (m - alone) / alone;
    cost[k] = 100.0 * (c + p - alone_cpu) / alone_cpu;
    printf("  %-15s %5.2f (%5.2f-%5.2f) %+6.1f%%  %5.2f (%5.2f-%5.2f) %+6.1f%%  "
           "%-12.3f %+.1f%%\n",
           setup_names[k], m, min_d(work[k], n[k]), max_d(work[k], n[k]),
           slow[k], c, min_d(wcpu[k], n[k]), max_d(wcpu[k], n[k]),
           100.0 * (c - alone_cpu) / alone_cpu, p, cost[k]);
  }
  if (n[SETUP_PERF] > 0) {
    /* Half the min-max spread of the work's CPU alone, in % of its
     * median: the noise of one cost. */
    double noise = 50.0 *
                   (max_d(wcpu[SETUP_ALONE], n[SETUP_ALONE]) -
                    min_d(wcpu[SETUP_ALONE], n[SETUP_ALONE])) /
                   alone_cpu;
    double diff = cost[SETUP_OURS] - cost[SETUP_PERF];
    const char *verdict = diff <= 0 ? "met"
                          : diff <= noise ? "not separable from the noise"
                                          : "MISSED";
    printf("  goal: tracegate-perf's cost <= perf record's: %+.1f%% vs %+.1f%% "
           "of the work's CPU: %s (the work alone spreads +-%.1f%%; the "
           "profilers' own CPU: %.3f s vs %.3f s)\n",
           cost[SETUP_OURS], cost[SETUP_PERF], verdict, noise,
           median(pcpu[SETUP_OURS], n[SETUP_OURS]),
           median(pcpu[SETUP_PERF], n[SETUP_PERF]));
    printf("  (wall-time slowdown %+.1f%% vs %+.1f%%: with other load on the "
           "machine, see the spread)\n",
           slow[SETUP_OURS], slow[SETUP_PERF]);
  }
  fflush(stdout);

  /* 2. The workload keeps both CPUs busy with user stacks to unwind. */
  const char *bg[] = {PERF_WORKLOAD_PATH, "0", NULL};
  pid_t w = bench_spawn(bg, -1, NULL);
  if (w < 0) return 1;
  always_t ours, theirs;
  if (always_ours((unsigned)wall, ncpu, &ours) < 0) {
    fprintf(stderr, PROG ": the 19 Hz run of tracegate-perf failed\n");
    return 1;
  }
  bool with_perf = perf_path[0] && always_perf((unsigned)wall, ncpu, &theirs) == 0;
  bench_stop(w, STOP_MS);
  printf("\n2. 19 Hz on every CPU, DWARF, %" PRIu64 " s, the workload running\n",
         wall);
  printf("  tracegate-perf CPU   %.3f%% of a core per sampled CPU  (goal <= "
         "%.1f%%: %s; perf record -a: %s%.3f%%; OTel eBPF profiler's promise "
         "<= 1%%)\n",
         ours.cpu_pct_per_cpu, GOAL_CPU_PCT,
         ours.cpu_pct_per_cpu <= GOAL_CPU_PCT ? "met" : "MISSED",
         with_perf ? "" : "not measured ", with_perf ? theirs.cpu_pct_per_cpu : 0);
  printf("  tracegate-perf VmHWM %.1f MiB  (goal <= %.0f MiB: %s; perf record "
         "-a: %s%.1f MiB; OTel's promise <= 250 MB)\n",
         ours.hwm_mib, GOAL_MEM_MIB, ours.hwm_mib <= GOAL_MEM_MIB ? "met" : "MISSED",
         with_perf ? "" : "not measured ", with_perf ? theirs.hwm_mib : 0);
  printf("  (tracegate-perf at the end: %.1f MiB anonymous, %.1f MiB of "
         "mapped files)\n", ours.anon_mib, ours.file_mib);
  printf("  (tracegated meanwhile: %.3f%% of a core per CPU)\n",
         ours.service_cpu_pct);
  return 0;
}
