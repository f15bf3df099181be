/* What the agent's files share: the data source registry (data_source.c),
 * the connection to the service (agent.c) and track events
 * (track_event.c). Not installed. */
#ifndef TRACEGATE_AGENT_INTERNAL_H
#define TRACEGATE_AGENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/smb_arbiter.h"
#include "agent/trace_writer.h"
#include "tracegate/agent.h"

#define TG_DS_NAME_MAX 128

/* One instance slot of a data source. The agent's thread changes it under
 * tg__agent_lock; writer threads read |generation| lock-free on every packet
 * and take the lock only to (re)create their writer. */
typedef struct tg_ds_inst {
  /* Odd while the instance is started (the only record of it); bumped on
   * every start and stop, so a writer made for an earlier instance is
   * recognised as stale. */
  _Atomic uint32_t generation;
  /* Bumped by ClearIncrementalState. */
  _Atomic uint32_t incr_generation;
  bool in_use; /* set up or started */
  uint64_t instance_id; /* the service's id */
  uint16_t target_buffer;
  tg_arbiter_t *arb; /* a reference while in use */
} tg_ds_inst_t;

struct tg_ds {
  struct tg_ds_hot hot; /* first: tg_ds_enabled_mask() reads it */
  uint32_t idx;         /* slot in the registry */
  char name[TG_DS_NAME_MAX];
  bool handles_incremental_state_clear;
  tg_ds_callbacks_t cbs;
  bool registered_with_service;
  tg_ds_inst_t inst[TG_DS_MAX_INSTANCES];
};

/* Guards instance state changes against writer creation. Never taken on a
 * packet's fast path. */
extern pthread_mutex_t tg__agent_lock;

/* Registry (data_source.c). */
size_t tg__ds_count(void);
tg_ds_t *tg__ds_at(size_t i);
tg_ds_t *tg__ds_by_name(const char *name, size_t len);

/* Instance transitions, called on the agent's thread with tg__agent_lock
 * NOT held (they take it). */
void tg__ds_inst_setup(tg_ds_t *ds, unsigned inst, uint64_t instance_id,
                       uint16_t target_buffer, tg_arbiter_t *arb);
void tg__ds_inst_start(tg_ds_t *ds, unsigned inst);
/* Stops and frees the slot (drops the arbiter reference). */
void tg__ds_inst_stop(tg_ds_t *ds, unsigned inst);
void tg__ds_inst_clear_incremental(tg_ds_t *ds, unsigned inst);

/* The calling thread's writer for one {data source, instance}. */
typedef struct tg__writer_slot {
  tg_trace_writer_t *w;
  uint32_t generation;
  /* A started generation that has no SMB to write into (the service sent
   * none, or an unusable one): its packets drop without taking the lock. */
  uint32_t no_smb_generation;
  uint32_t incr_seen;
  bool incr_fresh; /* no packet reported the clear yet */
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

/* Counters the writer threads bump (relaxed). */
extern _Atomic uint64_t tg__agent_packets_written;
extern _Atomic uint64_t tg__agent_packets_dropped;

/* Agent logging through the app's sink. */
void tg__agent_log(tg_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The process's name (/proc/self/comm, what ps shows) into |out| (|n| >=
 * 1 bytes, NUL-terminated); false, with |out| empty, when unreadable. */
bool tg__process_name(char *out, size_t n);

/* Wakes the agent's thread (commit, register new data sources). Safe from
 * any thread; cheap when already pending. */
void tg__agent_wake(void);

#endif /* TRACEGATE_AGENT_INTERNAL_H */
