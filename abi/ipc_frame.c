/* Frame decoder state machine and IPCFrame encode/decode. */
#include "abi/ipc_frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tracegate/pb_wire.h"
#include "tracegate/error.h"

void tg_frame_decoder_init(tg_frame_decoder_t *d) {
  memset(d, 0, sizeof(*d));
  d->since_bulk = TG_FRAME_BULK_FOR;
}

void tg_frame_decoder_free(tg_frame_decoder_t *d) {
  free(d->buf);
  d->buf = NULL;
  d->have = 0;
}

/* Emits one payload, counting zero-length frames as skipped. */
static int emit(tg_frame_decoder_t *d, const uint8_t *p, uint32_t n,
                tg_frame_cb cb, void *ctx) {
  if (n == 0) {
    d->empty_frames++;
    return 0;
  }
  d->frames++;
  if (n >= TG_FRAME_BULK_MIN)
    d->since_bulk = 0;
  else if (d->since_bulk < TG_FRAME_BULK_FOR)
    d->since_bulk++;
  return cb(ctx, p, n);
}

/* Bytes that complete the header, or once it is in (its length checked),
 * the frame. */
static size_t missing(const tg_frame_decoder_t *d) {
  if (d->have < TG_IPC_FRAME_HEADER_SIZE)
    return TG_IPC_FRAME_HEADER_SIZE - d->have;
  return TG_IPC_FRAME_HEADER_SIZE + tg_pb_read_le32(d->buf) - d->have;
}

size_t tg_frame_decoder_room(const tg_frame_decoder_t *d, uint8_t **at) {
  if (d->error || d->have == 0) return 0;
  *at = d->buf + d->have;
  return missing(d);
}

int tg_frame_decoder_open_room(tg_frame_decoder_t *d, uint8_t **at) {
  if (d->error) return d->error;
  if (d->have) return 0;
  if (!d->buf) {
    d->buf = malloc(TG_IPC_FRAME_BUFFER_SIZE);
    if (!d->buf) return -ENOMEM;
  }
  *at = d->buf;
  return TG_IPC_FRAME_HEADER_SIZE;
}

int tg_frame_decoder_wrote(tg_frame_decoder_t *d, size_t n, tg_frame_cb cb,
                           void *ctx) {
  if (d->error) return d->error;
  if (n == 0) return 0;
  if (!d->buf) return -EINVAL; /* no room was given */
  if (n > missing(d)) return -EINVAL;
  d->have += n;
  if (d->have < TG_IPC_FRAME_HEADER_SIZE) return 0;
  uint32_t flen = tg_pb_read_le32(d->buf);
  if (flen > TG_IPC_FRAME_MAX_PAYLOAD) {
    d->have = 0;
    return d->error = TG_EFRAME_TOO_LARGE;
  }
  if (d->have < TG_IPC_FRAME_HEADER_SIZE + flen) return 0;
  d->have = 0;
  return emit(d, d->buf + TG_IPC_FRAME_HEADER_SIZE, flen, cb, ctx);
}

uint8_t *tg_frame_decoder_adopt(tg_frame_decoder_t *d, const uint8_t *payload) {
  /* Emitting from |buf| always leaves |have| at 0 first (wrote(), feed()
   * step 1), and nothing touches |buf| after the callback returns but a
   * lazy malloc when it is NULL. */
  if (!d->buf || d->have != 0 || payload != d->buf + TG_IPC_FRAME_HEADER_SIZE)
    return NULL;
  uint8_t *b = d->buf;
  d->buf = NULL;
  d->adopted++;
  return b;
}

