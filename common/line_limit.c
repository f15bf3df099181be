/* The token bucket of line_limit.h, in thousandths of a line. */
#include "common/line_limit.h"

#define MILLI 1000u

bool tg_line_limit_take(tg_line_limit_t *l, uint64_t now_ms, uint32_t burst,
                        uint32_t per_s, uint64_t *suppressed_before) {
  const uint64_t cap = (uint64_t)burst * MILLI;
  if (!l->started) {
    l->started = true;
    l->last_ms = now_ms;
    l->milli_tokens = cap;
  } else if (now_ms > l->last_ms) {
    /* Bounded before multiplying: a long quiet spell just fills it. */
    uint64_t elapsed = now_ms - l->last_ms;
    if (elapsed > cap) elapsed = cap;
    l->milli_tokens += elapsed * per_s;
    if (l->milli_tokens > cap) l->milli_tokens = cap;
    l->last_ms = now_ms;
  }
  if (l->milli_tokens < MILLI) {
    l->suppressed++;
    return false;
  }
  l->milli_tokens -= MILLI;
  *suppressed_before = l->suppressed;
  l->suppressed = 0;
  return true;
}

uint64_t tg_line_limit_flush(tg_line_limit_t *l) {
  uint64_t n = l->suppressed;
  l->suppressed = 0;
  return n;
}
