/* The merge's joined mode: see merge_links.h and docs/merge.md, "Links
 * across hosts". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/fleet/merge_links.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"

/* TracePacket fields. */
#define PKT_TRUSTED_UID 3
#define PKT_CLOCK_SNAPSHOT 6
#define PKT_TIMESTAMP 8
#define PKT_SEQ_ID 10
#define PKT_TRACK_EVENT 11
#define PKT_INTERNED_DATA 12
#define PKT_SEQUENCE_FLAGS 13
#define PKT_INCREMENTAL_STATE_CLEARED 41
#define PKT_PREVIOUS_PACKET_DROPPED 42
#define PKT_PROCESS_DESCRIPTOR 43
#define PKT_THREAD_DESCRIPTOR 44
#define PKT_TIMESTAMP_CLOCK_ID 58
#define PKT_DEFAULTS 59
#define PKT_TRACK_DESCRIPTOR 60
#define PKT_TRUSTED_PID 79
#define PKT_FIRST_PACKET_ON_SEQUENCE 87
/* TracePacketDefaults, TrackEventDefaults. */
#define DEF_TIMESTAMP_CLOCK_ID 58
#define DEF_TRACK_EVENT 11
#define TED_TRACK_UUID 11
/* TrackEvent (and TrackEventDefaults' uuids, the same numbers). */
#define TE_TIMESTAMP_DELTA_US 1
#define TE_LEGACY_EVENT 6
#define TE_TRACK_UUID 11
#define TE_TIMESTAMP_ABSOLUTE_US 16
#define TE_EXTRA_COUNTER_UUIDS 31
#define TE_FLOW_IDS_OLD 36
#define TE_TERMINATING_FLOW_IDS_OLD 42
#define TE_EXTRA_DOUBLE_COUNTER_UUIDS 45
#define TE_FLOW_IDS 47
#define TE_TERMINATING_FLOW_IDS 48
/* LegacyEvent. */
#define LE_PID_OVERRIDE 18
#define LE_TID_OVERRIDE 19
/* InternedData. */
#define ID_EVENT_CATEGORIES 1
#define ID_EVENT_NAMES 2
/* TrackDescriptor, ProcessDescriptor, ThreadDescriptor. */
#define TD_UUID 1
#define TD_PROCESS 3
#define TD_THREAD 4
#define TD_PARENT_UUID 5
#define PD_PID 1
#define PD_CMDLINE 2
#define PD_PROCESS_NAME 6
#define PD_START_TIMESTAMP_NS 7
#define THD_PID 1
#define THD_TID 2
#define THD_REFERENCE_TIMESTAMP_US 6
/* ClockSnapshot and its Clock. */
#define CS_CLOCKS 1
#define CLOCK_ID 1
#define CLOCK_TIMESTAMP 2

#define BUILTIN_REALTIME 1
#define BUILTIN_MONOTONIC 3
#define BUILTIN_BOOTTIME 6
#define SEQ_CLOCK_FIRST 64
#define SEQ_CLOCK_LAST 127

#define SEQ_NEEDS_INCREMENTAL_STATE 2u

/* A host's sequence as the joined mode follows it (merge.h, jseqs). */
/* STAYED: on the host's machine as the host had no clock estimate;
 * SHARED: there as its first app packet named a track another host had
 * (the same machine twice in an inventory does so: not a loss). */
enum { JSEQ_UNDECIDED, JSEQ_MOVED, JSEQ_STAYED, JSEQ_SHARED };
typedef struct tg_merge_jseq {
  uint8_t state;
  bool m0_valid;       /* its incremental state, as machine 0 has it */
  uint32_t early;      /* written on the host's machine while undecided */
  uint32_t clock;      /* TracePacketDefaults.timestamp_clock_id (0: none) */
  uint64_t seq_clocks; /* clocks 64..127 a snapshot defined on machine 0 */
  uint64_t last_boot;  /* the highest moved BOOTTIME of its snapshots */
} tg_merge_jseq_t;

/* --- the shared and per-host state -------------------------------------------- */

void tg__links_init(tg_merge_t *m) {
  m->next_pid = TG_MERGE_PID_BASE;
  tg_u64_map_init(&m->uuids, TG_MERGE_MAX_UUIDS);
  tg_u64_map_init(&m->flows, TG_MERGE_MAX_FLOWS);
  tg_buf_init(&m->scratch, 0);
}

