/* The producer side of one SMB: hands chunks to trace writers, takes them
 * back, and batches what the service must be told (CommitData) for the
 * agent's thread to send.
 *
 * Any thread may call the writer-facing functions; the agent's thread calls
 * the service-facing ones. Chunk acquisition is lock-free (CAS on the page
 * bitmaps, see abi/smb.h). Returning a chunk and adding a patch take a short
 * mutex once per chunk, never per packet.
 *
 * A large SMB can be a reserve the arbiter grows into (opts.active_size):
 * writers use an active prefix of its pages that grows with them, and the
 * rest of the memfd is never touched, so it costs no memory.
 *
 * Lifetime: the arbiter owns the SMB mapping and unmaps it when the last
 * reference goes. The agent creates it on SetupTracing and calls
 * tg_arbiter_shutdown() when the connection is lost: from then on writers
 * get no chunks (they drop), stalled writers wake up, and each writer lets
 * go of its reference when it is recreated or destroyed.
 */
#ifndef TRACEGATE_AGENT_SMB_ARBITER_H
#define TRACEGATE_AGENT_SMB_ARBITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/smb.h"
#include "common/buf.h"
#include "common/list.h"

typedef struct tg_arbiter tg_arbiter_t;

#define TG_WRITER_ID_MAX 32767u
/* A reserve's active prefix holds this many bytes per registered writer
 * (rounded up to a power-of-two number of pages), and the adaptive layout
 * leaves this many chunks per writer in it (see tg_arbiter_opts_t); a
 * fixed SMB keeps its rule of two. Why four for a reserve, and what two
 * cost thousands of threads: docs/operations.md (bench_many_writers). */
#define TG_ARBITER_WRITER_BUDGET 4096u
#define TG_ARBITER_CHUNKS_PER_WRITER 4u
#define TG_ARBITER_CHUNKS_PER_WRITER_FIXED 2u

typedef struct tg_arbiter_opts {
  /* The mapping (mmap'ed shared memfd); ownership passes to the arbiter,
   * which munmap()s it on free. Tests may pass a malloc'ed block with
   * |free_fn| = free instead. */
  void *smb_base;
  size_t smb_size;
  size_t page_size;
  void (*free_fn)(void *base, size_t size); /* NULL: munmap */
  bool stall_when_full;                    /* else drop */
  /* Patches of a chunk whose move has not left yet go into the chunk in
   * place (see smb_arbiter.c); only when the service said it copes
   * (InitializeConnectionResponse.direct_smb_patching_supported). */
  bool direct_patching;
  /* 0: every page is usable from the start (a fixed SMB). Else a reserve:
   * only the first |active_size| bytes (whole pages, at least one) are
   * used at first, and that active prefix doubles, up to |smb_size|, when
   * the registered writers need it (TG_ARBITER_WRITER_BUDGET bytes each)
   * or when a writer finds no free chunk in it. It never shrinks: pages
   * once touched stay allocated in the memfd whatever the arbiter does,
   * and the memory goes back with the SMB. Pages past the prefix are never
   * touched, so they cost nothing (see tg_arbiter_resident_bytes()). */
  size_t active_size;
  /* A reserve only: the most the writers' budget grows the active prefix
   * to (0: the whole SMB). Past it the prefix grows only when a writer
   * finds no free chunk, so the rest of a large reserve is room for a
   * service that stalls, resident only while one does, and not memory
   * every app with thousands of threads pays for while the service keeps
   * up. The layout counts the pages owed up to this cap as well, so the
   * pages a stall adds take the same chunks. */
  size_t owed_max;
  /* Page layout for new pages (TG_PAGE_DIV_*); 0 adapts it to the number
   * of writers: chunks of about 4 KiB (DIV_1 up to 8 KiB pages, DIV_2 for
   * 16 KiB, DIV_4 for 32 KiB) while the SMB has at least
   * TG_ARBITER_CHUNKS_PER_WRITER (a fixed SMB: _FIXED) chunks per
   * registered writer, else the
   * smallest division that does (at most DIV_14). A fixed SMB counts all
   * its pages; a reserve counts the pages its writers are owed (their
   * budget, at least |active_size|, at most |owed_max| and the reserve), not what misses
   * made it grow to: more SMB for the same writers means more chunks, not
   * larger ones (a large chunk per writer is mostly empty when idle
   * writers give theirs back). A page takes a new layout only once all its
   * chunks are free, so the SMB moves over gradually; chunks are taken
   * from pages of the current layout or a smaller one first, and from a
   * page of larger chunks only when no other has room (left alone, it
   * frees up whole and takes the current layout). */
  unsigned layout;
  /* Called from a writer's thread when the pending commit batch reaches
   * |commit_threshold| chunks (0: a quarter of the SMB's chunks), and when a
   * writer starts to stall; must be async-signal-cheap (uv_async_send). */
  void (*wake)(void *ctx);
  void *wake_ctx;
  size_t commit_threshold;
  /* CLOCK_MONOTONIC nanoseconds for writers backing off from a full SMB
   * (trace_writer.h); NULL: clock_gettime(). Tests inject their own. Read
   * only on the drop path, never per stored packet. */
  uint64_t (*now_ns)(void);
} tg_arbiter_opts_t;

