/* ReadBuffers reply frames, sent from where the packets lie.
 *
 * A packet's bytes are copied once on their way out, by the socket: a
 * tg_read_frames_t writes a frame's own bytes (the
 * IPCFrame and ReadBuffersResponse fields, slice headers, each packet's
 * trusted suffix, small pieces) into an arena, leaves the bytes of large
 * pieces where the trace buffer holds them, and sends the frame with one
 * vectored sendmsg() (tg_ipc_chan_sendv): the socket's copy is the only
 * one. What the socket does not take is copied into the channel's queue
 * before the send returns, so no pointer into a trace buffer outlives the
 * read-out pass that made it.
 *
 * Owns: its arena and vector (one per streaming consumer, made at its first
 * ReadBuffers). Borrows the channel from tg_read_frames_begin() to
 * tg_read_frames_end().
 */
#ifndef TRACEGATE_SERVICE_READ_FRAMES_H
#define TRACEGATE_SERVICE_READ_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "abi/ipc_frame.h"
#include "ipc/channel.h"

/* Pieces shorter than this are copied into the arena: a vector entry of
 * its own costs the kernel more than copying a few hundred bytes. */
#define TG_READ_FRAMES_INLINE_MAX 256u
/* Pieces sent in place per frame: with the arena's runs between them, the
 * frame's vector stays under IOV_MAX (1024). */
#define TG_READ_FRAMES_MAX_HOLES 500u

typedef struct tg_read_hole {
  uint32_t at; /* arena offset the piece goes before */
  uint32_t len;
  const uint8_t *p; /* borrowed from the read-out */
} tg_read_hole_t;

typedef struct tg_read_frames {
  tg_ipc_chan_t *chan; /* borrowed during a pass */
  uint64_t request_id;
  tg_ipc_reply_writer_t rw;
  bool open;
  int err; /* sticky for the pass: 0 or a negative error */
  unsigned n_holes;
  uint64_t frames_sent, bytes_in_place; /* totals, for tests */
  tg_read_hole_t holes[TG_READ_FRAMES_MAX_HOLES];
  struct iovec iov[2 * TG_READ_FRAMES_MAX_HOLES + 1];
  uint8_t arena[TG_IPC_FRAME_BUFFER_SIZE];
} tg_read_frames_t;

/* NULL when out of memory. Free with free(). */
tg_read_frames_t *tg_read_frames_new(void);

/* Starts a pass: frames answer ReadBuffers call |request_id| on |chan|. */
void tg_read_frames_begin(tg_read_frames_t *f, tg_ipc_chan_t *chan,
                          uint64_t request_id);

/* Adds one packet (the concatenation of |n| pieces, |total| bytes) as one
 * or more slices; a frame that fills up is sent. Pieces [0, |n_stable|)
 * stay valid until the pass ends and are sent in place when large; the
 * others are copied. Returns 0, or the pass's error (nothing more is
 * taken after one). */
int tg_read_frames_add(tg_read_frames_t *f, const uint8_t *const *pieces,
                       const size_t *lens, unsigned n, unsigned n_stable,
                       size_t total);

/* Sends the open frame, if any, and ends the pass. Returns the pass's
 * error, or 0. */
int tg_read_frames_end(tg_read_frames_t *f);

#endif /* TRACEGATE_SERVICE_READ_FRAMES_H */
