/* /proc/PID/maps: a bounded parser of its lines, and the executable
 * mappings of one process kept for symbolizing its samples.
 *
 * A line is "start-end perms offset major:minor inode [path]" with hex
 * numbers (see proc(5)). Lines are untrusted text (a path may hold any
 * byte but a newline): each field is checked, a malformed line is
 * skipped and counted, never guessed.
 */
#ifndef TRACEGATE_PERF_PERF_MAPS_H
#define TRACEGATE_PERF_PERF_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest path kept; a longer one is cut there (the mapping stays). */
#define TG_PERF_MAP_PATH_MAX 4096
/* Mappings kept per process: a process with more keeps the first ones. */
#define TG_PERF_MAPS_MAX 65536

typedef struct tg_perf_map {
  uint64_t start, end, pgoff, inode;
  uint32_t dev_major, dev_minor;
  bool r, w, x, shared;
  char *path; /* owned; "" for an anonymous mapping */
} tg_perf_map_t;

/* Parses one line of |len| bytes (no newline). Returns 0 with |out| set
 * (|out->path| allocated), -EBADMSG for a malformed line, -ENOMEM. */
int tg_perf_map_parse_line(const char *line, size_t len, tg_perf_map_t *out);

typedef struct tg_perf_maps {
  tg_perf_map_t *v; /* sorted by start */
  size_t n, cap;
  uint64_t bad_lines;
  bool truncated; /* more than TG_PERF_MAPS_MAX mappings */
} tg_perf_maps_t;

/* Parses a whole maps file of |len| bytes into |out| (emptied first),
 * keeping only the executable mappings when |exec_only|, sorted by start.
 * Empty mappings and those overlapping an earlier one are counted in
 * |bad_lines| and dropped. Returns the number kept or -ENOMEM. */
int tg_perf_maps_parse(const char *text, size_t len, bool exec_only,
                       tg_perf_maps_t *out);
/* Reads /proc/|pid|/maps (or |path| when not NULL). Returns the number
 * kept or -errno. */
int tg_perf_maps_read(int pid, const char *path, bool exec_only,
                      tg_perf_maps_t *out);
/* The mapping holding |addr|, or NULL. */
const tg_perf_map_t *tg_perf_maps_find(const tg_perf_maps_t *m, uint64_t addr);
void tg_perf_maps_free(tg_perf_maps_t *m);

/* The rate limit of one process's maps rereads (tracegate-perf's reader
 * and its unwinder each keep one per process): a burst of
 * TG_PERF_MAPS_REREAD_BURST, then one earned back per
 * TG_PERF_MAPS_REREAD_MS, so that a process looping on executable mmaps
 * over a huge maps file cannot make every sample parse it. */
#define TG_PERF_MAPS_REREAD_BURST 4
#define TG_PERF_MAPS_REREAD_MS 100

typedef struct tg_perf_reread_limit {
  uint8_t left;       /* rereads allowed now */
  uint64_t refill_ms; /* when the last one was earned back */
} tg_perf_reread_limit_t;

/* A full burst from |now_ms| on (a first read, an exec). */
void tg_perf_reread_fill(tg_perf_reread_limit_t *l, uint64_t now_ms);
/* Whether a reread may happen at |now_ms| (a monotonic clock); takes it. */
bool tg_perf_reread_take(tg_perf_reread_limit_t *l, uint64_t now_ms);

#endif /* TRACEGATE_PERF_PERF_MAPS_H */
