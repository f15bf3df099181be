/* Read-out: from trace buffers to TracePackets a consumer or file gets.
 *
 * Producer packets are checked (top-level fields must parse; fields only
 * the service may write are refused) and get the trusted fields appended:
 * trusted_uid, trusted_packet_sequence_id, trusted_pid and, after a loss,
 * previous_packet_dropped. Appending is safe because protobuf's last value
 * wins and the producer's own copies were refused. No copy of the packet
 * is made: its slices are handed to the emitter as they lie in the buffer.
 *
 * Service packets (trusted_packet_sequence_id 1) are queued in the session
 * and come first: the trace config, clock snapshots, system info, sync
 * markers, service events and, at the end, the trace stats.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tracegate/pb_writer.h"
#include "pb/common/system_info.pb-c.h"
#include "common/fd_write.h"
#include "common/write_behind.h"
#include "common/log.h"
#include "common/version.h"
#include "service/producer_port.h"
#include "service/packet_deflate.h"
#include "service/readout.h"
#include "service/session.h"
#include "tracegate/error.h"

enum {
  PKT_TIMESTAMP = 8,
  PKT_TRUSTED_UID = 3,
  PKT_TRUSTED_SEQ_ID = 10,
  PKT_TRUSTED_PID = 79,
  PKT_PREVIOUS_PACKET_DROPPED = 42,
  PKT_CLOCK_SNAPSHOT = 6,
  PKT_TRACE_CONFIG = 33,
  PKT_TRACE_STATS = 35,
  PKT_SYNC_MARKER = 36,
  PKT_SYSTEM_INFO = 45,
  PKT_SERVICE_EVENT = 69,
  PKT_TRACE_UUID = 89,
  PKT_TIMESTAMP_CLOCK_ID = 58,
  SERVICE_SEQUENCE_ID = 1,
  SYNC_MARKER_PERIOD_NS = 5000000000ull,
  BUILTIN_CLOCK_BOOTTIME = 6,
};

static const uint8_t sync_marker[16] = {0x82, 0x47, 0x7a, 0x76, 0xb2, 0x8d,
                                        0x42, 0xba, 0x81, 0xdc, 0x33, 0x32,
                                        0x6d, 0x57, 0xa0, 0x79};

/* The machine's clock |c|, for what a trace carries (timestamps, a
 * UUID's fallback entropy): data. What decides reads svc->opt.clock. */
static uint64_t now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Fields a producer must not write: the service owns them. */
static bool reserved_field(uint32_t id) {
  switch (id) {
    case 3: case 10: case 33: case 35: case 36: case 50: case 69: case 79:
    case 98:
      return true;
    default:
      return false;
  }
}

/* --- service packets --------------------------------------------------------- */

/* Starts a service packet of time |ts| (BOOTTIME) in a scratch buffer:
 * [u32 len][packet]. */
static uint8_t *service_packet_begin_at(tg_session_t *s, tg_pbw_t *w, size_t cap,
                                        uint64_t ts) {
  uint8_t *p = tg_buf_reserve(&s->readout.service_packets, 4 + cap);
  if (!p) return NULL;
  tg_pbw_init(w, p + 4, cap, NULL, NULL);
  tg_pbw_append_varint(w, PKT_TIMESTAMP, ts);
  tg_pbw_append_varint(w, PKT_TRUSTED_UID, s->readout.own_uid);
  tg_pbw_append_varint(w, PKT_TRUSTED_SEQ_ID, SERVICE_SEQUENCE_ID);
  tg_pbw_append_varint(w, PKT_TRUSTED_PID, (uint64_t)s->readout.own_pid);
  return p;
}

static uint8_t *service_packet_begin(tg_session_t *s, tg_pbw_t *w, size_t cap) {
  return service_packet_begin_at(s, w, cap, now_ns(CLOCK_BOOTTIME));
}

static void service_packet_end(tg_session_t *s, tg_pbw_t *w, uint8_t *p) {
  if (!p) return;
  if (tg_pbw_error(w)) {
    TG_WARN("session %llu: a service packet did not fit; dropped",
            (unsigned long long)s->id);
    return;
  }
  uint32_t n = (uint32_t)tg_pbw_written(w);
  memcpy(p, &n, 4);
  tg_buf_commit(&s->readout.service_packets, 4 + n);
}

