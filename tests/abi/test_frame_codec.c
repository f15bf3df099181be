/* Frame codec: the [u32 LE len][IPCFrame] stream decoder and the encoders. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "abi/ipc_frame.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "tracegate/error.h"

/* Collects every frame the decoder emits, concatenated, with their sizes. */
typedef struct collected {
  uint8_t bytes[300000];
  size_t len;
  size_t sizes[16];
  size_t count;
  int stop_with; /* non-zero: return it from the callback */
} collected_t;

static int collect(void *ctx, const uint8_t *p, size_t n) {
  collected_t *c = ctx;
  assert_true(c->count < 16);
  assert_true(c->len + n <= sizeof(c->bytes));
  memcpy(c->bytes + c->len, p, n);
  c->len += n;
  c->sizes[c->count++] = n;
  return c->stop_with;
}

static size_t put_frame(uint8_t *out, const uint8_t *payload, uint32_t n) {
  tg_pb_write_le32(out, n);
  if (n) memcpy(out + 4, payload, n);
  return 4 + n;
}

/* Three frames of 1, 300 and 5000 bytes with distinct contents. */
static size_t make_stream(uint8_t *s, uint8_t *payloads, size_t *total) {
  size_t off = 0, poff = 0;
  const uint32_t sizes[] = {1, 300, 5000};
  for (int f = 0; f < 3; f++) {
    for (uint32_t i = 0; i < sizes[f]; i++)
      payloads[poff + i] = (uint8_t)(f * 31 + i * 7);
    off += put_frame(s + off, payloads + poff, sizes[f]);
    poff += sizes[f];
  }
  *total = poff;
  return off;
}

static void frame_split_at_every_byte_offset(void **state) {
  (void)state;
  static uint8_t stream[6000], payloads[6000];
  size_t total;
  size_t n = make_stream(stream, payloads, &total);
  static collected_t c;
  for (size_t cut = 0; cut <= n; cut++) {
    memset(&c, 0, sizeof(c));
    tg_frame_decoder_t d;
    tg_frame_decoder_init(&d);
    assert_int_equal(tg_frame_decoder_feed(&d, stream, cut, collect, &c), 0);
    assert_int_equal(
        tg_frame_decoder_feed(&d, stream + cut, n - cut, collect, &c), 0);
    assert_int_equal(c.count, 3);
    assert_int_equal(c.sizes[0], 1);
    assert_int_equal(c.sizes[1], 300);
    assert_int_equal(c.sizes[2], 5000);
    assert_memory_equal(c.bytes, payloads, total);
    assert_int_equal(tg_frame_decoder_pending(&d), 0);
    tg_frame_decoder_free(&d);
  }
}

static void frame_one_byte_at_a_time(void **state) {
  (void)state;
  static uint8_t stream[6000], payloads[6000];
  size_t total;
  size_t n = make_stream(stream, payloads, &total);
  static collected_t c;
  memset(&c, 0, sizeof(c));
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(tg_frame_decoder_feed(&d, stream + i, 1, collect, &c), 0);
  assert_int_equal(c.count, 3);
  assert_memory_equal(c.bytes, payloads, total);
  assert_int_equal(d.frames, 3);
  tg_frame_decoder_free(&d);
}

static void frame_rejects_oversized_length(void **state) {
  (void)state;
  uint8_t hdr[4];
  tg_pb_write_le32(hdr, TG_IPC_FRAME_MAX_PAYLOAD + 1);
  collected_t *c = calloc(1, sizeof(*c));
  /* Whole header at once. */
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  assert_int_equal(tg_frame_decoder_feed(&d, hdr, 4, collect, c),
                   TG_EFRAME_TOO_LARGE);
  /* Sticky: a valid frame afterwards is not accepted. */
  uint8_t ok[5];
  put_frame(ok, (const uint8_t *)"x", 1);
  assert_int_equal(tg_frame_decoder_feed(&d, ok, 5, collect, c),
                   TG_EFRAME_TOO_LARGE);
  assert_int_equal(c->count, 0);
  tg_frame_decoder_free(&d);

  /* Header split across calls, and a huge length (no allocation attempt). */
  tg_pb_write_le32(hdr, 0xFFFFFFFFu);
  tg_frame_decoder_init(&d);
  assert_int_equal(tg_frame_decoder_feed(&d, hdr, 3, collect, c), 0);
  assert_int_equal(tg_frame_decoder_feed(&d, hdr + 3, 1, collect, c),
                   TG_EFRAME_TOO_LARGE);
  tg_frame_decoder_free(&d);
  free(c);
}

