/* linux.ftrace reading cost: CPU time per MB of kernel ring buffer data and
 * events per second, against the floor of reading the same pages and
 * throwing them away.
 *
 * Two tracefs instances record the same events at the same time, driven by
 * a workload of pipe ping-pong processes (sched_switch, sched_waking and
 * raw_syscalls on every hop). One thread drains both every few ms:
 *   - encode: trace_pipe_raw pages parsed and encoded into TracePackets
 *     (FtraceEventBundle) in memory, as tracegate-probes writes them;
 *   - floor:  the same reads of the other instance, pages discarded.
 * The CPU time of each (CLOCK_THREAD_CPUTIME_ID around each drain) over
 * the MB it read gives the two figures; the kernel's overrun counters say
 * whether the rate was sustained without loss. Runs with full events and
 * with compact_sched, each alone and with the pids of the records
 * collected (what tracegate-probes does when linux.process_stats shares
 * the session). Goal: encode within 2x of the floor.
 *
 * Needs root and tracefs; without them it says so and exits 0.
 * usage: bench_ftrace [SECONDS]   (per phase, default 3; see --help)
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/probes/ftrace_config.h"
#include "agent/probes/ftrace_session.h"
#include "agent/probes/ftrace_tracefs.h"
#include "tracegate/error.h"
#include "bench_args.h"

#define PAIRS 2
#define DRAIN_EVERY_MS 20
#define PAGES_PER_DRAIN 1024
#define OUT_SIZE (1u << 20)

static double now_s(clockid_t clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Two processes bouncing a byte over two pipes until killed. */
static void ping_pong(pid_t *pids) {
  int ab[2], ba[2];
  if (pipe(ab) != 0 || pipe(ba) != 0) exit(1);
  for (int side = 0; side < 2; side++) {
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      char c = 0;
      int in = side ? ab[0] : ba[0], out = side ? ba[1] : ab[1];
      if (side == 0 && write(out, &c, 1) != 1) _exit(1);
      for (;;) {
        if (read(in, &c, 1) != 1) _exit(0);
        if (write(out, &c, 1) != 1) _exit(0);
      }
    }
    pids[side] = pid;
  }
  close(ab[0]);
  close(ab[1]);
  close(ba[0]);
  close(ba[1]);
}

/* The encoder's sink: every packet into the same memory, then dropped. */
typedef struct mem_sink {
  uint8_t *buf;
  tg_pbw_t w;
  uint64_t bytes, packets;
} mem_sink_t;

/* A packet longer than the buffer (a bundle spans a drain's pages of a
 * CPU) goes on over it again: the bench counts bytes, it keeps none. */
static int mem_refill(void *ctx, tg_pbw_t *w, size_t min_contiguous) {
  mem_sink_t *m = ctx;
  (void)min_contiguous;
  w->cur = m->buf;
  w->end = m->buf + OUT_SIZE;
  return 0;
}

static tg_pbw_t *mem_begin(void *ctx) {
  mem_sink_t *m = ctx;
  tg_pbw_init(&m->w, m->buf, OUT_SIZE, mem_refill, m);
  return &m->w;
}

static void mem_end(void *ctx) {
  mem_sink_t *m = ctx;
  m->bytes += tg_pbw_written(&m->w);
  m->packets++;
}

static uint64_t overruns(const tg_ftrace_session_t *s) {
  char buf[1024];
  uint64_t total = 0;
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < cpus; c++) {
    char rel[64];
    snprintf(rel, sizeof(rel), "per_cpu/cpu%ld/stats", c);
    long n = tg_tracefs_read(tg_ftrace_session_dir(s), rel, buf, sizeof(buf));
    if (n < 0) continue;
    tg_ftrace_cpu_stats_t st;
    tg_ftrace_cpu_stats_parse(buf, (size_t)n, &st);
    total += st.overrun;
  }
  return total;
}

/* The pids the encoder hands over, counted and dropped. */
static bool count_pids(void *ctx, const int32_t *pids, size_t n) {
  (void)pids;
  *(uint64_t *)ctx += n;
  return true;
}

