/* A trace writer: one sequence of TracePackets ({producer, writer_id} in
 * the service), written by one thread straight into SMB chunks.
 *
 * A packet is written with the zero-copy protobuf writer (tracegate/pb_writer.h)
 * into fragments: [4-byte size][TracePacket bytes]. When a packet does not
 * fit in the rest of a chunk, the refill hook closes the fragment (its size
 * is known then), returns the chunk with LAST_PACKET_CONTINUES, takes the
 * next chunk (chunk_id + 1) and opens a continuation fragment
 * (FIRST_PACKET_CONTINUES), so packets of any size, also larger than the
 * whole SMB, go through. Sizes of nested messages that are still open when
 * their chunk leaves are written later as CommitData patches (the chunk is
 * flagged NEEDS_PATCHING); sizes whose chunk is still held are written in
 * place.
 *
 * When no chunk can be had (drop policy, or shut down): the packet is lost.
 * If part of it was already in a chunk, that fragment's size is set to
 * TG_PACKET_SIZE_DROP so that the service discards the whole packet; the
 * rest goes to a scratch buffer. The next packet that gets through carries
 * previous_packet_dropped = true (TracePacket field 42) as its first field.
 * A writer that found no chunk drops a backoff's worth of bytes before it
 * looks again (TG_TW_DROP_BACKOFF_*), so a full SMB is not scanned once per
 * packet, or, if that takes longer than TG_TW_DROP_RETRY_NS, looks near the
 * arbiter's cursor once per such period (a slow writer).
 * In stall mode a writer never waits while it holds a chunk: it returns the
 * current one (LAST_PACKET_CONTINUES) first, so any number of writers can
 * share an SMB of any size without deadlock. A loss that no drop marker
 * recorded (the packet found no chunk at all) is reported to the service
 * with a chunk holding a lone drop marker, taken before the next packet
 * that gets through: the service counts it (trace_writer_packet_loss) and
 * flags the sequence, whichever way the loss happened.
 *
 * Idle chunks. A writer keeps its chunk between packets, so a thread that
 * wrote once would hold a chunk for ever. The agent's thread takes it
 * back (tg_trace_writers_reclaim_idle) from writers that have written
 * nothing for a while, by an asymmetric Dekker handshake on two words:
 *   |hs| (the writer's): seq << 1 while idle, | TG_TW_BUSY inside a packet
 *        or a flush; the seq goes up at every packet end;
 *   |claim| (the agent's): non-zero while the agent may be at work.
 * Writer, at packet begin: store hs = BUSY (relaxed), then load claim
 * (acquire); if set, wait until it clears (the agent is done with the
 * writer's fields). At packet end: store hs = next idle word (release).
 * Agent, for a writer whose idle word it has seen unchanged for the idle
 * time: store claim = 1, membarrier(PRIVATE_EXPEDITED), load hs (acquire);
 * if hs is still that idle word, the writer is between packets and will
 * wait at its next begin: return its chunk as the writer would; in any
 * case store claim = 0 (release). The writer's side has no fence: the
 * membarrier makes every running thread pass a full barrier, so either the
 * agent sees BUSY and backs off, or the writer sees the claim and waits
 * (Linux's membarrier(2) "asymmetric fence" pattern). So no chunk is taken
 * back while a packet is open in it (fragments, patches of nested sizes,
 * the open fragment), and the writer simply finds itself without a chunk
 * at its next packet. Without membarrier (kernels before 4.14, filters)
 * nothing is taken back.
 *
 * Not thread-safe: one thread per writer (and the agent, through the
 * handshake). The fast path of begin/end takes no lock, makes no syscall,
 * does not allocate and has no atomic read-modify-write: a store and a
 * load of the writer's own cache line, and a store.
 */
#ifndef TRACEGATE_AGENT_TRACE_WRITER_H
#define TRACEGATE_AGENT_TRACE_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tracegate/pb_writer.h"
#include "abi/smb.h"
#include "agent/smb_arbiter.h"

/* TracePacket.previous_packet_dropped */
#define TG_TRACE_PACKET_PREVIOUS_PACKET_DROPPED 42

