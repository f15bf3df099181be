/* ConsumerPort: the consumer socket's methods.
 *
 * Consumers are trusted (the socket is owner/group only) but still sent
 * garbage-proof replies: every request decodes or fails explicitly. One
 * connection owns at most one session; a consumer that goes away without
 * Detach ends its session, unless it set a disconnect lease
 * (TracegateConsumer.SetDisconnectLease): then the session is detached
 * under the lease's key, as Detach{key} would, and freed only if nobody
 * attaches it before the lease runs out.
 *
 * ReadBuffers streams: packets are serialised straight into the socket's
 * output queue as ReadBuffersResponse slices in frames of at most 128 KiB,
 * with no intermediate copy of the packet bytes; when the peer reads slowly
 * the job pauses at the high-water mark and resumes on drain.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "abi/protocol_limits.h"
#include "abi/ipc_frame.h"
#include "tracegate/pb_wire.h"
#include "pb/common/observable_events.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "common/log.h"
#include "service/consumer_port.h"
#include "service/consumer_query.h"
#include "service/producer_port.h"
#include "service/read_frames.h"
#include "service/readout.h"
#include "service/session.h"
#include "service/session_flush.h"
#include "tracegate/error.h"

/* A Flush or CloneSession call waiting for its session's flush; its
 * address is the flush's cookie. */
typedef struct flush_call {
  tg_list_t node;
  tg_ipc_call_t call;
  /* CloneSession: the snapshot of session |clone_src| is taken once the
   * flush is over, so it holds what producers had written until now. */
  bool clone;
  uint64_t clone_src;
  /* skip_trace_filter: the snapshot is read without the source's filter
   * (perfetto --clone-for-bugreport asks for this). */
  bool skip_trace_filter;
  /* The trigger it is cloned for (owned); no name: none. */
  tg_trigger_info_t trigger;
} flush_call_t;

static void flush_call_free(flush_call_t *fc) {
  tg__trigger_info_free(&fc->trigger);
  free(fc);
}

typedef struct tg_consumer_conn {
  tg_service_t *svc;
  tg_ipc_host_conn_t *conn;
  tg_list_t node;
  tg_session_t *session;
  /* EnableTracing is answered when |enable_session| ends. */
  bool has_enable_call;
  tg_ipc_call_t enable_call;
  tg_session_t *enable_session;
  tg_list_t flush_calls; /* flush_call_t */
  bool observing;
  tg_ipc_call_t observe_call;
  uint32_t observe_mask; /* bit per ObservableEvents.Type */
  bool reading;          /* a ReadBuffers is in progress */
  tg_ipc_call_t read_call;
  uint64_t read_budget;  /* bytes this ReadBuffers may still send */
  /* Owned; made at the first ReadBuffers, when the socket is also set up
   * for streaming (stream_send_buffer). */
  tg_read_frames_t *frames;
  char *lease_key;       /* SetDisconnectLease; NULL when none */
  uint64_t lease_ms;
  tg_state_query_t state_query; /* a QueryServiceState paused for drain */
} tg_consumer_conn_t;

static void fail(tg_ipc_call_t call) { tg_ipc_reply(&call, false, false, NULL, -1); }

static tg_consumer_conn_t *consumer_of(tg_service_t *svc,
                                       tg_ipc_call_t call) {
  tg_consumer_conn_t *c = call.conn->user;
  if (c) return c;
  c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->svc = svc;
  c->conn = call.conn;
  tg_list_init(&c->flush_calls);
  tg_list_insert_tail(&svc->consumers, &c->node);
  call.conn->user = c;
  return c;
}

/* --- the dispatcher ----------------------------------------------------------- */

/* EnableTracingRequest {trace_config = 1, attach_notification_only = 2},
 * read with the field reader: the config bytes go to the session exactly
 * as sent, unknown fields included, without a decode/re-encode round. */
typedef struct enable_args {
  const uint8_t *config; /* into the request's bytes */
  size_t config_len;
  bool has_config;
  bool attach_notification_only;
} enable_args_t;

static int parse_enable_args(const uint8_t *args, size_t len, enable_args_t *out) {
  memset(out, 0, sizeof(*out));
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, args, len);
  int rv;
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 1 && f.type == TG_PB_WT_LEN) {
      /* Repeated occurrences would have to be merged; nobody sends them. */
      if (out->has_config) return -1;
      out->has_config = true;
      out->config = f.data;
      out->config_len = f.size;
    } else if (f.id == 2 && f.type == TG_PB_WT_VARINT) {
      out->attach_notification_only = f.value != 0;
    }
  }
  return rv;
}

