/* Fuzzes the fleet merge (consumer/fleet/merge.h), which takes every packet
 * a remote host sends, compressed_packets wrappers included, into the one
 * trace of the fleet that the CLI and the collector write.
 *
 * Input: records of [host: 1 byte, taken mod 3][length: 2 bytes, little
 * endian][the packet's bytes], to the end of the input.
 *
 * Invariants (trap on violation):
 * - tg_merge_packet() returns 0, TG_ETOO_MANY_SEQUENCES or -ENOMEM;
 * - what it writes for a host is a packet that decodes whole, holds no
 *   compressed_packets (they are opened and merged packet by packet), and
 *   ends with exactly machine_id = host + 1 then a non-zero sequence id,
 *   both varints;
 * - that id is the packet's own moved into the host's range (a packet
 *   without one: the range's TG_MERGE_SEQ_NONE), or one of the overflow
 *   range that the same host's same id always gets and no other host's
 *   id ever gets;
 * - what a host left out for want of incremental state (state_edge,
 *   state_lost) only grows, its end moves what was waiting into lost, and
 *   its table of sequences stays within TG_MERGE_HOST_MAX_STATE_SEQS;
 * - what it left out for times trace processor could not place
 *   (clock_unplaced) only grows, is part of malformed, and its clock
 *   model stays within its bounds: no ftrace bundle on MONOTONIC_RAW or
 *   the global clock is written unless the model had (or the bundle
 *   brought) a path for it, and no ClockSnapshot moving the trace clock
 *   off BOOTTIME, nor one trace processor refuses whole, is written;
 * - flush markers left out (sorter_markers) only grow.
 *
 * Half the inputs (the last byte odd) run the joined mode (merge.h,
 * TG_MERGE_APP_JOINED), the hosts' clock offsets taken from the input's
 * first bytes: then a packet written on machine 0 decodes whole, ends
 * with an optional timestamp then its sequence id (as above: the host's
 * range or its overflow id) and no machine id, its host's counters only
 * grow, and its tables stay within their bounds.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "consumer/fleet/trace_schema.h"
#include "consumer/fleet/clock_model.h"
#include "consumer/fleet/merge.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HOSTS 3
#define PKT_SEQ_ID 10
#define PKT_COMPRESSED_PACKETS 50
#define PKT_MACHINE_ID 98

/* Overflow ids handed out in one input: (host, the packet's id, the id it
 * got). Linear search; inputs are short. */
#define MAPPED_MAX 512
static struct {
  size_t host;
  uint32_t orig, seq;
} mapped[MAPPED_MAX];
static size_t n_mapped;
static size_t cur_host;
static bool cur_wrapper;
/* The verdict the model gave the packet being merged, before the merge
 * noted it. */
static tg_clock_verdict_t cur_verdict;
static uint64_t cur_marker_before;
static bool joined;

#define PKT_TIMESTAMP_CLOCK_ID 58
#define PKT_TIMESTAMP 8

static void check_overflow(uint32_t orig, uint32_t seq) {
  for (size_t i = 0; i < n_mapped; i++) {
    if (mapped[i].seq == seq && mapped[i].host != cur_host &&
        seq != UINT32_MAX)
      __builtin_trap(); /* another host's id */
    if (mapped[i].host == cur_host && mapped[i].orig == orig) {
      if (mapped[i].seq != seq) __builtin_trap(); /* not stable */
      return;
    }
  }
  if (n_mapped < MAPPED_MAX) {
    mapped[n_mapped].host = cur_host;
    mapped[n_mapped].orig = orig;
    mapped[n_mapped].seq = seq;
    n_mapped++;
  }
}

