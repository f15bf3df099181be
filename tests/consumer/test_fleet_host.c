/* A fleet host's engine (consumer/fleet/host.h) on a real loop with a
 * dialer of the test's own: what one connection learnt does not survive
 * into the next attempt (tg__fleet_conn_reset), and the report outlives
 * the engine. No network: the dialer refuses every connection. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "common/log.h"
#include "consumer/fleet/host_internal.h"

#define WAIT_MS 5000

typedef struct fixture {
  uv_loop_t loop;
  tg_fleet_t fleet;
  tg_fleet_host_t h;
  unsigned opens;           /* dialer open calls */
  tg__fleet_conn_t at_open; /* the attempt's state when it dialled */
  char why_at_open[sizeof(((tg_fleet_host_report_t *)0)->conn_why)];
  bool finished, closed;
  unsigned errors; /* error lines logged: a refused link transition */
} fixture_t;

static void sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)line;
  if (level == TG_LOG_ERROR) ((fixture_t *)ctx)->errors++;
}

static int dial_open(void *ctx, tg_fleet_host_t *h,
                     const tg_consumer_cbs_t *cbs, tg_consumer_t **c,
                     void **conn, char *err, size_t n) {
  (void)cbs;
  (void)c;
  (void)conn;
  fixture_t *fx = ctx;
  fx->opens++;
  fx->at_open = h->e->cx;
  snprintf(fx->why_at_open, sizeof(fx->why_at_open), "%s", h->report.conn_why);
  snprintf(err, n, "refused by the test");
  return -ECONNREFUSED;
}

static void dial_release(void *conn, tg_fleet_gone_cb cb, void *cb_ctx) {
  (void)conn;
  (void)cb;
  (void)cb_ctx;
  fail_msg("nothing was opened, nothing to release");
}

static bool dial_resumed(const void *conn) {
  (void)conn;
  return false;
}

static tg_zstd_transport_t *dial_zstd(void *conn) {
  (void)conn;
  return NULL;
}

static void on_notice(tg_fleet_host_t *h, tg_fleet_notice_t kind,
                      const char *text) {
  (void)h;
  (void)kind;
  (void)text;
}

static void on_finished(tg_fleet_host_t *h) {
  ((fixture_t *)h->data)->finished = true;
}

static const tg_fleet_host_cbs_t host_cbs = {.on_notice = on_notice,
                                             .on_finished = on_finished};

static void on_closed(tg_fleet_host_t *h) {
  ((fixture_t *)h->data)->closed = true;
}

static int setup(void **state) {
  fixture_t *fx = test_calloc(1, sizeof(*fx));
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  fx->fleet = (tg_fleet_t){
      .loop = &fx->loop,
      .o = {.reconnect_ms = 60000, .dead_link_ms = 10000},
      .dialer = {.open = dial_open,
                 .release = dial_release,
                 .resumed = dial_resumed,
                 .zstd = dial_zstd,
                 .ctx = fx},
      .cbs = &host_cbs,
      .n = 1,
  };
  assert_int_equal(tg_fleet_init(&fx->fleet), 0);
  assert_int_equal(tg_fleet_host_init(&fx->fleet, &fx->h, 0, "h0", NULL, fx),
                   0);
  tg_log_set_sink(sink, fx);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fx = *state;
  tg_log_set_sink(NULL, NULL);
  /* Every link transition was one of link.h's. */
  assert_int_equal(fx->errors, 0);
  tg_fleet_host_close_cb(&fx->h, on_closed);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_true(fx->closed);
  assert_null(fx->h.e);
  tg_fleet_free(&fx->fleet);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  test_free(fx);
  return 0;
}

static void run_until(fixture_t *fx, const unsigned *n, unsigned want) {
  uint64_t until = uv_now(&fx->loop) + WAIT_MS;
  while (*n < want && uv_now(&fx->loop) < until) uv_run(&fx->loop, UV_RUN_ONCE);
  assert_true(*n >= want);
}

