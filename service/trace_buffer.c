/* The central trace buffer (service/trace_buffer.h).
 *
 * Owns one contiguous ring of records and a per-sequence index into it. It
 * must never trust chunk bytes beyond what tg_chunk_validate() vouched for
 * on the copy in the ring, never allocate per chunk in steady state, and
 * never let one sequence's stall or garbage hold up another sequence.
 *
 * Ring. A record is a rec_t header followed by the chunk copy, padded to 8
 * bytes. Records are appended at |wr| and leave from |head|, oldest first;
 * one that would straddle the end leaves the tail as padding and wraps:
 *
 *   unwrapped: [ free ][head .. records .. wr)[ free ]
 *   wrapped:   [ records .. wr)[ free ][head .. records .. wrap_at)[ pad ]
 *
 * A record is live while it is in its sequence's index. Reading it to the
 * end, or overwriting it, takes it out; its bytes are reclaimed when it
 * reaches the head, so a record read early waits behind older ones.
 *
 * Room. A chunk is copied whole, but a complete one keeps only the bytes
 * its fragments cover (the analysis of the copy says how many, drop
 * markers and malformed headers included): a writer that commits a chunk
 * part full (an idle thread, a flush) costs the ring what it wrote, not
 * the chunk's size, and the ring holds that much more history. Validating
 * that prefix again (a patch, producer_gone) finds what the whole copy
 * gave. The newest record gives its unused tail back to the ring at once;
 * an older one (re-committed in place) keeps its room. A scraped chunk
 * (incomplete) or one waiting for patches keeps its full size: its
 * complete copy, or a patch, may still need it. A copy first needs room
 * for the whole chunk, since its extent is only known from the copy: the
 * ring overwrites (or DISCARD refuses) as if the chunk were full, and the
 * bytes given back take the next records.
 *
 * Index. Sequences ({producer, writer}) live in an array found through an
 * open-addressing hash table. Each keeps a ring deque of {chunk id, record
 * offset} sorted by chunk id in serial-number order relative to its front:
 * appends and front pops are O(1); only out-of-order commits and evictions
 * of a non-front chunk shift entries. A hostile producer whose ids span
 * more than 2^31 only scrambles the order of its own sequence.
 *
 * Reading. Round robin, one packet at a time, over a list of sequences
 * that may have something to read. A sequence that stalls leaves the list
 * until something happens to it (a chunk, a patch, an overwrite,
 * producer_gone), so stalled sequences cost nothing per read. The reader
 * works on a sequence's front chunk and reassembles a fragmented packet by
 * walking the following index entries; nothing is consumed until the whole
 * packet is there.
 *
 * Stall or gap. A hole in the chunk ids *between* two chunks present in
 * the buffer is final: the missing chunk was overwritten, discarded or lost
 * in the SMB, and waiting for it could stall the sequence for ever. The
 * reader skips it and flags previous_packet_dropped (like Perfetto, this
 * assumes out-of-order commits, i.e. SMB scraping, arrive together before a
 * read). Only the newest end of a sequence waits: a packet continuing past
 * the newest chunk present, a chunk that needs patching, or an incomplete
 * (scraped) chunk stalls the sequence until the chunk arrives, is patched,
 * is committed complete, is overwritten, or its producer is gone; a packet
 * waiting for a chunk that was discarded (or followed by a discarded one)
 * is dropped at once, or in DISCARD mode it would pin the ring. A chunk
 * whose id the reader has already passed is discarded (chunks_discarded,
 * TG_ENO_SPACE) rather than read out of order, unless the sequence holds
 * nothing: then it starts afresh, flagged as a loss (a recycled writer id
 * restarts at chunk 0).
 *
 * Scraped chunks. The last fragment of an incomplete chunk is never read,
 * even with its size set: the writer may be about to flag it as continuing
 * in the next chunk. Earlier fragments are read and remembered, so the
 * complete copy does not return them twice. A flush also scrapes Complete
 * chunks whose CommitData has not come yet; when the reader took such a
 * copy whole before that CommitData (or the next flush's scrape) brings
 * the same bytes again, the sequence remembers it (the last 64 chunk ids)
 * and the copy is dropped: neither discarded (a loss) nor read twice.
 *
 * Losses. Writer drop markers, packets that can never complete after
 * producer_gone and packets whose slice table cannot grow
 * count as trace_writer_packet_loss. Gaps and orphan continuations are only
 * flagged: the chunk behind them was counted already (overwritten,
 * discarded or malformed). As in Perfetto, the first packet of a sequence
 * is flagged too. A chunk still waiting for patches when its producer goes
 * is dropped whole and counted in chunks_discarded (not chunks_read): its
 * patches will never come, and Perfetto never reads such a chunk.
 */
