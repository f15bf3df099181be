/* Fan-out: one collector recording many hosts at once through their relays.
 *
 * HOSTS service+relay pairs on loopback (tracegated + tracegate-relay
 * children, mutual TLS with certificates made by deploy/certs/tg-certs),
 * each with one tracegate-emit producer writing RATE packets of SIZE bytes
 * per second. This process is the collector: one uv loop, one TLS
 * connection per host with the consumer library, as `tracegate record -H
 * ... -H ...` does. Measured:
 *
 * 1. Time to tracing (target < 250 ms): with every connection bound and
 *    every producer registered, ObserveEvents(ALL_DATA_SOURCES_STARTED) and
 *    EnableTracing go to all hosts at once; a host is tracing when its
 *    service reports that every data source of the session has started
 *    (the agent does not ask for will_notify_on_start, so that is when the
 *    service has sent StartDataSource to every producer). The connect +
 *    handshake + bind phase before it is timed apart, and so is, for
 *    information, the first producer packet read back from each host
 *    (which also counts the agent's start and commit latency).
 * 2. Aggregate MB/s while streaming for SECONDS with a ReadBuffers to every
 *    host each READ_PERIOD_MS (at most one in flight per host), next to
 *    what the producers offered, the loss the services counted, how idle
 *    the machine was, and CPU per GB of the collector, the relays, the
 *    services and the producers. On 2 cores the producers and services
 *    share the machine with the collector: the default offered load is
 *    one the box carries; raise RATE to find where it saturates.
 * 3. Collector memory per host (target < 2 MB): (RSS after connecting and
 *    streaming - RSS before connecting) / HOSTS.
 *
 * Then `tracegate record` itself, the real CLI, with a thousand hosts
 * (CLI_HOSTS) in one merged trace: see cli_fanout() below.
 *
 * usage: bench_fanout [HOSTS [SECONDS [RATE [SIZE]]]]  (default 32 5 500 4096)
 *        bench_fanout --cli [HOSTS [SECONDS [RATE]]]   (default 1000 12 100):
 *        only the CLI part; --help says more
 */
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "tracegate/pb_wire.h"
#include "bench_children.h"
#include "bench_remote.h"
#include "test_notice.h"
#include "test_service.h"
#include "tracegate/error.h"
#include "common/log.h"

#ifndef TRACEGATE_EMIT_PATH
#error "TRACEGATE_EMIT_PATH must name the tracegate-emit binary"
#endif
#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

#define MAX_HOSTS 64
#define DS_NAME "tracegate.emit"
#define BUFFER_KB (16 * 1024)
#define READ_PERIOD_MS 100
#define POLL_MS 20
#define PROBE_MS 5
#define STEP_MS 15000 /* bound of each awaited phase */
/* Hard bound of the whole run: DEADLINE_S + SECONDS (55 s by default,
 * for `make bench`). */
#define DEADLINE_S 50
#define TRACING_TARGET_MS 250.0
#define MEMORY_TARGET_KB 2048.0

typedef struct fanout fanout_t;

typedef struct host {
  fanout_t *f;
  unsigned idx;
  test_service_t ts;
  bench_relay_t relay;
  pid_t emit;
  tg_consumer_t *c;
  tg_tls_chan_t *ch;
  bool ready, closed, failed;
  bool querying, has_ds;
  bool tracing;
  double t_tracing_ms; /* since the start */
  bool has_data;
  double t_data_ms; /* first producer packet read, since the start */
  bool reading;
  uint64_t bytes, packets, reads;
  bool stats_done;
  uint64_t written, lost_chunks;
} host_t;

struct fanout {
  uv_loop_t loop;
  uv_timer_t tick;
  unsigned n;
  host_t host[MAX_HOSTS];
  tg_tls_config_t *tls;
  uint8_t *config;
  size_t config_len;
  double t_start_ms;
  bool streaming; /* reads are issued on each tick */
  void (*on_tick)(fanout_t *f);
};

/* --- per host ------------------------------------------------------------------- */

static void fail_host(host_t *h, const char *what, int status,
                      const char *msg) {
  if (!h->failed)
    fprintf(stderr, "bench_fanout: host %u: %s: %s%s%s\n", h->idx, what,
            tg_strerror(status), msg && msg[0] ? ": " : "", msg ? msg : "");
  h->failed = true;
}

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  host_t *h = tg_consumer_data(c);
  if (status) fail_host(h, "connecting", status, msg);
  else h->ready = true;
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  host_t *h = tg_consumer_data(c);
  if (status) fail_host(h, "connection closed", status, msg);
  h->closed = true;
  h->ready = false;
  h->c = NULL;
  tg_tls_chan_free(h->ch);
  h->ch = NULL;
}

static const tg_consumer_cbs_t consumer_cbs = {.on_ready = on_ready,
                                               .on_close = on_close};

static void on_state(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     bool has_more,
                     const Perfetto__Protos__TracingServiceState *st) {
  (void)c;
  (void)has_more;
  host_t *h = ctx;
  h->querying = false;
  if (status) fail_host(h, "QueryServiceState", status, msg);
  else if (st && st->n_data_sources > 0) h->has_ds = true;
}

static void on_events(tg_consumer_t *c, void *ctx, int status, const char *msg,
                      bool has_more,
                      const Perfetto__Protos__ObservableEvents *ev) {
  (void)c;
  (void)has_more;
  host_t *h = ctx;
  if (status) {
    if (status != -ECANCELED) fail_host(h, "ObserveEvents", status, msg);
    return;
  }
  if (ev && ev->has_all_data_sources_started && ev->all_data_sources_started &&
      !h->tracing) {
    h->tracing = true;
    h->t_tracing_ms = bench_now_ms() - h->f->t_start_ms;
  }
}

