/* One recording: a tracing session driven over a tg_consumer_t, from its
 * start to its final statistics. The local `tracegate record` and every
 * host of a fleet recording use it; what they add (the output file, the
 * terminal, connecting and reconnecting) stays with them.
 *
 *   IDLE --enable--> STARTING --tracing--> TRACING --stop, duration,
 *   deadline--> STOPPING (flush, disable) --the session ended--> DRAINING
 *   (final reads, when streaming) --> STATS (final GetTraceStats) -->
 *   FREEING (FreeBuffers) --> DONE
 *   IDLE --attach--> ATTACHING --attached (or enabled instead)--> STARTING
 *
 * Any failure goes to FAILED, through FAILING when the session is ended
 * first (FreeBuffers); --detach ends in DETACHED once the service keeps
 * the session under its key. tg_rec_transition_ok() is the table.
 *
 * Apart from the lifecycle, the binding says where the recording stands
 * with its connection: BOUND; UNBOUND when the connection went away (see
 * tg_recording_unbind), the lifecycle staying where it was;
 * tg_recording_rebind() re-attaches by key on a new connection
 * (REATTACHING), gets what the lost link swallowed (RESUMING) and goes
 * on where it was.
 *
 * The recording never opens, closes or frees a connection: it borrows the
 * one it is given. It reports to its owner through callbacks only; they
 * run from the loop, never inside the call that caused them, except
 * on_state. The end (DONE, DETACHED or FAILED) is reported once, by
 * on_end; after it the recording does nothing until freed.
 */
#ifndef TRACEGATE_CONSUMER_RECORDING_H
#define TRACEGATE_CONSUMER_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/clock.h"
#include "consumer/consumer.h"
#include "pb/config/trace_config.pb-c.h"

typedef struct tg_recording tg_recording_t;

typedef enum tg_rec_state {
  TG_REC_IDLE,      /* not started yet */
  TG_REC_ATTACHING, /* Attach sent: no session of ours yet */
  TG_REC_STARTING,  /* the session exists (enabled, or attached); tracing
                     * not followed yet */
  TG_REC_TRACING,
  TG_REC_STOPPING, /* flush + disable sent, waiting for the end */
  TG_REC_DRAINING, /* tracing ended: final reads */
  TG_REC_STATS,    /* final GetTraceStats */
  TG_REC_FREEING,  /* the trace is whole: FreeBuffers sent, then DONE */
  TG_REC_FAILING,  /* FreeBuffers sent: the session ends, then FAILED */
  TG_REC_DONE,
  TG_REC_DETACHED, /* left running in the service under detach_key */
  TG_REC_FAILED,
} tg_rec_state_t;

/* The recording's connection. */
typedef enum tg_rec_binding {
  TG_REC_BOUND,       /* on its connection */
  TG_REC_UNBOUND,     /* the connection is gone; waiting for a rebind */
  TG_REC_REATTACHING, /* Attach by the resume key sent on a new connection */
  TG_REC_RESUMING,    /* re-attached: Resume asks the relay for what the
                       * lost link swallowed */
  TG_REC_RESUMING_CUT, /* the same, and the next packet sent again lost its
                        * start in the relay's window: it is dropped */
  TG_REC_SYNCING,     /* attached: Resume adopts the relay's numbering */
} tg_rec_binding_t;

/* Whether the lifecycle has an arrow |from| -> |to|; written out:
 *   IDLE      -> ATTACHING, STARTING      ATTACHING -> STARTING
 *   STARTING  -> TRACING, DRAINING, DETACHED
 *   TRACING   -> STOPPING, DRAINING       STOPPING  -> DRAINING
 *   DRAINING  -> STATS                    STATS     -> FREEING, DONE
 *   FREEING   -> DONE
 *   FAILING   -> FAILED
 * and every state but the final ones -> FAILED; STARTING, TRACING and
 * STOPPING (a session that may still run) -> FAILING. DONE, DETACHED and
 * FAILED are final. A state to itself is no transition. */
