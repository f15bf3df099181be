/* Records -> FtraceEventBundle; see ftrace_encode.h. */
#include "agent/probes/ftrace_encode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/ftrace_events.h"
#include "agent/probes/ftrace_page.h"

/* FtraceEventBundle and its CompactSched. */
#define BUNDLE_CPU 1
#define BUNDLE_EVENT 2
#define BUNDLE_LOST_EVENTS 3
#define BUNDLE_COMPACT_SCHED 4
#define CS_SWITCH_TS 1
#define CS_SWITCH_PREV_STATE 2
#define CS_SWITCH_NEXT_PID 3
#define CS_SWITCH_NEXT_PRIO 4
#define CS_INTERN_TABLE 5
#define CS_SWITCH_NEXT_COMM 6
#define CS_WAKING_TS 7
#define CS_WAKING_PID 8
#define CS_WAKING_TARGET_CPU 9
#define CS_WAKING_PRIO 10
#define CS_WAKING_COMM 11
#define CS_WAKING_FLAGS 12
/* GenericFtraceEvent and its Field. */
#define GENERIC_NAME 1
#define GENERIC_FIELD 2
#define FIELD_NAME 1
#define FIELD_STR 3
#define FIELD_INT 4
#define FIELD_UINT 5

#define NO_FIELD 0xff

/* --- table --------------------------------------------------------------- */

int tg_ftrace_table_init(tg_ftrace_table_t *t) {
  memset(t, 0, sizeof(*t));
  t->by_id = calloc(UINT16_MAX + 1u, sizeof(*t->by_id));
  return t->by_id ? 0 : -ENOMEM;
}

void tg_ftrace_table_free(tg_ftrace_table_t *t) {
  free(t->by_id);
  free(t->events);
  memset(t, 0, sizeof(*t));
}

static uint8_t find_out(const tg_ftrace_event_desc_t *d, const char *name,
                        uint8_t kind_a, uint8_t kind_b) {
  for (uint8_t i = 0; i < d->n_out; i++)
    if (strcmp(d->out[i].f.name, name) == 0 &&
        (d->out[i].f.kind == kind_a || d->out[i].f.kind == kind_b))
      return i;
  return NO_FIELD;
}

/* The compact columns need every source field in a usable form. */
static void set_compact(tg_ftrace_event_desc_t *d) {
  bool sw = strcmp(d->name, "sched_switch") == 0;
  bool wk = strcmp(d->name, "sched_waking") == 0;
  if (strcmp(d->group, "sched") != 0 || (!sw && !wk)) return;
  const uint8_t I = TG_FTRACE_FIELD_INT;
  d->c_comm = find_out(d, sw ? "next_comm" : "comm", TG_FTRACE_FIELD_CHARS,
                       TG_FTRACE_FIELD_DATA_LOC);
  d->c_pid = find_out(d, sw ? "next_pid" : "pid", I, I);
  d->c_prio = find_out(d, sw ? "next_prio" : "prio", I, I);
  d->c_extra = find_out(d, sw ? "prev_state" : "target_cpu", I, I);
  if (d->c_comm != NO_FIELD && d->c_pid != NO_FIELD && d->c_prio != NO_FIELD &&
      d->c_extra != NO_FIELD)
    d->compact = sw ? TG_FTRACE_COMPACT_SWITCH : TG_FTRACE_COMPACT_WAKING;
}

static bool type_fits(uint8_t type, uint8_t kind) {
  switch (type) {
    case TG_FTRACE_PT_STRING:
      return kind == TG_FTRACE_FIELD_CHARS || kind == TG_FTRACE_FIELD_DATA_LOC ||
             kind == TG_FTRACE_FIELD_REL_LOC || kind == TG_FTRACE_FIELD_TAIL;
    case TG_FTRACE_PT_INT:
    case TG_FTRACE_PT_UINT:
      return kind == TG_FTRACE_FIELD_INT;
    case TG_FTRACE_PT_REPEATED_UINT:
      return kind == TG_FTRACE_FIELD_INT_ARRAY;
    default:
      return false;
  }
}

