/* tracegate-probes' timing of its own work ("perfetto.metatrace"): how
 * long each ftrace drain, /proc scan, pid resolution and sys_stats round
 * takes, recorded while a session asks for it and written as
 * PerfettoMetatrace packets (trace_processor shows them as slices on the
 * recording thread).
 *
 * Any thread records into one fixed ring: a slot claimed with one
 * compare-and-swap, published with a release store; no allocation, no
 * lock, and no system call beyond the clock. The one reader (under the
 * ring's mutex: the data source's rounds on the sampler thread and its
 * stop on the agent's) takes the published records in order. A writer
 * that would overtake the reader drops its record and counts an overrun;
 * the next packet written says so (has_overruns). While no instance is
 * active, recording costs one relaxed load.
 *
 * One ring per process: with two sessions asking at once, each record
 * goes to whichever drains it first, as in Perfetto.
 */
#ifndef TRACEGATE_PROBES_METATRACE_H
#define TRACEGATE_PROBES_METATRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probes/probes_sink.h"

/* Slots in the ring (a power of two). */
#define TG_META_RING 4096u

typedef enum tg_meta_event {
  TG_META_FTRACE_DRAIN, /* one drain of a linux.ftrace session's CPUs */
  TG_META_PS_SCAN,      /* linux.process_stats: a scan of /proc */
  TG_META_PS_RESOLVE,   /* linux.process_stats: the pids ftrace handed over */
  TG_META_SYS_STATS,    /* linux.sys_stats: one round */
  TG_META_KALLSYMS,     /* loading /proc/kallsyms */
  TG_META_N
} tg_meta_event_t;

/* The name a record is written with (PerfettoMetatrace.event_name). */
const char *tg_meta_event_name(tg_meta_event_t e);

/* An instance started / stopped: recording is on while any is active. */
void tg_meta_enable(void);
void tg_meta_disable(void);

/* When an event starts: its CLOCK_BOOTTIME time, or 0 when recording is
 * off (then tg_meta_end does nothing). */
uint64_t tg_meta_begin(void);
/* Records event |e| of the calling thread from |start| (tg_meta_begin's)
 * to now. */
void tg_meta_end(tg_meta_event_t e, uint64_t start);

/* Writes every published record, oldest first, one TracePacket each, into
 * |sink|. Returns how many. */
size_t tg_meta_drain(const tg_probes_sink_t *sink);

/* For tests: records dropped for want of room, all told. */
uint64_t tg_meta_overruns(void);

#endif /* TRACEGATE_PROBES_METATRACE_H */
