/* SPDX-License-Identifier: Apache-2.0 */
/* tracegate-otlp's cost per span on one core (issue 81: >= 200,000 spans
 * per second per core into the ring), against a real tracegated draining.
 *
 * One thread, in turns:
 *   - protobuf requests (513 spans each: beta's server span and its child
 *     256 times over, one client span; tests/otlp/otlp_bodies.c) decoded
 *     and written through the receiver's writer into the ring (the data
 *     source the program uses, here "bench.otlp");
 *   - the same through OTLP/JSON (3 spans a request: the JSON body is the
 *     small one, so this includes jansson's per-request cost);
 *   - protobuf decoding alone (a sink that takes and writes nothing);
 *   - the same slices written through the agent's C API instead
 *     (TG_SLICE_BEGIN with the span's attributes and a flow, an instant
 *     for the event, TG_SLICE_END): what an app linking the agent pays;
 * plus the bytes each span takes in the ring (counted by a writer into
 * memory). Best of 3 each. The producer stalls rather than drops, so the
 * figure includes waiting for the service when it falls behind. HTTP is
 * not in these.
 *
 * Then, with node and OpenTelemetry's JavaScript packages (deploy/deps.sh:
 * OTLP_JS_DIR, default /var/cache/tracegate/otlp-js), the rate the JS SDK
 * can send beside it: otlp_js_bench.js makes JS_SPANS spans through a
 * BatchSpanProcessor and the protobuf exporter into the real
 * tracegate-otlp program, recording into a ring; printed are node's
 * spans/s and CPU per span, and the receiver's spans per CPU-second with
 * HTTP included, and how many of the spans it took. Without node or the
 * packages the row says so. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/otlp/otlp_decode.h"
#include "agent/otlp/otlp_write.h"
#include "bench_args.h"
#include "bench_children.h"
#include "bench_session.h"
#include "otlp_bodies.h"
#include "test_service.h"
#include "tracegate/agent.h"
#include "tracegate/track_event.h"

#define COPIES 256
#define REQUESTS 400
#define JSON_REQUESTS 20000
#define REPEATS 3
#define GOAL 200000.0
#define JS_SPANS 100000

#ifndef OTLP_PATH
#error "OTLP_PATH must name the tracegate-otlp binary"
#endif
#ifndef JS_BENCH
#error "JS_BENCH must name otlp_js_bench.js"
#endif
#define NODE "/usr/bin/node"

static TG_CATEGORY(cat_bench, "bench");
static tg_ds_t *g_ds;

static unsigned ds_targets(void *ctx) {
  (void)ctx;
  return tg_ds_enabled_mask(g_ds);
}
static tg_pbw_t *ds_begin(void *ctx, unsigned inst) {
  (void)ctx;
  return tg_ds_packet_begin(g_ds, inst);
}
static void ds_end(void *ctx, unsigned inst) {
  (void)ctx;
  tg_ds_packet_end(g_ds, inst);
}

/* A destination in memory that counts the bytes of every packet. */
typedef struct mem_out {
  uint8_t buf[1u << 16];
  tg_pbw_t w;
  uint64_t bytes;
} mem_out_t;
static unsigned mem_targets(void *ctx) {
  (void)ctx;
  return 1;
}
static tg_pbw_t *mem_begin(void *ctx, unsigned inst) {
  (void)inst;
  mem_out_t *m = ctx;
  tg_pbw_init(&m->w, m->buf, sizeof(m->buf), NULL, NULL);
  return &m->w;
}
static void mem_end(void *ctx, unsigned inst) {
  (void)inst;
  mem_out_t *m = ctx;
  m->bytes += tg_pbw_written(&m->w) + 3; /* + the packet's tag and size */
}

static int null_res(void *ctx, const otlp_resource_t *r) {
  (void)ctx;
  (void)r;
  return 0;
}
static int null_span(void *ctx, const otlp_span_t *s, bool *rejected) {
  (void)s;
  (*(uint64_t *)ctx)++;
  *rejected = false;
  return 0;
}

