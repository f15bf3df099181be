/* The trace buffer's private layout, shared by trace_buffer.c (writing,
 * index, lifetime) and trace_buffer_read.c (reading). Nothing else
 * includes it: the public contract is trace_buffer.h. */
#ifndef TRACEGATE_SERVICE_TRACE_BUFFER_INTERNAL_H
#define TRACEGATE_SERVICE_TRACE_BUFFER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/smb.h"
#include "service/trace_buffer.h"

#define MIN_BUFFER_SIZE 4096u
/* Index entries keep record offsets in 8-byte units in 32 bits. */
#define MAX_BUFFER_SIZE ((uint64_t)UINT32_MAX * 8u)

enum rec_flags {
  R_LIVE = 1u << 0,         /* in its sequence's index */
  R_FIRST_CONT = 1u << 1,   /* header: fragment 0 continues from id - 1 */
  R_NEEDS_PATCH = 1u << 2,  /* header; cleared by a final patch */
  R_INCOMPLETE = 1u << 3,   /* scraped while being written */
  R_FINAL = 1u << 4,        /* producer gone: nothing more will come */
  R_CONT = 1u << 5,         /* the last readable fragment goes on in id + 1 */
  R_DROP_END = 1u << 6,     /* a lost packet follows the readable fragments */
  R_DROP_COUNTED = 1u << 7, /* ... and was counted */
  R_BAD = 1u << 8,          /* the copy failed validation */
  R_UNPATCHED = 1u << 9,    /* producer gone before its patches: dropped */
  R_SCRAPED = 1u << 10,     /* a scraped copy of a Complete chunk: its
                             * CommitData is still to come */
};

typedef struct rec {
  uint32_t rec_size;   /* header + room for chunk bytes, multiple of 8 */
  /* Chunk bytes the record keeps: all of the copy, or (a complete chunk)
   * the prefix its fragments cover. Everything reads only these. */
  uint32_t held;
  uint32_t chunk_size; /* chunk bytes as committed (the last copy) */
  uint32_t chunk_id;
  uint32_t seq;      /* index in tb->seqs while R_LIVE */
  uint32_t read_off; /* chunk offset of the next unread fragment's header */
  uint32_t uid;
  int32_t pid;
  uint16_t producer_id;
  uint16_t writer_id;
  uint16_t nreadable; /* leading fragments the reader may take now */
  uint16_t nread;     /* of which already consumed */
  uint16_t flags;     /* enum rec_flags */
  uint16_t reserved;
  /* From the last analysis (tg_chunk_info_t.headers_end): a patch past it
   * leaves the analysis as it was. */
  uint32_t headers_end;
} rec_t;
_Static_assert(sizeof(rec_t) % 8 == 0, "records stay 8-byte aligned");
_Static_assert(sizeof(rec_t) == TG_TRACE_BUFFER_RECORD_OVERHEAD,
               "a record header is what trace_buffer.h says it is");
_Static_assert(sizeof(uid_t) == 4 && sizeof(pid_t) == 4, "uid/pid fit");

typedef struct ent {
  uint32_t id;
  uint32_t off8; /* record offset / 8 */
} ent_t;

typedef struct seq {
  ent_t *q; /* ring deque, sorted by chunk id; capacity a power of two */
  uint32_t qcap, qhead, qlen;
  uint32_t key;          /* producer_id << 16 | writer_id */
  uint32_t last_id;      /* the chunk before the next expected one */
  uint32_t lost_id;      /* the newest chunk discarded, if has_lost */
  uint32_t resume_id;    /* evicted while scraped and read in part ... */
  uint16_t resume_nread; /* ... this many fragments */
  int32_t prev, next;    /* ready list, or free list (next) when unused */
  /* Chunks read whole from a scraped copy (R_SCRAPED), whose CommitData
   * (or another scrape) may still bring the same bytes: bit i of
   * |scraped_read| is chunk |scraped_hi| - i (tg__tb_scraped_*); 0: none,
   * and |scraped_hi| means nothing. */
  uint64_t scraped_read;
  uint32_t scraped_hi;
  bool used, has_last, has_lost, loss, gone, ready, resume;
} seq_t;

