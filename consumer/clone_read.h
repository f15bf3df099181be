/* The read-out engine: one clone of a tracing session, from the
 * CloneSession request to FreeBuffers, on a connection its caller owns;
 * or a short session of its own, from EnableTracing with a duration to
 * FreeBuffers. `tracegate record --clone` (and --save-for-bugreport), the
 * snapshots of `tracegate record` with CLONE_SNAPSHOT triggers and every
 * host of a collector's snapshot run the first; the collector's perf boost
 * (a window sampled faster after a trigger) runs the second. What they do
 * with the packets (a file, the merge) and how they say a failure stays
 * with them.
 *
 *   CONNECTING --start--> CLONING --cloned--> READING
 *   CONNECTING --start_session--> TRACING --the session ended--> READING
 *   READING --a read that brings nothing new, or max_reads--> STATS
 *   (GetTraceStats, when asked for) --> FREEING (FreeBuffers) --freed, or
 *   not--> DONE
 *
 * A failure of the clone, of the session or of a read ends FAILED: at once, or through
 * FREEING when free_on_error asks for the clone to be freed on a
 * connection that goes on. Statistics that do not come leave the loss
 * unknown (on_stats says so) and the engine goes on to FREEING; a
 * FreeBuffers that fails still ends DONE (the clone was read, and the
 * service frees it with the connection): tg_clone_read_free_status() tells.
 *
 * Every change of state goes through one setter against the table
 * tg_clone_read_transition_ok() spells out below, under common/fsm.h's
 * policy. A transition it refuses is a bug (the engine's or its caller's,
 * such as a second start): it is not made, it is counted
 * (tg_clone_read_bad_transitions) and logged as an error: a library in a
 * daemon does not abort it for a caller's slip, and goes on in a state
 * its table explains.
 *
 * Time: the caller's clock (common/clock.h). The engine notes when its
 * connection last answered (any reply, any packet); tg_clone_read_check(),
 * called from the caller's own timer, cuts a clone silent for timeout_ms
 * in any live state (run_ms more while TRACING: the session's own
 * duration, when the service says nothing), and one that reads under
 * min_rate bytes a second
 * over timeout_ms (clone_rate.h), so that the collector's clone_timeout
 * and clone_min_rate are judged in this one place on any clock.
 *
 * Callbacks run from the loop (the consumer library's replies), never
 * inside the engine call that caused them; after DONE or FAILED none runs
 * again. The engine never opens, closes or frees its connection, and
 * ignores the replies that reach it once it is over (a reply after a cut
 * or a cancel). It must outlive its connection's pending callbacks: the
 * consumer library runs them all before the connection's on_close.
 */
#ifndef TRACEGATE_CONSUMER_CLONE_READ_H
#define TRACEGATE_CONSUMER_CLONE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "consumer/clone_rate.h"
#include "consumer/consumer.h"

typedef struct tg_clone_read tg_clone_read_t;

typedef enum tg_clone_state {
  TG_CLONE_CONNECTING, /* the caller's connection is not bound yet */
  TG_CLONE_CLONING,    /* CloneSession sent */
  TG_CLONE_TRACING,    /* EnableTracing sent: the session runs its duration */
  TG_CLONE_READING,    /* ReadBuffers, one after the other */
  TG_CLONE_STATS,      /* GetTraceStats sent */
  TG_CLONE_FREEING,    /* FreeBuffers sent */
  TG_CLONE_DONE,       /* the clone was read */
  TG_CLONE_FAILED,
  TG_CLONE_STATE_COUNT
} tg_clone_state_t;

/* Whether the diagram has an arrow |from| -> |to|; written out:
 *   CONNECTING -> CLONING, TRACING, FAILED
 *   CLONING    -> READING, FAILED      TRACING -> READING, FAILED
 *   READING    -> STATS, FREEING, FAILED
 *   STATS      -> FREEING, DONE, FAILED
 *   FREEING    -> DONE, FAILED
 * DONE and FAILED are final. STATS -> DONE and FREEING -> DONE are also a
 * cancel of a clone read whole (tg_clone_read_cancel); FREEING -> FAILED
 * ends a failed read freed under free_on_error, or a cut. A state to
 * itself is no transition. */
bool tg_clone_read_transition_ok(tg_clone_state_t from, tg_clone_state_t to);
/* "connecting", "cloning", ... (a static string; "?" out of range). */
const char *tg_clone_state_name(tg_clone_state_t st);