static void frame_accepts_exactly_the_cap(void **state) {
  (void)state;
  size_t n = TG_IPC_FRAME_MAX_PAYLOAD;
  uint8_t *s = malloc(4 + n);
  memset(s + 4, 0xAB, n);
  tg_pb_write_le32(s, (uint32_t)n);
  collected_t *c = calloc(1, sizeof(*c));
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  /* Split in the middle so the frame goes through the internal buffer. */
  assert_int_equal(tg_frame_decoder_feed(&d, s, 1000, collect, c), 0);
  assert_int_equal(tg_frame_decoder_feed(&d, s + 1000, 4 + n - 1000, collect, c),
                   0);
  assert_int_equal(c->count, 1);
  assert_int_equal(c->sizes[0], n);
  assert_int_equal(c->bytes[n - 1], 0xAB);
  tg_frame_decoder_free(&d);
  free(c);
  free(s);
}

static void frame_skips_zero_length(void **state) {
  (void)state;
  uint8_t s[32];
  size_t n = put_frame(s, NULL, 0);
  n += put_frame(s + n, (const uint8_t *)"abc", 3);
  n += put_frame(s + n, NULL, 0);
  collected_t *c = calloc(1, sizeof(*c));
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  for (size_t i = 0; i < n; i++) /* also split: zero frames via the buffer */
    assert_int_equal(tg_frame_decoder_feed(&d, s + i, 1, collect, c), 0);
  assert_int_equal(c->count, 1);
  assert_memory_equal(c->bytes, "abc", 3);
  assert_int_equal(d.empty_frames, 2);
  tg_frame_decoder_free(&d);
  free(c);
}

static void frame_garbage_then_valid_frame(void **state) {
  (void)state;
  /* A well-framed payload that is not an IPCFrame (a group wire type and a
   * truncated varint), then a real BindService frame. */
  static const uint8_t garbage[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0B, 0x80};
  Perfetto__Protos__IPCFrame f = PERFETTO__PROTOS__IPCFRAME__INIT;
  Perfetto__Protos__IPCFrame__BindService bind =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  bind.service_name = "ConsumerPort";
  f.has_request_id = 1;
  f.request_id = 9;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  f.msg_bind_service = &bind;
  tg_buf_t out;
  tg_buf_init(&out, 0);
  uint8_t hdr[4];
  tg_pb_write_le32(hdr, sizeof(garbage));
  assert_int_equal(tg_buf_append(&out, hdr, 4), 0);
  assert_int_equal(tg_buf_append(&out, garbage, sizeof(garbage)), 0);
  assert_int_equal(tg_ipc_frame_append(&f, &out), 0);

  collected_t *c = calloc(1, sizeof(*c));
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  assert_int_equal(
      tg_frame_decoder_feed(&d, tg_buf_begin(&out), tg_buf_size(&out), collect, c),
      0);
  assert_int_equal(c->count, 2);
  assert_null(tg_ipc_frame_unpack(c->bytes, c->sizes[0]));
  tg_ipc_frame_t *g = tg_ipc_frame_unpack(c->bytes + c->sizes[0], c->sizes[1]);
  assert_non_null(g);
  assert_int_equal(g->request_id, 9);
  assert_int_equal(g->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE);
  assert_string_equal(g->msg_bind_service->service_name, "ConsumerPort");
  tg_ipc_frame_free(g);
  tg_frame_decoder_free(&d);
  tg_buf_free(&out);
  free(c);
}

static void frame_callback_stop_is_returned(void **state) {
  (void)state;
  uint8_t s[32];
  size_t n = put_frame(s, (const uint8_t *)"a", 1);
  n += put_frame(s + n, (const uint8_t *)"b", 1);
  collected_t *c = calloc(1, sizeof(*c));
  c->stop_with = 7;
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  assert_int_equal(tg_frame_decoder_feed(&d, s, n, collect, c), 7);
  assert_int_equal(c->count, 1); /* the second frame was not delivered */
  tg_frame_decoder_free(&d);
  free(c);
}

/* Reply frames written in place must decode with protobuf-c, redundant
 * 4-byte varint lengths included. */
