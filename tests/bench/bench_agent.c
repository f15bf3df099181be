/* The agent's public hot path against a real tracegated.
 *
 * A tracegated child drains the SMB; this process links the agent, and one
 * thread writes through the public API while the agent's thread commits:
 *   - track events: TG_SLICE_BEGIN/TG_SLICE_END pairs with an interned
 *     name (each pair is two events), and the same pairs whose begin
 *     carries a flow id (TG_FLOW), printed beside the plain ones;
 *   - raw 64-byte packets with TG_DS_TRACE (a bytes field);
 *   - a disabled category: the cost of TG_SLICE_BEGIN when no session
 *     wants it (one relaxed load and a branch).
 * Each figure is printed next to a plain memcpy of the same bytes measured
 * in the same run. With PERFETTO_BIN set, track events are then timed in
 * turns with Perfetto's SDK (bin/ref_producer) writing to the same session
 * through the same tracegated, and each round's ratio is printed. Targets (issue 4): <= 30 ns per enabled event, <= 1 ns
 * per disabled check. The session uses a ring buffer so that the service
 * never refuses data; the producer runs in stall mode so no event is lost
 * and the figure includes waiting for the service when it falls behind.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_service.h"
#include "tracegate/agent.h"
#include "tracegate/track_event.h"
#include "bench_args.h"
#include "bench_session.h"

#define EVENTS 10000000u
#define RAW_PACKETS 10000000u
#define DISABLED_CHECKS 1000000000u
#define REPEATS 3

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

TG_CATEGORY(cat_bench, "bench");
TG_CATEGORY(cat_off, "off");
static tg_ds_t *g_raw;

static double run_track_events(void) {
  double t0 = now_s();
  for (uint32_t i = 0; i < EVENTS / 2; i++) {
    TG_SLICE_BEGIN(cat_bench, "frame");
    TG_SLICE_END(cat_bench);
  }
  return (now_s() - t0) * 1e9 / EVENTS;
}

/* As run_track_events, each begin with a flow id of its own. */
static double run_flow_events(void) {
  double t0 = now_s();
  for (uint32_t i = 0; i < EVENTS / 2; i++) {
    TG_SLICE_BEGIN(cat_bench, "frame", TG_FLOW(i + 1));
    TG_SLICE_END(cat_bench);
  }
  return (now_s() - t0) * 1e9 / EVENTS;
}

static double run_raw(void) {
  static const uint8_t payload[60];
  double t0 = now_s();
  for (uint32_t i = 0; i < RAW_PACKETS; i++) {
    TG_DS_TRACE(g_raw, inst, w) {
      tg_pbw_append_bytes(w, 900 /* for_testing, as opaque bytes */, payload,
                          sizeof(payload) - 2);
    }
  }
  return (now_s() - t0) * 1e9 / RAW_PACKETS;
}

static double run_disabled(void) {
  double t0 = now_s();
  for (uint32_t i = 0; i < DISABLED_CHECKS; i++) {
    TG_SLICE_BEGIN(cat_off, "never");
    __asm__ volatile("" ::: "memory"); /* keep the loop a loop */
  }
  return (now_s() - t0) * 1e9 / DISABLED_CHECKS;
}

/* The event clock alone (tg_track_event_now(): the TSC read and its
 * conversion every event pays), per read: the part of an event no
 * encoding can spare. */
#define CLOCK_READS 10000000u
static double run_clock(void) {
  uint64_t sink = 0;
  double t0 = now_s();
  for (uint32_t i = 0; i < CLOCK_READS; i++) sink += tg_track_event_now();
  double ns = (now_s() - t0) * 1e9 / CLOCK_READS;
  __asm__ volatile("" ::"r"(sink));
  return ns;
}

