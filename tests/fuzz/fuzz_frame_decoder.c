/* Fuzzes the IPC frame decoder (abi/ipc_frame.h) with hostile byte streams.
 *
 * Input: [split][stop][stream...]. |split| picks how the stream is cut into
 * tg_frame_decoder_feed() calls; |stop| (if non-zero) makes the callback stop
 * the decoder at that frame, as a dispatcher closing the connection would.
 * The stream is decoded three times, whole, in pieces, and by a reader
 * that writes into the decoder's room (tg_frame_decoder_room/open_room/
 * wrote, as the channel, the inflater and the TLS reader do) wherever it
 * is offered, feeding the rest; all three must emit the same frames
 * (lengths and bytes) and end in the same status: framing may not depend
 * on how the socket happened to deliver the bytes, nor on where they were
 * written.
 *
 * Each frame is also read by the in-place readers (tg_ipc_frame_read_reply
 * and _read_invoke) and by protobuf-c: whenever one of the former reads a
 * frame, both must give the same ids, flags and bytes.
 *
 * Every piece is fed from its own exact-size heap copy so ASan catches a
 * read past the end of a piece, not just past the end of the input. The
 * second and third decodes keep every frame they can by adopting the
 * decoder's buffer (tg_frame_decoder_adopt, as the relay's replay window
 * does) and free it at once: ASan then catches a decoder that touches a
 * buffer it handed over.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/ipc_frame.h"
#include "tracegate/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STOP_RV 12345

typedef struct frame_log {
  uint8_t *bytes; /* concatenated payloads; a stream holds fewer bytes */
  size_t used;
  size_t *lens;
  size_t n;
  size_t max;
  unsigned stop_at; /* 1-based frame index; 0: never */
  bool unpack;
  tg_frame_decoder_t *adopt_from; /* NULL: copy only */
  size_t adopted;
} frame_log_t;

static void log_init(frame_log_t *l, size_t stream_len, unsigned stop_at,
                     bool unpack) {
  memset(l, 0, sizeof(*l));
  /* Every emitted frame takes a 4-byte header plus >= 1 byte. */
  l->max = stream_len / (TG_IPC_FRAME_HEADER_SIZE + 1) + 1;
  l->lens = malloc(l->max * sizeof(*l->lens));
  l->bytes = malloc(stream_len + 1);
  if (!l->lens || !l->bytes) abort();
  l->stop_at = stop_at;
  l->unpack = unpack;
}

static void log_free(frame_log_t *l) {
  free(l->lens);
  free(l->bytes);
}

/* The in-place readers against protobuf-c: whenever one reads a frame,
 * protobuf-c reads the same InvokeMethodReply or InvokeMethod from it. */
static void check_views(const uint8_t *payload, size_t len) {
  tg_ipc_reply_view_t v;
  int plain = tg_ipc_frame_read_reply(payload, len, &v);
  if (plain != 0 && plain != 1) __builtin_trap();
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(payload, len);
  if (plain) {
    if (!f || f->msg_case !=
                  PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY)
      __builtin_trap();
    const Perfetto__Protos__IPCFrame__InvokeMethodReply *r =
        f->msg_invoke_method_reply;
    if (v.request_id != f->request_id || v.success != r->success ||
        v.has_more != r->has_more ||
        v.has_reply_proto != (bool)r->has_reply_proto ||
        (v.has_reply_proto && v.reply_proto_len != r->reply_proto.len) ||
        (v.reply_proto_len &&
         memcmp(v.reply_proto, r->reply_proto.data, v.reply_proto_len)))
      __builtin_trap();
    /* In place: the bytes lie in the frame. */
    if (v.has_reply_proto && (v.reply_proto < payload ||
                              v.reply_proto + v.reply_proto_len >
                                  payload + len))
      __builtin_trap();
  }
  tg_ipc_invoke_view_t iv;
  int call = tg_ipc_frame_read_invoke(payload, len, &iv);
  if (call != 0 && call != 1) __builtin_trap();
  if (call && plain) __builtin_trap(); /* one oneof member or the other */
  if (call) {
    if (!f || f->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD)
      __builtin_trap();
    const Perfetto__Protos__IPCFrame__InvokeMethod *m = f->msg_invoke_method;
    if (iv.request_id != f->request_id || iv.service_id != m->service_id ||
        iv.method_id != m->method_id || iv.drop_reply != (bool)m->drop_reply ||
        (iv.args != NULL) != (bool)m->has_args_proto ||
        iv.args_len != m->args_proto.len ||
        (iv.args_len && memcmp(iv.args, m->args_proto.data, iv.args_len)))
      __builtin_trap();
    if (iv.args && (iv.args < payload || iv.args + iv.args_len > payload + len))
      __builtin_trap();
  }
  tg_ipc_frame_free(f);
}

