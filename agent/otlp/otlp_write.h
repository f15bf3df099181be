/* SPDX-License-Identifier: Apache-2.0 */
/* Spans into TracePackets: the sink the decoders feed (otlp_span.h).
 *
 * Tracks. Each service (resource service.name and process.pid) is a
 * process track: ProcessDescriptor { pid, process_name = service.name };
 * a resource without process.pid gets a pid of its own above Linux's
 * largest (2^22), derived from the name, so it never joins a real
 * process of the host. Under it, one track per trace id, named "spans":
 * the spans of one request in one service nest as calls do, while two
 * requests served at once (which overlap without nesting) stay apart.
 * Descriptors are written again in each request that uses the track, so a
 * ring that wrapped still holds one near the spans.
 *
 * A span is a slice: a SLICE_BEGIN packet at its start and a SLICE_END at
 * its end (absolute timestamps on the trace clock, see below), its name,
 * and debug annotations: every attribute under its key, and otel.kind,
 * otel.trace_id, otel.span_id, otel.parent_span_id (hex),
 * otel.status_code and otel.status_message when set, otel.dropped_* when
 * something was left out. Each event is an instant on the same track with
 * its attributes.
 *
 * Flows join spans of other processes and hosts, with the W3C ids alone
 * (tracegate/trace_context.h's tg_flow_id_from_context, so a
 * tracegate-emit client and an OTel server join too): every span starts
 * the flow of its own (trace_id, span_id); a span whose parent is remote
 * (kind SERVER or CONSUMER, or flags say so) ends its parent's flow, and
 * each link ends the linked span's flow. Trace processors then draw an
 * arrow from a client span to the server span it caused, whichever hosts
 * recorded them, when one trace holds both.
 *
 * Clock. OTLP times are UNIX nanoseconds (CLOCK_REALTIME); the trace
 * clock is CLOCK_BOOTTIME. A request's spans are placed with the offset
 * REALTIME - BOOTTIME read when the request is written
 * (otlp_writer_begin), so a host's spans line up with its other data as
 * closely as the app's clock reads agreed with the kernel's. A time
 * before the boot is cut to 0.
 */
#ifndef TRACEGATE_AGENT_OTLP_WRITE_H
#define TRACEGATE_AGENT_OTLP_WRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/otlp/otlp_span.h"
#include "tracegate/pb_writer.h"

/* Where packets go: for each of the destinations in targets() (a bit
 * mask, read once per request), begin() opens a packet and returns its
 * writer (NULL: skip this one), end() closes it. tracegate-otlp's are the
 * agent's tg_ds_packet_begin/end over the data source's instances. */
typedef struct otlp_out {
  unsigned (*targets)(void *ctx);
  tg_pbw_t *(*begin)(void *ctx, unsigned inst);
  void (*end)(void *ctx, unsigned inst);
  void *ctx;
} otlp_out_t;

#define OTLP_TRACKS_SEEN 1024 /* descriptors remembered per request */

typedef struct otlp_writer {
  otlp_out_t out;
  unsigned mask;          /* this request's destinations */
  int64_t boot_offset_ns; /* REALTIME - BOOTTIME for this request */
  uint64_t proc_uuid;     /* the current resource's process track */
  int64_t pid;
  char service[256];      /* the current resource's name, cut */
  uint64_t seen[OTLP_TRACKS_SEEN]; /* open addressing; 0 is empty */
  size_t n_seen;
  /* Totals since init. */
  uint64_t spans, slices_cut_values;
} otlp_writer_t;

void otlp_writer_init(otlp_writer_t *w, const otlp_out_t *out);
/* Starts a request: reads the destinations and the clocks' offset
 * (|boot_offset_ns|, REALTIME - BOOTTIME, from otlp_boot_offset() or a
 * test's own) and forgets the tracks described. */
void otlp_writer_begin(otlp_writer_t *w, int64_t boot_offset_ns);
/* CLOCK_REALTIME - CLOCK_BOOTTIME now, in ns. */
int64_t otlp_boot_offset(void);
/* The sink to decode into (ctx = |w|). Its span() never rejects. */
otlp_sink_t otlp_writer_sink(otlp_writer_t *w);

/* A count the receiver keeps per service, written into the trace as a
 * counter track of the service's process (otlp_writer_counters). */
typedef struct otlp_counter {
  const char *name; /* a literal: "otlp.refused_spans" */
  uint64_t value;
} otlp_counter_t;

/* Writes the |n| counters of |c| at |boot_ns| (CLOCK_BOOTTIME) on
 * counter tracks named by them under the process track of |service| and
 * |pid| (the resource's), with their descriptors, to the destinations of
 * the last otlp_writer_begin. So the trace itself says what the receiver
 * refused, beside the spans it took. */
void otlp_writer_counters(otlp_writer_t *w, otlp_str_t service, int64_t pid,
                          uint64_t boot_ns, const otlp_counter_t *c, size_t n);

/* The process track's pid for a resource: its process.pid, else one
 * derived from |service| in [2^22, 2^31). Exposed for tests. */
int64_t otlp_track_pid(otlp_str_t service, int64_t pid);

#endif /* TRACEGATE_AGENT_OTLP_WRITE_H */
