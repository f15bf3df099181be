/* ConsumerPort's session control (consumer_port_internal.h):
 * EnableTracing, StartTracing, DisableTracing, FreeBuffers, Flush and
 * ChangeTraceConfig, and the session observer EnableTracing installs,
 * through which a session tells its consumers what happened to it. This
 * file never writes a session's fields: it asks session.h.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pb/common/observable_events.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "common/log.h"
#include "common/notice.h"
#include "service/consumer_port_internal.h"
#include "service/session_flush.h"

static void send_event(tg_consumer_conn_t *c,
                       const Perfetto__Protos__ObservableEvents *ev) {
  Perfetto__Protos__ObserveEventsResponse r =
      PERFETTO__PROTOS__OBSERVE_EVENTS_RESPONSE__INIT;
  r.events = (Perfetto__Protos__ObservableEvents *)ev;
  tg_ipc_reply(&c->observe_call, true, true, &r.base, -1);
}

/* Sends |ev| to every consumer observing |s| for the event type whose
 * bit in ObserveEvents' mask is |bit|. The event is the same for all. */
static void send_to_observers(tg_service_t *svc, const tg_session_t *s,
                              unsigned bit,
                              const Perfetto__Protos__ObservableEvents *ev) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->consumers) {
    tg_consumer_conn_t *c = TG_CONTAINER_OF(it, tg_consumer_conn_t, node);
    if (c->observing && c->session == s && (c->observe_mask & (1u << bit)))
      send_event(c, ev);
  }
}

static void on_instance_state(tg_session_t *s, const tg_ds_instance_t *inst,
                              void *ctx) {
  Perfetto__Protos__ObservableEvents__DataSourceInstanceStateChange ch =
      PERFETTO__PROTOS__OBSERVABLE_EVENTS__DATA_SOURCE_INSTANCE_STATE_CHANGE__INIT;
  Perfetto__Protos__ObservableEvents__DataSourceInstanceStateChange *pch = &ch;
  ch.producer_name = inst->producer_name;
  ch.data_source_name = inst->name;
  ch.has_state = 1;
  ch.state = inst->state == TG_DS_STARTED
                 ? PERFETTO__PROTOS__OBSERVABLE_EVENTS__DATA_SOURCE_INSTANCE_STATE__DATA_SOURCE_INSTANCE_STATE_STARTED
                 : PERFETTO__PROTOS__OBSERVABLE_EVENTS__DATA_SOURCE_INSTANCE_STATE__DATA_SOURCE_INSTANCE_STATE_STOPPED;
  Perfetto__Protos__ObservableEvents ev = PERFETTO__PROTOS__OBSERVABLE_EVENTS__INIT;
  ev.n_instance_state_changes = 1;
  ev.instance_state_changes = &pch;
  send_to_observers(ctx, s, 1, &ev);
}

static void on_all_started(tg_session_t *s, void *ctx) {
  Perfetto__Protos__ObservableEvents ev = PERFETTO__PROTOS__OBSERVABLE_EVENTS__INIT;
  ev.has_all_data_sources_started = 1;
  ev.all_data_sources_started = 1;
  send_to_observers(ctx, s, 2, &ev);
}

/* Answers EnableTracing: tracing of |s| ended. */
static void reply_disabled(tg_consumer_conn_t *c) {
  c->has_enable_call = false;
  Perfetto__Protos__EnableTracingResponse r =
      PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
  r.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
  r.disabled = 1;
  tg_ipc_reply(&c->enable_call, true, false, &r.base, -1);
}

static void on_ended(tg_session_t *s, void *ctx) {
  tg_service_t *svc = ctx;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->consumers) {
    tg_consumer_conn_t *c = TG_CONTAINER_OF(it, tg_consumer_conn_t, node);
    if (c->has_enable_call && c->enable_session == s) reply_disabled(c);
  }
}

