/* SPDX-License-Identifier: Apache-2.0 */
/* A host's differential profile against its peers (profile_diff.h).
 *
 * Each host is walked once, stack by stack: its frames become functions
 * (interned by name across hosts) and call paths (interned by parent path
 * and function). A walk sums CPU time and samples per function and path
 * in scratch counters touched by this host only, then turns them into
 * shares: the host's are kept per key, a peer's are appended as (key,
 * share) entries. The entries are then grouped by key (a counting sort)
 * and each key's median taken by selection among the peers that have it;
 * the peers without it are zeros below them. */
#include "consumer/profile/profile_diff.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/profile/profile_intern.h"

#define DEFAULT_MIN_SAMPLES 100
#define DEFAULT_Z 3.0
#define DEFAULT_MAX_NODES (1u << 22)
#define NONE UINT32_MAX

/* A key's figures over the whole diff. */
typedef struct key_acc {
  uint64_t host_self, host_total;   /* the host's samples */
  double hs, ht;                    /* the host's shares */
  uint64_t peers_self, peers_total; /* the peers' samples, summed */
  uint32_t with;                    /* peers that have it */
} key_acc_t;

/* A key's counters during one host's walk; |stamp| says which walk. */
typedef struct scratch {
  uint64_t self_ns, total_ns, self_n, total_n;
  uint32_t stamp;
  uint32_t stack; /* the stack (+ 1) that last counted it in total */
} scratch_t;

typedef struct entry {
  uint32_t key;
  double self, total;
} entry_t;

/* Functions or call paths. */
typedef struct col {
  tg__prof_itab_t tab; /* bounded by max_nodes entries */
  key_acc_t *acc;
  scratch_t *scr;
  uint32_t *parent, *func, *depth; /* call paths only */
  size_t cap;
  uint32_t *touched;
  size_t n_touched, cap_touched;
  entry_t *ent;
  size_t n_ent, cap_ent;
  double *med_self, *med_total;
} col_t;

typedef struct diff_impl {
  tg_prof_diff_t pub;
  tg__prof_itab_t names; /* the functions' keys: what pub's names point in */
  char *host_name;
  tg_prof_diff_func_t *funcs;
  tg_prof_diff_node_t *nodes;
} diff_impl_t;

typedef struct walker {
  col_t fn, node;
  uint32_t walk;
  uint64_t rng;
  char *kbuf;
  size_t kcap;
  uint32_t *fmap; /* per frame of the host walked: function + 1 */
  size_t fmap_cap;
} walker_t;

static void col_init(col_t *c, uint64_t seed, size_t max) {
  memset(c, 0, sizeof(*c));
  tg__prof_itab_init(&c->tab, seed, max, SIZE_MAX);
}

static void col_free(col_t *c) {
  tg__prof_itab_free(&c->tab);
  free(c->acc);
  free(c->scr);
  free(c->parent);
  free(c->func);
  free(c->depth);
  free(c->touched);
  free(c->ent);
  free(c->med_self);
  free(c->med_total);
}

#define GROW(ptr, n, cap)                                      \
  do {                                                         \
    void *g_ = realloc((ptr), (cap) * sizeof(*(ptr)));         \
    if (!g_) return -ENOMEM;                                   \
    (ptr) = g_;                                                \
    memset((ptr) + (n), 0, ((cap) - (n)) * sizeof(*(ptr)));    \
  } while (0)

/* |key|'s index in |c|, its per-key arrays grown when it is new. */
static int col_key(col_t *c, const void *key, size_t len, uint32_t *id,
                   int *added) {
  int rv = tg__prof_itab_add(&c->tab, key, len, id, added);
  if (rv || !*added) return rv;
  if (c->tab.n > c->cap) {
    size_t old = c->cap, cap = c->cap ? c->cap * 2 : 256;
    GROW(c->acc, old, cap);
    GROW(c->scr, old, cap);
    GROW(c->parent, old, cap);
    GROW(c->func, old, cap);
    GROW(c->depth, old, cap);
    c->cap = cap;
  }
  return 0;
}

