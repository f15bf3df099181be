/* Data sources: the registry, instance slots, and each thread's trace
 * writers.
 *
 * The hot path (tg_ds_packet_begin/end) looks up the calling thread's
 * writer for {data source, instance} in a thread-local table and checks it
 * against the instance's generation with one acquire load. Only when the
 * writer is missing or stale (first packet, new session, reconnect) does the
 * slow path take the registry's lock to build a new one.
 *
 * The registry knows nothing of the agent's thread: it reaches it only
 * through the wake hook the agent installs (tg__ds_registry_set_wake).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/data_source.h"

_Atomic uint64_t tg__agent_packets_written;

/* Every registered data source. |ds| and |n| change only under |lock|
 * (tg_ds_register, and the agent's thread for instance state); |n| is
 * also published with release so that lookups run without the lock. */
static struct ds_registry {
  /* Guards instance state changes against writer creation, and
   * registrations against each other. Never taken on a packet's fast
   * path, never held while calling out (callbacks, the wake hook). */
  pthread_mutex_t lock;
  tg_ds_t ds[TG_DS_MAX];
  _Atomic size_t n;
  /* Set by the agent (tg__ds_registry_set_wake); acquire-loaded by
   * whoever wakes, pairing with the release store that installs it. */
  _Atomic(const tg__ds_wake_hook_t *) wake;
} registry = {.lock = PTHREAD_MUTEX_INITIALIZER};

void tg__ds_registry_set_wake(const tg__ds_wake_hook_t *hook) {
  atomic_store_explicit(&registry.wake, hook, memory_order_release);
}

static void registry_wake(void) {
  const tg__ds_wake_hook_t *h =
      atomic_load_explicit(&registry.wake, memory_order_acquire);
  if (h) h->wake(h->ctx);
}

size_t tg__ds_count(void) {
  return atomic_load_explicit(&registry.n, memory_order_acquire);
}

tg_ds_t *tg__ds_at(size_t i) { return &registry.ds[i]; }

tg_ds_t *tg__ds_by_name(const char *name, size_t len) {
  size_t n = tg__ds_count();
  for (size_t i = 0; i < n; i++) {
    tg_ds_t *ds = &registry.ds[i];
    if (strlen(ds->name) == len && memcmp(ds->name, name, len) == 0)
      return ds;
  }
  return NULL;
}

int tg_ds_register(const tg_ds_options_t *opts, tg_ds_t **out) {
  return tg_ds_register_flags(opts, 0, out);
}

int tg_ds_register_flags(const tg_ds_options_t *opts, uint32_t flags,
                         tg_ds_t **out) {
  if ((flags & ~TG_DS_WILL_NOTIFY_ON_START) || !opts || !opts->name ||
      !opts->name[0] ||
      strlen(opts->name) >= TG_DS_NAME_MAX || !out)
    return -EINVAL;
  pthread_mutex_lock(&registry.lock);
  int rv = 0;
  size_t n = atomic_load_explicit(&registry.n, memory_order_relaxed);
  if (tg__ds_by_name(opts->name, strlen(opts->name))) {
    rv = -EEXIST;
  } else if (n == TG_DS_MAX) {
    rv = -ENOSPC;
  } else {
    tg_ds_t *ds = &registry.ds[n];
    memset(ds, 0, sizeof(*ds));
    ds->idx = (uint32_t)n;
    memcpy(ds->name, opts->name, strlen(opts->name) + 1);
    ds->handles_incremental_state_clear = opts->handles_incremental_state_clear;
    ds->will_notify_on_start = flags & TG_DS_WILL_NOTIFY_ON_START;
    ds->cbs = opts->cbs;
    atomic_store_explicit(&registry.n, n + 1, memory_order_release);
    *out = ds;
  }
  pthread_mutex_unlock(&registry.lock);
  if (rv == 0) registry_wake(); /* registers it if connected */
  return rv;
}

/* --- instance transitions (agent's thread) ------------------------------- */

void tg__ds_inst_setup(tg_ds_t *ds, unsigned inst, uint64_t instance_id,
                       uint16_t target_buffer, tg_arbiter_t *arb) {
  pthread_mutex_lock(&registry.lock);
  tg_ds_inst_t *in = &ds->inst[inst];
  in->in_use = true;
  in->instance_id = instance_id;
  in->target_buffer = target_buffer;
  if (arb) tg_arbiter_ref(arb);
  in->arb = arb;
  pthread_mutex_unlock(&registry.lock);
}

/* Only the agent's thread changes generations, under registry.lock: a
 * relaxed load reads its own last store. */
static bool inst_started(const tg_ds_inst_t *in) {
  return atomic_load_explicit(&in->generation, memory_order_relaxed) & 1u;
}

