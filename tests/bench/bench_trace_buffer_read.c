/* Read-out of a central trace buffer that has gone cold.
 *
 * When a producer outruns the consumer (the usual case for a remote
 * recording), the ring is full and the reader takes its oldest records,
 * written hundreds of MB ago: nothing it reads is in any cache. This bench
 * fills a ring larger than the last-level cache with SMB chunks as the
 * agent lays them out (4088-byte chunks, 4-byte fragment headers, packets
 * split across chunks), then reads every packet back with
 * tg_trace_buffer_read_packet(), looks at its first field as readout.c does
 * and gathers the packets into 128 KiB frames, copied out once full as the
 * socket's writev() copies them. It prints
 * ns per packet and GB/s next to a memcpy of the same bytes out of a cold
 * region of the same size, measured in the same run.
 *
 *   bench_trace_buffer_read [RING_MB [PACKET_BYTES [ROUNDS]]]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "abi/smb.h"
#include "tracegate/pb_wire.h"
#include "service/trace_buffer.h"

#define CHUNK_SIZE 4088u /* one chunk per 4 KiB page, the agent's default */
#define OUT_SIZE (128u * 1024u) /* one ReadBuffers frame */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A TracePacket of |n| bytes: one length-delimited field (for_testing, 900)
 * whose bytes are filler; the length is a 2-byte varint, non-minimal below
 * 128, so every |n| from 8 to 16000 fits. Written by hand, like the chunks
 * of test_trace_buffer.c, so the bench reads the wire format. Its bytes
 * matter to the figures: with a 4-byte length the same read-out took
 * ~100 ns per packet against ~66 (same library code, unexplained), while
 * the build before the prefetch took ~200 with either. */
static void packet_bytes(uint8_t *p, size_t n) {
  size_t body = n - 4;
  uint8_t *q = tg_pb_write_varint(p, TG_PB_TAG(900, 2)); /* 2 bytes */
  q[0] = (uint8_t)((body & 0x7F) | 0x80);
  q[1] = (uint8_t)(body >> 7);
  memset(q + 2, 0x5A, body);
}

typedef struct filler {
  tg_trace_buffer_t *tb;
  const uint8_t *pkt;
  size_t pkt_len;
  size_t pkt_off; /* bytes of the current packet already written */
  uint32_t chunk_id;
  uint64_t packets_started;
} filler_t;

/* One chunk, packed with fragments as a trace writer would: a packet that
 * does not fit goes on in the next chunk. */
static int fill_chunk(filler_t *f, const tg_producer_ident_t *p) {
  uint8_t c[CHUNK_SIZE];
  memset(c, 0, sizeof(c));
  size_t pos = TG_SMB_CHUNK_HEADER_SIZE;
  unsigned count = 0, flags = 0;
  if (f->pkt_off) flags |= TG_CHUNK_FIRST_PACKET_CONTINUES;
  while (CHUNK_SIZE - pos > 4) {
    size_t room = CHUNK_SIZE - pos - 4;
    size_t left = f->pkt_len - f->pkt_off;
    size_t n = left < room ? left : room;
    tg_pb_write_redundant_varint(c + pos, (uint32_t)n);
    memcpy(c + pos + 4, f->pkt + f->pkt_off, n);
    pos += 4 + n;
    count++;
    if (f->pkt_off == 0) f->packets_started++;
    f->pkt_off += n;
    if (f->pkt_off == f->pkt_len) {
      f->pkt_off = 0;
    } else {
      flags |= TG_CHUNK_LAST_PACKET_CONTINUES;
      break;
    }
  }
  uint32_t id = f->chunk_id++;
  tg_pb_write_le32(c, id);
  c[4] = 1; /* writer 1, little-endian */
  c[5] = 0;
  uint16_t packets = tg_chunk_packets_pack(count, flags);
  c[6] = (uint8_t)packets;
  c[7] = (uint8_t)(packets >> 8);
  return tg_trace_buffer_copy_chunk(f->tb, p, c, sizeof(c), true);
}

/* Reads the whole buffer out as readout.c and read_frames.c do: packets
 * are looked at (their first field) and collected as pieces of a 128 KiB
 * frame; the frame's bytes are copied only when it is full, as the kernel
 * copies a writev(). Returns bytes read, counts packets. */
#define MAX_PIECES 4096
static uint64_t drain(tg_trace_buffer_t *tb, uint8_t *out, uint64_t *packets,
                      uint64_t *check) {
  static const uint8_t *piece[MAX_PIECES];
  static size_t piece_len[MAX_PIECES];
  tg_packet_t pkt;
  size_t used = 0;
  unsigned n = 0;
  uint64_t bytes = 0, sum = 0;
  for (;;) {
    int got = tg_trace_buffer_read_packet(tb, &pkt);
    if (got != 1 || used + pkt.size > OUT_SIZE ||
        n + pkt.num_slices > MAX_PIECES) {
      size_t at = 0; /* the frame goes out */
      for (unsigned i = 0; i < n; i++) {
        memcpy(out + at, piece[i], piece_len[i]);
        at += piece_len[i];
      }
      sum += out[at / 2];
      used = 0;
      n = 0;
      if (got != 1) break;
    }
    sum += pkt.slice[0][0]; /* readout.c parses the first field */
    for (unsigned i = 0; i < pkt.num_slices; i++) {
      piece[n] = pkt.slice[i];
      piece_len[n++] = pkt.slice_len[i];
    }
    used += pkt.size;
    bytes += pkt.size;
    (*packets)++;
  }
  *check += sum;
  return bytes;
}