bool tg_rec_transition_ok(tg_rec_state_t from, tg_rec_state_t to);
/* Whether the binding has an arrow |from| -> |to|:
 *   BOUND -> UNBOUND, SYNCING        UNBOUND -> REATTACHING
 *   REATTACHING -> RESUMING, BOUND, UNBOUND
 *   RESUMING -> RESUMING_CUT, BOUND, UNBOUND
 *   RESUMING_CUT -> RESUMING, BOUND, UNBOUND
 *   SYNCING -> BOUND, UNBOUND */
bool tg_rec_binding_ok(tg_rec_binding_t from, tg_rec_binding_t to);

/* Defaults of the options below when left 0. */
#define TG_REC_DEFAULT_READ_PERIOD_MS 500
/* A read that brings at least this many bytes of packets is followed by
 * the next one at once rather than at the next period. */
#define TG_REC_READ_AGAIN_BYTES (1u << 20)
/* ... or a quarter of the config's smallest buffer, when less (but not
 * less than this); after a read that brought less, the next comes when
 * that much should be waiting, at the rate of the reads before it. */
#define TG_REC_MIN_READ_TARGET (16u << 10)
/* The first read comes this soon after tracing starts (or at the period,
 * when shorter): a high-rate source can fill a small ring before a whole
 * period has gone, and what it overwrote before the first read is lost.
 * Once a read brings TG_REC_READ_AGAIN_BYTES, the reads follow each other. */
#define TG_REC_DEFAULT_FIRST_READ_MS 100
#define TG_REC_DEFAULT_GUARD_MS 60000
#define TG_REC_DEFAULT_DEADLINE_STOP_MS 5000
#define TG_REC_DEFAULT_GRACE_MS 60000
#define TG_REC_STOP_FLUSH_TIMEOUT_MS 5000

typedef struct tg_recording_opts {
  /* Enable: the serialised TraceConfig (borrowed for tg_recording_start;
   * its deferred_start and duration_ms are followed). Ignored with
   * |attach_key|. */
  const uint8_t *config;
  size_t config_len;
  /* Attach to the detached session of this key instead of enabling one
   * (copied). */
  const char *attach_key;
  /* With |attach_key| and a |config|: when the service refuses the Attach
   * (no session is detached under the key), enable |config| instead (the
   * config is copied until then). For an owner that keeps one long-lived
   * session under a key of its own and takes it back after a restart
   * (tracegate-collector's rings). */
  bool enable_if_absent;
  /* Detach under this key right after enabling, and end as DETACHED
   * (copied). */
  const char *detach_key;
  /* The key tg_recording_rebind() attaches with (copied); NULL: no
   * rebind. A relay keeps the session under it when the link drops. */
  const char *resume_key;
  /* write_into_file: the output fd, passed to the service (ownership
   * passes to the recording at tg_recording_start, closed on error).
   * -1: none. */
  int fd;
  /* Read the trace over the connection: first_read_ms after tracing
   * starts, then every read_period_ms while tracing (at once after a read
   * of TG_REC_READ_AGAIN_BYTES or more, or a quarter of the smallest
   * buffer; sooner than the period when the reads' rate says so),
   * then until a read comes back empty once tracing ended. A config with
   * a DISCARD buffer is read only then, as Perfetto reads a session
   * without write_into_file: reads while tracing would free the buffer's
   * room and it would keep more than its size. */
  bool stream;
  uint32_t read_period_ms;
  /* When the first read comes; 0: TG_REC_DEFAULT_FIRST_READ_MS, at most
   * read_period_ms. A value given is kept, also beyond the period (a
   * fleet's start defers first reads: tg_recording_read_first_now()). */
  uint32_t first_read_ms;
  /* No ReadBuffers at all, not even to drain after the end, until
   * tg_recording_release_reads(): for an owner that has its own bytes to
   * write ahead of the trace's (a fleet's merged file takes a host's clock
   * estimate before its first packet). The reads that came due meanwhile
   * go out at the release. The drain's guard runs all the same. */
  bool hold_reads;
  /* GetTraceStats every this often while tracing (on_stats); 0: never. */
  uint32_t stats_period_ms;
  /* Stop after this long from the start (client side; e.g. -t with
   * attach); 0: not from here. */
  uint64_t stop_after_ms;
  /* The session is expected to end by its duration (stop_after_ms, else
   * the config's duration_ms) + grace_ms: past that the recording stops
   * it, and fails if it still has not ended deadline_stop_ms later. No
   * deadline for a session without a duration. */
  uint64_t grace_ms;         /* 0: TG_REC_DEFAULT_GRACE_MS */
  uint32_t deadline_stop_ms; /* 0: TG_REC_DEFAULT_DEADLINE_STOP_MS */
  /* Stopping and draining each end within this; 0: the default. */
  uint32_t guard_ms;
  /* The connection goes through a tracegate-relay that numbers the
   * ReadBuffers replies of the resume key (TracegateRelay bound on it, the
   * key set): acknowledge them (TracegateRelay.Ack) every few reads, and
   * after a rebind ask for what the lost link swallowed (Resume) before
   * reading on, so that every packet arrives exactly once. */
  bool replay;
} tg_recording_opts_t;

