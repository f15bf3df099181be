/* The probes' sampler thread: runs every active data source instance on
 * its own schedule.
 *
 * Data source callbacks run on the agent's thread and must stay quick, so
 * they only record what changed (under a mutex) and wake the sampler. The
 * sampler thread owns every instance's state: it creates it when it sees
 * the start, runs the instance's rounds (reading /proc, writing packets),
 * and destroys it when it sees the stop. Only tg_sampler_run_wakes_here()
 * runs an instance elsewhere, under the same lock as all of that, so a
 * stop can never free what a round is using.
 */
#ifndef TRACEGATE_PROBES_SAMPLER_H
#define TRACEGATE_PROBES_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "tracegate/agent.h"

/* Room for a parsed config (tg_sys_stats_cfg_t, tg_process_stats_cfg_t). */
#define TG_PROBE_CFG_MAX 128

typedef struct tg_probe_ops {
  const char *name; /* the data source name, e.g. "linux.sys_stats" */
  /* Agent thread, under the sampler's mutex: parse the DataSourceConfig
   * into |out| (TG_PROBE_CFG_MAX bytes). Returns 0 or a negative error
   * (then the instance stays idle). */
  int (*parse_cfg)(const uint8_t *cfg, size_t len, void *out);
  /* Sampler thread: build an instance's state from its config; |ctx| is
   * the one given to tg_sampler_add. With free_cfg set, a create that
   * returns 0 owns what parse_cfg allocated for |cfg|. */
  int (*create)(const void *cfg, void *ctx, void **state);
  /* Optional, under the sampler's mutex: releases what parse_cfg
   * allocated for |cfg| (a config too large for TG_PROBE_CFG_MAX keeps a
   * pointer there), when no create took it: the config was replaced
   * before the sampler saw it, create failed, or the sampler is freed. */
  void (*free_cfg)(void *cfg);
  /* Sampler thread: one round at |now_ms| (CLOCK_MONOTONIC) for instance
   * |inst| of |ds|. Returns when the next round is due (absolute ms), or
   * UINT64_MAX for never. */
  uint64_t (*tick)(void *state, tg_ds_t *ds, unsigned inst, uint64_t now_ms);
  /* Optional, sampler thread: work asked for by tg_sampler_wake(), outside
   * the instance's schedule (which it leaves as it is). Runs only once the
   * instance is enabled. */
  void (*wake)(void *state, tg_ds_t *ds, unsigned inst);
  /* Optional, agent thread: at the service's flush and at the stop (before
   * the instance's writers go), writes what the instance must not lose.
   * Gets no state: the sampler thread owns that. */
  void (*drain_now)(tg_ds_t *ds, unsigned inst);
  void (*destroy)(void *state);
} tg_probe_ops_t;

/* The parse_cfg of a probe with nothing to configure: any config does. */
int tg_probe_no_cfg(const uint8_t *cfg, size_t len, void *out);

typedef struct tg_sampler tg_sampler_t;

/* Returns 0, -ENOMEM. */
int tg_sampler_new(tg_sampler_t **out);
/* Registers |ops| as a data source whose callbacks feed this sampler.
 * |ops| and |ctx| (handed to ops->create) are borrowed for the sampler's
 * life. Before tg_sampler_start. Returns 0, -ENOSPC, or tg_ds_register's
 * error. */
int tg_sampler_add(tg_sampler_t *s, const tg_probe_ops_t *ops, void *ctx);
/* Any thread: runs ops->wake of every enabled instance that has one, soon.
 * Takes the sampler's mutex briefly; never call it holding a lock the
 * sampler takes under its own (the feeds' mutexes are: instances register
 * and unregister under it, so the feeds wake only after unlocking). */
void tg_sampler_wake(tg_sampler_t *s);
/* Runs ops->wake of the enabled instances of the source registered with
 * |ops| on the calling thread now (its packets on this thread's writers,
 * each flushed after), serialized with the sampler thread's work: for work
 * another thread asks for often, where a wake of the sampler thread each
 * time would cost more than the work (linux.process_stats resolving the
 * pids each ftrace drain names). Never call it holding a lock the sampler
 * takes (its own, the feeds'). */
void tg_sampler_run_wakes_here(tg_sampler_t *s, const tg_probe_ops_t *ops);
/* Starts the thread. Returns 0 or -errno. */
int tg_sampler_start(tg_sampler_t *s);
/* Stops and joins the thread (if started), destroys every instance's
 * state and frees |s|. Call after tg_agent_shutdown(), whose on_stop
 * callbacks still reach the sampler. */
void tg_sampler_free(tg_sampler_t *s);

/* CLOCK_MONOTONIC now. (CLOCK_BOOTTIME, the packets' clock, is
 * tg__clock_boottime() of agent/clock.h.) */
uint64_t tg_probes_now_ms(void);
/* Nanoseconds per clock tick (USER_HZ) of /proc/stat and /proc/<pid>/stat. */
uint64_t tg_probes_ns_per_tick(void);

#endif /* TRACEGATE_PROBES_SAMPLER_H */
