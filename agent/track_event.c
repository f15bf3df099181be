/* The "track_event" data source: category enablement per session, and the
 * packets of slices, instants and counters with per-sequence interning.
 *
 * Packets written per thread and session (one sequence):
 *   after a clear (the service's, or the writer's own once one of its
 *   packets was dropped: see seq_state_t.drops_seen):
 *                   TrackDescriptor(process) with TracePacketDefaults
 *                   {timestamp_clock_id: TE_CLOCK_INCREMENTAL, track_uuid:
 *                   the thread's track}, flagged
 *                   SEQ_INCREMENTAL_STATE_CLEARED; a ClockSnapshot at the
 *                   event's time: BOOTTIME and TE_CLOCK_INCREMENTAL
 *                   (is_incremental) read the same; TrackDescriptor(thread);
 *   per event:      timestamp, TrackEvent{type, category_iids, name_iid,
 *                   debug_annotations and flow_ids / terminating_flow_ids
 *                   in the order given, then correlation_id(_str)}
 *                   (track_uuid only for counters, the thread's track is
 *                   the default), InternedData with the names first seen
 *                   in this event, SEQ_NEEDS_INCREMENTAL_STATE;
 *   new counter:    TrackDescriptor(counter track) before its first value.
 *
 * Timestamps. An event's is the nanoseconds since the sequence's previous
 * one (Perfetto's clock model: a sequence-scoped clock >= 64 with
 * is_incremental, its origin given by the snapshot), so trace processors
 * place it on CLOCK_BOOTTIME exactly, offset 0, and its varint takes a
 * byte or two where an absolute time takes six. A time before the
 * previous event's (the clock stepped back) is written absolute, with
 * timestamp_clock_id BOOTTIME, and leaves the running sum alone. A session
 * whose TrackEventConfig sets disable_incremental_timestamps gets absolute
 * BOOTTIME times on every event, as before.
 */
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_log.h"
#include "agent/clock.h"
#include "agent/data_source.h"
#include "agent/process_name.h"
#include "pb/config/data_source_config.pb-c.h"
#include "tracegate/track_event.h"

/* TracePacket fields */
#define F_TIMESTAMP 8
#define F_CLOCK_SNAPSHOT 6
#define F_TIMESTAMP_CLOCK_ID 58
#define TPD_TIMESTAMP_CLOCK_ID 58
/* ClockSnapshot, ClockSnapshot.Clock */
#define CS_CLOCKS 1
#define CSC_CLOCK_ID 1
#define CSC_TIMESTAMP 2
#define CSC_IS_INCREMENTAL 3
#define CLOCK_BOOTTIME_ID 6
/* The sequence-scoped clock of the events (Perfetto: ids 64 to 127). */
#define TE_CLOCK_INCREMENTAL 64
#define F_TRACK_EVENT 11
#define F_INTERNED_DATA 12
#define F_SEQUENCE_FLAGS 13
#define F_TRACK_DESCRIPTOR 60
#define F_TRACE_PACKET_DEFAULTS 59
#define TPD_TRACK_EVENT_DEFAULTS 11
#define TED_TRACK_UUID 11
#define SEQ_CLEARED 1u
#define SEQ_NEEDS_STATE 2u
/* TrackEvent */
#define TE_CATEGORY_IIDS 3
#define TE_DEBUG_ANNOTATIONS 4
#define TE_TYPE 9
#define TE_NAME_IID 10
#define TE_TRACK_UUID 11
#define TE_NAME 23
#define TE_COUNTER_VALUE 30
#define TE_FLOW_IDS 47             /* fixed64, as Perfetto's SDK writes */
#define TE_TERMINATING_FLOW_IDS 48 /* fixed64 */
#define TE_CORRELATION_ID 52
#define TE_CORRELATION_ID_STR 53
/* DebugAnnotation */
#define DA_NAME_IID 1
#define DA_BOOL 2
#define DA_UINT 3
#define DA_INT 4
#define DA_DOUBLE 5
#define DA_STRING 6
#define DA_NAME 10
/* InternedData */
#define ID_EVENT_CATEGORIES 1
#define ID_EVENT_NAMES 2
#define ID_DEBUG_ANNOTATION_NAMES 3
/* TrackDescriptor */
#define TD_UUID 1
#define TD_NAME 2
#define TD_PROCESS 3
#define TD_THREAD 4
#define TD_PARENT_UUID 5
#define TD_COUNTER 8

#define INTERN_SLOTS 512 /* per sequence; names beyond it go inline */

