/* Replay windows (relay/replay_window.h), without I/O: numbering,
 * acknowledgement, the exact loss when the window overflowed, frames too
 * big for one reply sent in parts, unknown keys, the store's bounds, and
 * frames held as their place in compressed segments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zstd.h>

#include "abi/ipc_frame.h"
#include "pb/tracegate/relay.pb-c.h"
#include "relay/replay_window.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

#define REQ 77u

/* The ResumeResponse of every reply frame in |out|, and their has_more. */
typedef struct replies {
  Perfetto__Protos__ResumeResponse *r[64];
  bool more[64];
  size_t n;
} replies_t;

static void parse(const tg_buf_t *out, replies_t *rs) {
  memset(rs, 0, sizeof(*rs));
  const uint8_t *p = tg_buf_begin(out), *end = p + tg_buf_size(out);
  while (p < end) {
    assert_true(end - p >= 4);
    size_t n = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 |
               (size_t)p[3] << 24;
    assert_true(n <= TG_IPC_FRAME_MAX_PAYLOAD);
    assert_true(n <= (size_t)(end - p - 4));
    tg_ipc_frame_t *f = tg_ipc_frame_unpack(p + 4, n);
    assert_non_null(f);
    assert_int_equal(f->request_id, REQ);
    Perfetto__Protos__IPCFrame__InvokeMethodReply *im =
        f->msg_invoke_method_reply;
    assert_non_null(im);
    assert_true(im->success);
    assert_true(rs->n < 64);
    rs->more[rs->n] = im->has_more;
    rs->r[rs->n] = perfetto__protos__resume_response__unpack(
        NULL, im->reply_proto.len, im->reply_proto.data);
    assert_non_null(rs->r[rs->n]);
    rs->n++;
    tg_ipc_frame_free(f);
    p += 4 + n;
  }
  /* Only the last one ends the stream. */
  assert_true(rs->n > 0);
  for (size_t i = 0; i < rs->n; i++) assert_int_equal(rs->more[i], i + 1 < rs->n);
}

static void free_replies(replies_t *rs) {
  for (size_t i = 0; i < rs->n; i++)
    perfetto__protos__resume_response__free_unpacked(rs->r[i], NULL);
}

/* A ReadBuffersResponse of one slice of |n| bytes of |c|; |last|: it ends
 * its packet. Returns its length. */
static size_t body(uint8_t *out, size_t n, char c, bool last) {
  uint8_t *p = out;
  *p++ = 0x12; /* slices = 2, LEN */
  uint8_t inner[8];
  uint8_t *q = tg_pb_write_varint(inner, 0x0A);
  q = tg_pb_write_varint(q, n);
  size_t hdr = (size_t)(q - inner);
  p = tg_pb_write_varint(p, hdr + n + 2);
  memcpy(p, inner, hdr);
  p += hdr;
  memset(p, c, n);
  p += n;
  *p++ = 0x10; /* last_slice_for_packet = 2, VARINT */
  *p++ = last ? 1 : 0;
  return (size_t)(p - out);
}

