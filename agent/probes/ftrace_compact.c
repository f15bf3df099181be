/* compact_sched rows and columns; see ftrace_compact.h. */
#include "agent/probes/ftrace_compact.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/ftrace_put.h"

/* FtraceEventBundle and its CompactSched. */
#define BUNDLE_COMPACT_SCHED 4
#define CS_SWITCH_TS 1
#define CS_SWITCH_PREV_STATE 2
#define CS_SWITCH_NEXT_PID 3
#define CS_SWITCH_NEXT_PRIO 4
#define CS_INTERN_TABLE 5
#define CS_SWITCH_NEXT_COMM 6
#define CS_WAKING_TS 7
#define CS_WAKING_PID 8
#define CS_WAKING_TARGET_CPU 9
#define CS_WAKING_PRIO 10
#define CS_WAKING_COMM 11
#define CS_WAKING_FLAGS 12

int tg__ftrace_compact_init(tg_ftrace_compact_t *c, size_t cap) {
  memset(c, 0, sizeof(*c));
  c->cap = cap;
  size_t n_slots = 1;
  unsigned bits = 0;
  while (n_slots < 2 * cap + 1) {
    n_slots <<= 1;
    bits++;
  }
  c->slot_shift = 64 - bits;
  c->sw_ts = calloc(cap, sizeof(*c->sw_ts));
  c->sw_state = calloc(cap, sizeof(*c->sw_state));
  c->sw_pid = calloc(cap, sizeof(*c->sw_pid));
  c->sw_prio = calloc(cap, sizeof(*c->sw_prio));
  c->sw_comm = calloc(cap, sizeof(*c->sw_comm));
  c->wk_ts = calloc(cap, sizeof(*c->wk_ts));
  c->wk_pid = calloc(cap, sizeof(*c->wk_pid));
  c->wk_cpu = calloc(cap, sizeof(*c->wk_cpu));
  c->wk_prio = calloc(cap, sizeof(*c->wk_prio));
  c->wk_comm = calloc(cap, sizeof(*c->wk_comm));
  c->wk_flags = calloc(cap, sizeof(*c->wk_flags));
  c->comms = calloc(cap, sizeof(*c->comms));
  c->comm_len = calloc(cap, sizeof(*c->comm_len));
  c->comm_slot = calloc(cap, sizeof(*c->comm_slot));
  c->slots = calloc(n_slots, sizeof(*c->slots));
  if (!c->sw_ts || !c->sw_state || !c->sw_pid || !c->sw_prio || !c->sw_comm ||
      !c->wk_ts || !c->wk_pid || !c->wk_cpu || !c->wk_prio || !c->wk_comm ||
      !c->wk_flags || !c->comms || !c->comm_len || !c->comm_slot ||
      !c->slots) {
    tg__ftrace_compact_free(c);
    return -ENOMEM;
  }
  return 0;
}

void tg__ftrace_compact_free(tg_ftrace_compact_t *c) {
  free(c->sw_ts);
  free(c->sw_state);
  free(c->sw_pid);
  free(c->sw_prio);
  free(c->sw_comm);
  free(c->wk_ts);
  free(c->wk_pid);
  free(c->wk_cpu);
  free(c->wk_prio);
  free(c->wk_comm);
  free(c->wk_flags);
  free(c->comms);
  free(c->comm_len);
  free(c->comm_slot);
  free(c->slots);
  memset(c, 0, sizeof(*c));
}

void tg__ftrace_compact_reset(tg_ftrace_compact_t *c) {
  for (size_t i = 0; i < c->n_comms; i++) c->slots[c->comm_slot[i]] = 0;
  c->n_comms = 0;
  c->n_sw = c->n_wk = 0;
}

uint32_t tg__ftrace_compact_intern_new(tg_ftrace_compact_t *c, size_t k,
                                       uint64_t w0, uint64_t w1, size_t n) {
  /* Never full: more slots than 2 * cap, at most cap rows a page. */
  uint32_t i = (uint32_t)c->n_comms++;
  c->comms[i][0] = w0;
  c->comms[i][1] = w1;
  c->comm_len[i] = (uint8_t)n;
  c->comm_slot[i] = (uint32_t)k;
  c->slots[k] = i + 1;
  return i;
}

/* Varints of a packed column, written straight into the writer's segment
 * while it has room for the worst case (and the unchecked writes' slack),
 * one by one through the writer where a segment ends: most of a bundle's
 * cost is these columns. The value of row i is get(i) (a delta from the
 * previous one if |delta|). */
