/* Every state of a recording and its one setter: the lifecycle and the
 * binding (their tables, recording.h), the reader's small states (a read
 * in flight or held, a stats call asked, a cut read to check) and why a
 * stop is wanted (their arrows, recording_internal.h), each moved by
 * common/fsm.h under its one policy: a refused arrow is the engine's bug,
 * not made, counted in bad_transitions and logged. Below every other file of the
 * engine: it calls none of them; the owner hears of a lifecycle change
 * through its on_state callback.
 */
#include "consumer/recording_internal.h"

#include <stdio.h>

#include "common/fsm.h"

const char *tg_recording_state_name(tg_rec_state_t s) {
  switch (s) {
    case TG_REC_IDLE: return "idle";
    case TG_REC_ATTACHING:
    case TG_REC_STARTING: return "starting";
    case TG_REC_TRACING: return "tracing";
    case TG_REC_STOPPING: return "stopping";
    case TG_REC_DRAINING: return "reading the end";
    case TG_REC_STATS: return "statistics";
    case TG_REC_FREEING: return "freeing the session";
    case TG_REC_FAILING: return "failing";
    case TG_REC_DONE: return "done";
    case TG_REC_DETACHED: return "detached";
    case TG_REC_FAILED: return "FAILED";
  }
  return "?";
}

const char *tg_recording_binding_name(tg_rec_binding_t b) {
  switch (b) {
    case TG_REC_BOUND: return "bound";
    case TG_REC_UNBOUND: return "reconnecting";
    case TG_REC_REATTACHING: return "re-attaching";
    case TG_REC_RESUMING:
    case TG_REC_RESUMING_CUT: return "resuming";
    case TG_REC_SYNCING: return "syncing";
  }
  return "?";
}

bool tg__rec_is_over(const tg_recording_t *r) {
  return r->state == TG_REC_DONE || r->state == TG_REC_DETACHED ||
         r->state == TG_REC_FAILED;
}

#define S(x) TG_FSM_BIT(TG_REC_##x)
/* Each state's arrows out of it (recording.h): every state but a final
 * one may also fail. */
#define F S(FAILED)
static const uint32_t kNext[] = {
    [TG_REC_IDLE] = S(ATTACHING) | S(STARTING) | F,
    [TG_REC_ATTACHING] = S(STARTING) | F,
    [TG_REC_STARTING] = S(TRACING) | S(DRAINING) | S(DETACHED) | S(FAILING) | F,
    [TG_REC_TRACING] = S(STOPPING) | S(DRAINING) | S(FAILING) | F,
    [TG_REC_STOPPING] = S(DRAINING) | S(FAILING) | F,
    [TG_REC_DRAINING] = S(STATS) | F,
    [TG_REC_STATS] = S(FREEING) | S(DONE) | F,
    [TG_REC_FREEING] = S(DONE) | F,
    [TG_REC_FAILING] = F,
    [TG_REC_DONE] = 0,
    [TG_REC_DETACHED] = 0,
    [TG_REC_FAILED] = 0,
};
#undef F
#undef S
/* Exact names for the logs; tg_recording_state_name() is the user's. */
static const char *const kNames[] = {
    "idle",     "attaching", "starting", "tracing", "stopping", "draining",
    "stats",    "freeing",   "failing",  "done",    "detached", "failed"};
_Static_assert(TG_FSM_COUNT(kNext) == TG_REC_FAILED + 1, "arrows per state");
_Static_assert(TG_FSM_COUNT(kNames) == TG_FSM_COUNT(kNext), "a name per state");
static const tg_fsm_def_t kLife = {"recording", TG_FSM_COUNT(kNext), kNext,
                                   kNames};

bool tg_rec_transition_ok(tg_rec_state_t from, tg_rec_state_t to) {
  return tg_fsm_allowed(&kLife, from, to);
}

#define B(x) TG_FSM_BIT(TG_REC_##x)
static const uint32_t kNextBinding[] = {
    [TG_REC_BOUND] = B(UNBOUND) | B(SYNCING),
    [TG_REC_UNBOUND] = B(REATTACHING),
    [TG_REC_REATTACHING] = B(RESUMING) | B(BOUND) | B(UNBOUND),
    [TG_REC_RESUMING] = B(RESUMING_CUT) | B(BOUND) | B(UNBOUND),
    [TG_REC_RESUMING_CUT] = B(RESUMING) | B(BOUND) | B(UNBOUND),
    [TG_REC_SYNCING] = B(BOUND) | B(UNBOUND),
};
#undef B
static const char *const kBindingNames[] = {
    "bound", "unbound", "reattaching", "resuming", "resuming_cut", "syncing"};
_Static_assert(TG_FSM_COUNT(kNextBinding) == TG_REC_SYNCING + 1,
               "arrows per binding");
_Static_assert(TG_FSM_COUNT(kBindingNames) == TG_FSM_COUNT(kNextBinding),
               "a name per binding");
static const tg_fsm_def_t kBinding = {"recording binding",
                                      TG_FSM_COUNT(kNextBinding), kNextBinding,
                                      kBindingNames};

bool tg_rec_binding_ok(tg_rec_binding_t from, tg_rec_binding_t to) {
  return tg_fsm_allowed(&kBinding, from, to);
}

/* |r| in the logs: the engine has no name of its own. */
typedef struct who { char s[32]; } who_t;
static who_t who(const tg_recording_t *r) {
  who_t w;
  snprintf(w.s, sizeof(w.s), "%p", (const void *)r);
  return w;
}