#include "service/trace_buffer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tracegate/pb_wire.h"
#include "abi/smb.h"
#include "tracegate/error.h"

#include "service/trace_buffer_internal.h"

static bool ring_empty(const tg_trace_buffer_t *tb) {
  return !tb->wrapped && tb->head == tb->wr;
}

/* Drops the head record's bytes (the caller dealt with its index entry). */
static void head_pop(tg_trace_buffer_t *tb) {
  tb->head += rec_at(tb, tb->head)->rec_size;
  if (tb->wrapped && tb->head == tb->wrap_at) {
    tb->head = 0;
    tb->wrapped = false;
  }
  if (ring_empty(tb)) tb->head = tb->wr = 0; /* restart at the start */
}

/* Reclaims records at the head that were read to the end. */
void tg__tb_release_read_records(tg_trace_buffer_t *tb) {
  while (!ring_empty(tb) && !(rec_at(tb, tb->head)->flags & R_LIVE))
    head_pop(tb);
}

/* --- sequence deque ------------------------------------------------------ */


static int q_reserve(seq_t *s) {
  if (s->qlen < s->qcap) return 0;
  uint32_t cap = s->qcap ? s->qcap * 2 : 8;
  if (cap == 0 || cap > UINT32_MAX / sizeof(ent_t)) return -ENOMEM;
  ent_t *q = malloc((size_t)cap * sizeof(ent_t));
  if (!q) return -ENOMEM;
  for (uint32_t i = 0; i < s->qlen; i++) q[i] = *q_at(s, i);
  free(s->q);
  s->q = q;
  s->qcap = cap;
  s->qhead = 0;
  return 0;
}

/* Needs q_reserve() first. */
static void q_insert(seq_t *s, uint32_t pos, ent_t e) {
  if (pos == 0 && s->qlen) {
    s->qhead = (s->qhead - 1) & (s->qcap - 1);
  } else {
    for (uint32_t i = s->qlen; i > pos; i--) *q_at(s, i) = *q_at(s, i - 1);
  }
  *q_at(s, pos) = e;
  s->qlen++;
}

void tg__tb_q_erase(seq_t *s, uint32_t pos) {
  if (pos == 0) {
    s->qhead = (s->qhead + 1) & (s->qcap - 1);
  } else {
    for (uint32_t i = pos; i + 1 < s->qlen; i++) *q_at(s, i) = *q_at(s, i + 1);
  }
  s->qlen--;
}

/* First position whose id is not serially before |id|, measured from the
 * front's id so that the comparison is a total order. */
