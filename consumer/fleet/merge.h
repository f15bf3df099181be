/* The merged fleet trace (docs/merge.md): one Perfetto trace for many
 * hosts, each host a machine of Perfetto's multi-machine traces. Host k
 * (0-based) is machine k + 1; the collector is machine 0, the trace's
 * host. Every packet of a host keeps its bytes and gets two fields
 * appended:
 *
 *   [packet bytes as read ...][98: machine_id = k+1][10: sequence id]
 *
 * Protobuf's last-field-wins makes the appended values the packet's. The
 * sequence id is the packet's own moved into the host's range (none moves
 * to TG_MERGE_SEQ_NONE of the range), or mapped into the overflow range
 * that all hosts share. The unit also makes the packets the collector
 * adds: its own ClockSnapshot and SystemInfo at the head, per host a
 * SystemInfo, ClockSnapshot and RemoteClockSync before the host's first
 * packet, then the host's name (below), and a RemoteClockSync per later
 * estimate.
 *
 * In the joined mode (tg_merge_set_app_tracks; merge_links.h) a host's
 * app sequences go to machine 0 instead: no machine id, the sequence id
 * as above, and a corrected timestamp appended before it when the packet
 * has one on a clock the host's estimate covers; the rare descriptors and
 * clock snapshots of those sequences are re-encoded (pids, names, clock
 * readings) into the merge's scratch buffer.
 *
 * A host's name is the operator's (the inventory's label, or the -H spec:
 * client/target.h), never what the host says of itself. It goes where
 * each Perfetto reads one: SystemInfo.machine_name (field 17, read from
 * v57: the machine table's name and the UI's label for the machine), and,
 * as v50.1 keeps no name for a machine (its machine table has an id only,
 * and the UI labels a machine's tracks "(machine N)"), a root track of
 * the host's machine: trace processor's track table has it
 * (name, machine_id), and the UI draws it as a top-level group holding
 * the host's "clock sync" track (an instant per clock sync). Those tracks are on the collector's
 * sequence of that host, before any of the host's packets, with uuids
 * that TG_MERGE_NAME_UUID reserves (docs/merge.md "Host names"). A host's
 * own SystemInfo that names its machine is left out: it would rename it.
 *
 * Owns: the shared state (tg_merge_t: the overflow range, the buffer
 * compressed_packets inflate into, the joined mode's tables and scratch
 * buffer) and, per host, tg_merge_host_t (its
 * machine id, its sequence map, its count of dropped packets). Must never:
 * open, commit or name a file, nor copy or allocate per packet: every
 * packet goes to the owner's sink in two pieces, the packet as read and
 * the appended fields. Not thread-safe: one owner's loop thread.
 */
#ifndef TRACEGATE_CONSUMER_FLEET_MERGE_H
#define TRACEGATE_CONSUMER_FLEET_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/utsname.h>

#include "consumer/fleet/trace_schema.h"
#include "common/buf.h"
#include "common/u32_map.h"
#include "common/u64_map.h"
#include "consumer/fleet/clock_model.h"
#include "consumer/fleet/clock_sync.h"
#include "consumer/fleet/host.h"
#include "consumer/fleet/merge_names.h"

/* Machine ids are k + 1 and sequence ids get (k + 1) << 20: this many
 * hosts keep every range below the overflow range. */
#define TG_MERGE_MAX_HOSTS 1024
#define TG_MERGE_SEQ_SHIFT 20
/* The low value of a host's range that the collector's own packets about
 * that host use; producer ids from here up are mapped. */
#define TG_MERGE_SEQ_COLLECTOR ((1u << TG_MERGE_SEQ_SHIFT) - 1)
/* The low value a host's packets without a sequence id (none, or 0) get.
 * Perfetto's services give every packet one, so only a broken or hostile
 * host sends such; left without one, a packet that asks for incremental
 * state or a sequence-scoped clock makes trace processor refuse the whole
 * file, every host's data with it. */