static void acked_frames_are_not_sent_again(void **state) {
  (void)state;
  tg_replay_store_t st;
  tg_replay_store_init(&st, 1 << 20, 4, 1000);
  bool fresh;
  tg_replay_window_t *w = tg_replay_acquire(&st, "alice/k", 0, &fresh);
  assert_non_null(w);
  assert_true(fresh);
  uint8_t b[256];
  for (int i = 0; i < 3; i++) {
    size_t n = body(b, 40, (char)('a' + i), true);
    assert_int_equal(tg_replay_push(&st, w, b, n, i == 2), i + 1);
  }
  tg_replay_ack(w, 2);
  assert_int_equal(w->held, body(b, 40, 'c', true));
  tg_buf_t out;
  tg_buf_init(&out, 0);
  assert_int_equal(tg_replay_resume(w, 2, 0, REQ, 1 << 20, &out), 0);
  replies_t rs;
  parse(&out, &rs);
  assert_int_equal(rs.n, 2);
  assert_int_equal(rs.r[0]->n_frames, 1);
  assert_int_equal(rs.r[0]->frames[0]->seq, 3);
  assert_true(rs.r[0]->frames[0]->last_of_read);
  assert_memory_equal(rs.r[0]->frames[0]->read_buffers_response.data, b,
                      rs.r[0]->frames[0]->read_buffers_response.len);
  assert_int_equal(rs.r[1]->lost_frames, 0);
  assert_false(rs.r[1]->more);
  /* The numbering the client takes as its own. */
  assert_int_equal(rs.r[1]->last_seq, 3);
  assert_int_equal(rs.r[1]->cum, 3 * body(b, 40, 'c', true));
  free_replies(&rs);
  /* A new client of the key resumes from the end: nothing sent again,
   * nothing counted lost, the numbering learnt. */
  tg_buf_reset(&out);
  assert_int_equal(tg_replay_resume(w, UINT64_MAX, 0, REQ, 1 << 20, &out), 0);
  parse(&out, &rs);
  assert_int_equal(rs.n, 1);
  assert_int_equal(rs.r[0]->n_frames, 0);
  assert_int_equal(rs.r[0]->lost_frames, 0);
  assert_int_equal(rs.r[0]->last_seq, 3);
  free_replies(&rs);
  assert_int_equal(w->held, 0);
  /* The same key again finds the same window and numbering. */
  tg_replay_release(&st, w, 10);
  tg_replay_window_t *again = tg_replay_acquire(&st, "alice/k", 20, &fresh);
  assert_ptr_equal(again, w);
  assert_false(fresh);
  assert_int_equal(tg_replay_push(&st, w, b, 10, false), 4);
  tg_buf_free(&out);
  tg_replay_store_free(&st);
}

static void overflow_is_counted_exactly(void **state) {
  (void)state;
  tg_replay_store_t st;
  uint8_t b[256];
  size_t one = body(b, 40, 'x', true);
  /* Room for two frames. */
  tg_replay_store_init(&st, 2 * one + 1, 4, 1000);
  bool fresh;
  tg_replay_window_t *w = tg_replay_acquire(&st, "alice/k", 0, &fresh);
  for (int i = 0; i < 5; i++) {
    /* Frame 3 ends inside a packet: the first one held after the loss
     * (4) begins inside one. */
    size_t n = body(b, 40, (char)('a' + i), i != 2);
    tg_replay_push(&st, w, b, n, false);
  }
  tg_buf_t out;
  tg_buf_init(&out, 0);
  /* The client got frame 1 (|one| bytes). */
  assert_int_equal(tg_replay_resume(w, 1, one, REQ, 1 << 20, &out), 0);
  replies_t rs;
  parse(&out, &rs);
  assert_int_equal(rs.n, 4); /* loss, 4, 5, end */
  assert_int_equal(rs.r[0]->lost_frames, 2);
  assert_int_equal(rs.r[0]->lost_bytes, 2 * one);
  assert_true(rs.r[0]->resync_inside_packet);
  assert_int_equal(rs.r[1]->frames[0]->seq, 4);
  assert_int_equal(rs.r[2]->frames[0]->seq, 5);
  free_replies(&rs);
  tg_buf_free(&out);
  tg_replay_store_free(&st);
}

static void big_frames_go_in_parts_cut_at_slices(void **state) {
  (void)state;
  tg_replay_store_t st;
  tg_replay_store_init(&st, 1 << 20, 4, 1000);
  bool fresh;
  tg_replay_window_t *w = tg_replay_acquire(&st, "alice/k", 0, &fresh);
  /* Four slices of 40000 bytes: more than one IPC frame can carry. */
  static uint8_t big[4 * 40100];
  size_t n = 0;
  for (int i = 0; i < 4; i++) n += body(big + n, 40000, (char)('a' + i), true);
  assert_true(n > TG_IPC_FRAME_MAX_PAYLOAD);
  tg_replay_push(&st, w, big, n, true);
  tg_buf_t out;
  tg_buf_init(&out, 0);
  assert_int_equal(tg_replay_resume(w, 0, 0, REQ, 1 << 20, &out), 0);
  replies_t rs;
  parse(&out, &rs);
  assert_true(rs.n >= 3); /* two parts at least, and the end */
  size_t off = 0;
  for (size_t i = 0; i + 1 < rs.n; i++) {
    const Perfetto__Protos__ReplayedFrame *f = rs.r[i]->frames[0];
    assert_int_equal(f->seq, 1);
    assert_int_equal(f->part, i);
    assert_int_equal(f->more_parts, i + 2 < rs.n);
    assert_int_equal(f->last_of_read, i + 2 == rs.n);
    assert_memory_equal(f->read_buffers_response.data, big + off,
                        f->read_buffers_response.len);
    off += f->read_buffers_response.len;
  }
  assert_int_equal(off, n);
  free_replies(&rs);
  tg_buf_free(&out);
  tg_replay_store_free(&st);
}

