/* Every state of a recording and its one setter: the lifecycle and the
 * binding (their tables, recording.h), the reader's small states (a read
 * in flight or held, a stats call asked, a cut read to check) and why a
 * stop is wanted (their arrows, recording_internal.h). A refused arrow is
 * the engine's bug (tg__rec_refuse). Below every other file of the
 * engine: it calls none of them; the owner hears of a lifecycle change
 * through its on_state callback.
 */
#include "consumer/recording_internal.h"

#include "common/log.h"

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

#define S(x) (1u << TG_REC_##x)
/* Each state's arrows out of it, but FAILED's (recording.h). */
static const unsigned kNext[] = {
    [TG_REC_IDLE] = S(ATTACHING) | S(STARTING),
    [TG_REC_ATTACHING] = S(STARTING),
    [TG_REC_STARTING] = S(TRACING) | S(DRAINING) | S(DETACHED) | S(FAILING),
    [TG_REC_TRACING] = S(STOPPING) | S(DRAINING) | S(FAILING),
    [TG_REC_STOPPING] = S(DRAINING) | S(FAILING),
    [TG_REC_DRAINING] = S(STATS),
    [TG_REC_STATS] = S(FREEING) | S(DONE),
    [TG_REC_FREEING] = S(DONE),
    [TG_REC_FAILING] = 0,
    [TG_REC_DONE] = 0,
    [TG_REC_DETACHED] = 0,
    [TG_REC_FAILED] = 0,
};
#undef S

static bool is_final(tg_rec_state_t s) {
  return s == TG_REC_DONE || s == TG_REC_DETACHED || s == TG_REC_FAILED;
}

bool tg_rec_transition_ok(tg_rec_state_t from, tg_rec_state_t to) {
  if ((unsigned)from > TG_REC_FAILED || (unsigned)to > TG_REC_FAILED ||
      is_final(from))
    return false;
  return ((kNext[from] | 1u << TG_REC_FAILED) & (1u << to)) != 0;
}

#define B(x) (1u << TG_REC_##x)
static const unsigned kNextBinding[] = {
    [TG_REC_BOUND] = B(UNBOUND) | B(SYNCING),
    [TG_REC_UNBOUND] = B(REATTACHING),
    [TG_REC_REATTACHING] = B(RESUMING) | B(BOUND) | B(UNBOUND),
    [TG_REC_RESUMING] = B(RESUMING_CUT) | B(BOUND) | B(UNBOUND),
    [TG_REC_RESUMING_CUT] = B(RESUMING) | B(BOUND) | B(UNBOUND),
    [TG_REC_SYNCING] = B(BOUND) | B(UNBOUND),
};
#undef B

bool tg_rec_binding_ok(tg_rec_binding_t from, tg_rec_binding_t to) {
  if ((unsigned)from > TG_REC_SYNCING || (unsigned)to > TG_REC_SYNCING)
    return false;
  return (kNextBinding[from] & (1u << to)) != 0;
}

/* A refused transition is the engine's bug: the state stays as it is (a
 * recording that goes on in a state it can explain beats one in a state
 * its table has no arrow to), and it shows in the error log and the
 * count. */
void tg__rec_refuse(tg_recording_t *r, const char *what, const char *from,
                    const char *to) {
  r->bad_transitions++;
  TG_ERROR("recording %p: %s %s -> %s is no transition of its table "
           "(recording.h, recording_internal.h): refused", (void *)r, what,
           from, to);
}

void tg__rec_set_state(tg_recording_t *r, tg_rec_state_t to) {
  tg_rec_state_t from = r->state;
  if (from == to) return;
  if (!tg_rec_transition_ok(from, to)) {
    tg__rec_refuse(r, "lifecycle", tg_recording_state_name(from),
                   tg_recording_state_name(to));
    return;
  }
  r->state = to;
  TG_DEBUG("recording %p: %s -> %s", (void *)r, tg_recording_state_name(from),
           tg_recording_state_name(to));
  if (r->cbs->on_state) r->cbs->on_state(r, from, to);
}

void tg__rec_set_binding(tg_recording_t *r, tg_rec_binding_t to) {
  tg_rec_binding_t from = r->binding;
  if (from == to) return;
  if (!tg_rec_binding_ok(from, to)) {
    tg__rec_refuse(r, "binding", tg_recording_binding_name(from),
                   tg_recording_binding_name(to));
    return;
  }
  r->binding = to;
  TG_DEBUG("recording %p: binding %s -> %s", (void *)r,
           tg_recording_binding_name(from), tg_recording_binding_name(to));
}

typedef struct sub_table {
  const char *what;
  const char *const *names;
  const unsigned *next; /* per state, the bits of the states it may go to */
  unsigned n;
} sub_table_t;

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define BIT(x) (1u << (x))

