/* The relay's frame checker, without any I/O: frames are built here, fed
 * to tg_relay_filter_client()/_upstream(), and the verdicts and output
 * frames checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "abi/ipc_frame.h"
#include "tracegate/pb_wire.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/config/trace_config.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "auth/authz.h"
#include "common/notice.h"
#include "relay/frame_filter.h"
#include "relay/own_calls.h"
#include "relay/relay_service.h"
#include "tracegate/error.h"
#include "pb/tracegate/relay.pb-c.h"

/* ConsumerPort's methods as a service would announce them; the ids are
 * deliberately not the declaration order, to prove they are learned. */
static const struct {
  uint32_t id;
  const char *name;
} k_methods[] = {
    {101, "EnableTracing"},     {102, "DisableTracing"},
    {103, "ReadBuffers"},       {104, "FreeBuffers"},
    {105, "Flush"},             {106, "StartTracing"},
    {107, "ChangeTraceConfig"}, {108, "Detach"},
    {109, "Attach"},            {110, "GetTraceStats"},
    {111, "ObserveEvents"},     {112, "QueryServiceState"},
    {113, "QueryCapabilities"}, {114, "SaveTraceForBugreport"},
    {115, "CloneSession"},
};
#define N_METHODS (sizeof(k_methods) / sizeof(k_methods[0]))
#define CONSUMER_ID 7u

static uint32_t mid(const char *name) {
  for (size_t i = 0; i < N_METHODS; i++)
    if (!strcmp(k_methods[i].name, name)) return k_methods[i].id;
  fail_msg("no method %s", name);
  return 0;
}

/* --- frame builders (payloads, without the length prefix) ------------------ */

static size_t pack_frame(const tg_ipc_frame_t *f, uint8_t *out, size_t cap) {
  size_t n = perfetto__protos__ipcframe__get_packed_size(f);
  assert_true(n <= cap);
  return perfetto__protos__ipcframe__pack(f, out);
}

static size_t bind_frame(uint64_t id, const char *name, uint8_t *out,
                         size_t cap) {
  Perfetto__Protos__IPCFrame__BindService b =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  b.service_name = (char *)name;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  f.msg_bind_service = &b;
  return pack_frame(&f, out, cap);
}

static size_t bind_reply_frame(uint64_t id, bool success, uint8_t *out,
                               size_t cap) {
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo mi[N_METHODS];
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *pmi[N_METHODS];
  for (size_t i = 0; i < N_METHODS; i++) {
    perfetto__protos__ipcframe__bind_service_reply__method_info__init(&mi[i]);
    mi[i].has_id = 1;
    mi[i].id = k_methods[i].id;
    mi[i].name = (char *)k_methods[i].name;
    pmi[i] = &mi[i];
  }
  Perfetto__Protos__IPCFrame__BindServiceReply r =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
  r.has_success = 1;
  r.success = success;
  r.has_service_id = 1;
  r.service_id = CONSUMER_ID;
  r.n_methods = N_METHODS;
  r.methods = pmi;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
  f.msg_bind_service_reply = &r;
  return pack_frame(&f, out, cap);
}

static size_t invoke_frame(uint64_t id, uint32_t service, uint32_t method,
                           const ProtobufCMessage *args, bool drop,
                           uint8_t *out, size_t cap) {
  uint8_t abuf[1024];
  size_t alen = args ? protobuf_c_message_pack(args, abuf) : 0;
  Perfetto__Protos__IPCFrame__InvokeMethod m =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  m.has_service_id = m.has_method_id = m.has_args_proto = 1;
  m.service_id = service;
  m.method_id = method;
  m.args_proto.data = abuf;
  m.args_proto.len = alen;
  if (drop) m.has_drop_reply = m.drop_reply = 1;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
  f.msg_invoke_method = &m;
  return pack_frame(&f, out, cap);
}

static size_t reply_frame(uint64_t id, bool success, bool more,
                          const uint8_t *body, size_t blen, uint8_t *out,
                          size_t cap) {
  Perfetto__Protos__IPCFrame__InvokeMethodReply r =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  r.has_success = 1;
  r.success = success;
  if (more) r.has_has_more = r.has_more = 1;
  r.has_reply_proto = 1;
  r.reply_proto.data = (uint8_t *)body;
  r.reply_proto.len = blen;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  f.msg_invoke_method_reply = &r;
  return pack_frame(&f, out, cap);
}

/* --- fixture -------------------------------------------------------------- */

typedef struct fx {
  tg_relay_filter_t f;
  tg_relay_host_info_t host;
  tg_buf_t out;
  tg_relay_verdict_t v;
  uint8_t frame[4096];
} fx_t;

static int setup(void **state) {
  fx_t *x = calloc(1, sizeof(*x));
  snprintf(x->host.hostname, sizeof(x->host.hostname), "host-a");
  snprintf(x->host.machine_id, sizeof(x->host.machine_id), "0123abcd");
  snprintf(x->host.kernel, sizeof(x->host.kernel), "Linux 6.1");
  snprintf(x->host.boot_id, sizeof(x->host.boot_id), "b00t");
  x->host.num_cpus = 8;
  tg_relay_filter_init(&x->f, "alice", &x->host);
  tg_buf_init(&x->out, 0);
  *state = x;
  return 0;
}

static int teardown(void **state) {
  fx_t *x = *state;
  tg_buf_free(&x->out);
  free(x);
  return 0;
}

static void client(fx_t *x, tg_authz_role_t role, size_t n) {
  tg_buf_reset(&x->out);
  assert_int_equal(tg_relay_filter_client(&x->f, role, x->frame, n, &x->out,
                                          &x->v), 0);
}

static void upstream(fx_t *x, size_t n) {
  tg_buf_reset(&x->out);
  assert_int_equal(tg_relay_filter_upstream(&x->f, x->frame, n, &x->out,
                                            &x->v), 0);
}

/* The relay's notice before a denial's reply, if |out| starts with one: a
 * RequestError addressed to no request (request_id 0). Returns its text
 * ("" if none) and the offset of the frame after it. */
static size_t out_notice(fx_t *x, char *text, size_t cap) {
  text[0] = 0;
  size_t n = tg_buf_size(&x->out);
  if (n <= TG_IPC_FRAME_HEADER_SIZE) return 0;
  const uint8_t *p = tg_buf_begin(&x->out);
  size_t len = tg_pb_read_le32(p);
  assert_true(len <= n - TG_IPC_FRAME_HEADER_SIZE);
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(p + 4, len);
  assert_non_null(f);
  bool notice = f->request_id == 0 &&
                f->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR;
  if (notice)
    snprintf(text, cap, "%s", f->msg_request_error->error ? f->msg_request_error->error : "");
  tg_ipc_frame_free(f);
  return notice ? TG_IPC_FRAME_HEADER_SIZE + len : 0;
}

