/* The link to one remote host: the one state machine that says whether
 * the host is connecting, up, being reconnected or finished, and every
 * time decision about it (the connect guard, the heartbeat, the dead-link
 * timeout, the reconnection backoff and its deadline).
 *
 * It is pure policy: no I/O, no libuv, no clock of its own. Every call
 * that needs the time is given |now_ms| (the owner's loop time, or a
 * test's simulated one); tg_link_deadline() says when the link next has
 * something to decide, and the owner arms one timer for that moment and
 * calls tg_link_due() when it fires. The owner does what the answer says
 * (send a heartbeat, close a dead connection, dial again) and reports
 * what happened back through the event calls below. Single-threaded: the
 * owner's loop thread makes every call.
 *
 *   CONNECTING --bound--> PREPARING --up--> UP
 *        UP --dead / peer closed--> DROPPING --lost--> BACKOFF
 *   BACKOFF --due: ATTEMPT--> RECONNECTING --bound--> RESUMING --resumed--> UP
 *   RECONNECTING, RESUMING --attempt dropped--> DROPPING --attempt_failed-->
 *        BACKOFF, or past the reconnection deadline: the owner fails
 *   any live state --close--> CLOSING --finish--> DONE
 *   any state --close(fail)--> FAILING --finish--> FAILED
 *
 * State       | what is true                             | timers (tg_link_deadline)
 * ------------|------------------------------------------|---------------------------
 * CONNECTING  | first connection: dial, TLS, bind         | connect guard
 * PREPARING   | first connection bound; the relay's       | connect guard
 *             | preparation (info, clocks, key) runs      |
 * UP          | the recording runs on the connection      | heartbeat, dead link
 * DROPPING    | the connection is going (|drop| says why);| none
 *             | the owner decides once it is released     |
 * BACKOFF     | no connection; the next attempt waits     | backoff
 * RECONNECTING| an attempt: dial, TLS, bind               | connect guard
 * RESUMING    | an attempt bound: preparing, re-attaching | connect guard
 * CLOSING     | ending well: the connection closes        | none
 * FAILING     | ending with an error (the owner's reason) | none
 * DONE        | finished, the trace is whole              | none
 * FAILED      | finished with an error                    | none
 *
 * Where a dead link is detected (all end in DROPPING):
 *  1. the heartbeat: on a relay, a ClockSync every period; nothing heard
 *     for dead_link_ms and tg_link_due() answers TG_LINK_DUE_DEAD, even
 *     while TCP looks alive;
 *  2. without a relay (no ClockSync), the same answer when a read or stats
 *     call has waited, and nothing was heard, for dead_link_ms;
 *  3. the kernel: TCP keepalive and TCP_USER_TIMEOUT set from the same
 *     timeout on every TLS socket (ipc/net_addr_dial.h,
 *     tg_net_set_dead_link_timeout); the socket errors, the connection
 *     closes, the owner reports TG_LINK_DROP_PEER;
 *  4. the relay's side: once a client heartbeats, the relay's idle timer
 *     (relay/bridge.h, heartbeat_idle_ms) ends a silent link and detaches
 *     its session under the resume key, for the reconnection to take.
 */
#ifndef TRACEGATE_CONSUMER_FLEET_LINK_H
#define TRACEGATE_CONSUMER_FLEET_LINK_H

#include <stdbool.h>
#include <stdint.h>

/* Connecting and preparing: ssh has no timeout of its own. */
#define TG_LINK_CONNECT_GUARD_MS 20000
#define TG_LINK_BACKOFF_MIN_MS 100
#define TG_LINK_BACKOFF_MAX_MS 5000
/* The heartbeat's period: a quarter of the dead-link timeout, so that a
 * few are missed before the link is declared dead, within these bounds. */
#define TG_LINK_HB_MAX_MS 1000
#define TG_LINK_HB_MIN_MS 100
/* tg_link_deadline(): nothing to decide. */
#define TG_LINK_NEVER UINT64_MAX

typedef enum tg_link_state {
  TG_LINK_CONNECTING,
  TG_LINK_PREPARING,
  TG_LINK_UP,
  TG_LINK_DROPPING,
  TG_LINK_BACKOFF,
  TG_LINK_RECONNECTING,
  TG_LINK_RESUMING,
  TG_LINK_CLOSING,
  TG_LINK_FAILING,
  TG_LINK_DONE,
  TG_LINK_FAILED,
} tg_link_state_t;

