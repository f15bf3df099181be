/* The zstd transport decorator (tls/compress_transport.c) between two pipe
 * transports on a socketpair: frames arrive whole and in order across the
 * switch to compression, trace-like data shrinks, a lone small frame is
 * flushed without waiting for more, and a hostile sender (garbage, a window
 * larger than asked for, an inflated frame over the cap) closes the
 * receiving end with TG_EBAD_COMPRESSED, never a crash. Receiving ends
 * share their thread's scratch buffer; one that inflates inside another's
 * delivery takes its own, and neither's frames are disturbed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>
#include <zstd.h>

#include "ipc/pipe_transport.h"
#include "tls/compress_transport.h"
#include "tracegate/error.h"

#define ANSWER "answer: compress from the next frame on"

struct end;
typedef struct end {
  tg_pipe_transport_t pipe;
  tg_zstd_transport_t z;
  bool use_z;
  int window_log_max; /* receiving end: switch on ANSWER */
  /* What arrived. */
  uint64_t frames, bytes;
  uint32_t next_seq;
  bool order_ok;
  bool closed;
  int close_status;
  bool check_content; /* frames must be make_frame()'s */
  unsigned noise_every; /* but those with seq % it == 1 noise_frame()'s */
  bool content_ok;
  void (*hook)(struct end *e, uint32_t seq); /* after each frame */
} end_t;

/* Byte |i| of frame |seq|: repetitive fields, or noise, which nothing
 * compresses. */
static uint8_t frame_byte(uint32_t seq, size_t i, bool noise) {
  if (!noise)
    return (uint8_t)("track_event name=frame ts="[i % 26] + (i / 512) % 3);
  uint32_t x = seq * 0x9E3779B1u ^ (uint32_t)i * 0x85EBCA77u;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  x *= 0x297A2D39u;
  x ^= x >> 15;
  return (uint8_t)x;
}

static tg_transport_t *base_of(end_t *e) {
  return e->use_z ? &e->z.base : &e->pipe.base;
}

static int on_frame(tg_transport_t *t, const uint8_t *p, size_t len) {
  end_t *e = t->data;
  if (len == sizeof(ANSWER) - 1 && memcmp(p, ANSWER, len) == 0) {
    assert_int_equal(tg_zstd_transport_start_decompress(&e->z, e->window_log_max),
                     0);
    return 0;
  }
  /* Frames carry their sequence number first. */
  uint32_t seq;
  assert_true(len >= sizeof(seq));
  memcpy(&seq, p, sizeof(seq));
  if (seq != e->next_seq) e->order_ok = false;
  e->next_seq = seq + 1;
  e->frames++;
  e->bytes += len;
  bool noise = e->noise_every && seq % e->noise_every == 1;
  if (e->check_content)
    for (size_t i = sizeof(seq); i < len; i++)
      if (p[i] != frame_byte(seq, i, noise)) e->content_ok = false;
  if (e->hook) e->hook(e, seq);
  return 0;
}

static void on_close(tg_transport_t *t, int status) {
  end_t *e = t->data;
  e->closed = true;
  e->close_status = status;
}

static const tg_transport_cbs_t cbs = {.on_frame = on_frame,
                                       .on_close = on_close};

static void end_open(uv_loop_t *loop, end_t *e, int fd, bool use_z) {
  memset(e, 0, sizeof(*e));
  e->order_ok = e->content_ok = true;
  e->use_z = use_z;
  e->window_log_max = TG_ZSTD_WINDOW_LOG_DEFAULT;
  assert_int_equal(tg_pipe_transport_open(loop, &e->pipe, fd, fd, 0), 0);
  if (use_z)
    assert_int_equal(tg_zstd_transport_init(loop, &e->z, &e->pipe.base), 0);
  tg_transport_t *b = base_of(e);
  b->cbs = &cbs;
  b->data = e;
}

/* Runs |loop| until |done| or 10 s. */
static bool run_until(uv_loop_t *loop, bool (*done)(void *), void *ctx) {
  uint64_t end = uv_now(loop) + 10000;
  while (!done(ctx)) {
    if (uv_now(loop) > end) return false;
    uv_run(loop, UV_RUN_ONCE);
    uv_update_time(loop);
  }
  return true;
}

typedef struct pair {
  end_t tx, rx;
  uint64_t want;
} pair_t;

