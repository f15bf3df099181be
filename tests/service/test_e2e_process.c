/* tracegated end to end: the process and the protocol edges. Unknown
 * services and methods, methods it does not support, requests that do
 * not decode, and who gets the socket paths when another service or a
 * stale file is there. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_notice.h"
#include "test_service.h"

/* A fixture with the paths made but no service running on them. */
static int setup_paths(void **state) {
  test_service_t *ts = calloc(1, sizeof(*ts));
  if (!ts || test_service_prepare(ts) < 0) {
    free(ts);
    return -1;
  }
  *state = ts;
  return 0;
}

static int teardown_paths(void **state) {
  test_service_t *ts = *state;
  int status = ts->pid > 0 ? test_service_terminate(ts) : 0;
  test_service_stop(ts);
  free(ts);
  return status == 0 ? 0 : -1;
}

static void expect_serving(const test_service_t *ts) {
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(&c, 5000);
  assert_non_null(q);
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);
  raw_consumer_close(&c);
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "p", "ds", 0, 0, false), 0);
  raw_producer_close(&p);
}

/* Calls |method| with arguments that do not decode (an unterminated
 * varint) as request |rid|: raw_wait_reply's answer. */
static int call_junk(raw_conn_t *c, const char *method, uint64_t rid) {
  Perfetto__Protos__IPCFrame__InvokeMethod im = PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  uint8_t junk[] = {0xFF, 0xFF, 0xFF};
  im.has_service_id = im.has_method_id = im.has_args_proto = 1;
  im.service_id = c->service_id;
  im.method_id = raw_method_id(c, method);
  im.args_proto.data = junk;
  im.args_proto.len = sizeof(junk);
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = rid;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
  f.msg_invoke_method = &im;
  assert_int_equal(raw_send_frame(c, &f), 0);
  return raw_wait_reply(c, rid, NULL, NULL, 5000);
}

static int call_id(raw_conn_t *c, uint32_t method_id) {
  int64_t rid = raw_invoke_id(c, method_id, NULL, -1, false);
  assert_true(rid > 0);
  return raw_wait_reply(c, (uint64_t)rid, NULL, NULL, 5000);
}

static void unknown_services_and_methods_fail_explicitly(void **state) {
  test_service_t *ts = *state;
  raw_conn_t c;
  assert_int_equal(raw_connect(&c, ts->consumer_sock), 0);
  assert_int_equal(raw_bind(&c, "NoSuchPort"), -1);
  assert_int_equal(raw_bind(&c, "ProducerPort"), -1); /* not on this socket */
  assert_int_equal(raw_bind(&c, "ConsumerPort"), 0);

  assert_int_equal(call_id(&c, 0), 0);
  assert_int_equal(call_id(&c, 999), 0);
  assert_int_equal(call_id(&c, 0xFFFFFFFFu), 0);
  uint32_t sid = c.service_id;
  c.service_id = sid + 7; /* a service never bound */
  assert_int_equal(call_id(&c, raw_method_id(&c, "QueryServiceState")), 0);
  c.service_id = sid;

  /* Declared but not supported: an explicit failure, not silence. */
  Perfetto__Protos__SaveTraceForBugreportRequest sb =
      PERFETTO__PROTOS__SAVE_TRACE_FOR_BUGREPORT_REQUEST__INIT;
  assert_int_equal(raw_call(&c, "SaveTraceForBugreport", &sb.base, -1, NULL, NULL, 5000), 0);
  /* A CloneSession naming no session: refused in its response, with why. */
  Perfetto__Protos__CloneSessionRequest cs = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  ProtobufCMessage *csr = NULL;
  assert_int_equal(raw_call(&c, "CloneSession", &cs.base, -1,
                            &perfetto__protos__clone_session_response__descriptor,
                            &csr, 5000), 1);
  assert_non_null(csr);
  assert_false(((Perfetto__Protos__CloneSessionResponse *)csr)->success);
  assert_non_null(((Perfetto__Protos__CloneSessionResponse *)csr)->error);
  protobuf_c_message_free_unpacked(csr, NULL);

  /* Arguments that do not decode. */
  assert_int_equal(call_junk(&c, "EnableTracing", 1000), 0);

  /* A frame with no known kind gets a RequestError. */
  tg_ipc_frame_t odd = PERFETTO__PROTOS__IPCFRAME__INIT;
  ProtobufCBinaryData dft = {3, (uint8_t *)"abc"};
  odd.has_request_id = 1;
  odd.request_id = 1001;
  odd.n_data_for_testing = 1;
  odd.data_for_testing = &dft;
  assert_int_equal(raw_send_frame(&c, &odd), 0);
  raw_frame_t r;
  assert_int_equal(raw_wait(&c, 1001, 5000, &r), 1);
  assert_int_equal(r.frame->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR);
  tg_ipc_frame_free(r.frame);

  /* None of it cost the connection. */
  Perfetto__Protos__QueryCapabilitiesRequest qc =
      PERFETTO__PROTOS__QUERY_CAPABILITIES_REQUEST__INIT;
  assert_int_equal(raw_call(&c, "QueryCapabilities", &qc.base, -1, NULL, NULL, 5000), 1);
  raw_close(&c);

  /* The producer port too. */
  assert_int_equal(raw_connect(&c, ts->producer_sock), 0);
  assert_int_equal(raw_bind(&c, "ConsumerPort"), -1);
  assert_int_equal(raw_bind(&c, "ProducerPort"), 0);
  assert_int_equal(call_id(&c, 0), 0);
  assert_int_equal(call_id(&c, 13), 0);
  raw_close(&c);
}

