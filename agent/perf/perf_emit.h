/* The packets of "linux.perf", laid out as Perfetto's traced_perf writes
 * them and trace_processor v50.1 reads them (profile_module.cc,
 * stack_profile_sequence_state.cc):
 *
 *   - after every incremental-state clear, a defaults packet:
 *     sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED and
 *     trace_packet_defaults { timestamp_clock_id, perf_sample_defaults {
 *     timebase, followers, process_shard_count, chosen_process_shard } };
 *   - a sample: timestamp, sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE,
 *     interned_data with what the sample uses that the sequence has not
 *     seen since its last clear (build_ids, mapping_paths, function_names,
 *     mappings, frames, callstacks), and perf_sample { cpu, pid, tid,
 *     callstack_iid, cpu_mode, timebase_count, follower_counts };
 *   - a polled reading (counter-only polling): perf_sample { cpu,
 *     timebase_count, follower_counts } with no process, as traced_perf
 *     writes them;
 *   - ring loss: perf_sample { cpu, kernel_records_lost } (no pid), which
 *     trace_processor counts as perf_cpu_lost_records of that CPU;
 *   - a sample read but not written with its callstack: perf_sample {
 *     cpu, pid, tid, cpu_mode, timebase_count, follower_counts,
 *     sample_skipped_reason }, as traced_perf writes them. trace_processor
 *     keeps the row (its counts stay in the counter tracks) and counts
 *     perf_samples_skipped for the read and unwind stages,
 *     perf_samples_skipped_dataloss for PROFILER_SKIP_UNWIND_ENQUEUE, and
 *     nothing for PROFILER_SKIP_NOT_IN_SCOPE (a process outside the scope
 *     or shard, or a kernel thread when no kernel frames are asked for);
 *   - the session stopped by its memory guardrail: perf_sample {
 *     producer_event { source_stop_reason: PROFILER_STOP_GUARDRAIL } }
 *     (trace_processor: perf_guardrail_stop_ts).
 *
 * Callstacks list their frames root first (trace_processor gives the
 * first frame depth 0). Mapping paths are interned per component, as
 * trace_processor joins them with '/'. The empty callstack is iid 1, the
 * id traced_perf gives it and trace_processor accepts for counter-only
 * profiles.
 *
 * The emitter holds the interning tables of one sequence (one writer);
 * not thread-safe.
 */
#ifndef TRACEGATE_PERF_PERF_EMIT_H
#define TRACEGATE_PERF_PERF_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/perf/perf_config.h"
#include "tracegate/pb_writer.h"

/* TracePacket fields and flags. */
#define TG_PERF_PKT_TIMESTAMP 8
#define TG_PERF_PKT_INTERNED_DATA 12
#define TG_PERF_PKT_SEQUENCE_FLAGS 13
#define TG_PERF_PKT_DEFAULTS 59
#define TG_PERF_PKT_PERF_SAMPLE 66
#define TG_PERF_SEQ_INCREMENTAL_STATE_CLEARED 1
#define TG_PERF_SEQ_NEEDS_INCREMENTAL_STATE 2

/* PerfSample.sample_skipped_reason */
#define TG_PERF_SKIP_READ_STAGE 1
#define TG_PERF_SKIP_UNWIND_STAGE 2
#define TG_PERF_SKIP_UNWIND_ENQUEUE 3
#define TG_PERF_SKIP_NOT_IN_SCOPE 4
/* PerfSample.ProducerEvent.source_stop_reason */
#define TG_PERF_STOP_GUARDRAIL 1

/* What the defaults packet says of the timebase (PerfEvents.Timebase). */
typedef struct tg_perf_timebase_desc {
  uint64_t frequency;   /* 0: |period| (or |poll_period_ms|) */
  uint64_t period;
  uint32_t counter;     /* PerfEvents.Counter (with |event| NULL) */
  uint32_t perf_clock;  /* PerfEvents.PerfClock; 0: not written */
  const char *name;     /* NULL: not written */
  uint32_t builtin_clock; /* TracePacketDefaults.timestamp_clock_id */
  /* The timebase's event (a tracepoint or raw event is written as such;
   * trace_processor names the counter track after it); NULL: |counter|. */
  const tg_perf_event_t *event;
  uint32_t poll_period_ms; /* written instead of frequency/period when set */
  const tg_perf_event_t *followers; /* PerfSampleDefaults.followers */
  size_t n_followers;
  uint32_t shard_count; /* 0: no sharding, nothing written */
  uint32_t chosen_shard;
} tg_perf_timebase_desc_t;

typedef struct tg_perf_emit_mapping {
  uint64_t start, end, exact_offset, start_offset, load_bias;
  const uint8_t *build_id; /* raw bytes; NULL/0: none */
  size_t build_id_len;
  const char *path;
} tg_perf_emit_mapping_t;

typedef struct tg_perf_emit_frame {
  const tg_perf_emit_mapping_t *mapping;
  uint64_t rel_pc;
  const char *function; /* NULL: not named on the host */
  size_t function_len;  /* 0: |function| is NUL-terminated */
} tg_perf_emit_frame_t;

typedef struct tg_perf_emit_sample {
  uint64_t ts;
  uint32_t cpu, pid, tid;
  uint32_t cpu_mode; /* Profiling.CpuMode: header.misc's cpumode */
  uint64_t timebase_count;
  const uint64_t *follower_counts; /* one per follower, in config order */
  size_t n_follower_counts;
  const tg_perf_emit_frame_t *frames; /* root first */
  size_t n_frames;
} tg_perf_emit_sample_t;

typedef struct tg_perf_emitter tg_perf_emitter_t;

/* |budget| bytes of interning tables (0: 16 MiB); past it
 * tg_perf_emitter_full() says so. Returns NULL without memory. */
tg_perf_emitter_t *tg_perf_emitter_new(size_t budget);
void tg_perf_emitter_free(tg_perf_emitter_t *e);
/* Forgets what the sequence was told: call with every defaults packet. */
void tg_perf_emitter_reset(tg_perf_emitter_t *e);
/* The tables passed their budget: the caller clears the sequence's state
 * (reset, then a defaults packet) before its next sample. */
bool tg_perf_emitter_full(const tg_perf_emitter_t *e);
size_t tg_perf_emitter_bytes(const tg_perf_emitter_t *e);

/* The fields of a defaults packet, into the packet |w| has begun. */
void tg_perf_emit_defaults(tg_pbw_t *w, uint64_t ts,
                           const tg_perf_timebase_desc_t *tb);
/* The fields of a sample packet. Returns 0 or -ENOMEM (nothing usable
 * was written into |w|'s interned data then: the caller resets). */
int tg_perf_emit_sample(tg_perf_emitter_t *e, tg_pbw_t *w,
                        const tg_perf_emit_sample_t *s);
/* A polled reading of one CPU's group (no process, no callstack). */
void tg_perf_emit_counts(tg_pbw_t *w, uint64_t ts, uint32_t cpu,
                         uint64_t timebase_count, const uint64_t *followers,
                         size_t n_followers);
void tg_perf_emit_lost(tg_pbw_t *w, uint64_t ts, uint32_t cpu, uint64_t lost);
/* |s| without its frames (they are not read), skipped for |reason|. */
void tg_perf_emit_skipped(tg_pbw_t *w, const tg_perf_emit_sample_t *s,
                          uint32_t reason);
void tg_perf_emit_guardrail_stop(tg_pbw_t *w, uint64_t ts);

#endif /* TRACEGATE_PERF_PERF_EMIT_H */
