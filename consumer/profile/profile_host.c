/* SPDX-License-Identifier: Apache-2.0 */
/* A profile's hosts (profile.h): their strings, symbols, the end of the
 * reading (frames named, counts), and what the outputs read of them:
 * names and per-function shares. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/profile/profile_internal.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

#define MAX_STRING (64u << 10)
#define MAX_LINES_PER_ADDR 64

void tg__prof_host_free(tg__prof_host_t *h) {
  tg__prof_itab_free(&h->strs);
  tg__prof_itab_free(&h->maps);
  tg__prof_itab_free(&h->frames);
  tg__prof_itab_free(&h->stacks);
  tg__prof_itab_free(&h->syms);
  free(h->mappings);
  free(h->frame_v);
  free(h->stack_v);
  free(h->stack_frames);
  free(h->lines);
  free(h->sym_v);
  free(h->str_ptrs);
  free(h->str_lens);
  free(h->name);
  memset(h, 0, sizeof(*h));
}

/* Strings are kept NUL-terminated (the NUL is part of the key), so that
 * the finished host hands out C strings into the arena. */
int tg__prof_str(tg_prof_t *p, tg__prof_host_t *h, const uint8_t *s, size_t n,
                 uint32_t *idx) {
  (void)p;
  if (n > MAX_STRING) return -ENOSPC;
  uint8_t tmp[MAX_STRING + 1];
  for (size_t i = 0; i < n; i++) tmp[i] = s[i] ? s[i] : '?';
  tmp[n] = 0;
  int added;
  return tg__prof_itab_add(&h->strs, tmp, n + 1, idx, &added);
}

int tg__prof_build_id(tg_prof_t *p, tg__prof_host_t *h, const uint8_t *s,
                      size_t n, uint32_t *idx) {
  if (n > 256) return -ENOSPC;
  bool hex = n && n % 2 == 0;
  for (size_t i = 0; i < n && hex; i++)
    hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
  if (hex) return tg__prof_str(p, h, s, n, idx);
  char t[513];
  for (size_t i = 0; i < n; i++) snprintf(t + 2 * i, 3, "%02x", s[i]);
  return tg__prof_str(p, h, (const uint8_t *)t, 2 * n, idx);
}

/* The key of a symbolized address: a module by build id (kind 'b') or,
 * without one, by path ('p'), and the address. */
typedef struct sym_key {
  uint32_t kind, module;
  uint64_t addr;
} sym_key_t;

static int add_lines(tg__prof_host_t *h, const uint8_t *b, size_t n,
                     uint32_t *count, tg_prof_t *p) {
  tg_pb_reader_t r, r2;
  tg_pb_field_t f, g;
  int rv;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id != 2 || f.type != TG_PB_WT_LEN) continue;
    if (*count >= MAX_LINES_PER_ADDR) continue;
    tg_prof_line_t l = {0, 0, 0};
    tg_pb_reader_init(&r2, f.data, f.size);
    while ((rv = tg_pb_reader_next(&r2, &g)) == 1) {
      int err = 0;
      if (g.id == 1 && g.type == TG_PB_WT_LEN)
        err = tg__prof_str(p, h, g.data, g.size, &l.function);
      if (g.id == 2 && g.type == TG_PB_WT_LEN)
        err = tg__prof_str(p, h, g.data, g.size, &l.file);
      if (g.id == 3 && g.type == TG_PB_WT_VARINT)
        l.line = g.value > UINT32_MAX ? 0 : (uint32_t)g.value;
      if (err == -ENOSPC) h->pub.counts.refused_entries++;
      else if (err) return err;
    }
    if (rv < 0) return TG_EPARSE;
    if (h->n_lines >= (size_t)p->lim.max_symbols * 4) {
      h->pub.counts.refused_entries++;
      continue;
    }
    if (h->n_lines == h->cap_lines) {
      size_t cap = h->cap_lines ? h->cap_lines * 2 : 256;
      tg_prof_line_t *gl = realloc(h->lines, cap * sizeof(*gl));
      if (!gl) return -ENOMEM;
      h->lines = gl;
      h->cap_lines = cap;
    }
    h->lines[h->n_lines++] = l;
    (*count)++;
  }
  return rv < 0 ? TG_EPARSE : 0;
}