static bool got_all(void *ctx) {
  pair_t *p = ctx;
  return p->rx.frames >= p->want || p->rx.closed;
}
static bool rx_closed(void *ctx) { return ((pair_t *)ctx)->rx.closed; }
static bool both_closed(void *ctx) {
  pair_t *p = ctx;
  return p->rx.closed && p->tx.closed;
}

static void pair_open(uv_loop_t *loop, pair_t *p, bool tx_z, bool rx_z) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  end_open(loop, &p->tx, sv[0], tx_z);
  end_open(loop, &p->rx, sv[1], rx_z);
}

static void pair_close(uv_loop_t *loop, pair_t *p) {
  tg_transport_close(base_of(&p->tx), 0);
  tg_transport_close(base_of(&p->rx), 0);
  assert_true(run_until(loop, both_closed, p));
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

/* A frame: a sequence number, then trace-like repetitive fields, or
 * noise. */
static size_t make_frame_as(uint8_t *buf, uint32_t seq, size_t len,
                            bool noise) {
  memcpy(buf, &seq, sizeof(seq));
  for (size_t i = sizeof(seq); i < len; i++) buf[i] = frame_byte(seq, i, noise);
  return len;
}

static size_t make_frame(uint8_t *buf, uint32_t seq, size_t len) {
  return make_frame_as(buf, seq, len, false);
}

static void frames_cross_the_switch_whole_and_in_order(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  pair_t p;
  pair_open(&loop, &p, true, true);
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  uint32_t seq = 0;
  /* Plain frames, the answer, then compression from the next frame on. */
  for (; seq < 10; seq++) {
    size_t n = make_frame(buf + 4, seq, 100);
    memcpy(buf, &(uint32_t){(uint32_t)n}, 4);
    assert_int_equal(tg_transport_send(&p.tx.z.base, buf, 4 + n, -1), 0);
  }
  memcpy(buf, &(uint32_t){sizeof(ANSWER) - 1}, 4);
  memcpy(buf + 4, ANSWER, sizeof(ANSWER) - 1);
  assert_int_equal(tg_transport_send(&p.tx.z.base, buf, 4 + sizeof(ANSWER) - 1, -1),
                   0);
  assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 1, 20), 0);
  uint64_t plain = 0;
  for (; seq < 3000; seq++) {
    size_t n = make_frame(buf + 4, seq,
                          seq % 100 == 0 ? TG_IPC_FRAME_MAX_PAYLOAD : 64 + seq % 900);
    memcpy(buf, &(uint32_t){(uint32_t)n}, 4);
    plain += 4 + n;
    assert_int_equal(tg_transport_send(&p.tx.z.base, buf, 4 + n, -1), 0);
    if (seq % 500 == 0) uv_run(&loop, UV_RUN_NOWAIT);
  }
  /* An fd cannot ride a compressed stream. */
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  close(fds[1]);
  assert_int_equal(tg_transport_send(&p.tx.z.base, buf, 8, fds[0]), -EOPNOTSUPP);
  p.want = 3000;
  assert_true(run_until(&loop, got_all, &p));
  assert_false(p.rx.closed);
  assert_int_equal(p.rx.frames, 3000);
  assert_true(p.rx.order_ok);
  /* Trace-like data: the wire carries under a third of it. */
  assert_int_equal(p.tx.z.bytes_in, plain);
  assert_true(p.tx.z.bytes_out * 3 < p.tx.z.bytes_in);

  /* One small frame, nothing after it: it is flushed in its loop
   * iteration, not held for more data. */
  size_t n = make_frame(buf + 4, seq, 40);
  memcpy(buf, &(uint32_t){(uint32_t)n}, 4);
  assert_int_equal(tg_transport_send(&p.tx.z.base, buf, 4 + n, -1), 0);
  p.want = 3001;
  assert_true(run_until(&loop, got_all, &p));
  assert_int_equal(p.rx.frames, 3001);
  pair_close(&loop, &p);
}

/* Sends raw bytes as one frame payload from a plain sender. */
static void send_raw(end_t *tx, const void *data, size_t len) {
  assert_int_equal(tg_pipe_transport_send_payload(&tx->pipe, data, len), 0);
}

/* The same as a compressed block: the kind byte 1, then |data|. */
static void send_block(end_t *tx, const void *data, size_t len) {
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  buf[0] = 1;
  memcpy(buf + 1, data, len);
  send_raw(tx, buf, len + 1);
}

