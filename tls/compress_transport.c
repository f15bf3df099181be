/* zstd blocks on a transport; see compress_transport.h. */
#include "tls/compress_transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "tracegate/pb_wire.h"
#include "tracegate/error.h"

/* The kind byte that opens every frame once compressing. */
enum { KIND_PLAIN = 0, KIND_BLOCK = 1 };
#define HDR (TG_IPC_FRAME_HEADER_SIZE + 1)
/* A block's compressed bytes: whatever fits one frame after its kind. */
#define BLOCK_MAX (TG_IPC_FRAME_MAX_PAYLOAD - 1)
/* Holds any frame whole: a zstd frame that inflates to one is inflated at
 * once (inflate_whole()). */
#define SCRATCH_SIZE TG_IPC_FRAME_BUFFER_SIZE
/* Where a whole frame that may not fit the block's room is compressed. */
#define ZOUT_SIZE ZSTD_COMPRESSBOUND(TG_IPC_FRAME_BUFFER_SIZE)

static const tg_transport_ops_t ops;

/* --- sending end ------------------------------------------------------------ */

static int emit_block(tg_zstd_transport_t *t) {
  if (t->block_len == 0) return 0;
  uint32_t n = (uint32_t)t->block_len + 1;
  t->block[0] = (uint8_t)n;
  t->block[1] = (uint8_t)(n >> 8);
  t->block[2] = (uint8_t)(n >> 16);
  t->block[3] = (uint8_t)(n >> 24);
  t->block[4] = KIND_BLOCK;
  int rv = tg_transport_send(t->inner, t->block, TG_IPC_FRAME_HEADER_SIZE + n, -1);
  t->blocks_out++;
  t->bytes_out += TG_IPC_FRAME_HEADER_SIZE + n;
  t->block_len = 0;
  return rv;
}

/* Runs the compressor over |in| with |op|, emitting every full block;
 * with ZSTD_e_flush, until zstd holds nothing back. A block the inner
 * transport refuses does not stop it: zstd takes all of |in| (the tap's
 * copy of the stream stays whole) and the first refusal is returned. */
static int compress(tg_zstd_transport_t *t, ZSTD_inBuffer *in,
                    ZSTD_EndDirective op) {
  int refused = 0;
  for (;;) {
    ZSTD_outBuffer out = {t->block + HDR, BLOCK_MAX, t->block_len};
    size_t left = ZSTD_compressStream2(t->cctx, &out, in, op);
    if (t->tap && !ZSTD_isError(left) && out.pos > t->block_len)
      t->tap(t->tap_ctx, t->block + HDR + t->block_len, out.pos - t->block_len);
    t->block_len = out.pos;
    if (ZSTD_isError(left)) {
      TG_ERROR("zstd transport: compression failed: %s",
               ZSTD_getErrorName(left));
      return -EIO;
    }
    if (t->block_len == BLOCK_MAX) {
      int rv = emit_block(t);
      if (rv < 0 && !refused) refused = rv;
    }
    bool input_done = in->pos == in->size;
    if (op == ZSTD_e_continue ? input_done && t->block_len < BLOCK_MAX
                              : input_done && left == 0)
      return refused;
  }
}

static void on_flush_tick(uv_prepare_t *h);

/* Copies |n| compressed bytes into the blocks, emitting each one filled.
 * Takes all of |z|; returns the first refusal. */
static int append_z(tg_zstd_transport_t *t, const uint8_t *z, size_t n) {
  int refused = 0;
  while (n > 0) {
    size_t room = BLOCK_MAX - t->block_len, k = n < room ? n : room;
    memcpy(t->block + HDR + t->block_len, z, k);
    t->block_len += k;
    z += k;
    n -= k;
    if (t->block_len == BLOCK_MAX) {
      int rv = emit_block(t);
      if (rv < 0 && !refused) refused = rv;
    }
  }
  return refused;
}