int tg_frame_decoder_feed(tg_frame_decoder_t *d, const uint8_t *data,
                          size_t len, tg_frame_cb cb, void *ctx) {
  if (d->error) return d->error;

  /* 1. Complete a frame left partial by an earlier call. The length is
   * checked as soon as its 4 bytes are in, before anything is copied. */
  while (d->have > 0 && len > 0) {
    if (d->have < TG_IPC_FRAME_HEADER_SIZE) {
      size_t k = TG_IPC_FRAME_HEADER_SIZE - d->have;
      if (k > len) k = len;
      memcpy(d->buf + d->have, data, k);
      d->have += k;
      d->copied += k;
      data += k;
      len -= k;
      if (d->have < TG_IPC_FRAME_HEADER_SIZE) return 0;
      if (tg_pb_read_le32(d->buf) > TG_IPC_FRAME_MAX_PAYLOAD) {
        d->have = 0;
        return d->error = TG_EFRAME_TOO_LARGE;
      }
    }
    uint32_t flen = tg_pb_read_le32(d->buf);
    size_t need = TG_IPC_FRAME_HEADER_SIZE + flen - d->have;
    size_t k = len < need ? len : need;
    memcpy(d->buf + d->have, data, k);
    d->have += k;
    d->copied += k;
    data += k;
    len -= k;
    if (k < need) return 0; /* input exhausted mid-frame */
    d->have = 0;
    int rv = emit(d, d->buf + TG_IPC_FRAME_HEADER_SIZE, flen, cb, ctx);
    if (rv) return rv;
  }

  /* 2. Whole frames straight from the input, no copy. */
  while (len >= TG_IPC_FRAME_HEADER_SIZE) {
    uint32_t flen = tg_pb_read_le32(data);
    if (flen > TG_IPC_FRAME_MAX_PAYLOAD) return d->error = TG_EFRAME_TOO_LARGE;
    if (len - TG_IPC_FRAME_HEADER_SIZE < flen) break;
    int rv = emit(d, data + TG_IPC_FRAME_HEADER_SIZE, flen, cb, ctx);
    if (rv) return rv;
    data += TG_IPC_FRAME_HEADER_SIZE + flen;
    len -= TG_IPC_FRAME_HEADER_SIZE + flen;
  }

  /* 3. Keep the tail of a split frame. */
  if (len > 0) {
    if (len >= TG_IPC_FRAME_HEADER_SIZE &&
        tg_pb_read_le32(data) > TG_IPC_FRAME_MAX_PAYLOAD)
      return d->error = TG_EFRAME_TOO_LARGE;
    if (!d->buf) {
      d->buf = malloc(TG_IPC_FRAME_BUFFER_SIZE);
      if (!d->buf) return -ENOMEM;
    }
    memcpy(d->buf, data, len);
    d->have = len;
    d->copied += len;
  }
  return 0;
}

tg_ipc_frame_t *tg_ipc_frame_unpack(const uint8_t *payload, size_t len) {
  return perfetto__protos__ipcframe__unpack(NULL, len, payload);
}

void tg_ipc_frame_free(tg_ipc_frame_t *f) {
  if (f) perfetto__protos__ipcframe__free_unpacked(f, NULL);
}

int tg_ipc_frame_append(const tg_ipc_frame_t *f, tg_buf_t *out) {
  size_t n = perfetto__protos__ipcframe__get_packed_size(f);
  if (n > TG_IPC_FRAME_MAX_PAYLOAD) return TG_EFRAME_TOO_LARGE;
  uint8_t *p = tg_buf_reserve(out, TG_IPC_FRAME_HEADER_SIZE + n);
  if (!p) return -ENOMEM;
  tg_pb_write_le32(p, (uint32_t)n);
  size_t packed = perfetto__protos__ipcframe__pack(f, p + TG_IPC_FRAME_HEADER_SIZE);
  if (packed != n) return TG_EPROTO_ENCODE;
  tg_buf_commit(out, TG_IPC_FRAME_HEADER_SIZE + n);
  return 0;
}

int tg_ipc_request_error_append(uint64_t request_id, const char *text,
                                tg_buf_t *out) {
  Perfetto__Protos__IPCFrame__RequestError err =
      PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;
  err.error = (char *)text;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = request_id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR;
  f.msg_request_error = &err;
  return tg_ipc_frame_append(&f, out);
}

