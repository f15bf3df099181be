/* Reading the trace buffer: packets in order per sequence, fragments
 * reassembled, losses flagged, sequences of departed producers unblocked.
 * See trace_buffer.c for the layout and the stall-vs-gap rules. */
#include <stdlib.h>
#include <string.h>

#include "service/trace_buffer_internal.h"

/* --- reading ------------------------------------------------------------- */

enum { RD_STALL = 0, RD_PACKET = 1, RD_AGAIN = 2 };

/* The reader consumes the first thing of the front chunk |e|: a jump in
 * ids from the last chunk consumed is a gap. Called only when something
 * is consumed, so a stalled front chunk can still be preceded by a late
 * out-of-order one. */
static void seq_enter(seq_t *s, const ent_t *e) {
  if (s->has_last && e->id != s->last_id + 1u) s->loss = true;
  s->has_last = true;
  s->last_id = e->id - 1u;
}

/* Records a reader with a full ring takes were written hundreds of MB ago:
 * every fragment header it walks is a cache miss, one after the other
 * (each header says where the next is), and then the socket copies the
 * same bytes from memory once more. So when the front record is done, the
 * record PREFETCH_AHEAD places behind the new front is asked for, whole,
 * into L2: prefetcht2, since prefetches into L1 fill its few miss buffers
 * and stall as long as the misses they were to hide. Its size is taken
 * from the record just read (a sequence's chunks have one size), as
 * reading its own header would be the miss itself. bench_trace_buffer_read
 * measures it against a memcpy of the same cold bytes. */
#define PREFETCH_AHEAD 2
#define CACHE_LINE 64

/* Always inlined: GCC finds a function that only prefetches pure and drops
 * the call. */
static inline __attribute__((always_inline)) void prefetch_rec(
    const tg_trace_buffer_t *tb, const seq_t *s, uint32_t k, size_t n) {
  if (k >= s->qlen) return;
  size_t off = (size_t)q_at(s, k)->off8 * 8u;
  if (n > tb->size - off) n = tb->size - off;
  for (size_t i = 0; i < n; i += CACHE_LINE)
    __builtin_prefetch(tb->ring + off + i, 0, 1);
}

/* The front chunk was read to the end. */
static void seq_pop_read(tg_trace_buffer_t *tb, seq_t *s) {
  ent_t *e = q_at(s, 0);
  rec_t *r = ent_rec(tb, e);
  r->flags &= (uint16_t)~R_LIVE;
  tb->live_bytes -= r->rec_size;
  if (!(r->flags & R_UNPATCHED)) { /* counted as discarded instead */
    tb->stats.chunks_read++;
    tb->stats.bytes_read += r->chunk_size;
  }
  if (r->flags & R_SCRAPED) tg__tb_scraped_note(s, e->id);
  s->has_last = true;
  s->last_id = e->id;
  tg__tb_q_erase(s, 0);
  prefetch_rec(tb, s, PREFETCH_AHEAD, r->rec_size);
}

static void emit(seq_t *s, const rec_t *r, tg_packet_t *out) {
  out->producer.producer_id = r->producer_id;
  out->producer.uid = (uid_t)r->uid;
  out->producer.pid = (pid_t)r->pid;
  out->writer_id = r->writer_id;
  out->previous_packet_dropped = s->loss;
  s->loss = false;
}

/* Makes room for slice |n| of the packet being assembled. */
static bool slices_reserve(tg_trace_buffer_t *tb, uint32_t n) {
  if (n < tb->pk_cap) return true;
  uint32_t cap = tb->pk_cap ? tb->pk_cap * 2 : 16;
  while (cap <= n) cap *= 2;
  const uint8_t **sl = realloc(tb->pk_slices, (cap + 1) * sizeof(*sl));
  if (!sl) return false;
  tb->pk_slices = sl;
  size_t *ln = realloc(tb->pk_lens, (cap + 1) * sizeof(*ln));
  if (!ln) return false;
  tb->pk_lens = ln;
  tb->pk_cap = cap;
  return true;
}

