/* Service ingest and read-out throughput.
 *
 * A real tracegated; one producer thread writes 1 KiB TracePackets into
 * SMB chunks and commits them in batches; one consumer thread streams them
 * out with ReadBuffers while tracing runs. Prints MB/s into the central
 * buffer, MB/s out to the consumer, service CPU seconds per GB, peak RSS,
 * and loss, next to a memcpy of the same bytes measured in the same run.
 * First, how fast fresh memory fills with 4 KiB pages and with 2 MiB pages
 * (MADV_HUGEPAGE) on this machine: the ring's first pass pays for it, and
 * trace_buffer.c chose small pages on these figures.
 * Targets (DEVELOPERS.md): >= 1.4 GB/s ingest, >= 1 GB/s read-out.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tracegate/pb_wire.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "test_service.h"
#include "bench_args.h"

#define PACKET_SIZE 1024
#define PAGE_KB 32
#define SMB_KB 4096
#define BUFFER_KB (64 * 1024)
#define COMMIT_BATCH 16

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime + stime of |pid| in seconds, and its peak RSS in KiB. */
static double proc_cpu(pid_t pid, long *hwm_kb) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  double cpu = 0;
  if (f) {
    if (fgets(buf, sizeof(buf), f)) {
      char *p = strrchr(buf, ')');
      unsigned long ut = 0, st = 0;
      if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                      &ut, &st) == 2)
        cpu = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    }
    fclose(f);
  }
  if (hwm_kb) {
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    while (f && fgets(buf, sizeof(buf), f))
      if (!strncmp(buf, "VmHWM:", 6)) *hwm_kb = strtol(buf + 6, NULL, 10);
    if (f) fclose(f);
  }
  return cpu;
}

typedef struct bench {
  test_service_t ts;
  raw_producer_t prod;
  raw_consumer_t cons;
  uint64_t target_bytes;
  _Atomic uint64_t bytes_written;
  _Atomic uint64_t packets_written;
  _Atomic int producer_done;
  bool stream; /* a consumer reads while the producer writes */
  double rate;  /* producer pacing in bytes/s; 0: as fast as it can */
  uint64_t bytes_read;
  uint64_t packets_read;
  double t_start, t_prod_end, t_read_end;
} bench_t;

/* Counts the slices of one ReadBuffersResponse without unpacking. */
static void count_slices(bench_t *b, const uint8_t *p, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != 2 || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_t s;
    tg_pb_field_t g;
    tg_pb_reader_init(&s, f.data, f.size);
    while (tg_pb_reader_next(&s, &g) == 1) {
      if (g.id == 1) b->bytes_read += g.size;
      if (g.id == 2 && g.value) b->packets_read++;
    }
  }
}

/* One ReadBuffers to its last reply. Returns 0 or -1. */
static int read_once(bench_t *b) {
  Perfetto__Protos__ReadBuffersRequest req = PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;
  int64_t rid = raw_invoke(&b->cons.conn, "ReadBuffers", &req.base, -1, false);
  if (rid <= 0) return -1;
  for (;;) {
    raw_frame_t f;
    if (raw_wait(&b->cons.conn, (uint64_t)rid, 30000, &f) != 1) return -1;
    Perfetto__Protos__IPCFrame__InvokeMethodReply *r = f.frame->msg_invoke_method_reply;
    bool more = r && r->has_more;
    if (r) count_slices(b, r->reply_proto.data, r->reply_proto.len);
    tg_ipc_frame_free(f.frame);
    if (!more) return 0;
  }
}

static void *consumer_thread(void *arg) {
  bench_t *b = arg;
  while (b->stream && !atomic_load(&b->producer_done)) {
    if (read_once(b) < 0) return NULL;
    if (b->bytes_read == 0) sched_yield();
  }
  return NULL;
}