/* Whether the varint field just read (its last byte at |end| - 1) took
 * one byte: its tag's last byte, before it, has no continuation bit. A
 * longer bool may carry bits past 64 that protobuf-c counts as true. */
static bool one_byte_varint(const uint8_t *end) {
  return !(end[-2] & 0x80);
}

static int read_reply_body(const uint8_t *p, size_t n, tg_ipc_reply_view_t *v) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, p, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    switch (f.id) {
      case 1: /* success */
      case 2: /* has_more */
        if (f.type != TG_PB_WT_VARINT || !one_byte_varint(r.cur)) return 0;
        if (f.id == 1) v->success = f.value != 0;
        else v->has_more = f.value != 0;
        break;
      case 3: /* reply_proto: the last one counts, as in protobuf-c */
        if (f.type != TG_PB_WT_LEN) return 0;
        v->has_reply_proto = true;
        v->reply_proto = f.data;
        v->reply_proto_len = f.size;
        break;
      default:
        break; /* unknown: skipped, as protobuf-c does */
    }
  }
  return rv == 0;
}

/* Finds the one msg of IPCFrame |payload|, which must be member |msg_id|
 * of the oneof, and its request id. 1, or 0 for any other shape. */
static int read_frame_msg(const uint8_t *payload, size_t len, uint32_t msg_id,
                          uint64_t *request_id, const uint8_t **body,
                          size_t *body_len) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  *body = NULL;
  *body_len = 0;
  *request_id = 0;
  tg_pb_reader_init(&r, payload, len);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 2) { /* request_id: the last one counts */
      if (f.type != TG_PB_WT_VARINT) return 0;
      *request_id = f.value;
    } else if (f.id == msg_id) { /* once: protobuf-c merges a second */
      if (f.type != TG_PB_WT_LEN || *body) return 0;
      *body = f.data;
      *body_len = f.size;
    } else if (f.id <= 8) {
      return 0; /* data_for_testing (1), the oneof's other members */
    }
  }
  return rv == 0 && *body;
}

int tg_ipc_frame_read_reply(const uint8_t *payload, size_t len,
                            tg_ipc_reply_view_t *v) {
  memset(v, 0, sizeof(*v));
  const uint8_t *body;
  size_t body_len;
  if (!read_frame_msg(payload, len, 6 /* msg_invoke_method_reply */,
                      &v->request_id, &body, &body_len))
    return 0;
  return read_reply_body(body, body_len, v);
}

int tg_ipc_frame_read_invoke(const uint8_t *payload, size_t len,
                             tg_ipc_invoke_view_t *v) {
  memset(v, 0, sizeof(*v));
  const uint8_t *body;
  size_t body_len;
  if (!read_frame_msg(payload, len, 5 /* msg_invoke_method */,
                      &v->request_id, &body, &body_len))
    return 0;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, body, body_len);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    switch (f.id) {
      case 1: /* service_id */
      case 2: /* method_id */
        if (f.type != TG_PB_WT_VARINT || f.value > UINT32_MAX) return 0;
        if (f.id == 1) v->service_id = (uint32_t)f.value;
        else v->method_id = (uint32_t)f.value;
        break;
      case 3: /* args_proto: the last one counts */
        if (f.type != TG_PB_WT_LEN) return 0;
        v->args = f.data;
        v->args_len = f.size;
        break;
      case 4: /* drop_reply */
        if (f.type != TG_PB_WT_VARINT || !one_byte_varint(r.cur)) return 0;
        v->drop_reply = f.value != 0;
        break;
      default:
        break;
    }
  }
  return rv == 0;
}

/* IPCFrame field numbers (wire_protocol.proto). */
enum {
  IPC_FRAME_REQUEST_ID = 2,
  IPC_FRAME_INVOKE_METHOD = 5,
  INVOKE_SERVICE_ID = 1,
  INVOKE_METHOD_ID = 2,
  INVOKE_ARGS_PROTO = 3,
  INVOKE_DROP_REPLY = 4,
  IPC_FRAME_INVOKE_METHOD_REPLY = 6,
  INVOKE_REPLY_SUCCESS = 1,
  INVOKE_REPLY_HAS_MORE = 2,
  INVOKE_REPLY_REPLY_PROTO = 3,
};