static void on_ended(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  host_t *h = ctx;
  if (status && status != -ECANCELED)
    fail_host(h, "the session ended", status, msg);
}

/* True for tracegate-emit's packets (TracePacket.for_testing, 900); the
 * service's own packets do not carry it. */
static bool from_producer(const uint8_t *pk, size_t len) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, pk, len);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == 900) return true;
  return false;
}

static int on_packet(tg_consumer_t *c, void *ctx, const uint8_t *pk,
                     size_t len) {
  (void)c;
  host_t *h = ctx;
  h->bytes += len;
  h->packets++;
  if (!h->has_data && from_producer(pk, len)) {
    h->has_data = true;
    h->t_data_ms = bench_now_ms() - h->f->t_start_ms;
  }
  return 0;
}

static void read_next(host_t *h);

static void on_read_done(tg_consumer_t *c, void *ctx, int status,
                         const char *msg) {
  (void)c;
  host_t *h = ctx;
  h->reading = false;
  h->reads++;
  if (status) fail_host(h, "ReadBuffers", status, msg);
}

static void read_next(host_t *h) {
  int rv = tg_consumer_read_buffers(h->c, on_packet, on_read_done, h);
  if (rv < 0) fail_host(h, "ReadBuffers", rv, NULL);
  else h->reading = true;
}

static void on_stats(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st) {
  (void)c;
  host_t *h = ctx;
  h->stats_done = true;
  if (status) {
    fail_host(h, "GetTraceStats", status, msg);
    return;
  }
  for (size_t i = 0; st && i < st->n_buffer_stats; i++) {
    h->written += st->buffer_stats[i]->bytes_written;
    h->lost_chunks += st->buffer_stats[i]->chunks_overwritten +
                      st->buffer_stats[i]->chunks_discarded;
  }
}

/* --- phases --------------------------------------------------------------------- */

static void on_tick(uv_timer_t *t) {
  fanout_t *f = t->data;
  if (f->on_tick) f->on_tick(f);
}

static void query_ds(fanout_t *f) {
  for (unsigned i = 0; i < f->n; i++) {
    host_t *h = &f->host[i];
    if (h->has_ds || h->querying || !h->ready) continue;
    if (tg_consumer_query_service_state(h->c, false, true, on_state, h) == 0)
      h->querying = true;
  }
}

/* Until a host's first producer packet arrives: a read each PROBE_MS. */
static void probe_reads(fanout_t *f) {
  for (unsigned i = 0; i < f->n; i++) {
    host_t *h = &f->host[i];
    if (!h->has_data && !h->reading && h->ready) read_next(h);
  }
}

static void issue_reads(fanout_t *f) {
  if (!f->streaming) return;
  for (unsigned i = 0; i < f->n; i++) {
    host_t *h = &f->host[i];
    if (!h->reading && h->ready) read_next(h);
  }
}

static bool any_failed(const fanout_t *f) {
  for (unsigned i = 0; i < f->n; i++)
    if (f->host[i].failed) return true;
  return false;
}

#define ALL_HOSTS(name, expr)                                 \
  static bool name(void *arg) {                               \
    fanout_t *f = arg;                                        \
    if (any_failed(f)) return true;                           \
    for (unsigned i = 0; i < f->n; i++) {                     \
      const host_t *h = &f->host[i];                          \
      if (!(expr)) return false;                              \
    }                                                         \
    return true;                                              \
  }
ALL_HOSTS(all_ready, h->ready)
ALL_HOSTS(all_have_ds, h->has_ds)
ALL_HOSTS(all_tracing, h->tracing)
ALL_HOSTS(all_have_data, h->has_data && !h->reading)
ALL_HOSTS(none_reading, !h->reading)
ALL_HOSTS(all_stats, h->stats_done)
ALL_HOSTS(all_closed, h->closed)

static bool never(void *arg) {
  (void)arg;
  return false;
}

/* Children's CPU: relays, services, producers. */
typedef struct cpu_split {
  double collector, relays, services, emits;
} cpu_split_t;

