/* A trace processor in miniature for the track_event tests: reads the
 * packets of a recording per sequence (trusted_packet_sequence_id), keeps
 * the interning tables and track descriptors that
 * SEQ_INCREMENTAL_STATE_CLEARED wipes, resolves every event's names,
 * categories, annotation names and track on its own sequence, places its
 * timestamp on CLOCK_BOOTTIME through the sequence's clocks (defaults,
 * ClockSnapshot, incremental deltas), and fails the running cmocka test on
 * anything it could not resolve. */
#ifndef TRACEGATE_TESTS_AGENT_TRACK_EVENT_READER_H
#define TRACEGATE_TESTS_AGENT_TRACK_EVENT_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb/trace/trace_packet.pb-c.h"

#define TE_MAX_SEQS 16
#define TE_MAX_INTERN 64
#define TE_MAX_TRACKS 16
#define TE_MAX_ARGS 8

typedef struct intern_tab {
  uint64_t iid[TE_MAX_INTERN];
  const char *name[TE_MAX_INTERN];
  size_t n;
} intern_tab_t;

enum track_kind { TRACK_PROCESS = 1, TRACK_THREAD, TRACK_COUNTER };

typedef struct track {
  uint64_t uuid;
  int kind;
  int32_t tid;      /* thread tracks */
  const char *name; /* counter tracks */
} track_t;

typedef struct seq_state {
  uint32_t id;
  intern_tab_t names, cats, anns;
  track_t tracks[TE_MAX_TRACKS]; /* descriptors since the last clear */
  size_t n_tracks;
  unsigned clears;
  unsigned thread_descriptors;
  uint64_t last_ts;
  int32_t tid; /* of the thread descriptors, 0 before one */
  uint64_t default_track; /* TracePacketDefaults' track_uuid, 0: none */
  /* Clocks, as trace processor keeps them: TracePacketDefaults'
   * timestamp_clock_id (0: none, BOOTTIME), and the sequence-scoped
   * clock of the last ClockSnapshot: its id, whether incremental, its
   * running value and its offset to BOOTTIME. */
  uint32_t default_clock;
  uint32_t seq_clock;
  bool seq_clock_incremental;
  uint64_t seq_clock_now;
  int64_t seq_clock_to_boot;
  unsigned absolute_events; /* events that named BOOTTIME themselves */
} seq_state_t;

typedef struct arg {
  const char *name;
  int type; /* enum tg_arg_type */
  int64_t i;
  uint64_t u;
  double d;
  bool b;
  const char *s;
} arg_t;

typedef struct event {
  uint32_t seq;
  unsigned clear_no; /* clears on its sequence before it */
  int type;          /* enum tg_track_event_type */
  uint64_t ts;
  const char *name; /* NULL for slice ends */
  const char *cat;
  int track_kind;
  int32_t tid;              /* thread events */
  const char *counter_name; /* counter events */
  int64_t counter_value;
  arg_t args[TE_MAX_ARGS];
  size_t n_args;
} event_t;

typedef struct trace {
  seq_state_t seqs[TE_MAX_SEQS];
  size_t n_seqs;
  event_t *ev;
  size_t n_ev;
} trace_t;

/* Reads the producer packets among |pk| (|n|; the service's own sequence
 * is skipped) into |t|, which borrows the packets' strings: free |t| with
 * te_trace_free() before the packets. Event timestamps must lie within
 * [t_lo, t_hi] (CLOCK_BOOTTIME). Every agent packet must carry a track
 * event, a track descriptor or interned data. */
void te_decode(Perfetto__Protos__TracePacket *const *pk, size_t n,
               uint64_t t_lo, uint64_t t_hi, trace_t *t);
void te_trace_free(trace_t *t);

/* The one sequence whose thread descriptors name |tid| (fails otherwise). */
const seq_state_t *te_seq_of_tid(const trace_t *t, int32_t tid);
/* How many events are in category |cat|. */
size_t te_count_in_cat(const trace_t *t, const char *cat);
/* The events of sequence |seq|, in order, into |out| (at most |max|). */
size_t te_events_of(const trace_t *t, uint32_t seq, const event_t **out,
                    size_t max);

#endif /* TRACEGATE_TESTS_AGENT_TRACK_EVENT_READER_H */