/* What replays after rebinds brought back, and what they could not. */
typedef struct tg_rec_replay_stats {
  unsigned resumes;         /* Resume calls answered */
  uint64_t frames, bytes;   /* ReadBuffers replies sent again */
  uint64_t lost_frames;     /* the relay's window no longer held them */
  uint64_t lost_bytes;
  uint64_t lost_packets;    /* packets cut by those (at least 1 each) */
  bool relay_restarted;     /* a Resume found no window: a new relay */
} tg_rec_replay_stats_t;

typedef struct tg_recording_cbs {
  /* Every state change, as it happens (may run inside a call). Optional. */
  void (*on_state)(tg_recording_t *r, tg_rec_state_t from, tg_rec_state_t to);
  /* One packet read (|p|, |n| borrowed for the call). Return 0, or a
   * negative error to fail the recording with it. Required when
   * streaming. */
  int (*on_packet)(tg_recording_t *r, const uint8_t *p, size_t n);
  /* The attached session's TraceConfig (borrowed for the call). Return
   * 0 to follow the session, 1 to give it back (detach again under the
   * key and end as DETACHED), or a negative error to fail. Optional. */
  int (*on_attached)(tg_recording_t *r, const Perfetto__Protos__TraceConfig *cfg);
  /* A GetTraceStats answer (periodic, after a rebind, or |final|); |st| is
   * NULL when the call failed (|msg| says why). Optional. */
  void (*on_stats)(tg_recording_t *r, int status, const char *msg,
                   const Perfetto__Protos__TraceStats *st, bool final);
  /* tg_recording_rebind(): 0 once re-attached (the recording goes on),
   * else why not (UNBOUND again: rebind again or fail it). Optional. */
  void (*on_rebound)(tg_recording_t *r, int status, const char *msg);
  /* The end: status 0 (DONE or DETACHED) or a negative error and
   * |reason| (a sentence, e.g. "cannot stop tracing: ..."). DONE with a
   * |reason|: the trace is whole, but the session was not freed (the
   * reason says why): a service that keeps sessions past their
   * connection (a disconnect lease) holds it until the lease runs out.
   * Required. */
  void (*on_end)(tg_recording_t *r, int status, const char *reason);
} tg_recording_cbs_t;

/* A recording on |loop| (its timers), whose decisions read |clock|: the
 * reads' pace (the rate a window of reads measured) and how long a call
 * has gone unanswered (tg_recording_waiting_ms). |clock| is required, as
 * for the other engines (clone_read.h): the owner's real one (the loop's,
 * common/clock_loop.h, or tg_clock_monotonic), a simulated one in tests.
 * The timers stay the loop's: they only wake the recording, which
 * decides from its state and |clock|. |clock| and |cbs| must outlive it.
 * Returns NULL when out of memory. */
tg_recording_t *tg_recording_new(uv_loop_t *loop, const tg_clock_t *clock,
                                 const tg_recording_cbs_t *cbs, void *data);
/* Frees it: its timers close on the loop, which must run on. Calls in
 * flight are ignored when they answer. Safe inside its callbacks. */
void tg_recording_free(tg_recording_t *r);
void *tg_recording_data(const tg_recording_t *r);

/* Starts on the bound connection |c| (borrowed until unbind or the end).
 * Returns 0, or a negative error (no callback runs; the fd is closed). */
int tg_recording_start(tg_recording_t *r, tg_consumer_t *c,
                       const tg_recording_opts_t *opts);