/* Streams |n| bytes into the open zstd frame (one is started if none). */
static int stream(tg_zstd_transport_t *t, const uint8_t *p, size_t n) {
  ZSTD_inBuffer in = {p, n, 0};
  int rv = compress(t, &in, ZSTD_e_continue);
  t->frame_raw += in.pos;
  t->raw_in += in.pos;
  return rv;
}

/* Compresses the frame |f| (|n| bytes, its length included) as a zstd
 * frame of its own, read where it lies: ZSTD_compress2() takes its input
 * in place, where streamed input is first copied into zstd's window. The
 * output goes straight into the block when the block has room for the
 * worst case, else through |zout|. Returns 0, the first refusal of a
 * block (the frame is taken whole all the same), -ENOMEM before anything
 * is taken, or -EIO. */
static int compress_whole(tg_zstd_transport_t *t, const uint8_t *f,
                          size_t n) {
  int refused = 0;
  if (t->frame_raw) { /* the streamed frame before it ends first */
    ZSTD_inBuffer none = {NULL, 0, 0};
    refused = compress(t, &none, ZSTD_e_end);
    if (refused == -EIO) return refused;
    t->frame_raw = 0;
  }
  uint8_t *dst = t->block + HDR + t->block_len;
  size_t cap = BLOCK_MAX - t->block_len;
  if (cap < ZSTD_compressBound(n)) {
    if (!t->zout && !(t->zout = malloc(ZOUT_SIZE))) return -ENOMEM;
    dst = t->zout;
    cap = ZOUT_SIZE;
  }
  size_t c = ZSTD_compress2(t->cctx, dst, cap, f, n);
  if (ZSTD_isError(c)) {
    TG_ERROR("zstd transport: compression failed: %s", ZSTD_getErrorName(c));
    return -EIO;
  }
  t->raw_in += n;
  if (t->tap) t->tap(t->tap_ctx, dst, c);
  int rv;
  if (dst == t->zout) {
    rv = append_z(t, dst, c);
  } else {
    t->block_len += c;
    rv = t->block_len == BLOCK_MAX ? emit_block(t) : 0;
  }
  return refused ? refused : rv;
}

/* One whole frame into the compressed stream (see the header on which
 * frames are compressed whole). */
static int compress_frame(tg_zstd_transport_t *t, const uint8_t *f,
                          size_t n) {
  return n >= TG_ZSTD_WHOLE_MIN ? compress_whole(t, f, n) : stream(t, f, n);
}

/* What a frame queued into the stream leaves to the flush tick. */
static void queued(tg_zstd_transport_t *t, size_t n) {
  t->frames_in++;
  t->bytes_in += n;
  t->unflushed += n;
  if (!t->flush_armed) {
    uv_prepare_start(&t->flush_tick, on_flush_tick);
    t->flush_armed = true;
  }
}

static int flush(tg_zstd_transport_t *t) {
  if (!t->cctx || !t->unflushed) return 0;
  int rv = 0;
  if (t->frame_raw) { /* zstd holds back some of the open frame */
    ZSTD_inBuffer in = {NULL, 0, 0};
    rv = compress(t, &in, ZSTD_e_flush);
  }
  if (rv == 0) rv = emit_block(t);
  t->unflushed = 0;
  return rv;
}

static void close_transport(tg_zstd_transport_t *t, int status);

/* Once per loop iteration, before the loop waits: what was sent in this
 * iteration leaves as one flush. */
static void on_flush_tick(uv_prepare_t *h) {
  tg_zstd_transport_t *t = h->data;
  uv_prepare_stop(h);
  t->flush_armed = false;
  int rv = flush(t);
  if (rv < 0) close_transport(t, rv);
}

