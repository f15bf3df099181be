/* ConsumerPort's queries about the whole service (QueryServiceState,
 * QueryCapabilities), called by consumer_port.c's dispatcher once the
 * request decoded.
 *
 * QueryServiceState is a stream, as in Perfetto: replies of at most one
 * frame each, all but the last with has_more; every reply's service_state
 * is a TracingServiceState on its own, and their concatenation (what
 * clients decode, merging them) is the whole state. A data source's
 * ds_descriptor goes out as the bytes its producer registered.
 *
 * Owns: the state of one paused QueryServiceState per consumer connection
 * (tg_state_query_t, kept in the connection by consumer_port.c). Must
 * never change the service, a producer or a session.
 */
#ifndef TRACEGATE_SERVICE_CONSUMER_QUERY_H
#define TRACEGATE_SERVICE_CONSUMER_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb/ipc/consumer_port.pb-c.h"
#include "service/service.h"

/* A QueryServiceState whose data sources did not all go out: the
 * connection's output passed its high-water mark (a consumer that reads
 * slowly), and the stream resumes when it drains, at the producer of
 * serial |next_serial| (or the next one still connected) and its data
 * source |next_ds|. What changed meanwhile shows: the rest of the state
 * is read when it is sent. */
typedef struct tg_state_query {
  bool paused;
  tg_ipc_call_t call; /* valid while the connection is */
  uint64_t next_serial;
  size_t next_ds;
} tg_state_query_t;

/* |q| is the connection's; a call while it is paused fails. |req| is
 * borrowed for the call (consumer_port.c decoded it). */
void tg__consumer_query_service_state(
    tg_service_t *svc, tg_state_query_t *q, tg_ipc_call_t call,
    const Perfetto__Protos__QueryServiceStateRequest *req);
/* The connection of a paused |q| drained: sends more of its state. */
void tg__consumer_query_resume(tg_service_t *svc, tg_state_query_t *q);

void tg__consumer_query_capabilities(tg_service_t *svc, tg_ipc_call_t call);

#endif /* TRACEGATE_SERVICE_CONSUMER_QUERY_H */
