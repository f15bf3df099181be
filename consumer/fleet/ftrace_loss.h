/* The kernel's ftrace losses the packets of a trace carry: the CPUs' ring
 * buffer overruns in linux.ftrace's start and end FtraceStats, counted per
 * packet sequence (one a linux.ftrace instance); and its setup errors
 * (Perfetto's FtraceSetupErrors, FtraceStats fields 5 to 7: events the
 * kernel does not have, events it would not enable, atrace's errors), so
 * that an instance that did not start, or started without some of its
 * events, is seen by whoever reads the trace, whichever probes wrote it.
 * Pure: no I/O, no allocation but protobuf-c's while a stats message is
 * decoded. */
#ifndef TRACEGATE_CLIENT_FTRACE_LOSS_H
#define TRACEGATE_CLIENT_FTRACE_LOSS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sequences whose stats are followed; a trace has one a linux.ftrace
 * instance (a session runs at most a few). */
#define TG_FTRACE_LOSS_MAX_SEQS 16

/* One sequence's stats: |id| is its trusted_packet_sequence_id (0 for
 * packets without one). */
typedef struct tg_ftrace_loss_seq {
  uint32_t id;
  bool has_start;
  uint64_t start; /* overruns summed over CPUs in its last START */
  uint64_t loss;  /* its last END's overruns minus the START before it */
  /* Its setup errors: the most refused events one stats packet of it
   * named (each names them all again), and whether any had per-CPU
   * counters (its ring buffers were opened: it runs) or atrace errors. */
  uint32_t failed, unknown;
  bool has_cpu_stats, atrace;
} tg_ftrace_loss_seq_t;

/* The refused events' names kept, for a reason to show: the first
 * distinct ones met, each cut to TG_FTRACE_SETUP_NAME_MAX bytes (a
 * hostile host names as many as it likes, as long as it likes). */
#define TG_FTRACE_SETUP_NAMES 4
#define TG_FTRACE_SETUP_NAME_MAX 64

/* Data sources the host's service named as not started
 * (TracingServiceEvent.slow_starting_data_sources: their producer did not
 * acknowledge the start in time), each pair kept once, cut to
 * TG_FTRACE_SETUP_NAME_MAX bytes; past TG_FTRACE_NOT_STARTED_MAX distinct
 * pairs the rest are counted in |not_started_omitted|. */
#define TG_FTRACE_NOT_STARTED_MAX 4
typedef struct tg_ds_not_started {
  char producer[TG_FTRACE_SETUP_NAME_MAX + 1];
  char data_source[TG_FTRACE_SETUP_NAME_MAX + 1];
} tg_ds_not_started_t;

/* Zeroed to begin. */
typedef struct tg_ftrace_loss {
  tg_ftrace_loss_seq_t seqs[TG_FTRACE_LOSS_MAX_SEQS];
  size_t n_seqs;
  uint64_t starts, ends; /* FtraceStats packets of each phase seen */
  /* FtraceStats packets (of either phase) of sequences met after the
   * table was full: their overruns are not counted, so a non-zero value
   * says the loss found may be short. */
  uint64_t untracked;
  /* The first distinct refused event names (failed or unknown), cut. */
  char names[TG_FTRACE_SETUP_NAMES][TG_FTRACE_SETUP_NAME_MAX + 1];
  size_t n_names;
  /* The first atrace error text, cut ("" if none). */
  char atrace[TG_FTRACE_SETUP_NAME_MAX + 1];
  tg_ds_not_started_t not_started[TG_FTRACE_NOT_STARTED_MAX];
  size_t n_not_started;
  uint64_t not_started_omitted;
} tg_ftrace_loss_t;

/* Looks at one TracePacket's bytes (|packet|, borrowed, untrusted): its
 * FtraceStats and its TracingServiceEvent.slow_starting_data_sources. */
void tg_ftrace_loss_scan(tg_ftrace_loss_t *l, const uint8_t *packet,
                         size_t n);

/* The overruns the trace shows lost, summed over sequences (saturating at
 * UINT64_MAX): for each, its last END's minus the START before it on the
 * same sequence, 0 when the counters did not grow. A sequence claims
 * nothing until an END follows a START on it (its loss is not known).
 * linux.ftrace writes both at every flush, the START always with the
 * counters of its session's start, so the last pair holds its whole loss
 * and earlier pairs are not added to it. */
uint64_t tg_ftrace_loss_overrun(const tg_ftrace_loss_t *l);

/* What the setup errors of a trace come to, over its sequences. */
typedef struct tg_ftrace_setup {
  /* Instances that did not start: stats with refused events and never
   * per-CPU counters (no ring buffer was opened: tracegate-probes writes
   * every event of such an instance as failed), and their events. */
  uint32_t down;
  uint64_t down_events;
  /* Instances that run without some events: refused (failed or unknown)
   * events of the others, summed; and whether atrace failed on any. */
  uint32_t partial;
  uint64_t refused;
  bool atrace;
} tg_ftrace_setup_t;

void tg_ftrace_setup_summary(const tg_ftrace_loss_t *l, tg_ftrace_setup_t *out);

#endif /* TRACEGATE_CLIENT_FTRACE_LOSS_H */
