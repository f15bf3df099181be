/* SPDX-License-Identifier: Apache-2.0 */
/* Writes profile_fleet.h's 20-host fleet to argv[1] (test_profile_diff.sh
 * reads it with tracegate profile --diff and go tool pprof). */
#include <stdio.h>

#include "tests/profile/profile_fleet.h"

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  tg_buf_t t;
  tg_buf_init(&t, 0);
  if (pf_build(&t, false, false)) return 1;
  FILE *f = fopen(argv[1], "wb");
  if (!f) return 1;
  size_t n = tg_buf_size(&t);
  int rv = fwrite(tg_buf_begin(&t), 1, n, f) == n ? 0 : 1;
  tg_buf_free(&t);
  return fclose(f) || rv;
}
