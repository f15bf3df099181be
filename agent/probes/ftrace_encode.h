/* Kernel records -> FtraceEventBundle.
 *
 * A table, built once per session from the format files of the enabled
 * events, maps each record's common_type to how it is written: Perfetto's
 * message for the events in ftrace_events.c, GenericFtraceEvent for the
 * rest, or the compact_sched columns for sched_switch and sched_waking.
 *
 * The encoder turns one ring buffer page into one bundle, straight into a
 * tg_pbw_t. Its buffers (compact columns, the bundle's comm intern table)
 * are sized for the densest page at init, so encoding allocates nothing and
 * makes no system call. Page bytes are untrusted (ftrace_page.h); a field
 * that does not fit in its record is left out.
 */
#ifndef TRACEGATE_PROBES_FTRACE_ENCODE_H
#define TRACEGATE_PROBES_FTRACE_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probes/ftrace_format.h"
#include "tracegate/pb_writer.h"

typedef struct tg_ftrace_out_field {
  tg_ftrace_field_t f;
  uint16_t proto_field; /* 0 in generic events */
  uint8_t type;         /* tg_ftrace_proto_type_t; 0 in generic events */
} tg_ftrace_out_field_t;

enum { TG_FTRACE_COMPACT_NONE, TG_FTRACE_COMPACT_SWITCH, TG_FTRACE_COMPACT_WAKING };

typedef struct tg_ftrace_event_desc {
  char group[TG_FTRACE_NAME_MAX];
  char name[TG_FTRACE_NAME_MAX];
  uint32_t proto_field; /* in FtraceEvent */
  uint16_t pid_offset, flags_offset;
  uint8_t n_out;
  tg_ftrace_out_field_t out[TG_FTRACE_MAX_FIELDS];
  /* The compact columns' sources (TG_FTRACE_COMPACT_*): comm, pid, prio,
   * prev_state / target_cpu, as indices into out[]. */
  uint8_t compact;
  uint8_t c_comm, c_pid, c_prio, c_extra;
} tg_ftrace_event_desc_t;

typedef struct tg_ftrace_table {
  uint16_t *by_id; /* common_type -> index + 1 into events; 0: not ours */
  tg_ftrace_event_desc_t *events;
  size_t n, cap;
} tg_ftrace_table_t;

/* Returns 0 or -ENOMEM. */
int tg_ftrace_table_init(tg_ftrace_table_t *t);
/* Adds the event of format |fmt| in |group|. Known events get Perfetto's
 * message; the rest GenericFtraceEvent unless |no_generic| (then records of
 * it are skipped). Returns 0, -EEXIST (same id twice), -ENOMEM. */
int tg_ftrace_table_add(tg_ftrace_table_t *t, const char *group,
                        const tg_ftrace_format_t *fmt, bool no_generic);
void tg_ftrace_table_free(tg_ftrace_table_t *t);

typedef struct tg_ftrace_encoder {
  const tg_ftrace_table_t *table;
  bool compact;
  size_t cap; /* records a page can hold */
  uint64_t *sw_ts;
  int64_t *sw_state;
  int32_t *sw_pid, *sw_prio;
  uint32_t *sw_comm;
  size_t n_sw;
  uint64_t *wk_ts;
  int32_t *wk_pid, *wk_cpu, *wk_prio;
  uint32_t *wk_comm, *wk_flags;
  size_t n_wk;
  /* The bundle's intern table: comms[i] of comm_len[i] bytes, found through
   * an open-addressed hash (slots hold index + 1). */
  char (*comms)[16];
  uint8_t *comm_len;
  uint32_t *comm_slot; /* the slot each comm took, to clear them */
  size_t n_comms;
  uint32_t *slots;
  size_t n_slots; /* a power of two, > 2 * cap */
} tg_ftrace_encoder_t;

typedef struct tg_ftrace_bundle_result {
  uint32_t events;  /* records written (full or compact) */
  uint32_t skipped; /* records of events not in the table */
  bool lost_events;
  bool corrupt;     /* the page or a record did not parse */
} tg_ftrace_bundle_result_t;

/* |table| is borrowed for the encoder's life. Returns 0 or -ENOMEM. */
int tg_ftrace_encoder_init(tg_ftrace_encoder_t *e, const tg_ftrace_table_t *table,
                           bool compact_sched, uint32_t page_size);
void tg_ftrace_encoder_free(tg_ftrace_encoder_t *e);

/* Writes the fields of one FtraceEventBundle (cpu, event*, lost_events,
 * compact_sched) for the page into |w|; the caller wraps them in
 * TracePacket.ftrace_events. */
void tg_ftrace_encode_bundle(tg_ftrace_encoder_t *e, tg_pbw_t *w, uint32_t cpu,
                             const tg_ftrace_page_layout_t *layout,
                             const uint8_t *page_untrusted, size_t len,
                             tg_ftrace_bundle_result_t *res);

#endif /* TRACEGATE_PROBES_FTRACE_ENCODE_H */
