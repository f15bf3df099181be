/* The pipe transport: framed IPC over a pair of byte streams (a read fd and
 * a write fd), e.g. the relay's stdin/stdout in --stdio mode, or the pipes
 * of a child `ssh host tracegate-relay --stdio` on the client side.
 *
 * Same [u32 LE len][IPCFrame] frames as every transport (ipc/transport.h),
 * no fd passing (send() with an fd closes it and fails with -EOPNOTSUPP).
 * Both fds are driven with uv_pipe_t, so they must be pipes or sockets (not
 * ttys or regular files); they may be the same fd (a socket). One write in
 * flight at a time; what is queued meanwhile goes out in the next one.
 *
 * Callback rules are the transport's: never inside send()/close(); on_close
 * runs once from the loop, after which the caller may free the memory.
 * The fds are owned by the transport from open() on and closed with it.
 */
#ifndef TRACEGATE_IPC_PIPE_TRANSPORT_H
#define TRACEGATE_IPC_PIPE_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "abi/ipc_frame.h"
#include "ipc/transport.h"
#include "common/buf.h"

typedef struct tg_pipe_transport {
  tg_transport_t base; /* first: a tg_transport_t * points here */
  uv_pipe_t in, out;
  bool same_fd;  /* |in| reads and writes; |out| unused */
  int state;     /* internal */
  int close_status;
  int handles_open;
  bool reading, reading_paused, writing, above_high_water;
  size_t high_water, max_queued;
  tg_frame_decoder_t dec;
  uint8_t *rbuf;
  tg_buf_t queue; /* frames waiting for the next write */
  tg_buf_t wbuf;  /* bytes of the write in flight */
  uv_write_t wreq;
  uv_idle_t kick; /* resumes reading from the loop, not inside pause(false) */
} tg_pipe_transport_t;

/* Opens the transport on |in_fd| (read) and |out_fd| (write); ownership of
 * both passes to the transport, also on failure (they are closed). |t| is
 * caller memory valid until on_close; set t->base.cbs and t->base.data
 * before returning to the loop. |high_water| 0: 4 MiB; send() fails with
 * -ENOBUFS beyond 16 x high_water queued. Returns 0 or a negative error
 * (then no callback runs and |t| may be freed once the loop has run:
 * handles already initialised are closed asynchronously). */
int tg_pipe_transport_open(uv_loop_t *loop, tg_pipe_transport_t *t, int in_fd,
                           int out_fd, size_t high_water);

/* Queues one frame given as its payload (an IPCFrame of at most
 * TG_IPC_FRAME_MAX_PAYLOAD bytes, copied): the length prefix is added while
 * copying, so a forwarder copies each frame once. Returns as send(), or
 * -EINVAL for an oversized payload. */
int tg_pipe_transport_send_payload(tg_pipe_transport_t *t,
                                   const uint8_t *payload, size_t len);

#endif /* TRACEGATE_IPC_PIPE_TRANSPORT_H */