/* |s| as a whole decimal number in [lo, hi]. */
static bool arg_in(const char *s, unsigned long lo, unsigned long hi,
                   unsigned long *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_trace_buffer_read [RING_MB [PACKET_BYTES [ROUNDS]]]\n"
          "  RING_MB       central buffer size, 1-4096 (default 256; keep it\n"
          "                above the last-level cache to read a cold ring)\n"
          "  PACKET_BYTES  TracePacket size, 8-16000 (default 1024)\n"
          "  ROUNDS        fill-and-read rounds, 1-100 (default 3)\n"
          "Prints the read-out's ns per packet and GB/s next to a memcpy of\n"
          "the same bytes from a cold region, measured in the same round.\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return 0;
  }
  unsigned long ring_mb = 256, pkt_len = 1024, rounds = 3;
  if (argc > 4 || (argc > 1 && !arg_in(argv[1], 1, 4096, &ring_mb)) ||
      (argc > 2 && !arg_in(argv[2], 8, 16000, &pkt_len)) ||
      (argc > 3 && !arg_in(argv[3], 1, 100, &rounds))) {
    usage(stderr);
    return 2;
  }
  size_t ring = (size_t)ring_mb << 20;
  static const tg_producer_ident_t prod = {1, 1000, 4242};
  uint8_t *pkt = malloc(pkt_len);
  uint8_t *out = malloc(OUT_SIZE);
  /* The baseline's cold region: written once, then read after another
   * region of the same size has pushed it out of the caches. */
  uint8_t *cold = mmap(NULL, ring, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uint8_t *evict = mmap(NULL, ring, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!pkt || !out || cold == MAP_FAILED || evict == MAP_FAILED) {
    fprintf(stderr, "bench_trace_buffer_read: out of memory\n");
    return 1;
  }
  packet_bytes(pkt, pkt_len);
  memset(cold, 0x5A, ring);
  printf(
      "trace buffer read-out, cold ring of %lu MB, %lu-byte packets in "
      "%u-byte chunks:\n",
      ring_mb, pkt_len, CHUNK_SIZE);
  uint64_t check = 0;
  for (unsigned r = 0; r < rounds; r++) {
    tg_trace_buffer_t *tb = tg_trace_buffer_new(ring, TG_FILL_RING_BUFFER);
    if (!tb) {
      fprintf(stderr, "bench_trace_buffer_read: no %lu MB ring\n", ring_mb);
      return 1;
    }
    filler_t f = {tb, pkt, pkt_len, 0, 0, 0};
    /* Fill one and a half times: the ring wraps and overwrites, as it does
     * under a producer faster than the network. */
    size_t chunks = ring / (CHUNK_SIZE + 64) * 3 / 2;
    for (size_t i = 0; i < chunks; i++) {
      int rv = fill_chunk(&f, &prod);
      if (rv != 0) {
        fprintf(stderr, "bench_trace_buffer_read: chunk %zu refused: %d\n", i,
                rv);
        return 1;
      }
    }
    memset(evict, (int)r, ring); /* the ring's tail leaves the caches too */

    uint64_t packets = 0;
    double t0 = now_s();
    uint64_t bytes = drain(tb, out, &packets, &check);
    double t_read = now_s() - t0;
    if (packets == 0 || bytes != packets * pkt_len) {
      fprintf(stderr,
              "bench_trace_buffer_read: read %" PRIu64 " bytes in %" PRIu64
              " packets of %lu bytes: the read-out broke packets\n",
              bytes, packets, pkt_len);
      return 1;
    }
    if (getenv("BENCH_PHASES")) /* for perf report --time */
      fprintf(stderr, "drain %.6f,%.6f\n", t0, t0 + t_read);

    memset(evict, (int)r + 1, ring);
    t0 = now_s();
    size_t used = 0;
    for (uint64_t off = 0; off + pkt_len <= bytes && off + pkt_len <= ring;
         off += pkt_len) {
      if (used + pkt_len > OUT_SIZE) used = 0;
      memcpy(out + used, cold + off, pkt_len);
      used += pkt_len;
    }
    double t_copy = now_s() - t0;
    uint64_t copied = bytes < ring ? bytes : ring / pkt_len * pkt_len;
    check += out[1];

    const tg_trace_buffer_stats_t *st = tg_trace_buffer_stats(tb);
    printf("  round %u: read-out %6.1f ns/packet %5.2f GB/s | memcpy of a "
           "cold region %6.1f ns/packet %5.2f GB/s | %" PRIu64
           " packets, %" PRIu64 " overwritten chunks\n",
           r + 1, t_read * 1e9 / (double)packets, (double)bytes / 1e9 / t_read,
           t_copy * 1e9 / (double)(copied / pkt_len),
           (double)copied / 1e9 / t_copy, packets, st->chunks_overwritten);
    tg_trace_buffer_free(tb);
  }
  printf("  (checksum %" PRIu64 ")\n", check);
  munmap(cold, ring);
  munmap(evict, ring);
  free(pkt);
  free(out);
  return 0;
}