static uint8_t *g_pb;
static size_t g_pb_len;
static char *g_json;
static otlp_writer_t g_writer;

/* Spans per second of |requests| decodes of |body| into |sink|. */
static double run_decode(const uint8_t *body, size_t len, bool json,
                         unsigned requests, otlp_writer_t *w,
                         const otlp_sink_t *sink) {
  uint64_t spans = 0;
  double t0 = bench_wall_s();
  for (unsigned i = 0; i < requests; i++) {
    otlp_result_t res;
    if (w) otlp_writer_begin(w, otlp_boot_offset());
    int rv = json ? otlp_decode_json(body, len, sink, &res)
                  : otlp_decode_pb(body, len, sink, &res);
    if (rv < 0) {
      fprintf(stderr, "bench_otlp: decode failed: %d\n", rv);
      exit(1);
    }
    spans += res.spans;
  }
  return (double)spans / (bench_wall_s() - t0);
}

static double run_pb_ring(void) {
  otlp_sink_t k = otlp_writer_sink(&g_writer);
  return run_decode(g_pb, g_pb_len, false, REQUESTS, &g_writer, &k);
}
static double run_json_ring(void) {
  otlp_sink_t k = otlp_writer_sink(&g_writer);
  return run_decode((const uint8_t *)g_json, strlen(g_json), true,
                    JSON_REQUESTS, &g_writer, &k);
}
static double run_pb_decode_only(void) {
  uint64_t n = 0;
  otlp_sink_t k = {.resource = null_res, .span = null_span, .ctx = &n};
  return run_decode(g_pb, g_pb_len, false, REQUESTS, NULL, &k);
}

/* The same slices as beta's spans through the agent's API: a server span
 * with its attributes, flows, an event and its end, then the child. */
static double run_api(void) {
  uint64_t n = (uint64_t)REQUESTS * (2 * COPIES + 1);
  double t0 = bench_wall_s();
  for (uint64_t i = 0; i < n; i += 2) {
    TG_SLICE_BEGIN(cat_bench, "serve /a", TG_ARG_STR("otel.kind", "server"),
                   TG_ARG_STR("otel.trace_id", "4bf92f3577b34da6a3ce929d0cf0e4f7"),
                   TG_ARG_STR("otel.span_id", "1122334455667788"),
                   TG_ARG_STR("otel.parent_span_id", "00f067aa0ba902b7"),
                   TG_ARG_STR("otel.status_code", "error"),
                   TG_ARG_STR("otel.status_message", "boom"), TG_FLOW(i + 1),
                   TG_TERMINATING_FLOW(i + 2));
    TG_INSTANT(cat_bench, "retry", TG_ARG_INT("attempt", 2));
    TG_SLICE_BEGIN(cat_bench, "db.query", TG_ARG_DOUBLE("db.rows", 3.5),
                   TG_ARG_BOOL("cached", true),
                   TG_ARG_STR("otel.kind", "internal"),
                   TG_ARG_STR("otel.trace_id", "4bf92f3577b34da6a3ce929d0cf0e4f7"),
                   TG_ARG_STR("otel.span_id", "99aabbccddeeff01"),
                   TG_ARG_STR("otel.parent_span_id", "1122334455667788"),
                   TG_FLOW(i + 3));
    TG_SLICE_END(cat_bench);
    TG_SLICE_END(cat_bench);
  }
  return (double)n / (bench_wall_s() - t0);
}

static double best(double (*fn)(void)) {
  double b = 0;
  for (int i = 0; i < REPEATS; i++) {
    double v = fn();
    if (v > b) b = v;
  }
  return b;
}

static double pb_ring, json_ring, pb_only, api;
static void *measure(void *arg) {
  (void)arg;
  pb_ring = best(run_pb_ring);
  json_ring = best(run_json_ring);
  pb_only = best(run_pb_decode_only);
  api = best(run_api);
  return NULL;
}

/* What otlp_js_bench.js said, and the receiver's CPU meanwhile. */
typedef struct js_run {
  double wall_s, node_cpu_s, receiver_cpu_s;
  unsigned long long spans, accepted, refused;
} js_run_t;