#define TG_MERGE_SEQ_NONE 0u
/* Mapped ids (producer ids too large for a range) come after this one. */
#define TG_MERGE_SEQ_OVERFLOW_BASE 0xFFF00000u
/* The collector's own packets (machine 0). */
#define TG_MERGE_SEQ_MACHINE0 1u
/* Producer ids a host may have mapped into the overflow range in one
 * merge. A service numbers its sequences from 1, so a host only needs the
 * map once it has handed out a million of them, and then for the writers
 * alive in its buffers, far fewer than this. The bound keeps a host's map
 * (grown at half load: 8192 slots of 8 bytes, 64 KiB) and its share of the
 * overflow range, which all hosts draw from, small whatever it sends. */
#define TG_MERGE_HOST_MAX_SEQS 4096u
/* Sequences of one host whose incremental state the merge follows (those
 * with a packet that needs it or clears it). A service hands out a
 * sequence per writer, and a ring holds the live writers' few; past the
 * bound, a packet that needs the state on a sequence not followed is left
 * out and counted lost, so that no host makes the table grow unbounded. */
#define TG_MERGE_HOST_MAX_STATE_SEQS 4096u

/* A host's name: 1..TG_MERGE_NAME_MAX bytes (what the catalog keeps of a
 * host, TG_COLL_HOST_MAX). */
#define TG_MERGE_NAME_MAX 320u
/* The name tracks' uuids: TG_MERGE_NAME_UUID (merge_names.h). */
#define TG_MERGE_SYNC_TRACK "clock sync"
/* An instant on it per RemoteClockSync, at the host's time of the sample.
 * A host whose clocks are never tied has none: any time given to it would
 * be the collector's, on the host's clock, and could stretch the trace by
 * the difference of their boot times once a later sync ties them. */
#define TG_MERGE_SYNC_INSTANT "clocks tied"

/* Where the hosts' app track events go (docs/merge.md, "Links across
 * hosts"). Trace processor v50.1 joins a flow (TrackEvent.flow_ids to
 * terminating_flow_ids) only when both slices are on one machine, so:
 *   MACHINES: every packet of a host on the host's machine (arrows only
 *     within a host); the zero value, what the merge always wrote;
 *   JOINED: the hosts' app sequences (track events, their descriptors and
 *     interning) on machine 0, their times moved onto the collector's
 *     clock, their pids remapped and process names prefixed with the
 *     host's name (merge_links.h); the rest of a host stays on its
 *     machine. Arrows across hosts join. */
typedef enum tg_merge_app_tracks {
  TG_MERGE_APP_MACHINES = 0,
  TG_MERGE_APP_JOINED,
} tg_merge_app_tracks_t;
/* The default of the CLI and the collector. */
#define TG_MERGE_APP_DEFAULT TG_MERGE_APP_JOINED

/* Bounds of the joined mode (merge_links.c), so that no host makes the
 * merge's tables grow without end: pids and tids remapped per host;
 * track uuids whose owning host the merge keeps, all hosts together;
 * flow ids whose ends it follows, all hosts together. Past them: the
 * packet is left out (pids, uuids) or the flow counted not followed. */
#define TG_MERGE_HOST_MAX_PIDS 4096u
#define TG_MERGE_MAX_UUIDS 65536u
#define TG_MERGE_MAX_FLOWS 131072u
/* The first remapped pid: above Linux's pid_max (1 << 22), so no real
 * pid of machine 0 is taken. */
#define TG_MERGE_PID_BASE (1u << 22)


/* The owner's sink: one TracePacket made of |n| bytes at |p| followed by
 * |tail_n| bytes at |tail| (more fields of the same packet; 0 and maybe
 * NULL for the packets the unit makes). Both are borrowed for the call.
 * Returns 0 or a negative error, which the merge call returns. */
typedef int (*tg_merge_write_cb)(void *ctx, const uint8_t *p, size_t n,
                                 const uint8_t *tail, size_t tail_n);

