/* SPDX-License-Identifier: Apache-2.0 */
/* One decoded OTLP span, the same whichever body it came in (protobuf or
 * JSON), handed to a sink one at a time.
 *
 *   body -> otlp_decode_pb / otlp_decode_json -> sink.resource(r)
 *                                               sink.span(s) ... (its spans)
 *                                               sink.resource(r2) ...
 *
 * Everything a sink gets is borrowed for the call: strings point into the
 * decoder's unpacked message (protobuf-c's, jansson's), which is freed when
 * the decode returns. Strings are (pointer, length) and need not end in a
 * NUL. The decoders have checked every id's length and every count against
 * the limits below before a sink sees it; what is past a limit is left out
 * and counted in the span's dropped_* fields.
 */
#ifndef TRACEGATE_AGENT_OTLP_SPAN_H
#define TRACEGATE_AGENT_OTLP_SPAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What one span may carry into the trace; the rest is counted as dropped. */
#define OTLP_MAX_ATTRS 64        /* a span's or a resource's attributes */
#define OTLP_MAX_EVENTS 32       /* per span */
#define OTLP_MAX_EVENT_ATTRS 256 /* all of one span's events together */
#define OTLP_MAX_LINKS 8         /* per span (the agent's flow limit) */
/* A string value longer than this is cut to it (and marked, otlp_write.c). */
#define OTLP_MAX_VALUE 1024

typedef struct otlp_str {
  const char *p;
  size_t n;
} otlp_str_t;

enum otlp_value_type {
  OTLP_V_NONE = 0, /* absent or empty AnyValue */
  OTLP_V_STRING,
  OTLP_V_BOOL,
  OTLP_V_INT,
  OTLP_V_DOUBLE,
  OTLP_V_BYTES,  /* s: the raw bytes */
  OTLP_V_ARRAY,  /* s: protobuf: the ArrayValue's bytes; JSON: its text */
  OTLP_V_KVLIST, /* s: protobuf: the KeyValueList's bytes; JSON: its text */
};

typedef struct otlp_attr {
  otlp_str_t key;
  int type; /* enum otlp_value_type */
  bool json_text; /* ARRAY/KVLIST: s is JSON text (else protobuf bytes) */
  union {
    int64_t i;
    double d;
    bool b;
  } v;
  otlp_str_t s; /* STRING, BYTES, ARRAY, KVLIST */
} otlp_attr_t;

typedef struct otlp_event {
  uint64_t time_unix_ns;
  otlp_str_t name;
  const otlp_attr_t *attrs;
  size_t n_attrs;
} otlp_event_t;

typedef struct otlp_link {
  uint8_t trace_id[16];
  uint8_t span_id[8];
} otlp_link_t;

/* Span.SpanKind */
enum otlp_kind {
  OTLP_KIND_UNSPECIFIED = 0,
  OTLP_KIND_INTERNAL = 1,
  OTLP_KIND_SERVER = 2,
  OTLP_KIND_CLIENT = 3,
  OTLP_KIND_PRODUCER = 4,
  OTLP_KIND_CONSUMER = 5,
};

/* Span.flags bits: the parent is remote, and that bit is known. */
#define OTLP_FLAG_HAS_IS_REMOTE 0x100u
#define OTLP_FLAG_IS_REMOTE 0x200u

typedef struct otlp_span {
  uint8_t trace_id[16]; /* never all zero */
  uint8_t span_id[8];   /* never all zero */
  uint8_t parent_span_id[8];
  bool has_parent;
  uint32_t flags;
  otlp_str_t name;
  int kind;        /* enum otlp_kind; other values as sent */
  uint64_t start_unix_ns, end_unix_ns;
  const otlp_attr_t *attrs;
  size_t n_attrs;
  const otlp_event_t *events;
  size_t n_events;
  const otlp_link_t *links;
  size_t n_links;
  int status_code; /* Status.StatusCode: 0 unset, 1 ok, 2 error */
  otlp_str_t status_message;
  /* Left out here (over the limits) plus what the sender says it dropped. */
  uint64_t dropped_attrs, dropped_events, dropped_links;
} otlp_span_t;

/* The Resource of the spans that follow. */
typedef struct otlp_resource {
  otlp_str_t service; /* service.name; "unknown_service" when absent */
  int64_t pid;        /* process.pid; 0 when absent or not a number */
  const otlp_attr_t *attrs;
  size_t n_attrs;
} otlp_resource_t;

/* What a decoder calls. Each returns 0 to go on, or a negative error that
 * ends the decode with it. span() says whether it took the span through
 * |*rejected| (true: refused, counted in the result's rejected_spans). */
typedef struct otlp_sink {
  int (*resource)(void *ctx, const otlp_resource_t *r);
  int (*span)(void *ctx, const otlp_span_t *s, bool *rejected);
  void *ctx;
  /* Optional (NULL: not told): a span of the current resource was
   * rejected for its ids and not handed to span(). */
  void (*invalid)(void *ctx);
} otlp_sink_t;

/* What a decode found, for the response and the counters. */
typedef struct otlp_result {
  uint64_t spans;          /* spans handed to the sink */
  uint64_t rejected_spans; /* invalid ones (ids) plus those the sink refused */
  uint64_t invalid_spans;  /* of rejected: ids of a wrong size or all zero */
  const char *reason;      /* a static string when something was rejected */
} otlp_result_t;

#endif /* TRACEGATE_AGENT_OTLP_SPAN_H */
