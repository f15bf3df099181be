/* Trace writer slow paths (agent/trace_writer.h): chunk changes, packet
 * fragmentation, patches of nested sizes, and dropping.
 *
 * The writer is always in one of three places:
 *   - in a chunk: pbw.cur/end inside w->chunk (between packets too, so the
 *     next begin_packet takes the inline fast path);
 *   - nowhere: no chunk, pbw.cur == pbw.end == w->scratch (room 0, so every
 *     begin_packet comes here);
 *   - dropping: inside a packet that lost its chunk, pbw.cur/end cycle over
 *     w->scratch until end_packet.
 * It never writes into a chunk it has returned: every pointer into one (the
 * open fragment's size, nested size fields) is moved or cleared first.
 * Between packets the agent may move it from "in a chunk" to "nowhere"
 * (tg_trace_writers_reclaim_idle), under the handshake of |hs|.
 */
#include "agent/trace_writer.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracegate/error.h"

/* A writer that finds itself claimed by the agent spins this many times
 * before yielding the CPU: the claim lasts one membarrier and a batch of
 * chunk returns (microseconds). */
#define ENTER_SPINS 64u

static int tw_refill(void *ctx, tg_pbw_t *pbw, size_t min_contiguous);

static uint8_t *chunk_payload(const tg_smb_chunk_t *c) {
  return c->begin + TG_SMB_CHUNK_HEADER_SIZE;
}
static uint8_t *chunk_end(const tg_smb_chunk_t *c) {
  return c->begin + c->size;
}

static void go_nowhere(tg_trace_writer_t *w) {
  w->pbw.cur = w->pbw.end = w->pbw.seg_start = w->scratch;
}

static void go_scratch(tg_trace_writer_t *w) {
  w->pbw.cur = w->pbw.seg_start = w->scratch;
  w->pbw.end = w->scratch + sizeof(w->scratch);
}

int tg_trace_writer_init(tg_trace_writer_t *w, tg_arbiter_t *arb,
                         uint16_t target_buffer) {
  memset(w, 0, sizeof(*w));
  atomic_init(&w->hs, 0);
  atomic_init(&w->claim, 0);
  tg_list_init(&w->agent_node);
  int id = tg_arbiter_writer_register(arb, target_buffer);
  if (id < 0) return id;
  tg_arbiter_ref(arb);
  w->arb = arb;
  w->writer_id = (uint16_t)id;
  w->target_buffer = target_buffer;
  tg_pbw_init(&w->pbw, w->scratch, 0, tw_refill, w);
  /* Last: the list's lock publishes the fields above to the agent. */
  tg_arbiter_writer_attach(arb, &w->agent_node);
  return 0;
}

void tg_trace_writer_fini(tg_trace_writer_t *w) {
  if (!w->arb) return;
  if (w->in_packet) tg_trace_writer_end_packet(w);
  tg_trace_writer_flush(w);
  /* After this the agent's pass no longer sees the writer. */
  tg_arbiter_writer_detach(w->arb, &w->agent_node);
  tg_arbiter_writer_unregister(w->arb, w->writer_id);
  tg_arbiter_unref(w->arb);
  w->arb = NULL;
}

/* --- the handshake with the agent ------------------------------------------ */

/* The agent claimed the writer: it may be returning the chunk. BUSY is
 * announced already, so the agent backs off or finishes; wait for the
 * claim to clear (acquire: pairs with the agent's release). */
static void wait_claim(tg_trace_writer_t *w) {
  for (unsigned i = 0;
       atomic_load_explicit(&w->claim, memory_order_acquire) != 0; i++)
    if (i >= ENTER_SPINS) sched_yield();
}

/* Outside a packet only. */
static void enter(tg_trace_writer_t *w) {
  if (!tg__trace_writer_try_enter(w)) wait_claim(w);
}

tg_pbw_t *tg__trace_writer_begin_contended(tg_trace_writer_t *w) {
  if (w->in_packet) {
    /* BUSY already: end that packet, then begin as usual. */
    tg_trace_writer_end_packet(w);
    return tg_trace_writer_begin_packet(w);
  }
  wait_claim(w); /* BUSY is announced */
  return tg__trace_writer_begin_entered(w);
}