/* Returns 0 or -EINVAL (bad geometry) / -ENOMEM. The new arbiter has one
 * reference, the caller's. On failure the mapping is NOT freed. */
int tg_arbiter_new(const tg_arbiter_opts_t *opts, tg_arbiter_t **out);
void tg_arbiter_ref(tg_arbiter_t *arb);
void tg_arbiter_unref(tg_arbiter_t *arb);

/* The connection is gone: no more chunks are handed out, stalls end. */
void tg_arbiter_shutdown(tg_arbiter_t *arb);
bool tg_arbiter_is_shut_down(const tg_arbiter_t *arb);

const tg_smb_t *tg_arbiter_smb(const tg_arbiter_t *arb);

/* --- writer-facing (any thread) ------------------------------------------- */

/* Allocates a writer id (1..TG_WRITER_ID_MAX, not reused until it wraps)
 * and queues RegisterTraceWriter{writer_id, target_buffer} for the service.
 * Returns the id or -EBUSY when all ids are taken. */
int tg_arbiter_writer_register(tg_arbiter_t *arb, uint16_t target_buffer);
/* Queues UnregisterTraceWriter and frees the id. */
void tg_arbiter_writer_unregister(tg_arbiter_t *arb, uint16_t writer_id);

/* Acquires a Free chunk (partitioning a free page if needed) for writing,
 * with its header written (chunk_id, writer_id, no packets). When none is
 * free: drop policy returns TG_ENO_SPACE at once; stall policy wakes the
 * agent, waits with backoff until a chunk frees up, counting one stall,
 * and returns TG_ENO_SPACE only after shutdown. */
int tg_arbiter_chunk_get(tg_arbiter_t *arb, uint16_t writer_id,
                         uint32_t chunk_id, tg_smb_chunk_t *out);

/* One pass over the SMB without waiting, whatever the policy: 0 with |out|
 * filled, or TG_ENO_SPACE. For a writer that would rather not block while
 * it holds a chunk (see trace_writer.c). */
int tg_arbiter_chunk_try_get(tg_arbiter_t *arb, uint16_t writer_id,
                             uint32_t chunk_id, tg_smb_chunk_t *out);

/* A look at the TG_ARBITER_NEAR_PAGES pages from the search cursor only,
 * without waiting and without growing a reserve: 0 with |out| filled, or
 * TG_ENO_SPACE (counted in near_misses, not chunk_misses). In a full SMB
 * the pages just ahead of the cursor hold the chunks taken longest ago,
 * the ones the service copies and frees first, so a writer backing off
 * (trace_writer.h) finds a freed chunk there for a few cache lines where a
 * full pass reads every page header, lines the service is writing. */
int tg_arbiter_chunk_try_get_near(tg_arbiter_t *arb, uint16_t writer_id,
                                  uint32_t chunk_id, tg_smb_chunk_t *out);
#define TG_ARBITER_NEAR_PAGES 16u

/* opts.now_ns(), or CLOCK_MONOTONIC in nanoseconds. Any thread. */
uint64_t tg_arbiter_now_ns(const tg_arbiter_t *arb);

/* The policy the arbiter was made with (opts.stall_when_full). */
bool tg_arbiter_stalls_when_full(const tg_arbiter_t *arb);

/* Releases |c| as Complete and queues it for CommitData (chunks_to_move
 * {page, chunk, target_buffer}); with direct patching, a chunk flagged as
 * needing patches stays BeingWritten until its last patch or its move
 * leaves. May call wake. */
void tg_arbiter_chunk_return(tg_arbiter_t *arb, const tg_smb_chunk_t *c,
                             uint16_t target_buffer);

/* Queues a patch: 4 bytes at |offset| from the start of the chunk's payload
 * (just after its 8-byte header) of chunk {writer_id, chunk_id}. Patches of
 * the same chunk queued in a row are sent together; |more| is
 * has_more_patches (more patches for this chunk will follow). With direct
 * patching, written into the chunk instead while its move is queued. */
void tg_arbiter_patch_add(tg_arbiter_t *arb, uint16_t target_buffer,
                          uint16_t writer_id, uint32_t chunk_id,
                          uint32_t offset, const uint8_t data[4], bool more);

/* The layout new pages get now (opts.layout, or the adaptive choice). */
unsigned tg_arbiter_layout(const tg_arbiter_t *arb);
/* Registered writers now, and the chunks the active pages have at the
 * default layout (opts.layout or ~4 KiB chunks). Any thread; relaxed. */
size_t tg_arbiter_writer_count(const tg_arbiter_t *arb);
size_t tg_arbiter_base_chunks(const tg_arbiter_t *arb);

