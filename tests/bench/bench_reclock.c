/* The re-clocking pass over a merged file (consumer/fleet/reclock.h;
 * docs/merge.md, "Clocks from requests"): its MB/s beside a plain copy of
 * the same bytes. The file is made by the merge unit in its joined mode:
 * two hosts, REQUESTS requests from one's client slices (absolute times)
 * to the other's server slices (its incremental clock 64), the server's
 * estimate 400 us off and drifting 20 ppm, over 30 s. Both reads and the
 * write go through memory, so what is measured is the pass's CPU.
 *
 *   bench_reclock [REQUESTS]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "common/buf.h"
#include "consumer/fleet/merge.h"
#include "consumer/fleet/reclock.h"
#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"
#include "tests/consumer/app_packets.h"

#define MS 1000000ll
#define SELF_BOOT (100000 * MS)
#define T0 (150000 * MS)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_reclock [REQUESTS]\n  the reclock pass's MB/s "
             "over a merged file of two hosts' requests (default 200000), "
             "beside a copy\n");
}

typedef struct gen {
  tg_merge_t m;
  tg_merge_host_t h[2];
  uint8_t buf[512];
  tg_pbw_t w;
  int err;
} gen_t;

static tg_pbw_t *begin(gen_t *g) {
  tg_pbw_init(&g->w, g->buf, sizeof(g->buf), NULL, NULL);
  return &g->w;
}

/* Host |host|'s packet just built, on its sequence 3. */
static void put(gen_t *g, size_t host) {
  tg_pbw_append_varint(&g->w, 10, 3);
  if (tg_merge_packet(&g->m, &g->h[host], g->buf,
                      (size_t)tg_pbw_written(&g->w)) < 0)
    g->err = 1;
}

static void event(gen_t *g, size_t host, uint64_t ts, int type, uint64_t uuid,
                  int64_t flow) {
  ap_event(begin(g), ts, type, uuid, NULL, flow);
  put(g, host);
}

static int make(tg_buf_t *out, uint64_t requests) {
  static gen_t g;
  static const int64_t est[2] = {2 * MS, 7 * MS};
  tg_merge_init(&g.m, ap_collect, out);
  tg_merge_set_app_tracks(&g.m, TG_MERGE_APP_JOINED);
  tg_merge_self_t self;
  memset(&self, 0, sizeof(self));
  snprintf(self.hostname, sizeof(self.hostname), "collector");
  for (int c = 0; c < TG_CLK_N; c++) self.clocks[c] = SELF_BOOT;
  if (tg_merge_head(&g.m, &self) < 0) return -1;
  for (size_t i = 0; i < 2; i++) {
    tg_merge_host_init(&g.h[i], i);
    tg_fleet_host_report_t h;
    memset(&h, 0, sizeof(h));
    for (int c = 0; c < TG_CLK_N; c++) {
      h.clock.best.before[c] = SELF_BOOT;
      h.clock.best.after[c] = SELF_BOOT + 100000;
      h.clock.best.remote[c] = (uint64_t)(SELF_BOOT + 50000 + est[i]);
    }
    h.clock.first = h.clock.best;
    h.clock.estimates = 1;
    if (tg_merge_host_preamble(&g.m, &g.h[i], &h, i ? "beta" : "alpha") < 0)
      return -1;
  }
  ap_process(begin(&g), 0xA0, 300, "client");
  put(&g, 0);
  ap_process(begin(&g), 0xB0, 300, "server");
  put(&g, 1);
  int64_t every = 30000 * MS / (int64_t)requests;
  /* Beta's clock: 400 us short of its estimate, drifting 20 ppm. */
#define BETA(t) (est[1] - 400000 - ((t) - T0) / 50000)
  uint64_t prev = (uint64_t)(T0 + BETA(T0));
  ap_clock64_defaults(begin(&g), 0xB0);
  put(&g, 1);
  ap_clock64_snapshot(begin(&g), prev);
  put(&g, 1);
  for (int64_t i = 0; i < (int64_t)requests && !g.err; i++) {
    int64_t at = T0 + i * every;
    uint64_t a = (uint64_t)(at + est[0]);
    event(&g, 0, a, SLICE_BEGIN, 0xA0, i + 1);
    uint64_t b = (uint64_t)(at + 10000 + BETA(at + 10000));
    event(&g, 1, b - prev, SLICE_BEGIN, 0, -(i + 1));
    event(&g, 1, 20000, SLICE_END, 0, 0);
    prev = b + 20000;
    event(&g, 0, a + 50000, SLICE_END, 0xA0, 0);
  }
#undef BETA
  for (size_t i = 0; i < 2; i++) tg_merge_host_free(&g.h[i]);
  tg_merge_free(&g.m);
  return g.err ? -1 : 0;
}

int main(int argc, char **argv) {
  uint64_t requests = 200000;
  const bench_arg_t args[] = {{"REQUESTS", 100, 10000000, &requests}};
  int rv = bench_args_parse("bench_reclock", argc, argv, args, 1, usage, NULL);
  if (rv) return rv < 0 ? 2 : 0;
  tg_buf_t file;
  tg_buf_init(&file, 0);
  if (make(&file, requests) < 0) {
    fprintf(stderr, "bench_reclock: could not make the merged file\n");
    return 1;
  }
  size_t n = tg_buf_size(&file);
  double mb = (double)n / 1e6;
  uint8_t *copy = malloc(n);
  if (!copy) return 1;
  double t = now_s();
  memcpy(copy, tg_buf_begin(&file), n);
  double copy_s = now_s() - t;
  tg_reclock_mem_t m;
  tg_reclock_io_t io = tg_reclock_mem_io(&m, tg_buf_begin(&file), n, 0);
  tg_reclock_host_t hosts[2] = {{.bound_ns = 50000}, {.bound_ns = 500000}};
  tg_reclock_stats_t st;
  t = now_s();
  rv = tg_reclock_run(&io, hosts, 2, &st);
  double pass_s = now_s() - t;
  if (rv < 0 || !st.rewritten) {
    fprintf(stderr, "bench_reclock: the pass failed (%d)\n", rv);
    return 1;
  }
  printf("merged file: %.1f MB, %llu requests, %llu packets\n", mb,
         (unsigned long long)requests, (unsigned long long)st.packets);
  printf("copy:   %8.0f MB/s\n", mb / (copy_s > 0 ? copy_s : 1e-9));
  printf("reclock: %7.0f MB/s (two reads and a write; %.2f s CPU; server "
         "moved %.1f us, %.2f ppm; %llu packets re-timed)\n",
         mb / pass_s, pass_s, hosts[1].offset_us, hosts[1].drift_ppm,
         (unsigned long long)hosts[1].packets_moved);
  free(copy);
  tg_reclock_mem_free(&m);
  tg_buf_free(&file);
  return 0;
}