static void unknown_keys_and_bounds(void **state) {
  (void)state;
  tg_buf_t out;
  tg_buf_init(&out, 0);
  replies_t rs;
  assert_int_equal(tg_replay_resume(NULL, 5, 0, REQ, 1 << 20, &out), 0);
  parse(&out, &rs);
  assert_int_equal(rs.n, 1);
  assert_true(rs.r[0]->unknown_key);
  free_replies(&rs);
  tg_replay_store_t st;
  tg_replay_store_init(&st, 1 << 20, 2, 1000);
  bool fresh;
  tg_replay_window_t *a = tg_replay_acquire(&st, "alice/a", 0, &fresh);
  tg_replay_window_t *b = tg_replay_acquire(&st, "alice/b", 0, &fresh);
  assert_non_null(a);
  assert_non_null(b);
  /* A new relay's window knows nothing of frames the client counted. */
  tg_buf_reset(&out);
  assert_int_equal(tg_replay_resume(b, 5, 0, REQ, 1 << 20, &out), 0);
  parse(&out, &rs);
  assert_true(rs.r[0]->unknown_key);
  free_replies(&rs);
  /* Both in use: no third. */
  assert_null(tg_replay_acquire(&st, "alice/c", 0, &fresh));
  /* One let go: it makes room. */
  tg_replay_release(&st, a, 5);
  assert_non_null(tg_replay_acquire(&st, "alice/c", 6, &fresh));
  assert_true(fresh);
  assert_int_equal(st.n_windows, 2);
  /* An unused window lingers, then goes. */
  tg_replay_release(&st, b, 10);
  tg_replay_window_t *d = tg_replay_acquire(&st, "alice/d", 2000, &fresh);
  assert_non_null(d);
  assert_int_equal(st.n_windows, 2);
  tg_buf_free(&out);
  tg_replay_store_free(&st);
}

/* Frames kept by reference in a buffer the window takes (the relay's bulk
 * replies, adopted from its upstream decoder): replayed from there, the
 * whole buffer charged against the cap, freed once acknowledged or dropped
 * (ASan says when not), and left to the caller when not held. */
