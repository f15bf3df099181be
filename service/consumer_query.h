/* ConsumerPort's queries about the whole service (QueryServiceState,
 * QueryCapabilities), in the shape of IPC method handlers; |ctx| is the
 * tg_service_t.
 *
 * Owns: nothing; it reads producers and sessions to describe them. Must
 * never change the service, a producer or a session.
 */
#ifndef TRACEGATE_SERVICE_CONSUMER_QUERY_H
#define TRACEGATE_SERVICE_CONSUMER_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "service/service.h"

void tg__consumer_query_service_state(void *ctx, tg_ipc_call_t call,
                                      const uint8_t *args, size_t len);
void tg__consumer_query_capabilities(void *ctx, tg_ipc_call_t call,
                                     const uint8_t *args, size_t len);

#endif /* TRACEGATE_SERVICE_CONSUMER_QUERY_H */
