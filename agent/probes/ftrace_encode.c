/* Records -> FtraceEventBundle; see ftrace_encode.h. */
#include "agent/probes/ftrace_encode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/ftrace_events.h"
#include "agent/probes/ftrace_page.h"
#include "agent/probes/ftrace_put.h"

/* FtraceEventBundle. */
#define BUNDLE_CPU 1
#define BUNDLE_EVENT 2
#define BUNDLE_LOST_EVENTS 3
#define BUNDLE_PREVIOUS_END_TS 10 /* previous_bundle_end_timestamp */
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

/* The field |name| of one of two kinds. Its users want pids, priorities,
 * cpus and states: a dev_t of that name is none of them. */
static uint8_t find_out(const tg_ftrace_event_desc_t *d, const char *name,
                        uint8_t kind_a, uint8_t kind_b) {
  for (uint8_t i = 0; i < d->n_out; i++)
    if (strcmp(d->out[i].f.name, name) == 0 &&
        (d->out[i].f.kind == kind_a || d->out[i].f.kind == kind_b) &&
        d->out[i].f.role != TG_FTRACE_ROLE_DEV)
      return i;
  return NO_FIELD;
}

/* The compact columns need every source field in a usable form. */
static void set_compact(tg_ftrace_event_desc_t *d) {
  bool sw = strcmp(d->name, "sched_switch") == 0;
  bool wk = strcmp(d->name, "sched_waking") == 0;
  if (strcmp(d->group, "sched") != 0 || (!sw && !wk)) return;
  const uint8_t I = TG_FTRACE_FIELD_INT;
  uint8_t comm = find_out(d, sw ? "next_comm" : "comm", TG_FTRACE_FIELD_CHARS,
                          TG_FTRACE_FIELD_DATA_LOC);
  uint8_t pid = find_out(d, sw ? "next_pid" : "pid", I, I);
  uint8_t prio = find_out(d, sw ? "next_prio" : "prio", I, I);
  uint8_t extra = find_out(d, sw ? "prev_state" : "target_cpu", I, I);
  if (comm == NO_FIELD || pid == NO_FIELD || prio == NO_FIELD ||
      extra == NO_FIELD)
    return;
  tg_ftrace_compact_src_t *c = &d->compact;
  if (!tg__ftrace_op_of(&d->out[comm].f, &c->comm) ||
      !tg__ftrace_op_of(&d->out[pid].f, &c->pid) ||
      !tg__ftrace_op_of(&d->out[prio].f, &c->prio) ||
      !tg__ftrace_op_of(&d->out[extra].f, &c->extra))
    return;
  c->flags_offset = d->flags_offset;
  const tg_ftrace_op_t *ops[] = {&c->comm, &c->pid, &c->prio, &c->extra};
  for (unsigned i = 0; i < 4; i++)
    if (ops[i]->end > c->min_len) c->min_len = ops[i]->end;
  c->kind = sw ? TG_FTRACE_COMPACT_SWITCH : TG_FTRACE_COMPACT_WAKING;
}

/* The pid fields of set_pid_fields(), per event; NULL ends a list. */
static const struct {
  const char *group, *name, *fields[3];
} pid_events[] = {
    {"sched", "sched_switch", {"next_pid", "prev_pid", NULL}},
    {"sched", "sched_waking", {"pid", NULL, NULL}},
    {"sched", "sched_wakeup", {"pid", NULL, NULL}},
    {"sched", "sched_wakeup_new", {"pid", NULL, NULL}},
    {"sched", "sched_process_fork", {"child_pid", NULL, NULL}},
    /* A thread that execs takes its leader's pid: old_pid was its tid. */
    {"sched", "sched_process_exec", {"pid", "old_pid", NULL}},
    {"sched", "sched_blocked_reason", {"pid", NULL, NULL}},
    {"task", "task_newtask", {"pid", NULL, NULL}},
    {"task", "task_rename", {"pid", NULL, NULL}},
};

