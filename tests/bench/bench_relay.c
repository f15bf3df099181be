/* Read-out through tracegate-relay over TLS, against the same read-out
 * straight from the service's consumer socket and against raw AEAD speed.
 *
 * One tracegated, one tracegate-relay in front of it (mutual TLS on
 * loopback, certificates made by deploy/certs/tg-certs), one producer on a
 * thread of this process writing 4 KiB TracePackets straight into its SMB,
 * and two consumers on this process's loop with the consumer library: one
 * over tg_tls_chan to the relay, one on the consumer socket.
 *
 * The measured path is the read-out, not the producer: each round fills a
 * fresh session's buffer with ROUND MiB (the producer is done and its last
 * commit acknowledged before the clock starts), then times ReadBuffers
 * until every packet of the round has arrived. Rounds alternate between
 * the relay and the direct consumer (which goes first alternates too),
 * until TOTAL MiB went each way. Between rounds, slices of raw encryption
 * (16 KiB records) of the negotiated cipher give the baselines under the
 * same load: libcrypto's sealing (tls/record.h), which the relay's records
 * use since the handoff, and mbedtls's, which they used before.
 *
 * Figures: MB/s end to end (packet bytes delivered to the client / time);
 * MB per CPU-second of each process on the path (utime+stime from /proc for
 * the relay and the service, the main thread's CPU clock for the client),
 * which holds still when the two cores are shared with other work; relay
 * CPU per GB; the ratios relay / raw cipher (target >= 0.80 of mbedtls's;
 * libcrypto's, 10x faster, no longer bounds the relay) and relay / direct. Per-round MB/s give the spread, and the cores the path kept busy
 * next to how idle the machine was tell a path waiting on itself from one
 * waiting on its neighbours. The wall-clock ratio compares a pipeline that
 * encrypts (relay) and decrypts (client) with one thread that only
 * encrypts: on 2 cores it is bounded by the relay's own MB per CPU-second,
 * which is why that ratio is printed too.
 *
 * usage: bench_relay [TOTAL_MiB [ROUND_MiB]]   (default 1024 128; --help)
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "tracegate/pb_wire.h"
#include "abi/smb.h"
#include "bench_children.h"
#include "bench_cipher.h"
#include "bench_remote.h"
#include "test_service.h"
#include "tracegate/error.h"
#include "common/log.h"

#define PAGE_KB 32
#define SMB_KB 4096
#define LAYOUT TG_PAGE_DIV_2 /* 16 KiB chunks */
#define PACKETS_PER_CHUNK 4  /* of ~4 KiB, filling the chunk */
#define COMMIT_BATCH 16
#define DS_NAME "bench.relay"
#define STEP_MS 60000 /* bound of each awaited step */
#define MAX_ROUNDS 256
/* `make bench` runs this with the defaults: then no new round starts
 * after BUDGET_S and the run stops at DEADLINE_S whatever happens (runs
 * with explicit sizes get LONG_DEADLINE_S). */
#define BUDGET_S 90
#define DEADLINE_S 115
#define LONG_DEADLINE_S 1800

enum { VIA_RELAY, VIA_DIRECT, N_PATHS };
static const char *const path_name[N_PATHS] = {"relay", "direct"};

/* One consumer and what its reads measured. */
typedef struct path {
  tg_consumer_t *c;
  tg_tls_chan_t *ch; /* relay only */
  bool ready, closed, session_ended;
  int status;
  /* the read in progress */
  bool reading;
  int read_status;
  uint64_t bytes, packets, own_packets;
  /* totals over the timed reads */
  uint64_t total_bytes, wall_ns, client_cpu_ns;
  double relay_cpu_s, service_cpu_s;
  uint64_t idle_ticks, all_ticks; /* the whole machine's, during the reads */
  double round_mbps[MAX_ROUNDS];
  unsigned rounds;
  bool done; /* a generic "the awaited callback ran" */
  const char *name;
} path_t;

typedef struct bench {
  uv_loop_t loop;
  uv_async_t filled; /* the producer thread is done */
  atomic_bool fill_done;
  test_service_t ts;
  bench_relay_t relay;
  tg_tls_config_t *tls;
  path_t path[N_PATHS];

  /* producer: touched only by the producer thread while it runs */
  raw_producer_t prod;
  uint64_t round_bytes;
  uint8_t packet[TG_SMB_MAX_PAGE_SIZE];
  size_t pkt_len;        /* set once the SMB's page size is known */
  uint64_t round_packets; /* round_bytes in packets */
  int fill_status;
  size_t pg;
  unsigned ci;
  uint32_t chunk_id;

  uint8_t *config;
  size_t config_len;
} bench_t;

