/* linux.perf packets: see perf_emit.h. */
#include "agent/perf/perf_emit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* InternedData fields. */
#define ID_FUNCTION_NAMES 5
#define ID_FRAMES 6
#define ID_CALLSTACKS 7
#define ID_BUILD_IDS 16
#define ID_MAPPING_PATHS 17
#define ID_MAPPINGS 19
/* TracePacketDefaults, PerfSampleDefaults, PerfEvents.Timebase. */
#define DEF_TIMESTAMP_CLOCK_ID 58
#define DEF_PERF_SAMPLE_DEFAULTS 12
#define PSD_TIMEBASE 1
#define PSD_SHARD_COUNT 2
#define PSD_CHOSEN_SHARD 3
#define PSD_FOLLOWERS 4
#define TB_PERIOD 1
#define TB_FREQUENCY 2
#define TB_TRACEPOINT 3
#define TB_COUNTER 4
#define TB_RAW_EVENT 5
#define TB_POLL_PERIOD_MS 6
#define TB_NAME 10
#define TB_TIMESTAMP_CLOCK 11
/* FollowerEvent, PerfEvents.Tracepoint, PerfEvents.RawEvent */
#define FE_COUNTER 1
#define FE_TRACEPOINT 2
#define FE_RAW_EVENT 3
#define FE_NAME 4
#define TP_NAME 1
#define TP_FILTER 2
#define RAW_TYPE 1
#define RAW_CONFIG 2
#define RAW_CONFIG1 3
#define RAW_CONFIG2 4
/* PerfSample */
#define PS_CPU 1
#define PS_PID 2
#define PS_TID 3
#define PS_CALLSTACK_IID 4
#define PS_CPU_MODE 5
#define PS_TIMEBASE_COUNT 6
#define PS_FOLLOWER_COUNTS 7
#define PS_KERNEL_RECORDS_LOST 17
#define PS_SKIPPED_REASON 18
#define PS_PRODUCER_EVENT 19
#define PE_SOURCE_STOP_REASON 1

#define EMPTY_CALLSTACK_IID 1
#define MAX_FRAMES 1024
#define MAX_PATH_PARTS 256

/* One interning table: byte keys to iids, open addressing. */
typedef struct entry {
  uint64_t hash;
  uint64_t iid; /* 0: free slot */
  size_t off, len;
} entry_t;

typedef struct itab {
  entry_t *e;
  size_t cap, n;
  uint8_t *arena;
  size_t arena_len, arena_cap;
  uint64_t next_iid;
  uint64_t first_iid;
} itab_t;

enum { T_FUNC, T_BUILD_ID, T_PATH, T_MAPPING, T_FRAME, T_CALLSTACK, T_N };

struct tg_perf_emitter {
  itab_t t[T_N];
  size_t budget;
};

static uint64_t fnv(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static void itab_reset(itab_t *t) {
  if (t->e) memset(t->e, 0, t->cap * sizeof(*t->e));
  t->n = 0;
  t->arena_len = 0;
  t->next_iid = t->first_iid;
}

static void itab_free(itab_t *t) {
  free(t->e);
  free(t->arena);
}

static int itab_grow(itab_t *t) {
  size_t cap = t->cap ? t->cap * 2 : 256;
  entry_t *e = calloc(cap, sizeof(*e));
  if (!e) return -ENOMEM;
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->e[i].iid) continue;
    size_t j = t->e[i].hash & (cap - 1);
    while (e[j].iid) j = (j + 1) & (cap - 1);
    e[j] = t->e[i];
  }
  free(t->e);
  t->e = e;
  t->cap = cap;
  return 0;
}

/* The iid of |key|, interned now (|*is_new|) if the table lacked it.
 * Returns 0 without memory. */
