/* ReadBuffersResponse slices -> whole packets (see slice_reassembler.h). */
#include "consumer/slice_reassembler.h"

#include <stdbool.h>

#include "tracegate/pb_wire.h"
#include "tracegate/error.h"

void tg_slice_reassembler_init(tg_slice_reassembler_t *r, size_t max_packet) {
  tg_buf_init(&r->cur, 0);
  r->max_packet = max_packet;
  r->packets = 0;
  r->bytes = 0;
}

void tg_slice_reassembler_free(tg_slice_reassembler_t *r) {
  tg_buf_free(&r->cur);
}

/* One Slice message: appends its data; emits when it ends a packet. */
static int feed_slice(tg_slice_reassembler_t *r, const uint8_t *p, size_t n,
                      tg_slice_packet_fn emit, void *ctx) {
  tg_pb_reader_t rd;
  tg_pb_field_t f;
  tg_pb_reader_init(&rd, p, n);
  const uint8_t *data = NULL;
  size_t data_len = 0;
  bool last = false;
  int rv;
  while ((rv = tg_pb_reader_next(&rd, &f)) == 1) {
    if (f.id == 1) {
      if (f.type != TG_PB_WT_LEN) return TG_EPROTO_DECODE;
      /* A repeated data field would be merged as "last wins" by protobuf;
       * no sender does that, and a slice is one piece of one packet. */
      data = f.data;
      data_len = f.size;
    } else if (f.id == 2) {
      if (f.type != TG_PB_WT_VARINT) return TG_EPROTO_DECODE;
      last = f.value != 0;
    }
    /* Unknown fields are skipped. */
  }
  if (rv < 0) return TG_EPROTO_DECODE;
  if (data_len > r->max_packet - tg_buf_size(&r->cur)) return TG_ENO_SPACE;
  static const uint8_t empty[1];
  if (last && tg_buf_size(&r->cur) == 0) {
    /* The common case, a packet in one slice: handed over in place. */
    r->packets++;
    r->bytes += data_len;
    return emit(ctx, data_len ? data : empty, data_len);
  }
  if (data_len) {
    int err = tg_buf_append(&r->cur, data, data_len); /* uncapped: checked above */
    if (err < 0) return err;
  }
  if (!last) return 0;
  size_t plen = tg_buf_size(&r->cur);
  const uint8_t *pkt = tg_buf_begin(&r->cur);
  r->packets++;
  r->bytes += plen;
  /* Reset before emitting, so the reassembler is consistent even if the
   * callback stops the stream; the bytes stay valid until the next append. */
  tg_buf_reset(&r->cur);
  return emit(ctx, pkt, plen);
}

int tg_slice_reassembler_feed(tg_slice_reassembler_t *r,
                              const uint8_t *resp_untrusted, size_t len,
                              tg_slice_packet_fn emit, void *ctx) {
  tg_pb_reader_t rd;
  tg_pb_field_t f;
  tg_pb_reader_init(&rd, resp_untrusted, len);
  int rv;
  while ((rv = tg_pb_reader_next(&rd, &f)) == 1) {
    if (f.id != 2) continue; /* unknown fields are skipped */
    if (f.type != TG_PB_WT_LEN) return TG_EPROTO_DECODE;
    int err = feed_slice(r, f.data, f.size, emit, ctx);
    if (err) return err;
  }
  return rv < 0 ? TG_EPROTO_DECODE : 0;
}

int tg_slice_reassembler_finish(const tg_slice_reassembler_t *r) {
  return tg_buf_size(&r->cur) ? TG_EPROTO_DECODE : 0;
}
