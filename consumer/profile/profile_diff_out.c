/* SPDX-License-Identifier: Apache-2.0 */
/* A differential profile's outputs (profile_diff.h): JSON through jansson,
 * and the call tree as pprof's profile.proto (protobuf-c, gzipped), once
 * with the host's shares and once with the peers' median shares, both in
 * the host's own units, so that pprof's -diff_base subtracts like for
 * like. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "consumer/profile/profile_diff.h"
#include "consumer/profile/profile_internal.h"
#include "pb/pprof/profile.pb-c.h"
#include "tracegate/error.h"

static json_t *func_json(const tg_prof_diff_func_t *f) {
  json_t *o = json_object();
  o = tg_json_put(o, "name", tg_json_text(f->name));
  o = tg_json_put(o, "file", tg_json_text(f->file));
  o = tg_json_put(o, "pseudo", json_boolean(f->pseudo));
  o = tg_json_put(o, "host_share", json_real(f->host_self));
  o = tg_json_put(o, "peers_median_share", json_real(f->peers_self));
  o = tg_json_put(o, "diff", json_real(f->diff_self));
  o = tg_json_put(o, "host_samples", tg_json_u64(f->host_self_samples));
  o = tg_json_put(o, "peers_samples", tg_json_u64(f->peers_self_samples));
  o = tg_json_put(o, "significant", json_boolean(f->significant_self));
  o = tg_json_put(o, "host_total_share", json_real(f->host_total));
  o = tg_json_put(o, "peers_median_total_share", json_real(f->peers_total));
  o = tg_json_put(o, "diff_total", json_real(f->diff_total));
  o = tg_json_put(o, "host_total_samples", tg_json_u64(f->host_total_samples));
  o = tg_json_put(o, "peers_total_samples",
                  tg_json_u64(f->peers_total_samples));
  o = tg_json_put(o, "significant_total", json_boolean(f->significant_total));
  o = tg_json_put(o, "peers_with", json_integer(f->peers_with));
  return o;
}

static json_t *node_json(const tg_prof_diff_node_t *n, json_int_t parent) {
  json_t *o = json_object();
  o = tg_json_put(o, "parent", parent < 0 ? json_null() : json_integer(parent));
  o = tg_json_put(o, "function", n->func == UINT32_MAX
                                     ? json_null()
                                     : json_integer((json_int_t)n->func));
  o = tg_json_put(o, "host_share", json_real(n->host_total));
  o = tg_json_put(o, "peers_median_share", json_real(n->peers_total));
  o = tg_json_put(o, "diff", json_real(n->host_total - n->peers_total));
  o = tg_json_put(o, "host_self_share", json_real(n->host_self));
  o = tg_json_put(o, "peers_median_self_share", json_real(n->peers_self));
  o = tg_json_put(o, "host_samples", tg_json_u64(n->host_samples));
  o = tg_json_put(o, "peers_samples", tg_json_u64(n->peers_samples));
  return o;
}

/* The tree without the paths narrower than |min| on both sides: a path's
 * total share is at most its parent's on every host, so the median's too,
 * and leaving a node out leaves out its descendants with it. */
static json_t *tree_json(const tg_prof_diff_t *d, double min, size_t *pruned) {
  int64_t *idx = malloc((d->n_nodes ? d->n_nodes : 1) * sizeof(*idx));
  if (!idx) return NULL;
  json_t *a = json_array();
  int64_t n = 0;
  *pruned = 0;
  for (size_t k = 0; k < d->n_nodes && a; k++) {
    const tg_prof_diff_node_t *x = &d->nodes[k];
    bool keep = !k || (idx[x->parent] >= 0 &&
                       (x->host_total >= min || x->peers_total >= min));
    idx[k] = keep ? n : -1;
    if (!keep) {
      (*pruned)++;
      continue;
    }
    a = tg_json_push(a, node_json(x, k ? idx[x->parent] : -1));
    n++;
  }
  free(idx);
  return a;
}