static uint32_t q_lower_bound(const seq_t *s, uint32_t id) {
  if (s->qlen == 0) return 0;
  uint32_t base = q_at(s, 0)->id;
  uint32_t k = id - base;
  if ((int32_t)k < 0) return 0;
  uint32_t lo = 0, hi = s->qlen;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (q_at(s, mid)->id - base < k)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Position of chunk |id| or -1. */
static int64_t q_find(const seq_t *s, uint32_t id) {
  if (s->qlen == 0 || (int32_t)(id - q_at(s, s->qlen - 1)->id) > 0) return -1;
  uint32_t pos = q_lower_bound(s, id);
  return pos < s->qlen && q_at(s, pos)->id == id ? (int64_t)pos : -1;
}

/* --- sequences ----------------------------------------------------------- */

static inline uint32_t hash_key(uint32_t key) {
  key *= 0x9E3779B1u;
  return key ^ (key >> 15);
}

static int ht_grow(tg_trace_buffer_t *tb) {
  uint32_t cap = tb->ht_cap ? tb->ht_cap * 2 : 64;
  int32_t *ht = malloc((size_t)cap * sizeof(*ht));
  if (!ht) return -ENOMEM;
  for (uint32_t i = 0; i < cap; i++) ht[i] = -1;
  for (uint32_t i = 0; i < tb->ht_cap; i++) {
    if (tb->ht[i] < 0) continue;
    uint32_t j = hash_key(tb->seqs[tb->ht[i]].key) & (cap - 1);
    while (ht[j] >= 0) j = (j + 1) & (cap - 1);
    ht[j] = tb->ht[i];
  }
  free(tb->ht);
  tb->ht = ht;
  tb->ht_cap = cap;
  return 0;
}

static int32_t seq_lookup(tg_trace_buffer_t *tb, uint32_t key) {
  if (tb->cache_seq >= 0 && tb->cache_key == key) return tb->cache_seq;
  if (tb->ht_cap == 0) return -1;
  uint32_t mask = tb->ht_cap - 1;
  for (uint32_t i = hash_key(key) & mask; tb->ht[i] >= 0; i = (i + 1) & mask) {
    if (tb->seqs[tb->ht[i]].key == key) {
      tb->cache_key = key;
      tb->cache_seq = tb->ht[i];
      return tb->ht[i];
    }
  }
  return -1;
}

static int32_t seq_create(tg_trace_buffer_t *tb, uint32_t key) {
  if ((tb->ht_used + 1) * 2 > tb->ht_cap && ht_grow(tb) != 0) return -1;
  int32_t idx = tb->free_seq;
  if (idx >= 0) {
    tb->free_seq = tb->seqs[idx].next;
  } else {
    if (tb->nseqs == tb->seqs_cap) {
      uint32_t cap = tb->seqs_cap ? tb->seqs_cap * 2 : 16;
      if (cap > INT32_MAX / 2) return -1;
      seq_t *seqs = realloc(tb->seqs, (size_t)cap * sizeof(seq_t));
      if (!seqs) return -1;
      tb->seqs = seqs;
      tb->seqs_cap = cap;
    }
    idx = (int32_t)tb->nseqs++;
  }
  seq_t *s = &tb->seqs[idx];
  memset(s, 0, sizeof(*s));
  s->used = true;
  s->key = key;
  /* Nothing is known of what the sequence wrote before its first chunk
   * here: its first packet is flagged, as Perfetto's TraceBuffer starts
   * reading every sequence with the previous packet dropped (trace
   * processor relies on it). Losses are counted in the stats, not here. */
  s->loss = true;
  s->prev = s->next = -1;
  uint32_t mask = tb->ht_cap - 1;
  uint32_t i = hash_key(key) & mask;
  while (tb->ht[i] >= 0) i = (i + 1) & mask;
  tb->ht[i] = idx;
  tb->ht_used++;
  return idx;
}

void tg__tb_ready_add(tg_trace_buffer_t *tb, seq_t *s) {
  if (s->ready) return;
  int32_t idx = (int32_t)(s - tb->seqs);
  s->ready = true;
  s->next = -1;
  s->prev = tb->ready_tail;
  if (tb->ready_tail >= 0)
    tb->seqs[tb->ready_tail].next = idx;
  else
    tb->ready_head = idx;
  tb->ready_tail = idx;
}

void tg__tb_ready_remove(tg_trace_buffer_t *tb, seq_t *s) {
  if (!s->ready) return;
  if (s->prev >= 0)
    tb->seqs[s->prev].next = s->next;
  else
    tb->ready_head = s->next;
  if (s->next >= 0)
    tb->seqs[s->next].prev = s->prev;
  else
    tb->ready_tail = s->prev;
  s->ready = false;
  s->prev = s->next = -1;
}

/* Forgets an empty sequence of a producer that is gone, so that sequences
 * of departed producers do not accumulate. Linear probing, backward-shift
 * deletion. */
void tg__tb_seq_free(tg_trace_buffer_t *tb, seq_t *s) {
  int32_t idx = (int32_t)(s - tb->seqs);
  tg__tb_ready_remove(tb, s);
  uint32_t mask = tb->ht_cap - 1;
  uint32_t i = hash_key(s->key) & mask;
  while (tb->ht[i] != idx) i = (i + 1) & mask;
  tb->ht[i] = -1;
  for (uint32_t j = (i + 1) & mask; tb->ht[j] >= 0; j = (j + 1) & mask) {
    uint32_t home = hash_key(tb->seqs[tb->ht[j]].key) & mask;
    /* Move j back into the hole at i unless its home lies in (i, j]. */
    bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      tb->ht[i] = tb->ht[j];
      tb->ht[j] = -1;
      i = j;
    }
  }
  tb->ht_used--;
  if (tb->cache_seq == idx) tb->cache_seq = -1;
  free(s->q);
  memset(s, 0, sizeof(*s));
  s->prev = -1;
  s->next = tb->free_seq;
  tb->free_seq = idx;
}

