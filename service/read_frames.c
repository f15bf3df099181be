/* ReadBuffers reply frames, sent from where the packets lie: see
 * read_frames.h. */
#include "service/read_frames.h"

#include <errno.h>
#include <stdlib.h>

#include "tracegate/error.h"

/* ReadBuffersResponse.slices = 2 {data = 1, last_slice_for_packet = 2}. */
enum { RESPONSE_SLICES = 2, SLICE_DATA = 1, SLICE_LAST = 2 };

/* Room kept free at the end of a frame for its closing bytes. */
#define FRAME_TAIL_RESERVE 32
/* Per slice: slice tag + 4-byte size, data tag + length, the bool. */
#define SLICE_OVERHEAD 16
/* A frame with less room than this for a piece of a larger packet goes out
 * first: a slice that small is not worth its headers. */
#define MIN_SLICE 64

tg_read_frames_t *tg_read_frames_new(void) {
  return calloc(1, sizeof(tg_read_frames_t));
}

void tg_read_frames_begin(tg_read_frames_t *f, tg_ipc_chan_t *chan,
                          uint64_t request_id) {
  f->chan = chan;
  f->request_id = request_id;
  f->open = false;
  f->err = 0;
  f->n_holes = 0;
}

static void frame_open(tg_read_frames_t *f) {
  tg_ipc_reply_begin(&f->rw, f->arena, sizeof(f->arena), f->request_id, true,
                     true);
  f->n_holes = 0;
  f->open = true;
}

/* The frame as a vector: the arena's runs with the in-place pieces between
 * them, in the order the writer counted them. */
static int frame_send(tg_read_frames_t *f, size_t frame_len) {
  size_t used = (size_t)(f->rw.body.cur - f->arena);
  size_t pos = 0, sum = 0;
  int k = 0;
  for (unsigned i = 0; i < f->n_holes; i++) {
    const tg_read_hole_t *h = &f->holes[i];
    if (h->at > pos) {
      f->iov[k++] = (struct iovec){f->arena + pos, h->at - pos};
      sum += h->at - pos;
      pos = h->at;
    }
    f->iov[k++] = (struct iovec){(void *)h->p, h->len};
    sum += h->len;
  }
  if (used > pos) {
    f->iov[k++] = (struct iovec){f->arena + pos, used - pos};
    sum += used - pos;
  }
  /* The writer's count and the vector must agree, or the peer would read
   * a corrupt stream. */
  if (sum != frame_len) return TG_EPROTO_ENCODE;
  int rv = tg_ipc_chan_sendv(f->chan, f->iov, k);
  if (rv < 0) return rv;
  f->frames_sent++;
  return 0;
}

static void frame_close(tg_read_frames_t *f) {
  if (!f->open) return;
  f->open = false;
  if (f->err) return; /* never send a frame the error left unfinished */
  size_t len = 0;
  int rv = tg_ipc_reply_end(&f->rw, &len);
  if (rv == 0) rv = frame_send(f, len);
  if (rv < 0 && !f->err) f->err = rv;
}

/* Bytes of packet data the open frame can still take in one slice. */
static size_t frame_room(const tg_read_frames_t *f) {
  uint64_t used =
      tg_pbw_written(&f->rw.body) + FRAME_TAIL_RESERVE + SLICE_OVERHEAD;
  return used < TG_IPC_FRAME_MAX_PAYLOAD
             ? (size_t)(TG_IPC_FRAME_MAX_PAYLOAD - used)
             : 0;
}

int tg_read_frames_add(tg_read_frames_t *f, const uint8_t *const *pieces,
                       const size_t *lens, unsigned n, unsigned n_stable,
                       size_t total) {
  unsigned pi = 0;
  size_t poff = 0, left = total;
  while (!f->err && (left > 0 || total == 0)) {
    if (!f->open) frame_open(f);
    size_t room = frame_room(f);
    /* Not worth a slice, or no hole left for a packet whose pieces would
     * go in place: the next frame. */
    if ((room < MIN_SLICE && room < left) ||
        (f->n_holes + (n - pi) > TG_READ_FRAMES_MAX_HOLES && f->n_holes)) {
      frame_close(f);
      continue;
    }
    size_t take = left < room ? left : room;
    tg_pbw_t *w = &f->rw.body;
    tg_pbw_begin_nested(w, RESPONSE_SLICES);
    uint8_t hdr[8];
    uint8_t *h = tg_pb_write_varint(hdr, TG_PB_TAG(SLICE_DATA, TG_PB_WT_LEN));
    h = tg_pb_write_varint(h, take);
    tg_pbw_append_raw(w, hdr, (size_t)(h - hdr));
    size_t k = take;
    while (k > 0 && pi < n) {
      size_t avail = lens[pi] - poff;
      size_t c = k < avail ? k : avail;
      if (pi < n_stable && c >= TG_READ_FRAMES_INLINE_MAX &&
          f->n_holes < TG_READ_FRAMES_MAX_HOLES) {
        f->holes[f->n_holes++] = (tg_read_hole_t){
            (uint32_t)(w->cur - f->arena), (uint32_t)c, pieces[pi] + poff};
        tg_pbw_count_external(w, c);
        f->bytes_in_place += c;
      } else {
        tg_pbw_append_raw(w, pieces[pi] + poff, c);
      }
      k -= c;
      poff += c;
      if (poff == lens[pi]) {
        pi++;
        poff = 0;
      }
    }
    left -= take;
    if (left == 0) tg_pbw_append_bool(w, SLICE_LAST, true);
    tg_pbw_end_nested(w);
    if (k > 0) f->err = -EINVAL; /* |total| more than the pieces hold */
    if (total == 0) break;
  }
  return f->err;
}

int tg_read_frames_end(tg_read_frames_t *f) {
  frame_close(f);
  f->chan = NULL;
  return f->err;
}
