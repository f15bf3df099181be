/* TracegateConsumer: tracegated's own service on the consumer socket, next
 * to ConsumerPort (proto/tracegate/consumer_lease.proto).
 *
 *   1 SetDisconnectLease {key, lease_ms} -> {lease_ms granted}
 *
 * A consumer that may lose its connection without meaning to (a relay in
 * front of remote clients: a relay crash must not end their sessions) asks
 * that its session outlive the connection for a while: if the connection
 * dies without Detach, the session is detached under |key| as Detach{key}
 * would, and freed when nobody attached it within the lease. The lease is
 * bounded by the service's --session-lease-ms (the default for a request of
 * 0, and the most any request gets). Perfetto's consumers never bind this
 * service, so nothing changes for them; Perfetto's traced does not have it.
 *
 * The per-connection state lives with the connection's other consumer
 * state in consumer_port.c; this file decodes, checks and bounds.
 */
#ifndef TRACEGATE_SERVICE_CONSUMER_LEASE_H
#define TRACEGATE_SERVICE_CONSUMER_LEASE_H

#include "service/service.h"

#define TG_CONSUMER_LEASE_SERVICE_NAME "TracegateConsumer"

void tg__consumer_lease_bind(tg_service_t *svc, tg_ipc_service_def_t *def);

#endif /* TRACEGATE_SERVICE_CONSUMER_LEASE_H */
