/* A fixed recording of three hosts for the fleet merge
 * (consumer/fleet/merge.h), fed through four calls that any merge
 * implements: the collector's head, a host's preamble, a later clock
 * sync, one packet. What the merge writes for it is compared byte for
 * byte with tests/consumer/fleet_merge_golden.inc (test_fleet_merge.c).
 *
 * The recording covers every path of the merge: sequence ids absent, 0,
 * repeated (the last wins), in range and in the overflow range (mapped
 * once, reused, per host), packets that do not decode, compressed_packets
 * wrappers (whole, corrupt, framed badly, nested), a large and an empty
 * packet, hosts with and without host info and clock estimates, and a
 * REALTIME that stepped back during a ClockSync call.
 */
#ifndef TRACEGATE_TESTS_FLEET_MERGE_SCRIPT_H
#define TRACEGATE_TESTS_FLEET_MERGE_SCRIPT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "consumer/fleet/host.h"
#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"

/* The collector, as its head describes it. */
#define SCRIPT_SYSNAME "Linux"
#define SCRIPT_RELEASE "6.1.0-test-amd64"
#define SCRIPT_VERSION "#1 SMP PREEMPT_DYNAMIC Debian 6.1.0"
#define SCRIPT_MACHINE "x86_64"
#define SCRIPT_HOSTNAME "collector.example"
#define SCRIPT_NUM_CPUS 8u
static const uint64_t script_self_clocks[TG_CLK_N] = {
    1000000000000ull, 2000000000000ull, 1700000000000000000ull};

#define SCRIPT_HOSTS 3
/* The hosts' names as the operator gave them. */
#define SCRIPT_NAMES "alpha.example", "beta.example", "gamma.example"

typedef struct merge_script_ops {
  int (*head)(void *ctx);
  /* |name|: the host's name, as the operator gave it. */
  int (*preamble)(void *ctx, size_t host, const tg_fleet_host_report_t *h,
                  const char *name);
  int (*clock_sync)(void *ctx, size_t host, const tg_fleet_host_report_t *h);
  int (*packet)(void *ctx, size_t host, const uint8_t *p, size_t n);
} merge_script_ops_t;

/* A packet: a timestamp (field 8), a payload (for_testing, field 900: a
 * TestEvent with the text as its str, field 1), then the sequence ids in
 * |seqs| (field 10, in order; |n_seqs| of them). */
static inline size_t script_packet(uint8_t *buf, size_t cap, uint64_t ts,
                                   const char *payload, const uint32_t *seqs,
                                   size_t n_seqs) {
  tg_pbw_t w;
  tg_pbw_init(&w, buf, cap, NULL, NULL);
  tg_pbw_append_varint(&w, 8, ts);
  if (payload) {
    tg_pbw_begin_nested(&w, 900);
    tg_pbw_append_string(&w, 1, payload);
    tg_pbw_end_nested(&w);
  }
  for (size_t i = 0; i < n_seqs; i++) tg_pbw_append_varint(&w, 10, seqs[i]);
  return tg_pbw_error(&w) ? 0 : (size_t)tg_pbw_written(&w);
}

/* Appends |p| to a Trace being built at |out| + *len as a packet field. */
static inline void script_frame(uint8_t *out, size_t *len, const uint8_t *p,
                                size_t n) {
  out[(*len)++] = (uint8_t)TG_PB_TAG(1, TG_PB_WT_LEN);
  *len = (size_t)(tg_pb_write_varint(out + *len, n) - out);
  memcpy(out + *len, p, n);
  *len += n;
}

/* A compressed_packets wrapper (field 50) of |trace| (|n| bytes), with a
 * sequence id of its own that the merge must not use. */
static inline size_t script_wrapper(uint8_t *buf, size_t cap,
                                    const uint8_t *trace, size_t n) {
  uint8_t z[8192];
  uLongf zn = sizeof(z);
  if (compress2(z, &zn, trace, n, 6) != Z_OK) return 0;
  tg_pbw_t w;
  tg_pbw_init(&w, buf, cap, NULL, NULL);
  tg_pbw_append_bytes(&w, 50, z, zn);
  tg_pbw_append_varint(&w, 10, 77);
  return tg_pbw_error(&w) ? 0 : (size_t)tg_pbw_written(&w);
}

static inline void script_sample(tg_clock_sample_t *s, uint64_t base,
                                 uint64_t rtt, int64_t offset) {
  for (int i = 0; i < TG_CLK_N; i++) {
    uint64_t b = base + (uint64_t)i * 1000000000000ull;
    s->before[i] = b;
    s->after[i] = b + rtt;
    s->remote[i] = b + rtt / 2 + (uint64_t)offset;
  }
}

static inline void script_hosts(tg_fleet_host_report_t h[SCRIPT_HOSTS]) {
  memset(h, 0, SCRIPT_HOSTS * sizeof(*h));
  /* Described fully, one clock estimate. */
  h[0].has_info = true;
  snprintf(h[0].hostname, sizeof(h[0].hostname), "alpha");
  snprintf(h[0].kernel, sizeof(h[0].kernel), "Linux 6.1.0-18-amd64");
  snprintf(h[0].host_machine_id, sizeof(h[0].host_machine_id),
           "0123456789abcdef0123456789abcdef");
  h[0].num_cpus = 4;
  script_sample(&h[0].clock.best, 5000000000ull, 340000, 123456789);
  h[0].clock.first = h[0].clock.best;
  h[0].clock.estimates = 1;
  /* No TracegateRelay: no info, no clock. */
  /* Info without a name, a kernel string without a release, and a
   * REALTIME that stepped back during the call. */
  h[2].has_info = true;
  snprintf(h[2].kernel, sizeof(h[2].kernel), "Plan9");
  script_sample(&h[2].clock.best, 7000000000ull, 90000, -5000000);
  h[2].clock.best.after[TG_CLK_REALTIME] =
      h[2].clock.best.before[TG_CLK_REALTIME] - 333333;
  h[2].clock.estimates = 1;
}