void tg__links_free(tg_merge_t *m) {
  tg_u64_map_free(&m->uuids);
  tg_u64_map_free(&m->flows);
  tg_buf_free(&m->scratch);
}

void tg__links_host_init(tg_merge_host_t *mh) {
  tg_u32_map_init(&mh->jseq_map, TG_MERGE_HOST_MAX_STATE_SEQS);
  tg_u32_map_init(&mh->pids, TG_MERGE_HOST_MAX_PIDS);
}

void tg__links_host_free(tg_merge_host_t *mh) {
  tg_u32_map_free(&mh->jseq_map);
  tg_u32_map_free(&mh->pids);
  free(mh->jseqs);
  mh->jseqs = NULL;
  mh->n_jseqs = mh->cap_jseqs = 0;
  mh->jlast_ix = 0;
}

void tg_merge_set_app_tracks(tg_merge_t *m, tg_merge_app_tracks_t mode) {
  m->app_tracks = mode;
}

int tg_merge_app_tracks_parse(const char *s, tg_merge_app_tracks_t *mode) {
  if (!strcmp(s, "joined")) *mode = TG_MERGE_APP_JOINED;
  else if (!strcmp(s, "machines")) *mode = TG_MERGE_APP_MACHINES;
  else return -EINVAL;
  return 0;
}

const char *tg_merge_app_tracks_name(tg_merge_app_tracks_t mode) {
  return mode == TG_MERGE_APP_JOINED ? "joined" : "machines";
}

/* |seq|'s slot, added when new; NULL past the bound (not followed: its
 * packets stay on the host's machine) or without memory (*err). */
static tg_merge_jseq_t *jseq_find(tg_merge_host_t *mh, uint32_t seq, int *err) {
  if (mh->jlast_ix && mh->jlast_seq == seq) return &mh->jseqs[mh->jlast_ix - 1];
  void *items = mh->jseqs;
  tg_merge_jseq_t *q =
      tg__merge_slot(&mh->jseq_map, &items, &mh->n_jseqs, &mh->cap_jseqs,
                     sizeof(*q), seq, true, err);
  mh->jseqs = items;
  if (!q) return NULL;
  mh->jlast_seq = seq;
  mh->jlast_ix = (uint32_t)(q - mh->jseqs) + 1;
  return q;
}

/* --- the walk of a packet -------------------------------------------------------- */

/* What the walk of a packet found. */
typedef struct walk {
  bool app;     /* an app field (merge_links.h) */
  bool refused; /* a field not allowed on machine 0 */
  bool clock;   /* a time the estimate cannot move */
  bool uuid;    /* a uuid another host owns (or past the bound) */
  bool snapshot, descriptors;
  uint64_t flow[TG__LINKS_FLOWS];
  uint8_t n_flows, flow_ends;
  bool more_flows;
  bool has_ts, has_clock_id, has_default;
  uint64_t ts;
  uint32_t clock_id, default_clock;
  uint64_t seq_clocks, boot;
} walk_t;

/* Whether host |me| (index + 1) may use track uuid |u| on machine 0: the
 * first host to name a uuid owns it. An error (memory) refuses it too. */
static bool uuid_owned(tg_merge_t *m, uint32_t me, uint64_t u) {
  uint32_t owner = tg_u64_map_get(&m->uuids, u);
  if (owner) return owner == me;
  return tg_u64_map_put(&m->uuids, u, me) == 0;
}

/* A repeated uint64 field |f| (one value, or a packed run) whose values
 * are uuids: false when one is another host's. */
static bool uuids_owned(tg_merge_t *m, uint32_t me, const tg_pb_field_t *f) {
  if (f->type == TG_PB_WT_VARINT) return uuid_owned(m, me, f->value);
  if (f->type != TG_PB_WT_LEN) return true; /* the schema check's */
  const uint8_t *p = f->data, *end = f->data + f->size;
  while (p < end) {
    uint64_t v;
    size_t k = tg_pb_read_varint(p, end, &v);
    if (!k) return true;
    if (!uuid_owned(m, me, v)) return false;
    p += k;
  }
  return true;
}

static bool has_pid_override(const uint8_t *d, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, d, n);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == LE_PID_OVERRIDE || f.id == LE_TID_OVERRIDE) return true;
  return false;
}

