/* ConsumerPort's CloneSession (consumer_port_internal.h): a read-only
 * snapshot of a session this consumer's uid owns, taken after a flush of
 * the session if it is running, into a session of the asking connection
 * that it then reads with ReadBuffers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/notice.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "service/consumer_port_internal.h"
#include "service/session_flush.h"

/* |clone| is the snapshot made (NULL on failure): its trace's UUID goes in
 * the reply, as Perfetto's does (perfetto_cmd names the trace by it). */
static void clone_reply(tg_ipc_call_t call, const char *error,
                        const tg_session_t *clone) {
  Perfetto__Protos__CloneSessionResponse r =
      PERFETTO__PROTOS__CLONE_SESSION_RESPONSE__INIT;
  r.has_success = 1;
  r.success = error == NULL;
  r.error = (char *)error;
  if (clone) {
    r.has_uuid_msb = r.has_uuid_lsb = 1;
    r.uuid_msb = clone->readout.uuid_msb;
    r.uuid_lsb = clone->readout.uuid_lsb;
  }
  r.has_was_write_into_file = 1;
  r.was_write_into_file = 0; /* the snapshot is read with ReadBuffers */
  tg_ipc_reply(&call, true, false, &r.base, -1);
}

/* A refusal carries its code before the words, as EnableTracing's do:
 * Perfetto's clients print the error as it comes. */
static void clone_refuse(tg_ipc_call_t call, tg_notice_t n, const char *why) {
  char coded[320];
  clone_reply(call, tg_notice_coded(coded, sizeof(coded), n, why), NULL);
}

/* Takes the snapshot now; the source may have ended or gone meanwhile. */
void tg__cport_clone_finish(tg_consumer_conn_t *c, tg__flush_call_t *fc) {
  tg_session_t *src = tg__session_find(c->svc, fc->clone_src, NULL);
  if (!src) {
    clone_refuse(fc->call, TG_N_SERVICE_NO_SUCH_SESSION,
                 "the session ended before it could be cloned");
    return;
  }
  if (c->session) {
    clone_refuse(fc->call, TG_N_SERVICE_HAS_SESSION,
                 "this connection already has a tracing session");
    return;
  }
  char err[256] = "";
  tg_session_t *s = tg__session_clone(src, c->conn, fc->trigger.name ? &fc->trigger : NULL,
                                      fc->skip_trace_filter, err, sizeof(err));
  if (!s) {
    clone_refuse(fc->call, TG_N_SERVICE_NO_RESOURCES, err);
    return;
  }
  /* Only a clone that succeeded answers the hit: one refused above leaves
   * it, with its time, for the consumer's next try. */
  if (fc->trigger.name)
    tg__session_clone_hit_answered(src, fc->trigger.name,
                                   fc->trigger.producer_name);
  c->session = s;
  clone_reply(fc->call, NULL, s);
}

/* The trigger a CloneSession names (clone_trigger_*), into |out| (owned).
 * A request without the trigger's time (tracegate's CLI: our
 * ObservableEvents carry none) takes it, and the delay, from the hit the
 * service told for |src|, so that the snapshot's clone_snapshot_trigger
 * packet still says what the trigger packet said. The hit stays until a
 * clone succeeds (tg__cport_clone_finish). */
static int clone_trigger_of(tg_session_t *src,
                            const Perfetto__Protos__CloneSessionRequest *req,
                            tg_trigger_info_t *out) {
  memset(out, 0, sizeof(*out));
  if (!req->clone_trigger_name || !req->clone_trigger_name[0]) return 0;
  const tg_trigger_info_t *hit = tg__session_clone_hit_find(
      src, req->clone_trigger_name, req->clone_trigger_producer_name);
  out->name = strdup(req->clone_trigger_name);
  out->producer_name = req->clone_trigger_producer_name
                           ? strdup(req->clone_trigger_producer_name) : NULL;
  out->producer_uid = req->has_clone_trigger_trusted_producer_uid
                          ? (uid_t)req->clone_trigger_trusted_producer_uid : 0;
  /* A time of 0 is none: a client that copies the hit's fields into its
   * request sends 0 for those our CloneTriggerHit does not carry. Time
   * and delay then both come from the same place. */
  bool from_req = req->has_clone_trigger_boot_time_ns &&
                  req->clone_trigger_boot_time_ns != 0;
  if (from_req) {
    out->boot_time_ns = req->clone_trigger_boot_time_ns;
    out->delay_ms =
        req->has_clone_trigger_delay_ms ? req->clone_trigger_delay_ms : 0;
  } else if (hit) {
    out->boot_time_ns = hit->boot_time_ns;
    out->delay_ms = hit->delay_ms;
  }
  if (!out->name || (req->clone_trigger_producer_name && !out->producer_name)) {
    tg__trigger_info_free(out);
    return -ENOMEM;
  }
  return 0;
}