static void *producer_thread(void *arg) {
  bench_t *b = arg;
  raw_producer_t *p = &b->prod;
  uint8_t packet[PACKET_SIZE];
  /* A TracePacket: for_testing (900) { str (1): payload } padded to size. */
  size_t inner = PACKET_SIZE - 6 - 4;
  uint8_t *q = packet;
  q = tg_pb_write_varint(q, TG_PB_TAG(900, TG_PB_WT_LEN));
  q = tg_pb_write_varint(q, inner + 1 + 2);
  *q++ = 0x0A;
  q = tg_pb_write_varint(q, inner);
  memset(q, 'x', inner);
  size_t pkt_len = (size_t)(q - packet) + inner;

  const unsigned layout = TG_PAGE_DIV_4;
  const size_t csize = tg_smb_chunk_size(p->smb.page_size, layout);
  const unsigned per_chunk =
      (unsigned)((csize - TG_SMB_CHUNK_HEADER_SIZE) / (pkt_len + 4));
  uint32_t pages[COMMIT_BATCH], chunks[COMMIT_BATCH];
  size_t batch = 0;
  uint32_t chunk_id = 0;
  size_t pg = 0;
  unsigned ci = 0;
  while (atomic_load(&b->bytes_written) < b->target_bytes) {
    /* Next free chunk, round robin; wait (stall) while the SMB is full. */
    tg_smb_chunk_t c;
    for (;;) {
      if (tg_smb_page_bitmap(&p->smb, pg) == 0)
        tg_smb_try_partition_page(&p->smb, pg, layout);
      if (tg_smb_try_acquire_chunk_for_writing(&p->smb, pg, ci, chunk_id, 1, &c) == 0)
        break;
      if (++ci == tg_smb_layout_num_chunks(layout)) {
        ci = 0;
        pg = (pg + 1) % p->smb.num_pages;
        if (pg == 0 && batch) { /* the SMB is full: commit what we have */
          raw_producer_commit_async(p, pages, chunks, batch);
          batch = 0;
        }
        if (pg == 0) sched_yield();
      }
    }
    size_t off = TG_SMB_CHUNK_HEADER_SIZE;
    for (unsigned i = 0; i < per_chunk; i++) {
      tg_pb_write_redundant_varint(c.begin + off, (uint32_t)pkt_len);
      memcpy(c.begin + off + 4, packet, pkt_len);
      off += 4 + pkt_len;
    }
    tg_smb_chunk_set_packets(&c, per_chunk, 0);
    tg_smb_release_chunk_as_complete(&p->smb, &c);
    chunk_id++;
    uint64_t w = atomic_fetch_add(&b->bytes_written, per_chunk * pkt_len);
    /* Pacing: stay at or below the set rate (yield while ahead of it). */
    while (b->rate > 0 && (double)w > b->rate * (now_s() - b->t_start))
      sched_yield();
    atomic_fetch_add(&b->packets_written, per_chunk);
    pages[batch] = (uint32_t)pg;
    chunks[batch] = ci;
    if (++batch == COMMIT_BATCH) {
      /* Like SDK producers, do not wait for the reply: the SMB filling up
       * is the only backpressure. */
      raw_producer_commit_async(p, pages, chunks, batch);
      batch = 0;
    }
    if (++ci == tg_smb_layout_num_chunks(layout)) {
      ci = 0;
      pg = (pg + 1) % p->smb.num_pages;
    }
  }
  /* The last batch waits for its reply: the service then has processed
   * every commit before it (requests are handled in order). */
  raw_producer_commit(p, pages, chunks, batch, 0);
  b->t_prod_end = now_s();
  atomic_store(&b->producer_done, 1);
  return NULL;
}

/* One measured run; |stream|: a consumer reads while the producer writes.
 * Without it the same ring wraps (overwrites are expected and reported):
 * that measures steady-state ingest alone. A ring as large as the whole
 * run would mostly measure the kernel zeroing fresh pages on first touch,
 * which is slow in VMs and not part of the steady state. */
