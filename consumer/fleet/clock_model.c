/* One host's clocks as trace processor sees them; see clock_model.h. */
#include "consumer/fleet/clock_model.h"

#include <stdlib.h>
#include <string.h>

#define BOOTTIME 6u
#define MONOTONIC_RAW 5u
#define REALTIME 1u
#define MONOTONIC 3u
/* FtraceEventBundle.ftrace_clock. */
#define FTRACE_GLOBAL 2u
#define FTRACE_MONO_RAW 4u
/* Trace processor's longest clock path, in edges (ClockPath::kMaxLen). */
#define MAX_HOPS 4

#define BIT(id) (1ull << (id))

void tg_clock_model_init(tg_clock_model_t *cm) { memset(cm, 0, sizeof(*cm)); }

void tg_clock_model_free(tg_clock_model_t *cm) {
  free(cm->props);
  cm->props = NULL;
  cm->n_props = cm->cap_props = 0;
}

static unsigned rank_of(uint64_t ids, unsigned id) {
  return (unsigned)__builtin_popcountll(ids & (BIT(id) - 1));
}

/* The followed set |ids|, added when |add| and there is room: its index,
 * or -1. */
static int set_of(tg_clock_model_t *cm, uint64_t ids, bool add) {
  for (uint32_t i = 0; i < cm->n_sets; i++)
    if (cm->sets[i].ids == ids) return (int)i;
  if (!add || cm->n_sets == TG_CLOCK_MODEL_SETS ||
      __builtin_popcountll(ids) > TG_CLOCK_MODEL_SET_CLOCKS)
    return -1;
  memset(&cm->sets[cm->n_sets], 0, sizeof(cm->sets[0]));
  cm->sets[cm->n_sets].ids = ids;
  return (int)cm->n_sets++;
}

static bool set_new(const tg_clock_model_t *cm, uint64_t ids) {
  for (uint32_t i = 0; i < cm->n_sets; i++)
    if (cm->sets[i].ids == ids) return false;
  return true;
}

/* A snapshot of clocks |ids| at |ts| (indexed by id; only ids read) as
 * ClockTracker::AddSnapshot takes it: |odd| of them have another unit or
 * are incremental; |refused| when trace processor refuses it for another
 * reason; |followed| when its set can be followed (no sequence-scoped
 * clock in it). A refused snapshot still moved the values of the clocks
 * before the one refused, and marked those that went back: the model
 * takes it as if all of them had. */
static void take_snapshot(tg_clock_model_t *cm, uint64_t ids,
                          const uint64_t *ts, uint64_t odd, bool refused,
                          bool followed) {
  bool ok = !refused && !(ids & (odd | cm->odd));
  cm->odd |= odd;
  int s = followed ? set_of(cm, ids, true) : -1;
  if (s < 0) ok = false;
  for (uint64_t rest = ids; rest; rest &= rest - 1) {
    unsigned id = (unsigned)__builtin_ctzll(rest);
    uint64_t v = ts[id], last = 0;
    bool has_last = false;
    if (s >= 0) {
      unsigned r = rank_of(ids, id);
      /* A new set has no values yet: 0 is none (values are unsigned). */
      last = cm->sets[s].max[r];
      has_last = last != 0;
      if (v > last) cm->sets[s].max[r] = v;
    } else if (cm->seen & BIT(id)) {
      last = cm->max[id];
      has_last = true;
    }
    if (has_last && v < last) {
      if (id == BOOTTIME) {
        ok = false; /* the trace clock cannot go back: refused */
      } else {
        cm->nonmono |= BIT(id);
        cm->adj[id] = 0;
      }
    }
    if (!(cm->seen & BIT(id)) || v > cm->max[id]) cm->max[id] = v;
    cm->seen |= BIT(id);
  }
  if (!ok) return;
  for (uint64_t rest = ids; rest; rest &= rest - 1) {
    unsigned id = (unsigned)__builtin_ctzll(rest);
    if (!(cm->nonmono & BIT(id))) cm->adj[id] |= ids & ~BIT(id);
  }
}

void tg_clock_model_preamble(tg_clock_model_t *cm, const uint64_t ts[3]) {
  uint64_t v[64];
  v[BOOTTIME] = ts[0];
  v[MONOTONIC] = ts[1];
  v[REALTIME] = ts[2];
  take_snapshot(cm, BIT(BOOTTIME) | BIT(MONOTONIC) | BIT(REALTIME), v, 0,
                false, true);
}

