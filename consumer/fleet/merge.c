/* The merged fleet trace; see merge.h and docs/merge.md. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "consumer/fleet/trace_schema.h"
#include "consumer/fleet/merge.h"
#include "consumer/fleet/merge_links.h"
#include "consumer/fleet/merge_slot.h"
#include "consumer/packet_inflate.h"
#include "pb/common/system_info.pb-c.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"

/* TracePacket fields. */
#define PKT_CLOCK_SNAPSHOT 6
#define PKT_SEQ_ID 10
#define PKT_SEQUENCE_FLAGS 13
#define PKT_INCREMENTAL_STATE_CLEARED 41
#define PKT_PREVIOUS_PACKET_DROPPED 42
#define PKT_COMPRESSED_PACKETS 50 /* COMPRESSION_TYPE_DEFLATE */
#define PKT_SYSTEM_INFO 45
#define SI_MACHINE_NAME 17 /* Perfetto v57's SystemInfo.machine_name */
#define PKT_MACHINE_ID 98
#define PKT_REMOTE_CLOCK_SYNC 107 /* Perfetto's RemoteClockSync */
#define PKT_TIMESTAMP 8
#define PKT_TRACK_EVENT 11
#define PKT_SEQUENCE_FLAGS 13
#define PKT_TRACK_DESCRIPTOR 60
#define PKT_INTERNED_DATA 12
#define PKT_PROCESS_DESCRIPTOR 43
#define PKT_THREAD_DESCRIPTOR 44
#define PKT_DEFAULTS 59
#define PKT_SERVICE_EVENT 69
/* TracingServiceEvent's markers that drive trace processor's sorter. */
#define TSE_ALL_DATA_SOURCES_FLUSHED 3
#define TSE_READ_TRACING_BUFFERS_COMPLETED 4
/* TrackDescriptor and TrackEvent. */
#define TD_UUID 1
#define TD_NAME 2
#define TD_PARENT_UUID 5
#define TE_TYPE 9
#define TE_TRACK_UUID 11
#define TE_NAME 23
#define TE_TYPE_INSTANT 3
/* ClockSnapshot and its Clock. */
#define CS_CLOCKS 1
#define CS_PRIMARY_TRACE_CLOCK 2
#define CLOCK_ID 1
#define CLOCK_TIMESTAMP 2
/* RemoteClockSync{repeated SyncedClocks synced_clocks = 1}, SyncedClocks{
 * ClockSnapshot client_clocks = 2; ClockSnapshot host_clocks = 3}. */
#define RCS_SYNCED_CLOCKS 1
#define SC_CLIENT_CLOCKS 2
#define SC_HOST_CLOCKS 3

#define BUILTIN_REALTIME 1
#define BUILTIN_MONOTONIC 3
#define BUILTIN_BOOTTIME 6

static const uint32_t builtin_of[TG_CLK_N] = {BUILTIN_BOOTTIME, BUILTIN_MONOTONIC,
                                           BUILTIN_REALTIME};

#define SMALL_PACKET 4096

/* TracePacket.SequenceFlags. */
#define SEQ_INCREMENTAL_STATE_CLEARED 1u
#define SEQ_NEEDS_INCREMENTAL_STATE 2u

/* A followed sequence's incremental state (merge.h, istate). */
typedef struct tg_merge_iseq {
  uint64_t pending; /* left out before its first clear, kind not known yet */
  bool valid;       /* as trace processor has it now */
  bool cleared;     /* has had a clear in the host's part */
  bool lost;        /* counted in state_lost_seqs */
} tg_merge_iseq_t;

/* --- the shared and per-host state -------------------------------------------- */

void tg_merge_init(tg_merge_t *m, tg_merge_write_cb write, void *ctx) {
  memset(m, 0, sizeof(*m));
  m->write = write;
  m->ctx = ctx;
  m->next_overflow_seq = TG_MERGE_SEQ_OVERFLOW_BASE + 1;
  tg_buf_init(&m->inflated, TG_PACKETS_INFLATE_MAX);
  tg__links_init(m);
}

