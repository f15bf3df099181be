/* Many writer threads sharing the default SMB (issue 16).
 *
 * A real tracegated drains the agent's SMB; the app gives no size hint, so
 * the agent asks for its reserve (TG_AGENT_SMB_RESERVE) and grows into it
 * from 256 KiB as writers come (agent/smb_arbiter.h); the agent drops (never stalls) when it finds no
 * free chunk. For each row of a threads x rate matrix, one session records
 * while every thread writes its quota of small raw packets (64-byte
 * payload) at its rate, on an absolute schedule, then exits (releasing its
 * writer). A thread wakes at most every WAKE_MS and writes the events due
 * (at 500/s, 5 in a row): thousands of threads each waking 500 times a
 * second would measure the scheduler, not the SMB. Each row prints:
 *   - events written and dropped (the agent's counts for the row), the
 *     drop markers the agent wrote, and the service's
 *     trace_writer_packet_loss and chunks_discarded;
 *   - ns/event: the write call's mean cost, timed around each burst of
 *     calls, less the cost of the two clock reads measured in the same
 *     run; bursts that took over PREEMPTED_NS per event (the thread lost
 *     the CPU meanwhile) are left out and counted (%pre);
 *   - SMB bytes in use: mean and peak of the agent's samples (taken at its
 *     ticks and commits), polled every millisecond during the row; the
 *     SMB's active size (what the agent grew its reserve to, for every
 *     row so far: it never shrinks) and size, and its bytes in memory;
 *   - chunks the agent took back from idle writers;
 *   - kept: the share of the row's packets that reached the trace
 *     buffer, and B/pkt: the chunk bytes the buffer took in per packet
 *     kept (ring bytes a packet costs: chunks that leave nearly empty
 *     raise it, and a ring then holds less history).
 * The same run first times one thread writing bursts of SINGLE_BURST
 * events every SINGLE_GAP_MS (a pace the service can drain, so that the
 * figure is the write path and not the drop path): the single-thread
 * figure each row is compared with.
 *
 * Goal: 0 dropped in every row with no size hint (4096 x 100/s included),
 * the same B/pkt with 4096 threads as with 64, and the single-thread cost
 * <= 30 ns/event. On a loaded machine threads fall behind their
 * schedule and write in bursts; the row's real duration is printed, with
 * the CPU seconds tracegated used and the chunks the agent committed.
 * Thousands of writer threads compete for the CPU with the agent's thread
 * and the service, which must commit and drain the SMB within the few
 * milliseconds of data it holds: TG_BENCH_WRITER_NICE=N runs the writers
 * at nice N, to tell that competition apart from the SMB's own limits.
 * TG_BENCH_ROW_SECONDS=N makes every row N seconds long (a short row ends
 * before a slow drain fills the SMB), TG_BENCH_THREADS=N runs only the
 * rows of N threads.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "test_service.h"
#include "tracegate/agent.h"
#include "bench_args.h"

#define NS_PER_S UINT64_C(1000000000)
#define ROW_SECONDS 1u /* TG_BENCH_ROW_SECONDS=N: longer rows */
#define WAKE_MS 10u
#define PREEMPTED_NS 20000u
#define SINGLE_BURST 1000u
#define SINGLE_BURSTS 1000u
#define SINGLE_GAP_MS 4u
#define THREAD_STACK (128u * 1024u)
#define TRACE_BUFFER_KB (96u * 1024u)
#define PAYLOAD 64u
/* TracePacket.timestamp and TracePacket.for_testing (opaque bytes here). */
enum { PACKET_TIMESTAMP = 8, PACKET_FOR_TESTING = 900 };

typedef struct row {
  unsigned threads;
  uint64_t rate; /* events per second per thread */
} row_t;

static const row_t k_rows[] = {
    {1, 500},   {16, 500},  {64, 100},   {256, 500},
    {1024, 500}, {4096, 50}, {4096, 100},
};

static tg_ds_t *g_ds;
static int g_writer_nice; /* TG_BENCH_WRITER_NICE */
static unsigned g_row_seconds = ROW_SECONDS;
static uint8_t g_payload[PAYLOAD];