/* --- chunk analysis ------------------------------------------------------ */

/* Derives what the reader may take from a record's copy, after a copy, a
 * re-commit, a patch or producer_gone. Keeps the read progress. Returns the
 * validation result; violations are counted for every new copy
 * (|new_copy|) and otherwise only when the chunk was sound before. */
int tg__tb_rec_analyze(tg_trace_buffer_t *tb, rec_t *r, bool new_copy,
                       uint32_t *used) {
  const uint8_t *c = rec_chunk(r);
  bool incomplete = (r->flags & R_INCOMPLETE) != 0;
  bool final = (r->flags & R_FINAL) != 0;
  tg_chunk_info_t info;
  int rv = tg_chunk_validate(c, r->held, !incomplete, &info);
  if (rv != 0 && (new_copy || !(r->flags & R_BAD))) tb->stats.abi_violations++;
  r->headers_end = info.headers_end;
  if (used) {
    uint32_t end = info.payload_used > info.headers_end ? info.payload_used
                                                        : info.headers_end;
    *used = TG_SMB_CHUNK_HEADER_SIZE + end;
  }

  unsigned readable = info.valid_fragments;
  bool drop = info.ends_with_drop;
  /* A truncated chunk does not continue: its real last fragment is gone. */
  bool cont = (info.flags & TG_CHUNK_LAST_PACKET_CONTINUES) && readable > 0 &&
              readable == info.packet_count;
  if (incomplete && !final) {
    if (info.packet_count && readable > info.packet_count - 1u)
      readable = info.packet_count - 1u;
    cont = false;
  } else if (incomplete && info.last_fragment_open) {
    drop = true; /* the producer left it half-written */
  }
  uint16_t f = r->flags & (R_LIVE | R_NEEDS_PATCH | R_INCOMPLETE | R_FINAL |
                           R_DROP_COUNTED | R_UNPATCHED | R_SCRAPED);
  if (final && (f & R_NEEDS_PATCH)) {
    /* Its patches will never come, and any of its bytes may be one that
     * was waiting for them: like Perfetto, which never reads a chunk that
     * needs patching, nothing more of it is read. Counted once, here. */
    f = (uint16_t)((f & ~R_NEEDS_PATCH) | R_UNPATCHED);
    tb->stats.chunks_discarded++;
  }
  if (f & R_UNPATCHED) {
    readable = r->nread; /* what was read before it was flagged stays read */
    cont = false;
    drop = false;
    f |= R_DROP_END | R_DROP_COUNTED; /* flag the loss; counted as a chunk */
  }
  if (info.flags & TG_CHUNK_FIRST_PACKET_CONTINUES) f |= R_FIRST_CONT;
  if (cont) f |= R_CONT;
  if (rv != 0) f |= R_BAD;
  if (drop) {
    f |= R_DROP_END;
    if (!(f & R_DROP_COUNTED)) {
      f |= R_DROP_COUNTED;
      tb->stats.trace_writer_packet_loss++;
    }
  }
  r->flags = f;
  r->nreadable = (uint16_t)readable;
  if (r->nread > readable) r->nread = (uint16_t)readable;
  r->read_off = TG_SMB_CHUNK_HEADER_SIZE;
  if (r->nread) {
    tg_fragment_iter_t it;
    tg_fragment_iter_init(&it, c, r->held, &info);
    const uint8_t *d;
    size_t len;
    for (unsigned i = 0; i < r->nread; i++)
      tg_fragment_iter_next(&it, &d, &len);
    r->read_off = (uint32_t)(it.cur - c);
  }
  return rv;
}

