/* The agent's thread: the ProducerPort connection and its commands.
 *
 * One process-wide agent, like Perfetto's SDK: apps link one library and
 * talk to one service. Everything here runs on the agent's own libuv loop
 * except the public entry points, which only touch atomics, the mutex of
 * the wait helpers, and uv_async_send.
 *
 * Connection lifecycle: connect -> BindService("ProducerPort") ->
 * InitializeConnection -> GetAsyncCommand (a stream that stays open) and
 * RegisterDataSource for each data source. The service then pushes
 * SetupTracing (with the SMB fd), SetupDataSource, StartDataSource, Flush,
 * ClearIncrementalState, StopDataSource. When the connection goes, every
 * instance stops, the SMB is abandoned (writers drop into nothing), and the
 * agent reconnects with exponential backoff.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "agent/agent_internal.h"
#include "agent/clock.h"
#include "pb/config/data_source_config.pb-c.h"
#include "ipc/client.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "ipc/unix_transport.h"
#include "tracegate/error.h"
#include "common/log.h"

#define COMMIT_PERIOD_MS 10
#define COMMIT_MAX_BYTES (120 * 1024)
#define SOCKET_PATH_MAX 108
#define PRODUCER_NAME_MAX 128

typedef struct conn {
  tg_unix_transport_t tr;
  tg_ipc_client_t client;
  const tg_ipc_remote_service_t *svc;
  bool ready; /* InitializeConnection answered */
} conn_t;

typedef struct agent {
  bool running; /* between init and shutdown (public-side view) */
  tg_agent_options_t opts;
  char socket_path[SOCKET_PATH_MAX];
  char producer_name[PRODUCER_NAME_MAX];
  pthread_t thread;

  uv_loop_t loop;
  uv_async_t async;
  uv_timer_t reconnect_timer;
  uv_timer_t commit_timer;
  uv_timer_t clock_timer;
  _Atomic bool stop_requested;
  bool stopping;

  conn_t *conn;
  tg_arbiter_t *arb;
  uint32_t backoff_ms;
  size_t ds_acked; /* registrations answered on this connection */
  tg_buf_t commit_buf;

  /* For tg_agent_wait_connected(). */
  pthread_mutex_t wait_mu;
  pthread_cond_t wait_cv;
  bool ready_for_waiters;

  _Atomic uint64_t connects, disconnects, commits_sent, patches_sent;
  _Atomic uint64_t flushes_acked;
  /* Arbiter counters: those of past SMBs plus a snapshot of the current
   * one, refreshed by the agent's thread after each commit. */
  _Atomic uint64_t chunks_past, patches_past, stalls_past;
  _Atomic uint64_t chunks_now, patches_now, stalls_now;
} agent_t;

static agent_t g = {
    .wait_mu = PTHREAD_MUTEX_INITIALIZER,
    .wait_cv = PTHREAD_COND_INITIALIZER,
};
static pthread_mutex_t g_life_mu = PTHREAD_MUTEX_INITIALIZER;

/* --- logging ------------------------------------------------------------- */

void tg__agent_log(tg_log_level_t level, const char *fmt, ...) {
  tg_agent_log_fn fn = g.opts.log;
  if (!fn || level > g.opts.log_level) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  fn(g.opts.log_ctx, level, line);
}

/* Lines from shared modules (ipc/, abi/) go to the app's sink, never to
 * stderr: a library does not print. */
static void log_sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  tg_agent_log_fn fn = g.opts.log;
  if (fn && (int)level <= (int)g.opts.log_level)
    fn(g.opts.log_ctx, (tg_log_level_t)level, line);
}

/* --- wake-ups from other threads ---------------------------------------- */

void tg__agent_wake(void) {
  /* uv_async_send coalesces: a pending wake costs an atomic check. */
  if (__atomic_load_n(&g.running, __ATOMIC_ACQUIRE)) uv_async_send(&g.async);
}

