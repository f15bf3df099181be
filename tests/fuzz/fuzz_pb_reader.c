/* Fuzzes the bounds-checked protobuf field reader (tracegate/pb_wire.h).
 *
 * Walks every field of the input with tg_pb_reader_next() and recurses into
 * LEN fields as if they were messages, up to MAX_DEPTH levels, the way the
 * service scans TracePackets. Every field must lie inside its parent, the
 * reader must only move forward, and an error must leave it where it was.
 */
#include <stddef.h>
#include <stdint.h>

#include "tracegate/pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_DEPTH 8

static void walk(const uint8_t *begin, size_t size, unsigned depth) {
  const uint8_t *end = begin + size;
  tg_pb_reader_t r;
  tg_pb_reader_init(&r, begin, size);
  for (;;) {
    const uint8_t *before = r.cur;
    tg_pb_field_t f;
    int rv = tg_pb_reader_next(&r, &f);
    if (rv == 0) {
      if (r.cur != end) __builtin_trap(); /* clean end means all consumed */
      return;
    }
    if (rv < 0) {
      if (rv != -1 || r.cur != before || r.end != end) __builtin_trap();
      return;
    }
    if (rv != 1) __builtin_trap();
    if (r.cur <= before || r.cur > end || r.end != end) __builtin_trap();
    if (f.id == 0 || f.id > TG_PB_MAX_FIELD_ID) __builtin_trap();
    size_t used = (size_t)(r.cur - before);
    size_t tag_min = tg_pb_varint_size(TG_PB_TAG(f.id, f.type));
    switch (f.type) {
      case TG_PB_WT_VARINT:
        if (f.data || used < tag_min + tg_pb_varint_size(f.value))
          __builtin_trap();
        break;
      case TG_PB_WT_FIXED64:
        if (f.data || used < tag_min + 8) __builtin_trap();
        break;
      case TG_PB_WT_FIXED32:
        if (f.data || f.value > UINT32_MAX || used < tag_min + 4)
          __builtin_trap();
        break;
      case TG_PB_WT_LEN: {
        if (f.size && !f.data) __builtin_trap();
        if (f.data) {
          /* Inside the parent and ending exactly where the reader resumes. */
          if (f.data < before || f.data > end || f.size > (size_t)(end - f.data))
            __builtin_trap();
          if (f.data + f.size != r.cur) __builtin_trap();
        }
        if (used < tag_min + tg_pb_varint_size(f.size) + f.size)
          __builtin_trap();
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < f.size; i++) sink ^= f.data[i];
        (void)sink;
        if (depth < MAX_DEPTH && f.size) walk(f.data, f.size, depth + 1);
        break;
      }
      default:
        __builtin_trap(); /* groups and reserved types are errors */
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  walk(data, size, 1);
  return 0;
}