static void queue_message(tg_session_t *s, uint32_t field,
                          const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  tg_pbw_t w;
  uint8_t *p = service_packet_begin(s, &w, n + 64);
  if (!p) return;
  /* Packed straight into place: [tag][redundant len][message]. */
  if (tg_pbw_begin_nested(&w, field) == 0 && (size_t)(w.end - w.cur) >= n) {
    protobuf_c_message_pack(m, w.cur);
    w.cur += n;
    tg_pbw_end_nested(&w);
  }
  service_packet_end(s, &w, p);
}

void tg__readout_clock_snapshot(tg_session_t *s) {
  const Perfetto__Protos__TraceConfig__BuiltinDataSource *b =
      s->config ? s->config->builtin_data_sources : NULL;
  if (b && b->has_disable_clock_snapshotting && b->disable_clock_snapshotting)
    return;
  tg_clock_sample_t now;
  tg__clock_sample_now(&now);
  tg__clock_ring_offer(&s->readout.clocks, &now);
}

/* Queues the pending clock snapshots as ClockSnapshot packets. */
static void queue_clock_snapshots(tg_session_t *s) {
  tg_clock_sample_t c;
  while (tg__clock_ring_take(&s->readout.clocks, &c)) {
    tg_pbw_t w;
    uint8_t *p = service_packet_begin(s, &w, 256);
    if (!p) return;
    tg_pbw_begin_nested(&w, PKT_CLOCK_SNAPSHOT);
    for (size_t i = 0; i < TG_CLOCK_SNAPSHOT_CLOCKS; i++) {
      tg_pbw_begin_nested(&w, 1); /* clocks */
      tg_pbw_append_varint(&w, 1, tg_clock_snapshot_builtin[i]);
      tg_pbw_append_varint(&w, 2, c.ns[i]);
      tg_pbw_end_nested(&w);
    }
    tg_pbw_append_varint(&w, 2, BUILTIN_CLOCK_BOOTTIME); /* primary_trace_clock */
    tg_pbw_end_nested(&w);
    service_packet_end(s, &w, p);
  }
}

static void read_machine_id(char *out, size_t n) {
  out[0] = 0;
  FILE *f = fopen("/etc/machine-id", "r");
  if (!f) f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return;
  if (fgets(out, (int)n, f)) out[strcspn(out, "\r\n")] = 0;
  fclose(f);
}

static void queue_system_info(tg_session_t *s) {
  struct utsname u;
  Perfetto__Protos__SystemInfo si = PERFETTO__PROTOS__SYSTEM_INFO__INIT;
  Perfetto__Protos__Utsname un = PERFETTO__PROTOS__UTSNAME__INIT;
  char host[256] = "", mid[64];
  if (uname(&u) == 0) {
    un.sysname = u.sysname;
    un.version = u.version;
    un.release = u.release;
    un.machine = u.machine;
    si.utsname = &un;
  }
  gethostname(host, sizeof(host) - 1);
  read_machine_id(mid, sizeof(mid));
  si.tracegate_hostname = host;
  si.tracegate_machine_id = mid;
  si.tracing_service_version = "tracegate " TG_VERSION;
  si.has_page_size = 1;
  si.page_size = (uint32_t)sysconf(_SC_PAGESIZE);
  si.has_num_cpus = 1;
  si.num_cpus = (uint32_t)sysconf(_SC_NPROCESSORS_CONF);
  si.has_hz = 1;
  si.hz = sysconf(_SC_CLK_TCK);
  queue_message(s, PKT_SYSTEM_INFO, &si.base);
}

static void queue_sync_marker(tg_session_t *s) {
  tg_pbw_t w;
  uint8_t *p = service_packet_begin(s, &w, 64);
  if (!p) return;
  tg_pbw_append_bytes(&w, PKT_SYNC_MARKER, sync_marker, sizeof(sync_marker));
  service_packet_end(s, &w, p);
  s->readout.last_sync_marker_ns = tg_clock_ns(s->svc->opt.clock);
}

/* TraceUuid {msb = 1, lsb = 2}: the id a trace processor and a clone's
 * reply know the trace by. */