typedef struct tg_merge {
  tg_merge_write_cb write;
  void *ctx;
  uint32_t next_overflow_seq;
  /* A host's compressed_packets, inflated so that the packets inside get
   * their ids too (consumer/packet_inflate.h). */
  tg_buf_t inflated;
  /* Fields beyond the allowlist the operator trusts the producers with
   * (tg_merge_allow_fields; none after init). */
  tg_ts_allow_t allow;
  /* The joined mode's state (merge_links.c; all empty in MACHINES):
   * the next remapped pid; uuid -> owning host index; flow id -> the
   * hosts that started and ended it; the buffer the rare packets it
   * rewrites are encoded into (reused: no allocation per packet). */
  tg_merge_app_tracks_t app_tracks;
  uint32_t next_pid;
  tg_u64_map_t uuids, flows;
  tg_buf_t scratch;
} tg_merge_t;

typedef struct tg_merge_host {
  uint32_t machine_id; /* index + 1 */
  /* Producer ids mapped into the overflow range: at most
   * TG_MERGE_HOST_MAX_SEQS. */
  tg_u32_map_t seqs;
  /* Packets left out: not decoding, or what trace processor cannot take
   * (consumer/fleet/trace_schema.h; docs/merge.md); clock_unplaced of them for
   * times trace processor could not place (clock_model.h). */
  uint64_t malformed, clock_unplaced;
  /* Of malformed: packets with a field the allowlist does not keep
   * (consumer/fleet/trace_allowlist.txt), and the last such field: its number and
   * the screened message it is a field of (not_allowed_in, named by
   * tg_trace_schema_message_name: TracePacket, or InternedData). */
  uint64_t not_allowed;
  uint32_t not_allowed_field, not_allowed_in;
  /* The host's clocks as trace processor has them so far. */
  tg_clock_model_t clock;
  /* Incremental state, per sequence of the host as trace processor
   * follows it (merge.c, "incremental state"; docs/merge.md): the
   * sequences' slots (|istate| maps a producer id to its index in
   * |iseqs|), the last one looked up. */
  tg_u32_map_t istate;
  struct tg_merge_iseq *iseqs;
  uint32_t n_iseqs, cap_iseqs;
  uint32_t last_seq, last_iseq; /* last_iseq: index + 1, 0 for none */
  /* Packets left out because they need incremental state their sequence
   * does not have, in two kinds, final once tg_merge_host_end() ran:
   *   state_edge: before the sequence's first clear in the host's part,
   *     which does come later (a ring's oldest edge: not lost);
   *   state_lost: on a sequence that never clears in the part, after a
   *     packet loss until the next clear, or on a sequence past
   *     TG_MERGE_HOST_MAX_STATE_SEQS (state_untracked of them): lost.
   * state_lost_seqs: the followed sequences with packets lost. */
  uint64_t state_edge, state_lost, state_untracked;
  uint32_t state_lost_seqs;
  /* Packets left out for a flush marker of the host's service
   * (TracingServiceEvent all_data_sources_flushed or
   * read_tracing_buffers_completed): trace processor's sorter, one for
   * the whole file, takes them to sort what it read so far for good, so
   * one host's markers would drop every other host's later packets that
   * are older than its own. Not data: not in |malformed|, not a loss. */
  uint64_t sorter_markers;
  bool ended;
  /* The joined mode (tg_merge_set_app_tracks; docs/merge.md, "Links
   * across hosts"), all 0 in MACHINES:
   *   joined: packets written on machine 0;
   *   joined_early: packets of a sequence moved to machine 0 that went to
   *     the host's machine before it moved (a ring's edge), or were left
   *     out as the sequence's state on machine 0 was not valid yet;
   *   joined_unclocked: app packets kept on the host's machine as the
   *     host had no clock estimate when their sequence began (or the
   *     sequence is past TG_MERGE_HOST_MAX_STATE_SEQS followed ones);
   *   joined_shared: app packets kept on the host's machine as their
   *     sequence's first app packet named a track uuid another host had
   *     named first (one machine listed twice in an inventory does);
   * and left out of a moved sequence:
   *   joined_refused: a field not allowed there (merge_links.c);
   *   joined_clock: a time on a clock the estimate does not cover;
   *   joined_pids: a pid past TG_MERGE_HOST_MAX_PIDS;
   *   joined_uuid: a track uuid another host owns, or past
   *     TG_MERGE_MAX_UUIDS.
   * Flows (TrackEvent.flow_ids, terminating_flow_ids) in what was
   * written: started, terminated; and, final once
   * tg_merge_links_end() ran, the ends whose other end is not in the
   * file (unmatched), those past TG_MERGE_MAX_FLOWS (unfollowed), and the
   * flows the host started that another host ended (across: each flow
   * between two hosts counted once, on the host that started it). */
  uint64_t joined, joined_early, joined_unclocked, joined_shared;
  uint64_t joined_refused, joined_clock, joined_pids, joined_uuid;
  uint64_t flows_started, flows_terminated, flows_unmatched,
      flows_unfollowed, flows_across;
  /* The host's clocks minus the collector's (BOOTTIME, MONOTONIC,
   * REALTIME), from the newest estimate; valid when has_offset. */
  int64_t offset[TG_CLK_N];
  bool has_offset;
  /* The operator's name of the host (tg_merge_host_preamble), for the
   * process names of joined tracks. */
  char name[TG_MERGE_NAME_MAX + 1];
  /* The host's sequences as the joined mode follows them: producer id ->
   * index + 1 in |jseqs| (at most TG_MERGE_HOST_MAX_STATE_SEQS), the
   * last one looked up; its pids and tids -> remapped ids. */
  tg_u32_map_t jseq_map;
  struct tg_merge_jseq *jseqs;
  uint32_t n_jseqs, cap_jseqs;
  uint32_t jlast_seq, jlast_ix; /* jlast_ix: index + 1, 0 for none */
  tg_u32_map_t pids;
} tg_merge_host_t;

