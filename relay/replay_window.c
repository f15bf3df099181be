/* Replay windows: numbering, trimming, bounding and resuming. */
#include "relay/replay_window.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "abi/ipc_frame.h"
#include "pb/tracegate/relay.pb-c.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

/* The compressing end's windows are at most 8 MiB
 * (tls/compress_transport.h's TG_ZSTD_WINDOW_LOG_MAX). */
#define SEG_WINDOW_LOG_MAX 23

void tg_replay_store_init(tg_replay_store_t *st, size_t cap,
                          size_t max_windows, uint64_t linger_ms) {
  memset(st, 0, sizeof(*st));
  tg_list_init(&st->windows);
  st->cap = cap;
  st->max_windows = max_windows ? max_windows : 1;
  st->linger_ms = linger_ms;
}

static tg_replay_frame_t *oldest(tg_replay_window_t *w) {
  return tg_list_empty(&w->frames)
             ? NULL
             : TG_CONTAINER_OF(w->frames.next, tg_replay_frame_t, node);
}

/* Drops a hold on |seg|; the last one frees it and its charge. */
static void seg_unref(tg_replay_window_t *w, tg_replay_seg_t *seg) {
  if (--seg->refs > 0) return;
  w->held -= seg->z.cap;
  tg_buf_free(&seg->z);
  free(seg);
}

/* Forgets the oldest frame: |acked| when the client has it. */
static void drop_oldest(tg_replay_window_t *w, bool acked) {
  tg_replay_frame_t *f = oldest(w);
  if (!f) return;
  tg_list_remove(&f->node);
  w->held -= f->charge;
  w->gone_seq = f->seq;
  w->gone_cum = f->cum;
  w->gone_ends_packet = f->ends_packet;
  if (!acked) {
    w->dropped_frames++;
    w->dropped_bytes += f->len;
  }
  if (f->seg) seg_unref(w, f->seg);
  free(f->block);
  free(f);
}

static void window_free(tg_replay_store_t *st, tg_replay_window_t *w) {
  while (oldest(w)) drop_oldest(w, true);
  tg_list_remove(&w->node);
  st->n_windows--;
  free(w->key);
  free(w);
}

void tg_replay_store_free(tg_replay_store_t *st) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &st->windows) {
    window_free(st, TG_CONTAINER_OF(it, tg_replay_window_t, node));
  }
}

/* Frees windows nobody used for |linger_ms|, and while the store is full
 * the least recently used unused one. */
static void sweep(tg_replay_store_t *st, uint64_t now_ms) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &st->windows) {
    tg_replay_window_t *w = TG_CONTAINER_OF(it, tg_replay_window_t, node);
    if (w->users == 0 && now_ms - w->idle_since_ms >= st->linger_ms)
      window_free(st, w);
  }
  tg_list_foreach_safe(it, tmp, &st->windows) {
    if (st->n_windows < st->max_windows) break;
    tg_replay_window_t *w = TG_CONTAINER_OF(it, tg_replay_window_t, node);
    if (w->users == 0) window_free(st, w);
  }
}

tg_replay_window_t *tg_replay_acquire(tg_replay_store_t *st, const char *key,
                                      uint64_t now_ms, bool *fresh) {
  *fresh = false;
  sweep(st, now_ms);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &st->windows) {
    tg_replay_window_t *w = TG_CONTAINER_OF(it, tg_replay_window_t, node);
    if (strcmp(w->key, key)) continue;
    w->users++;
    /* Most recently used last. */
    tg_list_remove(&w->node);
    tg_list_insert_tail(&st->windows, &w->node);
    return w;
  }
  if (st->n_windows >= st->max_windows) return NULL;
  tg_replay_window_t *w = calloc(1, sizeof(*w));
  if (!w || !(w->key = strdup(key))) {
    free(w);
    return NULL;
  }
  tg_list_init(&w->frames);
  w->next_seq = 1;
  w->gone_ends_packet = w->last_ends_packet = true;
  w->users = 1;
  tg_list_insert_tail(&st->windows, &w->node);
  st->n_windows++;
  *fresh = true;
  return w;
}