/* DROPPING: why the connection is going. */
typedef enum tg_link_drop {
  TG_LINK_DROP_PEER,    /* it closed: the peer, a socket error, a timeout */
  TG_LINK_DROP_DEAD,    /* tg_link_due() found it dead */
  TG_LINK_DROP_ATTEMPT, /* the owner gave up a reconnection attempt */
} tg_link_drop_t;

/* What tg_link_due() asks of the owner. */
typedef enum tg_link_due {
  TG_LINK_DUE_NONE,
  TG_LINK_DUE_HEARTBEAT, /* send one; tg_link_heartbeat_sent() if it went */
  TG_LINK_DUE_DEAD,      /* the link is DROPPING (DEAD): close it */
  TG_LINK_DUE_GUARD,     /* the attempt took too long: drop it, or fail */
  TG_LINK_DUE_ATTEMPT,   /* the backoff is over: tg_link_attempt_begin() */
} tg_link_due_t;

typedef struct tg_link_timing {
  uint64_t dead_link_ms;     /* silent this long: dead (> 0) */
  uint64_t reconnect_ms;     /* 0: a lost link is not reconnected */
  uint64_t connect_guard_ms; /* 0: TG_LINK_CONNECT_GUARD_MS */
  /* The heartbeat's longest period (it is a quarter of dead_link_ms, at
   * least TG_LINK_HB_MIN_MS and at most this); 0: TG_LINK_HB_MAX_MS. An
   * owner holding many idle links raises it (each beat is a round trip),
   * keeping it well under the relay's idle timeout. */
  uint64_t heartbeat_max_ms;
} tg_link_timing_t;

typedef struct tg_link tg_link_t;

/* Every change of state, after it happened (|why| as given to the
 * transition, valid during the call). */
typedef void (*tg_link_state_cb)(tg_link_t *l, tg_link_state_t from,
                                 const char *why);

struct tg_link {
  tg_link_state_t state;  /* written only by tg_link_set_state() */
  tg_link_drop_t drop;    /* DROPPING: why */
  tg_link_state_t drop_from; /* DROPPING: the state the link left */
  tg_link_timing_t tm;
  uint64_t hb_period_ms;
  /* UP: the peer answers heartbeats (a relay); else silence is judged by
   * the recording's unanswered calls. */
  bool heartbeat;
  bool hb_pending; /* one heartbeat in flight at a time */
  /* Absolute deadlines in the owner's milliseconds; 0: not armed. */
  uint64_t guard_ms; /* CONNECTING..RESUMING: the attempt's end */
  uint64_t next_hb_ms; /* UP: the next heartbeat (or silence check) */
  uint64_t retry_ms;   /* BACKOFF: the next attempt */
  uint64_t deadline_ms; /* reconnecting: no attempt begins after it */
  uint64_t heard_ms;    /* the last sign of life on the link */
  uint64_t lost_at_ms;  /* when the current outage began */
  uint32_t backoff_ms;  /* the wait after the next failed attempt */
  unsigned attempts;    /* of this connection or this outage */
  unsigned reconnects;  /* outages survived */
  bool outage;          /* lost, not yet resumed or ended */
  uint64_t down_ms;     /* the outages' total length, the last one
                         * counted when it ends (resumed or given up) */
  const char *name;     /* borrowed, for the debug log */
  uint64_t bad_transitions; /* refused by the table (a bug: logged) */
  tg_link_state_cb on_state;
  void *data; /* owner's */
};

/* A link in CONNECTING, not started (no deadline until
 * tg_link_attempt_begin()). |name| and |cb| (may be NULL) are borrowed for
 * the link's life. */
void tg_link_init(tg_link_t *l, const tg_link_timing_t *tm, const char *name,
                  tg_link_state_cb cb, void *data);

/* Whether the diagram above has an arrow |from| -> |to|; written out:
 *   CONNECTING   -> PREPARING, DROPPING     PREPARING  -> UP, DROPPING
 *   UP           -> DROPPING                DROPPING   -> BACKOFF
 *   BACKOFF      -> RECONNECTING            RECONNECTING -> RESUMING, DROPPING
 *   RESUMING     -> UP, DROPPING            CLOSING    -> DONE, FAILED
 *   FAILING      -> FAILED
 * and every state but DONE, FAILED and those two ending ones -> CLOSING;
 * every state but DONE, FAILED and FAILING -> FAILING (a close that went
 * wrong fails too). DONE and FAILED are final. A state to itself is no
 * transition (tg_link_set_state ignores it). */
