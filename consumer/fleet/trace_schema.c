/* A TracePacket's wire types against Perfetto's trace proto; see
 * trace_schema.h. */
#include "consumer/fleet/trace_schema.h"

#include <stdbool.h>
#include <string.h>

#include "tracegate/pb_wire.h"

/* What a field must arrive as. */
enum {
  TG_TS_NONE,    /* no such field here: read by no one */
  TG_TS_V,       /* varint: integers, bools, enums */
  TG_TS_F64,     /* 8 bytes */
  TG_TS_F32,     /* 4 bytes */
  TG_TS_L,       /* length-delimited, not looked into: strings, bytes,
                    and [packed = true] runs of numbers */
  TG_TS_M,       /* length-delimited, a message of the table */
};

/* One field number of a message. */
typedef struct tg_ts_slot {
  uint8_t kind;
  uint8_t refused; /* not on the allowlist (screened messages only) */
  uint16_t child;  /* the message of a TG_TS_M field */
} tg_ts_slot_t;

/* A message's slots: tg_ts_slots[first + number] for number < n. */
typedef struct tg_ts_message {
  uint32_t first, n;
} tg_ts_message_t;

/* A screened message's field, by name. */
typedef struct tg_ts_name {
  const char *name;
  uint32_t number;
} tg_ts_name_t;

#include "consumer/fleet/trace_schema_table.inc"

/* The table's index of TracePacket: the generator visits it first. */
#define ROOT 0u

static const tg_ts_slot_t *find(uint32_t msg, uint32_t id) {
  const tg_ts_message_t *m = &tg_ts_messages[msg];
  return id < m->n ? &tg_ts_slots[m->first + id] : NULL;
}

static bool wire_ok(uint8_t kind, uint8_t type) {
  switch (kind) {
    case TG_TS_V: return type == TG_PB_WT_VARINT;
    case TG_TS_F64: return type == TG_PB_WT_FIXED64;
    case TG_TS_F32: return type == TG_PB_WT_FIXED32;
    case TG_TS_L:
    case TG_TS_M: return type == TG_PB_WT_LEN;
    default: return false;
  }
}

/* --- values --------------------------------------------------------------------
 *
 * Values of the right wire type that trace processor v50.1 refuses the
 * whole trace for, or crashes on, each found by feeding it random
 * contents field by field (docs/merge.md, "What trace processor cannot
 * take"). A message's frame keeps what its end is judged on. */

enum {
  NEED_PHASE = 1u << 0,  /* FtraceStats: no phase 1 or 2 seen yet */
  HAS_STR = 1u << 1,     /* InternedString: its last str is not empty */
  HAS_IID = 1u << 2,     /* InternedString: its last iid is not 0 */
  HAS_FTS = 1u << 3,     /* FtraceEventBundle: an ftrace_timestamp */
  HAS_BOOTTS = 1u << 4,  /* FtraceEventBundle: a boot_timestamp */
  CLK_INC = 1u << 3,     /* Clock: its last is_incremental is true */
  CLK_UNIT = 1u << 4,    /* Clock: its last unit_multiplier_ns is not 1 */
  SEEN_BUNDLE = 1u << 3, /* TracePacket: a field 1 seen */
  SEEN_SNAP = 1u << 4,   /* TracePacket: a field 6 seen */
};

/* What a message's end is judged on. */
typedef struct frame_state {
  uint8_t flags;
  bool top; /* the packet's own field (depth 1) */
  uint64_t start, end; /* Mapping: its last start and end (0 if none);
                          Clock: its id and timestamp */
  uint64_t unit;       /* Clock: its last unit_multiplier_ns (1 if none,
                          as trace processor takes it) */
} frame_state_t;

static void frame_start(uint32_t msg, frame_state_t *st, bool top) {
  st->flags = msg == TG_TS_MSG_FtraceStats ? NEED_PHASE : 0;
  st->top = top;
  st->start = st->end = 0;
  st->unit = 1;
}

