/* SPDX-License-Identifier: Apache-2.0 */
/* The trace reader of a profile (profile.h): framing, packets, sequences
 * and their interned data, samples into their hosts' stacks. */
#include "consumer/profile/profile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumer/fleet/merge_names.h"
#include "consumer/packet_inflate.h"
#include "consumer/profile/profile_internal.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

/* TracePacket, InternedData, PerfSample and defaults field numbers
 * (Perfetto's perfetto_trace.proto; agent/perf/perf_emit.h writes them). */
enum {
  PKT_TIMESTAMP = 8,
  PKT_SEQ_ID = 10,
  PKT_INTERNED = 12,
  PKT_SEQ_FLAGS = 13,
  PKT_INCR_CLEARED = 41,
  PKT_SYSTEM_INFO = 45,
  PKT_COMPRESSED = 50,
  PKT_DEFAULTS = 59,
  PKT_TRACK_DESCRIPTOR = 60,
  PKT_MODULE_SYMBOLS = 61,
  PKT_PERF_SAMPLE = 66,
  PKT_MACHINE_ID = 98,
  SEQ_INCREMENTAL_STATE_CLEARED = 1,
  INT_FUNCTION_NAMES = 5,
  INT_FRAMES = 6,
  INT_CALLSTACKS = 7,
  INT_BUILD_IDS = 16,
  INT_MAPPING_PATHS = 17,
  INT_MAPPINGS = 19,
  DEF_PERF_SAMPLE_DEFAULTS = 12,
  PSD_TIMEBASE = 1,
  TB_PERIOD = 1,
  TB_FREQUENCY = 2,
  TB_COUNTER = 4,
  PS_PID = 2,
  PS_CALLSTACK_IID = 4,
  PS_KERNEL_RECORDS_LOST = 17,
  PS_SKIPPED_REASON = 18,
  PS_PRODUCER_EVENT = 19,
  SYSINFO_MACHINE_NAME = 17,
  TD_UUID = 1,
  TD_NAME = 2,
  TD_PARENT_UUID = 5,
  /* PerfEvents.Counter: the clocks whose period is in nanoseconds. */
  COUNTER_SW_CPU_CLOCK = 1,
  COUNTER_SW_TASK_CLOCK = 3,
};

#define MAX_PATH 4096
#define MAX_PATH_PARTS 256
#define MAX_STRING (64u << 10)

static const tg_prof_limits_t DEFAULTS = {
    .max_hosts = 4096,
    .max_seqs = 65536,
    .max_seq_entries = 1u << 20,
    .max_strings = 1u << 20,
    .max_string_bytes = 64u << 20,
    .max_mappings = 1u << 16,
    .max_frames = 1u << 20,
    .max_stacks = 1u << 20,
    .max_depth = 1024,
    .max_symbols = 1u << 20,
};

tg_prof_t *tg_prof_new(const tg_prof_limits_t *lim) {
  tg_prof_t *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->lim = DEFAULTS;
  if (lim) {
#define TAKE(f) \
  if (lim->f) p->lim.f = lim->f
    TAKE(max_hosts);
    TAKE(max_seqs);
    TAKE(max_seq_entries);
    TAKE(max_strings);
    TAKE(max_string_bytes);
    TAKE(max_mappings);
    TAKE(max_frames);
    TAKE(max_stacks);
    TAKE(max_depth);
    TAKE(max_symbols);
#undef TAKE
  }
  /* A u32 index + 1 must not overflow, nor a stack's key its arena. */
  if (p->lim.max_depth > 65536) p->lim.max_depth = 65536;
  p->seed = tg__prof_seed();
  tg_u64_map_init(&p->host_by_machine, p->lim.max_hosts);
  tg_u64_map_init(&p->seq_by_key, p->lim.max_seqs);
  tg_buf_init(&p->in, TG_PACKETS_INFLATE_MAX + 64);
  tg_buf_init(&p->inflate, TG_PACKETS_INFLATE_MAX);
  p->ring = malloc(p->lim.max_depth * sizeof(*p->ring));
  p->frames_scratch = malloc(p->lim.max_depth * sizeof(*p->frames_scratch));
  p->key_scratch = malloc((p->lim.max_depth + 1) * sizeof(*p->key_scratch));
  if (!p->ring || !p->frames_scratch || !p->key_scratch) {
    tg_prof_free(p);
    return NULL;
  }
  return p;
}

static void seq_maps(tg__prof_seq_t *q, void (*fn)(tg_u64_map_t *)) {
  fn(&q->fn);
  fn(&q->bid);
  fn(&q->path);
  fn(&q->map);
  fn(&q->frame);
  fn(&q->cs);
}

void tg_prof_free(tg_prof_t *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_hosts; i++) tg__prof_host_free(&p->hosts[i]);
  free(p->hosts);
  for (size_t i = 0; i < p->n_seqs; i++) seq_maps(&p->seqs[i], tg_u64_map_free);
  free(p->seqs);
  tg_u64_map_free(&p->host_by_machine);
  tg_u64_map_free(&p->seq_by_key);
  tg_buf_free(&p->in);
  tg_buf_free(&p->inflate);
  free(p->ring);
  free(p->frames_scratch);
  free(p->key_scratch);
  free(p);
}