/* Only fields the event's message writes (all of them for a generic
 * event), and only as the kernel's 4-byte pid_t. */
static void set_pid_fields(tg_ftrace_event_desc_t *d) {
  for (size_t e = 0; e < sizeof(pid_events) / sizeof(pid_events[0]); e++) {
    if (strcmp(d->group, pid_events[e].group) != 0 ||
        strcmp(d->name, pid_events[e].name) != 0)
      continue;
    for (unsigned j = 0; j < 2 && pid_events[e].fields[j]; j++) {
      uint8_t i = find_out(d, pid_events[e].fields[j], TG_FTRACE_FIELD_INT,
                           TG_FTRACE_FIELD_INT);
      if (i == NO_FIELD || d->out[i].f.size != 4) continue;
      if (d->proto_field != TG_FTRACE_EVENT_GENERIC && !d->out[i].proto_field)
        continue;
      d->pid_fields[d->n_pid_fields++] = d->out[i].f.offset;
    }
    return;
  }
}

/* The first dev_t the event's record holds, and the inode fields beside
 * it; as set_pid_fields, only fields the event's message writes. */
static void set_inode_fields(tg_ftrace_event_desc_t *d) {
  bool generic = d->proto_field == TG_FTRACE_EVENT_GENERIC;
  int dev = -1;
  for (unsigned i = 0; i < d->n_out && dev < 0; i++)
    if (d->out[i].f.kind == TG_FTRACE_FIELD_INT &&
        d->out[i].f.role == TG_FTRACE_ROLE_DEV)
      dev = (int)i;
  if (dev < 0) return;
  for (unsigned i = 0; i < d->n_out; i++) {
    const tg_ftrace_out_field_t *o = &d->out[i];
    if (o->f.kind != TG_FTRACE_FIELD_INT || o->f.role != TG_FTRACE_ROLE_INODE ||
        (!generic && !o->proto_field) ||
        d->n_ino_fields == TG_FTRACE_INO_FIELDS_MAX)
      continue;
    d->ino_offsets[d->n_ino_fields] = o->f.offset;
    d->ino_sizes[d->n_ino_fields++] = (uint8_t)o->f.size;
  }
  d->dev_offset = d->out[dev].f.offset;
  d->dev_size = (uint8_t)d->out[dev].f.size;
}

static bool type_fits(uint8_t type, const tg_ftrace_field_t *f) {
  uint8_t kind = f->kind;
  /* A dev_t becomes stat(2)'s device number, an unsigned 64-bit value:
   * only a uint64 field takes it (Perfetto's probes translate it to no
   * other), and the plan, compact_sched and the field-by-field writer then
   * agree on it. */
  if (f->role == TG_FTRACE_ROLE_DEV && type != TG_FTRACE_PT_UINT) return false;
  switch (type) {
    case TG_FTRACE_PT_STRING:
      return kind == TG_FTRACE_FIELD_CHARS || kind == TG_FTRACE_FIELD_DATA_LOC ||
             kind == TG_FTRACE_FIELD_REL_LOC || kind == TG_FTRACE_FIELD_TAIL ||
             kind == TG_FTRACE_FIELD_STRPTR;
    case TG_FTRACE_PT_INT:
      return kind == TG_FTRACE_FIELD_INT;
    case TG_FTRACE_PT_UINT: /* a char pointer too: as its address's index */
      return kind == TG_FTRACE_FIELD_INT || kind == TG_FTRACE_FIELD_SYMADDR ||
             kind == TG_FTRACE_FIELD_STRPTR;
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
            type_fits(k->fields[j].type, f)) {
          o.proto_field = k->fields[j].proto_field;
          o.type = k->fields[j].type;
        }
      }
      if (!o.proto_field && strcmp(d->name, "sched_switch") != 0 &&
          strcmp(d->name, "sched_waking") != 0)
        continue; /* a field Perfetto's message does not have */
      /* A char pointer is its string only where the message wants one;
       * elsewhere it is an address like any other. (Generic events write
       * it as its string, as Perfetto's probes do.) */
      if (o.f.kind == TG_FTRACE_FIELD_STRPTR && o.type != TG_FTRACE_PT_STRING)
        o.f.kind = TG_FTRACE_FIELD_SYMADDR;
    }
    d->out[d->n_out++] = o;
  }
  if (k) {
    tg__ftrace_plan_init(&d->plan, d->proto_field, d->pid_offset);
    for (unsigned i = 0; i < d->n_out; i++)
      if (d->out[i].proto_field)
        tg__ftrace_plan_add(&d->plan, &d->out[i].f, d->out[i].proto_field);
  } else {
    d->plan.min_len = UINT32_MAX; /* GenericFtraceEvent: no plan */
  }
  set_compact(d);
  set_pid_fields(d);
  set_inode_fields(d);
  t->n++;
  t->by_id[fmt->id] = (uint16_t)t->n;
  return 0;
}

