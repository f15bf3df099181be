/* The IPC client's promise when it closes (ipc/client.h): every pending
 * request's callback runs exactly once more, with has_more false and an
 * error, from the loop (never inside tg_ipc_client_close), before on_close;
 * a cancelled request's never does; nothing runs after on_close, not even
 * for a reply already on its way.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ipc_fixture.h"
#include "test_wait.h"
#include "tracegate/error.h"

/* Connects and binds "Test". */
static const tg_ipc_remote_service_t *start(ipc_fixture_t *fx,
                                            ipc_client_t *cl) {
  ipc_client_connect(fx, cl);
  ipc_result_t b;
  assert_int_equal(ipc_bind_wait(cl, "Test", &b), 0);
  return b.svc;
}

static void invoke(ipc_client_t *cl, const tg_ipc_remote_service_t *svc,
                   const char *method, ipc_result_t *r, uint64_t *id) {
  memset(r, 0, sizeof(*r));
  r->cl = cl;
  assert_int_equal(tg_ipc_client_invoke(&cl->c, svc, method, NULL, 0, -1,
                                        ipc_reply_cb(), r, id),
                   0);
}

static bool host_saw_disconnect(void *arg) {
  return ((ipc_fixture_t *)arg)->disconnects > 0;
}

/* After on_close: let the host notice the hang-up (an event both sides
 * have passed once it fires), so a late callback would have had its
 * chance. */
static void settle(ipc_fixture_t *fx) {
  assert_true(tg_test_run_loop_until(&fx->loop, host_saw_disconnect, fx,
                                     IPC_WAIT_MS));
}

static void pending_calls_fail_once_when_the_client_closes(void **state) {
  ipc_fixture_t *fx = *state;
  ipc_client_t cl;
  const tg_ipc_remote_service_t *svc = start(fx, &cl);
  ipc_result_t r[3];
  for (size_t i = 0; i < 3; i++) invoke(&cl, svc, "Hold", &r[i], NULL);
  assert_true(ipc_wait_held(fx, 3));
  /* A bind still in flight is pending too. */
  ipc_result_t b = {.cl = &cl};
  assert_int_equal(tg_ipc_client_bind(&cl.c, "Other", ipc_bind_cb(), &b), 0);
  unsigned events_before = cl.events;
  tg_ipc_client_close(&cl.c, 0);
  /* Nothing runs inside the close. */
  assert_int_equal(cl.events, events_before);
  for (size_t i = 0; i < 3; i++) assert_int_equal(r[i].calls, 0);
  assert_true(ipc_wait_closed(&cl));
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(r[i].calls, 1);
    assert_int_equal(r[i].finals, 1);
    assert_int_equal(r[i].status, TG_EPEER_CLOSED); /* a close with 0 */
    assert_false(r[i].has_more);
    assert_false(r[i].had_reply);
    assert_true(r[i].last_event < cl.close_event); /* before on_close */
  }
  assert_int_equal(b.calls, 1);
  assert_int_equal(b.status, TG_EPEER_CLOSED);
  assert_null(b.svc);
  assert_true(b.last_event < cl.close_event);
  assert_int_equal(cl.close_status, 0);
  /* Closed is closed: no new requests, no second close, no late calls. */
  ipc_result_t late = {.cl = &cl};
  assert_int_equal(tg_ipc_client_invoke(&cl.c, svc, "Echo", NULL, 0, -1,
                                        ipc_reply_cb(), &late, NULL),
                   -EPIPE);
  assert_int_equal(tg_ipc_client_bind(&cl.c, "Other", ipc_bind_cb(), &late),
                   -EPIPE);
  tg_ipc_client_close(&cl.c, -EIO);
  unsigned events_after = cl.events;
  settle(fx);
  assert_int_equal(cl.events, events_after);
  assert_int_equal(late.calls, 0);
  for (size_t i = 0; i < 3; i++) assert_int_equal(r[i].calls, 1);
  assert_int_equal(fx->n_held, 0); /* the host forgot them too */
}

static void pending_calls_fail_with_the_status_given_to_close(void **state) {
  ipc_fixture_t *fx = *state;
  ipc_client_t cl;
  const tg_ipc_remote_service_t *svc = start(fx, &cl);
  ipc_result_t r;
  invoke(&cl, svc, "Hold", &r, NULL);
  assert_true(ipc_wait_held(fx, 1));
  tg_ipc_client_close(&cl.c, -ECANCELED);
  assert_true(ipc_wait_closed(&cl));
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, -ECANCELED);
  assert_int_equal(cl.close_status, -ECANCELED);
  settle(fx);
  assert_int_equal(r.calls, 1);
}

typedef struct calls_wait {
  ipc_result_t *r;
  unsigned n;
} calls_wait_t;

static bool enough_calls(void *arg) {
  calls_wait_t *w = arg;
  return w->r->calls >= w->n;
}

static void wait_calls(ipc_fixture_t *fx, ipc_result_t *r, unsigned n) {
  calls_wait_t w = {r, n};
  assert_true(tg_test_run_loop_until(&fx->loop, enough_calls, &w, IPC_WAIT_MS));
}

