/* compact_sched: sched_switch and sched_waking records of one page as
 * FtraceEventBundle.CompactSched columns instead of FtraceEvent messages.
 *
 * Rows collect while the page is walked; the columns are written after it
 * (delta-coded timestamps, packed varints, comms interned per bundle).
 * The buffers are sized for the densest page at init, so adding a row
 * allocates nothing.
 */
#ifndef TRACEGATE_PROBES_FTRACE_COMPACT_H
#define TRACEGATE_PROBES_FTRACE_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probes/ftrace_plan.h"
#include "tracegate/pb_writer.h"

enum { TG_FTRACE_COMPACT_NONE, TG_FTRACE_COMPACT_SWITCH, TG_FTRACE_COMPACT_WAKING };

/* Where an event's columns come from: comm, pid, prio and prev_state
 * (switch) or target_cpu (waking). */
typedef struct tg_ftrace_compact_src {
  uint8_t kind; /* TG_FTRACE_COMPACT_* */
  uint16_t flags_offset;
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
} tg_ftrace_compact_t;

/* Room for |cap| rows. Returns 0 or -ENOMEM. */
int tg__ftrace_compact_init(tg_ftrace_compact_t *c, size_t cap);
void tg__ftrace_compact_free(tg_ftrace_compact_t *c);
/* Empties the rows and the intern table for the next page. */
void tg__ftrace_compact_reset(tg_ftrace_compact_t *c);
/* Adds the record of |len| bytes as a row; false when a source field lies
 * outside it or the rows are full (then it is written as an event). Reads
 * its scalars as words: 8 bytes past the record must be readable. */
bool tg__ftrace_compact_add(tg_ftrace_compact_t *c,
                            const tg_ftrace_compact_src_t *src, uint64_t ts,
                            const uint8_t *rec, uint32_t len);
/* Writes FtraceEventBundle.compact_sched, if there are rows. */
void tg__ftrace_compact_write(tg_ftrace_compact_t *c, tg_pbw_t *w);

#endif /* TRACEGATE_PROBES_FTRACE_COMPACT_H */
