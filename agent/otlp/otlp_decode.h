/* SPDX-License-Identifier: Apache-2.0 */
/* Decoders of OTLP/HTTP trace export bodies (ExportTraceServiceRequest),
 * protobuf and JSON, into otlp_span.h's sink; and the body's way in, from
 * Content-Type and Content-Encoding to a decoder.
 *
 * Bodies are untrusted: every length, id and count is checked before use,
 * nesting is bounded (protobuf: AnyValue's arrays and maps are not
 * unpacked, proto/otlp/common.proto; JSON: jansson's depth limit and a
 * cap on the tree), a gzip body inflates to at most a cap, and no input
 * makes a decoder abort. Pure: no I/O, no global state; any thread.
 */
#ifndef TRACEGATE_AGENT_OTLP_DECODE_H
#define TRACEGATE_AGENT_OTLP_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/otlp/otlp_span.h"
#include "common/buf.h"

/* The most a gzip body may inflate to (8 times the default --max-body;
 * an SDK's batch of 512 spans is well under 1 MiB), and the most memory a
 * decoded body may take: jansson's tree of a JSON body, protobuf-c's
 * unpacked message. Past either: 413. One request is decoded at a time,
 * so these bound the receiver's memory with --max-body times its
 * connections (docs/otlp.md, "Bad input"). */
#define OTLP_MAX_INFLATED (32u << 20)
#define OTLP_MAX_JSON_TREE (128u << 20)
#define OTLP_MAX_PB_TREE (128u << 20)

/* Decodes an ExportTraceServiceRequest in protobuf (|len| bytes at
 * |body_untrusted|, borrowed for the call) into |sink|, and what it found
 * into |*res| (zeroed first). Returns 0 (some spans may be rejected: see
 * |res|), TG_EPARSE (not that message: nothing was handed to the sink),
 * -E2BIG (unpacked it would take more than OTLP_MAX_PB_TREE), or the
 * first error a sink call returned. */
int otlp_decode_pb(const uint8_t *body_untrusted, size_t len,
                   const otlp_sink_t *sink, otlp_result_t *res);

/* The same for OTLP/JSON: the protobuf JSON mapping with OTLP's rules
 * (lowerCamelCase keys, trace and span ids as hex, enums as integers or
 * their names, 64-bit integers as numbers or decimal strings). A body
 * that is JSON but not that message (a field of the wrong type) is
 * TG_EPARSE too, and then a sink may already have had the spans before
 * the fault: the caller answers 400 and counts none of them as taken. */
int otlp_decode_json(const uint8_t *body_untrusted, size_t len,
                     const otlp_sink_t *sink, otlp_result_t *res);

/* A request's body as it came, and what answering it needs. */
typedef struct otlp_body {
  const char *content_type;     /* "" if none */
  const char *content_encoding; /* "" if none */
  const uint8_t *data;
  size_t len;
} otlp_body_t;

/* Decodes |body| whichever way its headers say: application/x-protobuf
 * or application/json (parameters such as "; charset=utf-8" allowed),
 * Content-Encoding identity, none or gzip. |scratch| (the caller's, its
 * cap at least OTLP_MAX_INFLATED) holds an inflated body. Returns the HTTP
 * status to answer: 200 (|res| filled, partial success in it), 400
 * (malformed body, or a gzip stream that is not), 413 (inflates past the
 * cap), 415 (a content type or encoding not served), 500 (out of memory
 * or a sink's error, in |*err|); |*reason| (static) says why for a
 * status other than 200. */
int otlp_decode_body(const otlp_body_t *body, tg_buf_t *scratch,
                     const otlp_sink_t *sink, otlp_result_t *res,
                     const char **reason, int *err);

/* --- shared by the two decoders (otlp_decode_common.c) ------------------ */

/* Room for one span's and one resource's borrowed arrays. */
typedef struct otlp__scratch {
  otlp_attr_t res_attrs[OTLP_MAX_ATTRS];
  otlp_attr_t attrs[OTLP_MAX_ATTRS];
  otlp_event_t events[OTLP_MAX_EVENTS];
  otlp_attr_t ev_attrs[OTLP_MAX_EVENT_ATTRS];
  otlp_link_t links[OTLP_MAX_LINKS];
} otlp__scratch_t;

/* Fills r->service and r->pid from r->attrs. */
void otlp__resource_names(otlp_resource_t *r);
/* Hands |s| to the sink when its ids are valid (else counts it rejected).
 * |ids_ok| is the decoder's verdict on the ids' sizes. */
int otlp__emit_span(const otlp_sink_t *sink, otlp_span_t *s, bool ids_ok,
                    otlp_result_t *res);

#endif /* TRACEGATE_AGENT_OTLP_DECODE_H */