static bool slice_push(tg_trace_buffer_t *tb, unsigned *n, const uint8_t *d,
                       size_t len) {
  if (!slices_reserve(tb, *n)) return false;
  tb->pk_slices[*n] = d;
  tb->pk_lens[*n] = len;
  (*n)++;
  return true;
}

/* The front chunk's next fragment (|d|, |len|, ending at |next|) starts a
 * packet that continues in the following chunks. Walks them without
 * consuming anything until the packet is complete, then consumes it. */
static int reassemble(tg_trace_buffer_t *tb, seq_t *s, const uint8_t *d,
                      size_t len, uint32_t next, tg_packet_t *out) {
  rec_t *r0 = ent_rec(tb, q_at(s, 0));
  unsigned n = 0;
  bool overflow = false;
  size_t total = len;
  if (len && !slice_push(tb, &n, d, len)) overflow = true;
  uint32_t prev_id = q_at(s, 0)->id;
  uint32_t i = 1;
  uint32_t end_next = 0;
  for (;; i++) {
    if (i >= s->qlen) {
      /* Chunks come in id order: if a newer one was discarded, the next
       * one will not come either. */
      if (s->has_lost && (int32_t)(s->lost_id - prev_id) > 0) goto drop;
      if (!s->gone) return RD_STALL; /* the next chunk is not there yet */
      tb->stats.trace_writer_packet_loss++;
      goto drop;
    }
    const ent_t *e = q_at(s, i);
    rec_t *r = ent_rec(tb, e);
    if (e->id != prev_id + 1u) goto drop; /* a gap: it can never complete */
    if (r->flags & R_NEEDS_PATCH) return RD_STALL;
    if (r->nreadable == 0 || r->nread != 0) {
      if ((r->flags & R_INCOMPLETE) && !(r->flags & R_FINAL)) return RD_STALL;
      goto drop; /* drop marker or malformed: counted already */
    }
    if (!(r->flags & R_FIRST_CONT)) {
      tb->stats.abi_violations++; /* promised a continuation, none came */
      goto drop;
    }
    const uint8_t *fd;
    size_t flen;
    uint32_t fnext;
    if (!tg__tb_frag_at(r, r->read_off, &fd, &flen, &fnext)) {
      tg__tb_rec_truncate(tb, r);
      goto drop;
    }
    total += flen;
    if (flen && !overflow && !slice_push(tb, &n, fd, flen)) overflow = true;
    prev_id = e->id;
    if (r->nreadable == 1 && (r->flags & R_CONT)) continue; /* middle */
    end_next = fnext;
    break;
  }
  /* Complete: chunks 0 .. i-1 are used up, chunk i gives its first fragment. */
  if (r0->nread == 0) seq_enter(s, q_at(s, 0));
  emit(s, r0, out);
  r0->nread++;
  for (uint32_t k = 0; k < i; k++) seq_pop_read(tb, s);
  rec_t *last = ent_rec(tb, q_at(s, 0));
  last->nread = 1;
  last->read_off = end_next;
  if (overflow) {
    tb->stats.trace_writer_packet_loss++;
    s->loss = true;
    return RD_AGAIN;
  }
  if (total == 0) {
    s->loss = out->previous_packet_dropped; /* nothing to emit: keep it */
    return RD_AGAIN;
  }
  out->slice = tb->pk_slices;
  out->slice_len = tb->pk_lens;
  out->num_slices = n;
  out->size = total;
  return RD_PACKET;

drop:
  if (r0->nread == 0) seq_enter(s, q_at(s, 0));
  r0->nread++;
  r0->read_off = next;
  s->loss = true;
  return RD_AGAIN;
}

/* Retires front chunks with nothing left to read right after a packet, so
 * that overwriting them later is not counted as a loss. */
