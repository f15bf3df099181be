/* SPDX-License-Identifier: Apache-2.0 */
/* consumer/profile/profile_diff.h: a synthetic fleet of 20 hosts written
 * with tracegate-perf's emitter, one of which (h7) spends 40% of its CPU in
 * compress_block where its peers spend 5% (their median; each peer a
 * little off it). The diff puts compress_block first with exact shares and
 * sample counts; unnamed frames and samples without a callstack are rows
 * of their own; a host under the sample minimum is marked, and left out of
 * its peers' medians; a boosted host's samples weigh by CPU time; the JSON
 * and both pprof profiles carry the same figures. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "common/json.h"
#include "consumer/profile/profile_diff.h"
#include "pb/pprof/profile.pb-c.h"
#include "tests/profile/profile_fleet.h"

static tg_prof_t *make_fleet(bool small, bool boost) {
  tg_buf_t t;
  tg_buf_init(&t, 0);
  assert_int_equal(pf_build(&t, small, boost), 0);
  tg_prof_t *p = tg_prof_new(NULL);
  assert_non_null(p);
  for (size_t at = 0; at < tg_buf_size(&t); at += 4096) {
    size_t n = tg_buf_size(&t) - at;
    assert_int_equal(tg_prof_feed(p, tg_buf_begin(&t) + at, n < 4096 ? n : 4096),
                     0);
  }
  assert_int_equal(tg_prof_end(p), 0);
  tg_buf_free(&t);
  return p;
}

/* The diff of host |name| against every other host of |p|. */
static tg_prof_diff_t *diff_of(const tg_prof_t *p, const char *name) {
  const tg_prof_host_t *h = tg_prof_find_host(p, name);
  assert_non_null(h);
  const tg_prof_host_t *peers[64];
  size_t n = 0;
  for (size_t i = 0; i < tg_prof_n_hosts(p); i++)
    if (tg_prof_host(p, i) != h) peers[n++] = tg_prof_host(p, i);
  tg_prof_diff_t *d = NULL;
  assert_int_equal(tg_prof_diff(h, peers, n, NULL, &d), 0);
  assert_non_null(d);
  return d;
}

static const tg_prof_diff_func_t *row(const tg_prof_diff_t *d,
                                      const char *name) {
  for (size_t i = 0; i < d->n_funcs; i++)
    if (!strcmp(d->funcs[i].name, name)) return &d->funcs[i];
  fail_msg("no row %s", name);
  return NULL;
}

#define EPS 1e-12

