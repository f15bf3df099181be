/* The producer side of one SMB (agent/smb_arbiter.h).
 *
 * Owns the mapping, the writer id space and the pending CommitData batch.
 * Chunk acquisition never takes a lock: writers race on the page bitmaps
 * with CAS (abi/smb.c), starting at a shared round-robin cursor. The batch
 * (moves, patches, writer events) sits behind one mutex that writers take
 * once per chunk; the agent's thread copies what it takes out under the
 * mutex and serializes it outside, so a large commit never holds writers up.
 *
 * Layout. Unless the caller fixed one, new pages get chunks of about 4 KiB
 * while the SMB has TG_ARBITER_CHUNKS_PER_WRITER chunks per writer, and smaller ones (up to 14 per
 * page) as writers grow: every writer holding a chunk must leave chunks
 * for the others and for those on their way to the service. Existing
 * pages keep their layout until the service frees them whole.
 *
 * Reserve. With opts.active_size, writers scan only the first
 * |active_pages| pages. Registration grows that prefix to the writers'
 * budget (up to opts.owed_max), a scan that finds nothing doubles it (one
 * CAS from the size it scanned, so a crowd of missing writers doubles it
 * once) up to the whole SMB: the pages past the writers' budget are for a
 * service that falls behind, and stay untouched while it keeps up. The
 * layout follows the writers' budget, not the prefix (see
 * smb_arbiter.h), so misses add chunks of the same size.
 *
 * Ordering rule of the batch: a patch must not reach the service before the
 * move of the chunk it patches (the service would not find the chunk). Each
 * patch remembers how many moves had been queued when it was added; it is
 * sent only once those moves have been taken.
 *
 * Direct patching (opts.direct_patching, when the service said it copes:
 * InitializeConnectionResponse.direct_smb_patching_supported). A chunk
 * returned with patches to come stays BeingWritten while its move waits in
 * the batch; a patch for it then goes into the chunk itself, and the last
 * one (has_more_patches false) clears the chunk's needs-patching flag and
 * releases it Complete. A chunk whose move is taken first is released
 * Complete then, flag set, and its patches go by CommitData as without.
 * The service reads a chunk only once it is Complete (a scrape takes a
 * BeingWritten one as incomplete), so it never sees a half-applied patch,
 * and it is spared parsing and applying a patch for nearly every chunk
 * that a packet leaves unfinished.
 */
#include "agent/smb_arbiter.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"
#include "tracegate/error.h"

/* Stall backoff: a few yields, then sleeps from 50 us doubling to 1 ms. */
#define STALL_YIELDS 4u
#define STALL_SLEEP_MIN_NS 50000L
#define STALL_SLEEP_MAX_NS 1000000L
/* While stalled, wake the agent again every this many sleeps at the cap,
 * in case its thread consumed the first wake without freeing anything. */
#define STALL_REWAKE_EVERY 16u

/* CommitDataRequest field numbers (docs PROTOCOL.md section 6). */
enum {
  CDR_CHUNKS_TO_MOVE = 1,
  CDR_CHUNKS_TO_PATCH = 2,
  CDR_FLUSH_REQUEST_ID = 3,
  MOVE_PAGE = 1,
  MOVE_CHUNK = 2,
  MOVE_TARGET_BUFFER = 3,
  PATCHG_TARGET_BUFFER = 1,
  PATCHG_WRITER_ID = 2,
  PATCHG_CHUNK_ID = 3,
  PATCHG_PATCHES = 4,
  PATCHG_HAS_MORE = 5,
  PATCH_OFFSET = 1,
  PATCH_DATA = 2,
};

typedef struct move {
  uint32_t page;
  uint16_t chunk;
  uint16_t target_buffer;
  /* Direct patching: the chunk is still BeingWritten, waiting for patches
   * that land in it in place (see patch_in_place()). */
  bool open;
  uint16_t writer_id;
  uint32_t chunk_id;
} move_t;

typedef struct patch {
  uint64_t move_seq; /* moves queued when it was added */
  uint32_t chunk_id;
  uint32_t offset;
  uint16_t target_buffer;
  uint16_t writer_id;
  uint8_t data[4];
  bool more;
} patch_t;

struct tg_arbiter {
  tg_smb_t smb;
  void (*free_fn)(void *base, size_t size);
  bool stall_when_full;
  bool direct_patching;
  bool adaptive_layout;
  size_t initial_pages;      /* 0: a fixed SMB, every page active */
  size_t owed_pages;         /* reserve: the writers' budget's cap */
  /* Pages writers may use: the SMB's first |active_pages|. Only grows. */
  _Atomic size_t active_pages;
  unsigned base_layout;      /* opts.layout, or the default for the page */
  _Atomic unsigned layout;   /* for newly partitioned pages */
  void (*wake)(void *ctx);
  void *wake_ctx;
  size_t commit_threshold;   /* 0: a quarter of the active chunks */
  uint64_t (*now_ns)(void);  /* opts.now_ns, or NULL */

  _Atomic uint32_t refs;
  _Atomic bool shut_down;
  _Atomic size_t cursor; /* page where the next search starts */
  _Atomic uint64_t stalls;
  _Atomic size_t pending; /* moves + patches queued (mirror, for polling) */
  _Atomic bool pressure;  /* a scan found the SMB (nearly) full */
  _Atomic size_t nwriters; /* mirror of writer_ids_used */
  _Atomic uint64_t packets_dropped, drop_markers, chunks_reclaimed,
      chunk_misses, near_misses;

