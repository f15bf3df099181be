/* Replay windows: what the relay forwarded of each session key's
 * ReadBuffers stream and the client has not acknowledged yet, so that a
 * client that lost its link can get it again (TracegateRelay.Ack and
 * .Resume, proto/tracegate/relay.proto).
 *
 *   service --ReadBuffers reply--> bridge --push--> window[key]: seq 1, 2, ...
 *   client  --Ack{seq}-----------> trims the window through seq
 *   client  --Resume{last_seq}---> frames after last_seq, or the exact loss
 *
 * One window per namespaced key ("<identity>/<key>"), shared by the key's
 * successive connections (a reconnect finds the numbering where it was).
 * Bounded: each window holds at most |cap| bytes of frames (the oldest
 * unacknowledged frames are dropped first, and what was dropped is
 * counted so that a Resume can say exactly what is lost); at most
 * |max_windows| windows exist, and a window no connection uses is freed
 * after |linger_ms| or when room is needed, the least recently used first.
 *
 * A frame is held in one of three ways: copied, in the buffer the relay
 * read it into (push_block), or, when the client takes the stream
 * compressed, as a place in a segment: the zstd bytes the compressing
 * transport made of it (tls/compress_transport.h's tap), whole zstd
 * frames per segment, inflated only when a Resume needs it. Holding what was
 * sent compressed costs the relay no copy of the trace, nor a fresh
 * buffer for each reply read (memory the cache never holds), and lets
 * the same cap hold the trace many times over. A segment counts against its window's cap as
 * its compressed bytes; an open segment may take the window past the cap
 * by what it holds (at most about TG_REPLAY_SEG_RAW of frames).
 *
 * Pure data structure: no I/O, the caller passes the time.
 */
#ifndef TRACEGATE_RELAY_REPLAY_WINDOW_H
#define TRACEGATE_RELAY_REPLAY_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/list.h"

/* Frames' bytes after which the compressing end starts a new segment
 * (ending its zstd frame): what a Resume inflates to reach one frame, at
 * most. */
#define TG_REPLAY_SEG_RAW (1u << 20)

/* Whole zstd frames of the compressed stream: frames point into them. */
typedef struct tg_replay_seg {
  unsigned refs; /* frames held in it, and 1 while open */
  bool open;     /* still being appended to (by one connection) */
  bool broken;   /* out of memory while appending: holds no frame */
  tg_buf_t z;    /* the compressed bytes */
} tg_replay_seg_t;

typedef struct tg_replay_frame {
  tg_list_t node;
  uint64_t seq;
  uint64_t cum; /* bytes of every frame through this one */
  bool last_of_read;
  bool ends_packet; /* its last slice ends a packet (or it had none and the
                     * frame before did) */
  size_t len;
  size_t charge;       /* bytes it holds against the window's cap */
  const uint8_t *body; /* the ReadBuffersResponse: in |block| or |data|;
                        * NULL when it is in |seg| */
  void *block;         /* owned; NULL when |body| was copied into |data| */
  tg_replay_seg_t *seg; /* a reference held, or NULL */
  uint64_t seg_off;     /* where the body starts, inflated */
  uint8_t data[];
} tg_replay_frame_t;

typedef struct tg_replay_window {
  tg_list_t node;
  char *key;
  unsigned users;        /* connections holding it */
  uint64_t idle_since_ms; /* when the last user let go */
  uint64_t next_seq;     /* the seq of the next frame (first: 1) */
  uint64_t cum;          /* bytes of every frame pushed */
  tg_list_t frames;      /* tg_replay_frame_t, oldest first */
  size_t held;           /* bytes they hold (their charges) */
  /* The last frame no longer held, and why: acked (the client has it) or
   * dropped for room (the client may not have it). */
  uint64_t gone_seq, gone_cum;
  bool gone_ends_packet, last_ends_packet;
  uint64_t acked_seq;
  uint64_t dropped_frames, dropped_bytes; /* for room, never acked */
  /* The last connection that had a session under this key lost it when
   * the tracing service closed that connection (SetSessionKeyResponse's
   * ended_with_service); cleared when a connection has a session under
   * the key again. Written by the bridges that hold the window. */
  bool service_ended;
} tg_replay_window_t;

