/* Fuzzes the relay's frame checker (relay/frame_filter.h): the code that
 * stands between a remote, authenticated but untrusted client and the
 * tracing service.
 *
 * Input: records [dir u8][len u16 LE][payload], each one IPCFrame payload.
 * dir bit 0 clear: from the client; set: from the service. The harness
 * first binds ConsumerPort and feeds a BindServiceReply with Perfetto's
 * method ids (1..15), so that calls reach the role checks; then every
 * record goes to two filters, one for an `observe` identity and one for a
 * `record` identity (a third decides with no role at all).
 *
 * Invariants (trap on violation):
 * - whatever a filter emits is whole frames that decode;
 * - what goes to the service is a BindService("ConsumerPort") or an
 *   InvokeMethod, with no data_for_testing and no unknown fields;
 * - a forwarded call is one the role allows; no call is forwarded for a
 *   client without a role;
 * - replies made locally answer the request id that was asked;
 * - Detach/Attach keys forwarded carry the identity's namespace;
 * - frames from the service are only ever forwarded as they are or
 *   dropped, never rewritten;
 * - a request id is in flight at most once, and a frame from the service
 *   is forwarded only when its id was in flight: no reply ever passes for
 *   another call's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/ipc_frame.h"
#include "tracegate/pb_wire.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "auth/authz.h"
#include "relay/frame_filter.h"
#include "relay/own_calls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const k_methods[] = {
    "EnableTracing",     "DisableTracing", "ReadBuffers",
    "FreeBuffers",       "Flush",          "StartTracing",
    "ChangeTraceConfig", "Detach",         "Attach",
    "GetTraceStats",     "ObserveEvents",  "QueryServiceState",
    "QueryCapabilities", "SaveTraceForBugreport", "CloneSession",
};
#define N_METHODS (sizeof(k_methods) / sizeof(k_methods[0]))
#define CONSUMER_ID 1u

static size_t bind_reply(uint8_t *out) {
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo mi[N_METHODS];
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *pmi[N_METHODS];
  for (size_t i = 0; i < N_METHODS; i++) {
    perfetto__protos__ipcframe__bind_service_reply__method_info__init(&mi[i]);
    mi[i].has_id = 1;
    mi[i].id = (uint32_t)(i + 1);
    mi[i].name = (char *)k_methods[i];
    pmi[i] = &mi[i];
  }
  Perfetto__Protos__IPCFrame__BindServiceReply r =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
  r.has_success = r.success = 1;
  r.has_service_id = 1;
  r.service_id = CONSUMER_ID;
  r.n_methods = N_METHODS;
  r.methods = pmi;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = 1;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
  f.msg_bind_service_reply = &r;
  return perfetto__protos__ipcframe__pack(&f, out);
}

static size_t bind_consumer(uint8_t *out) {
  Perfetto__Protos__IPCFrame__BindService b =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  b.service_name = (char *)"ConsumerPort";
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = 1;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  f.msg_bind_service = &b;
  return perfetto__protos__ipcframe__pack(&f, out);
}

static const char *method_name(uint32_t id) {
  return id >= 1 && id <= N_METHODS ? k_methods[id - 1] : NULL;
}

static void check_key(const tg_relay_filter_t *f, const uint8_t *a, size_t n,
                      bool detach) {
  char *key = NULL;
  ProtobufCMessage *m =
      detach ? (ProtobufCMessage *)perfetto__protos__detach_request__unpack(
                   NULL, n, a)
             : (ProtobufCMessage *)perfetto__protos__attach_request__unpack(
                   NULL, n, a);
  if (!m) __builtin_trap();
  key = detach ? ((Perfetto__Protos__DetachRequest *)m)->key
               : ((Perfetto__Protos__AttachRequest *)m)->key;
  size_t il = strlen(f->identity);
  if (!key || strncmp(key, f->identity, il) || key[il] != '/' ||
      strchr(key + il + 1, '/'))
    __builtin_trap();
  protobuf_c_message_free_unpacked(m, NULL);
}

/* Every frame in |out| decodes; returns how many. |*last| gets the last
 * one (the answer); every frame before it must be a relay notice: a
 * RequestError addressed to no request (request_id 0). */
