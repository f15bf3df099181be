/* SPDX-License-Identifier: Apache-2.0 */
/* The symbolizer (consumer/symbolize) on a hostile trace: MAPPINGS
 * mappings with distinct build ids and paths whose iids collided under
 * the former fixed hash, and FRAMES frames (tests/perf/sym_hostile_trace.h),
 * walked from a file and resolved (their paths exist nowhere), as
 * `tracegate symbolize` and the collector do. Prints the CPU time of each
 * half beside the goal of issue 78 point 6: the whole in under 1 s
 * (before it, a 459 KB trace of this kind took 64 s).
 *
 *   bench_symbolize [MAPPINGS [FRAMES]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "consumer/symbolize/symbolize.h"
#include "tests/perf/sym_hostile_trace.h"

#define GOAL_S 1.0

static void usage(FILE *f) {
  fprintf(f, "usage: bench_symbolize [MAPPINGS [FRAMES]]\n");
}

int main(int argc, char **argv) {
  uint64_t maps = 20000, frames = 100000;
  const bench_arg_t args[] = {{"MAPPINGS", 1, 65536, &maps},
                              {"FRAMES", 0, 4000000, &frames}};
  int rv = bench_args_parse("bench_symbolize", argc, argv, args, 2, usage,
                            NULL);
  if (rv) return rv < 0 ? 2 : 0;
  tg_buf_t t;
  tg_buf_init(&t, 0);
  char path[] = "/tmp/bench_symbolize_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || hostile_trace(&t, (uint32_t)maps, (uint32_t)frames) ||
      write(fd, tg_buf_begin(&t), tg_buf_size(&t)) !=
          (ssize_t)tg_buf_size(&t) ||
      lseek(fd, 0, SEEK_SET) != 0) {
    fprintf(stderr, "bench_symbolize: cannot write the trace\n");
    return 1;
  }
  unlink(path);
  tg_sym_t s;
  tg_sym_init(&s);
  tg_sym_opts_t o = {.module_files = true,
                     .debug_dirs = {"/usr/lib/debug"}, .n_debug_dirs = 1};
  char why[256] = "";
  tg_sym_result_t r = {0};
  double t0 = bench_cpu_s();
  rv = tg_sym_collect_fd(&s, fd, -1, &o, why, sizeof(why));
  double t1 = bench_cpu_s();
  if (!rv) rv = tg_sym_resolve_all(&s, &o, &r);
  double t2 = bench_cpu_s();
  if (rv) {
    fprintf(stderr, "bench_symbolize: %s (%d)\n", why, rv);
    return 1;
  }
  printf("trace %zu B: %zu modules, %zu frames kept\n", tg_buf_size(&t),
         s.n_mods, (size_t)s.n_pcs);
  printf("%-10s %8.3f s\n", "walk", t1 - t0);
  printf("%-10s %8.3f s  (every module's files looked for)\n", "resolve",
         t2 - t1);
  printf("%-10s %8.3f s  goal < %.1f s: %s\n", "total", t2 - t0, GOAL_S,
         t2 - t0 < GOAL_S ? "met" : "MISSED");
  tg_sym_free(&s);
  tg_buf_free(&t);
  close(fd);
  return 0;
}