/* The field |fld| of message |msg|, of the right wire type: false when its
 * value is one trace processor cannot take; |st| as above. */
static bool value_ok(uint32_t msg, const tg_pb_field_t *fld,
                     frame_state_t *st, tg_ts_clocks_t *clocks) {
  uint64_t v = fld->value;
  switch (msg) {
    case TG_TS_MSG_TracePacket:
      /* Trace processor reads the last of each; the clock model reads
       * one, so a packet with two is not judged but left out. */
      if (fld->id == 1 || fld->id == 6) {
        uint8_t bit = fld->id == 1 ? SEEN_BUNDLE : SEEN_SNAP;
        if (st->flags & bit) clocks->flags |= TG_TS_TWICE;
        st->flags |= bit;
      }
      /* pixel_modem_token_database: prepended to a trace by hand, never
       * recorded; without a header it is refused. extension_descriptor:
       * a FileDescriptorSet it checks as it loads it, refusing the trace
       * at the first flaw ("Extendee name is empty"); what it adds is
       * the names of TrackEvent extension fields. frame_timeline_event:
       * Android's SurfaceFlinger frames, whose enums index its tables
       * unchecked (a jank severity past its enum: SIGSEGV). */
      return fld->id != 111 && fld->id != 72 && fld->id != 76;
    case TG_TS_MSG_SysStats_CpuTimes:
    case TG_TS_MSG_SysStats_CpuIdleState:
      return fld->id != 1 || v < 4096; /* cpu_id: a CHECK past its CPUs */
    case TG_TS_MSG_KernelWakelockData_Wakelock:
      /* wakelock_type: an index past its enum crashed it (SIGSEGV) once
       * a wakelock of the type was reported. */
      return fld->id != 3 || v <= 2;
    case TG_TS_MSG_Mapping:
      if (fld->id == 4) st->start = v;
      if (fld->id == 5) st->end = v;
      return true;
    case TG_TS_MSG_FtraceEventBundle:
      if (fld->id == 1) return v < 1024; /* cpu: "greater than maximum" */
      if (fld->id == 5) {
        /* ftrace_clock: it parses boot (0), global (2) and mono_raw (4),
         * the last two placed by the clock model (trace_schema.h). */
        if (st->top) clocks->ftrace_clock = v;
        return v == 0 || v == 2 || v == 4;
      }
      if (st->top && fld->id == 6) {
        clocks->ftrace_ts = v;
        st->flags |= HAS_FTS;
      }
      if (st->top && fld->id == 7) {
        clocks->boot_ts = v;
        st->flags |= HAS_BOOTTS;
      }
      return true;
    case TG_TS_MSG_ClockSnapshot:
      if (st->top && fld->id == 2) {
        clocks->primary = v;
        clocks->flags |= TG_TS_SNAP_PRIMARY;
      }
      return true;
    case TG_TS_MSG_ClockSnapshot_Clock:
      /* The last of each counts. clock_id is a uint32: trace processor
       * keeps its low 32 bits (2^63 is its clock 0). */
      if (fld->id == 1) st->start = (uint32_t)v;
      if (fld->id == 2) st->end = v;
      if (fld->id == 3)
        st->flags = (uint8_t)(v ? st->flags | CLK_INC : st->flags & ~CLK_INC);
      if (fld->id == 4) {
        st->unit = v;
        st->flags =
            (uint8_t)(v != 1 ? st->flags | CLK_UNIT : st->flags & ~CLK_UNIT);
      }
      return true;
    case TG_TS_MSG_PerfSample:
      return fld->id != 1 || v < 4096; /* cpu: a CHECK past its CPUs */
    case TG_TS_MSG_FtraceStats:
      /* ftrace_parse_errors, of any status: "critical ftrace parsing
       * errors", refused. */
      if (fld->id == 9) return false;
      if (fld->id != 1) return true; /* phase: START or END, else refused */
      if (v != 1 && v != 2) return false;
      st->flags &= (uint8_t)~NEED_PHASE;
      return true;
    case TG_TS_MSG_VulkanMemoryEvent:
      /* source, operation, allocation_scope: an index past the enum
       * crashed it (SIGSEGV). */
      return (fld->id != 1 && fld->id != 2 && fld->id != 8) || v <= 5;
    case TG_TS_MSG_TrackDescriptor:
      return fld->id != 11 || v <= 3; /* child_ordering: a FATAL past it */
    case TG_TS_MSG_InternedString:
      /* The last of each counts, as it does for trace processor. */
      if (fld->id == 1)
        st->flags = (uint8_t)(v ? st->flags | HAS_IID : st->flags & ~HAS_IID);
      if (fld->id == 2)
        st->flags =
            (uint8_t)(fld->size ? st->flags | HAS_STR : st->flags & ~HAS_STR);
      return true;
    default:
      return true;
  }
}