/* A method's handler: |c| is the calling connection's, |req| its request,
 * decoded, borrowed for the call (the dispatcher frees it after: a
 * handler copies what it keeps, and none keeps the request itself). */
typedef void (*consumer_handler_fn)(tg_consumer_conn_t *c, tg_ipc_call_t call,
                                    const void *req);

typedef struct consumer_method {
  /* The request's type, unpacked with protobuf-c; NULL: an
   * EnableTracingRequest, read into an enable_args_t. */
  const ProtobufCMessageDescriptor *request;
  consumer_handler_fn handle;
} consumer_method_t;

/* Every ConsumerPort call: a request that does not decode is refused
 * (success = false) before its handler sees it. */
static void dispatch(tg_service_t *svc, tg_ipc_call_t call,
                     const uint8_t *args, size_t len,
                     const consumer_method_t *m) {
  tg_consumer_conn_t *c = consumer_of(svc, call);
  if (!c) {
    fail(call);
    return;
  }
  if (!m->request) {
    enable_args_t req;
    if (parse_enable_args(args, len, &req) < 0) {
      fail(call);
      return;
    }
    m->handle(c, call, &req);
    return;
  }
  ProtobufCMessage *req = protobuf_c_message_unpack(m->request, NULL, len, args);
  if (!req) {
    TG_DEBUG("consumer pid %d: a %s that does not decode; refused",
             (int)call.conn->chan.peer_pid, m->request->name);
    fail(call);
    return;
  }
  m->handle(c, call, req);
  protobuf_c_message_free_unpacked(req, NULL);
}

/* The IPC host's entry for |handler|, whose request is of |descriptor|'s
 * type (NULL: EnableTracing's). */
#define CONSUMER_METHOD(handler, descriptor)                              \
  static void handler##_ipc(void *ctx, tg_ipc_call_t call,               \
                            const uint8_t *args, size_t len) {           \
    static const consumer_method_t m = {(descriptor), handler};          \
    dispatch(ctx, call, args, len, &m);                                  \
  }

/* --- session observer ---------------------------------------------------------- */

static void send_event(tg_consumer_conn_t *c,
                       const Perfetto__Protos__ObservableEvents *ev) {
  Perfetto__Protos__ObserveEventsResponse r =
      PERFETTO__PROTOS__OBSERVE_EVENTS_RESPONSE__INIT;
  r.events = (Perfetto__Protos__ObservableEvents *)ev;
  tg_ipc_reply(&c->observe_call, true, true, &r.base, -1);
}

static void on_instance_state(tg_session_t *s, const tg_ds_instance_t *inst,
                              void *ctx) {
  tg_service_t *svc = ctx;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->consumers) {
    tg_consumer_conn_t *c = TG_CONTAINER_OF(it, tg_consumer_conn_t, node);
    if (!c->observing || c->session != s || !(c->observe_mask & (1u << 1)))
      continue;
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
    send_event(c, &ev);
  }
}

static void on_all_started(tg_session_t *s, void *ctx) {
  tg_service_t *svc = ctx;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->consumers) {
    tg_consumer_conn_t *c = TG_CONTAINER_OF(it, tg_consumer_conn_t, node);
    if (!c->observing || c->session != s || !(c->observe_mask & (1u << 2))) continue;
    Perfetto__Protos__ObservableEvents ev = PERFETTO__PROTOS__OBSERVABLE_EVENTS__INIT;
    ev.has_all_data_sources_started = 1;
    ev.all_data_sources_started = 1;
    send_event(c, &ev);
  }
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

static void clone_finish(tg_consumer_conn_t *c, flush_call_t *fc);

