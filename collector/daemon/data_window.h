/* The time a host's ring data covers, from the packets of its clone as a
 * snapshot reads them (snap.c: window_first_ms, window_last_ms).
 *
 * A packet's time is TracePacket.timestamp (8) on the clock that
 * trace processor would read it on:
 *   - timestamp_clock_id (58) when the packet says one, else the default
 *     of its sequence (TracePacketDefaults.timestamp_clock_id, 59.58,
 *     kept until the sequence's incremental state is cleared), else
 *     BOOTTIME (6), the trace's clock;
 *   - a sequence-scoped clock (64 to 127) through the last ClockSnapshot
 *     of its sequence that also read BOOTTIME; an incremental one
 *     (is_incremental) adds each packet's timestamp to its last value, as
 *     the agent's track events write them (deltas of a few ns to ms);
 *   - any other clock (MONOTONIC, REALTIME, a sequence clock never
 *     snapshot) is not counted.
 * Not counted either: the service's own packets (trusted sequence 1: the
 * clone's preamble, clock snapshots and statistics are written at the
 * clone, not with the data); packets that need incremental state on a
 * sequence not cleared since the ring's start was overwritten (trace
 * processor skips them too, and their deltas read as a time just after
 * the boot); packets without a timestamp; the state of sequences past
 * the first COLL_WINDOW_MAX_SEQS that set some (the merge fails such a
 * host anyway): their packets read as those of a sequence never cleared.
 *
 * Input is a remote host's bytes: every field is bounds-checked by the
 * wire reader, a packet that does not decode is left out, and the state
 * is bounded by COLL_WINDOW_MAX_SEQS sequences of COLL_WINDOW_SEQ_CLOCKS
 * clocks each. Pure: no I/O, no clock. Fuzzed (fuzz_coll_window).
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_DATA_WINDOW_H
#define TRACEGATE_COLLECTOR_DAEMON_DATA_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "common/u32_map.h"

#define COLL_WINDOW_MAX_SEQS 4096u
#define COLL_WINDOW_SEQ_CLOCKS 4u

typedef struct coll_window_seq coll_window_seq_t;

typedef struct coll_window {
  uint64_t first_ns, last_ns; /* the host's BOOTTIME; 0: no packet yet */
  uint64_t packets;           /* packets whose time counted */
  tg_u32_map_t index;         /* trusted sequence id -> index in |seqs| */
  coll_window_seq_t *seqs;
  size_t n_seqs, cap_seqs;
} coll_window_t;

/* Empty (a zero-filled one is not: call this). */
void coll_window_init(coll_window_t *w);
/* Frees the sequences' state; |w| is empty again. */
void coll_window_free(coll_window_t *w);

/* One packet (|n| bytes at |p|, borrowed), as the service sent it; the
 * packets of a compressed_packets wrapper one by one (the wrapper itself
 * has no time). Returns 0, or -ENOMEM (the packet did not count). */
int coll_window_packet(coll_window_t *w, const uint8_t *p, size_t n);

#endif /* TRACEGATE_COLLECTOR_DAEMON_DATA_WINDOW_H */