void tg_merge_free(tg_merge_t *m) {
  tg_buf_free(&m->inflated);
  tg__links_free(m);
}

int tg_merge_allow_fields(tg_merge_t *m, const char *names, char *bad,
                          size_t bad_cap) {
  tg_ts_allow_t allow;
  if (tg_trace_schema_allow(&allow, names, bad, bad_cap) < 0) return -EINVAL;
  m->allow = allow;
  return 0;
}

void tg_merge_host_init(tg_merge_host_t *mh, size_t index) {
  memset(mh, 0, sizeof(*mh));
  mh->machine_id = (uint32_t)index + 1;
  tg_u32_map_init(&mh->seqs, TG_MERGE_HOST_MAX_SEQS);
  tg_u32_map_init(&mh->istate, TG_MERGE_HOST_MAX_STATE_SEQS);
  tg_clock_model_init(&mh->clock);
  tg__links_host_init(mh);
}

void tg_merge_host_free(tg_merge_host_t *mh) {
  tg_clock_model_free(&mh->clock);
  tg__links_host_free(mh);
  tg_u32_map_free(&mh->seqs);
  tg_u32_map_free(&mh->istate);
  free(mh->iseqs);
  mh->iseqs = NULL;
  mh->n_iseqs = mh->cap_iseqs = 0;
  mh->last_iseq = 0;
}

/* --- incremental state ----------------------------------------------------------
 *
 * Trace processor (v50.1, ProtoTraceReader::ParsePacket) follows, per
 * machine and sequence, whether the sequence's incremental state is valid:
 * not at first; valid from a packet with incremental_state_cleared (41) or
 * SEQ_INCREMENTAL_STATE_CLEARED in sequence_flags (13); not valid again
 * from a packet with previous_packet_dropped (42) that does not clear. A
 * packet with SEQ_NEEDS_INCREMENTAL_STATE while it is not valid is skipped
 * (tokenizer_skipped_packets), unless it holds a ClockSnapshot or a
 * RemoteClockSync, which are read before that check. The merge applies
 * the same rule to the packets it writes, and leaves out those skipped. */

/* |seq|'s slot, or NULL when it has none and |add| is false, the table is
 * at its bound, or memory is short (*err = -ENOMEM). */
static tg_merge_iseq_t *iseq_find(tg_merge_host_t *mh, uint32_t seq, bool add,
                                  int *err) {
  if (mh->last_iseq && mh->last_seq == seq) return &mh->iseqs[mh->last_iseq - 1];
  void *items = mh->iseqs;
  tg_merge_iseq_t *q =
      tg__merge_slot(&mh->istate, &items, &mh->n_iseqs, &mh->cap_iseqs,
                     sizeof(*q), seq, add, err);
  mh->iseqs = items;
  if (!q) return NULL;
  mh->last_seq = seq;
  mh->last_iseq = (uint32_t)(q - mh->iseqs) + 1;
  return q;
}

static void iseq_lose(tg_merge_host_t *mh, tg_merge_iseq_t *q, uint64_t n) {
  if (!n) return;
  mh->state_lost += n;
  if (!q->lost) {
    q->lost = true;
    mh->state_lost_seqs++;
  }
}

/* Whether trace processor reads the packet of sequence |seq| whose fields
 * 13, 41 and 42 are |flags|, |cleared| and |dropped|, after noting what
 * the packet does to its sequence's state; |exempt|: it holds what is
 * read before the check. 1: it does; 0: it is left out (counted); or
 * -ENOMEM. */
