/* compact_sched: sched_switch and sched_waking records of a bundle's pages
 * as FtraceEventBundle.CompactSched columns instead of FtraceEvent
 * messages.
 *
 * Rows collect while the bundle's pages are walked; the columns are
 * written after the last (delta-coded timestamps, packed varints with
 * sizes of the fewest bytes, comms interned per bundle). The buffers are
 * sized at init for a number of rows (the encoder's
 * TG_FTRACE_BUNDLE_ROWS), so adding a row allocates nothing.
 */
#ifndef TRACEGATE_PROBES_FTRACE_COMPACT_H
#define TRACEGATE_PROBES_FTRACE_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/probes/ftrace_plan.h"
#include "agent/probes/ftrace_put.h"
#include "tracegate/pb_writer.h"

enum { TG_FTRACE_COMPACT_NONE, TG_FTRACE_COMPACT_SWITCH, TG_FTRACE_COMPACT_WAKING };

/* Where an event's columns come from: comm, pid, prio and prev_state
 * (switch) or target_cpu (waking). */
typedef struct tg_ftrace_compact_src {
  uint8_t kind; /* TG_FTRACE_COMPACT_* */
  uint16_t flags_offset;
  uint32_t min_len; /* the longest end of the four: shorter records lack one */
  tg_ftrace_op_t comm, pid, prio, extra;
} tg_ftrace_compact_src_t;

typedef struct tg_ftrace_compact {
  size_t cap; /* rows a page can hold */
  uint64_t *sw_ts;
  int64_t *sw_state;
  int32_t *sw_pid, *sw_prio;
  uint32_t *sw_comm;
  size_t n_sw;
  uint64_t *wk_ts;
  int32_t *wk_pid, *wk_cpu, *wk_prio;
  uint32_t *wk_comm, *wk_flags;
  size_t n_wk;
  /* The bundle's intern table: comms[i] (NUL-padded to 16 bytes, which
   * is also how they are compared) of comm_len[i] bytes, found through an
   * open-addressed hash (slots hold index + 1). */
  uint64_t (*comms)[2];
  uint8_t *comm_len;
  uint32_t *comm_slot; /* the slot each comm took, to clear them */
  size_t n_comms;
  uint32_t *slots;
  unsigned slot_shift; /* 64 - log2(slot count); more slots than 2 * cap */
  uint64_t *vals; /* a column's varint values while it is written */
} tg_ftrace_compact_t;

/* Room for |cap| rows. Returns 0 or -ENOMEM. */
int tg__ftrace_compact_init(tg_ftrace_compact_t *c, size_t cap);
void tg__ftrace_compact_free(tg_ftrace_compact_t *c);
/* Empties the rows and the intern table for the next bundle. */
void tg__ftrace_compact_reset(tg_ftrace_compact_t *c);
/* Writes FtraceEventBundle.compact_sched, if there are rows. */
void tg__ftrace_compact_write(tg_ftrace_compact_t *c, tg_pbw_t *w);

/* --- adding a row (every sched record: inlined) -------------------------- */

#define TG_FTRACE_COMM_MAX 16

/* Adds comm words |w0| |w1| of |n| bytes in slot |k|; returns its index. */
uint32_t tg__ftrace_compact_intern_new(tg_ftrace_compact_t *c, size_t k,
                                       uint64_t w0, uint64_t w1, size_t n);

/* The first |n| (<= 8) bytes of |w|, the rest zero. */
static inline uint64_t tg__ftrace_low_bytes(uint64_t w, size_t n) {
  return n >= 8 ? w : w & ((UINT64_C(1) << (8 * n)) - 1);
}

/* The index of the comm of |n| bytes at |s| in the bundle's intern table,
 * added if new. |whole| says 16 bytes can be read at |s| (a char[16]). */