/* A TrackEvent (|event|), or TrackEventDefaults: its uuids have the same
 * numbers, and it has no flows. */
static void walk_event(tg_merge_t *m, uint32_t me, const uint8_t *d, size_t n,
                       bool event, walk_t *w) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, d, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    switch (f.id) {
      case TE_TRACK_UUID:
      case TE_EXTRA_COUNTER_UUIDS:
      case TE_EXTRA_DOUBLE_COUNTER_UUIDS:
        if (!uuids_owned(m, me, &f)) w->uuid = true;
        break;
      case TE_FLOW_IDS:
      case TE_TERMINATING_FLOW_IDS:
      case TE_FLOW_IDS_OLD:
      case TE_TERMINATING_FLOW_IDS_OLD:
        if (!event) break;
        if (w->n_flows == TG__LINKS_FLOWS) {
          w->more_flows = true;
          break;
        }
        if (f.id == TE_TERMINATING_FLOW_IDS ||
            f.id == TE_TERMINATING_FLOW_IDS_OLD)
          w->flow_ends |= (uint8_t)(1u << w->n_flows);
        w->flow[w->n_flows++] = f.value;
        break;
      /* Microseconds on the trace's clock, or deltas from a thread
       * descriptor's reference: not moved here. */
      case TE_TIMESTAMP_DELTA_US:
      case TE_TIMESTAMP_ABSOLUTE_US:
        w->clock = true;
        break;
      /* Would put the event in a process or thread the pid map does not
       * cover: another host's, on machine 0. */
      case TE_LEGACY_EVENT:
        if (f.type == TG_PB_WT_LEN && has_pid_override(f.data, f.size))
          w->refused = true;
        break;
      default: break;
    }
  }
}

static bool interns_events(const uint8_t *d, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, d, n);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == ID_EVENT_CATEGORIES || f.id == ID_EVENT_NAMES) return true;
  return false;
}

static void walk_defaults(tg_merge_t *m, uint32_t me, const uint8_t *d,
                          size_t n, walk_t *w) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, d, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id == DEF_TIMESTAMP_CLOCK_ID && f.type == TG_PB_WT_VARINT) {
      w->has_default = true;
      w->default_clock = (uint32_t)f.value;
    } else if (f.id == DEF_TRACK_EVENT && f.type == TG_PB_WT_LEN) {
      w->app = true;
      walk_event(m, me, f.data, f.size, false, w);
    }
  }
}

static void walk_track(tg_merge_t *m, uint32_t me, const uint8_t *d, size_t n,
                       walk_t *w) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, d, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if ((f.id == TD_UUID || f.id == TD_PARENT_UUID) &&
        f.type == TG_PB_WT_VARINT && !uuid_owned(m, me, f.value))
      w->uuid = true;
    else if (f.id == TD_PROCESS || f.id == TD_THREAD)
      w->descriptors = true;
  }
}

/* The host's clock |id| minus the collector's: false for a clock the
 * estimate does not cover. */
static bool offset_of(const tg_merge_host_t *mh, uint32_t id, int64_t *off) {
  switch (id) {
    case 0: /* none: the trace's clock, BOOTTIME */
    case BUILTIN_BOOTTIME: *off = mh->offset[TG_CLK_BOOTTIME]; return true;
    case BUILTIN_MONOTONIC: *off = mh->offset[TG_CLK_MONOTONIC]; return true;
    case BUILTIN_REALTIME: *off = mh->offset[TG_CLK_REALTIME]; return true;
    default: return false;
  }
}

/* |ts| of the host's clock |id| on the collector's: false when it is not
 * one the estimate covers, or the result is not a time (below 0, past
 * INT64_MAX, as trace processor takes them). */
static bool move_time(const tg_merge_host_t *mh, uint32_t id, uint64_t ts,
                      uint64_t *out) {
  int64_t off, r;
  if (!offset_of(mh, id, &off) || ts > INT64_MAX) return false;
  if (__builtin_sub_overflow((int64_t)ts, off, &r) || r < 0) return false;
  *out = (uint64_t)r;
  return true;
}

/* A ClockSnapshot on a moved sequence: only builtin clocks the estimate
 * covers (moved) and the sequence's own (64..127, kept), and at least one
 * of these, so that the snapshot's set of clocks is the sequence's alone
 * on machine 0 (trace processor checks that clocks go forward per set).
 * Its moved BOOTTIME must not go back on the sequence. */
