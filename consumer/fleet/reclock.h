/* A merged trace re-clocked by its requests (docs/merge.md, "Clocks from
 * requests"): a second pass over a file the merge wrote in the joined
 * mode, where each host's app sequences are on machine 0, their times
 * placed by the host's ClockSync estimate.
 *
 *   scan     reads the file once: follows each host sequence's state as
 *            trace processor does (packet defaults, sequence-scoped
 *            clocks, clears) to the time pass 1 gave each track event;
 *            follows slices per (sequence, track) so that a slice with
 *            flow_ids is a client half {flow, begin, end} and one with
 *            terminating_flow_ids a server half; joins halves of two
 *            hosts by flow id into samples (pair_clock.h) per ordered
 *            host pair, in collector time.
 *   place    fits each pair's residual per window (pair_clock.h, within
 *            a prior made of both hosts' ClockSync bounds and a drift
 *            allowance), then per connected part of the request graph
 *            keeps one host (the anchor: the smallest ClockSync bound)
 *            and moves the others along a spanning tree of the edges
 *            with the most samples.
 *   rewrite  reads the file again and writes it with each moved host's
 *            app packets re-timed (an absolute `timestamp` and
 *            `timestamp_clock_id` BOOTTIME appended, last field wins) and
 *            its RemoteClockSync packets carrying the moved relation, so
 *            that its own machine's data moves with its app slices.
 *            Everything else passes byte for byte.
 *
 * Pure over the owner's reader and writer: no file names, no clock, no
 * knowledge of the CLI. Everything read is untrusted (hosts' bytes): every
 * length and count is checked, a packet that does not parse passes
 * unchanged, tables are bounded (past a bound: counted, not followed).
 * Not thread-safe.
 */
#ifndef TRACEGATE_CONSUMER_FLEET_RECLOCK_H
#define TRACEGATE_CONSUMER_FLEET_RECLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "consumer/fleet/clock_sync.h"

/* Bounds of the scan's tables, so that no file makes them grow without
 * end: flow ids whose halves are kept; host sequences and (sequence,
 * track) slice stacks followed; a stack's depth. Past them: counted. */
#define TG_RECLOCK_MAX_FLOWS (1u << 20)
#define TG_RECLOCK_MAX_SEQS 65536u
#define TG_RECLOCK_MAX_TRACKS 16384u
#define TG_RECLOCK_MAX_DEPTH 64u
/* Sequence-scoped clocks (64..127) followed per sequence. */
#define TG_RECLOCK_SEQ_CLOCKS 8u
/* A packet longer than this passes unread (trace processor's own limit
 * on a packet is far below). */
#define TG_RECLOCK_MAX_PACKET (64u << 20)
/* Fit windows: drift that changes is followed window by window; a window
 * with fewer samples takes its nearest neighbour's line. At most this many
 * windows (a longer recording gets wider ones). */
#define TG_RECLOCK_WINDOW_NS (10ll * 1000000000ll)
#define TG_RECLOCK_WINDOW_MIN_SAMPLES 8u
#define TG_RECLOCK_MAX_WINDOWS 8640u
/* The drift two hosts may have had against their estimates (50 ppm of
 * the samples' span), beside their ClockSync bounds. */
#define TG_RECLOCK_DRIFT_ALLOWANCE 50e-6
/* The recording's span in collector time, as the collector's own packets
 * say it (its head's ClockSnapshot, the hosts' RemoteClockSyncs), widened
 * by this on each side: a request timed outside is not used, so that no
 * host's wild times widen the windows or the drift allowed for others. */
#define TG_RECLOCK_RECORDING_SLACK_NS (600ll * 1000000000ll)
/* A host whose ClockSync bound the owner does not give. */
#define TG_RECLOCK_BOUND_UNKNOWN_NS 1000000ull
/* Where no line keeps every request inside both its bounds, the line
 * keeps the server's begins after their clients' by this much (ns). */
#define TG_RECLOCK_BEGIN_SLACK_NS 1000.0
/* A moved host's own machine (its CPUs, scheduling) is placed by the
 * last RemoteClockSync trace processor read before its data: where the
 * correction at a packet's time differs from the last sync's by more
 * than this (ns), a sync carrying the new one is written before it. */
#define TG_RECLOCK_SYNC_STEP_NS 2000.0
/* Two paths between hosts disagree past this (beside their margins). */
#define TG_RECLOCK_DISAGREE_NS 10000.0

typedef struct tg_reclock_io {
  /* Up to |cap| bytes of the file into |buf|: how many, 0 at its end, or
   * a negative error. */
  ssize_t (*read)(void *ctx, uint8_t *buf, size_t cap);
  /* Back to the file's first byte, for the second read. */
  int (*rewind)(void *ctx);
  /* |n| bytes of the new file (rewrite only): 0 or a negative error. */
  int (*write)(void *ctx, const uint8_t *p, size_t n);
  /* Optional: |bytes| of the file read so far in |pass| (1: scan, 2:
   * rewrite), every few megabytes. */
  void (*progress)(void *ctx, int pass, uint64_t bytes);
  /* Optional (rewrite only): bytes [in, in + in_n) of the file were
   * written as [out, out + out_n) of the new one. Called once per
   * top-level packet, and once per run of bytes that does not frame as
   * one, in file order: an owner that indexes the file by byte ranges
   * (the collector's host index) follows its packets to their new
   * places. */
  void (*span)(void *ctx, uint64_t in, uint64_t in_n, uint64_t out,
               uint64_t out_n);
  void *ctx;
} tg_reclock_io_t;