/* --- hosts and sequences -------------------------------------------------- */

tg__prof_host_t *tg__prof_host_get(tg_prof_t *p, uint32_t machine, int *err) {
  uint32_t at = tg_u64_map_get(&p->host_by_machine, machine);
  if (at) return &p->hosts[at - 1];
  if (p->n_hosts >= p->lim.max_hosts) {
    *err = -ENOSPC;
    return NULL;
  }
  if (p->n_hosts == p->cap_hosts) {
    size_t cap = p->cap_hosts ? p->cap_hosts * 2 : 8;
    tg__prof_host_t *g = realloc(p->hosts, cap * sizeof(*g));
    if (!g) {
      *err = -ENOMEM;
      return NULL;
    }
    p->hosts = g;
    p->cap_hosts = cap;
  }
  tg__prof_host_t *h = &p->hosts[p->n_hosts];
  memset(h, 0, sizeof(*h));
  const tg_prof_limits_t *l = &p->lim;
  tg__prof_itab_init(&h->strs, p->seed, l->max_strings, l->max_string_bytes);
  /* Keys of a fixed size: the count bounds them. */
  tg__prof_itab_init(&h->maps, p->seed, l->max_mappings, SIZE_MAX);
  tg__prof_itab_init(&h->frames, p->seed, l->max_frames, SIZE_MAX);
  tg__prof_itab_init(&h->syms, p->seed, l->max_symbols, SIZE_MAX);
  /* A stack's key is 4 bytes a frame: 64 bytes a stack on average. The
   * pseudo-stacks (one per kind, a 4-byte key) always fit: max_stacks
   * bounds the callstacks alone. */
  tg__prof_itab_init(&h->stacks, p->seed, l->max_stacks + TG_PROF_STACK_KINDS,
                     l->max_stacks * 64 + TG_PROF_STACK_KINDS * 4);
  h->pub.machine_id = machine;
  uint32_t empty;
  int added;
  int rv = tg__prof_itab_add(&h->strs, "", 1, &empty, &added);
  if (!rv) rv = tg_u64_map_put(&p->host_by_machine, machine,
                               (uint32_t)p->n_hosts + 1);
  if (rv) {
    tg__prof_host_free(h);
    *err = rv;
    return NULL;
  }
  p->n_hosts++;
  return h;
}

static void seq_init(tg_prof_t *p, tg__prof_seq_t *q) {
  size_t n = p->lim.max_seq_entries;
  tg_u64_map_init(&q->fn, n);
  tg_u64_map_init(&q->bid, n);
  tg_u64_map_init(&q->path, n);
  tg_u64_map_init(&q->map, n);
  tg_u64_map_init(&q->frame, n);
  tg_u64_map_init(&q->cs, n);
  q->ns_per_sample = q->frequency_hz = 0;
}

static tg__prof_seq_t *seq_get(tg_prof_t *p, uint64_t key, uint32_t host,
                               int *err) {
  uint32_t at = tg_u64_map_get(&p->seq_by_key, key);
  if (at) return &p->seqs[at - 1];
  if (p->n_seqs >= p->lim.max_seqs) {
    *err = -ENOSPC;
    return NULL;
  }
  if (p->n_seqs == p->cap_seqs) {
    size_t cap = p->cap_seqs ? p->cap_seqs * 2 : 16;
    tg__prof_seq_t *g = realloc(p->seqs, cap * sizeof(*g));
    if (!g) {
      *err = -ENOMEM;
      return NULL;
    }
    p->seqs = g;
    p->cap_seqs = cap;
  }
  int rv = tg_u64_map_put(&p->seq_by_key, key, (uint32_t)p->n_seqs + 1);
  if (rv) {
    *err = rv;
    return NULL;
  }
  tg__prof_seq_t *q = &p->seqs[p->n_seqs++];
  memset(q, 0, sizeof(*q));
  q->key = key;
  q->host = host;
  seq_init(p, q);
  return q;
}

static void seq_clear(tg_prof_t *p, tg__prof_seq_t *q) {
  seq_maps(q, tg_u64_map_free);
  seq_init(p, q);
}

/* iid -> index through |m|; false when unknown. */
static bool lookup(const tg_u64_map_t *m, uint64_t iid, uint32_t *idx) {
  uint32_t v = tg_u64_map_get(m, iid);
  if (!v) return false;
  *idx = v - 1;
  return true;
}

/* Records iid -> idx; a full sequence table refuses (counted). */
static int remember(tg__prof_host_t *h, tg_u64_map_t *m, uint64_t iid,
                    uint32_t idx) {
  int rv = tg_u64_map_put(m, iid, idx + 1);
  if (rv == -ENOSPC) {
    h->pub.counts.refused_entries++;
    return 0;
  }
  return rv;
}

/* --- interned data ---------------------------------------------------------- */