void tg_replay_release(tg_replay_store_t *st, tg_replay_window_t *w,
                       uint64_t now_ms) {
  if (!w || w->users == 0) return;
  if (--w->users == 0) w->idle_since_ms = now_ms;
  (void)st;
}

/* Whether |body|'s last slice ends a packet; |prev| when it has none. */
static bool ends_packet(const uint8_t *body, size_t len, bool prev) {
  tg_pb_reader_t r;
  tg_pb_field_t f, last_slice;
  bool any = false;
  tg_pb_reader_init(&r, body, len);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == 2 && f.type == TG_PB_WT_LEN) { /* slices: only the last counts */
      last_slice = f;
      any = true;
    }
  if (!any) return prev;
  bool last = false;
  tg_pb_reader_t sr;
  tg_pb_field_t sf;
  tg_pb_reader_init(&sr, last_slice.data, last_slice.size);
  while (tg_pb_reader_next(&sr, &sf) == 1)
    if (sf.id == 2 && sf.type == TG_PB_WT_VARINT) last = sf.value != 0;
  return last;
}

/* Every frame goes, oldest first, as if dropped for room. */
static void drop_all(tg_replay_window_t *w) {
  while (oldest(w)) drop_oldest(w, false);
}

/* Numbers the next frame, |len| bytes of |body|: its seq, and in |*ends|
 * whether it ends a packet. */
static uint64_t number(tg_replay_window_t *w, const uint8_t *body, size_t len,
                       bool *ends) {
  *ends = ends_packet(body, len, w->last_ends_packet);
  w->last_ends_packet = *ends;
  w->cum += len;
  return w->next_seq++;
}

/* Frame |seq| is not held: it is gone as if dropped for room, and so is
 * every frame before it (the ones held stay a run up to the newest).
 * Returns 0, push's "not held". */
static uint64_t lose(tg_replay_window_t *w, uint64_t seq, bool ends,
                     size_t len) {
  drop_all(w);
  w->gone_seq = seq;
  w->gone_cum = w->cum;
  w->gone_ends_packet = ends;
  w->dropped_frames++;
  w->dropped_bytes += len;
  return 0;
}

/* Fills |f| (seq |seq|, body elsewhere) and appends it. */
static uint64_t hold(tg_replay_window_t *w, tg_replay_frame_t *f, uint64_t seq,
                     bool ends, bool last_of_read, size_t len, size_t charge) {
  f->seq = seq;
  f->cum = w->cum;
  f->last_of_read = last_of_read;
  f->ends_packet = ends;
  f->len = len;
  f->charge = charge;
  f->block = NULL;
  f->body = NULL;
  f->seg = NULL;
  f->seg_off = 0;
  tg_list_insert_tail(&w->frames, &f->node);
  w->held += charge;
  return seq;
}

/* Numbers the frame and holds it: copied into the frame when |block| is
 * NULL, else by reference into |block|, which it then owns. */
static uint64_t push(tg_replay_store_t *st, tg_replay_window_t *w, void *block,
                     size_t charge, const uint8_t *body, size_t len,
                     bool last_of_read) {
  bool ends;
  uint64_t seq = number(w, body, len, &ends);
  /* Room first: the oldest unacknowledged frames go, counted. */
  while (oldest(w) && w->held + charge > st->cap) drop_oldest(w, false);
  size_t copy = block ? 0 : len;
  tg_replay_frame_t *f =
      charge <= st->cap ? malloc(sizeof(*f) + (copy ? copy : 1)) : NULL;
  if (!f) return lose(w, seq, ends, len);
  hold(w, f, seq, ends, last_of_read, len, charge);
  f->block = block;
  f->body = block ? body : f->data;
  if (copy) memcpy(f->data, body, copy);
  return seq;
}