static int state_reads(tg_merge_host_t *mh, uint32_t seq, uint64_t flags,
                       bool cleared, bool dropped, bool exempt) {
  bool needs = (flags & SEQ_NEEDS_INCREMENTAL_STATE) && !exempt;
  cleared = cleared || (flags & SEQ_INCREMENTAL_STATE_CLEARED);
  if (!needs && !cleared && !dropped) return 1;
  int err = 0;
  /* A loss on a sequence without a slot leaves it as it is: not valid. */
  tg_merge_iseq_t *q = iseq_find(mh, seq, needs || cleared, &err);
  if (err) return err;
  if (q && cleared) {
    if (!q->cleared) mh->state_edge += q->pending;
    q->pending = 0;
    q->cleared = q->valid = true;
  } else if (q && dropped) {
    q->valid = false;
  }
  if (!needs) return 1;
  if (!q) { /* past the bound: not followed */
    mh->state_lost++;
    mh->state_untracked++;
    return 0;
  }
  if (q->valid) return 1;
  if (q->cleared) iseq_lose(mh, q, 1);
  else q->pending++;
  return 0;
}

const char *tg_merge_refused_field(const tg_merge_host_t *mh, char *buf,
                                   size_t cap) {
  if (!cap) return buf;
  buf[0] = 0;
  if (!mh->not_allowed) return buf;
  const char *name =
      tg_trace_schema_field_name(mh->not_allowed_in, mh->not_allowed_field);
  snprintf(buf, cap, "%s.%" PRIu32 "%s%s%s",
           tg_trace_schema_message_name(mh->not_allowed_in),
           mh->not_allowed_field, name ? " (" : "", name ? name : "",
           name ? ")" : "");
  return buf;
}

void tg_merge_host_end(tg_merge_host_t *mh) {
  if (mh->ended) return;
  mh->ended = true;
  for (uint32_t i = 0; i < mh->n_iseqs; i++) {
    tg_merge_iseq_t *q = &mh->iseqs[i];
    if (q->cleared) continue;
    iseq_lose(mh, q, q->pending);
    q->pending = 0;
  }
}

/* --- sequence ids ----------------------------------------------------------- */

static uint32_t collector_seq(const tg_merge_host_t *mh) {
  return (mh->machine_id << TG_MERGE_SEQ_SHIFT) | TG_MERGE_SEQ_COLLECTOR;
}

/* The sequence id |orig| of host |mh| becomes, in *out: 0, or
 * TG_ETOO_MANY_SEQUENCES (the host's map is full), -ENOMEM. */
static int merge_seq(tg_merge_t *m, tg_merge_host_t *mh, uint32_t orig,
                     uint32_t *out) {
  /* 0 (no sequence) lands on the range's low id, which no other id takes:
   * see TG_MERGE_SEQ_NONE. */
  if (orig < TG_MERGE_SEQ_COLLECTOR) {
    *out = (mh->machine_id << TG_MERGE_SEQ_SHIFT) | orig;
    return 0;
  }
  if (tg_u32_map_get(&mh->seqs, orig, out)) return 0;
  /* Shared by all hosts: ids stay unique across the trace. When the
   * range is used up (a million mapped sequences, which takes 256 hosts
   * at their bound), the last id is reused: the sequences then merge,
   * which the summary cannot hide. */
  uint32_t v = m->next_overflow_seq;
  int rv = tg_u32_map_put(&mh->seqs, orig, v);
  if (rv == -ENOSPC) return TG_ETOO_MANY_SEQUENCES;
  if (rv < 0) return rv;
  if (v != UINT32_MAX) m->next_overflow_seq++;
  *out = v;
  return 0;
}

static int merge_one(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                     size_t n, bool inner);

typedef struct inner_ctx {
  tg_merge_t *m;
  tg_merge_host_t *mh;
} inner_ctx_t;

static int merge_inner(void *ctx, const uint8_t *pkt, size_t len) {
  inner_ctx_t *c = ctx;
  int rv = merge_one(c->m, c->mh, pkt, len, true);
  return rv < 0 ? rv : 0;
}

/* A DEFLATE session's wrapper (compressed_packets): its packets need their
 * ids too, so they are inflated and merged one by one (uncompressed: the
 * merged file stays readable everywhere; its size is the price). */
