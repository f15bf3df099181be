/* The relay's part in disconnect leases, without I/O: after SetSessionKey
 * the filter binds tracegated's "TracegateConsumer" upstream and asks for
 * a lease under "<identity>/<key>"; against a service without it
 * (Perfetto's traced) it says so and asks nothing more; the replies to its
 * own calls never reach the client, and clients cannot use their ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "abi/ipc_frame.h"
#include "pb/tracegate/consumer_lease.pb-c.h"
#include "pb/tracegate/relay.pb-c.h"
#include "relay/frame_filter.h"
#include "relay/own_calls.h"
#include "relay/relay_service.h"

#define LEASE_SERVICE_ID 3u
#define LEASE_METHOD_ID 1u

static tg_ipc_frame_t *unpack(const tg_buf_t *b) {
  /* One whole frame with its 4-byte length prefix. */
  assert_true(tg_buf_size(b) > 4);
  return tg_ipc_frame_unpack(tg_buf_begin(b) + 4, tg_buf_size(b) - 4);
}

/* The client sets its key through TracegateRelay. */
static void set_key(tg_relay_filter_t *f, const char *key,
                    tg_relay_verdict_t *v) {
  Perfetto__Protos__SetSessionKeyRequest r =
      PERFETTO__PROTOS__SET_SESSION_KEY_REQUEST__INIT;
  r.key = (char *)key;
  uint8_t args[160];
  size_t n = perfetto__protos__set_session_key_request__pack(&r, args);
  Perfetto__Protos__IPCFrame__InvokeMethod im =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  im.has_service_id = im.has_method_id = im.has_args_proto = 1;
  im.service_id = TG_RELAY_SERVICE_ID;
  im.method_id = TG_RELAY_M_SET_SESSION_KEY;
  im.args_proto.data = args;
  im.args_proto.len = n;
  tg_ipc_frame_t fr = PERFETTO__PROTOS__IPCFRAME__INIT;
  fr.has_request_id = 1;
  fr.request_id = 5;
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
  fr.msg_invoke_method = &im;
  uint8_t payload[256];
  size_t len = perfetto__protos__ipcframe__pack(&fr, payload);
  tg_buf_t out;
  tg_buf_init(&out, 0);
  assert_int_equal(tg_relay_filter_client(f, TG_ROLE_RECORD, payload, len,
                                          &out, v), 0);
  assert_int_equal(v->action, TG_RELAY_REPLY);
  tg_buf_free(&out);
}

static void upstream(tg_relay_filter_t *f, const tg_ipc_frame_t *fr,
                     tg_relay_verdict_t *v) {
  uint8_t payload[512];
  size_t len = perfetto__protos__ipcframe__pack(fr, payload);
  tg_buf_t out;
  tg_buf_init(&out, 0);
  assert_int_equal(tg_relay_filter_upstream(f, payload, len, &out, v), 0);
  assert_int_equal(tg_buf_size(&out), 0);
  tg_buf_free(&out);
}

static void bind_reply(tg_relay_filter_t *f, bool success,
                       tg_relay_verdict_t *v) {
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo mi =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__METHOD_INFO__INIT;
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *pmi = &mi;
  mi.has_id = 1;
  mi.id = LEASE_METHOD_ID;
  mi.name = "SetDisconnectLease";
  Perfetto__Protos__IPCFrame__BindServiceReply r =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
  r.has_success = 1;
  r.success = success;
  if (success) {
    r.has_service_id = 1;
    r.service_id = LEASE_SERVICE_ID;
    r.n_methods = 1;
    r.methods = &pmi;
  }
  tg_ipc_frame_t fr = PERFETTO__PROTOS__IPCFRAME__INIT;
  fr.has_request_id = 1;
  fr.request_id = TG_RELAY_LEASE_BIND_REQUEST_ID;
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
  fr.msg_bind_service_reply = &r;
  upstream(f, &fr, v);
}