typedef struct tg_replay_store {
  tg_list_t windows; /* most recently used last */
  size_t n_windows;
  size_t cap;         /* bytes per window */
  size_t max_windows;
  uint64_t linger_ms;
} tg_replay_store_t;

void tg_replay_store_init(tg_replay_store_t *st, size_t cap,
                          size_t max_windows, uint64_t linger_ms);
void tg_replay_store_free(tg_replay_store_t *st);

/* The window of |key| (made if none, and then *fresh is true), held until
 * tg_replay_release. NULL when out of memory or every window is in use. */
tg_replay_window_t *tg_replay_acquire(tg_replay_store_t *st, const char *key,
                                      uint64_t now_ms, bool *fresh);
void tg_replay_release(tg_replay_store_t *st, tg_replay_window_t *w,
                       uint64_t now_ms);

/* One ReadBuffersResponse forwarded (copied). Returns its seq, or 0 when
 * out of memory (then it is counted as dropped). */
uint64_t tg_replay_push(tg_replay_store_t *st, tg_replay_window_t *w,
                        const uint8_t *body, size_t len, bool last_of_read);

/* The same without a copy: |body| lies in |block|, a malloc'd buffer of
 * |block_size| bytes (charged whole against the cap), which the window
 * takes and frees once the frame is acknowledged or dropped. On 0 (not
 * held: too big for the cap, or out of memory; counted as dropped) the
 * block stays the caller's. */
uint64_t tg_replay_push_block(tg_replay_store_t *st, tg_replay_window_t *w,
                              void *block, size_t block_size,
                              const uint8_t *body, size_t len,
                              bool last_of_read);

/* Segments (see above). open() starts one (NULL when out of memory:
 * frames then go by copy); append() adds compressed bytes made
 * for it, dropping the oldest frames of other segments while the window
 * is over its cap; push_ref() numbers a frame whose |len|-byte body starts
 * |off| bytes into the segment inflated (|body| is read now, to see where
 * its packets end, and not kept); close() ends the opener's hold, after
 * which the segment lives as long as frames point into it. A segment
 * whose append failed holds no frame: push_ref() then counts the frame
 * lost as if dropped for room, and returns 0. The opener cuts a new one. */
tg_replay_seg_t *tg_replay_seg_open(void);
void tg_replay_seg_append(tg_replay_store_t *st, tg_replay_window_t *w,
                          tg_replay_seg_t *seg, const uint8_t *z, size_t n);
uint64_t tg_replay_push_ref(tg_replay_store_t *st, tg_replay_window_t *w,
                            tg_replay_seg_t *seg, uint64_t off,
                            const uint8_t *body, size_t len,
                            bool last_of_read);
void tg_replay_seg_close(tg_replay_window_t *w, tg_replay_seg_t *seg);
/* The segment misses bytes of a frame pushed into it (the compressor did
 * not take it whole): nothing held inflates past them, so every frame
 * goes, counted as dropped for room, and the segment holds none again. */
void tg_replay_seg_fail(tg_replay_window_t *w, tg_replay_seg_t *seg);

/* The client has everything through |seq| (bounded by what was pushed). */
void tg_replay_ack(tg_replay_window_t *w, uint64_t seq);

/* Resume after |last_seq| (|cum| bytes): appends to |out| the whole IPC
 * frames answering request |request_id|: first, when frames after
 * |last_seq| are no longer held, a reply (has_more) saying how many and
 * how many bytes are lost; one reply (has_more) per frame that follows (split at slice boundaries when it would not fit one IPC
 * frame), at most about |max_bytes| of them, then the final
 * ResumeResponse: the frames and bytes lost between |last_seq| and the
 * first frame still held, and |more| when frames were left for another
 * call, or when a frame's compressed bytes are not all made yet (its
 * segment still open: they come within the loop iteration). Frames
 * through |last_seq| are acknowledged by the call. |w| NULL:
 * the final reply says unknown_key. Returns 0, -ENOMEM, or TG_EBAD_COMPRESSED
 * when a segment does not inflate to the frame it should hold. */
int tg_replay_resume(tg_replay_window_t *w, uint64_t last_seq, uint64_t cum,
                     uint64_t request_id, size_t max_bytes, tg_buf_t *out);

#endif /* TRACEGATE_RELAY_REPLAY_WINDOW_H */