static void blocks_are_kept_charged_and_freed(void **state) {
  (void)state;
  enum { BLOCK = 4096 };
  tg_replay_store_t st;
  /* Room for two blocks, not three. */
  tg_replay_store_init(&st, 2 * BLOCK + 100, 4, 1000);
  bool fresh;
  tg_replay_window_t *w = tg_replay_acquire(&st, "alice/k", 0, &fresh);
  uint8_t want[3][256];
  size_t n[3];
  for (int i = 0; i < 3; i++) {
    uint8_t *block = malloc(BLOCK);
    assert_non_null(block);
    /* The body somewhere inside, as an IPC frame's reply is. */
    n[i] = body(block + 37, 40, (char)('a' + i), i != 0);
    memcpy(want[i], block + 37, n[i]);
    assert_int_equal(
        tg_replay_push_block(&st, w, block, BLOCK, block + 37, n[i], i == 2),
        i + 1);
    assert_true(w->held <= st.cap);
  }
  /* The third block pushed the first out, counted in bytes of the body. */
  assert_int_equal(w->held, 2 * BLOCK);
  assert_int_equal(w->dropped_frames, 1);
  assert_int_equal(w->dropped_bytes, n[0]);
  tg_buf_t out;
  tg_buf_init(&out, 0);
  assert_int_equal(tg_replay_resume(w, 0, 0, REQ, 1 << 20, &out), 0);
  replies_t rs;
  parse(&out, &rs);
  assert_int_equal(rs.n, 4); /* loss, 2, 3, end */
  assert_int_equal(rs.r[0]->lost_frames, 1);
  assert_int_equal(rs.r[0]->lost_bytes, n[0]);
  /* Frame 1 ended inside a packet: frame 2 starts inside one. */
  assert_true(rs.r[0]->resync_inside_packet);
  for (int i = 1; i < 3; i++) {
    const Perfetto__Protos__ReplayedFrame *f = rs.r[i]->frames[0];
    assert_int_equal(f->seq, i + 1);
    assert_int_equal(f->read_buffers_response.len, n[i]);
    assert_memory_equal(f->read_buffers_response.data, want[i], n[i]);
  }
  assert_true(rs.r[2]->frames[0]->last_of_read);
  assert_int_equal(rs.r[3]->cum, n[0] + n[1] + n[2]);
  free_replies(&rs);
  /* Acknowledged: its block is freed, its charge given back. */
  tg_replay_ack(w, 2);
  assert_int_equal(w->held, BLOCK);
  /* Copies and blocks mix in one window. */
  uint8_t b[256];
  size_t cn = body(b, 40, 'z', true);
  assert_int_equal(tg_replay_push(&st, w, b, cn, false), 4);
  assert_int_equal(w->held, BLOCK + cn);
  /* A block bigger than the cap is not held: it stays the caller's, and
   * the frame counts as lost with the ones it pushed out. */
  uint8_t *big = malloc(3 * BLOCK);
  assert_non_null(big);
  size_t bn = body(big, 40, 'q', true);
  assert_int_equal(tg_replay_push_block(&st, w, big, 3 * BLOCK, big, bn, false),
                   0);
  free(big);
  assert_int_equal(w->held, 0);
  assert_int_equal(w->gone_seq, 5);
  tg_buf_free(&out);
  /* What is still held is freed with the store. */
  uint8_t *last = malloc(BLOCK);
  assert_non_null(last);
  size_t ln = body(last, 40, 'l', true);
  assert_int_equal(tg_replay_push_block(&st, w, last, BLOCK, last, ln, true),
                   6);
  tg_replay_store_free(&st);
}

/* --- compressed segments ---------------------------------------------------- */

/* A body of |n| bytes that does not compress (so that segments have a
 * size the cap can be set against). */
static size_t noisy_body(uint8_t *out, size_t n, uint32_t seed, bool last) {
  size_t len = body(out, n, 'x', last);
  uint8_t *p = out + len - 2 - n;
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    p[i] = (uint8_t)(seed >> 16);
  }
  return len;
}

/* A store with one window, and the compressing end of a connection as
 * tls/compress_transport.c makes its stream: each frame [4-byte
 * len][payload] into zstd, the bytes to the open segment. */
typedef struct zfix {
  tg_replay_store_t st;
  tg_replay_window_t *w;
  ZSTD_CCtx *c;
  uint64_t pos; /* bytes given to zstd since the zstd frame began */
  tg_buf_t out; /* Resume's replies */
} zfix_t;

static void zfix_init(zfix_t *f, size_t cap) {
  tg_replay_store_init(&f->st, cap, 4, 1000);
  bool fresh;
  f->w = tg_replay_acquire(&f->st, "alice/k", 0, &fresh);
  assert_non_null(f->w);
  f->c = ZSTD_createCCtx();
  assert_non_null(f->c);
  f->pos = 0;
  tg_buf_init(&f->out, 0);
}

static void zfix_free(zfix_t *f) {
  tg_buf_free(&f->out);
  ZSTD_freeCCtx(f->c);
  tg_replay_store_free(&f->st);
}

static void zrun(zfix_t *f, tg_replay_seg_t *seg, const uint8_t *p, size_t n,
                 ZSTD_EndDirective op) {
  ZSTD_inBuffer in = {p, n, 0};
  for (;;) {
    uint8_t out[4096];
    ZSTD_outBuffer o = {out, sizeof(out), 0};
    size_t left = ZSTD_compressStream2(f->c, &o, &in, op);
    assert_false(ZSTD_isError(left));
    if (o.pos) tg_replay_seg_append(&f->st, f->w, seg, out, o.pos);
    if (in.pos == in.size && (op == ZSTD_e_continue ? o.pos < sizeof(out)
                                                    : left == 0))
      break;
  }
  f->pos += n;
  if (op == ZSTD_e_end) f->pos = 0;
}

