/* The relay's own calls to the service, on a client connection's upstream,
 * under request ids no client may use (TG_RELAY_OWN_REQUEST_ID):
 *
 *   link drops with a keyed session -> Detach{"<identity>/<key>"}
 *   SetSessionKey                   -> BindService "TracegateConsumer",
 *                                      then SetDisconnectLease
 *                                      {"<identity>/<key>", lease_ms}
 *
 * The lease makes tracegated keep the session if the relay itself dies
 * (a crash, a restart): the connection to the service then ends without
 * Detach. Perfetto's traced has no TracegateConsumer; the relay then says
 * once that a relay crash ends the session, and asks nothing more.
 *
 * This file builds the calls and reads their replies once the frame
 * checker has matched them (tg_relay_filter_upstream(), the only place a
 * reply is matched to its request); their replies are the relay's and
 * never reach the client. Pure, like the rest of the frame checker: the
 * bridge sends the frames and logs the outcome.
 */
#ifndef TRACEGATE_RELAY_OWN_CALLS_H
#define TRACEGATE_RELAY_OWN_CALLS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "relay/frame_filter.h"

/* After TG_RELAY_EFFECT_SESSION_KEY_SET and after each
 * TG_RELAY_EFFECT_OWN_LEASE_REPLY: appends to |out| what the service must
 * be told next so that the session, once the connection to the service
 * dies without Detach, is detached under "<identity>/<key>" and kept for
 * |lease_ms| (0: the service's default): first BindService
 * "TracegateConsumer", then SetDisconnectLease. Returns 1 when frames were
 * appended, 0 when there is nothing to send (no key, lease already set for
 * it, a call in flight, or the service has no such service), or -ENOMEM. */
int tg_relay_filter_lease_frames(tg_relay_filter_t *f, uint64_t lease_ms,
                                 tg_buf_t *out);

/* When the client's link drops: if the connection has a tracing session,
 * a resume key and a bound ConsumerPort with a Detach method, appends
 * InvokeMethod Detach{"<identity>/<key>"} (request id
 * TG_RELAY_DETACH_REQUEST_ID) to |out|, writes the namespaced key into
 * |key| and returns 1. Its reply comes as
 * TG_RELAY_EFFECT_OWN_DETACH_REPLY. Returns 0 when there is nothing to
 * detach, or a negative error. */
int tg_relay_filter_detach_on_drop(tg_relay_filter_t *f, tg_buf_t *out,
                                   char *key, size_t keycap);

#endif /* TRACEGATE_RELAY_OWN_CALLS_H */