/* memcpy of |size|-byte records into a 4 MiB ring: the floor. */
static double run_memcpy(size_t size, uint32_t n) {
  static uint8_t ring[4u << 20];
  uint8_t rec[64];
  memset(rec, 7, sizeof(rec));
  size_t off = 0;
  double t0 = now_s();
  for (uint32_t i = 0; i < n; i++) {
    if (off + size > sizeof(ring)) off = 0;
    memcpy(ring + off, rec, size);
    off += size;
    __asm__ volatile("" ::"r"(ring) : "memory");
  }
  return (now_s() - t0) * 1e9 / n;
}

static double best(double (*fn)(void)) {
  double b = 1e30;
  for (int i = 0; i < REPEATS; i++) {
    double v = fn();
    if (v < b) b = v;
  }
  return b;
}

static double te_ns, te_memcpy, flow_ns, raw_ns, raw_memcpy, off_ns;

static void *measure(void *arg) {
  (void)arg;
  te_ns = best(run_track_events);
  flow_ns = best(run_flow_events);
  te_memcpy = run_memcpy(21, EVENTS); /* ~21-byte event packets */
  raw_ns = best(run_raw);
  raw_memcpy = run_memcpy(64, RAW_PACKETS);
  off_ns = best(run_disabled);
  return NULL;
}

/* --- beside Perfetto's SDK (PERFETTO_BIN) --------------------------------- */

#define REF_ROUNDS 5
#define REF_EVENTS 2000000u

static const char *g_producer_sock;

/* Perfetto's SDK writing REF_EVENTS slice begins and ends into the same
 * session (its track_event data source, category "bench"), through the
 * same tracegated: its ns_per_event, or 0 when it could not be run. */
static double run_ref_producer(const char *bin) {
  char cmd[1024];
  snprintf(cmd, sizeof(cmd),
           "PERFETTO_PRODUCER_SOCK_NAME=%s %s/ref_producer --count %u "
           "--mode slice --category bench --shmem-kb 4096",
           g_producer_sock, bin, REF_EVENTS);
  FILE *p = popen(cmd, "r");
  if (!p) return 0;
  char line[256];
  double ns = 0;
  while (fgets(line, sizeof(line), p))
    if (sscanf(line, "ns_per_event=%lf", &ns) == 1) break;
  while (fgets(line, sizeof(line), p)) {
  }
  if (pclose(p) != 0) return 0;
  return ns;
}

/* Ours and Perfetto's in turns, so that both see the same load on a
 * shared machine: each round's ratio, then the spread. */
static void *versus_perfetto(void *arg) {
  const char *bin = arg;
  double lo = 1e30, hi = 0, ours_best = 1e30, ref_best = 1e30;
  double clo = 1e30, chi = 0;
  for (int r = 0; r < REF_ROUNDS; r++) {
    double clock = run_clock();
    double ours = run_track_events();
    double ref = run_ref_producer(bin);
    if (ref <= 0) {
      fprintf(stderr, "bench_agent: %s/ref_producer did not run\n", bin);
      return NULL;
    }
    double x = ours / ref, xc = clock / ref;
    printf("  round %d: ours %6.1f ns/event (its clock read alone %5.1f), "
           "Perfetto's SDK %6.1f: x%.3f (the clock alone x%.3f)\n",
           r + 1, ours, clock, ref, x, xc);
    if (x < lo) lo = x;
    if (x > hi) hi = x;
    if (xc < clo) clo = xc;
    if (xc > chi) chi = xc;
    if (ours < ours_best) ours_best = ours;
    if (ref < ref_best) ref_best = ref;
  }
  printf("  track event vs Perfetto's SDK (ref_producer): x%.3f-x%.3f over "
         "%d rounds, best against best x%.3f  target <= 0.10\n",
         lo, hi, REF_ROUNDS, ours_best / ref_best);
  printf("  of which the clock read alone: x%.3f-x%.3f of Perfetto's event\n",
         clo, chi);
  return NULL;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_agent\n"
          "  The agent's public API (track events, raw 64-byte packets, a "
          "disabled\n"
          "  category check) with a real tracegated draining, in ns per "
          "event next to\n"
          "  a memcpy of the same bytes (best of %d). Takes no arguments.\n",
          REPEATS);
}