/* Where a nested size field went when its chunk left: end_nested writes the
 * final size into |bytes|, and the writer sends it as a CommitData patch at
 * the end of the packet (or earlier, when it needs the slot back). The slots
 * are a pool: at most TG_PBW_MAX_DEPTH nested messages are open at once. */
typedef struct tg_tw_patch_slot {
  uint8_t bytes[4];
  uint32_t chunk_id;
  uint32_t offset; /* from the chunk payload start */
  bool used;
} tg_tw_patch_slot_t;

/* |hs| bit; the rest of the word counts packets (and flushes). */
#define TG_TW_BUSY 1u /* the writer is in a packet or a flush */
#define TG_TW_SEQ_STEP 2u

typedef struct tg_trace_writer {
  tg_pbw_t pbw;      /* first: the public API hands out &w->pbw */
  _Atomic uint32_t hs;    /* handshake, the writer's word (see above) */
  _Atomic uint32_t claim; /* handshake, the agent's word */
  uint32_t hs_idle;       /* the idle word the writer stored last */
  tg_arbiter_t *arb; /* one reference held */
  uint16_t writer_id;
  uint16_t target_buffer;
  uint32_t next_chunk_id;

  tg_smb_chunk_t chunk; /* valid when has_chunk */
  bool has_chunk;
  unsigned chunk_packets; /* fragments begun in this chunk */
  unsigned chunk_flags;   /* TG_CHUNK_* flags for the header */
  uint8_t *frag_size;     /* size header of the open fragment */

  bool in_packet;
  /* The next packet's fragment is already open (size 0, counted): a
   * scraping service then knows every packet before it is complete, so a
   * flush brings in even the last packet of a thread that went idle. */
  bool preopened;
  bool end_slow;     /* end_packet has work beyond the size */
  bool dropping;     /* current packet is being discarded */
  bool prev_dropped; /* mark the next packet */
  /* A packet was lost without a drop marker in any chunk: the service
   * has not heard of it yet. */
  bool loss_unreported;
  bool drop_marked; /* the packet being dropped has its drop marker */
  /* A failed try for a chunk is a pass over every page header of the SMB,
   * lines the service is writing: a writer that found none drops this many
   * bytes before it tries again (0: try at the next packet), and the step
   * doubles while the SMB stays full (Perfetto's writer, for the same
   * reason, fills a garbage chunk before it retries). Most retries look
   * only near the cursor (TG_TW_FULL_LOOK_EVERY). */
  uint32_t drop_retry_after;
  uint32_t drop_backoff; /* the next step; 0 until a try fails */
  /* ... or until this time (tg_arbiter_now_ns), whichever comes first: a
   * slow writer's step of bytes would last seconds, and it would lose
   * everything it writes long after the SMB has room again. */
  uint64_t drop_retry_ns;
  uint32_t drop_looks;   /* retries since the last chunk (see take_chunk) */
  uint64_t packets_written;
  uint64_t packets_dropped;

  /* The agent's view, touched only by its idle pass (under the arbiter's
   * writer list lock): the word seen last, and since when. */
  tg_list_t agent_node;
  uint32_t agent_seen;
  bool agent_done; /* nothing to take back at |agent_seen| */
  uint64_t agent_since_ns;

  tg_tw_patch_slot_t patch_slots[TG_PBW_MAX_DEPTH];
  uint8_t scratch[256]; /* sink for a dropped packet's bytes */
} tg_trace_writer_t;

/* Registers a writer id with |arb| (takes a reference). Returns 0 or the
 * error of tg_arbiter_writer_register. No chunk is taken until the first
 * packet. */
int tg_trace_writer_init(tg_trace_writer_t *w, tg_arbiter_t *arb,
                         uint16_t target_buffer);

/* Finishes a packet still open, returns the current chunk (Complete),
 * unregisters the writer id and drops the reference. */
void tg_trace_writer_fini(tg_trace_writer_t *w);

/* A packet does not start in a chunk with less room than this: the chunk
 * is returned and the packet starts in a fresh one. */
#define TG_TW_MIN_PACKET_ROOM 8u

/* The backoff of a writer that found no chunk (drop policy): bytes dropped
 * before the first retry, and the most it grows to (or TG_TW_DROP_RETRY_NS,
 * whichever ends first). At the top step a
 * writer of 1 KiB packets pays one SMB pass per 256 packets lost, and a
 * service that frees chunks again is noticed within 256 KiB of data. */