/* --- the producer -------------------------------------------------------------- */

/* A TracePacket of exactly |len| bytes: for_testing (900) { str (1) }. */
static size_t make_packet(uint8_t *out, size_t len) {
  size_t s = len - 7; /* tag 2 + len 2 + str tag 1 + str len 2 */
  uint8_t *q = out;
  q = tg_pb_write_varint(q, TG_PB_TAG(900, TG_PB_WT_LEN));
  q = tg_pb_write_varint(q, 1 + 2 + s);
  *q++ = 0x0A;
  q = tg_pb_write_varint(q, s);
  for (size_t i = 0; i < s; i++) q[i] = (uint8_t)('a' + i % 26);
  return (size_t)(q - out) + s;
}

/* Writes b->round_packets packets; the last commit waits for its reply,
 * so the service has processed every commit when this returns. */
static int produce(bench_t *b) {
  raw_producer_t *p = &b->prod;
  uint32_t pages[COMMIT_BATCH], chunks[COMMIT_BATCH];
  size_t batch = 0;
  const unsigned nchunks = tg_smb_layout_num_chunks(LAYOUT);
  for (uint64_t left = b->round_packets; left > 0;) {
    tg_smb_chunk_t c;
    for (;;) { /* the next free chunk; commit and wait while none is */
      if (tg_smb_page_bitmap(&p->smb, b->pg) == 0)
        tg_smb_try_partition_page(&p->smb, b->pg, LAYOUT);
      if (tg_smb_try_acquire_chunk_for_writing(&p->smb, b->pg, b->ci,
                                               b->chunk_id, 1, &c) == 0)
        break;
      if (++b->ci == nchunks) {
        b->ci = 0;
        b->pg = (b->pg + 1) % p->smb.num_pages;
        if (b->pg == 0 && batch) {
          if (raw_producer_commit_async(p, pages, chunks, batch) < 0) return -1;
          batch = 0;
        }
        if (b->pg == 0) sched_yield();
      }
    }
    unsigned n = left < PACKETS_PER_CHUNK ? (unsigned)left : PACKETS_PER_CHUNK;
    size_t off = TG_SMB_CHUNK_HEADER_SIZE;
    for (unsigned i = 0; i < n; i++) {
      tg_pb_write_redundant_varint(c.begin + off, (uint32_t)b->pkt_len);
      memcpy(c.begin + off + 4, b->packet, b->pkt_len);
      off += 4 + b->pkt_len;
    }
    tg_smb_chunk_set_packets(&c, n, 0);
    tg_smb_release_chunk_as_complete(&p->smb, &c);
    left -= n;
    b->chunk_id++;
    pages[batch] = (uint32_t)b->pg;
    chunks[batch] = b->ci;
    if (++batch == COMMIT_BATCH) {
      if (raw_producer_commit_async(p, pages, chunks, batch) < 0) return -1;
      batch = 0;
    }
    if (++b->ci == nchunks) {
      b->ci = 0;
      b->pg = (b->pg + 1) % p->smb.num_pages;
    }
  }
  return raw_producer_commit(p, pages, chunks, batch, 0);
}

static void *producer_main(void *arg) {
  bench_t *b = arg;
  b->fill_status = -1;
  if (raw_producer_wait_started(&b->prod, STEP_MS) < 0) {
    fprintf(stderr, "bench_relay: the data source did not start\n");
    goto out;
  }
  if (b->pkt_len == 0) {
    /* Packets that fill a chunk of the page size the service granted. */
    size_t csize = tg_smb_chunk_size(b->prod.smb.page_size, LAYOUT);
    b->pkt_len = make_packet(
        b->packet, (csize - TG_SMB_CHUNK_HEADER_SIZE) / PACKETS_PER_CHUNK - 4);
  }
  b->round_packets = b->round_bytes / b->pkt_len;
  if (produce(b) < 0)
    fprintf(stderr, "bench_relay: the producer failed\n");
  else
    b->fill_status = 0;
out:
  atomic_store(&b->fill_done, true);
  uv_async_send(&b->filled);
  return NULL;
}

static void on_filled(uv_async_t *a) { (void)a; /* fill_done is the news */ }

