/* Protobuf wire format: tags, varints and a bounds-checked field reader.
 *
 * These are the primitives shared by the zero-copy writer (pb_writer.h), the
 * SMB chunk validator and the service's packet scanner. Everything here is
 * header-only and branch-light because it sits on hot paths.
 *
 * Redundant varints: a nested message's length is written before its content
 * is known, so writers reserve a fixed 4-byte varint and back-fill it (5 is
 * encoded as 85 80 80 00). Every protobuf parser accepts such non-minimal
 * varints; 4 bytes hold values up to 2^28 - 1 (TG_PB_MAX_REDUNDANT_VARINT).
 */
#ifndef TRACEGATE_PB_WIRE_H
#define TRACEGATE_PB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tg_pb_wire_type {
  TG_PB_WT_VARINT = 0,
  TG_PB_WT_FIXED64 = 1,
  TG_PB_WT_LEN = 2,
  TG_PB_WT_FIXED32 = 5,
};

#define TG_PB_MAX_FIELD_ID 0x1FFFFFFFu
#define TG_PB_MAX_VARINT_SIZE 10
#define TG_PB_REDUNDANT_VARINT_SIZE 4
#define TG_PB_MAX_REDUNDANT_VARINT 0x0FFFFFFFu

#define TG_PB_TAG(field, wt) ((((uint32_t)(field)) << 3) | (uint32_t)(wt))

static inline size_t tg_pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Writes |v| at |p| (room for TG_PB_MAX_VARINT_SIZE bytes); returns the end. */
static inline uint8_t *tg_pb_write_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* Writes |v| (<= TG_PB_MAX_REDUNDANT_VARINT) as exactly 4 varint bytes. */
static inline void tg_pb_write_redundant_varint(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)((v & 0x7F) | 0x80);
  p[1] = (uint8_t)(((v >> 7) & 0x7F) | 0x80);
  p[2] = (uint8_t)(((v >> 14) & 0x7F) | 0x80);
  p[3] = (uint8_t)((v >> 21) & 0x7F);
}

static inline uint64_t tg_pb_zigzag64(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* Decodes a varint from [p, end). Returns the bytes consumed, or 0 when the
 * varint is truncated or longer than 10 bytes. Safe on untrusted input. */
static inline size_t tg_pb_read_varint(const uint8_t *p, const uint8_t *end,
                                       uint64_t *out) {
  uint64_t v = 0;
  for (size_t i = 0; i < TG_PB_MAX_VARINT_SIZE && p + i < end; i++) {
    v |= (uint64_t)(p[i] & 0x7F) << (7 * i);
    if (!(p[i] & 0x80)) {
      *out = v;
      return i + 1;
    }
  }
  return 0;
}

static inline uint32_t tg_pb_read_le32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}

static inline void tg_pb_write_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

/* One decoded field. For LEN fields |data|/|size| point into the input; for
 * the others |value| holds the integer (fixed ones little-endian decoded). */
typedef struct tg_pb_field {
  uint32_t id;
  uint8_t type;
  uint64_t value;
  const uint8_t *data;
  size_t size;
} tg_pb_field_t;

typedef struct tg_pb_reader {
  const uint8_t *cur;
  const uint8_t *end;
} tg_pb_reader_t;

static inline void tg_pb_reader_init(tg_pb_reader_t *r, const uint8_t *p,
                                     size_t n) {
  r->cur = p;
  r->end = p + n;
}

/* Reads the next field of an untrusted message. Returns 1 with |f| filled, 0
 * at the clean end of input, -1 on malformed input (truncation, a tag or a
 * length prefix longer than 5 bytes, field id 0, groups, unknown wire
 * types, lengths past the end). Inline: the schema walk of every packet a
 * merge takes (consumer/fleet/trace_schema.h) calls it once a field. */
static inline int tg_pb_reader_next(tg_pb_reader_t *r, tg_pb_field_t *f) {
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

/* The bool of the VARINT field tg_pb_reader_next() just returned, as
 * protobuf-c reads it: true when any of its 7-bit groups is non-zero, the
 * bits past 64 included (f->value drops those, so a 10-byte varint whose
 * only set bits lie there reads 0). The varint's bytes are those before
 * r->cur back to its tag's last byte, which has no continuation bit. */
static inline bool tg_pb_reader_bool(const tg_pb_reader_t *r) {
  const uint8_t *p = r->cur - 1;
  bool v = (*p & 0x7F) != 0;
  while (p[-1] & 0x80) {
    p--;
    v = v || (*p & 0x7F) != 0;
  }
  return v;
}

#endif /* TRACEGATE_PB_WIRE_H */
