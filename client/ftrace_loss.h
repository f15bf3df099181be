/* The kernel's ftrace losses the packets of a trace carry: the CPUs' ring
 * buffer overruns in linux.ftrace's start and end FtraceStats, counted per
 * packet sequence (one a linux.ftrace instance). Pure: no I/O, no
 * allocation but protobuf-c's while a stats message is decoded. */
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
} tg_ftrace_loss_seq_t;

/* Zeroed to begin. */
typedef struct tg_ftrace_loss {
  tg_ftrace_loss_seq_t seqs[TG_FTRACE_LOSS_MAX_SEQS];
  size_t n_seqs;
  uint64_t starts, ends; /* FtraceStats packets of each phase seen */
  /* FtraceStats packets (of either phase) of sequences met after the
   * table was full: their overruns are not counted, so a non-zero value
   * says the loss found may be short. */
  uint64_t untracked;
} tg_ftrace_loss_t;

/* Looks at one TracePacket's bytes (|packet|, borrowed, untrusted). */
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

#endif /* TRACEGATE_CLIENT_FTRACE_LOSS_H */
