/* SPDX-License-Identifier: Apache-2.0 */
/* Symbolization of a Perfetto trace's frames from debug files (`tracegate
 * symbolize`, docs/perf.md "Symbolization").
 *
 * The input is untrusted: every packet is walked with tg_pb_reader, and
 * the tables it builds (per sequence of each machine: interned build ids,
 * mapping paths, mappings) are bounded below. What it collects is, per
 * module (machine id, mapping path as trace_processor names it, raw build
 * id), the set of rel_pc its frames use. Each module's debug file is then
 * found by build id and its addresses resolved with libdw to function,
 * source file and line (inlined functions included, innermost first), and
 * written as Perfetto's ModuleSymbols packets, appended to a copy of the
 * input. An address in one of the module's PLT entries is named
 * "NAME@plt" (common/elf_plt.h), with no file or line.
 *
 * Every lookup the walk makes (a sequence, an interned id, a module) is a
 * seeded hash table's (symbolize_map.h), so a trace costs time in
 * proportion to its size whatever keys it chooses; the walk asks the
 * deadline at every packet.
 *
 * A path the trace names is opened only through tg_sym_open: never one
 * with a ".." component or under /proc, /sys or /dev, and only a regular
 * file, opened without blocking (a FIFO would hold the worker for good).
 * debuginfod is asked only when the caller says so, within caps on
 * lookups, bytes and time per run (tg_sym_opts_t).
 *
 * Owns: the collector's tables and the modules (tg_sym_free). Must never:
 * use a file whose build id differs from the mapping's, nor load the trace
 * whole. Not thread-safe. */
#ifndef TRACEGATE_CONSUMER_SYMBOLIZE_H
#define TRACEGATE_CONSUMER_SYMBOLIZE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/clock.h"

/* Bounds of what one trace may make the collector keep. */
#define TG_SYM_MAX_BUILD_ID 64
#define TG_SYM_MAX_PATH 4096
#define TG_SYM_MAX_MODULES 65536u
#define TG_SYM_MAX_PCS 4000000u /* rel_pc kept over all modules */
#define TG_SYM_MAX_SEQ_ENTRIES 1000000u /* interned entries per sequence */
#define TG_SYM_MAX_SEQS 65536u
#define TG_SYM_MAX_DEBUG_DIRS 16
/* Addresses per ModuleSymbols packet: a module with more gets several. */
#define TG_SYM_ADDRS_PER_PACKET 2048u
/* debuginfod per run (one trace, one snapshot), when the caller's
 * tg_sym_opts_t leaves a cap 0. */
#define TG_SYM_DEBUGINFOD_MAX_LOOKUPS 256u
#define TG_SYM_DEBUGINFOD_MAX_BYTES (1024ull << 20)
#define TG_SYM_DEBUGINFOD_MAX_S 120u

/* Why a file was not opened (tg_sym_open, and split units). */
typedef enum tg_sym_refusal {
  TG_SYM_REFUSED_NONE = 0,
  TG_SYM_REFUSED_DOTDOT,      /* "dotdot": a ".." component, or relative */
  TG_SYM_REFUSED_KERNEL_FS,   /* "kernel_fs": /proc, /sys, /dev, or a file
                               * on procfs, sysfs, debugfs, tracefs ... */
  TG_SYM_REFUSED_NOT_REGULAR, /* "not_regular": FIFO, device, socket, dir */
  TG_SYM_REFUSED_SPLIT_DWARF, /* "split_dwarf": a skeleton unit's .dwo,
                               * never opened (symbolize_linked.h); one
                               * per skeleton unit */
  TG_SYM_REFUSED_N
} tg_sym_refusal_t;

/* The stable name of |r| (JSON keys, metric labels): "dotdot", ... */
const char *tg_sym_refusal_name(tg_sym_refusal_t r);

/* What one run did that the caller reports (the collector's symbols
 * state and metrics, the CLI's summary). */
typedef struct tg_sym_stats {
  uint64_t refused[TG_SYM_REFUSED_N]; /* files not opened, by reason */
  uint64_t debuginfod_lookups;  /* asked */
  uint64_t debuginfod_found;    /* of them, answered with a matching file */
  uint64_t debuginfod_cut;      /* of them, cut short: a cap reached */
  uint64_t debuginfod_refused;  /* not asked: a cap reached */
  uint64_t debuginfod_bytes;    /* downloaded (a cache hit downloads none) */
  uint64_t debuginfod_ns;       /* spent in lookups */
} tg_sym_stats_t;