static cpu_split_t cpu_now(const fanout_t *f) {
  cpu_split_t c = {bench_proc_cpu_s(0), 0, 0, 0};
  for (unsigned i = 0; i < f->n; i++) {
    c.relays += bench_proc_cpu_s(f->host[i].relay.pid);
    c.services += bench_proc_cpu_s(f->host[i].ts.pid);
    c.emits += bench_proc_cpu_s(f->host[i].emit);
  }
  return c;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int start_children(fanout_t *f, const char *dir, uint64_t rate,
                          uint64_t size) {
  for (unsigned i = 0; i < f->n; i++) {
    host_t *h = &f->host[i];
    h->f = f;
    h->idx = i;
    if (test_service_start(&h->ts) < 0) {
      fprintf(stderr, "bench_fanout: cannot start tracegated %u\n", i);
      return -1;
    }
    bench_adopt(h->ts.pid);
    bench_remove_at_exit(h->ts.dir);
  }
  /* The relays start in parallel. */
  for (unsigned i = 0; i < f->n; i++)
    if (bench_relay_spawn(&f->host[i].relay, dir, i,
                          f->host[i].ts.consumer_sock) < 0)
      return -1;
  for (unsigned i = 0; i < f->n; i++)
    if (bench_relay_wait(&f->host[i].relay, STEP_MS) < 0) return -1;
  char r[24], s[24];
  snprintf(r, sizeof(r), "%" PRIu64, rate);
  snprintf(s, sizeof(s), "%" PRIu64, size);
  for (unsigned i = 0; i < f->n; i++) {
    char log[160], name[32];
    snprintf(log, sizeof(log), "%s/emit%u.log", dir, i);
    snprintf(name, sizeof(name), "emit%u", i);
    const char *argv[] = {TRACEGATE_EMIT_PATH, "--socket",
                          f->host[i].ts.producer_sock, "--name", name,
                          "--rate", r, "--size", s, "--threads", "1",
                          "--log-level", "warn", NULL};
    if ((f->host[i].emit = bench_spawn(argv, -1, log)) < 0) return -1;
  }
  return 0;
}

static int make_config(fanout_t *f) {
  simple_cfg_t sc;
  simple_cfg_init(&sc, BUFFER_KB, 1 /* RING_BUFFER */, DS_NAME);
  f->config_len = perfetto__protos__trace_config__get_packed_size(&sc.cfg);
  f->config = malloc(f->config_len);
  if (!f->config) return -1;
  perfetto__protos__trace_config__pack(&sc.cfg, f->config);
  return 0;
}

static void print_failures(const fanout_t *f, const char *phase) {
  unsigned bad = 0;
  for (unsigned i = 0; i < f->n; i++) bad += f->host[i].failed;
  fprintf(stderr, "bench_fanout: %s: %u of %u hosts failed or timed out\n",
          phase, bad ? bad : f->n, f->n);
}

/* --- tracegate record with a thousand hosts ----------------------------------- *
 *
 * tracegated holds at most 64 sessions, and a thousand service+relay pairs
 * would not fit the machine: hosts are simulated by GROUP_HOSTS sessions
 * on each of ceil(HOSTS / GROUP_HOSTS) tracegated, each with its own
 * tracegate-relay (--max-conns raised) and one tracegate-emit writing RATE
 * 1 KiB packets per second into every session. What the CLI does is what
 * it does with real hosts: one TLS connection, one relay preparation
 * (host info, clock sync, session key, zstd), one session and one
 * recording per -H entry, every one of them at once on one loop. The CLI
 * refuses a host given twice, so the entries of one relay are distinct
 * spellings of 127.0.0.1 (127.00.0.01 ...: inet_aton reads them all as
 * 127.0.0.1), with --tls-server-name for the certificate.
 *
 * Measured, from outside the CLI:
 * 1. All tracing within 1 s of start: the CLI's own "all N hosts tracing,
 *    T after the start" (every recording has sent EnableTracing over a
 *    prepared link), and the wall time from spawning the CLI to that line;
 *    twice against the same relays: cold (an empty --session-cache, a full
 *    TLS handshake per host) and warm (the cache the cold run wrote: every
 *    handshake resumed from a session ticket), each with the CLI's CPU.
 * 2. CLI memory per host <= 200 KB: (VmHWM with HOSTS - VmHWM with one
 *    host) / (HOSTS - 1), both runs identical otherwise.
 * 3. The merged file: its MB, the CLI's MB per CPU-second, next to how
 *    fast this process writes the same number of bytes to the same
 *    directory (1 MiB writes, no fsync, as the CLI writes): the file is
 *    written at disk speed when the CLI's CPU is not the bound.
 * 4. The progress: the number of lines the CLI printed (not one per
 *    host), and its exit status. */

#define CLI_HOSTS 1000
/* Long enough, at this rate, for every host's 128 KiB zstd window to fill:
 * the memory figure is then the steady state's. */
#define CLI_SECONDS 12
#define CLI_RATE 100
#define GROUP_HOSTS 56 /* sessions per tracegated (64 at most) */
#define MAX_GROUPS ((FLEET_HOSTS_MAX + GROUP_HOSTS - 1) / GROUP_HOSTS)
#define FLEET_HOSTS_MAX 1024
/* All hosts tracing after a cold start (full handshakes) and a warm one
 * (resumed from the session cache), on this machine with the bench's
 * relays on the same cores; and the CLI's CPU per host until then. */
#define CLI_TRACING_COLD_TARGET_MS 2000.0
#define CLI_TRACING_WARM_TARGET_MS 1000.0
#define CLI_CPU_COLD_TARGET_MS 1.5
#define CLI_CPU_WARM_TARGET_MS 0.6
#define CLI_MEMORY_TARGET_KB 200.0
#define CLI_SESSION_KB 256

typedef struct group {
  test_service_t ts;
  bench_relay_t relay;
  pid_t emit;
} group_t;

/* The k-th of 64 spellings of 127.0.0.1. */
static void spelling(unsigned k, char *out, size_t n) {
  static const char *const zero[] = {"0", "00", "000", "0000"};
  static const char *const one[] = {"1", "01", "001", "0001"};
  snprintf(out, n, "127.%s.%s.%s", zero[k % 4], zero[(k / 4) % 4],
           one[(k / 16) % 4]);
}

static int start_groups(group_t *g, unsigned ng, const char *dir,
                        uint64_t rate) {
  /* Every host of the fleet is one identity's connection to a few
   * relays: all 128 slots may be that identity's. */
  static const char *const relay_extra[] = {
      "--max-conns", "128", "--max-conns-per-identity", "128", NULL};
  for (unsigned i = 0; i < ng; i++) {
    if (test_service_start(&g[i].ts) < 0) {
      fprintf(stderr, "bench_fanout: cannot start tracegated %u\n", i);
      return -1;
    }
    bench_adopt(g[i].ts.pid);
    bench_remove_at_exit(g[i].ts.dir);
  }
  for (unsigned i = 0; i < ng; i++)
    if (bench_relay_spawn_with(&g[i].relay, dir, 1000 + i, g[i].ts.consumer_sock,
                               relay_extra) < 0)
      return -1;
  for (unsigned i = 0; i < ng; i++)
    if (bench_relay_wait(&g[i].relay, STEP_MS) < 0) return -1;
  char r[24];
  snprintf(r, sizeof(r), "%" PRIu64, rate);
  for (unsigned i = 0; i < ng; i++) {
    char log[160];
    snprintf(log, sizeof(log), "%s/cli-emit%u.log", dir, i);
    const char *argv[] = {TRACEGATE_EMIT_PATH, "--socket", g[i].ts.producer_sock,
                          "--rate", r, "--size", "1024", "--threads", "1",
                          "--log-level", "error", NULL};
    if ((g[i].emit = bench_spawn(argv, -1, log)) < 0) return -1;
  }
  return 0;
}

/* The cold run's sessions stay on the services a while after it (each
 * keeps 56 of its 64): a fresh tracegated and tracegate-emit behind each
 * relay gives the warm run the same room, while the relays, and so their
 * ticket keys, stay as they are. */
static int restart_services(group_t *g, unsigned ng, const char *dir,
                            uint64_t rate) {
  char r[24];
  snprintf(r, sizeof(r), "%" PRIu64, rate);
  for (unsigned i = 0; i < ng; i++) {
    bench_stop(g[i].emit, 5000);
    test_service_terminate(&g[i].ts);
    if (test_service_launch(&g[i].ts) < 0) {
      fprintf(stderr, "bench_fanout: cannot restart tracegated %u\n", i);
      return -1;
    }
    bench_adopt(g[i].ts.pid);
    char log[160];
    snprintf(log, sizeof(log), "%s/cli-emit%u-warm.log", dir, i);
    const char *argv[] = {TRACEGATE_EMIT_PATH, "--socket", g[i].ts.producer_sock,
                          "--rate", r, "--size", "1024", "--threads", "1",
                          "--log-level", "error", NULL};
    if ((g[i].emit = bench_spawn(argv, -1, log)) < 0) return -1;
  }
  return 0;
}

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "we");
  if (!f) return -1;
  int rv = fputs(text, f) < 0 ? -1 : 0;
  return fclose(f) != 0 ? -1 : rv;
}