static _Thread_local int32_t t_tid __attribute__((tls_model("initial-exec")));
static void after_fork_in_child(void);

/* --- registry and enablement -------------------------------------------- */

static tg_ds_t *g_te_ds;
/* Guards the categories and the instances' configs below: the app's threads
 * register categories while the agent's thread starts and stops sessions.
 * Never taken on an event's path (that reads each category's bits). */
static pthread_mutex_t g_categories_lock = PTHREAD_MUTEX_INITIALIZER;
static tg_category_t *g_cats[TG_TRACK_EVENT_MAX_CATEGORIES];
static size_t g_n_cats;
/* Each started instance's TrackEventConfig patterns (agent's thread). */
static Perfetto__Protos__DataSourceConfig *g_inst_cfg[TG_DS_MAX_INSTANCES];
/* Instance i's config sets disable_incremental_timestamps. Written by the
 * agent's thread at start; read relaxed by writers when a sequence (re)starts
 * (its seq_state keeps the choice, so a sequence never mixes encodings). */
static _Atomic bool g_inst_absolute_ts[TG_DS_MAX_INSTANCES];

static bool match_any(char **patterns, size_t n, const char *name,
                      bool *exact) {
  bool hit = false;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(patterns[i], name) == 0) {
      if (exact) *exact = true;
      return true;
    }
    if (fnmatch(patterns[i], name, 0) == 0) hit = true;
  }
  return hit;
}

/* Perfetto's TrackEventConfig rules, in order: a category named exactly in
 * enabled_categories is on; named exactly in disabled_categories, off; then
 * matched by an enabled pattern, on; by a disabled pattern, off; anything
 * else is on. So "disabled: *" plus an enabled list records just the list,
 * and no track_event_config at all records everything. */
static bool category_on(const Perfetto__Protos__DataSourceConfig *cfg,
                        const char *name) {
  const Perfetto__Protos__TrackEventConfig *te =
      cfg ? cfg->track_event_config : NULL;
  if (!te) return true;
  bool exact = false;
  bool en = match_any(te->enabled_categories, te->n_enabled_categories, name,
                      &exact);
  if (en && exact) return true;
  bool dis_exact = false;
  bool dis = match_any(te->disabled_categories, te->n_disabled_categories,
                       name, &dis_exact);
  if (dis && dis_exact) return false;
  if (en) return true;
  return !dis;
}

static void apply_instance(unsigned inst) {
  for (size_t i = 0; i < g_n_cats; i++) {
    tg_category_t *c = g_cats[i];
    uint8_t bit = (uint8_t)(1u << inst);
    if (g_inst_cfg[inst] && category_on(g_inst_cfg[inst], c->name))
      atomic_fetch_or_explicit(&c->enabled, bit, memory_order_relaxed);
    else
      atomic_fetch_and_explicit(&c->enabled, (uint8_t)~bit,
                                memory_order_relaxed);
  }
}

static void te_on_start(void *ctx, unsigned inst, const uint8_t *cfg,
                        size_t len) {
  (void)ctx;
  pthread_mutex_lock(&g_categories_lock);
  if (g_inst_cfg[inst])
    perfetto__protos__data_source_config__free_unpacked(g_inst_cfg[inst], NULL);
  g_inst_cfg[inst] =
      cfg ? perfetto__protos__data_source_config__unpack(NULL, len, cfg) : NULL;
  if (!g_inst_cfg[inst])
    tg__agent_log(TG_LOG_WARN,
                  "track_event: instance %u has an undecodable config; all "
                  "categories on",
                  inst);
  const Perfetto__Protos__TrackEventConfig *te =
      g_inst_cfg[inst] ? g_inst_cfg[inst]->track_event_config : NULL;
  atomic_store_explicit(&g_inst_absolute_ts[inst],
                        te && te->has_disable_incremental_timestamps &&
                            te->disable_incremental_timestamps,
                        memory_order_relaxed);
  apply_instance(inst);
  pthread_mutex_unlock(&g_categories_lock);
}

static void te_on_stop(void *ctx, unsigned inst) {
  (void)ctx;
  pthread_mutex_lock(&g_categories_lock);
  if (g_inst_cfg[inst])
    perfetto__protos__data_source_config__free_unpacked(g_inst_cfg[inst], NULL);
  g_inst_cfg[inst] = NULL;
  for (size_t i = 0; i < g_n_cats; i++)
    atomic_fetch_and_explicit(&g_cats[i]->enabled, (uint8_t) ~(1u << inst),
                              memory_order_relaxed);
  pthread_mutex_unlock(&g_categories_lock);
}