#define SCRIPT_CALL(x)          \
  do {                          \
    int rv_ = (x);              \
    if (rv_ < 0) return rv_;    \
  } while (0)

/* Runs the recording through |ops|. Returns 0 or the first error. */
static inline int merge_script_run(const merge_script_ops_t *ops, void *ctx) {
  static const char *const names[SCRIPT_HOSTS] = {SCRIPT_NAMES};
  tg_fleet_host_report_t h[SCRIPT_HOSTS];
  script_hosts(h);
  static uint8_t p[16384], trace[16384], big[3000];
  size_t n, tn;

  SCRIPT_CALL(ops->head(ctx));
  for (size_t i = 0; i < SCRIPT_HOSTS; i++)
    SCRIPT_CALL(ops->preamble(ctx, i, &h[i], names[i]));

  /* Sequence ids, host 0: in range, absent, 0, repeated, overflow. */
  static const uint32_t ids[][2] = {{5, 0},       {0, 0},      {3, 7},
                                    {0xFFFFF, 0}, {0x12345678, 0},
                                    {0xFFFFF, 0}, {0xFFFFE, 0}, {1, 0},
                                    {0xFFFFFFFF, 0}};
  static const size_t n_ids[] = {1, 0, 2, 1, 1, 1, 1, 1, 1};
  for (size_t i = 0; i < sizeof(n_ids) / sizeof(n_ids[0]); i++) {
    uint32_t seq[2] = {ids[i][0], ids[i][1]};
    size_t k = n_ids[i];
    if (i == 1) { /* an explicit 0 */
      seq[0] = 0;
      k = 1;
    }
    n = script_packet(p, sizeof(p), 100 + i, "host 0", seq, k);
    SCRIPT_CALL(ops->packet(ctx, 0, p, n));
    /* Host 1 interleaved: the same ids land elsewhere. */
    n = script_packet(p, sizeof(p), 200 + i, NULL, ids[i], n_ids[i]);
    SCRIPT_CALL(ops->packet(ctx, 1, p, n));
  }
  /* A packet without any id. */
  n = script_packet(p, sizeof(p), 300, "no id", NULL, 0);
  SCRIPT_CALL(ops->packet(ctx, 2, p, n));

  /* Does not decode: a truncated varint, a bad wire type. */
  static const uint8_t cut[] = {0x40, 0xFF, 0xFF};
  static const uint8_t bad_type[] = {0x0F, 0x01};
  SCRIPT_CALL(ops->packet(ctx, 0, cut, sizeof(cut)));
  SCRIPT_CALL(ops->packet(ctx, 2, bad_type, sizeof(bad_type)));

  /* A wrapper of three packets: in range, overflow (already mapped for
   * host 0), and one more wrapper inside (refused, counted). */
  tn = 0;
  uint32_t s9 = 9, sov = 0xFFFFF, s4 = 4;
  n = script_packet(p, sizeof(p), 400, "inner 1", &s9, 1);
  script_frame(trace, &tn, p, n);
  n = script_packet(p, sizeof(p), 401, "inner 2", &sov, 1);
  script_frame(trace, &tn, p, n);
  uint8_t inner_trace[256];
  size_t itn = 0;
  n = script_packet(p, sizeof(p), 402, "nested", &s4, 1);
  script_frame(inner_trace, &itn, p, n);
  n = script_wrapper(p, sizeof(p), inner_trace, itn);
  script_frame(trace, &tn, p, n);
  n = script_packet(p, sizeof(p), 403, "inner 4", &s4, 1);
  script_frame(trace, &tn, p, n);
  n = script_wrapper(p, sizeof(p), trace, tn);
  SCRIPT_CALL(ops->packet(ctx, 0, p, n));

  /* A wrapper whose bytes are not zlib. */
  static const uint8_t not_zlib[] = {0x92, 0x03, 0x04, 'j', 'u', 'n', 'k'};
  SCRIPT_CALL(ops->packet(ctx, 1, not_zlib, sizeof(not_zlib)));

  /* A wrapper whose Trace breaks after one good packet. */
  tn = 0;
  n = script_packet(p, sizeof(p), 500, "before the break", &s9, 1);
  script_frame(trace, &tn, p, n);
  trace[tn++] = 0x12; /* field 2, not a packet */
  trace[tn++] = 0x00;
  n = script_wrapper(p, sizeof(p), trace, tn);
  SCRIPT_CALL(ops->packet(ctx, 2, p, n));

  /* The clocks again: host 0 with a new best sample, host 1 without any
   * estimate (nothing written), host 2 unchanged. */
  script_sample(&h[0].clock.best, 9000000000ull, 120000, 123400000);
  h[0].clock.estimates = 2;
  for (size_t i = 0; i < SCRIPT_HOSTS; i++)
    SCRIPT_CALL(ops->clock_sync(ctx, i, &h[i]));

  /* A large packet and an empty one. */
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  uint32_t s2 = 2;
  n = script_packet(p, sizeof(p), 600, (const char *)big, &s2, 1);
  SCRIPT_CALL(ops->packet(ctx, 2, p, n));
  SCRIPT_CALL(ops->packet(ctx, 1, p, 0));
  return 0;
}

/* Packets each host had dropped for not decoding at the end. */
static const uint64_t script_malformed[SCRIPT_HOSTS] = {2, 1, 2};

#endif /* TRACEGATE_TESTS_FLEET_MERGE_SCRIPT_H */
