/* Zero-copy protobuf writer.
 *
 * Serialises fields straight into memory the caller owns: an SMB chunk, a
 * socket output buffer, a stack array. Nothing is allocated and nothing is
 * copied twice. Nested messages reserve a 4-byte redundant varint for their
 * length (see pb_wire.h) which tg_pbw_end_nested() back-fills.
 *
 *   [tag][ 4-byte size ][ nested fields ...................... ]
 *          ^ size_field   ^ start (counted in total bytes written)
 *
 * Running out of room: when a write does not fit in [cur, end), the writer
 * calls the refill hook, which must point cur/end at fresh memory (and may
 * write framing of its own before it, e.g. the agent's next fragment header).
 * Plain field bytes may be split across segments at any byte. The 4-byte
 * size fields are never split. The hook may also move the size fields of open
 * nested messages out of the retired segment: |nest[i].size_field| is where
 * end_nested() will write the final size; the agent points it at a patch slot
 * when the chunk holding it has been committed, and sends the slot's content
 * later as a CommitData patch. A size_field of NULL means "do not write".
 *
 * Errors are sticky: after a failed refill or an oversized message every
 * further write is a no-op and tg_pbw_error() reports the first error.
 *
 * Thread-safety: none; one writer per thread.
 */
#ifndef TRACEGATE_PB_WRITER_H
#define TRACEGATE_PB_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tracegate/pb_wire.h"
#include "tracegate/export.h"

#define TG_PBW_MAX_DEPTH 16

typedef struct tg_pbw tg_pbw_t;

/* Must set w->cur and w->end to a new non-empty segment (at least
 * TG_PB_REDUNDANT_VARINT_SIZE bytes) and return 0, or return a negative error.
 * |min_contiguous| is how many bytes the pending write needs in one piece
 * (4 for a size field, 1 otherwise). */
typedef int (*tg_pbw_refill_fn)(void *ctx, tg_pbw_t *w, size_t min_contiguous);

typedef struct tg_pbw_nest {
  uint8_t *size_field; /* where the final size goes; NULL: nowhere */
  uint64_t start;      /* total bytes written when the content began */
} tg_pbw_nest_t;

struct tg_pbw {
  uint8_t *cur;
  uint8_t *end;
  uint8_t *seg_start; /* start of the current segment */
  uint64_t seg_base;  /* bytes written in earlier segments */
  tg_pbw_refill_fn refill;
  void *refill_ctx;
  int error;
  unsigned depth;
  tg_pbw_nest_t nest[TG_PBW_MAX_DEPTH];
};

/* |buf| is borrowed for the writer's lifetime (and what refill hands in). A
 * NULL |refill| makes running out of room a TG_ENO_SPACE error. */
TG_EXPORT void tg_pbw_init(tg_pbw_t *w, uint8_t *buf, size_t len,
                           tg_pbw_refill_fn refill, void *refill_ctx);

/* Total payload bytes written since init, across segments. */
static inline uint64_t tg_pbw_written(const tg_pbw_t *w) {
  return w->seg_base + (uint64_t)(w->cur - w->seg_start);
}
static inline int tg_pbw_error(const tg_pbw_t *w) { return w->error; }

/* Slow paths (out of line). */
TG_EXPORT void tg_pbw__append_slow(tg_pbw_t *w, const void *data, size_t n);
TG_EXPORT int tg_pbw__ensure_contiguous(tg_pbw_t *w, size_t n);

/* Raw bytes, split across segments if needed. */
static inline void tg_pbw_append_raw(tg_pbw_t *w, const void *data, size_t n) {
  if ((size_t)(w->end - w->cur) >= n) {
    memcpy(w->cur, data, n);
    w->cur += n;
    return;
  }
  tg_pbw__append_slow(w, data, n);
}

/* Counts |n| bytes as written that the writer never holds: the caller
 * sends them from where they lie, between the bytes written before and
 * after this call (a vectored send; service/read_frames.h). Sizes of the
 * open nested messages include them. */
static inline void tg_pbw_count_external(tg_pbw_t *w, size_t n) {
  w->seg_base += n;
}

/* Tag plus varint: at most 5 + 10 bytes. */
static inline void tg_pbw_append_varint(tg_pbw_t *w, uint32_t field,
                                        uint64_t v) {
  if ((size_t)(w->end - w->cur) >= 15) {
    uint8_t *p = tg_pb_write_varint(w->cur, TG_PB_TAG(field, TG_PB_WT_VARINT));
    w->cur = tg_pb_write_varint(p, v);
    return;
  }
  uint8_t tmp[15];
  uint8_t *p = tg_pb_write_varint(tmp, TG_PB_TAG(field, TG_PB_WT_VARINT));
  p = tg_pb_write_varint(p, v);
  tg_pbw__append_slow(w, tmp, (size_t)(p - tmp));
}