static uint64_t itab_get(itab_t *t, const void *key, size_t len, bool *is_new) {
  *is_new = false;
  if ((t->n + 1) * 2 > t->cap && itab_grow(t) < 0) return 0;
  uint64_t h = fnv(key, len);
  size_t j = h & (t->cap - 1);
  while (t->e[j].iid) {
    if (t->e[j].hash == h && t->e[j].len == len &&
        (len == 0 || memcmp(t->arena + t->e[j].off, key, len) == 0))
      return t->e[j].iid;
    j = (j + 1) & (t->cap - 1);
  }
  if (t->arena_len + len > t->arena_cap) {
    size_t cap = t->arena_cap ? t->arena_cap : 4096;
    while (cap < t->arena_len + len) cap *= 2;
    uint8_t *a = realloc(t->arena, cap);
    if (!a) return 0;
    t->arena = a;
    t->arena_cap = cap;
  }
  if (len) memcpy(t->arena + t->arena_len, key, len);
  t->e[j] = (entry_t){h, t->next_iid++, t->arena_len, len};
  t->arena_len += len;
  t->n++;
  *is_new = true;
  return t->e[j].iid;
}

tg_perf_emitter_t *tg_perf_emitter_new(size_t budget) {
  tg_perf_emitter_t *e = calloc(1, sizeof(*e));
  if (!e) return NULL;
  e->budget = budget ? budget : 16u << 20;
  for (int i = 0; i < T_N; i++) e->t[i].first_iid = 1;
  /* iid 1 of callstacks is the empty one (see perf_emit.h). */
  e->t[T_CALLSTACK].first_iid = EMPTY_CALLSTACK_IID + 1;
  tg_perf_emitter_reset(e);
  return e;
}

void tg_perf_emitter_free(tg_perf_emitter_t *e) {
  if (!e) return;
  for (int i = 0; i < T_N; i++) itab_free(&e->t[i]);
  free(e);
}

void tg_perf_emitter_reset(tg_perf_emitter_t *e) {
  for (int i = 0; i < T_N; i++) itab_reset(&e->t[i]);
}

size_t tg_perf_emitter_bytes(const tg_perf_emitter_t *e) {
  size_t n = 0;
  for (int i = 0; i < T_N; i++)
    n += e->t[i].arena_cap + e->t[i].cap * sizeof(entry_t);
  return n;
}

bool tg_perf_emitter_full(const tg_perf_emitter_t *e) {
  size_t used = 0;
  for (int i = 0; i < T_N; i++)
    used += e->t[i].arena_len + e->t[i].n * 2 * sizeof(entry_t);
  return used > e->budget;
}

/* The event of a Timebase or FollowerEvent (their field numbers differ). */
static void put_event(tg_pbw_t *w, const tg_perf_event_t *ev, uint32_t f_counter,
                      uint32_t f_tracepoint, uint32_t f_raw) {
  switch (ev->kind) {
    case TG_PERF_EVENT_TRACEPOINT:
      tg_pbw_begin_nested(w, f_tracepoint);
      tg_pbw_append_string(w, TP_NAME, ev->tp_name ? ev->tp_name : "");
      if (ev->tp_filter) tg_pbw_append_string(w, TP_FILTER, ev->tp_filter);
      tg_pbw_end_nested(w);
      break;
    case TG_PERF_EVENT_RAW:
      tg_pbw_begin_nested(w, f_raw);
      tg_pbw_append_varint(w, RAW_TYPE, ev->attr_type);
      tg_pbw_append_varint(w, RAW_CONFIG, ev->attr_config);
      tg_pbw_append_varint(w, RAW_CONFIG1, ev->attr_config1);
      tg_pbw_append_varint(w, RAW_CONFIG2, ev->attr_config2);
      tg_pbw_end_nested(w);
      break;
    default:
      tg_pbw_append_varint(w, f_counter, ev->counter);
      break;
  }
}