/* A path from |src| to BOOTTIME of at most MAX_HOPS edges. */
static bool reaches_boot(const tg_clock_model_t *cm, unsigned src) {
  if (src == BOOTTIME) return true;
  uint64_t reached = BIT(src), frontier = BIT(src);
  for (int hop = 0; hop < MAX_HOPS && frontier; hop++) {
    uint64_t next = 0;
    for (uint64_t f = frontier; f; f &= f - 1)
      next |= cm->adj[__builtin_ctzll(f)];
    if (next & BIT(BOOTTIME)) return true;
    frontier = next & ~reached;
    reached |= next;
  }
  return false;
}

static bool seq_named(const tg_clock_model_t *cm, uint32_t seq) {
  uint32_t h = (seq * 2654435761u) >> 22; /* 10 bits */
  return cm->seq_named[h >> 6] & BIT(h & 63);
}

static int ftrace_of(const tg_clock_model_t *cm, uint32_t seq) {
  for (uint32_t i = 0; i < cm->n_ftrace; i++)
    if (cm->ftrace[i].seq == seq) return (int)i;
  return -1;
}

/* Whether the bundle's own pair, if it has one, is taken by trace
 * processor (not skipped as the last one's twin). */
static bool pair_taken(const tg_clock_model_t *cm, const tg_ts_clocks_t *c) {
  return (c->flags & TG_TS_BUNDLE_SNAP) &&
         !(cm->has_last_fts && cm->last_fts == c->ftrace_ts);
}

/* A MONOTONIC_RAW bundle: placed through what is known, or tied by its
 * own pair {MONOTONIC_RAW, BOOTTIME}. */
static bool raw_placed(const tg_clock_model_t *cm, const tg_ts_clocks_t *c) {
  if (reaches_boot(cm, MONOTONIC_RAW)) return true;
  if (!pair_taken(cm, c)) return false;
  const uint64_t ids = BIT(MONOTONIC_RAW) | BIT(BOOTTIME);
  if ((cm->odd & ids) || (cm->nonmono & BIT(MONOTONIC_RAW))) return false;
  if ((cm->seen & BIT(MONOTONIC_RAW)) && c->ftrace_ts < cm->max[MONOTONIC_RAW])
    return false; /* would go back: no edge leaves it */
  if (set_new(cm, ids)) return cm->n_sets < TG_CLOCK_MODEL_SETS;
  int s = -1;
  for (uint32_t i = 0; i < cm->n_sets; i++)
    if (cm->sets[i].ids == ids) s = (int)i;
  return c->boot_ts >= cm->sets[s].max[rank_of(ids, BOOTTIME)];
}

/* A global-clock bundle of |seq|: trace processor takes its clock as
 * the sequence's clock 64, tied to BOOTTIME by the bundles' pairs. */
static bool global_placed(const tg_clock_model_t *cm, const tg_ts_clocks_t *c,
                          uint32_t seq) {
  if (seq_named(cm, seq)) return false;
  int i = ftrace_of(cm, seq);
  if (i >= 0 && cm->ftrace[i].nonmono) return false;
  if (i >= 0 && cm->ftrace[i].synced) return true;
  if (!pair_taken(cm, c)) return false;
  if (i < 0) return cm->n_ftrace < TG_CLOCK_MODEL_FTRACE_SEQS;
  return c->ftrace_ts >= cm->ftrace[i].max_fts &&
         c->boot_ts >= cm->ftrace[i].max_boot;
}

/* The entry of clock |id| (from 64) of sequence |seq| in the held
 * properties, or -1. Producers' global clocks (from 128) are the
 * machine's, whatever the sequence. */
static int props_of(const tg_clock_model_t *cm, uint64_t id, uint32_t seq) {
  uint32_t key = id < 128 ? seq : 0;
  for (uint32_t i = 0; i < cm->n_props; i++)
    if (cm->props[i].id == id && cm->props[i].seq == key) return (int)i;
  return -1;
}

/* Whether trace processor takes the snapshot's clocks from 64 with their
 * properties, and the model can hold them: each as its first snapshot
 * registered it, the new ones within the table. */
