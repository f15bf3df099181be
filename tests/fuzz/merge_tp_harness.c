/* The fleet merge as `make fuzz-merge-tp` drives it (tests/fuzz/
 * merge_tp.py): `merge_tp_harness INPUT OUTPUT` merges one fuzz_merge
 * input (records of [host byte][length: 2 bytes, little endian][packet],
 * fuzz_merge.c) beside a good host and writes the merged trace to OUTPUT,
 * for Perfetto's trace processor to import.
 *
 * The trace is built as test_fleet_merge's
 * trace_processor_reads_the_others_beside_them builds it, so that a
 * finding saved to the fuzz_merge corpus fails that test the same way:
 * the collector's head (fixed clocks and names), host 0's track with the
 * "evidence" slice's begin, the input's packets on hosts 1 and 2 (the
 * record's host byte mod 2), then the slice's end on host 0; and a
 * counter track of host 0 with one value, which test_fleet_merge does not
 * write. The driver checks that trace processor imports the file and
 * finds host 0's slice and counter as it does in host 0's file alone.
 *
 * An input whose last byte is odd runs the joined mode (merge.h,
 * TG_MERGE_APP_JOINED), as fuzz_merge chooses it: host 0 at offset 0, the
 * others at offsets of either sign taken from the input's first bytes, so
 * that host 0's track and the others' app sequences share machine 0.
 *
 * Exit status: 0 written; 1 the input could not be read or the output
 * written, or the merge failed other than by refusing a host with too
 * many sequences (said on stderr).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "consumer/fleet/merge.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

#define HOSTS 3
#define INPUT_MAX (1u << 20)

static int sink_write(void *ctx, const uint8_t *p, size_t n,
                      const uint8_t *tail, size_t tail_n) {
  tg_buf_t *out = ctx;
  uint8_t hdr[1 + TG_PB_MAX_VARINT_SIZE];
  hdr[0] = (uint8_t)TG_PB_TAG(1, TG_PB_WT_LEN); /* Trace.packet */
  size_t h = (size_t)(tg_pb_write_varint(hdr + 1, n + tail_n) - hdr);
  if (tg_buf_append(out, hdr, h) < 0 || tg_buf_append(out, p, n) < 0 ||
      (tail_n && tg_buf_append(out, tail, tail_n) < 0))
    return -ENOMEM;
  return 0;
}

static size_t put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

static size_t put_len(uint8_t *p, uint32_t field, const void *b, size_t n) {
  size_t at = put_varint(p, (uint64_t)field << 3 | 2);
  at += put_varint(p + at, n);
  memcpy(p + at, b, n);
  return at + n;
}

static size_t put_u(uint8_t *p, uint32_t field, uint64_t v) {
  size_t at = put_varint(p, (uint64_t)field << 3);
  return at + put_varint(p + at, v);
}

/* Host 0's packets, as test_fleet_merge's evidence_packet: 0 the track
 * (clears the sequence's state), 1 the slice's begin with its interned
 * name, 2 its end; and, here only, so that the driver can hold the good
 * host's counters unchanged too: 3 a counter track, 4 a value on it. */
