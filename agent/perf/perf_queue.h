/* The queue between tracegate-perf's reader thread and its unwinder
 * thread (UNWIND_DWARF): a FIFO of variable-sized entries in one buffer
 * of a fixed number of bytes, allocated once at the session's start
 * (PerfEventConfig.max_enqueued_footprint_kb), so that a sample costs no
 * allocation and the copies of user stacks waiting to be unwound never
 * take more than that.
 *
 *   reader                        unwinder                     reader
 *   reserve -> fill -> commit  ->  take -> unwind -> done   ->  next_done
 *                                                               -> release
 *
 *   buf: [ released | done, to write | queued, to unwind | free ]
 *          ^head       ^head            ^unw               ^tail
 *
 * An entry holds one sample's metadata, its kernel callchain, its user
 * registers and the copy of its user stack; once unwound, the user frames
 * overwrite the start of the stack copy (a walk yields at most one frame
 * per 8 bytes of stack, and one for the leaf: the area has room for
 * both), so that the reader writes the sample from the same bytes. An
 * entry may also ask the unwinder to forget a process's cache (its
 * mappings changed), in the same order as the samples around it. Only
 * processes with a sample committed since their last forget can have a
 * cache: the queue remembers those (up to TG_PERF_QUEUE_PIDS; past that
 * it stops filtering for the session) and drops the other forgets, which
 * on a busy host (every process's mmaps) would otherwise each cost the
 * unwinder a wake-up.
 *
 * Every byte between |head| and |tail| counts against the cap: copies
 * waiting to be unwound, results waiting to be written, and the end of the
 * buffer skipped when an entry does not fit there. A reservation that does
 * not fit fails at once (the reader skips the sample, as traced_perf does
 * with PROFILER_SKIP_UNWIND_ENQUEUE); nothing ever waits for room. When
 * the queue is empty the cursors go back to the start, so that the pages
 * touched are those of the largest backlog, not the whole cap.
 *
 * Entries leave in the order they were committed (the reader's order,
 * which keeps each CPU's order): the unwinder takes them in that order
 * and the reader writes them in that order.
 *
 * Threads: one reader (reserve, commit, forget, next_done, release,
 * wait_idle, request_drop, close) and one unwinder (take, done). The
 * bytes of an entry belong to one side at a time: the reader's from
 * reserve to commit and from next_done to release, the unwinder's from
 * take to done; the mutex orders the hand-overs.
 */
#ifndef TRACEGATE_PERF_PERF_QUEUE_H
#define TRACEGATE_PERF_PERF_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* PerfEventConfig.max_enqueued_footprint_kb unset: 8 MiB (about 500
 * samples of a 16 KiB stack copy, several reads' worth at 100 Hz on a
 * few CPUs). Larger settings are cut to 1 GiB. */
#define TG_PERF_QUEUE_DEFAULT_BYTES (8u << 20)
#define TG_PERF_QUEUE_MAX_BYTES (1ull << 30)
/* Processes remembered for the forget filter; the table has twice the
 * slots. */
#define TG_PERF_QUEUE_PIDS 1024

typedef enum tg_perf_qkind {
  TG_PERF_Q_SAMPLE = 1,
  TG_PERF_Q_FORGET = 2, /* |pid|'s mappings changed */
} tg_perf_qkind_t;

/* Followers an entry carries: perf_config.h's TG_PERF_MAX_FOLLOWERS
 * (perf_ds.c checks they agree). */
#define TG_PERF_QENTRY_FOLLOWERS 16

/* An entry's header; its arrays follow it, 8-byte aligned: |n_ips|
 * callchain entries, |n_regs| user registers, then |area| bytes holding
 * the stack copy (|stack_len| bytes) and, once unwound, the frames. */
typedef struct tg_perf_qentry {
  uint32_t size; /* bytes of the entry, header included; a multiple of 8 */
  uint32_t kind;
  uint64_t ts, timebase_count;
  uint32_t cpu, pid, tid;
  uint16_t misc, n_regs;
  uint32_t n_ips;
  uint32_t stack_len;
  uint32_t area;
  /* Set by the unwinder: user frames in the area, leaf first, or -errno
   * when the process could not be reported. */
  int32_t n_pcs;
  /* The followers' counts read with the sample (PERF_FORMAT_GROUP), in
   * config order: kept here, not in the area, as the sample's writer
   * needs them only when the entry comes back. */
  uint32_t n_followers;
  uint64_t followers[TG_PERF_QENTRY_FOLLOWERS];
} tg_perf_qentry_t;