static void on_flush_done(tg_session_t *s, int status, uint64_t cookie,
                          void *ctx) {
  (void)s;
  tg_service_t *svc = ctx;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->consumers) {
    tg_consumer_conn_t *c = TG_CONTAINER_OF(it, tg_consumer_conn_t, node);
    tg_list_t *jt, *jtmp;
    tg_list_foreach_safe(jt, jtmp, &c->flush_calls) {
      tg__flush_call_t *fc = TG_CONTAINER_OF(jt, tg__flush_call_t, node);
      if ((uint64_t)(uintptr_t)fc != cookie) continue;
      tg_list_remove(&fc->node);
      if (fc->clone) {
        /* A producer that did not ack in time only misses the snapshot
         * with what it had not committed, as in Perfetto. */
        tg__cport_clone_finish(c, fc);
      } else {
        Perfetto__Protos__FlushResponse r = PERFETTO__PROTOS__FLUSH_RESPONSE__INIT;
        tg_ipc_reply(&fc->call, status == 0, false, &r.base, -1);
      }
      tg__flush_call_free(fc);
      return;
    }
  }
}

/* CLONE_SNAPSHOT: the session's consumer, if it observes
 * TYPE_CLONE_TRIGGER_HIT, is told to clone it (perfetto_cmd then does). */
static void on_clone_trigger(tg_session_t *s, const tg_trigger_info_t *t,
                             void *ctx) {
  Perfetto__Protos__ObservableEvents__CloneTriggerHit hit =
      PERFETTO__PROTOS__OBSERVABLE_EVENTS__CLONE_TRIGGER_HIT__INIT;
  hit.has_tracing_session_id = 1;
  hit.tracing_session_id = (int64_t)s->id;
  hit.trigger_name = (char *)t->name;
  hit.producer_name = (char *)t->producer_name;
  hit.has_producer_uid = 1;
  hit.producer_uid = (int32_t)t->producer_uid;
  Perfetto__Protos__ObservableEvents ev = PERFETTO__PROTOS__OBSERVABLE_EVENTS__INIT;
  ev.clone_trigger_hit = &hit;
  send_to_observers(ctx, s, 4, &ev);
}

/* A ReadBuffers still in progress ends at its next drain (no session). */
static void on_freed(tg_session_t *s, void *ctx) {
  tg_service_t *svc = ctx;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->consumers) {
    tg_consumer_conn_t *c = TG_CONTAINER_OF(it, tg_consumer_conn_t, node);
    if (c->session == s) c->session = NULL;
    if (c->enable_session == s) {
      c->enable_session = NULL;
      c->has_enable_call = false;
    }
  }
}

/* |error| NULL: a refusal already coded (tg__session_create's). */
static void enable_reply_error(tg_ipc_call_t call, tg_notice_t n,
                               const char *error) {
  char coded[320];
  if (n != TG_N_NONE) error = tg_notice_coded(coded, sizeof(coded), n, error);
  Perfetto__Protos__EnableTracingResponse r =
      PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
  r.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
  r.disabled = 1;
  r.error = (char *)error;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}

/* Whether a consumer waits for |s| to end (EnableTracing). */
static bool enable_call_pending(tg_service_t *svc, const tg_session_t *s) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->consumers) {
    const tg_consumer_conn_t *c = TG_CONTAINER_OF(it, tg_consumer_conn_t, node);
    if (c->has_enable_call && c->enable_session == s) return true;
  }
  return false;
}

/* The write_into_file descriptor, if sent with the call, is taken here; a
 * request the dispatcher refused leaves it to the channel, which closes
 * the descriptors no handler claimed. */
