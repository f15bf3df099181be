/* The recording engine's replay side (recording_internal.h): through a
 * tracegate-relay, every ReadBuffers reply is numbered per resume key;
 * the recording acknowledges what it received (TracegateRelay.Ack) and,
 * after re-attaching on a new connection, asks for what followed the last
 * frame it received (Resume), so that the frames a lost link swallowed
 * arrive once, and none twice. The reassembler is the recording's own, so
 * a packet the link cut in two is completed by the replay. What the
 * relay's window could no longer hold is counted exactly (frames, bytes,
 * and the packets they cut). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/recording_internal.h"
#include "pb/tracegate/relay.pb-c.h"
#include "tracegate/error.h"

#define RELAY_SERVICE "TracegateRelay"
/* Acknowledged every this many reads: the window holds a few reads. */
#define ACK_EVERY_READS 4

static void on_acked(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     const uint8_t *reply, size_t len) {
  (void)status;
  (void)msg;
  (void)reply;
  (void)len;
  /* Nothing to do with the answer: a lost Ack only keeps frames longer. */
  tg__rec_answer(ctx, c);
}

void tg__rec_ack(tg_recording_t *r, bool now) {
  if (!r->replay || !r->c || r->resuming) return;
  if (++r->reads_since_ack < ACK_EVERY_READS && !now) return;
  if (r->rx_frames == r->acked_frames) return;
  Perfetto__Protos__ReplayAckRequest a = PERFETTO__PROTOS__REPLAY_ACK_REQUEST__INIT;
  a.has_seq = 1;
  a.seq = r->rx_frames;
  uint8_t buf[16];
  size_t n = perfetto__protos__replay_ack_request__pack(&a, buf);
  if (tg_consumer_call(r->c, RELAY_SERVICE, "Ack", buf, n, on_acked, r) == 0) {
    r->inflight++;
    r->reads_since_ack = 0;
    r->acked_frames = r->rx_frames;
  }
}

/* --- Resume ------------------------------------------------------------------ */

typedef void (*then_fn)(tg_recording_t *r);

typedef struct resume_call {
  tg_recording_t *r;
  then_fn then;
} resume_call_t;

static int send_resume(tg_recording_t *r, then_fn then);

/* A packet of the replay: to the owner, unless its start was lost. */
static int replay_packet(void *ctx, const uint8_t *p, size_t n) {
  tg_recording_t *r = ctx;
  if (r->resync) {
    r->resync = false;
    r->replay_stats.lost_packets++;
    return 0;
  }
  int rv = r->cbs->on_packet(r, p, n);
  if (rv < 0) return rv;
  r->packets++;
  return 0;
}

/* The reassembler's packet in progress is lost (its rest cannot come). */
static void drop_partial(tg_recording_t *r) {
  if (tg_buf_size(&r->ra.cur) > 0) r->replay_stats.lost_packets++;
  tg_slice_reassembler_free(&r->ra);
  tg_slice_reassembler_init(&r->ra, TG_CONSUMER_DEFAULT_MAX_PACKET);
}

/* One frame (or part) sent again. Returns 0 or an error. */
static int replay_frame(tg_recording_t *r,
                        const Perfetto__Protos__ReplayedFrame *f) {
  uint32_t part = f->has_part ? f->part : 0;
  if (f->seq <= r->rx_frames) return 0; /* had it already */
  if (f->seq != r->rx_frames + 1) return TG_EPROTO_DECODE; /* a hole */
  if (part != (r->part_seq == f->seq ? r->part_next : 0)) {
    /* A part received before a cut in the middle of this frame. */
    if (r->part_seq == f->seq && part < r->part_next) return 0;
    return TG_EPROTO_DECODE;
  }
  static const uint8_t empty[1];
  const uint8_t *body = f->read_buffers_response.len
                            ? f->read_buffers_response.data : empty;
  int rv = tg_slice_reassembler_feed(&r->ra, body, f->read_buffers_response.len,
                                     replay_packet, r);
  if (rv) return rv;
  r->rx_bytes += f->read_buffers_response.len;
  r->replay_stats.bytes += f->read_buffers_response.len;
  if (f->more_parts) {
    r->part_seq = f->seq;
    r->part_next = part + 1;
    return 0;
  }
  r->part_seq = 0;
  r->part_next = 0;
  r->rx_frames = f->seq;
  r->replay_stats.frames++;
  return f->last_of_read ? tg_slice_reassembler_finish(&r->ra) : 0;
}

