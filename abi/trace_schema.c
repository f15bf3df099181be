/* A TracePacket's wire types against Perfetto's trace proto; see
 * trace_schema.h. */
#include "abi/trace_schema.h"

#include <stdbool.h>

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
  uint16_t child; /* the message of a TG_TS_M field */
} tg_ts_slot_t;

/* A message's slots: tg_ts_slots[first + number] for number < n. */
typedef struct tg_ts_message {
  uint32_t first, n;
} tg_ts_message_t;

#include "abi/trace_schema_table.inc"

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
  MONO_RAW = 1u << 3,    /* FtraceEventBundle: ftrace_clock is 4 */
  HAS_RAW = 1u << 4,     /* ClockSnapshot: a clock 5 */
  HAS_BOOT = 1u << 5,    /* ClockSnapshot: a clock 6 */
};

/* What a message's end is judged on. */
typedef struct frame_state {
  uint8_t flags;
  uint64_t start, end; /* Mapping: its last start and end (0 if none) */
} frame_state_t;

static void frame_start(uint32_t msg, frame_state_t *st) {
  st->flags = msg == TG_TS_MSG_FtraceStats ? NEED_PHASE : 0;
  st->start = st->end = 0;
}

/* The field |fld| of message |msg|, of the right wire type: false when its
 * value is one trace processor cannot take; |st| as above. */
static bool value_ok(uint32_t msg, const tg_pb_field_t *fld,
                     frame_state_t *st) {
  uint64_t v = fld->value;
  switch (msg) {
    case TG_TS_MSG_TracePacket:
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
         * the last with a ClockSnapshot before it (trace_schema.h). */
        st->flags = (uint8_t)(v == 4 ? st->flags | MONO_RAW
                                     : st->flags & ~MONO_RAW);
        return v == 0 || v == 2 || v == 4;
      }
      return true;
    case TG_TS_MSG_ClockSnapshot_Clock:
      if (fld->id == 1) st->start = v; /* clock_id: the last counts */
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

/* At the end of message |msg| (its parent's state |up|, NULL for the
 * packet): CHECKs fail on a string interned as 0 and on a mapping that
 * ends before it starts; the clock facts are gathered. */
static bool end_ok(uint32_t msg, const frame_state_t *st, frame_state_t *up,
                   unsigned *clocks) {
  switch (msg) {
    case TG_TS_MSG_FtraceStats: return !(st->flags & NEED_PHASE);
    case TG_TS_MSG_InternedString:
      return !(st->flags & HAS_STR) || (st->flags & HAS_IID);
    case TG_TS_MSG_Mapping: return st->start <= st->end;
    case TG_TS_MSG_FtraceEventBundle:
      /* Its events, compact_sched and timestamps are all converted. */
      if (st->flags & MONO_RAW) *clocks |= TG_TS_NEEDS_MONO_RAW;
      return true;
    case TG_TS_MSG_ClockSnapshot_Clock:
      if (up && st->start == 5) up->flags |= HAS_RAW;
      if (up && st->start == 6) up->flags |= HAS_BOOT;
      return true;
    case TG_TS_MSG_ClockSnapshot:
      if ((st->flags & (HAS_RAW | HAS_BOOT)) == (HAS_RAW | HAS_BOOT))
        *clocks |= TG_TS_SYNCS_MONO_RAW;
      return true;
    default: return true;
  }
}

tg_trace_schema_verdict_t tg_trace_schema_check(const uint8_t *p, size_t n,
                                                unsigned *clocks) {
  *clocks = 0;
  struct {
    tg_pb_reader_t r;
    uint32_t msg;
    frame_state_t st;
  } stack[TG_TRACE_SCHEMA_MAX_DEPTH];
  size_t depth = 1;
  tg_pb_reader_init(&stack[0].r, p, n);
  stack[0].msg = ROOT;
  frame_start(ROOT, &stack[0].st);
  while (depth) {
    tg_pb_field_t fld;
    int rv = tg_pb_reader_next(&stack[depth - 1].r, &fld);
    if (rv < 0) return TG_TS_MALFORMED;
    if (rv == 0) {
      depth--;
      if (!end_ok(stack[depth].msg, &stack[depth].st,
                  depth ? &stack[depth - 1].st : NULL, clocks))
        return TG_TS_VALUE;
      continue;
    }
    uint32_t msg = stack[depth - 1].msg;
    const tg_ts_slot_t *f = find(msg, fld.id);
    if (!f || f->kind == TG_TS_NONE) continue; /* read by no one */
    if (!wire_ok(f->kind, fld.type)) return TG_TS_WIRE_TYPE;
    if (!value_ok(msg, &fld, &stack[depth - 1].st)) return TG_TS_VALUE;
    if (f->kind != TG_TS_M) continue;
    if (depth == TG_TRACE_SCHEMA_MAX_DEPTH) return TG_TS_TOO_DEEP;
    tg_pb_reader_init(&stack[depth].r, fld.data, fld.size);
    stack[depth].msg = f->child;
    frame_start(f->child, &stack[depth].st);
    depth++;
  }
  return TG_TS_OK;
}