/* Fragment at chunk offset |off|. The analysis vouched for it; the check
 * is a second line of defence. */
bool tg__tb_frag_at(rec_t *r, uint32_t off, const uint8_t **data, size_t *len,
                    uint32_t *next) {
  uint8_t *c = rec_chunk(r);
  if (off > r->held) return false;
  tg_fragment_iter_t it = {c + off, c + r->held, 1};
  if (!tg_fragment_iter_next(&it, data, len)) return false;
  *next = (uint32_t)(it.cur - c);
  return true;
}

void tg__tb_rec_truncate(tg_trace_buffer_t *tb, rec_t *r) {
  tb->stats.abi_violations++;
  r->nreadable = r->nread;
  r->flags &= (uint16_t)~R_CONT;
}

/* --- writing ------------------------------------------------------------- */

/* Takes the head record out of the ring, counting it as overwritten if it
 * was not read to the end and flagging its sequence. */
static void evict_head(tg_trace_buffer_t *tb) {
  rec_t *r = rec_at(tb, tb->head);
  if (r->flags & R_LIVE) {
    tb->stats.chunks_overwritten++;
    tb->stats.bytes_overwritten += r->chunk_size;
    tb->live_bytes -= r->rec_size;
    r->flags &= (uint16_t)~R_LIVE;
    seq_t *s = &tb->seqs[r->seq];
    uint32_t off8 = (uint32_t)(tb->head / 8u);
    for (uint32_t i = 0; i < s->qlen; i++) {
      if (q_at(s, i)->off8 != off8) continue;
      if (i == 0) {
        s->has_last = true;
        s->last_id = r->chunk_id;
        /* A scraped chunk read in part: its complete copy may still come
         * and must not return those fragments again. */
        s->resume = r->nread && (r->flags & R_INCOMPLETE);
        s->resume_id = r->chunk_id;
        s->resume_nread = r->nread;
      }
      tg__tb_q_erase(s, i);
      break;
    }
    s->loss = true;
    if (s->qlen == 0 && s->gone)
      tg__tb_seq_free(tb, s);
    else
      tg__tb_ready_add(tb, s); /* a stall on this chunk may be over */
  }
  head_pop(tb);
}

/* Finds |need| contiguous bytes at the write position, overwriting the
 * oldest records in RING_BUFFER mode. |need| <= tb->size. */
static bool make_room(tg_trace_buffer_t *tb, size_t need, size_t *off) {
  for (;;) {
    tg__tb_release_read_records(tb);
    if (!tb->wrapped) {
      if (tb->size - tb->wr >= need) break;
      if (tb->head < need && tb->policy == TG_FILL_DISCARD) return false;
      /* Pad the tail and continue at 0, in front of the head. */
      tb->stats.padding_bytes_written += tb->size - tb->wr;
      tb->stats.write_wrap_count++;
      tb->wrap_at = tb->wr;
      tb->wr = 0;
      tb->wrapped = true; /* not empty: an empty ring restarted at 0 */
      continue;
    }
    if (tb->head - tb->wr >= need) break;
    if (tb->policy == TG_FILL_DISCARD) return false;
    evict_head(tb);
  }
  *off = tb->wr;
  return true;
}

/* Keeps only the first |used| bytes of a complete chunk's copy, and gives
 * the rest of its room back when it is the newest record (see "Room"). */