static void walk_snapshot(const tg_merge_host_t *mh, const tg_merge_jseq_t *q,
                          const uint8_t *d, size_t n, walk_t *w) {
  tg_pb_reader_t r, cr;
  tg_pb_field_t f, c;
  tg_pb_reader_init(&r, d, n);
  w->snapshot = true;
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != CS_CLOCKS || f.type != TG_PB_WT_LEN) continue;
    uint64_t id = 0, ts = 0;
    tg_pb_reader_init(&cr, f.data, f.size);
    while (tg_pb_reader_next(&cr, &c) == 1) {
      if (c.id == CLOCK_ID) id = c.value;
      else if (c.id == CLOCK_TIMESTAMP) ts = c.value;
    }
    uint64_t moved;
    if (id >= SEQ_CLOCK_FIRST && id <= SEQ_CLOCK_LAST)
      w->seq_clocks |= 1ull << (id - SEQ_CLOCK_FIRST);
    else if (id == 0 || !move_time(mh, (uint32_t)id, ts, &moved))
      w->clock = true;
    else if (id == BUILTIN_BOOTTIME)
      w->boot = moved;
  }
  if (!w->seq_clocks || (w->boot && q && w->boot < q->last_boot))
    w->clock = true;
}

/* The fields a packet on a moved sequence may have (merge_links.h). */
static bool allowed_on_m0(uint32_t id) {
  switch (id) {
    case PKT_TRACK_EVENT:
    case PKT_TRACK_DESCRIPTOR:
    case PKT_INTERNED_DATA:
    case PKT_DEFAULTS:
    case PKT_CLOCK_SNAPSHOT:
    case PKT_SEQUENCE_FLAGS:
    case PKT_INCREMENTAL_STATE_CLEARED:
    case PKT_TIMESTAMP:
    case PKT_TIMESTAMP_CLOCK_ID:
    case PKT_SEQ_ID:
    case PKT_TRUSTED_UID:
    case PKT_TRUSTED_PID:
    case PKT_FIRST_PACKET_ON_SEQUENCE:
    case PKT_PREVIOUS_PACKET_DROPPED:
    case PKT_THREAD_DESCRIPTOR:
    case PKT_PROCESS_DESCRIPTOR:
      return true;
    /* TracePacket.machine_id (98) among them: the merge cannot take it off
     * without re-encoding the packet, and machine 0 is its absence. */
    default: return false;
  }
}

static void walk_packet(tg_merge_t *m, const tg_merge_host_t *mh,
                        const tg_merge_jseq_t *q, const uint8_t *p, size_t n,
                        walk_t *w) {
  uint32_t me = mh->machine_id;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (!allowed_on_m0(f.id)) w->refused = true;
    bool len = f.type == TG_PB_WT_LEN;
    switch (f.id) {
      case PKT_TIMESTAMP:
        w->has_ts = true;
        w->ts = f.value;
        break;
      case PKT_TIMESTAMP_CLOCK_ID:
        w->has_clock_id = true;
        w->clock_id = (uint32_t)f.value;
        break;
      case PKT_TRACK_EVENT:
        w->app = true;
        if (len) walk_event(m, me, f.data, f.size, true, w);
        break;
      case PKT_TRACK_DESCRIPTOR:
        w->app = true;
        if (len) walk_track(m, me, f.data, f.size, w);
        break;
      case PKT_PROCESS_DESCRIPTOR:
      case PKT_THREAD_DESCRIPTOR:
        w->app = w->descriptors = true;
        break;
      case PKT_DEFAULTS:
        if (len) walk_defaults(m, me, f.data, f.size, w);
        break;
      case PKT_INTERNED_DATA:
        if (len && interns_events(f.data, f.size)) w->app = true;
        break;
      case PKT_CLOCK_SNAPSHOT:
        if (len) walk_snapshot(mh, q, f.data, f.size, w);
        break;
      default: break;
    }
  }
}

/* --- the verdict ------------------------------------------------------------------ */

