/* SPDX-License-Identifier: Apache-2.0 */
/* A profile's hosts as pprof's profile.proto, gzipped (profile.h;
 * docs/profiles.md). Built as protobuf-c messages and packed once; every
 * id is given in the order the hosts, their stacks and the stacks' frames
 * come, so the same profile gives the same bytes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "consumer/profile/profile_internal.h"
#include "pb/pprof/profile.pb-c.h"
#include "tracegate/error.h"

typedef Perftools__Profiles__Profile pb_profile_t;
typedef Perftools__Profiles__Sample pb_sample_t;
typedef Perftools__Profiles__Location pb_location_t;
typedef Perftools__Profiles__Line pb_line_t;
typedef Perftools__Profiles__Function pb_function_t;
typedef Perftools__Profiles__Mapping pb_mapping_t;
typedef Perftools__Profiles__Label pb_label_t;
typedef Perftools__Profiles__ValueType pb_value_type_t;

/* A growable array of |size|-byte items. */
typedef struct vec {
  void *v;
  size_t n, cap, size;
} vec_t;

static void *vec_push(vec_t *a) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 64;
    void *g = realloc(a->v, cap * a->size);
    if (!g) return NULL;
    a->v = g;
    a->cap = cap;
  }
  void *at = (char *)a->v + a->n++ * a->size;
  memset(at, 0, a->size);
  return at;
}

typedef struct builder {
  tg__prof_itab_t strs;  /* the string table (NUL-terminated keys) */
  tg__prof_itab_t funcs; /* (name, system name, file) string ids -> index */
  vec_t functions;       /* pb_function_t */
  vec_t mappings;        /* pb_mapping_t */
  vec_t locations;       /* pb_location_t */
  vec_t lines;           /* pb_line_t, each location's own run */
  vec_t line_counts;     /* size_t per location: its lines */
  vec_t samples;         /* pb_sample_t */
  vec_t sample_locs;     /* uint64_t: every sample's ids, one run each */
  vec_t sample_vals;     /* int64_t: two per sample */
  vec_t labels;          /* pb_label_t, one per sample when labelled */
  vec_t comments;        /* int64_t */
  uint64_t pseudo_loc[TG_PROF_STACK_KINDS];
} builder_t;

static int str_id(builder_t *b, const char *s, int64_t *id) {
  uint32_t i;
  int added;
  int rv = tg__prof_itab_add(&b->strs, s, strlen(s) + 1, &i, &added);
  *id = i;
  return rv;
}

static int func_id(builder_t *b, const char *name, const char *file,
                   uint64_t *id) {
  int64_t k[2];
  int rv = str_id(b, name, &k[0]);
  if (!rv) rv = str_id(b, file, &k[1]);
  uint32_t i;
  int added = 0;
  if (!rv) rv = tg__prof_itab_add(&b->funcs, k, sizeof(k), &i, &added);
  if (rv) return rv;
  *id = (uint64_t)i + 1;
  if (!added) return 0;
  pb_function_t *f = vec_push(&b->functions);
  if (!f) return -ENOMEM;
  perftools__profiles__function__init(f);
  f->id = *id;
  f->name = k[0];
  f->system_name = k[0];
  f->filename = k[1];
  return 0;
}

/* A location of one line: a pseudo-stack's, or a frame's that has no
 * symbols. */
static int push_location(builder_t *b, uint64_t mapping, uint64_t address,
                         size_t n_lines, uint64_t *id) {
  pb_location_t *l = vec_push(&b->locations);
  size_t *c = vec_push(&b->line_counts);
  if (!l || !c) return -ENOMEM;
  perftools__profiles__location__init(l);
  l->id = b->locations.n;
  l->mapping_id = mapping;
  l->address = address;
  *c = n_lines;
  *id = l->id;
  return 0;
}