/* --- chunks --------------------------------------------------------------- */

/* A chunk with the next id; |wait|: by the arbiter's policy, else one try.
 * A retry while backing off looks near the cursor, and only every
 * TG_TW_FULL_LOOK_EVERY-th one passes over the whole SMB.
 * A failure starts (or doubles) the drop backoff, a success ends it. */
static bool take_chunk(tg_trace_writer_t *w, tg_smb_chunk_t *out, bool wait) {
  int rv;
  if (wait && w->drop_backoff && !tg_arbiter_stalls_when_full(w->arb) &&
      ++w->drop_looks % TG_TW_FULL_LOOK_EVERY)
    rv = tg_arbiter_chunk_try_get_near(w->arb, w->writer_id, w->next_chunk_id,
                                       out);
  else if (wait)
    rv = tg_arbiter_chunk_get(w->arb, w->writer_id, w->next_chunk_id, out);
  else
    rv = tg_arbiter_chunk_try_get(w->arb, w->writer_id, w->next_chunk_id, out);
  if (rv == 0) {
    w->drop_retry_after = w->drop_backoff = 0;
    w->drop_looks = 0;
    return true;
  }
  uint32_t step = w->drop_backoff ? w->drop_backoff : TG_TW_DROP_BACKOFF_MIN;
  w->drop_retry_after = step;
  w->drop_retry_ns = tg_arbiter_now_ns(w->arb) + TG_TW_DROP_RETRY_NS;
  w->drop_backoff =
      step < TG_TW_DROP_BACKOFF_MAX / 2 ? 2 * step : TG_TW_DROP_BACKOFF_MAX;
  return false;
}

/* A writer backing off whose time is up before its step of bytes (a slow
 * writer): one look near the cursor, the cheapest there is. Thousands of
 * slow writers each doing so every period cost the SMB's page headers a
 * few reads each, where passes over the whole SMB would cost all of them
 * and keep it full. A miss leaves the step as it was, and waits another
 * period. */
static bool take_chunk_by_time(tg_trace_writer_t *w, tg_smb_chunk_t *out) {
  uint64_t now = tg_arbiter_now_ns(w->arb);
  if (now < w->drop_retry_ns) return false;
  if (tg_arbiter_chunk_try_get_near(w->arb, w->writer_id, w->next_chunk_id,
                                    out) == 0) {
    w->drop_retry_after = w->drop_backoff = 0;
    w->drop_looks = 0;
    return true;
  }
  w->drop_retry_ns = now + TG_TW_DROP_RETRY_NS;
  return false;
}

/* A chunk for a writer that has none (see take_chunk): while backing off
 * only when its step of bytes is dropped or its time is up. */
static bool take_chunk_when_due(tg_trace_writer_t *w, tg_smb_chunk_t *out) {
  if (w->drop_retry_after == 0) return take_chunk(w, out, true);
  return take_chunk_by_time(w, out);
}

/* |n| bytes of a dropped packet went to scratch: the backoff moves on. */
static void count_dropped_bytes(tg_trace_writer_t *w, size_t n) {
  w->drop_retry_after = n >= w->drop_retry_after
                            ? 0
                            : w->drop_retry_after - (uint32_t)n;
}

/* Makes |c| the current chunk. Ids stay consecutive: only chunks we got
 * use one, and the current chunk's id is always next_chunk_id - 1. */
static void use_chunk(tg_trace_writer_t *w, const tg_smb_chunk_t *c,
                      unsigned flags) {
  w->next_chunk_id++;
  w->chunk = *c;
  w->has_chunk = true;
  w->chunk_packets = 0;
  w->chunk_flags = flags;
  w->pbw.cur = w->pbw.seg_start = chunk_payload(c);
  w->pbw.end = chunk_end(c);
}

/* Publishes the final count and flags and hands the chunk to the arbiter
 * (Complete, queued for CommitData). */