uint64_t tg_replay_push(tg_replay_store_t *st, tg_replay_window_t *w,
                        const uint8_t *body, size_t len, bool last_of_read) {
  return push(st, w, NULL, len, body, len, last_of_read);
}

uint64_t tg_replay_push_block(tg_replay_store_t *st, tg_replay_window_t *w,
                              void *block, size_t block_size,
                              const uint8_t *body, size_t len,
                              bool last_of_read) {
  return push(st, w, block, block_size, body, len, last_of_read);
}

tg_replay_seg_t *tg_replay_seg_open(void) {
  tg_replay_seg_t *seg = calloc(1, sizeof(*seg));
  if (!seg) return NULL;
  seg->refs = 1;
  seg->open = true;
  tg_buf_init(&seg->z, 0);
  return seg;
}

/* Over the cap: the oldest frames go, up to those of |seg|, the open
 * segment, whose bytes only its cut and acknowledgement free. */
static void seg_room(tg_replay_store_t *st, tg_replay_window_t *w,
                     tg_replay_seg_t *seg) {
  tg_replay_frame_t *f;
  while (w->held > st->cap && (f = oldest(w)) && f->seg != seg)
    drop_oldest(w, false);
}

/* Nothing can be held once a segment lost bytes: the frames after them
 * would not inflate. */
void tg_replay_seg_fail(tg_replay_window_t *w, tg_replay_seg_t *seg) {
  if (seg->broken) return;
  seg->broken = true;
  drop_all(w);
  w->held -= seg->z.cap;
  tg_buf_free(&seg->z);
}

void tg_replay_seg_append(tg_replay_store_t *st, tg_replay_window_t *w,
                          tg_replay_seg_t *seg, const uint8_t *z, size_t n) {
  if (seg->broken || n == 0) return;
  size_t cap = seg->z.cap;
  if (tg_buf_append(&seg->z, z, n) < 0) {
    tg_replay_seg_fail(w, seg);
    return;
  }
  w->held += seg->z.cap - cap;
  seg_room(st, w, seg);
}

uint64_t tg_replay_push_ref(tg_replay_store_t *st, tg_replay_window_t *w,
                            tg_replay_seg_t *seg, uint64_t off,
                            const uint8_t *body, size_t len,
                            bool last_of_read) {
  bool ends;
  uint64_t seq = number(w, body, len, &ends);
  tg_replay_frame_t *f = seg->broken ? NULL : malloc(sizeof(*f) + 1);
  if (!f) return lose(w, seq, ends, len);
  hold(w, f, seq, ends, last_of_read, len, sizeof(*f));
  f->seg = seg;
  f->seg_off = off;
  seg->refs++;
  seg_room(st, w, seg);
  return seq;
}

void tg_replay_seg_close(tg_replay_window_t *w, tg_replay_seg_t *seg) {
  if (!seg || !seg->open) return;
  seg->open = false;
  seg_unref(w, seg);
}

void tg_replay_ack(tg_replay_window_t *w, uint64_t seq) {
  if (seq >= w->next_seq) seq = w->next_seq - 1;
  if (seq > w->acked_seq) w->acked_seq = seq;
  tg_replay_frame_t *f;
  while ((f = oldest(w)) && f->seq <= seq) drop_oldest(w, true);
}

/* Inflates segments for a Resume: the frames of one segment come in
 * order, so one pass over it serves them all. */
typedef struct inflater {
  ZSTD_DCtx *d;
  const tg_replay_seg_t *seg;
  size_t zpos;    /* compressed bytes taken */
  uint8_t *buf;   /* the segment inflated, its first |have| bytes */
  size_t have, cap;
} inflater_t;

/* Most a segment inflates to: cut after TG_REPLAY_SEG_RAW, and its last
 * frame may start just before that. */