/* The JS SDK into the real receiver, recording into a ring of |ts|. 0;
 * 1 when node or the packages are missing (said); -1 on a failure (said). */
static int run_js(const test_service_t *ts, js_run_t *out) {
  const char *dir = getenv("OTLP_JS_DIR");
  if (!dir || !*dir) dir = "/var/cache/tracegate/otlp-js";
  char modules[512], probe[640];
  snprintf(modules, sizeof(modules), "%s/node_modules", dir);
  snprintf(probe, sizeof(probe),
           "%s/@opentelemetry/exporter-trace-otlp-proto/package.json", modules);
  struct stat st;
  if (access(NODE, X_OK) != 0 || stat(probe, &st) != 0) {
    printf("  OTel JS SDK's exporter: skipped, %s or the packages in %s are "
           "missing (deploy/deps.sh installs them)\n", NODE, modules);
    return 1;
  }
  int p[2];
  if (pipe(p) != 0) return -1;
  char fd[16];
  snprintf(fd, sizeof(fd), "%d", p[1]);
  const char *rargv[] = {OTLP_PATH, "--socket", ts->producer_sock, "--port",
                         "0", "--ready-fd", fd, NULL};
  pid_t rcv = bench_spawn(rargv, p[1], NULL);
  close(p[1]);
  char ready[64];
  int ok = rcv > 0 && bench_read_ready(p[0], 10000, ready, sizeof(ready)) == 0;
  close(p[0]);
  if (!ok) {
    fprintf(stderr, "bench_otlp: tracegate-otlp did not start\n");
    return -1;
  }
  raw_consumer_t c;
  simple_cfg_t sc;
  raw_consumer_connect(&c, ts);
  simple_cfg_init(&sc, 64 * 1024, 1 /* RING_BUFFER */, "tracegate.otlp");
  raw_consumer_enable(&c, &sc.cfg, -1);

  char url[64], log[128], count[16];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", atoi(ready + 6));
  snprintf(log, sizeof(log), "%s/js_bench.out", ts->dir);
  snprintf(count, sizeof(count), "%d", JS_SPANS);
  setenv("NODE_PATH", modules, 1);
  const char *nargv[] = {NODE, JS_BENCH, url, count, NULL};
  double cpu0 = bench_proc_cpu_s(rcv);
  pid_t node = bench_spawn(nargv, -1, log);
  double node_cpu;
  int status = bench_wait_cpu(node, 300000, &node_cpu);
  out->receiver_cpu_s = bench_proc_cpu_s(rcv) - cpu0;
  bench_stop(rcv, 10000);
  raw_consumer_disable(&c, 20000);
  raw_consumer_close(&c);
  char line[512] = "";
  FILE *f = fopen(log, "re");
  while (f && fgets(line, sizeof(line), f) && line[0] != '{')
    if (status != 0) fputs(line, stderr); /* node's own words */
  if (f) fclose(f);
  if (status != 0 ||
      sscanf(line, "{\"spans\":%llu,\"wall_s\":%lf,\"cpu_s\":%lf,"
                   "\"accepted\":%llu,\"refused\":%llu}",
             &out->spans, &out->wall_s, &out->node_cpu_s, &out->accepted,
             &out->refused) != 5) {
    fprintf(stderr, "bench_otlp: node failed (status %d): %s\n", status,
            line);
    return -1;
  }
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_otlp\n"
          "  tracegate-otlp's decoders and writer into a real tracegated's "
          "ring, in\n"
          "  spans per second on one core, beside the same slices through "
          "the agent's\n"
          "  API (best of %d); then OpenTelemetry's JavaScript SDK sending into the\n"
          "  real tracegate-otlp, when node and its packages are there. Takes no\n"
          "  arguments.\n",
          REPEATS);
}