int tg__prof_module_symbols(tg_prof_t *p, tg__prof_host_t *h,
                            const uint8_t *b, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  const uint8_t *path = NULL, *bid = NULL;
  size_t path_len = 0, bid_len = 0;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.type != TG_PB_WT_LEN) continue;
    if (f.id == 1) {
      path = f.data;
      path_len = f.size;
    }
    if (f.id == 2) {
      bid = f.data;
      bid_len = f.size;
    }
  }
  if (rv < 0) return TG_EPARSE;
  sym_key_t k;
  memset(&k, 0, sizeof(k));
  if (bid_len) {
    k.kind = 'b';
    rv = tg__prof_build_id(p, h, bid, bid_len, &k.module);
  } else {
    k.kind = 'p';
    rv = tg__prof_str(p, h, path ? path : (const uint8_t *)"", path_len,
                      &k.module);
  }
  if (rv == -ENOSPC) {
    h->pub.counts.refused_entries++;
    return 0;
  }
  if (rv) return rv;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id != 3 || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_t r2;
    tg_pb_field_t g;
    int rv2;
    bool has_addr = false;
    tg_pb_reader_init(&r2, f.data, f.size);
    while ((rv2 = tg_pb_reader_next(&r2, &g)) == 1)
      if (g.id == 1 && g.type == TG_PB_WT_VARINT) {
        k.addr = g.value;
        has_addr = true;
      }
    if (rv2 < 0) return TG_EPARSE;
    if (!has_addr) continue;
    uint32_t idx;
    int added = 0;
    int err = tg__prof_itab_add(&h->syms, &k, sizeof(k), &idx, &added);
    if (err == -ENOSPC) {
      h->pub.counts.refused_entries++;
      continue;
    }
    if (err) return err;
    if (!added) continue; /* the first symbols of an address stand */
    if (idx % 256 == 0) {
      tg__prof_sym_t *gs = realloc(h->sym_v, (idx + 256) * sizeof(*gs));
      if (!gs) return -ENOMEM;
      h->sym_v = gs;
    }
    h->sym_v[idx] = (tg__prof_sym_t){(uint32_t)h->n_lines, 0};
    if ((err = add_lines(h, f.data, f.size, &h->sym_v[idx].n_lines, p)))
      return err;
  }
  return rv < 0 ? TG_EPARSE : 0;
}

static bool frame_unnamed(const tg_prof_frame_t *f) {
  return !f->function && !f->n_lines;
}

int tg__prof_host_finish(tg_prof_t *p, tg__prof_host_t *h) {
  (void)p;
  tg_prof_host_t *pub = &h->pub;
  /* Symbols: a frame's mapping by build id, else by path; the address is
   * the frame's rel_pc, as `tracegate symbolize` writes it. */
  for (size_t i = 0; i < pub->n_frames && h->syms.n; i++) {
    tg_prof_frame_t *f = &h->frame_v[i];
    if (!f->mapping) continue;
    const tg_prof_mapping_t *m = &h->mappings[f->mapping - 1];
    sym_key_t k;
    memset(&k, 0, sizeof(k));
    k.kind = m->build_id ? 'b' : 'p';
    k.module = m->build_id ? m->build_id : m->path;
    k.addr = f->rel_pc;
    uint32_t idx;
    if (tg__prof_itab_find(&h->syms, &k, sizeof(k), &idx) != 0) continue;
    f->first_line = h->sym_v[idx].first_line;
    f->n_lines = h->sym_v[idx].n_lines;
  }
  for (size_t i = 0; i < pub->n_stacks; i++) {
    const tg_prof_stack_t *s = &h->stack_v[i];
    bool unnamed = false;
    for (uint32_t j = 0; j < s->n && !unnamed; j++)
      unnamed = frame_unnamed(&h->frame_v[h->stack_frames[s->first + j]]);
    if (unnamed) pub->counts.unnamed_frames += s->samples;
    if (s->truncated) pub->counts.truncated += s->samples;
  }
  size_t n = h->strs.n;
  h->str_ptrs = malloc((n ? n : 1) * sizeof(*h->str_ptrs));
  h->str_lens = malloc((n ? n : 1) * sizeof(*h->str_lens));
  if (!h->str_ptrs || !h->str_lens) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    size_t len;
    h->str_ptrs[i] = (const char *)tg__prof_itab_key(&h->strs, (uint32_t)i, &len);
    h->str_lens[i] = (uint32_t)(len - 1);
  }
  pub->name = h->name ? h->name : "";
  pub->strings = h->str_ptrs;
  pub->string_lens = h->str_lens;
  pub->n_strings = n;
  pub->mappings = h->mappings;
  pub->frames = h->frame_v;
  pub->lines = h->lines;
  pub->n_lines = h->n_lines;
  pub->stack_frames = h->stack_frames;
  pub->stacks = h->stack_v;
  return 0;
}

/* --- what the outputs read ------------------------------------------------------ */

const tg_prof_host_t *tg_prof_find_host(const tg_prof_t *p, const char *spec) {
  size_t n = tg_prof_n_hosts(p);
  for (size_t i = 0; i < n; i++) {
    const tg_prof_host_t *h = tg_prof_host(p, i);
    if (h->name[0] && !strcmp(h->name, spec)) return h;
  }
  const char *d = spec;
  if (!strncmp(d, "machine ", 8)) d += 8;
  char *end;
  errno = 0;
  unsigned long long id = strtoull(d, &end, 10);
  if (!*d || *end || errno || d[0] < '0' || d[0] > '9' || id > UINT32_MAX)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    const tg_prof_host_t *h = tg_prof_host(p, i);
    if (h->machine_id == id) return h;
  }
  return NULL;
}

