/* The clock snapshots a session keeps until its next read, as Perfetto's
 * service keeps them (TracingSession.clock_snapshot_ring_buffer).
 *
 * Owns: tg_clock_ring_t, a bounded queue of snapshots not yet written into
 * the trace. Must never read a clock itself outside tg__clock_sample_now:
 * the ring is given its samples, so tests drive it with made-up clocks.
 *
 * Policy (tracing_service_impl.cc, MaybeSnapshotClocksIntoRingBuffer and
 * SnapshotClocks): a snapshot is offered at the start of tracing, every
 * snapshot_interval_ms (10 s by default) while tracing, when a trigger
 * fires and when tracing is disabled. It is kept when nothing is pending,
 * or when a clock moved at least 10 ms away from BOOTTIME since the newest
 * pending one (the older snapshot covers more of the buffered data, so it
 * is kept while it is still accurate); past 16 the oldest goes. The read
 * writes every pending snapshot into the trace and empties the ring.
 */
#ifndef TRACEGATE_SERVICE_CLOCK_SNAPSHOTS_H
#define TRACEGATE_SERVICE_CLOCK_SNAPSHOTS_H

#include <stdbool.h>
#include <stdint.h>

#define TG_CLOCK_SNAPSHOT_CLOCKS 6
#define TG_CLOCK_SNAPSHOT_RING 16
#define TG_CLOCK_SNAPSHOT_DRIFT_NS 10000000 /* 10 ms, Perfetto's */
#define TG_CLOCK_SNAPSHOT_DEFAULT_INTERVAL_MS 10000u
#define TG_CLOCK_SNAPSHOT_MIN_INTERVAL_MS 10u

/* One reading of every clock; ns[0] is BOOTTIME, the others in the order
 * of tg_clock_snapshot_builtin. */
typedef struct tg_clock_sample {
  uint64_t ns[TG_CLOCK_SNAPSHOT_CLOCKS];
} tg_clock_sample_t;

/* BuiltinClock ids of ns[0..5]: BOOTTIME, MONOTONIC, MONOTONIC_COARSE,
 * MONOTONIC_RAW, REALTIME, REALTIME_COARSE. */
extern const uint32_t tg_clock_snapshot_builtin[TG_CLOCK_SNAPSHOT_CLOCKS];

typedef struct tg_clock_ring {
  tg_clock_sample_t s[TG_CLOCK_SNAPSHOT_RING];
  unsigned head, n;
} tg_clock_ring_t;

void tg__clock_sample_now(tg_clock_sample_t *out);
/* Keeps |now| under the policy above; true if it was kept. */
bool tg__clock_ring_offer(tg_clock_ring_t *r, const tg_clock_sample_t *now);
/* Removes the oldest pending snapshot into |out|: true, or false if none. */
bool tg__clock_ring_take(tg_clock_ring_t *r, tg_clock_sample_t *out);

#endif /* TRACEGATE_SERVICE_CLOCK_SNAPSHOTS_H */