static int on_frame(void *ctx, const uint8_t *payload, size_t len) {
  frame_log_t *l = ctx;
  /* Zero-length frames are skipped; nothing larger than the cap exists. */
  if (len == 0 || len > TG_IPC_FRAME_MAX_PAYLOAD) __builtin_trap();
  if (l->n >= l->max) __builtin_trap();
  memcpy(l->bytes + l->used, payload, len); /* also probes every byte */
  l->used += len;
  l->lens[l->n++] = len;
  if (l->unpack) check_views(payload, len);
  if (l->adopt_from) {
    uint8_t *b = tg_frame_decoder_adopt(l->adopt_from, payload);
    if (b) {
      if (payload != b + TG_IPC_FRAME_HEADER_SIZE) __builtin_trap();
      l->adopted++;
      free(b);
    }
  }
  return l->stop_at && l->n == l->stop_at ? STOP_RV : 0;
}

static int feed_copy(tg_frame_decoder_t *d, const uint8_t *p, size_t n,
                     frame_log_t *l) {
  uint8_t *copy = malloc(n ? n : 1);
  if (!copy) abort();
  memcpy(copy, p, n);
  int rv = tg_frame_decoder_feed(d, copy, n, on_frame, l);
  free(copy);
  return rv;
}

/* Next piece length for split pattern |split| (never 0 twice in a row). */
static size_t next_piece(uint8_t split, const uint8_t *stream, size_t off,
                         size_t left, uint32_t *rng, bool *last_was_empty) {
  if (left == 0) return 0;
  size_t n;
  switch (split & 3) {
    case 0:
      n = 1;
      break;
    case 1:
      n = (size_t)(split >> 2) + 1; /* fixed 1..64 */
      break;
    case 2:
      *rng ^= *rng << 13;
      *rng ^= *rng >> 17;
      *rng ^= *rng << 5;
      n = *rng % 300; /* random, crossing headers and frames */
      break;
    default:
      n = stream[off] % 17; /* the stream cuts itself, with empty feeds */
      break;
  }
  if (n == 0 && *last_was_empty) n = 1;
  *last_was_empty = n == 0;
  return n < left ? n : left;
}

/* The in-place reader: writes into the room the decoder offers (opening
 * one when nothing is partial, on every other call), else feeds a piece. */
