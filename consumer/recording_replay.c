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
  tg__rec_reader_t *rd = &r->rd;
  if (!r->o.replay || r->binding != TG_REC_BOUND) return;
  if (++rd->reads_since_ack < ACK_EVERY_READS && !now) return;
  if (rd->rx_frames == rd->acked_frames) return;
  Perfetto__Protos__ReplayAckRequest a = PERFETTO__PROTOS__REPLAY_ACK_REQUEST__INIT;
  a.has_seq = 1;
  a.seq = rd->rx_frames;
  uint8_t buf[16];
  size_t n = perfetto__protos__replay_ack_request__pack(&a, buf);
  if (tg_consumer_call(r->c, RELAY_SERVICE, "Ack", buf, n, on_acked, r) == 0) {
    r->inflight++;
    rd->reads_since_ack = 0;
    rd->acked_frames = rd->rx_frames;
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
  if (r->binding == TG_REC_RESUMING_CUT) {
    tg__rec_set_binding(r, TG_REC_RESUMING);
    r->rd.replay_stats.lost_packets++;
    return 0;
  }
  int rv = r->cbs->on_packet(r, p, n);
  if (rv < 0) return rv;
  r->rd.packets++;
  return 0;
}

/* The reassembler's packet in progress is lost (its rest cannot come). */
static void drop_partial(tg_recording_t *r) {
  if (tg_buf_size(&r->rd.ra.cur) > 0) r->rd.replay_stats.lost_packets++;
  tg_slice_reassembler_free(&r->rd.ra);
  tg_slice_reassembler_init(&r->rd.ra, TG_CONSUMER_DEFAULT_MAX_PACKET);
}

/* One frame (or part) sent again. Returns 0 or an error. */
static int replay_frame(tg_recording_t *r,
                        const Perfetto__Protos__ReplayedFrame *f) {
  tg__rec_reader_t *rd = &r->rd;
  uint32_t part = f->has_part ? f->part : 0;
  if (f->seq <= rd->rx_frames) return 0; /* had it already */
  if (f->seq != rd->rx_frames + 1) return TG_EPROTO_DECODE; /* a hole */
  if (part != (rd->part_seq == f->seq ? rd->part_next : 0)) {
    /* A part received before a cut in the middle of this frame. */
    if (rd->part_seq == f->seq && part < rd->part_next) return 0;
    return TG_EPROTO_DECODE;
  }
  static const uint8_t empty[1];
  const uint8_t *body = f->read_buffers_response.len
                            ? f->read_buffers_response.data : empty;
  int rv = tg_slice_reassembler_feed(
      &rd->ra, body, f->read_buffers_response.len, replay_packet, r);
  if (rv) return rv;
  rd->rx_bytes += f->read_buffers_response.len;
  rd->replay_stats.bytes += f->read_buffers_response.len;
  if (f->more_parts) {
    rd->part_seq = f->seq;
    rd->part_next = part + 1;
    return 0;
  }
  rd->part_seq = 0;
  rd->part_next = 0;
  rd->rx_frames = f->seq;
  rd->replay_stats.frames++;
  return f->last_of_read ? tg_slice_reassembler_finish(&rd->ra) : 0;
}

/* A Resume (or a sync's) is in flight on the current connection. */
static bool resuming(const tg_recording_t *r) {
  return r->binding == TG_REC_RESUMING || r->binding == TG_REC_RESUMING_CUT ||
         r->binding == TG_REC_SYNCING;
}

/* The stream's last reply: the relay's numbering from now on, and what
 * the replay made whole; then another Resume (the relay had more), or
 * |then|. */
static void resume_done(tg_recording_t *r, then_fn then, const uint8_t *reply,
                        size_t len) {
  tg__rec_reader_t *rd = &r->rd;
  Perfetto__Protos__ResumeResponse *rr =
      perfetto__protos__resume_response__unpack(
          NULL, len, reply ? reply : (const uint8_t *)"");
  if (!rr) {
    tg__rec_fail(r, TG_EPROTO_DECODE,
                 "the relay's Resume reply does not decode");
    return;
  }
  bool again = rr->more, unknown = rr->unknown_key;
  if (!again && !unknown && rr->has_last_seq && rr->has_cum) {
    /* The relay's numbering is the one acks and resumes speak. */
    rd->rx_frames = rd->acked_frames = rr->last_seq;
    rd->rx_bytes = rr->cum;
  }
  perfetto__protos__resume_response__free_unpacked(rr, NULL);
  bool syncing = r->binding == TG_REC_SYNCING;
  if (!syncing) rd->replay_stats.resumes++;
  /* Reads the link cut are whole again when nothing was lost. */
  if (!syncing && !unknown && rd->replay_stats.lost_frames == rd->lost_before)
    rd->reads_recovered = rd->reads_cut;
  if (unknown) {
    /* A new relay: it numbers from 1 again and has nothing of before.
     * The service's next reads begin with whole packets. */
    if (!syncing) rd->replay_stats.relay_restarted = true;
    rd->rx_frames = rd->rx_bytes = rd->acked_frames = 0;
    rd->part_seq = rd->part_next = 0;
    drop_partial(r);
  }
  if (again) {
    int rv = send_resume(r, then);
    if (rv < 0)
      tg__rec_fail(r, rv, "cannot resume the trace: %s", tg_strerror(rv));
    return;
  }
  then(r); /* binds */
}