/* |id|'s counters for this walk, zeroed and listed at its first touch. */
static scratch_t *touch(col_t *c, uint32_t id, uint32_t walk) {
  scratch_t *s = &c->scr[id];
  if (s->stamp == walk) return s;
  if (c->n_touched == c->cap_touched) {
    size_t cap = c->cap_touched ? c->cap_touched * 2 : 256;
    uint32_t *g = realloc(c->touched, cap * sizeof(*g));
    if (!g) return NULL;
    c->touched = g;
    c->cap_touched = cap;
  }
  c->touched[c->n_touched++] = id;
  memset(s, 0, sizeof(*s));
  s->stamp = walk;
  return s;
}

/* The function key of a frame or pseudo-stack: a kind byte ('f' named,
 * 'u' unnamed with its mapping's path, 'p' pseudo), the name, NUL, the
 * file, NUL: the finished diff points its names into these keys. */
static int func_key(walker_t *w, char kind, const char *name, const char *file,
                    uint32_t *id) {
  size_t nl = strlen(name), fl = file ? strlen(file) : 0;
  size_t len = 1 + nl + 1 + fl + 1;
  if (len > w->kcap) {
    char *g = realloc(w->kbuf, len);
    if (!g) return -ENOMEM;
    w->kbuf = g;
    w->kcap = len;
  }
  w->kbuf[0] = kind;
  memcpy(w->kbuf + 1, name, nl);
  w->kbuf[1 + nl] = 0;
  if (fl) memcpy(w->kbuf + 2 + nl, file, fl);
  w->kbuf[len - 1] = 0;
  int added;
  return col_key(&w->fn, w->kbuf, len, id, &added);
}

static int frame_func(walker_t *w, const tg_prof_host_t *h, uint32_t frame,
                      uint32_t *id) {
  if (w->fmap[frame]) {
    *id = w->fmap[frame] - 1;
    return 0;
  }
  const tg_prof_frame_t *f = &h->frames[frame];
  bool named = f->function || (f->n_lines && h->lines[f->first_line].function);
  const char *file = NULL;
  if (!named && f->mapping) file = h->strings[h->mappings[f->mapping - 1].path];
  int rv = func_key(w, named ? 'f' : 'u', tg_prof_frame_name(h, f), file, id);
  if (!rv) w->fmap[frame] = *id + 1;
  return rv;
}

static int child(walker_t *w, uint32_t parent, uint32_t func, uint32_t *id) {
  uint32_t k[2] = {parent, func};
  int added;
  int rv = col_key(&w->node, k, sizeof(k), id, &added);
  if (rv || !added) return rv;
  w->node.parent[*id] = parent;
  w->node.func[*id] = func;
  w->node.depth[*id] = w->node.depth[parent] + 1;
  return 0;
}

/* Counts stack |s| (the host's |stack|-th, from 1) for key |id|: in its
 * total once, however often a function recurses in it (a call path is in
 * a stack at most once anyway), and in its self when it is the leaf. */
static int count(col_t *c, uint32_t walk, uint32_t id, uint32_t stack,
                 const tg_prof_stack_t *s, bool leaf) {
  scratch_t *x = touch(c, id, walk);
  if (!x) return -ENOMEM;
  if (x->stack != stack) {
    x->stack = stack;
    x->total_ns += s->cpu_ns;
    x->total_n += s->samples;
  }
  if (leaf) {
    x->self_ns += s->cpu_ns;
    x->self_n += s->samples;
  }
  return 0;
}

/* Shares of this walk's touched keys: the host's kept, a peer's appended. */
static int settle(col_t *c, bool is_host, bool by_samples, double den) {
  for (size_t i = 0; i < c->n_touched; i++) {
    uint32_t id = c->touched[i];
    const scratch_t *s = &c->scr[id];
    key_acc_t *a = &c->acc[id];
    double self = (double)(by_samples ? s->self_n : s->self_ns) / den;
    double total = (double)(by_samples ? s->total_n : s->total_ns) / den;
    if (is_host) {
      a->host_self = s->self_n;
      a->host_total = s->total_n;
      a->hs = self;
      a->ht = total;
      continue;
    }
    a->peers_self += s->self_n;
    a->peers_total += s->total_n;
    a->with++;
    if (c->n_ent == c->cap_ent) {
      size_t cap = c->cap_ent ? c->cap_ent * 2 : 4096;
      entry_t *g = realloc(c->ent, cap * sizeof(*g));
      if (!g) return -ENOMEM;
      c->ent = g;
      c->cap_ent = cap;
    }
    c->ent[c->n_ent++] = (entry_t){id, self, total};
  }
  c->n_touched = 0;
  return 0;
}

