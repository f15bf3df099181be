/* A host's floor on its rate while its clone is read (clone_read.h; the
 * collector's clone_min_rate): the verdict on one host's byte count over
 * time, kept apart from the loop so that it is judged on any clock.
 *
 * The measure: from the host's first answer to the clone (the clock
 * starts there, |start|), over every span of at least |window_ms| that
 * ends now, the host must have sent at least |min_bps| bytes per second
 * of that span. The caller samples the host's count so far at each look
 * (tg_clone_read_check, on the caller's tick); a sample is kept when at least an
 * eighth of the window passed since the last one kept, so that
 * TG_CLONE_RATE_SAMPLES of them always reach a window back. The span judged
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
#ifndef TRACEGATE_CONSUMER_CLONE_RATE_H
#define TRACEGATE_CONSUMER_CLONE_RATE_H

#include <stdbool.h>
#include <stdint.h>

/* Samples one host keeps: spaced at least an eighth of the window apart,
 * at most 8 lie within the last window, so 16 always hold one older. */
#define TG_CLONE_RATE_SAMPLES 16u

typedef struct tg_clone_rate_sample {
  int64_t t_ms;
  uint64_t bytes; /* the host's count at t_ms */
} tg_clone_rate_sample_t;

typedef struct tg_clone_rate {
  tg_clone_rate_sample_t s[TG_CLONE_RATE_SAMPLES]; /* a ring, |head| the newest */
  unsigned n, head;
  int64_t last_ms; /* the latest time seen, kept or not */
} tg_clone_rate_t;

/* What a look found: slow, and over which span how much was sent. */
typedef struct tg_clone_rate_verdict {
  bool judged;     /* a whole window has passed since the start */
  bool slow;       /* judged, and |bytes| below min_bps over |span_ms| */
  uint64_t bytes;  /* sent over the span judged */
  int64_t span_ms; /* the span judged (0 when not judged) */
} tg_clone_rate_verdict_t;

/* The clock starts: the host's first answer at |now_ms|, its count
 * |bytes| then. */
void tg_clone_rate_start(tg_clone_rate_t *r, int64_t now_ms, uint64_t bytes);

/* A look at |now_ms| with the host's count |bytes| (never less than an
 * earlier one's): samples it and judges the host against |min_bps| bytes
 * per second over a window of |window_ms| (> 0). min_bps 0 judges
 * nothing slow. */
tg_clone_rate_verdict_t tg_clone_rate_look(tg_clone_rate_t *r, int64_t now_ms,
                                   uint64_t bytes, uint64_t min_bps,
                                   int64_t window_ms);

#endif /* TRACEGATE_CONSUMER_CLONE_RATE_H */