int tg_ftrace_table_add(tg_ftrace_table_t *t, const char *group,
                        const tg_ftrace_format_t *fmt, bool no_generic) {
  if (t->by_id[fmt->id]) return -EEXIST;
  const tg_ftrace_known_event_t *k = tg_ftrace_known_event(group, fmt->name);
  if (!k && no_generic) return 0;
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    tg_ftrace_event_desc_t *ev = realloc(t->events, cap * sizeof(*ev));
    if (!ev) return -ENOMEM;
    t->events = ev;
    t->cap = cap;
  }
  tg_ftrace_event_desc_t *d = &t->events[t->n];
  memset(d, 0, sizeof(*d));
  snprintf(d->group, sizeof(d->group), "%s", group);
  memcpy(d->name, fmt->name, sizeof(d->name));
  d->pid_offset = fmt->pid_offset;
  d->flags_offset = fmt->flags_offset;
  d->proto_field = k ? k->proto_field : TG_FTRACE_EVENT_GENERIC;
  for (unsigned i = 0; i < fmt->n_fields; i++) {
    const tg_ftrace_field_t *f = &fmt->fields[i];
    if (f->kind == TG_FTRACE_FIELD_SKIP) continue;
    tg_ftrace_out_field_t o = {.f = *f};
    if (k) {
      for (unsigned j = 0; j < TG_FTRACE_KNOWN_FIELDS_MAX && k->fields[j].name;
           j++) {
        if (strcmp(k->fields[j].name, f->name) == 0 &&
            type_fits(k->fields[j].type, f->kind)) {
          o.proto_field = k->fields[j].proto_field;
          o.type = k->fields[j].type;
        }
      }
      if (!o.proto_field && strcmp(d->name, "sched_switch") != 0 &&
          strcmp(d->name, "sched_waking") != 0)
        continue; /* a field Perfetto's message does not have */
    }
    d->out[d->n_out++] = o;
  }
  set_compact(d);
  t->n++;
  t->by_id[fmt->id] = (uint16_t)t->n;
  return 0;
}

/* --- field values -------------------------------------------------------- */

/* The per-field helpers run for every field of every event: inlined. */
#define HOT static inline __attribute__((always_inline))

HOT uint64_t read_uint(const uint8_t *p, unsigned size) {
  switch (size) {
    case 1:
      return *p;
    case 2: {
      uint16_t v;
      memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      uint32_t v;
      memcpy(&v, p, 4);
      return v;
    }
    default: {
      uint64_t v;
      memcpy(&v, p, 8);
      return v;
    }
  }
}

HOT int64_t sign_extend(uint64_t v, unsigned size) {
  if (size >= 8) return (int64_t)v;
  unsigned shift = 64 - size * 8;
  return (int64_t)(v << shift) >> shift;
}

HOT bool field_in(const tg_ftrace_field_t *f, uint32_t len) {
  return (uint32_t)f->offset + f->size <= len;
}

/* A scalar field; false when it lies outside the record. */
HOT bool get_int(const tg_ftrace_field_t *f, const uint8_t *rec, uint32_t len,
                    uint64_t *out) {
  if (!field_in(f, len)) return false;
  uint64_t v = read_uint(rec + f->offset, f->size);
  *out = f->is_signed ? (uint64_t)sign_extend(v, f->size) : v;
  return true;
}