/* An InternedString { iid = 1, str = 2 } into |m|. */
static int add_string(tg_prof_t *p, tg__prof_host_t *h, tg_u64_map_t *m,
                      const uint8_t *b, size_t n, bool build_id) {
  uint64_t iid = 0;
  const uint8_t *s = NULL;
  size_t len = 0;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 1 && f.type == TG_PB_WT_VARINT) iid = f.value;
    if (f.id == 2 && f.type == TG_PB_WT_LEN) {
      s = f.data;
      len = f.size;
    }
  }
  if (rv < 0) return TG_EPARSE;
  if (!s) s = (const uint8_t *)"";
  uint32_t idx;
  rv = build_id ? tg__prof_build_id(p, h, s, len, &idx)
                : tg__prof_str(p, h, s, len, &idx);
  if (rv == -ENOSPC) {
    h->pub.counts.refused_entries++;
    return 0;
  }
  return rv ? rv : remember(h, m, iid, idx);
}

/* Repeated varint field |f| (packed or not) into ids; false when broken. */
static bool varints(const tg_pb_field_t *f, uint64_t *ids, size_t *n,
                    size_t max, bool *cut) {
  if (f->type == TG_PB_WT_VARINT) {
    if (*n < max) ids[(*n)++] = f->value;
    else *cut = true;
    return true;
  }
  if (f->type != TG_PB_WT_LEN) return true;
  const uint8_t *q = f->data, *end = f->data + f->size;
  while (q < end) {
    uint64_t v;
    size_t k = tg_pb_read_varint(q, end, &v);
    if (!k) return false;
    q += k;
    if (*n < max) ids[(*n)++] = v;
    else *cut = true;
  }
  return true;
}

static int add_mapping(tg_prof_t *p, tg__prof_host_t *h, tg__prof_seq_t *q,
                       const uint8_t *b, size_t n) {
  uint64_t iid = 0, bid = 0, start = 0, end = 0, off = 0;
  uint64_t parts[MAX_PATH_PARTS];
  size_t n_parts = 0;
  bool cut = false;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 7) {
      if (!varints(&f, parts, &n_parts, MAX_PATH_PARTS, &cut)) return TG_EPARSE;
      continue;
    }
    if (f.type != TG_PB_WT_VARINT) continue;
    if (f.id == 1) iid = f.value;
    if (f.id == 2) bid = f.value;
    if (f.id == 3) off = f.value;
    if (f.id == 4) start = f.value;
    if (f.id == 5) end = f.value;
  }
  if (rv < 0) return TG_EPARSE;
  /* The path as trace processor names the mapping: "/" before each part. */
  char path[MAX_PATH];
  size_t plen = 0;
  for (size_t i = 0; i < n_parts; i++) {
    uint32_t si;
    if (!lookup(&q->path, parts[i], &si)) {
      h->pub.counts.bad_refs++;
      continue;
    }
    size_t len = h->strs.offs[si + 1] - h->strs.offs[si] - 1;
    if (plen + 1 + len > sizeof(path)) {
      cut = true;
      break;
    }
    path[plen++] = '/';
    memcpy(path + plen, h->strs.arena + h->strs.offs[si], len);
    plen += len;
  }
  if (cut) h->pub.counts.refused_entries++;
  tg_prof_mapping_t m = {.start = start, .limit = end, .offset = off};
  if (bid && !lookup(&q->bid, bid, &m.build_id)) {
    h->pub.counts.bad_refs++;
    m.build_id = 0;
  }
  rv = tg__prof_str(p, h, (const uint8_t *)path, plen, &m.path);
  uint32_t idx;
  int added = 0;
  if (!rv) rv = tg__prof_itab_add(&h->maps, &m, sizeof(m), &idx, &added);
  if (rv == -ENOSPC) {
    h->pub.counts.refused_entries++;
    return 0;
  }
  if (rv) return rv;
  if (added) {
    if (idx % 64 == 0) {
      tg_prof_mapping_t *g =
          realloc(h->mappings, (idx + 64) * sizeof(*g));
      if (!g) return -ENOMEM;
      h->mappings = g;
    }
    h->mappings[idx] = m;
    h->pub.n_mappings = idx + 1;
  }
  return remember(h, &q->map, iid, idx);
}

/* The key of a host's frame: every byte set (padding is hashed). */
typedef struct frame_key {
  uint32_t mapping, function;
  uint64_t rel_pc;
} frame_key_t;

static int add_frame(tg__prof_host_t *h, tg__prof_seq_t *q, const uint8_t *b,
                     size_t n) {
  uint64_t iid = 0, fn = 0, map = 0, pc = 0;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.type != TG_PB_WT_VARINT) continue;
    if (f.id == 1) iid = f.value;
    if (f.id == 2) fn = f.value;
    if (f.id == 3) map = f.value;
    if (f.id == 4) pc = f.value;
  }
  if (rv < 0) return TG_EPARSE;
  frame_key_t k;
  memset(&k, 0, sizeof(k));
  k.rel_pc = pc;
  uint32_t v;
  if (fn) {
    if (lookup(&q->fn, fn, &v)) k.function = v;
    else h->pub.counts.bad_refs++;
  }
  if (map) {
    if (lookup(&q->map, map, &v)) k.mapping = v + 1;
    else h->pub.counts.bad_refs++;
  }
  uint32_t idx;
  int added = 0;
  rv = tg__prof_itab_add(&h->frames, &k, sizeof(k), &idx, &added);
  if (rv == -ENOSPC) {
    h->pub.counts.refused_entries++;
    return 0;
  }
  if (rv) return rv;
  if (added) {
    if (idx % 256 == 0) {
      tg_prof_frame_t *g = realloc(h->frame_v, (idx + 256) * sizeof(*g));
      if (!g) return -ENOMEM;
      h->frame_v = g;
    }
    h->frame_v[idx] = (tg_prof_frame_t){k.mapping, k.function, k.rel_pc, 0, 0};
    h->pub.n_frames = idx + 1;
  }
  return remember(h, &q->frame, iid, idx);
}