static void arbiter_wake(void *ctx) {
  (void)ctx;
  tg__agent_wake();
}

static void set_ready(bool ready) {
  pthread_mutex_lock(&g.wait_mu);
  g.ready_for_waiters = ready;
  pthread_cond_broadcast(&g.wait_cv);
  pthread_mutex_unlock(&g.wait_mu);
}

/* --- sending ------------------------------------------------------------- */

static int invoke(const char *method, const ProtobufCMessage *msg,
                  tg_ipc_reply_cb cb, void *ctx) {
  conn_t *c = g.conn;
  if (!c || !c->svc) return TG_ENOT_CONNECTED;
  uint8_t stack[256];
  size_t n = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = n <= sizeof(stack) ? stack : malloc(n);
  if (!buf) return -ENOMEM;
  protobuf_c_message_pack(msg, buf);
  int rv = tg_ipc_client_invoke(&c->client, c->svc, method, buf, n, -1, cb,
                                ctx, NULL);
  if (buf != stack) free(buf);
  if (rv < 0)
    tg__agent_log(TG_LOG_WARN, "agent: %s not sent: %s", method,
                  tg_strerror(rv));
  return rv;
}

static void send_writer_events(void) {
  tg_arbiter_writer_event_t ev[64];
  size_t n;
  while ((n = tg_arbiter_take_writer_events(g.arb, ev, 64)) > 0) {
    for (size_t i = 0; i < n; i++) {
      if (ev[i].registered) {
        Perfetto__Protos__RegisterTraceWriterRequest r =
            PERFETTO__PROTOS__REGISTER_TRACE_WRITER_REQUEST__INIT;
        r.has_trace_writer_id = r.has_target_buffer = true;
        r.trace_writer_id = ev[i].writer_id;
        r.target_buffer = ev[i].target_buffer;
        invoke("RegisterTraceWriter", &r.base, NULL, NULL);
      } else {
        Perfetto__Protos__UnregisterTraceWriterRequest r =
            PERFETTO__PROTOS__UNREGISTER_TRACE_WRITER_REQUEST__INIT;
        r.has_trace_writer_id = true;
        r.trace_writer_id = ev[i].writer_id;
        invoke("UnregisterTraceWriter", &r.base, NULL, NULL);
      }
    }
  }
}

static void snapshot_arbiter_stats(bool retire) {
  tg_arbiter_stats_t st = {0};
  if (g.arb) tg_arbiter_get_stats(g.arb, &st);
  if (retire) {
    atomic_fetch_add(&g.chunks_past, st.chunks_committed);
    atomic_fetch_add(&g.patches_past, st.patches);
    atomic_fetch_add(&g.stalls_past, st.stalls);
    st = (tg_arbiter_stats_t){0};
  }
  atomic_store(&g.chunks_now, st.chunks_committed);
  atomic_store(&g.patches_now, st.patches);
  atomic_store(&g.stalls_now, st.stalls);
}

/* Sends everything the writers queued: writer (un)registrations first (the
 * service must know a writer's target before its chunks), then CommitData
 * requests of at most COMMIT_MAX_BYTES, the last carrying |flush_id|. */