static int phase(const char *label, bool compact, bool pids_too,
                 double seconds) {
  char *events[] = {"sched/sched_switch", "sched/sched_waking",
                    "sched/sched_wakeup_new", "raw_syscalls/sys_enter",
                    "raw_syscalls/sys_exit", "irq/*"};
  tg_ftrace_cfg_t cfg = {
      .events = events,
      .n_events = sizeof(events) / sizeof(events[0]),
      .buffer_size_kb = 8192,
      .drain_period_ms = DRAIN_EVERY_MS,
      .compact_sched = compact,
  };
  tg_ftrace_session_t *enc = NULL, *floor = NULL;
  int rv = tg_ftrace_session_start(&cfg, &enc);
  if (rv == 0) rv = tg_ftrace_session_start(&cfg, &floor);
  if (rv < 0) {
    fprintf(stderr, "bench_ftrace: cannot start a session: %s\n",
            tg_strerror(rv));
    tg_ftrace_session_stop(enc);
    return 1;
  }
  uint64_t pids_handed = 0;
  if (pids_too) tg_ftrace_session_on_pids(enc, count_pids, &pids_handed);
  mem_sink_t m = {.buf = malloc(OUT_SIZE)};
  if (!m.buf) return 1;
  tg_probes_sink_t sink = {mem_begin, mem_end, &m};

  pid_t pids[PAIRS * 2];
  for (int i = 0; i < PAIRS; i++) ping_pong(pids + 2 * i);

  double cpu_enc = 0, cpu_floor = 0;
  double t0 = now_s(CLOCK_MONOTONIC), end = t0 + seconds;
  bool stopping = false;
  for (;;) {
    bool more_e = false, more_f = false;
    double c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    tg_ftrace_session_drain(enc, &sink, PAGES_PER_DRAIN, &more_e);
    double c1 = now_s(CLOCK_THREAD_CPUTIME_ID);
    tg_ftrace_session_drain(floor, NULL, PAGES_PER_DRAIN, &more_f);
    double c2 = now_s(CLOCK_THREAD_CPUTIME_ID);
    cpu_enc += c1 - c0;
    cpu_floor += c2 - c1;
    if (!stopping && now_s(CLOCK_MONOTONIC) >= end) {
      for (int i = 0; i < PAIRS * 2; i++) kill(pids[i], SIGKILL);
      for (int i = 0; i < PAIRS * 2; i++) waitpid(pids[i], NULL, 0);
      stopping = true; /* one more round takes what is left */
      continue;
    }
    if (stopping && !more_e && !more_f) break;
    if (!more_e && !more_f) sleep_ms(DRAIN_EVERY_MS);
  }
  double wall = now_s(CLOCK_MONOTONIC) - t0;

  const tg_ftrace_session_stats_t *se = tg_ftrace_session_stats(enc);
  const tg_ftrace_session_stats_t *sf = tg_ftrace_session_stats(floor);
  double mb_e = (double)se->bytes / 1e6, mb_f = (double)sf->bytes / 1e6;
  uint64_t over_e = overruns(enc), over_f = overruns(floor);
  printf("%s:\n", label);
  printf("  encode: %7.1f MB, %9" PRIu64 " events, %6" PRIu64 " pages, "
         "%7.1f ms CPU = %6.2f ms/MB, %8.0f events/s, %.1f MB out, "
         "overrun %" PRIu64 ", lost pages %" PRIu64 "\n",
         mb_e, se->events, se->pages, cpu_enc * 1e3,
         mb_e > 0 ? cpu_enc * 1e3 / mb_e : 0.0, (double)se->events / wall,
         (double)m.bytes / 1e6, over_e, se->lost_pages);
  if (pids_too)
    printf("  pids handed over: %" PRIu64 " (deduplicated per drain)\n",
           pids_handed);
  printf("  floor:  %7.1f MB, %9s events, %6" PRIu64 " pages, "
         "%7.1f ms CPU = %6.2f ms/MB (read and discard), overrun %" PRIu64 "\n",
         mb_f, "-", sf->pages, cpu_floor * 1e3,
         mb_f > 0 ? cpu_floor * 1e3 / mb_f : 0.0, over_f);
  if (mb_e > 0 && mb_f > 0 && cpu_floor > 0)
    printf("  encode / floor CPU per MB: %.2fx (goal <= 2x)\n",
           (cpu_enc / mb_e) / (cpu_floor / mb_f));
  free(m.buf);
  tg_ftrace_session_stop(enc);
  tg_ftrace_session_stop(floor);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_ftrace [SECONDS]\n"
          "  linux.ftrace's CPU per MB of kernel ring buffer data, encoded "
          "into\n"
          "  TracePackets, against reading the same pages and discarding "
          "them\n"
          "  (goal: within 2x). Needs root and tracefs, else it says so and "
          "exits 0.\n"
          "  SECONDS  time per phase, four phases (1-600, default 3)\n");
}

int main(int argc, char **argv) {
  uint64_t secs = 3;
  const bench_arg_t args[] = {{"SECONDS", 1, 600, &secs}};
  int parsed = bench_args_parse("bench_ftrace", argc, argv, args, 1, usage,
                                NULL);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  double seconds = (double)secs;
  char root[TG_TRACEFS_PATH_MAX];
  int rv = geteuid() == 0 ? tg_tracefs_find(root) : -EACCES;
  if (rv < 0) {
    printf("bench_ftrace: skipped: %s (needs root and tracefs)\n",
           tg_strerror(rv));
    return 0;
  }
  if (phase("full events (sched_switch, sched_waking as FtraceEvent)", false,
            false, seconds) ||
      phase("full events, pids collected", false, true, seconds) ||
      phase("compact_sched", true, false, seconds) ||
      phase("compact_sched, pids collected", true, true, seconds))
    return 1;
  return 0;
}