static inline uint64_t *tg_perf_qentry_ips(tg_perf_qentry_t *e) {
  return (uint64_t *)(void *)(e + 1);
}
static inline uint64_t *tg_perf_qentry_regs(tg_perf_qentry_t *e) {
  return tg_perf_qentry_ips(e) + e->n_ips;
}
static inline uint8_t *tg_perf_qentry_stack(tg_perf_qentry_t *e) {
  return (uint8_t *)(tg_perf_qentry_regs(e) + e->n_regs);
}
/* The frames share the stack copy's bytes: written after the walk. */
static inline uint64_t *tg_perf_qentry_pcs(tg_perf_qentry_t *e) {
  return (uint64_t *)(void *)tg_perf_qentry_stack(e);
}
static inline size_t tg_perf_qentry_pcs_cap(const tg_perf_qentry_t *e) {
  return e->area / 8;
}

/* The bytes a sample entry takes (what counts against the cap). */
size_t tg_perf_qentry_bytes(uint32_t n_ips, uint32_t n_regs,
                            uint32_t stack_len);

typedef struct tg_perf_queue_stats {
  uint64_t committed, full, unwound, released;
  uint64_t forgets_folded; /* forget entries that found no room: all
                              caches were dropped instead */
  uint64_t forgets_filtered; /* of processes without a cache */
  bool filter_off;           /* more than TG_PERF_QUEUE_PIDS processes */
  size_t peak_bytes; /* the most bytes in use at once */
} tg_perf_queue_stats_t;

typedef struct tg_perf_queue {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC; every change of state */
  uint8_t *buf;
  size_t cap;
  size_t head, unw, tail; /* offsets into buf; see the diagram */
  size_t used;            /* bytes from head to tail, wasted ends included */
  size_t n_live, n_queued, n_done; /* entries: all, to unwind, to write */
  bool taken;        /* the unwinder holds the entry at |unw| */
  bool reserved;     /* the reader holds a reservation at |res_off| */
  size_t res_off, res_size;
  bool drop_all;     /* the unwinder drops every cache at its next take */
  /* Pids with a sample committed since their last forget: open
   * addressing, linear probing, 0 is a free slot. */
  uint32_t pids[2 * TG_PERF_QUEUE_PIDS];
  size_t n_pids;
  bool closed;
  tg_perf_queue_stats_t st;
} tg_perf_queue_t;

/* |cap| bytes (rounded down to a multiple of 8; a cap smaller than any
 * entry makes every reservation fail). 0 or -ENOMEM. */
int tg_perf_queue_init(tg_perf_queue_t *q, size_t cap);
void tg_perf_queue_destroy(tg_perf_queue_t *q);

/* --- reader ----------------------------------------------------------- */

/* Room for a sample entry of those sizes, its header zeroed but for
 * |size|, |kind|, |n_ips|, |n_regs|, |stack_len| and |area|; the caller
 * fills it and commits. NULL when the cap leaves no room (counted in
 * |full|) or the queue is closed. One reservation at a time. */
tg_perf_qentry_t *tg_perf_queue_reserve(tg_perf_queue_t *q, uint32_t n_ips,
                                        uint32_t n_regs, uint32_t stack_len);
/* Hands the reserved entry to the unwinder. */
void tg_perf_queue_commit(tg_perf_queue_t *q);
/* Asks the unwinder to forget |pid|'s cache after the entries already
 * committed, when it may have one; when there is no room for that, every
 * cache is dropped instead (never lost). */
void tg_perf_queue_forget(tg_perf_queue_t *q, uint32_t pid);
/* Asks the unwinder to drop every cache at its next take. */
void tg_perf_queue_request_drop(tg_perf_queue_t *q);
/* The oldest entry, when the unwinder is done with it (NULL: none yet).
 * Forget entries come too: the caller releases them unwritten. */
tg_perf_qentry_t *tg_perf_queue_next_done(tg_perf_queue_t *q);
/* Frees the entry next_done gave. */
void tg_perf_queue_release(tg_perf_queue_t *q);
/* Waits until the unwinder is done with every committed entry. */
void tg_perf_queue_wait_idle(tg_perf_queue_t *q);
/* The unwinder's take returns -EPIPE once it has done every entry. */
void tg_perf_queue_close(tg_perf_queue_t *q);
/* A copy of the counters and the bytes in use now. */
void tg_perf_queue_stats(tg_perf_queue_t *q, tg_perf_queue_stats_t *st,
                         size_t *used);

/* --- unwinder --------------------------------------------------------- */

/* Waits at most |timeout_ms| (-1: no limit) for an entry. Returns 1 and
 * sets |*out| (the caller calls done), 0 on timeout, -EPIPE when closed
 * and nothing is left to do. |*drop| says whether every cache must be
 * dropped first (a forget that found no room, or request_drop). */
int tg_perf_queue_take(tg_perf_queue_t *q, int timeout_ms,
                       tg_perf_qentry_t **out, bool *drop);
/* The entry take gave is unwound: it goes to the reader. */
void tg_perf_queue_done(tg_perf_queue_t *q);

#endif /* TRACEGATE_PERF_PERF_QUEUE_H */
