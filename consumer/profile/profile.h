/* SPDX-License-Identifier: Apache-2.0 */
/* CPU profiles of a trace's hosts: the linux.perf samples of each machine,
 * aggregated by callstack (docs/profiles.md).
 *
 * A trace (one host's, a `record -H` merge or a collector snapshot) is fed
 * as bytes, in pieces of any size; each sequence's interned data
 * (function_names, build_ids, mapping_paths, mappings, frames, callstacks)
 * and its perf_sample_defaults are followed as trace processor follows
 * them, and forgotten at SEQ_INCREMENTAL_STATE_CLEARED. Each machine
 * (TracePacket.machine_id; 0 for a trace of one host) gets its own tables
 * of strings, mappings, frames and stacks, deduplicated across sequences
 * and clears, and a count and a CPU time per stack. ModuleSymbols
 * (`tracegate symbolize`, a snapshot's symbols) give frames their
 * functions, files and lines when the profile is finished.
 *
 * Every byte is a host's (untrusted): each length, iid and count is
 * checked; every table is bounded (tg_prof_limits_t); past a bound the
 * sample still counts, under a stack of its own ("[over bounds]"), and the
 * host's counts say so. Memory is the tables plus one packet (at most
 * TG_PACKETS_INFLATE_MAX) plus one inflated batch of packets.
 *
 * Owns: everything it returns; pointers into a finished profile live until
 * tg_prof_free(). Must never: abort, or fold a sample it cannot name into
 * another stack. Not thread-safe (one profile per thread).
 */
#ifndef TRACEGATE_CONSUMER_PROFILE_PROFILE_H
#define TRACEGATE_CONSUMER_PROFILE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* The bounds; 0 in a field takes its default (docs/profiles.md). */
typedef struct tg_prof_limits {
  size_t max_hosts;        /* machines with samples or names: 4096 */
  size_t max_seqs;         /* sequences followed at once: 65536 */
  size_t max_seq_entries;  /* interned entries of one sequence: 1 << 20 */
  size_t max_strings;      /* per host: 1 << 20 */
  size_t max_string_bytes; /* per host: 64 MiB */
  size_t max_mappings;     /* per host: 1 << 16 */
  size_t max_frames;       /* per host: 1 << 20 */
  size_t max_stacks;       /* per host: 1 << 20 */
  size_t max_depth;        /* frames of one stack: 1024 (deeper: cut at the root) */
  size_t max_symbols;      /* symbolized addresses per host: 1 << 20 */
} tg_prof_limits_t;

/* What could not be taken as it was, per host. Every sample counted in
 * |samples| is in exactly one stack. */
typedef struct tg_prof_counts {
  uint64_t samples;             /* in the stacks, pseudo-stacks included */
  uint64_t no_callstack;        /* "[no callstack]": none, or the empty one */
  uint64_t callstack_unknown;   /* "[callstack not interned]": iid unknown */
  uint64_t over_bounds;         /* "[over bounds]": a table was full */
  uint64_t unnamed_frames;      /* samples with at least one unnamed frame */
  uint64_t truncated;           /* samples whose stack was cut at max_depth */
  uint64_t skipped[5];          /* by PerfSample.sample_skipped_reason (1-4;
                                 * 0: another), each in a "[skipped: ...]"
                                 * stack, as trace processor keeps a row */
  uint64_t records_lost;        /* kernel_records_lost, summed */
  uint64_t bad_refs;            /* interned entries naming unknown iids */
  uint64_t refused_entries;     /* interned entries past a bound */
} tg_prof_counts_t;

typedef struct tg_prof_mapping {
  uint64_t start, limit, offset; /* offset: start_offset (file offset) */
  uint32_t path;                 /* string index; 0: none */
  uint32_t build_id;             /* string index (lowercase hex); 0: none */
} tg_prof_mapping_t;

/* One symbolized line: ModuleSymbols' order (innermost first). */
typedef struct tg_prof_line {
  uint32_t function, file; /* string indices; 0: none */
  uint32_t line;
} tg_prof_line_t;

typedef struct tg_prof_frame {
  uint32_t mapping;  /* mapping index + 1; 0: none */
  uint32_t function; /* string index of the interned name; 0: unnamed */
  uint64_t rel_pc;
  uint32_t first_line, n_lines; /* into the host's lines (symbols) */
} tg_prof_frame_t;

/* A pseudo-stack's kind; TG_PROF_STACK_FRAMES is a real one. */
typedef enum tg_prof_stack_kind {
  TG_PROF_STACK_FRAMES = 0,
  TG_PROF_STACK_NO_CALLSTACK,
  TG_PROF_STACK_NOT_INTERNED,
  TG_PROF_STACK_OVER_BOUNDS,
  TG_PROF_STACK_SKIPPED_READ,
  TG_PROF_STACK_SKIPPED_UNWIND,
  TG_PROF_STACK_SKIPPED_ENQUEUE,
  TG_PROF_STACK_SKIPPED_SCOPE,
  TG_PROF_STACK_SKIPPED_OTHER,
  TG_PROF_STACK_KINDS
} tg_prof_stack_kind_t;

typedef struct tg_prof_stack {
  uint32_t first, n;  /* frame indices in the host's stack_frames, root first */
  uint32_t kind;      /* tg_prof_stack_kind_t */
  bool truncated;     /* cut at max_depth (the root side dropped) */
  uint64_t samples;
  uint64_t cpu_ns;    /* samples x the period in force for each */
} tg_prof_stack_t;