static int walk_host(walker_t *w, const tg_prof_host_t *h, bool is_host) {
  w->walk++;
  if (h->n_frames > w->fmap_cap) {
    uint32_t *g = realloc(w->fmap, h->n_frames * sizeof(*g));
    if (!g) return -ENOMEM;
    w->fmap = g;
    w->fmap_cap = h->n_frames;
  }
  if (h->n_frames) memset(w->fmap, 0, h->n_frames * sizeof(*w->fmap));
  int rv = 0;
  for (size_t i = 0; i < h->n_stacks && !rv; i++) {
    const tg_prof_stack_t *s = &h->stacks[i];
    if (!s->samples) continue;
    uint32_t stack = (uint32_t)i + 1, fid, nid, parent = 0;
    rv = count(&w->node, w->walk, 0, stack, s, false);
    if (s->kind != TG_PROF_STACK_FRAMES || !s->n) {
      rv = rv ? rv : func_key(w, 'p', tg_prof_stack_kind_name(s->kind), NULL,
                              &fid);
      if (!rv) rv = child(w, 0, fid, &nid);
      if (!rv) rv = count(&w->fn, w->walk, fid, stack, s, true);
      if (!rv) rv = count(&w->node, w->walk, nid, stack, s, true);
      continue;
    }
    for (uint32_t j = 0; j < s->n && !rv; j++) {
      bool leaf = j + 1 == s->n;
      rv = frame_func(w, h, h->stack_frames[s->first + j], &fid);
      if (!rv) rv = child(w, parent, fid, &nid);
      if (!rv) rv = count(&w->fn, w->walk, fid, stack, s, leaf);
      if (!rv) rv = count(&w->node, w->walk, nid, stack, s, leaf);
      parent = nid;
    }
  }
  if (rv) return rv;
  bool by_samples = !h->cpu_ns;
  double den = (double)(by_samples ? h->counts.samples : h->cpu_ns);
  if (den <= 0) den = 1;
  rv = settle(&w->fn, is_host, by_samples, den);
  if (!rv) rv = settle(&w->node, is_host, by_samples, den);
  return rv;
}

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* The |r|-th smallest of v[0..n) (reordering v): quickselect with a random
 * pivot (no order of the hosts' values makes it quadratic on average) and
 * a three-way partition (equal shares, zeros above all, end it at once). */
static double select_rank(double *v, size_t n, size_t r, uint64_t *rng) {
  size_t lo = 0, hi = n - 1;
  for (;;) {
    if (lo == hi) return v[lo];
    double pv = v[lo + next_rand(rng) % (hi - lo + 1)], t;
    size_t lt = lo, i = lo, gt = hi + 1;
    while (i < gt) {
      if (v[i] < pv) {
        t = v[lt], v[lt++] = v[i], v[i++] = t;
      } else if (v[i] > pv) {
        t = v[--gt], v[gt] = v[i], v[i] = t;
      } else {
        i++;
      }
    }
    if (r < lt) hi = lt - 1;
    else if (r >= gt) lo = gt;
    else return pv;
  }
}

/* The |r|-th smallest of |n_all| values: |n| in v, the others zeros. */
static double rank_of(double *v, size_t n, size_t n_all, size_t r,
                      uint64_t *rng) {
  size_t zeros = n_all - n;
  if (r < zeros) return 0;
  return select_rank(v, n, r - zeros, rng);
}

static double median(double *v, size_t n, size_t n_all, uint64_t *rng) {
  if (!n_all || !n) return 0;
  if (n_all % 2) return rank_of(v, n, n_all, n_all / 2, rng);
  return (rank_of(v, n, n_all, n_all / 2 - 1, rng) +
          rank_of(v, n, n_all, n_all / 2, rng)) / 2;
}

/* Each key's median over |n_peers|: the entries grouped by key. */
static int col_medians(col_t *c, size_t n_peers, uint64_t *rng) {
  size_t n = c->tab.n;
  size_t *start = calloc(n + 1, sizeof(*start));
  double *vs = malloc((c->n_ent ? c->n_ent : 1) * sizeof(*vs));
  double *vt = malloc((c->n_ent ? c->n_ent : 1) * sizeof(*vt));
  c->med_self = calloc(n ? n : 1, sizeof(double));
  c->med_total = calloc(n ? n : 1, sizeof(double));
  int rv = start && vs && vt && c->med_self && c->med_total ? 0 : -ENOMEM;
  if (!rv) {
    for (size_t i = 0; i < c->n_ent; i++) start[c->ent[i].key + 1]++;
    for (size_t k = 0; k < n; k++) start[k + 1] += start[k];
    /* start[k] walks up to start[k + 1] while filling, then is reset. */
    for (size_t i = 0; i < c->n_ent; i++) {
      size_t at = start[c->ent[i].key]++;
      vs[at] = c->ent[i].self;
      vt[at] = c->ent[i].total;
    }
    for (size_t k = n; k > 0; k--) start[k] = start[k - 1];
    start[0] = 0;
    for (size_t k = 0; k < n; k++) {
      size_t a = start[k], m = start[k + 1] - a;
      c->med_self[k] = median(vs + a, m, n_peers, rng);
      c->med_total[k] = median(vt + a, m, n_peers, rng);
    }
  }
  free(start);
  free(vs);
  free(vt);
  free(c->ent);
  c->ent = NULL;
  c->n_ent = c->cap_ent = 0;
  return rv;
}

static bool significant(const tg_prof_diff_t *d, double diff, double med) {
  if (d->too_few_samples || !d->n_peers) return false;
  double n = (double)d->host_counts.samples;
  double q = med < 1 / n ? 1 / n : med > 1 - 1 / n ? 1 - 1 / n : med;
  return fabs(diff) > d->z * sqrt(q * (1 - q) / n);
}

static int cmp_func(const void *a, const void *b) {
  const tg_prof_diff_func_t *x = *(tg_prof_diff_func_t *const *)a;
  const tg_prof_diff_func_t *y = *(tg_prof_diff_func_t *const *)b;
  double s = fabs(x->diff_self) - fabs(y->diff_self);
  if (s != 0) return s > 0 ? -1 : 1;
  double t = fabs(x->diff_total) - fabs(y->diff_total);
  if (t != 0) return t > 0 ? -1 : 1;
  int c = strcmp(x->name, y->name);
  return c ? c : strcmp(x->file ? x->file : "", y->file ? y->file : "");
}

/* The finished rows: functions sorted, call paths pointing at them. */
static int build(diff_impl_t *di, walker_t *w) {
  tg_prof_diff_t *d = &di->pub;
  size_t nf = w->fn.tab.n, nn = w->node.tab.n;
  tg_prof_diff_func_t *tmp = calloc(nf ? nf : 1, sizeof(*tmp));
  tg_prof_diff_func_t **order = calloc(nf ? nf : 1, sizeof(*order));
  uint32_t *remap = calloc(nf ? nf : 1, sizeof(*remap));
  di->funcs = calloc(nf ? nf : 1, sizeof(*di->funcs));
  di->nodes = calloc(nn ? nn : 1, sizeof(*di->nodes));
  int rv = tmp && order && remap && di->funcs && di->nodes ? 0 : -ENOMEM;
  /* The keys move to the diff: the names point into them. */
  di->names = w->fn.tab;
  tg__prof_itab_init(&w->fn.tab, 0, 0, 0);
  for (size_t k = 0; k < nf && !rv; k++) {
    const key_acc_t *a = &w->fn.acc[k];
    tg_prof_diff_func_t *f = &tmp[k];
    size_t len;
    const char *key = (const char *)tg__prof_itab_key(&di->names, (uint32_t)k,
                                                      &len);
    f->name = key + 1;
    f->file = key[0] == 'u' ? key + 2 + strlen(key + 1) : NULL;
    f->pseudo = key[0] == 'p';
    f->host_self = a->hs;
    f->host_total = a->ht;
    f->peers_self = w->fn.med_self[k];
    f->peers_total = w->fn.med_total[k];
    f->diff_self = f->host_self - f->peers_self;
    f->diff_total = f->host_total - f->peers_total;
    f->host_self_samples = a->host_self;
    f->host_total_samples = a->host_total;
    f->peers_self_samples = a->peers_self;
    f->peers_total_samples = a->peers_total;
    f->peers_with = a->with;
    f->significant_self = significant(d, f->diff_self, f->peers_self);
    f->significant_total = significant(d, f->diff_total, f->peers_total);
    order[k] = f;
  }
  if (!rv) qsort(order, nf, sizeof(*order), cmp_func);
  for (size_t i = 0; i < nf && !rv; i++) {
    di->funcs[i] = *order[i];
    remap[order[i] - tmp] = (uint32_t)i;
  }
  for (size_t k = 0; k < nn && !rv; k++) {
    const key_acc_t *a = &w->node.acc[k];
    tg_prof_diff_node_t *n = &di->nodes[k];
    n->parent = k ? w->node.parent[k] : 0;
    n->func = k ? remap[w->node.func[k]] : NONE;
    n->depth = w->node.depth[k];
    n->host_self = a->hs;
    n->host_total = a->ht;
    n->peers_self = w->node.med_self[k];
    n->peers_total = w->node.med_total[k];
    n->host_samples = a->host_total;
    n->peers_samples = a->peers_total;
  }
  free(tmp);
  free(order);
  free(remap);
  if (rv) return rv;
  d->funcs = di->funcs;
  d->n_funcs = nf;
  d->nodes = di->nodes;
  d->n_nodes = nn;
  return 0;
}

void tg_prof_diff_free(tg_prof_diff_t *d) {
  if (!d) return;
  diff_impl_t *di = (diff_impl_t *)d;
  tg__prof_itab_free(&di->names);
  free(di->host_name);
  free(di->funcs);
  free(di->nodes);
  free(di);
}

int tg_prof_diff(const tg_prof_host_t *host, const tg_prof_host_t *const *peers,
                 size_t n_peers, const tg_prof_diff_opts_t *o,
                 tg_prof_diff_t **out) {
  *out = NULL;
  if (!host->counts.samples) return -EINVAL;
  diff_impl_t *di = calloc(1, sizeof(*di));
  if (!di) return -ENOMEM;
  tg_prof_diff_t *d = &di->pub;
  d->min_samples = o && o->min_samples ? o->min_samples : DEFAULT_MIN_SAMPLES;
  d->z = o && o->z > 0 ? o->z : DEFAULT_Z;
  size_t max_nodes = o && o->max_nodes ? o->max_nodes : DEFAULT_MAX_NODES;
  di->host_name = strdup(host->name ? host->name : "");
  d->host_name = di->host_name;
  d->host_machine_id = host->machine_id;
  d->host_counts = host->counts;
  d->host_cpu_ns = host->cpu_ns;
  d->by_samples = !host->cpu_ns;
  d->too_few_samples = host->counts.samples < d->min_samples;
  walker_t w;
  memset(&w, 0, sizeof(w));
  uint64_t seed = tg__prof_seed();
  w.rng = seed | 1;
  col_init(&w.fn, seed, max_nodes);
  col_init(&w.node, seed ^ 0x9E3779B97F4A7C15ull, max_nodes);
  uint32_t root;
  int added;
  uint32_t rk[2] = {NONE, NONE};
  int rv = di->host_name ? col_key(&w.node, rk, sizeof(rk), &root, &added)
                         : -ENOMEM;
  if (!rv) rv = walk_host(&w, host, true);
  for (size_t i = 0; i < n_peers && !rv; i++) {
    const tg_prof_host_t *p = peers[i];
    if (p == host || !p->counts.samples) continue;
    if (p->counts.samples < d->min_samples) {
      d->n_peers_too_few++;
      continue;
    }
    d->n_peers++;
    d->peers_samples += p->counts.samples;
    rv = walk_host(&w, p, false);
  }
  if (!rv) rv = col_medians(&w.fn, d->n_peers, &w.rng);
  if (!rv) rv = col_medians(&w.node, d->n_peers, &w.rng);
  if (!rv) rv = build(di, &w);
  col_free(&w.fn);
  col_free(&w.node);
  free(w.kbuf);
  free(w.fmap);
  if (rv) {
    tg_prof_diff_free(d);
    return rv;
  }
  *out = d;
  return 0;
}