static void hostile_streams_close_the_receiver(void **state) {
  (void)state;
  /* 1. Garbage where a zstd block is due. */
  uv_loop_t loop;
  uv_loop_init(&loop);
  pair_t p;
  pair_open(&loop, &p, false, true);
  send_raw(&p.tx, ANSWER, sizeof(ANSWER) - 1);
  send_block(&p.tx, "this is not zstd at all", 23);
  assert_true(run_until(&loop, rx_closed, &p));
  assert_int_equal(p.rx.close_status, TG_EBAD_COMPRESSED);
  pair_close(&loop, &p);

  /* 2. A window larger than the receiver asked for. */
  uv_loop_init(&loop);
  pair_open(&loop, &p, false, true);
  p.rx.window_log_max = TG_ZSTD_WINDOW_LOG_MIN;
  send_raw(&p.tx, ANSWER, sizeof(ANSWER) - 1);
  ZSTD_CCtx *c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 23);
  ZSTD_CCtx_setPledgedSrcSize(c, 1u << 24);
  static uint8_t src[1 << 16], dst[1 << 17];
  memset(src, 'x', sizeof(src));
  ZSTD_inBuffer in = {src, sizeof(src), 0};
  ZSTD_outBuffer out = {dst, sizeof(dst), 0};
  ZSTD_compressStream2(c, &out, &in, ZSTD_e_flush);
  ZSTD_freeCCtx(c);
  send_block(&p.tx, dst, out.pos);
  assert_true(run_until(&loop, rx_closed, &p));
  assert_int_equal(p.rx.close_status, TG_EBAD_COMPRESSED);
  pair_close(&loop, &p);

  /* 3. A stream that inflates to a frame over the 128 KiB cap. */
  uv_loop_init(&loop);
  pair_open(&loop, &p, false, true);
  send_raw(&p.tx, ANSWER, sizeof(ANSWER) - 1);
  uint8_t huge_hdr[8] = {0xff, 0xff, 0xff, 0x0f, 1, 2, 3, 4};
  size_t cn = ZSTD_compress(dst, sizeof(dst), huge_hdr, sizeof(huge_hdr), 1);
  assert_false(ZSTD_isError(cn));
  send_block(&p.tx, dst, cn);
  assert_true(run_until(&loop, rx_closed, &p));
  assert_int_equal(p.rx.close_status, TG_EBAD_COMPRESSED);
  assert_int_equal(p.rx.frames, 0);
  pair_close(&loop, &p);

  /* 4. A whole zstd frame of a frame's size, inflated in one call, whose
   * block is of a type that does not exist. */
  uv_loop_init(&loop);
  pair_open(&loop, &p, false, true);
  send_raw(&p.tx, ANSWER, sizeof(ANSWER) - 1);
  memset(src, 'x', 1000);
  cn = ZSTD_compress(dst, sizeof(dst), src, 1000, 1);
  assert_false(ZSTD_isError(cn));
  assert_true(dst[4] & 0x20); /* single segment, 2-byte content size */
  dst[7] |= 0x06;             /* the block header's type: reserved */
  send_block(&p.tx, dst, cn);
  assert_true(run_until(&loop, rx_closed, &p));
  assert_int_equal(p.rx.close_status, TG_EBAD_COMPRESSED);
  assert_int_equal(p.rx.frames, 0);
  pair_close(&loop, &p);

  /* 5. A frame of a kind that does not exist. */
  uv_loop_init(&loop);
  pair_open(&loop, &p, false, true);
  send_raw(&p.tx, ANSWER, sizeof(ANSWER) - 1);
  send_raw(&p.tx, "\x07whatever", 9);
  assert_true(run_until(&loop, rx_closed, &p));
  assert_int_equal(p.rx.close_status, TG_EBAD_COMPRESSED);
  pair_close(&loop, &p);
}

/* Plain frames (control replies) travel outside the compressed stream, in
 * their own order, and the receiver takes them between blocks. */
