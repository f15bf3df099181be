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
 * Pure data structure: no I/O, the caller passes the time.
 */
#ifndef TRACEGATE_RELAY_REPLAY_WINDOW_H
#define TRACEGATE_RELAY_REPLAY_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/list.h"

typedef struct tg_replay_frame {
  tg_list_t node;
  uint64_t seq;
  uint64_t cum; /* bytes of every frame through this one */
  bool last_of_read;
  bool ends_packet; /* its last slice ends a packet (or it had none and the
                     * frame before did) */
  size_t len;
  size_t charge;       /* bytes it holds against the window's cap */
  const uint8_t *body; /* the ReadBuffersResponse: in |block| or |data| */
  void *block;         /* owned; NULL when |body| was copied into |data| */
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

/* The client has everything through |seq| (bounded by what was pushed). */
void tg_replay_ack(tg_replay_window_t *w, uint64_t seq);

/* Resume after |last_seq| (|cum| bytes): appends to |out| the whole IPC
 * frames answering request |request_id|: first, when frames after
 * |last_seq| are no longer held, a reply (has_more) saying how many and
 * how many bytes are lost; one reply (has_more) per frame that follows (split at slice boundaries when it would not fit one IPC
 * frame), at most about |max_bytes| of them, then the final
 * ResumeResponse: the frames and bytes lost between |last_seq| and the
 * first frame still held, and |more| when frames were left for another
 * call. Frames through |last_seq| are acknowledged by the call. |w| NULL:
 * the final reply says unknown_key. Returns 0 or -ENOMEM. */
int tg_replay_resume(tg_replay_window_t *w, uint64_t last_seq, uint64_t cum,
                     uint64_t request_id, size_t max_bytes, tg_buf_t *out);

#endif /* TRACEGATE_RELAY_REPLAY_WINDOW_H */