int tg__links_classify(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                       size_t n, uint32_t orig, unsigned hints,
                       uint64_t flags, bool cleared, bool dropped,
                       bool exempt, tg__links_t *v) {
  /* The rest of *v is set below once the packet is walked: the common
   * paths (the host's other data) touch two fields only. */
  v->q = NULL;
  v->to_m0 = false;
  int err = 0;
  tg_merge_jseq_t *q = jseq_find(mh, orig, &err);
  if (err) return err;
  v->q = q;
  /* A sequence that stayed, or one past the followed ones: its app
   * packets stay on the host's machine, counted. */
  if (!q || q->state == JSEQ_STAYED) {
    if (hints & TG__LINKS_HINT) mh->joined_unclocked++;
    return 1;
  }
  if (q->state == JSEQ_SHARED) {
    if (hints & TG__LINKS_HINT) mh->joined_shared++;
    return 1;
  }
  /* The common case of a host's other data: a sequence with no app
   * field yet, and none in this packet. */
  if (q->state == JSEQ_UNDECIDED && !(hints & TG__LINKS_HINT)) return 1;
  memset(v, 0, sizeof(*v));
  v->q = q;
  /* The uuids this walk claims stay the host's even when the packet is
   * then left out: the host named them. */
  walk_t w = {0};
  walk_packet(m, mh, q, p, n, &w);
  if (q->state == JSEQ_UNDECIDED) {
    if (!w.app) return 1;
    if (!mh->has_offset) {
      q->state = JSEQ_STAYED;
      mh->joined_unclocked++;
      return 1;
    }
    /* Tracks another host named first: on machine 0 they would be that
     * host's, so the whole sequence stays on its own machine, where
     * nothing is lost. Only a sequence already moved loses a packet for
     * a uuid (below). */
    if (w.uuid) {
      q->state = JSEQ_SHARED;
      mh->joined_shared++;
      return 1;
    }
    q->state = JSEQ_MOVED;
    mh->joined_early += q->early;
    q->early = 0;
  }
  v->to_m0 = true;
  if (w.refused) {
    mh->joined_refused++;
    return 0;
  }
  if (w.uuid) {
    mh->joined_uuid++;
    return 0;
  }
  /* Incremental state as machine 0 has it: the sequence's packets before
   * it moved went to the host's machine, their clears with them. A
   * packet that needs it while it is not valid there would be skipped by
   * trace processor, whatever its time: judged by the state alone, as the
   * host's other packets are (merge.c's state_reads: a ring's edge, or a
   * loss on a sequence that never clears), then by machine 0's (its
   * write: joined_early). */
  cleared = cleared || (flags & 1u);
  bool needs = (flags & SEQ_NEEDS_INCREMENTAL_STATE) && !exempt;
  bool valid = cleared || (!dropped && q->m0_valid);
  if (needs && !valid) {
    v->to_m0 = true;
    v->unready = true;
    return 1;
  }
  /* The packet's clock: its own, else its sequence's default after this
   * packet's clear and defaults (trace processor applies both first). */
  uint32_t dflt = cleared ? 0 : q->clock;
  if (w.has_default) dflt = w.default_clock;
  uint32_t clk = w.has_clock_id ? w.clock_id : dflt;
  if (!w.clock && w.has_ts) {
    if (clk >= SEQ_CLOCK_FIRST && clk <= SEQ_CLOCK_LAST) {
      /* Defined on machine 0 by a snapshot of this sequence (this one's
       * included), or trace processor could not place it. */
      uint64_t bit = 1ull << (clk - SEQ_CLOCK_FIRST);
      if (!((q->seq_clocks | w.seq_clocks) & bit)) w.clock = true;
    } else if (move_time(mh, clk, w.ts, &v->ts)) {
      v->has_ts = true;
    } else {
      w.clock = true;
    }
  }
  if (w.clock) {
    mh->joined_clock++;
    return 0;
  }
  v->rewrite = w.snapshot || w.descriptors;
  /* Flow ids are counted as the packet is written (tg__links_write). */
  memcpy(v->flow, w.flow, sizeof(v->flow));
  v->n_flows = w.n_flows;
  v->flow_ends = w.flow_ends;
  v->more_flows = w.more_flows;
  v->set_default = cleared || w.has_default;
  v->default_clock = dflt;
  v->seq_clocks = w.seq_clocks;
  v->boot = w.boot;
  v->m0_valid = valid;
  return 1;
}

void tg__links_stayed(const tg__links_t *v) {
  if (v->q && v->q->state == JSEQ_UNDECIDED && v->q->early < UINT32_MAX)
    v->q->early++;
}

/* --- the rewrite of rare packets -------------------------------------------------- */

