/* W3C Trace Context (level 1) for the agent's flows: the `traceparent`
 * header, and the flow id both ends of a request derive from it.
 *
 *   traceparent: 00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01
 *                |  trace-id (32 lowercase hex)      parent-id (16)   flags
 *                version (2 lowercase hex)
 *
 * A client makes a context (tg_trace_context_new, or tg_trace_context_child
 * of the one it is serving), sends it formatted, and marks its slice with
 * TG_FLOW(tg_flow_id_from_context(ctx.trace_id, ctx.parent_id)); the server
 * parses the header it got and marks its slice with TG_TERMINATING_FLOW of
 * the same derivation. Nothing else is shared: the id comes from the
 * header alone, so a trace processor joins the two slices (its `flow`
 * table) when both processes were recorded in one trace.
 *
 * Parsing and formatting are pure (no allocation, no I/O) and take any
 * bytes: the header is untrusted input. Only tg_trace_context_new and
 * tg_trace_context_child make a system call (getrandom); call them per
 * request, not per event.
 */
#ifndef TRACEGATE_TRACE_CONTEXT_H
#define TRACEGATE_TRACE_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "tracegate/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* trace-flags bit 0: the caller may have recorded this request. The other
 * bits have no meaning in level 1. */
#define TG_TRACE_FLAG_SAMPLED 0x01u

/* The header as 55 characters, and the buffer tg_traceparent_format fills
 * (with the terminating NUL). */
#define TG_TRACEPARENT_LEN 55
#define TG_TRACEPARENT_BUF 56

typedef struct tg_trace_context {
  uint8_t version;      /* as parsed; contexts made here are version 0 */
  uint8_t trace_id[16]; /* in the order the hex spells them; never all 0 */
  uint8_t parent_id[8]; /* the sender's span id, as spelled; never all 0 */
  uint8_t flags;        /* trace-flags, e.g. TG_TRACE_FLAG_SAMPLED */
} tg_trace_context_t;

/* Parses the value of a traceparent header: |len| bytes at |s| (borrowed
 * for the call; no NUL needed; the caller has trimmed the HTTP field's
 * surrounding whitespace). Fills |*out| (the caller's) only on success.
 *
 * Version 00 is exactly 55 characters. A higher version is read as level 1
 * says: at least 55 characters, the first 55 laid out as version 00, and
 * a '-' right after the flags when there is more (what follows is
 * ignored). Returns 0, or:
 *   TG_EPARSE  not that grammar: a length, a dash, or a character that is
 *              not lowercase hex (uppercase is refused);
 *   -EINVAL    the grammar holds but a value is forbidden: version ff, an
 *              all-zero trace-id or an all-zero parent-id.
 * Either way the spec says to start a new trace. */
TG_EXPORT int tg_traceparent_parse(const char *s, size_t len,
                                   tg_trace_context_t *out);

/* Writes |ctx| (borrowed) as a version 00 header, the version this library
 * speaks whatever version was parsed, into |out| (the caller's): 55
 * lowercase characters and a NUL. */
TG_EXPORT void tg_traceparent_format(const tg_trace_context_t *ctx,
                                     char out[TG_TRACEPARENT_BUF]);

/* A fresh context in |*out| (the caller's): version 0, random trace-id and
 * parent-id (getrandom; never all zero), flags 0 (set
 * TG_TRACE_FLAG_SAMPLED when this request is recorded). Returns 0 or
 * -errno of getrandom; |*out| is untouched on failure. */
TG_EXPORT int tg_trace_context_new(tg_trace_context_t *out);

/* The context of an outgoing call made while serving |parent| (borrowed;
 * may equal |out|): version 0, the same trace-id and flags, a fresh random
 * parent-id.
 * Returns 0 or -errno of getrandom; |*out| is untouched on failure. */
TG_EXPORT int tg_trace_context_child(const tg_trace_context_t *parent,
                                     tg_trace_context_t *out);

/* The flow id of the hop that sent |trace_id| and |span_id| (the header's
 * parent-id); both borrowed for the call. Stable across versions of this
 * library and computable in any language:
 *
 *   m    = trace_id[0..15] || span_id[0..7]       (24 bytes, as spelled)
 *   key  = the 16 ASCII bytes "tracegate-flow-1"
 *   h    = SipHash-2-4(key, m), the 64-bit result of the reference
 *          implementation (its 8 output bytes read little-endian)
 *   id   = h, or 1 when h is 0 (a flow id is never 0)
 *
 * e.g. trace-id 4bf92f3577b34da6a3ce929d0cf0e4f7 and parent-id
 * 00f067aa0ba902b7 give 0x881ee84c410d96e9. Two different hops share an
 * id with probability 2^-64 per pair; ids from other sources (TG_FLOW of
 * a counter) may meet these by the same chance. */
TG_EXPORT uint64_t tg_flow_id_from_context(const uint8_t trace_id[16],
                                           const uint8_t span_id[8]);

#ifdef __cplusplus
}
#endif

#endif /* TRACEGATE_TRACE_CONTEXT_H */