static void rec_shrink(tg_trace_buffer_t *tb, rec_t *r, uint32_t used) {
  if ((r->flags & (R_INCOMPLETE | R_NEEDS_PATCH)) || used >= r->held) return;
  r->held = used;
  size_t off = (size_t)((uint8_t *)r - tb->ring);
  size_t rec_size = rec_size_for(used);
  if (off + r->rec_size != tb->wr || rec_size >= r->rec_size) return;
  tb->live_bytes -= r->rec_size - rec_size;
  r->rec_size = (uint32_t)rec_size;
  tb->wr = off + rec_size;
}

/* A chunk that is not stored. The sequence remembers it, so that a packet
 * waiting for it is dropped rather than stalled for ever (in DISCARD mode
 * that stall would pin the oldest record and refuse everything after).
 * When the sequence holds nothing, nothing else could reveal the loss (a
 * new sequence has no ids to compare): flag it now; otherwise the gap flags
 * it at the right packet. |s| is NULL for a scraped copy: its complete copy
 * is still to come. */
static int discard(tg_trace_buffer_t *tb, seq_t *s, uint32_t id, int err) {
  tb->stats.chunks_discarded++;
  if (!s) return err;
  if (s->qlen == 0) s->loss = true;
  if (!s->has_lost || (int32_t)(id - s->lost_id) > 0) {
    s->has_lost = true;
    s->lost_id = id;
  }
  tg__tb_ready_add(tb, s);
  return err;
}

static int copy_chunk(tg_trace_buffer_t *tb,
                      const tg_producer_ident_t *producer,
                      const uint8_t *chunk_untrusted, size_t size,
                      bool complete, bool scraped) {
  if (size < TG_SMB_CHUNK_HEADER_SIZE) {
    tb->stats.abi_violations++;
    return TG_EABI_VIOLATION;
  }
  /* The header is read once, here; the copy below gets these bytes. */
  uint8_t hdr[TG_SMB_CHUNK_HEADER_SIZE];
  memcpy(hdr, chunk_untrusted, sizeof(hdr));
  uint32_t id = tg_pb_read_le32(hdr);
  uint16_t writer_id = (uint16_t)(hdr[4] | (hdr[5] << 8));
  uint16_t packets = (uint16_t)(hdr[6] | (hdr[7] << 8));
  if (writer_id == 0 || writer_id > TG_TRACE_BUFFER_MAX_WRITER_ID) {
    tb->stats.abi_violations++; /* not a writer a producer can have */
    return TG_EABI_VIOLATION;
  }
  uint32_t key = (uint32_t)producer->producer_id << 16 | writer_id;
  int32_t si = seq_lookup(tb, key);
  if (si < 0 && (si = seq_create(tb, key)) < 0)
    return discard(tb, NULL, id, -ENOMEM);
  seq_t *s = &tb->seqs[si];
  seq_t *flag = complete ? s : NULL;
  if (size > UINT32_MAX - 2 * sizeof(rec_t) || rec_size_for(size) > tb->size)
    return discard(tb, flag, id, TG_ENO_SPACE);
  if (s->gone) s->scraped_read = 0; /* another producer's chunks */
  s->gone = false; /* chunks again: the producer id was reused */
  uint16_t hflags = 0;
  if (!complete) hflags |= R_INCOMPLETE;
  else if (scraped) hflags |= R_SCRAPED;
  if (tg_chunk_packets_flags(packets) & TG_CHUNK_NEEDS_PATCHING)
    hflags |= R_NEEDS_PATCH;

  rec_t *r;
  size_t keep = size; /* chunk bytes copied into the record */
  int64_t pos = q_find(s, id);
  if (pos >= 0) {
    /* Re-commit (scraped, then complete): in place, keeping read progress.
     * A chunk's size never changes; one that kept only its fragments'
     * prefix has room for that prefix (the rest was, and is, unused). */
    r = ent_rec(tb, q_at(s, (uint32_t)pos));
    size_t room = r->rec_size - sizeof(rec_t);
    if (size > room && r->held == r->chunk_size) {
      tb->stats.abi_violations++;
      return TG_EABI_VIOLATION;
    }
    if (keep > room) keep = room;
    tb->stats.chunks_rewritten++;
    r->flags = (uint16_t)((r->flags & (R_LIVE | R_DROP_COUNTED)) | hflags);
  } else {
    uint16_t nread = 0;
    if (s->resume && s->resume_id == id) {
      nread = s->resume_nread; /* see evict_head() */
    } else if (complete && tg__tb_scraped_take(s, id, scraped)) {
      /* A scraped copy of it was read whole: these are the same bytes
       * again (a Complete chunk is no longer written), not a late chunk,
       * so nothing is lost and nothing is read twice. */
      tb->stats.chunks_rewritten++;
      return 0;
    } else if (s->has_last && s->qlen && (int32_t)(id - s->last_id) <= 0) {
      return discard(tb, flag, id, TG_ENO_SPACE); /* the reader is past it */
    }
    if (q_reserve(s) != 0) return discard(tb, flag, id, -ENOMEM);
    s->resume = false; /* make_room() may set it again for an older chunk */
    size_t need = rec_size_for(size), off;
    if (!make_room(tb, need, &off)) return discard(tb, flag, id, TG_ENO_SPACE);
    tb->wr = off + need;
    tb->live_bytes += need;
    r = rec_at(tb, off);
    r->rec_size = (uint32_t)need;
    r->chunk_id = id;
    r->seq = (uint32_t)si;
    r->nread = nread;
    r->flags = (uint16_t)(R_LIVE | hflags);
    r->reserved = 0;
    tb->stats.chunks_written++;
    /* make_room() may have evicted entries of |s|: place it only now. */
    uint32_t at = s->qlen;
    if (s->qlen && (int32_t)(id - q_at(s, s->qlen - 1)->id) <= 0) {
      at = q_lower_bound(s, id);
      tb->stats.chunks_committed_out_of_order++;
    }
    q_insert(s, at, (ent_t){id, (uint32_t)(off / 8u)});
    if (s->has_lost && (int32_t)(id - s->lost_id) > 0)
      s->has_lost = false; /* from here on, ids in the index tell */
  }
  uint8_t *dst = rec_chunk(r);
  memcpy(dst, hdr, sizeof(hdr));
  memcpy(dst + sizeof(hdr), chunk_untrusted + sizeof(hdr), keep - sizeof(hdr));
  r->held = (uint32_t)keep;
  r->chunk_size = (uint32_t)size;
  r->producer_id = producer->producer_id;
  r->writer_id = writer_id;
  r->uid = (uint32_t)producer->uid;
  r->pid = (int32_t)producer->pid;
  tb->stats.bytes_written += size;
  uint32_t used;
  int rv = tg__tb_rec_analyze(tb, r, true, &used);
  rec_shrink(tb, r, used);
  tg__tb_ready_add(tb, s);
  return rv;
}