void tg__cport_enable_tracing(tg_consumer_conn_t *c, tg_ipc_call_t call,
                              const void *arg) {
  const tg__enable_args_t *req = arg;
  tg_service_t *svc = c->svc;
  int fd = tg_ipc_chan_take_fd(&call.conn->chan);
  if (req->attach_notification_only) {
    /* After Attach: the consumer wants the end-of-tracing notification. */
    if (fd >= 0) close(fd);
    if (!c->session || enable_call_pending(svc, c->session)) {
      enable_reply_error(call, TG_N_SERVICE_REQUEST_INVALID,
                         "attach_notification_only: no attached session");
      return;
    }
    c->has_enable_call = true;
    c->enable_call = call;
    c->enable_session = c->session;
    if (c->session->state == TG_SESSION_DISABLED) reply_disabled(c);
    return;
  }
  if (c->session || !req->has_config) {
    if (fd >= 0) close(fd);
    if (c->session)
      enable_reply_error(call, TG_N_SERVICE_HAS_SESSION,
                         "this connection already has a tracing session");
    else
      enable_reply_error(call, TG_N_SERVICE_REQUEST_INVALID,
                         "trace_config: missing");
    return;
  }
  char err[512] = "";
  static const tg_session_observer_t observer = {
      .instance_state = on_instance_state,
      .all_started = on_all_started,
      .ended = on_ended,
      .flush_done = on_flush_done,
      .clone_trigger = on_clone_trigger,
      .freed = on_freed,
  };
  tg_session_observer_t obs = observer;
  obs.ctx = svc;
  /* The session owns |fd| from here on, whatever the outcome. */
  tg_session_t *s = tg__session_create(svc, req->config, req->config_len, fd,
                                       call.conn, &obs, err, sizeof(err));
  if (!s) {
    TG_INFO("consumer pid %d: config refused: %s", (int)call.conn->chan.peer_pid, err);
    enable_reply_error(call, TG_N_NONE, err);
    return;
  }
  c->session = s;
  c->has_enable_call = true;
  c->enable_call = call;
  c->enable_session = s;
  tg__session_enable(s);
}

void tg__cport_start_tracing(tg_consumer_conn_t *c, tg_ipc_call_t call,
                             const void *req) {
  (void)req;
  if (!c->session || c->session->state != TG_SESSION_CONFIGURED) {
    tg__cport_fail(call);
    return;
  }
  tg__session_start(c->session);
  Perfetto__Protos__StartTracingResponse r = PERFETTO__PROTOS__START_TRACING_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}

void tg__cport_disable_tracing(tg_consumer_conn_t *c, tg_ipc_call_t call,
                               const void *req) {
  (void)req;
  if (!c->session) {
    tg__cport_fail(call);
    return;
  }
  Perfetto__Protos__DisableTracingResponse r =
      PERFETTO__PROTOS__DISABLE_TRACING_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
  tg__session_disable(c->session);
}

void tg__cport_free_buffers(tg_consumer_conn_t *c, tg_ipc_call_t call,
                            const void *req) {
  (void)req;
  if (!c->session) {
    tg__cport_fail(call);
    return;
  }
  tg_session_t *s = c->session;
  c->session = NULL;
  c->reading = false;
  Perfetto__Protos__FreeBuffersResponse r = PERFETTO__PROTOS__FREE_BUFFERS_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
  tg__session_free(s);
}

void tg__cport_flush(tg_consumer_conn_t *c, tg_ipc_call_t call,
                     const void *arg) {
  const Perfetto__Protos__FlushRequest *req = arg;
  if (!c->session || c->session->state != TG_SESSION_STARTED) {
    tg__cport_fail(call);
    return;
  }
  uint32_t timeout = req->has_timeout_ms ? req->timeout_ms : 0;
  tg__flush_call_t *fc = malloc(sizeof(*fc));
  if (!fc) {
    tg__cport_fail(call);
    return;
  }
  memset(fc, 0, sizeof(*fc));
  fc->call = call;
  /* Listed first: the flush may complete before tg__session_flush returns. */
  tg_list_insert_tail(&c->flush_calls, &fc->node);
  tg__session_flush(c->session, timeout, (uint64_t)(uintptr_t)fc);
}

/* Only the producer filters of data sources may change: the service
 * re-matches producers, sets up new instances and leaves the rest. */
void tg__cport_change_trace_config(tg_consumer_conn_t *c, tg_ipc_call_t call,
                                   const void *arg) {
  const Perfetto__Protos__ChangeTraceConfigRequest *req = arg;
  if (!c->session || !req->trace_config) {
    tg__cport_fail(call);
    return;
  }
  int rv = tg__session_change_filters(c->session, req->trace_config);
  if (rv < 0) {
    tg__cport_fail(call);
    return;
  }
  Perfetto__Protos__ChangeTraceConfigResponse r =
      PERFETTO__PROTOS__CHANGE_TRACE_CONFIG_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}
