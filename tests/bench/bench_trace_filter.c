/* Perfetto's packet filter (service/trace_filter.h) on the read path: ns
 * per packet and MB/s of tg_trace_filter_run() on track-event-like
 * packets (varints, a nested message two levels deep, a name string),
 * next to a memcpy of the same bytes (CPU time, not wall time), for three
 * filters: one that keeps
 * every field, one that drops half, and one whose string fields go
 * through an atrace string rule (the bugreport configs' kind).
 *
 *   bench_trace_filter [PACKETS [PACKET_BYTES]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "service/trace_filter.h"
#include "tests/service/filter_bytecode_gen.h"

#define W(id, op) FBC_WORD(id, op)

/* CPU time: on a machine shared with other builds, wall time would count
 * their turns too. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* TracePacket {8: ts, 10: seq, 11: TrackEvent {1 type, 2: name string,
 * 3: DebugAnnotation {1 name, 2 int}...}} filled to about |n| bytes. */
static size_t make_packet(uint8_t *p, size_t n) {
  uint8_t ev[16384];
  size_t e = 0;
  ev[e++] = 0x08; ev[e++] = 1;
  static const char name[] = "B|1234|binder transaction pw=hunter2";
  ev[e++] = 0x12; ev[e++] = sizeof(name) - 1;
  memcpy(ev + e, name, sizeof(name) - 1);
  e += sizeof(name) - 1;
  while (e + 40 < n && e + 40 < sizeof(ev)) {
    ev[e++] = 0x1a; ev[e++] = 15;
    ev[e++] = 0x0a; ev[e++] = 8; memcpy(ev + e, "arg_name", 8); e += 8;
    ev[e++] = 0x10; ev[e++] = 0xe8; ev[e++] = 0x07; ev[e++] = 0x18; ev[e++] = 5;
  }
  size_t k = 0;
  p[k++] = 0x40; k += fbc_put_varint(p + k, 123456789);
  p[k++] = 0x50; p[k++] = 7;
  p[k++] = 0x5a; k += fbc_put_varint(p + k, (uint32_t)e);
  memcpy(p + k, ev, e);
  return k + e;
}

static tg_trace_filter_t *filter(const uint32_t *w, size_t n, int policy) {
  uint8_t code[256];
  tg_filter_bytecode_t bc;
  tg_string_filter_t *sf = NULL;
  if (policy) {
    sf = tg_string_filter_new();
    if (!sf || tg_string_filter_add_rule(sf, policy, "pw=(\\w+)", "binder", NULL, 0))
      exit(1);
  }
  const uint32_t root[] = {1};
  tg_trace_filter_t *f;
  if (tg_filter_bytecode_load(&bc, code, fbc_encode(w, n, code), NULL, 0, NULL, 0) ||
      tg_trace_filter_new(&f, &bc, sf, root, 1, NULL, 0))
    exit(1);
  return f;
}

static void run(const char *what, tg_trace_filter_t *f, const uint8_t *pkt,
                size_t len, uint64_t packets) {
  const uint8_t *sl[1] = {pkt}, *out;
  size_t ln[1] = {len};
  long got = 0;
  double t0 = now_s();
  for (uint64_t i = 0; i < packets; i++) got = tg_trace_filter_run(f, sl, ln, 1, &out);
  double dt = now_s() - t0;
  printf("%-22s %6zu B -> %6ld B  %7.1f ns/packet  %7.0f MB/s\n", what, len, got,
         dt * 1e9 / (double)packets, (double)len * (double)packets / dt / 1e6);
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_trace_filter [PACKETS [PACKET_BYTES]]\n");
}

int main(int argc, char **argv) {
  uint64_t packets = 1000000, bytes = 200;
  const bench_arg_t args[] = {{"PACKETS", 1, 1ull << 32, &packets},
                              {"PACKET_BYTES", 64, 16000, &bytes}};
  int rv = bench_args_parse("bench_trace_filter", argc, argv, args, 2, usage, NULL);
  if (rv) return rv < 0 ? 2 : 0;
  uint8_t *pkt = malloc(bytes + 64), *copy = malloc(bytes + 64);
  if (!pkt || !copy) return 1;
  size_t len = make_packet(pkt, (size_t)bytes);
  /* Trace {1: TracePacket {8, 10 simple; 11: TrackEvent {1 simple,
   * 2: string, 3: DebugAnnotation {1, 2, 3 simple}}}}. */
  const uint32_t keep[] = {W(1, FBC_NESTED), 1, W(0, FBC_EOM),
                           W(8, FBC_SIMPLE), W(10, FBC_SIMPLE), W(11, FBC_NESTED), 2, W(0, FBC_EOM),
                           W(1, FBC_SIMPLE), W(2, FBC_STRING), W(3, FBC_NESTED), 3, W(0, FBC_EOM),
                           W(1, FBC_RANGE), 3, W(0, FBC_EOM)};
  const uint32_t half[] = {W(1, FBC_NESTED), 1, W(0, FBC_EOM),
                           W(8, FBC_SIMPLE), W(11, FBC_NESTED), 2, W(0, FBC_EOM),
                           W(2, FBC_SIMPLE), W(3, FBC_NESTED), 3, W(0, FBC_EOM),
                           W(2, FBC_SIMPLE), W(0, FBC_EOM)};
  double t0 = now_s();
  for (uint64_t i = 0; i < packets; i++) {
    memcpy(copy, pkt, len);
    __asm__ volatile("" ::"r"(copy) : "memory");
  }
  double dt = now_s() - t0;
  printf("%-22s %6zu B            %7.1f ns/packet  %7.0f MB/s\n", "memcpy", len,
         dt * 1e9 / (double)packets, (double)len * (double)packets / dt / 1e6);
  tg_trace_filter_t *fk = filter(keep, sizeof(keep) / 4, 0);
  tg_trace_filter_t *fh = filter(half, sizeof(half) / 4, 0);
  tg_trace_filter_t *fs = filter(keep, sizeof(keep) / 4,
                                 TG_SFP_ATRACE_REPEATED_SEARCH_REDACT_GROUPS);
  run("filter, keep all", fk, pkt, len, packets);
  run("filter, drop half", fh, pkt, len, packets);
  run("filter + string rule", fs, pkt, len, packets);
  tg_trace_filter_free(fk);
  tg_trace_filter_free(fh);
  tg_trace_filter_free(fs);
  free(pkt);
  free(copy);
  return 0;
}