int tg_track_event_register(tg_category_t *const *cats, size_t n) {
  int rv = 0;
  if (!g_te_ds) {
    pthread_atfork(NULL, NULL, after_fork_in_child);
    tg_ds_options_t o = {
        .name = "track_event",
        .handles_incremental_state_clear = true,
        .cbs = {.on_start = te_on_start, .on_stop = te_on_stop},
    };
    rv = tg_ds_register(&o, &g_te_ds);
    if (rv == -EEXIST) rv = 0;
    if (rv < 0) return rv;
  }
  pthread_mutex_lock(&g_categories_lock);
  if (g_n_cats + n > TG_TRACK_EVENT_MAX_CATEGORIES) {
    rv = -ENOSPC;
  } else {
    for (size_t i = 0; i < n; i++) {
      tg_category_t *c = cats[i];
      c->iid = (uint32_t)(g_n_cats + 1);
      g_cats[g_n_cats++] = c;
      for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++)
        if (g_inst_cfg[k] && category_on(g_inst_cfg[k], c->name))
          atomic_fetch_or_explicit(&c->enabled, (uint8_t)(1u << k),
                                   memory_order_relaxed);
    }
  }
  pthread_mutex_unlock(&g_categories_lock);
  return rv;
}

/* --- per-sequence state ---------------------------------------------------- */

typedef struct intern_slot {
  const void *key; /* a name's address, or a category */
  uint32_t iid;
  uint8_t kind;
} intern_slot_t;

enum { K_NAME = 1, K_ARG_NAME, K_CATEGORY, K_COUNTER };

typedef struct seq_state {
  intern_slot_t slots[INTERN_SLOTS];
  size_t used;
  uint32_t next_iid[K_COUNTER + 1];
  /* Incremental timestamps on this sequence (chosen at its clear, from
   * the instance's config), and the time the next delta starts from. */
  bool incremental;
  uint64_t last_ts;
  /* The writer's drop count (tg_trace_writer_packets_dropped) when the
   * sequence last (re)started. A packet lost since may have carried state
   * that later events refer to (interned names, a descriptor, the clock's
   * last delta), and trace processor reads nothing of the sequence from
   * the packet flagged previous_packet_dropped until the next clear: so a
   * count that moved restarts the sequence on its next event, a clear the
   * writer's thread makes itself, without waiting for the service's
   * ClearIncrementalState. */
  uint64_t drops_seen;
} seq_state_t;

uint64_t tg_track_event_now(void) { return tg__clock_now(); }

/* The pid and the calling thread's track, cached: getpid() and gettid()
 * are system calls, far too dear per event. A forked child clears the
 * cache (pthread_atfork). */
static _Atomic int32_t g_pid;
static _Thread_local uint64_t t_thread_uuid
    __attribute__((tls_model("initial-exec")));
static _Thread_local int32_t t_uuid_pid
    __attribute__((tls_model("initial-exec")));

static void after_fork_in_child(void) {
  atomic_store_explicit(&g_pid, 0, memory_order_relaxed);
  t_tid = 0;
}

static int32_t cached_pid(void) {
  int32_t pid = atomic_load_explicit(&g_pid, memory_order_relaxed);
  if (__builtin_expect(pid == 0, 0)) {
    pid = (int32_t)getpid();
    atomic_store_explicit(&g_pid, pid, memory_order_relaxed);
  }
  return pid;
}

/* A random number per process image (inherited by a forked child, whose
 * pid differs): two hosts' processes of one pid get distinct track uuids,
 * which a merged trace whose hosts' app tracks share a machine needs
 * (docs/merge.md, "Links across hosts": there one host cannot take over a
 * uuid another host named first). */
static _Atomic uint64_t g_uuid_salt;

static uint64_t uuid_salt(void) {
  uint64_t s = atomic_load_explicit(&g_uuid_salt, memory_order_relaxed);
  if (__builtin_expect(s != 0, 1)) return s;
  if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
        ((uint64_t)(uint32_t)getpid() << 13);
  }
  s |= 1; /* 0 is "not yet" */
  uint64_t none = 0;
  /* Racing threads agree on the first one stored. */
  if (!atomic_compare_exchange_strong_explicit(&g_uuid_salt, &none, s,
                                               memory_order_relaxed,
                                               memory_order_relaxed))
    s = none;
  return s;
}

static uint64_t process_uuid(void) {
  /* Stable for the process, distinct across processes and, by the salt,
   * across hosts' equal pids: the pid mixed with the salt (splitmix64's
   * finalizer), the low 23 bits clear for thread_uuid's tid. */
  uint64_t x = uuid_salt() ^ (uint64_t)(uint32_t)cached_pid();
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return (x ^ (x >> 31)) & ~0x7FFFFFull;
}