void tg_ipc_reply_begin(tg_ipc_reply_writer_t *rw, uint8_t *space,
                        size_t space_len, uint64_t request_id, bool success,
                        bool has_more) {
  if (space_len > TG_IPC_FRAME_BUFFER_SIZE)
    space_len = TG_IPC_FRAME_BUFFER_SIZE;
  rw->frame = space;
  tg_pbw_init(&rw->body, space + TG_IPC_FRAME_HEADER_SIZE,
              space_len - TG_IPC_FRAME_HEADER_SIZE, NULL, NULL);
  tg_pbw_append_varint(&rw->body, IPC_FRAME_REQUEST_ID, request_id);
  tg_pbw_begin_nested(&rw->body, IPC_FRAME_INVOKE_METHOD_REPLY);
  tg_pbw_append_bool(&rw->body, INVOKE_REPLY_SUCCESS, success);
  if (has_more) tg_pbw_append_bool(&rw->body, INVOKE_REPLY_HAS_MORE, true);
  tg_pbw_begin_nested(&rw->body, INVOKE_REPLY_REPLY_PROTO);
}

int tg_ipc_reply_end(tg_ipc_reply_writer_t *rw, size_t *frame_len) {
  tg_pbw_end_nested(&rw->body); /* reply_proto */
  tg_pbw_end_nested(&rw->body); /* msg_invoke_method_reply */
  int err = tg_pbw_error(&rw->body);
  if (err) return err;
  uint64_t n = tg_pbw_written(&rw->body);
  tg_pb_write_le32(rw->frame, (uint32_t)n);
  *frame_len = TG_IPC_FRAME_HEADER_SIZE + (size_t)n;
  return 0;
}

int tg_ipc_invoke_append(tg_buf_t *out, uint64_t request_id,
                         uint32_t service_id, uint32_t method_id,
                         const uint8_t *args, size_t args_len,
                         bool drop_reply) {
  /* Tags, ids and the two lengths take at most 64 bytes. */
  size_t room = TG_IPC_FRAME_HEADER_SIZE + 64 + args_len;
  if (args_len > TG_IPC_FRAME_MAX_PAYLOAD) return TG_EFRAME_TOO_LARGE;
  uint8_t *p = tg_buf_reserve(out, room);
  if (!p) return -ENOMEM;
  tg_pbw_t w;
  tg_pbw_init(&w, p + TG_IPC_FRAME_HEADER_SIZE, room - TG_IPC_FRAME_HEADER_SIZE,
              NULL, NULL);
  tg_pbw_append_varint(&w, IPC_FRAME_REQUEST_ID, request_id);
  tg_pbw_begin_nested(&w, IPC_FRAME_INVOKE_METHOD);
  tg_pbw_append_varint(&w, INVOKE_SERVICE_ID, service_id);
  tg_pbw_append_varint(&w, INVOKE_METHOD_ID, method_id);
  static const uint8_t no_args[1];
  tg_pbw_append_bytes(&w, INVOKE_ARGS_PROTO, args_len ? args : no_args,
                      args_len);
  if (drop_reply) tg_pbw_append_bool(&w, INVOKE_DROP_REPLY, true);
  tg_pbw_end_nested(&w);
  if (tg_pbw_error(&w)) return tg_pbw_error(&w);
  uint64_t n = tg_pbw_written(&w);
  if (n > TG_IPC_FRAME_MAX_PAYLOAD) return TG_EFRAME_TOO_LARGE;
  tg_pb_write_le32(p, (uint32_t)n);
  tg_buf_commit(out, TG_IPC_FRAME_HEADER_SIZE + (size_t)n);
  return 0;
}