static void give_back_chunk(tg_trace_writer_t *w) {
  if (w->preopened) {
    /* The fragment opened for a packet that never came is not sent. */
    w->preopened = false;
    w->chunk_packets--;
    w->pbw.cur -= TG_PACKET_HEADER_SIZE;
  }
  tg_smb_chunk_set_packets(&w->chunk, w->chunk_packets, w->chunk_flags);
  tg_arbiter_chunk_return(w->arb, &w->chunk, w->target_buffer);
  w->has_chunk = false;
}

/* Opens a fragment at |p| in the current chunk (size 0 until it is closed;
 * the count published includes it, so a scraping service stops there). */
static void open_fragment(tg_trace_writer_t *w, uint8_t *p) {
  tg_pb_write_redundant_varint(p, 0);
  w->frag_size = p;
  w->chunk_packets++;
  tg_smb_chunk_set_packets(&w->chunk, w->chunk_packets, w->chunk_flags);
  w->pbw.cur = w->pbw.seg_start = p + TG_PACKET_HEADER_SIZE;
  w->pbw.end = chunk_end(&w->chunk);
}

static void close_fragment(tg_trace_writer_t *w) {
  tg_pb_write_redundant_varint(
      w->frag_size,
      (uint32_t)(w->pbw.cur - w->frag_size - TG_PACKET_HEADER_SIZE));
}

/* --- patch slots ---------------------------------------------------------- */

static bool slot_open(const tg_trace_writer_t *w, const tg_tw_patch_slot_t *s) {
  for (unsigned i = 0; i < w->pbw.depth; i++)
    if (w->pbw.nest[i].size_field == s->bytes) return true;
  return false;
}

/* Queues the patches of used slots: all of them (|all|), or only those whose
 * nested message is closed (its size is final). Patches of one chunk go in a
 * row; the last one says has_more_patches when an open slot of the same
 * chunk will send another later. */
static void flush_slots(tg_trace_writer_t *w, bool all) {
  enum { N = TG_PBW_MAX_DEPTH };
  bool send[N];
  for (unsigned i = 0; i < N; i++)
    send[i] =
        w->patch_slots[i].used && (all || !slot_open(w, &w->patch_slots[i]));
  for (unsigned i = 0; i < N; i++) {
    if (!send[i]) continue;
    uint32_t id = w->patch_slots[i].chunk_id;
    bool later = false;
    for (unsigned k = 0; k < N; k++)
      if (w->patch_slots[k].used && !send[k] &&
          w->patch_slots[k].chunk_id == id)
        later = true;
    for (unsigned j = i; j < N; j++) {
      if (!send[j] || w->patch_slots[j].chunk_id != id) continue;
      bool last = true;
      for (unsigned k = j + 1; k < N; k++)
        if (send[k] && w->patch_slots[k].chunk_id == id) last = false;
      tg_tw_patch_slot_t *s = &w->patch_slots[j];
      tg_arbiter_patch_add(w->arb, w->target_buffer, w->writer_id, id,
                           s->offset, s->bytes, last ? later : true);
      s->used = false;
      send[j] = false;
    }
  }
}

static tg_tw_patch_slot_t *slot_alloc(tg_trace_writer_t *w) {
  for (int pass = 0; pass < 2; pass++) {
    for (unsigned i = 0; i < TG_PBW_MAX_DEPTH; i++)
      if (!w->patch_slots[i].used) return &w->patch_slots[i];
    /* At most depth - 1 slots belong to open messages while one is being
     * moved: sending the closed ones frees at least one. */
    flush_slots(w, false);
  }
  return NULL; /* unreachable */
}

/* The current chunk is leaving: size fields of open nested messages that lie
 * in it move to patch slots. Returns true if any did. */
