/* SPDX-License-Identifier: Apache-2.0 */
/* A host's differential profile against its peers (issue 80 point 2) on a
 * synthetic snapshot of HOSTS hosts: each with about 100 stacks of about
 * 20 frames drawn from 300 fleet-wide call paths over 2000 shared function
 * names, SAMPLES samples a host (100 Hz), written with tracegate-perf's
 * emitter as a merge lays hosts out. Times, as the collector's
 * /profile/diff does them: reading the file into per-host profiles, the
 * diff of one host against all the others, and its JSON written out;
 * prints each beside the goal (the whole in 2 s for 1000 hosts).
 *
 *   bench_profile_diff [HOSTS [SAMPLES]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_args.h"
#include "common/json.h"
#include "consumer/profile/profile_diff.h"
#include "tests/profile/profile_trace.h"

#define GOAL_S 2.0
#define N_FUNCS 2000
#define N_PATHS 300
#define STACKS_PER_HOST 100
#define DEPTH 20

static void usage(FILE *f) {
  fprintf(f, "usage: bench_profile_diff [HOSTS [SAMPLES]]\n");
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

static char names[N_FUNCS][16];
static tg_perf_emit_frame_t paths[N_PATHS][DEPTH];
static uint32_t depth[N_PATHS];

/* Call paths that share their roots: a path is a random earlier one's
 * prefix continued with functions of its own. */
static void make_paths(void) {
  for (uint32_t i = 0; i < N_FUNCS; i++)
    snprintf(names[i], sizeof(names[i]), "fn_%u", i);
  for (uint32_t p = 0; p < N_PATHS; p++) {
    uint32_t keep = p ? rnd(DEPTH - 4) : 0, from = p ? rnd(p) : 0;
    depth[p] = DEPTH - 5 + rnd(11); /* 15..25 */
    if (depth[p] > DEPTH) depth[p] = DEPTH;
    for (uint32_t d = 0; d < depth[p]; d++) {
      uint32_t fn = d < keep ? 0 : rnd(N_FUNCS);
      tg_perf_emit_frame_t f = d < keep ? paths[from][d]
                                        : (tg_perf_emit_frame_t){
                                              &pt_app, 0x1000 + fn * 16,
                                              names[fn], 0};
      if (!d) f = (tg_perf_emit_frame_t){&pt_app, 0x100, "main", 0};
      paths[p][d] = f;
    }
  }
}

static int write_host(tg_buf_t *t, pt_writer_t *o, tg_perf_emitter_t *e,
                      uint32_t m, uint64_t samples) {
  uint32_t seq = m << 8 | 1;
  uint32_t mine[STACKS_PER_HOST];
  for (uint32_t i = 0; i < STACKS_PER_HOST; i++) mine[i] = rnd(N_PATHS);
  pt_defaults(o, e, m, seq, 1000, 100);
  for (uint64_t s = 0; s < samples; s++) {
    /* Skewed: low-numbered stacks of the host are sampled more. */
    uint32_t k = mine[rnd(1 + rnd(STACKS_PER_HOST))];
    pt_sample(o, e, m, seq, 2000 + s, paths[k], depth[k]);
    if (tg_pbw_written(&o->w) > 48000 || s + 1 == samples) {
      if (tg_pbw_error(&o->w) ||
          tg_buf_append(t, o->buf, (size_t)tg_pbw_written(&o->w)))
        return -1;
      pt_init(o);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  uint64_t hosts = 1000, samples = 1000;
  const bench_arg_t args[] = {{"HOSTS", 2, 4000, &hosts},
                              {"SAMPLES", 100, 100000, &samples}};
  int rv = bench_args_parse("bench_profile_diff", argc, argv, args, 2, usage,
                            NULL);
  if (rv) return rv < 0 ? 2 : 0;
  make_paths();
  tg_buf_t t;
  tg_buf_init(&t, 0);
  static pt_writer_t o;
  pt_init(&o);
  tg_perf_emitter_t *e = tg_perf_emitter_new(0);
  char name[32];
  for (uint32_t m = 1; m <= hosts && e; m++) {
    snprintf(name, sizeof(name), "host%u:7467", m);
    pt_name(&o, m, name);
  }
  if (!e || tg_buf_append(&t, o.buf, (size_t)tg_pbw_written(&o.w))) return 1;
  pt_init(&o);
  for (uint32_t m = 1; m <= hosts; m++)
    if (write_host(&t, &o, e, m, samples)) {
      fprintf(stderr, "bench_profile_diff: cannot write the trace\n");
      return 1;
    }
  tg_perf_emitter_free(e);
  char path[] = "/tmp/bench_profile_diff_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 ||
      write(fd, tg_buf_begin(&t), tg_buf_size(&t)) != (ssize_t)tg_buf_size(&t) ||
      lseek(fd, 0, SEEK_SET) != 0) {
    fprintf(stderr, "bench_profile_diff: cannot write the trace\n");
    return 1;
  }
  unlink(path);
  size_t bytes = tg_buf_size(&t);
  tg_buf_free(&t);

  double t0 = bench_cpu_s();
  tg_prof_t *p = tg_prof_new(NULL);
  if (!p || tg_prof_read_fd(p, fd, NULL, NULL) != 0) {
    fprintf(stderr, "bench_profile_diff: the trace does not read\n");
    return 1;
  }
  close(fd);
  double t1 = bench_cpu_s();
  size_t n = tg_prof_n_hosts(p);
  const tg_prof_host_t **peers = calloc(n, sizeof(*peers));
  const tg_prof_host_t *h = tg_prof_host(p, 0);
  size_t np = 0, nodes = 0, funcs = 0;
  for (size_t i = 1; i < n && peers; i++) peers[np++] = tg_prof_host(p, i);
  tg_prof_diff_t *d = NULL;
  if (!peers || tg_prof_diff(h, peers, np, NULL, &d) != 0) {
    fprintf(stderr, "bench_profile_diff: the diff failed\n");
    return 1;
  }
  double t2 = bench_cpu_s();
  json_t *j = tg_prof_diff_json(d, 0.0005);
  char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
  double t3 = bench_cpu_s();
  if (!text) return 1;
  nodes = d->n_nodes;
  funcs = d->n_funcs;
  size_t json_len = strlen(text);
  free(text);
  json_decref(j);
  tg_prof_diff_free(d);
  free(peers);
  tg_prof_free(p);
  printf("bench_profile_diff: %zu hosts, %llu samples each, %.1f MB trace: "
         "%zu functions, %zu call paths\n",
         n, (unsigned long long)samples, (double)bytes / 1e6, funcs, nodes);
  printf("  read  %.3f s CPU\n", t1 - t0);
  printf("  diff  %.3f s CPU (one host against %zu peers)\n", t2 - t1, np);
  printf("  json  %.3f s CPU (%zu bytes)\n", t3 - t2, json_len);
  printf("  total %.3f s CPU  (goal: <= %.1f s for 1000 hosts)\n", t3 - t0,
         GOAL_S);
  return 0;
}