static void queue_trace_uuid(tg_session_t *s) {
  tg_pbw_t w;
  uint8_t *p = service_packet_begin(s, &w, 64);
  if (!p) return;
  tg_pbw_begin_nested(&w, PKT_TRACE_UUID);
  tg_pbw_append_int(&w, 1, s->readout.uuid_msb);
  tg_pbw_append_int(&w, 2, s->readout.uuid_lsb);
  tg_pbw_end_nested(&w);
  service_packet_end(s, &w, p);
}

void tg__readout_preamble(tg_session_t *s) {
  if (s->readout.preamble_done) return;
  s->readout.preamble_done = true;
  queue_sync_marker(s);
  queue_trace_uuid(s);
  tg_pbw_t w;
  uint8_t *p = service_packet_begin(s, &w, s->config_len + 64);
  if (p) {
    tg_pbw_append_bytes(&w, PKT_TRACE_CONFIG, s->config_bytes, s->config_len);
    service_packet_end(s, &w, p);
  }
  queue_system_info(s);
  tg__readout_clock_snapshot(s);
}

void tg__readout_service_event(tg_session_t *s, int event_field) {
  tg_pbw_t w;
  uint8_t *p = service_packet_begin(s, &w, 64);
  if (!p) return;
  tg_pbw_begin_nested(&w, PKT_SERVICE_EVENT);
  tg_pbw_append_bool(&w, (uint32_t)event_field, true);
  tg_pbw_end_nested(&w);
  service_packet_end(s, &w, p);
}

void tg__readout_slow_starting(tg_session_t *s, const char *const *producers,
                               const char *const *names, size_t n) {
  size_t cap = 64;
  for (size_t i = 0; i < n; i++)
    cap += strlen(producers[i]) + strlen(names[i]) + 32;
  tg_pbw_t w;
  uint8_t *p = service_packet_begin(s, &w, cap);
  if (!p) return;
  /* TracingServiceEvent {slow_starting_data_sources = 7: DataSources
   * {data_source = 1: {producer_name = 1, data_source_name = 2}}}. */
  tg_pbw_begin_nested(&w, PKT_SERVICE_EVENT);
  tg_pbw_begin_nested(&w, 7);
  for (size_t i = 0; i < n; i++) {
    tg_pbw_begin_nested(&w, 1);
    tg_pbw_append_bytes(&w, 1, producers[i], strlen(producers[i]));
    tg_pbw_append_bytes(&w, 2, names[i], strlen(names[i]));
    tg_pbw_end_nested(&w);
  }
  tg_pbw_end_nested(&w);
  tg_pbw_end_nested(&w);
  service_packet_end(s, &w, p);
}

void tg__readout_trigger(tg_session_t *s, tg_readout_trigger_field_t field,
                         const tg_trigger_info_t *t) {
  size_t nlen = strlen(t->name);
  size_t plen = t->producer_name ? strlen(t->producer_name) : 0;
  tg_pbw_t w;
  uint8_t *p = service_packet_begin_at(s, &w, nlen + plen + 64, t->boot_time_ns);
  if (!p) return;
  /* Trigger {trigger_name = 1, producer_name = 2, trusted_producer_uid = 3,
   * stop_delay_ms = 4}. The delay is written even when 0, as Perfetto
   * writes it: a clone_snapshot_trigger then equals its trigger packet
   * field for field. */
  tg_pbw_begin_nested(&w, (uint32_t)field);
  tg_pbw_append_bytes(&w, 1, t->name, nlen);
  if (t->producer_name) tg_pbw_append_bytes(&w, 2, t->producer_name, plen);
  tg_pbw_append_varint(&w, 3, (uint64_t)(int64_t)(int32_t)t->producer_uid);
  tg_pbw_append_varint(&w, 4, t->delay_ms);
  tg_pbw_end_nested(&w);
  service_packet_end(s, &w, p);
}

