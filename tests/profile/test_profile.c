/* SPDX-License-Identifier: Apache-2.0 */
/* consumer/profile/: a fixed two-host trace written with tracegate-perf's
 * emitter (profile_trace.h) read in pieces of any size: each host's
 * counts, rates, stacks and function shares; samples without a callstack
 * or a name kept as such; the pprof bytes against a golden file
 * (TG_UPDATE_GOLDEN=1 rewrites it) and the same bytes twice; symbols from
 * ModuleSymbols; bounds that count instead of failing; damaged input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "consumer/profile/profile.h"
#include "tests/profile/profile_trace.h"
#include "tracegate/error.h"

static pt_writer_t trace;

static size_t trace_len(void) { return (size_t)tg_pbw_written(&trace.w); }

static int setup(void **state) {
  (void)state;
  pt_init(&trace);
  return pt_build(&trace);
}

static tg_prof_t *read_in_pieces(size_t piece, const tg_prof_limits_t *lim) {
  tg_prof_t *p = tg_prof_new(lim);
  assert_non_null(p);
  size_t n = trace_len();
  for (size_t at = 0; at < n; at += piece)
    assert_int_equal(tg_prof_feed(p, trace.buf + at,
                                  n - at < piece ? n - at : piece), 0);
  assert_int_equal(tg_prof_end(p), 0);
  return p;
}

static const tg_prof_func_share_t *share(const tg_prof_func_share_t *v,
                                         size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(v[i].name, name)) return &v[i];
  return NULL;
}

static void hosts_counts_and_rates(void **state) {
  (void)state;
  size_t pieces[] = {1, 7, 4096};
  for (size_t k = 0; k < 3; k++) {
    tg_prof_t *p = read_in_pieces(pieces[k], NULL);
    assert_int_equal(tg_prof_n_hosts(p), 2);
    assert_int_equal(tg_prof_bad_packets(p), 0);
    const tg_prof_host_t *w1 = tg_prof_find_host(p, "web1");
    const tg_prof_host_t *w2 = tg_prof_find_host(p, "2");
    assert_non_null(w1);
    assert_ptr_equal(w2, tg_prof_find_host(p, "web2"));
    assert_ptr_equal(w1, tg_prof_find_host(p, "machine 1"));
    assert_null(tg_prof_find_host(p, "web3"));
    assert_int_equal(w1->machine_id, 1);
    /* 3 hot + 1 idle + 1 empty + 1 unnamed + 1 hot on the 2nd sequence */
    assert_int_equal(w1->counts.samples, 7);
    assert_int_equal(w1->counts.no_callstack, 1);
    assert_int_equal(w1->counts.unnamed_frames, 1);
    assert_int_equal(w1->counts.callstack_unknown, 0);
    assert_int_equal(w1->frequency_hz_min, 100);
    assert_int_equal(w1->ns_per_sample_max, 10000000);
    assert_int_equal(w1->cpu_ns, 70000000);
    assert_int_equal(w1->ts_min, 2000);
    assert_int_equal(w1->ts_max, 4100);
    /* The second sequence's hot stack is the first's: one stack. */
    assert_int_equal(w1->n_stacks, 4);
    assert_int_equal(w2->counts.samples, 3);
    assert_int_equal(w2->counts.skipped[TG_PERF_SKIP_UNWIND_STAGE], 1);
    assert_int_equal(w2->ns_per_sample_min, 2500000);
    assert_int_equal(w2->frequency_hz_max, 400);

    tg_prof_func_share_t *fs;
    size_t n;
    assert_int_equal(tg_prof_function_shares(w1, &fs, &n), 0);
    assert_int_equal(share(fs, n, "main")->total, 6);
    assert_int_equal(share(fs, n, "main")->self, 0);
    assert_int_equal(share(fs, n, "hot")->self, 4);
    assert_int_equal(share(fs, n, "hot")->total_ns, 40000000);
    assert_int_equal(share(fs, n, "[no callstack]")->self, 1);
    const tg_prof_func_share_t *u = share(fs, n, "[unknown]");
    assert_non_null(u);
    assert_string_equal(u->file, "/usr/lib/libc.so.6");
    assert_int_equal(u->self, 1);
    /* Names the host did not give are marked so. */
    assert_true(u->pseudo);
    assert_true(share(fs, n, "[no callstack]")->pseudo);
    assert_false(share(fs, n, "hot")->pseudo);
    assert_string_equal(fs[0].name, "main"); /* by total, descending */
    free(fs);
    assert_int_equal(tg_prof_function_shares(w2, &fs, &n), 0);
    assert_int_equal(share(fs, n, "[skipped: unwind]")->self, 1);
    assert_int_equal(share(fs, n, "cold")->self, 2);
    free(fs);
    tg_prof_free(p);
  }
}

