/* The re-clocking pass's state, shared by its files (reclock.h):
 * reclock_seq.c follows host sequences to their packets' times,
 * reclock.c reads and writes the file and gathers the requests,
 * reclock_place.c fits and places the hosts. Not for other units.
 */
#ifndef TRACEGATE_CONSUMER_FLEET_RECLOCK_INTERNAL_H
#define TRACEGATE_CONSUMER_FLEET_RECLOCK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/u64_map.h"
#include "consumer/fleet/pair_clock.h"
#include "consumer/fleet/reclock.h"

/* A sequence-scoped clock (64..127) of a sequence, as trace processor
 * keeps it: its last value (raw units; an incremental clock's deltas add
 * to it) and the snapshot that ties it to machine 0's BOOTTIME. */
typedef struct tg__rc_clock {
  uint32_t id;
  bool incremental, tied;
  uint64_t unit;  /* ns per unit, 1..1e9 */
  int64_t value;  /* the last value (units) */
  int64_t snap_value, snap_boot;
} tg__rc_clock_t;

/* A host sequence on machine 0. */
typedef struct tg__rc_seq {
  uint32_t seq;
  uint32_t host;
  uint64_t def_clock; /* TracePacketDefaults.timestamp_clock_id; 0: none */
  uint64_t def_track; /* its TrackEventDefaults.track_uuid; 0: none */
  uint32_t n_clocks;
  tg__rc_clock_t clocks[TG_RECLOCK_SEQ_CLOCKS];
} tg__rc_seq_t;

/* What a packet holds that the pass reads (last field wins). */
typedef struct tg__rc_pkt {
  bool has_machine, has_seq, has_ts, has_clock, cleared;
  uint64_t machine, seq, ts, clock;
  const uint8_t *te, *defaults, *snap, *rcs;
  size_t te_n, defaults_n, snap_n, rcs_n;
} tg__rc_pkt_t;

/* One entry of a slice stack: the slice's begin (collector time) and the
 * first flow it starts and ends (0: none). */
typedef struct tg__rc_open {
  int64_t begin;
  uint64_t flow_out, flow_in;
} tg__rc_open_t;

typedef struct tg__rc_track {
  uint32_t seq;
  uint64_t uuid;
  uint32_t depth, cap;
  tg__rc_open_t *open;
} tg__rc_track_t;

/* A flow's two halves (host UINT32_MAX: not seen yet). */
typedef struct tg__rc_flow {
  uint64_t id;
  uint32_t c_host, s_host;
  int64_t c1, c2, s1, s2;
} tg__rc_flow_t;

/* The samples of one ordered host pair (client a, server b), and its fit
 * per window once placed. */
typedef struct tg__rc_win {
  bool own; /* fitted from its own samples; else borrowed */
  tg_pair_fit_t fit;
  int64_t lo, hi; /* where the line is evaluated (clamped) */
} tg__rc_win_t;

typedef struct tg__rc_edge {
  uint32_t a, b;
  tg_pair_sample_t *s;
  size_t n, cap;
  uint64_t used, rejected;
  uint64_t outside; /* samples timed outside the recording: not used */
  bool fitted, in_tree;
  double min_margin;
  tg__rc_win_t *win;
} tg__rc_edge_t;

/* A host's correction: its parent's in the placement tree plus |sign|
 * times the fitted lines of |edge| (client minus server: + for a client
 * placed from its server, - for a server from its client), each window's
 * line held within its samples' span, so that what the fit kept in order
 * stays so. |edge| NULL: not moved (an anchor, or a host off the tree). */
typedef struct tg__rc_corr {
  const struct tg__rc_edge *edge;
  size_t parent;
  double sign;
} tg__rc_corr_t;

/* The rewrite's view of a moved host's own machine: its last
 * RemoteClockSync packet as it came, the offset its first pair says (the
 * host's BOOTTIME minus the collector's), and the correction the last
 * sync written for it carries. */
typedef struct tg__rc_hsync {
  tg_buf_t last;
  int64_t host_minus_coll;
  double corr;
  bool has;
} tg__rc_hsync_t;

struct tg_reclock {
  size_t n_hosts;
  tg__rc_hsync_t *hsync; /* per host, the rewrite's */
  /* Machine 0's head ClockSnapshot: MONOTONIC and REALTIME times of the
   * hosts' app packets become BOOTTIME by it. */
  bool has_head;
  int64_t head_boot, head_mono, head_real;
  /* The latest collector time a host's RemoteClockSync names. */
  int64_t last_sync;
  /* Host sequences on machine 0: seq -> index + 1; the last one used. */
  tg_u64_map_t seq_map;
  tg__rc_seq_t *seqs;
  size_t n_seqs, cap_seqs;
  size_t last_seq; /* index + 1; 0: none */
  /* Slice stacks: a mix of (seq, uuid) -> index + 1, probed. */
  tg_u64_map_t track_map;
  tg__rc_track_t *tracks;
  size_t n_tracks;
  /* Flows: id -> index + 1. */
  tg_u64_map_t flow_map;
  tg__rc_flow_t *flows;
  size_t n_flows, cap_flows;
  /* Ordered pairs: a * n_hosts + b -> index + 1. */
  tg_u64_map_t edge_map;
  tg__rc_edge_t *edges;
  size_t n_edges, cap_edges;
  /* Placement. */
  int64_t t_lo, t_hi, win_ns;
  size_t n_win;
  tg__rc_corr_t *corr; /* per host; edge == NULL: not moved */
  int64_t *constant;   /* per host, with has_constant */
  bool *has_constant;
  /* The rewrite's re-encoded RemoteClockSync (0), its parts (1, 2), and
   * whether an append failed (no memory). */
  tg_buf_t scratch[3];
  bool enc_failed;
};

/* Reads the fields of packet |p| the pass uses: false when it does not
 * parse (or a field arrives with another wire type). */
bool tg__rc_packet(const uint8_t *p, size_t n, tg__rc_pkt_t *out);
/* Forgets every sequence's state (each read starts afresh). */
void tg__rc_seqs_reset(tg_reclock_t *rc);
/* Machine 0's packet |k| (not of a host): its head ClockSnapshot. */
void tg__rc_machine0(tg_reclock_t *rc, const tg__rc_pkt_t *k);
/* Host |host|'s machine-0 packet |k| on sequence |k->seq|: follows the
 * sequence's state; returns 1 with *t (collector time, as pass 1 placed
 * it) when the packet has a time it can follow, 0 when it has none (or is
 * a ClockSnapshot), -1 when its time cannot be followed, -2 when the
 * sequence is past the table's bound. *seq_out: its sequence (NULL on
 * -2). */
int tg__rc_follow(tg_reclock_t *rc, uint32_t host, const tg__rc_pkt_t *k,
                  int64_t *t, tg__rc_seq_t **seq_out);

/* The correction of host |k| at collector time |t| (ns). */
double tg__rc_corr_at(const tg_reclock_t *rc, size_t k, int64_t t);
bool tg__rc_moved(const tg_reclock_t *rc, size_t k);

#endif /* TRACEGATE_CONSUMER_FLEET_RECLOCK_INTERNAL_H */