static int zt_send(tg_transport_t *base, const uint8_t *frame, size_t len,
                   int fd) {
  tg_zstd_transport_t *t = (tg_zstd_transport_t *)base;
  if (t->closing) {
    if (fd >= 0) close(fd);
    return -EPIPE;
  }
  if (!t->cctx) return tg_transport_send(t->inner, frame, len, fd);
  if (fd >= 0) {
    close(fd);
    return -EOPNOTSUPP;
  }
  int rv = compress_frame(t, frame, len);
  if (rv < 0) return rv;
  queued(t, len);
  return 0;
}

/* Queues [len + 1][kind 0][payload] on the inner transport as |cls|:
 * one copy of a small control frame. */
static int send_plain_payload(tg_zstd_transport_t *t, const uint8_t *payload,
                              size_t len, tg_frame_class_t cls) {
  uint8_t stack[512];
  size_t n = HDR + len;
  uint8_t *f = n <= sizeof(stack) ? stack : malloc(n);
  if (!f) return -ENOMEM;
  uint32_t plen = (uint32_t)(len + 1);
  f[0] = (uint8_t)plen;
  f[1] = (uint8_t)(plen >> 8);
  f[2] = (uint8_t)(plen >> 16);
  f[3] = (uint8_t)(plen >> 24);
  f[4] = KIND_PLAIN;
  memcpy(f + HDR, payload, len);
  int rv = tg_transport_send_frame(t->inner, f, n, cls);
  if (f != stack) free(f);
  t->bytes_out += n;
  return rv;
}

int tg_zstd_transport_send_payload(tg_zstd_transport_t *t,
                                   const uint8_t *payload, size_t len,
                                   bool plain) {
  if (t->closing) return -EPIPE;
  if (!t->cctx || len + 1 > TG_IPC_FRAME_MAX_PAYLOAD) return -EINVAL;
  if (plain) return send_plain_payload(t, payload, len, TG_FRAME_CONTROL);
  uint8_t hdr[TG_IPC_FRAME_HEADER_SIZE] = {(uint8_t)len, (uint8_t)(len >> 8),
                                           (uint8_t)(len >> 16),
                                           (uint8_t)(len >> 24)};
  int rv = stream(t, hdr, sizeof(hdr));
  /* On and after a refused block, zstd still takes the frame whole. */
  if (rv != -EIO) {
    int rv2 = stream(t, payload, len);
    if (rv == 0) rv = rv2;
  }
  if (rv < 0) return rv;
  queued(t, sizeof(hdr) + len);
  return 0;
}

int tg_zstd_transport_send_frame(tg_zstd_transport_t *t, const uint8_t *frame,
                                 size_t len) {
  if (t->closing) return -EPIPE;
  if (!t->cctx || len < TG_IPC_FRAME_HEADER_SIZE ||
      len - TG_IPC_FRAME_HEADER_SIZE + 1 > TG_IPC_FRAME_MAX_PAYLOAD ||
      tg_pb_read_le32(frame) != len - TG_IPC_FRAME_HEADER_SIZE)
    return -EINVAL;
  int rv = compress_frame(t, frame, len);
  if (rv < 0) return rv;
  queued(t, len);
  return 0;
}

int tg_zstd_transport_send_plain(tg_zstd_transport_t *t, const uint8_t *frame,
                                 size_t len) {
  if (len < TG_IPC_FRAME_HEADER_SIZE) return -EINVAL;
  return tg_zstd_transport_send_payload(t, frame + TG_IPC_FRAME_HEADER_SIZE,
                                        len - TG_IPC_FRAME_HEADER_SIZE, true);
}

void tg_zstd_transport_set_tap(tg_zstd_transport_t *t,
                               void (*fn)(void *ctx, const uint8_t *z,
                                          size_t n),
                               void *ctx) {
  t->tap = fn;
  t->tap_ctx = ctx;
}