/* --- consumers ------------------------------------------------------------------ */

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  path_t *p = tg_consumer_data(c);
  p->ready = status == 0;
  p->status = status;
  if (status)
    fprintf(stderr, "bench_relay: connecting: %s: %s\n", tg_strerror(status),
            msg);
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  path_t *p = tg_consumer_data(c);
  if (status)
    fprintf(stderr, "bench_relay: connection closed: %s: %s\n",
            tg_strerror(status), msg);
  p->closed = true;
  p->ready = false;
  p->c = NULL;
  if (p->ch) tg_tls_chan_free(p->ch);
  p->ch = NULL;
}

static const tg_consumer_cbs_t consumer_cbs = {.on_ready = on_ready,
                                               .on_close = on_close};

static void on_ended(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  path_t *p = ctx;
  p->session_ended = true;
  if (status && status != -ECANCELED)
    fprintf(stderr, "bench_relay: %s session: %s\n", p->name, msg);
}

static void on_done(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  path_t *p = ctx;
  p->status = status;
  p->done = true;
  if (status) fprintf(stderr, "bench_relay: %s\n", msg);
}

static int on_packet(tg_consumer_t *c, void *ctx, const uint8_t *pk,
                     size_t len) {
  bench_t *b = ctx;
  path_t *p = tg_consumer_data(c);
  p->bytes += len;
  p->packets++;
  /* Ours start with for_testing (the service appends its trusted fields). */
  if (len >= b->pkt_len && !memcmp(pk, b->packet, 2)) p->own_packets++;
  return 0;
}

static void on_read_done(tg_consumer_t *c, void *ctx, int status,
                         const char *msg) {
  (void)ctx;
  path_t *p = tg_consumer_data(c);
  p->reading = false;
  p->read_status = status;
  if (status) fprintf(stderr, "bench_relay: ReadBuffers: %s\n", msg);
}

static bool cond_ready(void *arg) {
  path_t *p = arg;
  return p->ready || p->closed;
}
static bool cond_done(void *arg) {
  path_t *p = arg;
  return p->done || p->closed;
}
static bool cond_read(void *arg) {
  path_t *p = arg;
  return !p->reading || p->closed;
}
static bool cond_filled(void *arg) {
  bench_t *b = arg;
  return atomic_load(&b->fill_done);
}
static bool cond_closed(void *arg) {
  bench_t *b = arg;
  return b->path[VIA_RELAY].closed && b->path[VIA_DIRECT].closed;
}
static bool cond_ended(void *arg) {
  path_t *p = arg;
  return p->session_ended || p->closed;
}

/* --- one round ------------------------------------------------------------------ */

static int round_once(bench_t *b, int which) {
  path_t *p = &b->path[which];
  /* A fresh session; the producer fills it from its thread. */
  b->prod.started = false;
  p->session_ended = false;
  int rv = tg_consumer_enable_tracing(p->c, b->config, b->config_len, -1,
                                      on_ended, p);
  if (rv < 0) {
    fprintf(stderr, "bench_relay: EnableTracing: %s\n", tg_strerror(rv));
    return -1;
  }
  atomic_store(&b->fill_done, false);
  pthread_t th;
  if (pthread_create(&th, NULL, producer_main, b) != 0) return -1;
  bench_run_until(&b->loop, cond_filled, b, STEP_MS + 5000);
  pthread_join(th, NULL); /* bounded: wait_started and the commit are */
  if (b->fill_status < 0) return -1;

  /* The timed read-out. */
  p->bytes = p->packets = p->own_packets = 0;
  double relay0 = bench_proc_cpu_s(b->relay.pid);
  double svc0 = bench_proc_cpu_s(b->ts.pid);
  uint64_t idle0, all0, idle1, all1;
  bench_machine_ticks(&idle0, &all0);
  uint64_t c0 = bench_thread_cpu_ns(), t0 = uv_hrtime();
  for (int reads = 0; p->own_packets < b->round_packets; reads++) {
    uint64_t before = p->packets;
    p->reading = true;
    rv = tg_consumer_read_buffers(p->c, on_packet, on_read_done, b);
    if (rv < 0) {
      fprintf(stderr, "bench_relay: ReadBuffers: %s\n", tg_strerror(rv));
      return -1;
    }
    if (!bench_run_until(&b->loop, cond_read, p, STEP_MS) || p->closed ||
        p->read_status)
      return -1;
    if (p->packets == before && reads > 0) break; /* nothing more comes */
  }
  uint64_t wall = uv_hrtime() - t0;
  p->client_cpu_ns += bench_thread_cpu_ns() - c0;
  bench_machine_ticks(&idle1, &all1);
  p->idle_ticks += idle1 - idle0;
  p->all_ticks += all1 - all0;
  p->relay_cpu_s += bench_proc_cpu_s(b->relay.pid) - relay0;
  p->service_cpu_s += bench_proc_cpu_s(b->ts.pid) - svc0;
  p->wall_ns += wall;
  p->total_bytes += p->bytes;
  if (p->rounds < MAX_ROUNDS)
    p->round_mbps[p->rounds++] = bench_mbps(p->bytes, wall);
  if (p->own_packets != b->round_packets) {
    fprintf(stderr, "bench_relay: %s: read %" PRIu64 " of %" PRIu64
            " packets (%" PRIu64 " packets, %" PRIu64 " bytes in all)\n",
            p->name, p->own_packets, b->round_packets, p->packets, p->bytes);
    return -1;
  }

  /* Done with the session: free it (that ends it). */
  p->done = false;
  rv = tg_consumer_free_buffers(p->c, on_done, p);
  if (rv < 0 || !bench_run_until(&b->loop, cond_done, p, STEP_MS) ||
      p->status != 0 || !bench_run_until(&b->loop, cond_ended, p, STEP_MS))
    return -1;
  return 0;
}

