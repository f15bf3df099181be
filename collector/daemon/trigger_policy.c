/* The trigger policy: trigger_policy.h. Pure: reads its arguments, keeps
 * nothing, calls nothing that does I/O. */
#include "collector/daemon/trigger_policy.h"

#include <string.h>

static bool window_over(const tg_trigger_budget_t *b, int64_t now_ms) {
  return !b->started || now_ms < b->start_ms ||
         now_ms - b->start_ms >= TG_TRIGGER_WINDOW_MS;
}

uint32_t tg_trigger_left(const tg_trigger_budget_t *b, int64_t now_ms) {
  uint32_t used = window_over(b, now_ms) ? 0 : b->used;
  return used >= b->limit ? 0 : b->limit - used;
}

void tg_trigger_charge(tg_trigger_budget_t *b, int64_t now_ms) {
  if (window_over(b, now_ms)) {
    b->start_ms = now_ms;
    b->started = true;
    b->used = 0;
  }
  b->used++;
}

const char *tg_trigger_budget_name(tg_trigger_budget_id_t id) {
  static const char *const names[TG_TRIGGER_BUDGET_COUNT] = {
      [TG_TRIGGER_BUDGET_HOST] = "host",
      [TG_TRIGGER_BUDGET_HOSTS] = "hosts",
      [TG_TRIGGER_BUDGET_OPERATOR] = "operator",
      [TG_TRIGGER_BUDGET_SCHEDULE] = "schedule",
      [TG_TRIGGER_BUDGET_ALERTMANAGER] = "alertmanager",
  };
  return (unsigned)id < TG_TRIGGER_BUDGET_COUNT ? names[id] : "?";
}

tg_trigger_budget_id_t tg_trigger_budget_of(tg_trigger_origin_t from) {
  switch (from) {
    case TG_TRIGGER_FROM_OPERATOR: return TG_TRIGGER_BUDGET_OPERATOR;
    case TG_TRIGGER_FROM_SCHEDULE: return TG_TRIGGER_BUDGET_SCHEDULE;
    case TG_TRIGGER_FROM_ALERTMANAGER: return TG_TRIGGER_BUDGET_ALERTMANAGER;
    case TG_TRIGGER_FROM_HOST: break;
  }
  return TG_TRIGGER_BUDGET_HOST;
}

static bool covers(const char *snap_group, const char *group) {
  return !strcmp(snap_group, "all") || !strcmp(snap_group, group);
}

/* Whether |v| certainly holds what |t| marks (rule 1). */
static bool serves(const tg_trigger_state_t *st, const tg_trigger_snap_view_t *v,
                   const tg_trigger_t *t, int64_t now_ms) {
  int64_t age = now_ms - v->started_ms;
  if (age < 0 || age >= st->coalesce_window_ms || !covers(v->group, t->group))
    return false;
  return t->from == TG_TRIGGER_FROM_HOST ? v->origin_to_come : v->none_requested;
}

tg_trigger_decision_t tg_trigger_decide(const tg_trigger_state_t *st,
                                        const tg_trigger_t *t, int64_t now_ms) {
  tg_trigger_decision_t d = {.verdict = TG_TRIGGER_BEGIN};
  for (size_t i = 0; i < st->n_running; i++) {
    if (serves(st, &st->running[i], t, now_ms)) {
      d.verdict = TG_TRIGGER_SERVE;
      d.snap = i;
      return d;
    }
  }
  if (st->queued) {
    d.verdict = TG_TRIGGER_FOLD;
    if (st->queued_host_list) {
      d.join = t->host_list;
      d.widen = !t->host_list;
    } else if (t->host_list) {
      d.widen = !t->in_queued_group;
    } else {
      d.widen = strcmp(st->queued_group, t->group) != 0;
    }
    return d;
  }
  if (!st->own || !tg_trigger_left(st->own, now_ms)) {
    d.verdict = TG_TRIGGER_REFUSE;
    d.budget = tg_trigger_budget_of(t->from);
    return d;
  }
  if (t->from == TG_TRIGGER_FROM_HOST &&
      (!st->hosts || !tg_trigger_left(st->hosts, now_ms))) {
    d.verdict = TG_TRIGGER_REFUSE;
    d.budget = TG_TRIGGER_BUDGET_HOSTS;
    return d;
  }
  if (st->n_running >= st->running_max) d.verdict = TG_TRIGGER_QUEUE;
  return d;
}