#define PACKED_COLUMN(w, field, n, delta, get)                                 \
  do {                                                                         \
    if (!(n)) break;                                                           \
    tg_pbw_begin_nested((w), (field));                                         \
    uint64_t prev_ = 0;                                                        \
    size_t i_ = 0;                                                             \
    while (i_ < (n)) {                                                         \
      size_t left_ = (size_t)((w)->end - (w)->cur);                            \
      size_t room_ = left_ > TG_FTRACE_PUT_SLACK                               \
                         ? (left_ - TG_FTRACE_PUT_SLACK) /                     \
                               TG_PB_MAX_VARINT_SIZE                           \
                         : 0;                                                  \
      if (room_ == 0) {                                                        \
        uint8_t tmp_[TG_PB_MAX_VARINT_SIZE];                                   \
        uint64_t x_ = (uint64_t)(get(i_));                                     \
        uint64_t y_ = (delta) ? x_ - prev_ : x_;                               \
        prev_ = x_;                                                            \
        tg_pbw_append_raw((w), tmp_,                                           \
                          (size_t)(tg_pb_write_varint(tmp_, y_) - tmp_));      \
        i_++;                                                                  \
        continue;                                                              \
      }                                                                        \
      size_t end_ = (n) - i_ < room_ ? (n) : i_ + room_;                       \
      uint8_t *p_ = (w)->cur;                                                  \
      for (; i_ < end_; i_++) {                                                \
        uint64_t x_ = (uint64_t)(get(i_));                                     \
        p_ = tg__ftrace_put_varint(p_, (delta) ? x_ - prev_ : x_);             \
        prev_ = x_;                                                            \
      }                                                                        \
      (w)->cur = p_;                                                           \
    }                                                                          \
    tg_pbw_end_nested(w);                                                      \
  } while (0)

void tg__ftrace_compact_write(tg_ftrace_compact_t *c, tg_pbw_t *w) {
  if (!c->n_sw && !c->n_wk) return;
  tg_pbw_begin_nested(w, BUNDLE_COMPACT_SCHED);
  for (size_t i = 0; i < c->n_comms; i++)
    tg_pbw_append_bytes(w, CS_INTERN_TABLE, c->comms[i], c->comm_len[i]);
  /* int32 columns are varints of their int64 value, as protobuf encodes a
   * negative int32 (ten bytes). */
#define SW_TS(i) c->sw_ts[i]
#define SW_STATE(i) (uint64_t)c->sw_state[i]
#define SW_PID(i) (uint64_t)(int64_t)c->sw_pid[i]
#define SW_PRIO(i) (uint64_t)(int64_t)c->sw_prio[i]
#define SW_COMM(i) c->sw_comm[i]
#define WK_TS(i) c->wk_ts[i]
#define WK_PID(i) (uint64_t)(int64_t)c->wk_pid[i]
#define WK_CPU(i) (uint64_t)(int64_t)c->wk_cpu[i]
#define WK_PRIO(i) (uint64_t)(int64_t)c->wk_prio[i]
#define WK_COMM(i) c->wk_comm[i]
#define WK_FLAGS(i) c->wk_flags[i]
  PACKED_COLUMN(w, CS_SWITCH_TS, c->n_sw, true, SW_TS);
  PACKED_COLUMN(w, CS_SWITCH_PREV_STATE, c->n_sw, false, SW_STATE);
  PACKED_COLUMN(w, CS_SWITCH_NEXT_PID, c->n_sw, false, SW_PID);
  PACKED_COLUMN(w, CS_SWITCH_NEXT_PRIO, c->n_sw, false, SW_PRIO);
  PACKED_COLUMN(w, CS_SWITCH_NEXT_COMM, c->n_sw, false, SW_COMM);
  PACKED_COLUMN(w, CS_WAKING_TS, c->n_wk, true, WK_TS);
  PACKED_COLUMN(w, CS_WAKING_PID, c->n_wk, false, WK_PID);
  PACKED_COLUMN(w, CS_WAKING_TARGET_CPU, c->n_wk, false, WK_CPU);
  PACKED_COLUMN(w, CS_WAKING_PRIO, c->n_wk, false, WK_PRIO);
  PACKED_COLUMN(w, CS_WAKING_COMM, c->n_wk, false, WK_COMM);
  PACKED_COLUMN(w, CS_WAKING_FLAGS, c->n_wk, false, WK_FLAGS);
  tg_pbw_end_nested(w);
}