/* --- setup and report ------------------------------------------------------------ */

static int connect_paths(bench_t *b) {
  path_t *r = &b->path[VIA_RELAY], *d = &b->path[VIA_DIRECT];
  int rv = bench_remote_open(&b->loop, b->relay.port, b->tls, &consumer_cbs, r,
                             &r->c, &r->ch);
  if (rv == 0)
    rv = tg_consumer_connect(&b->loop, b->ts.consumer_sock, &consumer_cbs, d,
                             &d->c);
  else
    d->closed = true;
  if (rv < 0) {
    fprintf(stderr, "bench_relay: cannot connect: %s\n", tg_strerror(rv));
    return -1;
  }
  if (!bench_run_until(&b->loop, cond_ready, r, STEP_MS) || !r->ready ||
      !bench_run_until(&b->loop, cond_ready, d, STEP_MS) || !d->ready)
    return -1;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void spread(const path_t *p, double *lo, double *med, double *hi) {
  double v[MAX_ROUNDS];
  memcpy(v, p->round_mbps, p->rounds * sizeof(double));
  qsort(v, p->rounds, sizeof(double), cmp_double);
  *lo = v[0];
  *hi = v[p->rounds - 1];
  *med = p->rounds % 2 ? v[p->rounds / 2]
                       : (v[p->rounds / 2 - 1] + v[p->rounds / 2]) / 2;
}

static double per_cpu(uint64_t bytes, double cpu_s) {
  return cpu_s > 0 ? (double)bytes / 1e6 / cpu_s : 0;
}

/* Cores the path kept busy during its reads, and how idle the machine
 * was meanwhile: a path short of cores on an idle machine waits on
 * itself; on a busy one, on the neighbours. */
static void print_load(const path_t *p) {
  double cpu =
      p->relay_cpu_s + p->service_cpu_s + (double)p->client_cpu_ns / 1e9;
  double wall = (double)p->wall_ns / 1e9;
  printf("  %-32s %9s   busy cores: this path %.2f; machine idle %.0f%% "
         "of %ld cores\n", "", "", wall > 0 ? cpu / wall : 0,
         p->all_ticks ? 100.0 * (double)p->idle_ticks / (double)p->all_ticks
                      : 0,
         sysconf(_SC_NPROCESSORS_ONLN));
}

static void report(const bench_t *b, uint64_t mib, uint64_t round_mib,
                   const char *suite, const bench_span_t *neg,
                   bench_aead_t neg_alg, const bench_span_t *lc) {
  const path_t *r = &b->path[VIA_RELAY], *d = &b->path[VIA_DIRECT];
  double r_wall = bench_mbps(r->total_bytes, r->wall_ns);
  double d_wall = bench_mbps(d->total_bytes, d->wall_ns);
  double r_relay = per_cpu(r->total_bytes, r->relay_cpu_s);
  double lo, med, hi;
  printf("bench_relay: %" PRIu64 " MiB each way in rounds of %" PRIu64
         " MiB, %zu-byte packets\n", mib, round_mib, b->pkt_len);
  printf("  (%s)\n", suite);
  printf("  %-32s %9s %30s\n", "", "MB/s", "MB per CPU-second");
  spread(r, &lo, &med, &hi);
  printf("  %-32s %9.0f   relay %.0f, client %.0f, service %.0f\n",
         "read-out through the relay, TLS", r_wall, r_relay,
         bench_mbps(r->total_bytes, r->client_cpu_ns),
         per_cpu(r->total_bytes, r->service_cpu_s));
  printf("  %-32s %9s   rounds: min %.0f, median %.0f, max %.0f MB/s\n", "",
         "", lo, med, hi);
  print_load(r);
  spread(d, &lo, &med, &hi);
  printf("  %-32s %9.0f   client %.0f, service %.0f\n",
         "read-out direct, UNIX socket", d_wall,
         bench_mbps(d->total_bytes, d->client_cpu_ns),
         per_cpu(d->total_bytes, d->service_cpu_s));
  printf("  %-32s %9s   rounds: min %.0f, median %.0f, max %.0f MB/s\n", "",
         "", lo, med, hi);
  print_load(d);
  char name[64];
  snprintf(name, sizeof(name), "raw %s, mbedtls", bench_aead_name(neg_alg));
  printf("  %-32s %9.0f   %.0f\n", name, bench_span_wall(neg),
         bench_span_cpu(neg));
  snprintf(name, sizeof(name), "raw %s, libcrypto", bench_aead_name(neg_alg));
  printf("  %-32s %9.0f   %.0f\n", name, bench_span_wall(lc),
         bench_span_cpu(lc));
  printf("  relay CPU per GB moved          %9.2f s/GB (utime+stime of "
         "tracegate-relay)\n",
         r->total_bytes ? r->relay_cpu_s / ((double)r->total_bytes / 1e9) : 0);
  printf("  ratio relay / raw mbedtls       %9.2f   %.2f (relay CPU)   "
         "(target >= 0.80)\n",
         bench_span_wall(neg) > 0 ? r_wall / bench_span_wall(neg) : 0,
         bench_span_cpu(neg) > 0 ? r_relay / bench_span_cpu(neg) : 0);
  printf("  ratio relay / raw libcrypto     %9.2f   %.2f (relay CPU)\n",
         bench_span_wall(lc) > 0 ? r_wall / bench_span_wall(lc) : 0,
         bench_span_cpu(lc) > 0 ? r_relay / bench_span_cpu(lc) : 0);
  printf("  ratio relay / direct            %9.2f\n",
         d_wall > 0 ? r_wall / d_wall : 0);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_relay [TOTAL_MiB [ROUND_MiB]]\n"
          "  Read-out through tracegate-relay over TLS against the same "
          "read-out from\n"
          "  the service's consumer socket and raw AEAD speed: MB/s and MB "
          "per\n"
          "  CPU-second of each process, rounds alternating between the "
          "two.\n"
          "  TOTAL_MiB  read out each way (1-%u, default 1024)\n"
          "  ROUND_MiB  filled and read per round (1-1024, default 128, cut "
          "to\n"
          "             TOTAL_MiB; at most %d rounds in all)\n"
          "  With the defaults the run stops at %d s; with sizes given, at "
          "%d s.\n",
          MAX_ROUNDS * 1024u, MAX_ROUNDS, DEADLINE_S, LONG_DEADLINE_S);
}