Perfetto__Protos__TraceStats *tg__readout_stats_new(tg_session_t *s) {
  Perfetto__Protos__TraceStats *st = calloc(1, sizeof(*st));
  if (!st) return NULL;
  perfetto__protos__trace_stats__init(st);
  st->buffer_stats = calloc(s->n_buffers ? s->n_buffers : 1, sizeof(void *));
  Perfetto__Protos__TraceStats__BufferStats *bs =
      calloc(s->n_buffers ? s->n_buffers : 1, sizeof(*bs));
  if (!st->buffer_stats || !bs) {
    free(bs);
    free(st->buffer_stats);
    free(st);
    return NULL;
  }
  for (size_t i = 0; i < s->n_buffers; i++) {
    const tg_trace_buffer_stats_t *b = tg_trace_buffer_stats(s->buffers[i].tb);
    perfetto__protos__trace_stats__buffer_stats__init(&bs[i]);
#define SET(f)          \
  bs[i].has_##f = 1;    \
  bs[i].f = b->f;
    SET(buffer_size) SET(bytes_written) SET(bytes_overwritten) SET(bytes_read)
    SET(padding_bytes_written) SET(chunks_written) SET(chunks_rewritten)
    SET(chunks_overwritten) SET(chunks_discarded) SET(chunks_read)
    SET(chunks_committed_out_of_order) SET(write_wrap_count)
    SET(patches_succeeded) SET(patches_failed) SET(abi_violations)
    SET(trace_writer_packet_loss)
#undef SET
    st->buffer_stats[i] = &bs[i];
  }
  if (tg__readout_filter_stats(s->readout.filter, st) < 0) {
    free(bs);
    free(st->buffer_stats);
    free(st);
    return NULL;
  }
  /* [0] holds the array even with no buffer: tg__readout_stats_free()
   * frees it through [0] (n_buffer_stats says it is not one). */
  st->buffer_stats[0] = bs;
  st->n_buffer_stats = s->n_buffers;
  tg_service_t *svc = s->svc;
  size_t nds = 0;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->producers) {
    nds += TG_CONTAINER_OF(it, tg_producer_t, node)->n_ds;
  }
#define SETG(f, v) \
  st->has_##f = 1; \
  st->f = (v);
  SETG(producers_connected, (uint32_t)svc->n_producers)
  SETG(producers_seen, svc->producers_seen)
  SETG(data_sources_registered, (uint32_t)nds)
  SETG(data_sources_seen, svc->data_sources_seen)
  SETG(tracing_sessions, (uint32_t)svc->n_sessions)
  SETG(total_buffers, (uint32_t)s->n_buffers)
  /* This session's loss, not the service's since it started: another
   * session's (or an ended one's) refused commits are not ours. */
  SETG(chunks_discarded, s->chunks_discarded)
  SETG(patches_discarded, s->patches_discarded)
  SETG(invalid_packets, s->readout.invalid_packets)
  SETG(flushes_requested, s->flushes.requested)
  SETG(flushes_succeeded, s->flushes.succeeded)
  SETG(flushes_failed, s->flushes.failed)
#undef SETG
  return st;
}

void tg__readout_stats_free(Perfetto__Protos__TraceStats *st) {
  if (!st) return;
  tg__readout_filter_stats_free(st);
  /* One array holds every BufferStats; [0] points at its start. */
  if (st->buffer_stats) free(st->buffer_stats[0]);
  free(st->buffer_stats);
  free(st);
}

static void queue_trace_stats(tg_session_t *s) {
  if (s->readout.stats_emitted) return;
  s->readout.stats_emitted = true;
  Perfetto__Protos__TraceStats *st = tg__readout_stats_new(s);
  if (!st) return;
  queue_message(s, PKT_TRACE_STATS, &st->base);
  tg__readout_stats_free(st);
}

/* --- producer packets -------------------------------------------------------- */

/* A byte cursor over a packet's slices, for the top-level field scan. */
typedef struct slice_cursor {
  const tg_packet_t *pkt;
  unsigned slice;
  size_t off;
  uint64_t pos; /* bytes consumed */
} slice_cursor_t;

static int cursor_byte(slice_cursor_t *c) {
  while (c->slice < c->pkt->num_slices && c->off >= c->pkt->slice_len[c->slice]) {
    c->slice++;
    c->off = 0;
  }
  if (c->slice >= c->pkt->num_slices) return -1;
  c->pos++;
  return c->pkt->slice[c->slice][c->off++];
}

static bool cursor_varint(slice_cursor_t *c, uint64_t *v) {
  *v = 0;
  for (int i = 0; i < 10; i++) {
    int b = cursor_byte(c);
    if (b < 0) return false;
    *v |= (uint64_t)(b & 0x7F) << (7 * i);
    if (!(b & 0x80)) return true;
  }
  return false;
}