  /* The writers, for the agent's idle pass; before |mu| in lock order. */
  pthread_mutex_t writers_mu;
  tg_list_t writers;

  pthread_mutex_t mu; /* guards everything below */
  tg_buf_t moves;        /* queue of move_t */
  tg_buf_t patches;      /* queue of patch_t */
  tg_buf_t events;       /* queue of tg_arbiter_writer_event_t */
  uint64_t moves_queued; /* ever */
  uint64_t moves_taken;  /* ever: the chunks committed */
  uint64_t patches_committed;
  uint64_t patches_in_place;
  size_t open_moves; /* queued moves with |open| */
  uint64_t writer_ids[(TG_WRITER_ID_MAX + 1) / 64]; /* bit set: in use */
  unsigned writer_ids_used;
  uint16_t last_writer_id;

  /* The agent thread's copy of what one take_commit serializes (room
   * reserved, never committed). */
  tg_buf_t take_moves;
  tg_buf_t take_patches;
};

/* --- queues ------------------------------------------------------------- */

/* The batch queues are tg_bufs of whole elements of one type, taken from
 * the front (tg_buf compacts the taken prefix lazily). */
#define QUEUE_COUNT(q, type) (tg_buf_size(q) / sizeof(type))
#define QUEUE_AT(q, type, i) ((type *)tg_buf_begin(q) + (i))
#define QUEUE_PUSH(q, type) ((type *)queue_push((q), sizeof(type)))
#define QUEUE_POP(q, type, n) tg_buf_consume((q), (n) * sizeof(type))

/* A slot at the back, or NULL when out of memory. */
static void *queue_push(tg_buf_t *q, size_t esz) {
  uint8_t *p = tg_buf_reserve(q, esz);
  if (p) tg_buf_commit(q, esz);
  return p;
}

/* --- lifetime ------------------------------------------------------------- */

static unsigned default_layout(size_t page_size) {
  if (page_size <= 8192) return TG_PAGE_DIV_1;
  if (page_size <= 16384) return TG_PAGE_DIV_2;
  return TG_PAGE_DIV_4;
}

int tg_arbiter_new(const tg_arbiter_opts_t *opts, tg_arbiter_t **out) {
  if (!opts || !out || opts->layout > TG_PAGE_DIV_14) return -EINVAL;
  tg_arbiter_t *arb = calloc(1, sizeof(*arb));
  if (!arb) return -ENOMEM;
  int rv =
      tg_smb_init(&arb->smb, opts->smb_base, opts->smb_size, opts->page_size);
  if (rv < 0) goto fail;
  arb->free_fn = opts->free_fn;
  arb->stall_when_full = opts->stall_when_full;
  arb->direct_patching = opts->direct_patching;
  arb->adaptive_layout = opts->layout == 0;
  arb->base_layout =
      opts->layout ? opts->layout : default_layout(opts->page_size);
  atomic_init(&arb->layout, arb->base_layout);
  arb->wake = opts->wake;
  arb->wake_ctx = opts->wake_ctx;
  arb->now_ns = opts->now_ns;
  arb->commit_threshold = opts->commit_threshold;
  size_t active = arb->smb.num_pages;
  if (opts->active_size && opts->active_size < arb->smb.size) {
    active = opts->active_size / arb->smb.page_size;
    if (active == 0) active = 1;
    arb->initial_pages = active;
    size_t owed = opts->owed_max ? opts->owed_max / arb->smb.page_size
                                 : arb->smb.num_pages;
    if (owed < active) owed = active;
    arb->owed_pages = owed < arb->smb.num_pages ? owed : arb->smb.num_pages;
  }
  atomic_init(&arb->active_pages, active);
  atomic_init(&arb->refs, 1);
  atomic_init(&arb->shut_down, false);
  atomic_init(&arb->cursor, 0);
  atomic_init(&arb->stalls, 0);
  atomic_init(&arb->pending, 0);
  atomic_init(&arb->pressure, false);
  atomic_init(&arb->nwriters, 0);
  atomic_init(&arb->packets_dropped, 0);
  atomic_init(&arb->drop_markers, 0);
  atomic_init(&arb->chunks_reclaimed, 0);
  atomic_init(&arb->chunk_misses, 0);
  atomic_init(&arb->near_misses, 0);
  tg_list_init(&arb->writers);
  tg_buf_init(&arb->moves, 0);
  tg_buf_init(&arb->patches, 0);
  tg_buf_init(&arb->events, 0);
  tg_buf_init(&arb->take_moves, 0);
  tg_buf_init(&arb->take_patches, 0);
  rv = -ENOMEM;
  /* Moves never outnumber the chunks unless the service frees chunks it
   * was not told about: sized so that chunk_return does not allocate (for
   * the densest layout the pages can take). */
  size_t max_chunks = arb->smb.num_pages * TG_SMB_MAX_CHUNKS_PER_PAGE;
  if (!tg_buf_reserve(&arb->moves, max_chunks * sizeof(move_t))) goto fail;
  if (pthread_mutex_init(&arb->mu, NULL) != 0) goto fail;
  if (pthread_mutex_init(&arb->writers_mu, NULL) != 0) {
    pthread_mutex_destroy(&arb->mu);
    goto fail;
  }
  *out = arb;
  return 0;
fail:
  tg_buf_free(&arb->moves);
  free(arb);
  return rv;
}

void tg_arbiter_ref(tg_arbiter_t *arb) {
  atomic_fetch_add_explicit(&arb->refs, 1, memory_order_relaxed);
}