static int write_hosts(const char *path, const group_t *g, unsigned hosts) {
  FILE *f = fopen(path, "we");
  if (!f) return -1;
  for (unsigned i = 0; i < hosts; i++) {
    char a[32];
    spelling(i % GROUP_HOSTS, a, sizeof(a));
    fprintf(f, "%s:%d\n", a, g[i / GROUP_HOSTS].relay.port);
  }
  return fclose(f) != 0 ? -1 : 0;
}

typedef struct cli_run {
  int status;
  double wall_s, cpu_s;
  long hwm_kb;
  double tracing_wall_ms; /* -1: the line never came */
  double tracing_cpu_s;   /* the CLI's CPU by then */
  double tracing_idle;    /* the machine's idle share until then */
  /* CPU of the other processes from the spawn to the tracing line: the
   * relays, and the services with their producers. */
  double relays_cpu_s, sources_cpu_s;
  char tracing_line[160];
  char clock_line[200]; /* the summary's "clocks at the start" */
  uint64_t merged;
  unsigned lines;
} cli_run_t;

/* The CLI's "all N hosts tracing, ..." line. */
#define TRACING_SAYS tg_notice_tag(TG_N_FLEET_ALL_TRACING)

/* Reads the CLI's log for the first line with |needle|. */
static bool find_line(const char *log, const char *needle, char *out,
                      size_t n) {
  FILE *f = fopen(log, "re");
  char buf[512];
  bool found = false;
  while (f && !found && fgets(buf, sizeof(buf), f))
    if (strstr(buf, needle)) {
      buf[strcspn(buf, "\n")] = 0;
      snprintf(out, n, "%.*s", (int)(n > 0 ? n - 1 : 0), buf);
      found = true;
    }
  if (f) fclose(f);
  return found;
}

static unsigned count_lines(const char *path) {
  FILE *f = fopen(path, "re");
  unsigned n = 0;
  int c;
  while (f && (c = fgetc(f)) != EOF) n += c == '\n';
  if (f) fclose(f);
  return n;
}

/* Runs `tracegate record ... --hosts FILE --merge` and watches it: its
 * peak RSS (VmHWM, sampled until it exits), when the tracing line came. */
/* CPU seconds so far of every relay, and of every service and producer. */
static void groups_cpu(const group_t *g, unsigned ng, double *relays,
                       double *sources) {
  *relays = *sources = 0;
  for (unsigned i = 0; i < ng; i++) {
    *relays += bench_proc_cpu_s(g[i].relay.pid);
    *sources += bench_proc_cpu_s(g[i].ts.pid) + bench_proc_cpu_s(g[i].emit);
  }
}