static bool cursor_skip(slice_cursor_t *c, uint64_t n) {
  if (n > c->pkt->size - c->pos) return false;
  c->pos += n;
  while (n > 0) {
    size_t avail = c->pkt->slice_len[c->slice] - c->off;
    if (n < avail) {
      c->off += n;
      return true;
    }
    n -= avail;
    c->slice++;
    c->off = 0;
  }
  return true;
}

/* True if the packet's top level parses and holds no reserved field. */
static bool packet_acceptable(const tg_packet_t *pkt) {
  slice_cursor_t c = {pkt, 0, 0, 0};
  while (c.pos < pkt->size) {
    uint64_t tag, v;
    if (!cursor_varint(&c, &tag)) return false;
    uint32_t id = (uint32_t)(tag >> 3);
    if (id == 0 || tag > 0xFFFFFFFFull || reserved_field(id)) return false;
    bool ok;
    switch (tag & 7) {
      case 0: ok = cursor_varint(&c, &v); break;
      case 1: ok = cursor_skip(&c, 8); break;
      case 5: ok = cursor_skip(&c, 4); break;
      case 2: ok = cursor_varint(&c, &v) && cursor_skip(&c, v); break;
      default: ok = false; break;
    }
    if (!ok) return false;
  }
  return true;
}

/* The session's trusted_packet_sequence_id of {producer, writer}, handed
 * out in order of first appearance. 0 when the map is full or out of
 * memory. */
static uint32_t sequence_id(tg_readout_t *r, uint16_t producer_id,
                            uint16_t writer_id) {
  uint32_t key = ((uint32_t)producer_id << 16) | writer_id, v;
  if (tg_u32_map_get(&r->seqs, key, &v)) return v;
  if (tg_u32_map_put(&r->seqs, key, r->last_seq + 1) < 0) return 0;
  return ++r->last_seq;
}

/* Emits producer packets until the buffers are empty (0) or |emit| asks
 * to stop (1). */
static int drain_buffers(tg_session_t *s, tg_readout_emit_fn emit, void *ctx) {
  /* No trigger came in time: the trace holds no producer data, as
   * Perfetto's (session.h, tg_session_trigger_state_t). */
  if (s->trigger_state == TG_TRIG_TIMED_OUT) return 0;
  bool any = true;
  while (any) {
    any = false;
    for (size_t i = 0; i < s->n_buffers; i++) {
      tg_packet_t pkt;
      if (tg_trace_buffer_read_packet(s->buffers[i].tb, &pkt) != 1) continue;
      any = true;
      if (!packet_acceptable(&pkt)) {
        s->readout.invalid_packets++;
        continue;
      }
      uint8_t suffix[48];
      uint8_t *q = suffix;
      q = tg_pb_write_varint(q, TG_PB_TAG(PKT_TRUSTED_UID, 0));
      q = tg_pb_write_varint(q, (uint64_t)pkt.producer.uid);
      q = tg_pb_write_varint(q, TG_PB_TAG(PKT_TRUSTED_SEQ_ID, 0));
      q = tg_pb_write_varint(
          q, sequence_id(&s->readout, pkt.producer.producer_id, pkt.writer_id));
      q = tg_pb_write_varint(q, TG_PB_TAG(PKT_TRUSTED_PID, 0));
      q = tg_pb_write_varint(q, (uint64_t)pkt.producer.pid);
      if (pkt.previous_packet_dropped) {
        q = tg_pb_write_varint(q, TG_PB_TAG(PKT_PREVIOUS_PACKET_DROPPED, 0));
        q = tg_pb_write_varint(q, 1);
      }
      /* The slice table has a spare entry for the trusted suffix. */
      pkt.slice[pkt.num_slices] = suffix;
      pkt.slice_len[pkt.num_slices] = (size_t)(q - suffix);
      size_t total = pkt.size + (size_t)(q - suffix);
      tg__readout_filter_from(s->readout.filter, (int)i);
      if (emit(ctx, pkt.slice, pkt.slice_len, pkt.num_slices + 1,
               pkt.num_slices, total))
        return 1;
    }
  }
  return 0;
}

/* One pass as the sink sees it: service packets, producer packets, and the
 * final trace stats of a disabled session. */