#define SEG_INFLATED_MAX (TG_REPLAY_SEG_RAW + TG_IPC_FRAME_BUFFER_SIZE)

/* Points |*base| at |seg| inflated through byte |end|. -EAGAIN when an
 * open segment does not reach it yet: its compressor makes the bytes of
 * a frame by the end of the loop iteration it was sent in, and a Resume
 * on another connection may come first. */
static int inflate_to(inflater_t *in, const tg_replay_seg_t *seg,
                      uint64_t end, const uint8_t **base) {
  if (end > SEG_INFLATED_MAX) return TG_EBAD_COMPRESSED;
  if (!in->d) {
    in->d = ZSTD_createDCtx();
    if (!in->d || ZSTD_isError(ZSTD_DCtx_setParameter(
                      in->d, ZSTD_d_windowLogMax, SEG_WINDOW_LOG_MAX)))
      return -ENOMEM;
  }
  if (in->seg != seg || end < in->have) {
    ZSTD_DCtx_reset(in->d, ZSTD_reset_session_only);
    in->seg = seg;
    in->zpos = in->have = 0;
  }
  if (end > in->cap) {
    uint8_t *b = realloc(in->buf, (size_t)end);
    if (!b) return -ENOMEM;
    in->buf = b;
    in->cap = (size_t)end;
  }
  while (in->have < end) {
    ZSTD_inBuffer zi = {tg_buf_begin(&seg->z), tg_buf_size(&seg->z), in->zpos};
    ZSTD_outBuffer zo = {in->buf, (size_t)end, in->have};
    size_t r = ZSTD_decompressStream(in->d, &zo, &zi);
    bool stuck = zo.pos == in->have && zi.pos == in->zpos;
    in->have = zo.pos;
    in->zpos = zi.pos;
    if (ZSTD_isError(r)) return TG_EBAD_COMPRESSED;
    if (stuck) return seg->open ? -EAGAIN : TG_EBAD_COMPRESSED;
  }
  *base = in->buf;
  return 0;
}

/* Appends one reply frame of the Resume stream with body |r|. */
static int append_reply(uint64_t request_id, bool has_more,
                        const Perfetto__Protos__ResumeResponse *r,
                        tg_buf_t *out) {
  size_t sz = perfetto__protos__resume_response__get_packed_size(r);
  uint8_t *body = malloc(sz ? sz : 1);
  if (!body) return -ENOMEM;
  perfetto__protos__resume_response__pack(r, body);
  Perfetto__Protos__IPCFrame__InvokeMethodReply im =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  im.has_success = im.success = 1;
  im.has_has_more = 1;
  im.has_more = has_more;
  im.has_reply_proto = 1;
  im.reply_proto.data = body;
  im.reply_proto.len = sz;
  tg_ipc_frame_t fr = PERFETTO__PROTOS__IPCFRAME__INIT;
  fr.has_request_id = 1;
  fr.request_id = request_id;
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  fr.msg_invoke_method_reply = &im;
  int rv = tg_ipc_frame_append(&fr, out);
  free(body);
  return rv;
}

/* Room for a ReadBuffersResponse part in one reply: the IPC frame's
 * payload less the wrappers (frame, reply, ResumeResponse, ReplayedFrame:
 * tags, lengths, request id, seq, part, flags), generously. */
#define PART_MAX (TG_IPC_FRAME_MAX_PAYLOAD - 128)