const char *tg_prof_stack_kind_name(uint32_t kind) {
  switch (kind) {
    case TG_PROF_STACK_NO_CALLSTACK: return "[no callstack]";
    case TG_PROF_STACK_NOT_INTERNED: return "[callstack not interned]";
    case TG_PROF_STACK_OVER_BOUNDS: return "[over bounds]";
    case TG_PROF_STACK_SKIPPED_READ: return "[skipped: read]";
    case TG_PROF_STACK_SKIPPED_UNWIND: return "[skipped: unwind]";
    case TG_PROF_STACK_SKIPPED_ENQUEUE: return "[skipped: unwinder queue full]";
    case TG_PROF_STACK_SKIPPED_SCOPE: return "[skipped: not in scope]";
    case TG_PROF_STACK_SKIPPED_OTHER: return "[skipped]";
    default: return "[unknown]";
  }
}

const char *tg_prof_frame_name(const tg_prof_host_t *h,
                               const tg_prof_frame_t *f) {
  if (f->function) return h->strings[f->function];
  if (f->n_lines && h->lines[f->first_line].function)
    return h->strings[h->lines[f->first_line].function];
  return "[unknown]";
}

typedef struct acc {
  const char *name, *file;
  uint64_t self, total, self_ns, total_ns;
  size_t last_stack; /* + 1: the stack that last counted it in |total| */
} acc_t;

static int cmp_share(const void *a, const void *b) {
  const tg_prof_func_share_t *x = a, *y = b;
  if (x->total != y->total) return x->total < y->total ? 1 : -1;
  if (x->self != y->self) return x->self < y->self ? 1 : -1;
  int c = strcmp(x->name, y->name);
  return c ? c : strcmp(x->file ? x->file : "", y->file ? y->file : "");
}

int tg_prof_function_shares(const tg_prof_host_t *h, tg_prof_func_share_t **out,
                            size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  /* Functions by name: an unnamed frame's "[unknown]" is one name per
   * mapping, as its pprof function is (profile_pprof.c). A name's key is
   * its string index, the unknown ones' past the strings, pseudo ones'
   * past those. */
  size_t n_keys = h->n_strings + h->n_mappings + 1 + TG_PROF_STACK_KINDS;
  acc_t *a = calloc(n_keys, sizeof(*a));
  if (!a) return -ENOMEM;
  for (size_t i = 0; i < h->n_stacks; i++) {
    const tg_prof_stack_t *s = &h->stacks[i];
    if (!s->samples) continue;
    if (s->kind != TG_PROF_STACK_FRAMES || !s->n) {
      acc_t *x = &a[h->n_strings + h->n_mappings + 1 +
                    (s->kind < TG_PROF_STACK_KINDS ? s->kind : 0)];
      x->name = tg_prof_stack_kind_name(s->kind);
      x->self += s->samples;
      x->total += s->samples;
      x->self_ns += s->cpu_ns;
      x->total_ns += s->cpu_ns;
      continue;
    }
    for (uint32_t j = 0; j < s->n; j++) {
      const tg_prof_frame_t *f = &h->frames[h->stack_frames[s->first + j]];
      size_t key;
      if (f->function) key = f->function;
      else if (f->n_lines && h->lines[f->first_line].function)
        key = h->lines[f->first_line].function;
      else key = h->n_strings + f->mapping;
      acc_t *x = &a[key];
      x->name = tg_prof_frame_name(h, f);
      if (key >= h->n_strings && f->mapping)
        x->file = h->strings[h->mappings[f->mapping - 1].path];
      if (x->last_stack != i + 1) {
        x->last_stack = i + 1;
        x->total += s->samples;
        x->total_ns += s->cpu_ns;
      }
      if (j + 1 == s->n) {
        x->self += s->samples;
        x->self_ns += s->cpu_ns;
      }
    }
  }
  size_t n = 0;
  for (size_t k = 0; k < n_keys; k++) n += a[k].total != 0;
  tg_prof_func_share_t *v = calloc(n ? n : 1, sizeof(*v));
  if (!v) {
    free(a);
    return -ENOMEM;
  }
  n = 0;
  for (size_t k = 0; k < n_keys; k++)
    if (a[k].total)
      v[n++] = (tg_prof_func_share_t){.name = a[k].name,
                                      .file = a[k].file,
                                      .self = a[k].self,
                                      .total = a[k].total,
                                      .self_ns = a[k].self_ns,
                                      .total_ns = a[k].total_ns,
                                      .pseudo = k >= h->n_strings};
  free(a);
  qsort(v, n, sizeof(*v), cmp_share);
  *out = v;
  *n_out = n;
  return 0;
}