/* A clock |st| of the packet's own ClockSnapshot, as trace processor's
 * ClockTracker::AddSnapshot takes it: it refuses the whole snapshot for a
 * clock named twice, or a global clock (all but 64..127) incremental. */
static void snapshot_clock(const frame_state_t *st, tg_ts_clocks_t *c) {
  uint64_t id = st->start;
  if (id >= 64) {
    /* Sequence-scoped (64..127, incremental allowed) or a producer's own
     * global clock (from 128): listed with their properties, which the
     * clock model holds to their first snapshot's. */
    c->flags |= id < 128 ? TG_TS_SNAP_SEQ_CLOCK : TG_TS_SNAP_CUSTOM;
    if (id >= 128 && (st->flags & CLK_INC)) c->flags |= TG_TS_SNAP_REJECTED;
    for (uint32_t i = 0; i < c->n_ext; i++)
      if (c->ext[i].id == id) c->flags |= TG_TS_SNAP_REJECTED; /* twice */
    if (c->n_ext == TG_TS_SNAP_EXT) {
      c->flags |= TG_TS_SNAP_MANY;
      return;
    }
    c->ext[c->n_ext].id = id;
    c->ext[c->n_ext].unit = st->unit;
    c->ext[c->n_ext].inc = (st->flags & CLK_INC) != 0;
    c->n_ext++;
    return;
  }
  uint64_t bit = 1ull << id;
  if (c->ids & bit) c->flags |= TG_TS_SNAP_REJECTED; /* twice */
  if (st->flags & CLK_INC) c->flags |= TG_TS_SNAP_REJECTED;
  if (st->flags & (CLK_INC | CLK_UNIT)) c->odd |= bit;
  c->ids |= bit;
  c->ts[id] = st->end;
}

/* At the end of message |msg| (its parent's state |up|, NULL for the
 * packet): CHECKs fail on a string interned as 0 and on a mapping that
 * ends before it starts; the clock facts are gathered. */
static bool end_ok(uint32_t msg, const frame_state_t *st, frame_state_t *up,
                   tg_ts_clocks_t *clocks) {
  switch (msg) {
    case TG_TS_MSG_FtraceStats: return !(st->flags & NEED_PHASE);
    case TG_TS_MSG_InternedString:
      return !(st->flags & HAS_STR) || (st->flags & HAS_IID);
    case TG_TS_MSG_Mapping: return st->start <= st->end;
    case TG_TS_MSG_FtraceEventBundle:
      if (!st->top) return true;
      clocks->flags |= TG_TS_BUNDLE;
      if ((st->flags & (HAS_FTS | HAS_BOOTTS)) == (HAS_FTS | HAS_BOOTTS))
        clocks->flags |= TG_TS_BUNDLE_SNAP;
      return true;
    case TG_TS_MSG_ClockSnapshot_Clock:
      if (up && up->top) snapshot_clock(st, clocks);
      return true;
    case TG_TS_MSG_ClockSnapshot:
      if (st->top) clocks->flags |= TG_TS_SNAPSHOT;
      return true;
    default: return true;
  }
}