/* Every ConsumerPort method refuses a request that does not decode, and
 * does nothing else: a session waiting for StartTracing is neither
 * started, nor stopped, nor freed, nor detached by one. */
static void every_consumer_method_refuses_requests_that_do_not_decode(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_t sc;
  simple_cfg_init(&sc, 64, 0, "ds");
  sc.cfg.has_deferred_start = 1;
  sc.cfg.deferred_start = 1;
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  static const char *const methods[] = {
      "EnableTracing", "DisableTracing", "ReadBuffers", "FreeBuffers",
      "Flush", "StartTracing", "ChangeTraceConfig", "Detach", "Attach",
      "GetTraceStats", "ObserveEvents", "QueryServiceState",
      "QueryCapabilities", "CloneSession"};
  for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
    if (call_junk(&c.conn, methods[i], 2000 + i) != 0)
      fail_msg("%s: a request that does not decode was not refused", methods[i]);
  }
  /* The session is still this connection's, still CONFIGURED. */
  Perfetto__Protos__StartTracingRequest st = PERFETTO__PROTOS__START_TRACING_REQUEST__INIT;
  assert_int_equal(raw_call(&c.conn, "StartTracing", &st.base, -1, NULL, NULL, 5000), 1);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  raw_consumer_close(&c);
}

static void second_service_on_live_sockets_refuses_to_start(void **state) {
  test_service_t *ts = *state;
  char err[4096];
  int status = test_service_run_again(ts, err, sizeof(err));
  assert_true(WIFEXITED(status));
  assert_int_not_equal(WEXITSTATUS(status), 0);
  assert_notice_with(err, TG_N_SERVICE_SOCKET_IN_USE, ts->producer_sock);
  /* The first one keeps its sockets. */
  expect_serving(ts);
}

/* Binds a UNIX socket at |path| and closes it: the file stays, nobody
 * listens. */
static void make_stale_socket(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(fd, 1), 0);
  close(fd);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
}

static void stale_socket_files_are_replaced(void **state) {
  test_service_t *ts = *state;
  make_stale_socket(ts->producer_sock);
  make_stale_socket(ts->consumer_sock);
  assert_int_equal(test_service_launch(ts), 0);
  expect_serving(ts);
}

static void a_file_that_is_not_a_socket_is_left_alone(void **state) {
  test_service_t *ts = *state;
  int fd = open(ts->consumer_sock, O_CREAT | O_WRONLY | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "data", 4), 4);
  close(fd);
  char err[4096];
  int status = test_service_run_again(ts, err, sizeof(err));
  assert_true(WIFEXITED(status));
  assert_int_not_equal(WEXITSTATUS(status), 0);
  assert_notice_with(err, TG_N_SERVICE_LISTEN_FAILED, ts->consumer_sock);
  struct stat st;
  assert_int_equal(stat(ts->consumer_sock, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_size, 4);
  /* Nor did it leave its producer socket behind when it gave up. */
  assert_int_not_equal(access(ts->producer_sock, F_OK), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(unknown_services_and_methods_fail_explicitly,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          every_consumer_method_refuses_requests_that_do_not_decode,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(second_service_on_live_sockets_refuses_to_start,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(stale_socket_files_are_replaced, setup_paths,
                                      teardown_paths),
      cmocka_unit_test_setup_teardown(a_file_that_is_not_a_socket_is_left_alone,
                                      setup_paths, teardown_paths),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