void tg__ds_inst_start(tg_ds_t *ds, unsigned inst) {
  pthread_mutex_lock(&registry.lock);
  tg_ds_inst_t *in = &ds->inst[inst];
  if (!inst_started(in)) {
    atomic_fetch_add_explicit(&in->generation, 1, memory_order_release);
    atomic_fetch_or_explicit(&ds->hot.enabled_mask, (uint8_t)(1u << inst),
                             memory_order_release);
  }
  pthread_mutex_unlock(&registry.lock);
}

void tg__ds_inst_stop(tg_ds_t *ds, unsigned inst) {
  pthread_mutex_lock(&registry.lock);
  tg_ds_inst_t *in = &ds->inst[inst];
  atomic_fetch_and_explicit(&ds->hot.enabled_mask, (uint8_t) ~(1u << inst),
                            memory_order_release);
  if (inst_started(in))
    atomic_fetch_add_explicit(&in->generation, 1, memory_order_release);
  in->in_use = false;
  in->start_ack_pending = false;
  tg_arbiter_t *arb = in->arb;
  in->arb = NULL;
  in->instance_id = 0;
  pthread_mutex_unlock(&registry.lock);
  if (arb) tg_arbiter_unref(arb);
}

void tg_ds_notify_started(tg_ds_t *ds, unsigned inst) {
  if (!ds || inst >= TG_DS_MAX_INSTANCES || !ds->will_notify_on_start) return;
  pthread_mutex_lock(&registry.lock);
  tg_ds_inst_t *in = &ds->inst[inst];
  bool wake = in->in_use && inst_started(in) && !in->start_ack_pending;
  if (wake) in->start_ack_pending = true;
  pthread_mutex_unlock(&registry.lock);
  if (wake) registry_wake();
}

size_t tg__ds_take_start_acks(uint64_t *ids, size_t max) {
  size_t n = 0, count = tg__ds_count();
  pthread_mutex_lock(&registry.lock);
  for (size_t i = 0; i < count && n < max; i++)
    for (unsigned k = 0; k < TG_DS_MAX_INSTANCES && n < max; k++) {
      tg_ds_inst_t *in = &registry.ds[i].inst[k];
      if (!in->start_ack_pending) continue;
      in->start_ack_pending = false;
      ids[n++] = in->instance_id;
    }
  pthread_mutex_unlock(&registry.lock);
  return n;
}

void tg__ds_inst_clear_incremental(tg_ds_t *ds, unsigned inst) {
  atomic_fetch_add_explicit(&ds->inst[inst].incr_generation, 1,
                            memory_order_release);
}

bool tg__ds_any_started(void) {
  size_t n = tg__ds_count();
  for (size_t i = 0; i < n; i++)
    for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++)
      if (inst_started(&registry.ds[i].inst[k])) return true;
  return false;
}

/* --- per-thread writers -------------------------------------------------- */

/* initial-exec: a plain %fs-relative load even in libtracegate-agent.so,
 * instead of a __tls_get_addr call per packet. The library is linked, not
 * dlopen()ed late, so glibc's static TLS reserve holds this pointer. */
_Thread_local tg__thread_writers_t *tg__t_writers
    __attribute__((tls_model("initial-exec")));
static pthread_key_t g_thread_key;
static pthread_once_t g_thread_key_once = PTHREAD_ONCE_INIT;

static void slot_release(tg__writer_slot_t *s) {
  if (s->user_dtor && s->user) s->user_dtor(s->user);
  s->user = NULL;
  s->user_dtor = NULL;
  if (s->w) {
    /* Drops are counted as they happen, by the arbiter. */
    atomic_fetch_add_explicit(&tg__agent_packets_written,
                              s->w->packets_written, memory_order_relaxed);
    tg_trace_writer_fini(s->w);
    free(s->w);
    s->w = NULL;
  }
}

/* Thread exit: return every chunk this thread holds, so nothing it wrote is
 * stranded in the SMB. */
static void on_thread_exit(void *p) {
  tg__thread_writers_t *tw = p;
  for (size_t i = 0; i < TG_DS_MAX * TG_DS_MAX_INSTANCES; i++)
    slot_release(&tw->slots[i]);
  free(tw);
  tg__t_writers = NULL;
}

static void make_thread_key(void) {
  pthread_key_create(&g_thread_key, on_thread_exit);
}

static tg__thread_writers_t *thread_writers(void) {
  if (tg__t_writers) return tg__t_writers;
  pthread_once(&g_thread_key_once, make_thread_key);
  tg__thread_writers_t *tw = calloc(1, sizeof(*tw));
  if (!tw) return NULL;
  pthread_setspecific(g_thread_key, tw);
  tg__t_writers = tw;
  return tw;
}

/* The calling thread's slot of {ds, inst}, or NULL before its first
 * packet. For the calls that use a slot but never create a writer. */
