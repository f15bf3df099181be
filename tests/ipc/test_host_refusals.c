/* What the IPC host (ipc/host.c) answers to requests it cannot serve: an
 * unknown service in BindService, an unknown or unimplemented method id,
 * an invoke on a service the connection never bound, a frame kind it does
 * not know, bytes that are no IPCFrame. Each is refused explicitly (or
 * dropped and counted), no handler runs, and the connection stays usable.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipc/channel.h"
#include "ipc_fixture.h"
#include "test_wait.h"
#include "tracegate/error.h"

/* Echo still answers on |cl|: the refusal did not break the connection. */
static void echo_works(ipc_client_t *cl, const tg_ipc_remote_service_t *svc) {
  ipc_result_t r = {.cl = cl};
  assert_int_equal(tg_ipc_client_invoke(&cl->c, svc, "Echo",
                                        (const uint8_t *)"hi", 2, -1,
                                        ipc_reply_cb(), &r, NULL),
                   0);
  assert_true(ipc_wait_final(cl->fx, &r));
  assert_int_equal(r.status, 0);
  assert_string_equal(r.reply, "hi");
}

/* Invokes |method_id| of service |service_id| and waits for the answer. */
static ipc_result_t invoke_id(ipc_client_t *cl, uint32_t service_id,
                              uint32_t method_id) {
  ipc_result_t r = {.cl = cl};
  assert_int_equal(tg_ipc_client_invoke_id(&cl->c, service_id, method_id,
                                           NULL, 0, -1, ipc_reply_cb(), &r,
                                           NULL),
                   0);
  assert_true(ipc_wait_final(cl->fx, &r));
  return r;
}

static void bind_of_an_unknown_service_is_refused(void **state) {
  ipc_fixture_t *fx = *state;
  ipc_client_t cl;
  ipc_client_connect(fx, &cl);
  ipc_result_t r;
  assert_int_equal(ipc_bind_wait(&cl, "NoSuchService", &r),
                   TG_EUNKNOWN_SERVICE);
  assert_null(r.svc);
  /* Case matters; an empty name is no service either. */
  assert_int_equal(ipc_bind_wait(&cl, "test", &r), TG_EUNKNOWN_SERVICE);
  assert_int_equal(ipc_bind_wait(&cl, "", &r), TG_EUNKNOWN_SERVICE);
  assert_int_equal(ipc_bind_wait(&cl, "Test", &r), 0);
  assert_non_null(r.svc);
  assert_int_equal(r.svc->n_methods, 4);
  /* 1-based, in declaration order. */
  assert_int_equal(tg_ipc_method_id(r.svc, "Echo"), 1);
  assert_int_equal(tg_ipc_method_id(r.svc, "Unimplemented"), 4);
  echo_works(&cl, r.svc);
  ipc_client_finish(&cl);
}

static void unknown_or_unimplemented_method_ids_are_refused(void **state) {
  ipc_fixture_t *fx = *state;
  ipc_client_t cl;
  ipc_client_connect(fx, &cl);
  ipc_result_t b;
  assert_int_equal(ipc_bind_wait(&cl, "Test", &b), 0);
  const tg_ipc_remote_service_t *svc = b.svc;
  uint64_t unknown_before = tg_ipc_host_stats(fx->host)->requests_unknown;
  const uint32_t bad[] = {0, 5, 99, UINT32_MAX,
                          tg_ipc_method_id(svc, "Unimplemented")};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ipc_result_t r = invoke_id(&cl, svc->id, bad[i]);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.status, TG_EREMOTE_FAILED);
    assert_false(r.has_more);
  }
  assert_int_equal(fx->handler_calls, 0);
  assert_int_equal(tg_ipc_host_stats(fx->host)->requests_unknown,
                   unknown_before + sizeof(bad) / sizeof(bad[0]));
  /* A name the host never listed is refused by the client before sending. */
  assert_int_equal(tg_ipc_client_invoke(&cl.c, svc, "NoSuchMethod", NULL, 0,
                                        -1, ipc_reply_cb(), NULL, NULL),
                   -ENOENT);
  echo_works(&cl, svc);
  ipc_client_finish(&cl);
}

static void invoke_before_bind_is_refused(void **state) {
  ipc_fixture_t *fx = *state;
  ipc_client_t cl;
  ipc_client_connect(fx, &cl);
  /* Service ids the host would give (1, 2) and ones it never would. */
  const uint32_t ids[] = {1, 2, 0, 3, 32, 33};
  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
    ipc_result_t r = invoke_id(&cl, ids[i], 1);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.status, TG_EREMOTE_FAILED);
  }
  assert_int_equal(fx->handler_calls, 0);
  /* Binding one service does not open the other. */
  ipc_result_t b;
  assert_int_equal(ipc_bind_wait(&cl, "Test", &b), 0);
  ipc_result_t other = invoke_id(&cl, b.svc->id == 1 ? 2 : 1, 1);
  assert_int_equal(other.status, TG_EREMOTE_FAILED);
  assert_int_equal(fx->handler_calls, 0);
  echo_works(&cl, b.svc);
  assert_int_equal(fx->handler_calls, 1);
  ipc_client_finish(&cl);
}