/* Returns 0, 1 after --help, or -1 after an error it reported (before
 * anything starts). *sized: sizes were given (the long deadline). */
static int parse_args(int argc, char **argv, uint64_t *mib,
                      uint64_t *round_mib, bool *sized) {
  *mib = 1024;
  *round_mib = 128;
  const bench_arg_t args[] = {{"TOTAL_MiB", 1, MAX_ROUNDS * 1024u, mib},
                              {"ROUND_MiB", 1, 1024, round_mib}};
  size_t pos = 0;
  int rv = bench_args_parse("bench_relay", argc, argv, args, 2, usage, &pos);
  if (rv != 0) return rv;
  /* A ROUND_MiB above TOTAL_MiB is one round of TOTAL_MiB (`bench_relay
   * 64` with the default 128). */
  if (*round_mib > *mib) *round_mib = *mib;
  uint64_t rounds = (*mib + *round_mib - 1) / *round_mib;
  if (rounds > MAX_ROUNDS) {
    fprintf(stderr, "bench_relay: %" PRIu64 " MiB in rounds of %" PRIu64
            " MiB is %" PRIu64 " rounds, at most %d: give a larger "
            "ROUND_MiB\n", *mib, *round_mib, rounds, MAX_ROUNDS);
    usage(stderr);
    return -1;
  }
  *sized = pos > 0;
  return 0;
}