static int drain_plain(tg_session_t *s, tg_readout_emit_fn emit, void *ctx) {
  if (s->readout.preamble_done &&
      tg_clock_ns(s->svc->opt.clock) - s->readout.last_sync_marker_ns >
          SYNC_MARKER_PERIOD_NS)
    queue_sync_marker(s);
  queue_clock_snapshots(s);
  for (;;) {
    /* 1. Service packets. */
    while (tg_buf_size(&s->readout.service_packets) >= 4) {
      uint8_t *b = tg_buf_begin(&s->readout.service_packets);
      uint32_t n;
      memcpy(&n, b, 4);
      const uint8_t *piece = b + 4;
      size_t len = n;
      int stop = emit(ctx, &piece, &len, 1, 0, n);
      tg_buf_consume(&s->readout.service_packets, 4 + n);
      if (stop) return 1;
    }
    /* 2. Producer packets, round robin over the buffers. */
    int rv = drain_buffers(s, emit, ctx);
    if (rv) return rv;
    /* 3. A disabled session ends with its trace stats, once. */
    if (s->state != TG_SESSION_DISABLED || s->readout.stats_emitted) return 0;
    queue_trace_stats(s);
  }
}

/* drain_plain through the session's trace filter, if it has one. A
 * packet filtered to nothing still goes to a file (Perfetto writes it as
 * an empty TracePacket), not to ReadBuffers. */
static int file_emit(void *ctx, const uint8_t *const *pieces,
                     const size_t *lens, unsigned n, unsigned n_stable,
                     size_t total);
static int drain_filtered(tg_session_t *s, tg_readout_emit_fn emit, void *ctx) {
  tg_readout_filter_t *rf = s->readout.filter;
  if (!rf) return drain_plain(s, emit, ctx);
  tg__readout_filter_begin(rf, emit, ctx,
                           emit == file_emit || emit == tg_deflate_emit);
  return drain_plain(s, tg__readout_filter_emit, rf);
}

static bool deflate_requested(const tg_session_t *s) {
  return s->config->has_compression_type &&
         s->config->compression_type ==
             PERFETTO__PROTOS__TRACE_CONFIG__COMPRESSION_TYPE__COMPRESSION_TYPE_DEFLATE;
}

int tg__readout_drain(tg_session_t *s, tg_readout_emit_fn emit, void *ctx) {
  if (!deflate_requested(s)) return drain_filtered(s, emit, ctx);
  tg_deflate_t d;
  int rv = tg_deflate_init(&d, emit, ctx);
  if (rv == 0) {
    rv = drain_filtered(s, tg_deflate_emit, &d);
    /* The batch closes with the pass, whether it drained or the sink asked
     * to stop: no packet waits in the compressor for the next pass. When
     * only this last batch filled the sink's budget, the buffers are empty
     * all the same: the pass still counts as drained. */
    tg_deflate_finish(&d);
    if (d.err) {
      TG_ERROR("session %llu: DEFLATE compression failed: %s",
               (unsigned long long)s->id, tg_strerror(d.err));
      rv = d.err;
    }
  }
  tg_deflate_free(&d);
  return rv;
}

/* --- write_into_file ------------------------------------------------------------ */

typedef struct file_sink {
  tg_session_t *s;
  int fd;
  uint8_t buf[1 << 20];
  size_t len;
  int err;
} file_sink_t;

static int file_flush(file_sink_t *f) {
  int rv = tg_write_all(f->fd, f->buf, f->len);
  if (rv < 0) return f->err = rv;
  tg_write_behind_wrote(&f->s->readout.file_wb, f->len);
  f->s->readout.file_bytes += f->len;
  f->len = 0;
  return 0;
}