typedef struct tg_sym_line {
  char *function; /* NULL when unknown */
  char *file;     /* NULL when unknown */
  uint32_t line;  /* 0 when unknown */
} tg_sym_line_t;

typedef struct tg_sym_addr {
  uint64_t rel_pc;
  tg_sym_line_t *lines; /* innermost inlined function first */
  size_t n_lines;
} tg_sym_addr_t;

typedef enum tg_sym_source {
  TG_SYM_SRC_NONE = 0,  /* no file found: the module keeps its names */
  TG_SYM_SRC_BUILD_ID,  /* DIR/.build-id/xx/yyyy.debug */
  TG_SYM_SRC_MODULE,    /* the mapping's own file (same build id) */
  TG_SYM_SRC_DEBUGINFOD,
} tg_sym_source_t;

typedef struct tg_sym_module {
  uint32_t machine_id; /* 0: the trace's host (or a single-host trace) */
  char *path;          /* "/" + each path component, as trace_processor */
  uint8_t build_id[TG_SYM_MAX_BUILD_ID];
  size_t build_id_len;
  uint64_t *pcs; /* sorted and unique after tg_sym_finish_collect */
  size_t n_pcs, cap_pcs;
  tg_sym_addr_t *addrs; /* resolved, with at least one line each */
  size_t n_addrs;
  size_t n_plt; /* of them, PLT entries: "NAME@plt", no source line */
  tg_sym_source_t source;
  char *debug_file; /* where its names come from */
  tg_sym_refusal_t refused; /* the last file refused for it, or NONE */
} tg_sym_module_t;

typedef struct tg_sym_seq tg_sym_seq_t;
typedef struct tg_sym_opts tg_sym_opts_t;
struct tg__sym_tables; /* symbolize.c: the seeded hash tables */

typedef struct tg_sym {
  tg_sym_module_t *mods;
  size_t n_mods, cap_mods;
  tg_sym_seq_t *seqs;
  size_t n_seqs, cap_seqs;
  size_t n_pcs;           /* kept over all modules */
  uint64_t packets;       /* packets walked (inner ones included) */
  uint64_t module_symbols_in; /* ModuleSymbols already in the input */
  tg_buf_t inflate;       /* compressed_packets */
  struct tg__sym_tables *tables;
  /* Borrowed for the walk by tg_sym_collect_fd: its deadline and cancel
   * flag are asked at every packet. NULL: never stopped. */
  const tg_sym_opts_t *stop;
} tg_sym_t;

struct tg_sym_opts {
  const char *debug_dirs[TG_SYM_MAX_DEBUG_DIRS]; /* tried in order */
  size_t n_debug_dirs;
  bool module_files; /* try the mapping's own file */
  bool debuginfod;   /* ask debuginfod (libdebuginfod, DEBUGINFOD_URLS) */
  /* debuginfod caps for the run, counted in *stats (0: the
   * TG_SYM_DEBUGINFOD_* default). A lookup past the lookup cap is not
   * made (debuginfod_refused); one that would pass the byte or time cap
   * is cut short (debuginfod_cut). */
  uint32_t debuginfod_max_lookups;
  uint64_t debuginfod_max_bytes;
  uint64_t debuginfod_max_ns;
  /* 0: none. Else |clock|'s nanoseconds past which the walk and the
   * resolution stop with -ETIMEDOUT (asked at every packet, module and
   * address, and during a debuginfod download). */
  uint64_t deadline_ns;
  const tg_clock_t *clock; /* NULL: tg_clock_monotonic; borrowed */
  /* NULL, or a flag another thread sets to stop them (-ECANCELED). */
  const _Atomic bool *cancel;
  /* Where refusals and debuginfod's use are counted (borrowed, written);
   * NULL: tg_sym_resolve counts nothing and debuginfod is not asked. */
  tg_sym_stats_t *stats;
};

void tg_sym_init(tg_sym_t *s);
void tg_sym_free(tg_sym_t *s);
/* Frees what one module owns (tg_sym_free does it for its modules). */
void tg_sym_module_free(tg_sym_module_t *m);

/* Walks one TracePacket (its bytes without the Trace framing). Returns 0,
 * TG_EPARSE on a malformed packet, -E2BIG past a bound, -ENOMEM. */
