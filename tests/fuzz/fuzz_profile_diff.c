/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes a host's differential profile (consumer/profile/profile_diff.h)
 * on whatever hosts a hostile trace gives the profile decoder (read as
 * fuzz_profile_read.h reads it): each host with samples
 * against all the others, a minimum of 1 sample so that every peer is in
 * the medians, then its JSON and both pprof profiles.
 *
 * Every share must lie in [0, 1], every median too, every call path's
 * parent come before it and name a function in range, the root hold the
 * host's every sample. Nothing may crash or leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "consumer/profile/profile_diff.h"
#include "fuzz_profile_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_share(double v) {
  if (!(v >= 0 && v <= 1 + 1e-9)) abort();
}

static void diff_one(const tg_prof_t *p, size_t host) {
  const tg_prof_host_t *peers[8];
  size_t np = 0;
  for (size_t i = 0; i < tg_prof_n_hosts(p) && np < 8; i++)
    if (i != host) peers[np++] = tg_prof_host(p, i);
  tg_prof_diff_opts_t o = {.min_samples = 1, .max_nodes = 256};
  tg_prof_diff_t *d = NULL;
  if (tg_prof_diff(tg_prof_host(p, host), peers, np, &o, &d) != 0) return;
  for (size_t i = 0; i < d->n_funcs; i++) {
    const tg_prof_diff_func_t *f = &d->funcs[i];
    check_share(f->host_self);
    check_share(f->host_total);
    check_share(f->peers_self);
    check_share(f->peers_total);
    if (f->host_self > f->host_total + 1e-9 || !f->name) abort();
  }
  if (!d->n_nodes || d->nodes[0].host_samples != d->host_counts.samples) abort();
  for (size_t k = 1; k < d->n_nodes; k++) {
    const tg_prof_diff_node_t *n = &d->nodes[k];
    if (n->parent >= k || n->func >= d->n_funcs ||
        n->depth != d->nodes[n->parent].depth + 1)
      abort();
    check_share(n->host_total);
    check_share(n->peers_total);
  }
  json_decref(tg_prof_diff_json(d, 0));
  for (int base = 0; base < 2; base++) {
    tg_buf_t out;
    tg_buf_init(&out, 0);
    tg_prof_diff_pprof(d, base, &out);
    tg_buf_free(&out);
  }
  tg_prof_diff_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_prof_t *p = fuzz_profile_read(data, size);
  if (!p) return 0;
  for (size_t i = 0; i < tg_prof_n_hosts(p); i++)
    if (tg_prof_host(p, i)->counts.samples) diff_one(p, i);
  tg_prof_free(p);
  return 0;
}
