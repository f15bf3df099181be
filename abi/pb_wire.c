/* The bounds-checked field reader of pb_wire.h. */
#include "tracegate/pb_wire.h"

int tg_pb_reader_next(tg_pb_reader_t *r, tg_pb_field_t *f) {
  if (r->cur >= r->end) return 0;
  uint64_t tag;
  size_t n = tg_pb_read_varint(r->cur, r->end, &tag);
  /* A tag is a 32-bit varint: at most 5 bytes. A longer one would be read
   * with its high bits dropped, as protobuf-c refuses to. */
  if (n == 0 || n > 5 || tag > 0xFFFFFFFFull) return -1;
  const uint8_t *p = r->cur + n;
  f->id = (uint32_t)(tag >> 3);
  f->type = (uint8_t)(tag & 7);
  f->data = NULL;
  f->size = 0;
  f->value = 0;
  if (f->id == 0) return -1;
  size_t avail = (size_t)(r->end - p);
  switch (f->type) {
    case TG_PB_WT_VARINT:
      n = tg_pb_read_varint(p, r->end, &f->value);
      if (n == 0) return -1;
      p += n;
      break;
    case TG_PB_WT_FIXED64:
      if (avail < 8) return -1;
      f->value = (uint64_t)tg_pb_read_le32(p) |
                 ((uint64_t)tg_pb_read_le32(p + 4) << 32);
      p += 8;
      break;
    case TG_PB_WT_FIXED32:
      if (avail < 4) return -1;
      f->value = tg_pb_read_le32(p);
      p += 4;
      break;
    case TG_PB_WT_LEN: {
      uint64_t len;
      n = tg_pb_read_varint(p, r->end, &len);
      /* A length is at most 5 bytes, as protobuf-c reads it: no buffer
       * here holds 2^35 bytes, and a longer, zero-padded prefix is taken
       * by no peer that checks. */
      if (n == 0 || n > 5) return -1;
      p += n;
      if (len > (uint64_t)(r->end - p)) return -1;
      f->data = p;
      f->size = (size_t)len;
      p += len;
      break;
    }
    default:
      return -1; /* groups (3, 4) and reserved types 6, 7 */
  }
  r->cur = p;
  return 1;
}
