/* IPC framing: a byte stream of [u32 little-endian length][IPCFrame bytes].
 *
 *   04 00 00 00 A0 A1 A2 A3   05 00 00 00 B0 B1 B2 B3 B4
 *   { len: 4  } [ frame 1 ]   { len: 5  } [  frame 2   ]
 *
 * Same wire as Perfetto's IPC layer (the producer and consumer sockets, and
 * our relay's TLS stream). A length above TG_IPC_FRAME_MAX_PAYLOAD cannot be
 * resynchronised from, so the decoder reports it and the connection closes.
 * A zero length is skipped. A payload that is not a valid IPCFrame is the
 * dispatcher's business: the framing is intact, so the stream continues.
 *
 * The decoder accepts input in pieces of any size (down to single bytes) and
 * only copies bytes of frames that arrive split; whole frames in the input
 * are handed to the callback in place.
 */
#ifndef TRACEGATE_ABI_IPC_FRAME_H
#define TRACEGATE_ABI_IPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracegate/pb_writer.h"
#include "pb/ipc/wire_protocol.pb-c.h"
#include "common/buf.h"

#define TG_IPC_FRAME_HEADER_SIZE 4u
#define TG_IPC_FRAME_MAX_PAYLOAD 131068u /* 128 KiB including the header */
#define TG_IPC_FRAME_BUFFER_SIZE \
  (TG_IPC_FRAME_HEADER_SIZE + TG_IPC_FRAME_MAX_PAYLOAD)

_Static_assert(TG_IPC_FRAME_BUFFER_SIZE == 128 * 1024,
               "frame buffer is 128 KiB");

typedef Perfetto__Protos__IPCFrame tg_ipc_frame_t;

/* Called once per complete frame. |payload| is valid only during the call,
 * and the frame's 4-byte length is always just before it (in the
 * decoder's buffer or in the input fed).
 * Return 0 to continue; anything else stops the decoder, which returns that
 * value from tg_frame_decoder_feed() and drops the rest of the input (the
 * caller is closing the connection). */
typedef int (*tg_frame_cb)(void *ctx, const uint8_t *payload, size_t len);

typedef struct tg_frame_decoder {
  uint8_t *buf;  /* partial frame; TG_IPC_FRAME_BUFFER_SIZE, lazily */
  size_t have;   /* bytes in |buf| (header included) */
  int error;     /* sticky TG_EFRAME_TOO_LARGE */
  uint32_t since_bulk; /* frames since the last of TG_FRAME_BULK_MIN+ */
  uint64_t copied;     /* bytes feed() copied into |buf|: frames split */
  uint64_t frames;
  uint64_t empty_frames;
  uint64_t adopted; /* frames whose buffer a caller kept (adopt()) */
} tg_frame_decoder_t;

void tg_frame_decoder_init(tg_frame_decoder_t *d);
void tg_frame_decoder_free(tg_frame_decoder_t *d);

/* Feeds |len| bytes. Returns 0, TG_EFRAME_TOO_LARGE (sticky: close the
 * connection), -ENOMEM, or the callback's non-zero return value. */
int tg_frame_decoder_feed(tg_frame_decoder_t *d, const uint8_t *data,
                          size_t len, tg_frame_cb cb, void *ctx);

/* --- reading straight into the frame being assembled ---------------------
 * A frame longer than a reader's chunk spans reads, and feed() copies each
 * byte of it into |buf|: on a bulk stream of 128 KiB frames, nearly every
 * byte. A reader that can choose where its next bytes land (a scatter
 * read, an inflater, a record decrypter) writes them in place instead:
 *
 *   uint8_t *at;
 *   size_t room = tg_frame_decoder_room(d, &at);  // 0: nothing partial
 *   ... write k <= room bytes at |at| ...
 *   rv = tg_frame_decoder_wrote(d, k, cb, ctx);    // emits it once whole
 *
 * The room is what completes the header while fewer than 4 bytes are in,
 * then what completes the frame. feed() and the room may alternate freely.
 */
size_t tg_frame_decoder_room(const tg_frame_decoder_t *d, uint8_t **at);

/* Opens a frame in place when nothing is partial, so that even its header
 * lands in |buf| (a reader whose writes cost no syscall, e.g. an inflater,
 * then copies nothing at all). Returns the header's room (4), 0 when a
 * frame is already partial (use tg_frame_decoder_room()), the sticky error,
 * or -ENOMEM. */
int tg_frame_decoder_open_room(tg_frame_decoder_t *d, uint8_t **at);

/* |n| bytes were written at the room last given (n <= that room). Emits
 * the frame when it is whole. Returns as feed(); -EINVAL for an |n| larger
 * than the room. */
int tg_frame_decoder_wrote(tg_frame_decoder_t *d, size_t n, tg_frame_cb cb,
                           void *ctx);

/* --- keeping a frame past its callback ------------------------------------
 * A frame assembled in the decoder's own buffer (one that spanned reads,
 * or one a reader wrote in place) can be kept instead of copied: called
 * from the frame callback with the payload it was given, adopt() hands
 * that buffer over and the decoder allocates another for the next frame.
 * The result (TG_IPC_FRAME_BUFFER_SIZE bytes, the payload at
 * TG_IPC_FRAME_HEADER_SIZE) is the caller's, who frees it with free().
 * NULL when the payload lies in the caller's own input (copy it then).
 * Only from the callback that was given |payload|. */
uint8_t *tg_frame_decoder_adopt(tg_frame_decoder_t *d, const uint8_t *payload);

