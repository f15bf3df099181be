/* tg_pipe_transport: frames over two uv_pipe_t streams. */
#include "ipc/pipe_transport.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracegate/pb_wire.h"
#include "tracegate/error.h"

#define DEFAULT_HIGH_WATER (4u * 1024 * 1024)
#define READ_CHUNK (64u * 1024)

enum { PT_OPEN = 1, PT_CLOSING, PT_CLOSED };

static tg_pipe_transport_t *of(tg_transport_t *t) {
  return (tg_pipe_transport_t *)t;
}

static uv_stream_t *writer(tg_pipe_transport_t *t) {
  return (uv_stream_t *)(t->same_fd ? &t->in : &t->out);
}

static size_t queued(const tg_pipe_transport_t *t) {
  return tg_buf_size(&t->queue) + (t->writing ? tg_buf_size(&t->wbuf) : 0);
}

/* --- closing ---------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h) {
  tg_pipe_transport_t *t = h->data;
  if (--t->handles_open > 0) return;
  t->state = PT_CLOSED;
  tg_frame_decoder_free(&t->dec);
  free(t->rbuf);
  t->rbuf = NULL;
  tg_buf_free(&t->queue);
  tg_buf_free(&t->wbuf);
  if (t->base.cbs) t->base.cbs->on_close(&t->base, t->close_status);
}

static void close_handles(tg_pipe_transport_t *t) {
  uv_close((uv_handle_t *)&t->in, on_handle_closed);
  if (!t->same_fd) uv_close((uv_handle_t *)&t->out, on_handle_closed);
  uv_close((uv_handle_t *)&t->kick, on_handle_closed);
}

static void pt_close(tg_transport_t *base, int status) {
  tg_pipe_transport_t *t = of(base);
  if (t->state != PT_OPEN) return;
  t->state = PT_CLOSING;
  t->close_status = status;
  /* Best effort for what is queued: a local close should not lose the last
   * reply, but it never waits. */
  if (!t->writing && tg_buf_size(&t->queue) > 0) {
    uv_buf_t b = uv_buf_init((char *)tg_buf_begin(&t->queue),
                             (unsigned)tg_buf_size(&t->queue));
    (void)uv_try_write(writer(t), &b, 1);
  }
  close_handles(t);
}

/* --- output ----------------------------------------------------------------- */

static void on_written(uv_write_t *req, int status);

static void start_write(tg_pipe_transport_t *t) {
  if (t->writing || t->state != PT_OPEN || tg_buf_size(&t->queue) == 0) return;
  /* Swap: the queue's bytes become the write's, the old write buffer
   * (empty, keeping its allocation) the new queue. */
  tg_buf_t tmp = t->wbuf;
  t->wbuf = t->queue;
  t->queue = tmp;
  tg_buf_reset(&t->queue);
  uv_buf_t b = uv_buf_init((char *)tg_buf_begin(&t->wbuf),
                           (unsigned)tg_buf_size(&t->wbuf));
  int rv = uv_write(&t->wreq, writer(t), &b, 1, on_written);
  if (rv < 0) {
    pt_close(&t->base, rv);
    return;
  }
  t->writing = true;
}

static void on_written(uv_write_t *req, int status) {
  tg_pipe_transport_t *t = req->data;
  t->writing = false;
  tg_buf_reset(&t->wbuf);
  if (t->state != PT_OPEN) return;
  if (status < 0) {
    pt_close(&t->base, status == UV_EPIPE ? TG_EPEER_CLOSED : status);
    return;
  }
  start_write(t);
  if (t->state != PT_OPEN) return;
  if (t->above_high_water && queued(t) <= t->high_water / 4) {
    t->above_high_water = false;
    if (t->base.cbs->on_drain) t->base.cbs->on_drain(&t->base);
  }
}

/* Queues [|hdr| (4 bytes) if given][|data|] as one frame, within the cap. */
static int queue_parts(tg_pipe_transport_t *t, const uint8_t *hdr,
                       const uint8_t *data, size_t len) {
  if (t->state != PT_OPEN) return -EPIPE;
  size_t total = len + (hdr ? TG_IPC_FRAME_HEADER_SIZE : 0);
  size_t q = queued(t);
  if (total > t->max_queued || q > t->max_queued - total) return -ENOBUFS;
  uint8_t *p = tg_buf_reserve(&t->queue, total);
  if (!p) return -ENOMEM;
  if (hdr) {
    memcpy(p, hdr, TG_IPC_FRAME_HEADER_SIZE);
    p += TG_IPC_FRAME_HEADER_SIZE;
  }
  memcpy(p, data, len);
  tg_buf_commit(&t->queue, total);
  if (q + total > t->high_water) t->above_high_water = true;
  start_write(t);
  return 0;
}

static int pt_send(tg_transport_t *base, const uint8_t *frame, size_t len,
                   int fd) {
  tg_pipe_transport_t *t = of(base);
  if (fd >= 0) {
    close(fd); /* a byte stream carries no fds */
    return -EOPNOTSUPP;
  }
  if (t->state != PT_OPEN) return -EPIPE;
  if (len < TG_IPC_FRAME_HEADER_SIZE || len > TG_IPC_FRAME_BUFFER_SIZE ||
      tg_pb_read_le32(frame) != len - TG_IPC_FRAME_HEADER_SIZE)
    return -EINVAL;
  return queue_parts(t, NULL, frame, len);
}