static int run_fleet_cli(const char *dir, const group_t *g, unsigned ng,
                         const char *hosts_file, unsigned seconds,
                         const char *session_cache, cli_run_t *out) {
  char cfg[160], merged[160], log[160], ca[160], cert[160], key[160],
      text[512];
  snprintf(cfg, sizeof(cfg), "%s/cli.pbtxt", dir);
  snprintf(merged, sizeof(merged), "%s/merged.pftrace", dir);
  snprintf(log, sizeof(log), "%s/cli.log", dir);
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", dir);
  snprintf(cert, sizeof(cert), "%s/pki/%s.pem", dir, BENCH_CLIENT);
  snprintf(key, sizeof(key), "%s/pki/%s.key", dir, BENCH_CLIENT);
  snprintf(text, sizeof(text),
           "buffers { size_kb: %u fill_policy: RING_BUFFER }\n"
           "data_sources { config { name: \"%s\" } }\n"
           "duration_ms: %u\n",
           CLI_SESSION_KB, DS_NAME, seconds * 1000);
  if (write_text(cfg, text) < 0) return -1;
  unlink(merged);
  unlink(log);
  const char *argv[] = {TRACEGATE_CLI_PATH, "record", "-c", cfg, "--txt",
                        "-o", merged, "--merge", "--hosts", hosts_file,
                        "--ca", ca, "--cert", cert, "--key", key,
                        "--tls-server-name", BENCH_HOST,
                        "--session-cache", session_cache, NULL};
  memset(out, 0, sizeof(*out));
  out->tracing_wall_ms = -1;
  uint64_t idle0, all0, idle1, all1;
  double relays0, sources0;
  groups_cpu(g, ng, &relays0, &sources0);
  bench_machine_ticks(&idle0, &all0);
  double t0 = bench_now_ms();
  pid_t pid = bench_spawn(argv, -1, log);
  if (pid < 0) return -1;
  double end = t0 + seconds * 1000.0 + 60000;
  for (;;) {
    long hwm = bench_proc_status_kb(pid, "VmHWM");
    if (hwm < 0) break; /* exited: a zombie has no memory left to show */
    out->hwm_kb = hwm;
    if (out->tracing_wall_ms < 0 &&
        find_line(log, TRACING_SAYS, out->tracing_line,
                  sizeof(out->tracing_line))) {
      out->tracing_wall_ms = bench_now_ms() - t0;
      out->tracing_cpu_s = bench_proc_cpu_s(pid);
      bench_machine_ticks(&idle1, &all1);
      groups_cpu(g, ng, &out->relays_cpu_s, &out->sources_cpu_s);
      out->relays_cpu_s -= relays0;
      out->sources_cpu_s -= sources0;
      out->tracing_idle = all1 > all0 ? (double)(idle1 - idle0) /
                                            (double)(all1 - all0)
                                      : 0;
    }
    if (bench_now_ms() > end) break;
    usleep(20000);
  }
  out->status = bench_wait_cpu(pid, 10000, &out->cpu_s);
  out->wall_s = (bench_now_ms() - t0) / 1e3;
  if (!out->tracing_line[0])
    find_line(log, TRACING_SAYS, out->tracing_line, sizeof(out->tracing_line));
  find_line(log, tg_notice_tag(TG_N_FLEET_CLOCKS), out->clock_line,
            sizeof(out->clock_line));
  struct stat st;
  out->merged = stat(merged, &st) == 0 ? (uint64_t)st.st_size : 0;
  out->lines = count_lines(log);
  if (getenv("BENCH_FANOUT_KEEP_LOG")) {
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", log, getenv("BENCH_FANOUT_KEEP_LOG"));
    if (system(cmd) != 0) fprintf(stderr, "bench_fanout: cannot keep the log\n");
  }
  if (out->status != 0) {
    fprintf(stderr, "bench_fanout: tracegate record exited with status %d; "
            "the end of its log:\n", out->status);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "tail -n 30 '%s' >&2", log);
    if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
  }
  unlink(merged);
  return 0;
}

