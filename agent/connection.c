/* The agent's connection to the service's ProducerPort.
 *
 * connect -> BindService("ProducerPort") -> InitializeConnection ->
 * GetAsyncCommand (a stream that stays open, see commands.c) and
 * RegisterDataSource for each data source. When the connection goes,
 * commands.c stops every instance and abandons the SMB, and the agent
 * reconnects with exponential backoff (reconnect_min_ms doubling up to
 * reconnect_max_ms, back to the minimum once a connection succeeds).
 *
 * The files above send through it (tg__conn_invoke); it tells them what
 * happened only through the events agent.c installs (tg__conn_events_t),
 * never by calling into them.
 *
 * Agent's thread only, except tg__agent_set_ready's waiters.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/version.h"
#include "agent/agent_internal.h"
#include "agent/agent_log.h"
#include "agent/data_source.h"
#include "ipc/unix_transport.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "tracegate/error.h"

#define RECONNECT_MIN_MS_DEFAULT 100
#define RECONNECT_MAX_MS_DEFAULT 5000
#define PACK_ON_STACK_MAX 256

struct tg__conn {
  tg_unix_transport_t tr;
  tg_ipc_client_t client;
  const tg_ipc_remote_service_t *svc;
  bool ready; /* InitializeConnection answered */
};

static tg__agent_link_t *const link_state = &tg__agent.link;
static const tg__conn_events_t *events;

