/* The perf boost's duty-cycle budget (docs/collector.md, "A sharper
 * profile of the moment: the perf boost", "Its budget"): a boost costs
 * CPU on every host it runs on, and the trigger budgets count snapshots,
 * not the time hosts spend boosted; so over a sliding window
 * (perf_boost_budget_window) a host may be boosted at most
 * perf_boost_host_percent of the time, and the collector's hosts together
 * at most perf_boost_fleet_percent of their host-time.
 *
 * A host's ledger holds its boosts as spans of the daemon's monotonic
 * clock (coll_loop_ms). A boost is charged its whole window as it starts
 * (the span may end in the future) and cut to when it was released if
 * that came first (a boost that failed early sampled less). So one
 * admitted boost never takes a host or the fleet past its limit in any
 * window-long stretch: every span that meets the stretch was in the
 * ledgers, whole, when the stretch's last boost was admitted.
 *
 *                now - window                              now
 *                     |<------ perf_boost_budget_window ------>|
 *   a host's spans: [==]    [====]        [==]            [====|===]
 *   counted:          =     ======        ====            =========
 *   (a span under way counts to its window's end: it is reserved)
 *
 * Pure: no I/O, no libuv, no allocation; the caller keeps the ledgers
 * (coll_host_t) and the clock. Unit-tested on a simulated clock
 * (test_collector_boost_budget).
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_BOOST_BUDGET_H
#define TRACEGATE_COLLECTOR_DAEMON_BOOST_BUDGET_H

#include <stddef.h>
#include <stdint.h>

/* Spans a ledger keeps (1 KiB a host): a window's worth of the default
 * budget's boosts (10% of an hour is 36 boosts of 10 s). Past it, its two
 * oldest are merged into one that ends where the later ended and lasts
 * both: later than they were, so they count as long or longer, and a
 * host boosted more often than that is held to a little less than its
 * share, never more. */
#define COLL_BOOST_LEDGER_MAX 64

typedef struct coll_boost_span {
  int64_t start_ms, end_ms; /* start_ms <= end_ms */
} coll_boost_span_t;

/* One host's boosts, oldest first, none overlapping (one boost at a time
 * per host). Zeroed: empty. */
typedef struct coll_boost_ledger {
  coll_boost_span_t spans[COLL_BOOST_LEDGER_MAX];
  uint32_t n;
} coll_boost_ledger_t;

/* The budget, from the config (perf_boost_*). */
typedef struct coll_boost_budget {
  int64_t window_ms;      /* perf_boost_budget_window, > 0 */
  int64_t boost_ms;       /* perf_boost_window: what one boost costs */
  uint32_t host_percent;  /* 1..100 */
  uint32_t fleet_percent; /* 1..100 */
} coll_boost_budget_t;

/* Which budget refused a boost (the metric's label,
 * coll_boost_budget_name). */
typedef enum coll_boost_verdict {
  COLL_BOOST_BUDGET_OK,
  COLL_BOOST_BUDGET_HOST,  /* the host's own */
  COLL_BOOST_BUDGET_FLEET, /* all the collector's hosts' together */
} coll_boost_verdict_t;
/* "host", "fleet"; "" for OK. */
const char *coll_boost_budget_name(coll_boost_verdict_t v);

/* The ms of |l|'s spans from |now_ms| - |window_ms| on, the future part
 * of a span included. */
int64_t coll_boost_ledger_used(const coll_boost_ledger_t *l, int64_t now_ms,
                               int64_t window_ms);
/* A boost from |start_ms| to |end_ms| (>= start_ms, after every span of
 * |l|). Spans that ended before |start_ms| - |window_ms| count nothing
 * from here on and are dropped first. */
void coll_boost_ledger_add(coll_boost_ledger_t *l, int64_t start_ms,
                           int64_t end_ms, int64_t window_ms);
/* The boost that started at |start_ms| ended at |end_ms|: its span is
 * cut there if it ran to later; nothing if that span was merged. Returns
 * the span's length after the cut (0 when not found). */
int64_t coll_boost_ledger_cut(coll_boost_ledger_t *l, int64_t start_ms,
                              int64_t end_ms);

/* The most ms in a window: a host's, and |n_hosts| hosts' together. */
int64_t coll_boost_host_limit(const coll_boost_budget_t *b);
int64_t coll_boost_fleet_limit(const coll_boost_budget_t *b, size_t n_hosts);

/* Whether one more boost fits: the host's own budget first (it names the
 * host's doing), then the fleet's; |host_used| and |fleet_used| as
 * coll_boost_ledger_used gives them (the fleet's summed over its hosts). */
coll_boost_verdict_t coll_boost_decide(const coll_boost_budget_t *b,
                                       int64_t host_used, int64_t fleet_used,
                                       size_t n_hosts);

/* The earliest time from |now_ms| on at which the spans of the |n|
 * ledgers |ls| (a host's alone, or a fleet's) leave room for |need| ms
 * under |limit| within |window_ms|; |now_ms| when they do already, -1
 * when they never can (need > limit). */
int64_t coll_boost_refill(const coll_boost_ledger_t *const *ls, size_t n,
                          int64_t now_ms, int64_t window_ms, int64_t limit,
                          int64_t need);

#endif /* TRACEGATE_COLLECTOR_DAEMON_BOOST_BUDGET_H */