void tg_arbiter_unref(tg_arbiter_t *arb) {
  if (!arb) return;
  /* acq_rel: the last owner sees every other owner's writes before freeing. */
  if (atomic_fetch_sub_explicit(&arb->refs, 1, memory_order_acq_rel) != 1)
    return;
  if (arb->free_fn)
    arb->free_fn(arb->smb.base, arb->smb.size);
  else
    munmap(arb->smb.base, arb->smb.size);
  pthread_mutex_destroy(&arb->mu);
  pthread_mutex_destroy(&arb->writers_mu);
  tg_buf_free(&arb->moves);
  tg_buf_free(&arb->patches);
  tg_buf_free(&arb->events);
  tg_buf_free(&arb->take_moves);
  tg_buf_free(&arb->take_patches);
  free(arb);
}

void tg_arbiter_shutdown(tg_arbiter_t *arb) {
  /* Release pairs with the acquire in tg_arbiter_is_shut_down(). */
  atomic_store_explicit(&arb->shut_down, true, memory_order_release);
}

bool tg_arbiter_is_shut_down(const tg_arbiter_t *arb) {
  return atomic_load_explicit(&arb->shut_down, memory_order_acquire);
}

const tg_smb_t *tg_arbiter_smb(const tg_arbiter_t *arb) { return &arb->smb; }

/* --- writer ids ----------------------------------------------------------- */

static bool id_used(const tg_arbiter_t *arb, unsigned id) {
  return (arb->writer_ids[id / 64] >> (id % 64)) & 1u;
}

/* Acquire: pairs with the release in grow_to(), so that a writer that
 * sees new pages also sees the layout chosen for them (adapt_layout()
 * stores it before growing). The pages themselves carry no data yet. */
static size_t active_pages(const tg_arbiter_t *arb) {
  return atomic_load_explicit(&((tg_arbiter_t *)arb)->active_pages,
                              memory_order_acquire);
}

/* Raises the active prefix of a reserve to |pages| (at most the SMB) if
 * it is below; never lowers it. Any thread. */
static void grow_to(tg_arbiter_t *arb, size_t pages) {
  if (!arb->initial_pages) return;
  if (pages > arb->smb.num_pages) pages = arb->smb.num_pages;
  size_t cur = active_pages(arb);
  /* Release: pairs with the acquire in active_pages(). */
  while (cur < pages &&
         !atomic_compare_exchange_weak_explicit(&arb->active_pages, &cur,
                                                pages, memory_order_release,
                                                memory_order_acquire)) {
  }
}

/* The pages a reserve owes its |nwriters| writers: their budget in pages,
 * at least the initial prefix, doubled from it, at most |owed_pages|. */
static size_t pages_for_writers(const tg_arbiter_t *arb, size_t nwriters) {
  size_t want = (nwriters * TG_ARBITER_WRITER_BUDGET + arb->smb.page_size - 1) /
                arb->smb.page_size;
  size_t pages = arb->initial_pages;
  while (pages < want && pages < arb->owed_pages) pages *= 2;
  return pages < arb->owed_pages ? pages : arb->owed_pages;
}

/* Grows a reserve to what its writers are owed, then picks the largest
 * chunks that still give every writer TG_ARBITER_CHUNKS_PER_WRITER (a
 * fixed SMB: _FIXED): one to hold, the others on their way to the
 * service. Under |mu|. */
static void adapt_layout(tg_arbiter_t *arb) {
  size_t nw = arb->writer_ids_used;
  atomic_store_explicit(&arb->nwriters, nw, memory_order_relaxed);
  size_t pages =
      arb->initial_pages ? pages_for_writers(arb, nw) : arb->smb.num_pages;
  if (arb->adaptive_layout) {
    size_t want = (arb->initial_pages ? TG_ARBITER_CHUNKS_PER_WRITER
                                      : TG_ARBITER_CHUNKS_PER_WRITER_FIXED) *
                  nw;
    unsigned layout = arb->base_layout;
    while (layout < TG_PAGE_DIV_14 &&
           pages * tg_smb_layout_num_chunks(layout) < want)
      layout++;
    /* Relaxed: a hint for the next partition; the bitmaps carry the
     * order, and grow_to()'s release publishes it with new pages. */
    atomic_store_explicit(&arb->layout, layout, memory_order_relaxed);
  }
  grow_to(arb, pages);
}

unsigned tg_arbiter_layout(const tg_arbiter_t *arb) {
  return atomic_load_explicit(&arb->layout, memory_order_relaxed);
}

size_t tg_arbiter_writer_count(const tg_arbiter_t *arb) {
  return atomic_load_explicit(&arb->nwriters, memory_order_relaxed);
}

size_t tg_arbiter_base_chunks(const tg_arbiter_t *arb) {
  return active_pages(arb) * tg_smb_layout_num_chunks(arb->base_layout);
}

size_t tg_arbiter_active_size(const tg_arbiter_t *arb) {
  return active_pages(arb) * arb->smb.page_size;
}

/* Only the active pages: nobody touches the others (the agent hands out
 * no chunk there, the service reads only pages that hold data, see
 * tg__producer_scrape), and mincore() looks up every page it is given in
 * the memfd's page cache, a cost that would grow with the reserve rather
 * than with what is used. One call covers the largest SMB. */