/* Sends one reply of |body| (after a 9-byte stand-in for the IPC frame's
 * own fields) into |seg|, held by reference. */
static uint64_t zsend(zfix_t *f, tg_replay_seg_t *seg, const uint8_t *b,
                      size_t n, bool last) {
  uint8_t frame[4 + 9 + 512];
  assert_true(n <= 512);
  uint32_t len = (uint32_t)(9 + n);
  memcpy(frame, &len, 4);
  memset(frame + 4, 0xEE, 9);
  memcpy(frame + 13, b, n);
  uint64_t seq = tg_replay_push_ref(&f->st, f->w, seg, f->pos + 13, b, n, last);
  zrun(f, seg, frame, 4 + len, ZSTD_e_continue);
  return seq;
}

static void compressed_segments_resume_whole_frames(void **state) {
  (void)state;
  zfix_t fx;
  zfix_init(&fx, 1 << 20);
  tg_replay_window_t *w = fx.w;
  uint8_t want[6][256];
  size_t n[6];
  /* Segment A: three frames, its zstd frame ended (a cut). */
  tg_replay_seg_t *a = tg_replay_seg_open();
  assert_non_null(a);
  for (int i = 0; i < 3; i++) {
    n[i] = body(want[i], 60 + i, (char)('a' + i), i != 1);
    assert_int_equal(zsend(&fx, a, want[i], n[i], false), i + 1);
  }
  zrun(&fx, a, NULL, 0, ZSTD_e_end);
  tg_replay_seg_close(w, a);
  /* Segment B: three more, flushed but never ended (the connection went). */
  tg_replay_seg_t *b = tg_replay_seg_open();
  assert_non_null(b);
  for (int i = 3; i < 6; i++) {
    n[i] = body(want[i], 50 + i, (char)('a' + i), true);
    assert_int_equal(zsend(&fx, b, want[i], n[i], i == 5), i + 1);
  }
  zrun(&fx, b, NULL, 0, ZSTD_e_flush);
  tg_replay_seg_close(w, b);
  /* Held as their compressed bytes: far less than the frames. */
  size_t total = 0;
  for (int i = 0; i < 6; i++) total += n[i];
  assert_true(w->held > 0);
  /* The client had frame 1: 2 to 6 come back whole. */
  assert_int_equal(tg_replay_resume(w, 1, n[0], REQ, 1 << 20, &fx.out), 0);
  replies_t rs;
  parse(&fx.out, &rs);
  assert_int_equal(rs.n, 6); /* 2..6, end */
  for (int i = 1; i < 6; i++) {
    const Perfetto__Protos__ReplayedFrame *f = rs.r[i - 1]->frames[0];
    assert_int_equal(f->seq, i + 1);
    assert_int_equal(f->read_buffers_response.len, n[i]);
    assert_memory_equal(f->read_buffers_response.data, want[i], n[i]);
  }
  assert_true(rs.r[4]->frames[0]->last_of_read);
  assert_int_equal(rs.r[5]->last_seq, 6);
  assert_int_equal(rs.r[5]->cum, total);
  assert_int_equal(rs.r[5]->lost_frames, 0);
  free_replies(&rs);
  /* Resumed again from the middle of segment B: it inflates from its
   * start on its own. */
  tg_buf_reset(&fx.out);
  uint64_t cum5 = total - n[5];
  assert_int_equal(tg_replay_resume(w, 5, cum5, REQ, 1 << 20, &fx.out), 0);
  parse(&fx.out, &rs);
  assert_int_equal(rs.n, 2);
  assert_memory_equal(rs.r[0]->frames[0]->read_buffers_response.data, want[5],
                      n[5]);
  free_replies(&rs);
  /* Acknowledged, every segment is freed and its charge given back. */
  tg_replay_ack(w, 6);
  assert_int_equal(w->held, 0);
  zfix_free(&fx);
}

