/* ConsumerPort: the consumer socket's methods.
 *
 * Owns: the consumer connections (tg_consumer_conn_t) and the calls they wait
 * on (EnableTracing, Flush, ReadBuffers, ObserveEvents). Must never write
 * a session's fields: it asks session.h, and hears back through the
 * session observer it installs. The disconnect leases of
 * service/consumer_lease.h are kept here, per connection.
 */
#ifndef TRACEGATE_SERVICE_CONSUMER_PORT_H
#define TRACEGATE_SERVICE_CONSUMER_PORT_H

#include "service/service.h"

void tg__consumer_port_bind(tg_service_t *svc, tg_ipc_service_def_t *def);

/* TracegateConsumer.SetDisconnectLease for |call|'s connection: if it dies
 * without Detach while it has a session, the session is detached under
 * |key| (copied; "" clears the lease) and kept for |lease_ms| (> 0, already
 * bounded by the caller). Returns 0, -EINVAL (key too long), -ENOMEM. */
int tg__consumer_port_set_lease(tg_service_t *svc, tg_ipc_call_t call,
                                const char *key, uint64_t lease_ms);

/* The on_disconnect of every service bound on the consumer socket: the
 * first one to run for a connection cleans it up, the others find nothing
 * left to do. */
void tg__consumer_port_disconnect(void *ctx, tg_ipc_host_conn_t *conn);

#endif /* TRACEGATE_SERVICE_CONSUMER_PORT_H */
