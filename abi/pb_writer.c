/* Slow paths of the zero-copy writer: segment changes and nesting. */
#include "tracegate/pb_writer.h"

#include <errno.h>

#include "tracegate/error.h"

/* A zero-length segment: once in error, every fast path fails its room
 * check and lands in a slow path that returns at once. */
static uint8_t pbw_sink[1];

static void pbw_fail(tg_pbw_t *w, int err) {
  if (!w->error) w->error = err;
  w->seg_base += (uint64_t)(w->cur - w->seg_start);
  w->cur = w->end = w->seg_start = pbw_sink;
}

void tg_pbw_init(tg_pbw_t *w, uint8_t *buf, size_t len, tg_pbw_refill_fn refill,
                 void *refill_ctx) {
  w->cur = w->seg_start = buf;
  w->end = buf + len;
  w->seg_base = 0;
  w->refill = refill;
  w->refill_ctx = refill_ctx;
  w->error = 0;
  w->depth = 0;
}

static int pbw_next_segment(tg_pbw_t *w, size_t min_contiguous) {
  if (w->error) return w->error;
  if (!w->refill) {
    pbw_fail(w, TG_ENO_SPACE);
    return w->error;
  }
  w->seg_base += (uint64_t)(w->cur - w->seg_start);
  w->seg_start = w->cur; /* keeps tg_pbw_written() exact inside the hook */
  int rv = w->refill(w->refill_ctx, w, min_contiguous);
  if (rv == 0 && (size_t)(w->end - w->cur) < min_contiguous)
    rv = TG_ENO_SPACE; /* the hook broke its contract */
  if (rv < 0) {
    pbw_fail(w, rv);
    return rv;
  }
  w->seg_start = w->cur;
  return 0;
}

void tg_pbw__append_slow(tg_pbw_t *w, const void *data, size_t n) {
  const uint8_t *src = data;
  while (n > 0) {
    if (w->error) return;
    size_t room = (size_t)(w->end - w->cur);
    if (room == 0) {
      if (pbw_next_segment(w, 1) < 0) return;
      continue;
    }
    size_t k = n < room ? n : room;
    memcpy(w->cur, src, k);
    w->cur += k;
    src += k;
    n -= k;
  }
}

int tg_pbw__ensure_contiguous(tg_pbw_t *w, size_t n) {
  if (w->error) return w->error;
  /* Bytes left at the end of this segment stay unused: the hook decides what
   * they become (the agent shrinks the fragment to what was written). */
  while ((size_t)(w->end - w->cur) < n)
    if (pbw_next_segment(w, n) < 0) return w->error;
  return 0;
}

int tg_pbw__begin_nested_slow(tg_pbw_t *w, uint32_t field) {
  if (w->error) return w->error;
  if (w->depth >= TG_PBW_MAX_DEPTH) {
    pbw_fail(w, TG_ENESTING_TOO_DEEP);
    return w->error;
  }
  uint8_t tag[5];
  uint8_t *p = tg_pb_write_varint(tag, TG_PB_TAG(field, TG_PB_WT_LEN));
  tg_pbw_append_raw(w, tag, (size_t)(p - tag));
  if (tg_pbw__ensure_contiguous(w, TG_PB_REDUNDANT_VARINT_SIZE) < 0)
    return w->error;
  tg_pbw_nest_t *nest = &w->nest[w->depth++];
  nest->size_field = w->cur;
  tg_pb_write_redundant_varint(w->cur, 0);
  w->cur += TG_PB_REDUNDANT_VARINT_SIZE;
  nest->start = tg_pbw_written(w);
  return 0;
}

int64_t tg_pbw__end_nested_slow(tg_pbw_t *w) {
  if (w->depth == 0) {
    pbw_fail(w, -EINVAL); /* programmer error: unbalanced nesting */
    return w->error;
  }
  tg_pbw_nest_t *nest = &w->nest[--w->depth];
  if (w->error) return w->error;
  uint64_t size = tg_pbw_written(w) - nest->start;
  if (size > TG_PB_MAX_REDUNDANT_VARINT) {
    pbw_fail(w, TG_EPROTO_ENCODE);
    return w->error;
  }
  if (nest->size_field)
    tg_pb_write_redundant_varint(nest->size_field, (uint32_t)size);
  return (int64_t)size;
}