static void reply_writer_output_decodes_with_protobuf_c(void **state) {
  (void)state;
  uint8_t space[4096];
  tg_ipc_reply_writer_t rw;
  tg_ipc_reply_begin(&rw, space, sizeof(space), 77, true, true);
  /* ReadBuffersResponse { slices=2 { data=1, last_slice_for_packet=2 } } */
  tg_pbw_begin_nested(&rw.body, 2);
  tg_pbw_append_bytes(&rw.body, 1, "hello", 5);
  tg_pbw_append_bool(&rw.body, 2, true);
  tg_pbw_end_nested(&rw.body);
  size_t flen = 0;
  assert_int_equal(tg_ipc_reply_end(&rw, &flen), 0);
  assert_int_equal(tg_pb_read_le32(space), flen - 4);

  tg_ipc_frame_t *f = tg_ipc_frame_unpack(space + 4, flen - 4);
  assert_non_null(f);
  assert_int_equal(f->request_id, 77);
  assert_int_equal(f->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
  Perfetto__Protos__IPCFrame__InvokeMethodReply *r = f->msg_invoke_method_reply;
  assert_true(r->success);
  assert_true(r->has_more);
  Perfetto__Protos__ReadBuffersResponse *rb =
      perfetto__protos__read_buffers_response__unpack(
          NULL, r->reply_proto.len, r->reply_proto.data);
  assert_non_null(rb);
  assert_int_equal(rb->n_slices, 1);
  assert_int_equal(rb->slices[0]->data.len, 5);
  assert_memory_equal(rb->slices[0]->data.data, "hello", 5);
  assert_true(rb->slices[0]->last_slice_for_packet);
  perfetto__protos__read_buffers_response__free_unpacked(rb, NULL);
  tg_ipc_frame_free(f);
}

/* The in-place reader takes what the reply writer writes, pointing into
 * the frame. */
static void reply_view_reads_the_writers_frame_in_place(void **state) {
  (void)state;
  uint8_t space[4096];
  tg_ipc_reply_writer_t rw;
  tg_ipc_reply_begin(&rw, space, sizeof(space), 300, true, true);
  tg_pbw_append_bytes(&rw.body, 1, "hello", 5);
  size_t flen = 0;
  assert_int_equal(tg_ipc_reply_end(&rw, &flen), 0);
  tg_ipc_reply_view_t v;
  assert_int_equal(tg_ipc_frame_read_reply(space + 4, flen - 4, &v), 1);
  assert_int_equal(v.request_id, 300);
  assert_true(v.success);
  assert_true(v.has_more);
  assert_true(v.has_reply_proto);
  assert_int_equal(v.reply_proto_len, 7); /* 0a 05 hello */
  assert_true(v.reply_proto > space && v.reply_proto + 7 <= space + flen);
  assert_memory_equal(v.reply_proto + 2, "hello", 5);

  /* A failed final reply without a body. */
  tg_ipc_reply_begin(&rw, space, sizeof(space), 1, false, false);
  assert_int_equal(tg_ipc_reply_end(&rw, &flen), 0);
  assert_int_equal(tg_ipc_frame_read_reply(space + 4, flen - 4, &v), 1);
  assert_false(v.success);
  assert_false(v.has_more);
}

/* Compares the view with protobuf-c on |frame| when the view reads it. */
static int view_against_protobuf_c(const uint8_t *frame, size_t n) {
  tg_ipc_reply_view_t v;
  int plain = tg_ipc_frame_read_reply(frame, n, &v);
  if (plain != 1) return plain;
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(frame, n);
  assert_non_null(f);
  assert_int_equal(f->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
  const Perfetto__Protos__IPCFrame__InvokeMethodReply *r =
      f->msg_invoke_method_reply;
  assert_int_equal(v.request_id, f->request_id);
  assert_int_equal(v.success, r->success);
  assert_int_equal(v.has_more, r->has_more);
  assert_int_equal(v.has_reply_proto, r->has_reply_proto);
  assert_int_equal(v.reply_proto_len, r->reply_proto.len);
  if (v.reply_proto_len)
    assert_memory_equal(v.reply_proto, r->reply_proto.data, v.reply_proto_len);
  tg_ipc_frame_free(f);
  return 1;
}

/* Shapes the reader leaves to protobuf-c (0), and ones it reads as
 * protobuf-c does (1): the last request id and reply_proto count, unknown
 * fields are skipped. */
static void reply_view_leaves_unusual_shapes_to_protobuf_c(void **state) {
  (void)state;
  static const struct {
    const char *what;
    int plain;
    uint8_t n;
    uint8_t bytes[24];
  } cases[] = {
      /* id 4, reply { success, has_more, reply_proto "ab" } */
      {"plain", 1, 12,
       {0x10, 4, 0x32, 8, 0x08, 1, 0x10, 1, 0x1a, 2, 'a', 'b'}},
      {"the reply twice: protobuf-c merges", 0, 10,
       {0x10, 4, 0x32, 2, 0x08, 1, 0x32, 2, 0x10, 1}},
      {"a bool in two bytes", 0, 7, {0x10, 4, 0x32, 3, 0x08, 0x80, 0x01}},
      {"a bool with bits past 64", 0, 15,
       {0x10, 4, 0x32, 11, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
        0x80, 0x80, 0x02}},
      {"a RequestError after the reply", 0, 8,
       {0x10, 4, 0x32, 0, 0x3a, 2, 0x0a, 0}},
      {"a BindServiceReply before it", 0, 6, {0x22, 0, 0x10, 4, 0x32, 0}},
      {"data_for_testing", 0, 6, {0x0a, 0, 0x10, 4, 0x32, 0}},
      {"request_id as LEN", 0, 5, {0x12, 1, 4, 0x32, 0}},
      {"success as LEN", 0, 6, {0x10, 4, 0x32, 2, 0x0a, 0}},
      {"reply_proto as varint", 0, 6, {0x10, 4, 0x32, 2, 0x18, 1}},
      {"a truncated reply", 0, 4, {0x10, 4, 0x32, 5}},
      {"no reply", 0, 2, {0x10, 4}},
      {"ids and reply_proto twice, unknowns", 1, 19,
       {0x10, 4, 0x48, 9, 0x10, 5, 0x32, 11, 0x1a, 1, 'x', 0x25, 1, 2, 3, 4,
        0x1a, 1, 'y'}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int got = view_against_protobuf_c(cases[i].bytes, cases[i].n);
    if (got != cases[i].plain) fail_msg("%s: %d", cases[i].what, got);
  }
  /* The last case reads as request 5 with reply_proto "y". */
  tg_ipc_reply_view_t v;
  assert_int_equal(tg_ipc_frame_read_reply(cases[12].bytes, cases[12].n, &v),
                   1);
  assert_int_equal(v.request_id, 5);
  assert_int_equal(v.reply_proto_len, 1);
  assert_int_equal(v.reply_proto[0], 'y');
}

static void reply_writer_reports_no_space(void **state) {
  (void)state;
  uint8_t space[64];
  tg_ipc_reply_writer_t rw;
  tg_ipc_reply_begin(&rw, space, sizeof(space), 1, true, false);
  static const uint8_t big[100] = {0};
  tg_pbw_append_bytes(&rw.body, 1, big, sizeof(big));
  size_t flen = 0;
  assert_int_equal(tg_ipc_reply_end(&rw, &flen), TG_ENO_SPACE);
}

/* The hand-written InvokeMethod frame is what protobuf-c reads back. */
static void invoke_writer_output_decodes_with_protobuf_c(void **state) {
  (void)state;
  tg_buf_t out;
  tg_buf_init(&out, 0);
  static const uint8_t args[] = {0x08, 0x96, 0x01};
  assert_int_equal(tg_ipc_invoke_append(&out, 300, 2, 7, args, sizeof(args),
                                        false), 0);
  assert_int_equal(tg_ipc_invoke_append(&out, 301, 1, 5, NULL, 0, true), 0);
  const uint8_t *p = tg_buf_begin(&out);
  for (int k = 0; k < 2; k++) {
    uint32_t n = tg_pb_read_le32(p);
    tg_ipc_frame_t *f = tg_ipc_frame_unpack(p + TG_IPC_FRAME_HEADER_SIZE, n);
    assert_non_null(f);
    assert_int_equal(f->msg_case,
                     PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD);
    const Perfetto__Protos__IPCFrame__InvokeMethod *m = f->msg_invoke_method;
    if (k == 0) {
      assert_int_equal(f->request_id, 300);
      assert_int_equal(m->service_id, 2);
      assert_int_equal(m->method_id, 7);
      assert_int_equal(m->args_proto.len, sizeof(args));
      assert_memory_equal(m->args_proto.data, args, sizeof(args));
      assert_false(m->has_drop_reply && m->drop_reply);
    } else {
      assert_int_equal(f->request_id, 301);
      assert_int_equal(m->args_proto.len, 0);
      assert_true(m->has_drop_reply && m->drop_reply);
    }
    /* The in-place reader reads the same, pointing into the frame. */
    tg_ipc_invoke_view_t v;
    const uint8_t *fp = p + TG_IPC_FRAME_HEADER_SIZE;
    assert_int_equal(tg_ipc_frame_read_invoke(fp, n, &v), 1);
    assert_int_equal(v.request_id, f->request_id);
    assert_int_equal(v.service_id, m->service_id);
    assert_int_equal(v.method_id, m->method_id);
    assert_int_equal(v.drop_reply, m->has_drop_reply && m->drop_reply);
    assert_int_equal(v.args_len, m->args_proto.len);
    assert_non_null(v.args); /* the writer always writes args_proto */
    assert_true(v.args >= fp && v.args + v.args_len <= fp + n);
    if (v.args_len) assert_memory_equal(v.args, args, sizeof(args));
    tg_ipc_reply_view_t rv;
    assert_int_equal(tg_ipc_frame_read_reply(fp, n, &rv), 0); /* not one */
    tg_ipc_frame_free(f);
    p += TG_IPC_FRAME_HEADER_SIZE + n;
  }
  assert_ptr_equal(p, tg_buf_begin(&out) + tg_buf_size(&out));
  /* Args that cannot fit a frame are refused, the buffer untouched. */
  size_t before = tg_buf_size(&out);
  static uint8_t big[TG_IPC_FRAME_MAX_PAYLOAD];
  assert_int_equal(tg_ipc_invoke_append(&out, 1, 1, 1, big, sizeof(big),
                                        false), TG_EFRAME_TOO_LARGE);
  assert_int_equal(tg_buf_size(&out), before);
  tg_buf_free(&out);
}

/* Calls the reader leaves to protobuf-c, and what it reads as protobuf-c
 * does. */
static void invoke_view_leaves_unusual_shapes_to_protobuf_c(void **state) {
  (void)state;
  static const struct {
    const char *what;
    int plain;
    uint8_t n;
    uint8_t bytes[24];
  } cases[] = {
      /* id 4, call { service 1, method 2, args "a", drop_reply } */
      {"plain", 1, 13,
       {0x10, 4, 0x2a, 9, 0x08, 1, 0x10, 2, 0x1a, 1, 'a', 0x20, 1}},
      {"no args", 1, 8, {0x10, 4, 0x2a, 4, 0x08, 1, 0x10, 2}},
      {"the call twice: protobuf-c merges", 0, 10,
       {0x10, 4, 0x2a, 2, 0x08, 1, 0x2a, 2, 0x10, 1}},
      {"a service id past 32 bits", 0, 10,
       {0x10, 4, 0x2a, 6, 0x08, 0x80, 0x80, 0x80, 0x80, 0x10}},
      {"drop_reply in two bytes", 0, 7, {0x10, 4, 0x2a, 3, 0x20, 0x81, 0x00}},
      {"SetPeerIdentity after it", 0, 6, {0x10, 4, 0x2a, 0, 0x42, 0}},
      {"method_id as fixed32", 0, 9,
       {0x10, 4, 0x2a, 5, 0x15, 1, 0, 0, 0}},
      {"args as varint", 0, 6, {0x10, 4, 0x2a, 2, 0x18, 1}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tg_ipc_invoke_view_t v;
    int got = tg_ipc_frame_read_invoke(cases[i].bytes, cases[i].n, &v);
    if (got != cases[i].plain) fail_msg("%s: %d", cases[i].what, got);
    tg_ipc_frame_t *f = tg_ipc_frame_unpack(cases[i].bytes, cases[i].n);
    if (got) {
      assert_non_null(f);
      const Perfetto__Protos__IPCFrame__InvokeMethod *m = f->msg_invoke_method;
      assert_non_null(m);
      assert_int_equal(v.service_id, m->service_id);
      assert_int_equal(v.method_id, m->method_id);
      assert_int_equal(v.drop_reply, m->has_drop_reply && m->drop_reply);
      assert_int_equal(v.args != NULL, m->has_args_proto);
      assert_int_equal(v.args_len, m->args_proto.len);
    }
    tg_ipc_frame_free(f);
  }
}

/* Collects like collect() and notes whether each frame was handed over
 * from the decoder's own buffer (assembled there) or from the input. */
typedef struct placed {
  collected_t c;
  const tg_frame_decoder_t *d;
  unsigned from_buf; /* bit i: frame i came from d->buf */
} placed_t;

static int collect_placed(void *ctx, const uint8_t *p, size_t n) {
  placed_t *pl = ctx;
  if (pl->d->buf && p == pl->d->buf + TG_IPC_FRAME_HEADER_SIZE)
    pl->from_buf |= 1u << pl->c.count;
  return collect(&pl->c, p, n);
}

/* A reader that feeds |cut| bytes, then writes every partial frame's rest
 * in place, |step| bytes at a time, and feeds what follows a frame. */
static void frame_room_takes_the_rest_of_a_split_frame(void **state) {
  (void)state;
  static uint8_t stream[6000], payloads[6000];
  size_t total;
  size_t n = make_stream(stream, payloads, &total);
  static placed_t pl;
  const size_t steps[] = {1, 3, 700, 6000};
  for (size_t cut = 0; cut <= n; cut += 7) {
    for (size_t si = 0; si < sizeof(steps) / sizeof(steps[0]); si++) {
      memset(&pl, 0, sizeof(pl));
      tg_frame_decoder_t d;
      tg_frame_decoder_init(&d);
      pl.d = &d;
      assert_int_equal(
          tg_frame_decoder_feed(&d, stream, cut, collect_placed, &pl), 0);
      size_t off = cut;
      bool wrote_in_place = false;
      while (off < n) {
        uint8_t *at = NULL;
        size_t room = tg_frame_decoder_room(&d, &at);
        if (room == 0) { /* nothing partial: feed up to the next cut */
          size_t k = n - off < 301 ? n - off : 301;
          assert_int_equal(
              tg_frame_decoder_feed(&d, stream + off, k, collect_placed, &pl),
              0);
          off += k;
          continue;
        }
        size_t k = room < steps[si] ? room : steps[si];
        if (k > n - off) k = n - off;
        memcpy(at, stream + off, k);
        assert_int_equal(tg_frame_decoder_wrote(&d, k, collect_placed, &pl), 0);
        off += k;
        wrote_in_place = true;
      }
      assert_int_equal(pl.c.count, 3);
      assert_int_equal(pl.c.sizes[2], 5000);
      assert_memory_equal(pl.c.bytes, payloads, total);
      assert_int_equal(tg_frame_decoder_pending(&d), 0);
      /* A frame whose rest was written in place is handed over from there. */
      if (wrote_in_place) assert_true(pl.from_buf != 0);
      tg_frame_decoder_free(&d);
    }
  }
}

/* An inflater's way: every frame opened in place, header and all. */
static void frame_open_room_assembles_every_frame_in_place(void **state) {
  (void)state;
  static uint8_t stream[6100], payloads[6000];
  size_t total;
  size_t n = make_stream(stream, payloads, &total);
  /* A zero-length frame between them is skipped, in place too. */
  memmove(stream + 4 + 1 + 4, stream + 4 + 1, n - 5);
  tg_pb_write_le32(stream + 5, 0);
  n += 4;
  static placed_t pl;
  memset(&pl, 0, sizeof(pl));
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  pl.d = &d;
  size_t off = 0;
  while (off < n) {
    uint8_t *at = NULL;
    size_t room = tg_frame_decoder_room(&d, &at);
    if (room == 0) {
      int r = tg_frame_decoder_open_room(&d, &at);
      assert_int_equal(r, TG_IPC_FRAME_HEADER_SIZE);
      room = (size_t)r;
    }
    size_t k = room < 2000 ? room : 2000;
    memcpy(at, stream + off, k);
    assert_int_equal(tg_frame_decoder_wrote(&d, k, collect_placed, &pl), 0);
    off += k;
  }
  assert_int_equal(pl.c.count, 3);
  assert_int_equal(d.empty_frames, 1);
  assert_memory_equal(pl.c.bytes, payloads, total);
  assert_int_equal(pl.from_buf, 7u); /* all three from the decoder */
  /* A frame is partial: open_room leaves it be. */
  uint8_t hdr[4];
  tg_pb_write_le32(hdr, 10);
  assert_int_equal(tg_frame_decoder_feed(&d, hdr, 3, collect, &pl.c), 0);
  uint8_t *at;
  assert_int_equal(tg_frame_decoder_open_room(&d, &at), 0);
  assert_int_equal(tg_frame_decoder_room(&d, &at), 1);
  tg_frame_decoder_free(&d);
}

static void frame_wrote_checks_length_and_room(void **state) {
  (void)state;
  collected_t *c = calloc(1, sizeof(*c));
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  uint8_t *at;
  /* Nothing was given: nothing can have been written. */
  assert_int_equal(tg_frame_decoder_wrote(&d, 1, collect, c), -EINVAL);
  assert_int_equal(tg_frame_decoder_open_room(&d, &at), 4);
  assert_int_equal(tg_frame_decoder_wrote(&d, 5, collect, c), -EINVAL);
  /* An oversized length written in place is refused like a fed one. */
  tg_pb_write_le32(at, TG_IPC_FRAME_MAX_PAYLOAD + 1);
  assert_int_equal(tg_frame_decoder_wrote(&d, 4, collect, c),
                   TG_EFRAME_TOO_LARGE);
  assert_int_equal(tg_frame_decoder_room(&d, &at), 0);
  assert_int_equal(tg_frame_decoder_open_room(&d, &at), TG_EFRAME_TOO_LARGE);
  assert_int_equal(c->count, 0);
  tg_frame_decoder_free(&d);
  /* The cap itself is fine, and the room is exactly the rest. */
  tg_frame_decoder_init(&d);
  assert_int_equal(tg_frame_decoder_open_room(&d, &at), 4);
  tg_pb_write_le32(at, TG_IPC_FRAME_MAX_PAYLOAD);
  assert_int_equal(tg_frame_decoder_wrote(&d, 4, collect, c), 0);
  assert_int_equal(tg_frame_decoder_room(&d, &at), TG_IPC_FRAME_MAX_PAYLOAD);
  assert_int_equal(
      tg_frame_decoder_wrote(&d, TG_IPC_FRAME_MAX_PAYLOAD + 1, collect, c),
      -EINVAL);
  free(c);
  tg_frame_decoder_free(&d);
}

static void frame_bulk_follows_the_last_frames(void **state) {
  (void)state;
  static uint8_t s[TG_FRAME_BULK_MIN + 16], payload[TG_FRAME_BULK_MIN];
  collected_t *c = calloc(1, sizeof(*c));
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  assert_false(tg_frame_decoder_bulk(&d));
  size_t n = put_frame(s, payload, TG_FRAME_BULK_MIN - 1);
  assert_int_equal(tg_frame_decoder_feed(&d, s, n, collect, c), 0);
  assert_false(tg_frame_decoder_bulk(&d));
  n = put_frame(s, payload, TG_FRAME_BULK_MIN);
  assert_int_equal(tg_frame_decoder_feed(&d, s, n, collect, c), 0);
  assert_true(tg_frame_decoder_bulk(&d));
  /* A bulk stream's odd small frame does not end it; a run of them does. */
  for (unsigned i = 1; i <= TG_FRAME_BULK_FOR; i++) {
    c->count = c->len = 0;
    n = put_frame(s, payload, 100);
    assert_int_equal(tg_frame_decoder_feed(&d, s, n, collect, c), 0);
    assert_int_equal(tg_frame_decoder_bulk(&d), i < TG_FRAME_BULK_FOR);
  }
  free(c);
  tg_frame_decoder_free(&d);
}

/* Keeps every frame it can by adopting the decoder's buffer, the rest by
 * copy; checks each kept payload after the decoder has moved on. */
typedef struct keeper {
  tg_frame_decoder_t *d;
  uint8_t *kept[8];
  const uint8_t *payload[8];
  size_t len[8];
  size_t n, adopted;
} keeper_t;

static int keep(void *ctx, const uint8_t *p, size_t n) {
  keeper_t *k = ctx;
  assert_true(k->n < 8);
  uint8_t *b = tg_frame_decoder_adopt(k->d, p);
  if (b) {
    /* The payload stays where it was, in the buffer handed over. */
    assert_ptr_equal(p, b + TG_IPC_FRAME_HEADER_SIZE);
    k->adopted++;
    /* Only once: the decoder no longer has it. */
    assert_null(tg_frame_decoder_adopt(k->d, p));
  } else {
    b = malloc(n);
    assert_non_null(b);
    memcpy(b, p, n);
    p = b;
  }
  k->kept[k->n] = b;
  k->payload[k->n] = p;
  k->len[k->n++] = n;
  return 0;
}

static void frame_adopt_hands_over_only_the_decoders_buffer(void **state) {
  (void)state;
  static uint8_t stream[6000], payloads[6000];
  size_t total;
  size_t n = make_stream(stream, payloads, &total);
  /* Every cut: frames whole in the input are the caller's (copied), those
   * split across feeds or written in place were assembled in the decoder's
   * buffer and are adopted; what follows still decodes, in a new one. */
  for (size_t cut = 1; cut < n; cut += 13) {
    tg_frame_decoder_t d;
    tg_frame_decoder_init(&d);
    keeper_t k = {.d = &d};
    assert_int_equal(tg_frame_decoder_feed(&d, stream, cut, keep, &k), 0);
    size_t off = cut;
    uint8_t *at;
    size_t room = tg_frame_decoder_room(&d, &at);
    if (room > n - off) room = n - off;
    memcpy(at, stream + off, room);
    assert_int_equal(tg_frame_decoder_wrote(&d, room, keep, &k), 0);
    off += room;
    assert_int_equal(tg_frame_decoder_feed(&d, stream + off, n - off, keep, &k),
                     0);
    assert_int_equal(k.n, 3);
    /* The cut splits exactly one frame, unless it falls between two. */
    bool between = cut == 5 || cut == 5 + 304;
    assert_int_equal(k.adopted, between ? 0 : 1);
    assert_int_equal(d.adopted, k.adopted);
    size_t poff = 0;
    for (size_t i = 0; i < k.n; i++) {
      assert_memory_equal(k.payload[i], payloads + poff, k.len[i]);
      poff += k.len[i];
      free(k.kept[i]);
    }
    assert_int_equal(poff, total);
    tg_frame_decoder_free(&d);
  }
  /* An inflater's way: every frame opened in place, every one adopted. */
  tg_frame_decoder_t d;
  tg_frame_decoder_init(&d);
  keeper_t k = {.d = &d};
  size_t off = 0;
  while (off < n) {
    uint8_t *at = NULL;
    size_t room = tg_frame_decoder_room(&d, &at);
    if (room == 0) room = (size_t)tg_frame_decoder_open_room(&d, &at);
    memcpy(at, stream + off, room);
    assert_int_equal(tg_frame_decoder_wrote(&d, room, keep, &k), 0);
    off += room;
  }
  assert_int_equal(k.adopted, 3);
  size_t poff = 0;
  for (size_t i = 0; i < k.n; i++) {
    assert_memory_equal(k.payload[i], payloads + poff, k.len[i]);
    poff += k.len[i];
    free(k.kept[i]);
  }
  /* Outside a frame's callback there is nothing to hand over. */
  assert_null(tg_frame_decoder_adopt(&d, stream));
  tg_frame_decoder_free(&d);
}

/* A RequestError, for a request or as a notice (request 0), decodes with
 * protobuf-c to the id and text given. */
static void request_error_writer_output_decodes_with_protobuf_c(void **state) {
  (void)state;
  const uint64_t ids[] = {0, 7, UINT64_MAX};
  for (size_t i = 0; i < 3; i++) {
    tg_buf_t b;
    tg_buf_init(&b, 0);
    assert_int_equal(tg_ipc_request_error_append(ids[i], "relay: no", &b), 0);
    const uint8_t *p = tg_buf_begin(&b);
    assert_int_equal(tg_pb_read_le32(p), tg_buf_size(&b) - 4);
    tg_ipc_frame_t *f = tg_ipc_frame_unpack(p + 4, tg_buf_size(&b) - 4);
    assert_non_null(f);
    assert_int_equal(f->request_id, ids[i]);
    assert_int_equal(f->msg_case,
                     PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR);
    assert_string_equal(f->msg_request_error->error, "relay: no");
    tg_ipc_frame_free(f);
    tg_buf_free(&b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(frame_split_at_every_byte_offset),
      cmocka_unit_test(frame_one_byte_at_a_time),
      cmocka_unit_test(frame_rejects_oversized_length),
      cmocka_unit_test(frame_accepts_exactly_the_cap),
      cmocka_unit_test(frame_skips_zero_length),
      cmocka_unit_test(frame_garbage_then_valid_frame),
      cmocka_unit_test(frame_callback_stop_is_returned),
      cmocka_unit_test(frame_room_takes_the_rest_of_a_split_frame),
      cmocka_unit_test(frame_open_room_assembles_every_frame_in_place),
      cmocka_unit_test(frame_wrote_checks_length_and_room),
      cmocka_unit_test(frame_bulk_follows_the_last_frames),
      cmocka_unit_test(frame_adopt_hands_over_only_the_decoders_buffer),
      cmocka_unit_test(reply_writer_output_decodes_with_protobuf_c),
      cmocka_unit_test(reply_writer_reports_no_space),
      cmocka_unit_test(reply_view_reads_the_writers_frame_in_place),
      cmocka_unit_test(reply_view_leaves_unusual_shapes_to_protobuf_c),
      cmocka_unit_test(invoke_writer_output_decodes_with_protobuf_c),
      cmocka_unit_test(invoke_view_leaves_unusual_shapes_to_protobuf_c),
      cmocka_unit_test(request_error_writer_output_decodes_with_protobuf_c),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
