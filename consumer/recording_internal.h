/* The recording engine's own parts, shared by recording.c (start, stop,
 * the end, rebind) and recording_drain.c (reads, statistics, draining).
 * Not for owners: they use consumer/recording.h. */
#ifndef TRACEGATE_CONSUMER_RECORDING_INTERNAL_H
#define TRACEGATE_CONSUMER_RECORDING_INTERNAL_H

#include "consumer/recording.h"

struct tg_recording {
  uv_loop_t *loop;
  const tg_recording_cbs_t *cbs;
  void *data;
  tg_consumer_t *c; /* borrowed; NULL while unbound */
  tg_rec_state_t state;
  tg_rec_state_t resume_state; /* where a rebind goes back to */

  char *detach_key, *resume_key, *attach_key;
  /* enable_if_absent: the config to enable when the Attach is refused
   * (owned; freed once the attach answered). */
  uint8_t *absent_cfg;
  size_t absent_cfg_len;
  bool stream;
  uint32_t read_period_ms, first_read_ms, stats_period_ms, guard_ms,
      deadline_stop_ms;
  uint64_t stop_after_ms, grace_ms;
  uint64_t duration_ms; /* the session's, for the deadline */
  uint64_t start_wait_ms; /* a START_TRACING trigger's longest wait */
  bool deferred_start;
  Perfetto__Protos__TraceConfig *attached_cfg;

  bool live;  /* a session exists (enable sent or attached) */
  bool ended; /* the service said it ended */
  bool stop_wanted, stop_sent, deadline_hit, freeing;
  bool deadline_failed; /* failed: the session did not end by its deadline */
  bool reading, stats_pending;
  bool reads_held, read_due; /* hold_reads; a read came due while held */
  unsigned drain_reads, reads_cut;
  /* Whether a cut read carried anything: the session's bytes_read (its
   * buffers' sum, from GetTraceStats) before the cut read is compared
   * with the first answer after the rebind (recording_drain.c,
   * note_base). Stats are asked only while no read is in flight, and
   * after every read, so every answer is such a baseline. */
  bool stats_after_read; /* a stats call waits for the read to end */
  bool have_base;        /* base_bytes was answered at least once */
  uint64_t base_bytes;
  bool cut_open;         /* a cut read not yet checked */
  bool cut_base_known;
  uint64_t cut_base;
  unsigned reads_lost; /* cut reads that did carry data (or may have) */
  uint64_t packets, packets_before_read;
  uint64_t read_bytes; /* packet bytes of the current read */
  /* Pacing (recording_drain.c, pace_reads): a read of read_target bytes
   * is followed at once; after a smaller one the next comes when about
   * read_target bytes should be waiting, at the rate the reads of the
   * last window (>= RATE_WINDOW_MS) brought, and at the latest after
   * the period. */
  uint64_t read_target;
  /* The config has a DISCARD buffer: no reads while tracing, only the
   * drain's once the session ended (tg__rec_set_read_target). */
  bool reads_at_end;
  uint64_t rate_since_ms, rate_bytes; /* the window so far */
  double rate_per_ms;                 /* of the last whole window; 0: none */
  uint64_t reads_done; /* reads answered, whatever the answer */
  uint64_t last_rx_ms;

  unsigned inflight; /* consumer calls whose callback has not run */
  unsigned open_timers;
  bool freed;
  int end_status;
  char reason[600];

  uv_timer_t reader, stats, stopper, deadline, guard, ender;
  /* Reading: one reassembler for the whole recording (a packet a lost
   * link cut in two is completed by the replay), and the ReadBuffers
   * replies received so far, as the relay numbers them. */
  tg_slice_reassembler_t ra;
  uint64_t rx_frames, rx_bytes;
  /* Replay (opts.replay): acknowledging and resuming. */
  bool replay, resuming, syncing;
  unsigned reads_since_ack;
  uint64_t acked_frames;
  uint64_t part_seq;   /* a frame replayed in parts: its seq */
  uint32_t part_next;  /* and the next part wanted */
  bool resync;         /* drop the next packet: its start was lost */
  uint64_t lost_before; /* replay_stats.lost_frames when Resume was sent */
  unsigned reads_recovered; /* cut reads a replay made whole */
  tg_rec_replay_stats_t replay_stats;
};
/* recording_drain.c */
/* The read target for the buffers of |cfg| (NULL: the default). */
void tg__rec_set_read_target(tg_recording_t *r,
                             const Perfetto__Protos__TraceConfig *cfg);

/* Tracing (again): the reads' rate is measured from now. */
void tg__rec_pace_begin(tg_recording_t *r);

/* recording_replay.c */
/* Sends Ack for what was received, every few reads (or now with |now|). */
void tg__rec_ack(tg_recording_t *r, bool now);
/* After a rebind: Resume, then |then| once the replay is in (or at once
 * without replay). Returns 0 or a negative error. */
int tg__rec_resume(tg_recording_t *r, void (*then)(tg_recording_t *r));
/* After attaching a session a relay numbered for someone else (--attach
 * KEY): adopt the relay's numbering without any replay, then |then|. */
int tg__rec_replay_sync(tg_recording_t *r, void (*then)(tg_recording_t *r));

/* recording.c */
bool tg__rec_is_over(const tg_recording_t *r);
void tg__rec_set_state(tg_recording_t *r, tg_rec_state_t to);
/* One callback of a call on |c| ran: true if it is news for the
 * recording (counts the call done; may release a freed recording). */
bool tg__rec_answer(tg_recording_t *r, tg_consumer_t *c);
/* A status that only says the connection went. */
bool tg__rec_conn_going(int status);
void tg__rec_end(tg_recording_t *r, tg_rec_state_t state, int status,
                 const char *reason);
/* A failure found by the engine: a session that may still run is ended. */
void tg__rec_fail(tg_recording_t *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tg__rec_stop_timers(tg_recording_t *r);
void tg__rec_arm_guard(tg_recording_t *r, uint64_t ms);

/* recording_drain.c */
void tg__rec_stats_now(tg_recording_t *r);
void tg__rec_read_now(tg_recording_t *r);
/* The read in flight will never end (its connection went, whether it
 * dropped or was closed): counted, and checked after the rebind. */
void tg__rec_read_cut(tg_recording_t *r);
void tg__rec_final_stats(tg_recording_t *r);
void tg__rec_on_stats_timer(uv_timer_t *t);
void tg__rec_on_read_timer(uv_timer_t *t);
/* The session ended: final reads (when streaming), then final stats. */
void tg__rec_drain(tg_recording_t *r);

#endif /* TRACEGATE_CONSUMER_RECORDING_INTERNAL_H */