/* Host pid or tid |raw| (int32 as its varint holds it) -> its id on
 * machine 0: 0, or -ENOSPC past the host's bound, -ENOMEM. */
static int map_pid(tg_merge_t *m, tg_merge_host_t *mh, uint64_t raw,
                   uint32_t *out) {
  uint32_t key = (uint32_t)raw;
  if (tg_u32_map_get(&mh->pids, key, out)) return 0;
  uint32_t v = m->next_pid;
  int rv = tg_u32_map_put(&mh->pids, key, v);
  if (rv < 0) return rv;
  m->next_pid++; /* 1024 hosts of 4096 ids stay below INT32_MAX */
  *out = v;
  return 0;
}

/* Copies the field |r| just read (it began at |start|) as it was. */
static void copy_field(tg_pbw_t *w, const uint8_t *start,
                       const tg_pb_reader_t *r) {
  tg_pbw_append_raw(w, start, (size_t)(r->cur - start));
}

static const char *host_name(const tg_merge_host_t *mh, char *buf, size_t cap) {
  if (mh->name[0]) return mh->name;
  snprintf(buf, cap, "host%u", mh->machine_id);
  return buf;
}

/* ProcessDescriptor |d| with its pid mapped and its name "HOST/name"
 * (the first cmdline word when it has no name; "HOST" without either);
 * its start time (on the host's clock) dropped. */
static int put_process(tg_merge_t *m, tg_merge_host_t *mh, tg_pbw_t *w,
                       uint32_t field, const uint8_t *d, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  const uint8_t *name = NULL, *cmd = NULL;
  size_t name_n = 0, cmd_n = 0;
  tg_pbw_begin_nested(w, field);
  tg_pb_reader_init(&r, d, n);
  const uint8_t *at = r.cur;
  while (tg_pb_reader_next(&r, &f) == 1) {
    bool len = f.type == TG_PB_WT_LEN;
    if (f.id == PD_PID && f.type == TG_PB_WT_VARINT) {
      uint32_t pid;
      int rv = map_pid(m, mh, f.value, &pid);
      if (rv < 0) return rv;
      tg_pbw_append_varint(w, PD_PID, pid);
    } else if (f.id == PD_PROCESS_NAME && len) {
      name = f.data;
      name_n = f.size;
    } else if (f.id == PD_START_TIMESTAMP_NS) {
      /* dropped */
    } else {
      if (f.id == PD_CMDLINE && len && !cmd) {
        cmd = f.data;
        cmd_n = f.size;
      }
      copy_field(w, at, &r);
    }
    at = r.cur;
  }
  if (!name) {
    name = cmd;
    name_n = cmd_n;
  }
  char fallback[32];
  const char *host = host_name(mh, fallback, sizeof(fallback));
  size_t host_n = strlen(host);
  tg_pbw_begin_nested(w, PD_PROCESS_NAME);
  tg_pbw_append_raw(w, host, host_n);
  if (name) {
    tg_pbw_append_raw(w, "/", 1);
    tg_pbw_append_raw(w, name, name_n);
  }
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
  return 0;
}

/* ThreadDescriptor |d| with its pid and tid mapped, its reference time
 * (on the host's clock, for events this mode leaves out) dropped. */
static int put_thread(tg_merge_t *m, tg_merge_host_t *mh, tg_pbw_t *w,
                      uint32_t field, const uint8_t *d, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pbw_begin_nested(w, field);
  tg_pb_reader_init(&r, d, n);
  const uint8_t *at = r.cur;
  while (tg_pb_reader_next(&r, &f) == 1) {
    if ((f.id == THD_PID || f.id == THD_TID) && f.type == TG_PB_WT_VARINT) {
      uint32_t id;
      int rv = map_pid(m, mh, f.value, &id);
      if (rv < 0) return rv;
      tg_pbw_append_varint(w, f.id, id);
    } else if (f.id != THD_REFERENCE_TIMESTAMP_US) {
      copy_field(w, at, &r);
    }
    at = r.cur;
  }
  tg_pbw_end_nested(w);
  return 0;
}