static bool props_ok(const tg_clock_model_t *cm, const tg_ts_clocks_t *c,
                     uint32_t seq) {
  uint32_t add = 0;
  for (uint32_t k = 0; k < c->n_ext; k++) {
    /* ftrace's global clock is the sequence's clock 64, registered by the
     * bundles' pairs in nanoseconds, not incremental. */
    if (c->ext[k].id == 64 && ftrace_of(cm, seq) >= 0 &&
        (c->ext[k].unit != 1 || c->ext[k].inc))
      return false;
    int i = props_of(cm, c->ext[k].id, seq);
    if (i < 0)
      add++;
    else if (cm->props[i].unit != c->ext[k].unit ||
             cm->props[i].inc != c->ext[k].inc)
      return false;
  }
  return cm->n_props + add <= cm->cap_props;
}

void tg_clock_model_reserve(tg_clock_model_t *cm, const tg_ts_clocks_t *c,
                            uint32_t seq) {
  if (!(c->flags & TG_TS_SNAPSHOT)) return;
  uint32_t need = cm->n_props;
  for (uint32_t k = 0; k < c->n_ext; k++)
    if (props_of(cm, c->ext[k].id, seq) < 0) need++;
  if (need <= cm->cap_props || need > TG_CLOCK_MODEL_MAX_PROPS) return;
  uint32_t cap = cm->cap_props ? cm->cap_props : 8;
  while (cap < need) cap *= 2;
  if (cap > TG_CLOCK_MODEL_MAX_PROPS) cap = TG_CLOCK_MODEL_MAX_PROPS;
  tg_clock_props_t *p = realloc(cm->props, cap * sizeof(*p));
  if (!p) return; /* the snapshot is refused: left out, counted */
  cm->props = p;
  cm->cap_props = cap;
}

/* Whether BOOTTIME may go back in the snapshot against the last one of
 * the same clocks, which trace processor refuses for the trace clock.
 * It compares within the snapshots of one set of clock ids, a
 * sequence-scoped clock's id being its sequence's own: so a snapshot
 * naming clocks from 64 is compared only with those that named every one
 * of them, whose BOOTTIME is at most the lowest of their boot_max (none
 * when one never came with BOOTTIME: a new set). The others as
 * take_snapshot() sets them apart. */
static bool boot_back(const tg_clock_model_t *cm, const tg_ts_clocks_t *c,
                      uint32_t seq) {
  if (!(c->ids & BIT(BOOTTIME))) return false;
  uint64_t v = c->ts[BOOTTIME];
  if (c->n_ext) {
    uint64_t low = UINT64_MAX;
    for (uint32_t k = 0; k < c->n_ext; k++) {
      int i = props_of(cm, c->ext[k].id, seq);
      if (i < 0 || !cm->props[i].boot_seen) return false;
      if (cm->props[i].boot_max < low) low = cm->props[i].boot_max;
    }
    return v < low;
  }
  for (uint32_t i = 0; i < cm->n_sets; i++)
    if (cm->sets[i].ids == c->ids) {
      uint64_t last = cm->sets[i].max[rank_of(c->ids, BOOTTIME)];
      return last != 0 && v < last;
    }
  if (cm->n_sets < TG_CLOCK_MODEL_SETS &&
      __builtin_popcountll(c->ids) <= TG_CLOCK_MODEL_SET_CLOCKS)
    return false; /* a new set: nothing to compare with */
  return (cm->seen & BIT(BOOTTIME)) && v < cm->max[BOOTTIME];
}

/* Whether the packet's ClockSnapshot is one trace processor takes and the
 * model can follow (clock_model.h). */
static bool snapshot_ok(const tg_clock_model_t *cm, const tg_ts_clocks_t *c,
                        uint32_t seq) {
  if (c->flags & (TG_TS_SNAP_REJECTED | TG_TS_SNAP_MANY)) return false;
  /* A builtin clock with a unit or incremental: trace processor takes it
   * the first time, then refuses every snapshot giving it others; the
   * model follows builtin clocks in nanoseconds only. */
  if (c->odd) return false;
  return props_ok(cm, c, seq) && !boot_back(cm, c, seq);
}

tg_clock_verdict_t tg_clock_model_check(const tg_clock_model_t *cm,
                                        const tg_ts_clocks_t *c,
                                        uint32_t seq) {
  if (!c->flags) return TG_CLOCK_OK;
  if (c->flags & TG_TS_TWICE) return TG_CLOCK_UNTRACKED;
  if ((c->flags & TG_TS_SNAPSHOT) && !snapshot_ok(cm, c, seq))
    return TG_CLOCK_REFUSED;
  if ((c->flags & TG_TS_SNAP_PRIMARY) && c->primary != BOOTTIME)
    return TG_CLOCK_PRIMARY;
  if (!(c->flags & TG_TS_BUNDLE)) return TG_CLOCK_OK;
  switch (c->ftrace_clock) {
    case FTRACE_MONO_RAW:
      return raw_placed(cm, c) ? TG_CLOCK_OK : TG_CLOCK_NO_PATH;
    case FTRACE_GLOBAL:
      if (ftrace_of(cm, seq) < 0 && !seq_named(cm, seq) &&
          cm->n_ftrace == TG_CLOCK_MODEL_FTRACE_SEQS)
        return TG_CLOCK_UNTRACKED;
      return global_placed(cm, c, seq) ? TG_CLOCK_OK : TG_CLOCK_NO_PATH;
    default:
      return TG_CLOCK_OK; /* BOOTTIME, the trace clock */
  }
}