/* The messages the walk does more than check wire types in: value rules,
 * clock facts, the allowlist. Every other message (most fields of a
 * trace: ftrace events, track events) skips those calls. */
enum { RULES = 1, SCREENED = 2 };
static const uint8_t rules_of[TG_TS_N_MESSAGES] = {
    [TG_TS_MSG_TracePacket] = RULES | SCREENED,
    [TG_TS_MSG_InternedData] = SCREENED,
    [TG_TS_MSG_FtraceEventBundle] = RULES,
    [TG_TS_MSG_FtraceStats] = RULES,
    [TG_TS_MSG_PerfSample] = RULES,
    [TG_TS_MSG_VulkanMemoryEvent] = RULES,
    [TG_TS_MSG_TrackDescriptor] = RULES,
    [TG_TS_MSG_InternedString] = RULES,
    [TG_TS_MSG_Mapping] = RULES,
    [TG_TS_MSG_SysStats_CpuTimes] = RULES,
    [TG_TS_MSG_SysStats_CpuIdleState] = RULES,
    [TG_TS_MSG_KernelWakelockData_Wakelock] = RULES,
    [TG_TS_MSG_ClockSnapshot] = RULES,
    [TG_TS_MSG_ClockSnapshot_Clock] = RULES,
};

/* Whether field |id| of screened message |msg| is kept: on the list, or
 * trusted by the operator (|allow|, may be NULL). */
static bool kept(uint32_t msg, const tg_ts_slot_t *f, uint32_t id,
                 const tg_ts_allow_t *allow) {
  if (f && f->kind != TG_TS_NONE && !f->refused) return true;
  if (!allow || !f || f->kind == TG_TS_NONE) return false;
  const uint64_t *bits =
      msg == TG_TS_MSG_TracePacket ? allow->packet : allow->interned;
  return id < TG_TS_ALLOW_MAX && (bits[id / 64] >> (id % 64)) & 1;
}

/* The screened messages by name, with their fields' names. */
static const struct {
  uint32_t msg;
  const char *name;
  const tg_ts_name_t *fields;
  size_t n_fields;
} kScreened[] = {
    {TG_TS_MSG_TracePacket, "TracePacket", tg_ts_names_TracePacket,
     sizeof(tg_ts_names_TracePacket) / sizeof(tg_ts_names_TracePacket[0])},
    {TG_TS_MSG_InternedData, "InternedData", tg_ts_names_InternedData,
     sizeof(tg_ts_names_InternedData) / sizeof(tg_ts_names_InternedData[0])},
};
#define N_SCREENED (sizeof(kScreened) / sizeof(kScreened[0]))

const char *tg_trace_schema_message_name(uint32_t msg) {
  for (size_t i = 0; i < N_SCREENED; i++)
    if (kScreened[i].msg == msg) return kScreened[i].name;
  return "?";
}

const char *tg_trace_schema_field_name(uint32_t msg, uint32_t id) {
  for (size_t i = 0; i < N_SCREENED; i++) {
    if (kScreened[i].msg != msg) continue;
    for (size_t k = 0; k < kScreened[i].n_fields; k++)
      if (kScreened[i].fields[k].number == id) return kScreened[i].fields[k].name;
  }
  return NULL;
}

