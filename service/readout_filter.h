/* A session's trace filter (TraceConfig.trace_filter) between the read-out
 * and its sink, and the TraceStats.filter_stats it counts.
 *
 * As Perfetto's service: every packet that leaves the session, its own
 * service packets too, goes through the filter whole (trusted fields
 * included); a packet the filter finds malformed is dropped and counted in
 * filter_errors; a packet the filter empties still counts as a packet (a
 * trace file gets it as an empty TracePacket, ReadBuffers sends nothing
 * for it). Compression, when asked for, comes after the filter.
 *
 * Owns: tg_readout_filter_t (the filter, its output buffer, its stats),
 * one per session that has a filter, NULL otherwise. Never touches the
 * session: readout.c hands it packets and the buffer they came from.
 */
#ifndef TRACEGATE_SERVICE_READOUT_FILTER_H
#define TRACEGATE_SERVICE_READOUT_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb/common/trace_stats.pb-c.h"
#include "pb/config/trace_config.pb-c.h"
#include "service/service.h"
#include "service/trace_filter.h"

/* The read-out's packet callback (readout.h's tg_readout_emit_fn). */
typedef int (*tg_readout_filter_sink_fn)(void *ctx, const uint8_t *const *pieces,
                                         const size_t *lens, unsigned n,
                                         unsigned n_stable, size_t total);

typedef struct tg_readout_filter {
  tg_trace_filter_t *f;
  uint64_t input_packets, input_bytes, output_bytes, errors, time_taken_ns;
  /* Input minus output per buffer; n_buffers_seen: 1 + the highest buffer
   * a packet came from (service packets have none). */
  uint64_t discarded[TG_SERVICE_MAX_BUFFERS_PER_SESSION];
  size_t n_buffers_seen;
  /* The pass under way (tg__readout_filter_begin). */
  tg_readout_filter_sink_fn sink;
  void *sink_ctx;
  bool keep_empty;
  int buffer; /* buffer of the next packet, -1: a service packet */
} tg_readout_filter_t;

/* The filter |c|'s trace_filter asks for, into |*out| (NULL when the
 * config has none; owned by the caller, free with tg__readout_filter_free).
 * bytecode_v2 is used when set, else bytecode. Returns 0; -EINVAL with the
 * reason in |err| when the bytecode or a string rule is refused; -ENOMEM. */
int tg__readout_filter_new(tg_readout_filter_t **out,
                           const Perfetto__Protos__TraceConfig *c, char *err,
                           size_t errlen);
/* Same filter, stats from zero (a clone's). NULL on -ENOMEM. */
tg_readout_filter_t *tg__readout_filter_dup(const tg_readout_filter_t *rf);
void tg__readout_filter_free(tg_readout_filter_t *rf);

/* A drain pass: packets given to tg__readout_filter_emit (ctx = |rf|) go,
 * filtered, to |sink|. |keep_empty|: a packet filtered to nothing still
 * goes to the sink (a file's; not ReadBuffers'). */
void tg__readout_filter_begin(tg_readout_filter_t *rf,
                              tg_readout_filter_sink_fn sink, void *sink_ctx,
                              bool keep_empty);
/* The buffer index the next packet comes from; -1 for a service packet. */
static inline void tg__readout_filter_from(tg_readout_filter_t *rf, int buffer) {
  if (rf) rf->buffer = buffer;
}
int tg__readout_filter_emit(void *ctx, const uint8_t *const *pieces,
                            const size_t *lens, unsigned n, unsigned n_stable,
                            size_t total);

/* Adds filter_stats to |st| (no-op for a NULL |rf|); what it adds is freed
 * by tg__readout_filter_stats_free. -ENOMEM. */
int tg__readout_filter_stats(const tg_readout_filter_t *rf,
                             Perfetto__Protos__TraceStats *st);
void tg__readout_filter_stats_free(Perfetto__Protos__TraceStats *st);

#endif /* TRACEGATE_SERVICE_READOUT_FILTER_H */