static bool move_size_fields(tg_trace_writer_t *w) {
  uintptr_t lo = (uintptr_t)w->chunk.begin;
  uintptr_t hi = lo + w->chunk.size;
  bool any = false;
  for (unsigned i = 0; i < w->pbw.depth; i++) {
    uint8_t *sf = w->pbw.nest[i].size_field;
    if (!sf || (uintptr_t)sf < lo || (uintptr_t)sf >= hi) continue;
    tg_tw_patch_slot_t *s = slot_alloc(w);
    if (!s) { /* cannot happen; never write into a returned chunk */
      w->pbw.nest[i].size_field = NULL;
      continue;
    }
    memcpy(s->bytes, sf, sizeof(s->bytes));
    s->chunk_id = w->next_chunk_id - 1u; /* the current chunk's id */
    s->offset = (uint32_t)(sf - chunk_payload(&w->chunk));
    s->used = true;
    w->pbw.nest[i].size_field = s->bytes;
    any = true;
  }
  return any;
}

/* --- dropping ------------------------------------------------------------- */

/* The packet cannot be stored. Its fragment in the current chunk becomes a
 * drop marker (the service then discards the fragments it already has in
 * earlier chunks too), the chunk leaves, and the rest of the packet goes to
 * scratch. */
static void drop_packet(tg_trace_writer_t *w) {
  w->drop_marked = false;
  if (w->has_chunk && w->frag_size) {
    tg_pb_write_redundant_varint(w->frag_size, TG_PACKET_SIZE_DROP);
    give_back_chunk(w);
    w->drop_marked = true;
    tg_arbiter_count_drop(w->arb, 0, 1);
  }
  w->frag_size = NULL;
  for (unsigned i = 0; i < w->pbw.depth; i++) w->pbw.nest[i].size_field = NULL;
  /* Chunks this packet left wait for these patches in the service: send
   * them (the content no longer matters) so their sequence moves on. */
  flush_slots(w, true);
  w->dropping = true;
  w->end_slow = true;
  go_scratch(w);
}

/* Tells the service of a loss no chunk recorded: |w| just got a fresh
 * chunk; it becomes one lone drop marker and leaves. The packet being
 * begun then needs another chunk. */
static void report_loss(tg_trace_writer_t *w) {
  open_fragment(w, w->pbw.cur);
  tg_pb_write_redundant_varint(w->frag_size, TG_PACKET_SIZE_DROP);
  w->frag_size = NULL;
  give_back_chunk(w);
  go_nowhere(w);
  w->loss_unreported = false;
  tg_arbiter_count_drop(w->arb, 0, 1);
}

/* --- packets -------------------------------------------------------------- */

/* begin_packet when the current chunk has no room (or there is none). The
 * writer holds |hs|, and is not in a packet. */
tg_pbw_t *tg__trace_writer_begin_slow(tg_trace_writer_t *w) {
  if (w->has_chunk &&
      ((size_t)(chunk_end(&w->chunk) - w->pbw.cur) < TG_TW_MIN_PACKET_ROOM ||
       w->chunk_packets >= TG_CHUNK_MAX_PACKETS)) {
    give_back_chunk(w);
    go_nowhere(w);
  }
  w->in_packet = true;
  w->end_slow = false;
  w->drop_marked = false;
  w->pbw.error = 0;
  w->pbw.depth = 0;
  w->pbw.seg_base = 0;
  if (!w->has_chunk) {
    tg_smb_chunk_t c;
    /* Backing off: this packet is dropped without a look at the SMB. */
    bool got = take_chunk_when_due(w, &c);
    if (got && w->loss_unreported) {
      use_chunk(w, &c, 0);
      report_loss(w);
      /* If this packet is lost too, the marker just sent covers it: a
       * starving SMB must not turn every chunk into a marker. */
      w->drop_marked = true;
      got = take_chunk(w, &c, true);
    }
    if (!got) {
      w->frag_size = NULL; /* no fragment anywhere to mark */
      w->dropping = true;
      w->end_slow = true;
      go_scratch(w);
      return &w->pbw;
    }
    use_chunk(w, &c, 0);
  }
  open_fragment(w, w->pbw.cur);
  if (w->prev_dropped) {
    /* First field, so that the service and readers see it up front. Fits:
     * the fragment has at least 4 bytes of room. */
    w->prev_dropped = false;
    tg_pbw_append_bool(&w->pbw, TG_TRACE_PACKET_PREVIOUS_PACKET_DROPPED, true);
  }
  return &w->pbw;
}