static void commit_all(uint64_t flush_id) {
  conn_t *c = g.conn;
  if (!c || !c->ready) return;
  tg_buf_t *buf = &g.commit_buf;
  if (!g.arb) {
    if (!flush_id) return;
    /* Nothing was ever written: acknowledge the flush alone. */
    Perfetto__Protos__CommitDataRequest r =
        PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
    r.has_flush_request_id = true;
    r.flush_request_id = flush_id;
    if (invoke("CommitData", &r.base, NULL, NULL) == 0)
      atomic_fetch_add(&g.flushes_acked, 1);
    return;
  }
  send_writer_events();
  for (;;) {
    tg_buf_reset(buf);
    int n = tg_arbiter_take_commit(g.arb, flush_id, COMMIT_MAX_BYTES, buf);
    if (n < 0) {
      tg__agent_log(TG_LOG_ERROR, "agent: commit batch: %s",
                    tg_strerror(n));
      return;
    }
    bool more = tg_arbiter_commit_pending(g.arb);
    snapshot_arbiter_stats(false);
    if (tg_buf_size(buf) > 0) {
      int rv = tg_ipc_client_invoke(&c->client, c->svc, "CommitData",
                                    tg_buf_begin(buf), tg_buf_size(buf), -1,
                                    NULL, NULL, NULL);
      if (rv < 0) return;
      atomic_fetch_add(&g.commits_sent, 1);
      if (flush_id && !more) atomic_fetch_add(&g.flushes_acked, 1);
    }
    if (!more) return;
  }
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
  if (status == TG_EPEER_CLOSED || !g.conn) return;
  g.ds_acked++;
  if (g.ds_acked == tg__ds_count()) set_ready(true);
}

static void register_new_data_sources(void) {
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
    d.has_id = true;
    d.id = ds->idx + 1;
    Perfetto__Protos__RegisterDataSourceRequest r =
        PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
    r.data_source_descriptor = &d;
    if (invoke("RegisterDataSource", &r.base, on_ds_registered, ds) == 0)
      ds->registered_with_service = true;
  }
}

static void on_commit_timer(uv_timer_t *t);

/* --- instances ----------------------------------------------------------- */

static bool find_instance(uint64_t id, tg_ds_t **ds_out, unsigned *inst_out) {
  size_t n = tg__ds_count();
  for (size_t i = 0; i < n; i++) {
    tg_ds_t *ds = tg__ds_at(i);
    for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
      if (ds->inst[k].in_use && ds->inst[k].instance_id == id) {
        *ds_out = ds;
        *inst_out = k;
        return true;
      }
    }
  }
  return false;
}

/* Serialises |cfg| back for the app's callbacks (unknown fields included:
 * protobuf-c keeps them). Returns a malloc'ed buffer or NULL. */
static uint8_t *pack_config(const Perfetto__Protos__DataSourceConfig *cfg,
                            size_t *len) {
  *len = perfetto__protos__data_source_config__get_packed_size(cfg);
  uint8_t *b = malloc(*len ? *len : 1);
  if (b) perfetto__protos__data_source_config__pack(cfg, b);
  return b;
}

static bool setup_instance(uint64_t id,
                           const Perfetto__Protos__DataSourceConfig *cfg,
                           tg_ds_t **ds_out, unsigned *inst_out) {
  if (find_instance(id, ds_out, inst_out)) return true;
  if (!cfg || !cfg->name) {
    tg__agent_log(TG_LOG_WARN, "agent: instance %llu has no config",
                  (unsigned long long)id);
    return false;
  }
  tg_ds_t *ds = tg__ds_by_name(cfg->name, strlen(cfg->name));
  if (!ds) {
    tg__agent_log(TG_LOG_WARN,
                  "agent: the service set up unknown data source %s",
                  cfg->name);
    return false;
  }
  /* Buffer ids are 16 bits in the SMB ABI (chunk moves, writer
   * registrations); a larger one would land in another buffer. */
  if (cfg->target_buffer > UINT16_MAX) {
    tg__agent_log(TG_LOG_WARN,
                  "agent: %s: instance %llu targets buffer %u, above 65535; "
                  "ignored",
                  ds->name, (unsigned long long)id, cfg->target_buffer);
    return false;
  }
  unsigned k = 0;
  while (k < TG_DS_MAX_INSTANCES && ds->inst[k].in_use) k++;
  if (k == TG_DS_MAX_INSTANCES) {
    tg__agent_log(TG_LOG_WARN,
                  "agent: %s already has %d instances; instance %llu ignored",
                  ds->name, TG_DS_MAX_INSTANCES, (unsigned long long)id);
    return false;
  }
  tg__ds_inst_setup(ds, k, id, (uint16_t)cfg->target_buffer, g.arb);
  if (ds->cbs.on_setup) {
    size_t len;
    uint8_t *b = pack_config(cfg, &len);
    if (b) ds->cbs.on_setup(ds->cbs.ctx, k, b, len);
    free(b);
  }
  *ds_out = ds;
  *inst_out = k;
  return true;
}