static size_t check_frames(const tg_buf_t *out, tg_ipc_frame_t **last) {
  size_t n = tg_buf_size(out), count = 0;
  if (n == 0) return 0; /* an empty buffer may have no memory at all */
  const uint8_t *p = tg_buf_begin(out);
  tg_ipc_frame_t *prev = NULL;
  while (n > 0) {
    if (n < TG_IPC_FRAME_HEADER_SIZE) __builtin_trap();
    uint32_t len = tg_pb_read_le32(p);
    if (len > TG_IPC_FRAME_MAX_PAYLOAD || len > n - TG_IPC_FRAME_HEADER_SIZE)
      __builtin_trap();
    tg_ipc_frame_t *f = tg_ipc_frame_unpack(p + TG_IPC_FRAME_HEADER_SIZE, len);
    if (!f) __builtin_trap();
    if (prev) {
      if (prev->request_id != 0 ||
          prev->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_REQUEST_ERROR)
        __builtin_trap();
      tg_ipc_frame_free(prev);
    }
    prev = f;
    count++;
    p += TG_IPC_FRAME_HEADER_SIZE + len;
    n -= TG_IPC_FRAME_HEADER_SIZE + len;
  }
  if (last) *last = prev;
  else tg_ipc_frame_free(prev);
  return count;
}

static bool was_in_flight(const tg_relay_filter_t *before, uint64_t id) {
  for (size_t i = 0; i < before->n_tracked; i++)
    if (before->tracked[i].request_id == id) return true;
  return false;
}

static void check_ids_unique(const tg_relay_filter_t *f) {
  for (size_t i = 0; i < f->n_tracked; i++)
    for (size_t j = i + 1; j < f->n_tracked; j++)
      if (f->tracked[i].request_id == f->tracked[j].request_id)
        __builtin_trap();
}

static void client_frame(tg_relay_filter_t *f, tg_authz_role_t role,
                         const uint8_t *p, size_t n, tg_buf_t *out) {
  tg_relay_verdict_t v;
  tg_buf_reset(out);
  int rv = tg_relay_filter_client(f, role, p, n, out, &v);
  check_ids_unique(f);
  if (rv < 0) return;
  tg_ipc_frame_t *fr = NULL;
  size_t count = check_frames(out, &fr);
  /* At most a notice and the reply, and a notice only with a refusal. */
  if (count > 2 || (count == 2 && v.action != TG_RELAY_REPLY)) __builtin_trap();
  if (v.action == TG_RELAY_DROP && count) __builtin_trap();
  if (!fr) return;
  if (fr->request_id != v.request_id) __builtin_trap();
  if (v.action == TG_RELAY_REPLY) {
    if (fr->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY &&
        fr->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY)
      __builtin_trap();
  } else {
    /* Forwarded: rebuilt from checked fields only. */
    if (fr->n_data_for_testing || fr->base.n_unknown_fields) __builtin_trap();
    if (fr->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE) {
      if (!fr->msg_bind_service->service_name ||
          strcmp(fr->msg_bind_service->service_name, "ConsumerPort"))
        __builtin_trap();
    } else if (fr->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD) {
      const Perfetto__Protos__IPCFrame__InvokeMethod *im = fr->msg_invoke_method;
      const char *name = method_name(im->method_id);
      if (im->service_id != CONSUMER_ID || !name ||
          !tg_authz_allows(role, name))
        __builtin_trap();
      if (!strcmp(name, "Detach") || !strcmp(name, "Attach"))
        check_key(f, im->args_proto.data, im->args_proto.len,
                  name[0] == 'D');
    } else {
      __builtin_trap();
    }
  }
  tg_ipc_frame_free(fr);
}

