/* tg_unix_transport: forwards tg_transport_t calls to a tg_ipc_chan_t and
 * the channel's callbacks back to the transport's owner. */
#include "ipc/unix_transport.h"

#include <stddef.h>

static tg_unix_transport_t *of_chan(tg_ipc_chan_t *ch) {
  return (tg_unix_transport_t *)((char *)ch -
                                 offsetof(tg_unix_transport_t, chan));
}

static int chan_on_frame(tg_ipc_chan_t *ch, const uint8_t *p, size_t n) {
  tg_transport_t *t = &of_chan(ch)->base;
  return t->cbs->on_frame(t, p, n);
}

static void chan_on_drain(tg_ipc_chan_t *ch) {
  tg_transport_t *t = &of_chan(ch)->base;
  if (t->cbs->on_drain) t->cbs->on_drain(t);
}

static void chan_on_close(tg_ipc_chan_t *ch, int status) {
  tg_transport_t *t = &of_chan(ch)->base;
  t->cbs->on_close(t, status);
}

static const tg_ipc_chan_cbs_t chan_cbs = {
    .on_frame = chan_on_frame,
    .on_drain = chan_on_drain,
    .on_close = chan_on_close,
};

static tg_ipc_chan_t *chan_of(const tg_transport_t *t) {
  return &((tg_unix_transport_t *)t)->chan;
}

static int ut_send(tg_transport_t *t, const uint8_t *f, size_t n, int fd) {
  return tg_ipc_chan_send(chan_of(t), f, n, fd);
}
static int ut_take_fd(tg_transport_t *t) {
  return tg_ipc_chan_take_fd(chan_of(t));
}
static bool ut_congested(const tg_transport_t *t) {
  return tg_ipc_chan_congested(chan_of(t));
}
static size_t ut_pending(const tg_transport_t *t) {
  return tg_ipc_chan_pending(chan_of(t));
}
static void ut_pause(tg_transport_t *t, bool paused) {
  tg_ipc_chan_pause_reading(chan_of(t), paused);
}
static void ut_close(tg_transport_t *t, int status) {
  tg_ipc_chan_close(chan_of(t), status);
}
static uint8_t *ut_adopt_frame(tg_transport_t *t, const uint8_t *payload) {
  return tg_ipc_chan_adopt_frame(chan_of(t), payload);
}

static const tg_transport_ops_t unix_ops = {
    .send = ut_send,
    .take_fd = ut_take_fd,
    .congested = ut_congested,
    .pending = ut_pending,
    .pause_reading = ut_pause,
    .close = ut_close,
    .adopt_frame = ut_adopt_frame,
};

int tg_unix_transport_open(uv_loop_t *loop, tg_unix_transport_t *t, int fd) {
  t->base.ops = &unix_ops;
  return tg_ipc_chan_open(loop, &t->chan, fd, &chan_cbs, t);
}

int tg_unix_transport_connect(uv_loop_t *loop, tg_unix_transport_t *t,
                              const char *addr) {
  int fd = tg_ipc_connect_unix(addr);
  if (fd < 0) return fd;
  return tg_unix_transport_open(loop, t, fd);
}