/* The host's stack of |kind| and frames |ids| (root first), made if new. */
static int stack_get(tg_prof_t *p, tg__prof_host_t *h, uint32_t kind,
                     bool truncated, const uint32_t *ids, size_t n,
                     uint32_t *idx) {
  /* Callstacks with frames are bounded; a stack without frames is one of
   * the pseudo-stacks (the empty callstack is "[no callstack]"). */
  bool pseudo = n == 0;
  uint32_t *key = p->key_scratch;
  key[0] = kind | (truncated ? 0x100u : 0);
  if (n) memcpy(key + 1, ids, n * sizeof(*ids));
  if (!pseudo && h->n_callstacks >= p->lim.max_stacks &&
      tg__prof_itab_find(&h->stacks, key, (n + 1) * sizeof(*key), idx) != 0)
    return -ENOSPC;
  int added = 0;
  int rv = tg__prof_itab_add(&h->stacks, key, (n + 1) * sizeof(*key), idx,
                             &added);
  if (rv || !added) return rv;
  if (!pseudo) h->n_callstacks++;
  if (n > SIZE_MAX / 4 - h->n_stack_frames) return -ENOSPC;
  if (h->n_stack_frames + n > h->cap_stack_frames) {
    size_t cap = h->cap_stack_frames ? h->cap_stack_frames : 1024;
    while (cap < h->n_stack_frames + n) cap *= 2;
    uint32_t *g = realloc(h->stack_frames, cap * sizeof(*g));
    if (!g) return -ENOMEM;
    h->stack_frames = g;
    h->cap_stack_frames = cap;
  }
  if (*idx % 256 == 0) {
    tg_prof_stack_t *g = realloc(h->stack_v, (*idx + 256) * sizeof(*g));
    if (!g) return -ENOMEM;
    h->stack_v = g;
  }
  h->stack_v[*idx] = (tg_prof_stack_t){.first = (uint32_t)h->n_stack_frames,
                                       .n = (uint32_t)n,
                                       .kind = kind,
                                       .truncated = truncated};
  if (n) memcpy(h->stack_frames + h->n_stack_frames, ids, n * sizeof(*ids));
  h->n_stack_frames += n;
  h->pub.n_stacks = *idx + 1;
  return 0;
}

static int add_callstack(tg_prof_t *p, tg__prof_host_t *h, tg__prof_seq_t *q,
                         const uint8_t *b, size_t n) {
  uint32_t *frames = p->frames_scratch;
  size_t n_ids = 0, max = p->lim.max_depth;
  bool cut = false;
  uint64_t iid = 0;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  /* The leaf is the last frame: a stack past max_depth keeps its leaf
   * side, so the frames are read into a ring of max_depth. */
  uint64_t *ring = p->ring;
  size_t total = 0;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 1 && f.type == TG_PB_WT_VARINT) iid = f.value;
    if (f.id != 2) continue;
    if (f.type == TG_PB_WT_VARINT) {
      ring[total++ % max] = f.value;
    } else if (f.type == TG_PB_WT_LEN) {
      const uint8_t *c = f.data, *end = f.data + f.size;
      while (c < end) {
        uint64_t v;
        size_t k = tg_pb_read_varint(c, end, &v);
        if (!k) return TG_EPARSE;
        c += k;
        ring[total++ % max] = v;
      }
    }
  }
  if (rv < 0) return TG_EPARSE;
  cut = total > max;
  n_ids = cut ? max : total;
  size_t first = cut ? total % max : 0;
  bool bad = false;
  for (size_t i = 0; i < n_ids && !bad; i++) {
    if (!lookup(&q->frame, ring[(first + i) % max], &frames[i])) bad = true;
  }
  /* A frame it cannot name makes the callstack unknown: its samples go
   * to "[callstack not interned]", not to a shorter stack. */
  if (bad) {
    h->pub.counts.bad_refs++;
    return 0;
  }
  uint32_t idx;
  rv = stack_get(p, h, n_ids ? TG_PROF_STACK_FRAMES : TG_PROF_STACK_NO_CALLSTACK,
                 cut, frames, n_ids, &idx);
  if (rv == -ENOSPC) {
    h->pub.counts.refused_entries++;
    return 0;
  }
  return rv ? rv : remember(h, &q->cs, iid, idx);
}

/* InternedData in four walks (strings, mappings, frames, callstacks), so
 * that the order of the fields within one message does not matter. */