int main(int argc, char **argv) {
  uint64_t mib, round_mib;
  bool sized;
  int parsed = parse_args(argc, argv, &mib, &round_mib, &sized);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  unsigned rounds = (unsigned)((mib + round_mib - 1) / round_mib);
  tg_log_set_level(TG_LOG_WARN);
  bench_children_init();
  bench_deadline(sized ? LONG_DEADLINE_S : DEADLINE_S);
  double t_begin = bench_now_ms();
  double budget_ms =
      (sized ? LONG_DEADLINE_S - 60 : BUDGET_S) * 1000.0;

  static bench_t bench;
  bench_t *b = &bench;
  char dir[96];
  if (bench_tempdir(dir, sizeof(dir), "relay") < 0 ||
      bench_certs(dir, BENCH_HOST, BENCH_CLIENT) < 0) {
    fprintf(stderr, "bench_relay: cannot make certificates\n");
    return 1;
  }
  if (test_service_start(&b->ts) < 0) {
    fprintf(stderr, "bench_relay: cannot start tracegated\n");
    return 1;
  }
  bench_adopt(b->ts.pid);
  bench_remove_at_exit(b->ts.dir);
  if (bench_relay_spawn(&b->relay, dir, 0, b->ts.consumer_sock) < 0 ||
      bench_relay_wait(&b->relay, STEP_MS) < 0)
    return 1;
  if (!(b->tls = bench_client_tls(dir))) return 1;

  for (int k = 0; k < N_PATHS; k++) b->path[k].name = path_name[k];
  uv_loop_init(&b->loop);
  uv_async_init(&b->loop, &b->filled, on_filled);
  if (connect_paths(b) < 0) return 1;
  char suite[96];
  snprintf(suite, sizeof(suite), "%s",
           tg_tls_chan_ciphersuite(b->path[VIA_RELAY].ch));

  if (raw_producer_connect(&b->prod, &b->ts, "bench", DS_NAME, PAGE_KB, SMB_KB,
                           false) < 0) {
    fprintf(stderr, "bench_relay: the producer cannot connect\n");
    return 1;
  }
  /* The buffer holds a whole round with room to spare: nothing is lost. */
  simple_cfg_t sc;
  uint32_t buffer_kb = (uint32_t)(round_mib + round_mib / 4 + 8) * 1024;
  simple_cfg_init(&sc, buffer_kb, 2 /* DISCARD */, DS_NAME);
  b->config_len = perfetto__protos__trace_config__get_packed_size(&sc.cfg);
  b->config = malloc(b->config_len);
  perfetto__protos__trace_config__pack(&sc.cfg, b->config);

  bench_aead_t neg_alg = bench_aead_of_suite(suite);
  bench_span_t neg = {0}, lc = {0};
  b->round_bytes = round_mib << 20;
  unsigned done = 0;
  for (unsigned i = 0; i < rounds; i++, done++) {
    if (i > 0 && bench_now_ms() - t_begin > budget_ms) break;
    for (int k = 0; k < N_PATHS; k++) {
      int which = (i % 2) ? N_PATHS - 1 - k : k;
      if (round_once(b, which) < 0) {
        fprintf(stderr, "bench_relay: round %u (%s) failed\n", i,
                path_name[which]);
        return 1;
      }
    }
    bench_aead_run(neg_alg, BENCH_MBEDTLS, b->round_bytes / 4, &neg);
    bench_aead_run(neg_alg, BENCH_LIBCRYPTO, b->round_bytes / 4, &lc);
  }
  if (done < rounds)
    printf("bench_relay: stopped after %u of %u rounds (time budget %.0f s)\n",
           done, rounds, budget_ms / 1000);
  report(b, (uint64_t)done * round_mib, round_mib, suite, &neg, neg_alg, &lc);

  /* Orderly teardown; on the error paths above, exit does it. */
  for (int k = 0; k < N_PATHS; k++)
    if (b->path[k].c) tg_consumer_close(b->path[k].c);
  bench_run_until(&b->loop, cond_closed, b, STEP_MS);
  uv_close((uv_handle_t *)&b->filled, NULL);
  uv_run(&b->loop, UV_RUN_DEFAULT);
  int rv = uv_loop_close(&b->loop);
  if (rv) fprintf(stderr, "bench_relay: loop closed with handles open\n");
  raw_producer_close(&b->prod);
  bench_stop(b->relay.pid, 10000);
  bench_stop(b->ts.pid, 10000); /* its directory goes at exit */
  tg_tls_config_free(b->tls);
  free(b->config);
  return rv ? 1 : 0;
}