/* The one frame in |out| after a notice if any, decoded (caller frees). */
static tg_ipc_frame_t *out_frame(fx_t *x) {
  char text[300];
  size_t skip = out_notice(x, text, sizeof(text));
  size_t n = tg_buf_size(&x->out) - skip;
  assert_true(n > TG_IPC_FRAME_HEADER_SIZE);
  const uint8_t *p = tg_buf_begin(&x->out) + skip;
  assert_int_equal(tg_pb_read_le32(p), n - TG_IPC_FRAME_HEADER_SIZE);
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(p + 4, n - 4);
  assert_non_null(f);
  return f;
}

/* Binds ConsumerPort (request 1) and delivers the service's reply. */
static void bind_consumer(fx_t *x) {
  client(x, TG_ROLE_OBSERVE, bind_frame(1, "ConsumerPort", x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_FORWARD);
  upstream(x, bind_reply_frame(1, true, x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_FORWARD);
  assert_true(x->f.consumer_bound);
}

/* Expects a local InvokeMethodReply{success=false} to |id|, for the
 * reason |code| (the audit trail's), whose words hold |data| (or NULL). */
static void expect_denied(fx_t *x, uint64_t id, tg_notice_t code,
                          const char *data) {
  assert_int_equal(x->v.action, TG_RELAY_REPLY);
  assert_int_equal(x->v.frame, TG_RELAY_FRAME_CALL);
  assert_false(x->v.allowed);
  assert_true(x->v.audit);
  if (x->v.code != code)
    fail_msg("%s, not %s: %s", tg_notice_tag(x->v.code), tg_notice_tag(code),
             x->v.reason);
  if (data && !strstr(x->v.reason, data))
    fail_msg("'%s' not in '%s'", data, x->v.reason);
  tg_ipc_frame_t *f = out_frame(x);
  assert_int_equal(f->request_id, id);
  assert_int_equal(f->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
  assert_false(f->msg_invoke_method_reply->success);
  /* A reply without an error field of its own comes after a notice that
   * tells the reason (issue 14.4). */
  char text[300];
  if (out_notice(x, text, sizeof(text))) {
    assert_non_null(strstr(text, TG_NOTE(RELAY_CALL_DENIED)));
    assert_non_null(strstr(text, x->v.reason));
  }
  tg_ipc_frame_free(f);
}

static void expect_forwarded(fx_t *x, uint64_t id, uint32_t method) {
  if (x->v.action != TG_RELAY_FORWARD)
    fail_msg("not forwarded: %s: %s", x->v.method, x->v.reason);
  assert_true(x->v.allowed);
  tg_ipc_frame_t *f = out_frame(x);
  assert_int_equal(f->request_id, id);
  assert_int_equal(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD);
  assert_int_equal(f->msg_invoke_method->service_id, CONSUMER_ID);
  assert_int_equal(f->msg_invoke_method->method_id, method);
  tg_ipc_frame_free(f);
}

/* --- BindService ------------------------------------------------------------ */

static void filter_learns_consumer_port_from_the_bind_reply(void **state) {
  fx_t *x = *state;
  /* A reply to a bind nobody made teaches nothing. */
  upstream(x, bind_reply_frame(9, true, x->frame, 4096));
  assert_false(x->f.consumer_bound);
  client(x, TG_ROLE_OBSERVE, bind_frame(1, "ConsumerPort", x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_FORWARD);
  tg_ipc_frame_t *f = out_frame(x);
  assert_int_equal(f->msg_case, PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE);
  assert_string_equal(f->msg_bind_service->service_name, "ConsumerPort");
  tg_ipc_frame_free(f);
  /* Calls before the table is known are refused. */
  client(x, TG_ROLE_RECORD,
         invoke_frame(2, CONSUMER_ID, 112, NULL, false, x->frame, 4096));
  expect_denied(x, 2, TG_N_RELAY_REQUEST_MALFORMED, NULL);
  upstream(x, bind_reply_frame(1, true, x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_FORWARD);
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_NONE);
  assert_true(x->f.consumer_bound);
  assert_int_equal(x->f.consumer_id, CONSUMER_ID);
  assert_int_equal(x->f.n_methods, N_METHODS);
  assert_int_equal(x->f.n_tracked, 0);
  /* The learned id, not the declaration order. */
  Perfetto__Protos__QueryServiceStateRequest q =
      PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
  client(x, TG_ROLE_OBSERVE, invoke_frame(3, CONSUMER_ID, mid("QueryServiceState"),
                                          &q.base, false, x->frame, 4096));
  expect_forwarded(x, 3, 112);
  assert_false(x->v.audit); /* chatty reads are not audited */
  client(x, TG_ROLE_OBSERVE, invoke_frame(4, CONSUMER_ID, 12, &q.base, false,
                                          x->frame, 4096));
  expect_denied(x, 4, TG_N_RELAY_REQUEST_MALFORMED, "12");
}

static void filter_answers_tracegate_relay_bind_locally(void **state) {
  fx_t *x = *state;
  client(x, TG_ROLE_OBSERVE, bind_frame(5, "TracegateRelay", x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_REPLY);
  assert_true(x->v.allowed);
  tg_ipc_frame_t *f = out_frame(x);
  assert_int_equal(f->request_id, 5);
  Perfetto__Protos__IPCFrame__BindServiceReply *r = f->msg_bind_service_reply;
  assert_non_null(r);
  assert_true(r->success);
  assert_int_equal(r->service_id, TG_RELAY_SERVICE_ID);
  assert_int_equal(r->n_methods, 6);
  assert_string_equal(r->methods[0]->name, "GetHostInfo");
  assert_string_equal(r->methods[1]->name, "ClockSync");
  assert_string_equal(r->methods[2]->name, "SetSessionKey");
  assert_string_equal(r->methods[3]->name, "SetCompression");
  assert_string_equal(r->methods[4]->name, "Ack");
  assert_string_equal(r->methods[5]->name, "Resume");
  tg_ipc_frame_free(f);
}

static void filter_refuses_other_services(void **state) {
  fx_t *x = *state;
  const char *names[] = {"ProducerPort", "Foo\nbar", ""};
  for (size_t i = 0; i < 3; i++) {
    client(x, TG_ROLE_RECORD, bind_frame(6 + i, names[i], x->frame, 4096));
    assert_int_equal(x->v.action, TG_RELAY_REPLY);
    assert_false(x->v.allowed);
    assert_true(x->v.audit);
    assert_null(strchr(x->v.reason, '\n'));
    tg_ipc_frame_t *f = out_frame(x);
    assert_int_equal(f->request_id, 6 + i);
    assert_false(f->msg_bind_service_reply->success);
    tg_ipc_frame_free(f);
  }
}

/* --- roles ------------------------------------------------------------------ */

static void filter_applies_the_role_table(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  static const char *observe_ok[] = {"QueryServiceState", "QueryCapabilities",
                                     "GetTraceStats", "ObserveEvents"};
  static const char *record_only[] = {"StartTracing", "ChangeTraceConfig",
                                      "Flush", "DisableTracing", "ReadBuffers",
                                      "FreeBuffers", "CloneSession"};
  uint64_t id = 100;
  for (size_t i = 0; i < 4; i++) {
    client(x, TG_ROLE_OBSERVE,
           invoke_frame(++id, CONSUMER_ID, mid(observe_ok[i]), NULL, false,
                        x->frame, 4096));
    expect_forwarded(x, id, mid(observe_ok[i]));
    client(x, TG_ROLE_NONE,
           invoke_frame(++id, CONSUMER_ID, mid(observe_ok[i]), NULL, false,
                        x->frame, 4096));
    expect_denied(x, id, TG_N_RELAY_NOT_AUTHORIZED, NULL);
  }
  for (size_t i = 0; i < 7; i++) {
    client(x, TG_ROLE_OBSERVE,
           invoke_frame(++id, CONSUMER_ID, mid(record_only[i]), NULL, false,
                        x->frame, 4096));
    expect_denied(x, id, TG_N_RELAY_ROLE_DENIES, "observe");
    assert_string_equal(x->v.method, record_only[i]);
    /* Only CloneSession's reply has an error field: the others' reason
     * comes in the notice before it. */
    char notice[300];
    assert_int_equal(out_notice(x, notice, sizeof(notice)) > 0,
                     strcmp(record_only[i], "CloneSession") != 0);
    /* CloneSession must name a session (relay/session_scope.h). */
    Perfetto__Protos__CloneSessionRequest clone =
        PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
    clone.selector_case =
        PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
    clone.unique_session_name = "mine";
    bool is_clone = !strcmp(record_only[i], "CloneSession");
    client(x, TG_ROLE_RECORD,
           invoke_frame(++id, CONSUMER_ID, mid(record_only[i]),
                        is_clone ? &clone.base : NULL, false, x->frame, 4096));
    expect_forwarded(x, id, mid(record_only[i]));
  }
  /* Nobody may save a bugreport. */
  client(x, TG_ROLE_RECORD, invoke_frame(++id, CONSUMER_ID,
                                         mid("SaveTraceForBugreport"), NULL,
                                         false, x->frame, 4096));
  expect_denied(x, id, TG_N_RELAY_ROLE_DENIES, "SaveTraceForBugreport");
  /* Unknown services. */
  client(x, TG_ROLE_RECORD,
         invoke_frame(++id, 3, 1, NULL, false, x->frame, 4096));
  expect_denied(x, id, TG_N_RELAY_REQUEST_MALFORMED, NULL);
  assert_int_equal(x->f.stats.denied, 4 + 7 + 2);
}

static void filter_denied_drop_reply_call_gets_no_reply(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  client(x, TG_ROLE_OBSERVE, invoke_frame(8, CONSUMER_ID, mid("Flush"), NULL,
                                          true, x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_REPLY);
  assert_false(x->v.allowed);
  assert_true(x->v.audit);
  assert_int_equal(tg_buf_size(&x->out), 0);
}

/* --- EnableTracing ---------------------------------------------------------- */

static void filter_refuses_write_into_file(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  Perfetto__Protos__EnableTracingRequest req =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  req.trace_config = &cfg;
  for (int variant = 0; variant < 2; variant++) {
    cfg.has_write_into_file = variant == 0;
    cfg.write_into_file = variant == 0;
    cfg.output_path = variant == 1 ? (char *)"/tmp/x.pftrace" : NULL;
    client(x, TG_ROLE_RECORD, invoke_frame(20 + variant, CONSUMER_ID,
                                           mid("EnableTracing"), &req.base,
                                           false, x->frame, 4096));
    expect_denied(x, 20 + variant, TG_N_RELAY_WRITE_INTO_FILE, NULL);
    tg_ipc_frame_t *f = out_frame(x);
    const ProtobufCBinaryData *b = &f->msg_invoke_method_reply->reply_proto;
    Perfetto__Protos__EnableTracingResponse *r =
        perfetto__protos__enable_tracing_response__unpack(NULL, b->len, b->data);
    assert_non_null(r);
    assert_string_equal(r->error,
                        "write_into_file needs a file descriptor, which "
                        "cannot cross the network: stream with ReadBuffers "
                        "instead");
    perfetto__protos__enable_tracing_response__free_unpacked(r, NULL);
    tg_ipc_frame_free(f);
  }
  assert_false(x->f.session_active);
  /* Without them the call passes and the session is followed. */
  cfg.has_write_into_file = 1;
  cfg.write_into_file = 0;
  cfg.output_path = NULL;
  client(x, TG_ROLE_RECORD, invoke_frame(22, CONSUMER_ID, mid("EnableTracing"),
                                         &req.base, false, x->frame, 4096));
  expect_forwarded(x, 22, mid("EnableTracing"));
  assert_true(x->v.audit);
  assert_true(x->f.session_active);
  /* Args that do not decode never reach the service. */
  static const uint8_t junk[] = {0x0a, 0x05, 0x40};
  uint8_t frame[64];
  Perfetto__Protos__IPCFrame__InvokeMethod m =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  m.has_service_id = m.has_method_id = m.has_args_proto = 1;
  m.service_id = CONSUMER_ID;
  m.method_id = mid("EnableTracing");
  m.args_proto.data = (uint8_t *)junk;
  m.args_proto.len = sizeof(junk);
  tg_ipc_frame_t fr = PERFETTO__PROTOS__IPCFRAME__INIT;
  fr.has_request_id = 1;
  fr.request_id = 23;
  fr.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
  fr.msg_invoke_method = &m;
  size_t n = pack_frame(&fr, frame, sizeof(frame));
  memcpy(x->frame, frame, n);
  client(x, TG_ROLE_RECORD, n);
  expect_denied(x, 23, TG_N_RELAY_REQUEST_MALFORMED, NULL);
}

/* --- Detach / Attach keys --------------------------------------------------- */

static char *forwarded_key(fx_t *x, bool detach) {
  tg_ipc_frame_t *f = out_frame(x);
  const ProtobufCBinaryData *a = &f->msg_invoke_method->args_proto;
  char *key;
  if (detach) {
    Perfetto__Protos__DetachRequest *d =
        perfetto__protos__detach_request__unpack(NULL, a->len, a->data);
    key = strdup(d->key);
    perfetto__protos__detach_request__free_unpacked(d, NULL);
  } else {
    Perfetto__Protos__AttachRequest *d =
        perfetto__protos__attach_request__unpack(NULL, a->len, a->data);
    key = strdup(d->key);
    perfetto__protos__attach_request__free_unpacked(d, NULL);
  }
  tg_ipc_frame_free(f);
  return key;
}

static void filter_namespaces_detach_and_attach_keys(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  Perfetto__Protos__DetachRequest d = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
  d.key = "k";
  client(x, TG_ROLE_RECORD, invoke_frame(30, CONSUMER_ID, mid("Detach"),
                                         &d.base, false, x->frame, 4096));
  expect_forwarded(x, 30, mid("Detach"));
  char *k = forwarded_key(x, true);
  assert_string_equal(k, "alice/k");
  free(k);
  assert_int_equal(x->v.code, TG_N_RELAY_KEY_SCOPED);
  assert_non_null(strstr(x->v.reason, "alice/k"));

  Perfetto__Protos__AttachRequest a = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
  a.key = "bob/k"; /* reaching into another namespace */
  client(x, TG_ROLE_RECORD, invoke_frame(31, CONSUMER_ID, mid("Attach"),
                                         &a.base, false, x->frame, 4096));
  expect_denied(x, 31, TG_N_RELAY_REQUEST_MALFORMED, "'/'");
  a.key = "k";
  client(x, TG_ROLE_RECORD, invoke_frame(32, CONSUMER_ID, mid("Attach"),
                                         &a.base, false, x->frame, 4096));
  expect_forwarded(x, 32, mid("Attach"));
  k = forwarded_key(x, false);
  assert_string_equal(k, "alice/k");
  free(k);
  a.key = "";
  client(x, TG_ROLE_RECORD, invoke_frame(33, CONSUMER_ID, mid("Attach"),
                                         &a.base, false, x->frame, 4096));
  expect_denied(x, 33, TG_N_RELAY_REQUEST_MALFORMED, NULL);
  a.key = NULL;
  client(x, TG_ROLE_RECORD, invoke_frame(34, CONSUMER_ID, mid("Attach"),
                                         &a.base, false, x->frame, 4096));
  expect_denied(x, 34, TG_N_RELAY_REQUEST_MALFORMED, NULL);
  a.key = "with space";
  client(x, TG_ROLE_RECORD, invoke_frame(35, CONSUMER_ID, mid("Attach"),
                                         &a.base, false, x->frame, 4096));
  expect_denied(x, 35, TG_N_RELAY_REQUEST_MALFORMED, NULL);
  /* Observers may not detach or attach at all. */
  a.key = "k";
  client(x, TG_ROLE_OBSERVE, invoke_frame(36, CONSUMER_ID, mid("Attach"),
                                          &a.base, false, x->frame, 4096));
  expect_denied(x, 36, TG_N_RELAY_ROLE_DENIES, "observe");
}

/* --- frames a client may not send ------------------------------------------- */

static void filter_drops_replies_and_set_peer_identity(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  size_t n = bind_reply_frame(40, true, x->frame, 4096);
  client(x, TG_ROLE_RECORD, n);
  assert_int_equal(x->v.action, TG_RELAY_DROP);
  assert_string_equal(x->v.method, "bind_service_reply");
  assert_int_equal(tg_buf_size(&x->out), 0);

  n = reply_frame(41, true, false, NULL, 0, x->frame, 4096);
  client(x, TG_ROLE_RECORD, n);
  assert_int_equal(x->v.action, TG_RELAY_DROP);
  assert_string_equal(x->v.method, "invoke_method_reply");

  Perfetto__Protos__IPCFrame__SetPeerIdentity spi =
      PERFETTO__PROTOS__IPCFRAME__SET_PEER_IDENTITY__INIT;
  spi.has_uid = 1;
  spi.uid = 0;
  spi.machine_name = "root-box";
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = 42;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_SET_PEER_IDENTITY;
  f.set_peer_identity = &spi;
  client(x, TG_ROLE_RECORD, pack_frame(&f, x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_DROP);
  assert_string_equal(x->v.method, "set_peer_identity");
  assert_true(x->v.audit);
  assert_false(x->v.allowed);
  assert_int_equal(tg_buf_size(&x->out), 0);

  Perfetto__Protos__IPCFrame__RequestError re =
      PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;
  re.error = "x";
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR;
  f.msg_request_error = &re;
  client(x, TG_ROLE_RECORD, pack_frame(&f, x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_DROP);

  ProtobufCBinaryData dft = {3, (uint8_t *)"abc"};
  tg_ipc_frame_t t = PERFETTO__PROTOS__IPCFRAME__INIT;
  t.n_data_for_testing = 1;
  t.data_for_testing = &dft;
  client(x, TG_ROLE_RECORD, pack_frame(&t, x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_DROP);
  assert_string_equal(x->v.method, "data_for_testing");
  assert_int_equal(x->f.stats.refused_kinds, 5);
}

static void filter_drops_garbage(void **state) {
  fx_t *x = *state;
  static const uint8_t junk[][6] = {
      {0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
      {0x1a, 0x10, 0x0a, 0x01, 0x41, 0x00}, /* bind, length past the end */
      {0x10, 0x80, 0x80, 0x80, 0x80, 0x80}, /* truncated varint */
  };
  for (size_t i = 0; i < 3; i++) {
    memcpy(x->frame, junk[i], 6);
    client(x, TG_ROLE_RECORD, 6);
    assert_int_equal(x->v.action, TG_RELAY_DROP);
    assert_int_equal(x->v.frame, TG_RELAY_FRAME_GARBAGE);
    assert_int_equal(tg_buf_size(&x->out), 0);
  }
  assert_int_equal(x->f.stats.undecodable, 3);
  /* Garbage from the service is dropped too, never forwarded. */
  memcpy(x->frame, junk[2], 6);
  upstream(x, 6);
  assert_int_equal(x->v.action, TG_RELAY_DROP);
  assert_int_equal(x->f.stats.upstream_garbage, 1);
}

/* Forwarded calls are rebuilt from the checked fields only. */
static void filter_reencodes_what_it_forwards(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  size_t n = invoke_frame(50, CONSUMER_ID, mid("QueryCapabilities"), NULL,
                          false, x->frame, 4096);
  /* Append data_for_testing (field 1) and an unknown field 99. */
  static const uint8_t extra[] = {0x0a, 0x03, 'x', 'y', 'z',
                                  0x98, 0x06, 0x01};
  memcpy(x->frame + n, extra, sizeof(extra));
  client(x, TG_ROLE_OBSERVE, n + sizeof(extra));
  expect_forwarded(x, 50, mid("QueryCapabilities"));
  tg_ipc_frame_t *f = out_frame(x);
  assert_int_equal(f->n_data_for_testing, 0);
  assert_int_equal(f->base.n_unknown_fields, 0);
  tg_ipc_frame_free(f);
}

/* --- upstream tracking -------------------------------------------------------- */

static void filter_marks_read_buffers_replies_as_bulk(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  client(x, TG_ROLE_RECORD, invoke_frame(60, CONSUMER_ID, mid("ReadBuffers"),
                                         NULL, false, x->frame, 4096));
  expect_forwarded(x, 60, mid("ReadBuffers"));
  assert_false(x->v.audit);
  upstream(x, reply_frame(60, true, true, (const uint8_t *)"\x12\x00", 2,
                          x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_FORWARD);
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_BULK);
  upstream(x, reply_frame(61, true, false, NULL, 0, x->frame, 4096));
  /* No such call: not bulk, and not passed on. */
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_NONE);
  assert_int_equal(x->v.action, TG_RELAY_DROP);
  upstream(x, reply_frame(60, true, false, NULL, 0, x->frame, 4096));
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_BULK);
  assert_int_equal(x->f.n_tracked, 0);
  upstream(x, reply_frame(60, true, false, NULL, 0, x->frame, 4096));
  /* The stream has ended. */
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_NONE);
  assert_int_equal(x->v.action, TG_RELAY_DROP);
  assert_int_equal(x->f.stats.unmatched, 2);

  /* has_more as a 10-byte varint whose only set bits lie past 64: true for
   * protobuf-c, and so for the client; the relay keeps the call too. */
  client(x, TG_ROLE_RECORD, invoke_frame(62, CONSUMER_ID, mid("ReadBuffers"),
                                         NULL, false, x->frame, 4096));
  static const uint8_t odd[] = {0x10, 62,   0x32, 13,   0x08, 0x01, 0x10,
                                0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                0x80, 0x80, 0x02};
  upstream(x, (memcpy(x->frame, odd, sizeof(odd)), sizeof(odd)));
  assert_int_equal(x->v.action, TG_RELAY_FORWARD);
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_BULK);
  assert_false(x->v.effect.bulk.last);
  assert_int_equal(x->f.n_tracked, 1);
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(odd, sizeof(odd));
  assert_non_null(f);
  assert_true(f->msg_invoke_method_reply->has_more);
  tg_ipc_frame_free(f);
}

static void filter_refuses_calls_beyond_the_tracking_table(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  for (uint64_t i = 0; i < TG_RELAY_FILTER_MAX_TRACKED; i++) {
    client(x, TG_ROLE_RECORD, invoke_frame(70 + i, CONSUMER_ID,
                                           mid("ReadBuffers"), NULL, false,
                                           x->frame, 4096));
    expect_forwarded(x, 70 + i, mid("ReadBuffers"));
  }
  client(x, TG_ROLE_RECORD, invoke_frame(200, CONSUMER_ID, mid("ReadBuffers"),
                                         NULL, false, x->frame, 4096));
  expect_denied(x, 200, TG_N_RELAY_TOO_MANY_CALLS, NULL);
  /* Every call with a reply to come is in flight... */
  client(x, TG_ROLE_RECORD, invoke_frame(201, CONSUMER_ID, mid("Flush"), NULL,
                                         false, x->frame, 4096));
  expect_denied(x, 201, TG_N_RELAY_TOO_MANY_CALLS, NULL);
  /* ...a call that wants no reply is not. */
  client(x, TG_ROLE_RECORD, invoke_frame(202, CONSUMER_ID, mid("Flush"), NULL,
                                         true, x->frame, 4096));
  expect_forwarded(x, 202, mid("Flush"));
  /* A final reply frees its entry. */
  upstream(x, reply_frame(70, true, false, NULL, 0, x->frame, 4096));
  client(x, TG_ROLE_RECORD, invoke_frame(203, CONSUMER_ID, mid("Flush"), NULL,
                                         false, x->frame, 4096));
  expect_forwarded(x, 203, mid("Flush"));
}

/* A QueryServiceStateResponse body listing |n| sessions. */
static size_t state_body(const char *const *names, size_t n, uint8_t *out,
                         size_t cap) {
  Perfetto__Protos__TracingServiceState__TracingSession s[4];
  Perfetto__Protos__TracingServiceState__TracingSession *ps[4];
  assert_true(n <= 4);
  for (size_t i = 0; i < n; i++) {
    perfetto__protos__tracing_service_state__tracing_session__init(&s[i]);
    s[i].has_id = 1;
    s[i].id = 500 + i;
    s[i].unique_session_name = (char *)names[i];
    ps[i] = &s[i];
  }
  Perfetto__Protos__TracingServiceState st =
      PERFETTO__PROTOS__TRACING_SERVICE_STATE__INIT;
  st.n_tracing_sessions = n;
  st.tracing_sessions = ps;
  Perfetto__Protos__QueryServiceStateResponse r =
      PERFETTO__PROTOS__QUERY_SERVICE_STATE_RESPONSE__INIT;
  r.service_state = &st;
  assert_true(perfetto__protos__query_service_state_response__get_packed_size(
                  &r) <= cap);
  return perfetto__protos__query_service_state_response__pack(&r, out);
}

/* The names of the sessions in the QueryServiceState reply in |out|,
 * joined by ','. */
static void out_state_names(fx_t *x, char *names, size_t cap) {
  tg_ipc_frame_t *f = out_frame(x);
  assert_int_equal(f->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
  const ProtobufCBinaryData *b = &f->msg_invoke_method_reply->reply_proto;
  Perfetto__Protos__QueryServiceStateResponse *r =
      perfetto__protos__query_service_state_response__unpack(NULL, b->len,
                                                              b->data);
  assert_non_null(r);
  names[0] = 0;
  for (size_t i = 0; r->service_state && i < r->service_state->n_tracing_sessions;
       i++)
    snprintf(names + strlen(names), cap - strlen(names), "%s%s", i ? "," : "",
             r->service_state->tracing_sessions[i]->unique_session_name);
  perfetto__protos__query_service_state_response__free_unpacked(r, NULL);
  tg_ipc_frame_free(f);
}

/* A client that sends a second call under the id of one still in flight
 * would have the service's reply to either taken for the other: a
 * QueryServiceState reply passing as EnableTracing's goes out unscoped,
 * a ReadBuffers reply ends the session's EnableTracing. Whatever the
 * method or service, the second call is refused and the first keeps its
 * id. */
static void filter_refuses_a_call_whose_id_is_in_flight(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  Perfetto__Protos__EnableTracingRequest req =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  req.trace_config = &cfg;
  client(x, TG_ROLE_RECORD, invoke_frame(40, CONSUMER_ID, mid("EnableTracing"),
                                         &req.base, false, x->frame, 4096));
  expect_forwarded(x, 40, mid("EnableTracing"));
  assert_true(x->f.session_active);

  const char *reused[] = {"QueryServiceState", "ReadBuffers", "GetTraceStats",
                          "EnableTracing"};
  for (size_t i = 0; i < sizeof(reused) / sizeof(reused[0]); i++) {
    client(x, TG_ROLE_RECORD,
           invoke_frame(40, CONSUMER_ID, mid(reused[i]),
                        i == 3 ? &req.base : NULL, false, x->frame, 4096));
    expect_denied(x, 40, TG_N_RELAY_REQUEST_ID_REFUSED, NULL);
  }
  /* The relay's own service and a bind: the same. */
  client(x, TG_ROLE_RECORD,
         invoke_frame(40, TG_RELAY_SERVICE_ID, TG_RELAY_M_CLOCK_SYNC, NULL,
                      false, x->frame, 4096));
  expect_denied(x, 40, TG_N_RELAY_REQUEST_ID_REFUSED, NULL);
  assert_string_equal(x->v.method, "TracegateRelay.ClockSync");
  client(x, TG_ROLE_RECORD, bind_frame(40, "ConsumerPort", x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_REPLY);
  assert_false(x->v.allowed);
  assert_int_equal(x->v.code, TG_N_RELAY_REQUEST_ID_REFUSED);
  /* Also when no reply is wanted: the service might send one anyway. */
  client(x, TG_ROLE_RECORD, invoke_frame(40, CONSUMER_ID, mid("ReadBuffers"),
                                         NULL, true, x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_REPLY);
  assert_false(x->v.allowed);
  assert_int_equal(tg_buf_size(&x->out), 0);
  assert_int_equal(x->f.stats.in_flight_reused, 7);
  assert_int_equal(x->f.n_tracked, 1);

  /* The service's reply to 40 is EnableTracing's: it ends the session,
   * and is nothing the state scoping would look into. */
  assert_true(x->f.session_active);
  upstream(x, reply_frame(40, true, false, NULL, 0, x->frame, 4096));
  assert_int_equal(x->v.action, TG_RELAY_FORWARD);
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_NONE);
  assert_false(x->f.session_active);
  assert_int_equal(x->f.n_tracked, 0);

  /* Once its final reply is in, the id is free again, and a
   * QueryServiceState under it is scoped. */
  client(x, TG_ROLE_RECORD, invoke_frame(40, CONSUMER_ID,
                                         mid("QueryServiceState"), NULL, false,
                                         x->frame, 4096));
  expect_forwarded(x, 40, mid("QueryServiceState"));
  uint8_t body[1024];
  const char *names[] = {"alice/mine", "bob/bobs-secret-session"};
  size_t blen = state_body(names, 2, body, sizeof(body));
  upstream(x, reply_frame(40, true, false, body, blen, x->frame, 4096));
  char shown[256];
  out_state_names(x, shown, sizeof(shown));
  assert_string_equal(shown, "alice/mine");
}

/* A RequestError is the final answer to a call: its id is free after it,
 * and a second one to the same id passes for nothing. */
static void filter_ends_a_call_on_request_error(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  client(x, TG_ROLE_RECORD, invoke_frame(41, CONSUMER_ID,
                                         mid("QueryServiceState"), NULL, false,
                                         x->frame, 4096));
  expect_forwarded(x, 41, mid("QueryServiceState"));
  Perfetto__Protos__IPCFrame__RequestError e =
      PERFETTO__PROTOS__IPCFRAME__REQUEST_ERROR__INIT;
  e.error = "no";
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = 41;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR;
  f.msg_request_error = &e;
  size_t n = pack_frame(&f, x->frame, 4096);
  upstream(x, n);
  assert_int_equal(x->v.action, TG_RELAY_FORWARD);
  assert_int_equal(x->f.n_tracked, 0);
  upstream(x, n);
  assert_int_equal(x->v.action, TG_RELAY_DROP);
}

/* --- TracegateRelay ----------------------------------------------------------- */

static void *relay_reply(fx_t *x, const ProtobufCMessageDescriptor *d) {
  assert_int_equal(x->v.action, TG_RELAY_REPLY);
  assert_true(x->v.allowed);
  tg_ipc_frame_t *f = out_frame(x);
  assert_true(f->msg_invoke_method_reply->success);
  const ProtobufCBinaryData *b = &f->msg_invoke_method_reply->reply_proto;
  void *m = protobuf_c_message_unpack(d, NULL, b->len, b->data);
  assert_non_null(m);
  tg_ipc_frame_free(f);
  return m;
}

static void filter_serves_host_info_and_clocks(void **state) {
  fx_t *x = *state;
  client(x, TG_ROLE_OBSERVE,
         invoke_frame(80, TG_RELAY_SERVICE_ID, TG_RELAY_M_GET_HOST_INFO, NULL,
                      false, x->frame, 4096));
  Perfetto__Protos__RelayHostInfo *hi =
      relay_reply(x, &perfetto__protos__relay_host_info__descriptor);
  assert_string_equal(hi->hostname, "host-a");
  assert_string_equal(hi->machine_id, "0123abcd");
  assert_string_equal(hi->kernel, "Linux 6.1");
  assert_string_equal(hi->boot_id, "b00t");
  assert_int_equal(hi->num_cpus, 8);
  assert_true(hi->relay_version && hi->relay_version[0]);
  assert_null(hi->service_instance); /* not known: left out */
  protobuf_c_message_free_unpacked(&hi->base, NULL);
  /* Once the service's process is known, it is said as given. */
  tg_relay_filter_set_service_instance(&x->f, "4242.987654");
  client(x, TG_ROLE_OBSERVE,
         invoke_frame(79, TG_RELAY_SERVICE_ID, TG_RELAY_M_GET_HOST_INFO, NULL,
                      false, x->frame, 4096));
  hi = relay_reply(x, &perfetto__protos__relay_host_info__descriptor);
  assert_string_equal(hi->service_instance, "4242.987654");
  protobuf_c_message_free_unpacked(&hi->base, NULL);

  client(x, TG_ROLE_OBSERVE,
         invoke_frame(81, TG_RELAY_SERVICE_ID, TG_RELAY_M_CLOCK_SYNC, NULL,
                      false, x->frame, 4096));
  assert_false(x->v.audit); /* chatty by design */
  Perfetto__Protos__ClockSyncResponse *c1 =
      relay_reply(x, &perfetto__protos__clock_sync_response__descriptor);
  client(x, TG_ROLE_OBSERVE,
         invoke_frame(82, TG_RELAY_SERVICE_ID, TG_RELAY_M_CLOCK_SYNC, NULL,
                      false, x->frame, 4096));
  Perfetto__Protos__ClockSyncResponse *c2 =
      relay_reply(x, &perfetto__protos__clock_sync_response__descriptor);
  assert_true(c1->boottime_ns > 0 && c1->monotonic_ns > 0 &&
              c1->realtime_ns > 1600000000ull * 1000000000ull);
  assert_true(c2->monotonic_ns >= c1->monotonic_ns);
  /* BOOTTIME counts suspend too; read first, it may trail by a hair. */
  assert_true(c1->boottime_ns + 1000000 >= c1->monotonic_ns);
  protobuf_c_message_free_unpacked(&c1->base, NULL);
  protobuf_c_message_free_unpacked(&c2->base, NULL);

  client(x, TG_ROLE_OBSERVE, invoke_frame(83, TG_RELAY_SERVICE_ID, 9, NULL,
                                          false, x->frame, 4096));
  expect_denied(x, 83, TG_N_RELAY_REQUEST_MALFORMED, "9");
  client(x, TG_ROLE_NONE,
         invoke_frame(84, TG_RELAY_SERVICE_ID, TG_RELAY_M_CLOCK_SYNC, NULL,
                      false, x->frame, 4096));
  expect_denied(x, 84, TG_N_RELAY_NOT_AUTHORIZED, NULL);
}

/* A SetCompression a relay would grant: zstd level 1, 1 MiB window. */
static size_t compression_frame(uint64_t id, uint8_t *out, size_t cap) {
  Perfetto__Protos__SetCompressionRequest r =
      PERFETTO__PROTOS__SET_COMPRESSION_REQUEST__INIT;
  r.algorithm = "zstd";
  r.has_level = r.has_window_log = 1;
  r.level = 1;
  r.window_log = 20;
  return invoke_frame(id, TG_RELAY_SERVICE_ID, TG_RELAY_M_SET_COMPRESSION,
                      &r.base, false, out, cap);
}

static void filter_grants_compression_once_when_allowed(void **state) {
  fx_t *x = *state;
  assert_int_equal(x->f.compress, TG_RELAY_COMPRESS_ALLOW); /* the default */
  tg_relay_filter_set_compress(&x->f, TG_RELAY_COMPRESS_ALLOW);
  client(x, TG_ROLE_OBSERVE, compression_frame(100, x->frame, 4096));
  assert_int_equal(x->v.frame, TG_RELAY_FRAME_CALL);
  assert_true(x->v.audit);
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_START_COMPRESSION);
  assert_int_equal(x->v.effect.compression.level, 1);
  assert_int_equal(x->v.effect.compression.window_log, 20);
  assert_string_equal(x->v.method, "TracegateRelay.SetCompression");
  Perfetto__Protos__SetCompressionResponse *r =
      relay_reply(x, &perfetto__protos__set_compression_response__descriptor);
  assert_int_equal(r->window_log, 20);
  protobuf_c_message_free_unpacked(&r->base, NULL);
  assert_int_equal(x->f.stats.local, 1);

  client(x, TG_ROLE_OBSERVE, compression_frame(101, x->frame, 4096));
  expect_denied(x, 101, TG_N_RELAY_CALL_REFUSED, NULL);
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_NONE);
}

/* --compress never: refused like any denial (the same request id,
 * success=false, audited), and nothing for the caller to switch. */
static void filter_refuses_compression_when_the_relay_never_compresses(
    void **state) {
  fx_t *x = *state;
  tg_relay_filter_set_compress(&x->f, TG_RELAY_COMPRESS_NEVER);
  client(x, TG_ROLE_RECORD, compression_frame(100, x->frame, 4096));
  expect_denied(x, 100, TG_N_RELAY_CALL_REFUSED, "--compress");
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_NONE);
  assert_string_equal(x->v.method, "TracegateRelay.SetCompression");
  char text[300];
  assert_true(out_notice(x, text, sizeof(text)) > 0);
  assert_non_null(strstr(text, "compression refused by this relay"));
  assert_false(x->f.compression_granted);
  assert_int_equal(x->f.stats.denied, 1);
  assert_int_equal(x->f.stats.local, 0);
  /* Asked again: the same answer. */
  client(x, TG_ROLE_RECORD, compression_frame(101, x->frame, 4096));
  expect_denied(x, 101, TG_N_RELAY_CALL_REFUSED, "--compress");
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_NONE);
  /* The rest of TracegateRelay is still served. */
  client(x, TG_ROLE_RECORD,
         invoke_frame(102, TG_RELAY_SERVICE_ID, TG_RELAY_M_CLOCK_SYNC, NULL,
                      false, x->frame, 4096));
  void *m = relay_reply(x, &perfetto__protos__clock_sync_response__descriptor);
  protobuf_c_message_free_unpacked(m, NULL);
}

static void filter_detaches_on_drop_only_with_key_and_session(void **state) {
  fx_t *x = *state;
  tg_buf_t d;
  tg_buf_init(&d, 0);
  char key[300];
  bind_consumer(x);
  assert_int_equal(tg_relay_filter_detach_on_drop(&x->f, &d, key, sizeof(key)), 0);

  Perfetto__Protos__SetSessionKeyRequest sk =
      PERFETTO__PROTOS__SET_SESSION_KEY_REQUEST__INIT;
  sk.key = "a/b";
  client(x, TG_ROLE_RECORD,
         invoke_frame(90, TG_RELAY_SERVICE_ID, TG_RELAY_M_SET_SESSION_KEY,
                      &sk.base, false, x->frame, 4096));
  expect_denied(x, 90, TG_N_RELAY_REQUEST_MALFORMED, "'/'");
  sk.key = "resume-1";
  client(x, TG_ROLE_OBSERVE,
         invoke_frame(91, TG_RELAY_SERVICE_ID, TG_RELAY_M_SET_SESSION_KEY,
                      &sk.base, false, x->frame, 4096));
  /* Allowed, answered by the caller once it holds the key's window. */
  assert_int_equal(x->v.action, TG_RELAY_REPLY);
  assert_true(x->v.allowed);
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_SESSION_KEY_SET);
  assert_true(x->v.effect.session_key.reply);
  assert_int_equal(tg_buf_size(&x->out), 0);
  assert_string_equal(x->f.session_key, "resume-1");
  for (int ended = 0; ended < 2; ended++) {
    tg_buf_reset(&x->out);
    assert_int_equal(tg_relay_filter_session_key_reply(x->v.request_id,
                                                       ended, &x->out), 0);
    tg_ipc_frame_t *rf = out_frame(x);
    assert_int_equal(rf->request_id, 91);
    tg_ipc_frame_free(rf);
    Perfetto__Protos__SetSessionKeyResponse *m =
        relay_reply(x, &perfetto__protos__set_session_key_response__descriptor);
    assert_int_equal(m->has_ended_with_service && m->ended_with_service,
                     ended);
    protobuf_c_message_free_unpacked(&m->base, NULL);
  }
  /* drop_reply: no reply wanted, none to send. */
  client(x, TG_ROLE_OBSERVE,
         invoke_frame(93, TG_RELAY_SERVICE_ID, TG_RELAY_M_SET_SESSION_KEY,
                      &sk.base, true, x->frame, 4096));
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_SESSION_KEY_SET);
  assert_false(x->v.effect.session_key.reply);
  /* A key but no session: nothing to detach. */
  assert_int_equal(tg_relay_filter_detach_on_drop(&x->f, &d, key, sizeof(key)), 0);

  Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  Perfetto__Protos__EnableTracingRequest req =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  req.trace_config = &cfg;
  client(x, TG_ROLE_RECORD, invoke_frame(92, CONSUMER_ID, mid("EnableTracing"),
                                         &req.base, false, x->frame, 4096));
  expect_forwarded(x, 92, mid("EnableTracing"));
  assert_int_equal(tg_relay_filter_detach_on_drop(&x->f, &d, key, sizeof(key)), 1);
  assert_string_equal(key, "alice/resume-1");
  const uint8_t *p = tg_buf_begin(&d);
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(p + 4, tg_buf_size(&d) - 4);
  assert_non_null(f);
  assert_int_equal(f->request_id, TG_RELAY_DETACH_REQUEST_ID);
  assert_int_equal(f->msg_invoke_method->service_id, CONSUMER_ID);
  assert_int_equal(f->msg_invoke_method->method_id, mid("Detach"));
  assert_false(f->msg_invoke_method->drop_reply);
  tg_ipc_frame_free(f);
  /* The service's answer to that Detach is the relay's, not the client's. */
  upstream(x, reply_frame(TG_RELAY_DETACH_REQUEST_ID, true, false, NULL, 0,
                          x->frame, 4096));
  assert_int_equal(x->v.effect.kind, TG_RELAY_EFFECT_OWN_DETACH_REPLY);
  assert_true(x->v.allowed);
  assert_int_equal(x->v.action, TG_RELAY_DROP);
  assert_false(x->f.session_active);
  assert_int_equal(x->f.n_tracked, 0);

  /* Once tracing has ended (the final EnableTracing reply) there is no
   * session to keep. */
  client(x, TG_ROLE_RECORD, invoke_frame(93, CONSUMER_ID, mid("EnableTracing"),
                                         &req.base, false, x->frame, 4096));
  assert_true(x->f.session_active);
  upstream(x, reply_frame(93, true, false, NULL, 0, x->frame, 4096));
  assert_false(x->f.session_active);
  tg_buf_reset(&d);
  assert_int_equal(tg_relay_filter_detach_on_drop(&x->f, &d, key, sizeof(key)), 0);
  /* A successful Attach brings a session to the connection. */
  Perfetto__Protos__AttachRequest a = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
  a.key = "resume-1";
  client(x, TG_ROLE_RECORD, invoke_frame(94, CONSUMER_ID, mid("Attach"),
                                         &a.base, false, x->frame, 4096));
  upstream(x, reply_frame(94, false, false, NULL, 0, x->frame, 4096));
  assert_false(x->f.session_active);
  client(x, TG_ROLE_RECORD, invoke_frame(95, CONSUMER_ID, mid("Attach"),
                                         &a.base, false, x->frame, 4096));
  upstream(x, reply_frame(95, true, false, NULL, 0, x->frame, 4096));
  assert_true(x->f.session_active);
  assert_int_equal(tg_relay_filter_detach_on_drop(&x->f, &d, key, sizeof(key)), 1);
  tg_buf_free(&d);
}

/* A client call with the relay's own Detach id would have its reply taken
 * for the answer to that Detach once the link drops: it is refused. */
static void filter_refuses_the_relays_detach_request_id(void **state) {
  fx_t *x = *state;
  bind_consumer(x);
  client(x, TG_ROLE_RECORD,
         invoke_frame(TG_RELAY_DETACH_REQUEST_ID, CONSUMER_ID,
                      mid("ReadBuffers"), NULL, false, x->frame, 4096));
  expect_denied(x, TG_RELAY_DETACH_REQUEST_ID,
                TG_N_RELAY_REQUEST_ID_REFUSED, NULL);
  assert_int_equal(x->f.n_tracked, 0);
  /* Any other id is fine. */
  client(x, TG_ROLE_RECORD,
         invoke_frame(TG_RELAY_DETACH_REQUEST_ID - 1, CONSUMER_ID,
                      mid("ReadBuffers"), NULL, false, x->frame, 4096));
  expect_forwarded(x, TG_RELAY_DETACH_REQUEST_ID - 1, mid("ReadBuffers"));
}

/* A process's instance names one process: the same for the same process,
 * another for another; an error and "" for a pid that is no process. The
 * /proc reader counts its fields past a name holding spaces and
 * parentheses. */
static void service_instance_names_one_process(void **state) {
  (void)state;
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    prctl(PR_SET_NAME, "a) b (c) 9");
    char ch;
    close(go[1]);
    (void)!read(go[0], &ch, 1); /* until the parent closes its end */
    _exit(0);
  }
  close(go[0]);
  /* The child names itself at once; wait until /proc shows it. */
  for (int i = 0; i < 500; i++) {
    char path[64], comm[64] = "";
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)child);
    FILE *f = fopen(path, "re");
    if (f) {
      if (!fgets(comm, sizeof(comm), f)) comm[0] = 0;
      fclose(f);
    }
    if (strstr(comm, "a) b (c) 9")) break;
    usleep(2000);
  }
  char a[48], b[48], me[48];
  assert_int_equal(tg_relay_service_instance(child, a, sizeof(a)), 0);
  assert_int_equal(tg_relay_service_instance(child, b, sizeof(b)), 0);
  assert_string_equal(a, b);
  assert_true(!strncmp(a, "pidfs.", 6) || !strncmp(a, "proc.", 5));
  assert_int_equal(tg_relay_service_instance(getpid(), me, sizeof(me)), 0);
  assert_string_not_equal(me, a);

  /* /proc: "proc.<pid>.<field 22>", the child started after us. */
  char pa[48], pme[48], prefix[24];
  assert_int_equal(tg_relay_proc_instance(child, pa, sizeof(pa)), 0);
  snprintf(prefix, sizeof(prefix), "proc.%d.", (int)child);
  assert_int_equal(strncmp(pa, prefix, strlen(prefix)), 0);
  char *end;
  unsigned long long start = strtoull(pa + strlen(prefix), &end, 10);
  assert_true(*end == 0 && end != pa + strlen(prefix));
  assert_int_equal(tg_relay_proc_instance(getpid(), pme, sizeof(pme)), 0);
  assert_true(start >= strtoull(strrchr(pme, '.') + 1, NULL, 10));
  /* Field 22 is the start in clock ticks after boot: the child started
   * within the last minute of /proc/uptime (any other field is not). */
  double up = 0;
  FILE *uf = fopen("/proc/uptime", "re");
  assert_non_null(uf);
  assert_int_equal(fscanf(uf, "%lf", &up), 1);
  fclose(uf);
  double started = (double)start / (double)sysconf(_SC_CLK_TCK);
  assert_true(started <= up + 1 && started >= up - 60);

  close(go[1]);
  assert_int_equal(waitpid(child, NULL, 0), child);
  /* Gone: an error, nothing said. */
  assert_true(tg_relay_service_instance(child, a, sizeof(a)) < 0);
  assert_string_equal(a, "");
  assert_true(tg_relay_proc_instance(child, a, sizeof(a)) < 0);
  assert_string_equal(a, "");
  assert_true(tg_relay_service_instance(0, a, sizeof(a)) < 0);
  assert_true(tg_relay_service_instance(-1, a, sizeof(a)) < 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(filter_learns_consumer_port_from_the_bind_reply),
      T(filter_answers_tracegate_relay_bind_locally),
      T(filter_refuses_other_services),
      T(filter_applies_the_role_table),
      T(filter_denied_drop_reply_call_gets_no_reply),
      T(filter_refuses_write_into_file),
      T(filter_namespaces_detach_and_attach_keys),
      T(filter_drops_replies_and_set_peer_identity),
      T(filter_drops_garbage),
      T(filter_reencodes_what_it_forwards),
      T(filter_marks_read_buffers_replies_as_bulk),
      T(filter_refuses_calls_beyond_the_tracking_table),
      T(filter_refuses_a_call_whose_id_is_in_flight),
      T(filter_ends_a_call_on_request_error),
      T(filter_serves_host_info_and_clocks),
      cmocka_unit_test(service_instance_names_one_process),
      T(filter_grants_compression_once_when_allowed),
      T(filter_refuses_compression_when_the_relay_never_compresses),
      T(filter_detaches_on_drop_only_with_key_and_session),
      T(filter_refuses_the_relays_detach_request_id),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
