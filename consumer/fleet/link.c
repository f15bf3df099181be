/* The host link's state machine (link.h): pure, driven by the owner's
 * events and the times it is given. */
#include "consumer/fleet/link.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "common/fsm.h"

static uint64_t hb_period(uint64_t dead_link_ms, uint64_t max_ms) {
  uint64_t p = dead_link_ms / 4;
  uint64_t max = max_ms ? max_ms : TG_LINK_HB_MAX_MS;
  return p > max ? max : p < TG_LINK_HB_MIN_MS ? TG_LINK_HB_MIN_MS : p;
}

void tg_link_init(tg_link_t *l, const tg_link_timing_t *tm, const char *name,
                  tg_link_state_cb cb, void *data) {
  *l = (tg_link_t){
      .state = TG_LINK_CONNECTING,
      .tm = *tm,
      .name = name,
      .on_state = cb,
      .data = data,
  };
  if (!l->tm.connect_guard_ms) l->tm.connect_guard_ms = TG_LINK_CONNECT_GUARD_MS;
  l->hb_period_ms = hb_period(l->tm.dead_link_ms, l->tm.heartbeat_max_ms);
}

static bool has_attempt(tg_link_state_t s) {
  return s == TG_LINK_CONNECTING || s == TG_LINK_PREPARING ||
         s == TG_LINK_RECONNECTING || s == TG_LINK_RESUMING;
}

#define S(x) TG_FSM_BIT(TG_LINK_##x)
/* Each state's arrows out of it (link.h): a live state may also close or
 * fail, a closing one fail. */
#define END S(CLOSING) | S(FAILING)
static const uint32_t kNext[] = {
    [TG_LINK_CONNECTING] = S(PREPARING) | S(DROPPING) | END,
    [TG_LINK_PREPARING] = S(UP) | S(DROPPING) | END,
    [TG_LINK_UP] = S(DROPPING) | END,
    [TG_LINK_DROPPING] = S(BACKOFF) | END,
    [TG_LINK_BACKOFF] = S(RECONNECTING) | END,
    [TG_LINK_RECONNECTING] = S(RESUMING) | S(DROPPING) | END,
    [TG_LINK_RESUMING] = S(UP) | S(DROPPING) | END,
    [TG_LINK_CLOSING] = S(DONE) | S(FAILED) | S(FAILING),
    [TG_LINK_FAILING] = S(FAILED),
    [TG_LINK_DONE] = 0,
    [TG_LINK_FAILED] = 0,
};
#undef END
#undef S
static const char *const kNames[] = {
    "connecting", "preparing", "up",      "dropping", "backoff", "reconnecting",
    "resuming",   "closing",   "failing", "done",     "failed"};
_Static_assert(TG_FSM_COUNT(kNext) == TG_LINK_FAILED + 1, "arrows per state");
_Static_assert(TG_FSM_COUNT(kNames) == TG_FSM_COUNT(kNext), "a name per state");
static const tg_fsm_def_t kDef = {"link", TG_FSM_COUNT(kNext), kNext, kNames};

bool tg_link_transition_ok(tg_link_state_t from, tg_link_state_t to) {
  return tg_fsm_allowed(&kDef, from, to);
}

const char *tg_link_state_name(tg_link_state_t s) {
  return tg_fsm_name(&kDef, s);
}

void tg_link_set_state(tg_link_t *l, tg_link_state_t to, const char *why) {
  tg_link_state_t from = l->state;
  unsigned st = from;
  if (!tg_fsm_move(&kDef, &st, to, &l->bad_transitions, l->name, why)) return;
  l->state = to;
  /* A deadline lives only in the states that run it (link.h's table). */
  if (!has_attempt(to)) l->guard_ms = 0;
  if (to != TG_LINK_UP) {
    l->next_hb_ms = 0;
    l->hb_pending = false;
  }
  if (to != TG_LINK_BACKOFF) l->retry_ms = 0;
  if (l->on_state) l->on_state(l, from, why ? why : "");
}

void tg_link_attempt_begin(tg_link_t *l, uint64_t now_ms) {
  l->attempts++;
  l->guard_ms = now_ms + l->tm.connect_guard_ms;
  if (l->state == TG_LINK_BACKOFF)
    tg_link_set_state(l, TG_LINK_RECONNECTING, "the backoff is over");
}

void tg_link_bound(tg_link_t *l) {
  if (l->state == TG_LINK_CONNECTING)
    tg_link_set_state(l, TG_LINK_PREPARING, "bound");
  else if (l->state == TG_LINK_RECONNECTING)
    tg_link_set_state(l, TG_LINK_RESUMING, "bound");
}

static void go_up(tg_link_t *l, uint64_t now_ms, bool heartbeat,
                  const char *why) {
  l->heartbeat = heartbeat;
  l->heard_ms = now_ms;
  l->next_hb_ms = now_ms + l->hb_period_ms;
  tg_link_set_state(l, TG_LINK_UP, why);
}

void tg_link_up(tg_link_t *l, uint64_t now_ms, bool heartbeat) {
  go_up(l, now_ms, heartbeat, "the recording starts");
}