static int file_emit(void *ctx, const uint8_t *const *pieces,
                     const size_t *lens, unsigned n, unsigned n_stable,
                     size_t total) {
  (void)n_stable; /* everything is copied into the file buffer */
  file_sink_t *f = ctx;
  tg_session_t *s = f->s;
  size_t hdr = 1 + tg_pb_varint_size(total);
  uint64_t max = s->config->has_max_file_size_bytes ? s->config->max_file_size_bytes : 0;
  if (max && s->readout.file_bytes + f->len + hdr + total > max) {
    s->readout.file_limit_hit = true;
    return 1;
  }
  if (f->len + hdr + total > sizeof(f->buf) && file_flush(f) < 0) return 1;
  /* Trace.packet = field 1: [0x0A][varint len][packet]. */
  if (hdr + total > sizeof(f->buf)) { /* huge packet: write through */
    uint8_t h[11];
    h[0] = 0x0A;
    size_t hl = (size_t)(tg_pb_write_varint(h + 1, total) - h);
    memcpy(f->buf, h, hl);
    f->len = hl;
    if (file_flush(f) < 0) return 1;
    for (unsigned i = 0; i < n; i++) {
      memcpy(f->buf, pieces[i], lens[i]);
      f->len = lens[i];
      if (file_flush(f) < 0) return 1;
    }
    return 0;
  }
  f->buf[f->len++] = 0x0A;
  f->len = (size_t)(tg_pb_write_varint(f->buf + f->len, total) - f->buf);
  for (unsigned i = 0; i < n; i++) {
    memcpy(f->buf + f->len, pieces[i], lens[i]);
    f->len += lens[i];
  }
  return 0;
}

tg_readout_status_t tg__readout_write_file(tg_session_t *s, int fd) {
  if (fd < 0 || s->readout.file_limit_hit) return TG_READOUT_OK;
  if (!s->readout.file_wb_ready) {
    tg_write_behind_init(&s->readout.file_wb, fd);
    s->readout.file_wb_ready = true;
  }
  file_sink_t *f = malloc(sizeof(*f));
  if (!f) return TG_READOUT_OK; /* the next period tries again */
  f->s = s;
  f->fd = fd;
  f->len = 0;
  f->err = 0;
  int rv;
  while ((rv = tg__readout_drain(s, file_emit, f)) == 1 &&
         !s->readout.file_limit_hit && !f->err) {
  }
  if (rv < 0 && !f->err) f->err = rv;
  if (!f->err) file_flush(f);
  if (f->err)
    TG_ERROR("session %llu: writing the trace file failed: %s",
             (unsigned long long)s->id, tg_strerror(f->err));
  int err = f->err;
  free(f);
  if (s->readout.file_limit_hit) return TG_READOUT_STOP_FILE_FULL;
  return err ? TG_READOUT_STOP_FILE_ERROR : TG_READOUT_OK;
}

/* A version 4 UUID. Without the kernel's randomness (it does not fail
 * for 16 bytes once booted) the clocks and pid keep it unique enough. */
static void make_uuid(tg_readout_t *r) {
  uint8_t b[16];
  if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
    uint64_t t[2] = {now_ns(CLOCK_REALTIME), now_ns(CLOCK_MONOTONIC) ^
                                                 ((uint64_t)getpid() << 40)};
    memcpy(b, t, sizeof(b));
  }
  b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
  b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
  uint64_t msb = 0, lsb = 0;
  for (int i = 0; i < 8; i++) {
    msb = msb << 8 | b[i];
    lsb = lsb << 8 | b[8 + i];
  }
  r->uuid_msb = (int64_t)msb;
  r->uuid_lsb = (int64_t)lsb;
}

void tg__readout_init(tg_readout_t *r) {
  memset(r, 0, sizeof(*r));
  tg_buf_init(&r->service_packets, 64u << 20);
  /* Writer ids come from untrusted chunk headers: the bound keeps a
   * hostile producer from growing the map without end (16 MiB at most),
   * far above 1024 writers for each of 1024 producers. */
  tg_u32_map_init(&r->seqs, 1u << 20);
  r->last_seq = 1; /* sequence 1 is the service's own */
  r->own_uid = (uint32_t)getuid();
  r->own_pid = (int32_t)getpid();
  make_uuid(r);
}

void tg__readout_free(tg_readout_t *r) {
  tg_buf_free(&r->service_packets);
  tg_u32_map_free(&r->seqs);
  tg__readout_filter_free(r->filter);
  r->filter = NULL;
}

const char *tg__readout_status_str(tg_readout_status_t st) {
  switch (st) {
    case TG_READOUT_OK: return "ok";
    case TG_READOUT_STOP_FILE_FULL: return "max_file_size_bytes reached";
    case TG_READOUT_STOP_FILE_ERROR: return "file error";
  }
  return "unknown";
}