/* A merged file in memory as the pass's reader, and a growable buffer as
 * its writer (reclock_mem.c), for owners that hold the file in memory
 * (tests, fuzzing, benchmarks): |in| (|n| bytes) is borrowed while the
 * io is used; |step| > 0 caps each read (so that frames split anywhere).
 * The rewrite's output is |out|; tg_reclock_mem_free frees it. */
typedef struct tg_reclock_mem {
  const uint8_t *in;
  size_t n, at, step;
  tg_buf_t out;
} tg_reclock_mem_t;
tg_reclock_io_t tg_reclock_mem_io(tg_reclock_mem_t *m, const uint8_t *in,
                                  size_t n, size_t step);
void tg_reclock_mem_free(tg_reclock_mem_t *m);

/* For owners whose reader is a file descriptor |fd| (the CLI's merged
 * file, the collector's snapshot): read() past EINTR, as io->read (a
 * negative errno on failure), and a seek back to its first byte, as
 * io->rewind. */
ssize_t tg_reclock_fd_read(int fd, uint8_t *buf, size_t cap);
int tg_reclock_fd_rewind(int fd);

/* One host (machine k + 1, sequence ids (k + 1) << 20). */
typedef struct tg_reclock_host {
  /* In: the host's ClockSync bound (ns, half the best round trip); 0:
   * unknown, TG_RECLOCK_BOUND_UNKNOWN_NS. */
  uint64_t bound_ns;
  /* Out. Samples (requests seen on both ends) on the host's edges used
   * by the fits, and not used (contradicting themselves or the prior). */
  uint64_t samples_used, samples_rejected;
  bool anchor; /* kept where ClockSync put it; others moved against it */
  bool moved;
  /* The correction at the middle of the samples' span (us), its drift
   * (ppm: its mean slope over the requests' span), and the smallest margin of
   * the fits on the host's path to its anchor (us; negative: some
   * requests could not all be kept in order). */
  double offset_us, drift_ppm, margin_us;
  uint64_t packets_moved; /* app packets re-timed */
  uint64_t syncs_moved;   /* RemoteClockSync packets rewritten */
  /* RemoteClockSync packets added before its own machine's packets, so
   * that they follow its drift (TG_RECLOCK_SYNC_STEP_NS). */
  uint64_t syncs_added;
} tg_reclock_host_t;

typedef struct tg_reclock_stats {
  uint64_t packets;        /* top-level packets read (pass 1) */
  uint64_t unparsed;       /* packets that do not parse: passed unchanged */
  uint64_t overflow_seqs;  /* packets on the shared overflow range: unplaced */
  uint64_t seqs_untracked; /* host packets on a sequence past the bound */
  uint64_t time_unknown;   /* host packets whose time could not be followed */
  uint64_t tracks_untracked, too_deep, ends_unmatched;
  uint64_t halves_client, halves_server;
  uint64_t flows_unfollowed, flows_duplicate;
  uint64_t pairs;          /* flows seen on two hosts: samples */
  uint64_t pairs_outside;  /* of them, timed outside the recording */
  uint64_t windows, windows_borrowed;
  /* Lines lowered under a request's upper bound (its server's receive
   * would have come before its client's send): one per request and line. */
  uint64_t windows_lowered;
  uint64_t edges, paths_disagree;
  size_t hosts_moved;
  uint64_t bytes_in, bytes_out;
  bool rewritten; /* pass 2 wrote the new file */
} tg_reclock_stats_t;

typedef struct tg_reclock tg_reclock_t;

/* A pass for |n_hosts| hosts (1..1024); NULL without memory. */
tg_reclock_t *tg_reclock_new(size_t n_hosts);
void tg_reclock_free(tg_reclock_t *rc);

/* The first read. 0, or the reader's negative error, or -ENOMEM. */
int tg_reclock_scan(tg_reclock_t *rc, const tg_reclock_io_t *io,
                    tg_reclock_stats_t *st);
/* Fits and corrections from what the scan found; fills |hosts| (the
 * owner's n_hosts entries, bound_ns read from them). The count of hosts
 * moved, or -ENOMEM. */
int tg_reclock_place(tg_reclock_t *rc, tg_reclock_host_t *hosts,
                     tg_reclock_stats_t *st);
/* A constant correction of host |k| instead of a fit (tests, fuzzing). */
void tg_reclock_set_constant(tg_reclock_t *rc, size_t k, int64_t ns);
/* The second read, writing the new file through io->write (rewinds
 * first). 0, or the reader's or writer's negative error, or -ENOMEM. */
int tg_reclock_rewrite(tg_reclock_t *rc, const tg_reclock_io_t *io,
                       tg_reclock_host_t *hosts, tg_reclock_stats_t *st);

/* A host's ClockSync bound for tg_reclock_host_t.bound_ns: half the
 * round trip of its estimate or of its first one, whichever is larger
 * (the estimate placed the host's data, the first one its earliest); 0
 * (unknown) before any estimate. */
uint64_t tg_reclock_bound(const tg_clock_sync_t *c);

/* Scan, place and, when a host moved, rewrite. 0 (st->rewritten says
 * whether a new file was written), or a negative error. */
int tg_reclock_run(const tg_reclock_io_t *io, tg_reclock_host_t *hosts,
                   size_t n_hosts, tg_reclock_stats_t *st);

#endif /* TRACEGATE_CONSUMER_FLEET_RECLOCK_H */
