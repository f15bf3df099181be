/* SPDX-License-Identifier: Apache-2.0 */
/* A fixed trace of two hosts' CPU profiles, written with tracegate-perf's
 * own packet emitter (agent/perf/perf_emit.h) and laid out as a `record
 * -H` merge lays hosts out (docs/merge.md): machine k+1, the host's name
 * track, sequence ids of the host's own. For test_profile (golden pprof
 * bytes, the counts) and profile_trace_gen (go tool pprof and trace
 * processor, test_profile_pprof.sh). Header-only: both link it once.
 *
 * web1 (machine 1, 100 Hz): main>work>hot x3, main>idle x1, a sample
 * with the empty callstack, one whose leaf has no name (libc at 0x40), a
 * second sequence whose frames repeat the first's after a clear.
 * web2 (machine 2, 400 Hz: boosted): main>cold x2, a skipped sample
 * (unwind). */
#ifndef TRACEGATE_TESTS_PROFILE_TRACE_H
#define TRACEGATE_TESTS_PROFILE_TRACE_H

#include <stdint.h>
#include <string.h>

#include "agent/perf/perf_emit.h"
#include "tracegate/pb_writer.h"

#define PT_NAME_UUID 0x7472616365670000ull

typedef struct pt_writer {
  uint8_t buf[1 << 16];
  tg_pbw_t w;
} pt_writer_t;

static void pt_init(pt_writer_t *o) {
  tg_pbw_init(&o->w, o->buf, sizeof(o->buf), NULL, NULL);
}

static void pt_begin(pt_writer_t *o, uint32_t machine, uint32_t seq) {
  tg_pbw_begin_nested(&o->w, 1); /* Trace.packet */
  if (machine) tg_pbw_append_varint(&o->w, 98, machine);
  tg_pbw_append_varint(&o->w, 10, seq);
}

static void pt_end(pt_writer_t *o) { tg_pbw_end_nested(&o->w); }

static void pt_name(pt_writer_t *o, uint32_t machine, const char *name) {
  pt_begin(o, machine, (machine << 20) | 0xFFFFF);
  tg_pbw_begin_nested(&o->w, 60); /* track_descriptor */
  tg_pbw_append_varint(&o->w, 1, PT_NAME_UUID | (uint64_t)machine << 1);
  tg_pbw_append_string(&o->w, 2, name);
  tg_pbw_end_nested(&o->w);
  pt_end(o);
}

static const uint8_t pt_bid_app[] = {0x12, 0x34, 0x56, 0x78};
static const tg_perf_emit_mapping_t pt_app = {
    .start = 0x400000, .end = 0x500000, .build_id = pt_bid_app,
    .build_id_len = 4, .path = "/usr/bin/app"};
static const tg_perf_emit_mapping_t pt_libc = {
    .start = 0x7f0000000000, .end = 0x7f0000100000, .start_offset = 0x1000,
    .path = "/usr/lib/libc.so.6"};

static void pt_sample(pt_writer_t *o, tg_perf_emitter_t *e, uint32_t machine,
                      uint32_t seq, uint64_t ts,
                      const tg_perf_emit_frame_t *f, size_t n) {
  tg_perf_emit_sample_t s = {.ts = ts, .cpu = 0, .pid = 10 + machine,
                             .tid = 10 + machine, .cpu_mode = 2,
                             .timebase_count = 1, .frames = f, .n_frames = n};
  pt_begin(o, machine, seq);
  tg_perf_emit_sample(e, &o->w, &s);
  pt_end(o);
}

static void pt_defaults(pt_writer_t *o, tg_perf_emitter_t *e, uint32_t machine,
                        uint32_t seq, uint64_t ts, uint64_t hz) {
  tg_perf_timebase_desc_t tb = {.frequency = hz, .counter = 1,
                                .builtin_clock = 6};
  tg_perf_emitter_reset(e);
  pt_begin(o, machine, seq);
  tg_perf_emit_defaults(&o->w, ts, &tb);
  pt_end(o);
}

/* Writes the trace into |o| (pt_init first); 0 or the writer's error. */
static inline int pt_build(pt_writer_t *o) {
  const tg_perf_emit_frame_t hot[] = {
      {&pt_app, 0x100, "main", 0}, {&pt_app, 0x200, "work", 0},
      {&pt_app, 0x300, "hot", 0}};
  const tg_perf_emit_frame_t idle[] = {
      {&pt_app, 0x100, "main", 0}, {&pt_app, 0x400, "idle", 0}};
  const tg_perf_emit_frame_t anon[] = {
      {&pt_app, 0x100, "main", 0}, {&pt_libc, 0x40, NULL, 0}};
  const tg_perf_emit_frame_t cold[] = {
      {&pt_app, 0x100, "main", 0}, {&pt_app, 0x500, "cold", 0}};
  tg_perf_emitter_t *e = tg_perf_emitter_new(0);
  if (!e) return -1;
  pt_name(o, 1, "web1");
  pt_name(o, 2, "web2");
  uint32_t s1 = 1u << 20 | 1, s1b = 1u << 20 | 2, s2 = 2u << 20 | 1;
  pt_defaults(o, e, 1, s1, 1000, 100);
  for (int i = 0; i < 3; i++) pt_sample(o, e, 1, s1, 2000 + i, hot, 3);
  pt_sample(o, e, 1, s1, 2100, idle, 2);
  pt_sample(o, e, 1, s1, 2200, NULL, 0);
  pt_sample(o, e, 1, s1, 2300, anon, 2);
  pt_defaults(o, e, 2, s2, 1000, 400);
  pt_sample(o, e, 2, s2, 3000, cold, 2);
  pt_sample(o, e, 2, s2, 3001, cold, 2);
  tg_perf_emit_sample_t sk = {.ts = 3002, .pid = 12, .tid = 12};
  pt_begin(o, 2, s2);
  tg_perf_emit_skipped(&o->w, &sk, TG_PERF_SKIP_UNWIND_STAGE);
  pt_end(o);
  /* A second sequence of web1: its own iids, the same frames. */
  pt_defaults(o, e, 1, s1b, 4000, 100);
  pt_sample(o, e, 1, s1b, 4100, hot, 3);
  tg_perf_emitter_free(e);
  return tg_pbw_error(&o->w);
}

#endif /* TRACEGATE_TESTS_PROFILE_TRACE_H */