static void hot_function_comes_first(void **state) {
  (void)state;
  tg_prof_t *p = make_fleet(false, false);
  tg_prof_diff_t *d = diff_of(p, "h7");
  assert_int_equal(d->n_peers, 19);
  assert_int_equal(d->n_peers_too_few, 0);
  assert_false(d->too_few_samples);
  assert_false(d->by_samples);
  assert_int_equal(d->peers_samples, 19 * 1000);
  const tg_prof_diff_func_t *f = &d->funcs[0];
  assert_string_equal(f->name, "compress_block");
  assert_null(f->file);
  assert_true(fabs(f->host_self - 0.40) < EPS);
  assert_true(fabs(f->peers_self - 0.05) < EPS);
  assert_true(fabs(f->diff_self - 0.35) < EPS);
  assert_true(fabs(f->host_total - 0.40) < EPS);
  assert_int_equal(f->host_self_samples, 400);
  assert_int_equal(f->peers_self_samples, 19 * 50);
  assert_int_equal(f->peers_with, 19);
  assert_true(f->significant_self);
  assert_true(f->significant_total);
  /* Then handle (-0.2) and parse (-0.15); main is everywhere: 0. */
  assert_string_equal(d->funcs[1].name, "handle");
  assert_true(fabs(d->funcs[1].diff_self + 0.20) < EPS);
  assert_string_equal(d->funcs[2].name, "parse");
  assert_true(fabs(d->funcs[2].diff_self + 0.15) < EPS);
  const tg_prof_diff_func_t *mn = row(d, "main");
  assert_true(fabs(mn->host_total - 0.98) < EPS); /* not [no callstack] */
  assert_true(fabs(mn->diff_total) < EPS);
  assert_false(mn->significant_total);
  /* compress has no self time; its total moves with compress_block. */
  const tg_prof_diff_func_t *c = row(d, "compress");
  assert_true(fabs(c->diff_self) < EPS);
  assert_false(c->significant_self);
  assert_true(fabs(c->diff_total - 0.35) < EPS);
  /* The call tree: root, main, compress, compress_block. */
  assert_true(fabs(d->nodes[0].host_total - 1.0) < EPS);
  assert_int_equal(d->nodes[0].func, UINT32_MAX);
  bool found = false;
  for (size_t k = 1; k < d->n_nodes; k++) {
    const tg_prof_diff_node_t *n = &d->nodes[k];
    assert_true(n->parent < k);
    assert_int_equal(n->depth, d->nodes[n->parent].depth + 1);
    if (strcmp(d->funcs[n->func].name, "compress_block")) continue;
    found = true;
    assert_int_equal(n->depth, 3);
    assert_string_equal(d->funcs[d->nodes[n->parent].func].name, "compress");
    assert_true(fabs(n->host_self - 0.40) < EPS);
    assert_true(fabs(n->peers_self - 0.05) < EPS);
    assert_int_equal(n->host_samples, 400);
    assert_int_equal(n->peers_samples, 950);
  }
  assert_true(found);
  tg_prof_diff_free(d);
  /* A peer against the others (h7 among them): h5 has 40 samples in
   * compress_block, the others' median is the 10th of 32..68 without 40,
   * and 400: 52. 1.2% under it is not significant at 1000 samples (3
   * standard errors are 2.1%). */
  d = diff_of(p, "h5");
  f = row(d, "compress_block");
  assert_int_equal(f->host_self_samples, 40);
  assert_true(fabs(f->peers_self - 0.052) < EPS);
  assert_false(f->significant_self);
  tg_prof_diff_free(d);
  tg_prof_free(p);
}

static void unnamed_samples_are_rows_of_their_own(void **state) {
  (void)state;
  tg_prof_t *p = make_fleet(false, false);
  tg_prof_diff_t *d = diff_of(p, "h7");
  const tg_prof_diff_func_t *u = row(d, "[unknown]");
  assert_string_equal(u->file, "/usr/lib/libc.so.6");
  assert_false(u->pseudo);
  assert_int_equal(u->host_self_samples, 30);
  assert_int_equal(u->peers_self_samples, 19 * 30);
  assert_true(fabs(u->host_self - 0.03) < EPS);
  assert_true(fabs(u->peers_self - 0.03) < EPS);
  const tg_prof_diff_func_t *n = row(d, "[no callstack]");
  assert_true(n->pseudo);
  assert_int_equal(n->host_self_samples, 20);
  assert_true(fabs(n->host_total - 0.02) < EPS);
  assert_int_equal(d->host_counts.no_callstack, 20);
  assert_int_equal(d->host_counts.unnamed_frames, 30);
  tg_prof_diff_free(d);
  tg_prof_free(p);
}

static void few_samples_are_marked(void **state) {
  (void)state;
  tg_prof_t *p = make_fleet(true, false);
  /* h20 (50 samples) as the host: marked, nothing significant. */
  tg_prof_diff_t *d = diff_of(p, "h20");
  assert_true(d->too_few_samples);
  assert_int_equal(d->n_peers, 19);
  for (size_t i = 0; i < d->n_funcs; i++) {
    assert_false(d->funcs[i].significant_self);
    assert_false(d->funcs[i].significant_total);
  }
  assert_true(fabs(row(d, "compress_block")->host_self - 0.5) < EPS);
  tg_prof_diff_free(d);
  /* As a peer: left out of the median, and counted. */
  d = diff_of(p, "h7");
  assert_int_equal(d->n_peers, 18);
  assert_int_equal(d->n_peers_too_few, 1);
  assert_int_equal(d->peers_samples, 18 * 1000);
  /* 18 peers, 32..66 (the 68 one was h20): the median is (48+50)/2. */
  assert_true(fabs(row(d, "compress_block")->peers_self - 0.049) < EPS);
  tg_prof_diff_free(d);
  tg_prof_free(p);
}