static int sink(void *ctx, const uint8_t *p, size_t n, const uint8_t *tail,
                size_t tail_n) {
  (void)ctx;
  /* The packet as written: decodes whole, no wrapper, its own last id. */
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, p, n);
  uint64_t orig = 0;
  int rv;
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == PKT_COMPRESSED_PACKETS) __builtin_trap();
    if (f.id == PKT_SEQ_ID && f.type == TG_PB_WT_VARINT) orig = f.value;
  }
  if (rv != 0) __builtin_trap();
  /* Written, so the model placed its times (unless it came out of a
   * wrapper, whose packets are judged one by one). */
  if (cur_verdict != TG_CLOCK_OK && !cur_wrapper) __builtin_trap();
  /* The tail: machine id, then sequence id, nothing else, after BOOTTIME
   * named as the timestamp's clock for a time on no clock; or, on
   * machine 0 in the joined mode, a timestamp maybe, then the id. */
  tg_pb_reader_init(&r, tail, tail_n);
  if (tg_pb_reader_next(&r, &f) != 1) __builtin_trap();
  if (f.id == PKT_TIMESTAMP_CLOCK_ID) {
    if (f.type != TG_PB_WT_VARINT || f.value != 6) __builtin_trap();
    /* Only for a packet with a time and no clock of its own. */
    tg_pb_reader_t pr;
    tg_pb_field_t pf;
    bool timed = false;
    tg_pb_reader_init(&pr, p, n);
    while (tg_pb_reader_next(&pr, &pf) == 1) {
      if (pf.id == PKT_TIMESTAMP_CLOCK_ID) __builtin_trap();
      if (pf.id == PKT_TIMESTAMP && pf.type == TG_PB_WT_VARINT) timed = true;
    }
    if (!timed || tg_pb_reader_next(&r, &f) != 1 || f.id != PKT_MACHINE_ID)
      __builtin_trap();
  }
  bool m0 = f.id != PKT_MACHINE_ID;
  if (m0 && !joined) __builtin_trap();
  /* On machine 0 a packet says no machine of its own (merge_links.c). */
  if (m0) {
    tg_pb_reader_t pr;
    tg_pb_field_t pf;
    tg_pb_reader_init(&pr, p, n);
    while (tg_pb_reader_next(&pr, &pf) == 1)
      if (pf.id == PKT_MACHINE_ID) __builtin_trap();
  }
  if (!m0 && (f.type != TG_PB_WT_VARINT || f.value != cur_host + 1))
    __builtin_trap();
  if (m0 && f.id == PKT_TIMESTAMP &&
      (f.type != TG_PB_WT_VARINT || f.value > INT64_MAX ||
       tg_pb_reader_next(&r, &f) != 1))
    __builtin_trap();
  if (!m0 && tg_pb_reader_next(&r, &f) != 1) __builtin_trap();
  if (f.id != PKT_SEQ_ID ||
      f.type != TG_PB_WT_VARINT || f.value == 0 || f.value > UINT32_MAX)
    __builtin_trap();
  if (tg_pb_reader_next(&r, &f) != 0) __builtin_trap();
  uint32_t seq = (uint32_t)f.value, o = (uint32_t)orig;
  uint32_t base = (uint32_t)(cur_host + 1) << TG_MERGE_SEQ_SHIFT;
  if (o < TG_MERGE_SEQ_COLLECTOR) {
    if (seq != (base | (o ? o : TG_MERGE_SEQ_NONE))) __builtin_trap();
  } else {
    if (seq <= TG_MERGE_SEQ_OVERFLOW_BASE) __builtin_trap();
    check_overflow(o, seq);
  }
  return 0;
}

