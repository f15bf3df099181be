/* Fuzzes the W3C traceparent parser (agent/trace_context.c): the header
 * comes from whoever called the app.
 *
 * Input: the header's value, every byte of it (NUL bytes included: the
 * parser takes a length).
 *
 * Invariants (trap on violation):
 * - the result is 0, TG_EPARSE or -EINVAL, and a failure leaves the output
 *   alone;
 * - a parsed context has a version other than ff, non-zero ids, and came
 *   from at least 55 bytes, exactly 55 for version 00;
 * - it formats as 55 lowercase characters that repeat the input's after
 *   the version (and the version too when it was 00), and that parse back
 *   to the same context at version 0;
 * - its flow id is not 0 and the same from the reparsed context.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tracegate/error.h"
#include "tracegate/trace_context.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool nonzero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return true;
  return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data;
  tg_trace_context_t c, before;
  memset(&c, 0x5a, sizeof(c));
  before = c;
  int rv = tg_traceparent_parse(s, size, &c);
  if (rv != 0) {
    if (rv != TG_EPARSE && rv != -EINVAL) __builtin_trap();
    if (memcmp(&c, &before, sizeof(c)) != 0) __builtin_trap();
    return 0;
  }
  if (c.version == 0xff || !nonzero(c.trace_id, 16) ||
      !nonzero(c.parent_id, 8))
    __builtin_trap();
  if (size < TG_TRACEPARENT_LEN ||
      (c.version == 0 && size != TG_TRACEPARENT_LEN))
    __builtin_trap();

  char out[TG_TRACEPARENT_BUF];
  tg_traceparent_format(&c, out);
  if (strlen(out) != TG_TRACEPARENT_LEN) __builtin_trap();
  for (size_t i = 0; i < TG_TRACEPARENT_LEN; i++) {
    char ch = out[i];
    bool dash = i == 2 || i == 35 || i == 52;
    bool hex = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
    if (dash ? ch != '-' : !hex)
      __builtin_trap();
  }
  size_t from = c.version == 0 ? 0 : 2;
  if (memcmp(out + from, s + from, TG_TRACEPARENT_LEN - from) != 0)
    __builtin_trap();

  tg_trace_context_t back;
  if (tg_traceparent_parse(out, TG_TRACEPARENT_LEN, &back) != 0)
    __builtin_trap();
  tg_trace_context_t want = c;
  want.version = 0;
  if (memcmp(&back, &want, sizeof(back)) != 0) __builtin_trap();

  uint64_t id = tg_flow_id_from_context(c.trace_id, c.parent_id);
  if (id == 0 || id != tg_flow_id_from_context(back.trace_id, back.parent_id))
    __builtin_trap();
  return 0;
}