static tg__writer_slot_t *existing_slot(const tg_ds_t *ds, unsigned inst) {
  tg__thread_writers_t *tw = tg__t_writers;
  if (!tw || inst >= TG_DS_MAX_INSTANCES) return NULL;
  return tg__writers_slot(tw, ds, inst);
}

/* The slot's writer is missing or belongs to an older instance: build one
 * for the current generation, or report that the instance is not active. */
tg__writer_slot_t *tg__ds_slot_slow(tg_ds_t *ds, unsigned inst) {
  tg__thread_writers_t *tw = thread_writers();
  if (!tw) return NULL;
  tg__writer_slot_t *s = tg__writers_slot(tw, ds, inst);
  tg_ds_inst_t *in = &ds->inst[inst];
  uint32_t gen = atomic_load_explicit(&in->generation, memory_order_acquire);
  if (s->w && s->generation == gen) return s;
  slot_release(s);
  if (!(gen & 1u) || s->no_smb_generation == gen) return NULL;

  pthread_mutex_lock(&registry.lock);
  gen = atomic_load_explicit(&in->generation, memory_order_acquire);
  tg_arbiter_t *arb = (gen & 1u) ? in->arb : NULL;
  /* An instance's SMB is set when it is set up and stays until it stops. */
  if ((gen & 1u) && !arb) s->no_smb_generation = gen;
  uint16_t target = in->target_buffer;
  tg_trace_writer_t *w = NULL;
  if (arb && !tg_arbiter_is_shut_down(arb)) {
    w = malloc(sizeof(*w));
    if (w && tg_trace_writer_init(w, arb, target) < 0) {
      free(w);
      w = NULL;
    }
  }
  pthread_mutex_unlock(&registry.lock);
  if (!w) return NULL;
  s->w = w;
  s->generation = gen;
  s->incr_seen = atomic_load_explicit(&in->incr_generation,
                                      memory_order_acquire);
  s->incr_fresh = true;
  s->drops_seen = 0; /* a new writer has dropped nothing */
  return s;
}

tg_pbw_t *tg_ds_packet_begin(tg_ds_t *ds, unsigned inst) {
  if (inst >= TG_DS_MAX_INSTANCES) return NULL;
  tg__writer_slot_t *s = tg__ds_slot(ds, inst);
  return s ? tg_trace_writer_begin_packet(s->w) : NULL;
}

void tg_ds_packet_end(tg_ds_t *ds, unsigned inst) {
  tg__writer_slot_t *s = existing_slot(ds, inst);
  if (s && s->w) tg_trace_writer_end_packet(s->w);
}

void tg_ds_flush_thread(tg_ds_t *ds, unsigned inst) {
  tg__writer_slot_t *s = existing_slot(ds, inst);
  if (!s) return;
  if (!s->w) return;
  tg_trace_writer_flush(s->w);
  /* What the flush returned goes out with the agent's next commit: the
   * periodic tick (commit_period_ms) while it runs, a Flush or a stop
   * (with commit_on_flush the tick runs only after such a wake). The
   * thread is woken only when no tick will come, and never with nothing
   * pending: a producer that flushes every round would otherwise wake it
   * as often as it runs itself. The pending flag is this thread's own
   * write, so the relaxed load sees it. The fence pairs with the one
   * after a commit_on_flush tick stops the timer (commit.c): that tick or
   * this wake sends the chunk. */
  if (!s->w->arb || !tg_arbiter_commit_pending(s->w->arb)) return;
  atomic_thread_fence(memory_order_seq_cst);
  const tg__ds_wake_hook_t *h =
      atomic_load_explicit(&registry.wake, memory_order_acquire);
  if (h && !h->commit_will_come(h->ctx)) h->wake(h->ctx);
}

bool tg_ds_incremental_state_cleared(tg_ds_t *ds, unsigned inst) {
  tg__writer_slot_t *s = existing_slot(ds, inst);
  if (!s) return false;
  uint32_t g = atomic_load_explicit(&ds->inst[inst].incr_generation,
                                    memory_order_acquire);
  /* The writer's own count, read on its own thread: a loss is known here
   * at once, where the service's clear needs a turn of the agent's
   * thread and comes only every clear period. */
  uint64_t d = s->w ? tg_trace_writer_packets_dropped(s->w) : s->drops_seen;
  if (s->incr_seen == g && !s->incr_fresh && s->drops_seen == d) return false;
  s->incr_seen = g;
  s->incr_fresh = false;
  s->drops_seen = d;
  return true;
}

void **tg_ds_writer_user(tg_ds_t *ds, unsigned inst, void (*dtor)(void *)) {
  tg__writer_slot_t *s = existing_slot(ds, inst);
  if (!s) return NULL;
  s->user_dtor = dtor;
  return &s->user;
}