size_t tg_arbiter_resident_bytes(const tg_arbiter_t *arb) {
  long sys = sysconf(_SC_PAGESIZE);
  if (sys <= 0 || (uintptr_t)arb->smb.base % (size_t)sys) return 0;
  unsigned char vec[TG_SMB_MAX_SIZE / 4096];
  size_t window = sizeof(vec) * (size_t)sys, bytes = 0;
  size_t size = tg_arbiter_active_size(arb);
  for (size_t off = 0; off < size; off += window) {
    size_t len = size - off < window ? size - off : window;
    if (mincore(arb->smb.base + off, len, vec) != 0) return 0;
    for (size_t i = 0; i < (len + (size_t)sys - 1) / (size_t)sys; i++)
      if (vec[i] & 1) bytes += (size_t)sys;
  }
  return bytes;
}

int tg_arbiter_writer_register(tg_arbiter_t *arb, uint16_t target_buffer) {
  int rv = -EBUSY;
  pthread_mutex_lock(&arb->mu);
  if (arb->writer_ids_used < TG_WRITER_ID_MAX) {
    /* The cursor only advances: an id comes back only after a wrap, so a
     * late chunk of a dead writer is not mistaken for a new writer's. */
    unsigned id = arb->last_writer_id;
    do {
      id = id >= TG_WRITER_ID_MAX ? 1 : id + 1;
    } while (id_used(arb, id));
    tg_arbiter_writer_event_t *ev =
        QUEUE_PUSH(&arb->events, tg_arbiter_writer_event_t);
    if (!ev) {
      rv = -ENOMEM;
    } else {
      *ev = (tg_arbiter_writer_event_t){true, (uint16_t)id, target_buffer};
      arb->writer_ids[id / 64] |= 1ull << (id % 64);
      arb->writer_ids_used++;
      arb->last_writer_id = (uint16_t)id;
      adapt_layout(arb);
      rv = (int)id;
    }
  }
  pthread_mutex_unlock(&arb->mu);
  return rv;
}

void tg_arbiter_writer_unregister(tg_arbiter_t *arb, uint16_t writer_id) {
  if (writer_id == 0 || writer_id > TG_WRITER_ID_MAX) return;
  pthread_mutex_lock(&arb->mu);
  if (id_used(arb, writer_id)) {
    arb->writer_ids[writer_id / 64] &= ~(1ull << (writer_id % 64));
    arb->writer_ids_used--;
    adapt_layout(arb);
    tg_arbiter_writer_event_t *ev =
        QUEUE_PUSH(&arb->events, tg_arbiter_writer_event_t);
    if (ev) *ev = (tg_arbiter_writer_event_t){false, writer_id, 0};
  }
  pthread_mutex_unlock(&arb->mu);
}

size_t tg_arbiter_take_writer_events(tg_arbiter_t *arb,
                                     tg_arbiter_writer_event_t *out,
                                     size_t max) {
  pthread_mutex_lock(&arb->mu);
  size_t n = QUEUE_COUNT(&arb->events, tg_arbiter_writer_event_t);
  if (n > max) n = max;
  if (n) memcpy(out, tg_buf_begin(&arb->events), n * sizeof(*out));
  QUEUE_POP(&arb->events, tg_arbiter_writer_event_t, n);
  pthread_mutex_unlock(&arb->mu);
  return n;
}

/* --- chunks --------------------------------------------------------------- */

static void wake(tg_arbiter_t *arb) {
  if (arb->wake) arb->wake(arb->wake_ctx);
}

/* Raises the pressure flag; only the writer that raises it wakes the agent,
 * so a starving SMB costs one wake per agent pass, not one per packet. */
static void raise_pressure(tg_arbiter_t *arb) {
  if (atomic_load_explicit(&arb->pressure, memory_order_relaxed)) return;
  if (!atomic_exchange_explicit(&arb->pressure, true, memory_order_relaxed))
    wake(arb);
}