static void on_flush_done(tg_session_t *s, int status, uint64_t cookie,
                          void *ctx) {
  (void)s;
  tg_service_t *svc = ctx;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->consumers) {
    tg_consumer_conn_t *c = TG_CONTAINER_OF(it, tg_consumer_conn_t, node);
    tg_list_t *jt, *jtmp;
    tg_list_foreach_safe(jt, jtmp, &c->flush_calls) {
      flush_call_t *fc = TG_CONTAINER_OF(jt, flush_call_t, node);
      if ((uint64_t)(uintptr_t)fc != cookie) continue;
      tg_list_remove(&fc->node);
      if (fc->clone) {
        /* A producer that did not ack in time only misses the snapshot
         * with what it had not committed, as in Perfetto. */
        clone_finish(c, fc);
      } else {
        Perfetto__Protos__FlushResponse r = PERFETTO__PROTOS__FLUSH_RESPONSE__INIT;
        tg_ipc_reply(&fc->call, status == 0, false, &r.base, -1);
      }
      flush_call_free(fc);
      return;
    }
  }
}

/* CLONE_SNAPSHOT: the session's consumer, if it observes
 * TYPE_CLONE_TRIGGER_HIT, is told to clone it (perfetto_cmd then does). */
static void on_clone_trigger(tg_session_t *s, const tg_trigger_info_t *t,
                             void *ctx) {
  tg_service_t *svc = ctx;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->consumers) {
    tg_consumer_conn_t *c = TG_CONTAINER_OF(it, tg_consumer_conn_t, node);
    if (!c->observing || c->session != s || !(c->observe_mask & (1u << 4))) continue;
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
    send_event(c, &ev);
  }
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

/* --- ReadBuffers ------------------------------------------------------------- */

/* Adds one packet to the ReadBuffers reply; stops at the budget, and as
 * soon as the socket did not take a frame whole (on_drain resumes). */
static int frame_emit(void *ctx, const uint8_t *const *pieces,
                      const size_t *lens, unsigned n, unsigned n_stable,
                      size_t total) {
  tg_consumer_conn_t *c = ctx;
  if (tg_read_frames_add(c->frames, pieces, lens, n, n_stable, total) < 0)
    return 1;
  if (c->read_budget <= total) {
    c->read_budget = 0;
    return 1;
  }
  c->read_budget -= total;
  return tg_ipc_chan_congested(&c->conn->chan);
}

static void read_job_run(tg_consumer_conn_t *c) {
  tg_session_t *s = c->session;
  tg_read_frames_begin(c->frames, &c->conn->chan, c->read_call.request_id);
  int more = s ? tg__readout_drain(s, frame_emit, c) : 0;
  int err = tg_read_frames_end(c->frames);
  if (!err && more < 0) err = more;
  if (err) {
    /* A consumer that goes away in the middle of a read (Ctrl-C) is no
     * failure of ours. */
    if (err == -EPIPE || err == -ECONNRESET)
      TG_INFO("consumer pid %d went away during ReadBuffers",
              (int)c->conn->chan.peer_pid);
    else
      TG_WARN("consumer pid %d: ReadBuffers failed: %s",
              (int)c->conn->chan.peer_pid, tg_strerror(err));
    c->reading = false;
    tg_ipc_host_conn_close(c->conn, err);
    return;
  }
  /* Congested: on_drain resumes the job. */
  if (more && c->read_budget > 0 && tg_ipc_chan_congested(&c->conn->chan)) return;
  c->reading = false;
  Perfetto__Protos__ReadBuffersResponse r = PERFETTO__PROTOS__READ_BUFFERS_RESPONSE__INIT;
  tg_ipc_reply(&c->read_call, true, false, &r.base, -1);
}

static void on_consumer_drain(void *ctx, tg_ipc_host_conn_t *conn) {
  tg_consumer_conn_t *c = conn->user;
  if (c && c->reading) read_job_run(c);
  /* A read-out that failed closes the connection (its user is cleared
   * only later, by the close callback): nothing more is sent on it. */
  if (c && c->state_query.paused && tg_ipc_chan_is_open(&conn->chan))
    tg__consumer_query_resume(ctx, &c->state_query);
}

/* The default send buffer of a UNIX socket (~208 KiB) makes a streaming
 * read-out a ping-pong: this loop fills it, waits, the reader (a relay, a
 * tunnel, the CLI) takes it, waits, neither end busy (docs/operations.md
 * has the figures). Asked for once per consumer, at its first
 * ReadBuffers: consumers that only control sessions keep the default. */
#define STREAM_SEND_BUFFER (4 << 20)

