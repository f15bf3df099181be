/* Where the probes' TracePackets go: an instance's trace writer in
 * tracegate-probes, a plain buffer in tests and benches. One shape for
 * every data source, so the code that writes packets never knows which.
 */
#ifndef TRACEGATE_PROBES_PROBES_SINK_H
#define TRACEGATE_PROBES_PROBES_SINK_H

#include "tracegate/agent.h"
#include "tracegate/pb_writer.h"

/* begin() returns the writer of a new TracePacket (NULL: drop this one),
 * end() completes it. */
typedef struct tg_probes_sink {
  tg_pbw_t *(*begin)(void *ctx);
  void (*end)(void *ctx);
  void *ctx;
} tg_probes_sink_t;

/* Instance |inst| of data source |ds|, as a sink's ctx. */
typedef struct tg_probes_ds_target {
  tg_ds_t *ds;
  unsigned inst;
} tg_probes_ds_target_t;

static inline tg_pbw_t *tg_probes_ds_begin(void *ctx) {
  tg_probes_ds_target_t *t = ctx;
  return tg_ds_packet_begin(t->ds, t->inst);
}

static inline void tg_probes_ds_end(void *ctx) {
  tg_probes_ds_target_t *t = ctx;
  tg_ds_packet_end(t->ds, t->inst);
}

/* The sink into |t|'s instance; |t| must outlive its use. */
static inline tg_probes_sink_t tg_probes_ds_sink(tg_probes_ds_target_t *t) {
  return (tg_probes_sink_t){tg_probes_ds_begin, tg_probes_ds_end, t};
}

#endif /* TRACEGATE_PROBES_PROBES_SINK_H */