static uint64_t thread_uuid(int32_t tid) {
  int32_t pid = cached_pid();
  if (__builtin_expect(t_uuid_pid != pid || !t_thread_uuid, 0)) {
    t_thread_uuid = process_uuid() ^ ((uint64_t)(uint32_t)tid + 1);
    t_uuid_pid = pid;
  }
  return t_thread_uuid;
}

static uint64_t counter_uuid(const char *name) {
  return process_uuid() ^ 0x0000800000000000ull ^
         ((uint64_t)(uintptr_t)name & 0x7FFFFFFFFFFull);
}

/* Where the probe for {kind, key} starts. */
static inline size_t intern_hash(uint8_t kind, const void *key) {
  return (((uintptr_t)key >> 3) * 0x9E3779B97F4A7C15ull + kind) >> 20;
}

/* Finds or adds |key|; returns its iid, setting |*fresh| when it is new on
 * this sequence, or 0 when the table is full (the caller sends it inline). */
static uint32_t intern(seq_state_t *s, uint8_t kind, const void *key,
                       bool *fresh) {
  size_t h = intern_hash(kind, key);
  for (size_t i = 0; i < INTERN_SLOTS; i++) {
    intern_slot_t *e = &s->slots[(h + i) & (INTERN_SLOTS - 1)];
    if (e->key == key && e->kind == kind) {
      *fresh = false;
      return e->iid;
    }
    if (!e->key) {
      if (s->used >= INTERN_SLOTS * 3 / 4) return 0;
      e->key = key;
      e->kind = kind;
      e->iid = kind == K_CATEGORY ? ((const tg_category_t *)key)->iid
                                  : ++s->next_iid[kind];
      s->used++;
      *fresh = true;
      return e->iid;
    }
  }
  return 0;
}

/* The iid of |key| when it sits in its first slot (the usual case), else
 * 0: the caller then takes the general path, which also inserts. */
static inline uint32_t intern_peek(const seq_state_t *s, uint8_t kind,
                                   const void *key) {
  size_t h = intern_hash(kind, key);
  const intern_slot_t *e = &s->slots[h & (INTERN_SLOTS - 1)];
  return e->key == key && e->kind == kind ? e->iid : 0;
}

static void thread_name(char *out, size_t n) {
  out[0] = 0;
  if (pthread_getname_np(pthread_self(), out, n) != 0) out[0] = 0;
}

/* The packets below go to the writer the event was begun with, never
 * through tg_ds_packet_begin(): that may replace the slot's writer (the
 * instance restarted meanwhile) and free the sequence state in use. */

/* The origin of the sequence's incremental clock: at |ts| it reads |ts|,
 * as BOOTTIME does. The packet's own time is BOOTTIME, said explicitly:
 * the sequence's default clock is the incremental one. */
static void write_clock_snapshot(tg_trace_writer_t *tw, uint64_t ts) {
  tg_pbw_t *w = tg_trace_writer_begin_packet(tw);
  tg_pbw_append_varint(w, F_TIMESTAMP, ts);
  tg_pbw_append_varint(w, F_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME_ID);
  tg_pbw_begin_nested(w, F_CLOCK_SNAPSHOT);
  tg_pbw_begin_nested(w, CS_CLOCKS);
  tg_pbw_append_varint(w, CSC_CLOCK_ID, CLOCK_BOOTTIME_ID);
  tg_pbw_append_varint(w, CSC_TIMESTAMP, ts);
  tg_pbw_end_nested(w);
  tg_pbw_begin_nested(w, CS_CLOCKS);
  tg_pbw_append_varint(w, CSC_CLOCK_ID, TE_CLOCK_INCREMENTAL);
  tg_pbw_append_varint(w, CSC_TIMESTAMP, ts);
  tg_pbw_append_bool(w, CSC_IS_INCREMENTAL, true);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
  tg_trace_writer_end_packet(tw);
}

/* Descriptors for the process and thread tracks, in the first packet of a
 * (re)started sequence, after |s| is reset for it and |init| run on it
 * (its clock). Returns false, with |s| untouched and nothing else written,
 * when that first packet is dropped (no chunk): while the SMB is full each
 * event tries again for the price of one dropped packet, not of the
 * names' lookups and the reset. */
