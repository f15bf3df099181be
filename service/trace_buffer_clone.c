/* Read-only snapshots of a trace buffer (ConsumerPort.CloneSession).
 *
 * The snapshot is a deep copy: the ring's live bytes, the sequence index
 * and the counters. Producers keep writing into the original, which is not
 * changed. The copy is read as Perfetto's CloneReadOnly() buffer is: what
 * each sequence had committed when it was taken reads out, and the
 * sequence ends where data was still in flight (a scraped chunk's last
 * fragment, a packet continuing into a chunk not committed yet, a chunk
 * waiting for patches). That tail is not lost: it goes on in the original
 * and reaches the next snapshot or the session's trace. So a snapshot of a
 * clean session counts no loss; losses the original counted (drop markers,
 * overwrites, discards) come with the copied counters, and the ones its
 * own read finds (a drop marker not read yet) are counted there.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "service/trace_buffer.h"
#include "service/trace_buffer_internal.h"

/* Copies the record bytes that may be live; the rest of the ring is left
 * unmapped-and-zero (the mapping is lazy), so a large, mostly empty buffer
 * costs what it holds. */
static void copy_live_ring(tg_trace_buffer_t *dst, const tg_trace_buffer_t *src) {
  if (src->wrapped) {
    memcpy(dst->ring, src->ring, src->wr);
    memcpy(dst->ring + src->head, src->ring + src->head, src->wrap_at - src->head);
  } else {
    memcpy(dst->ring + src->head, src->ring + src->head, src->wr - src->head);
  }
}

static int copy_index(tg_trace_buffer_t *dst, const tg_trace_buffer_t *src) {
  if (src->seqs_cap) {
    dst->seqs = malloc((size_t)src->seqs_cap * sizeof(seq_t));
    if (!dst->seqs) return -1;
    memcpy(dst->seqs, src->seqs, (size_t)src->seqs_cap * sizeof(seq_t));
    /* Each deque is the source's until replaced: NULL them first so that a
     * failure half-way frees only the copies. */
    for (uint32_t i = 0; i < src->nseqs; i++) dst->seqs[i].q = NULL;
    dst->nseqs = src->nseqs;
    dst->seqs_cap = src->seqs_cap;
    for (uint32_t i = 0; i < src->nseqs; i++) {
      const seq_t *s = &src->seqs[i];
      if (!s->q) continue;
      dst->seqs[i].q = malloc((size_t)s->qcap * sizeof(ent_t));
      if (!dst->seqs[i].q) return -1;
      memcpy(dst->seqs[i].q, s->q, (size_t)s->qcap * sizeof(ent_t));
    }
  }
  if (src->ht_cap) {
    dst->ht = malloc((size_t)src->ht_cap * sizeof(*dst->ht));
    if (!dst->ht) return -1;
    memcpy(dst->ht, src->ht, (size_t)src->ht_cap * sizeof(*dst->ht));
    dst->ht_cap = src->ht_cap;
    dst->ht_used = src->ht_used;
  }
  return 0;
}

tg_trace_buffer_t *tg_trace_buffer_clone(const tg_trace_buffer_t *src) {
  tg_trace_buffer_t *dst = tg_trace_buffer_new(src->asked, src->policy);
  if (!dst) return NULL;
  copy_live_ring(dst, src);
  dst->head = src->head;
  dst->wr = src->wr;
  dst->wrap_at = src->wrap_at;
  dst->wrapped = src->wrapped;
  dst->live_bytes = src->live_bytes;
  dst->free_seq = src->free_seq;
  dst->ready_head = src->ready_head;
  dst->ready_tail = src->ready_tail;
  dst->stats = src->stats;
  if (copy_index(dst, src) < 0) {
    tg_trace_buffer_free(dst);
    return NULL;
  }
  /* The copy is read into a trace of its own: each sequence's first packet
   * there is flagged, as in any trace. */
  for (uint32_t i = 0; i < dst->nseqs; i++) dst->seqs[i].loss = true;
  /* Nothing will be committed or patched into it, and a producer leaving
   * the original later says nothing about what the snapshot held. */
  dst->read_only = true;
  return dst;
}