/* Frames this long or longer make a bulk stream, until TG_FRAME_BULK_FOR
 * shorter ones in a row (a ReadBuffers stream ends each pass with one):
 * its readers read little past the end of the frame being assembled, so
 * that the next one starts in place rather than in their chunk buffer,
 * whose partial frame the decoder copies. */
#define TG_FRAME_BULK_MIN (16u * 1024)
#define TG_FRAME_BULK_FOR 8u
static inline bool tg_frame_decoder_bulk(const tg_frame_decoder_t *d) {
  return d->since_bulk < TG_FRAME_BULK_FOR;
}

/* Bytes of an incomplete frame currently held (for memory accounting). */
static inline size_t tg_frame_decoder_pending(const tg_frame_decoder_t *d) {
  return d->have;
}

/* Unpacks an IPCFrame payload with protobuf-c. Returns NULL for garbage.
 * The result is owned by the caller: free it with tg_ipc_frame_free(). */
tg_ipc_frame_t *tg_ipc_frame_unpack(const uint8_t *payload, size_t len);
void tg_ipc_frame_free(tg_ipc_frame_t *f);

/* --- reading an InvokeMethodReply in place -------------------------------
 * A consumer's hot frames are ReadBuffers replies of up to 128 KiB, which
 * protobuf-c would copy (reply_proto) into an allocation of their own: a
 * second copy of the whole trace. The reader below points into the frame
 * instead, for the plain shape every service sends; anything else goes to
 * tg_ipc_frame_unpack(), which then decides. */
typedef struct tg_ipc_reply_view {
  uint64_t request_id;
  bool success;
  bool has_more;
  bool has_reply_proto;
  const uint8_t *reply_proto; /* into the payload; NULL without one */
  size_t reply_proto_len;
} tg_ipc_reply_view_t;

/* Reads |payload| as an IPCFrame whose msg is one InvokeMethodReply.
 * Returns 1 with |v| filled (valid as long as |payload|), or 0 when the
 * frame is not that plain: another member of the msg oneof, the reply
 * twice (protobuf-c merges), data_for_testing, a known field of another
 * wire type, a bool longer than one byte, or bytes that do not decode.
 * When it returns 1, tg_ipc_frame_unpack() of the same bytes gives the same
 * values (fuzz_frame_decoder checks both ways). */
int tg_ipc_frame_read_reply(const uint8_t *payload, size_t len,
                            tg_ipc_reply_view_t *v);

/* The same for the service's side: an IPCFrame whose msg is one
 * InvokeMethod (a producer's CommitData, say), read in place. Returns 1
 * with |v| filled, or 0 for any other shape, as tg_ipc_frame_read_reply()
 * (also a service or method id past 32 bits). */
typedef struct tg_ipc_invoke_view {
  uint64_t request_id;
  uint32_t service_id;
  uint32_t method_id;
  bool drop_reply;
  const uint8_t *args; /* into the payload; NULL without args_proto */
  size_t args_len;
} tg_ipc_invoke_view_t;

int tg_ipc_frame_read_invoke(const uint8_t *payload, size_t len,
                             tg_ipc_invoke_view_t *v);

/* Appends [len][frame] to |out|. Returns 0, TG_EFRAME_TOO_LARGE,
 * TG_EPROTO_ENCODE or a tg_buf error. */
int tg_ipc_frame_append(const tg_ipc_frame_t *f, tg_buf_t *out);

/* Appends IPCFrame{request_id, RequestError{error = |text|}} to |out|:
 * a request refused before it was processed, or, with request id 0 (which
 * no client request uses), a notice. Returns as tg_ipc_frame_append(). */
int tg_ipc_request_error_append(uint64_t request_id, const char *text,
                                tg_buf_t *out);

/* Appends a whole InvokeMethod frame ([len][IPCFrame]) to |out|, written
 * with the pb writer (no protobuf-c structures, one copy of |args|).
 * Returns 0, TG_EFRAME_TOO_LARGE or -ENOMEM (|out| unchanged). */
int tg_ipc_invoke_append(tg_buf_t *out, uint64_t request_id,
                         uint32_t service_id, uint32_t method_id,
                         const uint8_t *args, size_t args_len,
                         bool drop_reply);

/* --- writing reply frames in place ----------------------------------------
 * ReadBuffers replies are large and hot: they are serialised directly into
 * the connection's output buffer with the pb writer, with no intermediate
 * protobuf-c structures:
 *
 *   tg_ipc_reply_writer_t rw;
 *   tg_ipc_reply_begin(&rw, out_space, space_len, request_id, true, more);
 *   tg_pbw_append_bytes(&rw.body, ...);     // fields of the reply message
 *   tg_ipc_reply_end(&rw, &frame_len);      // back-fills both lengths
 */
typedef struct tg_ipc_reply_writer {
  tg_pbw_t body;       /* write the reply message's fields here */
  uint8_t *frame;      /* start of the 4-byte frame length */
} tg_ipc_reply_writer_t;

/* |space| must hold at least 32 bytes; the frame never exceeds
 * min(space_len, TG_IPC_FRAME_BUFFER_SIZE) bytes. */
void tg_ipc_reply_begin(tg_ipc_reply_writer_t *rw, uint8_t *space,
                        size_t space_len, uint64_t request_id, bool success,
                        bool has_more);
/* Returns 0 with the whole frame's length (header included) in |frame_len|,
 * or the writer's error (TG_ENO_SPACE when the body did not fit). */
int tg_ipc_reply_end(tg_ipc_reply_writer_t *rw, size_t *frame_len);

#endif /* TRACEGATE_ABI_IPC_FRAME_H */
