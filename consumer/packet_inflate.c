/* Inflating compressed_packets; see packet_inflate.h. */
#include "consumer/packet_inflate.h"

#include <errno.h>
#include <string.h>
#include <zlib.h>

#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

#define STEP (256u << 10)

int tg_packets_inflate(const uint8_t *z, size_t n, tg_buf_t *out) {
  return tg_inflate_capped(z, n, false, out);
}

int tg_inflate_capped(const uint8_t *z, size_t n, bool gzip, tg_buf_t *out) {
  tg_buf_reset(out);
  z_stream s;
  memset(&s, 0, sizeof(s));
  /* 15: the largest window, what every deflater may use; +16: a gzip
   * header and trailer (RFC 1952) instead of zlib's. */
  if (inflateInit2(&s, gzip ? 15 + 16 : 15) != Z_OK) return -ENOMEM;
  s.next_in = (Bytef *)(uintptr_t)z;
  s.avail_in = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
  int rv = 0;
  for (;;) {
    uint8_t *room = tg_buf_reserve(out, STEP);
    if (!room) {
      rv = -ENOBUFS;
      break;
    }
    s.next_out = room;
    s.avail_out = STEP;
    int zr = inflate(&s, Z_NO_FLUSH);
    tg_buf_commit(out, STEP - s.avail_out);
    if (zr == Z_STREAM_END) {
      /* Bytes after the end would be a second stream or garbage. */
      if (s.avail_in != 0 || n > UINT32_MAX) rv = TG_EBAD_COMPRESSED;
      break;
    }
    if (zr == Z_MEM_ERROR) {
      rv = -ENOMEM;
      break;
    }
    if (zr != Z_OK && !(zr == Z_BUF_ERROR && s.avail_out == 0)) {
      rv = TG_EBAD_COMPRESSED; /* corrupt, or input ended mid-stream */
      break;
    }
  }
  inflateEnd(&s);
  return rv;
}

int tg_packets_each(const uint8_t *p, size_t n,
                    int (*cb)(void *ctx, const uint8_t *pkt, size_t len),
                    void *ctx) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, p, n);
  int rv;
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id != 1 || f.type != TG_PB_WT_LEN) return TG_EPARSE;
    int c = cb(ctx, f.data, f.size);
    if (c) return c;
  }
  return rv < 0 ? TG_EPARSE : 0;
}
