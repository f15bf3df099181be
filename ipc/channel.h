/* A framed IPC channel over a connected UNIX stream socket, on libuv.
 *
 * Owns the socket fd, a frame decoder for input and a byte queue for
 * output. It drives the fd with a uv_poll_t and does its own recvmsg() and
 * sendmsg(), because frames may carry file descriptors (SCM_RIGHTS): the
 * SMB memfd to a producer, an output file from a consumer. libuv's streams
 * only pass sockets and pipes, not arbitrary fds. A frame longer than one
 * read (a 128 KiB ReadBuffers reply) has its rest read straight into the
 * decoder's buffer with the same recvmsg() (abi/ipc_frame.h, the room), so
 * a bulk stream is not copied once more on its way in.
 *
 * Lifetime: tg_ipc_chan_close() is idempotent; the on_close callback runs
 * from the libuv close callback, after which the owner may free the memory
 * holding the channel. Callbacks never run inside tg_ipc_chan_send().
 *
 * File descriptors received are kept in arrival order until a frame handler
 * claims one with tg_ipc_chan_take_fd(); those still unclaimed when no
 * partial frame is pending are closed (a peer cannot make us hoard fds).
 */
#ifndef TRACEGATE_IPC_CHANNEL_H
#define TRACEGATE_IPC_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <uv.h>

#include "abi/ipc_frame.h"
#include "common/buf.h"

#define TG_IPC_MAX_FDS_IN_FLIGHT 4
#define TG_IPC_READ_CHUNK (64 * 1024)

typedef struct tg_ipc_chan tg_ipc_chan_t;

typedef struct tg_ipc_chan_cbs {
  /* One complete frame payload (an IPCFrame), valid during the call, and
   * always just behind its 4-byte length: |payload| -
   * TG_IPC_FRAME_HEADER_SIZE is the whole frame (abi/ipc_frame.h's
   * decoder). Return non-zero to stop processing input (e.g. after
   * closing the channel). */
  int (*on_frame)(tg_ipc_chan_t *ch, const uint8_t *payload, size_t len);
  /* The output queue fell below the low-water mark after having been above
   * the high-water mark (resume producing). Optional. */
  void (*on_drain)(tg_ipc_chan_t *ch);
  /* The channel is closed and its handle released; |status| is why (0 for a
   * local close, TG_EPEER_CLOSED, a frame error, -errno). Required. */
  void (*on_close)(tg_ipc_chan_t *ch, int status);
} tg_ipc_chan_cbs_t;

enum tg_ipc_chan_state { TG_CHAN_OPEN, TG_CHAN_CLOSING, TG_CHAN_CLOSED };

typedef struct tg_ipc_fd_mark {
  uint64_t at; /* absolute output offset of the frame the fd rides with */
  int fd;      /* owned by the channel until sent */
} tg_ipc_fd_mark_t;

struct tg_ipc_chan {
  uv_poll_t poll;
  int fd;
  enum tg_ipc_chan_state state;
  int close_status;
  int poll_events;
  const tg_ipc_chan_cbs_t *cbs;
  void *data; /* owner's, untouched by the channel */

  tg_frame_decoder_t dec;
  uint8_t *rbuf;

  int in_fds[TG_IPC_MAX_FDS_IN_FLIGHT];
  unsigned n_in_fds;

  tg_buf_t out;
  uint64_t out_sent; /* absolute offset of tg_buf_begin(&out) */
  tg_ipc_fd_mark_t out_fds[TG_IPC_MAX_FDS_IN_FLIGHT];
  unsigned n_out_fds;
  size_t high_water;
  bool above_high_water;
  bool reading_paused; /* by the owner */

  /* Output limits toward a peer that does not read (0: off; see
   * tg_ipc_chan_limit_output). */
  size_t input_hold_water;
  size_t output_hard_cap;
  bool input_held; /* by the limit: output above input_hold_water */

  /* Peer credentials from SO_PEERCRED at open time (trusted). */
  pid_t peer_pid;
  uid_t peer_uid;
  gid_t peer_gid;
};

/* Takes ownership of |fd| (a connected SOCK_STREAM UNIX socket; it is made
 * non-blocking and close-on-exec). |cbs| must outlive the channel. Returns 0
 * or a negative error (then |fd| is closed and no callback runs). */
int tg_ipc_chan_open(uv_loop_t *loop, tg_ipc_chan_t *ch, int fd,
                     const tg_ipc_chan_cbs_t *cbs, void *data);

/* Queues a whole frame ([len][IPCFrame], as built by tg_ipc_frame_append or
 * the reply writer) and tries to send at once. |fd| >= 0 rides with the
 * frame's first byte; ownership passes to the channel (closed after being
 * sent, or on close). Returns 0, -EPIPE when closing, -ENOMEM. */