/* How fast this process writes |bytes| into |dir| (MB/s). */
static double disk_write_mbps(const char *dir, uint64_t bytes) {
  char path[160];
  snprintf(path, sizeof(path), "%s/disk-baseline", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  static uint8_t chunk[1 << 20];
  memset(chunk, 0x5a, sizeof(chunk));
  double t0 = bench_now_ms();
  uint64_t left = bytes;
  while (left > 0) {
    size_t n = left < sizeof(chunk) ? (size_t)left : sizeof(chunk);
    if (write(fd, chunk, n) != (ssize_t)n) break;
    left -= n;
  }
  close(fd);
  double ms = bench_now_ms() - t0;
  unlink(path);
  return ms > 0 ? (double)(bytes - left) / 1e6 / (ms / 1e3) : 0;
}

static int cli_fanout(unsigned hosts, unsigned seconds, uint64_t rate) {
  unsigned ng = (hosts + GROUP_HOSTS - 1) / GROUP_HOSTS;
  static group_t g[MAX_GROUPS];
  char dir[96], hosts1[160], hostsn[160];
  if (bench_tempdir(dir, sizeof(dir), "fanout-cli") < 0 ||
      bench_certs(dir, BENCH_HOST, BENCH_CLIENT) < 0) {
    fprintf(stderr, "bench_fanout: cannot make certificates\n");
    return 1;
  }
  double t_spawn = bench_now_ms();
  if (start_groups(g, ng, dir, rate) < 0) return 1;
  t_spawn = bench_now_ms() - t_spawn;
  snprintf(hosts1, sizeof(hosts1), "%s/hosts-1", dir);
  snprintf(hostsn, sizeof(hostsn), "%s/hosts-n", dir);
  if (write_hosts(hosts1, g, 1) < 0 || write_hosts(hostsn, g, hosts) < 0)
    return 1;
  /* Cold: no saved TLS session, a full handshake per host. Warm: the
   * same relays again with the session cache the cold run wrote, every
   * handshake resumed from a ticket (no public-key operation). */
  char cache[160];
  snprintf(cache, sizeof(cache), "%s/sessions", dir);
  unlink(cache);
  cli_run_t one, all, warm;
  if (run_fleet_cli(dir, g, ng, hosts1, seconds, "off", &one) < 0 ||
      run_fleet_cli(dir, g, ng, hostsn, seconds, cache, &all) < 0 ||
      restart_services(g, ng, dir, rate) < 0 ||
      run_fleet_cli(dir, g, ng, hostsn, seconds, cache, &warm) < 0)
    return 1;
  double disk = disk_write_mbps(dir, all.merged > (64u << 20) ? all.merged
                                                               : 64u << 20);
  double per_host_kb = (double)(all.hwm_kb - one.hwm_kb) / (hosts - 1);
  double tracing_ms = all.tracing_wall_ms;
  printf("bench_fanout: tracegate record, %u hosts in one merged trace, %u s "
         "(%u tracegated + tracegate-relay pairs with %u sessions each, started "
         "in %.0f ms; tracegate-emit %" PRIu64 " x 1 KiB/s per session)\n",
         hosts, seconds, ng, GROUP_HOSTS, t_spawn, rate);
  printf("  exit status                              : %8d  (warm: %d, one "
         "host: %d)\n",
         all.status, warm.status, one.status);
  printf("  all hosts tracing, the CLI's word (cold): %s\n",
         all.tracing_line[0] ? all.tracing_line : "(never said)");
  printf("                                    (warm): %s\n",
         warm.tracing_line[0] ? warm.tracing_line : "(never said)");
  printf("    seen from outside (spawn ->)           : cold %6.0f ms (target "
         "<= %.0f: %s)   warm %6.0f ms (target <= %.0f: %s; TLS sessions "
         "resumed from --session-cache)\n",
         tracing_ms, CLI_TRACING_COLD_TARGET_MS,
         tracing_ms >= 0 && tracing_ms <= CLI_TRACING_COLD_TARGET_MS
             ? "met"
             : "NOT met",
         warm.tracing_wall_ms, CLI_TRACING_WARM_TARGET_MS,
         warm.tracing_wall_ms >= 0 &&
                 warm.tracing_wall_ms <= CLI_TRACING_WARM_TARGET_MS
             ? "met"
             : "NOT met");
  double cold_ms = all.tracing_cpu_s * 1e3 / hosts;
  double warm_ms = warm.tracing_cpu_s * 1e3 / hosts;
  printf("    the CLI's CPU until then               : cold %6.2f s (%.2f ms "
         "per host, target <= %.1f: %s; machine idle %.0f %%)   warm %6.2f s "
         "(%.2f ms per host, target <= %.1f: %s; machine idle %.0f %%)  (the "
         "relays' handshakes share the same %ld cores)\n",
         all.tracing_cpu_s, cold_ms, CLI_CPU_COLD_TARGET_MS,
         cold_ms <= CLI_CPU_COLD_TARGET_MS ? "met" : "NOT met",
         100 * all.tracing_idle, warm.tracing_cpu_s, warm_ms,
         CLI_CPU_WARM_TARGET_MS,
         warm_ms <= CLI_CPU_WARM_TARGET_MS ? "met" : "NOT met",
         100 * warm.tracing_idle, sysconf(_SC_NPROCESSORS_ONLN));
  printf("    the others' CPU until then, per host   : cold relays %.2f ms, "
         "services+producers %.2f ms   warm relays %.2f ms, "
         "services+producers %.2f ms\n",
         all.relays_cpu_s * 1e3 / hosts, all.sources_cpu_s * 1e3 / hosts,
         warm.relays_cpu_s * 1e3 / hosts, warm.sources_cpu_s * 1e3 / hosts);
  printf(
      "  the CLI's clock alignment (cold, warm)  : %s\n"
      "                                           %s\n",
      all.clock_line[0] ? all.clock_line + 2 : "(not said)",
      warm.clock_line[0] ? warm.clock_line + 2 : "(not said)");
  printf("  CLI memory per host                      : %8.0f KiB  (target <= "
         "%.0f KB)  %s  (peak RSS %ld KiB with %u hosts, %ld KiB with one)\n",
         per_host_kb, CLI_MEMORY_TARGET_KB,
         per_host_kb * 1.024 <= CLI_MEMORY_TARGET_KB ? "met" : "NOT met",
         all.hwm_kb, hosts, one.hwm_kb);
  printf("  merged trace                             : %8.1f MB  in %.1f s "
         "(%.1f MB/s), CLI CPU %.2f s = %.0f MB per CPU-second\n",
         (double)all.merged / 1e6, all.wall_s,
         (double)all.merged / 1e6 / all.wall_s, all.cpu_s,
         all.cpu_s > 0 ? (double)all.merged / 1e6 / all.cpu_s : 0);
  printf("    once all were tracing                  : %8.0f MB per CPU-second "
         "of the CLI (reading, decompressing, merging, writing)\n",
         all.cpu_s > all.tracing_cpu_s
             ? (double)all.merged / 1e6 / (all.cpu_s - all.tracing_cpu_s)
             : 0);
  printf("    writing as many bytes to the same disk : %8.0f MB/s  (the CLI "
         "keeps up with the disk while its MB per CPU-second is above it)\n",
         disk);
  printf("  lines the CLI printed (stderr)           : %8u  (one host: %u)\n",
         all.lines, one.lines);
  bench_stop_all(10000);
  return all.status == 0 && warm.status == 0 && one.status == 0 ? 0 : 1;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_fanout [HOSTS [SECONDS [RATE [SIZE]]]]\n"
          "       bench_fanout --cli [HOSTS [SECONDS [RATE]]]\n"
          "  One collector recording many hosts through their relays (HOSTS\n"
          "  tracegated + tracegate-relay pairs, 1-%d, default 32; SECONDS of\n"
          "  streaming, 1-600, default 5; RATE packets/s of SIZE bytes per\n"
          "  host, default 500 x 4096), then `tracegate record` with %d hosts\n"
          "  (cold and warm start, memory, merge, progress lines).\n"
          "  --cli   only the CLI part: HOSTS 2-%d (default %d), SECONDS\n"
          "          1-600 (default %d), RATE packets/s per session (default "
          "%d)\n",
          MAX_HOSTS, CLI_HOSTS, FLEET_HOSTS_MAX, CLI_HOSTS, CLI_SECONDS,
          CLI_RATE);
}

