/* SPDX-License-Identifier: Apache-2.0 */
/* A trace a hostile host could send the symbolizer (consumer/symbolize):
 * |n_maps| mappings, each with its own build id and path, and |n_frames|
 * frames spread over them, on one sequence, in packets of 100 mappings
 * and their frames. The mapping iids are those that made the former
 * fixed hash (iid * 2^64/phi, its bits from 20 up) put every one in the
 * same slot: a table whose hash a trace can predict turns each lookup
 * into a scan. Shared by test_symbolize_guard.c and bench_symbolize.c.
 *
 * Frame k of mapping i has rel_pc 0x1000 + 16 * k: the frames of one
 * mapping are distinct, so the symbolizer must keep all n_frames. */
#ifndef TRACEGATE_TESTS_PERF_SYM_HOSTILE_TRACE_H
#define TRACEGATE_TESTS_PERF_SYM_HOSTILE_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "common/buf.h"
#include "tracegate/pb_wire.h"

static int hostile_varint(tg_buf_t *b, uint64_t v) {
  uint8_t t[TG_PB_MAX_VARINT_SIZE];
  return tg_buf_append(b, t, (size_t)(tg_pb_write_varint(t, v) - t));
}

static int hostile_uint(tg_buf_t *b, uint32_t f, uint64_t v) {
  int rv = hostile_varint(b, (uint64_t)f << 3);
  return rv ? rv : hostile_varint(b, v);
}

static int hostile_bytes(tg_buf_t *b, uint32_t f, const void *p, size_t n) {
  int rv = hostile_varint(b, (uint64_t)f << 3 | 2);
  if (!rv) rv = hostile_varint(b, n);
  return rv ? rv : tg_buf_append(b, p, n);
}

/* Appends |m| as field |f| of |b| and empties |m|. */
static int hostile_msg(tg_buf_t *b, uint32_t f, tg_buf_t *m) {
  int rv = hostile_bytes(b, f, tg_buf_begin(m), tg_buf_size(m));
  tg_buf_reset(m);
  return rv;
}

/* The iid of mapping |i|: x with x * 0x9E3779B97F4A7C15 == (i + 1) << 44
 * (mod 2^64), so that the old hash's bits 20 and up agree for the first
 * 2^24 of them. */
static uint64_t hostile_iid(uint64_t i) {
  const uint64_t c = 0x9E3779B97F4A7C15ull;
  uint64_t inv = c; /* Newton: each step doubles the correct low bits */
  for (int k = 0; k < 6; k++) inv *= 2 - c * inv;
  return ((i + 1) << 44) * inv;
}

/* The Trace bytes into |out|. 0 or -ENOMEM. */
static int hostile_trace(tg_buf_t *out, uint32_t n_maps, uint32_t n_frames) {
  tg_buf_t in, m, pkt;
  tg_buf_init(&in, 0);
  tg_buf_init(&m, 0);
  tg_buf_init(&pkt, 0);
  int rv = 0;
  uint32_t per = n_maps ? (n_frames + n_maps - 1) / n_maps : 0, done = 0;
  uint64_t frame_iid = 1;
  for (uint32_t at = 0; at < n_maps && !rv; at += 100) {
    uint32_t end = at + 100 < n_maps ? at + 100 : n_maps;
    for (uint32_t i = at; i < end && !rv; i++) {
      char id[20], path[32];
      snprintf(id, sizeof(id), "bid-%015u", i); /* 19 bytes, distinct */
      int pn = snprintf(path, sizeof(path), "lib%u.so", i);
      rv = hostile_uint(&m, 1, i + 1);
      if (!rv) rv = hostile_bytes(&m, 2, id, 19);
      if (!rv) rv = hostile_msg(&in, 16, &m); /* build_ids */
      if (!rv) rv = hostile_uint(&m, 1, i + 1);
      if (!rv) rv = hostile_bytes(&m, 2, path, (size_t)pn);
      if (!rv) rv = hostile_msg(&in, 17, &m); /* mapping_paths */
      if (!rv) rv = hostile_uint(&m, 1, hostile_iid(i));
      if (!rv) rv = hostile_uint(&m, 2, i + 1);
      if (!rv) rv = hostile_uint(&m, 7, i + 1);
      if (!rv) rv = hostile_msg(&in, 19, &m); /* mappings */
      for (uint32_t k = 0; k < per && done < n_frames && !rv; k++, done++) {
        rv = hostile_uint(&m, 1, frame_iid++);
        if (!rv) rv = hostile_uint(&m, 3, hostile_iid(i));
        if (!rv) rv = hostile_uint(&m, 4, 0x1000 + 16 * (uint64_t)k);
        if (!rv) rv = hostile_msg(&in, 6, &m); /* frames */
      }
    }
    if (!rv) rv = hostile_uint(&pkt, 10, 1); /* trusted_packet_sequence_id */
    if (!rv && at == 0) rv = hostile_uint(&pkt, 13, 1); /* state cleared */
    if (!rv) rv = hostile_msg(&pkt, 12, &in); /* interned_data */
    if (!rv) rv = hostile_msg(out, 1, &pkt);  /* Trace.packet */
  }
  tg_buf_free(&in);
  tg_buf_free(&m);
  tg_buf_free(&pkt);
  return rv;
}

#endif /* TRACEGATE_TESTS_PERF_SYM_HOSTILE_TRACE_H */