static int merge_compressed(tg_merge_t *m, tg_merge_host_t *mh,
                            const uint8_t *z, size_t n) {
  int rv = tg_packets_inflate(z, n, &m->inflated);
  if (rv < 0) {
    mh->malformed++; /* counted, shown in the summary */
    return rv == -ENOMEM ? rv : 0;
  }
  inner_ctx_t c = {m, mh};
  rv = tg_packets_each(tg_buf_begin(&m->inflated), tg_buf_size(&m->inflated),
                       merge_inner, &c);
  if (rv == TG_EPARSE) {
    mh->malformed++;
    return 0;
  }
  return rv;
}

int tg_merge_packet(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                    size_t n) {
  return merge_one(m, mh, p, n, false);
}

/* Whether the TrackDescriptor |d| (|n| bytes) gives a uuid of the range
 * the hosts' names use; one that does not decode is the schema check's. */
static bool names_reserved_track(const uint8_t *d, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  tg_pb_reader_init(&r, d, n);
  while (tg_pb_reader_next(&r, &fld) == 1)
    if (fld.id == TD_UUID && fld.type == TG_PB_WT_VARINT &&
        TG_MERGE_NAME_UUID_RESERVED(fld.value))
      return true;
  return false;
}

/* Whether the SystemInfo |d| (|n| bytes) names its machine: Perfetto from
 * v57 takes the last name a machine's SystemInfo packets give, so a host's
 * would rename it; the name is the operator's, which the merge writes. */
static bool names_machine(const uint8_t *d, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  tg_pb_reader_init(&r, d, n);
  while (tg_pb_reader_next(&r, &fld) == 1)
    if (fld.id == SI_MACHINE_NAME) return true;
  return false;
}

/* Whether the TracingServiceEvent |e| (|n| bytes) holds a flush marker
 * (any occurrence: the check does not guess which one trace processor
 * reads); one that does not decode is the schema check's. */
static bool has_sorter_marker(const uint8_t *e, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  tg_pb_reader_init(&r, e, n);
  while (tg_pb_reader_next(&r, &fld) == 1)
    if (fld.id == TSE_ALL_DATA_SOURCES_FLUSHED ||
        fld.id == TSE_READ_TRACING_BUFFERS_COMPLETED)
      return true;
  return false;
}

