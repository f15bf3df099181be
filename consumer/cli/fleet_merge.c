/* The merged trace (docs/merge.md). Every packet of host k (machine id
 * k + 1) keeps its bytes and gets two fields appended:
 *
 *   [packet bytes as read ...][98: machine_id = k+1][10: sequence id]
 *
 * Protobuf's last-field-wins makes the appended values the packet's. The
 * sequence id is the packet's own (its last field 10) moved into the
 * host's range, (k+1) << 20 | id, or mapped into the shared overflow range
 * when the id does not fit. The collector adds, as Perfetto's own
 * multi-machine traces do: its own ClockSnapshot and SystemInfo first
 * (machine 0, the reference clock), then per host a SystemInfo from
 * GetHostInfo, a ClockSnapshot of the host's clocks and a RemoteClockSync
 * tying them to the collector's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"
#include "pb/common/system_info.pb-c.h"
#include "consumer/cli/fleet.h"
#include "consumer/packet_inflate.h"
#include "tracegate/error.h"

/* TracePacket fields. */
#define PKT_CLOCK_SNAPSHOT 6
#define PKT_SEQ_ID 10
#define PKT_COMPRESSED_PACKETS 50 /* COMPRESSION_TYPE_DEFLATE */
#define PKT_SYSTEM_INFO 45
#define PKT_MACHINE_ID 98
#define PKT_REMOTE_CLOCK_SYNC 107 /* Perfetto's RemoteClockSync */
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

/* --- sequence ids ----------------------------------------------------------- */

void fleet_seq_map_free(seq_map_t *m) { tg_u32_map_free(m); }

/* The sequence id |orig| of host |h| becomes. */
static uint32_t merge_seq(fleet_t *f, fleet_host_t *h, uint32_t orig) {
  if (orig == 0) return 0;
  if (orig < FLEET_SEQ_COLLECTOR)
    return (h->machine_id << FLEET_SEQ_SHIFT) | orig;
  uint32_t v;
  if (tg_u32_map_get(&h->seqs, orig, &v)) return v;
  /* Shared by all hosts: ids stay unique across the trace. When the
   * range is used up (a million mapped sequences), the last id is reused:
   * the sequences then merge, which the summary cannot hide. */
  v = f->next_overflow_seq;
  if (tg_u32_map_put(&h->seqs, orig, v) < 0) return UINT32_MAX;
  if (v != UINT32_MAX) f->next_overflow_seq++;
  return v;
}

static int merge_one(fleet_t *f, fleet_host_t *h, const uint8_t *p, size_t n,
                     bool inner);

typedef struct inner_ctx {
  fleet_t *f;
  fleet_host_t *h;
} inner_ctx_t;

static int merge_inner(void *ctx, const uint8_t *pkt, size_t len) {
  inner_ctx_t *c = ctx;
  int rv = merge_one(c->f, c->h, pkt, len, true);
  return rv < 0 ? rv : 0;
}

/* A DEFLATE session's wrapper (compressed_packets): its packets need their
 * ids too, so they are inflated and merged one by one (uncompressed: the
 * merged file stays readable everywhere; its size is the price). */
static int merge_compressed(fleet_t *f, fleet_host_t *h, const uint8_t *z,
                            size_t n) {
  int rv = tg_packets_inflate(z, n, &f->inflated);
  if (rv < 0) {
    h->malformed++; /* counted, shown in the summary */
    return rv == -ENOMEM ? rv : 0;
  }
  inner_ctx_t c = {f, h};
  rv = tg_packets_each(tg_buf_begin(&f->inflated), tg_buf_size(&f->inflated),
                       merge_inner, &c);
  if (rv == TG_EPARSE) {
    h->malformed++;
    return 0;
  }
  return rv;
}

int fleet_merge_packet(fleet_t *f, fleet_host_t *h, const uint8_t *p,
                       size_t n) {
  return merge_one(f, h, p, n, false);
}

static int merge_one(fleet_t *f, fleet_host_t *h, const uint8_t *p, size_t n,
                     bool inner) {
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  tg_pb_reader_init(&r, p, n);
  uint64_t orig = 0;
  const uint8_t *z = NULL;
  size_t zn = 0;
  int rv;
  while ((rv = tg_pb_reader_next(&r, &fld)) == 1) {
    if (fld.id == PKT_SEQ_ID && fld.type == TG_PB_WT_VARINT) orig = fld.value;
    if (fld.id == PKT_COMPRESSED_PACKETS && fld.type == TG_PB_WT_LEN) {
      z = fld.data;
      zn = fld.size;
    }
  }
  /* Compressed packets inside compressed packets: Perfetto never writes
   * them, and they would let a host nest inflation. */
  if (rv < 0 || (z && inner)) {
    /* It would make the whole merged file unreadable: leave it out. */
    h->malformed++;
    return 0;
  }
  if (z) return merge_compressed(f, h, z, zn);
  uint8_t tail[2 * (2 + TG_PB_MAX_VARINT_SIZE)];
  uint8_t *t = tail;
  t = tg_pb_write_varint(t, TG_PB_TAG(PKT_MACHINE_ID, TG_PB_WT_VARINT));
  t = tg_pb_write_varint(t, h->machine_id);
  uint32_t seq = merge_seq(f, h, (uint32_t)orig);
  if (seq) {
    t = tg_pb_write_varint(t, TG_PB_TAG(PKT_SEQ_ID, TG_PB_WT_VARINT));
    t = tg_pb_write_varint(t, seq);
  }
  return cli_output_packet_ex(&f->merged, p, n, tail, (size_t)(t - tail));
}

