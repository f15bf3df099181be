/* TracegateConsumer.SetDisconnectLease: decode, bound, hand to the port. */
#include "service/consumer_lease.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "pb/tracegate/consumer_lease.pb-c.h"
#include "service/consumer_port.h"

static void m_set_disconnect_lease(void *ctx, tg_ipc_call_t call,
                                   const uint8_t *args, size_t len) {
  tg_service_t *svc = ctx;
  Perfetto__Protos__SetDisconnectLeaseRequest *req =
      perfetto__protos__set_disconnect_lease_request__unpack(NULL, len, args);
  if (!req) {
    tg_ipc_reply(&call, false, false, NULL, -1);
    return;
  }
  uint64_t max = svc->opt.session_lease_ms;
  uint64_t granted = req->has_lease_ms && req->lease_ms && req->lease_ms < max
                         ? req->lease_ms
                         : max;
  int rv = tg__consumer_port_set_lease(svc, call, req->key ? req->key : "",
                                       granted);
  if (rv == 0)
    TG_DEBUG("consumer pid %d: disconnect lease %llu ms under key '%s'",
             (int)call.conn->chan.peer_pid, (unsigned long long)granted,
             req->key ? req->key : "");
  perfetto__protos__set_disconnect_lease_request__free_unpacked(req, NULL);
  Perfetto__Protos__SetDisconnectLeaseResponse r =
      PERFETTO__PROTOS__SET_DISCONNECT_LEASE_RESPONSE__INIT;
  r.has_lease_ms = 1;
  r.lease_ms = granted;
  tg_ipc_reply(&call, rv == 0, false, rv == 0 ? &r.base : NULL, -1);
}

static const tg_ipc_method_def_t lease_methods[] = {
    {"SetDisconnectLease", m_set_disconnect_lease},
};

void tg__consumer_lease_bind(tg_service_t *svc, tg_ipc_service_def_t *def) {
  memset(def, 0, sizeof(*def));
  def->name = TG_CONSUMER_LEASE_SERVICE_NAME;
  def->methods = lease_methods;
  def->n_methods = sizeof(lease_methods) / sizeof(lease_methods[0]);
  def->ctx = svc;
  def->on_disconnect = tg__consumer_port_disconnect;
}