static inline uint32_t tg__ftrace_compact_intern(tg_ftrace_compact_t *c,
                                                 const uint8_t *s, size_t n,
                                                 bool whole) {
  if (n > TG_FTRACE_COMM_MAX) n = TG_FTRACE_COMM_MAX;
  uint64_t w0, w1;
  if (whole && TG_FTRACE_PUT_WORDS) {
    w0 = tg__ftrace_low_bytes(tg__ftrace_ld64(s), n);
    w1 = n > 8 ? tg__ftrace_low_bytes(tg__ftrace_ld64(s + 8), n - 8) : 0;
  } else {
    uint8_t b[TG_FTRACE_COMM_MAX] = {0};
    memcpy(b, s, n);
    memcpy(&w0, b, 8);
    memcpy(&w1, b + 8, 8);
  }
  /* Multiplicative hashing: the top bits of the product index the slots. */
  uint64_t h = (w0 ^ (w1 * UINT64_C(0xc2b2ae3d27d4eb4f))) *
               UINT64_C(0x9e3779b97f4a7c15);
  size_t mask = ((size_t)1 << (64 - c->slot_shift)) - 1;
  for (size_t k = (size_t)(h >> c->slot_shift);; k = (k + 1) & mask) {
    uint32_t idx = c->slots[k];
    if (idx == 0) return tg__ftrace_compact_intern_new(c, k, w0, w1, n);
    /* NUL-padded words of strings without NULs: equal words, equal
     * strings. */
    if (c->comms[idx - 1][0] == w0 && c->comms[idx - 1][1] == w1)
      return idx - 1;
  }
}

/* A scalar op's value read as a word (8 bytes past the record are
 * readable); the caller has checked that the field lies in the record. */
static inline uint64_t tg__ftrace_compact_int(const tg_ftrace_op_t *op,
                                              const uint8_t *rec) {
  uint64_t x = tg__ftrace_ld64(rec + op->offset) & op->mask;
  return (x ^ op->sign) - op->sign;
}

/* Appends a row of values already read: a sched_switch's (|extra| its
 * prev_state) or, |waking|, a sched_waking's (|extra| its target_cpu);
 * |comm| interned. The caller has checked that there is room. */
static inline void tg__ftrace_compact_put(tg_ftrace_compact_t *c, bool waking,
                                          uint64_t ts, int32_t pid,
                                          int32_t prio, int64_t extra,
                                          uint32_t comm, uint32_t flags) {
  if (!waking) {
    size_t i = c->n_sw++;
    c->sw_ts[i] = ts;
    c->sw_state[i] = extra;
    c->sw_pid[i] = pid;
    c->sw_prio[i] = prio;
    c->sw_comm[i] = comm;
    return;
  }
  size_t i = c->n_wk++;
  c->wk_ts[i] = ts;
  c->wk_pid[i] = pid;
  c->wk_cpu[i] = (int32_t)extra;
  c->wk_prio[i] = prio;
  c->wk_comm[i] = comm;
  c->wk_flags[i] = flags;
}

/* Adds the record of |len| bytes as a row; false when a source field lies
 * outside it or the rows are full (then it is written as an event). Reads
 * its scalars as words: 8 bytes past the record must be readable. */
static inline bool tg__ftrace_compact_add(tg_ftrace_compact_t *c,
                                          const tg_ftrace_compact_src_t *src,
                                          uint64_t ts, const uint8_t *rec,
                                          uint32_t len) {
  if (len < src->min_len || c->n_sw + c->n_wk >= c->cap) return false;
  const uint8_t *s;
  size_t n;
  bool whole = src->comm.kind == TG_FTRACE_OP_COMM;
  if (whole) {
    s = rec + src->comm.offset;
    n = tg__ftrace_strnlen16(s);
  } else if (!tg__ftrace_op_str(&src->comm, rec, len, &s, &n)) {
    return false;
  }
  uint64_t pid = tg__ftrace_compact_int(&src->pid, rec);
  uint64_t prio = tg__ftrace_compact_int(&src->prio, rec);
  uint64_t extra = tg__ftrace_compact_int(&src->extra, rec);
  uint32_t comm = tg__ftrace_compact_intern(c, s, n, whole);
  bool waking = src->kind != TG_FTRACE_COMPACT_SWITCH;
  uint32_t flags =
      waking && src->flags_offset < len ? rec[src->flags_offset] : 0;
  tg__ftrace_compact_put(c, waking, ts, (int32_t)pid, (int32_t)prio,
                         (int64_t)extra, comm, flags);
  return true;
}

#endif /* TRACEGATE_PROBES_FTRACE_COMPACT_H */