static int push_line(builder_t *b, uint64_t function, int64_t line) {
  pb_line_t *l = vec_push(&b->lines);
  if (!l) return -ENOMEM;
  perftools__profiles__line__init(l);
  l->function_id = function;
  l->line = line;
  return 0;
}

typedef struct host_ids {
  uint64_t *mapping; /* per host mapping: pprof id; 0: not yet */
  uint64_t *location; /* per host frame */
} host_ids_t;

static int mapping_id(builder_t *b, const tg_prof_host_t *h, host_ids_t *ids,
                      uint32_t m1, uint64_t *id) {
  *id = 0;
  if (!m1) return 0;
  if (ids->mapping[m1 - 1]) {
    *id = ids->mapping[m1 - 1];
    return 0;
  }
  const tg_prof_mapping_t *m = &h->mappings[m1 - 1];
  pb_mapping_t *pm = vec_push(&b->mappings);
  if (!pm) return -ENOMEM;
  perftools__profiles__mapping__init(pm);
  pm->id = b->mappings.n;
  pm->memory_start = m->start;
  pm->memory_limit = m->limit;
  pm->file_offset = m->offset;
  int rv = str_id(b, h->strings[m->path], &pm->filename);
  if (!rv) rv = str_id(b, h->strings[m->build_id], &pm->build_id);
  /* Everything known of its functions is here: pprof must not look for
   * the binary on the reader's machine to name them. */
  pm->has_functions = true;
  *id = ids->mapping[m1 - 1] = pm->id;
  return rv;
}

static int frame_location(builder_t *b, const tg_prof_host_t *h,
                          host_ids_t *ids, uint32_t fi, uint64_t *id) {
  if (ids->location[fi]) {
    *id = ids->location[fi];
    return 0;
  }
  const tg_prof_frame_t *f = &h->frames[fi];
  uint64_t mid;
  int rv = mapping_id(b, h, ids, f->mapping, &mid);
  if (rv) return rv;
  const tg_prof_mapping_t *m = f->mapping ? &h->mappings[f->mapping - 1] : NULL;
  /* The address in the mapping's range, as pprof reads addresses. */
  uint64_t addr = f->rel_pc;
  if (m && f->rel_pc < m->limit - m->start) addr = m->start + f->rel_pc;
  if (f->n_lines) {
    for (uint32_t i = 0; i < f->n_lines; i++) {
      const tg_prof_line_t *l = &h->lines[f->first_line + i];
      const char *name = l->function ? h->strings[l->function]
                         : f->function ? h->strings[f->function]
                                       : "[unknown]";
      uint64_t fid;
      if ((rv = func_id(b, name, h->strings[l->file], &fid)) ||
          (rv = push_line(b, fid, l->line)))
        return rv;
    }
    if (b->mappings.n && mid)
      ((pb_mapping_t *)b->mappings.v)[mid - 1].has_filenames = true,
          ((pb_mapping_t *)b->mappings.v)[mid - 1].has_line_numbers = true;
    rv = push_location(b, mid, addr, f->n_lines, id);
  } else {
    /* Unnamed: "[unknown]" in its mapping's file, one function per
     * mapping, never merged with a named neighbour. */
    const char *name = f->function ? h->strings[f->function] : "[unknown]";
    const char *file = !f->function && m ? h->strings[m->path] : "";
    uint64_t fid;
    if ((rv = func_id(b, name, file, &fid)) || (rv = push_line(b, fid, 0)))
      return rv;
    rv = push_location(b, mid, addr, 1, id);
  }
  if (!rv) ids->location[fi] = *id;
  return rv;
}

static int pseudo_location(builder_t *b, uint32_t kind, uint64_t *id) {
  if (kind >= TG_PROF_STACK_KINDS) kind = 0;
  if (b->pseudo_loc[kind]) {
    *id = b->pseudo_loc[kind];
    return 0;
  }
  uint64_t fid;
  int rv = func_id(b, tg_prof_stack_kind_name(kind), "", &fid);
  if (!rv) rv = push_line(b, fid, 0);
  if (!rv) rv = push_location(b, 0, 0, 1, id);
  if (!rv) b->pseudo_loc[kind] = *id;
  return rv;
}