int tg_pipe_transport_send_payload(tg_pipe_transport_t *t,
                                   const uint8_t *payload, size_t len) {
  if (len > TG_IPC_FRAME_MAX_PAYLOAD) return -EINVAL;
  uint8_t hdr[TG_IPC_FRAME_HEADER_SIZE];
  tg_pb_write_le32(hdr, (uint32_t)len);
  return queue_parts(t, hdr, payload, len);
}

static int pt_take_fd(tg_transport_t *base) {
  (void)base;
  return -1;
}

static bool pt_congested(const tg_transport_t *base) {
  return ((const tg_pipe_transport_t *)base)->above_high_water;
}

static size_t pt_pending(const tg_transport_t *base) {
  return queued((const tg_pipe_transport_t *)base);
}

/* --- input ------------------------------------------------------------------ */

/* Reads the rest of a split frame straight where the decoder assembles it
 * (see ipc/channel.c): whole when it is at least this long, and a bulk
 * stream's next read takes only the next frame's start into |rbuf|. */
#define IN_PLACE_MIN (4u * 1024)
#define BULK_TAIL_READ (4u * 1024)

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  tg_pipe_transport_t *t = h->data;
  uint8_t *at = NULL;
  size_t room = tg_frame_decoder_room(&t->dec, &at);
  if (room >= IN_PLACE_MIN)
    *buf = uv_buf_init((char *)at, (unsigned)room);
  else
    *buf = uv_buf_init((char *)t->rbuf, tg_frame_decoder_bulk(&t->dec)
                                            ? BULK_TAIL_READ
                                            : READ_CHUNK);
}

static int on_decoded(void *ctx, const uint8_t *payload, size_t len) {
  tg_pipe_transport_t *t = ctx;
  if (t->state != PT_OPEN) return 1;
  int rv = t->base.cbs->on_frame(&t->base, payload, len);
  return t->state != PT_OPEN ? 1 : rv;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  tg_pipe_transport_t *t = s->data;
  if (t->state != PT_OPEN) return;
  if (n == 0) return;
  if (n < 0) {
    pt_close(&t->base, n == UV_EOF ? TG_EPEER_CLOSED : (int)n);
    return;
  }
  int rv =
      (uint8_t *)buf->base == t->rbuf
          ? tg_frame_decoder_feed(&t->dec, t->rbuf, (size_t)n, on_decoded, t)
          : tg_frame_decoder_wrote(&t->dec, (size_t)n, on_decoded, t);
  if (t->state != PT_OPEN) return;
  if (rv != 0) pt_close(&t->base, rv == 1 ? -ECONNABORTED : rv);
}

static void update_reading(tg_pipe_transport_t *t) {
  bool want = t->state == PT_OPEN && !t->reading_paused;
  if (want == t->reading) return;
  if (want) {
    int rv = uv_read_start((uv_stream_t *)&t->in, on_alloc, on_read);
    if (rv < 0) {
      pt_close(&t->base, rv);
      return;
    }
  } else {
    uv_read_stop((uv_stream_t *)&t->in);
  }
  t->reading = want;
}

static void on_kick(uv_idle_t *h) {
  tg_pipe_transport_t *t = h->data;
  uv_idle_stop(h);
  update_reading(t);
}

static void pt_pause(tg_transport_t *base, bool paused) {
  tg_pipe_transport_t *t = of(base);
  if (t->state != PT_OPEN || t->reading_paused == paused) return;
  t->reading_paused = paused;
  if (paused) update_reading(t);
  else uv_idle_start(&t->kick, on_kick); /* read callbacks from the loop */
}

static const tg_transport_ops_t pipe_ops = {
    .send = pt_send,
    .take_fd = pt_take_fd,
    .congested = pt_congested,
    .pending = pt_pending,
    .pause_reading = pt_pause,
    .close = pt_close,
};

int tg_pipe_transport_open(uv_loop_t *loop, tg_pipe_transport_t *t, int in_fd,
                           int out_fd, size_t high_water) {
  memset(t, 0, sizeof(*t));
  t->base.ops = &pipe_ops;
  t->same_fd = in_fd == out_fd;
  t->high_water = high_water ? high_water : DEFAULT_HIGH_WATER;
  t->max_queued =
      t->high_water > SIZE_MAX / 16 ? SIZE_MAX : 16 * t->high_water;
  tg_frame_decoder_init(&t->dec);
  tg_buf_init(&t->queue, 0);
  tg_buf_init(&t->wbuf, 0);
  t->rbuf = malloc(READ_CHUNK);
  uv_pipe_init(loop, &t->in, 0);
  if (!t->same_fd) uv_pipe_init(loop, &t->out, 0);
  uv_idle_init(loop, &t->kick);
  t->in.data = t->out.data = t->kick.data = t->wreq.data = t;
  t->handles_open = t->same_fd ? 2 : 3;
  t->state = PT_CLOSING; /* until open: failures close silently */
  /* A handle that opened its fd closes it with the handle; the others are
   * closed here, so the fds are owned whatever happens. */
  int rv = t->rbuf ? 0 : -ENOMEM;
  if (rv == 0) rv = uv_pipe_open(&t->in, in_fd);
  if (rv < 0) close(in_fd);
  if (!t->same_fd) {
    if (rv == 0) rv = uv_pipe_open(&t->out, out_fd);
    if (rv < 0) close(out_fd);
  }
  if (rv < 0) {
    /* No owner callbacks: on_close is skipped while cbs is NULL. */
    close_handles(t);
    return rv;
  }
  t->state = PT_OPEN;
  update_reading(t);
  return 0;
}