void tg__agent_set_ready(bool ready) {
  tg__agent_readiness_t *r = &tg__agent.readiness;
  pthread_mutex_lock(&r->mu);
  r->ready = ready;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

bool tg__connection_ready(void) {
  return link_state->conn && link_state->conn->ready;
}

/* --- sending ------------------------------------------------------------- */

int tg__conn_invoke_bytes(const char *method, const uint8_t *req, size_t n,
                          tg_ipc_reply_cb cb, void *ctx) {
  tg__conn_t *c = link_state->conn;
  if (!c || !c->svc) return TG_ENOT_CONNECTED;
  return tg_ipc_client_invoke(&c->client, c->svc, method, req, n, -1, cb,
                              ctx, NULL);
}

int tg__conn_invoke(const char *method, const ProtobufCMessage *msg,
                    tg_ipc_reply_cb cb, void *ctx) {
  tg__conn_t *c = link_state->conn;
  if (!c || !c->svc) return TG_ENOT_CONNECTED;
  uint8_t stack[PACK_ON_STACK_MAX];
  size_t n = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = n <= sizeof(stack) ? stack : malloc(n);
  if (!buf) return -ENOMEM;
  protobuf_c_message_pack(msg, buf);
  int rv = tg__conn_invoke_bytes(method, buf, n, cb, ctx);
  if (buf != stack) free(buf);
  if (rv < 0)
    tg__agent_log(TG_LOG_WARN, "agent: %s not sent: %s", method,
                  tg_strerror(rv));
  return rv;
}

/* --- data source registration ------------------------------------------- */

static void on_ds_registered(tg_ipc_client_t *cl, void *ctx, int status,
                             bool has_more, const uint8_t *r, size_t n) {
  (void)cl;
  (void)has_more;
  (void)r;
  (void)n;
  tg_ds_t *ds = ctx;
  if (status < 0 && status != TG_EPEER_CLOSED)
    tg__agent_log(TG_LOG_WARN,
                  "agent: the service refused data source %s: %s", ds->name,
                  tg_strerror(status));
  if (status == TG_EPEER_CLOSED || !link_state->conn) return;
  link_state->ds_acked++;
  if (link_state->ds_acked == tg__ds_count()) tg__agent_set_ready(true);
}

void tg__connection_register_data_sources(void) {
  size_t n = tg__ds_count();
  for (size_t i = 0; i < n; i++) {
    tg_ds_t *ds = tg__ds_at(i);
    if (ds->registered_with_service) continue;
    Perfetto__Protos__DataSourceDescriptor d =
        PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
    d.name = ds->name;
    /* We answer StopDataSource after committing what the instance wrote,
     * so the service reads it before it forgets the instance. */
    d.has_will_notify_on_stop = d.will_notify_on_stop = true;
    d.has_handles_incremental_state_clear = true;
    d.handles_incremental_state_clear = ds->handles_incremental_state_clear;
    d.has_will_notify_on_start = true;
    d.will_notify_on_start = ds->will_notify_on_start;
    d.has_id = true;
    d.id = ds->idx + 1;
    Perfetto__Protos__RegisterDataSourceRequest r =
        PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
    r.data_source_descriptor = &d;
    if (tg__conn_invoke("RegisterDataSource", &r.base, on_ds_registered,
                        ds) == 0)
      ds->registered_with_service = true;
  }
}

void tg__connection_send_start_acks(void) {
  uint64_t ids[16];
  size_t n;
  while ((n = tg__ds_take_start_acks(ids, 16)) > 0)
    for (size_t i = 0; i < n; i++) {
      Perfetto__Protos__NotifyDataSourceStartedRequest r =
          PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STARTED_REQUEST__INIT;
      r.has_data_source_id = true;
      r.data_source_id = ids[i];
      tg__conn_invoke("NotifyDataSourceStarted", &r.base, NULL, NULL);
    }
}

/* --- lifecycle ----------------------------------------------------------- */

static void schedule_reconnect(void);

static void on_conn_close(tg_ipc_client_t *cl, int status) {
  tg__conn_t *c = cl->data;
  bool was_ready = c->ready;
  if (link_state->conn == c) {
    link_state->conn = NULL;
    tg__agent_set_ready(false);
    events->lost();
    size_t n = tg__ds_count();
    for (size_t i = 0; i < n; i++)
      tg__ds_at(i)->registered_with_service = false;
    link_state->ds_acked = 0;
  }
  if (was_ready) {
    atomic_fetch_add(&link_state->disconnects, 1);
    tg__agent_log(TG_LOG_INFO, "agent: disconnected from %s: %s",
                  tg__agent.cfg.socket_path,
                  status ? tg_strerror(status) : "closed by this process");
  }
  free(c);
  schedule_reconnect();
}

static const tg_ipc_client_cbs_t conn_cbs = {.on_close = on_conn_close};

static void on_initialized(tg_ipc_client_t *cl, void *ctx, int status,
                           bool has_more, const uint8_t *r, size_t n) {
  (void)ctx;
  (void)has_more;
  tg__conn_t *c = cl->data;
  if (status < 0) {
    if (status != TG_EPEER_CLOSED) {
      tg__agent_log(TG_LOG_WARN,
                    "agent: %s refused InitializeConnection: %s",
                    tg__agent.cfg.socket_path, tg_strerror(status));
      tg_ipc_client_close(cl, status);
    }
    return;
  }
  /* An answer that does not parse offers nothing. */
  Perfetto__Protos__InitializeConnectionResponse *resp =
      perfetto__protos__initialize_connection_response__unpack(NULL, n, r);
  link_state->direct_patching = resp && resp->has_direct_smb_patching_supported &&
                                resp->direct_smb_patching_supported;
  if (resp)
    perfetto__protos__initialize_connection_response__free_unpacked(resp, NULL);
  c->ready = true;
  link_state->backoff_ms = 0;
  atomic_fetch_add(&link_state->connects, 1);
  tg__agent_log(TG_LOG_INFO, "agent: connected to %s as %s",
                tg__agent.cfg.socket_path, tg__agent.cfg.producer_name);
  if (events->open_commands() < 0) {
    tg_ipc_client_close(cl, TG_EUNKNOWN_METHOD);
    return;
  }
  tg__connection_register_data_sources();
  if (tg__ds_count() == 0) tg__agent_set_ready(true);
  events->connected(); /* e.g. triggers activated while not connected */
}

static void on_bound(tg_ipc_client_t *cl, void *ctx, int status,
                     const tg_ipc_remote_service_t *svc) {
  (void)ctx;
  tg__conn_t *c = cl->data;
  const tg_agent_options_t *o = &tg__agent.cfg.opts;
  if (status == TG_EUNKNOWN_SERVICE) {
    tg__agent_log(TG_LOG_WARN, "agent: %s does not offer ProducerPort",
                  tg__agent.cfg.socket_path);
    tg_ipc_client_close(cl, status);
    return;
  }
  if (status < 0) {
    /* The connection went before the answer: a service at its connection
     * limit closes new ones at once. Said once per outage, as for a
     * service that is not there. */
    tg__agent_log(link_state->backoff_ms ? TG_LOG_DEBUG : TG_LOG_WARN,
                  "agent: %s closed the connection before binding "
                  "ProducerPort (%s); the service may be at its limit of "
                  "producer connections (its log says); retrying",
                  tg__agent.cfg.socket_path, tg_strerror(status));
    tg_ipc_client_close(cl, status);
    return;
  }
  c->svc = svc;
  Perfetto__Protos__InitializeConnectionRequest req =
      PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
  req.producer_name = tg__agent.cfg.producer_name;
  /* No hint from the app: a reserve the arbiter grows into (see
   * tg_agent_options_t). */
  req.has_shared_memory_size_hint_bytes = true;
  req.shared_memory_size_hint_bytes =
      (uint32_t)(o->smb_size_hint ? o->smb_size_hint : TG_AGENT_SMB_RESERVE);
  if (o->smb_page_size_hint) {
    req.has_shared_memory_page_size_hint_bytes = true;
    req.shared_memory_page_size_hint_bytes = (uint32_t)o->smb_page_size_hint;
  }
  /* Idle threads keep partial chunks: let the service scrape them. */
  req.has_smb_scraping_mode = true;
  req.smb_scraping_mode =
      PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__PRODUCER_SMBSCRAPING_MODE__SMB_SCRAPING_ENABLED;
  req.sdk_version = "tracegate-agent " TG_VERSION;
  if (tg__conn_invoke("InitializeConnection", &req.base, on_initialized,
                      NULL) < 0)
    tg_ipc_client_close(cl, TG_EPEER_CLOSED);
}

static void connect_now(void) {
  if (tg__agent.th.stopping || link_state->conn) return;
  tg__conn_t *c = calloc(1, sizeof(*c));
  if (!c) {
    schedule_reconnect();
    return;
  }
  const char *path = tg__agent.cfg.socket_path;
  int rv = tg_unix_transport_connect(&tg__agent.th.loop, &c->tr, path);
  if (rv < 0) {
    tg__agent_log(link_state->backoff_ms ? TG_LOG_DEBUG : TG_LOG_INFO,
                  "agent: cannot connect to %s: %s", path, tg_strerror(rv));
    free(c);
    schedule_reconnect();
    return;
  }
  tg_ipc_client_init(&c->client, &c->tr.base, &conn_cbs, c);
  link_state->conn = c;
  rv = tg_ipc_client_bind(&c->client, "ProducerPort", on_bound, NULL);
  if (rv < 0) tg_ipc_client_close(&c->client, rv);
}

static void on_reconnect_timer(uv_timer_t *t) {
  (void)t;
  connect_now();
}

static void schedule_reconnect(void) {
  if (tg__agent.th.stopping) return;
  const tg_agent_options_t *o = &tg__agent.cfg.opts;
  uint32_t min = o->reconnect_min_ms ? o->reconnect_min_ms
                                     : RECONNECT_MIN_MS_DEFAULT;
  uint32_t max = o->reconnect_max_ms ? o->reconnect_max_ms
                                     : RECONNECT_MAX_MS_DEFAULT;
  uint32_t b = link_state->backoff_ms;
  b = b ? b * 2 : min;
  if (b > max) b = max;
  link_state->backoff_ms = b;
  uv_timer_start(&link_state->reconnect_timer, on_reconnect_timer, b, 0);
}

void tg__connection_init(uv_loop_t *loop, const tg__conn_events_t *ev) {
  events = ev;
  link_state->conn = NULL;
  link_state->backoff_ms = 0;
  link_state->ds_acked = 0;
  uv_timer_init(loop, &link_state->reconnect_timer);
}

void tg__connection_start(void) { connect_now(); }

void tg__connection_stop(void) {
  uv_timer_stop(&link_state->reconnect_timer);
  if (link_state->conn) {
    events->closing();
    tg_ipc_client_close(&link_state->conn->client, 0);
  }
}