/* A string field, without its NUL; false when it lies outside the record. */
HOT bool get_str(const tg_ftrace_field_t *f, const uint8_t *rec, uint32_t len,
                    const char **s, size_t *n) {
  uint32_t start, max;
  switch (f->kind) {
    case TG_FTRACE_FIELD_CHARS:
      if (!field_in(f, len)) return false;
      start = f->offset;
      max = f->size;
      break;
    case TG_FTRACE_FIELD_TAIL:
      if (f->offset > len) return false;
      start = f->offset;
      max = len - f->offset;
      break;
    case TG_FTRACE_FIELD_DATA_LOC:
    case TG_FTRACE_FIELD_REL_LOC: {
      if (!field_in(f, len)) return false;
      uint32_t loc = (uint32_t)read_uint(rec + f->offset, 4);
      start = loc & 0xffff;
      max = loc >> 16;
      if (f->kind == TG_FTRACE_FIELD_REL_LOC) start += (uint32_t)f->offset + 4;
      if (start > len || max > len - start) return false;
      break;
    }
    default:
      return false;
  }
  const char *p = (const char *)rec + start;
  *s = p;
  /* Most strings are comms (16 bytes): a plain loop beats a libc call. */
  if (max <= 32) {
    uint32_t i = 0;
    while (i < max && p[i]) i++;
    *n = i;
    return true;
  }
  const char *nul = memchr(p, 0, max);
  *n = nul ? (size_t)(nul - p) : max;
  return true;
}

HOT void write_known_field(tg_pbw_t *w, const tg_ftrace_out_field_t *o,
                              const uint8_t *rec, uint32_t len) {
  uint64_t v = 0;
  const char *s = NULL;
  size_t n = 0;
  switch (o->type) {
    case TG_FTRACE_PT_STRING:
      if (get_str(&o->f, rec, len, &s, &n))
        tg_pbw_append_bytes(w, o->proto_field, s, n);
      break;
    case TG_FTRACE_PT_INT:
      if (get_int(&o->f, rec, len, &v))
        tg_pbw_append_int(w, o->proto_field, (int64_t)v);
      break;
    case TG_FTRACE_PT_UINT:
      if (get_int(&o->f, rec, len, &v)) tg_pbw_append_varint(w, o->proto_field, v);
      break;
    case TG_FTRACE_PT_REPEATED_UINT:
      if (!field_in(&o->f, len) || !o->f.elem_size) break;
      for (unsigned off = 0; off + o->f.elem_size <= o->f.size;
           off += o->f.elem_size)
        tg_pbw_append_varint(w, o->proto_field,
                             read_uint(rec + o->f.offset + off, o->f.elem_size));
      break;
    default:
      break;
  }
}

static void write_generic_field(tg_pbw_t *w, const tg_ftrace_out_field_t *o,
                                const uint8_t *rec, uint32_t len) {
  uint64_t v = 0;
  const char *s = NULL;
  size_t n = 0;
  bool str = o->f.kind != TG_FTRACE_FIELD_INT;
  if (str ? !get_str(&o->f, rec, len, &s, &n) : !get_int(&o->f, rec, len, &v))
    return;
  tg_pbw_begin_nested(w, GENERIC_FIELD);
  tg_pbw_append_string(w, FIELD_NAME, o->f.name);
  if (str)
    tg_pbw_append_bytes(w, FIELD_STR, s, n);
  else if (o->f.is_signed)
    tg_pbw_append_int(w, FIELD_INT, (int64_t)v);
  else
    tg_pbw_append_varint(w, FIELD_UINT, v);
  tg_pbw_end_nested(w);
}

static void write_event(tg_pbw_t *w, const tg_ftrace_event_desc_t *d,
                        uint64_t ts, const uint8_t *rec, uint32_t len) {
  tg_pbw_begin_nested(w, BUNDLE_EVENT);
  tg_pbw_append_varint(w, TG_FTRACE_EVENT_TIMESTAMP, ts);
  if ((uint32_t)d->pid_offset + 4 <= len)
    tg_pbw_append_varint(w, TG_FTRACE_EVENT_PID,
                         (uint32_t)read_uint(rec + d->pid_offset, 4));
  tg_pbw_begin_nested(w, d->proto_field);
  if (d->proto_field == TG_FTRACE_EVENT_GENERIC) {
    tg_pbw_append_string(w, GENERIC_NAME, d->name);
    for (unsigned i = 0; i < d->n_out; i++)
      write_generic_field(w, &d->out[i], rec, len);
  } else {
    for (unsigned i = 0; i < d->n_out; i++)
      if (d->out[i].proto_field) write_known_field(w, &d->out[i], rec, len);
  }
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
}