void tg__trace_writer_end_slow(tg_trace_writer_t *w) {
  if (!w->in_packet) return; /* |hs| is not ours: leave it alone */
  if (w->pbw.error && !w->dropping) drop_packet(w);
  if (w->dropping) {
    /* At least a header's worth, so that empty packets move it too. */
    size_t n = (size_t)(w->pbw.cur - w->scratch);
    count_dropped_bytes(w, n > TG_PACKET_HEADER_SIZE ? n : TG_PACKET_HEADER_SIZE);
    w->dropping = false;
    w->packets_dropped++;
    w->prev_dropped = true;
    if (!w->drop_marked) w->loss_unreported = true;
    tg_arbiter_count_drop(w->arb, 1, 0);
    w->pbw.error = 0;
    go_nowhere(w);
  } else {
    close_fragment(w);
    flush_slots(w, true);
    w->packets_written++;
  }
  w->in_packet = false;
  w->end_slow = false;
  w->pbw.depth = 0;
  tg__trace_writer_leave(w);
}

void tg_trace_writer_cancel_packet(tg_trace_writer_t *w) {
  /* An error turns the end into a drop (drop_packet: the fragment becomes
   * a drop marker); a packet already dropping ends as one anyway. */
  if (w->in_packet && !w->dropping && !w->pbw.error)
    w->pbw.error = -ECANCELED;
}

void tg_trace_writer_flush(tg_trace_writer_t *w) {
  if (w->in_packet) return;
  enter(w);
  if (w->has_chunk) {
    give_back_chunk(w);
    go_nowhere(w);
  }
  tg__trace_writer_leave(w);
}

/* The pb writer ran out of room. In a packet with a chunk: continue it in
 * the next chunk, or drop it if there is none.
 *
 * The next chunk is tried before the current one leaves, so that a packet
 * that cannot go on can still be marked dropped in the chunk holding its
 * last fragment. In stall mode a failed try returns the current chunk
 * before waiting: a writer must not wait while holding a chunk, or writers
 * as many as the SMB's chunks, each holding one, would wait for ever. */
static int tw_refill(void *ctx, tg_pbw_t *pbw, size_t min_contiguous) {
  tg_trace_writer_t *w = ctx;
  /* Every chunk holds far more than a fragment header plus the 4 bytes a
   * size field needs, so a fresh chunk always satisfies |min_contiguous|. */
  (void)min_contiguous;
  if (!w->in_packet || w->dropping || !w->has_chunk) {
    if (w->dropping) count_dropped_bytes(w, (size_t)(pbw->cur - w->scratch));
    go_scratch(w); /* bytes nobody will read */
    return 0;
  }
  tg_smb_chunk_t next;
  bool have_next = take_chunk(w, &next, false);
  if (!have_next && !tg_arbiter_stalls_when_full(w->arb)) {
    drop_packet(w);
    return 0;
  }
  close_fragment(w);
  w->chunk_flags |= TG_CHUNK_LAST_PACKET_CONTINUES;
  if (move_size_fields(w)) {
    w->chunk_flags |= TG_CHUNK_NEEDS_PATCHING;
    w->end_slow = true;
  }
  give_back_chunk(w);
  if (!have_next && !take_chunk(w, &next, true)) {
    /* Shut down while stalled. The fragments out say "continues": the
     * service drops the packet when it sees the producer gone. */
    w->frag_size = NULL;
    drop_packet(w);
    return 0;
  }
  use_chunk(w, &next, TG_CHUNK_FIRST_PACKET_CONTINUES);
  open_fragment(w, pbw->cur);
  return 0;
}

/* --- the agent's side of the handshake ------------------------------------ */

/* membarrier(2): registered once per process; false when the kernel (or a
 * seccomp filter) refuses it, and then nothing is ever taken back. */
static pthread_once_t g_membarrier_once = PTHREAD_ONCE_INIT;
static bool g_membarrier_ok;

static void membarrier_register(void) {
  g_membarrier_ok = syscall(SYS_membarrier,
                            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
                            0) == 0;
}

static bool membarrier_usable(void) {
  pthread_once(&g_membarrier_once, membarrier_register);
  return g_membarrier_ok;
}