void tg_clock_model_apply(tg_clock_model_t *cm, const tg_ts_clocks_t *c,
                          uint32_t seq) {
  if (c->flags & TG_TS_SNAPSHOT) {
    if (c->flags & TG_TS_SNAP_SEQ_CLOCK) {
      uint32_t h = (seq * 2654435761u) >> 22;
      cm->seq_named[h >> 6] |= BIT(h & 63);
    }
    bool boot = (c->ids & BIT(BOOTTIME)) != 0;
    for (uint32_t k = 0; k < c->n_ext; k++) {
      int i = props_of(cm, c->ext[k].id, seq);
      if (i < 0) {
        if (cm->n_props == cm->cap_props) continue; /* refused: never here */
        i = (int)cm->n_props++;
        memset(&cm->props[i], 0, sizeof(cm->props[0]));
        cm->props[i].id = c->ext[k].id;
        cm->props[i].unit = c->ext[k].unit;
        cm->props[i].inc = c->ext[k].inc;
        cm->props[i].seq = c->ext[k].id < 128 ? seq : 0;
      }
      if (boot && (!cm->props[i].boot_seen ||
                   c->ts[BOOTTIME] > cm->props[i].boot_max)) {
        cm->props[i].boot_max = c->ts[BOOTTIME];
        cm->props[i].boot_seen = true;
      }
    }
    /* A snapshot naming a clock from 64 ties nothing for the model, and
     * is a set of its own for trace processor: not followed. */
    take_snapshot(cm, c->ids, c->ts, c->odd,
                  (c->flags & (TG_TS_SNAP_REJECTED | TG_TS_SNAP_CUSTOM)) != 0,
                  !(c->flags & (TG_TS_SNAP_SEQ_CLOCK | TG_TS_SNAP_CUSTOM)));
  }
  if (!(c->flags & TG_TS_BUNDLE) || !(c->flags & TG_TS_BUNDLE_SNAP)) return;
  /* A pair that may have been skipped as the last one's twin still
   * counts for what goes back, never for a tie. */
  bool taken = pair_taken(cm, c);
  cm->last_fts = c->ftrace_ts;
  cm->has_last_fts = true;
  if (c->ftrace_clock == FTRACE_MONO_RAW) {
    uint64_t v[64];
    v[MONOTONIC_RAW] = c->ftrace_ts;
    v[BOOTTIME] = c->boot_ts;
    take_snapshot(cm, BIT(MONOTONIC_RAW) | BIT(BOOTTIME), v, 0, !taken, true);
  } else if (c->ftrace_clock == FTRACE_GLOBAL) {
    int i = ftrace_of(cm, seq);
    if (i < 0) {
      if (cm->n_ftrace == TG_CLOCK_MODEL_FTRACE_SEQS) return;
      i = (int)cm->n_ftrace++;
      memset(&cm->ftrace[i], 0, sizeof(cm->ftrace[0]));
      cm->ftrace[i].seq = seq;
      cm->ftrace[i].max_fts = c->ftrace_ts;
      cm->ftrace[i].max_boot = c->boot_ts;
      cm->ftrace[i].synced = taken && !seq_named(cm, seq);
      return;
    }
    if (c->ftrace_ts < cm->ftrace[i].max_fts) cm->ftrace[i].nonmono = true;
    bool boot_back = c->boot_ts < cm->ftrace[i].max_boot;
    if (c->ftrace_ts > cm->ftrace[i].max_fts) cm->ftrace[i].max_fts = c->ftrace_ts;
    if (c->boot_ts > cm->ftrace[i].max_boot) cm->ftrace[i].max_boot = c->boot_ts;
    if (taken && !boot_back && !cm->ftrace[i].nonmono && !seq_named(cm, seq))
      cm->ftrace[i].synced = true;
  }
}