/* CPU seconds |pid| has used (utime + stime from /proc), or 0. */
static double proc_cpu_s(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* comm may hold spaces */
  unsigned long long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
                          "%llu", &ut, &st) != 2)
    return 0;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t) {
  struct timespec ts = {.tv_sec = (time_t)(t / NS_PER_S),
                        .tv_nsec = (long)(t % NS_PER_S)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
  }
}

static void write_one(uint64_t ts) {
  TG_DS_TRACE(g_ds, inst, pbw) {
    tg_pbw_append_varint(pbw, PACKET_TIMESTAMP, ts);
    tg_pbw_append_bytes(pbw, PACKET_FOR_TESTING, g_payload, PAYLOAD);
  }
}

/* --- one row ------------------------------------------------------------- */

typedef struct worker {
  pthread_t thread;
  uint64_t start_ns, period_ns, events;
  uint64_t write_ns;     /* summed time inside bursts not preempted */
  uint64_t timed_events; /* events in those bursts */
  uint64_t preempted;    /* events in bursts left out */
} worker_t;

static void *worker_main(void *arg) {
  worker_t *w = arg;
  if (g_writer_nice)
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), g_writer_nice);
  uint64_t per_wake = (uint64_t)WAKE_MS * 1000000u / w->period_ns;
  if (per_wake == 0) per_wake = 1;
  for (uint64_t i = 0; i < w->events;) {
    sleep_until(w->start_ns + i * w->period_ns);
    /* The events due now (more when the thread is late). */
    uint64_t due = (now_ns() - w->start_ns) / w->period_ns + 1;
    if (due < i + per_wake) due = i + per_wake;
    if (due > w->events) due = w->events;
    uint64_t n = due - i;
    uint64_t t0 = now_ns();
    for (; i < due; i++) write_one(t0);
    uint64_t dt = now_ns() - t0;
    if (dt > PREEMPTED_NS * n) {
      w->preempted += n;
    } else {
      w->write_ns += dt;
      w->timed_events += n;
    }
  }
  return NULL;
}

/* The cost of the two clock reads around a write, to subtract. */
static double clock_pair_ns(void) {
  enum { N = 1000000 };
  uint64_t sum = 0;
  for (int i = 0; i < N; i++) {
    uint64_t t0 = now_ns();
    sum += now_ns() - t0;
  }
  return (double)sum / N;
}

typedef struct sampler {
  pthread_t thread;
  _Atomic bool stop;
  uint64_t max, sum, n;
} sampler_t;

