/* ConsumerPort: the consumer socket's methods.
 *
 * Owns: the consumer connections (tg_consumer_t) and the calls they wait
 * on (EnableTracing, Flush, ReadBuffers, ObserveEvents). Must never write
 * a session's fields: it asks session.h, and hears back through the
 * session observer it installs.
 */
#ifndef TRACEGATE_SERVICE_CONSUMER_PORT_H
#define TRACEGATE_SERVICE_CONSUMER_PORT_H

#include "service/service.h"

void tg__consumer_port_bind(tg_service_t *svc, tg_ipc_service_def_t *def);

#endif /* TRACEGATE_SERVICE_CONSUMER_PORT_H */
