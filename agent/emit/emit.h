/* tracegate-emit: a load generator for tests, benches and the demo.
 *
 * Each writer thread waits for the data source (or the "emit" track event
 * category) to be enabled, writes packets at the configured rate while it
 * stays enabled, and counts what it wrote. Raw packets carry
 * TracePacket.for_testing { seq_value = per-thread sequence number,
 * str = "t<thread>:" padded to --size } so a reader can check, per thread,
 * that nothing is missing and nothing is out of order.
 */
#ifndef TRACEGATE_EMIT_H
#define TRACEGATE_EMIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tracegate/agent.h"

typedef enum emit_rpc_role {
  EMIT_RPC_NONE,
  EMIT_RPC_SERVER, /* --rpc-server */
  EMIT_RPC_CLIENT, /* --rpc-client */
} emit_rpc_role_t;

typedef struct emit_opts {
  uint64_t rate;        /* units per second per thread; 0: flat out */
  uint64_t size;        /* payload bytes of a normal packet */
  uint64_t large_every; /* every Nth unit is large; 0: never */
  uint64_t large_size;
  uint64_t count;       /* units per thread and session; 0: no limit */
  bool track_events;
  emit_rpc_role_t rpc; /* rate and count then apply to calls */
} emit_opts_t;

/* What the threads share with main.c. */
typedef struct emit_shared {
  const emit_opts_t *opts;
  tg_ds_t *ds; /* raw mode */
  atomic_bool quit;
  /* Session transitions seen by the data source callbacks (raw mode). */
  atomic_uint starts, stops;
  /* Set when a writer first found the source enabled (CLOCK_MONOTONIC ns). */
  _Atomic uint64_t first_start_ns;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* idle writers wait here; on_start broadcasts */
} emit_shared_t;

typedef struct emit_worker {
  emit_shared_t *sh;
  unsigned idx;
  pthread_t thread;
  char *payload;       /* "t<idx>:" + filler, NUL-terminated at size */
  char *large_payload; /* the same at large_size, or NULL */
  size_t payload_len, large_len;
  /* Written by the worker, read by main.c after join. */
  uint64_t units;   /* iterations, all sessions */
  uint64_t packets; /* packets begun (one per active instance and unit) */
} emit_worker_t;

/* True while some session enables what we write: the data source, the
 * "emit" category, or in rpc mode the "rpc" one. */
bool emit_active(const emit_shared_t *sh);

/* Builds the worker's payloads. Returns 0 or -ENOMEM. */
int emit_worker_init(emit_worker_t *w, emit_shared_t *sh, unsigned idx);
void emit_worker_free(emit_worker_t *w);
/* The thread body. */
void *emit_worker_main(void *arg);

/* Registers the "emit" category (track event mode). */
int emit_register_category(void);

uint64_t emit_now_ns(void); /* CLOCK_MONOTONIC */

/* Pacing, shared by the writers and the rpc client: units due |elapsed|
 * ns after a start at |rate| per second, and the time of unit |i| after
 * it, without overflowing for any rate the flags allow. */
uint64_t emit_units_due(uint64_t elapsed, uint64_t rate);
uint64_t emit_unit_time(uint64_t i, uint64_t rate);
void emit_sleep_until(uint64_t t); /* CLOCK_MONOTONIC ns */
/* Waits up to |ms| for on_start's broadcast, or not at all once quitting. */
void emit_idle_wait(emit_shared_t *sh, unsigned ms);

#endif /* TRACEGATE_EMIT_H */