/* The link was up on a relay that took the key and said the service had
 * ended its session; the connection was lost with a held clock burst and
 * half its preparation: the reconnection's attempt dials from nothing. */
static void a_reconnect_starts_from_a_clean_connection(void **state) {
  fixture_t *fx = *state;
  tg_fleet_host_t *h = &fx->h;
  tg_link_t *l = &h->e->link;
  uint64_t now = uv_now(&fx->loop);
  tg_link_attempt_begin(l, now);
  tg_link_bound(l);
  tg_link_up(l, now, true);
  h->e->cx = (tg__fleet_conn_t){
      .relay = true,
      .bound = true,
      .key_set = true,
      .service_ended = true,
      .prep_wait = 1u << 3,
      .syncs = 3,
      .clock_hold = TG_FLEET_CLOCK_HELD,
      .clock_due_ms = now + 20,
  };
  snprintf(h->report.conn_why, sizeof(h->report.conn_why), "the relay closed");
  tg_link_drop(l, TG_LINK_DROP_PEER, h->report.conn_why);
  tg_link_lost(l, now, h->report.conn_why);
  assert_int_equal(h->report.link_state, TG_LINK_BACKOFF);

  run_until(fx, &fx->opens, 1); /* the backoff's attempt */
  assert_false(fx->at_open.relay);
  assert_false(fx->at_open.bound);
  assert_false(fx->at_open.key_set);
  assert_false(fx->at_open.service_ended);
  assert_int_equal(fx->at_open.syncs, 0);
  assert_int_equal(fx->at_open.clock_hold, TG_FLEET_CLOCK_FREE);
  assert_int_equal(fx->at_open.clock_due_ms, 0);
  assert_null(fx->at_open.c);
  assert_null(fx->at_open.conn);
  assert_int_not_equal(fx->at_open.prep_wait, 0); /* every part awaited */
  assert_string_equal(fx->why_at_open, "");
  /* The refused attempt waits for the next one: it is no failure yet. */
  assert_int_equal(h->report.link_state, TG_LINK_BACKOFF);
  assert_int_equal(h->report.attempts, 1);
  assert_string_equal(h->report.retry_why, "refused by the test");

  /* The next attempt is clean too, though the last one was refused. */
  h->e->cx.key_set = true;
  run_until(fx, &fx->opens, 2);
  assert_false(fx->at_open.key_set);
  assert_int_equal(h->report.attempts, 2);

  tg_fleet_host_abort(h);
  assert_true(fx->finished);
  assert_int_equal(h->report.link_state, TG_LINK_FAILED);
  assert_int_equal(h->report.failure, TG_FLEET_FAIL_STOPPED);
}

/* A first connection refused fails the host with the dialer's words; the
 * report says so, also once the engine is gone. */
static void
a_refused_first_connection_fails_and_the_report_stays(void **state) {
  fixture_t *fx = *state;
  tg_fleet_host_t *h = &fx->h;
  tg_fleet_start(&fx->fleet);
  assert_int_equal(fx->opens, 1);
  assert_true(fx->finished);
  assert_int_equal(h->report.link_state, TG_LINK_FAILED);
  assert_int_equal(h->report.failure, TG_FLEET_FAIL_CONNECT);
  assert_string_equal(h->report.why, "refused by the test");
  assert_null(tg_fleet_host_recording(h)); /* freed with the end */
  tg_fleet_host_close_cb(h, on_closed);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  assert_null(h->e);
  assert_int_equal(h->report.link_state, TG_LINK_FAILED);
  assert_string_equal(tg_fleet_host_state(h), "FAILED");
  assert_string_equal(h->report.why, "refused by the test");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          a_reconnect_starts_from_a_clean_connection, setup, teardown),
      cmocka_unit_test_setup_teardown(
          a_refused_first_connection_fails_and_the_report_stays, setup,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
