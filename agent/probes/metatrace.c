/* The metatrace ring; see metatrace.h.
 *
 * A bounded multi-producer queue in the manner of Vyukov's: cell i's |seq|
 * is the claim position it expects next. A writer at position p finds
 * seq == p (free: claim it by moving |head| p -> p + 1), seq < p (the
 * reader has not freed it since the last lap: full, drop), or seq > p
 * (another writer claimed p: reload). It fills the cell and stores
 * seq = p + 1 with release; the reader at |tail| takes the cell once it
 * sees seq == tail + 1 (acquire), and frees it for the next lap with
 * seq = tail + TG_META_RING (release).
 */
#include "agent/probes/metatrace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/clock.h"

_Static_assert((TG_META_RING & (TG_META_RING - 1)) == 0,
               "the ring's size must be a power of two");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the ring needs lock-free atomics");

/* TracePacket and PerfettoMetatrace fields. */
#define PACKET_TIMESTAMP 8
#define PACKET_METATRACE 49
#define META_DURATION_NS 3
#define META_THREAD_ID 5
#define META_HAS_OVERRUNS 6
#define META_EVENT_NAME 8

typedef struct cell {
  _Atomic uint64_t seq;
  uint64_t start, dur;
  uint32_t tid;
  uint8_t event;
} cell_t;

static cell_t ring[TG_META_RING];
static _Atomic uint64_t head;       /* the next position to claim */
static _Atomic int enabled;         /* active instances */
static _Atomic uint64_t overruns;   /* records dropped, all told */
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t reader_mu = PTHREAD_MUTEX_INITIALIZER;
/* Under reader_mu. */
static uint64_t tail;
static uint64_t overruns_told;

static const char *const names[TG_META_N] = {
    [TG_META_FTRACE_DRAIN] = "linux.ftrace drain",
    [TG_META_PS_SCAN] = "linux.process_stats scan",
    [TG_META_PS_RESOLVE] = "linux.process_stats resolve pids",
    [TG_META_SYS_STATS] = "linux.sys_stats round",
    [TG_META_KALLSYMS] = "kallsyms load",
};

const char *tg_meta_event_name(tg_meta_event_t e) {
  return (unsigned)e < TG_META_N ? names[e] : "unknown";
}

static void ring_init(void) {
  for (uint64_t i = 0; i < TG_META_RING; i++)
    atomic_store_explicit(&ring[i].seq, i, memory_order_relaxed);
}

static tg_pbw_t *discard_begin(void *ctx) {
  (void)ctx;
  return NULL;
}

static void discard_end(void *ctx) { (void)ctx; }

void tg_meta_enable(void) {
  pthread_once(&ring_once, ring_init);
  /* What the last session left behind is not this one's. */
  if (atomic_load_explicit(&enabled, memory_order_relaxed) == 0) {
    tg_probes_sink_t none = {discard_begin, discard_end, NULL};
    tg_meta_drain(&none);
  }
  atomic_fetch_add_explicit(&enabled, 1, memory_order_release);
}

void tg_meta_disable(void) {
  atomic_fetch_sub_explicit(&enabled, 1, memory_order_relaxed);
}

uint64_t tg_meta_begin(void) {
  /* Acquire: pairs with tg_meta_enable's release, so a writer that sees
   * recording on also sees the ring initialised. */
  if (!atomic_load_explicit(&enabled, memory_order_acquire)) return 0;
  uint64_t t = tg__clock_boottime();
  return t ? t : 1;
}

static uint32_t thread_id(void) {
  static _Thread_local uint32_t tid;
  if (!tid) tid = (uint32_t)syscall(SYS_gettid);
  return tid;
}

void tg_meta_end(tg_meta_event_t e, uint64_t start) {
  if (!start || (unsigned)e >= TG_META_N) return;
  uint64_t end = tg__clock_boottime();
  uint64_t pos = atomic_load_explicit(&head, memory_order_relaxed);
  cell_t *c;
  for (;;) {
    c = &ring[pos & (TG_META_RING - 1)];
    /* Acquire: pairs with the reader's release that freed the cell. */
    uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    if (seq == pos) {
      if (atomic_compare_exchange_weak_explicit(&head, &pos, pos + 1,
                                                memory_order_relaxed,
                                                memory_order_relaxed))
        break;
    } else if (seq < pos) {
      atomic_fetch_add_explicit(&overruns, 1, memory_order_relaxed);
      return;
    } else {
      pos = atomic_load_explicit(&head, memory_order_relaxed);
    }
  }
  c->start = start;
  c->dur = end > start ? end - start : 0;
  c->tid = thread_id();
  c->event = (uint8_t)e;
  /* Release: pairs with the reader's acquire of seq. */
  atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
}

static void write_record(const tg_probes_sink_t *sink, const cell_t *c,
                         bool overran) {
  tg_pbw_t *w = sink->begin(sink->ctx);
  if (!w) return;
  tg_pbw_append_varint(w, PACKET_TIMESTAMP, c->start);
  tg_pbw_begin_nested(w, PACKET_METATRACE);
  tg_pbw_append_string(w, META_EVENT_NAME, tg_meta_event_name(c->event));
  tg_pbw_append_varint(w, META_DURATION_NS, c->dur);
  tg_pbw_append_varint(w, META_THREAD_ID, c->tid);
  if (overran) tg_pbw_append_bool(w, META_HAS_OVERRUNS, true);
  tg_pbw_end_nested(w);
  sink->end(sink->ctx);
}

size_t tg_meta_drain(const tg_probes_sink_t *sink) {
  pthread_once(&ring_once, ring_init);
  pthread_mutex_lock(&reader_mu);
  uint64_t lost = atomic_load_explicit(&overruns, memory_order_relaxed);
  bool overran = lost != overruns_told;
  overruns_told = lost;
  size_t n = 0;
  for (;;) {
    cell_t *c = &ring[tail & (TG_META_RING - 1)];
    if (atomic_load_explicit(&c->seq, memory_order_acquire) != tail + 1) break;
    write_record(sink, c, overran);
    overran = false;
    /* Release: the cell's bytes are read before a writer may reuse it. */
    atomic_store_explicit(&c->seq, tail + TG_META_RING, memory_order_release);
    tail++;
    n++;
  }
  pthread_mutex_unlock(&reader_mu);
  return n;
}

uint64_t tg_meta_overruns(void) {
  return atomic_load_explicit(&overruns, memory_order_relaxed);
}