static void *sampler_main(void *arg) {
  sampler_t *s = arg;
  while (!atomic_load(&s->stop)) {
    tg_agent_stats_t st;
    tg_agent_get_stats(&st);
    if (st.smb_bytes_in_use > s->max) s->max = st.smb_bytes_in_use;
    s->sum += st.smb_bytes_in_use;
    s->n++;
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
  return NULL;
}

static int start_session(raw_consumer_t *c, const test_service_t *ts,
                         simple_cfg_t *sc) {
  if (raw_consumer_connect(c, ts) < 0) return -1;
  simple_cfg_init(sc, TRACE_BUFFER_KB, 1 /* RING_BUFFER */, "bench.many");
  if (raw_consumer_enable(c, &sc->cfg, -1) < 0) return -1;
  for (int i = 0; i < 5000 && !tg_ds_enabled_mask(g_ds); i++) {
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
  return tg_ds_enabled_mask(g_ds) ? 0 : -1;
}

typedef struct service_loss {
  uint64_t packet_loss, chunks_discarded;
  uint64_t ring_bytes; /* chunk bytes the session's buffers took in */
} service_loss_t;

static void read_service_loss(raw_consumer_t *c, service_loss_t *out) {
  memset(out, 0, sizeof(*out));
  Perfetto__Protos__GetTraceStatsResponse *gs = raw_consumer_stats(c);
  if (!gs) return;
  const Perfetto__Protos__TraceStats *st = gs->trace_stats;
  if (st) {
    out->chunks_discarded = st->chunks_discarded;
    for (size_t i = 0; i < st->n_buffer_stats; i++) {
      out->packet_loss += st->buffer_stats[i]->trace_writer_packet_loss;
      out->chunks_discarded += st->buffer_stats[i]->chunks_discarded;
      out->ring_bytes += st->buffer_stats[i]->bytes_written;
    }
  }
  perfetto__protos__get_trace_stats_response__free_unpacked(gs, NULL);
}

static int run_row(const test_service_t *ts, const row_t *r, double clock_ns,
                   double single_ns) {
  raw_consumer_t c;
  simple_cfg_t sc;
  if (start_session(&c, ts, &sc) < 0) {
    fprintf(stderr, "bench_many_writers: the session did not start\n");
    return -1;
  }
  worker_t *w = calloc(r->threads, sizeof(*w));
  if (!w) return -1;
  tg_agent_stats_t before, after;
  tg_agent_get_stats(&before);
  double svc_cpu0 = proc_cpu_s(ts->pid);
  sampler_t smp = {0};
  pthread_create(&smp.thread, NULL, sampler_main, &smp);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, THREAD_STACK);
  /* Every thread starts on the same schedule, staggered over one period
   * so that they do not all wake at once. */
  uint64_t period = NS_PER_S / r->rate;
  uint64_t t0 = now_ns() + 20000000u;
  unsigned started = 0;
  for (; started < r->threads; started++) {
    w[started].period_ns = period;
    w[started].events = r->rate * g_row_seconds;
    w[started].start_ns = t0 + period * started / r->threads;
    if (pthread_create(&w[started].thread, &attr, worker_main,
                       &w[started]) != 0)
      break;
  }
  pthread_attr_destroy(&attr);
  uint64_t write_ns = 0, events = 0, timed = 0, preempted = 0;
  for (unsigned i = 0; i < started; i++) {
    pthread_join(w[i].thread, NULL);
    write_ns += w[i].write_ns;
    events += w[i].events;
    timed += w[i].timed_events;
    preempted += w[i].preempted;
  }
  double seconds = (double)(now_ns() - t0) / 1e9;
  /* The threads are gone and their chunks returned: let the agent's
   * timer commit them and refresh its counters. */
  struct timespec settle = {0, 100000000};
  nanosleep(&settle, NULL);
  atomic_store(&smp.stop, true);
  pthread_join(smp.thread, NULL);
  tg_agent_get_stats(&after);
  double svc_cpu = proc_cpu_s(ts->pid) - svc_cpu0;
  service_loss_t sl;
  read_service_loss(&c, &sl);
  raw_consumer_disable(&c, 20000);
  raw_consumer_close(&c);
  free(w);
  if (started < r->threads) {
    fprintf(stderr, "bench_many_writers: only %u of %u threads started\n",
            started, r->threads);
    return -1;
  }

  double ns = 0;
  if (timed) {
    /* One clock pair per burst, spread over its events. */
    uint64_t per_burst = r->rate * WAKE_MS / 1000;
    ns = (double)write_ns / (double)timed -
         clock_ns / (double)(per_burst ? per_burst : 1);
  }
  uint64_t written = after.packets_written - before.packets_written;
  uint64_t dropped = after.packets_dropped - before.packets_dropped;
  uint64_t kept = written > sl.packet_loss ? written - sl.packet_loss : 0;
  printf("%5u x %4" PRIu64 "/s %5.2fs | %8" PRIu64 " %8" PRIu64 " %7" PRIu64
         " | %6" PRIu64 " %6" PRIu64 " | %5.1f%% %6.1f | %6.1f (x%4.1f) %3.0f%%"
         " | %4.0f %4.0f of %5.0f/%5.0f res %5.0f KiB | %7" PRIu64
         " | %5.2f %6" PRIu64 "\n",
         r->threads, r->rate, seconds, written, dropped,
         after.drop_markers - before.drop_markers, sl.packet_loss,
         sl.chunks_discarded,
         events ? 100.0 * (double)kept / (double)events : 0.0,
         kept ? (double)sl.ring_bytes / (double)kept : 0.0, ns,
         ns / single_ns,
         events ? 100.0 * (double)preempted / (double)events : 0.0,
         smp.n ? (double)smp.sum / (double)smp.n / 1024.0 : 0.0,
         (double)smp.max / 1024.0, (double)after.smb_active_size / 1024.0,
         (double)after.smb_size / 1024.0,
         (double)after.smb_resident_bytes / 1024.0,
         after.chunks_reclaimed - before.chunks_reclaimed, svc_cpu,
         after.chunks_committed - before.chunks_committed);
  fflush(stdout);
  return 0;
}

/* One thread in bursts: the figure each row is compared with. The best
 * burst is the cost without interference from the rest of the machine. */
static void *single_main(void *arg) {
  double *ns = arg;
  uint64_t best = UINT64_MAX;
  for (uint32_t b = 0; b < SINGLE_BURSTS; b++) {
    uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < SINGLE_BURST; i++) write_one(t0);
    uint64_t dt = now_ns() - t0;
    if (dt < best) best = dt;
    struct timespec d = {0, SINGLE_GAP_MS * 1000000L};
    nanosleep(&d, NULL);
  }
  *ns = (double)best / SINGLE_BURST;
  return NULL;
}

