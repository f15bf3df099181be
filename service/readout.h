/* Read-out: from a session's trace buffers to the TracePackets a consumer
 * or a file gets, with the service's own packets first.
 *
 * Owns: tg_readout_t (queued service packets, sequence id map, file write
 * progress), embedded in each session. Must never change the session's
 * lifecycle: when a session should stop (file full, write error) it says
 * so in its return value and the session acts on it.
 */
#ifndef TRACEGATE_SERVICE_READOUT_H
#define TRACEGATE_SERVICE_READOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "common/write_behind.h"
#include "common/u32_map.h"
#include "pb/common/trace_stats.pb-c.h"
#include "service/clock_snapshots.h"
#include "service/readout_filter.h"
#include "service/service.h"

typedef struct tg_readout {
  tg_buf_t service_packets; /* pending service packets, [u32 len][bytes] */
  bool preamble_done;
  uint64_t last_sync_marker_ns;
  tg_clock_ring_t clocks; /* snapshots written at the next read */
  bool stats_emitted;
  uint64_t invalid_packets;
  /* {producer, writer} -> the session's trusted_packet_sequence_id. */
  tg_u32_map_t seqs;
  uint32_t last_seq; /* 1 is the service's own sequence */
  uint64_t file_bytes;
  bool file_limit_hit;
  bool file_wb_ready;       /* file_wb tracks the write_into_file fd */
  tg_write_behind_t file_wb;
  /* The trace's UUID (random, version 4), told in its TraceUuid packet and,
   * for a clone, in CloneSessionResponse: each session, a clone too, has
   * its own, as in Perfetto. */
  int64_t uuid_msb, uuid_lsb;
  /* The service's uid and pid, stamped on its own packets: read once, a
   * syscall each (glibc caches neither) saved on every packet. */
  uint32_t own_uid;
  int32_t own_pid;
  /* TraceConfig.trace_filter, owned; NULL: packets leave as they are. */
  tg_readout_filter_t *filter;
} tg_readout_t;

/* What a file write asks of the session. */
typedef enum tg_readout_status {
  TG_READOUT_OK = 0,
  TG_READOUT_STOP_FILE_FULL,  /* max_file_size_bytes reached */
  TG_READOUT_STOP_FILE_ERROR, /* write() failed */
} tg_readout_status_t;

void tg__readout_init(tg_readout_t *r);
void tg__readout_free(tg_readout_t *r);
/* Why the session should stop, for logs. */
const char *tg__readout_status_str(tg_readout_status_t st);

/* Queues the service packets that open a trace (config, clocks, system). */
void tg__readout_preamble(tg_session_t *s);
/* Offers a clock snapshot to the session's pending ones
 * (service/clock_snapshots.h): at start, periodically, on a trigger and at
 * disable, as Perfetto's service does. Nothing with
 * builtin_data_sources.disable_clock_snapshotting. */
void tg__readout_clock_snapshot(tg_session_t *s);
void tg__readout_service_event(tg_session_t *s, int event_field);
/* TracingServiceEvent.slow_starting_data_sources naming |n| instances:
 * |producers[i]|, |names[i]| (borrowed for the call). */
void tg__readout_slow_starting(tg_session_t *s, const char *const *producers,
                               const char *const *names, size_t n);
/* Which TracePacket field a trigger packet fills: a trigger the session
 * received, or (a clone's) the trigger it was cloned for. */
typedef enum tg_readout_trigger_field {
  TG_READOUT_TRIGGER = 46,                 /* trigger */
  TG_READOUT_CLONE_SNAPSHOT_TRIGGER = 113, /* clone_snapshot_trigger */
} tg_readout_trigger_field_t;
typedef struct tg_trigger_info tg_trigger_info_t;
/* Queues a Trigger packet saying |t| (borrowed), timestamped when the
 * trigger was received, as Perfetto's service writes both kinds. */
void tg__readout_trigger(tg_session_t *s, tg_readout_trigger_field_t field,
                         const tg_trigger_info_t *t);
/* For each packet, calls |emit| with the packet's pieces. Returns 1 if
 * more data remains, 0 if drained, negative on error. Stops when |emit|
 * returns non-zero (budget reached).
 *
 * Pieces [0, |n_stable|) lie in a trace buffer and stay valid after the
 * call, until the drain has returned and the session's buffers next take
 * a chunk or a patch (no return to the loop in between): a sink may send
 * them in place (read_frames.h). The others (the trusted suffix, service
 * packets, compressed batches) are valid only during the call. */
typedef int (*tg_readout_emit_fn)(void *ctx, const uint8_t *const *pieces,
                                  const size_t *lens, unsigned n,
                                  unsigned n_stable, size_t total);
int tg__readout_drain(tg_session_t *s, tg_readout_emit_fn emit, void *ctx);
/* Fills a TraceStats message for |s|; free with tg__readout_stats_free. */
Perfetto__Protos__TraceStats *tg__readout_stats_new(tg_session_t *s);
void tg__readout_stats_free(Perfetto__Protos__TraceStats *st);
/* Drains the session into |fd| (its write_into_file target). Returns
 * TG_READOUT_OK, or why the session should stop. */
tg_readout_status_t tg__readout_write_file(tg_session_t *s, int fd);

#endif /* TRACEGATE_SERVICE_READOUT_H */
