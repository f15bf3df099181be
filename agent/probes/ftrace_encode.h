/* Kernel records -> FtraceEventBundle.
 *
 * A table, built once per session from the format files of the enabled
 * events, maps each record's common_type to how it is written: Perfetto's
 * message for the events in ftrace_events.c, GenericFtraceEvent for the
 * rest, or the compact_sched columns for sched_switch and sched_waking.
 *
 * The encoder turns ring buffer pages of one CPU into one bundle (several
 * pages, as Perfetto's probes bundle a read's pages: the compact_sched
 * columns and their comm intern table then span them all), straight into
 * a tg_pbw_t: known events through their field plans (ftrace_plan.h) with one
 * room check per record, the rest field by field through the writer. Its
 * buffers (compact columns, the bundle's comm intern table) are sized at
 * init for TG_FTRACE_BUNDLE_ROWS rows (at least the densest page's), so encoding allocates nothing and makes no
 * system call. Page bytes are untrusted (ftrace_page.h); a field that does
 * not fit in its record is left out. Kernel addresses (void * fields) are
 * written as indices of the encoder's kaddrs (ftrace_kaddr.h), in known and
 * generic events alike. A char pointer (TG_FTRACE_FIELD_STRPTR) is written
 * as the string printk_formats lists at its address (ftrace_printk.h),
 * where the message's field is a string and in generic events, and as an
 * empty string when none is listed, as Perfetto's probes write it; where
 * the message's field is an integer it is an index like void *. Events
 * with either kind of field have no plan. dev_t fields are written as
 * stat(2) gives the device (tg_ftrace_dev_to_user), as Perfetto's probes
 * write them.
 */
#ifndef TRACEGATE_PROBES_FTRACE_ENCODE_H
#define TRACEGATE_PROBES_FTRACE_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probes/ftrace_compact.h"
#include "agent/probes/ftrace_format.h"
#include "agent/probes/ftrace_kaddr.h"
#include "agent/probes/ftrace_plan.h"
#include "agent/probes/ftrace_printk.h"
#include "agent/probes/inode_set.h"
#include "agent/probes/pid_set.h"
#include "tracegate/pb_writer.h"

typedef struct tg_ftrace_out_field {
  tg_ftrace_field_t f;
  uint16_t proto_field; /* 0 in generic events */
  uint8_t type;         /* tg_ftrace_proto_type_t; 0 in generic events */
} tg_ftrace_out_field_t;

/* Inode fields collected per record; real events have at most two with a
 * dev_t beside them (ext4's ino and parent). */
#define TG_FTRACE_INO_FIELDS_MAX 3