bool tg_link_transition_ok(tg_link_state_t from, tg_link_state_t to);

/* The one transition: logs "who: from -> to: why" at debug level and
 * tells on_state. Clears the deadlines the new state does not run. The
 * event calls below use it; owners call it for CLOSING, FAILING, DONE and
 * FAILED. A transition tg_link_transition_ok() refuses is a bug of the
 * owner's: under common/fsm.h's policy it is not made (nor told), counted
 * (bad_transitions) and logged as an error. */
void tg_link_set_state(tg_link_t *l, tg_link_state_t to, const char *why);

/* --- events, reported by the owner ---------------------------------------- */

/* A connection attempt begins (the first, or one the backoff allowed):
 * BACKOFF -> RECONNECTING; the connect guard starts. */
void tg_link_attempt_begin(tg_link_t *l, uint64_t now_ms);
/* The attempt's connection is bound: CONNECTING -> PREPARING, RECONNECTING
 * -> RESUMING. */
void tg_link_bound(tg_link_t *l);
/* The recording started on the first connection: -> UP. |heartbeat|: the
 * peer answers them (a relay). */
void tg_link_up(tg_link_t *l, uint64_t now_ms, bool heartbeat);
/* The session is back on a new connection: RESUMING -> UP. Returns how
 * long the outage lasted (also added to down_ms, and a reconnect
 * counted); from a state without that arrow, the move is refused
 * (counted in bad_transitions), nothing else counted, and 0 returned. */
uint64_t tg_link_resumed(tg_link_t *l, uint64_t now_ms, bool heartbeat);
/* A sign of life: a packet, an answer of any kind. Cheap: it arms
 * nothing (the next tg_link_due() sees it). */
static inline void tg_link_heard(tg_link_t *l, uint64_t now_ms) {
  l->heard_ms = now_ms;
}
void tg_link_heartbeat_sent(tg_link_t *l);
/* The heartbeat in flight came back (or went with its connection). */
void tg_link_heartbeat_done(tg_link_t *l);
/* The connection is going: a live state -> DROPPING. Ignored in DROPPING,
 * CLOSING, FAILING and when finished. */
void tg_link_drop(tg_link_t *l, tg_link_drop_t cause, const char *why);
/* The lost link's connection is released and the session can be resumed:
 * -> BACKOFF; the outage counts from the last sign of life, the deadline
 * from now. */
void tg_link_lost(tg_link_t *l, uint64_t now_ms, const char *why);
/* A reconnection attempt failed, its connection released: -> BACKOFF and
 * 0, or -ETIMEDOUT at or past the deadline (the owner fails the link). */
int tg_link_attempt_failed(tg_link_t *l, uint64_t now_ms, const char *why);
/* The link ends (the owner gave up, or the run ended) in the outage
 * tg_link_lost() began: its length is added to down_ms as a survived
 * one's is, though it adds no reconnection. Nothing outside an outage. */
void tg_link_outage_end(tg_link_t *l, uint64_t now_ms);

/* --- time ------------------------------------------------------------------- */

/* When tg_link_due() next has something to decide; TG_LINK_NEVER: never
 * until another event. */
uint64_t tg_link_deadline(const tg_link_t *l);
/* What is due at |now_ms|. |waiting_ms|: how long the recording's oldest
 * call has gone unanswered (0: none), for a link without heartbeats. A
 * due deadline is consumed: each answer is given once. */
tg_link_due_t tg_link_due(tg_link_t *l, uint64_t now_ms, uint64_t waiting_ms);

/* --- questions -------------------------------------------------------------- */

const char *tg_link_state_name(tg_link_state_t s);
static inline bool tg_link_finished(const tg_link_t *l) {
  return l->state == TG_LINK_DONE || l->state == TG_LINK_FAILED;
}
/* Connecting, or preparing, for the first time. */
static inline bool tg_link_starting(tg_link_state_t s) {
  return s == TG_LINK_CONNECTING || s == TG_LINK_PREPARING;
}
/* Between a lost link and the session back: backing off, or an attempt
 * under way (also while such an attempt's connection drops). */
bool tg_link_reconnecting(const tg_link_t *l);

#endif /* TRACEGATE_CONSUMER_FLEET_LINK_H */