static const char *const kReadNames[] = {"idle", "busy", "held", "held_due"};
static const unsigned kReadNext[] = {
    [TG__READ_IDLE] = BIT(TG__READ_BUSY) | BIT(TG__READ_HELD),
    [TG__READ_BUSY] = BIT(TG__READ_IDLE),
    [TG__READ_HELD] = BIT(TG__READ_HELD_DUE) | BIT(TG__READ_IDLE),
    [TG__READ_HELD_DUE] = BIT(TG__READ_IDLE),
};
static const sub_table_t kRead = {"read", kReadNames, kReadNext,
                                  N_OF(kReadNext)};

static const char *const kStatsNames[] = {"idle", "after_read", "asked"};
static const unsigned kStatsNext[] = {
    [TG__STATS_IDLE] = BIT(TG__STATS_AFTER_READ) | BIT(TG__STATS_ASKED),
    [TG__STATS_AFTER_READ] = BIT(TG__STATS_ASKED) | BIT(TG__STATS_IDLE),
    [TG__STATS_ASKED] = BIT(TG__STATS_IDLE),
};
static const sub_table_t kStats = {"stats", kStatsNames, kStatsNext,
                                   N_OF(kStatsNext)};

static const char *const kCutNames[] = {"none", "open", "open_no_base"};
static const unsigned kCutNext[] = {
    [TG__CUT_NONE] = BIT(TG__CUT_OPEN) | BIT(TG__CUT_OPEN_NO_BASE),
    [TG__CUT_OPEN] = BIT(TG__CUT_NONE),
    [TG__CUT_OPEN_NO_BASE] = BIT(TG__CUT_NONE),
};
static const sub_table_t kCut = {"cut", kCutNames, kCutNext, N_OF(kCutNext)};

static const char *const kStopNames[] = {"none", "wanted", "deadline"};
static const unsigned kStopNext[] = {
    [TG__REC_STOP_NONE] = BIT(TG__REC_STOP_WANTED) | BIT(TG__REC_STOP_DEADLINE),
    [TG__REC_STOP_WANTED] = BIT(TG__REC_STOP_DEADLINE),
    [TG__REC_STOP_DEADLINE] = 0,
};
static const sub_table_t kStop = {"stop", kStopNames, kStopNext,
                                  N_OF(kStopNext)};

_Static_assert(N_OF(kReadNames) == N_OF(kReadNext), "a name per read state");
_Static_assert(N_OF(kStatsNames) == N_OF(kStatsNext), "a name per stats state");
_Static_assert(N_OF(kCutNames) == N_OF(kCutNext), "a name per cut state");
_Static_assert(N_OF(kStopNames) == N_OF(kStopNext), "a name per stop state");

static bool arrow(const sub_table_t *t, unsigned from, unsigned to) {
  return from < t->n && to < t->n && (t->next[from] & BIT(to)) != 0;
}

static const char *name(const sub_table_t *t, unsigned s) {
  return s < t->n ? t->names[s] : "?";
}

/* Whether |from| -> |to| is to be made: not when it is no change, nor
 * when the table refuses it (then counted and logged). */
static bool take(tg_recording_t *r, const sub_table_t *t, unsigned from,
                 unsigned to) {
  if (from == to) return false;
  if (!arrow(t, from, to)) {
    tg__rec_refuse(r, t->what, name(t, from), name(t, to));
    return false;
  }
  TG_DEBUG("recording %p: %s %s -> %s", (void *)r, t->what, name(t, from),
           name(t, to));
  return true;
}

bool tg__rec_read_ok(tg__rec_read_t from, tg__rec_read_t to) {
  return arrow(&kRead, from, to);
}

bool tg__rec_stats_ok(tg__rec_stats_t from, tg__rec_stats_t to) {
  return arrow(&kStats, from, to);
}

bool tg__rec_cut_ok(tg__rec_cut_t from, tg__rec_cut_t to) {
  return arrow(&kCut, from, to);
}

bool tg__rec_stop_ok(tg__rec_stop_t from, tg__rec_stop_t to) {
  return arrow(&kStop, from, to);
}

void tg__rec_set_read(tg_recording_t *r, tg__rec_read_t to) {
  if (take(r, &kRead, r->rd.read, to)) r->rd.read = to;
}

void tg__rec_set_stats(tg_recording_t *r, tg__rec_stats_t to) {
  if (take(r, &kStats, r->rd.stats, to)) r->rd.stats = to;
}

void tg__rec_set_cut(tg_recording_t *r, tg__rec_cut_t to) {
  if (take(r, &kCut, r->rd.cut, to)) r->rd.cut = to;
}

void tg__rec_set_stop(tg_recording_t *r, tg__rec_stop_t to) {
  if (take(r, &kStop, r->stop, to)) r->stop = to;
}
