/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the trace -> profile decoder (consumer/profile/profile.h): the
 * input is a Trace read as fuzz_profile_read.h reads it (in two pieces,
 * under small bounds).
 *
 * Every host's samples must all be in its stacks, every index in range,
 * its function shares and its pprof computable. Nothing may crash or
 * leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "consumer/profile/profile.h"
#include "fuzz_profile_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_prof_t *p = fuzz_profile_read(data, size);
  if (!p) return 0;
  for (size_t i = 0; i < tg_prof_n_hosts(p); i++) {
    const tg_prof_host_t *h = tg_prof_host(p, i);
    uint64_t in = 0;
    for (size_t s = 0; s < h->n_stacks; s++) {
      const tg_prof_stack_t *st = &h->stacks[s];
      in += st->samples;
      for (uint32_t j = 0; j < st->n; j++) {
        uint32_t f = h->stack_frames[st->first + j];
        if (f >= h->n_frames) abort();
        const tg_prof_frame_t *fr = &h->frames[f];
        if (fr->mapping > h->n_mappings || fr->function >= h->n_strings ||
            (fr->n_lines && fr->first_line + fr->n_lines > h->n_lines))
          abort();
        (void)tg_prof_frame_name(h, fr);
      }
    }
    if (in > h->counts.samples) abort();
    tg_prof_func_share_t *fs;
    size_t n;
    if (tg_prof_function_shares(h, &fs, &n) == 0) free(fs);
    tg_buf_t out;
    tg_buf_init(&out, 0);
    tg_prof_pprof_opts_t o = {.hosts = &i, .n_hosts = 1};
    tg_prof_pprof(p, &o, &out);
    tg_buf_free(&out);
  }
  tg_prof_free(p);
  return 0;
}