int tg_trace_schema_allow(tg_ts_allow_t *allow, const char *names,
                          char *bad, size_t bad_cap) {
  memset(allow, 0, sizeof(*allow));
  if (bad_cap) bad[0] = 0;
  const char *at = names;
  while (at && *at) {
    const char *end = strchr(at, ',');
    size_t len = end ? (size_t)(end - at) : strlen(at);
    const char *name = at;
    at = end ? end + 1 : NULL;
    while (len && (*name == ' ' || *name == '\t')) name++, len--;
    while (len && (name[len - 1] == ' ' || name[len - 1] == '\t')) len--;
    if (!len) continue;
    /* "interned_data.NAME" names a field of InternedData. */
    static const char prefix[] = "interned_data.";
    const tg_ts_name_t *table = tg_ts_names_TracePacket;
    size_t count = sizeof(tg_ts_names_TracePacket) / sizeof(table[0]);
    uint64_t *bits = allow->packet;
    if (len > sizeof(prefix) - 1 &&
        !strncmp(name, prefix, sizeof(prefix) - 1)) {
      name += sizeof(prefix) - 1;
      len -= sizeof(prefix) - 1;
      table = tg_ts_names_InternedData;
      count = sizeof(tg_ts_names_InternedData) / sizeof(table[0]);
      bits = allow->interned;
    }
    size_t i;
    for (i = 0; i < count; i++)
      if (strlen(table[i].name) == len && !memcmp(table[i].name, name, len))
        break;
    if (i == count || table[i].number >= TG_TS_ALLOW_MAX) {
      if (bad_cap) {
        size_t k = len < bad_cap - 1 ? len : bad_cap - 1;
        memcpy(bad, name, k);
        bad[k] = 0;
      }
      return -1;
    }
    bits[table[i].number / 64] |= 1ull << (table[i].number % 64);
  }
  return 0;
}

tg_trace_schema_verdict_t tg_trace_schema_check(const uint8_t *p, size_t n,
                                                const tg_ts_allow_t *allow,
                                                tg_ts_clocks_t *clocks) {
  clocks->flags = 0;
  clocks->refused = clocks->refused_in = 0;
  clocks->ids = clocks->odd = clocks->primary = 0;
  clocks->n_ext = 0;
  clocks->ftrace_clock = clocks->ftrace_ts = clocks->boot_ts = 0;
  struct {
    tg_pb_reader_t r;
    uint32_t msg;
    frame_state_t st;
  } stack[TG_TRACE_SCHEMA_MAX_DEPTH];
  size_t depth = 1;
  tg_pb_reader_init(&stack[0].r, p, n);
  stack[0].msg = ROOT;
  frame_start(ROOT, &stack[0].st, false);
  while (depth) {
    tg_pb_field_t fld;
    int rv = tg_pb_reader_next(&stack[depth - 1].r, &fld);
    if (rv < 0) return TG_TS_MALFORMED;
    if (rv == 0) {
      depth--;
      if ((rules_of[stack[depth].msg] & RULES) &&
          !end_ok(stack[depth].msg, &stack[depth].st,
                  depth ? &stack[depth - 1].st : NULL, clocks))
        return TG_TS_VALUE;
      continue;
    }
    uint32_t msg = stack[depth - 1].msg;
    const tg_ts_slot_t *f = find(msg, fld.id);
    uint8_t rules = rules_of[msg];
    if ((rules & SCREENED) && !kept(msg, f, fld.id, allow)) {
      clocks->refused = fld.id;
      clocks->refused_in = msg;
      return TG_TS_NOT_ALLOWED;
    }
    if (!f || f->kind == TG_TS_NONE) continue; /* read by no one */
    if (!wire_ok(f->kind, fld.type)) return TG_TS_WIRE_TYPE;
    if ((rules & RULES) && !value_ok(msg, &fld, &stack[depth - 1].st, clocks))
      return TG_TS_VALUE;
    if (f->kind != TG_TS_M) continue;
    if (depth == TG_TRACE_SCHEMA_MAX_DEPTH) return TG_TS_TOO_DEEP;
    tg_pb_reader_init(&stack[depth].r, fld.data, fld.size);
    stack[depth].msg = f->child;
    frame_start(f->child, &stack[depth].st, depth == 1);
    depth++;
  }
  return TG_TS_OK;
}