static void start_instance(uint64_t id,
                           const Perfetto__Protos__DataSourceConfig *cfg) {
  tg_ds_t *ds;
  unsigned k;
  if (!setup_instance(id, cfg, &ds, &k)) return;
  if (!ds->inst[k].arb) {
    tg__agent_log(TG_LOG_WARN,
                  "agent: %s started without a usable SMB from the service; "
                  "its packets will be dropped",
                  ds->name);
  }
  /* Enabled first, so that on_start may already write packets. */
  tg__ds_inst_start(ds, k);
  if (ds->cbs.on_start) {
    size_t len = 0;
    uint8_t *b = cfg ? pack_config(cfg, &len) : NULL;
    ds->cbs.on_start(ds->cbs.ctx, k, b, len);
    free(b);
  }
  if (!uv_is_active((uv_handle_t *)&g.commit_timer))
    uv_timer_start(&g.commit_timer, on_commit_timer, COMMIT_PERIOD_MS,
                   COMMIT_PERIOD_MS);
}

static void stop_instance(tg_ds_t *ds, unsigned k, bool notify) {
  uint64_t id = ds->inst[k].instance_id;
  if (ds->cbs.on_stop) ds->cbs.on_stop(ds->cbs.ctx, k);
  tg__ds_inst_stop(ds, k);
  if (!notify) return;
  commit_all(0);
  Perfetto__Protos__NotifyDataSourceStoppedRequest r =
      PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;
  r.has_data_source_id = true;
  r.data_source_id = id;
  invoke("NotifyDataSourceStopped", &r.base, NULL, NULL);
}

static void stop_all_instances(void) {
  size_t n = tg__ds_count();
  for (size_t i = 0; i < n; i++) {
    tg_ds_t *ds = tg__ds_at(i);
    for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++)
      if (ds->inst[k].in_use) stop_instance(ds, k, false);
  }
}

/* --- async commands ------------------------------------------------------ */

static void setup_tracing(int fd, uint32_t page_kb) {
  if (fd < 0) {
    tg__agent_log(TG_LOG_ERROR,
                  "agent: SetupTracing came without the SMB file descriptor");
    return;
  }
  if (g.arb) {
    /* One SMB per connection; a second one is a service bug. */
    tg__agent_log(TG_LOG_WARN, "agent: ignoring a second SetupTracing");
    close(fd);
    return;
  }
  /* A file the service can still shrink would SIGBUS the app on its next
   * write past the new end; Perfetto's producers require the same seal.
   * Checked before the size: once sealed, the size cannot go down. */
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    tg__agent_log(TG_LOG_ERROR,
                  "agent: the SMB from the service is not sealed against "
                  "shrinking; not using it");
    close(fd);
    return;
  }
  struct stat st;
  size_t page = page_kb ? (size_t)page_kb * 1024 : TG_SMB_DEFAULT_PAGE_SIZE;
  if (fstat(fd, &st) < 0 || st.st_size <= 0 ||
      !tg_smb_geometry_valid((size_t)st.st_size, page)) {
    tg__agent_log(TG_LOG_ERROR,
                  "agent: unusable SMB from the service (size %lld, page %zu)",
                  (long long)st.st_size, page);
    close(fd);
    return;
  }
  void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    tg__agent_log(TG_LOG_ERROR, "agent: mmap of the SMB failed: %s",
                  strerror(errno));
    return;
  }
  tg_arbiter_opts_t o = {
      .smb_base = base,
      .smb_size = (size_t)st.st_size,
      .page_size = page,
      .stall_when_full = g.opts.on_smb_full == TG_AGENT_FULL_STALL,
      .wake = arbiter_wake,
  };
  int rv = tg_arbiter_new(&o, &g.arb);
  if (rv < 0) {
    munmap(base, (size_t)st.st_size);
    tg__agent_log(TG_LOG_ERROR, "agent: SMB arbiter: %s",
                  tg_strerror(rv));
    return;
  }
  tg__agent_log(TG_LOG_DEBUG, "agent: SMB of %lld bytes, %zu-byte pages",
                (long long)st.st_size, page);
}