static size_t evidence(uint8_t *p, int which) {
  uint8_t a[64], b[64];
  if (which >= 3) {
    size_t n = put_u(p, 8, which == 3 ? 1000 : 2500); /* timestamp */
    if (which == 3) {
      size_t t = put_u(a, 1, 1235);
      t += put_len(a + t, 2, "evidence counter", 16);
      t += put_len(a + t, 8, "", 0); /* counter: a counter track */
      n += put_len(p + n, 60, a, t); /* track_descriptor */
    } else {
      size_t t = put_u(a, 9, 4);       /* TYPE_COUNTER */
      t += put_u(a + t, 11, 1235);     /* track_uuid */
      t += put_u(a + t, 30, 42);       /* counter_value */
      n += put_len(p + n, 11, a, t);   /* track_event */
    }
    n += put_u(p + n, 13, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
    return n + put_u(p + n, 10, 1);
  }
  size_t n = put_u(p, 8, 1000 + 1000 * (uint64_t)which); /* timestamp */
  if (which == 0) {
    size_t t = put_u(a, 1, 1234);
    t += put_len(a + t, 2, "evidence track", 14);
    n += put_len(p + n, 60, a, t); /* track_descriptor */
    n += put_u(p + n, 13, 1);      /* SEQ_INCREMENTAL_STATE_CLEARED */
  } else {
    size_t t = put_u(a, 9, which == 1 ? 1 : 2); /* SLICE_BEGIN / END */
    if (which == 1) t += put_u(a + t, 10, 1);   /* name_iid */
    t += put_u(a + t, 11, 1234);                /* track_uuid */
    n += put_len(p + n, 11, a, t);              /* track_event */
    if (which == 1) {
      size_t e = put_u(b, 1, 1);
      e += put_len(b + e, 2, "evidence", 8);
      uint8_t names[64];
      size_t k = put_len(names, 2, b, e); /* event_names */
      n += put_len(p + n, 12, names, k);  /* interned_data */
    }
    n += put_u(p + n, 13, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
  }
  return n + put_u(p + n, 10, 1); /* trusted_packet_sequence_id */
}

static int packet(tg_merge_t *m, tg_merge_host_t *h, const uint8_t *p,
                  size_t n) {
  int rv = tg_merge_packet(m, h, p, n);
  if (rv == 0 || rv == TG_ETOO_MANY_SEQUENCES) return 0;
  fprintf(stderr, "merge_tp_harness: the merge failed: %d\n", rv);
  return -1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: merge_tp_harness INPUT OUTPUT\n");
    return 1;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    fprintf(stderr, "merge_tp_harness: %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  uint8_t *in = malloc(INPUT_MAX);
  size_t size = in ? fread(in, 1, INPUT_MAX, f) : 0;
  fclose(f);
  if (!in) return 1;
  tg_buf_t out;
  tg_buf_init(&out, 0);
  tg_merge_t m;
  tg_merge_host_t hosts[HOSTS];
  tg_merge_init(&m, sink_write, &out);
  for (size_t i = 0; i < HOSTS; i++) tg_merge_host_init(&hosts[i], i);
  tg_merge_self_t self;
  memset(&self, 0, sizeof(self));
  self.has_uname = true;
  snprintf(self.uts.sysname, sizeof(self.uts.sysname), "Linux");
  snprintf(self.uts.release, sizeof(self.uts.release), "6.1.0-test-amd64");
  snprintf(self.uts.machine, sizeof(self.uts.machine), "x86_64");
  snprintf(self.hostname, sizeof(self.hostname), "collector.example");
  self.num_cpus = 8;
  self.clocks[TG_CLK_BOOTTIME] = 1000000000000ull;
  self.clocks[TG_CLK_MONOTONIC] = 2000000000000ull;
  self.clocks[TG_CLK_REALTIME] = 1700000000000000000ull;
  if (size && (in[size - 1] & 1)) {
    tg_merge_set_app_tracks(&m, TG_MERGE_APP_JOINED);
    for (size_t i = 0; i < HOSTS; i++) {
      int64_t off = i && size > i ? (int64_t)(int8_t)in[i] * 40000000 : 0;
      for (int c = 0; c < TG_CLK_N; c++) hosts[i].offset[c] = off;
      hosts[i].has_offset = true;
      snprintf(hosts[i].name, sizeof(hosts[i].name), "h%zu", i);
    }
  }
  int rv = tg_merge_head(&m, &self) == 0 ? 0 : -1;
  uint8_t p[256];
  if (rv == 0) rv = packet(&m, &hosts[0], p, evidence(p, 0));
  if (rv == 0) rv = packet(&m, &hosts[0], p, evidence(p, 3));
  size_t at = 0;
  while (rv == 0 && size - at >= 3) {
    size_t host = 1 + in[at] % 2;
    size_t len = (size_t)in[at + 1] | (size_t)in[at + 2] << 8;
    at += 3;
    if (len > size - at) len = size - at;
    rv = packet(&m, &hosts[host], in + at, len);
    at += len;
  }
  static const int after[] = {1, 4, 2};
  for (size_t i = 0; rv == 0 && i < 3; i++)
    rv = packet(&m, &hosts[0], p, evidence(p, after[i]));
  for (size_t i = 0; i < HOSTS; i++) tg_merge_host_end(&hosts[i]);
  if (rv == 0) {
    FILE *o = fopen(argv[2], "wb");
    size_t n = tg_buf_size(&out);
    if (!o || fwrite(tg_buf_begin(&out), 1, n, o) != n || fclose(o) != 0) {
      fprintf(stderr, "merge_tp_harness: cannot write %s\n", argv[2]);
      rv = -1;
    }
  }
  for (size_t i = 0; i < HOSTS; i++) tg_merge_host_free(&hosts[i]);
  tg_merge_free(&m);
  tg_buf_free(&out);
  free(in);
  return rv == 0 ? 0 : 1;
}