static void compressed_segments_over_the_cap_lose_exactly_the_oldest(
    void **state) {
  (void)state;
  uint8_t b[512];
  size_t one = noisy_body(b, 400, 1, true);
  /* Room for about four frames' compressed bytes. */
  zfix_t fx;
  zfix_init(&fx, 4 * one + 1024);
  tg_replay_window_t *w = fx.w;
  uint8_t want[12][512];
  size_t n[12];
  uint64_t seq = 0;
  /* Three segments of four frames each: the third cannot fit beside the
   * first two. */
  for (int sg = 0; sg < 3; sg++) {
    tg_replay_seg_t *seg = tg_replay_seg_open();
    for (int i = sg * 4; i < sg * 4 + 4; i++) {
      n[i] = noisy_body(want[i], 400, (uint32_t)i + 7, i != 7);
      seq = zsend(&fx, seg, want[i], n[i], false);
      assert_int_equal(seq, i + 1);
      zrun(&fx, seg, NULL, 0, ZSTD_e_flush);
    }
    zrun(&fx, seg, NULL, 0, ZSTD_e_end);
    tg_replay_seg_close(w, seg);
    /* Over the cap by at most the segment being filled. */
    assert_true(w->held <= fx.st.cap + 4 * one + 1024);
  }
  /* The oldest frames went, counted exactly; what is left comes back. */
  assert_true(w->dropped_frames >= 4);
  uint64_t lost = w->dropped_frames;
  uint64_t lost_bytes = 0;
  for (uint64_t i = 0; i < lost; i++) lost_bytes += n[i];
  assert_int_equal(w->dropped_bytes, lost_bytes);
  assert_int_equal(tg_replay_resume(w, 0, 0, REQ, 1 << 20, &fx.out), 0);
  replies_t rs;
  parse(&fx.out, &rs);
  assert_int_equal(rs.r[0]->lost_frames, lost);
  assert_int_equal(rs.r[0]->lost_bytes, lost_bytes);
  /* Frame 8 ended inside a packet: when it is lost, 9 starts inside one. */
  assert_int_equal(rs.r[0]->resync_inside_packet, lost == 8);
  assert_int_equal(rs.n, 1 + (12 - lost) + 1);
  for (uint64_t i = lost; i < 12; i++) {
    const Perfetto__Protos__ReplayedFrame *f = rs.r[1 + i - lost]->frames[0];
    assert_int_equal(f->seq, i + 1);
    assert_memory_equal(f->read_buffers_response.data, want[i], n[i]);
  }
  free_replies(&rs);
  zfix_free(&fx);
}

static void a_failed_segment_loses_its_frames_and_no_more(void **state) {
  (void)state;
  zfix_t fx;
  zfix_init(&fx, 1 << 20);
  tg_replay_window_t *w = fx.w;
  uint8_t b[256];
  size_t n = body(b, 40, 'a', true);
  tg_replay_seg_t *seg = tg_replay_seg_open();
  for (int i = 0; i < 3; i++)
    assert_int_equal(zsend(&fx, seg, b, n, false), i + 1);
  /* The compressor did not take frame 3 whole: nothing held inflates. */
  tg_replay_seg_fail(w, seg);
  assert_int_equal(w->held, 0);
  assert_int_equal(w->dropped_frames, 3);
  /* A frame into the failed segment is lost as well, counted. */
  assert_int_equal(tg_replay_push_ref(&fx.st, w, seg, 0, b, n, false), 0);
  assert_int_equal(w->dropped_frames, 4);
  tg_replay_seg_close(w, seg);
  /* A new segment (a new zstd frame) holds again. */
  ZSTD_CCtx_reset(fx.c, ZSTD_reset_session_only);
  fx.pos = 0;
  tg_replay_seg_t *next = tg_replay_seg_open();
  uint8_t b2[256];
  size_t n2 = body(b2, 30, 'z', true);
  assert_int_equal(zsend(&fx, next, b2, n2, true), 5);
  zrun(&fx, next, NULL, 0, ZSTD_e_flush);
  tg_replay_seg_close(w, next);
  assert_int_equal(tg_replay_resume(w, 0, 0, REQ, 1 << 20, &fx.out), 0);
  replies_t rs;
  parse(&fx.out, &rs);
  assert_int_equal(rs.n, 3); /* loss, 5, end */
  assert_int_equal(rs.r[0]->lost_frames, 4);
  assert_int_equal(rs.r[0]->lost_bytes, 4 * n);
  assert_int_equal(rs.r[1]->frames[0]->seq, 5);
  assert_memory_equal(rs.r[1]->frames[0]->read_buffers_response.data, b2, n2);
  free_replies(&rs);
  zfix_free(&fx);
}