static void for_each_listed_instance(const uint64_t *ids, size_t n,
                                     void (*fn)(tg_ds_t *, unsigned)) {
  for (size_t i = 0; i < n; i++) {
    tg_ds_t *ds;
    unsigned k;
    if (find_instance(ids[i], &ds, &k)) fn(ds, k);
  }
}

static void flush_one(tg_ds_t *ds, unsigned k) {
  if (ds->cbs.on_flush) ds->cbs.on_flush(ds->cbs.ctx, k);
}

static void clear_one(tg_ds_t *ds, unsigned k) {
  tg__ds_inst_clear_incremental(ds, k);
  if (ds->cbs.on_clear_incremental_state)
    ds->cbs.on_clear_incremental_state(ds->cbs.ctx, k);
}

static void on_async_command(tg_ipc_client_t *cl, void *ctx, int status,
                             bool has_more, const uint8_t *r, size_t n) {
  (void)ctx;
  (void)has_more;
  int fd = status == 0 ? tg_ipc_client_take_fd(cl) : -1;
  if (status < 0) {
    if (status != TG_EPEER_CLOSED)
      tg__agent_log(TG_LOG_WARN, "agent: GetAsyncCommand failed: %s",
                    tg_strerror(status));
    return;
  }
  Perfetto__Protos__GetAsyncCommandResponse *cmd =
      perfetto__protos__get_async_command_response__unpack(NULL, n, r);
  if (!cmd) {
    tg__agent_log(TG_LOG_WARN, "agent: undecodable command (%zu bytes)",
                  n);
    if (fd >= 0) close(fd);
    return;
  }
  switch (cmd->cmd_case) {
    case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING:
      setup_tracing(fd, cmd->setup_tracing->shared_buffer_page_size_kb);
      fd = -1;
      break;
    case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE: {
      tg_ds_t *ds;
      unsigned k;
      setup_instance(cmd->setup_data_source->new_instance_id,
                     cmd->setup_data_source->config, &ds, &k);
      break;
    }
    case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE:
      start_instance(cmd->start_data_source->new_instance_id,
                     cmd->start_data_source->config);
      break;
    case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE: {
      tg_ds_t *ds;
      unsigned k;
      uint64_t id = cmd->stop_data_source->instance_id;
      if (find_instance(id, &ds, &k)) {
        stop_instance(ds, k, true);
      } else {
        /* Not ours (or already gone): still say it stopped, or the
         * service waits for its stop timeout. */
        Perfetto__Protos__NotifyDataSourceStoppedRequest s =
            PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;
        s.has_data_source_id = true;
        s.data_source_id = id;
        invoke("NotifyDataSourceStopped", &s.base, NULL, NULL);
      }
      break;
    }
    case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH:
      for_each_listed_instance(cmd->flush->data_source_ids,
                               cmd->flush->n_data_source_ids, flush_one);
      commit_all(cmd->flush->request_id);
      break;
    case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE:
      for_each_listed_instance(cmd->clear_incremental_state->data_source_ids,
                               cmd->clear_incremental_state->n_data_source_ids,
                               clear_one);
      break;
    default:
      tg__agent_log(TG_LOG_DEBUG, "agent: ignoring command %d",
                    (int)cmd->cmd_case);
      break;
  }
  if (fd >= 0) close(fd);
  perfetto__protos__get_async_command_response__free_unpacked(cmd, NULL);
}

/* --- connection ---------------------------------------------------------- */