/* --- below the client library: a raw channel ---------------------------- */

typedef struct raw_peer {
  tg_ipc_chan_t ch;
  tg_ipc_frame_t *last; /* the last frame received, owned */
  unsigned frames;
  bool closed;
} raw_peer_t;

static int raw_on_frame(tg_ipc_chan_t *ch, const uint8_t *p, size_t n) {
  raw_peer_t *rp = ch->data;
  if (rp->last) tg_ipc_frame_free(rp->last);
  rp->last = tg_ipc_frame_unpack(p, n);
  rp->frames++;
  return 0;
}

static void raw_on_close(tg_ipc_chan_t *ch, int status) {
  (void)status;
  ((raw_peer_t *)ch->data)->closed = true;
}

static const tg_ipc_chan_cbs_t raw_cbs = {.on_frame = raw_on_frame,
                                          .on_close = raw_on_close};

static bool raw_got_frame(void *arg) { return ((raw_peer_t *)arg)->frames > 0; }
static bool raw_closed(void *arg) { return ((raw_peer_t *)arg)->closed; }

static void raw_send(raw_peer_t *rp, const tg_ipc_frame_t *f) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_ipc_frame_append(f, &b), 0);
  assert_int_equal(tg_ipc_chan_send(&rp->ch, tg_buf_begin(&b), tg_buf_size(&b),
                                    -1),
                   0);
  tg_buf_free(&b);
}

static void unknown_frame_kinds_get_a_request_error(void **state) {
  ipc_fixture_t *fx = *state;
  raw_peer_t rp = {0};
  int fd = tg_ipc_connect_unix(fx->sock);
  assert_true(fd >= 0);
  assert_int_equal(tg_ipc_chan_open(&fx->loop, &rp.ch, fd, &raw_cbs, &rp), 0);
  /* Garbage that frames fine but is no IPCFrame: dropped and counted. */
  uint64_t undecodable = tg_ipc_host_stats(fx->host)->frames_undecodable;
  static const uint8_t garbage[] = {3, 0, 0, 0, 0xff, 0xff, 0xff};
  assert_int_equal(tg_ipc_chan_send(&rp.ch, garbage, sizeof(garbage), -1), 0);
  /* A reply is something only hosts send: to a host it is unknown. */
  Perfetto__Protos__IPCFrame__InvokeMethodReply reply =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = 77;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  f.msg_invoke_method_reply = &reply;
  raw_send(&rp, &f);
  assert_true(tg_test_run_loop_until(&fx->loop, raw_got_frame, &rp,
                                     IPC_WAIT_MS));
  assert_int_equal(rp.frames, 1); /* nothing for the garbage */
  assert_non_null(rp.last);
  assert_int_equal(rp.last->request_id, 77);
  assert_int_equal(rp.last->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR);
  assert_non_null(strstr(rp.last->msg_request_error->error, "unknown"));
  assert_int_equal(tg_ipc_host_stats(fx->host)->frames_undecodable,
                   undecodable + 1);
  /* Still served: a bind answers. */
  Perfetto__Protos__IPCFrame__BindService bind =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  bind.service_name = "Other";
  tg_ipc_frame_t bf = PERFETTO__PROTOS__IPCFRAME__INIT;
  bf.has_request_id = 1;
  bf.request_id = 78;
  bf.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  bf.msg_bind_service = &bind;
  rp.frames = 0;
  raw_send(&rp, &bf);
  assert_true(tg_test_run_loop_until(&fx->loop, raw_got_frame, &rp,
                                     IPC_WAIT_MS));
  assert_int_equal(rp.last->request_id, 78);
  assert_int_equal(rp.last->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY);
  assert_true(rp.last->msg_bind_service_reply->success);
  tg_ipc_frame_free(rp.last);
  tg_ipc_chan_close(&rp.ch, 0);
  assert_true(tg_test_run_loop_until(&fx->loop, raw_closed, &rp, IPC_WAIT_MS));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(bind_of_an_unknown_service_is_refused,
                                      ipc_fixture_setup, ipc_fixture_teardown),
      cmocka_unit_test_setup_teardown(
          unknown_or_unimplemented_method_ids_are_refused, ipc_fixture_setup,
          ipc_fixture_teardown),
      cmocka_unit_test_setup_teardown(invoke_before_bind_is_refused,
                                      ipc_fixture_setup, ipc_fixture_teardown),
      cmocka_unit_test_setup_teardown(unknown_frame_kinds_get_a_request_error,
                                      ipc_fixture_setup, ipc_fixture_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