static void plain_frames_pass_beside_the_stream(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  pair_t p;
  pair_open(&loop, &p, true, true);
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  memcpy(buf, &(uint32_t){sizeof(ANSWER) - 1}, 4);
  memcpy(buf + 4, ANSWER, sizeof(ANSWER) - 1);
  assert_int_equal(tg_transport_send(&p.tx.z.base, buf, 4 + sizeof(ANSWER) - 1, -1),
                   0);
  assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 1, 20), 0);
  assert_true(tg_zstd_transport_compressing(&p.tx.z));
  /* Every frame carries the next sequence number, alternately compressed
   * and plain: in one loop iteration the plain ones leave first, so the
   * receiver sees them out of order but each exactly once. */
  for (uint32_t seq = 0; seq < 200; seq++) {
    size_t n = make_frame(buf + 4, seq, 64 + seq);
    memcpy(buf, &(uint32_t){(uint32_t)n}, 4);
    if (seq % 2)
      assert_int_equal(tg_zstd_transport_send_plain(&p.tx.z, buf, 4 + n), 0);
    else
      assert_int_equal(tg_transport_send(&p.tx.z.base, buf, 4 + n, -1), 0);
  }
  p.want = 200;
  assert_true(run_until(&loop, got_all, &p));
  assert_false(p.rx.closed);
  assert_int_equal(p.rx.frames, 200);
  pair_close(&loop, &p);
}

/* Through the transport interface (tg_transport_send_frame): before
 * compression each class goes to the inner transport as it is; once
 * compressing, bulk frames go into the stream and a barrier goes out
 * plain behind all of them (the stream is flushed first: a plain frame
 * would otherwise leave ahead of what zstd still holds), so frames sent
 * bulk, barrier, bulk arrive in exactly that order. */
static void a_barrier_follows_the_stream_sent_before_it(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  pair_t p;
  pair_open(&loop, &p, true, true);
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  uint32_t seq = 0;
  for (; seq < 3; seq++) {
    size_t n = make_frame(buf + 4, seq, 80);
    memcpy(buf, &(uint32_t){(uint32_t)n}, 4);
    assert_int_equal(tg_transport_send_frame(&p.tx.z.base, buf, 4 + n,
                                             (tg_frame_class_t)seq),
                     0);
  }
  memcpy(buf, &(uint32_t){sizeof(ANSWER) - 1}, 4);
  memcpy(buf + 4, ANSWER, sizeof(ANSWER) - 1);
  assert_int_equal(tg_transport_send_frame(&p.tx.z.base, buf,
                                           4 + sizeof(ANSWER) - 1,
                                           TG_FRAME_BARRIER),
                   0);
  assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 1, 20), 0);
  for (; seq < 400; seq++) {
    size_t n = make_frame(buf + 4, seq, seq % 50 ? 100 + seq : 20000);
    memcpy(buf, &(uint32_t){(uint32_t)n}, 4);
    tg_frame_class_t cls = seq % 100 == 99 ? TG_FRAME_BARRIER : TG_FRAME_BULK;
    assert_int_equal(tg_transport_send_frame(&p.tx.z.base, buf, 4 + n, cls), 0);
  }
  /* A frame whose length prefix lies is refused. */
  memcpy(buf, &(uint32_t){7}, 4);
  assert_int_equal(tg_transport_send_frame(&p.tx.z.base, buf, 4 + 8,
                                           TG_FRAME_BARRIER),
                   -EINVAL);
  p.want = 400;
  assert_true(run_until(&loop, got_all, &p));
  assert_false(p.rx.closed);
  assert_int_equal(p.rx.frames, 400);
  assert_true(p.rx.order_ok);
  pair_close(&loop, &p);
}

static void bad_parameters_are_refused(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  pair_t p;
  pair_open(&loop, &p, true, true);
  assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 0, 20), -EINVAL);
  assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 1, 30), -EINVAL);
  assert_int_equal(tg_zstd_transport_start_decompress(&p.rx.z, 10), -EINVAL);
  assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 3, 17), 0);
  assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 3, 17), -EINVAL);
  pair_close(&loop, &p);
}

/* [kind 1][a whole zstd frame holding IPC frames |first|.. (|n| of
 * |len| bytes)] into |out|: what a compressing sender's block carries. */