static int merge_one(tg_merge_t *m, tg_merge_host_t *mh, const uint8_t *p,
                     size_t n, bool inner) {
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  tg_pb_reader_init(&r, p, n);
  uint64_t orig = 0, flags = 0;
  const uint8_t *z = NULL;
  size_t zn = 0;
  bool wrapper = false, cleared = false, dropped = false, exempt = false;
  int rv;
  /* Every field is looked at once here; those that matter are rare, so
   * the switch costs a compare or two per field. */
  bool reserved = false, marker = false;
  unsigned hints = 0; /* for the joined mode (merge_links.h) */
  while ((rv = tg_pb_reader_next(&r, &fld)) == 1) {
    switch (fld.id) {
      case PKT_SEQ_ID:
        if (fld.type == TG_PB_WT_VARINT) orig = fld.value;
        break;
      case PKT_SEQUENCE_FLAGS:
        if (fld.type == TG_PB_WT_VARINT) flags = fld.value;
        break;
      case PKT_INCREMENTAL_STATE_CLEARED:
        if (fld.type == TG_PB_WT_VARINT) cleared = fld.value != 0;
        break;
      case PKT_PREVIOUS_PACKET_DROPPED:
        if (fld.type == TG_PB_WT_VARINT) dropped = fld.value != 0;
        break;
      case PKT_CLOCK_SNAPSHOT:
      case PKT_REMOTE_CLOCK_SYNC:
        exempt = true;
        break;
      case PKT_TRACK_DESCRIPTOR:
        hints |= TG__LINKS_HINT;
        if (fld.type == TG_PB_WT_LEN &&
            names_reserved_track(fld.data, fld.size))
          reserved = true;
        break;
      case PKT_TRACK_EVENT:
      case PKT_INTERNED_DATA:
      case PKT_DEFAULTS:
      case PKT_PROCESS_DESCRIPTOR:
      case PKT_THREAD_DESCRIPTOR:
        hints |= TG__LINKS_HINT;
        break;
      case PKT_SYSTEM_INFO:
        if (fld.type == TG_PB_WT_LEN && names_machine(fld.data, fld.size))
          reserved = true;
        break;
      case PKT_SERVICE_EVENT:
        if (fld.type == TG_PB_WT_LEN && has_sorter_marker(fld.data, fld.size))
          marker = true;
        break;
      default: break;
    }
    if (fld.id == PKT_COMPRESSED_PACKETS) {
      /* Trace processor takes any field 50 for a wrapper (the last one)
       * and refuses the whole file when it does not inflate; the schema
       * check below refuses one that is not length-delimited. */
      wrapper = true;
      z = fld.data;
      zn = fld.size;
    }
  }
  /* Left out, as they would make the whole merged file unreadable: what
   * does not decode; compressed packets inside compressed packets, which
   * Perfetto never writes and which would let a host nest inflation; and
   * what trace processor would refuse the file for or crash on
   * (trace_schema.h): a field of another wire type than Perfetto's schema
   * says, or a value it cannot take; and times it could not place on the
   * host's timeline (clock_model.h). Left out too, as it would rename a
   * host: a descriptor of the names' tracks, a SystemInfo with a machine
   * name. */
  tg_ts_clocks_t clocks;
  tg_trace_schema_verdict_t v =
      rv < 0 || (wrapper && inner) || reserved
          ? TG_TS_MALFORMED
          : tg_trace_schema_check(p, n, &m->allow, &clocks);
  if (v != TG_TS_OK) {
    mh->malformed++;
    if (v == TG_TS_NOT_ALLOWED) {
      mh->not_allowed++;
      mh->not_allowed_field = clocks.refused;
      mh->not_allowed_in = clocks.refused_in;
    }
    return 0;
  }
  if (wrapper) return merge_compressed(m, mh, z, zn);
  /* Trace processor's sorter is the whole file's: after two flush
   * markers and a read marker it sorts for good what it read before the
   * last read marker, and drops as out of order every later packet older
   * than the newest of those, whichever machine it belongs to. A host's
   * markers say where its own buffers were read, nothing about the
   * others': left out, so the sorter sorts the whole file at its end. */
  if (marker) {
    mh->sorter_markers++;
    return 0;
  }
  tg_clock_model_reserve(&mh->clock, &clocks, (uint32_t)orig);
  if (tg_clock_model_check(&mh->clock, &clocks, (uint32_t)orig) !=
      TG_CLOCK_OK) {
    mh->malformed++;
    mh->clock_unplaced++;
    return 0;
  }
  /* The joined mode's verdict, before the packet's effects on the
   * host's models: one it leaves out has none. */
  tg__links_t links;
  links.to_m0 = false;
  bool joined = m->app_tracks == TG_MERGE_APP_JOINED;
  if (joined && (rv = tg__links_classify(m, mh, p, n, (uint32_t)orig, hints,
                                         flags, cleared, dropped, exempt,
                                         &links)) <= 0)
    return rv;
  if ((rv = state_reads(mh, (uint32_t)orig, flags, cleared, dropped,
                        exempt)) <= 0)
    return rv;
  tg_clock_model_apply(&mh->clock, &clocks, (uint32_t)orig);
  uint32_t seq;
  if ((rv = merge_seq(m, mh, (uint32_t)orig, &seq)) < 0) return rv;
  if (links.to_m0) return tg__links_write(m, mh, p, n, seq, &links);
  if (joined) tg__links_stayed(&links);
  uint8_t tail[2 * (2 + TG_PB_MAX_VARINT_SIZE)];
  uint8_t *t = tail;
  t = tg_pb_write_varint(t, TG_PB_TAG(PKT_MACHINE_ID, TG_PB_WT_VARINT));
  t = tg_pb_write_varint(t, mh->machine_id);
  t = tg_pb_write_varint(t, TG_PB_TAG(PKT_SEQ_ID, TG_PB_WT_VARINT));
  t = tg_pb_write_varint(t, seq);
  return m->write(m->ctx, p, n, tail, (size_t)(t - tail));
}