/* Whether to read the trace over the connection (see opts.stream): for
 * on_attached, once the session's config says where its trace goes. */
void tg_recording_set_stream(tg_recording_t *r, bool stream);
/* Stops tracing (flush, then DisableTracing); before tracing began or
 * while not bound, as soon as it can. */
void tg_recording_stop(tg_recording_t *r);
/* Once over (DONE, DETACHED, FAILED, even before on_end ran): the
 * reason on_end gets, "" when none; owned by |r|. */
const char *tg_recording_end_reason(const tg_recording_t *r);
/* Fails the recording with |reason| (on_end runs from the loop). With
 * |end_session| the session is ended first (FreeBuffers) rather than
 * left behind, where the connection still allows; failures the recording
 * finds itself do the same. */
void tg_recording_fail(tg_recording_t *r, bool end_session, const char *reason);
/* The connection is going or gone (call it from its on_close at the
 * latest): forget it; calls in flight on it are ignored. The binding
 * goes UNBOUND, the lifecycle stays and the deadline runs on; the owner
 * then rebinds it (when tg_recording_resumable() says so) or fails it.
 * In FREEING the trace is whole: it ends DONE, saying that the session
 * was not freed; in FAILING it ends FAILED. */
void tg_recording_unbind(tg_recording_t *r);
/* Re-attaches by the resume key on the bound connection |c|; on_rebound
 * says how it went. Returns 0, or a negative error (no callback). */
int tg_recording_rebind(tg_recording_t *r, tg_consumer_t *c);

tg_rec_state_t tg_recording_state(const tg_recording_t *r);
const char *tg_recording_state_name(tg_rec_state_t s);
tg_rec_binding_t tg_recording_binding(const tg_recording_t *r);
const char *tg_recording_binding_name(tg_rec_binding_t b);
/* Transitions the tables refused: an engine bug, logged as an error. */
uint64_t tg_recording_bad_transitions(const tg_recording_t *r);
/* Whether the service said the session ended. */
bool tg_recording_ended(const tg_recording_t *r);
/* Whether the recording failed because its session did not end by its
 * deadline (duration + grace, then the stop's own wait). */
bool tg_recording_deadline_failed(const tg_recording_t *r);
/* Whether this recording may be resumed after losing its connection. */
bool tg_recording_resumable(const tg_recording_t *r);
/* How long a read or stats call has gone unanswered at |now_ms| (a
 * reading of the recording's clock); 0 when none is in flight. */
uint64_t tg_recording_waiting_ms(const tg_recording_t *r, uint64_t now_ms);
/* ReadBuffers calls answered so far (each one whole, or failed, or cut). */
uint64_t tg_recording_reads(const tg_recording_t *r);
/* A streaming recording that is tracing and has not read yet reads now
 * (from the loop), instead of at first_read_ms; then at the period. */
void tg_recording_read_first_now(tg_recording_t *r);
/* Ends hold_reads: a read that came due while held goes out now. */
void tg_recording_release_reads(tg_recording_t *r);
/* Reads cut short by a lost connection whose content no replay made
 * whole: what they carried is lost. */
unsigned tg_recording_reads_cut(const tg_recording_t *r);
/* Of those, the ones that did carry data: a cut read that the service's
 * counters (bytes_read, asked after the rebind) show never took anything
 * out of the buffers is not counted; one that cannot be checked is. */
unsigned tg_recording_reads_lost(const tg_recording_t *r);
void tg_recording_replay_stats(const tg_recording_t *r,
                               tg_rec_replay_stats_t *out);
/* Whether |cfg| (NULL: none) asks for CLONE_SNAPSHOT triggers. Such a
 * session is not read while it traces: each snapshot is a copy of what
 * its buffers hold when the trigger fires, and a read would have emptied
 * them of all it took (perfetto_cmd too reads such a session at its end). */
bool tg_recording_clone_snapshot_mode(const Perfetto__Protos__TraceConfig *cfg);

/* The attached session's TraceConfig (NULL before, or when enabling). */
const Perfetto__Protos__TraceConfig *tg_recording_config(const tg_recording_t *r);

#endif /* TRACEGATE_CONSUMER_RECORDING_H */