/* The |i|th positional argument, if given, into |out|; -1 on a bad one. */
static int arg_at(int argc, char **argv, int i, const char *what, uint64_t lo,
                  uint64_t hi, uint64_t *out) {
  if (i >= argc) return 0;
  return bench_parse_uint("bench_fanout", what, argv[i], lo, hi, out);
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "--cli")) {
    uint64_t hosts = CLI_HOSTS, seconds = CLI_SECONDS, rate = CLI_RATE;
    if (argc > 5 ||
        arg_at(argc, argv, 2, "HOSTS", 2, FLEET_HOSTS_MAX, &hosts) < 0 ||
        arg_at(argc, argv, 3, "SECONDS", 1, 600, &seconds) < 0 ||
        arg_at(argc, argv, 4, "RATE", 1, 1000000, &rate) < 0) {
      usage(stderr);
      return 2;
    }
    tg_log_set_level(TG_LOG_WARN);
    bench_children_init();
    bench_deadline(DEADLINE_S + 2 * ((unsigned)seconds + 60));
    return cli_fanout((unsigned)hosts, (unsigned)seconds, rate);
  }
  uint64_t hosts = 32, seconds = 5, rate = 500, size = 4096;
  if (argc > 5 || arg_at(argc, argv, 1, "HOSTS", 1, MAX_HOSTS, &hosts) < 0 ||
      arg_at(argc, argv, 2, "SECONDS", 1, 600, &seconds) < 0 ||
      arg_at(argc, argv, 3, "RATE", 1, 1000000, &rate) < 0 ||
      arg_at(argc, argv, 4, "SIZE", 1, 1 << 20, &size) < 0) {
    usage(stderr);
    return 2;
  }
  tg_log_set_level(TG_LOG_WARN);
  bench_children_init();
  bench_deadline(DEADLINE_S + (unsigned)seconds);

  static fanout_t fan;
  fanout_t *f = &fan;
  f->n = hosts;
  char dir[96];
  if (bench_tempdir(dir, sizeof(dir), "fanout") < 0 ||
      bench_certs(dir, BENCH_HOST, BENCH_CLIENT) < 0) {
    fprintf(stderr, "bench_fanout: cannot make certificates\n");
    return 1;
  }
  double t_spawn = bench_now_ms();
  if (start_children(f, dir, rate, size) < 0) return 1;
  t_spawn = bench_now_ms() - t_spawn;
  if (!(f->tls = bench_client_tls(dir)) || make_config(f) < 0) return 1;

  uv_loop_init(&f->loop);
  uv_timer_init(&f->loop, &f->tick);
  f->tick.data = f;
  long rss0 = bench_proc_status_kb(0, "VmRSS");

  /* Connect, handshake and bind, all at once. */
  double t_conn = bench_now_ms();
  for (unsigned i = 0; i < f->n; i++) {
    host_t *h = &f->host[i];
    int rv = bench_remote_open(&f->loop, h->relay.port, f->tls, &consumer_cbs,
                               h, &h->c, &h->ch);
    if (rv < 0) {
      fail_host(h, "connecting", rv, NULL);
      h->closed = true;
    }
  }
  if (!bench_run_until(&f->loop, all_ready, f, STEP_MS) || any_failed(f)) {
    print_failures(f, "connecting");
    return 1;
  }
  t_conn = bench_now_ms() - t_conn;

  /* Every producer registered, so the sessions start complete. */
  f->on_tick = query_ds;
  uv_timer_start(&f->tick, on_tick, 0, POLL_MS);
  if (!bench_run_until(&f->loop, all_have_ds, f, STEP_MS) || any_failed(f)) {
    print_failures(f, "waiting for the producers");
    return 1;
  }
  uv_timer_stop(&f->tick); /* no query is in flight: each host has its answer */
  f->on_tick = NULL;

  /* Start: every host at once. */
  static const Perfetto__Protos__ObservableEvents__Type started[] = {
      PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED};
  f->t_start_ms = bench_now_ms();
  for (unsigned i = 0; i < f->n; i++) {
    host_t *h = &f->host[i];
    int rv = tg_consumer_observe_events(h->c, started, 1, on_events, h);
    if (rv == 0)
      rv = tg_consumer_enable_tracing(h->c, f->config, f->config_len, -1,
                                      on_ended, h);
    if (rv < 0) fail_host(h, "EnableTracing", rv, NULL);
  }
  if (!bench_run_until(&f->loop, all_tracing, f, STEP_MS) || any_failed(f)) {
    print_failures(f, "starting");
    return 1;
  }
  /* Then the first data: frequent reads (not back to back: 32 hosts
   * spinning would starve the producers of the 2 cores). */
  f->on_tick = probe_reads;
  uv_timer_start(&f->tick, on_tick, 0, PROBE_MS);
  if (!bench_run_until(&f->loop, all_have_data, f, STEP_MS) || any_failed(f)) {
    print_failures(f, "waiting for the first data");
    return 1;
  }
  uv_timer_stop(&f->tick);
  double lat[MAX_HOSTS], first[MAX_HOSTS];
  for (unsigned i = 0; i < f->n; i++) {
    lat[i] = f->host[i].t_tracing_ms;
    first[i] = f->host[i].t_data_ms;
    f->host[i].bytes = f->host[i].packets = f->host[i].reads = 0;
  }
  qsort(lat, f->n, sizeof(double), cmp_double);
  qsort(first, f->n, sizeof(double), cmp_double);

  /* Stream. */
  cpu_split_t cpu0 = cpu_now(f);
  uint64_t idle0, all0, idle1, all1;
  bench_machine_ticks(&idle0, &all0);
  double t_stream = bench_now_ms();
  f->streaming = true;
  f->on_tick = issue_reads;
  uv_timer_start(&f->tick, on_tick, 0, READ_PERIOD_MS);
  bench_run_until(&f->loop, never, f, (int)(seconds * 1000));
  f->streaming = false;
  uv_timer_stop(&f->tick);
  bench_run_until(&f->loop, none_reading, f, STEP_MS);
  t_stream = bench_now_ms() - t_stream;
  cpu_split_t cpu1 = cpu_now(f);
  bench_machine_ticks(&idle1, &all1);
  long rss1 = bench_proc_status_kb(0, "VmRSS");
  long hwm = bench_proc_status_kb(0, "VmHWM");
  if (any_failed(f)) {
    print_failures(f, "streaming");
    return 1;
  }
  for (unsigned i = 0; i < f->n; i++)
    if (tg_consumer_get_trace_stats(f->host[i].c, on_stats, &f->host[i]) < 0)
      f->host[i].stats_done = true;
  bench_run_until(&f->loop, all_stats, f, STEP_MS);

  uint64_t bytes = 0, packets = 0, reads = 0, written = 0, lost = 0;
  for (unsigned i = 0; i < f->n; i++) {
    bytes += f->host[i].bytes;
    packets += f->host[i].packets;
    reads += f->host[i].reads;
    written += f->host[i].written;
    lost += f->host[i].lost_chunks;
  }
  double gb = (double)bytes / 1e9;
  double per_host_kb = (double)(rss1 - rss0) / f->n;
  printf("bench_fanout: %u hosts (tracegated + tracegate-relay + "
         "tracegate-emit each, started in %.0f ms), one collector loop\n",
         f->n, t_spawn);
  printf("  connect + TLS handshake + bind, all hosts : %8.0f ms\n", t_conn);
  printf("  time until all are tracing               : %8.1f ms  (target < "
         "%.0f; per host min %.1f, median %.1f)\n",
         lat[f->n - 1], TRACING_TARGET_MS, lat[0], lat[f->n / 2]);
  printf("    first producer packet read, all hosts  : %8.1f ms  (per host min "
         "%.1f, median %.1f)\n",
         first[f->n - 1], first[0], first[f->n / 2]);
  printf("  streaming, aggregate                     : %8.1f MB/s  over %.1f s "
         "(%" PRIu64 " packets, %" PRIu64 " reads)\n",
         (double)bytes / 1e6 / (t_stream / 1e3), t_stream / 1e3, packets,
         reads);
  printf("    offered by the producers               : %8.1f MB/s  (%" PRIu64
         " x %" PRIu64 " B/s per host)\n",
         (double)f->n * (double)rate * (double)size / 1e6, rate, size);
  printf("    lost in the services' buffers          : %8" PRIu64
         " chunks  (%.1f MB written into them over the session)\n",
         lost, (double)written / 1e6);
  printf("    CPU per GB read: collector %.2f s, relays %.2f s, services "
         "%.2f s, producers %.2f s\n"
         "    (the collector alone: %.0f MB per CPU-second)\n",
         gb > 0 ? (cpu1.collector - cpu0.collector) / gb : 0,
         gb > 0 ? (cpu1.relays - cpu0.relays) / gb : 0,
         gb > 0 ? (cpu1.services - cpu0.services) / gb : 0,
         gb > 0 ? (cpu1.emits - cpu0.emits) / gb : 0,
         cpu1.collector > cpu0.collector
             ? (double)bytes / 1e6 / (cpu1.collector - cpu0.collector) : 0);
  printf("    machine idle while streaming            : %8.0f %%  of %ld "
         "cores\n",
         all1 > all0
             ? 100.0 * (double)(idle1 - idle0) / (double)(all1 - all0)
             : 0,
         sysconf(_SC_NPROCESSORS_ONLN));
  printf("  collector memory per host                : %8.0f KiB  (target < "
         "%.0f; RSS %ld -> %ld KiB, peak %ld KiB)\n",
         per_host_kb, MEMORY_TARGET_KB, rss0, rss1, hwm);

  /* Orderly teardown; on the error paths above, exit does it. */
  for (unsigned i = 0; i < f->n; i++)
    if (f->host[i].c) tg_consumer_close(f->host[i].c);
  bench_run_until(&f->loop, all_closed, f, STEP_MS);
  uv_close((uv_handle_t *)&f->tick, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  int rv = uv_loop_close(&f->loop);
  if (rv) fprintf(stderr, "bench_fanout: loop closed with handles open\n");
  bench_stop_all(10000); /* the directories go at exit */
  tg_tls_config_free(f->tls);
  free(f->config);
  if (rv) return 1;
  alarm(0);
  bench_deadline(DEADLINE_S + 2 * (CLI_SECONDS + 60));
  return cli_fanout(CLI_HOSTS, CLI_SECONDS, CLI_RATE);
}