int tg_ipc_chan_send(tg_ipc_chan_t *ch, const uint8_t *frame, size_t len,
                     int fd);

/* Vectored sending of one or more whole frames, for bulk output whose bytes
 * lie in several places: when nothing is queued they go straight to the
 * socket, and only what it does not take is copied into the queue (all of
 * it when output is already queued). The memory |iov| points to is only
 * read during the call. |iovcnt| is at most IOV_MAX. Returns 0, -EPIPE
 * when closing, -EINVAL, or the error that closed the channel (-ENOMEM,
 * a socket error). */
int tg_ipc_chan_sendv(tg_ipc_chan_t *ch, const struct iovec *iov, int iovcnt);

/* Sets the high-water mark (default 4 MiB; the low-water mark is a quarter
 * of it). 0 makes the channel congested whenever anything is queued, with
 * on_drain when the queue is empty again: a bulk sender that uses
 * tg_ipc_chan_sendv() then stops at the first send the socket did not take
 * whole, and the socket's own buffer is the only queue. */
void tg_ipc_chan_set_high_water(tg_ipc_chan_t *ch, size_t bytes);

/* Bytes queued and not yet written to the socket. */
static inline size_t tg_ipc_chan_pending(const tg_ipc_chan_t *ch) {
  return tg_buf_size(&ch->out);
}

/* Asks the kernel for a socket send buffer of |bytes| (SO_SNDBUF). A peer
 * that streams a lot then takes up to that much per wakeup instead of the
 * default ~208 KiB, and sender and reader wake each other that much less
 * often. The kernel caps the request at net.core.wmem_max. Returns what it
 * granted, as the kernel accounts it (about twice the request: the
 * overhead of its buffers counts), or a negative errno. */
int tg_ipc_chan_set_send_buffer(tg_ipc_chan_t *ch, int bytes);

/* True from the moment queued output passes the high-water mark until it
 * drains below the low-water mark; on_drain fires when it turns false.
 * Producers of bulk output stop while it is true. */
static inline bool tg_ipc_chan_congested(const tg_ipc_chan_t *ch) {
  return ch->above_high_water;
}

/* Removes and returns the oldest received fd (the caller owns it), or -1. */
int tg_ipc_chan_take_fd(tg_ipc_chan_t *ch);

/* From on_frame: keeps the frame |payload| instead of copying it, when it
 * was assembled in the channel's own frame buffer (a bulk reply that
 * spanned reads always is). Returns that buffer, which the caller then
 * owns and frees with free() (TG_IPC_FRAME_BUFFER_SIZE bytes, |payload|
 * at TG_IPC_FRAME_HEADER_SIZE), or NULL: the payload lies in the read
 * chunk, which the next read reuses. */
static inline uint8_t *tg_ipc_chan_adopt_frame(tg_ipc_chan_t *ch,
                                               const uint8_t *payload) {
  return tg_frame_decoder_adopt(&ch->dec, payload);
}

/* Stop/resume reading input (backpressure toward the peer). */
void tg_ipc_chan_pause_reading(tg_ipc_chan_t *ch, bool paused);

/* Bounds the output a peer can make us queue by not reading it (a server
 * answering requests must not grow with a client that never reads).
 * While more than |hold| bytes are queued the channel reads no input (the
 * peer's requests wait in its socket), resuming when the queue drains to
 * |hold|/4. Input is read in small pieces (16 KiB, 4 KiB while output is
 * queued) so one read cannot answer into a large backlog. Past |hard_cap| queued bytes
 * the channel closes with -ENOBUFS. 0 turns a limit off (the default). */
void tg_ipc_chan_limit_output(tg_ipc_chan_t *ch, size_t hold, size_t hard_cap);

void tg_ipc_chan_close(tg_ipc_chan_t *ch, int status);

static inline bool tg_ipc_chan_is_open(const tg_ipc_chan_t *ch) {
  return ch->state == TG_CHAN_OPEN;
}

/* Connects a UNIX stream socket to |addr| ("@name" for the abstract
 * namespace, else a path). Blocking connect (UNIX connects complete or fail
 * at once). Returns the fd or a negative error. */
int tg_ipc_connect_unix(const char *addr);

/* The default socket of the service, as every Perfetto client finds it:
 * $PERFETTO_PRODUCER_SOCK_NAME / $PERFETTO_CONSUMER_SOCK_NAME when set,
 * else /run/perfetto/traced-{producer,consumer}.sock when /run/perfetto/ is
 * accessible, else /tmp/perfetto-{producer,consumer}. Static or environment
 * storage: do not free. */
const char *tg_ipc_default_socket(bool producer);

#endif /* TRACEGATE_IPC_CHANNEL_H */