int tg_zstd_transport_end_frame(tg_zstd_transport_t *t) {
  if (!t->cctx || t->closing) return -EIO;
  if (t->frame_raw == 0) return 0;
  ZSTD_inBuffer in = {NULL, 0, 0};
  int rv = compress(t, &in, ZSTD_e_end);
  if (rv == -EIO) return rv; /* a refused block still ended the frame */
  /* The frame's end sits in |block| with what follows: the flush tick of
   * the next send takes it; none armed means nothing was sent since the
   * last tick, so arm one. */
  t->frame_raw = 0;
  t->unflushed++;
  if (!t->flush_armed) {
    uv_prepare_start(&t->flush_tick, on_flush_tick);
    t->flush_armed = true;
  }
  return 0;
}

void tg_zstd_transport_drain_tap(tg_zstd_transport_t *t) {
  if (!t->tap) return;
  uint8_t buf[4096];
  ZSTD_inBuffer in = {NULL, 0, 0};
  while (t->cctx && t->frame_raw) { /* else zstd holds nothing back */
    ZSTD_outBuffer out = {buf, sizeof(buf), 0};
    size_t left = ZSTD_compressStream2(t->cctx, &out, &in, ZSTD_e_flush);
    if (ZSTD_isError(left)) break;
    if (out.pos) t->tap(t->tap_ctx, buf, out.pos);
    if (left == 0) break;
  }
  t->tap = NULL;
  t->tap_ctx = NULL;
}

/* --- receiving end ------------------------------------------------------------ */

static int deliver(void *ctx, const uint8_t *payload, size_t len) {
  tg_zstd_transport_t *t = ctx;
  if (t->closing) return 1;
  return t->base.cbs->on_frame(&t->base, payload, len);
}

/* The inflated bytes of a frame are consumed (split into frames and
 * delivered, a partial one copied by the frame decoder) before
 * on_inner_frame returns, so one scratch buffer serves every receiving
 * end on a thread: a collector with a thousand hosts would otherwise hold
 * a thousand, mostly touched (128 MB). An end that inflates while another
 * on its thread is in the middle of it (a delivered frame that makes
 * another connection's input flow at once) takes a scratch of its own,
 * kept until it closes. Freed at the thread's exit. */
static pthread_key_t scratch_key;
static bool scratch_key_ok; /* else every end keeps its own */
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static _Thread_local bool scratch_busy;

static void scratch_key_make(void) {
  scratch_key_ok = pthread_key_create(&scratch_key, free) == 0;
}

/* The scratch for one inflation: the thread's, or |t|'s own. NULL when
 * memory is short. Give it back with scratch_put(). */
static uint8_t *scratch_take(tg_zstd_transport_t *t) {
  pthread_once(&scratch_once, scratch_key_make);
  if (scratch_busy || !scratch_key_ok) {
    if (!t->scratch) t->scratch = malloc(SCRATCH_SIZE);
    return t->scratch;
  }
  uint8_t *b = pthread_getspecific(scratch_key);
  if (!b) {
    b = malloc(SCRATCH_SIZE);
    if (!b || pthread_setspecific(scratch_key, b) != 0) {
      free(b);
      return NULL;
    }
  }
  scratch_busy = true;
  return b;
}

static void scratch_put(tg_zstd_transport_t *t, uint8_t *b) {
  if (b != t->scratch) scratch_busy = false;
}

static int inflate_into(tg_zstd_transport_t *t, uint8_t *scratch,
                        ZSTD_inBuffer *in);

static int on_inner_frame(tg_transport_t *inner, const uint8_t *payload,
                          size_t len) {
  tg_zstd_transport_t *t = inner->data;
  if (t->closing) return 1;
  if (!t->dctx) return t->base.cbs->on_frame(&t->base, payload, len);
  if (len < 1 || payload[0] > KIND_BLOCK) {
    TG_WARN("zstd transport: a frame of unknown kind from the peer");
    close_transport(t, TG_EBAD_COMPRESSED);
    return 1;
  }
  if (payload[0] == KIND_PLAIN)
    return t->base.cbs->on_frame(&t->base, payload + 1, len - 1);
  ZSTD_inBuffer in = {payload + 1, len - 1, 0};
  uint8_t *scratch = scratch_take(t);
  if (!scratch) {
    close_transport(t, -ENOMEM);
    return 1;
  }
  int rv = inflate_into(t, scratch, &in);
  scratch_put(t, scratch);
  return rv;
}