typedef struct tg_ftrace_event_desc {
  /* What every record reads first, together. Records are written by the
   * plan (ftrace_plan.h) when it has one for their length, else field by
   * field from out[] through the writer (generic events; truncated
   * records; any record when the segment is short of the plan's worst
   * case). */
  tg_ftrace_compact_src_t compact; /* kind NONE: not a compact event */
  tg_ftrace_plan_t plan;
  char group[TG_FTRACE_NAME_MAX];
  char name[TG_FTRACE_NAME_MAX];
  uint32_t proto_field; /* in FtraceEvent */
  uint16_t pid_offset, flags_offset;
  /* The pid fields (4 bytes each) of the record that name a task to
   * resolve: next_pid then prev_pid of sched_switch, pid of the wake-ups,
   * task_newtask and task_rename, child_pid of sched_process_fork. A
   * compact row has only the first. */
  uint8_t n_pid_fields;
  uint16_t pid_fields[2];
  /* The inode fields the record names on its device (the first dev_t
   * field, at dev_offset): ext4's ino and parent, filemap's i_ino... Only
   * fields the event's message writes; none without a dev_t field. */
  uint8_t n_ino_fields;
  uint8_t dev_size; /* 4 or 8 */
  uint16_t dev_offset;
  uint16_t ino_offsets[TG_FTRACE_INO_FIELDS_MAX];
  uint8_t ino_sizes[TG_FTRACE_INO_FIELDS_MAX]; /* 4 or 8 */
  uint8_t n_out;
  tg_ftrace_out_field_t out[TG_FTRACE_MAX_FIELDS];
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
/* True if some event of the table writes a char pointer as its string:
 * encoding it needs printk_formats. */
bool tg_ftrace_table_wants_strings(const tg_ftrace_table_t *t);

/* compact_sched rows a bundle holds (as Perfetto's probes' compact
 * buffers): some 40 pages of sched_switch and sched_waking records, for
 * under 100 bytes of buffers a row. */
#define TG_FTRACE_BUNDLE_ROWS 4096

typedef struct tg_ftrace_encoder {
  const tg_ftrace_table_t *table;
  bool compact;
  tg_ftrace_compact_t cs;
  uint32_t page_rows; /* the most records a page holds */
  /* A page's last record, copied with TG_FTRACE_WORD_PAD zero bytes after
   * it when the buffer ends too soon for word reads. */
  uint8_t *tail;
  uint32_t tail_cap;
  /* Where the pids of the records go (common_pid and the pid fields);
   * NULL: not collected. Borrowed; set between pages. */
  tg_pid_set_t *pids;
  /* Where the (inode, device) pairs of the records go; NULL: not
   * collected. Records whose common_pid is inode_skip_pid (when not 0)
   * are left out: the scanner's own reads. Borrowed; set between pages. */
  tg_inode_set_t *inodes;
  int32_t inode_skip_pid;
  /* The indices written for kernel addresses; the owner resets it between
   * drains (tg_ftrace_kaddrs_reset). */
  tg_ftrace_kaddrs_t kaddrs;
  /* The strings of char pointers; NULL: none listed (each is written
   * empty). Borrowed; set between pages. */
  const tg_printk_formats_t *printk;
} tg_ftrace_encoder_t;

/* The most pids one page of |page_size| bytes adds to a set: a record is
 * at least 8 bytes and names at most three. A set with this much room
 * before each page never drops one. */
static inline uint32_t tg_ftrace_pids_per_page(uint32_t page_size) {
  return 3 * (page_size / 8 + 1);
}

/* The most pairs one page adds to an inode set (a record is at least 8
 * bytes): a set with this much room before each page never drops one. */
static inline uint32_t tg_ftrace_inodes_per_page(uint32_t page_size) {
  return TG_FTRACE_INO_FIELDS_MAX * (page_size / 8 + 1);
}

typedef struct tg_ftrace_bundle_result {
  uint32_t events;  /* records written (full or compact) */
  uint32_t skipped; /* records of events not in the table */
  bool lost_events;
  bool corrupt;     /* the page or a record did not parse */
  /* The timestamp of the page's last record written (full or compact);
   * 0: none written. */
  uint64_t last_ts;
} tg_ftrace_bundle_result_t;

/* |table| is borrowed for the encoder's life. Returns 0 or -ENOMEM. */
int tg_ftrace_encoder_init(tg_ftrace_encoder_t *e, const tg_ftrace_table_t *table,
                           bool compact_sched, uint32_t page_size);
void tg_ftrace_encoder_free(tg_ftrace_encoder_t *e);

/* A bundle's fields go into |w| (the caller wraps them in
 * TracePacket.ftrace_events): begin writes the cpu, each page added writes
 * its events (compact rows wait for the end), end writes compact_sched and
 * lost_events. Add a page only while has_room says the rows of one more
 * fit. lost_events belongs to a bundle's first page: a page whose header
 * says events were lost before it (tg_ftrace_page_lost_events) begins a
 * bundle. */
void tg_ftrace_bundle_begin(tg_ftrace_encoder_t *e, tg_pbw_t *w, uint32_t cpu);
/* The same with the bundle's previous_bundle_end_timestamp: the last
 * written record's timestamp (bundle_result.last_ts) of the CPU's previous
 * bundle, which tells trace processor where the CPU's data is whole from
 * after older bundles were lost. 0: none before, the field is left out. */
void tg_ftrace_bundle_begin_after(tg_ftrace_encoder_t *e, tg_pbw_t *w,
                                  uint32_t cpu, uint64_t previous_end_ts);
bool tg_ftrace_bundle_has_room(const tg_ftrace_encoder_t *e);
void tg_ftrace_bundle_add_page(tg_ftrace_encoder_t *e, tg_pbw_t *w,
                               const tg_ftrace_page_layout_t *layout,
                               const uint8_t *page_untrusted, size_t len,
                               tg_ftrace_bundle_result_t *res);
void tg_ftrace_bundle_end(tg_ftrace_encoder_t *e, tg_pbw_t *w,
                          bool lost_events);
/* Whether the page's header says the kernel lost events before it (false
 * for a page that does not parse). */
bool tg_ftrace_page_lost_events(const tg_ftrace_page_layout_t *layout,
                                const uint8_t *page_untrusted, size_t len);

/* A bundle of the one page: begin, add_page, end. */
void tg_ftrace_encode_bundle(tg_ftrace_encoder_t *e, tg_pbw_t *w, uint32_t cpu,
                             const tg_ftrace_page_layout_t *layout,
                             const uint8_t *page_untrusted, size_t len,
                             tg_ftrace_bundle_result_t *res);

#endif /* TRACEGATE_PROBES_FTRACE_ENCODE_H */
