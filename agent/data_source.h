/* The data-source registry (data_source.c): every data source the app
 * registered, its instance slots, and each thread's trace writers. Shared
 * with the agent's thread (commands.c, connection.c) and track events
 * (track_event.c). Not installed.
 *
 * The registry never calls into the agent's thread: when something needs
 * its attention (a new data source to register with the service, a thread
 * flushed its writer), it calls the wake hook the agent installed, as the
 * SMB arbiter does (tg_arbiter_opts_t.wake). */
#ifndef TRACEGATE_AGENT_DATA_SOURCE_H
#define TRACEGATE_AGENT_DATA_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/smb_arbiter.h"
#include "agent/trace_writer.h"
#include "tracegate/agent.h"

#define TG_DS_NAME_MAX 128

/* One instance slot of a data source. The agent's thread changes it under
 * the registry's lock; writer threads read |generation| lock-free on every
 * packet and take the lock only to (re)create their writer. */
typedef struct tg_ds_inst {
  /* Odd while the instance is started (the only record of it); bumped on
   * every start and stop, so a writer made for an earlier instance is
   * recognised as stale. */
  _Atomic uint32_t generation;
  /* Bumped by ClearIncrementalState. */
  _Atomic uint32_t incr_generation;
  bool in_use; /* set up or started */
  /* tg_ds_notify_started() was called for the started instance; the
   * agent's thread sends NotifyDataSourceStarted and clears it. */
  bool start_ack_pending;
  uint64_t instance_id; /* the service's id */
  uint16_t target_buffer;
  tg_arbiter_t *arb; /* a reference while in use */
} tg_ds_inst_t;

struct tg_ds {
  struct tg_ds_hot hot; /* first: tg_ds_enabled_mask() reads it */
  uint32_t idx;         /* slot in the registry */
  char name[TG_DS_NAME_MAX];
  bool handles_incremental_state_clear;
  bool will_notify_on_start; /* TG_DS_WILL_NOTIFY_ON_START */
  tg_ds_callbacks_t cbs;
  /* Agent's thread only (connection.c): sent RegisterDataSource on the
   * current connection. */
  bool registered_with_service;
  tg_ds_inst_t inst[TG_DS_MAX_INSTANCES];
};

/* How the registry asks the agent's thread to look at it. Both run on
 * the calling thread (any thread, never with the registry's lock held) and
 * must be cheap (uv_async_send, an atomic load); the hook is read-only
 * while installed. |commit_will_come| says whether the agent's periodic
 * commit runs, so that a flush needs no wake (tg_ds_flush_thread). */
typedef struct tg__ds_wake_hook {
  void (*wake)(void *ctx);
  bool (*commit_will_come)(void *ctx);
  void *ctx;
} tg__ds_wake_hook_t;

/* Installs |hook| (NULL: none, wakes are dropped). The agent installs its
 * own while its thread runs; |hook| must outlive its installation. */
void tg__ds_registry_set_wake(const tg__ds_wake_hook_t *hook);

/* Registry lookups. Data sources are never removed: a pointer stays valid
 * for the life of the process. */
size_t tg__ds_count(void);
tg_ds_t *tg__ds_at(size_t i);
tg_ds_t *tg__ds_by_name(const char *name, size_t len);

/* Instance transitions, called on the agent's thread with the registry's
 * lock NOT held (they take it). */
void tg__ds_inst_setup(tg_ds_t *ds, unsigned inst, uint64_t instance_id,
                       uint16_t target_buffer, tg_arbiter_t *arb);
void tg__ds_inst_start(tg_ds_t *ds, unsigned inst);
/* Stops and frees the slot (drops the arbiter reference). */
void tg__ds_inst_stop(tg_ds_t *ds, unsigned inst);
/* The service ids of started instances whose start tg_ds_notify_started()
 * confirmed since the last call, at most |max| into |ids| (the rest stay
 * for the next call). Agent's thread only. */
size_t tg__ds_take_start_acks(uint64_t *ids, size_t max);
void tg__ds_inst_clear_incremental(tg_ds_t *ds, unsigned inst);
/* True while any instance of any data source is started. Agent's thread
 * only (the one that starts and stops them). */
bool tg__ds_any_started(void);

/* The calling thread's writer for one {data source, instance}. */
typedef struct tg__writer_slot {
  tg_trace_writer_t *w;
  uint32_t generation;
  /* A started generation that has no SMB to write into (the service sent
   * none, or an unusable one): its packets drop without taking the lock. */
  uint32_t no_smb_generation;
  uint32_t incr_seen;
  bool incr_fresh; /* no packet reported the clear yet */
  /* The writer's drop count when tg_ds_incremental_state_cleared() last
   * said true: a count that moved since says it again (the state written
   * before may have gone with the lost packets). */
  uint64_t drops_seen;
  void *user;
  void (*user_dtor)(void *);
} tg__writer_slot_t;

/* Every writer of one thread, by {data source, instance}. */
typedef struct tg__thread_writers {
  tg__writer_slot_t slots[TG_DS_MAX * TG_DS_MAX_INSTANCES];
} tg__thread_writers_t;

/* The calling thread's writers (NULL before its first packet). */
extern _Thread_local tg__thread_writers_t *tg__t_writers
    __attribute__((tls_model("initial-exec")));

/* The slot of {ds, inst} in a thread's table. */
static inline tg__writer_slot_t *tg__writers_slot(tg__thread_writers_t *tw,
                                                  const tg_ds_t *ds,
                                                  unsigned inst) {
  return &tw->slots[ds->idx * TG_DS_MAX_INSTANCES + inst];
}

tg__writer_slot_t *tg__ds_slot_slow(tg_ds_t *ds, unsigned inst);

/* The calling thread's slot for |inst| (inst < TG_DS_MAX_INSTANCES) with a
 * current writer, created if needed; NULL when the instance is not active.
 * The slot's memory is the thread's for its life; |w| may change on the
 * next call. The hot path of packets and track events: inline. */
static inline tg__writer_slot_t *tg__ds_slot(tg_ds_t *ds, unsigned inst) {
  tg__thread_writers_t *tw = tg__t_writers;
  if (__builtin_expect(tw != NULL, 1)) {
    tg__writer_slot_t *s = tg__writers_slot(tw, ds, inst);
    uint32_t gen = atomic_load_explicit(&ds->inst[inst].generation,
                                        memory_order_acquire);
    if (__builtin_expect(s->w && s->generation == gen, 1)) return s;
  }
  return tg__ds_slot_slow(ds, inst);
}

/* Bumped (relaxed) by a writer's thread when the writer goes. Dropped
 * packets are counted as they happen, in the SMB arbiter's stats. */
extern _Atomic uint64_t tg__agent_packets_written;

#endif /* TRACEGATE_AGENT_DATA_SOURCE_H */
