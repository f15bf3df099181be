/* ReadBuffers reply frames sent from where the packets lie
 * (service/read_frames.h) over a real channel on a socket pair: the peer
 * decodes every frame with protobuf-c and puts the packets back together
 * from their slices.
 *
 * What must hold: every packet arrives whole and in order whatever mix of
 * in-place and copied pieces made it; large stable pieces are in fact sent
 * in place; and what the socket did not take is the channel's own copy
 * before the pass ends (the source may change at once after).
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "abi/ipc_frame.h"
#include "ipc/channel.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/ipc/wire_protocol.pb-c.h"
#include "service/read_frames.h"
#include "test_wait.h"

#define WAIT_MS 10000
#define REQUEST_ID 42

typedef struct fixture {
  uv_loop_t loop;
  tg_ipc_chan_t ch;
  int peer;
  bool closed;
  unsigned drains;
  tg_frame_decoder_t dec;
  /* What the peer got: the packets put back together, end to end, with
   * their lengths. */
  uint8_t *got;
  size_t got_len, got_cap;
  size_t *pkt_lens;
  size_t n_pkts, pkts_cap;
  size_t open_pkt; /* bytes of a packet whose last slice is still to come */
  unsigned frames;
  bool bad_frame;
} fixture_t;

static int on_frame(tg_ipc_chan_t *ch, const uint8_t *p, size_t n) {
  (void)ch;
  (void)p;
  (void)n;
  return 0;
}
static void on_drain(tg_ipc_chan_t *ch) {
  fixture_t *f = ch->data;
  f->drains++;
}
static void on_close(tg_ipc_chan_t *ch, int status) {
  (void)status;
  fixture_t *f = ch->data;
  f->closed = true;
}
static const tg_ipc_chan_cbs_t cbs = {
    .on_frame = on_frame, .on_drain = on_drain, .on_close = on_close};

static void got_append(fixture_t *f, const uint8_t *d, size_t n) {
  if (n == 0) return; /* an empty slice's data may be NULL */
  if (f->got_len + n > f->got_cap) {
    f->got_cap = (f->got_len + n) * 2;
    f->got = realloc(f->got, f->got_cap);
    assert_non_null(f->got);
  }
  memcpy(f->got + f->got_len, d, n);
  f->got_len += n;
}

/* One reply frame as a Perfetto consumer reads it. */
static int peer_frame(void *ctx, const uint8_t *payload, size_t len) {
  fixture_t *f = ctx;
  f->frames++;
  Perfetto__Protos__IPCFrame *fr =
      perfetto__protos__ipcframe__unpack(NULL, len, payload);
  if (!fr || fr->request_id != REQUEST_ID ||
      fr->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY ||
      !fr->msg_invoke_method_reply->success ||
      !fr->msg_invoke_method_reply->has_more) {
    f->bad_frame = true;
    if (fr) perfetto__protos__ipcframe__free_unpacked(fr, NULL);
    return 0;
  }
  ProtobufCBinaryData rp = fr->msg_invoke_method_reply->reply_proto;
  Perfetto__Protos__ReadBuffersResponse *r =
      perfetto__protos__read_buffers_response__unpack(NULL, rp.len, rp.data);
  if (!r) {
    f->bad_frame = true;
  } else {
    for (size_t i = 0; i < r->n_slices; i++) {
      const Perfetto__Protos__ReadBuffersResponse__Slice *s = r->slices[i];
      got_append(f, s->data.data, s->data.len);
      f->open_pkt += s->data.len;
      if (!s->last_slice_for_packet) continue;
      if (f->n_pkts == f->pkts_cap) {
        f->pkts_cap = f->pkts_cap ? f->pkts_cap * 2 : 64;
        f->pkt_lens = realloc(f->pkt_lens, f->pkts_cap * sizeof(size_t));
        assert_non_null(f->pkt_lens);
      }
      f->pkt_lens[f->n_pkts++] = f->open_pkt;
      f->open_pkt = 0;
    }
    perfetto__protos__read_buffers_response__free_unpacked(r, NULL);
  }
  perfetto__protos__ipcframe__free_unpacked(fr, NULL);
  return 0;
}

/* Reads what the socket holds now, without waiting. */
static void peer_read(fixture_t *f) {
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = recv(f->peer, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) return;
    assert_int_equal(
        tg_frame_decoder_feed(&f->dec, buf, (size_t)n, peer_frame, f), 0);
  }
}

typedef struct until {
  fixture_t *f;
  size_t n_pkts;
} until_t;

static bool peer_has(void *arg) {
  until_t *u = arg;
  peer_read(u->f);
  return u->f->n_pkts >= u->n_pkts && tg_ipc_chan_pending(&u->f->ch) == 0;
}