static tg_merge_host_t *host_at(void *ctx, size_t i) {
  tg_merge_host_t *hosts = ctx;
  return i < HOSTS ? &hosts[i] : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static tg_merge_t m;
  tg_merge_host_t hosts[HOSTS];
  tg_merge_init(&m, sink, NULL);
  for (size_t i = 0; i < HOSTS; i++) tg_merge_host_init(&hosts[i], i);
  n_mapped = 0;
  joined = size && (data[size - 1] & 1);
  if (joined) {
    tg_merge_set_app_tracks(&m, TG_MERGE_APP_JOINED);
    /* Offsets of either sign, from nothing to seconds; one host without
     * an estimate (its app sequences stay). */
    for (size_t i = 0; i + 1 < HOSTS; i++) {
      int64_t off = size > i ? (int64_t)(int8_t)data[i] * 40000000 : 0;
      for (int c = 0; c < TG_CLK_N; c++) hosts[i].offset[c] = off + c;
      hosts[i].has_offset = true;
      snprintf(hosts[i].name, sizeof(hosts[i].name), "h%zu", i);
    }
  }
  size_t at = 0;
  while (size - at >= 3) {
    cur_host = data[at] % HOSTS;
    size_t len = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
    at += 3;
    if (len > size - at) len = size - at;
    const tg_merge_host_t *mh = &hosts[cur_host];
    uint64_t before = mh->malformed, edge = mh->state_edge,
             lost = mh->state_lost, unplaced = mh->clock_unplaced;
    uint64_t j_before = mh->joined + mh->joined_early + mh->joined_unclocked +
                        mh->joined_shared +
                        mh->joined_refused + mh->joined_clock +
                        mh->joined_pids + mh->joined_uuid +
                        mh->flows_started + mh->flows_terminated;
    /* The model's verdict before the packet: a packet judged unplaceable
     * may still be a wrapper whose packets are judged one by one. */
    {
      tg_ts_clocks_t c;
      tg_pb_reader_t r;
      tg_pb_field_t f;
      uint64_t orig = 0;
      tg_pb_reader_init(&r, data + at, len);
      cur_wrapper = false;
      while (tg_pb_reader_next(&r, &f) == 1) {
        if (f.id == PKT_SEQ_ID && f.type == TG_PB_WT_VARINT) orig = f.value;
        if (f.id == PKT_COMPRESSED_PACKETS) cur_wrapper = true;
      }
      bool screened = tg_trace_schema_check(data + at, len, NULL, &c) ==
                      TG_TS_OK;
      /* As the merge does before its check (it only makes room). */
      if (screened)
        tg_clock_model_reserve(&hosts[cur_host].clock, &c, (uint32_t)orig);
      cur_verdict = screened
                        ? tg_clock_model_check(&mh->clock, &c, (uint32_t)orig)
                        : TG_CLOCK_OK;
      if (screened && (c.flags & TG_TS_SNAP_PRIMARY) && c.primary != 6 &&
          cur_verdict == TG_CLOCK_OK)
        __builtin_trap();
      /* A snapshot trace processor refuses whole is never passed. */
      if (screened && (c.flags & TG_TS_SNAPSHOT) &&
          (c.flags & (TG_TS_SNAP_REJECTED | TG_TS_SNAP_MANY)) &&
          cur_verdict == TG_CLOCK_OK)
        __builtin_trap();
      cur_marker_before = hosts[cur_host].sorter_markers;
    }
    int rv = tg_merge_packet(&m, &hosts[cur_host], data + at, len);
    if (rv != 0 && rv != TG_ETOO_MANY_SEQUENCES && rv != -ENOMEM)
      __builtin_trap();
    if (mh->clock_unplaced < unplaced ||
        mh->clock_unplaced - unplaced > mh->malformed - before ||
        mh->clock.n_sets > TG_CLOCK_MODEL_SETS ||
        mh->clock.n_ftrace > TG_CLOCK_MODEL_FTRACE_SEQS ||
        mh->clock.n_props > mh->clock.cap_props ||
        mh->clock.cap_props > TG_CLOCK_MODEL_MAX_PROPS ||
        mh->sorter_markers < cur_marker_before)
      __builtin_trap();
    if (mh->malformed < before || mh->state_edge < edge ||
        mh->state_lost < lost || mh->n_iseqs > TG_MERGE_HOST_MAX_STATE_SEQS ||
        tg_u32_map_count(&mh->istate) != mh->n_iseqs)
      __builtin_trap();
    uint64_t j_after = mh->joined + mh->joined_early + mh->joined_unclocked +
                        mh->joined_shared +
                       mh->joined_refused + mh->joined_clock +
                       mh->joined_pids + mh->joined_uuid +
                       mh->flows_started + mh->flows_terminated;
    if (j_after < j_before || (!joined && j_after) ||
        mh->n_jseqs > TG_MERGE_HOST_MAX_STATE_SEQS ||
        tg_u32_map_count(&mh->pids) > TG_MERGE_HOST_MAX_PIDS ||
        m.uuids.count > TG_MERGE_MAX_UUIDS ||
        m.flows.count > TG_MERGE_MAX_FLOWS)
      __builtin_trap();
    at += len;
  }
  for (size_t i = 0; i < HOSTS; i++) {
    uint64_t left_out = hosts[i].state_edge + hosts[i].state_lost;
    tg_merge_host_end(&hosts[i]);
    if (hosts[i].state_edge + hosts[i].state_lost < left_out ||
        hosts[i].state_lost_seqs > hosts[i].n_iseqs ||
        (hosts[i].state_lost > hosts[i].state_untracked &&
         !hosts[i].state_lost_seqs))
      __builtin_trap();
  }
  tg_merge_links_end(&m, HOSTS, host_at, hosts);
  for (size_t i = 0; i < HOSTS; i++)
    if (hosts[i].flows_unmatched >
        hosts[i].flows_started + hosts[i].flows_terminated)
      __builtin_trap();
  for (size_t i = 0; i < HOSTS; i++) tg_merge_host_free(&hosts[i]);
  tg_merge_free(&m);
  return 0;
}
