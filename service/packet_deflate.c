/* Batches of packets into compressed_packets; see packet_deflate.h. */
#include "service/packet_deflate.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "tracegate/pb_wire.h"

/* TracePacket.compressed_packets and Trace.packet. */
enum { PKT_COMPRESSED_PACKETS = 50, TRACE_PACKET = 1 };
/* Output grows in steps of this. */
#define OUT_STEP (64u << 10)
/* Compressed output of one batch never exceeds deflateBound(batch) plus a
 * packet's worth (a batch closes after the packet that fills it). */
#define OUT_MAX (64u << 20)

int tg_deflate_init(tg_deflate_t *d, tg_deflate_sink_fn sink, void *sink_ctx) {
  memset(d, 0, sizeof(*d));
  d->sink = sink;
  d->sink_ctx = sink_ctx;
  tg_buf_init(&d->out, OUT_MAX);
  /* deflateInit: the zlib wrapper (RFC 1950), which Perfetto's readers
   * expect, not a raw deflate stream. */
  if (deflateInit(&d->z, TG_DEFLATE_LEVEL) != Z_OK) return -ENOMEM;
  return 0;
}

void tg_deflate_free(tg_deflate_t *d) {
  deflateEnd(&d->z);
  tg_buf_free(&d->out);
}

/* Runs deflate over [p, p + n) (or to the end with Z_FINISH). */
static int pump(tg_deflate_t *d, const void *p, size_t n, int flush) {
  d->z.next_in = (Bytef *)(uintptr_t)p;
  d->z.avail_in = (uInt)n;
  for (;;) {
    uint8_t *room = tg_buf_reserve(&d->out, OUT_STEP);
    if (!room) return -ENOBUFS;
    d->z.next_out = room;
    d->z.avail_out = OUT_STEP;
    int rv = deflate(&d->z, flush);
    tg_buf_commit(&d->out, OUT_STEP - d->z.avail_out);
    if (rv == Z_STREAM_END) return 0;
    if (rv != Z_OK && rv != Z_BUF_ERROR) {
      TG_ERROR("deflate: zlib error %d", rv);
      return -EIO;
    }
    if (flush == Z_NO_FLUSH && d->z.avail_in == 0) return 0;
  }
}

int tg_deflate_emit(void *ctx, const uint8_t *const *pieces, const size_t *lens,
                    unsigned n, unsigned n_stable, size_t total) {
  (void)n_stable; /* compressed at once */
  tg_deflate_t *d = ctx;
  if (d->err) return 1;
  uint8_t hdr[11];
  hdr[0] = TG_PB_TAG(TRACE_PACKET, TG_PB_WT_LEN);
  size_t hl = (size_t)(tg_pb_write_varint(hdr + 1, total) - hdr);
  int rv = pump(d, hdr, hl, Z_NO_FLUSH);
  for (unsigned i = 0; rv == 0 && i < n; i++)
    rv = pump(d, pieces[i], lens[i], Z_NO_FLUSH);
  if (rv < 0) {
    d->err = rv;
    return 1;
  }
  d->batch_in += hl + total;
  return d->batch_in >= TG_DEFLATE_BATCH ? tg_deflate_finish(d) : 0;
}

int tg_deflate_finish(tg_deflate_t *d) {
  if (d->err) return 1;
  if (d->batch_in == 0) return 0;
  int rv = pump(d, NULL, 0, Z_FINISH);
  if (rv < 0) {
    d->err = rv;
    return 1;
  }
  size_t clen = tg_buf_size(&d->out);
  uint8_t hdr[12];
  uint8_t *q = tg_pb_write_varint(hdr, TG_PB_TAG(PKT_COMPRESSED_PACKETS,
                                                 TG_PB_WT_LEN));
  q = tg_pb_write_varint(q, clen);
  const uint8_t *pieces[2] = {hdr, tg_buf_begin(&d->out)};
  size_t lens[2] = {(size_t)(q - hdr), clen};
  d->bytes_in += d->batch_in;
  d->bytes_out += lens[0] + clen;
  d->batch_in = 0;
  int sink_rv = d->sink(d->sink_ctx, pieces, lens, 2, 0, lens[0] + clen);
  tg_buf_reset(&d->out);
  if (deflateReset(&d->z) != Z_OK) d->err = -EIO;
  return sink_rv;
}