static void upstream_frame(tg_relay_filter_t *f, const uint8_t *p, size_t n) {
  tg_relay_verdict_t v;
  tg_buf_t out;
  tg_buf_init(&out, 0);
  static tg_relay_filter_t before;
  before = *f;
  tg_relay_filter_upstream(f, p, n, &out, &v);
  if (v.action != TG_RELAY_FORWARD && v.action != TG_RELAY_DROP)
    __builtin_trap();
  if (v.action == TG_RELAY_FORWARD && !was_in_flight(&before, v.request_id))
    __builtin_trap();
  check_ids_unique(f);
  /* A rewritten reply is whole frames the client can decode. */
  if (tg_buf_size(&out) > 0) {
    if (v.action != TG_RELAY_FORWARD ||
        tg_buf_size(&out) < TG_IPC_FRAME_HEADER_SIZE)
      __builtin_trap();
    tg_ipc_frame_t *fr =
        tg_ipc_frame_unpack(tg_buf_begin(&out) + TG_IPC_FRAME_HEADER_SIZE,
                            tg_buf_size(&out) - TG_IPC_FRAME_HEADER_SIZE);
    if (!fr) __builtin_trap();
    tg_ipc_frame_free(fr);
  }
  tg_buf_free(&out);
}

static void end_of_link(tg_relay_filter_t *f, tg_buf_t *out) {
  char key[300];
  tg_buf_reset(out);
  int rv = tg_relay_filter_detach_on_drop(f, out, key, sizeof(key));
  if (rv < 0) return;
  tg_ipc_frame_t *fr = NULL;
  if (check_frames(out, &fr) != (size_t)rv) __builtin_trap();
  if (fr) {
    const Perfetto__Protos__IPCFrame__InvokeMethod *im = fr->msg_invoke_method;
    const char *name = im ? method_name(im->method_id) : NULL;
    if (!name || strcmp(name, "Detach")) __builtin_trap();
    check_key(f, im->args_proto.data, im->args_proto.len, true);
    tg_ipc_frame_free(fr);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const tg_relay_host_info_t host = {.hostname = "fuzz",
                                            .machine_id = "m",
                                            .kernel = "Linux",
                                            .boot_id = "b",
                                            .num_cpus = 1};
  static tg_relay_filter_t fo, fr, fn; /* observe, record, no role */
  static uint8_t setup[2048];
  tg_buf_t out;
  tg_buf_init(&out, 0);
  tg_relay_filter_init(&fo, "bob", &host);
  tg_relay_filter_init(&fr, "alice", &host);
  tg_relay_filter_init(&fn, "mallory", &host);
  tg_relay_filter_set_service_instance(&fr, "pidfs.4242"); /* GetHostInfo */
  tg_relay_filter_t *all[3] = {&fo, &fr, &fn};
  const tg_authz_role_t roles[3] = {TG_ROLE_OBSERVE, TG_ROLE_RECORD,
                                    TG_ROLE_NONE};
  size_t nb = bind_consumer(setup);
  size_t nr = bind_reply(setup + nb);
  for (int i = 0; i < 3; i++) {
    client_frame(all[i], roles[i], setup, nb, &out);
    upstream_frame(all[i], setup + nb, nr);
    if (!all[i]->consumer_bound) __builtin_trap();
  }

  size_t off = 0;
  while (size - off >= 3) {
    uint8_t dir = data[off];
    size_t len = (size_t)data[off + 1] | ((size_t)data[off + 2] << 8);
    off += 3;
    if (len > size - off) len = size - off;
    /* An exact-size copy, so a read past the frame is caught. */
    uint8_t *p = malloc(len ? len : 1);
    if (!p) abort();
    memcpy(p, data + off, len);
    off += len;
    for (int i = 0; i < 3; i++) {
      if (dir & 1) upstream_frame(all[i], p, len);
      else client_frame(all[i], roles[i], p, len, &out);
    }
    free(p);
  }
  for (int i = 0; i < 3; i++) end_of_link(all[i], &out);
  tg_buf_free(&out);
  return 0;
}
