/* The recording engine's own parts, shared by recording.c (start, stop,
 * rebind), recording_drain.c (reads, statistics, draining),
 * recording_replay.c (acknowledging, resuming), recording_end.c
 * (failures, the end, the guard) and recording_substate.c (the states'
 * setters). Not for owners: they use consumer/recording.h. Calls go one
 * way: recording.c -> recording_drain.c -> recording_replay.c ->
 * recording_end.c -> recording_substate.c.
 *
 * A recording's state is two enums, each written by one function that
 * checks it against its table (recording.h):
 *  - its lifecycle, tg_rec_state_t (tg__rec_set_state);
 *  - its binding to a connection, tg_rec_binding_t (tg__rec_set_binding):
 *    while it is not BOUND the lifecycle stays where the connection left
 *    it, and the rebind goes on from there.
 * The reader's own small states (a read in flight or held, a stats call
 * asked, a cut read to check) are enums of tg__rec_reader_t, and why a
 * stop is wanted is one more; each has one setter too, checked against
 * its arrows (recording_substate.c):
 *   read:  IDLE -> BUSY, HELD    BUSY -> IDLE
 *          HELD -> HELD_DUE, IDLE    HELD_DUE -> IDLE
 *   stats: IDLE -> AFTER_READ, ASKED    AFTER_READ -> ASKED, IDLE
 *          ASKED -> IDLE
 *   cut:   NONE -> OPEN, OPEN_NO_BASE    OPEN, OPEN_NO_BASE -> NONE
 *   stop:  NONE -> WANTED, DEADLINE    WANTED -> DEADLINE (latched)
 * Setting the current value again does nothing; any other arrow is
 * refused as the lifecycle's are. The bools that remain are options or
 * facts, never "in the middle of". */
#ifndef TRACEGATE_CONSUMER_RECORDING_INTERNAL_H
#define TRACEGATE_CONSUMER_RECORDING_INTERNAL_H

#include "consumer/recording.h"

/* What the owner asked for at tg_recording_start (keys and the absent
 * config copied and owned). |stream| may change once attached
 * (tg_recording_set_stream); |replay| is dropped for a relay without it. */
typedef struct tg__rec_opts {
  char *detach_key, *resume_key, *attach_key;
  /* enable_if_absent: the config to enable when the Attach is refused
   * (freed once the attach answered). */
  uint8_t *absent_cfg;
  size_t absent_cfg_len;
  bool stream;
  bool replay;
  uint32_t read_period_ms, first_read_ms, stats_period_ms, guard_ms,
      deadline_stop_ms;
  uint64_t stop_after_ms, grace_ms;
} tg__rec_opts_t;

/* Why a stop is wanted (latched until the end). */
typedef enum tg__rec_stop {
  TG__REC_STOP_NONE,
  TG__REC_STOP_WANTED,   /* the owner's, -t, or the config's stop */
  TG__REC_STOP_DEADLINE, /* duration + grace went by: ends with a guard */
} tg__rec_stop_t;

/* The ReadBuffers side. */
typedef enum tg__rec_read {
  TG__READ_IDLE,
  TG__READ_BUSY,     /* a ReadBuffers call is in flight */
  TG__READ_HELD,     /* hold_reads: none goes until the release */
  TG__READ_HELD_DUE, /* held, and a read came due meanwhile */
} tg__rec_read_t;

/* The GetTraceStats side. */
typedef enum tg__rec_stats {
  TG__STATS_IDLE,
  TG__STATS_AFTER_READ, /* wanted once the read in flight ends (note_base) */
  TG__STATS_ASKED,      /* a call is in flight */
} tg__rec_stats_t;

/* A read cut by a lost connection, waiting for the first stats answer
 * after the rebind to say whether it carried anything. */
typedef enum tg__rec_cut {
  TG__CUT_NONE,
  TG__CUT_OPEN,         /* checked against cut_base */
  TG__CUT_OPEN_NO_BASE, /* no stats answer before it: counted as lost */
} tg__rec_cut_t;

/* reader.base_bytes before any stats answer. */
#define TG__REC_NO_BASE UINT64_MAX

typedef struct tg__rec_reader {
  tg__rec_read_t read;   /* written only by tg__rec_set_read() */
  tg__rec_stats_t stats; /* written only by tg__rec_set_stats() */
  /* The config has a DISCARD buffer or takes snapshots: no reads while
   * tracing, only the drain's once the session ended
   * (tg__rec_set_read_target). */
  bool at_end_only;
  unsigned drain_reads;
  uint64_t reads_done; /* reads answered, whatever the answer */
  uint64_t packets, packets_before_read;
  uint64_t read_bytes; /* packet bytes of the current read */
  /* Whether a cut read carried anything: the session's bytes_read (its
   * buffers' sum, from GetTraceStats) before the cut read is compared
   * with the first answer after the rebind (recording_drain.c,
   * note_base). Stats are asked only while no read is in flight, and
   * after every read, so every answer is such a baseline. */
  uint64_t base_bytes; /* TG__REC_NO_BASE until answered */
  tg__rec_cut_t cut; /* written only by tg__rec_set_cut() */
  uint64_t cut_base;
  unsigned reads_cut;  /* reads a lost connection cut */
  unsigned reads_lost; /* cut reads that did carry data (or may have) */
  unsigned reads_recovered; /* cut reads a replay made whole */
  /* Pacing (recording_drain.c, pace_reads): a read of read_target bytes
   * is followed at once; after a smaller one the next comes when about
   * read_target bytes should be waiting, at the rate the reads of the
   * last window (>= RATE_WINDOW_MS) brought, and at the latest after
   * the period. */
  uint64_t read_target;
  uint64_t rate_since_ms, rate_bytes; /* the window so far (r->clock) */
  double rate_per_ms;                 /* of the last whole window; 0: none */
  /* One reassembler for the whole recording (a packet a lost link cut in
   * two is completed by the replay), and the ReadBuffers replies received
   * so far, as the relay numbers them. */
  tg_slice_reassembler_t ra;
  uint64_t rx_frames, rx_bytes;
  /* Replay (opts.replay): acknowledging and resuming. */
  unsigned reads_since_ack;
  uint64_t acked_frames;
  uint64_t part_seq;    /* a frame replayed in parts: its seq */
  uint32_t part_next;   /* and the next part wanted */
  uint64_t lost_before; /* replay_stats.lost_frames when Resume was sent */
  tg_rec_replay_stats_t replay_stats;
} tg__rec_reader_t;