static void a_cancelled_call_is_never_called_back(void **state) {
  ipc_fixture_t *fx = *state;
  ipc_client_t cl;
  const tg_ipc_remote_service_t *svc = start(fx, &cl);
  ipc_result_t kept, cancelled;
  uint64_t id = 0;
  invoke(&cl, svc, "Hold", &kept, NULL);
  invoke(&cl, svc, "Hold", &cancelled, &id);
  assert_true(id > 0);
  assert_true(ipc_wait_held(fx, 2));
  tg_ipc_client_cancel(&cl.c, id);
  /* Its reply still arrives, ahead of one to the other call, and is
   * ignored. */
  assert_int_equal(tg_ipc_reply_bytes(&fx->held[1], true, false,
                                      (const uint8_t *)"x", 1, -1),
                   0);
  assert_int_equal(tg_ipc_reply_bytes(&fx->held[0], true, true,
                                      (const uint8_t *)"y", 1, -1),
                   0);
  wait_calls(fx, &kept, 1);
  assert_string_equal(kept.reply, "y");
  assert_int_equal(cancelled.calls, 0);
  /* A cancelled call that is still pending at close is not failed either. */
  ipc_result_t second;
  invoke(&cl, svc, "Hold", &second, &id);
  assert_true(ipc_wait_held(fx, 2));
  tg_ipc_client_cancel(&cl.c, id);
  ipc_client_finish(&cl);
  settle(fx);
  assert_int_equal(cancelled.calls, 0);
  assert_int_equal(second.calls, 0);
  assert_int_equal(kept.calls, 2);
  assert_int_equal(kept.finals, 1);
  assert_int_equal(kept.status, TG_EPEER_CLOSED);
}

static void a_stream_ends_with_one_error_when_the_client_closes(void **state) {
  ipc_fixture_t *fx = *state;
  ipc_client_t cl;
  const tg_ipc_remote_service_t *svc = start(fx, &cl);
  ipc_result_t r;
  invoke(&cl, svc, "Stream", &r, NULL);
  wait_calls(fx, &r, 1);
  assert_int_equal(r.status, 0);
  assert_true(r.has_more);
  assert_string_equal(r.reply, "first");
  ipc_client_finish(&cl);
  assert_int_equal(r.calls, 2);
  assert_int_equal(r.finals, 1);
  assert_false(r.has_more);
  assert_int_equal(r.status, TG_EPEER_CLOSED);
  settle(fx);
  assert_int_equal(r.calls, 2);
}

static void a_reply_in_flight_at_close_is_not_delivered(void **state) {
  ipc_fixture_t *fx = *state;
  ipc_client_t cl;
  const tg_ipc_remote_service_t *svc = start(fx, &cl);
  ipc_result_t r;
  invoke(&cl, svc, "Hold", &r, NULL);
  assert_true(ipc_wait_held(fx, 1));
  /* The host answers (the bytes are in the socket), and the client closes
   * before its loop reads them: the call fails, once, without the reply. */
  assert_int_equal(tg_ipc_reply_bytes(&fx->held[0], true, false,
                                      (const uint8_t *)"late", 4, -1),
                   0);
  tg_ipc_client_close(&cl.c, 0);
  assert_true(ipc_wait_closed(&cl));
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.status, TG_EPEER_CLOSED);
  assert_false(r.had_reply);
  settle(fx);
  assert_int_equal(r.calls, 1);
}

static void the_host_closing_fails_pending_calls_once(void **state) {
  ipc_fixture_t *fx = *state;
  ipc_client_t cl;
  const tg_ipc_remote_service_t *svc = start(fx, &cl);
  ipc_result_t r;
  invoke(&cl, svc, "Hold", &r, NULL);
  assert_true(ipc_wait_held(fx, 1));
  tg_ipc_host_conn_close(fx->held[0].conn, 0);
  assert_true(ipc_wait_closed(&cl));
  assert_int_equal(cl.close_status, TG_EPEER_CLOSED);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.finals, 1);
  assert_int_equal(r.status, TG_EPEER_CLOSED);
  assert_true(r.last_event < cl.close_event);
  assert_int_equal(fx->disconnects, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          pending_calls_fail_once_when_the_client_closes, ipc_fixture_setup,
          ipc_fixture_teardown),
      cmocka_unit_test_setup_teardown(
          pending_calls_fail_with_the_status_given_to_close, ipc_fixture_setup,
          ipc_fixture_teardown),
      cmocka_unit_test_setup_teardown(a_cancelled_call_is_never_called_back,
                                      ipc_fixture_setup, ipc_fixture_teardown),
      cmocka_unit_test_setup_teardown(
          a_stream_ends_with_one_error_when_the_client_closes,
          ipc_fixture_setup, ipc_fixture_teardown),
      cmocka_unit_test_setup_teardown(
          a_reply_in_flight_at_close_is_not_delivered, ipc_fixture_setup,
          ipc_fixture_teardown),
      cmocka_unit_test_setup_teardown(
          the_host_closing_fails_pending_calls_once, ipc_fixture_setup,
          ipc_fixture_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