/* --- compact sched ------------------------------------------------------- */

int tg_ftrace_encoder_init(tg_ftrace_encoder_t *e, const tg_ftrace_table_t *table,
                           bool compact_sched, uint32_t page_size) {
  memset(e, 0, sizeof(*e));
  e->table = table;
  e->compact = compact_sched;
  /* The smallest record is 8 bytes (a header and one word). */
  e->cap = page_size / 8 + 1;
  e->n_slots = 1;
  while (e->n_slots < 2 * e->cap + 1) e->n_slots <<= 1;
  size_t c = e->cap;
  e->sw_ts = calloc(c, sizeof(*e->sw_ts));
  e->sw_state = calloc(c, sizeof(*e->sw_state));
  e->sw_pid = calloc(c, sizeof(*e->sw_pid));
  e->sw_prio = calloc(c, sizeof(*e->sw_prio));
  e->sw_comm = calloc(c, sizeof(*e->sw_comm));
  e->wk_ts = calloc(c, sizeof(*e->wk_ts));
  e->wk_pid = calloc(c, sizeof(*e->wk_pid));
  e->wk_cpu = calloc(c, sizeof(*e->wk_cpu));
  e->wk_prio = calloc(c, sizeof(*e->wk_prio));
  e->wk_comm = calloc(c, sizeof(*e->wk_comm));
  e->wk_flags = calloc(c, sizeof(*e->wk_flags));
  e->comms = calloc(c, sizeof(*e->comms));
  e->comm_len = calloc(c, sizeof(*e->comm_len));
  e->comm_slot = calloc(c, sizeof(*e->comm_slot));
  e->slots = calloc(e->n_slots, sizeof(*e->slots));
  if (!e->sw_ts || !e->sw_state || !e->sw_pid || !e->sw_prio || !e->sw_comm ||
      !e->wk_ts || !e->wk_pid || !e->wk_cpu || !e->wk_prio || !e->wk_comm ||
      !e->wk_flags || !e->comms || !e->comm_len || !e->comm_slot || !e->slots) {
    tg_ftrace_encoder_free(e);
    return -ENOMEM;
  }
  return 0;
}

void tg_ftrace_encoder_free(tg_ftrace_encoder_t *e) {
  free(e->sw_ts);
  free(e->sw_state);
  free(e->sw_pid);
  free(e->sw_prio);
  free(e->sw_comm);
  free(e->wk_ts);
  free(e->wk_pid);
  free(e->wk_cpu);
  free(e->wk_prio);
  free(e->wk_comm);
  free(e->wk_flags);
  free(e->comms);
  free(e->comm_len);
  free(e->comm_slot);
  free(e->slots);
  memset(e, 0, sizeof(*e));
}

static uint32_t intern(tg_ftrace_encoder_t *e, const char *s, size_t n) {
  if (n > 16) n = 16;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  size_t mask = e->n_slots - 1;
  for (size_t k = h & mask;; k = (k + 1) & mask) {
    uint32_t idx = e->slots[k];
    if (idx == 0) {
      /* Never full: n_slots > 2 * cap and a page has at most cap records. */
      uint32_t i = (uint32_t)e->n_comms++;
      memcpy(e->comms[i], s, n);
      e->comm_len[i] = (uint8_t)n;
      e->comm_slot[i] = (uint32_t)k;
      e->slots[k] = i + 1;
      return i;
    }
    if (e->comm_len[idx - 1] == n && memcmp(e->comms[idx - 1], s, n) == 0)
      return idx - 1;
  }
}