static int comment(builder_t *b, const char *text) {
  int64_t *c = vec_push(&b->comments);
  return c ? str_id(b, text, c) : -ENOMEM;
}

static int host_comment(builder_t *b, const tg_prof_host_t *h) {
  char t[512];
  const tg_prof_counts_t *c = &h->counts;
  snprintf(t, sizeof(t),
           "host %s (machine %" PRIu32 "): %" PRIu64 " samples, %" PRIu64
           " cpu ns; no callstack %" PRIu64 ", callstack not interned %" PRIu64
           ", over bounds %" PRIu64 ", with unnamed frames %" PRIu64
           ", truncated %" PRIu64 ", skipped %" PRIu64 "+%" PRIu64 "+%" PRIu64
           "+%" PRIu64 "+%" PRIu64 ", records lost %" PRIu64
           "; ns per sample %" PRIu64 "-%" PRIu64,
           h->name[0] ? h->name : "-", h->machine_id, c->samples, h->cpu_ns,
           c->no_callstack, c->callstack_unknown, c->over_bounds,
           c->unnamed_frames, c->truncated, c->skipped[0], c->skipped[1],
           c->skipped[2], c->skipped[3], c->skipped[4], c->records_lost,
           h->ns_per_sample_min, h->ns_per_sample_max);
  return comment(b, t);
}

static int add_host(builder_t *b, const tg_prof_host_t *h, bool label) {
  host_ids_t ids;
  ids.mapping = calloc(h->n_mappings + 1, sizeof(*ids.mapping));
  ids.location = calloc(h->n_frames + 1, sizeof(*ids.location));
  int rv = ids.mapping && ids.location ? 0 : -ENOMEM;
  int64_t key = 0, val = 0;
  char mname[32];
  snprintf(mname, sizeof(mname), "machine %" PRIu32, h->machine_id);
  if (!rv && label) rv = str_id(b, "host", &key);
  if (!rv && label) rv = str_id(b, h->name[0] ? h->name : mname, &val);
  if (!rv) rv = host_comment(b, h);
  for (size_t i = 0; i < h->n_stacks && !rv; i++) {
    const tg_prof_stack_t *s = &h->stacks[i];
    if (!s->samples) continue;
    pb_sample_t *ps = vec_push(&b->samples);
    if (!ps) {
      rv = -ENOMEM;
      break;
    }
    perftools__profiles__sample__init(ps);
    /* The arrays are pointed at once everything is pushed (they move). */
    ps->n_location_id = s->kind == TG_PROF_STACK_FRAMES && s->n ? s->n : 1;
    if (s->kind != TG_PROF_STACK_FRAMES || !s->n) {
      uint64_t *l = vec_push(&b->sample_locs);
      rv = l ? pseudo_location(b, s->kind, l) : -ENOMEM;
    }
    /* Leaf first, as pprof lists a sample's locations. */
    for (uint32_t j = s->n; j-- > 0 && !rv && s->kind == TG_PROF_STACK_FRAMES;) {
      uint64_t *l = vec_push(&b->sample_locs);
      rv = l ? frame_location(b, h, &ids, h->stack_frames[s->first + j], l)
             : -ENOMEM;
    }
    int64_t *v = rv ? NULL : vec_push(&b->sample_vals);
    int64_t *v2 = v ? vec_push(&b->sample_vals) : NULL;
    if (!rv && !v2) rv = -ENOMEM;
    if (!rv) {
      *v = s->samples > INT64_MAX ? INT64_MAX : (int64_t)s->samples;
      *v2 = s->cpu_ns > INT64_MAX ? INT64_MAX : (int64_t)s->cpu_ns;
    }
    if (!rv && label) {
      pb_label_t *lb = vec_push(&b->labels);
      if (!lb) {
        rv = -ENOMEM;
        break;
      }
      perftools__profiles__label__init(lb);
      lb->key = key;
      lb->str = val;
    }
  }
  free(ids.mapping);
  free(ids.location);
  return rv;
}

