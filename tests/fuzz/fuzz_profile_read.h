/* SPDX-License-Identifier: Apache-2.0 */
/* tests/fuzz/fuzz_profile_read.h: a fuzz input read as a trace by the
 * profile decoder (consumer/profile/profile.h), for fuzz_profile and
 * fuzz_profile_diff: fed in two pieces (split where its first byte says),
 * so framing across reads, interning, clears, machine ids, symbols and
 * compressed batches carry from one packet to the next, under small
 * bounds so that every table fills. */
#ifndef TRACEGATE_TESTS_FUZZ_PROFILE_READ_H
#define TRACEGATE_TESTS_FUZZ_PROFILE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "consumer/profile/profile.h"

/* The ended profile (tg_prof_free), or NULL without memory. */
static inline tg_prof_t *fuzz_profile_read(const uint8_t *data, size_t size) {
  tg_prof_limits_t lim = {.max_hosts = 4, .max_seqs = 8, .max_seq_entries = 64,
                          .max_strings = 64, .max_string_bytes = 4096,
                          .max_mappings = 8, .max_frames = 32,
                          .max_stacks = 16, .max_depth = 8,
                          .max_symbols = 16};
  tg_prof_t *p = tg_prof_new(&lim);
  if (!p) return NULL;
  size_t cut = size ? data[0] % (size + 1) : 0;
  if (tg_prof_feed(p, data, cut) == 0) tg_prof_feed(p, data + cut, size - cut);
  tg_prof_end(p);
  return p;
}

#endif /* TRACEGATE_TESTS_FUZZ_PROFILE_READ_H */