static size_t block_of_frames(uint8_t *out, size_t cap, uint32_t first, int n,
                              size_t len) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  assert_non_null(c);
  assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 17)));
  uint8_t fr[4 + 4096];
  assert_true(len <= 4096);
  out[0] = 1;
  ZSTD_outBuffer o = {out, cap, 1};
  for (int i = 0; i < n; i++) {
    uint32_t plen = (uint32_t)make_frame(fr + 4, first + (uint32_t)i, len);
    memcpy(fr, &plen, sizeof(plen)); /* little-endian, as on the wire */
    ZSTD_inBuffer in = {fr, 4 + len, 0};
    size_t r = ZSTD_compressStream2(c, &o, &in,
                                    i == n - 1 ? ZSTD_e_end : ZSTD_e_continue);
    assert_false(ZSTD_isError(r));
    assert_int_equal(in.pos, in.size);
    if (i == n - 1) assert_int_equal(r, 0);
  }
  ZSTD_freeCCtx(c);
  return o.pos;
}

/* The nested delivery: on |a|'s first frame, a block for |b| arrives. */
static struct {
  end_t *other;
  const uint8_t *payload;
  size_t len;
  bool done;
} g_nest;

static void nest_hook(end_t *e, uint32_t seq) {
  (void)e;
  if (seq != 0 || g_nest.done) return;
  g_nest.done = true;
  tg_transport_t *in = &g_nest.other->pipe.base;
  assert_int_equal(in->cbs->on_frame(in, g_nest.payload, g_nest.len), 0);
}

static bool all_closed(void *ctx) {
  pair_t *p = ctx;
  return p[0].rx.closed && p[0].tx.closed && p[1].rx.closed && p[1].tx.closed;
}

/* Two receiving ends on one thread: |a| inflates 40 frames at once into
 * the thread's scratch, and delivering its first makes |b| inflate 40
 * others (sequence numbers from 1000) before |a| has split the rest. Both
 * get all their frames whole and in order; then each goes on, alone. */
static void an_end_inflating_inside_another_keeps_its_own_scratch(
    void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  pair_t p[2];
  pair_open(&loop, &p[0], false, true);
  pair_open(&loop, &p[1], false, true);
  end_t *a = &p[0].rx, *b = &p[1].rx;
  for (int i = 0; i < 2; i++) {
    assert_int_equal(tg_zstd_transport_start_decompress(&p[i].rx.z, 20), 0);
    p[i].rx.check_content = true;
  }
  static uint8_t pa[64 * 1024], pb[64 * 1024];
  size_t na = block_of_frames(pa, sizeof(pa), 0, 40, 1000);
  size_t nb = block_of_frames(pb, sizeof(pb), 1000, 40, 1000);
  b->next_seq = 1000;
  g_nest.other = b;
  g_nest.payload = pb;
  g_nest.len = nb;
  g_nest.done = false;
  a->hook = nest_hook;
  tg_transport_t *ia = &a->pipe.base, *ib = &b->pipe.base;
  assert_int_equal(ia->cbs->on_frame(ia, pa, na), 0);
  assert_true(g_nest.done);
  assert_int_equal(a->frames, 40);
  assert_int_equal(b->frames, 40);
  /* Each alone now, on the shared scratch again. */
  na = block_of_frames(pa, sizeof(pa), 40, 30, 2000);
  nb = block_of_frames(pb, sizeof(pb), 1040, 30, 2000);
  assert_int_equal(ib->cbs->on_frame(ib, pb, nb), 0);
  assert_int_equal(ia->cbs->on_frame(ia, pa, na), 0);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(p[i].rx.frames, 70);
    assert_true(p[i].rx.order_ok);
    assert_true(p[i].rx.content_ok);
    assert_false(p[i].rx.closed);
  }
  for (int i = 0; i < 2; i++) {
    tg_transport_close(base_of(&p[i].tx), 0);
    tg_transport_close(base_of(&p[i].rx), 0);
  }
  assert_true(run_until(&loop, all_closed, p));
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* Mostly 128 KiB frames, as a ReadBuffers stream is, with some of other
 * sizes among them: through a plain pipe transport (read in place into the
 * frame being assembled) and through the inflater (which opens frames in
 * place), each frame whole, in order and intact, and only a small part of
 * the stream copied by the decoder. Reading 64 KiB at a time and feeding
 * the decoder, or inflating into the scratch buffer, copied about half. */
#define INPLACE_FRAMES 96