struct tg_recording {
  uv_loop_t *loop;
  const tg_clock_t *clock; /* borrowed: every time a decision reads */
  const tg_recording_cbs_t *cbs;
  void *data;
  tg_rec_state_t state;     /* written only by tg__rec_set_state() */
  tg_rec_binding_t binding; /* written only by tg__rec_set_binding() */
  tg_consumer_t *c;         /* borrowed; NULL while UNBOUND, and IDLE */
  uint64_t bad_transitions; /* refused by the tables (a bug: logged) */

  tg__rec_opts_t o;
  /* The session's clocks, from its config: its duration (or -t's), and a
   * START_TRACING trigger's longest wait before it. */
  uint64_t duration_ms;
  uint64_t start_wait_ms;
  Perfetto__Protos__TraceConfig *attached_cfg;
  tg__rec_stop_t stop; /* written only by tg__rec_set_stop() */
  bool deadline_failed; /* FAILED: the session did not end by its deadline */

  tg__rec_reader_t rd;
  uint64_t last_rx_ms; /* the last answer on the current connection (clock) */

  /* Memory: tg_recording_free() marks it freed; it goes once no consumer
   * call and no timer can reach it any more. */
  unsigned inflight; /* consumer calls whose callback has not run */
  unsigned open_timers;
  bool freed;
  int end_status;
  char reason[600];

  uv_timer_t reader, stats, stopper, deadline, guard, ender;
};

/* --- recording_substate.c: the states and their setters ------------------ */

bool tg__rec_is_over(const tg_recording_t *r);
/* The one lifecycle transition: checked against tg_rec_transition_ok()
 * under common/fsm.h's policy: one it refuses is a bug of the engine's:
 * logged as an error, counted (bad_transitions) and not made. Tells
 * on_state. */
void tg__rec_set_state(tg_recording_t *r, tg_rec_state_t to);
/* The one binding transition, checked likewise (tg_rec_binding_ok). */
void tg__rec_set_binding(tg_recording_t *r, tg_rec_binding_t to);
/* --- recording_end.c ------------------------------------------------------ */

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
/* The same with a reason already made; |end_session|: a session that may
 * still run is freed first (FAILING), else FAILED at once. */
void tg__rec_fail_now(tg_recording_t *r, bool end_session, int status,
                      const char *reason);
void tg__rec_stop_timers(tg_recording_t *r);
void tg__rec_arm_guard(tg_recording_t *r, uint64_t ms);
/* After the final statistics (STATS): FreeBuffers (FREEING), then DONE;
 * DONE at once, saying why, when it cannot be sent. */
void tg__rec_free_at_end(tg_recording_t *r);
/* DONE, the session not freed: the reason says why (and that the trace
 * is whole). */
void tg__rec_done_not_freed(tg_recording_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Frees |r| once tg_recording_free marked it and no timer and no call
 * can reach it any more. */
void tg__rec_maybe_release(tg_recording_t *r);

/* The reader's sub-states and the stop's latch (the arrows above), each
 * checked like tg__rec_set_state(); the check alone, for tests: */
bool tg__rec_read_ok(tg__rec_read_t from, tg__rec_read_t to);
bool tg__rec_stats_ok(tg__rec_stats_t from, tg__rec_stats_t to);
bool tg__rec_cut_ok(tg__rec_cut_t from, tg__rec_cut_t to);
bool tg__rec_stop_ok(tg__rec_stop_t from, tg__rec_stop_t to);
void tg__rec_set_read(tg_recording_t *r, tg__rec_read_t to);
void tg__rec_set_stats(tg_recording_t *r, tg__rec_stats_t to);
void tg__rec_set_cut(tg_recording_t *r, tg__rec_cut_t to);
void tg__rec_set_stop(tg_recording_t *r, tg__rec_stop_t to);

/* --- recording_drain.c ---------------------------------------------------- */

/* The read target for the buffers of |cfg| (NULL: the default). */
void tg__rec_set_read_target(tg_recording_t *r,
                             const Perfetto__Protos__TraceConfig *cfg);
/* Tracing (again): the reads' rate is measured from now. */
void tg__rec_pace_begin(tg_recording_t *r);
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

/* --- recording_replay.c --------------------------------------------------- */

/* Sends Ack for what was received, every few reads (or now with |now|). */
void tg__rec_ack(tg_recording_t *r, bool now);
/* After a rebind: Resume, then |then| once the replay is in (or at once
 * without replay). Returns 0 or a negative error. */
int tg__rec_resume(tg_recording_t *r, void (*then)(tg_recording_t *r));
/* After attaching a session a relay numbered for someone else (--attach
 * KEY): adopt the relay's numbering without any replay, then |then|. */
int tg__rec_replay_sync(tg_recording_t *r, void (*then)(tg_recording_t *r));

#endif /* TRACEGATE_CONSUMER_RECORDING_INTERNAL_H */