static void boosted_host_weighs_by_cpu_time(void **state) {
  (void)state;
  tg_prof_t *p = make_fleet(false, true);
  const tg_prof_host_t *h = tg_prof_find_host(p, "h7");
  assert_int_equal(h->counts.samples, 2500);
  assert_int_equal(h->ns_per_sample_min, 2500000);
  tg_prof_diff_t *d = diff_of(p, "h7");
  const tg_prof_diff_func_t *f = row(d, "compress_block");
  /* By samples it would be 600 / 2500 = 24%. */
  assert_int_equal(f->host_self_samples, 600);
  assert_true(fabs(f->host_self - 0.30) < EPS);
  assert_true(fabs(f->diff_self - 0.25) < EPS);
  assert_string_equal(d->funcs[0].name, "compress_block");
  tg_prof_diff_free(d);
  tg_prof_free(p);
}

static void json_carries_the_rows(void **state) {
  (void)state;
  tg_prof_t *p = make_fleet(false, false);
  tg_prof_diff_t *d = diff_of(p, "h7");
  json_t *j = tg_prof_diff_json(d, 0.01);
  assert_non_null(j);
  json_t *f0 = json_array_get(json_object_get(j, "functions"), 0);
  assert_string_equal(json_string_value(json_object_get(f0, "name")),
                      "compress_block");
  assert_true(fabs(json_real_value(json_object_get(f0, "host_share")) - 0.4) <
              EPS);
  assert_true(fabs(json_real_value(json_object_get(f0, "peers_median_share")) -
                   0.05) < EPS);
  assert_true(fabs(json_real_value(json_object_get(f0, "diff")) - 0.35) < EPS);
  assert_int_equal(json_integer_value(json_object_get(f0, "host_samples")), 400);
  assert_int_equal(json_integer_value(json_object_get(f0, "peers_samples")),
                   950);
  assert_true(json_is_true(json_object_get(f0, "significant")));
  json_t *host = json_object_get(j, "host");
  assert_string_equal(json_string_value(json_object_get(host, "name")), "h7");
  assert_true(json_is_false(json_object_get(host, "too_few_samples")));
  assert_int_equal(
      json_integer_value(json_object_get(json_object_get(j, "peers"), "count")),
      19);
  /* The tree: every node's parent before it; at 1% nothing is cut here
   * (every path holds at least 2% somewhere). */
  json_t *tree = json_object_get(j, "tree");
  assert_int_equal(json_array_size(tree), d->n_nodes);
  assert_int_equal(json_integer_value(json_object_get(j, "tree_pruned")), 0);
  assert_true(json_is_null(json_object_get(json_array_get(tree, 0), "parent")));
  json_decref(j);
  /* At 4%, [unknown] (3%) and [no callstack] (2%) paths go. */
  j = tg_prof_diff_json(d, 0.04);
  assert_int_equal(json_integer_value(json_object_get(j, "tree_pruned")), 2);
  assert_int_equal(json_array_size(json_object_get(j, "tree")), d->n_nodes - 2);
  json_decref(j);
  tg_prof_diff_free(d);
  tg_prof_free(p);
}

static Perftools__Profiles__Profile *unpack_gz(const tg_buf_t *b) {
  size_t cap = 1 << 20, n;
  uint8_t *raw = malloc(cap);
  assert_non_null(raw);
  z_stream z;
  memset(&z, 0, sizeof(z));
  assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = tg_buf_begin(b);
  z.avail_in = (uInt)tg_buf_size(b);
  z.next_out = raw;
  z.avail_out = (uInt)cap;
  assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
  n = cap - z.avail_out;
  inflateEnd(&z);
  Perftools__Profiles__Profile *pr =
      perftools__profiles__profile__unpack(NULL, n, raw);
  free(raw);
  assert_non_null(pr);
  return pr;
}

/* The function name of location |loc| (one line each). */
static const char *loc_name(const Perftools__Profiles__Profile *pr,
                            uint64_t loc) {
  for (size_t k = 0; k < pr->n_location; k++) {
    if (pr->location[k]->id != loc) continue;
    assert_int_equal(pr->location[k]->n_line, 1);
    uint64_t fid = pr->location[k]->line[0]->function_id;
    for (size_t m = 0; m < pr->n_function; m++)
      if (pr->function[m]->id == fid)
        return pr->string_table[pr->function[m]->name];
  }
  fail_msg("no location %llu", (unsigned long long)loc);
  return NULL;
}

