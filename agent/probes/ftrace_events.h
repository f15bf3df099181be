/* The events Perfetto decodes into messages of their own: for each, the
 * FtraceEvent field number and, per format field, the message's field
 * number and type. Everything else is written as GenericFtraceEvent.
 * Numbers are those of proto/trace/ftrace/ (Perfetto's).
 */
#ifndef TRACEGATE_PROBES_FTRACE_EVENTS_H
#define TRACEGATE_PROBES_FTRACE_EVENTS_H

#include <stddef.h>
#include <stdint.h>

/* FtraceEvent fields. */
#define TG_FTRACE_EVENT_TIMESTAMP 1
#define TG_FTRACE_EVENT_PID 2
#define TG_FTRACE_EVENT_COMMON_FLAGS 5
#define TG_FTRACE_EVENT_GENERIC 327
#define TG_FTRACE_EVENT_SCHED_SWITCH 4
#define TG_FTRACE_EVENT_SCHED_WAKING 20

typedef enum tg_ftrace_proto_type {
  TG_FTRACE_PT_STRING = 1,
  TG_FTRACE_PT_INT,       /* int32/int64: sign-extended varint */
  TG_FTRACE_PT_UINT,      /* uint32/uint64 */
  TG_FTRACE_PT_REPEATED_UINT,
} tg_ftrace_proto_type_t;

/* An entry may name fields this kernel lacks (other kernels' names). A
 * format field the entry does not name, or names with a type its layout
 * cannot take (ftrace_encode.c's type_fits), is not written. */
typedef struct tg_ftrace_known_field {
  const char *name; /* as in the format file */
  uint8_t proto_field;
  uint8_t type; /* tg_ftrace_proto_type_t */
} tg_ftrace_known_field_t;

#define TG_FTRACE_KNOWN_FIELDS_MAX 8

typedef struct tg_ftrace_known_event {
  const char *group, *name;
  uint32_t proto_field; /* in FtraceEvent */
  tg_ftrace_known_field_t fields[TG_FTRACE_KNOWN_FIELDS_MAX];
} tg_ftrace_known_event_t;

/* The entry for group/name, or NULL. */
const tg_ftrace_known_event_t *tg_ftrace_known_event(const char *group,
                                                     const char *name);
/* The whole table (static), for checks over every entry; |*n| receives
 * its length. */
const tg_ftrace_known_event_t *tg_ftrace_known_events(size_t *n);

#endif /* TRACEGATE_PROBES_FTRACE_EVENTS_H */
