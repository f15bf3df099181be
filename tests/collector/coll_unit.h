/* The collector daemon's modules (collector/daemon/coll.h) driven in the
 * test's own process, one module's functions at a time: a coll_t made by
 * coll_prepare() from a config of the fleet harness's hosts (real
 * tracegated and relay children, reached over TLS by the daemon's own
 * dialer), its store opened and, unless the test says otherwise, its
 * hosts started (hosts.c); no HTTP API, no schedule, no inventory watch.
 * Time is simulated (coll_test.h): coll_loop_ms() returns u->now_ms, which
 * only the test moves.
 *
 * Every function asserts (cmocka); every wait is bounded (FLEET_WAIT_MS).
 * The struct is the caller's and must not move once opened.
 */
#ifndef TRACEGATE_TESTS_COLL_UNIT_H
#define TRACEGATE_TESTS_COLL_UNIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "coll_e2e.h"
#include "collector/daemon/api.h"
#include "collector/daemon/coll.h"
#include "collector/daemon/hosts.h"
#include "collector/daemon/snap.h"
#include "collector/daemon/standby.h"
#include "collector/daemon/trigger.h"

#define COLL_UNIT_HOSTS_MAX 3
/* The daemon's wall reading (coll_wall_ms) at now_ms 0. */
#define COLL_UNIT_WALL_START_MS 1700000000000ll

typedef struct coll_unit {
  uv_loop_t loop;
  coll_t c;
  int64_t now_ms; /* the daemon's clock (coll_loop_ms) */
  tg_clock_t clock; /* reads now_ms; its wall COLL_UNIT_WALL_START_MS + now_ms */
  /* The ring's flush_timeout_ms, set before coll_unit_open (0: 300): how
   * long a clone waits for producers that do not answer its flush. */
  uint32_t flush_timeout_ms;
  /* More of the flight config, appended before coll_unit_open reads it
   * (NULL: none). */
  const char *flight_extra;
  fleet_host_t h[COLL_UNIT_HOSTS_MAX];
  size_t n_hosts; /* started fleet hosts */
  /* In front of h[0] when the test started one (fleet_hostile_start);
   * stopped by coll_unit_close. */
  tg_hostile_relay_t *hostile;
  uv_timer_t tick; /* wakes the loop while a wait polls */
} coll_unit_t;

/* Starts |n| hosts of the fleet harness (each with a producer of
 * "fleet.ds") into u->h. */
void coll_unit_hosts(coll_unit_t *u, size_t n);
/* Writes the config for the first |n_inventory| of u->h (write_config,
 * plus |extra| lines or NULL) and |more| lines appended to the inventory
 * (NULL: none), loads it, prepares u->c, opens its store, and with
 * |start| starts its hosts (coll_hosts_start). */
void coll_unit_open(coll_unit_t *u, size_t n_inventory, const char *extra,
                    const char *more, bool start);
/* Runs the loop until |done(u, arg)|; fails the test past FLEET_WAIT_MS. */
void coll_unit_wait(coll_unit_t *u, bool (*done)(coll_unit_t *u, void *arg),
                    void *arg);
/* Runs the loop for |ms| of real time (things that must NOT happen). */
void coll_unit_run_for(coll_unit_t *u, int ms);
/* Until the collector's host |spec| is in state |st| (with a standby
 * connection READY when |standby|). */
void coll_unit_wait_host(coll_unit_t *u, const char *spec,
                         coll_host_state_t st, bool standby);
/* Until every host removed from the inventory is freed (coll_t.gone
 * empty). */
void coll_unit_wait_freed(coll_unit_t *u);
/* Answers every flush the hosts' producers are asked for, until no
 * snapshot is under way or queued. */
void coll_unit_flush_until_idle(coll_unit_t *u);
/* Until no snapshot is under way. */
void coll_unit_wait_idle(coll_unit_t *u);
/* The collector's host spelt |spec|, or NULL. */
coll_host_t *coll_unit_host(coll_unit_t *u, const char *spec);
/* The inventory rewritten: the first |n| of u->h, then |more| (or NULL). */
void coll_unit_inventory(coll_unit_t *u, size_t n, const char *more);
/* The snapshot |id|'s row, with its hosts (at most |max| into |hosts|,
 * their count in *n_hosts). */
void coll_unit_row(coll_unit_t *u, uint64_t id, tg_coll_snapshot_t *row,
                   tg_coll_host_t *hosts, size_t max, size_t *n_hosts);
/* Ends everything: snapshots cut, every host removed and freed, the
 * store closed, the loop closed with no handle left (asserted; and no
 * state move refused by the snapshots' and boosts' tables); then the
 * fleet hosts stopped. */
void coll_unit_close(coll_unit_t *u);

#endif /* TRACEGATE_TESTS_COLL_UNIT_H */
