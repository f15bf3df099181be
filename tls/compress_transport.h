/* zstd on a transport: the remote consumer path's way past the cipher's
 * speed limit. Trace data shrinks 4-14x, so moving fewer bytes through TLS
 * beats encrypting faster.
 *
 * A tg_zstd_transport_t decorates another transport (TLS, or the pipes of
 * --stdio) and is used in its place. It starts as a pass-through. Once the
 * two ends have agreed (TracegateRelay.SetCompression: the client asks, the
 * relay answers, plain Perfetto consumers never ask), the sending end calls
 * start_compress() and every frame it sends after that travels inside
 * "block" frames; the receiving end calls start_decompress() when it has
 * read the answer, so the first block is the frame after it.
 *
 *   frames out:  [len][IPCFrame] [len][IPCFrame] ...  -> one zstd stream
 *   on the wire: [len][1][zstd bytes] [len][0][IPCFrame] [len][1][zstd ...]
 *
 * After the switch every frame on the wire starts with a kind byte: 1, a
 * block of the zstd stream (frames of at most 128 KiB, like any frame); 0,
 * one plain frame. Plain frames are the sender's control replies: they may
 * overtake queued blocks (the relay's control-before-bulk priority), which
 * one stream of blocks could never allow. The answer that starts the
 * switch must itself go through the ordinary queue, behind everything sent
 * before it, so that the receiver switches exactly at the right frame.
 *
 * The block frames carry one stream of zstd frames, which the receiver
 * inflates one after the other. Small frames share a zstd frame, so
 * repeats across them compress. A frame of TG_ZSTD_WHOLE_MIN bytes or more
 * given whole (send_frame(), send()) is compressed as a zstd frame of its
 * own, read where it lies: zstd copies streamed input into its window
 * first, one more copy of every byte a relay forwards, while a 16-128 KiB
 * frame of trace data loses little by not reaching back into the frames
 * before it. The sender may also end a zstd frame itself (end_frame(),
 * for the relay's replay window, whose tap keeps the compressed bytes).
 * Output is flushed once per loop iteration (a uv_prepare): what the
 * sender queued in one iteration leaves together, and a small control
 * reply is never held back waiting for more data. The receiver inflates
 * small frames into a scratch buffer and splits them from it in place,
 * and large ones (a ReadBuffers stream) straight into the frame decoder's
 * buffer, header and all, so that no inflated byte is copied again; a
 * zstd frame that arrived whole and inflates to at most one frame's size
 * (a large frame compressed whole) is inflated in one call into the
 * scratch, without zstd's window in between.
 *
 * Hostile peers: the window the receiver accepts is capped at what it
 * asked for, inflated frames go through the same 128 KiB frame decoder as
 * plain ones, and any zstd error closes the transport with
 * TG_EBAD_COMPRESSED. Memory per receiving end: the zstd window and the
 * frame decoder's buffer; the scratch buffer (a frame's size) is the
 * thread's, shared by every end on it (one of its own for an end that
 * inflates while another is).
 *
 * Callback rules are the transport's (ipc/transport.h). The decorator owns
 * the inner transport's callbacks and data pointer from init() on; the
 * caller keeps owning the inner transport's memory, which must stay valid
 * until the decorator's on_close.
 */
#ifndef TRACEGATE_TLS_COMPRESS_TRANSPORT_H
#define TRACEGATE_TLS_COMPRESS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>
#include <zstd.h>

#include "abi/ipc_frame.h"
#include "ipc/transport.h"

/* Window sizes (log2) the ends may agree on: 64 KiB .. 8 MiB. The receiver
 * asks for at most this much; the sender uses what was agreed. */
#define TG_ZSTD_WINDOW_LOG_MIN 16
#define TG_ZSTD_WINDOW_LOG_MAX 23
#define TG_ZSTD_WINDOW_LOG_DEFAULT 20
#define TG_ZSTD_LEVEL_DEFAULT 1
/* Whole frames from this size on are compressed as zstd frames of their
 * own (above). */
#define TG_ZSTD_WHOLE_MIN (16u << 10)

typedef struct tg_zstd_transport {
  tg_transport_t base; /* first: what the owner uses */
  tg_transport_t *inner;
  tg_transport_cbs_t inner_cbs;
  uv_prepare_t flush_tick;
  bool flush_armed, closing, closed_inner;
  /* Sending end. */
  ZSTD_CCtx *cctx;   /* non-NULL once compressing */
  uint8_t *block;    /* [4-byte len][kind 1][compressed bytes] being filled */
  size_t block_len;  /* compressed bytes in |block| */
  size_t unflushed;  /* frame bytes given to zstd since the last flush */
  uint8_t *zout;     /* a whole frame's zstd frame when the block may not
                      * hold it; NULL until one needs it */
  /* Receiving end. */
  ZSTD_DCtx *dctx;   /* non-NULL once decompressing */
  uint8_t *scratch;  /* NULL unless it ever inflated nested in another */
  bool zframe_start; /* the next input byte starts a zstd frame */
  uint64_t whole_in; /* zstd frames inflated in one call */
  tg_frame_decoder_t dec;
  int close_status;
  /* The sending end's tap (set_tap): each compressed byte as zstd makes
   * it, before any framing. */
  void (*tap)(void *ctx, const uint8_t *z, size_t n);
  void *tap_ctx;
  uint64_t frame_raw; /* bytes streamed into the zstd frame still open */
  uint64_t raw_in;    /* bytes of frames given to zstd, in all */
  /* Totals, for stats and benches. */
  uint64_t frames_in, bytes_in;   /* before compression (sending end) */
  uint64_t blocks_out, bytes_out; /* on the wire */
} tg_zstd_transport_t;