static int interned(tg_prof_t *p, tg__prof_host_t *h, tg__prof_seq_t *q,
                    const uint8_t *b, size_t n) {
  for (int walk = 0; walk < 4; walk++) {
    tg_pb_reader_t r;
    tg_pb_field_t f;
    int rv;
    tg_pb_reader_init(&r, b, n);
    while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
      if (f.type != TG_PB_WT_LEN) continue;
      int err = 0;
      if (walk == 0 && f.id == INT_FUNCTION_NAMES)
        err = add_string(p, h, &q->fn, f.data, f.size, false);
      else if (walk == 0 && f.id == INT_BUILD_IDS)
        err = add_string(p, h, &q->bid, f.data, f.size, true);
      else if (walk == 0 && f.id == INT_MAPPING_PATHS)
        err = add_string(p, h, &q->path, f.data, f.size, false);
      else if (walk == 1 && f.id == INT_MAPPINGS)
        err = add_mapping(p, h, q, f.data, f.size);
      else if (walk == 2 && f.id == INT_FRAMES)
        err = add_frame(h, q, f.data, f.size);
      else if (walk == 3 && f.id == INT_CALLSTACKS)
        err = add_callstack(p, h, q, f.data, f.size);
      if (err) return err;
    }
    if (rv < 0) return TG_EPARSE;
  }
  return 0;
}

/* TracePacketDefaults.perf_sample_defaults.timebase: the CPU time one
 * sample stands for. A frequency is per CPU: 1e9 / f ns. A period is
 * nanoseconds only for the CPU and task clocks; another counter's sample
 * stands for no known CPU time (0). */
static int defaults(tg__prof_seq_t *q, const uint8_t *b, size_t n) {
  tg_pb_reader_t r, r2, r3;
  tg_pb_field_t f, g, t;
  int rv;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id != DEF_PERF_SAMPLE_DEFAULTS || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_init(&r2, f.data, f.size);
    while ((rv = tg_pb_reader_next(&r2, &g)) == 1) {
      if (g.id != PSD_TIMEBASE || g.type != TG_PB_WT_LEN) continue;
      uint64_t freq = 0, period = 0, counter = COUNTER_SW_CPU_CLOCK;
      bool other_event = false;
      tg_pb_reader_init(&r3, g.data, g.size);
      while ((rv = tg_pb_reader_next(&r3, &t)) == 1) {
        if (t.id == TB_FREQUENCY && t.type == TG_PB_WT_VARINT) freq = t.value;
        if (t.id == TB_PERIOD && t.type == TG_PB_WT_VARINT) period = t.value;
        if (t.id == TB_COUNTER && t.type == TG_PB_WT_VARINT) counter = t.value;
        if (t.id == 3 || t.id == 5) other_event = true; /* tracepoint, raw */
      }
      if (rv < 0) return TG_EPARSE;
      bool clock = !other_event && (counter == COUNTER_SW_CPU_CLOCK ||
                                    counter == COUNTER_SW_TASK_CLOCK);
      q->frequency_hz = freq;
      q->ns_per_sample = !clock  ? 0
                         : freq  ? 1000000000ull / freq
                                 : period;
    }
    if (rv < 0) return TG_EPARSE;
  }
  return rv < 0 ? TG_EPARSE : 0;
}

/* --- samples ----------------------------------------------------------------- */

static int count_in(tg_prof_t *p, tg__prof_host_t *h, uint32_t stack,
                    const tg__prof_seq_t *q, uint64_t ts) {
  tg_prof_stack_t *s = &h->stack_v[stack];
  uint64_t ns = q ? q->ns_per_sample : 0;
  (void)p;
  s->samples++;
  s->cpu_ns += ns;
  tg_prof_host_t *pub = &h->pub;
  pub->counts.samples++;
  pub->cpu_ns += ns;
  if (!pub->ts_min || ts < pub->ts_min) pub->ts_min = ts;
  if (ts > pub->ts_max) pub->ts_max = ts;
  if (ns && (!pub->ns_per_sample_min || ns < pub->ns_per_sample_min))
    pub->ns_per_sample_min = ns;
  if (ns > pub->ns_per_sample_max) pub->ns_per_sample_max = ns;
  uint64_t hz = q ? q->frequency_hz : 0;
  if (hz && (!pub->frequency_hz_min || hz < pub->frequency_hz_min))
    pub->frequency_hz_min = hz;
  if (hz > pub->frequency_hz_max) pub->frequency_hz_max = hz;
  return 0;
}

/* A sample that goes into a pseudo-stack of |kind|. */
static int count_pseudo(tg_prof_t *p, tg__prof_host_t *h, uint32_t kind,
                        const tg__prof_seq_t *q, uint64_t ts) {
  uint32_t idx;
  int rv = stack_get(p, h, kind, false, NULL, 0, &idx);
  if (rv == -ENOSPC && kind != TG_PROF_STACK_OVER_BOUNDS) {
    h->pub.counts.over_bounds++;
    return count_pseudo(p, h, TG_PROF_STACK_OVER_BOUNDS, q, ts);
  }
  /* Not even the over-bounds stack fits: no stack to put it in, but the
   * host's counts still say it was there. */
  if (rv == -ENOSPC) return 0;
  return rv ? rv : count_in(p, h, idx, q, ts);
}

