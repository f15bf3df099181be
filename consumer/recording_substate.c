/* The recording reader's small states (a read in flight or held, a stats
 * call asked, a cut read to check) and why a stop is wanted: each one's
 * arrows (recording_internal.h) and its one setter. A refused arrow is
 * the engine's bug, handled as the lifecycle's are (tg__rec_refuse). */
#include "consumer/recording_internal.h"

#include "common/log.h"

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