static void schedule_reconnect(void);

static void on_conn_close(tg_ipc_client_t *cl, int status) {
  conn_t *c = cl->data;
  bool was_ready = c->ready;
  if (g.conn == c) {
    g.conn = NULL;
    set_ready(false);
    stop_all_instances();
    if (g.arb) {
      snapshot_arbiter_stats(true);
      tg_arbiter_shutdown(g.arb);
      tg_arbiter_unref(g.arb);
      g.arb = NULL;
    }
    size_t n = tg__ds_count();
    for (size_t i = 0; i < n; i++) tg__ds_at(i)->registered_with_service = false;
    g.ds_acked = 0;
    uv_timer_stop(&g.commit_timer);
  }
  if (was_ready) {
    atomic_fetch_add(&g.disconnects, 1);
    tg__agent_log(TG_LOG_INFO, "agent: disconnected from %s: %s",
                  g.socket_path, tg_strerror(status));
  }
  free(c);
  schedule_reconnect();
}

static const tg_ipc_client_cbs_t conn_cbs = {.on_close = on_conn_close};

static void on_initialized(tg_ipc_client_t *cl, void *ctx, int status,
                           bool has_more, const uint8_t *r, size_t n) {
  (void)ctx;
  (void)has_more;
  (void)r;
  (void)n;
  conn_t *c = cl->data;
  if (status < 0) {
    if (status != TG_EPEER_CLOSED) {
      tg__agent_log(TG_LOG_WARN,
                    "agent: %s refused InitializeConnection: %s",
                    g.socket_path, tg_strerror(status));
      tg_ipc_client_close(cl, status);
    }
    return;
  }
  c->ready = true;
  g.backoff_ms = 0;
  atomic_fetch_add(&g.connects, 1);
  tg__agent_log(TG_LOG_INFO, "agent: connected to %s as %s",
                g.socket_path, g.producer_name);
  Perfetto__Protos__GetAsyncCommandRequest req =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;
  if (invoke("GetAsyncCommand", &req.base, on_async_command, NULL) < 0) {
    tg_ipc_client_close(cl, TG_EUNKNOWN_METHOD);
    return;
  }
  register_new_data_sources();
  if (tg__ds_count() == 0) set_ready(true);
}

static void on_bound(tg_ipc_client_t *cl, void *ctx, int status,
                     const tg_ipc_remote_service_t *svc) {
  (void)ctx;
  conn_t *c = cl->data;
  if (status < 0) {
    if (status != TG_EPEER_CLOSED) {
      tg__agent_log(TG_LOG_WARN,
                    "agent: %s does not offer ProducerPort: %s",
                    g.socket_path, tg_strerror(status));
      tg_ipc_client_close(cl, status);
    }
    return;
  }
  c->svc = svc;
  Perfetto__Protos__InitializeConnectionRequest req =
      PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
  req.producer_name = g.producer_name;
  if (g.opts.smb_size_hint) {
    req.has_shared_memory_size_hint_bytes = true;
    req.shared_memory_size_hint_bytes = (uint32_t)g.opts.smb_size_hint;
  }
  if (g.opts.smb_page_size_hint) {
    req.has_shared_memory_page_size_hint_bytes = true;
    req.shared_memory_page_size_hint_bytes =
        (uint32_t)g.opts.smb_page_size_hint;
  }
  /* Idle threads keep partial chunks: let the service scrape them. */
  req.has_smb_scraping_mode = true;
  req.smb_scraping_mode =
      PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__PRODUCER_SMBSCRAPING_MODE__SMB_SCRAPING_ENABLED;
  req.sdk_version = "tracegate-agent " TG_AGENT_VERSION;
  if (invoke("InitializeConnection", &req.base, on_initialized, NULL) < 0)
    tg_ipc_client_close(cl, TG_EPEER_CLOSED);
}

