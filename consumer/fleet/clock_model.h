/* One host's clocks as trace processor sees them, for the merge
 * (docs/merge.md, "Clocks across packets"): which clocks have a path to
 * the host's trace clock, from the merge's own preamble, the host's
 * ClockSnapshots as trace processor (v50.1, ClockTracker::AddSnapshot)
 * accepts them, and the clock pairs of its ftrace bundles. The merge asks
 * it, before writing a packet, whether trace processor can place the
 * packet's times, and tells it what a packet it writes adds.
 *
 * The model errs one way only: where it cannot tell, it says "no path"
 * (the packet is left out and counted), never "a path" where trace
 * processor has none, as that refuses the whole file. So it follows only
 * builtin clocks (ids under 64) and, for ftrace's global clock, the
 * sequences' own clock 64; a snapshot naming a producer's clock from 128
 * ties nothing for it; a clock once seen with a unit other than 1 ns
 * ties nothing again; a clock is non-monotonic as soon as it is lower
 * than the highest value it had in any snapshot (trace processor compares
 * within snapshots of the same set of clocks).
 *
 * A ClockSnapshot trace processor would refuse is left out, so that its
 * stat invalid_clock_snapshots, which is the whole file's, never comes
 * from a host: one naming a clock twice, a global clock incremental, a
 * clock from 64 with other properties than its first snapshot gave it, a
 * BOOTTIME that goes back; and, as the model could not follow it, one
 * giving a builtin clock a unit or incremental encoding, or registering a
 * clock from 64 past TG_CLOCK_MODEL_MAX_PROPS.
 *
 * The host's trace clock is BOOTTIME: a ClockSnapshot naming another
 * primary_trace_clock is left out (trace processor would move the
 * machine's timeline onto it, and refuse the file at the next time it
 * cannot convert there).
 *
 * 2 KiB per host, and 40 bytes per clock from 64 held, allocated as such
 * clocks appear (tg_clock_model_reserve, the one call that allocates);
 * every other call is pure. */
#ifndef TRACEGATE_CONSUMER_FLEET_CLOCK_MODEL_H
#define TRACEGATE_CONSUMER_FLEET_CLOCK_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "consumer/fleet/trace_schema.h"

/* Sequences of one host whose ftrace bundles on the global clock are
 * followed (traced_probes and tracegate-probes write ftrace on one
 * sequence per data source); a global-clock bundle on one more is left
 * out. */
#define TG_CLOCK_MODEL_FTRACE_SEQS 16

/* Sets of clocks (snapshots of the same clocks) whose last values are
 * followed, and clocks per set: trace processor checks a clock goes
 * forward within the snapshots of one set. A snapshot of another set, or
 * of more clocks, ties nothing and is checked against every value. */
#define TG_CLOCK_MODEL_SETS 8
#define TG_CLOCK_MODEL_SET_CLOCKS 8

/* A clock from 64 with its properties as its first snapshot registered
 * them, which trace processor holds it to: sequence-scoped ones (64..127,
 * per sequence: Perfetto's SDK names clock 64 on each writer's) and
 * producers' global ones (from 128, seq 0: the machine's). */
typedef struct tg_clock_props {
  uint64_t id, unit;
  uint64_t boot_max; /* the highest BOOTTIME of a snapshot naming it */
  uint32_t seq;
  bool inc;
  bool boot_seen;    /* boot_max is one */
} tg_clock_props_t;

/* Clocks from 64 held per host, at most: as many as the merge follows
 * sequences' incremental state (TG_MERGE_HOST_MAX_STATE_SEQS). A
 * snapshot that would register one more is left out. */
#define TG_CLOCK_MODEL_MAX_PROPS 4096u

typedef struct tg_clock_model {
  uint64_t adj[64];   /* adj[a] bit b: an edge a -> b */
  uint64_t max[64];   /* the highest value of each clock, any set */
  uint64_t seen;      /* clocks with a max */
  uint64_t nonmono;   /* clocks that went back: no edge leaves them */
  uint64_t odd;       /* clocks seen with a unit other than 1 ns */
  struct {
    uint64_t ids;                             /* the set */
    uint64_t max[TG_CLOCK_MODEL_SET_CLOCKS];  /* by rank of the id in it */
  } sets[TG_CLOCK_MODEL_SETS];
  uint32_t n_sets;
  /* ftrace: trace processor skips a bundle's clock pair whose
   * ftrace_timestamp equals the last one it took, on any sequence. */
  uint64_t last_fts;
  bool has_last_fts;
  /* Sequences whose clocks 64..127 a ClockSnapshot named (a 1024-bit
   * set by hash: a false hit only costs that sequence its global-clock
   * bundles): such a snapshot may have registered the sequence's clock
   * 64, which ftrace's global clock is, with other properties. */
  uint64_t seq_named[16];
  struct {
    uint32_t seq;
    bool synced;       /* a pair of its clock and BOOTTIME was taken */
    bool nonmono;      /* its ftrace_timestamp went back */
    uint64_t max_fts, max_boot;
  } ftrace[TG_CLOCK_MODEL_FTRACE_SEQS];
  uint32_t n_ftrace;
  /* The clocks from 64 held (tg_clock_model_reserve grows it). */
  tg_clock_props_t *props;
  uint32_t n_props, cap_props;
} tg_clock_model_t;

/* Why a packet is left out. */
typedef enum tg_clock_verdict {
  TG_CLOCK_OK = 0,
  TG_CLOCK_NO_PATH,   /* times on a clock with no path to BOOTTIME */
  TG_CLOCK_PRIMARY,   /* a ClockSnapshot moving the trace clock */
  TG_CLOCK_UNTRACKED, /* a global-clock bundle past the followed sequences,
                         or a packet with two bundles or snapshots */
  TG_CLOCK_REFUSED,   /* a ClockSnapshot trace processor refuses
                         (invalid_clock_snapshots), or one the model could
                         not follow to know it would not */
} tg_clock_verdict_t;

void tg_clock_model_init(tg_clock_model_t *cm);
void tg_clock_model_free(tg_clock_model_t *cm);

/* Before checking a packet whose facts are |c|: room for the clocks from
 * 64 its ClockSnapshot would register, when the bound and memory allow.
 * Without it, tg_clock_model_check refuses the snapshot. */
void tg_clock_model_reserve(tg_clock_model_t *cm, const tg_ts_clocks_t *c,
                            uint32_t seq);

/* The merge's own ClockSnapshot of the host (preamble): BOOTTIME,
 * MONOTONIC and REALTIME at |ts| (in that order). */
void tg_clock_model_preamble(tg_clock_model_t *cm, const uint64_t ts[3]);

/* Whether trace processor can place the times of a packet of sequence
 * |seq| whose facts are |c| (tg_trace_schema_check), given the packets
 * of the host written so far. Pure. */
tg_clock_verdict_t tg_clock_model_check(const tg_clock_model_t *cm,
                                        const tg_ts_clocks_t *c, uint32_t seq);

/* The packet judged TG_CLOCK_OK is written: what it ties is noted. */
void tg_clock_model_apply(tg_clock_model_t *cm, const tg_ts_clocks_t *c,
                          uint32_t seq);

#endif /* TRACEGATE_CONSUMER_FLEET_CLOCK_MODEL_H */
