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
 * The schema is a table of numbers (abi/trace_schema_table.inc, generated
 * by abi/trace_schema_gen.py from the .proto of Perfetto v50.1): for every
 * message reachable from TracePacket, its fields' numbers, the wire type
 * each must have, and the message a nested field holds. Fields the table
 * does not know (newer ones, extensions) pass unread, as trace processor
 * skips them. A repeated number field comes as its .proto declares it:
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

#include <stddef.h>
#include <stdint.h>

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
} tg_trace_schema_verdict_t;

/* What a packet says about its sequence's clocks, for the one check that
 * needs the packets before it: trace processor refuses the whole trace at
 * an ftrace bundle on MONOTONIC_RAW (ftrace_clock 4) when no ClockSnapshot
 * of that machine has yet tied MONOTONIC_RAW (5) to BOOTTIME (6). The
 * caller keeps, per host, whether it has seen one. */
enum {
  TG_TS_SYNCS_MONO_RAW = 1u << 0, /* a ClockSnapshot with clocks 5 and 6 */
  TG_TS_NEEDS_MONO_RAW = 1u << 1, /* an ftrace bundle on MONOTONIC_RAW */
};

/* Checks the TracePacket at |p| (|n| bytes, borrowed, untrusted). Sets
 * *clocks to the TG_TS_*_MONO_RAW bits above (0 for none). */
tg_trace_schema_verdict_t tg_trace_schema_check(const uint8_t *p, size_t n,
                                                unsigned *clocks);

#endif /* TRACEGATE_ABI_TRACE_SCHEMA_H */