/* The collector, as the head of the trace describes it. */
typedef struct tg_merge_self {
  bool has_uname;
  struct utsname uts;
  char hostname[256];
  uint32_t num_cpus;
  uint64_t clocks[TG_CLK_N]; /* BOOTTIME, MONOTONIC, REALTIME (ns) */
} tg_merge_self_t;

/* A merge writing through |write| with |ctx| (borrowed for its life). */
void tg_merge_init(tg_merge_t *m, tg_merge_write_cb write, void *ctx);
void tg_merge_free(tg_merge_t *m);

/* The operator trusts the producers with the fields |names| beyond the
 * allowlist ("NAME[,NAME]": TracePacket field names of Perfetto's schema,
 * "interned_data.NAME" for InternedData's; docs/merge.md). 0, or -EINVAL
 * with the first name not known in |bad| and nothing changed. */
int tg_merge_allow_fields(tg_merge_t *m, const char *names, char *bad,
                          size_t bad_cap);

/* Where the hosts' app tracks go (MACHINES after init). Before the
 * first packet. */
void tg_merge_set_app_tracks(tg_merge_t *m, tg_merge_app_tracks_t mode);
/* "joined" or "machines" -> *mode: 0, or -EINVAL. */
int tg_merge_app_tracks_parse(const char *s, tg_merge_app_tracks_t *mode);
const char *tg_merge_app_tracks_name(tg_merge_app_tracks_t mode);

/* Host |index| (machine index + 1), with nothing mapped yet. */
void tg_merge_host_init(tg_merge_host_t *mh, size_t index);
void tg_merge_host_free(tg_merge_host_t *mh);

/* This machine now: uname, hostname, online CPUs and its clocks. */
void tg_merge_self_read(tg_merge_self_t *self);

/* The collector's packets at the head of the trace (machine 0): first
 * the ClockSnapshot, which makes the collector the trace's host and its
 * BOOTTIME the timeline, then its SystemInfo. */
int tg_merge_head(tg_merge_t *m, const tg_merge_self_t *self);

