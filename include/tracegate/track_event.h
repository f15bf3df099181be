/* Track events: slices, instants and counters from C, as Perfetto's
 * "track_event" data source, so the Perfetto UI shows them on the thread's
 * and process's tracks.
 *
 *   TG_CATEGORY(cat_render, "render");            // file scope, once
 *   static tg_category_t *const cats[] = {&cat_render};
 *   tg_track_event_register(cats, 1);             // before or after init
 *
 *   TG_SLICE_BEGIN(cat_render, "draw", TG_ARG_INT("frame", n));
 *   ...
 *   TG_SLICE_END(cat_render);
 *   { TG_SCOPED_SLICE(cat_render, "layout"); ... }  // ends at scope exit
 *   TG_INSTANT(cat_render, "vsync");
 *   TG_COUNTER(cat_render, "queue_depth", depth);
 *
 * Links go in the same list as annotations, on slice begins and instants:
 *
 *   TG_SLICE_BEGIN(cat_rpc, "send", TG_FLOW(id), TG_CORRELATION_ID(req));
 *   TG_SLICE_BEGIN(cat_rpc, "handle", TG_TERMINATING_FLOW(id));
 *
 * (tracegate/trace_context.h derives |id| from a W3C traceparent.)
 *
 * Event names, annotation names and counter names must be string literals
 * or otherwise live for the whole process: they are interned by address
 * (one table per thread and session) and sent once per sequence; after an
 * incremental-state clear they are sent again, together with the process
 * and thread track descriptors. Timestamps are CLOCK_BOOTTIME, the trace
 * clock of Perfetto, written as deltas from the thread's previous event on
 * a sequence-scoped incremental clock that a ClockSnapshot ties to
 * BOOTTIME (trace processors place them exactly; a session's
 * TrackEventConfig.disable_incremental_timestamps asks for absolute
 * ones).
 *
 * A category that no session enables costs one relaxed load and a branch;
 * the arguments are not evaluated.
 */
#ifndef TRACEGATE_TRACK_EVENT_H
#define TRACEGATE_TRACK_EVENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracegate/agent.h"
#include "tracegate/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_category {
  /* Bit i: session instance i enables this category. Written by the
   * agent's thread, read relaxed by every event site. */
  _Atomic uint8_t enabled;
  const char *name; /* borrowed; must outlive the process's tracing */
  uint32_t iid;     /* assigned at registration */
} tg_category_t;

#define TG_CATEGORY(var, cat_name) tg_category_t var = {.name = (cat_name)}

/* Registers categories (and, on the first call, the "track_event" data
 * source). |cats| and the categories are borrowed for the process's life.
 * Returns 0, -ENOSPC (more than TG_TRACK_EVENT_MAX_CATEGORIES in all), or
 * the error of tg_ds_register. */
#define TG_TRACK_EVENT_MAX_CATEGORIES 256
TG_EXPORT int tg_track_event_register(tg_category_t *const *cats, size_t n);

/* What an event carries besides its name: debug annotations, and links
 * to other events (flows, a correlation id; TG_ARG_TYPE_FLOW and up). */
enum tg_arg_type {
  TG_ARG_TYPE_INT = 1,
  TG_ARG_TYPE_UINT,
  TG_ARG_TYPE_DOUBLE,
  TG_ARG_TYPE_BOOL,
  TG_ARG_TYPE_STRING,
  TG_ARG_TYPE_FLOW = 16,       /* TrackEvent.flow_ids */
  TG_ARG_TYPE_TERMINATING_FLOW, /* TrackEvent.terminating_flow_ids */
  TG_ARG_TYPE_CORRELATION_ID,   /* TrackEvent.correlation_id */
  TG_ARG_TYPE_CORRELATION_STR,  /* TrackEvent.correlation_id_str */
};

/* What one event carries at most; the rest of each kind is left out, in
 * the order given. */
#define TG_TRACK_EVENT_MAX_ANNOTATIONS 16
#define TG_TRACK_EVENT_MAX_FLOWS 8 /* and as many terminating ones */

typedef struct tg_arg {
  const char *name; /* interned by address, like event names; NULL: links */
  int type;
  union {
    int64_t i;
    uint64_t u;
    double d;
    bool b;
    const char *s; /* copied into the trace */
  } v;
} tg_arg_t;

#define TG_ARG_INT(n, x) \
  ((tg_arg_t){.name = (n), .type = TG_ARG_TYPE_INT, .v.i = (int64_t)(x)})
#define TG_ARG_UINT(n, x) \
  ((tg_arg_t){.name = (n), .type = TG_ARG_TYPE_UINT, .v.u = (uint64_t)(x)})
#define TG_ARG_DOUBLE(n, x) \
  ((tg_arg_t){.name = (n), .type = TG_ARG_TYPE_DOUBLE, .v.d = (double)(x)})
#define TG_ARG_BOOL(n, x) \
  ((tg_arg_t){.name = (n), .type = TG_ARG_TYPE_BOOL, .v.b = (x)})