static void send_bulk_frames(uv_loop_t *loop, pair_t *p, uint64_t *bytes) {
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  tg_transport_t *t = base_of(&p->tx);
  *bytes = 0;
  for (uint32_t seq = 0; seq < INPLACE_FRAMES;) {
    while (seq < INPLACE_FRAMES && !tg_transport_congested(t)) {
      size_t len = seq % 8 == 3   ? 40000 + seq * 11
                   : seq % 8 == 6 ? 200 + seq
                                  : TG_IPC_FRAME_MAX_PAYLOAD;
      make_frame(buf + 4, seq++, len);
      memcpy(buf, &(uint32_t){(uint32_t)len}, 4);
      assert_int_equal(tg_transport_send(t, buf, 4 + len, -1), 0);
      *bytes += 4 + len;
    }
    uv_run(loop, UV_RUN_ONCE);
  }
  p->want = INPLACE_FRAMES;
  assert_true(run_until(loop, got_all, p));
}

static void bulk_frames_are_assembled_in_place(void **state) {
  (void)state;
  for (int z = 0; z < 2; z++) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    pair_t p;
    pair_open(&loop, &p, z, z);
    p.rx.check_content = true;
    if (z) {
      assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 1, 20), 0);
      assert_int_equal(tg_zstd_transport_start_decompress(&p.rx.z, 20), 0);
    }
    uint64_t bytes;
    send_bulk_frames(&loop, &p, &bytes);
    assert_false(p.rx.closed);
    assert_int_equal(p.rx.frames, INPLACE_FRAMES);
    assert_true(p.rx.order_ok);
    assert_true(p.rx.content_ok);
    uint64_t copied = z ? p.rx.z.dec.copied : p.rx.pipe.dec.copied;
    print_message("%s: the decoder copied %llu of %llu bytes\n",
                  z ? "inflated" : "plain", (unsigned long long)copied,
                  (unsigned long long)bytes);
    assert_true(copied * 10 < bytes);
    pair_close(&loop, &p);
  }
}

/* The tap (what the relay's replay window keeps of a compressed stream):
 * the compressed bytes between two end_frame() calls inflate on their own
 * into exactly the frames sent between them, each at the place raw_pos()
 * gave before it was sent (less its value at the end_frame()), whether
 * streamed or compressed whole; plain frames stay out of it; the
 * receiving end reads the zstd frames one after the other as one stream;
 * and what zstd held back when the sender closed reaches the tap too. */
#define TAP_FRAMES 60
#define TAP_SEGS 8

typedef struct tap_log {
  tg_buf_t seg[TAP_SEGS];
  unsigned cur;
} tap_log_t;

static void tap_fn(void *ctx, const uint8_t *z, size_t n) {
  tap_log_t *l = ctx;
  assert_true(l->cur < TAP_SEGS);
  assert_int_equal(tg_buf_append(&l->seg[l->cur], z, n), 0);
}