static bool write_descriptors(tg_trace_writer_t *tw, int32_t tid,
                              seq_state_t *s, bool incremental, uint64_t ts) {
  tg_pbw_t *w = tg_trace_writer_begin_packet(tw);
  if (tg_trace_writer_dropping(tw)) {
    tg_trace_writer_end_packet(tw);
    return false;
  }
  memset(s, 0, sizeof(*s));
  s->incremental = incremental;
  s->last_ts = ts;
  char comm[64];
  tg__process_name(comm, sizeof(comm));
  tg_pbw_append_varint(w, F_SEQUENCE_FLAGS, SEQ_CLEARED);
  /* Events on this thread's track leave track_uuid out: the default of
   * the sequence says it, as Perfetto's SDK does. */
  tg_pbw_begin_nested(w, F_TRACE_PACKET_DEFAULTS);
  if (s->incremental)
    tg_pbw_append_varint(w, TPD_TIMESTAMP_CLOCK_ID, TE_CLOCK_INCREMENTAL);
  tg_pbw_begin_nested(w, TPD_TRACK_EVENT_DEFAULTS);
  tg_pbw_append_varint(w, TED_TRACK_UUID, thread_uuid(tid));
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
  tg_pbw_begin_nested(w, F_TRACK_DESCRIPTOR);
  tg_pbw_append_varint(w, TD_UUID, process_uuid());
  tg_pbw_begin_nested(w, TD_PROCESS);
  tg_pbw_append_int(w, 1 /* pid */, cached_pid());
  tg_pbw_append_string(w, 6 /* process_name */, comm);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
  tg_trace_writer_end_packet(tw);

  if (s->incremental) write_clock_snapshot(tw, s->last_ts);

  w = tg_trace_writer_begin_packet(tw);
  char tname[32];
  thread_name(tname, sizeof(tname));
  tg_pbw_begin_nested(w, F_TRACK_DESCRIPTOR);
  tg_pbw_append_varint(w, TD_UUID, thread_uuid(tid));
  tg_pbw_append_varint(w, TD_PARENT_UUID, process_uuid());
  tg_pbw_begin_nested(w, TD_THREAD);
  tg_pbw_append_int(w, 1 /* pid */, cached_pid());
  tg_pbw_append_int(w, 2 /* tid */, tid);
  if (tname[0]) tg_pbw_append_string(w, 5 /* thread_name */, tname);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
  tg_trace_writer_end_packet(tw);
  return true;
}

static void write_counter_descriptor(tg_trace_writer_t *tw, const char *name) {
  tg_pbw_t *w = tg_trace_writer_begin_packet(tw);
  tg_pbw_begin_nested(w, F_TRACK_DESCRIPTOR);
  tg_pbw_append_varint(w, TD_UUID, counter_uuid(name));
  tg_pbw_append_varint(w, TD_PARENT_UUID, process_uuid());
  tg_pbw_append_string(w, TD_NAME, name);
  tg_pbw_begin_nested(w, TD_COUNTER);
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
  tg_trace_writer_end_packet(tw);
}

/* The sequence state of slot |sl| (instance |inst|) when it is current:
 * made, and not cleared since. Else NULL: sequence() must run first. */
static inline seq_state_t *current_sequence(const tg_ds_t *ds,
                                            const tg__writer_slot_t *sl,
                                            unsigned inst) {
  uint32_t incr = atomic_load_explicit(&ds->inst[inst].incr_generation,
                                       memory_order_acquire);
  const seq_state_t *s = sl->user;
  if (__builtin_expect(!s || sl->incr_fresh || sl->incr_seen != incr ||
                           s->drops_seen !=
                               tg_trace_writer_packets_dropped(sl->w),
                       0))
    return NULL;
  return sl->user;
}

/* The calling thread's state for the sequence of slot |sl|; after a clear
 * (the service's, or the writer's own after a lost packet: see
 * |drops_seen|), or on the sequence's first event, it is reset and the
 * descriptors written. NULL without memory. |*doomed| says that the
 * restart lost some of its packets (the SMB is full): the caller writes
 * the event and cancels it (tg_trace_writer_cancel_packet), so that it
 * counts as the SMB's drops do, bytes included; read, it would refer to
 * state the trace does not hold, and trace processor would skip it. */