bool tg_ftrace_table_wants_strings(const tg_ftrace_table_t *t) {
  for (size_t i = 0; i < t->n; i++) {
    const tg_ftrace_event_desc_t *d = &t->events[i];
    bool generic = d->proto_field == TG_FTRACE_EVENT_GENERIC;
    for (unsigned j = 0; j < d->n_out; j++)
      if (d->out[j].f.kind == TG_FTRACE_FIELD_STRPTR &&
          (generic || d->out[j].proto_field))
        return true;
  }
  return false;
}

/* --- the general path ---------------------------------------------------- */

/* Field by field through the writer, which splits bytes across segments:
 * generic events (written by name), and known events when the segment is
 * short of their plan's worst case. */

static uint64_t read_uint(const uint8_t *p, unsigned size) {
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

static int64_t sign_extend(uint64_t v, unsigned size) {
  if (size >= 8) return (int64_t)v;
  unsigned shift = 64 - size * 8;
  return (int64_t)(v << shift) >> shift;
}

static bool field_in(const tg_ftrace_field_t *f, uint32_t len) {
  return (uint32_t)f->offset + f->size <= len;
}

/* A scalar field; false when it lies outside the record. */
static bool get_int(const tg_ftrace_field_t *f, const uint8_t *rec, uint32_t len,
                    uint64_t *out) {
  if (!field_in(f, len)) return false;
  uint64_t v = read_uint(rec + f->offset, f->size);
  *out = f->is_signed ? (uint64_t)sign_extend(v, f->size) : v;
  return true;
}

/* A string field, without its NUL; false when it lies outside the record. */
static bool get_str(const tg_ftrace_field_t *f, const uint8_t *rec, uint32_t len,
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

/* A kernel address field as its index; false when it lies outside the
 * record. */
static bool get_kaddr(tg_ftrace_kaddrs_t *ka, const tg_ftrace_field_t *f,
                      const uint8_t *rec, uint32_t len, uint64_t *out) {
  if (!field_in(f, len)) return false;
  *out = tg_ftrace_kaddrs_index(ka, read_uint(rec + f->offset, f->size));
  return true;
}

/* A char pointer as the string printk_formats lists at its address: empty
 * when none is (Perfetto's probes write an empty string then too); false
 * when the pointer lies outside the record. */
static bool get_strptr(const tg_printk_formats_t *pf,
                       const tg_ftrace_field_t *f, const uint8_t *rec,
                       uint32_t len, const char **s, size_t *n) {
  if (!field_in(f, len)) return false;
  *s = tg_printk_formats_lookup(pf, read_uint(rec + f->offset, f->size), n);
  if (!*s) {
    *s = "";
    *n = 0;
  }
  return true;
}

static void write_known_field(tg_pbw_t *w, tg_ftrace_encoder_t *e,
                              const tg_ftrace_out_field_t *o,
                              const uint8_t *rec, uint32_t len) {
  uint64_t v = 0;
  const char *s = NULL;
  size_t n = 0;
  if (o->f.kind == TG_FTRACE_FIELD_SYMADDR) {
    if (get_kaddr(&e->kaddrs, &o->f, rec, len, &v))
      tg_pbw_append_varint(w, o->proto_field, v);
    return;
  }
  if (o->f.kind == TG_FTRACE_FIELD_STRPTR) { /* a string field: table_add */
    if (get_strptr(e->printk, &o->f, rec, len, &s, &n))
      tg_pbw_append_bytes(w, o->proto_field, s, n);
    return;
  }
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
      if (!get_int(&o->f, rec, len, &v)) break;
      if (o->f.role == TG_FTRACE_ROLE_DEV) v = tg_ftrace_dev_to_user(v);
      tg_pbw_append_varint(w, o->proto_field, v);
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

static void write_generic_field(tg_pbw_t *w, tg_ftrace_encoder_t *e,
                                const tg_ftrace_out_field_t *o,
                                const uint8_t *rec, uint32_t len) {
  uint64_t v = 0;
  const char *s = NULL;
  size_t n = 0;
  bool ok, str = false;
  switch (o->f.kind) {
    case TG_FTRACE_FIELD_INT:
      ok = get_int(&o->f, rec, len, &v);
      break;
    case TG_FTRACE_FIELD_SYMADDR:
      ok = get_kaddr(&e->kaddrs, &o->f, rec, len, &v);
      break;
    case TG_FTRACE_FIELD_STRPTR:
      ok = str = get_strptr(e->printk, &o->f, rec, len, &s, &n);
      break;
    default:
      ok = str = get_str(&o->f, rec, len, &s, &n);
      break;
  }
  if (!ok) return;
  tg_pbw_begin_nested(w, GENERIC_FIELD);
  tg_pbw_append_string(w, FIELD_NAME, o->f.name);
  if (o->f.role == TG_FTRACE_ROLE_DEV) v = tg_ftrace_dev_to_user(v);
  if (str)
    tg_pbw_append_bytes(w, FIELD_STR, s, n);
  else if (o->f.is_signed && o->f.role != TG_FTRACE_ROLE_DEV)
    tg_pbw_append_int(w, FIELD_INT, (int64_t)v);
  else
    tg_pbw_append_varint(w, FIELD_UINT, v);
  tg_pbw_end_nested(w);
}

/* An event's two sizes: the FtraceEvent's and its message's take one byte
 * when under 128 (an event of a few fields then takes 6 bytes less, as
 * Perfetto's probes write them) and TG_PB_REDUNDANT_VARINT_SIZE bytes
 * otherwise. Both paths give the same bytes. */

/* The general path's: the writer back-filled 4-byte sizes at |ev| and
 * |msg|; those under 128 become one byte and what follows moves back.
 * Returns the new end. */
static uint8_t *shrink_event(uint8_t *ev, uint8_t *msg, uint8_t *end) {
  const uint32_t r = TG_PB_REDUNDANT_VARINT_SIZE;
  uint32_t n = (uint32_t)(end - msg) - r;
  if (n < 128) {
    memmove(msg + 1, msg + r, n);
    *msg = (uint8_t)n;
    end -= r - 1;
  } else {
    tg_pb_write_redundant_varint(msg, n);
  }
  n = (uint32_t)(end - ev) - r;
  if (n >= 128) {
    tg_pb_write_redundant_varint(ev, n);
    return end;
  }
  memmove(ev + 1, ev + r, n);
  *ev = (uint8_t)n;
  return end - (r - 1);
}

/* The plans': one byte was left for each size, at |ev| and |msg|; a size
 * of 128 or more (rare: a long string or array) takes four, what follows
 * moving on (the plan's room counts four). Returns the new end. */
static inline uint8_t *fill_sizes(uint8_t *ev, uint8_t *msg, uint8_t *end) {
  const uint32_t r = TG_PB_REDUNDANT_VARINT_SIZE;
  uint32_t n = (uint32_t)(end - msg) - 1;
  if (n < 128) {
    *msg = (uint8_t)n;
  } else {
    memmove(msg + r, msg + 1, n);
    tg_pb_write_redundant_varint(msg, n);
    end += r - 1;
  }
  n = (uint32_t)(end - ev) - 1;
  if (n < 128) {
    *ev = (uint8_t)n;
    return end;
  }
  memmove(ev + r, ev + 1, n);
  tg_pb_write_redundant_varint(ev, n);
  return end + (r - 1);
}

static void write_event(tg_pbw_t *w, tg_ftrace_encoder_t *e,
                        const tg_ftrace_event_desc_t *d, uint64_t ts,
                        const uint8_t *rec, uint32_t len) {
  /* The sizes shrink only while the event lies in one segment: one that
   * spans two has its sizes where the writer keeps them (a patch). */
  const uint8_t *seg = w->seg_start;
  tg_pbw_begin_nested(w, BUNDLE_EVENT);
  uint8_t *ev = w->cur - TG_PB_REDUNDANT_VARINT_SIZE;
  tg_pbw_append_varint(w, TG_FTRACE_EVENT_TIMESTAMP, ts);
  if ((uint32_t)d->pid_offset + 4 <= len)
    tg_pbw_append_varint(w, TG_FTRACE_EVENT_PID,
                         (uint32_t)read_uint(rec + d->pid_offset, 4));
  tg_pbw_begin_nested(w, d->proto_field);
  uint8_t *msg = w->cur - TG_PB_REDUNDANT_VARINT_SIZE;
  if (d->proto_field == TG_FTRACE_EVENT_GENERIC) {
    tg_pbw_append_string(w, GENERIC_NAME, d->name);
    for (unsigned i = 0; i < d->n_out; i++)
      write_generic_field(w, e, &d->out[i], rec, len);
  } else {
    for (unsigned i = 0; i < d->n_out; i++)
      if (d->out[i].proto_field)
        write_known_field(w, e, &d->out[i], rec, len);
  }
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
  if (!tg_pbw_error(w) && w->seg_start == seg)
    w->cur = shrink_event(ev, msg, w->cur);
}

/* --- plans (every record of a known event) ------------------------------ */

/* Writes the FtraceEvent of the record through its plan at |p|, which has
 * room for tg__ftrace_plan_need() plus TG_FTRACE_PUT_SLACK bytes; the
 * record is at least pl->min_len long, with 8 bytes past it readable (word
 * reads). The same bytes as write_event(). Returns the end. */
static uint8_t *write_planned(const tg_ftrace_plan_t *pl, uint8_t *p,
                              uint64_t ts, tg__ftrace_ts_cache_t *tc,
                              const uint8_t *rec, uint32_t len) {
  *p++ = (uint8_t)TG_PB_TAG(BUNDLE_EVENT, TG_PB_WT_LEN);
  uint8_t *event = p++;
  *p++ = (uint8_t)TG_PB_TAG(TG_FTRACE_EVENT_TIMESTAMP, TG_PB_WT_VARINT);
  p = tg__ftrace_put_ts(p, ts, tc);
  uint32_t pid;
  memcpy(&pid, rec + pl->pid_offset, 4);
  *p++ = (uint8_t)TG_PB_TAG(TG_FTRACE_EVENT_PID, TG_PB_WT_VARINT);
  p = tg__ftrace_put_varint(p, pid);
  p = tg__ftrace_put_tag(p, pl->msg_tag, pl->msg_tag_len);
  uint8_t *msg = p++;
  for (const tg_ftrace_op_t *op = pl->ops, *end = op + pl->n_ops; op < end;
       op++) {
    if (op->cls == TG_FTRACE_OPC_SCALAR) {
      p = tg__ftrace_put_tag(p, op->tag, op->tag_len);
      uint64_t v = tg__ftrace_ld64(rec + op->offset) & op->mask;
      p = tg__ftrace_put_varint(p, (v ^ op->sign) - op->sign);
    } else if (op->cls == TG_FTRACE_OPC_COMM) {
      const uint8_t *s = rec + op->offset;
      size_t n = tg__ftrace_strnlen16(s);
      p = tg__ftrace_put_tag(p, op->tag, op->tag_len);
      *p++ = (uint8_t)n;
      memcpy(p, s, 16); /* one block; the bytes past the NUL are slack */
      p += n;
    } else if (op->cls == TG_FTRACE_OPC_DEV) {
      p = tg__ftrace_put_tag(p, op->tag, op->tag_len);
      uint64_t v = tg__ftrace_ld64(rec + op->offset) & op->mask;
      p = tg__ftrace_put_varint(p, tg_ftrace_dev_to_user(v));
    } else if (op->cls == TG_FTRACE_OPC_ARRAY) {
      /* One key and varint per element (not packed: Perfetto's proto). */
      const uint32_t tag = op->tag;
      const unsigned tag_len = op->tag_len, es = op->elem_size;
      const uint64_t mask = op->mask;
      const uint8_t *v = rec + op->offset;
      for (unsigned i = op->count; i > 0; i--, v += es) {
        p = tg__ftrace_put_tag(p, tag, tag_len);
        p = tg__ftrace_put_varint(p, tg__ftrace_ld64(v) & mask);
      }
    } else { /* TG_FTRACE_OPC_STRING */
      const uint8_t *s;
      size_t n;
      if (!tg__ftrace_op_str(op, rec, len, &s, &n)) continue;
      p = tg__ftrace_put_tag(p, op->tag, op->tag_len);
      p = tg__ftrace_put_varint(p, n);
      memcpy(p, s, n);
      p += n;
    }
  }
  return fill_sizes(event, msg, p);
}

/* --- pids --------------------------------------------------------------- */

static inline int32_t load_pid(const uint8_t *rec, uint16_t offset) {
  int32_t v;
  memcpy(&v, rec + offset, 4);
  return v;
}

/* The record's common_pid and pid fields that lie inside it; of a compact
 * row only the column's pid. */
static inline void collect_pids(tg_pid_set_t *set,
                                const tg_ftrace_event_desc_t *d,
                                const uint8_t *rec, uint32_t len,
                                bool compact_row) {
  if ((uint32_t)d->pid_offset + 4 <= len)
    tg_pid_set_add(set, load_pid(rec, d->pid_offset));
  unsigned n = compact_row && d->n_pid_fields ? 1 : d->n_pid_fields;
  for (unsigned i = 0; i < n; i++)
    if ((uint32_t)d->pid_fields[i] + 4 <= len)
      tg_pid_set_add(set, load_pid(rec, d->pid_fields[i]));
}

/* --- inodes ------------------------------------------------------------- */

/* The record's (inode, device) pairs, for the fields that lie inside it;
 * none when its dev_t does not, or when |skip_pid| (not 0) wrote it. */
static inline void collect_inodes(tg_inode_set_t *set,
                                  const tg_ftrace_event_desc_t *d,
                                  const uint8_t *rec, uint32_t len,
                                  int32_t skip_pid) {
  if ((uint32_t)d->dev_offset + d->dev_size > len) return;
  if (skip_pid && (uint32_t)d->pid_offset + 4 <= len &&
      load_pid(rec, d->pid_offset) == skip_pid)
    return;
  uint64_t dev =
      tg_ftrace_dev_to_user(read_uint(rec + d->dev_offset, d->dev_size));
  for (unsigned i = 0; i < d->n_ino_fields; i++) {
    uint32_t off = d->ino_offsets[i], size = d->ino_sizes[i];
    if (off + size <= len) tg_inode_set_add(set, read_uint(rec + off, size), dev);
  }
}

/* --- encoder ------------------------------------------------------------- */

int tg_ftrace_encoder_init(tg_ftrace_encoder_t *e, const tg_ftrace_table_t *table,
                           bool compact_sched, uint32_t page_size) {
  memset(e, 0, sizeof(*e));
  e->table = table;
  e->compact = compact_sched;
  /* A record is at most the page. */
  e->tail_cap = page_size;
  if (!(e->tail = malloc((size_t)page_size + TG_FTRACE_WORD_PAD)))
    return -ENOMEM;
  /* The smallest record is 8 bytes (a header and one word): a page holds
   * at most page_rows of them. A bundle holds several pages' rows. */
  e->page_rows = page_size / 8 + 1;
  uint32_t rows = e->page_rows > TG_FTRACE_BUNDLE_ROWS ? e->page_rows
                                                       : TG_FTRACE_BUNDLE_ROWS;
  int rv = tg__ftrace_compact_init(&e->cs, rows);
  if (rv == 0) rv = tg_ftrace_kaddrs_init(&e->kaddrs, TG_FTRACE_KADDRS_CAP);
  if (rv < 0) tg_ftrace_encoder_free(e);
  return rv;
}

void tg_ftrace_encoder_free(tg_ftrace_encoder_t *e) {
  tg__ftrace_compact_free(&e->cs);
  tg_ftrace_kaddrs_free(&e->kaddrs);
  free(e->tail);
  memset(e, 0, sizeof(*e));
}

/* --- bundle -------------------------------------------------------------- */

void tg_ftrace_bundle_begin(tg_ftrace_encoder_t *e, tg_pbw_t *w,
                            uint32_t cpu) {
  tg_ftrace_bundle_begin_after(e, w, cpu, 0);
}

void tg_ftrace_bundle_begin_after(tg_ftrace_encoder_t *e, tg_pbw_t *w,
                                  uint32_t cpu, uint64_t previous_end_ts) {
  tg_pbw_append_varint(w, BUNDLE_CPU, cpu);
  /* Absent before the CPU's first bundle, as Perfetto's probes leave it:
   * trace processor then has no earlier point to trust on that CPU. */
  if (previous_end_ts)
    tg_pbw_append_varint(w, BUNDLE_PREVIOUS_END_TS, previous_end_ts);
  tg__ftrace_compact_reset(&e->cs);
}

bool tg_ftrace_bundle_has_room(const tg_ftrace_encoder_t *e) {
  return e->cs.cap - e->cs.n_sw - e->cs.n_wk >= e->page_rows;
}

void tg_ftrace_bundle_end(tg_ftrace_encoder_t *e, tg_pbw_t *w,
                          bool lost_events) {
  tg__ftrace_compact_write(&e->cs, w);
  if (lost_events) tg_pbw_append_bool(w, BUNDLE_LOST_EVENTS, true);
}

bool tg_ftrace_page_lost_events(const tg_ftrace_page_layout_t *layout,
                                const uint8_t *page_untrusted, size_t len) {
  tg_ftrace_page_iter_t it;
  tg_ftrace_page_header_t hdr;
  return tg_ftrace_page_begin(layout, page_untrusted, len, &it, &hdr) == 0 &&
         hdr.lost_events;
}

void tg_ftrace_bundle_add_page(tg_ftrace_encoder_t *e, tg_pbw_t *w,
                               const tg_ftrace_page_layout_t *layout,
                               const uint8_t *page_untrusted, size_t len,
                               tg_ftrace_bundle_result_t *res) {
  memset(res, 0, sizeof(*res));
  tg_ftrace_page_iter_t it;
  tg_ftrace_page_header_t hdr;
  if (tg_ftrace_page_begin(layout, page_untrusted, len, &it, &hdr) < 0) {
    res->corrupt = true;
    return;
  }
  res->lost_events = hdr.lost_events;
  /* Locals, not fields: the output bytes are written through uint8_t
   * pointers, which may alias anything, so fields would be reloaded after
   * every store. */
  const uint16_t *by_id = e->table->by_id;
  const tg_ftrace_event_desc_t *events = e->table->events;
  const bool compact = e->compact;
  tg_pid_set_t *const pids = e->pids;
  tg_inode_set_t *const inodes = e->inodes;
  const int32_t inode_skip_pid = e->inode_skip_pid;
  const uint8_t *page_end = page_untrusted + len;
  uint32_t n_events = 0, n_skipped = 0;
  uint64_t last_ts = 0;
  tg__ftrace_ts_cache_t tc;
  tg__ftrace_ts_cache_init(&tc);
  /* The writer's segment, as locals too; synced around the general path. */
  uint8_t *cur = w->cur, *seg_end = w->end;
  /* A copy of the iterator that no out-of-line call sees, so it can live
   * in registers: every record's position hangs off the previous one's. */
  tg_ftrace_page_iter_t walk = it;
  tg_ftrace_record_t rec;
  int rv;
  while ((rv = tg_ftrace_page_next(&walk, &rec)) > 0) {
    if (rec.len < 2) {
      n_skipped++;
      continue;
    }
    uint16_t type;
    memcpy(&type, rec.data, 2);
    uint16_t idx = by_id[type];
    if (!idx) {
      n_skipped++;
      continue;
    }
    const tg_ftrace_event_desc_t *d = &events[idx - 1];
    n_events++;
    last_ts = rec.ts; /* every record counted is written below */
    if (pids)
      collect_pids(pids, d, rec.data, rec.len, compact && d->compact.kind);
    if (inodes && d->n_ino_fields)
      collect_inodes(inodes, d, rec.data, rec.len, inode_skip_pid);
    /* Plans and compact rows read scalars as whole words: 8 bytes past
     * the record must be readable. Only a record that ends the buffer
     * lacks them; it is read from a zero-padded copy. (A record longer
     * than a page, in a buffer longer than the layout says, is written
     * field by field.) */
    const uint8_t *data = rec.data;
    bool plannable = true;
    if ((size_t)(page_end - data) < (size_t)rec.len + TG_FTRACE_WORD_PAD) {
      if (rec.len <= e->tail_cap) {
        memcpy(e->tail, data, rec.len);
        memset(e->tail + rec.len, 0, TG_FTRACE_WORD_PAD);
        data = e->tail;
      } else {
        plannable = false;
      }
    }
    if (plannable) {
      if (compact && d->compact.kind &&
          tg__ftrace_compact_add(&e->cs, &d->compact, rec.ts, data, rec.len))
        continue;
      uint32_t need = tg__ftrace_plan_need(&d->plan, rec.len);
      if (need && (size_t)(seg_end - cur) >= need + TG_FTRACE_PUT_SLACK) {
        cur = write_planned(&d->plan, cur, rec.ts, &tc, data, rec.len);
        continue;
      }
    }
    w->cur = cur;
    write_event(w, e, d, rec.ts, rec.data, rec.len);
    cur = w->cur;
    seg_end = w->end;
  }
  w->cur = cur;
  res->events = n_events;
  res->skipped = n_skipped;
  res->last_ts = last_ts;
  if (rv < 0) res->corrupt = true;
}

void tg_ftrace_encode_bundle(tg_ftrace_encoder_t *e, tg_pbw_t *w, uint32_t cpu,
                             const tg_ftrace_page_layout_t *layout,
                             const uint8_t *page_untrusted, size_t len,
                             tg_ftrace_bundle_result_t *res) {
  tg_ftrace_bundle_begin(e, w, cpu);
  tg_ftrace_bundle_add_page(e, w, layout, page_untrusted, len, res);
  tg_ftrace_bundle_end(e, w, res->lost_events);
}