static int decode_in_place(tg_frame_decoder_t *d, uint8_t split,
                           const uint8_t *stream, size_t len, frame_log_t *l) {
  uint32_t rng = 0x2545F491u ^ split;
  bool last_was_empty = false, open = false;
  size_t off = 0;
  int rv = 0;
  while (off < len && rv == 0) {
    uint8_t *at = NULL;
    size_t room = tg_frame_decoder_room(d, &at);
    open = !open;
    if (room == 0 && open) {
      rv = tg_frame_decoder_open_room(d, &at);
      if (rv < 0) break;
      room = (size_t)rv;
      rv = 0;
    }
    size_t n = next_piece(split, stream, off, len - off, &rng, &last_was_empty);
    if (room == 0) {
      rv = feed_copy(d, stream + off, n, l);
    } else {
      if (n > room) n = room;
      memcpy(at, stream + off, n);
      rv = tg_frame_decoder_wrote(d, n, on_frame, l);
    }
    off += n;
  }
  return rv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  uint8_t split = data[0];
  unsigned stop_at = data[1] & 0x0F;
  const uint8_t *stream = data + 2;
  size_t len = size - 2;

  /* Whole. */
  frame_log_t whole;
  log_init(&whole, len, stop_at, true);
  tg_frame_decoder_t d1;
  tg_frame_decoder_init(&d1);
  int rv1 = feed_copy(&d1, stream, len, &whole);

  /* In pieces, stopping at the first non-zero status like a connection. */
  frame_log_t pieces;
  log_init(&pieces, len, stop_at, false);
  tg_frame_decoder_t d2;
  tg_frame_decoder_init(&d2);
  pieces.adopt_from = &d2;
  int rv2 = 0;
  uint32_t rng = 0x9E3779B9u ^ split;
  bool last_was_empty = false;
  size_t off = 0;
  while (off < len || (off == len && len == 0)) {
    size_t n = next_piece(split, stream, off, len - off, &rng, &last_was_empty);
    rv2 = feed_copy(&d2, stream + off, n, &pieces);
    off += n;
    if (rv2 != 0 || len == 0) break;
  }

  /* Written in place where the decoder offers room. */
  frame_log_t placed;
  log_init(&placed, len, stop_at, false);
  tg_frame_decoder_t d3;
  tg_frame_decoder_init(&d3);
  placed.adopt_from = &d3;
  int rv3 = decode_in_place(&d3, split, stream, len, &placed);
  if (rv3 != rv1 || placed.n != whole.n || placed.used != whole.used)
    __builtin_trap();
  if (memcmp(whole.lens, placed.lens, whole.n * sizeof(*whole.lens)) != 0 ||
      memcmp(whole.bytes, placed.bytes, whole.used) != 0)
    __builtin_trap();
  if (rv1 == 0 &&
      (tg_frame_decoder_pending(&d3) != tg_frame_decoder_pending(&d1) ||
       d3.empty_frames != d1.empty_frames))
    __builtin_trap();
  tg_frame_decoder_free(&d3);
  log_free(&placed);

  if (rv1 != rv2) __builtin_trap();
  if (rv1 != 0 && rv1 != TG_EFRAME_TOO_LARGE && rv1 != STOP_RV)
    __builtin_trap();
  if (whole.n != pieces.n || whole.used != pieces.used) __builtin_trap();
  if (memcmp(whole.lens, pieces.lens, whole.n * sizeof(*whole.lens)) != 0)
    __builtin_trap();
  if (memcmp(whole.bytes, pieces.bytes, whole.used) != 0) __builtin_trap();
  if (d1.frames != d2.frames) __builtin_trap();
  if (d2.adopted != pieces.adopted) __builtin_trap();
  if (rv1 == 0) {
    if (d1.empty_frames != d2.empty_frames) __builtin_trap();
    /* Both hold the same unfinished tail. */
    if (tg_frame_decoder_pending(&d1) != tg_frame_decoder_pending(&d2))
      __builtin_trap();
    if (tg_frame_decoder_pending(&d1) >= TG_IPC_FRAME_BUFFER_SIZE)
      __builtin_trap();
  }
  if (rv1 == TG_EFRAME_TOO_LARGE) {
    /* Sticky: the connection is unusable. */
    static const uint8_t more[8] = {1, 0, 0, 0, 0x08, 0, 0, 0};
    if (feed_copy(&d1, more, sizeof(more), &whole) != TG_EFRAME_TOO_LARGE)
      __builtin_trap();
    if (feed_copy(&d2, more, sizeof(more), &pieces) != TG_EFRAME_TOO_LARGE)
      __builtin_trap();
  }

  tg_frame_decoder_free(&d1);
  tg_frame_decoder_free(&d2);
  log_free(&whole);
  log_free(&pieces);
  return 0;
}