#define TG_TW_DROP_BACKOFF_MIN 4096u
#define TG_TW_DROP_BACKOFF_MAX (256u * 1024u)
/* A writer also looks this long after its failed look (drop_retry_ns),
 * near the cursor only, before its step of bytes is dropped: one slower
 * than a step of bytes per period loses about a period's packets once the
 * SMB has room, not seconds of them, and thousands of such writers cost
 * a few page-header reads each per period. */
#define TG_TW_DROP_RETRY_NS 50000000u
/* Of the retries while backing off, all but every this-many-th look only
 * near the arbiter's cursor (tg_arbiter_chunk_try_get_near); the others
 * pass over the whole SMB, for chunks freed out of order. */
#define TG_TW_FULL_LOOK_EVERY 8u

/* Slow paths of begin/end (trace_writer.c). */
tg_pbw_t *tg__trace_writer_begin_contended(tg_trace_writer_t *w);
tg_pbw_t *tg__trace_writer_begin_slow(tg_trace_writer_t *w);
void tg__trace_writer_end_slow(tg_trace_writer_t *w);

/* The writer's side of the handshake (see above): announces BUSY, then
 * checks the agent's claim. True when the writer may go on; false when
 * the agent has claimed it (wait for the claim to clear, see
 * trace_writer.c). The signal fence only stops the compiler from moving
 * the load above the store; the agent's membarrier orders them in the
 * CPU. Acquire on the claim pairs with the agent's release of it, so the
 * writer sees what the agent changed. */
