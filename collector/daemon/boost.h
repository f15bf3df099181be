/* A snapshot's perf boost (docs/collector.md, "CPU profiles in the
 * rings"): with perf_boost_window set, every host a snapshot clones also
 * samples linux.perf at perf_boost_frequency for the window, in a session
 * of its own on a connection of its own, and that session's packets are
 * merged into the same snapshot on the host's machine. The ring holds the
 * time before the trigger at its own rate; the boost sharpens what comes
 * after it.
 *
 * A host's boost, in order (one state per host, bh_state_t in boost.c,
 * with its table and one setter under common/fsm.h's policy):
 *   DIAL --on_ready--> RUN --the engine done, or a failure--> CLOSING
 *   --its transport released--> RELEASED
 * (or at once HELD, BUDGET, or RELEASED when it cannot be dialed). While
 * RUN the read-out engine (consumer/clone_read.h) does the work: a session
 * of its own (EnableTracing with duration_ms = the window; a
 * QueryServiceState beside it asks whether any producer offers
 * linux.perf), read out once it ends, its loss counters, FreeBuffers.
 * boost.c keeps the policy: whether a boost starts, its deadline, its
 * cap, what a packet becomes, the row.
 * Any error closes the connection and fails the boost, never the host nor
 * the snapshot: the ring's clone is stored whatever the boost does. A
 * host's boosts are one at a time: a snapshot that finds one running on a
 * host (another snapshot's window) starts none there, and its row says
 * which snapshot holds the sharp window ("held").
 *
 * Budget (boost_budget.h): a boost starts only where the host's share of
 * perf_boost_budget_window and the shard's hosts' share together have
 * room for its whole window; else the host's row says "budget", which
 * one, what it used and when it refills. Each boost started is charged
 * its window at its start, cut to its release if that came first.
 *
 * Bounds: a boost ends by perf_boost_window + clone_timeout after the
 * trigger (then it fails, its connection closed), and with the
 * snapshot's own deadline; the bytes it merges are at most
 * HOST_CAP_FACTOR times perf_boost_buffer (boost.c).
 *
 * Its sequences are its own: the service numbers a session's sequences
 * from 1, so the boost's would meet the ring's on the host's machine;
 * each boost packet gets COLL_BOOST_SEQ_BASE added to its
 * trusted_packet_sequence_id (a field appended: the last one wins) before
 * the merge moves it into the host's range.
 *
 * Its packets go into the snapshot's file and its end lets the snapshot
 * finish through coll_t.on (coll_events_t's boost_packet,
 * boost_released): boost.c never calls snap.c, which calls it.
 *
 * Owns: the boost's TraceConfig (coll_t.boost, made once from the flight
 * config) and each snapshot's coll_boosts_t. Runs on the loop thread.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_BOOST_H
#define TRACEGATE_COLLECTOR_DAEMON_BOOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/snap.h"

typedef struct coll_boosts coll_boosts_t;

/* How a boost ended: coll_counts_t.perf_boosts' index, and the metric's
 * state label (coll_boost_state_name). */
typedef enum coll_boost_state {
  COLL_BOOST_SHARP,
  COLL_BOOST_FAILED,
  COLL_BOOST_HELD,
  COLL_BOOST_BUDGET, /* none started: over a budget */
  COLL_BOOST_STATE_COUNT
} coll_boost_state_t;
/* "sharp", "failed", "held", "budget" (the row's state too); "?" out of
 * range. */
const char *coll_boost_state_name(coll_boost_state_t st);

/* From the flight config (c->flight) and perf_boost_*: the boost's
 * TraceConfig in c->boost, or nothing when perf_boost_window is 0.
 * Prints what is wrong to stderr and returns -1 (a flight config without
 * linux.perf, or with one that samples nothing). */
int coll_boost_prepare(coll_t *c);
/* Frees c->boost (NULL-safe; the process's end needs no call). */
void coll_boost_config_free(coll_t *c);
/* The boost's TraceConfig as sent to the hosts (*len bytes), or NULL
 * when there is none. Borrowed from |c|. */
const uint8_t *coll_boost_config(const coll_t *c, size_t *len);

/* The budget's terms from c->cfg. */
coll_boost_budget_t coll_boost_budget(const coll_t *c);
/* Host |h|'s budget for /api/v1/hosts: used_ms, limit_ms and window_ms
 * now, refill_in_ms (0: a boost fits now), boosted_ms and refused since
 * it joined; JSON null when the collector has no boost. New reference. */
json_t *coll_boost_host_json(const coll_t *c, const coll_host_t *h);
/* The shard's hosts' boosts now, for /metrics: the ms used within the
 * budget's window, its limit, and the hosts whose own budget has no
 * room for a boost; all 0 when the collector has no boost. */
typedef struct coll_boost_fleet {
  int64_t used_ms, limit_ms;
  size_t hosts_full;
} coll_boost_fleet_t;
void coll_boost_fleet(const coll_t *c, coll_boost_fleet_t *out);

/* The boosts of snapshot |s| (its id |snap_id|, triggered at
 * |started_ms| on coll_loop_ms) of |n| hosts; NULL when the collector has
 * none (perf_boost_window 0) or out of memory (said in the log). |s| is
 * only handed back through c->on. */
coll_boosts_t *coll_boosts_new(coll_t *c, coll_snap_t *s, uint64_t snap_id,
                               int64_t started_ms, size_t n);
/* Starts host |k|'s boost (|h|, borrowed for the snapshot's life), or
 * marks it held by the snapshot whose boost runs there, or refused by a
 * budget. */
void coll_boosts_start(coll_boosts_t *b, size_t k, coll_host_t *h);
/* Boosts whose connection is not released yet: the snapshot waits. */
size_t coll_boosts_open(const coll_boosts_t *b);
/* The deadline timer's tick: boosts past window + clone_timeout fail. */
void coll_boosts_tick(coll_boosts_t *b, int64_t now_ms);
/* Fails every boost still at work with |why| (the snapshot's deadline,
 * the collector stopping). */
void coll_boosts_end(coll_boosts_t *b, const char *why);
/* Host |k|'s row field: a JSON object (catalog.h, TG_COLL_BOOST_MAX), or
 * NULL when it had no boost. Valid until coll_boosts_free. */
const char *coll_boosts_row(coll_boosts_t *b, size_t k);
void coll_boosts_free(coll_boosts_t *b); /* NULL-safe */

#endif /* TRACEGATE_COLLECTOR_DAEMON_BOOST_H */
