/* COMPRESSION_TYPE_DEFLATE, Perfetto's way: batches of read-out packets
 * become one TracePacket whose compressed_packets field (50) holds a zlib
 * stream of those packets framed as a Trace ([0x0A][varint len][packet]
 * each), so trace processor and the Perfetto UI inflate it back into the
 * packets themselves.
 *
 * A tg_deflate_t sits between the read-out and a sink: it takes packets
 * through the same emit signature the read-out calls (readout.h), and hands
 * the sink one compressed packet per batch. It owns its z_stream and output
 * buffer; it never touches a session.
 *
 * Every packet taken is in the sink once tg_deflate_finish() has run: the
 * caller calls it whenever a drain pass ends, so no packet waits in the
 * compressor for the next pass.
 */
#ifndef TRACEGATE_SERVICE_PACKET_DEFLATE_H
#define TRACEGATE_SERVICE_PACKET_DEFLATE_H

#include <stddef.h>
#include <stdint.h>

#include <zlib.h>

#include "common/buf.h"

/* Uncompressed bytes per compressed packet: large enough for deflate to
 * find repeats across packets, small enough to keep a packet well under
 * what readers buffer at once. */
#define TG_DEFLATE_BATCH (512u << 10)
/* Perfetto's level: a good ratio at a few hundred MB/s. */
#define TG_DEFLATE_LEVEL 6

/* The read-out's packet callback (same as tg_readout_emit_fn): the packet
 * is the concatenation of |n| pieces, |total| bytes, of which the first
 * |n_stable| outlive the call (readout.h). Returns 0 to go on, 1 to stop
 * after this packet. The compressor hands its sink no stable piece. */
typedef int (*tg_deflate_sink_fn)(void *ctx, const uint8_t *const *pieces,
                                  const size_t *lens, unsigned n,
                                  unsigned n_stable, size_t total);

typedef struct tg_deflate {
  z_stream z;
  tg_buf_t out;      /* compressed bytes of the open batch */
  size_t batch_in;   /* uncompressed bytes in the open batch */
  tg_deflate_sink_fn sink;
  void *sink_ctx;
  int err;           /* sticky: 0 or a negative error */
  uint64_t bytes_in, bytes_out; /* totals, for stats and tests */
} tg_deflate_t;

/* Returns 0, -ENOMEM. |sink_ctx| is borrowed for the compressor's life. */
int tg_deflate_init(tg_deflate_t *d, tg_deflate_sink_fn sink, void *sink_ctx);
void tg_deflate_free(tg_deflate_t *d);

/* A tg_deflate_sink_fn with |ctx| = the tg_deflate_t: adds one packet to
 * the batch; a full batch goes to the sink, whose return value it passes
 * on. On an error (sticky in d->err) it returns 1: stop. */
int tg_deflate_emit(void *ctx, const uint8_t *const *pieces, const size_t *lens,
                    unsigned n, unsigned n_stable, size_t total);

/* Closes the open batch (if any) and hands it to the sink. Returns the
 * sink's value (0 when there was nothing), or 1 after an error. */
int tg_deflate_finish(tg_deflate_t *d);

#endif /* TRACEGATE_SERVICE_PACKET_DEFLATE_H */