static int perf_sample(tg_prof_t *p, tg__prof_host_t *h, tg__prof_seq_t *q,
                       const uint8_t *b, size_t n, uint64_t ts) {
  uint64_t cs = 0, lost = 0, skipped = 0;
  bool has_pid = false, has_cs = false, has_skip = false, event = false;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == PS_PRODUCER_EVENT) event = true;
    if (f.type != TG_PB_WT_VARINT) continue;
    if (f.id == PS_PID) has_pid = true;
    if (f.id == PS_CALLSTACK_IID) {
      cs = f.value;
      has_cs = true;
    }
    if (f.id == PS_KERNEL_RECORDS_LOST) lost = f.value;
    if (f.id == PS_SKIPPED_REASON) {
      skipped = f.value;
      has_skip = true;
    }
  }
  if (rv < 0) return TG_EPARSE;
  tg_prof_counts_t *c = &h->pub.counts;
  if (lost) {
    c->records_lost += lost;
    return 0;
  }
  if (event) return 0;
  if (has_skip) {
    c->skipped[skipped < 5 ? skipped : 0]++;
    /* Kept: CPU time the host spent, in a process outside the session's
     * scope or whose stack was lost. */
    uint32_t kind = skipped >= 1 && skipped <= 4
                        ? TG_PROF_STACK_SKIPPED_READ + (uint32_t)skipped - 1
                        : TG_PROF_STACK_SKIPPED_OTHER;
    return count_pseudo(p, h, kind, q, ts);
  }
  /* A polled counter reading: no process, no stack, not a sample. */
  if (!has_pid && !has_cs) return 0;
  if (!has_cs || cs == 0) {
    c->no_callstack++;
    return count_pseudo(p, h, TG_PROF_STACK_NO_CALLSTACK, q, ts);
  }
  uint32_t idx;
  if (!q || !lookup(&q->cs, cs, &idx)) {
    c->callstack_unknown++;
    return count_pseudo(p, h, TG_PROF_STACK_NOT_INTERNED, q, ts);
  }
  if (h->stack_v[idx].kind == TG_PROF_STACK_NO_CALLSTACK) c->no_callstack++;
  return count_in(p, h, idx, q, ts);
}

/* --- host names ---------------------------------------------------------------- */

static int set_name(tg__prof_host_t *h, const uint8_t *s, size_t n,
                    bool by_track) {
  if (h->named_by_track && !by_track) return 0;
  if (n > 320) n = 320; /* the collector's bound on a host's name */
  char *c = malloc(n + 1);
  if (!c) return -ENOMEM;
  for (size_t i = 0; i < n; i++) c[i] = s[i] ? (char)s[i] : '?';
  c[n] = 0;
  free(h->name);
  h->name = c;
  h->named_by_track = by_track;
  return 0;
}

static int name_from(tg_prof_t *p, uint32_t machine, uint32_t pkt_field,
                     const uint8_t *b, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  const uint8_t *name = NULL;
  size_t len = 0;
  uint64_t uuid = 0;
  bool parent = false;
  tg_pb_reader_init(&r, b, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (pkt_field == PKT_SYSTEM_INFO && f.id == SYSINFO_MACHINE_NAME &&
        f.type == TG_PB_WT_LEN) {
      name = f.data;
      len = f.size;
    }
    if (pkt_field == PKT_TRACK_DESCRIPTOR) {
      if (f.id == TD_UUID && f.type == TG_PB_WT_VARINT) uuid = f.value;
      if (f.id == TD_PARENT_UUID) parent = true;
      if (f.id == TD_NAME && f.type == TG_PB_WT_LEN) {
        name = f.data;
        len = f.size;
      }
    }
  }
  if (rv < 0) return TG_EPARSE;
  bool track = pkt_field == PKT_TRACK_DESCRIPTOR;
  /* Only the merge's own name track names a host: machine 0 has none,
   * and the merge leaves out a host's descriptor of that uuid. */
  if (track && (machine == 0 || parent ||
                uuid != TG_MERGE_NAME_UUID(machine, 0)))
    return 0;
  if (!name || !len) return 0;
  int err = 0;
  tg__prof_host_t *h = tg__prof_host_get(p, machine, &err);
  if (!h) return err == -ENOSPC ? 0 : err;
  return set_name(h, name, len, track);
}

/* --- packets ------------------------------------------------------------------- */

typedef struct inner {
  tg_prof_t *p;
  uint32_t machine;
} inner_t;

static int packet(tg_prof_t *p, const uint8_t *pkt, size_t len,
                  uint32_t outer_machine, int depth);

static int on_inner(void *ctx, const uint8_t *pkt, size_t len) {
  inner_t *c = ctx;
  return packet(c->p, pkt, len, c->machine, 1);
}

typedef struct fields {
  uint64_t ts, seq, flags, machine;
  bool cleared;
  tg_pb_field_t interned, defaults, sample, z, symbols, sysinfo, track;
} fields_t;