static inline bool tg__trace_writer_try_enter(tg_trace_writer_t *w) {
  atomic_store_explicit(&w->hs, w->hs_idle | TG_TW_BUSY,
                        memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
  return atomic_load_explicit(&w->claim, memory_order_acquire) == 0;
}

/* Leaves with the next idle word. Release: pairs with the agent's acquire
 * load of |hs|, so the agent sees the chunk as the writer left it. */
static inline void tg__trace_writer_leave(tg_trace_writer_t *w) {
  w->hs_idle += TG_TW_SEQ_STEP;
  atomic_store_explicit(&w->hs, w->hs_idle, memory_order_release);
}

/* begin_packet once |hs| is the writer's. */
static inline tg_pbw_t *tg__trace_writer_begin_entered(tg_trace_writer_t *w) {
  if (__builtin_expect(w->preopened, 1)) {
    w->preopened = false;
    w->pbw.seg_start = w->pbw.cur;
    w->pbw.seg_base = 0;
    w->pbw.depth = 0;
    w->in_packet = true;
    return &w->pbw;
  }
  uint8_t *p = w->pbw.cur;
  /* Without a chunk, cur == end: the room check fails. */
  if (__builtin_expect((size_t)(w->pbw.end - p) >= TG_TW_MIN_PACKET_ROOM &&
                           w->chunk_packets < TG_CHUNK_MAX_PACKETS,
                       1)) {
    memcpy(p, "\x80\x80\x80\x00", 4); /* size 0: being written */
    w->frag_size = p;
    w->pbw.cur = w->pbw.seg_start = p + TG_PACKET_HEADER_SIZE;
    w->pbw.seg_base = 0;
    w->pbw.depth = 0;
    w->in_packet = true;
    tg_smb_chunk_set_packets(&w->chunk, ++w->chunk_packets, w->chunk_flags);
    return &w->pbw;
  }
  return tg__trace_writer_begin_slow(w);
}

/* Starts a packet; returns the pb writer positioned at the TracePacket's
 * first field (valid until end_packet). Never fails: a packet that cannot be
 * stored is counted as dropped at end time. Calling it inside a packet ends
 * that packet first.
 *
 * Fast path: the handshake; then the fragment opened by the previous
 * end_packet is taken as it is, or, when the current chunk has room, a
 * fragment is opened and the chunk's new fragment count published (one
 * release store). */
static inline tg_pbw_t *tg_trace_writer_begin_packet(tg_trace_writer_t *w) {
  if (__builtin_expect(!w->in_packet && tg__trace_writer_try_enter(w), 1))
    return tg__trace_writer_begin_entered(w);
  return tg__trace_writer_begin_contended(w);
}

/* Finishes the packet: writes its last fragment's size, sends the patches
 * of nested sizes that left with earlier chunks, bumps counters, and opens
 * the next fragment when the chunk has room for one. A packet
 * whose pb writer failed (nesting too deep, a nested message of 256 MiB or
 * more) is dropped. Outside a packet it does nothing. */
static inline void tg_trace_writer_end_packet(tg_trace_writer_t *w) {
  if (__builtin_expect(w->in_packet && !w->end_slow && !w->pbw.error, 1)) {
    uint32_t size =
        (uint32_t)(w->pbw.cur - w->frag_size - TG_PACKET_HEADER_SIZE);
    /* Every fragment is opened with size 0 (80 80 80 00) and its header
     * is written again only here or by a drop (which leaves the fast
     * path): under 128 bytes only the first byte differs. */
    if (__builtin_expect(size < 0x80, 1))
      w->frag_size[0] = (uint8_t)(size | 0x80);
    else
      tg_pb_write_redundant_varint(w->frag_size, size);
    w->in_packet = false;
    w->packets_written++;
    /* Open the next packet's fragment now (see |preopened|). */
    uint8_t *p = w->pbw.cur;
    if ((size_t)(w->pbw.end - p) >= TG_TW_MIN_PACKET_ROOM &&
        w->chunk_packets < TG_CHUNK_MAX_PACKETS) {
      memcpy(p, "\x80\x80\x80\x00", 4); /* size 0: being written */
      w->frag_size = p;
      w->pbw.cur = p + TG_PACKET_HEADER_SIZE;
      w->preopened = true;
      tg_smb_chunk_set_packets(&w->chunk, ++w->chunk_packets, w->chunk_flags);
    }
    tg__trace_writer_leave(w);
    return;
  }
  tg__trace_writer_end_slow(w);
}

/* Packets this writer lost so far (drop policy, or shut down): a count
 * that only grows. A sequence whose incremental state rides on its own
 * packets (interned names, descriptors, the clock's origin) compares it
 * with the count it last saw to learn, on its next packet and without
 * the agent's thread, that some of that state may have been lost. The
 * writer's own thread only. */
static inline uint64_t tg_trace_writer_packets_dropped(
    const tg_trace_writer_t *w) {
  return w->packets_dropped;
}

/* Whether the packet being written is being dropped (no chunk could be
 * had for it): what is written into it goes nowhere. Writer's thread. */
static inline bool tg_trace_writer_dropping(const tg_trace_writer_t *w) {
  return w->in_packet && w->dropping;
}

/* Inside a packet: it is lost on purpose, dropped at its end as if no
 * chunk could be had for it (counted in packets_dropped and the arbiter's
 * stats, the sequence's next packet marked previous_packet_dropped, and
 * its bytes counted towards the drop backoff like any dropped packet's).
 * For a packet that must not be read: one that refers to incremental
 * state that did not reach the service. Outside a packet: nothing. */
void tg_trace_writer_cancel_packet(tg_trace_writer_t *w);

/* Returns the partial chunk now (Complete, queued for commit). Inside a
 * packet it does nothing: the chunk leaves when the packet is done or
 * moves on. */
void tg_trace_writer_flush(tg_trace_writer_t *w);

/* Agent's thread: takes back the chunks of |arb|'s writers whose |hs| has
 * not changed for |idle_ns| (0: any writer between packets) as of |now_ns|
 * (CLOCK_MONOTONIC), as a flush by the writer would. Returns how many
 * chunks it took back (also counted in the arbiter's stats); 0 when the
 * kernel has no membarrier. One caller at a time per arbiter. */
size_t tg_trace_writers_reclaim_idle(tg_arbiter_t *arb, uint64_t now_ns,
                                     uint64_t idle_ns);

/* Whether the writer holds a chunk, read through the handshake (for
 * tests, from any thread; waits while the writer is in a packet). */
bool tg_trace_writer_holds_chunk(tg_trace_writer_t *w);

#endif /* TRACEGATE_AGENT_TRACE_WRITER_H */
