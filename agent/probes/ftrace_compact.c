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
  c->vals = calloc(cap, sizeof(*c->vals));
  if (!c->sw_ts || !c->sw_state || !c->sw_pid || !c->sw_prio || !c->sw_comm ||
      !c->wk_ts || !c->wk_pid || !c->wk_cpu || !c->wk_prio || !c->wk_comm ||
      !c->wk_flags || !c->comms || !c->comm_len || !c->comm_slot ||
      !c->slots || !c->vals) {
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
  free(c->vals);
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

/* --- columns ------------------------------------------------------------ */

/* How a column's values become varints: timestamps as deltas from the
 * previous row, int32 columns as their int64 value (as protobuf encodes a
 * negative int32: ten bytes). */
enum { COL_TS, COL_I64, COL_I32, COL_U32 };

typedef struct column {
  uint32_t field;
  uint8_t type;
  const void *v;
  size_t n;
} column_t;

#define N_COLUMNS 11

static void columns_of(const tg_ftrace_compact_t *c, column_t *col) {
  const column_t cols[N_COLUMNS] = {
      {CS_SWITCH_TS, COL_TS, c->sw_ts, c->n_sw},
      {CS_SWITCH_PREV_STATE, COL_I64, c->sw_state, c->n_sw},
      {CS_SWITCH_NEXT_PID, COL_I32, c->sw_pid, c->n_sw},
      {CS_SWITCH_NEXT_PRIO, COL_I32, c->sw_prio, c->n_sw},
      {CS_SWITCH_NEXT_COMM, COL_U32, c->sw_comm, c->n_sw},
      {CS_WAKING_TS, COL_TS, c->wk_ts, c->n_wk},
      {CS_WAKING_PID, COL_I32, c->wk_pid, c->n_wk},
      {CS_WAKING_TARGET_CPU, COL_I32, c->wk_cpu, c->n_wk},
      {CS_WAKING_PRIO, COL_I32, c->wk_prio, c->n_wk},
      {CS_WAKING_COMM, COL_U32, c->wk_comm, c->n_wk},
      {CS_WAKING_FLAGS, COL_U32, c->wk_flags, c->n_wk},
  };
  memcpy(col, cols, sizeof(cols));
}

/* The column's varint values into |out|, its bytes returned. One typed
 * loop per column, not a switch per value: the compiler vectorises the
 * conversions and the lengths (tg__ftrace_varint_len has no branch). */
static size_t column_values(const column_t *col, uint64_t *out) {
  size_t n = col->n, bytes = 0;
  switch (col->type) {
    case COL_TS: {
      const uint64_t *v = col->v;
      uint64_t prev = 0;
      for (size_t i = 0; i < n; i++) {
        out[i] = v[i] - prev;
        prev = v[i];
      }
      break;
    }
    case COL_I64: {
      const int64_t *v = col->v;
      for (size_t i = 0; i < n; i++) out[i] = (uint64_t)v[i];
      break;
    }
    case COL_I32: {
      const int32_t *v = col->v;
      for (size_t i = 0; i < n; i++) out[i] = (uint64_t)(int64_t)v[i];
      break;
    }
    default: {
      const uint32_t *v = col->v;
      for (size_t i = 0; i < n; i++) out[i] = v[i];
      break;
    }
  }
  for (size_t i = 0; i < n; i++) bytes += tg__ftrace_varint_len(out[i]);
  return bytes;
}

/* A key and the size |n| of the field after it. */
static void append_len_key(tg_pbw_t *w, uint32_t field, size_t n) {
  uint8_t head[2 * TG_PB_MAX_VARINT_SIZE];
  uint8_t *p = tg_pb_write_varint(head, TG_PB_TAG(field, TG_PB_WT_LEN));
  p = tg_pb_write_varint(p, n);
  tg_pbw_append_raw(w, head, (size_t)(p - head));
}

/* Bytes of varints gathered before they are appended. */
#define COLUMN_BLOCK 512

/* The |n| varints of |v|, |bytes| in all: straight into the writer's
 * segment when they fit there with the word stores' slack (most
 * columns), else gathered in blocks that the writer splits across
 * segments. */
static void append_varints(tg_pbw_t *w, const uint64_t *v, size_t n,
                           size_t bytes) {
  if ((size_t)(w->end - w->cur) >= bytes + TG_FTRACE_PUT_SLACK) {
    uint8_t *p = w->cur;
    for (size_t i = 0; i < n; i++) p = tg__ftrace_put_varint(p, v[i]);
    w->cur = p;
    return;
  }
  uint8_t block[COLUMN_BLOCK + TG_PB_MAX_VARINT_SIZE + TG_FTRACE_PUT_SLACK];
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    used = (size_t)(tg__ftrace_put_varint(block + used, v[i]) - block);
    if (used >= COLUMN_BLOCK) {
      tg_pbw_append_raw(w, block, used);
      used = 0;
    }
  }
  tg_pbw_append_raw(w, block, used);
}

/* Every size is worked out before its field is written, so each takes
 * the fewest bytes (as Perfetto's probes write the packed columns): the
 * values are worked out twice, once for the sizes and once to write
 * them, which costs less than keeping every column's. */
void tg__ftrace_compact_write(tg_ftrace_compact_t *c, tg_pbw_t *w) {
  if (!c->n_sw && !c->n_wk) return;
  column_t cols[N_COLUMNS];
  columns_of(c, cols);
  size_t sizes[N_COLUMNS], total = 0;
  for (size_t i = 0; i < c->n_comms; i++) total += 2 + c->comm_len[i];
  for (unsigned k = 0; k < N_COLUMNS; k++) {
    if (!cols[k].n) continue;
    sizes[k] = column_values(&cols[k], c->vals);
    total += 1 + tg_pb_varint_size(sizes[k]) + sizes[k];
  }
  append_len_key(w, BUNDLE_COMPACT_SCHED, total);
  for (size_t i = 0; i < c->n_comms; i++)
    tg_pbw_append_bytes(w, CS_INTERN_TABLE, c->comms[i], c->comm_len[i]);
  for (unsigned k = 0; k < N_COLUMNS; k++) {
    if (!cols[k].n) continue;
    append_len_key(w, cols[k].field, sizes[k]);
    column_values(&cols[k], c->vals);
    append_varints(w, c->vals, cols[k].n, sizes[k]);
  }
}