/* Every thread of the process that is running passes a full barrier before
 * this returns (the writers' half of the Dekker handshake). */
static void membarrier_all(void) {
  syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

static void claim_set(tg_trace_writer_t *w) {
  atomic_store_explicit(&w->claim, 1, memory_order_relaxed);
}

/* After membarrier_all(): true when |w| is still between packets with
 * the idle word |idle| (it will wait for the claim at its next begin), so
 * its fields are the agent's until claim_clear(). Acquire pairs with the
 * writer's release of the idle word. */
static bool claim_won(tg_trace_writer_t *w, uint32_t idle) {
  return atomic_load_explicit(&w->hs, memory_order_acquire) == idle;
}

/* Release pairs with the writer's acquire of the claim: it sees what the
 * agent changed. */
static void claim_clear(tg_trace_writer_t *w) {
  atomic_store_explicit(&w->claim, 0, memory_order_release);
}

bool tg_trace_writer_holds_chunk(tg_trace_writer_t *w) {
  if (!membarrier_usable()) return true; /* cannot look without a race */
  for (unsigned i = 0;; i++) {
    uint32_t idle = atomic_load_explicit(&w->hs, memory_order_relaxed);
    if (!(idle & TG_TW_BUSY)) {
      claim_set(w);
      membarrier_all();
      bool won = claim_won(w, idle);
      bool held = won && w->has_chunk;
      claim_clear(w);
      if (won) return held;
    }
    if (i >= ENTER_SPINS) sched_yield();
  }
}

/* --- the agent's idle pass ------------------------------------------------ */

/* Writers claimed per membarrier: bounds how long a writer that begins a
 * packet during the pass waits for its claim to clear. */
#define CLAIM_BATCH 64u

typedef struct reclaim_pass {
  uint64_t now_ns, idle_ns;
  size_t reclaimed;
  size_t n;
  tg_trace_writer_t *batch[CLAIM_BATCH];
} reclaim_pass_t;

/* Claims the batch, one membarrier, then takes the chunks of the writers
 * still idle. Under the writer list's lock: no writer in the batch can be
 * detached (and freed) before its claim is cleared. */
static void reclaim_batch(reclaim_pass_t *p) {
  if (p->n == 0) return;
  for (size_t i = 0; i < p->n; i++) claim_set(p->batch[i]);
  membarrier_all();
  for (size_t i = 0; i < p->n; i++) {
    tg_trace_writer_t *w = p->batch[i];
    if (claim_won(w, w->agent_seen)) {
      if (w->has_chunk) {
        give_back_chunk(w);
        go_nowhere(w);
        tg_arbiter_count_reclaim(w->arb);
        p->reclaimed++;
      }
      w->agent_done = true;
    }
    claim_clear(w);
  }
  p->n = 0;
}

static void reclaim_end(void *ctx) { reclaim_batch(ctx); }

static void reclaim_visit(void *ctx, tg_list_t *node) {
  reclaim_pass_t *p = ctx;
  tg_trace_writer_t *w = TG_CONTAINER_OF(node, tg_trace_writer_t, agent_node);
  uint32_t word = atomic_load_explicit(&w->hs, memory_order_relaxed);
  if (word != w->agent_seen) {
    w->agent_seen = word;
    w->agent_since_ns = p->now_ns;
    w->agent_done = false;
    if (p->idle_ns) return;
  }
  if (w->agent_done || (word & TG_TW_BUSY) ||
      p->now_ns - w->agent_since_ns < p->idle_ns)
    return;
  p->batch[p->n++] = w;
  if (p->n == CLAIM_BATCH) reclaim_batch(p);
}

size_t tg_trace_writers_reclaim_idle(tg_arbiter_t *arb, uint64_t now_ns,
                                     uint64_t idle_ns) {
  if (!membarrier_usable()) return 0;
  reclaim_pass_t p = {.now_ns = now_ns, .idle_ns = idle_ns};
  tg_arbiter_for_each_writer(arb, reclaim_visit, reclaim_end, &p);
  return p.reclaimed;
}