/* --- packets made here -------------------------------------------------------- */

static int emit(tg_merge_t *m, tg_pbw_t *w, uint8_t *buf) {
  if (tg_pbw_error(w)) return tg_pbw_error(w);
  return m->write(m->ctx, buf, (size_t)tg_pbw_written(w), NULL, 0);
}

static void ids(tg_pbw_t *w, uint32_t machine_id, uint32_t seq) {
  if (machine_id) tg_pbw_append_varint(w, PKT_MACHINE_ID, machine_id);
  tg_pbw_append_varint(w, PKT_SEQ_ID, seq);
}

static void clocks(tg_pbw_t *w, uint32_t field, const uint64_t ts[TG_CLK_N],
                   bool primary) {
  tg_pbw_begin_nested(w, field);
  for (int i = 0; i < TG_CLK_N; i++) {
    tg_pbw_begin_nested(w, CS_CLOCKS);
    tg_pbw_append_varint(w, CLOCK_ID, builtin_of[i]);
    tg_pbw_append_varint(w, CLOCK_TIMESTAMP, ts[i]);
    tg_pbw_end_nested(w);
  }
  if (primary) tg_pbw_append_varint(w, CS_PRIMARY_TRACE_CLOCK, BUILTIN_BOOTTIME);
  tg_pbw_end_nested(w);
}

static int clock_snapshot(tg_merge_t *m, uint32_t machine_id, uint32_t seq,
                          const uint64_t ts[TG_CLK_N]) {
  uint8_t buf[SMALL_PACKET];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  clocks(&w, PKT_CLOCK_SNAPSHOT, ts, true);
  ids(&w, machine_id, seq);
  return emit(m, &w, buf);
}

/* Perfetto's RemoteClockSync: pairs of (client, host) snapshots, from
 * which its trace processor averages two offsets per consecutive pair:
 *   (c1 + c2) / 2 - h1   and   c2 - (h1 + h2) / 2.
 * We have one round trip per sample, not its four-way exchange, so the
 * best sample goes in twice with the collector's midpoint as the host
 * reading: both offsets then equal remote - (before + after) / 2, the
 * minimum-RTT estimate, off by at most RTT / 2. */
static int remote_clock_sync(tg_merge_t *m, const tg_merge_host_t *mh,
                             const tg_clock_sample_t *s) {
  uint64_t mid[TG_CLK_N];
  /* Signed: REALTIME may have stepped back during the call. */
  for (int i = 0; i < TG_CLK_N; i++)
    mid[i] = s->before[i] + (uint64_t)((int64_t)(s->after[i] - s->before[i]) / 2);
  uint8_t buf[SMALL_PACKET];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_begin_nested(&w, PKT_REMOTE_CLOCK_SYNC);
  for (int round = 0; round < 2; round++) {
    tg_pbw_begin_nested(&w, RCS_SYNCED_CLOCKS);
    clocks(&w, SC_CLIENT_CLOCKS, s->remote, false);
    clocks(&w, SC_HOST_CLOCKS, mid, false);
    tg_pbw_end_nested(&w);
  }
  tg_pbw_end_nested(&w);
  ids(&w, mh->machine_id, collector_seq(mh));
  return emit(m, &w, buf);
}

static int system_info(tg_merge_t *m, uint32_t machine_id, uint32_t seq,
                       Perfetto__Protos__SystemInfo *si) {
  size_t n = perfetto__protos__system_info__get_packed_size(si);
  if (n > SMALL_PACKET - 64) return TG_ENO_SPACE;
  uint8_t msg[SMALL_PACKET], buf[SMALL_PACKET];
  perfetto__protos__system_info__pack(si, msg);
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_append_bytes(&w, PKT_SYSTEM_INFO, msg, n);
  ids(&w, machine_id, seq);
  return emit(m, &w, buf);
}