/* Reads until |n_pkts| packets arrived and nothing is queued. */
static void peer_wait(fixture_t *f, size_t n_pkts) {
  until_t u = {f, n_pkts};
  assert_true(tg_test_run_loop_until(&f->loop, peer_has, &u, WAIT_MS));
}

static fixture_t *fixture_new(int sndbuf) {
  fixture_t *f = calloc(1, sizeof(*f));
  assert_non_null(f);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  if (sndbuf) {
    assert_int_equal(
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
  }
  assert_int_equal(uv_loop_init(&f->loop), 0);
  assert_int_equal(tg_ipc_chan_open(&f->loop, &f->ch, sv[0], &cbs, f), 0);
  tg_ipc_chan_set_high_water(&f->ch, 0);
  f->peer = sv[1];
  tg_frame_decoder_init(&f->dec);
  return f;
}

static bool is_closed(void *arg) { return ((fixture_t *)arg)->closed; }

static void fixture_free(fixture_t *f) {
  tg_ipc_chan_close(&f->ch, 0);
  assert_true(tg_test_run_loop_until(&f->loop, is_closed, f, WAIT_MS));
  assert_int_equal(uv_loop_close(&f->loop), 0);
  close(f->peer);
  tg_frame_decoder_free(&f->dec);
  free(f->got);
  free(f->pkt_lens);
  free(f);
}

static void fill(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)((seed * 2654435761u + i * 7) >> 5);
}

/* Packets of every shape: a large one in two stable pieces with a small
 * volatile suffix (as the read-out hands a producer's packet), tiny ones,
 * an empty one, one far larger than a frame, one of more pieces than a
 * frame has holes. The peer gets each whole, in order; the large pieces
 * went in place. */
static void every_packet_arrives_whole_and_in_order(void **state) {
  (void)state;
  fixture_t *f = fixture_new(0);
  tg_read_frames_t *rf = tg_read_frames_new();
  assert_non_null(rf);
  size_t src_len = 2u << 20;
  uint8_t *src = malloc(src_len);
  assert_non_null(src);
  fill(src, src_len, 1);
  uint8_t *want = malloc(src_len * 2);
  assert_non_null(want);
  size_t want_len = 0;
  size_t want_lens[64];
  size_t n_pkts = 0;

  tg_read_frames_begin(rf, &f->ch, REQUEST_ID);
  size_t off = 0;
  for (int round = 0; round < 6; round++) {
    /* 1000 bytes in two stable pieces, a 12-byte suffix that changes. */
    uint8_t suffix[12];
    fill(suffix, sizeof(suffix), (uint32_t)round + 100);
    const uint8_t *pieces[3] = {src + off, src + off + 600, suffix};
    size_t lens[3] = {600, 400, sizeof(suffix)};
    assert_int_equal(tg_read_frames_add(rf, pieces, lens, 3, 2, 1012), 0);
    memcpy(want + want_len, src + off, 1000);
    memcpy(want + want_len + 1000, suffix, sizeof(suffix));
    want_len += 1012;
    want_lens[n_pkts++] = 1012;
    memset(suffix, 0xEE, sizeof(suffix)); /* gone after the call */
    off += 1000;
    /* A tiny packet and an empty one. */
    const uint8_t *tiny = src + off;
    size_t tl = 20;
    assert_int_equal(tg_read_frames_add(rf, &tiny, &tl, 1, 1, tl), 0);
    memcpy(want + want_len, tiny, tl);
    want_len += tl;
    want_lens[n_pkts++] = tl;
    off += tl;
    size_t zero = 0;
    assert_int_equal(tg_read_frames_add(rf, &tiny, &zero, 1, 1, 0), 0);
    want_lens[n_pkts++] = 0;
  }
  /* 300 KiB in one piece: slices over three frames. */
  const uint8_t *big = src + off;
  size_t bl = 300u << 10;
  assert_int_equal(tg_read_frames_add(rf, &big, &bl, 1, 1, bl), 0);
  memcpy(want + want_len, big, bl);
  want_len += bl;
  want_lens[n_pkts++] = bl;
  off += bl;
  /* 700 pieces of 300 bytes: more than a frame's holes. */
  enum { MANY = 700, PIECE = 300 };
  const uint8_t **mp = malloc(MANY * sizeof(*mp));
  size_t *ml = malloc(MANY * sizeof(*ml));
  assert_non_null(mp);
  assert_non_null(ml);
  for (int i = 0; i < MANY; i++) {
    mp[i] = src + off + (size_t)i * PIECE;
    ml[i] = PIECE;
  }
  assert_int_equal(tg_read_frames_add(rf, mp, ml, MANY, MANY, MANY * PIECE), 0);
  memcpy(want + want_len, src + off, MANY * PIECE);
  want_len += MANY * PIECE;
  want_lens[n_pkts++] = MANY * PIECE;
  assert_int_equal(tg_read_frames_end(rf), 0);

  peer_wait(f, n_pkts);
  assert_false(f->bad_frame);
  assert_int_equal(f->n_pkts, n_pkts);
  for (size_t i = 0; i < n_pkts; i++)
    assert_int_equal(f->pkt_lens[i], want_lens[i]);
  assert_int_equal(f->got_len, want_len);
  assert_memory_equal(f->got, want, want_len);
  assert_int_equal(f->open_pkt, 0);
  /* The 600/400-byte pieces, the big one and the 300-byte ones went in
   * place; the suffixes, tiny packets never do. */
  assert_true(rf->bytes_in_place >= 6 * 1000 + bl + 400 * PIECE);
  assert_true(rf->bytes_in_place < want_len);
  assert_true(rf->frames_sent >= 4);
  assert_int_equal(rf->frames_sent, f->frames);
  free(mp);
  free(ml);
  free(want);
  free(src);
  free(rf);
  fixture_free(f);
}