int tg_trace_buffer_copy_chunk(tg_trace_buffer_t *tb,
                               const tg_producer_ident_t *producer,
                               const uint8_t *chunk_untrusted, size_t size,
                               bool complete) {
  return copy_chunk(tb, producer, chunk_untrusted, size, complete, false);
}

int tg_trace_buffer_scrape_chunk(tg_trace_buffer_t *tb,
                                 const tg_producer_ident_t *producer,
                                 const uint8_t *chunk_untrusted, size_t size,
                                 bool complete) {
  return copy_chunk(tb, producer, chunk_untrusted, size, complete, true);
}

void tg_trace_buffer_writer_gone(tg_trace_buffer_t *tb, uint16_t producer_id,
                                 uint16_t writer_id) {
  int32_t si = seq_lookup(tb, (uint32_t)producer_id << 16 | writer_id);
  if (si >= 0) tb->seqs[si].scraped_read = 0;
}

int tg_trace_buffer_patch(tg_trace_buffer_t *tb, uint16_t producer_id,
                          uint16_t writer_id, uint32_t chunk_id,
                          const uint32_t *offsets, const uint8_t (*data)[4],
                          size_t n, bool has_more) {
  int err = -ENOENT;
  int32_t si = seq_lookup(tb, (uint32_t)producer_id << 16 | writer_id);
  if (si < 0) goto fail;
  seq_t *s = &tb->seqs[si];
  int64_t pos = q_find(s, chunk_id);
  if (pos < 0) goto fail;
  rec_t *r = ent_rec(tb, q_at(s, (uint32_t)pos));
  size_t payload = r->chunk_size - TG_SMB_CHUNK_HEADER_SIZE;
  err = TG_EABI_VIOLATION;
  if (n && (!offsets || !data)) goto fail;
  for (size_t i = 0; i < n; i++) {
    if (payload < 4 || offsets[i] > payload - 4) goto fail;
  }
  uint8_t *p = rec_chunk(r) + TG_SMB_CHUNK_HEADER_SIZE;
  size_t held = r->held - TG_SMB_CHUNK_HEADER_SIZE;
  bool hits_header = false;
  for (size_t i = 0; i < n; i++) {
    /* Bytes past what the record held were past every fragment: unread. */
    if (offsets[i] < held)
      memcpy(p + offsets[i], data[i], held - offsets[i] < 4 ? held - offsets[i] : 4);
    hits_header |= offsets[i] < r->headers_end;
  }
  /* A patch that reaches a fragment's size header may change what can be
   * read: analyse again. One past every header the analysis read (the
   * usual case: the size of a message that went on into the next chunk)
   * cannot, and the chunk, long out of the cache by now, is not walked. */
  if (hits_header) tg__tb_rec_analyze(tb, r, false, NULL);
  if (!has_more) r->flags &= (uint16_t)~R_NEEDS_PATCH;
  tb->stats.patches_succeeded++;
  tg__tb_ready_add(tb, s);
  return 0;
fail:
  tb->stats.patches_failed++;
  return err;
}