static int read_fields(const uint8_t *pkt, size_t len, fields_t *x) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, pkt, len);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.type == TG_PB_WT_VARINT) {
      switch (f.id) {
        case PKT_TIMESTAMP: x->ts = f.value; break;
        case PKT_SEQ_ID: x->seq = f.value; break;
        case PKT_SEQ_FLAGS: x->flags = f.value; break;
        case PKT_INCR_CLEARED: x->cleared = tg_pb_reader_bool(&r); break;
        case PKT_MACHINE_ID: x->machine = f.value; break;
        default: break;
      }
      continue;
    }
    if (f.type != TG_PB_WT_LEN) continue;
    switch (f.id) {
      case PKT_INTERNED: x->interned = f; break;
      case PKT_DEFAULTS: x->defaults = f; break;
      case PKT_PERF_SAMPLE: x->sample = f; break;
      case PKT_COMPRESSED: x->z = f; break;
      case PKT_MODULE_SYMBOLS: x->symbols = f; break;
      case PKT_SYSTEM_INFO: x->sysinfo = f; break;
      case PKT_TRACK_DESCRIPTOR: x->track = f; break;
      default: break;
    }
  }
  return rv < 0 ? TG_EPARSE : 0;
}

/* Whether |d| (TracePacketDefaults) holds perf_sample_defaults. */
static bool has_perf_defaults(const tg_pb_field_t *d) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, d->data, d->size);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == DEF_PERF_SAMPLE_DEFAULTS) return true;
  return false;
}

/* Whether |i| (InternedData) holds a profiling table. */
static bool has_profiling(const tg_pb_field_t *i) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, i->data, i->size);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == INT_FUNCTION_NAMES || f.id == INT_FRAMES ||
        f.id == INT_CALLSTACKS || f.id == INT_BUILD_IDS ||
        f.id == INT_MAPPING_PATHS || f.id == INT_MAPPINGS)
      return true;
  return false;
}

static int packet_body(tg_prof_t *p, const uint8_t *pkt, size_t len,
                       uint32_t outer_machine, int depth) {
  fields_t x;
  memset(&x, 0, sizeof(x));
  x.machine = outer_machine;
  int rv = read_fields(pkt, len, &x);
  if (rv) return rv;
  if (x.machine > UINT32_MAX) return TG_EPARSE;
  uint32_t machine = (uint32_t)x.machine;
  if (x.z.data && depth == 0) {
    rv = tg_packets_inflate(x.z.data, x.z.size, &p->inflate);
    if (rv) return rv == -ENOMEM ? rv : TG_EPARSE;
    inner_t c = {p, machine};
    /* The inflated bytes live in p->inflate until the next wrapper, which
     * cannot come from inside (depth 1 does not inflate). */
    return tg_packets_each(tg_buf_begin(&p->inflate), tg_buf_size(&p->inflate),
                           on_inner, &c);
  }
  if (x.sysinfo.data &&
      (rv = name_from(p, machine, PKT_SYSTEM_INFO, x.sysinfo.data,
                      x.sysinfo.size)))
    return rv;
  if (x.track.data &&
      (rv = name_from(p, machine, PKT_TRACK_DESCRIPTOR, x.track.data,
                      x.track.size)))
    return rv;
  int err = 0;
  if (x.symbols.data) {
    tg__prof_host_t *h = tg__prof_host_get(p, machine, &err);
    if (!h) return err == -ENOSPC ? 0 : err;
    return tg__prof_module_symbols(p, h, x.symbols.data, x.symbols.size);
  }
  uint64_t key = x.machine << 32 | (x.seq & 0xFFFFFFFFu);
  bool cleared = (x.flags & SEQ_INCREMENTAL_STATE_CLEARED) || x.cleared;
  bool wants = x.sample.data || (x.defaults.data && has_perf_defaults(&x.defaults)) ||
               (x.interned.data && has_profiling(&x.interned));
  uint32_t known = tg_u64_map_get(&p->seq_by_key, key);
  if (!wants && !(cleared && known)) return 0;
  tg__prof_host_t *h = tg__prof_host_get(p, machine, &err);
  if (!h) return err == -ENOSPC ? 0 : err;
  tg__prof_seq_t *q = seq_get(p, key, (uint32_t)(h - p->hosts), &err);
  if (!q && err != -ENOSPC) return err;
  if (q && cleared) seq_clear(p, q);
  if (q && x.defaults.data && (rv = defaults(q, x.defaults.data, x.defaults.size)))
    return rv;
  if (q && x.interned.data &&
      (rv = interned(p, h, q, x.interned.data, x.interned.size)))
    return rv;
  if (x.sample.data) {
    /* A sequence past max_seqs: its samples still count, unnamed. */
    if (!q) {
      tg_prof_counts_t *c = &h->pub.counts;
      c->over_bounds++;
      return count_pseudo(p, h, TG_PROF_STACK_OVER_BOUNDS, NULL, x.ts);
    }
    return perf_sample(p, h, q, x.sample.data, x.sample.size, x.ts);
  }
  return 0;
}