static void lease_is_asked_for_under_the_namespaced_key(void **state) {
  (void)state;
  tg_relay_filter_t f;
  tg_relay_filter_init(&f, "alice", NULL);
  tg_relay_verdict_t v;
  tg_buf_t up;
  tg_buf_init(&up, 0);
  /* Nothing to ask before a key. */
  assert_int_equal(tg_relay_filter_lease_frames(&f, 0, &up), 0);
  set_key(&f, "k1", &v);
  assert_int_equal(v.effect.kind, TG_RELAY_EFFECT_SESSION_KEY_SET);
  /* First the bind, by name. */
  assert_int_equal(tg_relay_filter_lease_frames(&f, 0, &up), 1);
  tg_ipc_frame_t *fr = unpack(&up);
  assert_non_null(fr);
  assert_int_equal(fr->request_id, TG_RELAY_LEASE_BIND_REQUEST_ID);
  assert_int_equal(fr->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE);
  assert_string_equal(fr->msg_bind_service->service_name, "TracegateConsumer");
  tg_ipc_frame_free(fr);
  /* While it is in flight, nothing more. */
  tg_buf_reset(&up);
  assert_int_equal(tg_relay_filter_lease_frames(&f, 0, &up), 0);
  /* The reply is the relay's, not the client's. */
  bind_reply(&f, true, &v);
  assert_int_equal(v.effect.kind, TG_RELAY_EFFECT_OWN_LEASE_REPLY);
  assert_true(v.allowed);
  assert_int_equal(v.action, TG_RELAY_DROP);
  /* Then the lease, under "alice/k1", with the relay's lease. */
  assert_int_equal(tg_relay_filter_lease_frames(&f, 1500, &up), 1);
  fr = unpack(&up);
  assert_non_null(fr);
  assert_int_equal(fr->request_id, TG_RELAY_LEASE_REQUEST_ID);
  assert_int_equal(fr->msg_invoke_method->service_id, LEASE_SERVICE_ID);
  assert_int_equal(fr->msg_invoke_method->method_id, LEASE_METHOD_ID);
  Perfetto__Protos__SetDisconnectLeaseRequest *req =
      perfetto__protos__set_disconnect_lease_request__unpack(
          NULL, fr->msg_invoke_method->args_proto.len,
          fr->msg_invoke_method->args_proto.data);
  assert_non_null(req);
  assert_string_equal(req->key, "alice/k1");
  assert_int_equal(req->lease_ms, 1500);
  perfetto__protos__set_disconnect_lease_request__free_unpacked(req, NULL);
  tg_ipc_frame_free(fr);
  /* The service grants it; the key is covered, nothing more to ask. */
  Perfetto__Protos__SetDisconnectLeaseResponse resp =
      PERFETTO__PROTOS__SET_DISCONNECT_LEASE_RESPONSE__INIT;
  resp.has_lease_ms = 1;
  resp.lease_ms = 1500;
  uint8_t body[16];
  Perfetto__Protos__IPCFrame__InvokeMethodReply r =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  r.has_success = r.success = 1;
  r.has_reply_proto = 1;
  r.reply_proto.data = body;
  r.reply_proto.len =
      perfetto__protos__set_disconnect_lease_response__pack(&resp, body);
  tg_ipc_frame_t rf = PERFETTO__PROTOS__IPCFRAME__INIT;
  rf.has_request_id = 1;
  rf.request_id = TG_RELAY_LEASE_REQUEST_ID;
  rf.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  rf.msg_invoke_method_reply = &r;
  upstream(&f, &rf, &v);
  assert_int_equal(v.effect.kind, TG_RELAY_EFFECT_OWN_LEASE_REPLY);
  assert_true(v.allowed);
  assert_non_null(strstr(v.reason, "for 1500 ms"));
  tg_buf_reset(&up);
  assert_int_equal(tg_relay_filter_lease_frames(&f, 1500, &up), 0);
  /* A new key gets a new lease (the service is known by now). */
  set_key(&f, "k2", &v);
  assert_int_equal(tg_relay_filter_lease_frames(&f, 1500, &up), 1);
  fr = unpack(&up);
  assert_int_equal(fr->request_id, TG_RELAY_LEASE_REQUEST_ID);
  tg_ipc_frame_free(fr);
  tg_buf_free(&up);
}