/* --- lifetime and accessors ---------------------------------------------- */

tg_trace_buffer_t *tg_trace_buffer_new(size_t size, tg_fill_policy_t policy) {
  size &= ~(size_t)7u;
  /* The ring adds a record header (see tg_trace_buffer_t.asked). */
  if (size < MIN_BUFFER_SIZE ||
      (uint64_t)size > MAX_BUFFER_SIZE - sizeof(rec_t))
    return NULL;
  if (policy != TG_FILL_RING_BUFFER && policy != TG_FILL_DISCARD) return NULL;
  tg_trace_buffer_t *tb = calloc(1, sizeof(*tb));
  if (!tb) return NULL;
  /* Anonymous mapping, committed lazily as records land: the first write to
   * each page faults and the kernel zeroes it. 4 KiB pages on purpose, not
   * MADV_HUGEPAGE: on VMs that hand free memory back to their host (virtio
   * free page reporting, in 2 MiB blocks), a fresh huge page faults through
   * to the host, and a new session's ring fills several times slower than
   * with small pages. bench_service_ingest prints both fill rates;
   * docs/operations.md has the figures. */
  size_t ring_size = size + sizeof(rec_t);
  void *ring = mmap(NULL, ring_size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (ring == MAP_FAILED) {
    free(tb);
    return NULL;
  }
  tb->ring = ring;
  tb->size = ring_size;
  tb->asked = size;
  tb->policy = policy;
  tb->free_seq = tb->ready_head = tb->ready_tail = tb->cache_seq = -1;
  tb->stats.buffer_size = size;
  return tb;
}

void tg_trace_buffer_free(tg_trace_buffer_t *tb) {
  if (!tb) return;
  for (uint32_t i = 0; i < tb->nseqs; i++) free(tb->seqs[i].q);
  free(tb->seqs);
  free(tb->ht);
  free(tb->pk_slices);
  free(tb->pk_lens);
  munmap(tb->ring, tb->size);
  free(tb);
}

void tg_trace_buffer_note_abi_violation(tg_trace_buffer_t *tb) {
  tb->stats.abi_violations++;
}

const tg_trace_buffer_stats_t *tg_trace_buffer_stats(
    const tg_trace_buffer_t *tb) {
  return &tb->stats;
}

size_t tg_trace_buffer_size(const tg_trace_buffer_t *tb) { return tb->asked; }

size_t tg_trace_buffer_used(const tg_trace_buffer_t *tb) {
  return tb->live_bytes;
}