/* One replayed frame as one or more replies, cut at slice boundaries. */
static int append_frame(uint64_t request_id, const tg_replay_frame_t *f,
                        const uint8_t *body, tg_buf_t *out) {
  Perfetto__Protos__ReplayedFrame rf = PERFETTO__PROTOS__REPLAYED_FRAME__INIT;
  Perfetto__Protos__ReplayedFrame *prf = &rf;
  Perfetto__Protos__ResumeResponse r = PERFETTO__PROTOS__RESUME_RESPONSE__INIT;
  r.n_frames = 1;
  r.frames = &prf;
  rf.has_seq = rf.has_read_buffers_response = rf.has_last_of_read = 1;
  rf.seq = f->seq;
  size_t off = 0;
  uint32_t part = 0;
  do {
    /* Whole top-level fields up to PART_MAX (at least one). */
    size_t end = off;
    tg_pb_reader_t rd;
    tg_pb_field_t fld;
    tg_pb_reader_init(&rd, body + off, f->len - off);
    while (tg_pb_reader_next(&rd, &fld) == 1) {
      size_t next = (size_t)(rd.cur - body);
      if (next - off > PART_MAX && end > off) break;
      end = next;
    }
    if (end == off) end = f->len; /* undecodable: as it is */
    if (end - off > PART_MAX + 64) return TG_EFRAME_TOO_LARGE;
    rf.read_buffers_response.data = (uint8_t *)body + off;
    rf.read_buffers_response.len = end - off;
    rf.has_part = part > 0;
    rf.part = part;
    rf.has_more_parts = rf.more_parts = end < f->len;
    rf.last_of_read = f->last_of_read && end == f->len;
    int rv = append_reply(request_id, true, &r, out);
    if (rv < 0) return rv;
    off = end;
    part++;
  } while (off < f->len);
  return 0;
}

int tg_replay_resume(tg_replay_window_t *w, uint64_t last_seq, uint64_t cum,
                     uint64_t request_id, size_t max_bytes, tg_buf_t *out) {
  Perfetto__Protos__ResumeResponse r = PERFETTO__PROTOS__RESUME_RESPONSE__INIT;
  /* A window that never held a frame is a new relay's (or a new key's):
   * it knows nothing of the frames the client counted. */
  if (!w || (w->next_seq == 1 && last_seq > 0)) {
    r.has_unknown_key = r.unknown_key = 1;
    return append_reply(request_id, false, &r, out);
  }
  if (last_seq >= w->next_seq) last_seq = w->next_seq - 1;
  /* Frames after last_seq that are no longer held: lost in transit. Said
   * first, so that the client knows where the frames that follow go. */
  if (w->gone_seq > last_seq) {
    Perfetto__Protos__ResumeResponse lost =
        PERFETTO__PROTOS__RESUME_RESPONSE__INIT;
    lost.has_lost_frames = lost.has_lost_bytes = 1;
    lost.lost_frames = w->gone_seq - last_seq;
    lost.lost_bytes = w->gone_cum > cum ? w->gone_cum - cum : 0;
    lost.has_resync_inside_packet = 1;
    lost.resync_inside_packet = !w->gone_ends_packet;
    int rv = append_reply(request_id, true, &lost, out);
    if (rv < 0) return rv;
  }
  tg_replay_ack(w, last_seq);
  size_t bytes = 0;
  inflater_t inf = {0};
  int rv = 0;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &w->frames) {
    tg_replay_frame_t *f = TG_CONTAINER_OF(it, tg_replay_frame_t, node);
    if (bytes > 0 && bytes + f->len > max_bytes) {
      r.has_more = r.more = 1;
      break;
    }
    bytes += f->len;
    const uint8_t *body = f->body;
    if (f->seg) {
      const uint8_t *base = NULL;
      rv = inflate_to(&inf, f->seg, f->seg_off + f->len, &base);
      if (rv == -EAGAIN) { /* the client asks again for the rest */
        rv = 0;
        r.has_more = r.more = 1;
        break;
      }
      if (rv < 0) break;
      body = base + f->seg_off;
    }
    if ((rv = append_frame(request_id, f, body, out)) < 0) break;
  }
  ZSTD_freeDCtx(inf.d);
  free(inf.buf);
  if (rv < 0) return rv;
  if (!r.more) {
    r.has_last_seq = r.has_cum = 1;
    r.last_seq = w->next_seq - 1;
    r.cum = w->cum;
  }
  return append_reply(request_id, false, &r, out);
}
