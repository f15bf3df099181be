/* A host's floor on its rate while a snapshot reads its clone (snap.c,
 * the config's clone_min_rate): the verdict on one host's byte count over
 * time, kept apart from the loop so that it is judged on any clock.
 *
 * The measure: from the host's first answer to the clone (the clock
 * starts there, |start|), over every span of at least |window_ms| that
 * ends now, the host must have sent at least |min_bps| bytes per second
 * of that span. The caller samples the host's count so far at each look
 * (the snapshot's deadline tick); a sample is kept when at least an
 * eighth of the window passed since the last one kept, so that
 * COLL_RATE_SAMPLES of them always reach a window back. The span judged
 * runs from the newest sample at least |window_ms| old to now: between
 * |window_ms| and |window_ms| plus the sampling's spacing (an eighth of
 * the window, or the caller's tick if that is longer). Until a window has
 * passed since the start nothing is judged: a clone read whole in less
 * is never slow, however small.
 *
 * Pure: no clock of its own, no I/O, no allocation. Times are the
 * caller's monotonic milliseconds; a time earlier than the last one seen
 * is taken as that one (no span is ever negative).
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_RATE_FLOOR_H
#define TRACEGATE_COLLECTOR_DAEMON_RATE_FLOOR_H

#include <stdbool.h>
#include <stdint.h>

/* Samples one host keeps: spaced at least an eighth of the window apart,
 * at most 8 lie within the last window, so 16 always hold one older. */
#define COLL_RATE_SAMPLES 16u

typedef struct coll_rate_sample {
  int64_t t_ms;
  uint64_t bytes; /* the host's count at t_ms */
} coll_rate_sample_t;

typedef struct coll_rate {
  coll_rate_sample_t s[COLL_RATE_SAMPLES]; /* a ring, |head| the newest */
  unsigned n, head;
  int64_t last_ms; /* the latest time seen, kept or not */
} coll_rate_t;

/* What a look found: slow, and over which span how much was sent. */
typedef struct coll_rate_verdict {
  bool judged;     /* a whole window has passed since the start */
  bool slow;       /* judged, and |bytes| below min_bps over |span_ms| */
  uint64_t bytes;  /* sent over the span judged */
  int64_t span_ms; /* the span judged (0 when not judged) */
} coll_rate_verdict_t;

/* The clock starts: the host's first answer at |now_ms|, its count
 * |bytes| then. */
void coll_rate_start(coll_rate_t *r, int64_t now_ms, uint64_t bytes);

/* A look at |now_ms| with the host's count |bytes| (never less than an
 * earlier one's): samples it and judges the host against |min_bps| bytes
 * per second over a window of |window_ms| (> 0). min_bps 0 judges
 * nothing slow. */
coll_rate_verdict_t coll_rate_look(coll_rate_t *r, int64_t now_ms,
                                   uint64_t bytes, uint64_t min_bps,
                                   int64_t window_ms);

#endif /* TRACEGATE_COLLECTOR_DAEMON_RATE_FLOOR_H */