/* Moves *|st| under common/fsm.h's policy, counted in r->bad_transitions. */
static bool take(tg_recording_t *r, const tg_fsm_def_t *t, unsigned *st,
                 unsigned to) {
  return tg_fsm_move(t, st, to, &r->bad_transitions, who(r).s, NULL);
}

void tg__rec_set_state(tg_recording_t *r, tg_rec_state_t to) {
  tg_rec_state_t from = r->state;
  unsigned st = from;
  if (!take(r, &kLife, &st, to)) return;
  r->state = to;
  if (r->cbs->on_state) r->cbs->on_state(r, from, to);
}

void tg__rec_set_binding(tg_recording_t *r, tg_rec_binding_t to) {
  unsigned st = r->binding;
  if (take(r, &kBinding, &st, to)) r->binding = to;
}

#define BIT TG_FSM_BIT

static const char *const kReadNames[] = {"idle", "busy", "held", "held_due"};
static const uint32_t kReadNext[] = {
    [TG__READ_IDLE] = BIT(TG__READ_BUSY) | BIT(TG__READ_HELD),
    [TG__READ_BUSY] = BIT(TG__READ_IDLE),
    [TG__READ_HELD] = BIT(TG__READ_HELD_DUE) | BIT(TG__READ_IDLE),
    [TG__READ_HELD_DUE] = BIT(TG__READ_IDLE),
};
static const tg_fsm_def_t kRead = {"recording read", TG_FSM_COUNT(kReadNext),
                                   kReadNext, kReadNames};

static const char *const kStatsNames[] = {"idle", "after_read", "asked"};
static const uint32_t kStatsNext[] = {
    [TG__STATS_IDLE] = BIT(TG__STATS_AFTER_READ) | BIT(TG__STATS_ASKED),
    [TG__STATS_AFTER_READ] = BIT(TG__STATS_ASKED) | BIT(TG__STATS_IDLE),
    [TG__STATS_ASKED] = BIT(TG__STATS_IDLE),
};
static const tg_fsm_def_t kStats = {"recording stats",
                                    TG_FSM_COUNT(kStatsNext), kStatsNext,
                                    kStatsNames};

static const char *const kCutNames[] = {"none", "open", "open_no_base"};
static const uint32_t kCutNext[] = {
    [TG__CUT_NONE] = BIT(TG__CUT_OPEN) | BIT(TG__CUT_OPEN_NO_BASE),
    [TG__CUT_OPEN] = BIT(TG__CUT_NONE),
    [TG__CUT_OPEN_NO_BASE] = BIT(TG__CUT_NONE),
};
static const tg_fsm_def_t kCut = {"recording cut", TG_FSM_COUNT(kCutNext),
                                  kCutNext, kCutNames};

static const char *const kStopNames[] = {"none", "wanted", "deadline"};
static const uint32_t kStopNext[] = {
    [TG__REC_STOP_NONE] = BIT(TG__REC_STOP_WANTED) | BIT(TG__REC_STOP_DEADLINE),
    [TG__REC_STOP_WANTED] = BIT(TG__REC_STOP_DEADLINE),
    [TG__REC_STOP_DEADLINE] = 0,
};
static const tg_fsm_def_t kStop = {"recording stop", TG_FSM_COUNT(kStopNext),
                                   kStopNext, kStopNames};
#undef BIT

_Static_assert(TG_FSM_COUNT(kReadNames) == TG_FSM_COUNT(kReadNext),
               "a name per read state");
_Static_assert(TG_FSM_COUNT(kStatsNames) == TG_FSM_COUNT(kStatsNext),
               "a name per stats state");
_Static_assert(TG_FSM_COUNT(kCutNames) == TG_FSM_COUNT(kCutNext),
               "a name per cut state");
_Static_assert(TG_FSM_COUNT(kStopNames) == TG_FSM_COUNT(kStopNext),
               "a name per stop state");

bool tg__rec_read_ok(tg__rec_read_t from, tg__rec_read_t to) {
  return tg_fsm_allowed(&kRead, from, to);
}

bool tg__rec_stats_ok(tg__rec_stats_t from, tg__rec_stats_t to) {
  return tg_fsm_allowed(&kStats, from, to);
}

bool tg__rec_cut_ok(tg__rec_cut_t from, tg__rec_cut_t to) {
  return tg_fsm_allowed(&kCut, from, to);
}

bool tg__rec_stop_ok(tg__rec_stop_t from, tg__rec_stop_t to) {
  return tg_fsm_allowed(&kStop, from, to);
}

void tg__rec_set_read(tg_recording_t *r, tg__rec_read_t to) {
  unsigned st = r->rd.read;
  if (take(r, &kRead, &st, to)) r->rd.read = to;
}

void tg__rec_set_stats(tg_recording_t *r, tg__rec_stats_t to) {
  unsigned st = r->rd.stats;
  if (take(r, &kStats, &st, to)) r->rd.stats = to;
}

void tg__rec_set_cut(tg_recording_t *r, tg__rec_cut_t to) {
  unsigned st = r->rd.cut;
  if (take(r, &kCut, &st, to)) r->rd.cut = to;
}

void tg__rec_set_stop(tg_recording_t *r, tg__rec_stop_t to) {
  unsigned st = r->stop;
  if (take(r, &kStop, &st, to)) r->stop = to;
}
