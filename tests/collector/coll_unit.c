/* coll_unit.h: the daemon's modules in the test's process. */
#include "coll_unit.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/daemon/boost.h"
#include "collector/daemon/shares.h"
#include "collector/daemon/symbols.h"
#include "collector/daemon/coll_test.h"
#include "pb/config/trace_config.pb-c.h"
#include "client/session_cache.h"
#include "test_wait.h"

/* Far from 0, so that a window or an age computed from it never starts
 * at the epoch of the loop's own clock. */
#define UNIT_CLOCK_START_MS 1000000

/* u->now_ms, which the tests move, as the daemon's clock. */
static uint64_t unit_clock_ms(const tg_clock_t *k) {
  return (uint64_t)((const coll_unit_t *)k->ctx)->now_ms;
}

static uint64_t unit_clock_ns(const tg_clock_t *k) {
  return unit_clock_ms(k) * 1000000;
}

/* The wall moves with now_ms, from a date far from the epoch. */
static uint64_t unit_clock_wall_ms(const tg_clock_t *k) {
  return COLL_UNIT_WALL_START_MS + unit_clock_ms(k);
}

void coll_unit_hosts(coll_unit_t *u, size_t n) {
  assert_true(n <= COLL_UNIT_HOSTS_MAX);
  start_hosts(u->h, n);
  u->n_hosts = n;
}

void coll_unit_inventory(coll_unit_t *u, size_t n, const char *more) {
  write_hosts(u->h, n);
  if (!more) return;
  FILE *f = fopen(fleet_in_dir("hosts.txt"), "a");
  assert_non_null(f);
  fputs(more, f);
  assert_int_equal(fclose(f), 0);
}

void coll_unit_open(coll_unit_t *u, size_t n_inventory, const char *extra,
                    const char *more, bool start) {
  write_config(u->h, n_inventory, extra);
  /* A store of its own per fixture: a test that failed half-way leaves
   * its store locked, and the next test of the executable must not
   * trip on it. */
  static unsigned opened;
  char store[32];
  snprintf(store, sizeof(store), "store = store%u\n", ++opened);
  edit_config("store = store\n", store);
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "a");
  assert_non_null(f);
  fprintf(f, "flush_timeout_ms: %u\n%s",
          u->flush_timeout_ms ? u->flush_timeout_ms : 300,
          u->flight_extra ? u->flight_extra : "");
  assert_int_equal(fclose(f), 0);
  coll_unit_inventory(u, n_inventory, more);
  assert_int_equal(uv_loop_init(&u->loop), 0);
  assert_int_equal(uv_timer_init(&u->loop, &u->tick), 0);
  memset(&u->c, 0, sizeof(u->c));
  u->now_ms = UNIT_CLOCK_START_MS;
  tg_coll_config_t cfg;
  char err[512];
  if (tg_coll_config_load(fleet_in_dir("collector.conf"), &cfg, NULL, NULL,
                          err, sizeof(err)) < 0)
    fail_msg("the config: %s", err);
  assert_int_equal(coll_prepare(&u->c, &u->loop, &cfg), 0);
  u->clock = (tg_clock_t){
      .now_ms = unit_clock_ms, .now_ns = unit_clock_ns,
      .now_wall_ms = unit_clock_wall_ms, .ctx = u};
  coll_set_clock_for_test(&u->c, &u->clock);
  tg_list_init(&u->c.api.waiters);
  tg_coll_store_config_t sc = {.dir = u->c.cfg.store};
  assert_int_equal(tg_coll_store_open(&sc, &u->c.store, NULL), 0);
  /* coll_trigger_start()'s budgets, without its timers. */
  coll_trigger_budgets(&u->c);
  if (start) assert_int_equal(coll_hosts_start(&u->c), 0);
  else tg_list_init(&u->c.gone);
}

static void on_tick(uv_timer_t *t) { (void)t; }

void coll_unit_wait(coll_unit_t *u, bool (*done)(coll_unit_t *u, void *arg),
                    void *arg) {
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  uv_timer_start(&u->tick, on_tick, 10, 10);
  while (!done(u, arg)) {
    if (tg_test_now_ms() > end) {
      uv_timer_stop(&u->tick);
      fail_msg("coll_unit_wait: not done within %d ms", FLEET_WAIT_MS);
    }
    uv_run(&u->loop, UV_RUN_ONCE);
  }
  uv_timer_stop(&u->tick);
}

static bool time_up(coll_unit_t *u, void *arg) {
  (void)u;
  return tg_test_now_ms() >= *(int64_t *)arg;
}

void coll_unit_run_for(coll_unit_t *u, int ms) {
  int64_t end = tg_test_now_ms() + ms;
  coll_unit_wait(u, time_up, &end);
}