static void connect_now(void) {
  if (g.stopping || g.conn) return;
  conn_t *c = calloc(1, sizeof(*c));
  if (!c) {
    schedule_reconnect();
    return;
  }
  int rv = tg_unix_transport_connect(&g.loop, &c->tr, g.socket_path);
  if (rv < 0) {
    tg__agent_log(g.backoff_ms ? TG_LOG_DEBUG : TG_LOG_INFO,
                  "agent: cannot connect to %s: %s", g.socket_path,
                  tg_strerror(rv));
    free(c);
    schedule_reconnect();
    return;
  }
  tg_ipc_client_init(&c->client, &c->tr.base, &conn_cbs, c);
  g.conn = c;
  rv = tg_ipc_client_bind(&c->client, "ProducerPort", on_bound, NULL);
  if (rv < 0) tg_ipc_client_close(&c->client, rv);
}

static void on_reconnect_timer(uv_timer_t *t) {
  (void)t;
  connect_now();
}

static void schedule_reconnect(void) {
  if (g.stopping) return;
  uint32_t min = g.opts.reconnect_min_ms ? g.opts.reconnect_min_ms : 100;
  uint32_t max = g.opts.reconnect_max_ms ? g.opts.reconnect_max_ms : 5000;
  g.backoff_ms = g.backoff_ms ? g.backoff_ms * 2 : min;
  if (g.backoff_ms > max) g.backoff_ms = max;
  uv_timer_start(&g.reconnect_timer, on_reconnect_timer, g.backoff_ms, 0);
}

/* --- the loop ------------------------------------------------------------ */

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void begin_stop(void) {
  if (g.stopping) return;
  g.stopping = true;
  uv_timer_stop(&g.reconnect_timer);
  uv_timer_stop(&g.commit_timer);
  uv_timer_stop(&g.clock_timer);
  if (g.conn) {
    commit_all(0);
    tg_ipc_client_close(&g.conn->client, 0);
  }
  /* The connection's close callback runs first (it was queued first);
   * then every handle, ours included, closes and uv_run returns. */
  uv_walk(&g.loop, close_walk, NULL);
}

static void on_async(uv_async_t *a) {
  (void)a;
  if (atomic_load(&g.stop_requested)) {
    begin_stop();
    return;
  }
  if (g.conn && g.conn->ready) {
    register_new_data_sources();
    commit_all(0);
  }
}

static void on_commit_timer(uv_timer_t *t) {
  (void)t;
  if (g.arb && tg_arbiter_commit_pending(g.arb)) commit_all(0);
  else if (g.arb) send_writer_events();
}

static void on_clock_timer(uv_timer_t *t) {
  (void)t;
  tg__clock_calibrate();
}

static void *agent_thread(void *arg) {
  (void)arg;
  if (tg__clock_tsc_usable()) {
    tg__clock_calibrate(); /* first sample; the line starts 50 ms later */
    uv_timer_start(&g.clock_timer, on_clock_timer, 50, 1000);
  }
  connect_now();
  uv_run(&g.loop, UV_RUN_DEFAULT);
  return NULL;
}

/* --- public API ---------------------------------------------------------- */

bool tg__process_name(char *out, size_t n) {
  out[0] = '\0';
  int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t r = read(fd, out, n - 1);
  close(fd);
  if (r <= 0) return false;
  out[r] = '\0';
  out[strcspn(out, "\n")] = '\0';
  return true;
}

static void default_producer_name(char *out, size_t n) {
  char comm[64];
  if (!tg__process_name(comm, sizeof(comm)))
    snprintf(comm, sizeof(comm), "app");
  snprintf(out, n, "tracegate-agent:%s", comm);
}