static double run_single(const test_service_t *ts, uint64_t *dropped) {
  raw_consumer_t c;
  simple_cfg_t sc;
  double ns = 0;
  if (start_session(&c, ts, &sc) < 0) return 0;
  tg_agent_stats_t before, after;
  tg_agent_get_stats(&before);
  pthread_t th;
  pthread_create(&th, NULL, single_main, &ns);
  pthread_join(th, NULL);
  struct timespec settle = {0, 50000000};
  nanosleep(&settle, NULL);
  tg_agent_get_stats(&after);
  *dropped = after.packets_dropped - before.packets_dropped;
  raw_consumer_disable(&c, 20000);
  raw_consumer_close(&c);
  return ns;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_many_writers\n"
          "  1 to 4096 writer threads sharing the default SMB (no size hint, "
          "drop\n"
          "  policy) with a real tracegated draining: drops, ns per event "
          "and SMB\n"
          "  bytes in use per threads x rate row, next to one thread alone.\n"
          "  Takes no arguments. TG_BENCH_WRITER_NICE=N runs the writers at "
          "nice N.\n");
}

int main(int argc, char **argv) {
  int parsed =
      bench_args_parse("bench_many_writers", argc, argv, NULL, 0, usage, NULL);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  memset(g_payload, 'x', sizeof(g_payload));
  const char *nice_env = getenv("TG_BENCH_WRITER_NICE");
  if (nice_env) g_writer_nice = atoi(nice_env);
  const char *secs_env = getenv("TG_BENCH_ROW_SECONDS");
  if (secs_env && atoi(secs_env) > 0) g_row_seconds = (unsigned)atoi(secs_env);
  test_service_t ts;
  if (test_service_start(&ts) < 0) {
    fprintf(stderr, "bench_many_writers: cannot start tracegated\n");
    return 1;
  }
  tg_ds_options_t o = {.name = "bench.many"};
  tg_ds_register(&o, &g_ds);
  tg_agent_options_t ao = {.socket_path = ts.producer_sock,
                           .producer_name = "bench_many_writers",
                           .on_smb_full = TG_AGENT_FULL_DROP};
  if (tg_agent_init(&ao) < 0 || tg_agent_wait_connected(10000) < 0) {
    fprintf(stderr, "bench_many_writers: the agent did not connect\n");
    test_service_stop(&ts);
    return 1;
  }
  double clock_ns = clock_pair_ns();
  uint64_t single_dropped = 0;
  double single_ns = run_single(&ts, &single_dropped);
  printf("bench_many_writers: no SMB size hint, drop policy, %u-byte payloads, "
         "%us per row, threads wake every %u ms, writers at nice %d\n",
         PAYLOAD, g_row_seconds, WAKE_MS, g_writer_nice);
  printf("single thread, best burst of %u: %.1f ns/event (target <= 30), "
         "%" PRIu64 " dropped; clock pair: %.1f ns\n",
         SINGLE_BURST, single_ns, single_dropped, clock_ns);
  printf("thr x rate    time |  written  dropped markers | svc: loss "
         "discrd |  kept  B/pkt | ns/event (x1T) %%pre | SMB in use: mean peak       "
         "of active/SMB, resident | reclaimed | svc CPU s, chunks\n");
  int rv = 0;
  /* TG_BENCH_THREADS=N: only the rows of N threads. */
  const char *only_env = getenv("TG_BENCH_THREADS");
  unsigned only = only_env ? (unsigned)atoi(only_env) : 0;
  for (size_t i = 0; i < sizeof(k_rows) / sizeof(k_rows[0]); i++)
    if ((!only || k_rows[i].threads == only) &&
        run_row(&ts, &k_rows[i], clock_ns, single_ns) < 0)
      rv = 1;
  tg_agent_shutdown();
  test_service_stop(&ts);
  return rv;
}