void tg_perf_emit_defaults(tg_pbw_t *w, uint64_t ts,
                           const tg_perf_timebase_desc_t *tb) {
  tg_pbw_append_varint(w, TG_PERF_PKT_TIMESTAMP, ts);
  tg_pbw_append_varint(w, TG_PERF_PKT_SEQUENCE_FLAGS,
                       TG_PERF_SEQ_INCREMENTAL_STATE_CLEARED);
  tg_pbw_begin_nested(w, TG_PERF_PKT_DEFAULTS);
  tg_pbw_append_varint(w, DEF_TIMESTAMP_CLOCK_ID, tb->builtin_clock);
  tg_pbw_begin_nested(w, DEF_PERF_SAMPLE_DEFAULTS);
  tg_pbw_begin_nested(w, PSD_TIMEBASE);
  if (tb->poll_period_ms)
    tg_pbw_append_varint(w, TB_POLL_PERIOD_MS, tb->poll_period_ms);
  else if (tb->frequency)
    tg_pbw_append_varint(w, TB_FREQUENCY, tb->frequency);
  else
    tg_pbw_append_varint(w, TB_PERIOD, tb->period);
  if (tb->event)
    put_event(w, tb->event, TB_COUNTER, TB_TRACEPOINT, TB_RAW_EVENT);
  else
    tg_pbw_append_varint(w, TB_COUNTER, tb->counter);
  if (tb->name) tg_pbw_append_string(w, TB_NAME, tb->name);
  if (tb->perf_clock) tg_pbw_append_varint(w, TB_TIMESTAMP_CLOCK, tb->perf_clock);
  tg_pbw_end_nested(w);
  if (tb->shard_count) {
    tg_pbw_append_varint(w, PSD_SHARD_COUNT, tb->shard_count);
    tg_pbw_append_varint(w, PSD_CHOSEN_SHARD, tb->chosen_shard);
  }
  for (size_t i = 0; i < tb->n_followers; i++) {
    const tg_perf_event_t *f = &tb->followers[i];
    tg_pbw_begin_nested(w, PSD_FOLLOWERS);
    put_event(w, f, FE_COUNTER, FE_TRACEPOINT, FE_RAW_EVENT);
    if (f->name) tg_pbw_append_string(w, FE_NAME, f->name);
    tg_pbw_end_nested(w);
  }
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
}

/* Interned data is opened on the first new entry of a packet. */
typedef struct out {
  tg_pbw_t *w;
  bool open;
} out_t;

static void open_interned(out_t *o) {
  if (o->open) return;
  tg_pbw_begin_nested(o->w, TG_PERF_PKT_INTERNED_DATA);
  o->open = true;
}

static void put_string(out_t *o, uint32_t field, uint64_t iid, const void *s,
                       size_t len) {
  open_interned(o);
  tg_pbw_begin_nested(o->w, field);
  tg_pbw_append_varint(o->w, 1, iid);
  tg_pbw_append_bytes(o->w, 2, s, len);
  tg_pbw_end_nested(o->w);
}

static int string_iid(tg_perf_emitter_t *e, out_t *o, int table,
                      uint32_t field, const void *s, size_t len,
                      uint64_t *iid) {
  bool is_new;
  if (!(*iid = itab_get(&e->t[table], s, len, &is_new))) return -ENOMEM;
  if (is_new) put_string(o, field, *iid, s, len);
  return 0;
}

static int mapping_iid(tg_perf_emitter_t *e, out_t *o,
                       const tg_perf_emit_mapping_t *m, uint64_t *iid) {
  /* The key: the numbers, then the build id, then the path. */
  uint8_t key[5 * 8 + 1 + 64 + 4096];
  size_t plen = m->path ? strnlen(m->path, 4096) : 0;
  size_t blen = m->build_id ? m->build_id_len : 0;
  if (blen > 64) blen = 64;
  uint64_t nums[5] = {m->start, m->end, m->exact_offset, m->start_offset,
                      m->load_bias};
  memcpy(key, nums, sizeof(nums));
  key[40] = (uint8_t)blen;
  if (blen) memcpy(key + 41, m->build_id, blen);
  if (plen) memcpy(key + 41 + blen, m->path, plen);
  bool is_new;
  if (!(*iid = itab_get(&e->t[T_MAPPING], key, 41 + blen + plen, &is_new)))
    return -ENOMEM;
  if (!is_new) return 0;
  uint64_t build_iid = 0;
  if (blen && string_iid(e, o, T_BUILD_ID, ID_BUILD_IDS, m->build_id, blen,
                         &build_iid) < 0)
    return -ENOMEM;
  uint64_t parts[MAX_PATH_PARTS];
  size_t n_parts = 0;
  for (size_t i = 0; i < plen && n_parts < MAX_PATH_PARTS;) {
    size_t j = i;
    while (j < plen && m->path[j] != '/') j++;
    if (j > i && string_iid(e, o, T_PATH, ID_MAPPING_PATHS, m->path + i,
                            j - i, &parts[n_parts++]) < 0)
      return -ENOMEM;
    i = j + 1;
  }
  open_interned(o);
  tg_pbw_begin_nested(o->w, ID_MAPPINGS);
  tg_pbw_append_varint(o->w, 1, *iid);
  if (build_iid) tg_pbw_append_varint(o->w, 2, build_iid);
  tg_pbw_append_varint(o->w, 3, m->start_offset);
  tg_pbw_append_varint(o->w, 4, m->start);
  tg_pbw_append_varint(o->w, 5, m->end);
  tg_pbw_append_varint(o->w, 6, m->load_bias);
  for (size_t i = 0; i < n_parts; i++) tg_pbw_append_varint(o->w, 7, parts[i]);
  tg_pbw_append_varint(o->w, 8, m->exact_offset);
  tg_pbw_end_nested(o->w);
  return 0;
}