static void without_the_service_the_relay_says_so_once(void **state) {
  (void)state;
  tg_relay_filter_t f;
  tg_relay_filter_init(&f, "alice", NULL);
  tg_relay_verdict_t v;
  tg_buf_t up;
  tg_buf_init(&up, 0);
  set_key(&f, "k1", &v);
  assert_int_equal(tg_relay_filter_lease_frames(&f, 0, &up), 1);
  bind_reply(&f, false, &v); /* traced: no such service */
  assert_int_equal(v.effect.kind, TG_RELAY_EFFECT_OWN_LEASE_REPLY);
  assert_false(v.allowed);
  assert_int_equal(v.code, TG_N_RELAY_LEASE);
  tg_buf_reset(&up);
  assert_int_equal(tg_relay_filter_lease_frames(&f, 0, &up), 0);
  set_key(&f, "k2", &v);
  assert_int_equal(tg_relay_filter_lease_frames(&f, 0, &up), 0);
  tg_buf_free(&up);
}

/* A RequestError for the relay's own BindService: dropped (the client never
 * asked), and the lease is unsupported, said once, never left pending. */
static void an_error_for_the_own_bind_stays_with_the_relay(void **state) {
  (void)state;
  tg_relay_filter_t f;
  tg_relay_filter_init(&f, "alice", NULL);
  tg_relay_verdict_t v;
  tg_buf_t up;
  tg_buf_init(&up, 0);
  set_key(&f, "k1", &v);
  assert_int_equal(tg_relay_filter_lease_frames(&f, 0, &up), 1);
  tg_ipc_frame_t fr = PERFETTO__PROTOS__IPCFRAME__INIT;
  Perfetto__Protos__IPCFrame__RequestError err =
      PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;
  err.error = "unknown service";
  fr.has_request_id = 1;
  fr.request_id = TG_RELAY_LEASE_BIND_REQUEST_ID;
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR;
  fr.msg_request_error = &err;
  upstream(&f, &fr, &v);
  assert_int_equal(v.action, TG_RELAY_DROP);
  assert_int_equal(v.effect.kind, TG_RELAY_EFFECT_OWN_LEASE_REPLY);
  assert_false(v.allowed);
  assert_int_equal(f.lease, TG_LEASE_UNSUPPORTED);
  assert_int_equal(f.n_tracked, 0);
  tg_buf_reset(&up);
  assert_int_equal(tg_relay_filter_lease_frames(&f, 0, &up), 0);
  tg_buf_free(&up);
}

static void clients_cannot_use_the_relays_own_ids(void **state) {
  (void)state;
  tg_relay_filter_t f;
  tg_relay_filter_init(&f, "alice", NULL);
  uint64_t ids[] = {TG_RELAY_LEASE_BIND_REQUEST_ID, TG_RELAY_LEASE_REQUEST_ID};
  for (size_t i = 0; i < 2; i++) {
    Perfetto__Protos__IPCFrame__BindService b =
        PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
    b.service_name = "ConsumerPort";
    tg_ipc_frame_t fr = PERFETTO__PROTOS__IPCFRAME__INIT;
    fr.has_request_id = 1;
    fr.request_id = ids[i];
    fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
    fr.msg_bind_service = &b;
    uint8_t payload[64];
    size_t len = perfetto__protos__ipcframe__pack(&fr, payload);
    tg_buf_t out;
    tg_buf_init(&out, 0);
    tg_relay_verdict_t v;
    assert_int_equal(tg_relay_filter_client(&f, TG_ROLE_RECORD, payload, len,
                                            &out, &v), 0);
    assert_int_equal(v.action, TG_RELAY_REPLY);
    assert_false(v.allowed);
    assert_non_null(strstr(v.reason, "reserved"));
    assert_int_equal(f.n_tracked, 0);
    tg_buf_free(&out);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lease_is_asked_for_under_the_namespaced_key),
      cmocka_unit_test(without_the_service_the_relay_says_so_once),
      cmocka_unit_test(an_error_for_the_own_bind_stays_with_the_relay),
      cmocka_unit_test(clients_cannot_use_the_relays_own_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