json_t *tg_prof_diff_json(const tg_prof_diff_t *d, double min_node_share) {
  const tg_prof_counts_t *c = &d->host_counts;
  json_t *host = json_object();
  host = tg_json_put(host, "name", tg_json_text(d->host_name));
  host = tg_json_put(host, "machine_id", json_integer(d->host_machine_id));
  host = tg_json_put(host, "samples", tg_json_u64(c->samples));
  host = tg_json_put(host, "cpu_ns", tg_json_u64(d->host_cpu_ns));
  host = tg_json_put(host, "shares_of",
                     json_string(d->by_samples ? "samples" : "cpu_ns"));
  host = tg_json_put(host, "too_few_samples", json_boolean(d->too_few_samples));
  host = tg_json_put(host, "no_callstack", tg_json_u64(c->no_callstack));
  host = tg_json_put(host, "with_unnamed_frame", tg_json_u64(c->unnamed_frames));
  host = tg_json_put(host, "callstack_not_interned",
                     tg_json_u64(c->callstack_unknown));
  uint64_t skipped = 0;
  for (int i = 0; i < 5; i++) skipped += c->skipped[i];
  host = tg_json_put(host, "skipped", tg_json_u64(skipped));
  json_t *peers = json_object();
  peers = tg_json_put(peers, "count", json_integer((json_int_t)d->n_peers));
  peers = tg_json_put(peers, "too_few_samples",
                      json_integer((json_int_t)d->n_peers_too_few));
  peers = tg_json_put(peers, "samples", tg_json_u64(d->peers_samples));
  json_t *rule = json_object();
  rule = tg_json_put(rule, "min_samples", tg_json_u64(d->min_samples));
  rule = tg_json_put(rule, "z", json_real(d->z));
  json_t *funcs = json_array();
  for (size_t i = 0; i < d->n_funcs && funcs; i++)
    funcs = tg_json_push(funcs, func_json(&d->funcs[i]));
  size_t pruned = 0;
  json_t *tree = tree_json(d, min_node_share, &pruned);
  json_t *o = json_object();
  o = tg_json_put(o, "schema", json_integer(1));
  o = tg_json_put(o, "host", host);
  o = tg_json_put(o, "peers", peers);
  o = tg_json_put(o, "rule", rule);
  o = tg_json_put(o, "functions", funcs);
  o = tg_json_put(o, "tree", tree);
  o = tg_json_put(o, "tree_min_share", json_real(min_node_share));
  o = tg_json_put(o, "tree_pruned", json_integer((json_int_t)pruned));
  return o;
}

/* --- pprof ------------------------------------------------------------------ */

typedef Perftools__Profiles__Profile pb_profile_t;
typedef Perftools__Profiles__Sample pb_sample_t;
typedef Perftools__Profiles__Location pb_location_t;
typedef Perftools__Profiles__Line pb_line_t;
typedef Perftools__Profiles__Function pb_function_t;
typedef Perftools__Profiles__ValueType pb_value_type_t;

typedef struct pprof_mem {
  char **strs;
  pb_function_t *fn;
  pb_function_t **fn_p;
  pb_location_t *loc;
  pb_location_t **loc_p;
  pb_line_t *line;
  pb_line_t **line_p;
  pb_sample_t *smp;
  pb_sample_t **smp_p;
  int64_t *vals;
  uint64_t *locs;
  uint8_t *packed;
} pprof_mem_t;

static void pprof_mem_free(pprof_mem_t *m) {
  free(m->strs);
  free(m->fn);
  free(m->fn_p);
  free(m->loc);
  free(m->loc_p);
  free(m->line);
  free(m->line_p);
  free(m->smp);
  free(m->smp_p);
  free(m->vals);
  free(m->locs);
  free(m->packed);
}

static int64_t node_value(const tg_prof_diff_t *d, const tg_prof_diff_node_t *n,
                          bool base) {
  double scale = (double)(d->by_samples ? d->host_counts.samples
                                        : d->host_cpu_ns);
  double v = round((base ? n->peers_self : n->host_self) * scale);
  return v > 0 && v < 9.2e18 ? (int64_t)v : 0;
}