static void stream_send_buffer(tg_consumer_conn_t *c) {
  int got = tg_ipc_chan_set_send_buffer(&c->conn->chan, STREAM_SEND_BUFFER);
  if (got < 0) {
    TG_WARN("consumer pid %d: cannot set the socket's send buffer: %s",
            (int)c->conn->chan.peer_pid, tg_strerror(got));
  } else if (got < STREAM_SEND_BUFFER && !c->svc->sndbuf_cap_logged) {
    /* Once per run: the cap is the machine's, not this consumer's. */
    c->svc->sndbuf_cap_logged = true;
    TG_INFO("consumer sockets get a %d KiB send buffer, not %d: "
            "net.core.wmem_max caps it, and read-outs stream slower "
            "(docs/operations.md, 'Streaming read-outs')",
            got / 1024, STREAM_SEND_BUFFER / 1024);
  }
}

static void m_read_buffers(tg_consumer_conn_t *c, tg_ipc_call_t call,
                           const void *req) {
  (void)req;
  if (!c->session || c->reading || call.drop_reply) {
    fail(call);
    return;
  }
  if (!c->frames) {
    c->frames = tg_read_frames_new();
    if (!c->frames) {
      fail(call);
      return;
    }
    /* Frames go out from the trace buffers in place, as long as nothing is
     * queued before them: the read-out stops at the first frame the socket
     * does not take whole and resumes once the queue is empty, with the
     * socket's own buffer as the only queue. */
    tg_ipc_chan_set_high_water(&c->conn->chan, 0);
    stream_send_buffer(c);
  }
  c->reading = true;
  c->read_call = call;
  /* Bounded: with producers still writing, a read must end some time. */
  uint64_t budget = 1u << 20;
  for (size_t i = 0; i < c->session->n_buffers; i++)
    budget += tg_trace_buffer_size(c->session->buffers[i].tb);
  c->read_budget = budget;
  read_job_run(c);
}
CONSUMER_METHOD(m_read_buffers, &perfetto__protos__read_buffers_request__descriptor)

/* --- session control ------------------------------------------------------------ */