/* One read-out pass of |n| packets of |size| bytes, stable, from |src|. */
static void one_pass(tg_read_frames_t *rf, tg_ipc_chan_t *ch,
                     const uint8_t *src, int n, size_t size) {
  tg_read_frames_begin(rf, ch, REQUEST_ID);
  for (int i = 0; i < n; i++) {
    const uint8_t *p = src + (size_t)i * size;
    size_t l = size;
    assert_int_equal(tg_read_frames_add(rf, &p, &l, 1, 1, l), 0);
  }
  assert_int_equal(tg_read_frames_end(rf), 0);
}

/* A socket that takes only part of the frames: the rest is the channel's
 * copy when the pass ends, so the source may be overwritten at once, and
 * the channel stays congested until its queue is empty (high water 0),
 * when on_drain fires. A second pass then goes out behind the queue. */
static void what_the_socket_does_not_take_is_copied_before_the_pass_ends(
    void **state) {
  (void)state;
  fixture_t *f = fixture_new(16 << 10);
  tg_read_frames_t *rf = tg_read_frames_new();
  assert_non_null(rf);
  enum { PKTS = 600, PKT = 2000 };
  size_t total = (size_t)PKTS * PKT;
  uint8_t *src = malloc(total);
  uint8_t *want = malloc(total * 2);
  assert_non_null(src);
  assert_non_null(want);
  fill(src, total, 7);
  memcpy(want, src, total);

  one_pass(rf, &f->ch, src, PKTS, PKT);
  assert_true(tg_ipc_chan_pending(&f->ch) > 0); /* the socket is full */
  assert_true(tg_ipc_chan_congested(&f->ch));
  /* The trace buffer takes new chunks, and a second pass goes out while
   * output is queued: copied behind it. */
  fill(src, total, 8);
  memcpy(want + total, src, total);
  one_pass(rf, &f->ch, src, PKTS, PKT);
  memset(src, 0xDD, total);

  unsigned drains_before = f->drains;
  peer_wait(f, 2 * PKTS);
  assert_false(f->bad_frame);
  assert_int_equal(f->got_len, 2 * total);
  assert_memory_equal(f->got, want, 2 * total);
  assert_false(tg_ipc_chan_congested(&f->ch));
  assert_true(f->drains > drains_before);
  free(want);
  free(src);
  free(rf);
  fixture_free(f);
}

/* Sizes that do not add up are refused, not sent as a corrupt frame. */
static void a_total_beyond_the_pieces_is_refused(void **state) {
  (void)state;
  fixture_t *f = fixture_new(0);
  tg_read_frames_t *rf = tg_read_frames_new();
  assert_non_null(rf);
  uint8_t d[500] = {0};
  const uint8_t *p = d;
  size_t l = sizeof(d);
  tg_read_frames_begin(rf, &f->ch, REQUEST_ID);
  assert_int_equal(tg_read_frames_add(rf, &p, &l, 1, 1, l + 10), -EINVAL);
  /* Sticky for the pass. */
  assert_int_equal(tg_read_frames_add(rf, &p, &l, 1, 1, l), -EINVAL);
  assert_int_equal(tg_read_frames_end(rf), -EINVAL);
  /* Nothing went out: the frame the error left unfinished is dropped. */
  assert_int_equal(tg_ipc_chan_pending(&f->ch), 0);
  uint8_t b[16];
  assert_int_equal(recv(f->peer, b, sizeof(b), MSG_DONTWAIT), -1);
  assert_int_equal(errno, EAGAIN);
  free(rf);
  fixture_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_packet_arrives_whole_and_in_order),
      cmocka_unit_test(
          what_the_socket_does_not_take_is_copied_before_the_pass_ends),
      cmocka_unit_test(a_total_beyond_the_pieces_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