int main(int argc, char **argv) {
  int parsed =
      bench_args_parse("bench_agent", argc, argv, NULL, 0, usage, NULL);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  test_service_t ts;
  if (test_service_start(&ts) < 0) {
    fprintf(stderr, "bench_agent: cannot start tracegated\n");
    return 1;
  }
  static tg_category_t *const cats[] = {&cat_bench, &cat_off};
  tg_track_event_register(cats, 2);
  tg_ds_options_t o = {.name = "bench.raw"};
  tg_ds_register(&o, &g_raw);
  tg_agent_options_t ao = {.socket_path = ts.producer_sock,
                           .producer_name = "bench_agent",
                           .smb_size_hint = 4u << 20,
                           .on_smb_full = TG_AGENT_FULL_STALL};
  if (tg_agent_init(&ao) < 0 || tg_agent_wait_connected(10000) < 0) {
    fprintf(stderr, "bench_agent: the agent did not connect\n");
    test_service_stop(&ts);
    return 1;
  }

  /* One session: a 64 MiB ring, track_event with only "bench" enabled,
   * and the raw data source. */
  raw_consumer_t c;
  if (bench_session_start("bench_agent", &ts, &c, "bench.raw", &cat_bench,
                          g_raw) < 0)
    return 1;

  /* On a thread of its own: when it exits, its writers are released and
   * their counts reach the agent's stats. */
  pthread_t th;
  pthread_create(&th, NULL, measure, NULL);
  pthread_join(th, NULL);
  const char *perfetto_bin = getenv("PERFETTO_BIN");
  if (perfetto_bin && *perfetto_bin) {
    g_producer_sock = ts.producer_sock;
    printf("bench_agent: track events, ours and Perfetto's SDK in turns\n");
    pthread_create(&th, NULL, versus_perfetto, (void *)perfetto_bin);
    pthread_join(th, NULL);
  } else {
    printf("bench_agent: PERFETTO_BIN not set: no comparison with "
           "Perfetto's SDK\n");
  }

  raw_consumer_disable(&c, 20000);
  Perfetto__Protos__GetTraceStatsResponse *st = raw_consumer_stats(&c);
  raw_consumer_close(&c);
  tg_agent_stats_t as;
  tg_agent_shutdown();
  tg_agent_get_stats(&as);
  test_service_stop(&ts);

  printf("bench_agent (best of %d, public API, real tracegated draining)\n",
         REPEATS);
  printf("  track event (slice begin or end, interned name): %6.1f ns/event, "
         "%5.1f M events/s; memcpy of 21 B: %4.1f ns (x%.1f)  target <= 30 ns\n",
         te_ns, 1e3 / te_ns, te_memcpy, te_ns / te_memcpy);
  printf("  the same pairs, each begin with a flow id:       %6.1f ns/event "
         "(x%.2f of the plain pairs)\n",
         flow_ns, flow_ns / te_ns);
  printf("  raw 64-byte packet:                               %6.1f ns/packet, "
         "%5.1f M packets/s, %6.0f MB/s; memcpy: %4.1f ns (x%.1f)\n",
         raw_ns, 1e3 / raw_ns, 64e3 / raw_ns, raw_memcpy, raw_ns / raw_memcpy);
  printf("  disabled category check:                          %6.2f ns  target "
         "<= 1 ns\n",
         off_ns);
  printf("  agent: %" PRIu64 " packets written, %" PRIu64 " dropped, %" PRIu64
         " chunks committed, %" PRIu64 " stalls\n",
         as.packets_written, as.packets_dropped, as.chunks_committed,
         as.stalls);
  if (st) perfetto__protos__get_trace_stats_response__free_unpacked(st, NULL);
  return 0;
}