int main(int argc, char **argv) {
  int parsed = bench_args_parse("bench_otlp", argc, argv, NULL, 0, usage, NULL);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  bench_children_init();
  bench_deadline(900);
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  uint64_t base = (uint64_t)rt.tv_sec * 1000000000u;
  g_pb = otlp_test_pb_body(base, COPIES, &g_pb_len);
  g_json = otlp_test_json_body(base);
  if (!g_pb || !g_json) return 1;

  /* Bytes per span, in memory. */
  static mem_out_t mem;
  otlp_out_t mo = {mem_targets, mem_begin, mem_end, &mem};
  otlp_writer_t mw;
  otlp_writer_init(&mw, &mo);
  otlp_sink_t mk = otlp_writer_sink(&mw);
  run_decode(g_pb, g_pb_len, false, 1, &mw, &mk);
  double bytes_per_span = (double)mem.bytes / (double)mw.spans;

  test_service_t ts;
  if (test_service_start(&ts) < 0) {
    fprintf(stderr, "bench_otlp: cannot start tracegated\n");
    return 1;
  }
  static tg_category_t *const cats[] = {&cat_bench};
  tg_track_event_register(cats, 1);
  tg_ds_options_t o = {.name = "bench.otlp"};
  tg_ds_register(&o, &g_ds);
  otlp_out_t out = {ds_targets, ds_begin, ds_end, NULL};
  otlp_writer_init(&g_writer, &out);
  tg_agent_options_t ao = {.socket_path = ts.producer_sock,
                           .producer_name = "bench_otlp",
                           .smb_size_hint = 16u << 20,
                           .on_smb_full = TG_AGENT_FULL_STALL};
  if (tg_agent_init(&ao) < 0 || tg_agent_wait_connected(10000) < 0) {
    fprintf(stderr, "bench_otlp: the agent did not connect\n");
    test_service_stop(&ts);
    return 1;
  }
  raw_consumer_t c;
  if (bench_session_start("bench_otlp", &ts, &c, "bench.otlp", &cat_bench,
                          g_ds) < 0)
    return 1;
  pthread_t th;
  pthread_create(&th, NULL, measure, NULL);
  pthread_join(th, NULL);
  raw_consumer_disable(&c, 20000);
  raw_consumer_close(&c);
  tg_agent_stats_t as;
  tg_agent_shutdown();
  tg_agent_get_stats(&as);
  js_run_t js = {0};
  int js_rv = run_js(&ts, &js);
  test_service_stop(&ts);

  printf("bench_otlp (best of %d, one core, real tracegated draining)\n",
         REPEATS);
  printf("  protobuf, decoded and written into the ring: %9.0f spans/s  "
         "goal >= %.0f (%s)\n",
         pb_ring, GOAL, pb_ring >= GOAL ? "met" : "NOT met");
  printf("  OTLP/JSON, decoded and written (3 a request): %9.0f spans/s\n",
         json_ring);
  printf("  protobuf decoding alone:                      %9.0f spans/s\n",
         pb_only);
  printf("  the same slices through the agent's C API:    %9.0f spans/s\n",
         api);
  printf("  ring bytes per span (protobuf request mix):   %9.1f\n",
         bytes_per_span);
  printf("  agent: packets written %llu, dropped %llu, stalls %llu\n",
         (unsigned long long)as.packets_written,
         (unsigned long long)as.packets_dropped,
         (unsigned long long)as.stalls);
  if (js_rv == 0) {
    printf("  OTel JS SDK sending (batches of 512, protobuf) into the real "
           "receiver:\n");
    printf("    node: %9.0f spans/s, %9.0f spans per CPU-second (flushed "
           "every 4096)\n",
           (double)js.spans / js.wall_s, (double)js.spans / js.node_cpu_s);
    printf("    tracegate-otlp, HTTP included: %9.0f spans per CPU-second "
           "(%.2f s for %llu)\n",
           js.receiver_cpu_s > 0 ? (double)js.spans / js.receiver_cpu_s : 0.0,
           js.receiver_cpu_s, js.spans);
    printf("    taken %llu of %llu, refused %llu%s\n", js.accepted, js.spans,
           js.refused, js.accepted == js.spans ? "" : "  (LOST SPANS)");
  }
  free(g_pb);
  free(g_json);
  return js_rv < 0 || (js_rv == 0 && js.accepted != js.spans) ? 1 : 0;
}
