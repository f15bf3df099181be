/* A TracePacket's wire types against Perfetto's trace proto.
 *
 * Perfetto's trace processor reads each field where its schema says,
 * whatever wire type the field came with: an integer field that arrives
 * length-delimited reads as the low bits of the pointer to its bytes, and
 * such values have crashed it (an enum used as an index) or made it refuse
 * the whole trace. A merged trace holds many hosts' packets, so one host's
 * packet of that kind would cost the others their data. This check lets
 * the merge leave such packets out.
 *
 * The schema is a table of numbers (consumer/fleet/trace_schema_table.inc, generated
 * by consumer/fleet/trace_schema_gen.py from the .proto of Perfetto v50.1): for every
 * message reachable from TracePacket, its fields' numbers, the wire type
 * each must have, and the message a nested field holds. Below the
 * screened messages (below), fields the table does not know (newer ones,
 * extensions) pass unread, as trace processor skips them. A repeated
 * number field comes as its .proto declares it:
 * packed into one run when [packed = true], one by one otherwise.
 *
 * On top of the wire types, a few values of the right type that trace
 * processor v50.1 refuses the trace for or crashes on (trace_schema.c,
 * "values"; docs/merge.md says how they were found).
 *
 * Pure: no allocation, no I/O; the walk keeps its stack on the C stack.
 */
#ifndef TRACEGATE_ABI_TRACE_SCHEMA_H
#define TRACEGATE_ABI_TRACE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The screened messages: a field of TracePacket or InternedData that the
 * allowlist (consumer/fleet/trace_allowlist.txt, compiled into the table) does not
 * keep, whether Perfetto's schema knows it or not, refuses the packet
 * (TG_TS_NOT_ALLOWED), unless the operator trusts the producers with it
 * (tg_ts_allow_t). Below them, a kept field's message is checked whole. */

/* Nested messages deeper than this are refused: a legitimate trace nests
 * a few levels (debug annotations the most), and the walk's stack is
 * bounded by it. */
#define TG_TRACE_SCHEMA_MAX_DEPTH 48

/* Why a packet was refused. */
typedef enum tg_trace_schema_verdict {
  TG_TS_OK = 0,
  TG_TS_MALFORMED,  /* does not decode as protobuf */
  TG_TS_WIRE_TYPE,  /* a known field with another wire type */
  TG_TS_TOO_DEEP,   /* nesting past TG_TRACE_SCHEMA_MAX_DEPTH */
  TG_TS_VALUE,      /* a value trace processor refuses or crashes on */
  TG_TS_NOT_ALLOWED, /* a field the allowlist does not keep */
} tg_trace_schema_verdict_t;

/* Fields of the screened messages (TracePacket, InternedData) the
 * operator trusts the producers with beyond the allowlist
 * (consumer/fleet/trace_allowlist.txt), by field number. */
#define TG_TS_ALLOW_MAX 1024
typedef struct tg_ts_allow {
  uint64_t packet[TG_TS_ALLOW_MAX / 64];
  uint64_t interned[TG_TS_ALLOW_MAX / 64];
} tg_ts_allow_t;

/* *allow from |names|: "NAME[,NAME]...", each a TracePacket field name of
 * Perfetto's schema, or "interned_data.NAME" for a field of InternedData
 * (spaces around a name are dropped; NULL or "" trusts nothing more). 0,
 * or -1 with the first name not known in |bad| (cut to |bad_cap|). */
int tg_trace_schema_allow(tg_ts_allow_t *allow, const char *names, char *bad,
                          size_t bad_cap);

/* What a packet says about clocks, gathered in the same walk, for the
 * merge's clock model (consumer/fleet/clock_model.h), which judges across
 * packets whether trace processor can place the packet's times. Only the
 * packet's own ClockSnapshot (field 6) and ftrace bundle (field 1) count:
 * ClockSnapshots nested elsewhere (RemoteClockSync) are not read here.
 * Filled only as far as |flags| says; clocks from 64 up are not listed
 * one by one. */
enum {
  TG_TS_SNAPSHOT = 1u << 0,      /* a ClockSnapshot */
  TG_TS_SNAP_REJECTED = 1u << 1, /* one trace processor refuses whole: a
                                    global clock is_incremental, a clock
                                    named twice */
  TG_TS_SNAP_SEQ_CLOCK = 1u << 2, /* names a clock of 64..127 */
  TG_TS_SNAP_PRIMARY = 1u << 3,  /* primary_trace_clock set (in .primary) */
  TG_TS_BUNDLE = 1u << 4,        /* an ftrace bundle */
  TG_TS_BUNDLE_SNAP = 1u << 5,   /* with ftrace_timestamp and boot_timestamp */
  TG_TS_TWICE = 1u << 6,         /* field 1 or 6 more than once */
  TG_TS_SNAP_CUSTOM = 1u << 7,   /* names a clock from 128 */
  TG_TS_SNAP_MANY = 1u << 8,     /* names more than TG_TS_SNAP_EXT clocks
                                    from 64: not all listed in .ext */
};

/* Clocks from 64 a snapshot's .ext lists (Perfetto's SDK names one per
 * sequence). */
#define TG_TS_SNAP_EXT 8

typedef struct tg_ts_clocks {
  unsigned flags;
  /* ClockSnapshot: the clocks under 64 it names, which of them say a
   * unit other than 1 ns or is_incremental, their timestamps (only the
   * entries named are written), its primary_trace_clock. */
  uint64_t ids, odd;
  uint64_t ts[64];
  uint64_t primary;
  /* The clocks from 64 it names, with their unit_multiplier_ns (1 when
   * absent) and is_incremental, as trace processor registers them. */
  struct {
    uint64_t id, unit;
    bool inc;
  } ext[TG_TS_SNAP_EXT];
  uint32_t n_ext;
  /* The bundle: ftrace_clock (0 when absent), and its own clock pair. */
  uint64_t ftrace_clock;
  uint64_t ftrace_ts, boot_ts;
  /* TG_TS_NOT_ALLOWED: the number of the field refused, and the screened
   * message it is a field of (refused_in, for tg_trace_schema_message_name:
   * TracePacket, or InternedData under its field 12). */
  uint32_t refused, refused_in;
} tg_ts_clocks_t;

/* Checks the TracePacket at |p| (|n| bytes, borrowed, untrusted), with
 * the fields |allow| trusts beyond the allowlist (NULL: none). Fills
 * *clocks as above (flags 0 for a packet saying nothing of clocks). */
tg_trace_schema_verdict_t tg_trace_schema_check(const uint8_t *p, size_t n,
                                                const tg_ts_allow_t *allow,
                                                tg_ts_clocks_t *clocks);

/* The name of screened message |msg| (a refused_in): "TracePacket",
 * "InternedData"; "?" for any other number. Static. */
const char *tg_trace_schema_message_name(uint32_t msg);

/* The name Perfetto's schema gives field |id| of screened message |msg|
 * ("v8_isolate" for InternedData's 35), NULL when it has none (a field
 * newer than the schema, or not a screened message). Static. */
const char *tg_trace_schema_field_name(uint32_t msg, uint32_t id);

#endif /* TRACEGATE_ABI_TRACE_SCHEMA_H */