/* One reply of the stream: the loss first, then the frames. A sync asks
 * from the end: the relay sends it neither. */
static int resume_part(tg_recording_t *r, const uint8_t *reply, size_t len) {
  tg__rec_reader_t *rd = &r->rd;
  Perfetto__Protos__ResumeResponse *rr =
      perfetto__protos__resume_response__unpack(
          NULL, len, reply ? reply : (const uint8_t *)"");
  int rv = rr ? 0 : TG_EPROTO_DECODE;
  if (rr && rr->lost_frames) {
    rd->replay_stats.lost_frames += rr->lost_frames;
    rd->replay_stats.lost_bytes += rr->lost_bytes;
    rd->rx_frames += rr->lost_frames;
    rd->rx_bytes += rr->lost_bytes;
    rd->part_seq = rd->part_next = 0;
    drop_partial(r);
    if (r->binding != TG_REC_SYNCING)
      tg__rec_set_binding(r, rr->resync_inside_packet ? TG_REC_RESUMING_CUT
                                                      : TG_REC_RESUMING);
  }
  for (size_t i = 0; rr && rv == 0 && i < rr->n_frames; i++)
    rv = replay_frame(r, rr->frames[i]);
  if (rr) perfetto__protos__resume_response__free_unpacked(rr, NULL);
  return rv;
}

static void on_resume_reply(tg_consumer_t *c, void *ctx, int status,
                            const char *msg, const uint8_t *reply, size_t len,
                            bool more) {
  resume_call_t *rc = ctx;
  tg_recording_t *r = rc->r;
  if (!more) {
    then_fn then = rc->then;
    free(rc);
    if (!tg__rec_answer(r, c) || !resuming(r)) return;
    if (tg__rec_conn_going(status)) return; /* on_close: rebind again */
    if (status) {
      tg__rec_fail(r, status, "the relay refused to resume the trace: %s",
                   msg);
      return;
    }
    resume_done(r, then, reply, len);
    return;
  }
  if (r->freed || c != r->c || tg__rec_is_over(r) ||
      r->state == TG_REC_FAILING || !resuming(r))
    return;
  int rv = resume_part(r, reply, len);
  if (rv)
    tg__rec_fail(r, rv, "the trace sent again by the relay is not usable: %s",
                 tg_strerror(rv));
}

/* Asks for what followed the last frame received; the caller says
 * whether it is a resume or a sync (the binding). */
static int send_resume(tg_recording_t *r, then_fn then) {
  Perfetto__Protos__ResumeRequest q = PERFETTO__PROTOS__RESUME_REQUEST__INIT;
  q.has_last_seq = q.has_cum = 1;
  q.last_seq = r->rd.rx_frames;
  q.cum = r->rd.rx_bytes;
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
  r->rd.lost_before = r->rd.replay_stats.lost_frames;
  return 0;
}

int tg__rec_resume(tg_recording_t *r, void (*then)(tg_recording_t *r)) {
  if (!r->o.replay) {
    /* Nothing can complete a packet the link cut: start afresh. */
    drop_partial(r);
    then(r);
    return 0;
  }
  int rv = send_resume(r, then);
  if (rv == TG_ENOT_SUPPORTED || rv == TG_ENOT_CONNECTED) {
    /* A relay without replay (an older one): as without. */
    r->o.replay = false;
    drop_partial(r);
    then(r);
    return 0;
  }
  if (rv == 0) tg__rec_set_binding(r, TG_REC_RESUMING);
  return rv;
}

int tg__rec_replay_sync(tg_recording_t *r, void (*then)(tg_recording_t *r)) {
  if (!r->o.replay) {
    then(r);
    return 0;
  }
  /* Nothing before this recording is its own: resume from the end. */
  r->rd.rx_frames = UINT64_MAX;
  r->rd.rx_bytes = 0;
  int rv = send_resume(r, then);
  r->rd.rx_frames = 0;
  if (rv == TG_ENOT_SUPPORTED || rv == TG_ENOT_CONNECTED) {
    r->o.replay = false;
    then(r);
    return 0;
  }
  if (rv == 0) tg__rec_set_binding(r, TG_REC_SYNCING);
  return rv;
}