/* A frame said to be where the segment's bytes do not reach: the Resume
 * fails with TG_EBAD_COMPRESSED, it does not send what it never held. */
static void a_segment_short_of_its_frame_is_an_error(void **state) {
  (void)state;
  zfix_t fx;
  zfix_init(&fx, 1 << 20);
  tg_replay_window_t *w = fx.w;
  uint8_t b[256];
  size_t n = body(b, 40, 'a', true);
  tg_replay_seg_t *seg = tg_replay_seg_open();
  assert_int_equal(zsend(&fx, seg, b, n, false), 1);
  zrun(&fx, seg, NULL, 0, ZSTD_e_flush);
  /* Frame 2 is numbered but its bytes never reach the segment. */
  assert_int_equal(tg_replay_push_ref(&fx.st, w, seg, fx.pos + 13, b, n, false), 2);
  tg_replay_seg_close(w, seg);
  assert_int_equal(tg_replay_resume(w, 0, 0, REQ, 1 << 20, &fx.out),
                   TG_EBAD_COMPRESSED);
  zfix_free(&fx);
}

/* A Resume that comes before the compressor made a frame's bytes (on
 * another connection, in the same loop iteration): the frames before it
 * go now, the reply says more, and the next Resume sends the rest. */
static void a_frame_still_in_the_compressor_comes_with_the_next_resume(
    void **state) {
  (void)state;
  zfix_t fx;
  zfix_init(&fx, 1 << 20);
  uint8_t b[256], b2[512];
  size_t n = body(b, 40, 'a', true);
  size_t n2 = noisy_body(b2, 400, 9, true);
  tg_replay_seg_t *seg = tg_replay_seg_open();
  assert_int_equal(zsend(&fx, seg, b, n, false), 1);
  zrun(&fx, seg, NULL, 0, ZSTD_e_flush);
  /* Frame 2 is given to zstd, not flushed: its bytes are not all out. */
  assert_int_equal(zsend(&fx, seg, b2, n2, true), 2);
  assert_int_equal(tg_replay_resume(fx.w, 0, 0, REQ, 1 << 20, &fx.out), 0);
  replies_t rs;
  parse(&fx.out, &rs);
  assert_int_equal(rs.n, 2); /* 1, end with more */
  assert_int_equal(rs.r[0]->frames[0]->seq, 1);
  assert_true(rs.r[1]->more);
  free_replies(&rs);
  /* The iteration's flush: the client's next Resume gets frame 2. */
  zrun(&fx, seg, NULL, 0, ZSTD_e_flush);
  tg_buf_reset(&fx.out);
  assert_int_equal(tg_replay_resume(fx.w, 1, n, REQ, 1 << 20, &fx.out), 0);
  parse(&fx.out, &rs);
  assert_int_equal(rs.n, 2); /* 2, end */
  assert_int_equal(rs.r[0]->frames[0]->seq, 2);
  assert_memory_equal(rs.r[0]->frames[0]->read_buffers_response.data, b2, n2);
  assert_false(rs.r[1]->more);
  assert_int_equal(rs.r[1]->last_seq, 2);
  free_replies(&rs);
  tg_replay_seg_close(fx.w, seg);
  zfix_free(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          a_frame_still_in_the_compressor_comes_with_the_next_resume),
      cmocka_unit_test(compressed_segments_resume_whole_frames),
      cmocka_unit_test(compressed_segments_over_the_cap_lose_exactly_the_oldest),
      cmocka_unit_test(a_failed_segment_loses_its_frames_and_no_more),
      cmocka_unit_test(a_segment_short_of_its_frame_is_an_error),
      cmocka_unit_test(acked_frames_are_not_sent_again),
      cmocka_unit_test(overflow_is_counted_exactly),
      cmocka_unit_test(big_frames_go_in_parts_cut_at_slices),
      cmocka_unit_test(unknown_keys_and_bounds),
      cmocka_unit_test(blocks_are_kept_charged_and_freed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