uint64_t tg_arbiter_now_ns(const tg_arbiter_t *arb) {
  if (arb->now_ns) return arb->now_ns();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool tg_arbiter_take_pressure(tg_arbiter_t *arb) {
  if (!atomic_load_explicit(&arb->pressure, memory_order_relaxed))
    return false;
  return atomic_exchange_explicit(&arb->pressure, false,
                                  memory_order_relaxed);
}

/* Takes a Free chunk of page |pg| (bitmap |bm|): 0 with |out| filled and
 * the cursor moved past it, or TG_ENO_SPACE. */
static int take_in_page(tg_arbiter_t *arb, size_t n, size_t pg, uint32_t bm,
                        uint16_t writer_id, uint32_t chunk_id,
                        tg_smb_chunk_t *out) {
  unsigned nchunks = tg_smb_layout_num_chunks(tg_smb_bitmap_layout(bm));
  for (unsigned c = 0; c < nchunks; c++) {
    if (tg_smb_bitmap_chunk_state(bm, c) != TG_CHUNK_FREE) continue;
    if (tg_smb_try_acquire_chunk_for_writing(&arb->smb, pg, c, chunk_id,
                                             writer_id, out) == 0) {
      /* Relaxed: the cursor is a hint; the bitmaps carry the ordering. */
      size_t next = c + 1 < nchunks ? pg : pg + 1;
      atomic_store_explicit(&arb->cursor, next < n ? next : 0,
                            memory_order_relaxed);
      return 0;
    }
  }
  return TG_ENO_SPACE;
}

/* One pass over every page from the cursor. Returns 0 with |out| filled, or
 * TG_ENO_SPACE when no page had a chunk for us. With the adaptive layout,
 * a page of larger chunks than the current layout's (partitioned when
 * there were fewer writers) is passed over while it has chunks in use:
 * left alone, it frees up whole and takes the current layout, where
 * writers that keep their chunks for long would otherwise hold on to its
 * chunks one after the other and keep it large for ever. It is used only
 * when the pass finds nothing else. A free page gets the current layout.
 * The cursor moves round the SMB, so the pages ahead of it are the ones
 * written longest ago: when more than half of them are still taken, the
 * SMB is filling up. */
static int scan_active(tg_arbiter_t *arb, size_t n, size_t limit,
                       uint16_t writer_id, uint32_t chunk_id,
                       tg_smb_chunk_t *out) {
  size_t start = atomic_load_explicit(&arb->cursor, memory_order_relaxed);
  if (start >= n) start = 0;
  if (limit > n) limit = n;
  unsigned fresh = tg_arbiter_layout(arb);
  size_t large_pg = SIZE_MAX, large_i = 0;
  for (size_t i = 0; i < limit; i++) {
    size_t pg = start + i < n ? start + i : start + i - n;
    uint32_t bm = tg_smb_page_bitmap(&arb->smb, pg);
    if (bm == 0) {
      if (tg_smb_try_partition_page(&arb->smb, pg, fresh) == 0)
        bm = (uint32_t)fresh << TG_SMB_LAYOUT_SHIFT;
      else
        bm = tg_smb_page_bitmap(&arb->smb, pg); /* someone else did */
    }
    unsigned layout = tg_smb_bitmap_layout(bm);
    /* A fixed layout is kept: pages of another are not ours to judge. */
    if (!arb->adaptive_layout && layout != arb->base_layout) continue;
    if (arb->adaptive_layout && layout < fresh) {
      if (large_pg == SIZE_MAX) {
        large_pg = pg;
        large_i = i;
      }
      continue;
    }
    if (take_in_page(arb, n, pg, bm, writer_id, chunk_id, out) == 0) {
      if (i > n / 2) raise_pressure(arb);
      return 0;
    }
  }
  if (large_pg != SIZE_MAX &&
      take_in_page(arb, n, large_pg, tg_smb_page_bitmap(&arb->smb, large_pg),
                   writer_id, chunk_id, out) == 0) {
    if (large_i > n / 2) raise_pressure(arb);
    return 0;
  }
  return TG_ENO_SPACE;
}

/* One pass over the active pages; a reserve that had nothing free there
 * doubles its prefix (unless another writer already grew it) and the
 * pass goes on over the new pages. */
static int scan_pages(tg_arbiter_t *arb, uint16_t writer_id, uint32_t chunk_id,
                      tg_smb_chunk_t *out) {
  size_t n = active_pages(arb);
  for (;;) {
    if (scan_active(arb, n, n, writer_id, chunk_id, out) == 0) return 0;
    grow_to(arb, 2 * n);
    size_t grown = active_pages(arb);
    if (grown == n) break;
    /* The new pages first: they are free. */
    atomic_store_explicit(&arb->cursor, n, memory_order_relaxed);
    n = grown;
  }
  atomic_fetch_add_explicit(&arb->chunk_misses, 1, memory_order_relaxed);
  raise_pressure(arb);
  return TG_ENO_SPACE;
}

int tg_arbiter_chunk_get(tg_arbiter_t *arb, uint16_t writer_id,
                         uint32_t chunk_id, tg_smb_chunk_t *out) {
  long sleep_ns = STALL_SLEEP_MIN_NS;
  unsigned at_cap = 0;
  for (unsigned attempt = 0;; attempt++) {
    if (tg_arbiter_is_shut_down(arb)) return TG_ENO_SPACE;
    if (scan_pages(arb, writer_id, chunk_id, out) == 0) return 0;
    if (!arb->stall_when_full) return TG_ENO_SPACE;
    if (attempt == 0) {
      atomic_fetch_add_explicit(&arb->stalls, 1, memory_order_relaxed);
      wake(arb);
    }
    if (attempt < STALL_YIELDS) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < STALL_SLEEP_MAX_NS) {
      sleep_ns *= 2;
      if (sleep_ns > STALL_SLEEP_MAX_NS) sleep_ns = STALL_SLEEP_MAX_NS;
    } else if (++at_cap % STALL_REWAKE_EVERY == 0) {
      wake(arb);
    }
  }
}

int tg_arbiter_chunk_try_get(tg_arbiter_t *arb, uint16_t writer_id,
                             uint32_t chunk_id, tg_smb_chunk_t *out) {
  if (tg_arbiter_is_shut_down(arb)) return TG_ENO_SPACE;
  return scan_pages(arb, writer_id, chunk_id, out);
}

int tg_arbiter_chunk_try_get_near(tg_arbiter_t *arb, uint16_t writer_id,
                                  uint32_t chunk_id, tg_smb_chunk_t *out) {
  if (tg_arbiter_is_shut_down(arb)) return TG_ENO_SPACE;
  if (scan_active(arb, active_pages(arb), TG_ARBITER_NEAR_PAGES, writer_id,
                  chunk_id, out) == 0)
    return 0;
  atomic_fetch_add_explicit(&arb->near_misses, 1, memory_order_relaxed);
  return TG_ENO_SPACE;
}

bool tg_arbiter_stalls_when_full(const tg_arbiter_t *arb) {
  return arb->stall_when_full;
}

void tg_arbiter_writer_attach(tg_arbiter_t *arb, tg_list_t *node) {
  pthread_mutex_lock(&arb->writers_mu);
  tg_list_insert_tail(&arb->writers, node);
  pthread_mutex_unlock(&arb->writers_mu);
}

void tg_arbiter_writer_detach(tg_arbiter_t *arb, tg_list_t *node) {
  pthread_mutex_lock(&arb->writers_mu);
  tg_list_remove(node);
  pthread_mutex_unlock(&arb->writers_mu);
}