static int run(uint64_t mib, bool stream, double rate, const char *label) {
  bench_t *b = calloc(1, sizeof(*b));
  b->target_bytes = mib << 20;
  b->stream = stream;
  b->rate = rate;
  uint32_t buffer_kb = BUFFER_KB;
  if (test_service_start(&b->ts) < 0) {
    fprintf(stderr, "bench: cannot start tracegated\n");
    return 1;
  }
  if (raw_producer_connect(&b->prod, &b->ts, "bench", "bench.ds", PAGE_KB, SMB_KB, false) ||
      raw_consumer_connect(&b->cons, &b->ts)) {
    fprintf(stderr, "bench: cannot connect\n");
    return 1;
  }
  Perfetto__Protos__TraceConfig cfg;
  Perfetto__Protos__TraceConfig__BufferConfig buf, *bufp;
  Perfetto__Protos__TraceConfig__DataSource ds, *dsp;
  Perfetto__Protos__DataSourceConfig dsc;
  simple_config(&cfg, &buf, &bufp, &ds, &dsp, &dsc, buffer_kb, 1, "bench.ds");
  raw_consumer_enable(&b->cons, &cfg, -1);
  if (raw_producer_wait_started(&b->prod, 5000) < 0) {
    fprintf(stderr, "bench: data source did not start\n");
    return 1;
  }
  /* Baseline: memcpy of the same number of bytes, same chunk size. */
  size_t blk = 8 * 1024;
  uint8_t *src = malloc(blk), *dst = malloc(64u << 20);
  memset(src, 1, blk);
  double m0 = now_s();
  for (uint64_t done = 0; done < b->target_bytes; done += blk)
    memcpy(dst + (done % (64u << 20)), src, blk);
  double memcpy_s = now_s() - m0;

  double cpu0 = proc_cpu(b->ts.pid, NULL);
  b->t_start = now_s();
  pthread_t pt, ct;
  pthread_create(&ct, NULL, consumer_thread, b);
  pthread_create(&pt, NULL, producer_thread, b);
  pthread_join(pt, NULL);
  pthread_join(ct, NULL);
  read_once(b); /* the rest */
  b->t_read_end = now_s();
  long hwm = 0;
  double cpu = proc_cpu(b->ts.pid, &hwm) - cpu0;

  Perfetto__Protos__GetTraceStatsRequest gs = PERFETTO__PROTOS__GET_TRACE_STATS_REQUEST__INIT;
  ProtobufCMessage *rep = NULL;
  raw_call(&b->cons.conn, "GetTraceStats", &gs.base, -1,
           &perfetto__protos__get_trace_stats_response__descriptor, &rep, 5000);
  uint64_t overwritten = 0, discarded = 0, violations = 0;
  if (rep) {
    Perfetto__Protos__GetTraceStatsResponse *r = (void *)rep;
    if (r->trace_stats && r->trace_stats->n_buffer_stats) {
      overwritten = r->trace_stats->buffer_stats[0]->chunks_overwritten;
      discarded = r->trace_stats->buffer_stats[0]->chunks_discarded;
      violations = r->trace_stats->buffer_stats[0]->abi_violations;
    }
    protobuf_c_message_free_unpacked(rep, NULL);
  }

  double gb = (double)b->bytes_written / 1e9;
  double ingest_s = b->t_prod_end - b->t_start;
  double total_s = b->t_read_end - b->t_start;
  uint64_t pw = atomic_load(&b->packets_written);
  /* Read-out counts service packets too; loss counts only producer ones. */
  uint64_t lost = pw > b->packets_read ? pw - b->packets_read : 0;
  printf("bench_service_ingest (%s): %" PRIu64 " MiB of %d-byte packets, "
         "%u KiB pages, SMB %u KiB, buffer %u MiB\n",
         label, mib, PACKET_SIZE, PAGE_KB, SMB_KB, buffer_kb / 1024);
  printf("  ingest into central buffer : %8.1f MB/s  (target >= 1400)\n",
         (double)b->bytes_written / 1e6 / ingest_s);
  printf("  read-out to consumer       : %8.1f MB/s  (target >= 1000)\n",
         (double)b->bytes_read / 1e6 / total_s);
  printf("  memcpy of the same bytes   : %8.1f MB/s  (baseline, this run)\n",
         (double)b->target_bytes / 1e6 / memcpy_s);
  printf("  service CPU                : %8.2f s/GB\n", cpu / gb);
  printf("  service peak RSS           : %8.1f MiB (buffers configured: %u MiB)\n",
         (double)hwm / 1024.0, buffer_kb / 1024);
  printf("  packets written / read     : %" PRIu64 " / %" PRIu64 "\n", pw, b->packets_read);
  printf("  loss                       : %" PRIu64 " packets; chunks overwritten %" PRIu64
         ", discarded %" PRIu64 ", abi violations %" PRIu64 "\n",
         lost, overwritten, discarded, violations);
  raw_consumer_close(&b->cons);
  raw_producer_close(&b->prod);
  test_service_stop(&b->ts);
  free(src);
  free(dst);
  free(b);
  return 0;
}

/* GB/s of the first write over a fresh BUFFER_KB anonymous mapping, as a
 * new session's ring gets it; -1 if it cannot be mapped. */
static double first_fill_gbps(bool huge) {
  size_t n = (size_t)BUFFER_KB * 1024;
  uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return -1;
  if (huge && madvise(p, n, MADV_HUGEPAGE) != 0) {
    munmap(p, n);
    return -1;
  }
  double t0 = now_s();
  memset(p, 1, n);
  double s = now_s() - t0;
  munmap(p, n);
  return (double)n / 1e9 / s;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_service_ingest [MIB]\n"
          "  A real tracegated's ingest and read-out: MB/s into the central "
          "buffer and\n"
          "  out to a consumer, service CPU per GB, peak RSS and loss, next "
          "to a memcpy\n"
          "  of the same bytes; first, how fast fresh memory fills with 4 KiB "
          "and 2 MiB\n"
          "  pages.\n"
          "  MIB  written by the producer in each of three runs (1-65536, "
          "default 1024)\n");
}

int main(int argc, char **argv) {
  uint64_t mib = 1024;
  const bench_arg_t args[] = {{"MIB", 1, 65536, &mib}};
  int parsed = bench_args_parse("bench_service_ingest", argc, argv, args, 1,
                                usage, NULL);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  /* Small pages first: memory the huge mapping just gave back would come
   * to them warm. */
  double small = first_fill_gbps(false), huge = first_fill_gbps(true);
  printf("fresh memory, first write of %u MiB: 4 KiB pages %.2f GB/s, "
         "2 MiB pages (MADV_HUGEPAGE) ",
         BUFFER_KB / 1024, small);
  if (huge < 0)
    printf("unavailable\n");
  else
    printf("%.2f GB/s (the ring uses 4 KiB pages)\n", huge);
  int rv = run(mib, false, 0, "ingest only, ring wrapping, no reader");
  if (rv == 0)
    rv = run(mib, true, 0, "consumer streaming, producer unpaced");
  if (rv == 0)
    rv = run(mib, true, 1e9, "consumer streaming, producer paced at 1 GB/s");
  return rv;
}