static int frame_iid(tg_perf_emitter_t *e, out_t *o,
                     const tg_perf_emit_frame_t *f, uint64_t *iid) {
  /* Keyed by mapping, rel_pc and name: kernel frames are all rel_pc 0
   * under one mapping (perf_ds.c), told apart by their names alone. */
  uint64_t key[3] = {0, f->rel_pc, 0};
  if (mapping_iid(e, o, f->mapping, &key[0]) < 0) return -ENOMEM;
  size_t flen = !f->function ? 0
                : f->function_len ? f->function_len
                                  : strlen(f->function);
  if (flen && string_iid(e, o, T_FUNC, ID_FUNCTION_NAMES, f->function, flen,
                         &key[2]) < 0)
    return -ENOMEM;
  bool is_new;
  if (!(*iid = itab_get(&e->t[T_FRAME], key, sizeof(key), &is_new)))
    return -ENOMEM;
  if (!is_new) return 0;
  open_interned(o);
  tg_pbw_begin_nested(o->w, ID_FRAMES);
  tg_pbw_append_varint(o->w, 1, *iid);
  if (key[2]) tg_pbw_append_varint(o->w, 2, key[2]);
  tg_pbw_append_varint(o->w, 3, key[0]);
  tg_pbw_append_varint(o->w, 4, f->rel_pc);
  tg_pbw_end_nested(o->w);
  return 0;
}

int tg_perf_emit_sample(tg_perf_emitter_t *e, tg_pbw_t *w,
                        const tg_perf_emit_sample_t *s) {
  tg_pbw_append_varint(w, TG_PERF_PKT_TIMESTAMP, s->ts);
  tg_pbw_append_varint(w, TG_PERF_PKT_SEQUENCE_FLAGS,
                       TG_PERF_SEQ_NEEDS_INCREMENTAL_STATE);
  out_t o = {w, false};
  uint64_t frames[MAX_FRAMES];
  size_t n = s->n_frames < MAX_FRAMES ? s->n_frames : MAX_FRAMES;
  int rv = 0;
  for (size_t i = 0; i < n && rv == 0; i++)
    rv = frame_iid(e, &o, &s->frames[i], &frames[i]);
  uint64_t cs = EMPTY_CALLSTACK_IID;
  bool is_new = false;
  if (rv == 0 && n &&
      !(cs = itab_get(&e->t[T_CALLSTACK], frames, n * 8, &is_new)))
    rv = -ENOMEM;
  if (rv == 0 && !n) {
    /* The empty callstack: interned under its fixed iid once. */
    itab_t *t = &e->t[T_CALLSTACK];
    uint64_t next = t->next_iid;
    t->next_iid = EMPTY_CALLSTACK_IID;
    uint8_t none = 0;
    uint64_t got = itab_get(t, &none, 0, &is_new);
    t->next_iid = next;
    if (!got) rv = -ENOMEM;
  }
  if (rv == 0 && is_new) {
    open_interned(&o);
    tg_pbw_begin_nested(w, ID_CALLSTACKS);
    tg_pbw_append_varint(w, 1, cs);
    for (size_t i = 0; i < n; i++) tg_pbw_append_varint(w, 2, frames[i]);
    tg_pbw_end_nested(w);
  }
  if (o.open) tg_pbw_end_nested(w);
  if (rv < 0) return rv;
  tg_pbw_begin_nested(w, TG_PERF_PKT_PERF_SAMPLE);
  tg_pbw_append_varint(w, PS_CPU, s->cpu);
  tg_pbw_append_varint(w, PS_PID, s->pid);
  tg_pbw_append_varint(w, PS_TID, s->tid);
  tg_pbw_append_varint(w, PS_CALLSTACK_IID, cs);
  tg_pbw_append_varint(w, PS_CPU_MODE, s->cpu_mode);
  tg_pbw_append_varint(w, PS_TIMEBASE_COUNT, s->timebase_count);
  /* Repeated, not packed: as Perfetto's writer (pbzero) emits them. */
  for (size_t i = 0; i < s->n_follower_counts; i++)
    tg_pbw_append_varint(w, PS_FOLLOWER_COUNTS, s->follower_counts[i]);
  tg_pbw_end_nested(w);
  return 0;
}