static int gunzip(const tg_buf_t *in, uint8_t **out, size_t *n) {
  size_t cap = 1 << 20;
  *out = malloc(cap);
  z_stream z;
  memset(&z, 0, sizeof(z));
  if (!*out || inflateInit2(&z, 15 + 16) != Z_OK) return -1;
  z.next_in = tg_buf_begin(in);
  z.avail_in = (uInt)tg_buf_size(in);
  z.next_out = *out;
  z.avail_out = (uInt)cap;
  int rv = inflate(&z, Z_FINISH);
  *n = cap - z.avail_out;
  inflateEnd(&z);
  return rv == Z_STREAM_END ? 0 : -1;
}

static void pprof_bytes_are_golden(void **state) {
  (void)state;
  tg_prof_t *p = read_in_pieces(4096, NULL);
  size_t web1 = 0;
  assert_ptr_equal(tg_prof_host(p, web1), tg_prof_find_host(p, "web1"));
  tg_prof_pprof_opts_t o = {.hosts = &web1, .n_hosts = 1};
  tg_buf_t a, b;
  tg_buf_init(&a, 0);
  tg_buf_init(&b, 0);
  assert_int_equal(tg_prof_pprof(p, &o, &a), 0);
  tg_prof_free(p);
  /* Another read (other hash seeds): the same bytes. */
  p = read_in_pieces(3, NULL);
  assert_int_equal(tg_prof_pprof(p, &o, &b), 0);
  assert_int_equal(tg_buf_size(&a), tg_buf_size(&b));
  assert_memory_equal(tg_buf_begin(&a), tg_buf_begin(&b), tg_buf_size(&a));
  uint8_t *raw;
  size_t n;
  assert_int_equal(gunzip(&a, &raw, &n), 0);
  const char *path = TG_PROFILE_GOLDEN_DIR "/web1.pb";
  if (getenv("TG_UPDATE_GOLDEN")) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(raw, 1, n, f), n);
    fclose(f);
  }
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  uint8_t want[1 << 16];
  size_t wn = fread(want, 1, sizeof(want), f);
  fclose(f);
  assert_int_equal(n, wn);
  assert_memory_equal(raw, want, n);
  free(raw);
  /* Both hosts: more bytes, each sample labelled with its host. */
  size_t both[] = {0, 1};
  o = (tg_prof_pprof_opts_t){.hosts = both, .n_hosts = 2};
  tg_buf_reset(&b);
  assert_int_equal(tg_prof_pprof(p, &o, &b), 0);
  assert_int_equal(gunzip(&b, &raw, &n), 0);
  assert_non_null(memmem(raw, n, "web2", 4));
  free(raw);
  tg_buf_free(&a);
  tg_buf_free(&b);
  tg_prof_free(p);
}