void tg_arbiter_for_each_writer(tg_arbiter_t *arb,
                                void (*fn)(void *ctx, tg_list_t *node),
                                void (*end)(void *ctx), void *ctx) {
  pthread_mutex_lock(&arb->writers_mu);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &arb->writers) fn(ctx, it);
  if (end) end(ctx);
  pthread_mutex_unlock(&arb->writers_mu);
}

void tg_arbiter_count_drop(tg_arbiter_t *arb, unsigned packets,
                           unsigned markers) {
  if (packets)
    atomic_fetch_add_explicit(&arb->packets_dropped, packets,
                              memory_order_relaxed);
  if (markers)
    atomic_fetch_add_explicit(&arb->drop_markers, markers,
                              memory_order_relaxed);
}

void tg_arbiter_count_reclaim(tg_arbiter_t *arb) {
  atomic_fetch_add_explicit(&arb->chunks_reclaimed, 1, memory_order_relaxed);
}

size_t tg_arbiter_bytes_in_use(const tg_arbiter_t *arb) {
  size_t bytes = 0, npages = active_pages(arb);
  for (size_t pg = 0; pg < npages; pg++) {
    uint32_t bm = tg_smb_page_bitmap(&arb->smb, pg);
    unsigned layout = tg_smb_bitmap_layout(bm);
    unsigned n = tg_smb_layout_num_chunks(layout);
    size_t csize = tg_smb_chunk_size(arb->smb.page_size, layout);
    for (unsigned c = 0; c < n; c++)
      if (tg_smb_bitmap_chunk_state(bm, c) != TG_CHUNK_FREE) bytes += csize;
  }
  return bytes;
}

/* Releases the chunk of move |m| Complete (direct patching). */
static void release_open(tg_arbiter_t *arb, move_t *m) {
  tg_smb_chunk_t c = {.page_idx = m->page, .chunk_idx = (uint8_t)m->chunk};
  (void)tg_smb_release_chunk_as_complete(&arb->smb, &c);
  m->open = false;
  arb->open_moves--;
}

void tg_arbiter_chunk_return(tg_arbiter_t *arb, const tg_smb_chunk_t *c,
                             uint16_t target_buffer) {
  /* The writer's own header words: it wrote them, nobody else may. */
  const tg_smb_chunk_header_t *h = (const tg_smb_chunk_header_t *)c->begin;
  uint16_t packets = atomic_load_explicit(&h->packets, memory_order_relaxed);
  bool open = arb->direct_patching &&
              (tg_chunk_packets_flags(packets) & TG_CHUNK_NEEDS_PATCHING);
  /* Release: the service's acquire-for-reading sees the chunk's bytes. A
   * failure means someone scribbled on our page word: nothing to commit. */
  if (!open && tg_smb_release_chunk_as_complete(&arb->smb, c) != 0) return;
  bool do_wake = false;
  pthread_mutex_lock(&arb->mu);
  move_t *m = QUEUE_PUSH(&arb->moves, move_t);
  if (!m && open) /* lost to OOM: Complete for the service to scrape */
    (void)tg_smb_release_chunk_as_complete(&arb->smb, c);
  if (m) { /* else lost to OOM: the service scrapes it on flush */
    *m = (move_t){
        .page = c->page_idx,
        .chunk = c->chunk_idx,
        .target_buffer = target_buffer,
        .open = open,
        .writer_id = atomic_load_explicit(&h->writer_id, memory_order_relaxed),
        .chunk_id = atomic_load_explicit(&h->chunk_id, memory_order_relaxed)};
    if (open) arb->open_moves++;
    arb->moves_queued++;
    atomic_fetch_add_explicit(&arb->pending, 1, memory_order_relaxed);
    size_t threshold = arb->commit_threshold;
    if (threshold == 0) threshold = tg_arbiter_base_chunks(arb) / 4;
    do_wake = QUEUE_COUNT(&arb->moves, move_t) >= (threshold ? threshold : 1);
  }
  pthread_mutex_unlock(&arb->mu);
  if (do_wake) wake(arb);
}

/* Applies a patch to its chunk in the SMB when the chunk's move is still
 * in the batch with the chunk open (direct patching). Newest first: a
 * patch comes soon after its chunk left the writer. Under |mu|. */
static bool patch_in_place(tg_arbiter_t *arb, uint16_t writer_id,
                           uint32_t chunk_id, uint32_t offset,
                           const uint8_t data[4], bool more) {
  if (arb->open_moves == 0) return false;
  for (size_t i = QUEUE_COUNT(&arb->moves, move_t); i-- > 0;) {
    move_t *m = QUEUE_AT(&arb->moves, move_t, i);
    if (!m->open || m->writer_id != writer_id || m->chunk_id != chunk_id)
      continue;
    tg_smb_chunk_t c;
    uint32_t bm = tg_smb_page_bitmap(&arb->smb, m->page);
    if (tg_smb_chunk_locate(&arb->smb, m->page, m->chunk, bm, &c) < 0 ||
        c.size < TG_SMB_CHUNK_HEADER_SIZE + 4 ||
        offset > c.size - TG_SMB_CHUNK_HEADER_SIZE - 4) {
      /* Not ours to write: the service judges it. The chunk leaves
       * Complete with its flag set now, so that no later patch lands in
       * place ahead of this one. */
      release_open(arb, m);
      return false;
    }
    memcpy(c.begin + TG_SMB_CHUNK_HEADER_SIZE + offset, data, 4);
    arb->patches_in_place++;
    if (!more) {
      tg_smb_chunk_header_t *h = (tg_smb_chunk_header_t *)c.begin;
      uint16_t packets = atomic_load_explicit(&h->packets, memory_order_relaxed);
      atomic_store_explicit(
          &h->packets,
          tg_chunk_packets_pack(tg_chunk_packets_count(packets),
                                tg_chunk_packets_flags(packets) &
                                    ~(unsigned)TG_CHUNK_NEEDS_PATCHING),
          memory_order_relaxed);
      release_open(arb, m);
    }
    return true;
  }
  return false;
}