/* Perfetto's kBugreportSessionId: "the session a bugreport takes". */
#define BUGREPORT_SESSION_ID UINT64_MAX

/* Why a CloneSession is refused: a code and its words. */
typedef struct clone_refusal {
  tg_notice_t code;
  const char *why; /* NULL: not refused */
} clone_refusal_t;

/* The session a CloneSession names, or why there is none. */
static tg_session_t *clone_source(tg_service_t *svc, tg_ipc_call_t call,
                                  const Perfetto__Protos__CloneSessionRequest *req,
                                  clone_refusal_t *refusal) {
  bool by_id = req->selector_case ==
               PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
  bool by_name = req->selector_case ==
                 PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
  bool for_bugreport = req->has_for_bugreport && req->for_bugreport;
  uid_t uid = call.conn->chan.peer_uid;
  tg_session_t *src = NULL;
  /* perfetto --save-for-bugreport asks for kBugreportSessionId; a
   * for_bugreport request naming no session means the same. */
  if ((by_id && req->session_id == BUGREPORT_SESSION_ID) ||
      (for_bugreport && !by_id && !by_name)) {
    src = tg__session_find_for_bugreport(svc, uid);
    if (!src)
      *refusal = (clone_refusal_t){
          TG_N_SERVICE_NO_BUGREPORT_SESSION,
          "No tracing sessions eligible for bugreport found"};
    return src;
  }
  if (by_name)
    src = tg__session_find(svc, 0, req->unique_session_name ? req->unique_session_name : "");
  else if (by_id)
    src = tg__session_find(svc, req->session_id, NULL);
  else {
    *refusal = (clone_refusal_t){
        TG_N_SERVICE_REQUEST_INVALID,
        "session_id or unique_session_name: one is required"};
    return NULL;
  }
  /* Someone else's session is as good as absent: its id says nothing. */
  if (!src || !tg__session_clone_allowed(src, uid)) {
    *refusal = (clone_refusal_t){TG_N_SERVICE_NO_SUCH_SESSION,
                                 "tracing session not found"};
    return NULL;
  }
  return src;
}

/* CloneSession: a read-only snapshot of a session this consumer's uid owns,
 * after a flush of the session if it is running. */
void tg__cport_clone_session(tg_consumer_conn_t *c, tg_ipc_call_t call,
                             const void *arg) {
  const Perfetto__Protos__CloneSessionRequest *req = arg;
  tg_service_t *svc = c->svc;
  clone_refusal_t refusal = {TG_N_NONE, NULL};
  tg_session_t *src = NULL;
  if (c->session)
    refusal = (clone_refusal_t){
        TG_N_SERVICE_HAS_SESSION,
        "this connection already has a tracing session"};
  else
    src = clone_source(svc, call, req, &refusal);
  tg__flush_call_t *fc = refusal.why ? NULL : calloc(1, sizeof(*fc));
  if (!refusal.why && (!fc || clone_trigger_of(src, req, &fc->trigger) < 0))
    refusal = (clone_refusal_t){TG_N_SERVICE_NO_RESOURCES, "out of memory"};
  if (fc) fc->skip_trace_filter = req->has_skip_trace_filter && req->skip_trace_filter;
  if (refusal.why) {
    if (fc) tg__flush_call_free(fc);
    clone_refuse(call, refusal.code, refusal.why);
    return;
  }
  fc->call = call;
  fc->clone = true;
  fc->clone_src = src->id;
  if (src->state != TG_SESSION_STARTED) {
    tg__cport_clone_finish(c, fc);
    tg__flush_call_free(fc);
    return;
  }
  /* Listed first: the flush may complete before tg__session_flush returns. */
  tg_list_insert_tail(&c->flush_calls, &fc->node);
  tg__session_flush(src, 0, (uint64_t)(uintptr_t)fc);
}
