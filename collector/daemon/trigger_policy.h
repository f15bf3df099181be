/* The trigger policy (docs/collector.md, "Triggers and snapshots"): what
 * becomes of one trigger, as a pure function of the snapshots under way,
 * the one queued, the budgets, the trigger and the time. No I/O, no
 * libuv, no allocation: trigger.c gathers the state, asks, and applies
 * the decision (tests/collector/test_collector_trigger_policy.c drives it
 * on a simulated clock).
 *
 * The rules, in order:
 * 1. serve: a snapshot under way of a group covering the trigger's, begun
 *    within coalesce_window, serves the trigger only if the trigger's
 *    data is certain to be in it: for a host's trigger, the clone of that
 *    host is still to be requested; for an operator's or the schedule's,
 *    no clone of it has been requested yet. Free. An Alertmanager
 *    trigger is served as an operator's.
 * 2. fold: else, a snapshot queued (not begun, so none of its clones is
 *    requested) takes the trigger. A host list folded into a queued host
 *    list joins it (the union); a host list folded into a queued group
 *    holding all its hosts leaves it as it is; any other difference
 *    widens the queued snapshot to "all". Free.
 * 3. refuse: else the trigger costs a snapshot, which its budget must
 *    have left in the current minute: a host's its own per-host budget,
 *    then all hosts' together; an operator's the operators' budget; the
 *    schedule's and the Alertmanager webhook's their own. Budgets are separate, so no origin can spend
 *    another's.
 * 4. begin: else, below running_max snapshots under way, one begins now;
 * 5. queue: else it is queued, to begin when one under way ends.
 * A budget is charged (tg_trigger_charge) on begin and on queue.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_TRIGGER_POLICY_H
#define TRACEGATE_COLLECTOR_DAEMON_TRIGGER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Budgets count snapshots per fixed minute window. */
#define TG_TRIGGER_WINDOW_MS 60000

/* Who fired a trigger. */
typedef enum tg_trigger_origin {
  TG_TRIGGER_FROM_HOST,
  TG_TRIGGER_FROM_OPERATOR,
  TG_TRIGGER_FROM_SCHEDULE,
  TG_TRIGGER_FROM_ALERTMANAGER, /* its webhook (alertmanager.h) */
} tg_trigger_origin_t;

/* Which budget refused (also the metric's label, tg_trigger_budget_name). */
typedef enum tg_trigger_budget_id {
  TG_TRIGGER_BUDGET_HOST,     /* the origin host's own */
  TG_TRIGGER_BUDGET_HOSTS,    /* all hosts' together */
  TG_TRIGGER_BUDGET_OPERATOR, /* operators' (HTTP, the CLI) */
  TG_TRIGGER_BUDGET_SCHEDULE, /* snapshot_every's */
  TG_TRIGGER_BUDGET_ALERTMANAGER, /* the Alertmanager webhook's callers' */
  TG_TRIGGER_BUDGET_COUNT
} tg_trigger_budget_id_t;

/* Snapshots begun or queued in the window that started at |start_ms|. */
typedef struct tg_trigger_budget {
  uint32_t limit; /* per window; 0 refuses everything */
  uint32_t used;
  int64_t start_ms;
  bool started; /* |start_ms| is set */
} tg_trigger_budget_t;

/* A snapshot under way, as the policy sees it for one trigger. */
typedef struct tg_trigger_snap_view {
  const char *group; /* borrowed: "all" or a group's name */
  int64_t started_ms;
  bool none_requested; /* no clone of it requested yet */
  /* The trigger's origin host is in it and its clone is still to be
   * requested (host triggers only). */
  bool origin_to_come;
} tg_trigger_snap_view_t;

typedef struct tg_trigger_state {
  const tg_trigger_snap_view_t *running; /* borrowed, |n_running| */
  size_t n_running;
  size_t running_max;  /* at least 1 */
  bool queued;         /* one snapshot queued */
  /* When |queued|: it is of a host list (|queued_group| unused), else
   * of |queued_group| (borrowed). */
  bool queued_host_list;
  const char *queued_group;
  int64_t coalesce_window_ms;
  /* The trigger's budgets (borrowed): |own| is the origin host's, the
   * operators' or the schedule's; |hosts| all hosts' (host triggers
   * only, else NULL). */
  const tg_trigger_budget_t *own;
  const tg_trigger_budget_t *hosts;
} tg_trigger_state_t;

typedef struct tg_trigger {
  tg_trigger_origin_t from;
  /* Borrowed: "all" or a group's name; "" for a host list, which is no
   * group's name, so only a snapshot of "all" serves it. */
  const char *group;
  /* A host list's trigger; |in_queued_group|: each of its hosts is in
   * the queued snapshot's group (the caller knows the groups). */
  bool host_list;
  bool in_queued_group;
} tg_trigger_t;

typedef enum tg_trigger_verdict {
  TG_TRIGGER_SERVE,  /* by running[snap] */
  TG_TRIGGER_FOLD,   /* into the queued one (widen or join: see below) */
  TG_TRIGGER_REFUSE, /* over |budget| */
  TG_TRIGGER_BEGIN,
  TG_TRIGGER_QUEUE,
} tg_trigger_verdict_t;

typedef struct tg_trigger_decision {
  tg_trigger_verdict_t verdict;
  size_t snap;                   /* SERVE */
  /* FOLD: the queued snapshot becomes one of "all" (|widen|), or the
   * trigger's hosts join its host list (|join|); neither: it serves the
   * trigger as it is. */
  bool widen;
  bool join;
  tg_trigger_budget_id_t budget; /* REFUSE */
} tg_trigger_decision_t;

tg_trigger_decision_t tg_trigger_decide(const tg_trigger_state_t *st,
                                        const tg_trigger_t *t, int64_t now_ms);

/* Snapshots |b| has left at |now_ms| (a window over, or a clock that went
 * back, starts a new one). */
uint32_t tg_trigger_left(const tg_trigger_budget_t *b, int64_t now_ms);
/* Spends one snapshot of |b| at |now_ms|. */
void tg_trigger_charge(tg_trigger_budget_t *b, int64_t now_ms);
/* "host", "hosts", "operator", "schedule", "alertmanager". */
const char *tg_trigger_budget_name(tg_trigger_budget_id_t id);
/* The budget an origin spends (TG_TRIGGER_BUDGET_HOST for a host). */
tg_trigger_budget_id_t tg_trigger_budget_of(tg_trigger_origin_t from);

#endif /* TRACEGATE_COLLECTOR_DAEMON_TRIGGER_POLICY_H */