void tg_merge_self_read(tg_merge_self_t *self) {
  memset(self, 0, sizeof(*self));
  self->has_uname = uname(&self->uts) == 0;
  gethostname(self->hostname, sizeof(self->hostname) - 1);
  self->num_cpus = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
  tg_clock_read(self->clocks);
}

int tg_merge_head(tg_merge_t *m, const tg_merge_self_t *self) {
  /* protobuf-c's message fields are not const; packing only reads them. */
  tg_merge_self_t copy = *self;
  Perfetto__Protos__SystemInfo si = PERFETTO__PROTOS__SYSTEM_INFO__INIT;
  Perfetto__Protos__Utsname un = PERFETTO__PROTOS__UTSNAME__INIT;
  if (copy.has_uname) {
    un.sysname = copy.uts.sysname;
    un.release = copy.uts.release;
    un.version = copy.uts.version;
    un.machine = copy.uts.machine;
    si.utsname = &un;
  }
  si.tracegate_hostname = copy.hostname;
  si.machine_name = copy.hostname;
  si.has_num_cpus = 1;
  si.num_cpus = copy.num_cpus;
  /* The clock snapshot first: a packet without a machine id makes this
   * machine (0, the collector) the trace's host, whose BOOTTIME is the
   * timeline every host is aligned to. */
  int rv = clock_snapshot(m, 0, TG_MERGE_SEQ_MACHINE0, copy.clocks);
  if (rv == 0) rv = system_info(m, 0, TG_MERGE_SEQ_MACHINE0, &si);
  return rv;
}

/* An instant on host |mh|'s "clock sync" track at the host's time of the
 * clock sample |s| (its BOOTTIME, which the RemoteClockSync just written
 * ties to the collector's). */
static int sync_instant(tg_merge_t *m, const tg_merge_host_t *mh,
                        const tg_clock_sample_t *s) {
  uint8_t buf[SMALL_PACKET];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_append_varint(&w, PKT_TIMESTAMP, s->remote[TG_CLK_BOOTTIME]);
  tg_pbw_begin_nested(&w, PKT_TRACK_EVENT);
  tg_pbw_append_varint(&w, TE_TYPE, TE_TYPE_INSTANT);
  tg_pbw_append_varint(&w, TE_TRACK_UUID,
                       TG_MERGE_NAME_UUID(mh->machine_id, 1));
  tg_pbw_append_string(&w, TE_NAME, TG_MERGE_SYNC_INSTANT);
  tg_pbw_end_nested(&w);
  ids(&w, mh->machine_id, collector_seq(mh));
  return emit(m, &w, buf);
}

/* The host's name where trace processor and the UI read one (see merge.h):
 * a root track named |name| (|len| bytes) and, under it, the "clock sync"
 * track. Track
 * events there name no interned data, so they need no incremental state;
 * the first packet clears the sequence's all the same, as Perfetto's
 * writers do. */