int tg_agent_init(const tg_agent_options_t *opts) {
  pthread_mutex_lock(&g_life_mu);
  int rv = 0;
  if (g.running) {
    rv = -EALREADY;
    goto out;
  }
  tg_agent_options_t o = {0};
  if (opts) o = *opts;
  const char *path = o.socket_path ? o.socket_path : tg_ipc_default_socket(true);
  if (strlen(path) >= SOCKET_PATH_MAX) {
    rv = -ENAMETOOLONG;
    goto out;
  }
  g.opts = o;
  snprintf(g.socket_path, sizeof(g.socket_path), "%s", path);
  if (o.producer_name)
    snprintf(g.producer_name, sizeof(g.producer_name), "%s", o.producer_name);
  else
    default_producer_name(g.producer_name, sizeof(g.producer_name));
  g.opts.socket_path = g.socket_path;
  g.opts.producer_name = g.producer_name;
  g.stopping = false;
  g.backoff_ms = 0;
  g.conn = NULL;
  g.arb = NULL;
  atomic_store(&g.stop_requested, false);
  tg_buf_init(&g.commit_buf, TG_IPC_FRAME_BUFFER_SIZE);
  tg_log_set_sink(log_sink, NULL);

  if ((rv = uv_loop_init(&g.loop)) < 0) goto out;
  uv_async_init(&g.loop, &g.async, on_async);
  uv_timer_init(&g.loop, &g.reconnect_timer);
  uv_timer_init(&g.loop, &g.commit_timer);
  uv_timer_init(&g.loop, &g.clock_timer);
  __atomic_store_n(&g.running, true, __ATOMIC_RELEASE);
  rv = -pthread_create(&g.thread, NULL, agent_thread, NULL);
  if (rv < 0) {
    __atomic_store_n(&g.running, false, __ATOMIC_RELEASE);
    uv_walk(&g.loop, close_walk, NULL);
    uv_run(&g.loop, UV_RUN_DEFAULT);
    uv_loop_close(&g.loop);
    tg_buf_free(&g.commit_buf);
  }
out:
  pthread_mutex_unlock(&g_life_mu);
  return rv;
}

void tg_agent_shutdown(void) {
  pthread_mutex_lock(&g_life_mu);
  if (!g.running) {
    pthread_mutex_unlock(&g_life_mu);
    return;
  }
  atomic_store(&g.stop_requested, true);
  uv_async_send(&g.async);
  pthread_join(g.thread, NULL);
  __atomic_store_n(&g.running, false, __ATOMIC_RELEASE);
  uv_loop_close(&g.loop);
  tg_buf_free(&g.commit_buf);
  tg__clock_reset();
  set_ready(false);
  tg_log_set_sink(NULL, NULL);
  pthread_mutex_unlock(&g_life_mu);
}

bool tg_agent_connected(void) {
  pthread_mutex_lock(&g.wait_mu);
  bool r = g.ready_for_waiters;
  pthread_mutex_unlock(&g.wait_mu);
  return r;
}

int tg_agent_wait_connected(uint32_t timeout_ms) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  int rv = 0;
  pthread_mutex_lock(&g.wait_mu);
  while (!g.ready_for_waiters && rv == 0)
    if (pthread_cond_timedwait(&g.wait_cv, &g.wait_mu, &dl) == ETIMEDOUT)
      rv = TG_ETIMEOUT;
  if (g.ready_for_waiters) rv = 0;
  pthread_mutex_unlock(&g.wait_mu);
  return rv;
}

void tg_agent_get_stats(tg_agent_stats_t *out) {
  memset(out, 0, sizeof(*out));
  out->connects = atomic_load(&g.connects);
  out->disconnects = atomic_load(&g.disconnects);
  out->packets_written = atomic_load(&tg__agent_packets_written);
  out->packets_dropped = atomic_load(&tg__agent_packets_dropped);
  out->commits_sent = atomic_load(&g.commits_sent);
  out->chunks_committed = atomic_load(&g.chunks_past) + atomic_load(&g.chunks_now);
  out->patches_sent = atomic_load(&g.patches_past) + atomic_load(&g.patches_now);
  out->stalls = atomic_load(&g.stalls_past) + atomic_load(&g.stalls_now);
  out->flushes_acked = atomic_load(&g.flushes_acked);
}
