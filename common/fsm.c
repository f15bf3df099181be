/* SPDX-License-Identifier: Apache-2.0 */
/* The one checked move of every state machine (fsm.h). */
#include "common/fsm.h"

#include "common/log.h"

static bool in_range(const tg_fsm_def_t *d, unsigned st) {
  return st < d->n_states && st < TG_FSM_MAX_STATES;
}

bool tg_fsm_allowed(const tg_fsm_def_t *d, unsigned from, unsigned to) {
  if (!in_range(d, from) || !in_range(d, to)) return false;
  return (d->next[from] & TG_FSM_BIT(to)) != 0;
}

const char *tg_fsm_name(const tg_fsm_def_t *d, unsigned st) {
  return in_range(d, st) && d->names[st] ? d->names[st] : "?";
}

static const char *or_dash(const char *s) { return s && s[0] ? s : "-"; }

bool tg_fsm_move(const tg_fsm_def_t *d, unsigned *state, unsigned to,
                 uint64_t *bad, const char *who, const char *why) {
  unsigned from = *state;
  if (from == to) return false;
  if (!tg_fsm_allowed(d, from, to)) {
    if (bad) (*bad)++;
    TG_ERROR("%s %s: %s -> %s is no transition of its table: refused (%s)",
             d->what, or_dash(who), tg_fsm_name(d, from), tg_fsm_name(d, to),
             or_dash(why));
    return false;
  }
  *state = to;
  TG_DEBUG("%s %s: %s -> %s: %s", d->what, or_dash(who), tg_fsm_name(d, from),
           tg_fsm_name(d, to), or_dash(why));
  return true;
}
