/* SPDX-License-Identifier: Apache-2.0 */
/* A host's differential CPU profile against its peers (docs/profiles.md,
 * "A host against its peers"): per function and per call path, the host's
 * share of its CPU time beside the median of the peers' shares.
 *
 * The peers are any hosts of any finished profiles: the other hosts of a
 * snapshot, or the same host in earlier snapshots. Shares are of each
 * host's own CPU time (of its samples when its timebase gave none), so a
 * boosted host's higher rate does not weigh. Pseudo-stacks ("[no
 * callstack]", "[skipped: ...]", ...) and unnamed frames ("[unknown]", one
 * per mapping path) are functions of their own, never folded into a named
 * one. A host below |min_samples| is marked too few; such peers are left
 * out of the median and counted.
 *
 * Memory: the function and call-path tables of the union of the hosts,
 * plus one value per (path, peer) where the peer has the path; bounded by
 * |max_nodes| (past it, -ENOSPC). The median per path is a selection over
 * the peers that have it (the others are zeros): linear per path.
 *
 * Owns: everything it returns, until tg_prof_diff_free(); keeps no pointer
 * into the hosts, which may be freed once tg_prof_diff() returns. Never
 * aborts on what the hosts hold. Not thread-safe per diff.
 */
#ifndef TRACEGATE_CONSUMER_PROFILE_PROFILE_DIFF_H
#define TRACEGATE_CONSUMER_PROFILE_PROFILE_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/buf.h"
#include "consumer/profile/profile.h"

typedef struct tg_prof_diff_opts {
  /* A host with fewer samples is too few: the host's differences are all
   * not significant, a peer is left out of the median. 0: 100. */
  uint64_t min_samples;
  /* A difference is significant when it is more than |z| standard errors
   * of a share measured with the host's sample count. 0: 3. */
  double z;
  /* Call paths (tree nodes) of the union at most. 0: 1 << 22. */
  size_t max_nodes;
} tg_prof_diff_opts_t;

/* One function: a name (with its mapping's path for "[unknown]"). Shares
 * are fractions of CPU time, 0 to 1; "self" counts the samples whose leaf
 * it is, "total" those whose stack holds it. */
typedef struct tg_prof_diff_func {
  const char *name;
  const char *file; /* "[unknown]": its mapping's path; else NULL */
  bool pseudo;      /* a pseudo-stack's row ("[no callstack]", ...) */
  double host_self, host_total;   /* the host's shares */
  double peers_self, peers_total; /* the median of the peers' shares */
  double diff_self, diff_total;   /* host - peers */
  uint64_t host_self_samples, host_total_samples;
  uint64_t peers_self_samples, peers_total_samples; /* summed over peers */
  uint32_t peers_with; /* peers (in the median) that have it at all */
  bool significant_self, significant_total;
} tg_prof_diff_func_t;

/* One call path: the functions from the root to it (a flame graph's box).
 * Node 0 is the root (every sample); a node's parent comes before it. */
typedef struct tg_prof_diff_node {
  uint32_t parent; /* the root's is 0 */
  uint32_t func;   /* index in funcs; the root's is UINT32_MAX */
  uint32_t depth;  /* the root's is 0 */
  double host_self, host_total;   /* as the functions' */
  double peers_self, peers_total;
  uint64_t host_samples, peers_samples; /* total: through this path */
} tg_prof_diff_node_t;

typedef struct tg_prof_diff {
  const char *host_name;   /* "" when the host has none */
  uint32_t host_machine_id;
  tg_prof_counts_t host_counts;
  uint64_t host_cpu_ns;
  bool by_samples;         /* the host has no CPU time: shares of samples */
  bool too_few_samples;    /* the host's samples < min_samples */
  uint64_t min_samples;
  double z;
  size_t n_peers;          /* in the median */
  size_t n_peers_too_few;  /* left out: fewer than min_samples */
  uint64_t peers_samples;  /* of the peers in the median */
  /* By |diff_self| descending, then |diff_total|, then name. */
  const tg_prof_diff_func_t *funcs;
  size_t n_funcs;
  const tg_prof_diff_node_t *nodes;
  size_t n_nodes;
} tg_prof_diff_t;

/* The diff of |host| against |peers| (|n_peers| pointers, none of them
 * |host|; hosts without samples are skipped). |o| NULL or partly 0 takes
 * the defaults. *out is the caller's (tg_prof_diff_free). 0, -ENOMEM,
 * -ENOSPC (past max_nodes), -EINVAL (no samples on |host|). */
int tg_prof_diff(const tg_prof_host_t *host, const tg_prof_host_t *const *peers,
                 size_t n_peers, const tg_prof_diff_opts_t *o,
                 tg_prof_diff_t **out);
void tg_prof_diff_free(tg_prof_diff_t *d);

/* The narrowest call path the outputs for people (the collector's JSON
 * and page, the CLI's --json) keep: 0.05%, under a pixel of a flame graph
 * on a laptop's screen. */
#define TG_PROF_DIFF_MIN_SHARE 0.0005

/* The diff as JSON (docs/profiles.md): the host, the peers, the rule, the
 * functions and the tree; nodes whose host and peers' total shares are
 * both below |min_node_share| are left out of the tree (with their
 * descendants) and counted. A new reference, or NULL without memory. */
json_t *tg_prof_diff_json(const tg_prof_diff_t *d, double min_node_share);

/* Appends a gzipped profile.proto of the call tree to |out|: the host's
 * self shares (|base| false) or the peers' median self shares (|base|
 * true), each times the host's CPU ns (samples when by_samples), so that
 * `go tool pprof -diff_base=BASE HOST` shows the differences in the
 * host's own nanoseconds. 0, -ENOMEM, TG_EPROTO_ENCODE. */
int tg_prof_diff_pprof(const tg_prof_diff_t *d, bool base, tg_buf_t *out);

#endif /* TRACEGATE_CONSUMER_PROFILE_PROFILE_DIFF_H */