/* A ModuleSymbols packet of machine 1 for /usr/bin/app (by build id). */
static void symbols_name_files_and_lines(void **state) {
  (void)state;
  pt_writer_t *o = malloc(sizeof(*o));
  assert_non_null(o);
  pt_init(o);
  assert_int_equal(pt_build(o), 0);
  pt_begin(o, 1, 7);
  tg_pbw_begin_nested(&o->w, 61);
  tg_pbw_append_string(&o->w, 1, "/usr/bin/app");
  tg_pbw_append_bytes(&o->w, 2, pt_bid_app, sizeof(pt_bid_app));
  tg_pbw_begin_nested(&o->w, 3);
  tg_pbw_append_varint(&o->w, 1, 0x300);
  tg_pbw_begin_nested(&o->w, 2);
  tg_pbw_append_string(&o->w, 1, "hot_inlined");
  tg_pbw_append_string(&o->w, 2, "hot.c");
  tg_pbw_append_varint(&o->w, 3, 42);
  tg_pbw_end_nested(&o->w);
  tg_pbw_end_nested(&o->w);
  tg_pbw_end_nested(&o->w);
  pt_end(o);
  tg_prof_t *p = tg_prof_new(NULL);
  assert_int_equal(tg_prof_feed(p, o->buf, (size_t)tg_pbw_written(&o->w)), 0);
  assert_int_equal(tg_prof_end(p), 0);
  const tg_prof_host_t *h = tg_prof_find_host(p, "web1");
  bool found = false;
  for (size_t i = 0; i < h->n_frames; i++) {
    const tg_prof_frame_t *f = &h->frames[i];
    if (f->rel_pc != 0x300) continue;
    assert_int_equal(f->n_lines, 1);
    const tg_prof_line_t *l = &h->lines[f->first_line];
    assert_string_equal(h->strings[l->function], "hot_inlined");
    assert_string_equal(h->strings[l->file], "hot.c");
    assert_int_equal(l->line, 42);
    /* The host's own name stands: the symbols add lines. */
    assert_string_equal(tg_prof_frame_name(h, f), "hot");
    found = true;
  }
  assert_true(found);
  const tg_prof_mapping_t *m = &h->mappings[0];
  assert_string_equal(h->strings[m->build_id], "12345678");
  assert_string_equal(h->strings[m->path], "/usr/bin/app");
  tg_prof_free(p);
  free(o);
}

static void past_bounds_samples_still_count(void **state) {
  (void)state;
  tg_prof_limits_t lim = {.max_stacks = 2, .max_depth = 2};
  tg_prof_t *p = read_in_pieces(4096, &lim);
  const tg_prof_host_t *w1 = tg_prof_find_host(p, "web1");
  assert_int_equal(w1->counts.samples, 7);
  assert_true(w1->counts.over_bounds > 0 || w1->counts.callstack_unknown > 0);
  assert_true(w1->counts.refused_entries > 0);
  uint64_t in_stacks = 0;
  size_t with_frames = 0;
  for (size_t i = 0; i < w1->n_stacks; i++) {
    in_stacks += w1->stacks[i].samples;
    with_frames += w1->stacks[i].n > 0;
  }
  assert_true(with_frames <= 2);
  /* Every sample is in a stack, past the bound in "[over bounds]" or as
   * a callstack that could not be kept. */
  assert_int_equal(in_stacks, w1->counts.samples);
  tg_prof_free(p);
  /* Deep stacks are cut at the root: the leaf stays. */
  lim = (tg_prof_limits_t){.max_depth = 2};
  p = read_in_pieces(4096, &lim);
  w1 = tg_prof_find_host(p, "web1");
  assert_int_equal(w1->counts.truncated, 4);
  tg_prof_func_share_t *fs;
  size_t n;
  assert_int_equal(tg_prof_function_shares(w1, &fs, &n), 0);
  assert_int_equal(share(fs, n, "hot")->self, 4);
  free(fs);
  tg_prof_free(p);
}

static void damaged_input_is_refused_or_counted(void **state) {
  (void)state;
  /* Cut in the middle of a packet. */
  tg_prof_t *p = tg_prof_new(NULL);
  assert_int_equal(tg_prof_feed(p, trace.buf, trace_len() - 3), 0);
  assert_int_equal(tg_prof_end(p), TG_EPARSE);
  tg_prof_free(p);
  /* A packet that does not parse: counted, skipped. */
  static const uint8_t bad[] = {0x0a, 0x02, 0x08, 0xff};
  p = tg_prof_new(NULL);
  assert_int_equal(tg_prof_feed(p, bad, sizeof(bad)), 0);
  assert_int_equal(tg_prof_feed(p, trace.buf, trace_len()), 0);
  assert_int_equal(tg_prof_end(p), 0);
  assert_int_equal(tg_prof_bad_packets(p), 1);
  assert_int_equal(tg_prof_find_host(p, "web1")->counts.samples, 7);
  tg_prof_free(p);
  /* A Trace field of a type a packet cannot be. */
  static const uint8_t group[] = {0x0b};
  p = tg_prof_new(NULL);
  assert_int_equal(tg_prof_feed(p, group, sizeof(group)), TG_EPARSE);
  tg_prof_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hosts_counts_and_rates),
      cmocka_unit_test(pprof_bytes_are_golden),
      cmocka_unit_test(symbols_name_files_and_lines),
      cmocka_unit_test(past_bounds_samples_still_count),
      cmocka_unit_test(damaged_input_is_refused_or_counted),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