/* The trace writers of this SMB, for the agent's idle-chunk pass (see
 * trace_writer.h). |node| is embedded in the writer; attach after the
 * writer is ready to be looked at, detach before it goes away. The list
 * has its own lock, taken before (never inside) the batch's: a writer
 * visited under it may return a chunk. */
void tg_arbiter_writer_attach(tg_arbiter_t *arb, tg_list_t *node);
void tg_arbiter_writer_detach(tg_arbiter_t *arb, tg_list_t *node);
/* Calls |fn| for every attached writer, then |end| (if not NULL), with
 * the list locked throughout: attach and detach wait meanwhile. */
void tg_arbiter_for_each_writer(tg_arbiter_t *arb,
                                void (*fn)(void *ctx, tg_list_t *node),
                                void (*end)(void *ctx), void *ctx);

/* True (once, then false until it happens again) when writers found the
 * SMB nearly or wholly out of free chunks since the last call: the agent
 * should take back idle writers' chunks at once. Setting it wakes the
 * agent. */
bool tg_arbiter_take_pressure(tg_arbiter_t *arb);

/* A writer lost |packets| packets and wrote |markers| drop markers (how
 * the service learns of a loss). Counted in stats. Any thread. */
void tg_arbiter_count_drop(tg_arbiter_t *arb, unsigned packets,
                           unsigned markers);
/* The agent took back an idle writer's chunk. */
void tg_arbiter_count_reclaim(tg_arbiter_t *arb);

/* Bytes of chunks not Free (being written, complete or being read), from
 * a scan of the active pages' bitmaps: what the SMB holds right now. */
size_t tg_arbiter_bytes_in_use(const tg_arbiter_t *arb);

/* The pages writers may use now, in bytes: the whole SMB when it is fixed,
 * else the active prefix of the reserve. Any thread. */
size_t tg_arbiter_active_size(const tg_arbiter_t *arb);
/* Bytes of the SMB in memory (mincore() over the active pages: pages
 * anyone touched, the service included; the pages past them stay
 * untouched), or 0 when that cannot be told (a test's malloc'ed SMB that
 * is not page-aligned). One system call: for stats, not for hot paths. */
size_t tg_arbiter_resident_bytes(const tg_arbiter_t *arb);

/* --- agent-facing (agent's thread) --------------------------------------- */

typedef struct tg_arbiter_stats {
  uint64_t chunks_committed; /* moves serialized by take_commit */
  uint64_t patches;          /* patches (not groups) serialized */
  uint64_t patches_in_place; /* patches written into their chunk instead */
  uint64_t stalls;           /* chunk_get calls that had to wait */
  uint64_t packets_dropped;  /* packets writers could not store */
  uint64_t drop_markers;     /* of them, reported in a chunk's drop marker */
  uint64_t chunks_reclaimed; /* idle writers' chunks taken back */
  uint64_t chunk_misses;     /* full passes that found no free chunk */
  uint64_t near_misses;      /* near looks that found none */
} tg_arbiter_stats_t;
void tg_arbiter_get_stats(const tg_arbiter_t *arb, tg_arbiter_stats_t *out);

/* A pending trace writer (un)registration, in the order they happened. */
typedef struct tg_arbiter_writer_event {
  bool registered; /* false: unregistered */
  uint16_t writer_id;
  uint16_t target_buffer;
} tg_arbiter_writer_event_t;

/* Moves up to |max| queued writer events into |out|; returns how many. The
 * agent sends them before the next CommitData so that the service knows a
 * writer's target buffer before it scrapes or receives its chunks. */
size_t tg_arbiter_take_writer_events(tg_arbiter_t *arb,
                                     tg_arbiter_writer_event_t *out,
                                     size_t max);

/* Serializes the pending batch as a CommitDataRequest (chunks_to_move,
 * then chunks_to_patch, then flush_request_id) appended to |out|, and takes
 * what it serialized out of the batch. The result never exceeds |max_bytes|:
 * what does not fit stays queued, in order, for the next call. A patch is
 * never sent before the move of the chunk it patches.
 *
 * |flush_request_id| (0: none) is written only by a call that empties the
 * batch, so that it acknowledges everything committed before the flush;
 * while a call leaves something queued, call again with the same id
 * (check tg_arbiter_commit_pending()).
 *
 * Returns the number of chunks plus patch groups serialized, or a negative
 * error: -ENOMEM (nothing taken), TG_ENO_SPACE when |max_bytes| cannot hold
 * even the first pending item. Returns 0 with nothing appended when the
 * batch is empty and |flush_request_id| is 0; 0 with the flush id alone
 * appended when the batch is empty and the id is not.
 *
 * Agent's thread only: one caller at a time. */
int tg_arbiter_take_commit(tg_arbiter_t *arb, uint64_t flush_request_id,
                           size_t max_bytes, tg_buf_t *out);

/* True when moves or patches are pending (one relaxed atomic load; for the
 * agent's commit timer; writer events are not counted). */
bool tg_arbiter_commit_pending(const tg_arbiter_t *arb);

#endif /* TRACEGATE_AGENT_SMB_ARBITER_H */