static int packet(tg_prof_t *p, const uint8_t *pkt, size_t len,
                  uint32_t outer_machine, int depth) {
  p->packets++;
  int rv = packet_body(p, pkt, len, outer_machine, depth);
  /* A packet that does not parse is skipped, as trace processor skips
   * it; running out of memory is the caller's to know. */
  if (rv == TG_EPARSE || rv == TG_EBAD_COMPRESSED || rv == -ENOBUFS) {
    p->bad_packets++;
    return 0;
  }
  return rv;
}

int tg_prof_packet(tg_prof_t *p, const uint8_t *pkt, size_t len) {
  if (p->ended) return -EINVAL;
  return packet(p, pkt, len, 0, 0);
}

/* --- framing -------------------------------------------------------------------- */

/* Hands out |p->in|'s whole packets; what remains is a packet's start. */
static int walk(tg_prof_t *p) {
  for (;;) {
    const uint8_t *b = tg_buf_begin(&p->in), *end = b + tg_buf_size(&p->in);
    if (b == end) return 0;
    uint64_t tag, len;
    size_t k = tg_pb_read_varint(b, end, &tag);
    if (!k) return end - b >= 10 ? TG_EPARSE : 0;
    size_t k2 = 0;
    switch (tag & 7) {
      case TG_PB_WT_LEN:
        k2 = tg_pb_read_varint(b + k, end, &len);
        if (!k2) return end - b - (ptrdiff_t)k >= 10 ? TG_EPARSE : 0;
        if (len > TG_PACKETS_INFLATE_MAX) return TG_EPARSE;
        break;
      case TG_PB_WT_VARINT: {
        /* Trace has no varint field we read: skipped, as unknown. */
        uint64_t v;
        k2 = tg_pb_read_varint(b + k, end, &v);
        if (!k2) return end - b - (ptrdiff_t)k >= 10 ? TG_EPARSE : 0;
        len = 0;
        break;
      }
      default:
        return TG_EPARSE;
    }
    if ((uint64_t)(end - b - (ptrdiff_t)(k + k2)) < len) return 0;
    if ((tag & 7) == TG_PB_WT_LEN && tag >> 3 == 1) {
      int rv = packet(p, b + k + k2, (size_t)len, 0, 0);
      if (rv) return rv;
    }
    tg_buf_consume(&p->in, k + k2 + (size_t)len);
  }
}

int tg_prof_feed(tg_prof_t *p, const uint8_t *b, size_t n) {
  if (p->ended) return -EINVAL;
  while (n) {
    size_t chunk = n < (1u << 20) ? n : (1u << 20);
    if (tg_buf_append(&p->in, b, chunk) < 0) return -ENOMEM;
    int rv = walk(p);
    if (rv) return rv;
    b += chunk;
    n -= chunk;
  }
  return 0;
}

int tg_prof_read_fd(tg_prof_t *p, int fd,
                    void (*progress)(void *ctx, uint64_t bytes), void *ctx) {
  uint8_t *buf = malloc(1u << 16);
  if (!buf) return -ENOMEM;
  uint64_t total = 0, next = 64u << 20;
  int rv = 0;
  for (;;) {
    ssize_t n = read(fd, buf, 1u << 16);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rv = -errno;
      break;
    }
    if (n == 0) break;
    if ((rv = tg_prof_feed(p, buf, (size_t)n))) break;
    total += (uint64_t)n;
    if (progress && total >= next) {
      progress(ctx, total);
      next += 64u << 20;
    }
  }
  free(buf);
  return rv ? rv : tg_prof_end(p);
}

static int cmp_host(const void *a, const void *b) {
  uint32_t x = ((const tg__prof_host_t *)a)->pub.machine_id;
  uint32_t y = ((const tg__prof_host_t *)b)->pub.machine_id;
  return x < y ? -1 : x > y;
}

int tg_prof_end(tg_prof_t *p) {
  if (p->ended) return 0;
  p->ended = true;
  int rv = tg_buf_size(&p->in) ? TG_EPARSE : 0;
  tg_buf_free(&p->in);
  tg_buf_free(&p->inflate);
  /* The sequences are over: their maps go before the hosts grow. */
  for (size_t i = 0; i < p->n_seqs; i++) seq_maps(&p->seqs[i], tg_u64_map_free);
  free(p->seqs);
  p->seqs = NULL;
  p->n_seqs = p->cap_seqs = 0;
  for (size_t i = 0; i < p->n_hosts; i++) {
    int err = tg__prof_host_finish(p, &p->hosts[i]);
    if (err && !rv) rv = err;
  }
  if (p->n_hosts) qsort(p->hosts, p->n_hosts, sizeof(*p->hosts), cmp_host);
  return rv;
}

size_t tg_prof_n_hosts(const tg_prof_t *p) { return p->ended ? p->n_hosts : 0; }

const tg_prof_host_t *tg_prof_host(const tg_prof_t *p, size_t i) {
  return p->ended && i < p->n_hosts ? &p->hosts[i].pub : NULL;
}

uint64_t tg_prof_bad_packets(const tg_prof_t *p) { return p->bad_packets; }
uint64_t tg_prof_packets(const tg_prof_t *p) { return p->packets; }