static bool add_compact(tg_ftrace_encoder_t *e, const tg_ftrace_event_desc_t *d,
                        uint64_t ts, const uint8_t *rec, uint32_t len) {
  const char *s = NULL;
  size_t n = 0;
  uint64_t pid = 0, prio = 0, extra = 0;
  if (!get_str(&d->out[d->c_comm].f, rec, len, &s, &n) ||
      !get_int(&d->out[d->c_pid].f, rec, len, &pid) ||
      !get_int(&d->out[d->c_prio].f, rec, len, &prio) ||
      !get_int(&d->out[d->c_extra].f, rec, len, &extra))
    return false;
  if (e->n_sw + e->n_wk >= e->cap) return false;
  uint32_t comm = intern(e, s, n);
  if (d->compact == TG_FTRACE_COMPACT_SWITCH) {
    size_t i = e->n_sw++;
    e->sw_ts[i] = ts;
    e->sw_state[i] = (int64_t)extra;
    e->sw_pid[i] = (int32_t)pid;
    e->sw_prio[i] = (int32_t)prio;
    e->sw_comm[i] = comm;
  } else {
    size_t i = e->n_wk++;
    e->wk_ts[i] = ts;
    e->wk_pid[i] = (int32_t)pid;
    e->wk_cpu[i] = (int32_t)extra;
    e->wk_prio[i] = (int32_t)prio;
    e->wk_comm[i] = comm;
    e->wk_flags[i] = d->flags_offset < len ? rec[d->flags_offset] : 0;
  }
  return true;
}

/* Varints of a packed column, written straight into the writer's segment
 * while it has room for the worst case, one by one through the writer
 * where a segment ends: most of a bundle's cost is these columns. The
 * value of row i is get(v, i) (a delta from the previous one if |delta|). */
#define PACKED_COLUMN(w, field, n, delta, get)                                 \
  do {                                                                         \
    if (!(n)) break;                                                           \
    tg_pbw_begin_nested((w), (field));                                         \
    uint64_t prev_ = 0;                                                        \
    size_t i_ = 0;                                                             \
    while (i_ < (n)) {                                                         \
      size_t room_ = (size_t)((w)->end - (w)->cur) / TG_PB_MAX_VARINT_SIZE;    \
      if (room_ == 0) {                                                        \
        uint8_t tmp_[TG_PB_MAX_VARINT_SIZE];                                   \
        uint64_t x_ = (uint64_t)(get(i_));                                     \
        uint64_t y_ = (delta) ? x_ - prev_ : x_;                               \
        prev_ = x_;                                                            \
        tg_pbw_append_raw((w), tmp_,                                           \
                          (size_t)(tg_pb_write_varint(tmp_, y_) - tmp_));      \
        i_++;                                                                  \
        continue;                                                              \
      }                                                                        \
      size_t end_ = (n) - i_ < room_ ? (n) : i_ + room_;                       \
      uint8_t *p_ = (w)->cur;                                                  \
      for (; i_ < end_; i_++) {                                                \
        uint64_t x_ = (uint64_t)(get(i_));                                     \
        p_ = tg_pb_write_varint(p_, (delta) ? x_ - prev_ : x_);                \
        prev_ = x_;                                                            \
      }                                                                        \
      (w)->cur = p_;                                                           \
    }                                                                          \
    tg_pbw_end_nested(w);                                                      \
  } while (0)