int tg_sym_packet(tg_sym_t *s, const uint8_t *pkt, size_t len);

/* Sorts and dedups each module's addresses; call once after the last
 * packet. */
void tg_sym_finish_collect(tg_sym_t *s);

/* "DIR/.build-id/xx/yyyy.debug" for |id| (lower-case hex, the first byte
 * naming the directory) into |out|. Returns 0, or -EINVAL for an id
 * shorter than 2 bytes, -ENAMETOOLONG when |out| is too small. */
int tg_sym_build_id_path(const char *dir, const uint8_t *id, size_t len,
                         char *out, size_t out_size);

/* Opens |path| to read it: O_NONBLOCK (a FIFO cannot hold the caller),
 * O_NOCTTY, and only a regular file on a file system of files (not
 * procfs, sysfs, debugfs, ...), checked both before the open (stat,
 * statfs: a device is never opened) and on the descriptor after it (a
 * path swapped meanwhile). |named| says the trace chose the path: then it
 * must be absolute, with no ".." component, and not under /proc, /sys or
 * /dev once "." and repeated slashes are dropped. Returns the descriptor,
 * or -1 with *why set (NONE: the file is missing or unreadable, not
 * refused). */
int tg_sym_open(const char *path, bool named, tg_sym_refusal_t *why);

/* Finds |m|'s debug file (opts order: each debug dir by build id, the
 * module's own file, debuginfod) and resolves its addresses. Returns 0
 * (m->source says whether a file was found), -ENOMEM, -ETIMEDOUT /
 * -ECANCELED (|o|: the addresses resolved so far are kept). */
int tg_sym_resolve(tg_sym_module_t *m, const tg_sym_opts_t *o);

/* Appends to |out| the Trace-framed ModuleSymbols packets of |m|
 * (TG_SYM_ADDRS_PER_PACKET addresses each; none when it has no address
 * resolved), machine_id set when not 0. Returns 0 or -ENOMEM. */
int tg_sym_write_module(const tg_sym_module_t *m, tg_buf_t *out);

typedef struct tg_sym_result {
  uint64_t packets;
  /* frames_named: with a function name; frames_with_line: with a source
   * line too; frames_plt: named as a PLT entry ("NAME@plt"), never with a
   * line (the PLT entry has none). */
  size_t modules, modules_found, frames, frames_named, frames_with_line,
      frames_plt;
  /* The run's refusals and debuginfod use: the caller's *o->stats when it
   * gave one, else counted here. */
  tg_sym_stats_t stats;
} tg_sym_result_t;

/* 0, or -ETIMEDOUT / -ECANCELED when |o| says to stop now. */
int tg_sym_should_stop(const tg_sym_opts_t *o);

/* Walks the trace read from |fd| (from its current position to its end,
 * in 64 KiB pieces, |o|'s deadline asked at each packet), copying each piece to |copy_fd| unless it is -1, and
 * files every frame's rel_pc under its module (tg_sym_finish_collect
 * included). Returns 0, TG_EPARSE or -E2BIG (a damaged or too large
 * trace), -ETIMEDOUT / -ECANCELED (|o|), -ENOMEM, a negative errno of
 * the files; |why| says what failed. */
int tg_sym_collect_fd(tg_sym_t *s, int fd, int copy_fd, const tg_sym_opts_t *o,
                      char *why, size_t why_size);

/* Resolves every module of |s| that has addresses (tg_sym_resolve) and
 * counts what was found into |res|. Returns 0, -ENOMEM, -ETIMEDOUT /
 * -ECANCELED (|o|). */
int tg_sym_resolve_all(tg_sym_t *s, const tg_sym_opts_t *o,
                       tg_sym_result_t *res);

/* The whole of `tracegate symbolize`: reads |in| in chunks, writes it to
 * |out| (a new file, written under a temporary name and renamed) followed
 * by the ModuleSymbols packets. |s| holds the modules afterwards (for the
 * caller's report). Returns 0, a negative errno of the files, TG_EPARSE
 * for a damaged trace; |why| says what failed. */
int tg_sym_file(tg_sym_t *s, const char *in, const char *out,
                const tg_sym_opts_t *o, tg_sym_result_t *res, char *why,
                size_t why_size);

#endif /* TRACEGATE_CONSUMER_SYMBOLIZE_H */