static void the_tap_holds_each_zstd_frame_whole(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  pair_t p;
  pair_open(&loop, &p, true, true);
  p.rx.check_content = true;
  assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 1, 20), 0);
  assert_int_equal(tg_zstd_transport_start_decompress(&p.rx.z, 20), 0);
  static tap_log_t log;
  for (int i = 0; i < TAP_SEGS; i++) tg_buf_init(&log.seg[i], 0);
  log.cur = 0;
  tg_zstd_transport_set_tap(&p.tx.z, tap_fn, &log);
  /* What each segment must inflate to, and where each frame starts. */
  static tg_buf_t want[TAP_SEGS];
  for (int i = 0; i < TAP_SEGS; i++) tg_buf_init(&want[i], 0);
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  uint64_t pos[TAP_FRAMES];
  unsigned seg_of[TAP_FRAMES];
  uint64_t seg_start = tg_zstd_transport_raw_pos(&p.tx.z);
  uint32_t seq = 0;
  for (; seq < TAP_FRAMES; seq++) {
    if (seq > 0 && seq % 9 == 0) {
      assert_int_equal(tg_zstd_transport_end_frame(&p.tx.z), 0);
      seg_start = tg_zstd_transport_raw_pos(&p.tx.z);
      /* Nothing sent since: a second end is nothing. */
      assert_int_equal(tg_zstd_transport_end_frame(&p.tx.z), 0);
      assert_int_equal(tg_zstd_transport_raw_pos(&p.tx.z), seg_start);
      log.cur++;
    }
    size_t n = make_frame(buf + 4, seq,
                          seq % 5 == 0 ? TG_IPC_FRAME_MAX_PAYLOAD - 2
                                       : 100 + seq * 37);
    memcpy(buf, &(uint32_t){(uint32_t)n}, 4);
    seg_of[seq] = TAP_SEGS; /* none */
    if (seq % 7 == 3) {
      /* A plain frame beside the stream is not in it (sent after what
       * came before it left, so that it arrives in order). */
      uv_run(&loop, UV_RUN_NOWAIT);
      uint64_t before = tg_zstd_transport_raw_pos(&p.tx.z);
      assert_int_equal(tg_zstd_transport_send_payload(&p.tx.z, buf + 4, n, true),
                       0);
      assert_int_equal(tg_zstd_transport_raw_pos(&p.tx.z), before);
      continue;
    }
    pos[seq] = tg_zstd_transport_raw_pos(&p.tx.z) - seg_start;
    seg_of[seq] = log.cur;
    assert_int_equal(want[log.cur].len, pos[seq]);
    assert_int_equal(tg_buf_append(&want[log.cur], buf, 4 + n), 0);
    /* Given whole (every other one), large frames are zstd frames of
     * their own, small ones join the stream. */
    if (seq % 2)
      assert_int_equal(tg_zstd_transport_send_frame(&p.tx.z, buf, 4 + n), 0);
    else
      assert_int_equal(
          tg_zstd_transport_send_payload(&p.tx.z, buf + 4, n, false), 0);
    assert_int_equal(tg_zstd_transport_raw_pos(&p.tx.z) - seg_start,
                     pos[seq] + 4 + n);
    if (seq % 4 == 0) uv_run(&loop, UV_RUN_NOWAIT);
  }
  p.want = TAP_FRAMES;
  assert_true(run_until(&loop, got_all, &p));
  assert_false(p.rx.closed);
  assert_true(p.rx.order_ok);
  assert_true(p.rx.content_ok);
  /* Close with nothing flushed since the last frames went: the close's
   * own flush reaches the tap. */
  size_t n = make_frame(buf + 4, seq, 3000);
  memcpy(buf, &(uint32_t){(uint32_t)n}, 4);
  uint64_t last_pos = tg_zstd_transport_raw_pos(&p.tx.z) - seg_start;
  assert_int_equal(tg_buf_append(&want[log.cur], buf, 4 + n), 0);
  assert_int_equal(tg_zstd_transport_send_payload(&p.tx.z, buf + 4, n, false), 0);
  tg_transport_close(&p.tx.z.base, TG_EPEER_CLOSED); /* no flush to the peer */
  assert_null(p.tx.z.tap);
  /* Each segment alone inflates to its frames, each where it was said. */
  for (unsigned sg = 0; sg <= log.cur; sg++) {
    size_t cap = tg_buf_size(&want[sg]);
    uint8_t *got = malloc(cap + 1);
    assert_non_null(got);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    ZSTD_inBuffer zi = {tg_buf_begin(&log.seg[sg]), tg_buf_size(&log.seg[sg]), 0};
    ZSTD_outBuffer zo = {got, cap + 1, 0};
    while (zi.pos < zi.size) {
      size_t r = ZSTD_decompressStream(d, &zo, &zi);
      assert_false(ZSTD_isError(r));
    }
    assert_int_equal(zo.pos, cap);
    assert_memory_equal(got, tg_buf_begin(&want[sg]), cap);
    for (unsigned f = 0; f < TAP_FRAMES; f++)
      if (seg_of[f] == sg)
        assert_memory_equal(got + pos[f] + 4, &(uint32_t){f}, 4);
    if (sg == log.cur)
      assert_memory_equal(got + last_pos + 4, &(uint32_t){seq}, 4);
    ZSTD_freeDCtx(d);
    free(got);
  }
  for (int i = 0; i < TAP_SEGS; i++) {
    tg_buf_free(&log.seg[i]);
    tg_buf_free(&want[i]);
  }
  tg_transport_close(&p.rx.z.base, 0);
  assert_true(run_until(&loop, both_closed, &p));
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* A large frame given whole is a zstd frame of its own, compressed from
 * where it lies, its size in its header; small ones between large ones
 * share one streamed zstd frame, ended as the next large one starts. A
 * frame of noise, whose zstd frame cannot fit the block's room, is split
 * over blocks, and everything arrives whole and in order. */