static void seq_trim(tg_trace_buffer_t *tb, seq_t *s) {
  while (s->qlen) {
    const ent_t *e = q_at(s, 0);
    rec_t *r = ent_rec(tb, e);
    if (r->nread < r->nreadable || (r->flags & R_NEEDS_PATCH) ||
        ((r->flags & R_INCOMPLETE) && !(r->flags & R_FINAL)))
      return;
    if (r->nread == 0) seq_enter(s, e);
    if (r->flags & R_DROP_END) s->loss = true;
    seq_pop_read(tb, s);
  }
}

/* Next packet of |s|, or RD_STALL when it has nothing readable now. */
static int seq_read(tg_trace_buffer_t *tb, seq_t *s, tg_packet_t *out) {
  while (s->qlen) {
    const ent_t *e = q_at(s, 0);
    rec_t *r = ent_rec(tb, e);
    if (r->flags & R_NEEDS_PATCH) return RD_STALL;
    if (r->nread < r->nreadable) {
      const uint8_t *d;
      size_t len;
      uint32_t next;
      if (!tg__tb_frag_at(r, r->read_off, &d, &len, &next)) {
        tg__tb_rec_truncate(tb, r);
        continue;
      }
      if (r->nread == 0 && (r->flags & R_FIRST_CONT)) {
        /* Continues a packet whose start we do not have. */
        seq_enter(s, e);
        r->nread++;
        r->read_off = next;
        s->loss = true;
        continue;
      }
      if (r->nread + 1u == r->nreadable && (r->flags & R_CONT)) {
        int rv = reassemble(tb, s, d, len, next, out);
        if (rv == RD_AGAIN) continue;
        return rv;
      }
      if (r->nread == 0) seq_enter(s, e);
      r->nread++;
      r->read_off = next;
      if (len == 0) continue; /* an empty packet says nothing */
      unsigned n = 0;
      if (!slice_push(tb, &n, d, len)) {
        tb->stats.trace_writer_packet_loss++;
        s->loss = true;
        continue;
      }
      out->slice = tb->pk_slices;
      out->slice_len = tb->pk_lens;
      out->num_slices = 1;
      out->size = len;
      emit(s, r, out);
      return RD_PACKET;
    }
    if ((r->flags & R_INCOMPLETE) && !(r->flags & R_FINAL))
      return RD_STALL; /* the rest comes with the complete copy */
    seq_trim(tb, s);
  }
  return RD_STALL;
}

int tg_trace_buffer_read_packet(tg_trace_buffer_t *tb, tg_packet_t *out) {
  int rv = 0;
  while (tb->ready_head >= 0) {
    seq_t *s = &tb->seqs[tb->ready_head];
    if (seq_read(tb, s, out) == RD_PACKET) {
      seq_trim(tb, s);
      tg__tb_ready_remove(tb, s); /* round robin: to the back of the line */
      tg__tb_ready_add(tb, s);
      rv = 1;
      break;
    }
    tg__tb_ready_remove(tb, s);
    if (s->qlen == 0 && s->gone) tg__tb_seq_free(tb, s);
  }
  tg__tb_release_read_records(tb);
  return rv;
}

void tg_trace_buffer_producer_gone(tg_trace_buffer_t *tb,
                                   uint16_t producer_id) {
  if (tb->read_only) return; /* see trace_buffer_clone.c */
  for (uint32_t i = 0; i < tb->nseqs; i++) {
    seq_t *s = &tb->seqs[i];
    if (!s->used || s->key >> 16 != producer_id) continue;
    s->gone = true;
    for (uint32_t k = 0; k < s->qlen; k++) {
      rec_t *r = ent_rec(tb, q_at(s, k));
      r->flags |= R_FINAL;
      if (r->flags & (R_INCOMPLETE | R_NEEDS_PATCH)) tg__tb_rec_analyze(tb, r, false, NULL);
    }
    if (s->qlen == 0)
      tg__tb_seq_free(tb, s);
    else
      tg__tb_ready_add(tb, s);
  }
}