static void write_compact(tg_ftrace_encoder_t *e, tg_pbw_t *w) {
  if (!e->n_sw && !e->n_wk) return;
  tg_pbw_begin_nested(w, BUNDLE_COMPACT_SCHED);
  for (size_t i = 0; i < e->n_comms; i++)
    tg_pbw_append_bytes(w, CS_INTERN_TABLE, e->comms[i], e->comm_len[i]);
  /* int32 columns are varints of their int64 value, as protobuf encodes a
   * negative int32 (ten bytes). */
#define SW_TS(i) e->sw_ts[i]
#define SW_STATE(i) (uint64_t)e->sw_state[i]
#define SW_PID(i) (uint64_t)(int64_t)e->sw_pid[i]
#define SW_PRIO(i) (uint64_t)(int64_t)e->sw_prio[i]
#define SW_COMM(i) e->sw_comm[i]
#define WK_TS(i) e->wk_ts[i]
#define WK_PID(i) (uint64_t)(int64_t)e->wk_pid[i]
#define WK_CPU(i) (uint64_t)(int64_t)e->wk_cpu[i]
#define WK_PRIO(i) (uint64_t)(int64_t)e->wk_prio[i]
#define WK_COMM(i) e->wk_comm[i]
#define WK_FLAGS(i) e->wk_flags[i]
  PACKED_COLUMN(w, CS_SWITCH_TS, e->n_sw, true, SW_TS);
  PACKED_COLUMN(w, CS_SWITCH_PREV_STATE, e->n_sw, false, SW_STATE);
  PACKED_COLUMN(w, CS_SWITCH_NEXT_PID, e->n_sw, false, SW_PID);
  PACKED_COLUMN(w, CS_SWITCH_NEXT_PRIO, e->n_sw, false, SW_PRIO);
  PACKED_COLUMN(w, CS_SWITCH_NEXT_COMM, e->n_sw, false, SW_COMM);
  PACKED_COLUMN(w, CS_WAKING_TS, e->n_wk, true, WK_TS);
  PACKED_COLUMN(w, CS_WAKING_PID, e->n_wk, false, WK_PID);
  PACKED_COLUMN(w, CS_WAKING_TARGET_CPU, e->n_wk, false, WK_CPU);
  PACKED_COLUMN(w, CS_WAKING_PRIO, e->n_wk, false, WK_PRIO);
  PACKED_COLUMN(w, CS_WAKING_COMM, e->n_wk, false, WK_COMM);
  PACKED_COLUMN(w, CS_WAKING_FLAGS, e->n_wk, false, WK_FLAGS);
  tg_pbw_end_nested(w);
}

static void reset_compact(tg_ftrace_encoder_t *e) {
  for (size_t i = 0; i < e->n_comms; i++) e->slots[e->comm_slot[i]] = 0;
  e->n_comms = 0;
  e->n_sw = e->n_wk = 0;
}

/* --- bundle -------------------------------------------------------------- */

void tg_ftrace_encode_bundle(tg_ftrace_encoder_t *e, tg_pbw_t *w, uint32_t cpu,
                             const tg_ftrace_page_layout_t *layout,
                             const uint8_t *page_untrusted, size_t len,
                             tg_ftrace_bundle_result_t *res) {
  memset(res, 0, sizeof(*res));
  tg_pbw_append_varint(w, BUNDLE_CPU, cpu);
  tg_ftrace_page_iter_t it;
  tg_ftrace_page_header_t hdr;
  if (tg_ftrace_page_begin(layout, page_untrusted, len, &it, &hdr) < 0) {
    res->corrupt = true;
    return;
  }
  reset_compact(e);
  const tg_ftrace_table_t *t = e->table;
  tg_ftrace_record_t rec;
  int rv;
  while ((rv = tg_ftrace_page_next(&it, &rec)) > 0) {
    if (rec.len < 2) {
      res->skipped++;
      continue;
    }
    uint16_t type;
    memcpy(&type, rec.data, 2);
    uint16_t idx = t->by_id[type];
    if (!idx) {
      res->skipped++;
      continue;
    }
    const tg_ftrace_event_desc_t *d = &t->events[idx - 1];
    if (e->compact && d->compact && add_compact(e, d, rec.ts, rec.data, rec.len)) {
      res->events++;
      continue;
    }
    write_event(w, d, rec.ts, rec.data, rec.len);
    res->events++;
  }
  if (rv < 0) res->corrupt = true;
  write_compact(e, w);
  if (hdr.lost_events) {
    res->lost_events = true;
    tg_pbw_append_bool(w, BUNDLE_LOST_EVENTS, true);
  }
}