static seq_state_t *sequence(tg__writer_slot_t *sl, unsigned inst,
                             int32_t tid, uint64_t ts, bool *doomed) {
  *doomed = false;
  void **user = tg_ds_writer_user(g_te_ds, inst, free);
  if (!user) return NULL;
  seq_state_t *s = *user;
  bool cleared = tg_ds_incremental_state_cleared(g_te_ds, inst);
  if (!s) {
    s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    *user = s;
    cleared = true;
  }
  uint64_t drops = tg_trace_writer_packets_dropped(sl->w);
  if (drops != s->drops_seen) cleared = true;
  if (cleared) {
    bool incremental = !atomic_load_explicit(&g_inst_absolute_ts[inst],
                                             memory_order_relaxed);
    write_descriptors(sl->w, tid, s, incremental, ts);
    /* The count before the restart: a restart that lost any of its
     * packets leaves it behind the writer's, and the next event restarts
     * the sequence again. */
    s->drops_seen = drops;
    *doomed = tg_trace_writer_packets_dropped(sl->w) != drops;
  }
  return s;
}

typedef struct pending_intern {
  uint8_t field; /* InternedData field */
  uint32_t iid;
  const char *name;
} pending_intern_t;

/* At most this many links take the fast path: with them the track event
 * stays under 128 bytes (see emit_fast). */
#define FAST_MAX_LINKS 8

/* Whether |args| are links emit_fast writes: flows, terminating flows and
 * numeric correlation ids, at most FAST_MAX_LINKS (so under every bound of
 * emit_one, which writes the same fields). */
static inline bool fast_links(const tg_arg_t *args, size_t n) {
  if (n > FAST_MAX_LINKS) return false;
  for (size_t i = 0; i < n; i++)
    if (args[i].type != TG_ARG_TYPE_FLOW &&
        args[i].type != TG_ARG_TYPE_TERMINATING_FLOW &&
        args[i].type != TG_ARG_TYPE_CORRELATION_ID)
      return false;
  return true;
}

/* The common event, kept out of emit_one's large frame: a slice or instant
 * without annotations (links as fast_links() takes them) whose category
 * and name this sequence already interned. Its bytes are written straight
 * into the chunk when it has room (else composed on the stack and
 * appended). The track event is at most 14 bytes and FAST_MAX_LINKS links
 * of 10 (a flow) or 12 (the one correlation id written), under 128 bytes,
 * so its length takes one byte. Returns false when the general path must
 * run. */
static inline bool emit_fast(tg_ds_t *ds, unsigned inst,
                             const tg_category_t *cat, int type,
                             const char *name, const tg_arg_t *links,
                             size_t n_links, uint64_t ts) {
  tg__writer_slot_t *sl = tg__ds_slot(ds, inst);
  if (!sl) return true; /* not active: nothing to do on any path */
  seq_state_t *s = current_sequence(ds, sl, inst);
  if (!s) return false;
  uint32_t ci = intern_peek(s, K_CATEGORY, cat);
  uint32_t ni = name ? intern_peek(s, K_NAME, name) : 0;
  if (!ci || (name && !ni)) return false;
  uint64_t tv = ts;
  if (s->incremental) {
    if (__builtin_expect(ts < s->last_ts, 0)) return false;
    tv = ts - s->last_ts;
    s->last_ts = ts;
  }
  /* At most 1+10 (timestamp) + 2 + 14 (track event) + 2 bytes, and 12
   * per link. */
  enum { MAX_PLAIN = 32, MAX_EVENT = MAX_PLAIN + FAST_MAX_LINKS * 12 };
  _Static_assert(14 + FAST_MAX_LINKS * 12 < 128, "one length byte");
  uint8_t tmp[MAX_EVENT];
  tg_pbw_t *w = tg_trace_writer_begin_packet(sl->w);
  bool direct = (size_t)(w->end - w->cur) >= MAX_PLAIN + n_links * 12;
  uint8_t *p = direct ? w->cur : tmp;
  uint8_t *start = p;
  *p++ = (uint8_t)TG_PB_TAG(F_TIMESTAMP, TG_PB_WT_VARINT);
  p = tg_pb_write_varint(p, tv);
  *p++ = (uint8_t)TG_PB_TAG(F_TRACK_EVENT, TG_PB_WT_LEN);
  uint8_t *len_byte = p++;
  uint8_t *body = p;
  *p++ = (uint8_t)TG_PB_TAG(TE_TYPE, TG_PB_WT_VARINT);
  *p++ = (uint8_t)type;
  *p++ = (uint8_t)TG_PB_TAG(TE_CATEGORY_IIDS, TG_PB_WT_VARINT);
  p = tg_pb_write_varint(p, ci);
  if (name) {
    *p++ = (uint8_t)TG_PB_TAG(TE_NAME_IID, TG_PB_WT_VARINT);
    p = tg_pb_write_varint(p, ni);
  }
  const tg_arg_t *corr = NULL; /* a oneof: the last one given */
  for (size_t i = 0; i < n_links; i++) {
    const tg_arg_t *a = &links[i];
    if (a->type == TG_ARG_TYPE_CORRELATION_ID) {
      corr = a;
      continue;
    }
    uint32_t field = a->type == TG_ARG_TYPE_FLOW ? TE_FLOW_IDS
                                                 : TE_TERMINATING_FLOW_IDS;
    p = tg_pb_write_varint(p, TG_PB_TAG(field, TG_PB_WT_FIXED64));
    tg_pb_write_le32(p, (uint32_t)a->v.u);
    tg_pb_write_le32(p + 4, (uint32_t)(a->v.u >> 32));
    p += 8;
  }
  if (corr) {
    p = tg_pb_write_varint(p, TG_PB_TAG(TE_CORRELATION_ID, TG_PB_WT_VARINT));
    p = tg_pb_write_varint(p, corr->v.u);
  }
  *len_byte = (uint8_t)(p - body); /* < 128: one varint byte */
  *p++ = (uint8_t)TG_PB_TAG(F_SEQUENCE_FLAGS, TG_PB_WT_VARINT);
  *p++ = SEQ_NEEDS_STATE;
  if (direct)
    w->cur = p; /* written in place: the chunk had the room */
  else
    tg_pbw_append_raw(w, start, (size_t)(p - start));
  tg_trace_writer_end_packet(sl->w);
  return true;
}