static int put_track(tg_merge_t *m, tg_merge_host_t *mh, tg_pbw_t *w,
                     const uint8_t *d, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pbw_begin_nested(w, PKT_TRACK_DESCRIPTOR);
  tg_pb_reader_init(&r, d, n);
  const uint8_t *at = r.cur;
  int rv = 0;
  while (rv == 0 && tg_pb_reader_next(&r, &f) == 1) {
    if (f.id == TD_PROCESS && f.type == TG_PB_WT_LEN)
      rv = put_process(m, mh, w, TD_PROCESS, f.data, f.size);
    else if (f.id == TD_THREAD && f.type == TG_PB_WT_LEN)
      rv = put_thread(m, mh, w, TD_THREAD, f.data, f.size);
    else
      copy_field(w, at, &r);
    at = r.cur;
  }
  tg_pbw_end_nested(w);
  return rv;
}

/* ClockSnapshot |d| with the builtin clocks' readings moved onto the
 * collector's (classify checked each one moves). */
static void put_snapshot(const tg_merge_host_t *mh, tg_pbw_t *w,
                         const uint8_t *d, size_t n) {
  tg_pb_reader_t r, cr;
  tg_pb_field_t f, c;
  tg_pbw_begin_nested(w, PKT_CLOCK_SNAPSHOT);
  tg_pb_reader_init(&r, d, n);
  const uint8_t *at = r.cur;
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != CS_CLOCKS || f.type != TG_PB_WT_LEN) {
      copy_field(w, at, &r);
      at = r.cur;
      continue;
    }
    uint64_t id = 0;
    tg_pb_reader_init(&cr, f.data, f.size);
    while (tg_pb_reader_next(&cr, &c) == 1)
      if (c.id == CLOCK_ID) id = c.value;
    tg_pbw_begin_nested(w, CS_CLOCKS);
    tg_pb_reader_init(&cr, f.data, f.size);
    const uint8_t *cat = cr.cur;
    while (tg_pb_reader_next(&cr, &c) == 1) {
      uint64_t moved;
      if (c.id == CLOCK_TIMESTAMP && id < SEQ_CLOCK_FIRST &&
          move_time(mh, (uint32_t)id, c.value, &moved))
        tg_pbw_append_varint(w, CLOCK_TIMESTAMP, moved);
      else
        copy_field(w, cat, &cr);
      cat = cr.cur;
    }
    tg_pbw_end_nested(w);
    at = r.cur;
  }
  tg_pbw_end_nested(w);
}

/* The packet re-encoded into m->scratch: 0 (*out, *out_n), -ENOSPC (a
 * pid past the bound), -ENOMEM. */
static int rewrite(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                   size_t n, const uint8_t **out, size_t *out_n) {
  /* Each rewritten message may grow by a length prefix and a moved
   * time, and the name by the host's: retried twice as large when short. */
  size_t room = 2 * n + 2 * TG_MERGE_NAME_MAX + 256;
  for (int attempt = 0; attempt < 4; attempt++, room *= 2) {
    tg_buf_reset(&m->scratch);
    uint8_t *buf = tg_buf_reserve(&m->scratch, room);
    if (!buf) return -ENOMEM;
    tg_pbw_t w;
    tg_pbw_init(&w, buf, room, NULL, NULL);
    tg_pb_reader_t r;
    tg_pb_field_t f;
    tg_pb_reader_init(&r, p, n);
    const uint8_t *at = r.cur;
    int rv = 0;
    while (rv == 0 && tg_pb_reader_next(&r, &f) == 1) {
      bool len = f.type == TG_PB_WT_LEN;
      if (f.id == PKT_CLOCK_SNAPSHOT && len)
        put_snapshot(mh, &w, f.data, f.size);
      else if (f.id == PKT_PROCESS_DESCRIPTOR && len)
        rv = put_process(m, mh, &w, PKT_PROCESS_DESCRIPTOR, f.data, f.size);
      else if (f.id == PKT_THREAD_DESCRIPTOR && len)
        rv = put_thread(m, mh, &w, PKT_THREAD_DESCRIPTOR, f.data, f.size);
      else if (f.id == PKT_TRACK_DESCRIPTOR && len)
        rv = put_track(m, mh, &w, f.data, f.size);
      else
        copy_field(&w, at, &r);
      at = r.cur;
    }
    if (rv < 0) return rv;
    if (tg_pbw_error(&w) == 0) {
      *out = buf;
      *out_n = (size_t)tg_pbw_written(&w);
      return 0;
    }
    if (tg_pbw_error(&w) != TG_ENO_SPACE) return tg_pbw_error(&w);
  }
  return -ENOMEM;
}

