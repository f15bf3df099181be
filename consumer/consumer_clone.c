/* CloneSession: a read-only snapshot of a running session into this
 * connection, read with tg_consumer_read_buffers() and ended with
 * tg_consumer_free_buffers() like a session of its own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/consumer_internal.h"
#include "abi/consumer_port_methods.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "tracegate/error.h"

/* The service says no in the response (success = false, error), in an
 * answered call, as Perfetto's does; a relay refuses with a failed call
 * whose response carries its reason. Both end as TG_EREMOTE_FAILED with
 * the reason given. */
static void on_clone_reply(tg__call_t *call, int status, bool has_more,
                           const uint8_t *reply, size_t len) {
  if (has_more) return;
  char msg[TG__MSG_MAX] = "";
  Perfetto__Protos__CloneSessionResponse *r = NULL;
  if (status == 0 || (status == TG_EREMOTE_FAILED && reply && len)) {
    r = (Perfetto__Protos__CloneSessionResponse *)tg__unpack(
        &perfetto__protos__clone_session_response__descriptor, reply, len);
    if (!r && status == 0) status = TG_EPROTO_DECODE;
  }
  const char *reason = r && r->error && r->error[0] ? r->error : NULL;
  if (status == 0 && !(r->has_success && r->success))
    status = TG_EREMOTE_FAILED;
  if (status == TG_EREMOTE_FAILED && reason)
    status = tg__failure(call, status, reason, msg, sizeof(msg));
  else if (status) {
    char why[96];
    snprintf(why, sizeof(why),
             "no reason given; an older service does not support %s",
             tg_cport_name(TG_CPORT_CloneSession));
    status = tg__failure_why(call, status, why, msg, sizeof(msg));
  }
  if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
  tg__call_end_t e = tg__call_end(call);
  e.cb.done(e.c, e.ctx, status, msg);
}

int tg_consumer_clone_session(tg_consumer_t *c,
                              const tg_consumer_clone_args_t *args,
                              tg_consumer_done_cb cb, void *ctx) {
  if (!cb || !args) return -EINVAL;
  Perfetto__Protos__CloneSessionRequest r =
      PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  if (args->unique_session_name) {
    if (!args->unique_session_name[0]) return -EINVAL;
    r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
    r.unique_session_name = (char *)args->unique_session_name;
  } else {
    r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
    r.session_id = args->session_id;
  }
  if (args->for_bugreport) {
    /* As perfetto_cmd sends it: a bugreport's clone skips the filter. */
    r.has_for_bugreport = r.has_skip_trace_filter = 1;
    r.for_bugreport = r.skip_trace_filter = 1;
  }
  if (args->clone_trigger_name) {
    r.clone_trigger_name = (char *)args->clone_trigger_name;
    r.clone_trigger_producer_name = (char *)args->clone_trigger_producer_name;
    r.has_clone_trigger_trusted_producer_uid = 1;
    r.clone_trigger_trusted_producer_uid = args->clone_trigger_producer_uid;
  }
  return tg__call_msg(c, tg_cport_name(TG_CPORT_CloneSession), on_clone_reply,
                      (tg__call_cb_t){.done = cb}, ctx, &r.base);
}
