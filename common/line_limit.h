/* A token bucket for log lines about things outsiders can make happen at
 * will (refused connections, denied calls): a burst, then a steady rate,
 * and a count of the lines held back so the next line written can say how
 * many there were.
 *
 * Owns nothing; a zero-filled tg_line_limit_t is a full bucket that starts
 * at its first take. Not thread-safe. The clock is the caller's (monotonic
 * milliseconds); a clock going back refills nothing.
 */
#ifndef TRACEGATE_COMMON_LINE_LIMIT_H
#define TRACEGATE_COMMON_LINE_LIMIT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tg_line_limit {
  bool started;
  uint64_t last_ms;
  uint64_t milli_tokens;
  uint64_t suppressed; /* lines not written since the last one that was */
} tg_line_limit_t;

/* One line at |now_ms|, with a bucket of |burst| lines refilled at |per_s|
 * lines a second (both > 0). Returns true when the line may be written;
 * then *suppressed_before is how many were held back before it (write the
 * count first; it is reset). Returns false when the line is to be held
 * back (counted). */
bool tg_line_limit_take(tg_line_limit_t *l, uint64_t now_ms, uint32_t burst,
                        uint32_t per_s, uint64_t *suppressed_before);

/* Lines held back and not yet reported (reset to 0): for a count line when
 * the thing they were about ends. */
uint64_t tg_line_limit_flush(tg_line_limit_t *l);

#endif /* TRACEGATE_COMMON_LINE_LIMIT_H */
