/* Replay windows (relay/replay_window.h), without I/O: numbering,
 * acknowledgement, the exact loss when the window overflowed, frames too
 * big for one reply sent in parts, unknown keys, and the store's bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "abi/ipc_frame.h"
#include "pb/tracegate/relay.pb-c.h"
#include "relay/replay_window.h"
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(acked_frames_are_not_sent_again),
      cmocka_unit_test(overflow_is_counted_exactly),
      cmocka_unit_test(big_frames_go_in_parts_cut_at_slices),
      cmocka_unit_test(unknown_keys_and_bounds),
      cmocka_unit_test(blocks_are_kept_charged_and_freed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