static void emit_one(unsigned inst, tg_category_t *cat, int type,
                     const char *name, int64_t value, const tg_arg_t *args,
                     size_t n_args, int32_t tid, uint64_t ts) {
  tg__writer_slot_t *sl = tg__ds_slot(g_te_ds, inst);
  if (!sl) return;
  seq_state_t *s = current_sequence(g_te_ds, sl, inst);
  bool doomed = false;
  if (!s && !(s = sequence(sl, inst, tid, ts, &doomed))) return;
  pending_intern_t fresh[2 + TG_TRACK_EVENT_MAX_ANNOTATIONS];
  size_t n_fresh = 0;
  bool is_new;

  if (type == TG_TE_COUNTER) {
    /* A counter's track is described once per sequence, before its first
     * value. */
    uint32_t ciid = intern(s, K_COUNTER, name, &is_new);
    if (ciid && is_new) write_counter_descriptor(sl->w, name);
  }
  tg_pbw_t *w = tg_trace_writer_begin_packet(sl->w);

  if (!s->incremental) {
    tg_pbw_append_varint(w, F_TIMESTAMP, ts);
  } else if (ts >= s->last_ts) {
    tg_pbw_append_varint(w, F_TIMESTAMP, ts - s->last_ts);
    s->last_ts = ts;
  } else {
    /* The clock stepped back: absolute, on BOOTTIME (see the top). */
    tg_pbw_append_varint(w, F_TIMESTAMP, ts);
    tg_pbw_append_varint(w, F_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME_ID);
  }
  tg_pbw_begin_nested(w, F_TRACK_EVENT);
  tg_pbw_append_varint(w, TE_TYPE, (uint64_t)type);
  uint32_t cat_iid = intern(s, K_CATEGORY, cat, &is_new);
  if (cat_iid) {
    tg_pbw_append_varint(w, TE_CATEGORY_IIDS, cat_iid);
    if (is_new)
      fresh[n_fresh++] = (pending_intern_t){ID_EVENT_CATEGORIES, cat_iid,
                                            cat->name};
  } else {
    tg_pbw_append_string(w, 22 /* categories */, cat->name);
  }
  if (type == TG_TE_COUNTER) {
    tg_pbw_append_varint(w, TE_TRACK_UUID, counter_uuid(name));
    tg_pbw_append_int(w, TE_COUNTER_VALUE, value);
  } else {
    /* The thread's track: implied by the sequence's defaults. */
    if (name) {
      uint32_t iid = intern(s, K_NAME, name, &is_new);
      if (iid) {
        tg_pbw_append_varint(w, TE_NAME_IID, iid);
        if (is_new)
          fresh[n_fresh++] = (pending_intern_t){ID_EVENT_NAMES, iid, name};
      } else {
        tg_pbw_append_string(w, TE_NAME, name);
      }
    }
  }
  const tg_arg_t *corr = NULL; /* a oneof: the last one given */
  unsigned n_ann = 0, n_flows = 0, n_term = 0;
  for (size_t i = 0; i < n_args; i++) {
    const tg_arg_t *a = &args[i];
    switch (a->type) {
      case TG_ARG_TYPE_FLOW:
        if (n_flows++ < TG_TRACK_EVENT_MAX_FLOWS)
          tg_pbw_append_fixed64(w, TE_FLOW_IDS, a->v.u);
        continue;
      case TG_ARG_TYPE_TERMINATING_FLOW:
        if (n_term++ < TG_TRACK_EVENT_MAX_FLOWS)
          tg_pbw_append_fixed64(w, TE_TERMINATING_FLOW_IDS, a->v.u);
        continue;
      case TG_ARG_TYPE_CORRELATION_ID:
      case TG_ARG_TYPE_CORRELATION_STR:
        corr = a;
        continue;
      default:
        break;
    }
    if (n_ann++ >= TG_TRACK_EVENT_MAX_ANNOTATIONS) continue;
    tg_pbw_begin_nested(w, TE_DEBUG_ANNOTATIONS);
    uint32_t iid = a->name ? intern(s, K_ARG_NAME, a->name, &is_new) : 0;
    if (iid) {
      tg_pbw_append_varint(w, DA_NAME_IID, iid);
      if (is_new && n_fresh < sizeof(fresh) / sizeof(fresh[0]))
        fresh[n_fresh++] =
            (pending_intern_t){ID_DEBUG_ANNOTATION_NAMES, iid, a->name};
    } else {
      tg_pbw_append_string(w, DA_NAME, a->name ? a->name : "?");
    }
    switch (a->type) {
      case TG_ARG_TYPE_INT: tg_pbw_append_int(w, DA_INT, a->v.i); break;
      case TG_ARG_TYPE_UINT: tg_pbw_append_varint(w, DA_UINT, a->v.u); break;
      case TG_ARG_TYPE_DOUBLE: tg_pbw_append_double(w, DA_DOUBLE, a->v.d); break;
      case TG_ARG_TYPE_BOOL: tg_pbw_append_bool(w, DA_BOOL, a->v.b); break;
      case TG_ARG_TYPE_STRING:
        tg_pbw_append_string(w, DA_STRING, a->v.s ? a->v.s : "");
        break;
      default: break;
    }
    tg_pbw_end_nested(w);
  }
  if (corr && corr->type == TG_ARG_TYPE_CORRELATION_ID)
    tg_pbw_append_varint(w, TE_CORRELATION_ID, corr->v.u);
  else if (corr)
    tg_pbw_append_string(w, TE_CORRELATION_ID_STR, corr->v.s ? corr->v.s : "");
  tg_pbw_end_nested(w);

  if (n_fresh) {
    tg_pbw_begin_nested(w, F_INTERNED_DATA);
    for (size_t i = 0; i < n_fresh; i++) {
      tg_pbw_begin_nested(w, fresh[i].field);
      tg_pbw_append_varint(w, 1 /* iid */, fresh[i].iid);
      tg_pbw_append_string(w, 2 /* name */, fresh[i].name);
      tg_pbw_end_nested(w);
    }
    tg_pbw_end_nested(w);
  }
  tg_pbw_append_varint(w, F_SEQUENCE_FLAGS, SEQ_NEEDS_STATE);
  if (doomed) tg_trace_writer_cancel_packet(sl->w);
  tg_trace_writer_end_packet(sl->w);
}