typedef struct tg_prof_host {
  uint32_t machine_id;
  const char *name;        /* the host's name in a merged trace; "" if none */
  uint64_t ts_min, ts_max; /* of its samples (trace clock); 0, 0: none */
  /* The sampling rate of its perf_sample_defaults (boosted hosts sample
   * faster): the smallest and largest CPU nanoseconds one sample stands
   * for; 0 when no timebase gave a CPU-clock rate. */
  uint64_t ns_per_sample_min, ns_per_sample_max;
  uint64_t frequency_hz_min, frequency_hz_max; /* 0: sampled by period */
  uint64_t cpu_ns;         /* sum of the stacks' cpu_ns */
  tg_prof_counts_t counts;
  const char *const *strings; /* [0] is "" */
  const uint32_t *string_lens;
  size_t n_strings;
  const tg_prof_mapping_t *mappings;
  size_t n_mappings;
  const tg_prof_frame_t *frames;
  size_t n_frames;
  const tg_prof_line_t *lines;
  size_t n_lines;
  const uint32_t *stack_frames;
  const tg_prof_stack_t *stacks; /* in first-seen order */
  size_t n_stacks;
} tg_prof_host_t;

typedef struct tg_prof tg_prof_t;

/* A profile to feed; |lim| NULL or partly 0 takes the defaults. NULL
 * without memory. */
tg_prof_t *tg_prof_new(const tg_prof_limits_t *lim);
void tg_prof_free(tg_prof_t *p);

/* Feeds |n| bytes of the Trace (framing Trace.packet), continuing the
 * previous call's. Returns 0, TG_EPARSE (broken framing, a packet past
 * TG_PACKETS_INFLATE_MAX), TG_EBAD_COMPRESSED, -ENOMEM. A packet that does
 * not parse is counted (tg_prof_bad_packets) and skipped, as trace
 * processor skips it. */
int tg_prof_feed(tg_prof_t *p, const uint8_t *b, size_t n);
/* The end of the bytes: TG_EPARSE when a packet was cut short. Then the
 * symbols are applied and the hosts sorted by machine id; feeding is over. */
int tg_prof_end(tg_prof_t *p);
/* One TracePacket's bytes (as tg_prof_feed's framing hands them). */
int tg_prof_packet(tg_prof_t *p, const uint8_t *pkt, size_t len);

/* Reads |fd| to its end into |p| and ends it. |progress| (may be NULL) is
 * called with the bytes read so far about every 64 MiB. Returns as
 * tg_prof_feed, or -errno of read(). */
int tg_prof_read_fd(tg_prof_t *p, int fd,
                    void (*progress)(void *ctx, uint64_t bytes), void *ctx);

/* The ended profile's hosts, by machine id: those with samples or a name. */
size_t tg_prof_n_hosts(const tg_prof_t *p);
const tg_prof_host_t *tg_prof_host(const tg_prof_t *p, size_t i);
/* The host called |spec|: its name, else "machine N" / "N" for its machine
 * id. NULL: none. */
const tg_prof_host_t *tg_prof_find_host(const tg_prof_t *p, const char *spec);
uint64_t tg_prof_bad_packets(const tg_prof_t *p);
uint64_t tg_prof_packets(const tg_prof_t *p);

/* A stack frame's function name as the outputs give it: the interned name,
 * else the first symbolized line's function, else "[unknown]" (the mapping
 * is the frame's own). Pseudo-stacks' names: tg_prof_stack_kind_name(). */
const char *tg_prof_frame_name(const tg_prof_host_t *h, const tg_prof_frame_t *f);
const char *tg_prof_stack_kind_name(uint32_t kind);

/* Per-function shares of one host (for diffs and catalogs): a function is
 * a name (pseudo-stacks' names included); |self| counts samples whose leaf
 * is it, |total| those whose stack holds it at least once. */
typedef struct tg_prof_func_share {
  const char *name; /* the host's string, or a static pseudo name */
  const char *file; /* "[unknown]": its mapping's path (one row each); else NULL */
  uint64_t self, total;
  uint64_t self_ns, total_ns;
  /* Not a name the host gave: "[unknown]" (of a mapping, or of none) or
   * a pseudo-stack's ("[no callstack]", "[skipped: ...]", ...), even
   * where a host's own function bears the same text. */
  bool pseudo;
} tg_prof_func_share_t;
/* Fills *out (malloc'd, the caller frees) with one row per function,
 * by |total| descending then name. 0 or -ENOMEM. */
int tg_prof_function_shares(const tg_prof_host_t *h, tg_prof_func_share_t **out,
                            size_t *n);

/* --- pprof (profile.proto, gzip) ------------------------------------------ */

typedef struct tg_prof_pprof_opts {
  /* The hosts to write (indices of tg_prof_host()); several are merged,
   * each sample labelled "host" with its host's name. */
  const size_t *hosts;
  size_t n_hosts;
} tg_prof_pprof_opts_t;

/* Appends the gzipped profile.proto of |o|'s hosts to |out|. Deterministic:
 * ids in the order the profile holds them, time_nanos the first sample's
 * timestamp. 0, -ENOMEM, TG_EPROTO_ENCODE. */
int tg_prof_pprof(const tg_prof_t *p, const tg_prof_pprof_opts_t *o,
                  tg_buf_t *out);

#endif /* TRACEGATE_CONSUMER_PROFILE_PROFILE_H */