struct tg_trace_buffer {
  uint8_t *ring;
  /* The ring's bytes: the size asked for and room for one record header,
   * so that a chunk as large as the buffer fits (a 32 KiB ftrace page in a
   * 32 KiB buffer). |asked| is what the buffer reports as its size. */
  size_t size, asked;
  size_t head, wr, wrap_at;
  bool wrapped;
  size_t live_bytes;
  tg_fill_policy_t policy;
  /* A snapshot (tg_trace_buffer_clone): producer_gone leaves it as is. */
  bool read_only;

  seq_t *seqs;
  uint32_t nseqs, seqs_cap;
  int32_t free_seq;
  int32_t *ht; /* seq index or -1 */
  uint32_t ht_cap, ht_used;
  int32_t ready_head, ready_tail;
  uint32_t cache_key;
  int32_t cache_seq;

  /* The slice table handed out with each packet: grown (doubling) to the
   * largest packet seen, so reading allocates nothing in steady state.
   * One entry more than pk_cap, spare for the reader. */
  const uint8_t **pk_slices;
  size_t *pk_lens;
  uint32_t pk_cap;

  tg_trace_buffer_stats_t stats;
};

/* --- records and ring ---------------------------------------------------- */

static inline rec_t *rec_at(const tg_trace_buffer_t *tb, size_t off) {
  return (rec_t *)(void *)(tb->ring + off);
}
static inline uint8_t *rec_chunk(rec_t *r) { return (uint8_t *)(r + 1); }
static inline rec_t *ent_rec(const tg_trace_buffer_t *tb, const ent_t *e) {
  return rec_at(tb, (size_t)e->off8 * 8u);
}
static inline size_t rec_size_for(size_t chunk_size) {
  return sizeof(rec_t) + ((chunk_size + 7u) & ~(size_t)7u);
}

static inline ent_t *q_at(const seq_t *s, uint32_t i) {
  return &s->q[(s->qhead + i) & (s->qcap - 1)];
}

bool tg__tb_frag_at(rec_t *r, uint32_t off, const uint8_t **data, size_t *len,
                    uint32_t *next);
void tg__tb_q_erase(seq_t *s, uint32_t pos);
void tg__tb_ready_add(tg_trace_buffer_t *tb, seq_t *s);
void tg__tb_ready_remove(tg_trace_buffer_t *tb, seq_t *s);
int tg__tb_rec_analyze(tg_trace_buffer_t *tb, rec_t *r, bool new_copy,
                       uint32_t *used);
void tg__tb_rec_truncate(tg_trace_buffer_t *tb, rec_t *r);
void tg__tb_release_read_records(tg_trace_buffer_t *tb);
void tg__tb_seq_free(tg_trace_buffer_t *tb, seq_t *s);

/* Chunk |id| of |s| was read whole from a scraped copy. */
static inline void tg__tb_scraped_note(seq_t *s, uint32_t id) {
  if (!s->scraped_read || (int32_t)(id - s->scraped_hi) > 0) {
    uint32_t shift = s->scraped_read ? id - s->scraped_hi : 64u;
    s->scraped_read = shift >= 64u ? 0 : s->scraped_read << shift;
    s->scraped_hi = id;
  }
  uint32_t d = s->scraped_hi - id;
  if (d < 64u) s->scraped_read |= (uint64_t)1 << d;
}

/* Whether chunk |id| of |s| was read whole from a scraped copy; a copy
 * that is not scraped (its CommitData: no other copy will come) also
 * forgets it. */
static inline bool tg__tb_scraped_take(seq_t *s, uint32_t id, bool scraped) {
  uint32_t d = s->scraped_hi - id;
  if ((int32_t)d < 0 || d >= 64u || !(s->scraped_read >> d & 1u))
    return false;
  if (!scraped) s->scraped_read &= ~((uint64_t)1 << d);
  return true;
}

#endif /* TRACEGATE_SERVICE_TRACE_BUFFER_INTERNAL_H */