/* --- packets made here -------------------------------------------------------- */

static int emit(fleet_t *f, tg_pbw_t *w, uint8_t *buf) {
  if (tg_pbw_error(w)) return tg_pbw_error(w);
  return cli_output_packet(&f->merged, buf, (size_t)tg_pbw_written(w));
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

static int clock_snapshot(fleet_t *f, uint32_t machine_id, uint32_t seq,
                          const uint64_t ts[TG_CLK_N]) {
  uint8_t buf[SMALL_PACKET];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  clocks(&w, PKT_CLOCK_SNAPSHOT, ts, true);
  ids(&w, machine_id, seq);
  return emit(f, &w, buf);
}

/* Perfetto's RemoteClockSync: pairs of (client, host) snapshots, from
 * which its trace processor averages two offsets per consecutive pair:
 *   (c1 + c2) / 2 - h1   and   c2 - (h1 + h2) / 2.
 * We have one round trip per sample, not its four-way exchange, so the
 * best sample goes in twice with the collector's midpoint as the host
 * reading: both offsets then equal remote - (before + after) / 2, the
 * minimum-RTT estimate, off by at most RTT / 2. */
static int remote_clock_sync(fleet_t *f, fleet_host_t *h) {
  const tg_clock_sample_t *s = &h->core.clock.best;
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
  ids(&w, h->machine_id,
      (h->machine_id << FLEET_SEQ_SHIFT) | FLEET_SEQ_COLLECTOR);
  return emit(f, &w, buf);
}

static int system_info(fleet_t *f, uint32_t machine_id, uint32_t seq,
                       Perfetto__Protos__SystemInfo *si) {
  size_t n = perfetto__protos__system_info__get_packed_size(si);
  if (n > SMALL_PACKET - 64) return TG_ENO_SPACE;
  uint8_t msg[SMALL_PACKET], buf[SMALL_PACKET];
  perfetto__protos__system_info__pack(si, msg);
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_append_bytes(&w, PKT_SYSTEM_INFO, msg, n);
  ids(&w, machine_id, seq);
  return emit(f, &w, buf);
}

int fleet_merge_head(fleet_t *f) {
  struct utsname u;
  Perfetto__Protos__SystemInfo si = PERFETTO__PROTOS__SYSTEM_INFO__INIT;
  Perfetto__Protos__Utsname un = PERFETTO__PROTOS__UTSNAME__INIT;
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  if (uname(&u) == 0) {
    un.sysname = u.sysname;
    un.release = u.release;
    un.version = u.version;
    un.machine = u.machine;
    si.utsname = &un;
  }
  si.tracegate_hostname = host;
  si.has_num_cpus = 1;
  si.num_cpus = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t now[TG_CLK_N];
  tg_clock_read(now);
  /* The clock snapshot first: a packet without a machine id makes this
   * machine (0, the collector) the trace's host, whose BOOTTIME is the
   * timeline every host is aligned to. */
  int rv = clock_snapshot(f, 0, FLEET_SEQ_MACHINE0, now);
  if (rv == 0) rv = system_info(f, 0, FLEET_SEQ_MACHINE0, &si);
  return rv;
}

int fleet_merge_host_preamble(fleet_t *f, fleet_host_t *h) {
  uint32_t seq = (h->machine_id << FLEET_SEQ_SHIFT) | FLEET_SEQ_COLLECTOR;
  Perfetto__Protos__SystemInfo si = PERFETTO__PROTOS__SYSTEM_INFO__INIT;
  Perfetto__Protos__Utsname un = PERFETTO__PROTOS__UTSNAME__INIT;
  char kernel[256], *release = NULL;
  snprintf(kernel, sizeof(kernel), "%s", h->core.kernel);
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
  si.tracegate_hostname = h->core.has_info && h->core.hostname[0]
                              ? h->core.hostname
                              : (char *)h->t->host;
  if (h->core.host_machine_id[0])
    si.tracegate_machine_id = h->core.host_machine_id;
  if (h->core.num_cpus) {
    si.has_num_cpus = 1;
    si.num_cpus = h->core.num_cpus;
  }
  int rv = system_info(f, h->machine_id, seq, &si);
  if (rv == 0 && h->core.clock.estimates)
    rv = clock_snapshot(f, h->machine_id, seq, h->core.clock.best.remote);
  if (rv == 0 && h->core.clock.estimates) rv = remote_clock_sync(f, h);
  return rv;
}

int fleet_merge_clock_sync(fleet_t *f, fleet_host_t *h) {
  return h->core.clock.estimates ? remote_clock_sync(f, h) : 0;
}