/* Wraps |inner| (caller memory, valid until on_close). |t| is caller
 * memory valid until on_close; set t->base.cbs/data before returning to the
 * loop. Returns 0 or -ENOMEM (then |inner| is untouched). */
int tg_zstd_transport_init(uv_loop_t *loop, tg_zstd_transport_t *t,
                           tg_transport_t *inner);

/* Sending end: compress every frame sent from now on at |level| (zstd's
 * scale, 1..19) with a window of 2^|window_log|. Frames queued before are
 * already in the inner transport, in order. Returns 0, -EINVAL, -ENOMEM. */
int tg_zstd_transport_start_compress(tg_zstd_transport_t *t, int level,
                                     int window_log);

/* Sending end, once compressing: queues one frame given as its payload
 * (an IPCFrame of at most TG_IPC_FRAME_MAX_PAYLOAD - 1 bytes), either into
 * the compressed stream or, with |plain|, as a plain frame (kind 0) outside
 * it, a TG_FRAME_CONTROL frame of the inner transport (TLS's priority
 * queue). Returns as send(), -EINVAL before compression started or for an
 * oversized payload.
 *
 * Through the transport interface, send_frame() picks for the sender:
 * TG_FRAME_BULK into the stream (send_frame() below), TG_FRAME_CONTROL
 * plain, TG_FRAME_BARRIER plain after flushing the stream, and before
 * compression starts each class as the inner transport sends it. */
int tg_zstd_transport_send_payload(tg_zstd_transport_t *t,
                                   const uint8_t *payload, size_t len,
                                   bool plain);
/* The same as a plain frame, given whole ([len][IPCFrame]). */
int tg_zstd_transport_send_plain(tg_zstd_transport_t *t, const uint8_t *frame,
                                 size_t len);
/* Sending end, once compressing: queues one whole frame ([len][IPCFrame],
 * the length checked against |len|) into the compressed stream; from
 * TG_ZSTD_WHOLE_MIN bytes on, as a zstd frame of its own compressed in
 * place. Returns as send_payload(). */
int tg_zstd_transport_send_frame(tg_zstd_transport_t *t, const uint8_t *frame,
                                 size_t len);

/* Sending end: |fn| sees every compressed byte of the stream from now on,
 * as zstd produces it (blocks and their framing aside), the last ones when
 * the transport closes or drain_tap() runs, whether or not they reached
 * the peer; NULL stops it. Concatenated, the bytes from one end_frame() to
 * the next are whole zstd frames that inflate by themselves into exactly
 * the frames sent between them, each as [4-byte len][payload], the first
 * at raw_pos() as it was at the end_frame(). |ctx| is borrowed until the
 * tap is cleared or the transport closed. */
void tg_zstd_transport_set_tap(tg_zstd_transport_t *t,
                               void (*fn)(void *ctx, const uint8_t *z,
                                          size_t n),
                               void *ctx);
/* Ends the current zstd frame (its last bytes go to the tap and the
 * stream) so that what is sent next starts a new one; a receiver inflates
 * the frames one after the other as one stream. No-op when nothing was
 * sent since the last end. Returns 0 or -EIO. */
int tg_zstd_transport_end_frame(tg_zstd_transport_t *t);
/* Bytes of frames (with their 4-byte lengths) given to zstd since
 * compression started: where the next frame starts in the inflated
 * stream. */
static inline uint64_t tg_zstd_transport_raw_pos(const tg_zstd_transport_t *t) {
  return t->raw_in;
}
/* Hands the tap whatever zstd still holds back, without sending it, and
 * clears the tap (the transport also does this as it closes). */
void tg_zstd_transport_drain_tap(tg_zstd_transport_t *t);

static inline bool tg_zstd_transport_compressing(const tg_zstd_transport_t *t) {
  return t->cctx != NULL;
}

/* Receiving end: inflate every frame received after the current one,
 * accepting windows up to 2^|window_log_max|. Returns 0, -EINVAL, -ENOMEM. */
int tg_zstd_transport_start_decompress(tg_zstd_transport_t *t,
                                       int window_log_max);

static inline tg_zstd_transport_t *tg_zstd_transport_of(tg_transport_t *base) {
  return (tg_zstd_transport_t *)base;
}

#endif /* TRACEGATE_TLS_COMPRESS_TRANSPORT_H */