coll_host_t *coll_unit_host(coll_unit_t *u, const char *spec) {
  for (size_t i = 0; i < u->c.n; i++)
    if (!strcmp(u->c.hosts[i]->t.spec, spec)) return u->c.hosts[i];
  return NULL;
}

typedef struct {
  const char *spec;
  coll_host_state_t st;
  bool standby;
} host_want_t;

static bool host_is(coll_unit_t *u, void *arg) {
  const host_want_t *w = arg;
  coll_host_t *h = coll_unit_host(u, w->spec);
  return h && h->state == w->st && (!w->standby || h->sb.st == COLL_SB_READY);
}

void coll_unit_wait_host(coll_unit_t *u, const char *spec,
                         coll_host_state_t st, bool standby) {
  host_want_t w = {spec, st, standby};
  coll_unit_wait(u, host_is, &w);
}

static bool idle(coll_unit_t *u, void *arg) {
  (void)arg;
  return u->c.n_running == 0;
}

void coll_unit_wait_idle(coll_unit_t *u) { coll_unit_wait(u, idle, NULL); }

static bool flushed(coll_unit_t *u, void *arg) {
  (void)arg;
  for (size_t i = 0; i < u->n_hosts; i++) {
    raw_producer_t *p = &u->h[i].p;
    uint64_t f = raw_producer_wait_flush(p, p->last_flush_id, 5);
    if (f) assert_int_equal(raw_producer_commit(p, NULL, NULL, 0, f), 0);
  }
  return u->c.n_running == 0 && !u->c.queued;
}

void coll_unit_flush_until_idle(coll_unit_t *u) {
  coll_unit_wait(u, flushed, NULL);
}

static bool freed(coll_unit_t *u, void *arg) {
  (void)arg;
  return tg_list_empty(&u->c.gone);
}

void coll_unit_wait_freed(coll_unit_t *u) { coll_unit_wait(u, freed, NULL); }

void coll_unit_row(coll_unit_t *u, uint64_t id, tg_coll_snapshot_t *row,
                   tg_coll_host_t *hosts, size_t max, size_t *n_hosts) {
  assert_int_equal(tg_coll_store_get_with_hosts(u->c.store, id, row, hosts,
                                                max, n_hosts), 0);
}

static bool all_gone(coll_unit_t *u, void *arg) {
  (void)arg;
  return u->c.n == 0 && u->c.n_running == 0 && tg_list_empty(&u->c.gone);
}

void coll_unit_close(coll_unit_t *u) {
  coll_t *c = &u->c;
  /* As coll_stop() does: the function shares' queue goes (the job under
   * way, if any, frees it in the loop's run below). */
  coll_shares_stop(c);
  coll_snap_t *cut[COLL_RUNNING_MAX];
  size_t n = c->n_running;
  memcpy(cut, c->running, n * sizeof(cut[0]));
  for (size_t i = 0; i < n; i++) coll_snap_cut(cut[i]);
  /* Every host out of the inventory: its ring ended, its memory freed
   * once its holder finished (hosts.c). */
  coll_unit_inventory(u, 0, NULL);
  coll_hosts_reload(c, "the test's end");
  coll_unit_wait(u, all_gone, NULL);
  /* No machine of the daemon was asked for a move its table lacks. */
  assert_int_equal(c->counts.snap_host_bad_transitions, 0);
  assert_int_equal(c->counts.snap_bad_transitions, 0);
  assert_int_equal(c->counts.boost_bad_transitions, 0);
  assert_int_equal(c->counts.standby_bad_transitions, 0);
  assert_int_equal(coll_symbols_bad_transitions(c), 0);
  uv_close((uv_handle_t *)&u->tick, NULL);
  /* What is left closes within a few iterations; a handle still open
   * after that is a leak, which uv_loop_close() reports. */
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  while (uv_loop_alive(&u->loop) && tg_test_now_ms() < end) {
    uv_run(&u->loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
  assert_int_equal(uv_loop_close(&u->loop), 0);
  /* The symbolize queue (symbols.c), whose job ended with the loop; the
   * daemon keeps it until it exits. */
  free(c->symbols);
  for (coll_gen_t *g = c->gens, *next; g; g = next) {
    next = g->next;
    tg_fleet_free(&g->fleet);
    free(g);
  }
  free(c->hosts);
  tg_coll_store_close(c->store);
  perfetto__protos__trace_config__free_unpacked(c->flight, NULL);
  coll_boost_config_free(c);
  tg_session_cache_free(c->sessions);
  tg_tls_config_free(c->tls);
  tg_coll_config_free(&c->cfg);
  if (u->hostile) tg_hostile_relay_stop(u->hostile);
  for (size_t i = 0; i < u->n_hosts; i++) fleet_host_stop(&u->h[i]);
}