static void large_frames_are_zstd_frames_of_their_own(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  pair_t p;
  pair_open(&loop, &p, true, true);
  p.rx.noise_every = 7;
  p.rx.check_content = true;
  assert_int_equal(tg_zstd_transport_start_compress(&p.tx.z, 1, 20), 0);
  assert_int_equal(tg_zstd_transport_start_decompress(&p.rx.z, 20), 0);
  static tap_log_t log;
  tg_buf_init(&log.seg[0], 0);
  log.cur = 0;
  tg_zstd_transport_set_tap(&p.tx.z, tap_fn, &log);
  /* Sizes by seq % 7: 1 noise of the largest size, 0 and 4 large, the
   * others under TG_ZSTD_WHOLE_MIN. */
  static const size_t sizes[7] = {TG_ZSTD_WHOLE_MIN - 4,
                                  TG_IPC_FRAME_MAX_PAYLOAD - 1,
                                  300,
                                  TG_ZSTD_WHOLE_MIN - 5,
                                  70000,
                                  5000,
                                  17};
  enum { N = 42 };
  /* Per zstd frame made: what it must inflate to (0: streamed, unknown). */
  unsigned long long want_size[N];
  unsigned nwant = 0;
  bool streaming = false;
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  for (uint32_t seq = 0; seq < N; seq++) {
    size_t n = sizes[seq % 7];
    make_frame_as(buf + 4, seq, n, seq % 7 == 1);
    memcpy(buf, &(uint32_t){(uint32_t)n}, 4);
    if (4 + n >= TG_ZSTD_WHOLE_MIN) {
      want_size[nwant++] = 4 + n;
      streaming = false;
    } else if (!streaming) {
      want_size[nwant++] = 0;
      streaming = true;
    }
    assert_int_equal(tg_zstd_transport_send_frame(&p.tx.z, buf, 4 + n), 0);
    if (seq % 3 == 0) uv_run(&loop, UV_RUN_NOWAIT);
  }
  /* The frame length must match the bytes given. */
  assert_int_equal(tg_zstd_transport_send_frame(&p.tx.z, buf, 4 + 16), -EINVAL);
  p.want = N;
  assert_true(run_until(&loop, got_all, &p));
  assert_false(p.rx.closed);
  assert_true(p.rx.order_ok);
  assert_true(p.rx.content_ok);
  assert_true(p.tx.z.blocks_out >= 2); /* the noise took blocks of its own */
  /* Those that arrived within one block were inflated in one call. */
  assert_true(p.rx.z.whole_in > 0);
  /* The last streamed frame is still open: end it for the walk. */
  assert_int_equal(tg_zstd_transport_end_frame(&p.tx.z), 0);
  const uint8_t *z = tg_buf_begin(&log.seg[0]);
  size_t left = tg_buf_size(&log.seg[0]);
  unsigned made = 0;
  while (left > 0) {
    size_t c = ZSTD_findFrameCompressedSize(z, left);
    assert_false(ZSTD_isError(c));
    unsigned long long cs = ZSTD_getFrameContentSize(z, c);
    assert_true(made < nwant);
    if (want_size[made])
      assert_int_equal(cs, want_size[made]);
    else
      assert_true(cs == ZSTD_CONTENTSIZE_UNKNOWN);
    made++;
    z += c;
    left -= c;
  }
  assert_int_equal(made, nwant);
  tg_zstd_transport_set_tap(&p.tx.z, NULL, NULL);
  tg_buf_free(&log.seg[0]);
  tg_transport_close(&p.tx.z.base, 0);
  tg_transport_close(&p.rx.z.base, 0);
  assert_true(run_until(&loop, both_closed, &p));
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_tap_holds_each_zstd_frame_whole),
      cmocka_unit_test(large_frames_are_zstd_frames_of_their_own),
      cmocka_unit_test(frames_cross_the_switch_whole_and_in_order),
      cmocka_unit_test(hostile_streams_close_the_receiver),
      cmocka_unit_test(plain_frames_pass_beside_the_stream),
      cmocka_unit_test(a_barrier_follows_the_stream_sent_before_it),
      cmocka_unit_test(bad_parameters_are_refused),
      cmocka_unit_test(an_end_inflating_inside_another_keeps_its_own_scratch),
      cmocka_unit_test(bulk_frames_are_assembled_in_place),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
