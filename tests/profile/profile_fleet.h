/* SPDX-License-Identifier: Apache-2.0 */
/* A synthetic fleet of 20 hosts' CPU profiles (h1..h20, machines 1..20,
 * 100 Hz, 1000 samples each), written with tracegate-perf's emitter as a
 * merge lays hosts out (profile_trace.h). h7 spends 40% of its CPU in
 * main>compress>compress_block, 30% in main>serve>handle, 25% in
 * main>serve>parse; its peers (j = 0..18 in machine order without h7)
 * spend 5% + (j - 9) * 0.2% in compress_block (median 5%), 50% - the
 * same in handle, 40% in parse. Every host has 30 samples whose leaf is
 * unnamed (libc at 0x40) and 20 without a callstack.
 *
 * |small|: h20 has only 50 samples (25 compress_block, 25 handle).
 * |boost|: h7 is 5 s at 100 Hz (40% compress_block) then 5 s boosted to
 * 400 Hz (20%): 30% of its CPU time, 24% of its samples.
 *
 * For test_profile_diff (the diff's figures) and profile_fleet_gen
 * (test_profile_diff.sh: the CLI, go tool pprof). Header-only. */
#ifndef TRACEGATE_TESTS_PROFILE_FLEET_H
#define TRACEGATE_TESTS_PROFILE_FLEET_H

#include <stdbool.h>
#include <stdio.h>

#include "common/buf.h"
#include "tests/profile/profile_trace.h"

#define PF_HOT_HOST 7
#define PF_HOSTS 20

static const tg_perf_emit_frame_t pf_cb[] = {
    {&pt_app, 0x100, "main", 0}, {&pt_app, 0x600, "compress", 0},
    {&pt_app, 0x700, "compress_block", 0}};
static const tg_perf_emit_frame_t pf_handle[] = {
    {&pt_app, 0x100, "main", 0}, {&pt_app, 0x800, "serve", 0},
    {&pt_app, 0x900, "handle", 0}};
static const tg_perf_emit_frame_t pf_parse[] = {
    {&pt_app, 0x100, "main", 0}, {&pt_app, 0x800, "serve", 0},
    {&pt_app, 0xa00, "parse", 0}};
static const tg_perf_emit_frame_t pf_anon[] = {
    {&pt_app, 0x100, "main", 0}, {&pt_libc, 0x40, NULL, 0}};

typedef struct pf_fleet {
  pt_writer_t o;
  tg_buf_t *out;
  tg_perf_emitter_t *e;
  uint64_t ts;
  int err;
} pf_fleet_t;

/* The writer's bytes (whole packets) onto |out|. */
static void pf_flush(pf_fleet_t *f) {
  if (tg_pbw_error(&f->o.w) ||
      tg_buf_append(f->out, f->o.buf, (size_t)tg_pbw_written(&f->o.w)))
    f->err = -1;
  pt_init(&f->o);
}

static void pf_samples(pf_fleet_t *f, uint32_t m,
                       const tg_perf_emit_frame_t *st, size_t n_frames,
                       int n) {
  for (int i = 0; i < n; i++) {
    pt_sample(&f->o, f->e, m, m << 20 | 1, f->ts++, st, n_frames);
    if (tg_pbw_written(&f->o.w) > 40000) pf_flush(f);
  }
}

/* One period of host |m| at |hz|: its samples by stack. */
static void pf_period(pf_fleet_t *f, uint32_t m, uint64_t hz, int cb,
                      int handle, int parse, int anon, int nocs) {
  pt_defaults(&f->o, f->e, m, m << 20 | 1, f->ts++, hz);
  pf_samples(f, m, pf_cb, 3, cb);
  pf_samples(f, m, pf_handle, 3, handle);
  pf_samples(f, m, pf_parse, 3, parse);
  pf_samples(f, m, pf_anon, 2, anon);
  pf_samples(f, m, NULL, 0, nocs);
  pf_flush(f);
}

/* Appends the fleet's trace to |out|: 0, or -1 (no memory). */
static inline int pf_build(tg_buf_t *out, bool small, bool boost) {
  static pf_fleet_t f; /* the writer's buffer is large */
  pt_init(&f.o);
  f.out = out;
  f.e = tg_perf_emitter_new(0);
  f.ts = 1000;
  f.err = f.e ? 0 : -1;
  char name[16];
  for (uint32_t m = 1; m <= PF_HOSTS; m++) {
    snprintf(name, sizeof(name), "h%u", m);
    pt_name(&f.o, m, name);
  }
  for (uint32_t m = 1; m <= PF_HOSTS && !f.err; m++) {
    int j = (int)m - 1 - (m > PF_HOT_HOST); /* peers 0..18 */
    if (m == PF_HOT_HOST && boost) {
      pf_period(&f, m, 100, 200, 150, 100, 30, 20);
      pf_period(&f, m, 400, 400, 1050, 550, 0, 0);
    } else if (m == PF_HOT_HOST) {
      pf_period(&f, m, 100, 400, 300, 250, 30, 20);
    } else if (m == PF_HOSTS && small) {
      pf_period(&f, m, 100, 25, 25, 0, 0, 0);
    } else {
      int d = (j - 9) * 2;
      pf_period(&f, m, 100, 50 + d, 500 - d, 400, 30, 20);
    }
  }
  tg_perf_emitter_free(f.e);
  return f.err;
}

#endif /* TRACEGATE_TESTS_PROFILE_FLEET_H */