/* The consumer calls the engine makes: the consumer library's
 * (tg_clone_read_consumer_ops), or a test's. */
typedef struct tg_clone_ops {
  int (*clone)(tg_consumer_t *c, const tg_consumer_clone_args_t *args,
               tg_consumer_done_cb cb, void *ctx);
  int (*read)(tg_consumer_t *c, tg_consumer_packet_cb on_packet,
              tg_consumer_done_cb on_done, void *ctx);
  int (*stats)(tg_consumer_t *c, tg_consumer_stats_cb cb, void *ctx);
  int (*free)(tg_consumer_t *c, tg_consumer_done_cb cb, void *ctx);
  /* tg_consumer_enable_tracing's (for tg_clone_read_start_session). */
  int (*enable)(tg_consumer_t *c, const uint8_t *config, size_t len, int fd,
                tg_consumer_done_cb on_ended, void *ctx);
} tg_clone_ops_t;

extern const tg_clone_ops_t tg_clone_read_consumer_ops;

typedef struct tg_clone_read_opts {
  bool stats;         /* ask GetTraceStats once the clone is read */
  bool free_on_error; /* a failed read still frees the clone (the
                       * connection goes on to other work) */
  unsigned max_reads; /* ReadBuffers at most; 0: until one brings nothing */
  uint64_t timeout_ms; /* silence that cuts the clone; 0: none */
  uint64_t min_rate;   /* bytes a second over timeout_ms while reading;
                        * 0: no floor (needs timeout_ms) */
  uint64_t run_ms;     /* TRACING: the session's duration, silence that
                        * does not count against timeout_ms */
  const tg_clone_ops_t *ops; /* NULL: tg_clone_read_consumer_ops */
} tg_clone_read_opts_t;

typedef struct tg_clone_read_cbs {
  /* Every change of state, as made (optional). */
  void (*on_state)(tg_clone_read_t *e, tg_clone_state_t from,
                   tg_clone_state_t to);
  /* One whole packet of the clone (bytes borrowed for the call): 0 to go
   * on, or a negative error that fails the read. Required. */
  int (*on_packet)(tg_clone_read_t *e, const uint8_t *p, size_t n);
  /* A read answered whole, with the packets it brought: 0 to go on, or a
   * negative error that fails the read (optional). */
  int (*on_progress)(tg_clone_read_t *e, uint64_t packets);
  /* GetTraceStats answered: |st| and its folded |loss|
   * (tg_clone_loss_fold), or |status| and |msg| with |st| NULL when the
   * loss is unknown (optional). */
  void (*on_stats)(tg_clone_read_t *e, int status, const char *msg,
                   const Perfetto__Protos__TraceStats *st, uint64_t loss);
  /* DONE (|status| 0) or FAILED (the first failure's status and message;
   * tg_clone_read_failed_in() says at which step). Not after a cut or a
   * cancel: their caller knows. Required. */
  void (*on_end)(tg_clone_read_t *e, int status, const char *msg);
} tg_clone_read_cbs_t;

#define TG_CLONE_MSG_MAX 512

/* Fields are the engine's; read them through the functions below. */
struct tg_clone_read {
  tg_clone_state_t st; /* written only by the setter (clone_read.c) */
  uint64_t bad_transitions;
  tg_clone_state_t failed_in; /* the state the first failure ended */
  int status;                 /* the first failure, 0 none */
  int free_status;            /* FreeBuffers' answer */
  char msg[TG_CLONE_MSG_MAX];
  char free_msg[TG_CLONE_MSG_MAX];
  tg_consumer_t *c;          /* borrowed, from start */
  const tg_clock_t *clock;   /* borrowed */
  const tg_clone_read_cbs_t *cbs; /* borrowed */
  tg_clone_read_opts_t o;
  const char *name; /* borrowed, for the debug log */
  void *data;       /* the caller's */
  uint64_t packets, bytes; /* handed to on_packet */
  uint64_t read_packets;   /* ... by the read in flight */
  unsigned reads;
  uint64_t heard_ms; /* the connection's last answer, or the start */
  tg_clone_rate_t rate; /* bytes over time from the clone's answer */
};

/* In CONNECTING, the silence counting from now. |clock|, |cbs| and |name|
 * (NULL: none) are borrowed for the engine's life. */
void tg_clone_read_init(tg_clone_read_t *e, const tg_clock_t *clock,
                        const tg_clone_read_opts_t *opts,
                        const tg_clone_read_cbs_t *cbs, const char *name,
                        void *data);