int tg__prof_gzip_append(const uint8_t *p, size_t n, tg_buf_t *out) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  /* windowBits 15 + 16: a gzip wrapper, its header without a name or
   * time, so the bytes depend on the profile alone. */
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return -ENOMEM;
  uLong bound = deflateBound(&z, (uLong)n);
  uint8_t *dst = tg_buf_reserve(out, bound);
  if (!dst) {
    deflateEnd(&z);
    return -ENOMEM;
  }
  z.next_in = (Bytef *)p;
  z.avail_in = (uInt)n;
  z.next_out = dst;
  z.avail_out = (uInt)bound;
  int zr = deflate(&z, Z_FINISH);
  size_t got = bound - z.avail_out;
  deflateEnd(&z);
  if (zr != Z_STREAM_END) return TG_EPROTO_ENCODE;
  tg_buf_commit(out, got);
  return 0;
}

int tg_prof_pprof(const tg_prof_t *p, const tg_prof_pprof_opts_t *o,
                  tg_buf_t *out) {
  builder_t b;
  memset(&b, 0, sizeof(b));
  /* Bounded by the hosts' own tables, which their limits bound. */
  tg__prof_itab_init(&b.strs, p->seed, SIZE_MAX, SIZE_MAX);
  tg__prof_itab_init(&b.funcs, p->seed, SIZE_MAX, SIZE_MAX);
  b.functions.size = sizeof(pb_function_t);
  b.mappings.size = sizeof(pb_mapping_t);
  b.locations.size = sizeof(pb_location_t);
  b.lines.size = sizeof(pb_line_t);
  b.line_counts.size = sizeof(size_t);
  b.samples.size = sizeof(pb_sample_t);
  b.sample_locs.size = sizeof(uint64_t);
  b.sample_vals.size = sizeof(int64_t);
  b.labels.size = sizeof(pb_label_t);
  b.comments.size = sizeof(int64_t);
  pb_value_type_t types[2], period;
  pb_value_type_t *type_ptrs[2] = {&types[0], &types[1]};
  void **ptrs = NULL;
  uint8_t *packed = NULL;
  int64_t empty;
  int rv = str_id(&b, "", &empty);
  bool label = o->n_hosts > 1;
  uint64_t t0 = 0, t1 = 0, ns = 0;
  for (size_t i = 0; i < o->n_hosts && !rv; i++) {
    const tg_prof_host_t *h = tg_prof_host(p, o->hosts[i]);
    if (!h) {
      rv = -EINVAL;
      break;
    }
    rv = add_host(&b, h, label);
    if (h->counts.samples && (!t0 || h->ts_min < t0)) t0 = h->ts_min;
    if (h->ts_max > t1) t1 = h->ts_max;
    if (h->ns_per_sample_min && (!ns || h->ns_per_sample_min < ns))
      ns = h->ns_per_sample_min;
  }
  pb_profile_t prof;
  perftools__profiles__profile__init(&prof);
  for (int i = 0; i < 2 && !rv; i++) {
    perftools__profiles__value_type__init(&types[i]);
    rv = str_id(&b, i ? "cpu" : "samples", &types[i].type);
    if (!rv) rv = str_id(&b, i ? "nanoseconds" : "count", &types[i].unit);
  }
  perftools__profiles__value_type__init(&period);
  period.type = types[1].type;
  period.unit = types[1].unit;
  if (rv) goto out;
  /* Pointers last: the vectors no longer move. */
  size_t n_ptrs = b.samples.n + b.mappings.n + b.locations.n +
                  b.functions.n + b.labels.n + b.strs.n;
  ptrs = calloc(n_ptrs ? n_ptrs : 1, sizeof(*ptrs));
  if (!ptrs) {
    rv = -ENOMEM;
    goto out;
  }
  void **pp = ptrs;
  uint64_t *loc = b.sample_locs.v;
  int64_t *val = b.sample_vals.v;
  prof.sample = (pb_sample_t **)pp;
  prof.n_sample = b.samples.n;
  for (size_t i = 0; i < b.samples.n; i++) {
    pb_sample_t *s = &((pb_sample_t *)b.samples.v)[i];
    s->location_id = loc;
    loc += s->n_location_id;
    s->value = val;
    s->n_value = 2;
    val += 2;
    if (label) {
      s->n_label = 1;
      s->label = (pb_label_t **)ptrs + b.samples.n + b.mappings.n +
                 b.locations.n + b.functions.n + i;
      *s->label = &((pb_label_t *)b.labels.v)[i];
    }
    *pp++ = s;
  }
  prof.mapping = (pb_mapping_t **)pp;
  prof.n_mapping = b.mappings.n;
  for (size_t i = 0; i < b.mappings.n; i++)
    *pp++ = &((pb_mapping_t *)b.mappings.v)[i];
  prof.location = (pb_location_t **)pp;
  prof.n_location = b.locations.n;
  /* Line messages are pointed at from a second array of pointers. */
  pb_line_t **line_ptrs = calloc(b.lines.n ? b.lines.n : 1, sizeof(*line_ptrs));
  if (!line_ptrs) {
    rv = -ENOMEM;
    goto out;
  }
  size_t at = 0;
  for (size_t i = 0; i < b.locations.n; i++) {
    pb_location_t *l = &((pb_location_t *)b.locations.v)[i];
    l->n_line = ((size_t *)b.line_counts.v)[i];
    l->line = line_ptrs + at;
    for (size_t j = 0; j < l->n_line; j++, at++)
      line_ptrs[at] = &((pb_line_t *)b.lines.v)[at];
    *pp++ = l;
  }
  prof.function = (pb_function_t **)pp;
  prof.n_function = b.functions.n;
  for (size_t i = 0; i < b.functions.n; i++)
    *pp++ = &((pb_function_t *)b.functions.v)[i];
  if (label) pp += b.labels.n;
  prof.string_table = (char **)pp;
  prof.n_string_table = b.strs.n;
  for (size_t i = 0; i < b.strs.n; i++) {
    size_t len;
    *pp++ = (char *)tg__prof_itab_key(&b.strs, (uint32_t)i, &len);
  }
  prof.sample_type = type_ptrs;
  prof.n_sample_type = 2;
  prof.period_type = &period;
  prof.period = ns > INT64_MAX ? INT64_MAX : (int64_t)ns;
  prof.time_nanos = t0 > INT64_MAX ? INT64_MAX : (int64_t)t0;
  prof.duration_nanos = t1 > t0 && t1 - t0 <= INT64_MAX ? (int64_t)(t1 - t0) : 0;
  prof.comment = b.comments.v;
  prof.n_comment = b.comments.n;
  prof.default_sample_type = types[1].type;
  size_t len = perftools__profiles__profile__get_packed_size(&prof);
  packed = malloc(len ? len : 1);
  if (!packed) {
    rv = -ENOMEM;
  } else if (perftools__profiles__profile__pack(&prof, packed) != len) {
    rv = TG_EPROTO_ENCODE;
  } else {
    rv = tg__prof_gzip_append(packed, len, out);
  }
  free(line_ptrs);
out:
  free(packed);
  free(ptrs);
  tg__prof_itab_free(&b.strs);
  tg__prof_itab_free(&b.funcs);
  free(b.functions.v);
  free(b.mappings.v);
  free(b.locations.v);
  free(b.lines.v);
  free(b.line_counts.v);
  free(b.samples.v);
  free(b.sample_locs.v);
  free(b.sample_vals.v);
  free(b.labels.v);
  free(b.comments.v);
  return rv;
}
