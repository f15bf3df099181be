/* The relay's bridges on a simulated clock (tg_relay_env_t.clock), in the
 * test's process: a --stdio bridge to a real tracegated, its client a
 * consumer over the other end of a socket pair. What follows the clock:
 * the replay window a client's session key holds is let go at the
 * relay's time of the bridge's end, and lingers for exactly linger_ms of
 * that time, whatever the machine's time did meanwhile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "common/clock.h"
#include "consumer/consumer.h"
#include "ipc/pipe_transport.h"
#include "pb/tracegate/relay.pb-c.h"
#include "relay/bridge.h"
#include "relay/replay_window.h"
#include "test_service.h"

#define WAIT_MS 10000
#define START_MS 1000
#define LINGER_MS 60000
#define HELD_MS 5000

typedef struct world {
  uv_loop_t loop;
  tg_clock_sim_t sim;
  tg_relay_env_t env;
  tg_relay_host_info_t host;
  tg_replay_store_t store;
  tg_pipe_transport_t pipe; /* the client's end */
  tg_consumer_t *c;
  bool ready, closed, idle, bound, key_set;
  int key_status;
} world_t;

static void on_late(uv_timer_t *t) { *(bool *)t->data = true; }

/* Runs the loop until *flag or WAIT_MS of the loop's time. */
static bool run_until(uv_loop_t *loop, const bool *flag) {
  bool late = false;
  uv_timer_t t;
  uv_timer_init(loop, &t);
  t.data = &late;
  uv_timer_start(&t, on_late, WAIT_MS, 0);
  while (!*flag && !late) uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  return *flag;
}

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  (void)msg;
  world_t *w = tg_consumer_data(c);
  w->ready = status == 0;
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  (void)status;
  (void)msg;
  world_t *w = tg_consumer_data(c);
  w->closed = true;
  w->c = NULL;
}

static const tg_consumer_cbs_t kCbs = {.on_ready = on_ready,
                                       .on_close = on_close};

static void on_idle(tg_relay_env_t *env) { ((world_t *)env->data)->idle = true; }

static void on_bound(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  (void)msg;
  world_t *w = ctx;
  w->bound = status == 0;
}

static void on_key_set(tg_consumer_t *c, void *ctx, int status,
                       const char *msg, const uint8_t *reply, size_t len) {
  (void)c;
  (void)msg;
  (void)reply;
  (void)len;
  world_t *w = ctx;
  w->key_status = status;
  w->key_set = true;
}

/* The relay's env on the simulated clock, one --stdio bridge to the
 * service, and its client bound (ConsumerPort through the bridge). */
static void world_open(world_t *w, const test_service_t *ts) {
  memset(w, 0, sizeof(*w));
  assert_int_equal(uv_loop_init(&w->loop), 0);
  tg_clock_sim_init(&w->sim, START_MS);
  tg_relay_host_info_load(&w->host);
  tg_replay_store_init(&w->store, 1u << 20, 4, LINGER_MS);
  tg_relay_env_init(&w->env);
  w->env.loop = &w->loop;
  w->env.clock = &w->sim.clock;
  w->env.consumer_socket = ts->consumer_sock;
  w->env.host = &w->host;
  w->env.replay = &w->store;
  w->env.detach_timeout_ms = 1000;
  w->env.high_water = 1u << 20;
  w->env.on_idle = on_idle;
  w->env.data = w;
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int bridge_out = dup(sv[0]), client_out = dup(sv[1]);
  assert_true(bridge_out >= 0 && client_out >= 0);
  assert_int_equal(
      tg_relay_bridge_open_stdio(&w->env, sv[0], bridge_out, "ssh:test"), 0);
  assert_int_equal(
      tg_pipe_transport_open(&w->loop, &w->pipe, sv[1], client_out, 0), 0);
  assert_int_equal(
      tg_consumer_open(&w->loop, &w->pipe.base, false, &kCbs, w, &w->c), 0);
  assert_true(run_until(&w->loop, &w->ready));
}

/* The only window of the store. */
static tg_replay_window_t *only_window(world_t *w) {
  assert_int_equal(w->store.n_windows, 1);
  return TG_CONTAINER_OF(w->store.windows.next, tg_replay_window_t, node);
}

static void a_window_is_let_go_at_the_relay_clock(void **state) {
  world_t w;
  world_open(&w, *state);
  assert_int_equal(
      tg_consumer_bind_service(w.c, "TracegateRelay", on_bound, &w), 0);
  assert_true(run_until(&w.loop, &w.bound));
  Perfetto__Protos__SetSessionKeyRequest r =
      PERFETTO__PROTOS__SET_SESSION_KEY_REQUEST__INIT;
  r.key = "clock";
  uint8_t buf[64];
  size_t n = perfetto__protos__set_session_key_request__pack(&r, buf);
  assert_int_equal(tg_consumer_call(w.c, "TracegateRelay", "SetSessionKey",
                                    buf, n, on_key_set, &w),
                   0);
  assert_true(run_until(&w.loop, &w.key_set));
  assert_int_equal(w.key_status, 0);
  tg_replay_window_t *win = only_window(&w);
  assert_int_equal(win->users, 1);

  /* HELD_MS of the relay's time later, the client goes: its bridge ends
   * and lets the window go at that time, not the machine's. */
  tg_clock_sim_advance_ms(&w.sim, HELD_MS);
  tg_consumer_close(w.c);
  assert_true(run_until(&w.loop, &w.closed));
  assert_true(run_until(&w.loop, &w.idle));
  assert_int_equal(w.env.n_bridges, 0);
  assert_int_equal(win->users, 0);
  assert_int_equal(win->idle_since_ms, START_MS + HELD_MS);

  /* It lingers LINGER_MS of that clock: one ms short, another key's
   * window finds it kept; at LINGER_MS it is gone. */
  uint64_t idle = START_MS + HELD_MS;
  bool fresh = false;
  tg_replay_window_t *other =
      tg_replay_acquire(&w.store, "other", idle + LINGER_MS - 1, &fresh);
  assert_non_null(other);
  assert_true(fresh);
  assert_int_equal(w.store.n_windows, 2);
  tg_replay_release(&w.store, other, idle + LINGER_MS - 1);
  tg_replay_window_t *third =
      tg_replay_acquire(&w.store, "third", idle + LINGER_MS, &fresh);
  assert_non_null(third);
  /* "clock"'s is gone; "other"'s (idle since one ms ago) stays. */
  assert_int_equal(w.store.n_windows, 2);
  for (tg_list_t *it = w.store.windows.next; it != &w.store.windows;
       it = it->next) {
    tg_replay_window_t *x = TG_CONTAINER_OF(it, tg_replay_window_t, node);
    assert_null(strstr(x->key, "clock"));
  }
  tg_replay_release(&w.store, third, idle + LINGER_MS);

  uv_run(&w.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&w.loop), 0);
  tg_replay_store_free(&w.store);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(a_window_is_let_go_at_the_relay_clock,
                                      test_service_setup,
                                      test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
