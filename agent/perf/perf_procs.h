/* The processes a linux.perf session sees: for each, its executable
 * mappings (/proc/PID/maps), its argv[0] (for the scope) and, for each
 * file mapped, the ELF facts that turn an address into Perfetto's frame
 * (mapping, rel_pc, function name). Files are read once per session
 * (through /proc/PID/root, so that a process in another mount namespace
 * gives its own file) and shared by every process that maps them.
 *
 * A process's mappings are read on its first sample and again after the
 * kernel reports a new executable mapping or an exec for it (MMAP2,
 * COMM with exec), or when an address falls outside all of them (at most
 * once per read round). Bounded: TG_PERF_PROCS_MAX processes and
 * TG_PERF_FILES_MAX files, past which the tables are emptied and filled
 * again as samples come.
 *
 * One session's thread owns it; not thread-safe.
 */
#ifndef TRACEGATE_PERF_PERF_PROCS_H
#define TRACEGATE_PERF_PERF_PROCS_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/perf/perf_emit.h"
#include "agent/perf/perf_maps.h"

#define TG_PERF_PROCS_MAX 4096
#define TG_PERF_FILES_MAX 2048
/* Files larger than this are not read for symbols or build ids. */
#define TG_PERF_FILE_MAX_BYTES (1ull << 31)

typedef struct tg_perf_procs tg_perf_procs_t;

/* |root_fmt|: where a process's files are opened, a printf format taking
 * the pid (NULL: "/proc/%d/root"); |maps_fmt| likewise for its maps
 * (NULL: "/proc/%d/maps"). Tests point them at fixtures. */
tg_perf_procs_t *tg_perf_procs_new(const char *root_fmt, const char *maps_fmt);
void tg_perf_procs_free(tg_perf_procs_t *p);

/* The next read round starts: a process may re-read its maps once more. */
void tg_perf_procs_new_round(tg_perf_procs_t *p);
/* The kernel says |pid|'s mappings changed. */
void tg_perf_procs_invalidate(tg_perf_procs_t *p, uint32_t pid);

/* argv[0] of |pid| ("" for a kernel thread or when unreadable); valid
 * until the next call on |p|. */
const char *tg_perf_procs_argv0(tg_perf_procs_t *p, uint32_t pid);

/* Reads |pid|'s mappings unless they are known and current. Returns 0,
 * or the read's -errno (-ENOENT: the process is gone; -EACCES: not
 * allowed, no CAP_SYS_PTRACE): its user frames cannot be resolved. */
int tg_perf_procs_load(tg_perf_procs_t *p, uint32_t pid);

/* Fills |f| for user address |pc| of |pid|: its mapping (|*map| is
 * written and |f->mapping| points at it), rel_pc and function name (valid
 * until the next call on |p|). |return_addr|: |pc| is a return address
 * (any frame but the leaf), looked up as pc - 1. */
void tg_perf_procs_frame(tg_perf_procs_t *p, uint32_t pid, uint64_t pc,
                         bool return_addr, tg_perf_emit_mapping_t *map,
                         tg_perf_emit_frame_t *f);

typedef struct tg_perf_procs_stats {
  uint64_t maps_reads, maps_failed, files_read, files_failed;
  uint64_t unknown_pcs, named_pcs, resolved_pcs;
} tg_perf_procs_stats_t;
const tg_perf_procs_stats_t *tg_perf_procs_stats(const tg_perf_procs_t *p);

#endif /* TRACEGATE_PERF_PERF_PROCS_H */