void tg_arbiter_patch_add(tg_arbiter_t *arb, uint16_t target_buffer,
                          uint16_t writer_id, uint32_t chunk_id,
                          uint32_t offset, const uint8_t data[4], bool more) {
  pthread_mutex_lock(&arb->mu);
  if (patch_in_place(arb, writer_id, chunk_id, offset, data, more)) {
    pthread_mutex_unlock(&arb->mu);
    return;
  }
  patch_t *p = QUEUE_PUSH(&arb->patches, patch_t);
  if (p) {
    *p = (patch_t){.move_seq = arb->moves_queued,
                   .chunk_id = chunk_id,
                   .offset = offset,
                   .target_buffer = target_buffer,
                   .writer_id = writer_id,
                   .more = more};
    memcpy(p->data, data, 4);
    atomic_fetch_add_explicit(&arb->pending, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&arb->mu);
}

/* --- CommitData ----------------------------------------------------------- */

void tg_arbiter_get_stats(const tg_arbiter_t *arb, tg_arbiter_stats_t *out) {
  tg_arbiter_t *a = (tg_arbiter_t *)arb; /* the mutex is not logically state */
  pthread_mutex_lock(&a->mu);
  out->chunks_committed = a->moves_taken;
  out->patches = a->patches_committed;
  out->patches_in_place = a->patches_in_place;
  pthread_mutex_unlock(&a->mu);
  out->stalls = atomic_load_explicit(&arb->stalls, memory_order_relaxed);
  out->packets_dropped =
      atomic_load_explicit(&arb->packets_dropped, memory_order_relaxed);
  out->drop_markers =
      atomic_load_explicit(&arb->drop_markers, memory_order_relaxed);
  out->chunks_reclaimed =
      atomic_load_explicit(&arb->chunks_reclaimed, memory_order_relaxed);
  out->chunk_misses =
      atomic_load_explicit(&arb->chunk_misses, memory_order_relaxed);
  out->near_misses =
      atomic_load_explicit(&arb->near_misses, memory_order_relaxed);
}

bool tg_arbiter_commit_pending(const tg_arbiter_t *arb) {
  /* Relaxed: a hint for a timer; take_commit reads the batch under the lock. */
  return atomic_load_explicit(&arb->pending, memory_order_relaxed) != 0;
}

/* Encoded sizes, matching what serialize() writes: every nested message
 * gets a 4-byte redundant length (the zero-copy writer's format). */
#define NESTED_OVERHEAD (1u + TG_PB_REDUNDANT_VARINT_SIZE) /* tag < 16 */

static size_t uint_field_size(uint64_t v) { return 1 + tg_pb_varint_size(v); }

static size_t move_size(const move_t *m) {
  return NESTED_OVERHEAD + uint_field_size(m->page) +
         uint_field_size(m->chunk) + uint_field_size(m->target_buffer);
}

static size_t patch_group_head_size(const patch_t *p) {
  return NESTED_OVERHEAD + uint_field_size(p->target_buffer) +
         uint_field_size(p->writer_id) + uint_field_size(p->chunk_id) +
         2u /* has_more_patches */;
}

static size_t patch_size(const patch_t *p) {
  return NESTED_OVERHEAD + uint_field_size(p->offset) + 2u + 4u;
}

static bool same_chunk(const patch_t *a, const patch_t *b) {
  return a->target_buffer == b->target_buffer && a->writer_id == b->writer_id &&
         a->chunk_id == b->chunk_id;
}

/* A patch group is a run of patches of the same chunk, cut after one whose
 * |more| is false. Returns the run length starting at |p[0]| (<= n). */
static size_t group_len(const patch_t *p, size_t n) {
  size_t k = 1;
  while (k < n && p[k - 1].more && same_chunk(&p[0], &p[k])) k++;
  return k;
}

/* Writes the taken moves and patches; |cut_more| forces has_more_patches on
 * the last group (it was split by the size cap). Returns items written. */
static int serialize(tg_pbw_t *w, const move_t *moves, size_t nmoves,
                     const patch_t *patches, size_t npatches, bool cut_more,
                     uint64_t flush_request_id) {
  int items = 0;
  for (size_t i = 0; i < nmoves; i++, items++) {
    tg_pbw_begin_nested(w, CDR_CHUNKS_TO_MOVE);
    tg_pbw_append_varint(w, MOVE_PAGE, moves[i].page);
    tg_pbw_append_varint(w, MOVE_CHUNK, moves[i].chunk);
    tg_pbw_append_varint(w, MOVE_TARGET_BUFFER, moves[i].target_buffer);
    tg_pbw_end_nested(w);
  }
  for (size_t i = 0; i < npatches; items++) {
    const patch_t *g = &patches[i];
    size_t k = group_len(g, npatches - i);
    bool more = g[k - 1].more || (cut_more && i + k == npatches);
    tg_pbw_begin_nested(w, CDR_CHUNKS_TO_PATCH);
    tg_pbw_append_varint(w, PATCHG_TARGET_BUFFER, g->target_buffer);
    tg_pbw_append_varint(w, PATCHG_WRITER_ID, g->writer_id);
    tg_pbw_append_varint(w, PATCHG_CHUNK_ID, g->chunk_id);
    for (size_t j = 0; j < k; j++) {
      tg_pbw_begin_nested(w, PATCHG_PATCHES);
      tg_pbw_append_varint(w, PATCH_OFFSET, g[j].offset);
      tg_pbw_append_bytes(w, PATCH_DATA, g[j].data, 4);
      tg_pbw_end_nested(w);
    }
    tg_pbw_append_bool(w, PATCHG_HAS_MORE, more);
    tg_pbw_end_nested(w);
    i += k;
  }
  if (flush_request_id)
    tg_pbw_append_varint(w, CDR_FLUSH_REQUEST_ID, flush_request_id);
  return tg_pbw_error(w) ? tg_pbw_error(w) : items;
}

int tg_arbiter_take_commit(tg_arbiter_t *arb, uint64_t flush_request_id,
                           size_t max_bytes, tg_buf_t *out) {
  size_t flush_size = flush_request_id ? uint_field_size(flush_request_id) : 0;
  size_t total = 0, nmoves = 0, npatches = 0;
  bool cut_more = false, emptied;
  int rv = 0;

  pthread_mutex_lock(&arb->mu);
  size_t moves_avail = QUEUE_COUNT(&arb->moves, move_t);
  size_t patches_avail = QUEUE_COUNT(&arb->patches, patch_t);
  move_t *take_moves =
      moves_avail ? (move_t *)tg_buf_reserve(&arb->take_moves,
                                             moves_avail * sizeof(move_t))
                  : NULL;
  patch_t *take_patches =
      patches_avail ? (patch_t *)tg_buf_reserve(&arb->take_patches,
                                                patches_avail * sizeof(patch_t))
                    : NULL;
  if ((moves_avail && !take_moves) || (patches_avail && !take_patches)) {
    pthread_mutex_unlock(&arb->mu);
    return -ENOMEM;
  }
  /* Moves first, in order, as many as fit. */
  for (; nmoves < moves_avail; nmoves++) {
    const move_t *m = QUEUE_AT(&arb->moves, move_t, nmoves);
    size_t s = move_size(m);
    if (total + s > max_bytes) break;
    total += s;
    take_moves[nmoves] = *m;
  }
  /* Then whole patch groups whose chunks' moves are out; a group too big
   * for an empty request on its own is split (has_more_patches on the cut).
   */
  uint64_t moves_out = arb->moves_taken + nmoves;
  while (npatches < patches_avail) {
    const patch_t *g = QUEUE_AT(&arb->patches, patch_t, npatches);
    if (g->move_seq > moves_out) break;
    size_t glen = 1;
    size_t gsize = patch_group_head_size(g) + patch_size(g);
    while (npatches + glen < patches_avail) {
      const patch_t *p = g + glen;
      if (!p[-1].more || !same_chunk(g, p) || p->move_seq > moves_out) break;
      gsize += patch_size(p);
      glen++;
    }
    if (total + gsize > max_bytes) {
      if (total != 0) break;
      /* Alone and too big: take the patches that fit. */
      size_t whole = glen;
      gsize = patch_group_head_size(g);
      for (glen = 0; glen < whole; glen++) {
        size_t s = patch_size(&g[glen]);
        if (gsize + s > max_bytes) break;
        gsize += s;
      }
      if (glen == 0) break;
      cut_more = true;
    }
    memcpy(&take_patches[npatches], g, glen * sizeof(*g));
    npatches += glen;
    total += gsize;
    if (cut_more) break;
  }
  emptied = nmoves == moves_avail && npatches == patches_avail;
  /* The flush id acknowledges everything committed before it: only in the
   * request that leaves nothing behind. */
  if (emptied && flush_size && total + flush_size > max_bytes) emptied = false;
  if (nmoves + npatches == 0 && !(emptied && flush_size)) {
    pthread_mutex_unlock(&arb->mu);
    return moves_avail + patches_avail ? TG_ENO_SPACE : 0;
  }
  uint64_t fid = emptied ? flush_request_id : 0;
  if (fid) total += flush_size;
  /* Reserved before anything leaves the batch: on failure nothing is lost. */
  uint8_t *dst = tg_buf_reserve(out, total);
  if (!dst) {
    pthread_mutex_unlock(&arb->mu);
    return -ENOMEM;
  }
  /* Chunks still open leave Complete, their patches to come by CommitData
   * (taken here from now on: patch_in_place() no longer finds them). */
  for (size_t i = 0; i < nmoves && arb->open_moves; i++) {
    move_t *m = QUEUE_AT(&arb->moves, move_t, i);
    if (m->open) release_open(arb, m);
  }
  QUEUE_POP(&arb->moves, move_t, nmoves);
  QUEUE_POP(&arb->patches, patch_t, npatches);
  arb->moves_taken += nmoves;
  arb->patches_committed += npatches;
  atomic_fetch_sub_explicit(&arb->pending, nmoves + npatches,
                            memory_order_relaxed);
  pthread_mutex_unlock(&arb->mu);

  /* Outside the lock: writers keep returning chunks meanwhile. */
  tg_pbw_t w;
  tg_pbw_init(&w, dst, total, NULL, NULL);
  rv = serialize(&w, take_moves, nmoves, take_patches, npatches,
                 cut_more, fid);
  if (rv < 0) return rv;
  assert((size_t)(w.cur - dst) == total); /* the size functions are exact */
  tg_buf_commit(out, total);
  return rv;
}