static void enable_reply_error(tg_ipc_call_t call, const char *error) {
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
static void m_enable_tracing(tg_consumer_conn_t *c, tg_ipc_call_t call,
                             const void *arg) {
  const enable_args_t *req = arg;
  tg_service_t *svc = c->svc;
  int fd = tg_ipc_chan_take_fd(&call.conn->chan);
  if (req->attach_notification_only) {
    /* After Attach: the consumer wants the end-of-tracing notification. */
    if (fd >= 0) close(fd);
    if (!c->session || enable_call_pending(svc, c->session)) {
      enable_reply_error(call, "attach_notification_only: no attached session");
      return;
    }
    c->has_enable_call = true;
    c->enable_call = call;
    c->enable_session = c->session;
    if (c->session->state == TG_SESSION_DISABLED) reply_disabled(c);
    return;
  }
  const char *refusal = c->session ? "this connection already has a tracing session"
                        : !req->has_config ? "trace_config: missing"
                                          : NULL;
  if (refusal) {
    if (fd >= 0) close(fd);
    enable_reply_error(call, refusal);
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
    enable_reply_error(call, err);
    return;
  }
  c->session = s;
  c->has_enable_call = true;
  c->enable_call = call;
  c->enable_session = s;
  tg__session_enable(s);
}
CONSUMER_METHOD(m_enable_tracing, NULL)

static void m_start_tracing(tg_consumer_conn_t *c, tg_ipc_call_t call,
                            const void *req) {
  (void)req;
  if (!c->session || c->session->state != TG_SESSION_CONFIGURED) {
    fail(call);
    return;
  }
  tg__session_start(c->session);
  Perfetto__Protos__StartTracingResponse r = PERFETTO__PROTOS__START_TRACING_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}
CONSUMER_METHOD(m_start_tracing, &perfetto__protos__start_tracing_request__descriptor)

static void m_disable_tracing(tg_consumer_conn_t *c, tg_ipc_call_t call,
                              const void *req) {
  (void)req;
  if (!c->session) {
    fail(call);
    return;
  }
  Perfetto__Protos__DisableTracingResponse r =
      PERFETTO__PROTOS__DISABLE_TRACING_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
  tg__session_disable(c->session);
}
CONSUMER_METHOD(m_disable_tracing, &perfetto__protos__disable_tracing_request__descriptor)

static void m_free_buffers(tg_consumer_conn_t *c, tg_ipc_call_t call,
                           const void *req) {
  (void)req;
  if (!c->session) {
    fail(call);
    return;
  }
  tg_session_t *s = c->session;
  c->session = NULL;
  c->reading = false;
  Perfetto__Protos__FreeBuffersResponse r = PERFETTO__PROTOS__FREE_BUFFERS_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
  tg__session_free(s);
}
CONSUMER_METHOD(m_free_buffers, &perfetto__protos__free_buffers_request__descriptor)

static void m_flush(tg_consumer_conn_t *c, tg_ipc_call_t call,
                    const void *arg) {
  const Perfetto__Protos__FlushRequest *req = arg;
  if (!c->session || c->session->state != TG_SESSION_STARTED) {
    fail(call);
    return;
  }
  uint32_t timeout = req->has_timeout_ms ? req->timeout_ms : 0;
  flush_call_t *fc = malloc(sizeof(*fc));
  if (!fc) {
    fail(call);
    return;
  }
  memset(fc, 0, sizeof(*fc));
  fc->call = call;
  /* Listed first: the flush may complete before tg__session_flush returns. */
  tg_list_insert_tail(&c->flush_calls, &fc->node);
  tg__session_flush(c->session, timeout, (uint64_t)(uintptr_t)fc);
}
CONSUMER_METHOD(m_flush, &perfetto__protos__flush_request__descriptor)

/* Only the producer filters of data sources may change: the service
 * re-matches producers, sets up new instances and leaves the rest. */
static void m_change_trace_config(tg_consumer_conn_t *c, tg_ipc_call_t call,
                                  const void *arg) {
  const Perfetto__Protos__ChangeTraceConfigRequest *req = arg;
  if (!c->session || !req->trace_config) {
    fail(call);
    return;
  }
  int rv = tg__session_change_filters(c->session, req->trace_config);
  if (rv < 0) {
    fail(call);
    return;
  }
  Perfetto__Protos__ChangeTraceConfigResponse r =
      PERFETTO__PROTOS__CHANGE_TRACE_CONFIG_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}
CONSUMER_METHOD(m_change_trace_config,
                &perfetto__protos__change_trace_config_request__descriptor)

/* --- detach / attach ------------------------------------------------------------- */

static void m_detach(tg_consumer_conn_t *c, tg_ipc_call_t call,
                     const void *arg) {
  const Perfetto__Protos__DetachRequest *req = arg;
  bool ok = c->session && req->key && req->key[0] &&
            strlen(req->key) <= TG_DETACH_KEY_MAX;
  /* Fails when the key is taken. */
  tg_session_t *s = ok ? c->session : NULL;
  if (ok) ok = tg__session_detach(s, req->key) == 0;
  /* A Detach under the lease's own key (a relay detaching a session whose
   * client link dropped) is bounded by the same lease. */
  if (ok && c->lease_key && !strcmp(c->lease_key, req->key))
    tg__session_lease_start(s, c->lease_ms);
  if (ok) {
    /* The EnableTracing call dies with this connection. */
    if (c->enable_session == c->session) c->has_enable_call = false;
    c->session = NULL;
    c->reading = false;
  }
  Perfetto__Protos__DetachResponse r = PERFETTO__PROTOS__DETACH_RESPONSE__INIT;
  tg_ipc_reply(&call, ok, false, &r.base, -1);
}
CONSUMER_METHOD(m_detach, &perfetto__protos__detach_request__descriptor)

static void m_attach(tg_consumer_conn_t *c, tg_ipc_call_t call,
                     const void *arg) {
  const Perfetto__Protos__AttachRequest *req = arg;
  tg_session_t *found = NULL;
  if (!c->session && req->key)
    found = tg__session_attach(c->svc, req->key, call.conn);
  if (!found) {
    fail(call);
    return;
  }
  c->session = found;
  Perfetto__Protos__AttachResponse r = PERFETTO__PROTOS__ATTACH_RESPONSE__INIT;
  r.trace_config = found->config;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}
CONSUMER_METHOD(m_attach, &perfetto__protos__attach_request__descriptor)

/* --- clone ----------------------------------------------------------------------- */

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

/* Takes the snapshot now; the source may have ended or gone meanwhile. */
static void clone_finish(tg_consumer_conn_t *c, flush_call_t *fc) {
  tg_session_t *src = tg__session_find(c->svc, fc->clone_src, NULL);
  if (!src) {
    clone_reply(fc->call, "the session ended before it could be cloned", NULL);
    return;
  }
  if (c->session) {
    clone_reply(fc->call, "this connection already has a tracing session", NULL);
    return;
  }
  char err[256] = "";
  tg_session_t *s = tg__session_clone(src, c->conn, fc->trigger.name ? &fc->trigger : NULL,
                                      fc->skip_trace_filter, err, sizeof(err));
  if (!s) {
    clone_reply(fc->call, err, NULL);
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
 * clone succeeds (clone_finish). */
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

/* The session a CloneSession names, or why there is none. */
static tg_session_t *clone_source(tg_service_t *svc, tg_ipc_call_t call,
                                  const Perfetto__Protos__CloneSessionRequest *req,
                                  const char **refusal) {
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
    if (!src) *refusal = "No tracing sessions eligible for bugreport found";
    return src;
  }
  if (by_name)
    src = tg__session_find(svc, 0, req->unique_session_name ? req->unique_session_name : "");
  else if (by_id)
    src = tg__session_find(svc, req->session_id, NULL);
  else {
    *refusal = "session_id or unique_session_name: one is required";
    return NULL;
  }
  /* Someone else's session is as good as absent: its id says nothing. */
  if (!src || !tg__session_clone_allowed(src, uid)) {
    *refusal = "tracing session not found";
    return NULL;
  }
  return src;
}

/* CloneSession: a read-only snapshot of a session this consumer's uid owns,
 * after a flush of the session if it is running. */
static void m_clone_session(tg_consumer_conn_t *c, tg_ipc_call_t call,
                            const void *arg) {
  const Perfetto__Protos__CloneSessionRequest *req = arg;
  tg_service_t *svc = c->svc;
  const char *refusal = NULL;
  tg_session_t *src = NULL;
  if (c->session)
    refusal = "this connection already has a tracing session";
  else
    src = clone_source(svc, call, req, &refusal);
  flush_call_t *fc = refusal ? NULL : calloc(1, sizeof(*fc));
  if (!refusal && (!fc || clone_trigger_of(src, req, &fc->trigger) < 0))
    refusal = "out of memory";
  if (fc) fc->skip_trace_filter = req->has_skip_trace_filter && req->skip_trace_filter;
  if (refusal) {
    if (fc) flush_call_free(fc);
    clone_reply(call, refusal, NULL);
    return;
  }
  fc->call = call;
  fc->clone = true;
  fc->clone_src = src->id;
  if (src->state != TG_SESSION_STARTED) {
    clone_finish(c, fc);
    flush_call_free(fc);
    return;
  }
  /* Listed first: the flush may complete before tg__session_flush returns. */
  tg_list_insert_tail(&c->flush_calls, &fc->node);
  tg__session_flush(src, 0, (uint64_t)(uintptr_t)fc);
}
CONSUMER_METHOD(m_clone_session, &perfetto__protos__clone_session_request__descriptor)

/* --- queries ------------------------------------------------------------------------ */

static void m_get_trace_stats(tg_consumer_conn_t *c, tg_ipc_call_t call,
                              const void *req) {
  (void)req;
  Perfetto__Protos__TraceStats *st = c->session ? tg__readout_stats_new(c->session) : NULL;
  if (!st) {
    fail(call);
    return;
  }
  Perfetto__Protos__GetTraceStatsResponse r = PERFETTO__PROTOS__GET_TRACE_STATS_RESPONSE__INIT;
  r.trace_stats = st;
  tg_ipc_reply(&call, true, false, &r.base, -1);
  tg__readout_stats_free(st);
}
CONSUMER_METHOD(m_get_trace_stats, &perfetto__protos__get_trace_stats_request__descriptor)

static void m_observe_events(tg_consumer_conn_t *c, tg_ipc_call_t call,
                             const void *arg) {
  const Perfetto__Protos__ObserveEventsRequest *req = arg;
  if (call.drop_reply) {
    fail(call);
    return;
  }
  uint32_t mask = 0;
  for (size_t i = 0; i < req->n_events_to_observe; i++)
    if ((unsigned)req->events_to_observe[i] < 32) mask |= 1u << req->events_to_observe[i];
  if (c->observing) /* a new request replaces the old stream */
    tg_ipc_reply(&c->observe_call, true, false, NULL, -1);
  c->observing = mask != 0;
  c->observe_mask = mask;
  c->observe_call = call;
  if (!mask) tg_ipc_reply(&call, true, false, NULL, -1);
}
CONSUMER_METHOD(m_observe_events, &perfetto__protos__observe_events_request__descriptor)

/* The connection died with |c|'s session attached: detach it under the
 * lease's key if there is one. Returns true if the session was kept. */
static bool keep_under_lease(tg_consumer_conn_t *c) {
  tg_session_t *s = c->session;
  if (!c->lease_key || s->freeing) return false;
  int rv = tg__session_detach(s, c->lease_key);
  if (rv < 0) {
    TG_WARN("consumer went away: cannot keep session %llu under its "
            "disconnect lease key '%s': %s",
            (unsigned long long)s->id, c->lease_key,
            rv == -EEXIST ? "another session is detached under that key"
                          : tg_strerror(rv));
    return false;
  }
  TG_INFO("consumer went away without Detach: session %llu detached under "
          "key '%s'", (unsigned long long)s->id, c->lease_key);
  tg__session_lease_start(s, c->lease_ms);
  return true;
}

int tg__consumer_port_set_lease(tg_service_t *svc, tg_ipc_call_t call,
                                const char *key, uint64_t lease_ms) {
  if (strlen(key) > TG_DETACH_KEY_MAX) return -EINVAL;
  tg_consumer_conn_t *c = consumer_of(svc, call);
  if (!c) return -ENOMEM;
  char *copy = NULL;
  if (key[0] && !(copy = strdup(key))) return -ENOMEM;
  free(c->lease_key);
  c->lease_key = copy;
  c->lease_ms = lease_ms;
  return 0;
}

void tg__consumer_port_disconnect(void *ctx, tg_ipc_host_conn_t *conn) {
  tg_service_t *svc = ctx;
  tg_consumer_conn_t *c = conn->user;
  tg__session_consumer_gone(svc, conn);
  if (!c) return;
  conn->user = NULL;
  /* Forget every call that points at this connection: a flush completing
   * later finds no call for its cookie. */
  c->has_enable_call = false;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &c->flush_calls) {
    tg_list_remove(it);
    flush_call_free(TG_CONTAINER_OF(it, flush_call_t, node));
  }
  if (c->session && !keep_under_lease(c)) {
    TG_INFO("consumer went away: ending session %llu",
            (unsigned long long)c->session->id);
    tg__session_free(c->session);
  }
  tg_list_remove(&c->node);
  free(c->lease_key);
  free(c->frames);
  free(c);
}

static void m_query_service_state(tg_consumer_conn_t *c, tg_ipc_call_t call,
                                  const void *req) {
  tg__consumer_query_service_state(c->svc, &c->state_query, call, req);
}
CONSUMER_METHOD(m_query_service_state,
                &perfetto__protos__query_service_state_request__descriptor)

static void m_query_capabilities(tg_consumer_conn_t *c, tg_ipc_call_t call,
                                 const void *req) {
  (void)req;
  tg__consumer_query_capabilities(c->svc, call);
}
CONSUMER_METHOD(m_query_capabilities,
                &perfetto__protos__query_capabilities_request__descriptor)

static const tg_ipc_method_def_t consumer_methods[] = {
    {"EnableTracing", m_enable_tracing_ipc},
    {"DisableTracing", m_disable_tracing_ipc},
    {"ReadBuffers", m_read_buffers_ipc},
    {"FreeBuffers", m_free_buffers_ipc},
    {"Flush", m_flush_ipc},
    {"StartTracing", m_start_tracing_ipc},
    {"ChangeTraceConfig", m_change_trace_config_ipc},
    {"Detach", m_detach_ipc},
    {"Attach", m_attach_ipc},
    {"GetTraceStats", m_get_trace_stats_ipc},
    {"ObserveEvents", m_observe_events_ipc},
    {"QueryServiceState", m_query_service_state_ipc},
    {"QueryCapabilities", m_query_capabilities_ipc},
    {"CloneSession", m_clone_session_ipc},
    /* Not supported: the host answers it with an explicit failure. */
    {"SaveTraceForBugreport", NULL},
};

void tg__consumer_port_bind(tg_service_t *svc, tg_ipc_service_def_t *def) {
  memset(def, 0, sizeof(*def));
  def->name = "ConsumerPort";
  def->methods = consumer_methods;
  def->n_methods = sizeof(consumer_methods) / sizeof(consumer_methods[0]);
  def->ctx = svc;
  def->on_disconnect = tg__consumer_port_disconnect;
  def->on_drain = on_consumer_drain;
}