int tg_prof_diff_pprof(const tg_prof_diff_t *d, bool base, tg_buf_t *out) {
  /* Strings: "", the two of the sample type, the comment, then each
   * function's name and file. One location per function: the tree merges
   * call paths by function name, so addresses are not kept. */
  enum { S_EMPTY, S_TYPE, S_UNIT, S_COMMENT, S_FIRST };
  size_t nf = d->n_funcs, n_str = S_FIRST + 2 * nf, n_smp = 0, n_locs = 0;
  for (size_t k = 1; k < d->n_nodes; k++)
    if (node_value(d, &d->nodes[k], base)) {
      n_smp++;
      n_locs += d->nodes[k].depth;
    }
  pprof_mem_t m;
  memset(&m, 0, sizeof(m));
  m.strs = calloc(n_str, sizeof(*m.strs));
  m.fn = calloc(nf + 1, sizeof(*m.fn));
  m.fn_p = calloc(nf + 1, sizeof(*m.fn_p));
  m.loc = calloc(nf + 1, sizeof(*m.loc));
  m.loc_p = calloc(nf + 1, sizeof(*m.loc_p));
  m.line = calloc(nf + 1, sizeof(*m.line));
  m.line_p = calloc(nf + 1, sizeof(*m.line_p));
  m.smp = calloc(n_smp + 1, sizeof(*m.smp));
  m.smp_p = calloc(n_smp + 1, sizeof(*m.smp_p));
  m.vals = calloc(n_smp + 1, sizeof(*m.vals));
  m.locs = calloc(n_locs + 1, sizeof(*m.locs));
  if (!m.strs || !m.fn || !m.fn_p || !m.loc || !m.loc_p || !m.line ||
      !m.line_p || !m.smp || !m.smp_p || !m.vals || !m.locs) {
    pprof_mem_free(&m);
    return -ENOMEM;
  }
  char comment[512];
  snprintf(comment, sizeof(comment),
           "tracegate diff of %s (machine %" PRIu32 "): %s; the base profile "
           "is the median of %zu peers' self shares per call path times the "
           "host's %s",
           d->host_name[0] ? d->host_name : "-", d->host_machine_id,
           base ? "this is the base profile" : "this is the host's profile",
           d->n_peers, d->by_samples ? "samples" : "CPU ns");
  m.strs[S_EMPTY] = "";
  m.strs[S_TYPE] = d->by_samples ? "samples" : "cpu";
  m.strs[S_UNIT] = d->by_samples ? "count" : "nanoseconds";
  m.strs[S_COMMENT] = comment;
  for (size_t i = 0; i < nf; i++) {
    const tg_prof_diff_func_t *f = &d->funcs[i];
    m.strs[S_FIRST + 2 * i] = (char *)f->name;
    m.strs[S_FIRST + 2 * i + 1] = (char *)(f->file ? f->file : "");
    perftools__profiles__function__init(&m.fn[i]);
    m.fn[i].id = i + 1;
    m.fn[i].name = m.fn[i].system_name = (int64_t)(S_FIRST + 2 * i);
    m.fn[i].filename = (int64_t)(S_FIRST + 2 * i + 1);
    m.fn_p[i] = &m.fn[i];
    perftools__profiles__line__init(&m.line[i]);
    m.line[i].function_id = i + 1;
    m.line_p[i] = &m.line[i];
    perftools__profiles__location__init(&m.loc[i]);
    m.loc[i].id = i + 1;
    m.loc[i].n_line = 1;
    m.loc[i].line = &m.line_p[i];
    m.loc_p[i] = &m.loc[i];
  }
  size_t s = 0, at = 0;
  for (size_t k = 1; k < d->n_nodes; k++) {
    int64_t v = node_value(d, &d->nodes[k], base);
    if (!v) continue;
    pb_sample_t *ps = &m.smp[s];
    perftools__profiles__sample__init(ps);
    m.vals[s] = v;
    ps->value = &m.vals[s];
    ps->n_value = 1;
    ps->location_id = &m.locs[at];
    ps->n_location_id = d->nodes[k].depth;
    /* Leaf first, as pprof lists a sample's locations. */
    for (size_t x = k; x; x = d->nodes[x].parent)
      m.locs[at++] = (uint64_t)d->nodes[x].func + 1;
    m.smp_p[s++] = ps;
  }
  pb_value_type_t type;
  pb_value_type_t *type_p = &type;
  perftools__profiles__value_type__init(&type);
  type.type = S_TYPE;
  type.unit = S_UNIT;
  int64_t comments[1] = {S_COMMENT};
  pb_profile_t prof;
  perftools__profiles__profile__init(&prof);
  prof.sample_type = &type_p;
  prof.n_sample_type = 1;
  prof.period_type = &type;
  prof.period = 1;
  prof.sample = m.smp_p;
  prof.n_sample = s;
  prof.location = m.loc_p;
  prof.n_location = nf;
  prof.function = m.fn_p;
  prof.n_function = nf;
  prof.string_table = m.strs;
  prof.n_string_table = n_str;
  prof.comment = comments;
  prof.n_comment = 1;
  size_t len = perftools__profiles__profile__get_packed_size(&prof);
  int rv;
  m.packed = malloc(len ? len : 1);
  if (!m.packed)
    rv = -ENOMEM;
  else if (perftools__profiles__profile__pack(&prof, m.packed) != len)
    rv = TG_EPROTO_ENCODE;
  else
    rv = tg__prof_gzip_append(m.packed, len, out);
  pprof_mem_free(&m);
  return rv;
}