/* The calling thread's id, cached (gettid() is a system call); only the
 * general path needs it (descriptors). */
static int32_t cached_tid(void) {
  if (__builtin_expect(!t_tid, 0)) t_tid = (int32_t)syscall(SYS_gettid);
  return t_tid;
}

void tg__te_emit(tg_category_t *cat, int type, const char *name, int64_t value,
                 const tg_arg_t *args, size_t n_args) {
  /* Read once: the event's bytes are written through uint8_t pointers,
   * which may alias anything, so the compiler would reload a global
   * after each store. */
  tg_ds_t *ds = g_te_ds;
  if (!ds) return;
  uint64_t ts = tg__clock_now();
  uint8_t mask = atomic_load_explicit(&cat->enabled, memory_order_relaxed) &
                 tg_ds_enabled_mask(ds);
  bool simple = type != TG_TE_COUNTER &&
                (n_args == 0 || fast_links(args, n_args));
  for (unsigned k = 0; mask; k++, mask >>= 1) {
    if (!(mask & 1u)) continue;
    if (simple && emit_fast(ds, k, cat, type, name, args, n_args, ts))
      continue;
    /* emit_one bounds what it writes of each kind (interning included). */
    emit_one(k, cat, type, name, value, args, n_args, cached_tid(), ts);
  }
}