void tg_perf_emit_counts(tg_pbw_t *w, uint64_t ts, uint32_t cpu,
                         uint64_t timebase_count, const uint64_t *followers,
                         size_t n_followers) {
  tg_pbw_append_varint(w, TG_PERF_PKT_TIMESTAMP, ts);
  tg_pbw_append_varint(w, TG_PERF_PKT_SEQUENCE_FLAGS,
                       TG_PERF_SEQ_NEEDS_INCREMENTAL_STATE);
  tg_pbw_begin_nested(w, TG_PERF_PKT_PERF_SAMPLE);
  tg_pbw_append_varint(w, PS_CPU, cpu);
  tg_pbw_append_varint(w, PS_TIMEBASE_COUNT, timebase_count);
  for (size_t i = 0; i < n_followers; i++)
    tg_pbw_append_varint(w, PS_FOLLOWER_COUNTS, followers[i]);
  tg_pbw_end_nested(w);
}

void tg_perf_emit_lost(tg_pbw_t *w, uint64_t ts, uint32_t cpu, uint64_t lost) {
  tg_pbw_append_varint(w, TG_PERF_PKT_TIMESTAMP, ts);
  tg_pbw_append_varint(w, TG_PERF_PKT_SEQUENCE_FLAGS,
                       TG_PERF_SEQ_NEEDS_INCREMENTAL_STATE);
  tg_pbw_begin_nested(w, TG_PERF_PKT_PERF_SAMPLE);
  tg_pbw_append_varint(w, PS_CPU, cpu);
  tg_pbw_append_varint(w, PS_KERNEL_RECORDS_LOST, lost);
  tg_pbw_end_nested(w);
}

void tg_perf_emit_skipped(tg_pbw_t *w, const tg_perf_emit_sample_t *s,
                          uint32_t reason) {
  tg_pbw_append_varint(w, TG_PERF_PKT_TIMESTAMP, s->ts);
  tg_pbw_append_varint(w, TG_PERF_PKT_SEQUENCE_FLAGS,
                       TG_PERF_SEQ_NEEDS_INCREMENTAL_STATE);
  tg_pbw_begin_nested(w, TG_PERF_PKT_PERF_SAMPLE);
  tg_pbw_append_varint(w, PS_CPU, s->cpu);
  tg_pbw_append_varint(w, PS_PID, s->pid);
  tg_pbw_append_varint(w, PS_TID, s->tid);
  tg_pbw_append_varint(w, PS_CPU_MODE, s->cpu_mode);
  tg_pbw_append_varint(w, PS_TIMEBASE_COUNT, s->timebase_count);
  for (size_t i = 0; i < s->n_follower_counts; i++)
    tg_pbw_append_varint(w, PS_FOLLOWER_COUNTS, s->follower_counts[i]);
  tg_pbw_append_varint(w, PS_SKIPPED_REASON, reason);
  tg_pbw_end_nested(w);
}

void tg_perf_emit_guardrail_stop(tg_pbw_t *w, uint64_t ts) {
  tg_pbw_append_varint(w, TG_PERF_PKT_TIMESTAMP, ts);
  tg_pbw_append_varint(w, TG_PERF_PKT_SEQUENCE_FLAGS,
                       TG_PERF_SEQ_NEEDS_INCREMENTAL_STATE);
  tg_pbw_begin_nested(w, TG_PERF_PKT_PERF_SAMPLE);
  tg_pbw_begin_nested(w, PS_PRODUCER_EVENT);
  tg_pbw_append_varint(w, PE_SOURCE_STOP_REASON, TG_PERF_STOP_GUARDRAIL);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
}