/* True when |z| starts a zstd frame whose window is its content, which
 * its header then always gives (RFC 8878 3.1.1: Single_Segment_flag, bit
 * 5 of the frame header descriptor after the magic number). */
static bool single_segment(const uint8_t *z, size_t n) {
  return n > 4 && tg_pb_read_le32(z) == ZSTD_MAGICNUMBER && (z[4] & 0x20);
}

/* What the frame decoder made of inflated bytes: 0 to go on, 1 when the
 * transport closed on a bad frame or no memory, else the owner's non-zero
 * return (it stopped reading). */
static int fed(tg_zstd_transport_t *t, int rv) {
  if (rv == TG_EFRAME_TOO_LARGE || rv == -ENOMEM) {
    TG_WARN("zstd transport: inflated stream holds a bad frame: %s",
            tg_strerror(rv));
    close_transport(t, rv == -ENOMEM ? rv : TG_EBAD_COMPRESSED);
    return 1;
  }
  return rv;
}

/* At a zstd frame boundary: a whole single-segment frame at the front of
 * |in| that inflates to at most the scratch is inflated in one call into
 * it and its frames handed over in place (a streaming inflate writes into
 * zstd's own window first and copies out: a sender's large frames are
 * such frames, compress_whole()). Its window is its content, so the
 * receiver's window cap has nothing to refuse. False when |in| does not
 * start with one; else true with |*rv| as inflate_into() returns it. */
static bool inflate_whole(tg_zstd_transport_t *t, uint8_t *scratch,
                          ZSTD_inBuffer *in, int *rv) {
  const uint8_t *z = (const uint8_t *)in->src + in->pos;
  size_t avail = in->size - in->pos;
  if (!single_segment(z, avail)) return false;
  size_t zn = ZSTD_findFrameCompressedSize(z, avail);
  if (ZSTD_isError(zn)) return false; /* not all here yet, or bad: streamed */
  unsigned long long n = ZSTD_getFrameContentSize(z, zn);
  if (n == ZSTD_CONTENTSIZE_UNKNOWN || n == ZSTD_CONTENTSIZE_ERROR ||
      n > SCRATCH_SIZE)
    return false;
  size_t got = ZSTD_decompressDCtx(t->dctx, scratch, SCRATCH_SIZE, z, zn);
  ZSTD_DCtx_reset(t->dctx, ZSTD_reset_session_only);
  if (ZSTD_isError(got)) {
    TG_WARN("zstd transport: the peer's stream does not inflate: %s",
            ZSTD_getErrorName(got));
    close_transport(t, TG_EBAD_COMPRESSED);
    *rv = 1;
    return true;
  }
  in->pos += zn;
  t->whole_in++;
  *rv = fed(t, tg_frame_decoder_feed(&t->dec, scratch, got, deliver, t));
  return true;
}

/* Inflates into the scratch buffer, whose whole frames are handed over in
 * place, or, while a frame is partial, straight into the decoder's room for
 * its rest; on a bulk stream every frame is opened there, header and all,
 * so that its bytes are written once (the scratch's tail would be copied:
 * half of each 128 KiB frame). Whole zstd frames of one frame's size skip
 * both (inflate_whole()). */
