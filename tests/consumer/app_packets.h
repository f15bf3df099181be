/* The packets of an app's track events as Perfetto's SDK and the agent
 * write them, built into a writer the caller gives (its sequence id
 * excepted): for the merge's tests (links_fixture.h) and for
 * bench_reclock, which build merged files of requests between hosts.
 * Header-only, no test framework; ap_collect is the merge's sink into a
 * buffer. */
#ifndef TRACEGATE_TESTS_CONSUMER_APP_PACKETS_H
#define TRACEGATE_TESTS_CONSUMER_APP_PACKETS_H

#include <errno.h>
#include <stdint.h>

#include "common/buf.h"
#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"

enum { SLICE_BEGIN = 1, SLICE_END = 2 };

/* The merge's sink (merge.h) into a Trace in the tg_buf_t |ctx|: each
 * packet one Trace.packet field. */
static inline int ap_collect(void *ctx, const uint8_t *p, size_t n,
                             const uint8_t *tail, size_t tail_n) {
  tg_buf_t *out = ctx;
  uint8_t hdr[1 + TG_PB_MAX_VARINT_SIZE] = {TG_PB_TAG(1, TG_PB_WT_LEN)};
  size_t h = (size_t)(tg_pb_write_varint(hdr + 1, n + tail_n) - hdr);
  if (tg_buf_append(out, hdr, h) < 0 || tg_buf_append(out, p, n) < 0 ||
      tg_buf_append(out, tail, tail_n) < 0)
    return -ENOMEM;
  return 0;
}

/* A process's track: TrackDescriptor{uuid, process{pid, process_name}},
 * first on its sequence (cleared). */
static inline void ap_process(tg_pbw_t *w, uint64_t uuid, int32_t pid,
                              const char *name) {
  tg_pbw_append_varint(w, 13, 1); /* SEQ_INCREMENTAL_STATE_CLEARED */
  tg_pbw_begin_nested(w, 60);
  tg_pbw_append_varint(w, 1, uuid);
  tg_pbw_begin_nested(w, 3);
  tg_pbw_append_int(w, 1, pid);
  tg_pbw_append_string(w, 6, name);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
}

/* A thread track under |parent|: TrackDescriptor{uuid, parent_uuid,
 * thread{pid, tid}}. */
static inline void ap_thread(tg_pbw_t *w, uint64_t uuid, uint64_t parent,
                             int32_t pid, int32_t tid) {
  tg_pbw_begin_nested(w, 60);
  tg_pbw_append_varint(w, 1, uuid);
  tg_pbw_append_varint(w, 5, parent);
  tg_pbw_begin_nested(w, 4);
  tg_pbw_append_int(w, 1, pid);
  tg_pbw_append_int(w, 2, tid);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
}

/* A TrackEvent at |ts| (on the host's BOOTTIME, or a delta on the
 * sequence's default clock: no timestamp_clock_id written), on |uuid|
 * (0: the sequence's default track), named |name| (NULL: none), with a
 * flow started (flow > 0) or ended (flow < 0). */
static inline void ap_event(tg_pbw_t *w, uint64_t ts, int type, uint64_t uuid,
                            const char *name, int64_t flow) {
  tg_pbw_append_varint(w, 8, ts);
  tg_pbw_begin_nested(w, 11);
  tg_pbw_append_varint(w, 9, (uint64_t)type);
  if (uuid) tg_pbw_append_varint(w, 11, uuid);
  if (name) tg_pbw_append_string(w, 23, name);
  if (flow > 0) tg_pbw_append_fixed64(w, 47, (uint64_t)flow);
  if (flow < 0) tg_pbw_append_fixed64(w, 48, (uint64_t)-flow);
  tg_pbw_end_nested(w);
  tg_pbw_append_varint(w, 13, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
}

/* The sequence-scoped clock 64 (incremental): defaults naming it and
 * |track| as the events' track, with the state's clear. */
static inline void ap_clock64_defaults(tg_pbw_t *w, uint64_t track) {
  tg_pbw_append_varint(w, 13, 1);
  tg_pbw_begin_nested(w, 59);
  tg_pbw_append_varint(w, 58, 64);
  tg_pbw_begin_nested(w, 11);
  tg_pbw_append_varint(w, 11, track);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
}

/* The snapshot tying clock 64 to BOOTTIME at |boot|. */
static inline void ap_clock64_snapshot(tg_pbw_t *w, uint64_t boot) {
  tg_pbw_append_varint(w, 8, boot);
  tg_pbw_append_varint(w, 58, 6);
  tg_pbw_begin_nested(w, 6);
  tg_pbw_begin_nested(w, 1);
  tg_pbw_append_varint(w, 1, 6);
  tg_pbw_append_varint(w, 2, boot);
  tg_pbw_end_nested(w);
  tg_pbw_begin_nested(w, 1);
  tg_pbw_append_varint(w, 1, 64);
  tg_pbw_append_varint(w, 2, boot);
  tg_pbw_append_bool(w, 3, true);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
}

/* A host's own process (host data, not app data): a process_tree of
 * |pid| (parent 1) named |name|, at |ts|. */
static inline void ap_process_tree(tg_pbw_t *w, int32_t pid, const char *name,
                                   uint64_t ts) {
  tg_pbw_begin_nested(w, 2); /* process_tree */
  tg_pbw_begin_nested(w, 1); /* processes */
  tg_pbw_append_int(w, 1, pid);
  tg_pbw_append_int(w, 2, 1);
  tg_pbw_append_string(w, 3, name);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
  tg_pbw_append_varint(w, 8, ts);
}

#endif /* TRACEGATE_TESTS_CONSUMER_APP_PACKETS_H */
