/* Fuzzes the receiving end of the zstd transport (tls/compress_transport.c):
 * what a hostile relay sends after agreeing to compress. The input is cut
 * into frames ([u16 LE length][bytes], the last one taking what is left)
 * and fed as the inner transport's frames to a decorator that inflates.
 *
 * It must deliver whole frames of at most the frame cap, or close with
 * TG_EBAD_COMPRESSED / -ENOMEM, never crash, read out of bounds or grow
 * without bound (the window is capped at 2^16 here). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "abi/ipc_frame.h"
#include "tls/compress_transport.h"
#include "tracegate/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The inner transport: it only has to be closable. */
typedef struct fake {
  tg_transport_t base;
  bool closed;
} fake_t;

static int fake_send(tg_transport_t *t, const uint8_t *f, size_t n, int fd) {
  (void)t, (void)f, (void)n, (void)fd;
  return 0;
}
static int fake_take_fd(tg_transport_t *t) { (void)t; return -1; }
static bool fake_congested(const tg_transport_t *t) { (void)t; return false; }
static size_t fake_pending(const tg_transport_t *t) { (void)t; return 0; }
static void fake_pause(tg_transport_t *t, bool p) { (void)t, (void)p; }
static void fake_close(tg_transport_t *t, int status) {
  fake_t *f = (fake_t *)t;
  if (f->closed) return;
  f->closed = true;
  t->cbs->on_close(t, status);
}
static const tg_transport_ops_t fake_ops = {
    .send = fake_send,
    .take_fd = fake_take_fd,
    .congested = fake_congested,
    .pending = fake_pending,
    .pause_reading = fake_pause,
    .close = fake_close,
};

typedef struct outer {
  size_t frames;
  bool closed;
  int status;
} outer_t;

static int on_frame(tg_transport_t *t, const uint8_t *p, size_t n) {
  outer_t *o = t->data;
  if (n > TG_IPC_FRAME_MAX_PAYLOAD) __builtin_trap();
  /* Touch every byte: ASan sees a frame that is not all there. */
  volatile uint8_t x = 0;
  for (size_t i = 0; i < n; i++) x ^= p[i];
  (void)x;
  o->frames++;
  return 0;
}
static void on_close(tg_transport_t *t, int status) {
  outer_t *o = t->data;
  o->closed = true;
  o->status = status;
}
static const tg_transport_cbs_t cbs = {.on_frame = on_frame,
                                       .on_close = on_close};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uv_loop_t loop;
  static bool loop_ready;
  if (!loop_ready) {
    uv_loop_init(&loop);
    loop_ready = true;
  }
  fake_t inner = {.base = {.ops = &fake_ops}};
  tg_zstd_transport_t z;
  outer_t o = {0};
  tg_zstd_transport_init(&loop, &z, &inner.base);
  z.base.cbs = &cbs;
  z.base.data = &o;
  if (tg_zstd_transport_start_decompress(&z, TG_ZSTD_WINDOW_LOG_MIN) < 0)
    __builtin_trap();
  size_t off = 0;
  while (off < size && !o.closed) {
    size_t n = size - off;
    if (n >= 2) {
      size_t want = (size_t)data[off] | (size_t)data[off + 1] << 8;
      off += 2;
      n = size - off;
      if (want < n) n = want;
    }
    /* An exact-size copy, so ASan sees any read past the frame. */
    uint8_t *frame = malloc(n ? n : 1);
    if (!frame) break;
    memcpy(frame, data + off, n);
    inner.base.cbs->on_frame(&inner.base, frame, n);
    free(frame);
    off += n;
  }
  if (o.closed && o.status != TG_EBAD_COMPRESSED && o.status != -ENOMEM)
    __builtin_trap();
  tg_transport_close(&z.base, 0);
  uv_run(&loop, UV_RUN_DEFAULT); /* the decorator's handle closes */
  if (!o.closed) __builtin_trap();
  return 0;
}