/* The connection |c| is bound: CloneSession with |args| (borrowed for the
 * call), -> CLONING. Returns 0, or a negative error: not sent (the engine
 * stays in CONNECTING), or -EINVAL out of CONNECTING (a refused
 * transition, counted). No callback runs for an error. */
int tg_clone_read_start(tg_clone_read_t *e, tg_consumer_t *c,
                        const tg_consumer_clone_args_t *args);

/* The connection |c| is bound: EnableTracing with the serialised
 * TraceConfig |config| (|len| bytes, borrowed for the call), which should
 * carry a duration_ms: its answer comes when the session ends, and the
 * engine then reads it out as a clone (-> TRACING). Returns as
 * tg_clone_read_start(). A session that fails or is refused ends FAILED
 * with failed_in TRACING; nothing is freed (the service keeps no buffers
 * of a session it refused; one it failed goes with the connection).
 * Ops without an |enable|: -EOPNOTSUPP, the state untouched. */
int tg_clone_read_start_session(tg_clone_read_t *e, tg_consumer_t *c,
                                const uint8_t *config, size_t len);

/* The caller ends the clone (its connection goes, the caller failed it):
 * a clone read whole (STATS, FREEING, no failure noted on the way) ends
 * DONE, any other live one FAILED with |status| and |msg| (unless a
 * failure came first). No callback; later replies are ignored. Nothing
 * when over. Returns the state it ended in. */
tg_clone_state_t tg_clone_read_cancel(tg_clone_read_t *e, int status,
                                      const char *msg);

/* Why tg_clone_read_check() cut a clone. */
typedef enum tg_clone_cut {
  TG_CLONE_CUT_NONE,
  TG_CLONE_CUT_SILENT, /* no answer for timeout_ms in |step| */
  TG_CLONE_CUT_SLOW,   /* under min_rate while reading */
} tg_clone_cut_t;

typedef struct tg_clone_verdict {
  tg_clone_cut_t cut;
  tg_clone_state_t step; /* the state it was cut in */
  uint64_t bytes;        /* SLOW: sent over |span_ms| */
  int64_t span_ms;
} tg_clone_verdict_t;

/* A look at the clone on the caller's clock (call it from a timer, at a
 * tenth of timeout_ms or so): a live clone silent for timeout_ms, or
 * reading under min_rate (clone_rate.h), is cut: FAILED with TG_ETIMEDOUT,
 * no callback, and the verdict says why; the caller closes its
 * connection. Nothing is cut without timeout_ms, nor once over. */
tg_clone_verdict_t tg_clone_read_check(tg_clone_read_t *e);

/* The sum of what the session's writers could not put in its buffers
 * (chunks_discarded, patches_failed, abi_violations,
 * trace_writer_packet_loss over every buffer); 0 for NULL. The data a
 * ring overwrote is what a ring is for, not a loss. */
uint64_t tg_clone_loss_fold(const Perfetto__Protos__TraceStats *st);

static inline tg_clone_state_t tg_clone_read_state(const tg_clone_read_t *e) {
  return e->st;
}
static inline bool tg_clone_read_over(const tg_clone_read_t *e) {
  return e->st == TG_CLONE_DONE || e->st == TG_CLONE_FAILED;
}
/* Whether every packet was read and no failure noted: only the loss
 * counters and the freeing are left, or nothing (DONE). A caller that
 * ends the engine then has its data whole (tg_clone_read_cancel ends it
 * DONE). */
static inline bool tg_clone_read_whole(const tg_clone_read_t *e) {
  return !e->status && (e->st == TG_CLONE_STATS ||
                        e->st == TG_CLONE_FREEING || e->st == TG_CLONE_DONE);
}
/* The state the first failure ended (meaningful once FAILED). */
static inline tg_clone_state_t tg_clone_read_failed_in(const tg_clone_read_t *e) {
  return e->failed_in;
}
/* FreeBuffers' answer: 0, or its failure with |msg| (NULL: none). */
static inline int tg_clone_read_free_status(const tg_clone_read_t *e,
                                            const char **msg) {
  if (msg) *msg = e->free_msg;
  return e->free_status;
}
static inline uint64_t tg_clone_read_bad_transitions(const tg_clone_read_t *e) {
  return e->bad_transitions;
}
static inline uint64_t tg_clone_read_heard_ms(const tg_clone_read_t *e) {
  return e->heard_ms;
}

#endif /* TRACEGATE_CONSUMER_CLONE_READ_H */
