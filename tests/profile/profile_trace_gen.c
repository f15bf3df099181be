/* SPDX-License-Identifier: Apache-2.0 */
/* Writes profile_trace.h's two-host trace to argv[1]
 * (test_profile_pprof.sh reads it with go tool pprof and trace
 * processor). */
#include <stdio.h>

#include "tests/profile/profile_trace.h"

static pt_writer_t o;

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  pt_init(&o);
  if (pt_build(&o)) return 1;
  FILE *f = fopen(argv[1], "wb");
  if (!f) return 1;
  size_t n = (size_t)tg_pbw_written(&o.w);
  int rv = fwrite(o.buf, 1, n, f) == n ? 0 : 1;
  return fclose(f) || rv;
}