static int name_tracks(tg_merge_t *m, const tg_merge_host_t *mh,
                       const char *name, size_t len) {
  uint64_t root = TG_MERGE_NAME_UUID(mh->machine_id, 0);
  uint32_t seq = collector_seq(mh);
  uint8_t buf[SMALL_PACKET];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_begin_nested(&w, PKT_TRACK_DESCRIPTOR);
  tg_pbw_append_varint(&w, TD_UUID, root);
  tg_pbw_append_bytes(&w, TD_NAME, name, len);
  tg_pbw_end_nested(&w);
  tg_pbw_append_varint(&w, PKT_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
  ids(&w, mh->machine_id, seq);
  int rv = emit(m, &w, buf);
  if (rv < 0) return rv;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_begin_nested(&w, PKT_TRACK_DESCRIPTOR);
  tg_pbw_append_varint(&w, TD_UUID, TG_MERGE_NAME_UUID(mh->machine_id, 1));
  tg_pbw_append_varint(&w, TD_PARENT_UUID, root);
  tg_pbw_append_string(&w, TD_NAME, TG_MERGE_SYNC_TRACK);
  tg_pbw_end_nested(&w);
  ids(&w, mh->machine_id, seq);
  return emit(m, &w, buf);
}

/* The host's clocks minus the collector's from |s|, as the
 * RemoteClockSync made of it says (remote_clock_sync): the joined mode
 * moves the host's app times by them. */
static void note_offset(tg_merge_host_t *mh, const tg_clock_sample_t *s) {
  for (int i = 0; i < TG_CLK_N; i++) {
    uint64_t mid =
        s->before[i] + (uint64_t)((int64_t)(s->after[i] - s->before[i]) / 2);
    mh->offset[i] = (int64_t)(s->remote[i] - mid);
  }
  mh->has_offset = true;
}

int tg_merge_host_preamble(tg_merge_t *m, tg_merge_host_t *mh,
                           const tg_fleet_host_report_t *h,
                           const char *name) {
  size_t name_len = strnlen(name, TG_MERGE_NAME_MAX + 1);
  if (name_len == 0 || name_len > TG_MERGE_NAME_MAX) return -EINVAL;
  memcpy(mh->name, name, name_len);
  mh->name[name_len] = 0;
  if (h->clock.estimates) note_offset(mh, &h->clock.best);
  uint32_t seq = collector_seq(mh);
  Perfetto__Protos__SystemInfo si = PERFETTO__PROTOS__SYSTEM_INFO__INIT;
  Perfetto__Protos__Utsname un = PERFETTO__PROTOS__UTSNAME__INIT;
  char kernel[256], *release = NULL;
  char hostname[sizeof(h->hostname)], machine_id[sizeof(h->host_machine_id)];
  snprintf(kernel, sizeof(kernel), "%s", h->kernel);
  if (kernel[0]) { /* "Linux 6.1.0-18-amd64": sysname, release */
    char *sp = strchr(kernel, ' ');
    if (sp) {
      *sp = 0;
      release = sp + 1;
    }
    un.sysname = kernel;
    un.release = release;
    si.utsname = &un;
  }
  snprintf(hostname, sizeof(hostname), "%s",
           h->has_info && h->hostname[0] ? h->hostname : name);
  si.tracegate_hostname = hostname;
  /* protobuf-c's string fields are not const; packing only reads them. */
  char machine_name[TG_MERGE_NAME_MAX + 1];
  memcpy(machine_name, name, name_len);
  machine_name[name_len] = 0;
  si.machine_name = machine_name;
  if (h->host_machine_id[0]) {
    snprintf(machine_id, sizeof(machine_id), "%s", h->host_machine_id);
    si.tracegate_machine_id = machine_id;
  }
  if (h->num_cpus) {
    si.has_num_cpus = 1;
    si.num_cpus = h->num_cpus;
  }
  int rv = system_info(m, mh->machine_id, seq, &si);
  if (rv == 0 && h->clock.estimates) {
    rv = clock_snapshot(m, mh->machine_id, seq, h->clock.best.remote);
    if (rv == 0) tg_clock_model_preamble(&mh->clock, h->clock.best.remote);
  }
  if (rv == 0 && h->clock.estimates)
    rv = remote_clock_sync(m, mh, &h->clock.best);
  if (rv == 0) rv = name_tracks(m, mh, name, name_len);
  if (rv == 0 && h->clock.estimates) rv = sync_instant(m, mh, &h->clock.best);
  return rv;
}

int tg_merge_clock_sync(tg_merge_t *m, tg_merge_host_t *mh,
                        const tg_fleet_host_report_t *h) {
  if (!h->clock.estimates) return 0;
  note_offset(mh, &h->clock.best);
  int rv = remote_clock_sync(m, mh, &h->clock.best);
  return rv < 0 ? rv : sync_instant(m, mh, &h->clock.best);
}