static int inflate_into(tg_zstd_transport_t *t, uint8_t *scratch,
                        ZSTD_inBuffer *in) {
  ZSTD_outBuffer out = {NULL, 0, 0};
  do {
    int w;
    if (t->zframe_start && inflate_whole(t, scratch, in, &w)) {
      if (w != 0) return w; /* closed, or the owner stopped reading */
      out = (ZSTD_outBuffer){NULL, 0, 0};
      if (in->pos == in->size) return 0;
      continue; /* the loop's test sees more input */
    }
    uint8_t *at = NULL;
    size_t room = tg_frame_decoder_room(&t->dec, &at);
    int rv = 0;
    if (room == 0 && tg_frame_decoder_bulk(&t->dec)) {
      rv = tg_frame_decoder_open_room(&t->dec, &at);
      if (rv > 0) room = (size_t)rv;
    }
    if (rv >= 0) {
      out = room ? (ZSTD_outBuffer){at, room, 0}
                 : (ZSTD_outBuffer){scratch, SCRATCH_SIZE, 0};
      size_t r = ZSTD_decompressStream(t->dctx, &out, in);
      if (ZSTD_isError(r)) {
        TG_WARN("zstd transport: the peer's stream does not inflate: %s",
                ZSTD_getErrorName(r));
        close_transport(t, TG_EBAD_COMPRESSED);
        return 1;
      }
      t->zframe_start = r == 0; /* a frame ended and all of it is out */
      rv = room ? tg_frame_decoder_wrote(&t->dec, out.pos, deliver, t)
                : tg_frame_decoder_feed(&t->dec, scratch, out.pos, deliver, t);
    }
    if ((rv = fed(t, rv)) != 0) return rv;
  } while (in->pos < in->size || out.pos == out.size);
  return 0;
}

/* --- both ----------------------------------------------------------------- */

static void on_inner_drain(tg_transport_t *inner) {
  tg_zstd_transport_t *t = inner->data;
  if (!t->closing && t->base.cbs->on_drain) t->base.cbs->on_drain(&t->base);
}

static void on_tick_closed(uv_handle_t *h) {
  tg_zstd_transport_t *t = h->data;
  tg_zstd_transport_drain_tap(t);
  ZSTD_freeCCtx(t->cctx);
  ZSTD_freeDCtx(t->dctx);
  free(t->block);
  free(t->zout);
  free(t->scratch);
  tg_frame_decoder_free(&t->dec);
  t->cctx = NULL;
  t->dctx = NULL;
  t->block = t->zout = t->scratch = NULL;
  if (t->base.cbs) t->base.cbs->on_close(&t->base, t->close_status);
}

static void on_inner_close(tg_transport_t *inner, int status) {
  tg_zstd_transport_t *t = inner->data;
  t->closing = true;
  t->closed_inner = true;
  if (!t->close_status) t->close_status = status;
  uv_close((uv_handle_t *)&t->flush_tick, on_tick_closed);
}

static const tg_transport_cbs_t inner_cbs = {
    .on_frame = on_inner_frame,
    .on_drain = on_inner_drain,
    .on_close = on_inner_close,
};

static void close_transport(tg_zstd_transport_t *t, int status) {
  if (t->closing) return;
  /* What was sent before the close still leaves (a local close only). */
  if (status == 0) flush(t);
  tg_zstd_transport_drain_tap(t); /* after the flush: what the peer gets */
  t->closing = true;
  t->close_status = status;
  tg_transport_close(t->inner, status);
}

static void zt_close(tg_transport_t *base, int status) {
  close_transport((tg_zstd_transport_t *)base, status);
}

static int zt_take_fd(tg_transport_t *base) {
  tg_zstd_transport_t *t = (tg_zstd_transport_t *)base;
  return t->dctx ? -1 : tg_transport_take_fd(t->inner);
}

static bool zt_congested(const tg_transport_t *base) {
  const tg_zstd_transport_t *t = (const tg_zstd_transport_t *)base;
  return tg_transport_congested(t->inner);
}

static size_t zt_pending(const tg_transport_t *base) {
  const tg_zstd_transport_t *t = (const tg_zstd_transport_t *)base;
  return tg_transport_pending(t->inner) + t->block_len + t->unflushed;
}

static void zt_pause_reading(tg_transport_t *base, bool paused) {
  tg_zstd_transport_t *t = (tg_zstd_transport_t *)base;
  tg_transport_pause_reading(t->inner, paused);
}