#define TG_ARG_STR(n, x) \
  ((tg_arg_t){.name = (n), .type = TG_ARG_TYPE_STRING, .v.s = (x)})

/* Flows: arrows between events, across threads and processes. The first
 * event (in time) that carries an id in TG_FLOW starts a flow, each later
 * one is a step, and TG_TERMINATING_FLOW ends it (the id may then start
 * another). Ids are global to the trace: two processes that pick the same
 * id join their events, which is how tg_flow_id_from_context links a client
 * with its server; ids of one process's own flows should be random or
 * carry something (a pid) that keeps them apart from other processes'.
 * Written as Perfetto's SDK writes them (fixed64 flow_ids = 47 and
 * terminating_flow_ids = 48), so trace processors draw and join them. On
 * slice begins and instants; slice ends and counters take no arguments. */
#define TG_FLOW(id) \
  ((tg_arg_t){.type = TG_ARG_TYPE_FLOW, .v.u = (uint64_t)(id)})
#define TG_TERMINATING_FLOW(id) \
  ((tg_arg_t){.type = TG_ARG_TYPE_TERMINATING_FLOW, .v.u = (uint64_t)(id)})
/* A correlation id: the events of one logical operation that no arrow
 * joins (one request's stages on several tracks), which a UI may colour
 * alike. One per event, a number or a string (copied into the trace); of
 * several, the last one given is written. Perfetto's TrackEvent fields
 * correlation_id = 52 and correlation_id_str = 53: trace processors older
 * than these fields (v50 included) skip them without error. */
#define TG_CORRELATION_ID(id) \
  ((tg_arg_t){.type = TG_ARG_TYPE_CORRELATION_ID, .v.u = (uint64_t)(id)})
#define TG_CORRELATION_STR(str) \
  ((tg_arg_t){.type = TG_ARG_TYPE_CORRELATION_STR, .v.s = (str)})

/* TrackEvent.Type */
enum tg_track_event_type {
  TG_TE_SLICE_BEGIN = 1,
  TG_TE_SLICE_END = 2,
  TG_TE_INSTANT = 3,
  TG_TE_COUNTER = 4,
};

/* Writes one event to every session that enables |cat| (slow path behind
 * the macros). |name| is NULL for slice ends; |value| only for counters.
 * |args| (n_args of them) and the strings they point to are borrowed for
 * the call, except names, which must live as event names do. */
TG_EXPORT void tg__te_emit(tg_category_t *cat, int type, const char *name,
                           int64_t value, const tg_arg_t *args, size_t n_args);

/* CLOCK_BOOTTIME in nanoseconds, the clock of every event: read from the
 * TSC, calibrated against CLOCK_BOOTTIME each second, when the kernel
 * trusts the TSC; else clock_gettime(). */
TG_EXPORT uint64_t tg_track_event_now(void);

static inline bool tg_category_enabled(const tg_category_t *cat) {
  return __builtin_expect(
      atomic_load_explicit(&cat->enabled, memory_order_relaxed) != 0, 0);
}

#define TG__TE(cat, type, name, value, ...)                                \
  do {                                                                     \
    if (tg_category_enabled(&(cat))) {                                     \
      const tg_arg_t tg__args[] = {{0}, __VA_ARGS__};                      \
      tg__te_emit(&(cat), (type), (name), (value), tg__args + 1,           \
                  sizeof(tg__args) / sizeof(tg__args[0]) - 1);             \
    }                                                                      \
  } while (0)

#define TG_SLICE_BEGIN(cat, name, ...) \
  TG__TE(cat, TG_TE_SLICE_BEGIN, name, 0, __VA_ARGS__)
#define TG_SLICE_END(cat) TG__TE(cat, TG_TE_SLICE_END, NULL, 0, )
#define TG_INSTANT(cat, name, ...) \
  TG__TE(cat, TG_TE_INSTANT, name, 0, __VA_ARGS__)
/* A counter on its own track named |name| (integer values). */
#define TG_COUNTER(cat, name, value) \
  TG__TE(cat, TG_TE_COUNTER, name, (int64_t)(value), )

/* A slice that ends when the enclosing scope exits (GCC/Clang cleanup). */
typedef struct tg__te_scope {
  tg_category_t *cat;
} tg__te_scope_t;
static inline void tg__te_scope_end(tg__te_scope_t *s) {
  TG_SLICE_END(*s->cat);
}
#define TG__CAT2(a, b) a##b
#define TG__CAT(a, b) TG__CAT2(a, b)
#define TG_SCOPED_SLICE(cat, name, ...)                                  \
  TG_SLICE_BEGIN(cat, name, __VA_ARGS__);                                \
  __attribute__((cleanup(tg__te_scope_end), unused))                     \
  tg__te_scope_t TG__CAT(tg__scope_, __LINE__) = {&(cat)}

#ifdef __cplusplus
}
#endif

#endif /* TRACEGATE_TRACK_EVENT_H */