static inline void tg_pbw_append_sint(tg_pbw_t *w, uint32_t field, int64_t v) {
  tg_pbw_append_varint(w, field, tg_pb_zigzag64(v));
}

/* int32/int64 fields: negative values are sign-extended to 10 bytes. */
static inline void tg_pbw_append_int(tg_pbw_t *w, uint32_t field, int64_t v) {
  tg_pbw_append_varint(w, field, (uint64_t)v);
}

static inline void tg_pbw_append_bool(tg_pbw_t *w, uint32_t field, bool v) {
  tg_pbw_append_varint(w, field, v ? 1 : 0);
}

static inline void tg_pbw_append_fixed32(tg_pbw_t *w, uint32_t field,
                                         uint32_t v) {
  uint8_t tmp[9];
  uint8_t *p = tg_pb_write_varint(tmp, TG_PB_TAG(field, TG_PB_WT_FIXED32));
  tg_pb_write_le32(p, v);
  tg_pbw_append_raw(w, tmp, (size_t)(p + 4 - tmp));
}

static inline void tg_pbw_append_fixed64(tg_pbw_t *w, uint32_t field,
                                         uint64_t v) {
  uint8_t tmp[13];
  uint8_t *p = tg_pb_write_varint(tmp, TG_PB_TAG(field, TG_PB_WT_FIXED64));
  tg_pb_write_le32(p, (uint32_t)v);
  tg_pb_write_le32(p + 4, (uint32_t)(v >> 32));
  tg_pbw_append_raw(w, tmp, (size_t)(p + 8 - tmp));
}

static inline void tg_pbw_append_double(tg_pbw_t *w, uint32_t field,
                                        double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof(bits));
  tg_pbw_append_fixed64(w, field, bits);
}

static inline void tg_pbw_append_float(tg_pbw_t *w, uint32_t field, float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof(bits));
  tg_pbw_append_fixed32(w, field, bits);
}

/* Length-delimited field (bytes, string, or a pre-serialised message). */
static inline void tg_pbw_append_bytes(tg_pbw_t *w, uint32_t field,
                                       const void *data, size_t n) {
  uint8_t tmp[15];
  uint8_t *p = tg_pb_write_varint(tmp, TG_PB_TAG(field, TG_PB_WT_LEN));
  p = tg_pb_write_varint(p, n);
  if ((size_t)(w->end - w->cur) >= (size_t)(p - tmp) + n) {
    memcpy(w->cur, tmp, (size_t)(p - tmp));
    w->cur += p - tmp;
    memcpy(w->cur, data, n);
    w->cur += n;
    return;
  }
  tg_pbw__append_slow(w, tmp, (size_t)(p - tmp));
  tg_pbw__append_slow(w, data, n);
}

static inline void tg_pbw_append_string(tg_pbw_t *w, uint32_t field,
                                        const char *s) {
  tg_pbw_append_bytes(w, field, s, strlen(s));
}

/* Slow paths of the two below (out of line). */
TG_EXPORT int tg_pbw__begin_nested_slow(tg_pbw_t *w, uint32_t field);
TG_EXPORT int64_t tg_pbw__end_nested_slow(tg_pbw_t *w);

/* Opens a nested message (or a bytes field written in place) under |field|.
 * Returns 0, or the sticky error (then the matching end_nested is a no-op).
 * Inline when the tag and the size field fit in the current segment. */
static inline int tg_pbw_begin_nested(tg_pbw_t *w, uint32_t field) {
  if (__builtin_expect(!w->error && w->depth < TG_PBW_MAX_DEPTH &&
                           (size_t)(w->end - w->cur) >=
                               5 + TG_PB_REDUNDANT_VARINT_SIZE,
                       1)) {
    uint8_t *p = tg_pb_write_varint(w->cur, TG_PB_TAG(field, TG_PB_WT_LEN));
    tg_pbw_nest_t *nest = &w->nest[w->depth++];
    nest->size_field = p;
    tg_pb_write_redundant_varint(p, 0);
    w->cur = p + TG_PB_REDUNDANT_VARINT_SIZE;
    nest->start = tg_pbw_written(w);
    return 0;
  }
  return tg_pbw__begin_nested_slow(w, field);
}

/* Closes the innermost nested message and back-fills its size. Returns its
 * size in bytes, or a negative error. */
static inline int64_t tg_pbw_end_nested(tg_pbw_t *w) {
  if (__builtin_expect(w->depth != 0 && !w->error, 1)) {
    tg_pbw_nest_t *nest = &w->nest[w->depth - 1];
    uint64_t size = tg_pbw_written(w) - nest->start;
    if (__builtin_expect(size <= TG_PB_MAX_REDUNDANT_VARINT, 1)) {
      w->depth--;
      if (nest->size_field)
        tg_pb_write_redundant_varint(nest->size_field, (uint32_t)size);
      return (int64_t)size;
    }
  }
  return tg_pbw__end_nested_slow(w);
}

#endif /* TRACEGATE_PB_WRITER_H */