/* Once compressing: bulk frames into the stream, control frames plain
 * beside it (the inner transport may let them overtake queued blocks), a
 * barrier plain behind everything the stream holds. */
static int zt_send_frame(tg_transport_t *base, const uint8_t *frame,
                         size_t len, tg_frame_class_t cls) {
  tg_zstd_transport_t *t = (tg_zstd_transport_t *)base;
  if (t->closing) return -EPIPE;
  if (!t->cctx) return tg_transport_send_frame(t->inner, frame, len, cls);
  if (cls == TG_FRAME_BULK) return tg_zstd_transport_send_frame(t, frame, len);
  if (len < TG_IPC_FRAME_HEADER_SIZE ||
      len - TG_IPC_FRAME_HEADER_SIZE + 1 > TG_IPC_FRAME_MAX_PAYLOAD ||
      tg_pb_read_le32(frame) != len - TG_IPC_FRAME_HEADER_SIZE)
    return -EINVAL;
  if (cls == TG_FRAME_BARRIER) {
    int rv = flush(t);
    if (rv < 0) return rv;
  }
  return send_plain_payload(t, frame + TG_IPC_FRAME_HEADER_SIZE,
                            len - TG_IPC_FRAME_HEADER_SIZE, cls);
}

static void zt_set_idle_timeout(tg_transport_t *base, uint32_t ms) {
  tg_zstd_transport_t *t = (tg_zstd_transport_t *)base;
  (void)tg_transport_set_idle_timeout(t->inner, ms);
}

static const char *zt_error(const tg_transport_t *base) {
  const tg_zstd_transport_t *t = (const tg_zstd_transport_t *)base;
  return tg_transport_error(t->inner);
}

static const tg_transport_ops_t ops = {
    .send = zt_send,
    .take_fd = zt_take_fd,
    .congested = zt_congested,
    .pending = zt_pending,
    .pause_reading = zt_pause_reading,
    .close = zt_close,
    .send_frame = zt_send_frame,
    .set_idle_timeout = zt_set_idle_timeout,
    .error = zt_error,
};

int tg_zstd_transport_init(uv_loop_t *loop, tg_zstd_transport_t *t,
                           tg_transport_t *inner) {
  memset(t, 0, sizeof(*t));
  t->base.ops = &ops;
  t->inner = inner;
  tg_frame_decoder_init(&t->dec);
  uv_prepare_init(loop, &t->flush_tick);
  t->flush_tick.data = t;
  inner->cbs = &inner_cbs;
  inner->data = t;
  return 0;
}

static bool window_ok(int window_log) {
  return window_log >= TG_ZSTD_WINDOW_LOG_MIN &&
         window_log <= TG_ZSTD_WINDOW_LOG_MAX;
}

int tg_zstd_transport_start_compress(tg_zstd_transport_t *t, int level,
                                     int window_log) {
  if (t->cctx || !window_ok(window_log) || level < 1 ||
      level > ZSTD_maxCLevel())
    return -EINVAL;
  ZSTD_CCtx *c = ZSTD_createCCtx();
  uint8_t *block = malloc(TG_IPC_FRAME_BUFFER_SIZE);
  if (!c || !block ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, window_log))) {
    ZSTD_freeCCtx(c);
    free(block);
    return -ENOMEM;
  }
  t->cctx = c;
  t->block = block;
  return 0;
}

int tg_zstd_transport_start_decompress(tg_zstd_transport_t *t,
                                       int window_log_max) {
  if (t->dctx || !window_ok(window_log_max)) return -EINVAL;
  ZSTD_DCtx *d = ZSTD_createDCtx();
  if (!d || ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax,
                                                window_log_max))) {
    ZSTD_freeDCtx(d);
    return -ENOMEM;
  }
  t->dctx = d;
  t->zframe_start = true;
  return 0;
}