/* --- flows ----------------------------------------------------------------------- */

/* Flow |id| started (|term| false) or ended by host |me| (index + 1). */
static void flow_seen(tg_merge_t *m, tg_merge_host_t *mh, uint64_t id,
                      bool term) {
  uint32_t me = mh->machine_id, v = tg_u64_map_get(&m->flows, id);
  if (term) mh->flows_terminated++;
  else mh->flows_started++;
  uint32_t lo = v & 0xFFFFu, hi = v >> 16;
  if (term && !hi) hi = me;
  else if (!term && !lo) lo = me;
  else return;
  if (tg_u64_map_put(&m->flows, id, lo | hi << 16) < 0)
    mh->flows_unfollowed++;
}

static void count_flows(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                        size_t n) {
  tg_pb_reader_t r, er;
  tg_pb_field_t f, e;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != PKT_TRACK_EVENT || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_init(&er, f.data, f.size);
    while (tg_pb_reader_next(&er, &e) == 1) {
      if (e.id == TE_FLOW_IDS || e.id == TE_FLOW_IDS_OLD)
        flow_seen(m, mh, e.value, false);
      else if (e.id == TE_TERMINATING_FLOW_IDS ||
               e.id == TE_TERMINATING_FLOW_IDS_OLD)
        flow_seen(m, mh, e.value, true);
    }
  }
}

void tg_merge_links_end(tg_merge_t *m, size_t n,
                        tg_merge_host_t *(*host_at)(void *ctx, size_t i),
                        void *ctx) {
  for (size_t i = 0; i < m->flows.cap; i++) {
    uint32_t v = m->flows.vals[i];
    if (!v) continue;
    uint32_t lo = v & 0xFFFFu, hi = v >> 16;
    if (lo && hi && lo == hi) continue;
    size_t k = (size_t)(lo ? lo : hi) - 1;
    tg_merge_host_t *mh = k < n ? host_at(ctx, k) : NULL;
    if (!mh) continue;
    /* Both ends seen on two hosts: a request across hosts, the starter's. */
    if (lo && hi) mh->flows_across++;
    else mh->flows_unmatched++;
  }
  /* Once: a second call finds nothing. */
  tg_u64_map_free(&m->flows);
}

bool tg_merge_links_across(size_t n,
                           tg_merge_host_t *(*host_at)(void *ctx, size_t i),
                           void *ctx) {
  for (size_t i = 0; i < n; i++) {
    const tg_merge_host_t *mh = host_at(ctx, i);
    if (mh && mh->flows_across) return true;
  }
  return false;
}

/* --- the write --------------------------------------------------------------------- */

int tg__links_write(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                    size_t n, uint32_t seq, const tg__links_t *v) {
  tg_merge_jseq_t *q = v->q;
  if (v->unready) {
    q->m0_valid = false;
    mh->joined_early++;
    return 0;
  }
  q->m0_valid = v->m0_valid;
  const uint8_t *body = p;
  size_t body_n = n;
  if (v->rewrite) {
    int rv = rewrite(m, mh, p, n, &body, &body_n);
    if (rv == -ENOSPC) {
      mh->joined_pids++;
      return 0;
    }
    if (rv < 0) return rv;
  }
  if (v->set_default) q->clock = v->default_clock;
  q->seq_clocks |= v->seq_clocks;
  if (v->boot > q->last_boot) q->last_boot = v->boot;
  if (v->more_flows) {
    count_flows(m, mh, p, n);
  } else {
    for (unsigned i = 0; i < v->n_flows; i++)
      flow_seen(m, mh, v->flow[i], (v->flow_ends >> i) & 1u);
  }
  mh->joined++;
  uint8_t tail[2 * (2 + TG_PB_MAX_VARINT_SIZE)];
  uint8_t *t = tail;
  if (v->has_ts) {
    t = tg_pb_write_varint(t, TG_PB_TAG(PKT_TIMESTAMP, TG_PB_WT_VARINT));
    t = tg_pb_write_varint(t, v->ts);
  }
  t = tg_pb_write_varint(t, TG_PB_TAG(PKT_SEQ_ID, TG_PB_WT_VARINT));
  t = tg_pb_write_varint(t, seq);
  return m->write(m->ctx, body, body_n, tail, (size_t)(t - tail));
}
