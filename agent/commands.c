/* The service's commands on the GetAsyncCommand stream, and the data
 * source instances they drive.
 *
 * SetupTracing brings the SMB (smb_map.c); SetupDataSource and
 * StartDataSource fill an instance slot of the named data source and run
 * the app's callbacks; StopDataSource commits what the instance wrote and
 * then says it stopped; Flush and ClearIncrementalState reach the listed
 * instances. Every id and config field comes from the service and is
 * checked before it picks a slot or a buffer.
 *
 * Agent's thread only. Writes tg__agent.session.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_internal.h"
#include "agent/agent_log.h"
#include "agent/data_source.h"
#include "agent/smb_map.h"
#include "pb/config/data_source_config.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "tracegate/error.h"

static tg__agent_session_t *const session = &tg__agent.session;

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
  tg__ds_inst_setup(ds, k, id, (uint16_t)cfg->target_buffer, session->arb);
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
  /* Enabled first, so that on_start may already write packets; and with
   * the commit timer running, so that they reach the service. */
  tg__ds_inst_start(ds, k);
  tg__commit_timer_update();
  if (ds->cbs.on_start) {
    size_t len = 0;
    uint8_t *b = cfg ? pack_config(cfg, &len) : NULL;
    ds->cbs.on_start(ds->cbs.ctx, k, b, len);
    free(b);
  }
}

static void stop_instance(tg_ds_t *ds, unsigned k, bool notify) {
  uint64_t id = ds->inst[k].instance_id;
  if (ds->cbs.on_stop) ds->cbs.on_stop(ds->cbs.ctx, k);
  tg__ds_inst_stop(ds, k);
  /* The last started instance takes the periodic commit with it; what it
   * wrote goes out just below. */
  tg__commit_timer_update();
  if (!notify) return;
  tg__commit_all(0);
  Perfetto__Protos__NotifyDataSourceStoppedRequest r =
      PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;
  r.has_data_source_id = true;
  r.data_source_id = id;
  tg__conn_invoke("NotifyDataSourceStopped", &r.base, NULL, NULL);
}

void tg__commands_on_disconnect(void) {
  size_t n = tg__ds_count();
  for (size_t i = 0; i < n; i++) {
    tg_ds_t *ds = tg__ds_at(i);
    for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++)
      if (ds->inst[k].in_use) stop_instance(ds, k, false);
  }
  /* Writers still holding chunks see the shutdown and drop into nothing;
   * the mapping goes with the last reference. */
  if (session->arb) {
    tg__commit_retire_arbiter_stats();
    tg_arbiter_shutdown(session->arb);
    tg_arbiter_unref(session->arb);
    session->arb = NULL;
  }
  tg__commit_timer_stop();
}

/* --- async commands ------------------------------------------------------ */

static void setup_tracing(int fd_untrusted, uint32_t page_kb) {
  if (fd_untrusted < 0) {
    tg__agent_log(TG_LOG_ERROR,
                  "agent: SetupTracing came without the SMB file descriptor");
    return;
  }
  if (session->arb) {
    /* One SMB per connection; a second one is a service bug. */
    tg__agent_log(TG_LOG_WARN, "agent: ignoring a second SetupTracing");
    close(fd_untrusted);
    return;
  }
  tg__smb_map_opts_t o = {
      .page_size_kb = page_kb,
      .stall_when_full =
          tg__agent.cfg.opts.on_smb_full == TG_AGENT_FULL_STALL,
      .reserve = tg__agent.cfg.opts.smb_size_hint == 0,
      .direct_patching = tg__agent.link.direct_patching,
      .wake = tg__agent_wake,
  };
  /* On failure the session has no SMB: instances start and drop. */
  tg__smb_map(fd_untrusted, &o, &session->arb);
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

static void stop_data_source(uint64_t id) {
  tg_ds_t *ds;
  unsigned k;
  if (find_instance(id, &ds, &k)) {
    stop_instance(ds, k, true);
    return;
  }
  /* Not ours (or already gone): still say it stopped, or the service
   * waits for its stop timeout. */
  Perfetto__Protos__NotifyDataSourceStoppedRequest s =
      PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_REQUEST__INIT;
  s.has_data_source_id = true;
  s.data_source_id = id;
  tg__conn_invoke("NotifyDataSourceStopped", &s.base, NULL, NULL);
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
    case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE:
      stop_data_source(cmd->stop_data_source->instance_id);
      break;
    case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH:
      for_each_listed_instance(cmd->flush->data_source_ids,
                               cmd->flush->n_data_source_ids, flush_one);
      tg__commit_all(cmd->flush->request_id);
      tg__commit_kick();
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

int tg__commands_open(void) {
  Perfetto__Protos__GetAsyncCommandRequest req =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;
  return tg__conn_invoke("GetAsyncCommand", &req.base, on_async_command,
                         NULL);
}