static void on_resume_reply(tg_consumer_t *c, void *ctx, int status,
                            const char *msg, const uint8_t *reply, size_t len,
                            bool more) {
  resume_call_t *rc = ctx;
  tg_recording_t *r = rc->r;
  if (more) {
    if (r->freed || c != r->c || tg__rec_is_over(r) || !r->resuming) return;
  } else {
    then_fn then = rc->then;
    free(rc);
    rc = NULL;
    if (!tg__rec_answer(r, c)) return;
    r->resuming = false;
    if (tg__rec_conn_going(status)) return; /* on_close: rebind again */
    if (status) {
      tg__rec_fail(r, status, "the relay refused to resume the trace: %s",
                   msg);
      return;
    }
    Perfetto__Protos__ResumeResponse *rr =
        perfetto__protos__resume_response__unpack(NULL, len,
                                                  reply ? reply : (const uint8_t *)"");
    if (!rr) {
      tg__rec_fail(r, TG_EPROTO_DECODE, "the relay's Resume reply does not decode");
      return;
    }
    bool again = rr->more, unknown = rr->unknown_key;
    if (!again && !unknown && rr->has_last_seq && rr->has_cum) {
      /* The relay's numbering is the one acks and resumes speak. */
      r->rx_frames = r->acked_frames = rr->last_seq;
      r->rx_bytes = rr->cum;
    }
    perfetto__protos__resume_response__free_unpacked(rr, NULL);
    bool syncing = r->syncing;
    r->syncing = false;
    if (!syncing) r->replay_stats.resumes++;
    /* Reads the link cut are whole again when nothing was lost. */
    if (!syncing && !unknown && r->replay_stats.lost_frames == r->lost_before)
      r->reads_recovered = r->reads_cut;
    if (unknown) {
      /* A new relay: it numbers from 1 again and has nothing of before.
       * The service's next reads begin with whole packets. */
      if (!syncing) r->replay_stats.relay_restarted = true;
      r->rx_frames = r->rx_bytes = r->acked_frames = 0;
      r->part_seq = r->part_next = 0;
      drop_partial(r);
    }
    if (again) {
      int rv = send_resume(r, then);
      if (rv < 0) tg__rec_fail(r, rv, "cannot resume the trace: %s",
                               tg_strerror(rv));
      return;
    }
    then(r);
    return;
  }
  /* One reply of the stream: the loss first, then the frames. */
  Perfetto__Protos__ResumeResponse *rr = perfetto__protos__resume_response__unpack(
      NULL, len, reply ? reply : (const uint8_t *)"");
  int rv = rr ? 0 : TG_EPROTO_DECODE;
  if (rr && rr->lost_frames) {
    r->replay_stats.lost_frames += rr->lost_frames;
    r->replay_stats.lost_bytes += rr->lost_bytes;
    r->rx_frames += rr->lost_frames;
    r->rx_bytes += rr->lost_bytes;
    r->part_seq = r->part_next = 0;
    drop_partial(r);
    r->resync = rr->resync_inside_packet;
  }
  for (size_t i = 0; rr && rv == 0 && i < rr->n_frames; i++)
    rv = replay_frame(r, rr->frames[i]);
  if (rr) perfetto__protos__resume_response__free_unpacked(rr, NULL);
  (void)status;
  (void)msg;
  if (rv) {
    r->resuming = false;
    tg__rec_fail(r, rv, "the trace sent again by the relay is not usable: %s",
                 tg_strerror(rv));
  }
}

static int send_resume(tg_recording_t *r, then_fn then) {
  Perfetto__Protos__ResumeRequest q = PERFETTO__PROTOS__RESUME_REQUEST__INIT;
  q.has_last_seq = q.has_cum = 1;
  q.last_seq = r->rx_frames;
  q.cum = r->rx_bytes;
  uint8_t buf[32];
  size_t n = perfetto__protos__resume_request__pack(&q, buf);
  resume_call_t *rc = malloc(sizeof(*rc));
  if (!rc) return -ENOMEM;
  rc->r = r;
  rc->then = then;
  int rv = tg_consumer_call_stream(r->c, RELAY_SERVICE, "Resume", buf, n,
                                   on_resume_reply, rc);
  if (rv < 0) {
    free(rc);
    return rv;
  }
  r->inflight++;
  r->resuming = true;
  r->lost_before = r->replay_stats.lost_frames;
  return 0;
}

int tg__rec_resume(tg_recording_t *r, void (*then)(tg_recording_t *r)) {
  if (!r->replay) {
    /* Nothing can complete a packet the link cut: start afresh. */
    drop_partial(r);
    then(r);
    return 0;
  }
  int rv = send_resume(r, then);
  if (rv == TG_ENOT_SUPPORTED || rv == TG_ENOT_CONNECTED) {
    /* A relay without replay (an older one): as without. */
    r->replay = false;
    drop_partial(r);
    then(r);
    return 0;
  }
  return rv;
}

int tg__rec_replay_sync(tg_recording_t *r, void (*then)(tg_recording_t *r)) {
  if (!r->replay) {
    then(r);
    return 0;
  }
  /* Nothing before this recording is its own: resume from the end. */
  r->rx_frames = UINT64_MAX;
  r->rx_bytes = 0;
  int rv = send_resume(r, then);
  r->rx_frames = 0;
  r->syncing = rv == 0;
  if (rv == TG_ENOT_SUPPORTED || rv == TG_ENOT_CONNECTED) {
    r->replay = false;
    then(r);
    return 0;
  }
  return rv;
}