/* The values of the samples whose leaf function is |name|, summed. */
static int64_t leaf_value(const Perftools__Profiles__Profile *pr,
                          const char *name) {
  int64_t v = 0;
  for (size_t i = 0; i < pr->n_sample; i++)
    if (!strcmp(loc_name(pr, pr->sample[i]->location_id[0]), name))
      v += pr->sample[i]->value[0];
  return v;
}

static void pprof_host_and_base(void **state) {
  (void)state;
  tg_prof_t *p = make_fleet(false, false);
  tg_prof_diff_t *d = diff_of(p, "h7");
  tg_buf_t hb, bb;
  tg_buf_init(&hb, 0);
  tg_buf_init(&bb, 0);
  assert_int_equal(tg_prof_diff_pprof(d, false, &hb), 0);
  assert_int_equal(tg_prof_diff_pprof(d, true, &bb), 0);
  Perftools__Profiles__Profile *h = unpack_gz(&hb), *b = unpack_gz(&bb);
  assert_int_equal(h->n_sample_type, 1);
  assert_string_equal(h->string_table[h->sample_type[0]->type], "cpu");
  /* 10 s of CPU: compress_block 4 s on the host, 0.5 s at the median. */
  assert_int_equal(d->host_cpu_ns, 10000000000ll);
  assert_int_equal(leaf_value(h, "compress_block"), 4000000000ll);
  assert_int_equal(leaf_value(b, "compress_block"), 500000000ll);
  assert_int_equal(leaf_value(h, "[no callstack]"), 200000000ll);
  assert_int_equal(leaf_value(b, "handle"), 5000000000ll);
  /* Leaf first: compress_block's sample is compress_block, compress, main. */
  bool found = false;
  for (size_t i = 0; i < h->n_sample; i++) {
    const Perftools__Profiles__Sample *s = h->sample[i];
    if (strcmp(loc_name(h, s->location_id[0]), "compress_block")) continue;
    found = true;
    assert_int_equal(s->n_location_id, 3);
    assert_string_equal(loc_name(h, s->location_id[1]), "compress");
    assert_string_equal(loc_name(h, s->location_id[2]), "main");
  }
  assert_true(found);
  perftools__profiles__profile__free_unpacked(h, NULL);
  perftools__profiles__profile__free_unpacked(b, NULL);
  tg_buf_free(&hb);
  tg_buf_free(&bb);
  tg_prof_diff_free(d);
  tg_prof_free(p);
}

static void host_without_samples_is_refused(void **state) {
  (void)state;
  tg_prof_t *p = make_fleet(false, false);
  tg_prof_host_t empty;
  memset(&empty, 0, sizeof(empty));
  empty.name = "";
  tg_prof_diff_t *d = (tg_prof_diff_t *)1;
  const tg_prof_host_t *peers[1] = {tg_prof_host(p, 0)};
  assert_int_equal(tg_prof_diff(&empty, peers, 1, NULL, &d), -EINVAL);
  assert_null(d);
  /* No peers: the host's shares, medians 0, nothing significant. */
  assert_int_equal(tg_prof_diff(peers[0], NULL, 0, NULL, &d), 0);
  assert_int_equal(d->n_peers, 0);
  for (size_t i = 0; i < d->n_funcs; i++)
    assert_false(d->funcs[i].significant_self);
  tg_prof_diff_free(d);
  /* A node bound too small: refused, not cut silently. */
  tg_prof_diff_opts_t o = {.max_nodes = 4};
  const tg_prof_host_t *h7 = tg_prof_find_host(p, "h7");
  assert_int_equal(tg_prof_diff(h7, peers, 1, &o, &d), -ENOSPC);
  assert_null(d);
  tg_prof_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hot_function_comes_first),
      cmocka_unit_test(unnamed_samples_are_rows_of_their_own),
      cmocka_unit_test(few_samples_are_marked),
      cmocka_unit_test(boosted_host_weighs_by_cpu_time),
      cmocka_unit_test(json_carries_the_rows),
      cmocka_unit_test(pprof_host_and_base),
      cmocka_unit_test(host_without_samples_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