uint64_t tg_link_resumed(tg_link_t *l, uint64_t now_ms, bool heartbeat) {
  /* The counters are the owner's report, read as the move is told
   * (on_state), so they change before it: only when it will be made. */
  if (!tg_link_transition_ok(l->state, TG_LINK_UP)) {
    tg_link_set_state(l, TG_LINK_UP, "the session is back"); /* refused */
    return 0;
  }
  uint64_t down = now_ms >= l->lost_at_ms ? now_ms - l->lost_at_ms : 0;
  l->down_ms += down;
  l->outage = false;
  l->reconnects++;
  go_up(l, now_ms, heartbeat, "the session is back");
  return down;
}

void tg_link_heartbeat_sent(tg_link_t *l) { l->hb_pending = true; }

void tg_link_heartbeat_done(tg_link_t *l) { l->hb_pending = false; }

void tg_link_drop(tg_link_t *l, tg_link_drop_t cause, const char *why) {
  if (!has_attempt(l->state) && l->state != TG_LINK_UP) return;
  l->drop = cause;
  l->drop_from = l->state;
  tg_link_set_state(l, TG_LINK_DROPPING, why);
}

void tg_link_lost(tg_link_t *l, uint64_t now_ms, const char *why) {
  /* The outage began when the link went silent, not when that was
   * noticed (up to the dead-link timeout later). */
  l->lost_at_ms = l->heard_ms && l->heard_ms <= now_ms ? l->heard_ms : now_ms;
  l->outage = true;
  l->deadline_ms = now_ms + l->tm.reconnect_ms;
  l->attempts = 0;
  l->retry_ms = now_ms + TG_LINK_BACKOFF_MIN_MS;
  l->backoff_ms = 2 * TG_LINK_BACKOFF_MIN_MS;
  tg_link_set_state(l, TG_LINK_BACKOFF, why);
}

int tg_link_attempt_failed(tg_link_t *l, uint64_t now_ms, const char *why) {
  if (now_ms >= l->deadline_ms) return -ETIMEDOUT;
  uint64_t wait = l->backoff_ms;
  if (now_ms + wait > l->deadline_ms) wait = l->deadline_ms - now_ms;
  l->backoff_ms = l->backoff_ms * 2 > TG_LINK_BACKOFF_MAX_MS
                      ? TG_LINK_BACKOFF_MAX_MS
                      : l->backoff_ms * 2;
  l->retry_ms = now_ms + wait;
  tg_link_set_state(l, TG_LINK_BACKOFF, why);
  return 0;
}

void tg_link_outage_end(tg_link_t *l, uint64_t now_ms) {
  if (!l->outage) return;
  l->outage = false;
  if (now_ms >= l->lost_at_ms) l->down_ms += now_ms - l->lost_at_ms;
}

uint64_t tg_link_deadline(const tg_link_t *l) {
  switch (l->state) {
    case TG_LINK_CONNECTING:
    case TG_LINK_PREPARING:
    case TG_LINK_RECONNECTING:
    case TG_LINK_RESUMING:
      return l->guard_ms ? l->guard_ms : TG_LINK_NEVER;
    case TG_LINK_UP: {
      /* Without heartbeats the silence is checked at the period: the
       * recording's unanswered calls have no deadline of their own here. */
      uint64_t t = l->next_hb_ms ? l->next_hb_ms : TG_LINK_NEVER;
      uint64_t dead = l->heard_ms + l->tm.dead_link_ms + 1;
      return l->heartbeat && dead < t ? dead : t;
    }
    case TG_LINK_BACKOFF:
      return l->retry_ms ? l->retry_ms : TG_LINK_NEVER;
    default:
      return TG_LINK_NEVER;
  }
}

tg_link_due_t tg_link_due(tg_link_t *l, uint64_t now_ms, uint64_t waiting_ms) {
  if (has_attempt(l->state)) {
    if (!l->guard_ms || now_ms < l->guard_ms) return TG_LINK_DUE_NONE;
    l->guard_ms = 0;
    return TG_LINK_DUE_GUARD;
  }
  if (l->state == TG_LINK_BACKOFF) {
    if (!l->retry_ms || now_ms < l->retry_ms) return TG_LINK_DUE_NONE;
    l->retry_ms = 0;
    return TG_LINK_DUE_ATTEMPT;
  }
  if (l->state != TG_LINK_UP) return TG_LINK_DUE_NONE;
  uint64_t silent = now_ms > l->heard_ms ? now_ms - l->heard_ms : 0;
  if (silent > l->tm.dead_link_ms &&
      (l->heartbeat || waiting_ms > l->tm.dead_link_ms)) {
    char why[64];
    snprintf(why, sizeof(why), "nothing heard for %" PRIu64 " ms", silent);
    tg_link_drop(l, TG_LINK_DROP_DEAD, why);
    return TG_LINK_DUE_DEAD;
  }
  if (!l->next_hb_ms || now_ms < l->next_hb_ms) return TG_LINK_DUE_NONE;
  l->next_hb_ms = now_ms + l->hb_period_ms;
  return l->heartbeat && !l->hb_pending ? TG_LINK_DUE_HEARTBEAT
                                        : TG_LINK_DUE_NONE;
}

bool tg_link_reconnecting(const tg_link_t *l) {
  switch (l->state) {
    case TG_LINK_BACKOFF:
    case TG_LINK_RECONNECTING:
    case TG_LINK_RESUMING:
      return true;
    case TG_LINK_DROPPING:
      return l->drop_from == TG_LINK_RECONNECTING ||
             l->drop_from == TG_LINK_RESUMING;
    default:
      return false;
  }
}