/* Host |mh|'s SystemInfo (from the host's report |h|; its hostname is
 * |name| when the host did not say one), then, if |h| has a clock
 * estimate, a ClockSnapshot of its clocks and a RemoteClockSync tying them
 * to the collector's, then its name tracks named |name| (the operator's:
 * 1..TG_MERGE_NAME_MAX bytes, else -EINVAL) and, with the estimate, the
 * instant of that sync. Once, before the host's first packet
 * (on_described). */
int tg_merge_host_preamble(tg_merge_t *m, tg_merge_host_t *mh,
                           const tg_fleet_host_report_t *h,
                           const char *name);

/* One more RemoteClockSync of |mh| from |h|'s current estimate
 * (h->clock.best), and its instant on the host's "clock sync" track;
 * nothing when there is none (on_clock_estimate). */
int tg_merge_clock_sync(tg_merge_t *m, tg_merge_host_t *mh,
                        const tg_fleet_host_report_t *h);

/* One packet of host |mh| (|p|, |n| bytes, borrowed) with its machine id
 * and moved sequence id appended; the packets of a compressed_packets
 * wrapper one by one. A packet that does not decode, that holds a field
 * off the allowlist (not_allowed), that trace processor would refuse the
 * whole trace for or crash on (consumer/fleet/trace_schema.h), whose times it could
 * not place (clock_unplaced, clock_model.h), or that describes a track of
 * the reserved uuids (TG_MERGE_NAME_UUID), is left out and counted in
 * mh->malformed. A packet
 * whose sequence would be the host's (TG_MERGE_HOST_MAX_SEQS + 1)th mapped
 * one is not written and TG_ETOO_MANY_SEQUENCES returned: a host sending
 * that many is failed by the owner (leaving them out, or merging them
 * into one, would hide it); so is -ENOMEM.
 *
 * A packet that trace processor would skip for want of its sequence's
 * incremental state (SEQ_NEEDS_INCREMENTAL_STATE before the sequence's
 * first clear, or after a packet loss until the next one) is left out as
 * well, so that the merged file has none it skips, and counted in
 * mh->state_edge or mh->state_lost (see there). */
int tg_merge_packet(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                    size_t n);

/* The last field of |mh| the allowlist refused, as "MESSAGE.NUMBER",
 * then " (NAME)" when Perfetto's schema names it: "InternedData.35
 * (v8_isolate)", "TracePacket.3000"; "" while none was. In |buf| (|cap|
 * bytes, cut to fit); returns |buf|. No allocation. */
const char *tg_merge_refused_field(const tg_merge_host_t *mh, char *buf,
                                   size_t cap);

/* The end of host |mh|'s packets: what its sequences left out before a
 * first clear that never came is lost (state_lost). Once; later packets
 * of the host are not expected. */
void tg_merge_host_end(tg_merge_host_t *mh);

/* The app packets of |mh| the joined mode left out (joined_refused,
 * _clock, _pids, _uuid): a loss of the host beside malformed and
 * state_lost. */
static inline uint64_t tg_merge_joined_left_out(const tg_merge_host_t *mh) {
  return mh->joined_refused + mh->joined_clock + mh->joined_pids +
         mh->joined_uuid;
}

/* The end of the merge, after every host's last packet: the flows' ends
 * whose other end is not in the file are counted in their hosts'
 * flows_unmatched, the flows whose two ends are on two hosts in the
 * starter's flows_across; |host_at(ctx, i)| is the host of index i
 * (machine i + 1; NULL: not counted), for i < |n|. One pass over the
 * flow table. Once; nothing in MACHINES. */
void tg_merge_links_end(tg_merge_t *m, size_t n,
                        tg_merge_host_t *(*host_at)(void *ctx, size_t i),
                        void *ctx);
/* After tg_merge_links_end(): whether some flow's two ends are on two
 * of the |n| hosts (flows_across), so that a second pass can place hosts
 * by their requests (reclock.h). */
bool tg_merge_links_across(size_t n,
                           tg_merge_host_t *(*host_at)(void *ctx, size_t i),
                           void *ctx);

#endif /* TRACEGATE_CONSUMER_FLEET_MERGE_H */
