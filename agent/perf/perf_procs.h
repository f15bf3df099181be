/* The processes a linux.perf session sees: for each, its executable
 * mappings (/proc/PID/maps), its argv[0] (for the scope) and, for each
 * file mapped, the ELF facts that turn an address into Perfetto's frame
 * (mapping, rel_pc, function name). Files are read once per session
 * and shared by every process that maps them; each is opened inside the
 * process's own root (/proc/PID/root) by perf_open.h's rules: never
 * blocking, regular files only, the maps line's own device and inode,
 * never by the path in the profiler's namespace.
 *
 * A process's mappings are read on its first sample and again after the
 * kernel reports a new executable mapping or an exec for it (MMAP2,
 * COMM with exec), or when an address falls outside all of them (at most
 * once per read round). Rereads are rate-limited per process: a burst
 * of TG_PERF_MAPS_REREAD_BURST, then one per TG_PERF_MAPS_REREAD_MS (an
 * exec refills the burst), so that a process looping on executable
 * mmaps over a huge maps file cannot make the reader parse it at every
 * sample; until then its samples use the maps already read.
 * Bounded: TG_PERF_PROCS_MAX processes and TG_PERF_FILES_MAX files,
 * past which the tables are emptied and filled again as samples come,
 * and TG_PERF_SYMS_BUDGET_BYTES of symbol tables in all, past which the
 * files read keep their build id and loads but no symbols.
 *
 * One session's thread owns it; not thread-safe.
 */
#ifndef TRACEGATE_PERF_PERF_PROCS_H
#define TRACEGATE_PERF_PERF_PROCS_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/perf/perf_emit.h"
#include "agent/perf/perf_maps.h"
#include "agent/perf/perf_open.h"

#define TG_PERF_PROCS_MAX 4096
#define TG_PERF_FILES_MAX 2048
/* Files larger than this are not read for symbols or build ids. */
#define TG_PERF_FILE_MAX_BYTES (1ull << 31)
/* Symbol tables kept by one session, all files together (each file's
 * own are bounded by perf_elf.h's TG_ELF_SYMS_MAX and
 * TG_ELF_NAMES_MAX_BYTES, about 56 MiB). */
#define TG_PERF_SYMS_BUDGET_BYTES (256ull << 20)

typedef struct tg_perf_procs tg_perf_procs_t;

/* |root_fmt|: where a process's files are opened, a printf format taking
 * the pid (NULL: "/proc/%d/root"); |maps_fmt| likewise for its maps
 * (NULL: "/proc/%d/maps"). Tests point them at fixtures. */
tg_perf_procs_t *tg_perf_procs_new(const char *root_fmt, const char *maps_fmt);
void tg_perf_procs_free(tg_perf_procs_t *p);

/* The next read round starts at |now_ms| (a monotonic clock, the rate
 * limit's): a process may re-read its maps once more. */
void tg_perf_procs_new_round(tg_perf_procs_t *p, uint64_t now_ms);
/* The kernel says |pid|'s mappings changed; |exec|: by an exec, which
 * refills its rereads. */
void tg_perf_procs_invalidate(tg_perf_procs_t *p, uint32_t pid, bool exec);

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
  /* files_failed by perf_open.h's reason ([TG_PERF_OPEN_OK]: the rest:
   * empty, too large, unmappable) */
  uint64_t files_refused[TG_PERF_OPEN_N];
  uint64_t files_over_budget; /* read, symbols not kept: the budget */
  uint64_t syms_dropped;      /* symbols past a file's caps */
  uint64_t maps_rereads_deferred; /* lookups that used older maps */
  uint64_t unknown_pcs, named_pcs, resolved_pcs;
} tg_perf_procs_stats_t;
const tg_perf_procs_stats_t *tg_perf_procs_stats(const tg_perf_procs_t *p);

#endif /* TRACEGATE_PERF_PERF_PROCS_H */
