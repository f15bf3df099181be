/* ProducerPort: the producer socket's 12 methods and the producer's
 * lifetime (its SMB and commits live in producer_smb.c).
 *
 * Producers are untrusted. Every index, id and size in their requests is
 * checked; their SMB is read only through the abi/ state machine and copied
 * before it is parsed; they may only write into buffers of sessions they
 * have a data source instance in, and only patch their own chunks (the
 * producer id comes from the connection, never from the request).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pb/ipc/producer_port.pb-c.h"
#include "common/log.h"
#include "common/notice.h"
#include "service/ds_descriptor.h"
#include "service/producer_port.h"
#include "service/producer_smb.h"
#include "service/producer_smb_offer.h"
#include "service/session.h"
#include "service/session_flush.h"
#include "tracegate/error.h"

#define MAX_NAME_LEN 256

static tg_producer_t *producer_of(tg_ipc_call_t call) {
  return call.conn->user;
}

static tg_producer_t *producer_by_id(tg_service_t *svc, uint16_t id) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->producers) {
    tg_producer_t *p = TG_CONTAINER_OF(it, tg_producer_t, node);
    if (p->ident.producer_id == id) return p;
  }
  return NULL;
}

static uint16_t allocate_producer_id(tg_service_t *svc) {
  /* Ids are not reused until they wrap, so a late patch or commit can never
   * be attributed to a newer producer that got a dead one's id. */
  for (int i = 0; i < 65535; i++) {
    uint16_t id = (uint16_t)(svc->last_producer_id + 1);
    if (id == 0) id = 1;
    svc->last_producer_id = id;
    if (!producer_by_id(svc, id)) return id;
  }
  return 0;
}

/* Producers bind on connect: the conn->user slot is set at first call. */
static tg_producer_t *producer_get_or_create(void *ctx, tg_ipc_call_t call) {
  tg_service_t *svc = ctx;
  tg_producer_t *p = call.conn->user;
  if (p) return p;
  if (svc->n_producers >= svc->opt.max_producers) return NULL;
  uint16_t id = allocate_producer_id(svc);
  if (!id) return NULL;
  p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->svc = svc;
  p->conn = call.conn;
  p->ident.producer_id = id;
  p->ident.uid = call.conn->chan.peer_uid;
  p->ident.pid = call.conn->chan.peer_pid;
  p->serial = svc->producers_seen + 1;
  p->smb_fd = -1;
  p->pending_smb_fd = -1;
  tg_list_init(&p->instances);
  tg_buf_init(&p->pending_cmds, 4u << 20);
  tg_list_insert_tail(&svc->producers, &p->node);
  svc->n_producers++;
  svc->producers_seen++;
  call.conn->user = p;
  return p;
}

static void fail(tg_ipc_call_t call) { tg_ipc_reply(&call, false, false, NULL, -1); }

/* --- async commands ------------------------------------------------------ */

static void send_command(tg_producer_t *p,
                         const Perfetto__Protos__GetAsyncCommandResponse *cmd,
                         int fd) {
  if (p->has_async_call && tg_buf_size(&p->pending_cmds) == 0) {
    if (tg_ipc_reply(&p->async_call, true, true, &cmd->base, fd) < 0)
      TG_WARN("producer %u (%s): could not send a command",
              p->ident.producer_id, p->name ? p->name : "?");
    return;
  }
  /* No stream yet: keep the command for when GetAsyncCommand arrives. */
  size_t n = perfetto__protos__get_async_command_response__get_packed_size(cmd);
  uint8_t *dst = tg_buf_reserve(&p->pending_cmds, 4 + n);
  if (!dst) {
    TG_WARN("producer %u: command queue full; closing", p->ident.producer_id);
    if (fd >= 0) close(fd);
    tg_ipc_host_conn_close(p->conn, -ENOBUFS);
    return;
  }
  memcpy(dst, &(uint32_t){(uint32_t)n}, 4);
  perfetto__protos__get_async_command_response__pack(cmd, dst + 4);
  tg_buf_commit(&p->pending_cmds, 4 + n);
  if (fd >= 0) {
    if (p->pending_smb_fd >= 0) close(p->pending_smb_fd);
    p->pending_smb_fd = fd;
  }
}

static void flush_pending_commands(tg_producer_t *p) {
  bool first = true;
  while (tg_buf_size(&p->pending_cmds) >= 4) {
    uint8_t *b = tg_buf_begin(&p->pending_cmds);
    uint32_t n;
    memcpy(&n, b, 4);
    int fd = first ? p->pending_smb_fd : -1; /* SetupTracing comes first */
    if (first) p->pending_smb_fd = -1;
    first = false;
    tg_ipc_reply_bytes(&p->async_call, true, true, b + 4, n, fd);
    tg_buf_consume(&p->pending_cmds, 4 + n);
  }
}

/* --- instances ------------------------------------------------------------ */

static void send_ds_command(tg_ds_instance_t *inst,
                            const Perfetto__Protos__DataSourceConfig *cfg,
                            bool start) {
  Perfetto__Protos__DataSourceConfig c = *cfg;
  c.has_target_buffer = 1;
  c.target_buffer = inst->target_buffer;
  c.has_tracing_session_id = 1;
  c.tracing_session_id = inst->session->id;
  Perfetto__Protos__GetAsyncCommandResponse cmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  Perfetto__Protos__GetAsyncCommandResponse__SetupDataSource setup =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_DATA_SOURCE__INIT;
  Perfetto__Protos__GetAsyncCommandResponse__StartDataSource st =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__START_DATA_SOURCE__INIT;
  if (start) {
    st.has_new_instance_id = 1;
    st.new_instance_id = inst->id;
    st.config = &c;
    cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE;
    cmd.start_data_source = &st;
  } else {
    setup.has_new_instance_id = 1;
    setup.new_instance_id = inst->id;
    setup.config = &c;
    cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE;
    cmd.setup_data_source = &setup;
  }
  send_command(inst->producer, &cmd, -1);
}

static int cmd_setup_instance(tg_ds_instance_t *inst,
                              const Perfetto__Protos__DataSourceConfig *cfg) {
  tg_producer_t *p = inst->producer;
  if (!p->smb_map) {
    int rv = tg__producer_smb_create(p, inst->session);
    if (rv < 0) {
      TG_ERROR("producer %u: cannot create its SMB: %s", p->ident.producer_id,
               tg_strerror(rv));
      return rv;
    }
  }
  if (!p->smb_sent) {
    /* The producer's own SMB is not sent back: Perfetto's client aborts
     * on an fd with SetupTracing when it provided the SMB. */
    int fd = -1;
    if (!p->smb_from_producer && (fd = dup(p->smb_fd)) < 0) return -errno;
    Perfetto__Protos__GetAsyncCommandResponse cmd =
        PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
    Perfetto__Protos__GetAsyncCommandResponse__SetupTracing st =
        PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_TRACING__INIT;
    st.has_shared_buffer_page_size_kb = !p->smb_from_producer;
    st.shared_buffer_page_size_kb = (uint32_t)(p->smb.page_size / 1024);
    cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING;
    cmd.setup_tracing = &st;
    send_command(p, &cmd, fd);
    p->smb_sent = true;
  }
  send_ds_command(inst, cfg, false);
  return 0;
}

static void cmd_start_instance(tg_ds_instance_t *inst,
                               const Perfetto__Protos__DataSourceConfig *cfg) {
  send_ds_command(inst, cfg, true);
}

static void cmd_stop_instance(tg_ds_instance_t *inst) {
  Perfetto__Protos__GetAsyncCommandResponse cmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  Perfetto__Protos__GetAsyncCommandResponse__StopDataSource st =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__STOP_DATA_SOURCE__INIT;
  st.has_instance_id = 1;
  st.instance_id = inst->id;
  cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE;
  cmd.stop_data_source = &st;
  send_command(inst->producer, &cmd, -1);
}

static void cmd_flush(tg_producer_t *p, uint64_t flush_id,
                      const uint64_t *ids, size_t n) {
  Perfetto__Protos__GetAsyncCommandResponse cmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  Perfetto__Protos__GetAsyncCommandResponse__Flush fl =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__FLUSH__INIT;
  fl.n_data_source_ids = n;
  fl.data_source_ids = (uint64_t *)ids;
  fl.has_request_id = 1;
  fl.request_id = flush_id;
  cmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH;
  cmd.flush = &fl;
  send_command(p, &cmd, -1);
}

static void cmd_clear_incremental_state(tg_producer_t *p,
                                        const uint64_t *ids, size_t n) {
  Perfetto__Protos__GetAsyncCommandResponse cmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  Perfetto__Protos__GetAsyncCommandResponse__ClearIncrementalState c =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CLEAR_INCREMENTAL_STATE__INIT;
  c.n_data_source_ids = n;
  c.data_source_ids = (uint64_t *)ids;
  cmd.cmd_case =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE;
  cmd.clear_incremental_state = &c;
  send_command(p, &cmd, -1);
}

static tg_ds_instance_t *instance_by_id(tg_producer_t *p, uint64_t id) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &p->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, producer_node);
    if (inst->id == id) return inst;
  }
  return NULL;
}

/* --- methods ---------------------------------------------------------------- */

static void m_initialize_connection(void *ctx, tg_ipc_call_t call,
                                    const uint8_t *args, size_t len) {
  tg_producer_t *p = producer_get_or_create(ctx, call);
  if (!p) {
    fail(call);
    tg_ipc_host_conn_close(call.conn, -EMFILE);
    return;
  }
  Perfetto__Protos__InitializeConnectionRequest *req =
      perfetto__protos__initialize_connection_request__unpack(NULL, len, args);
  if (!req || p->initialized) {
    if (req) perfetto__protos__initialize_connection_request__free_unpacked(req, NULL);
    fail(call);
    return;
  }
  int fd = tg_ipc_chan_take_fd(&call.conn->chan);
  p->initialized = true;
  const char *name = req->producer_name ? req->producer_name : "";
  p->name = strndup(name, MAX_NAME_LEN);
  p->page_size_hint = req->has_shared_memory_page_size_hint_bytes
                          ? req->shared_memory_page_size_hint_bytes : 0;
  p->smb_size_hint = req->has_shared_memory_size_hint_bytes
                         ? req->shared_memory_size_hint_bytes : 0;
  TG_INFO("producer %u connected: '%s' pid %d uid %u sdk '%s'",
          p->ident.producer_id, p->name ? p->name : "", (int)p->ident.pid,
          (unsigned)p->ident.uid, req->sdk_version ? req->sdk_version : "");
  /* Its own SMB, when it offers one and it is safe to map; otherwise ours
   * later, and the reply says so (Perfetto's fallback). An fd without the
   * flag is not an offer. */
  bool offered = req->has_producer_provided_shmem && req->producer_provided_shmem;
  if (offered && fd >= 0)
    tg__producer_smb_adopt(p, fd, p->smb_size_hint, p->page_size_hint);
  else if (fd >= 0)
    close(fd);
  else if (offered)
    TG_WARN("producer %u: producer_provided_shmem without an fd; a service "
            "SMB will be used", p->ident.producer_id);
  perfetto__protos__initialize_connection_request__free_unpacked(req, NULL);
  Perfetto__Protos__InitializeConnectionResponse resp =
      PERFETTO__PROTOS__INITIALIZE_CONNECTION_RESPONSE__INIT;
  resp.has_using_shmem_provided_by_producer = 1;
  resp.using_shmem_provided_by_producer = p->smb_from_producer;
  /* A producer may write patches into chunks it has not released yet:
   * the service reads a chunk only once Complete, and takes a scraped
   * BeingWritten one as incomplete, to be committed again. */
  resp.has_direct_smb_patching_supported = 1;
  resp.direct_smb_patching_supported = 1;
  tg_ipc_reply(&call, true, false, &resp.base, -1);
}

/* Every other method needs an initialized producer. */
static tg_producer_t *ready_producer(tg_ipc_call_t call) {
  tg_producer_t *p = producer_of(call);
  return p && p->initialized ? p : NULL;
}

/* ready_producer(), answering the call with a failure when there is none. */
static tg_producer_t *ready_or_fail(tg_ipc_call_t call) {
  tg_producer_t *p = ready_producer(call);
  if (!p) fail(call);
  return p;
}

/* A refusal's reason goes out led by its code (common/notice.h). */
static void register_ds_reply(tg_ipc_call_t call, const char *error) {
  Perfetto__Protos__RegisterDataSourceResponse r =
      PERFETTO__PROTOS__REGISTER_DATA_SOURCE_RESPONSE__INIT;
  char coded[256];
  if (error) {
    snprintf(coded, sizeof(coded), "%s %s", TG_NOTE(SERVICE_DS_REFUSED), error);
    r.error = coded;
  }
  tg_ipc_reply(&call, error == NULL, false, &r.base, -1);
}

static tg_registered_ds_t *ds_by_name(tg_producer_t *p, const char *name) {
  for (size_t i = 0; i < p->n_ds; i++)
    if (strcmp(p->ds[i]->name, name) == 0) return p->ds[i];
  return NULL;
}

static void ds_fill(tg_registered_ds_t *d,
                    const Perfetto__Protos__DataSourceDescriptor *desc) {
  d->id = desc->has_id ? desc->id : 0;
  d->will_notify_on_start = desc->has_will_notify_on_start && desc->will_notify_on_start;
  d->will_notify_on_stop = desc->has_will_notify_on_stop && desc->will_notify_on_stop;
  d->handles_incremental_state_clear = desc->has_handles_incremental_state_clear &&
                                       desc->handles_incremental_state_clear;
  d->no_flush = desc->has_no_flush && desc->no_flush;
}

_Static_assert(TG_DS_DESCRIPTOR_MAX_BYTES == 131029, "say so in the refusal");
_Static_assert(TG_SERVICE_MAX_DESCRIPTOR_BYTES_PER_PRODUCER == 1u << 20,
               "say so in the refusal");

/* Why a descriptor of |len| bytes, replacing one of |replaced| bytes, is
 * refused (counted and logged as the producer's other refusals), or NULL:
 * what a producer makes the service keep is bounded. */
static const char *descriptor_refusal(tg_producer_t *p, size_t len,
                                      size_t replaced) {
  const char *why = NULL;
  if (len > TG_DS_DESCRIPTOR_MAX_BYTES)
    why = "data source descriptor larger than 131029 bytes";
  else if (p->descriptor_bytes - replaced + len >
           TG_SERVICE_MAX_DESCRIPTOR_BYTES_PER_PRODUCER)
    why = "data source descriptors of one producer over 1 MiB in all";
  if (why) tg__producer_refused(p, why, 0, 0);
  return why;
}

/* Gives |ds| a copy of |desc| (replacing its own); 0 or -ENOMEM. */
static int ds_keep_descriptor(tg_producer_t *p, tg_registered_ds_t *ds,
                              const uint8_t *desc, size_t len) {
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy) return -ENOMEM;
  memcpy(copy, desc, len);
  p->descriptor_bytes = p->descriptor_bytes - ds->descriptor_len + len;
  free(ds->descriptor);
  ds->descriptor = copy;
  ds->descriptor_len = len;
  return 0;
}

static void ds_free(tg_producer_t *p, tg_registered_ds_t *ds) {
  p->descriptor_bytes -= ds->descriptor_len;
  free(ds->descriptor);
  free(ds->name);
  free(ds);
}

static void m_register_data_source(void *ctx, tg_ipc_call_t call,
                                   const uint8_t *args, size_t len) {
  tg_service_t *svc = ctx;
  tg_producer_t *p = ready_or_fail(call);
  if (!p) return;
  Perfetto__Protos__RegisterDataSourceRequest *req =
      perfetto__protos__register_data_source_request__unpack(NULL, len, args);
  const Perfetto__Protos__DataSourceDescriptor *d =
      req ? req->data_source_descriptor : NULL;
  const uint8_t *raw = NULL;
  size_t raw_len = 0;
  const char *err = NULL;
  if (!d || !d->name || !d->name[0] || strlen(d->name) > MAX_NAME_LEN)
    err = "data source descriptor needs a name of 1..256 bytes";
  else if (tg__ds_descriptor_find(args, len, &raw, &raw_len) < 0)
    err = "data source descriptor repeated or unreadable";
  else if (ds_by_name(p, d->name))
    err = "a data source with this name is already registered";
  else if (p->n_ds >= TG_SERVICE_MAX_DATA_SOURCES_PER_PRODUCER)
    err = "too many data sources for one producer";
  else
    err = descriptor_refusal(p, raw_len, 0);
  if (err) {
    register_ds_reply(call, err);
    if (req) perfetto__protos__register_data_source_request__free_unpacked(req, NULL);
    return;
  }
  /* Each entry is allocated alone: instances keep pointers to it. */
  tg_registered_ds_t **nds = realloc(p->ds, (p->n_ds + 1) * sizeof(*nds));
  if (nds) p->ds = nds;
  tg_registered_ds_t *ds = nds ? calloc(1, sizeof(*ds)) : NULL;
  char *name = ds ? strdup(d->name) : NULL;
  if (!name || ds_keep_descriptor(p, ds, raw, raw_len) < 0) {
    free(name);
    free(ds);
    register_ds_reply(call, "out of memory");
    perfetto__protos__register_data_source_request__free_unpacked(req, NULL);
    return;
  }
  ds->name = name;
  ds_fill(ds, d);
  p->ds[p->n_ds++] = ds;
  svc->data_sources_seen++;
  TG_INFO("producer %u registered data source '%s'", p->ident.producer_id,
          ds->name);
  perfetto__protos__register_data_source_request__free_unpacked(req, NULL);
  register_ds_reply(call, NULL);
  tg__session_on_data_source_registered(svc, p, ds);
}

static void m_update_data_source(void *ctx, tg_ipc_call_t call,
                                 const uint8_t *args, size_t len) {
  (void)ctx;
  tg_producer_t *p = ready_or_fail(call);
  if (!p) return;
  Perfetto__Protos__UpdateDataSourceRequest *req =
      perfetto__protos__update_data_source_request__unpack(NULL, len, args);
  const Perfetto__Protos__DataSourceDescriptor *d =
      req ? req->data_source_descriptor : NULL;
  tg_registered_ds_t *ds = d && d->name ? ds_by_name(p, d->name) : NULL;
  const uint8_t *raw = NULL;
  size_t raw_len = 0;
  bool ok = ds && tg__ds_descriptor_find(args, len, &raw, &raw_len) == 0 &&
            !descriptor_refusal(p, raw_len, ds->descriptor_len) &&
            ds_keep_descriptor(p, ds, raw, raw_len) == 0;
  if (ok) ds_fill(ds, d);
  if (req) perfetto__protos__update_data_source_request__free_unpacked(req, NULL);
  Perfetto__Protos__UpdateDataSourceResponse r =
      PERFETTO__PROTOS__UPDATE_DATA_SOURCE_RESPONSE__INIT;
  tg_ipc_reply(&call, ok, false, &r.base, -1);
}

static void m_unregister_data_source(void *ctx, tg_ipc_call_t call,
                                     const uint8_t *args, size_t len) {
  (void)ctx;
  tg_producer_t *p = ready_or_fail(call);
  if (!p) return;
  Perfetto__Protos__UnregisterDataSourceRequest *req =
      perfetto__protos__unregister_data_source_request__unpack(NULL, len, args);
  tg_registered_ds_t *ds =
      req && req->data_source_name ? ds_by_name(p, req->data_source_name) : NULL;
  if (req) perfetto__protos__unregister_data_source_request__free_unpacked(req, NULL);
  if (!ds) {
    fail(call);
    return;
  }
  /* Its running instances end as if stopped. */
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &p->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, producer_node);
    if (inst->ds == ds) tg__session_instance_gone(inst);
  }
  size_t idx = 0;
  while (p->ds[idx] != ds) idx++; /* found by ds_by_name: present */
  memmove(&p->ds[idx], &p->ds[idx + 1], (p->n_ds - idx - 1) * sizeof(*p->ds));
  p->n_ds--;
  ds_free(p, ds);
  Perfetto__Protos__UnregisterDataSourceResponse r =
      PERFETTO__PROTOS__UNREGISTER_DATA_SOURCE_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}

static void m_commit_data(void *ctx, tg_ipc_call_t call, const uint8_t *args,
                          size_t len) {
  tg_service_t *svc = ctx;
  tg_producer_t *p = ready_or_fail(call);
  if (!p) return;
  /* Read in place: no allocation per chunk (service/commit_data.h). */
  tg_commit_data_t req;
  if (tg_commit_data_parse(args, len, &req) < 0) {
    p->abi_violations++;
    fail(call);
    return;
  }
  p->commits++;
  tg_commit_iter_t it;
  tg_commit_move_t m;
  tg_commit_iter_init(&it, &req);
  while (tg_commit_next_move(&it, &m) == 1) tg__producer_commit_move(p, &m);
  tg_commit_patch_t cp;
  tg_commit_iter_init(&it, &req);
  while (tg_commit_next_patch(&it, &cp) == 1) tg__producer_commit_patch(p, &cp);
  bool ack = req.has_flush_request_id && req.flush_request_id;
  uint64_t flush_id = req.flush_request_id;
  Perfetto__Protos__CommitDataResponse r = PERFETTO__PROTOS__COMMIT_DATA_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
  /* Moves first, then patches, then the flush acknowledgement. */
  if (ack) tg__session_flush_ack(svc, p, flush_id);
}

static void m_get_async_command(void *ctx, tg_ipc_call_t call,
                                const uint8_t *args, size_t len) {
  (void)ctx;
  (void)args;
  (void)len;
  tg_producer_t *p = ready_producer(call);
  if (!p || p->has_async_call || call.drop_reply) {
    fail(call);
    return;
  }
  p->has_async_call = true;
  p->async_call = call;
  flush_pending_commands(p);
}

static void m_register_trace_writer(void *ctx, tg_ipc_call_t call,
                                    const uint8_t *args, size_t len) {
  (void)ctx;
  tg_producer_t *p = ready_or_fail(call);
  if (!p) return;
  Perfetto__Protos__RegisterTraceWriterRequest *req =
      perfetto__protos__register_trace_writer_request__unpack(NULL, len, args);
  bool ok = req && req->has_trace_writer_id;
  uint32_t target = req && req->has_target_buffer ? req->target_buffer : 0;
  if (ok && (req->trace_writer_id == 0 ||
             req->trace_writer_id > TG_TRACE_BUFFER_MAX_WRITER_ID)) {
    tg__producer_refused(p, "RegisterTraceWriter with a writer id outside "
                         "1..32767", target, req->trace_writer_id);
    ok = false;
  } else if (ok && !tg__producer_allowed_session(p, target)) {
    /* Scraping follows registrations: one for a buffer the producer may not
     * write would let it write there. */
    tg__producer_refused(p, "RegisterTraceWriter for a buffer none of its "
                         "data sources targets", target, req->trace_writer_id);
    ok = false;
  }
  if (ok) {
    uint16_t wid = (uint16_t)req->trace_writer_id;
    size_t i = 0;
    while (i < p->n_writers && p->writers[i].writer_id != wid) i++;
    if (i == p->n_writers) {
      if (p->n_writers >= TG_SERVICE_MAX_WRITERS_PER_PRODUCER) {
        ok = false;
      } else {
        tg_writer_reg_t *w = realloc(p->writers, (p->n_writers + 1) * sizeof(*w));
        if (!w) {
          ok = false;
        } else {
          p->writers = w;
          p->n_writers++;
        }
      }
    }
    if (ok) {
      p->writers[i].writer_id = wid;
      p->writers[i].target_buffer = target;
    }
  }
  if (req) perfetto__protos__register_trace_writer_request__free_unpacked(req, NULL);
  Perfetto__Protos__RegisterTraceWriterResponse r =
      PERFETTO__PROTOS__REGISTER_TRACE_WRITER_RESPONSE__INIT;
  tg_ipc_reply(&call, ok, false, &r.base, -1);
}

static void m_unregister_trace_writer(void *ctx, tg_ipc_call_t call,
                                      const uint8_t *args, size_t len) {
  (void)ctx;
  tg_producer_t *p = ready_or_fail(call);
  if (!p) return;
  Perfetto__Protos__UnregisterTraceWriterRequest *req =
      perfetto__protos__unregister_trace_writer_request__unpack(NULL, len, args);
  bool ok = false;
  if (req && req->has_trace_writer_id) {
    for (size_t i = 0; i < p->n_writers; i++) {
      if (p->writers[i].writer_id != req->trace_writer_id) continue;
      /* Its id may come back for a writer that starts at chunk 0 again. */
      uint32_t target = p->writers[i].target_buffer;
      tg_session_t *s = tg__producer_allowed_session(p, target);
      tg_trace_buffer_t *tb = s ? tg__session_buffer(s, target) : NULL;
      if (tb)
        tg_trace_buffer_writer_gone(tb, p->ident.producer_id,
                                    (uint16_t)p->writers[i].writer_id);
      p->writers[i] = p->writers[--p->n_writers];
      ok = true;
      break;
    }
  }
  if (req) perfetto__protos__unregister_trace_writer_request__free_unpacked(req, NULL);
  Perfetto__Protos__UnregisterTraceWriterResponse r =
      PERFETTO__PROTOS__UNREGISTER_TRACE_WRITER_RESPONSE__INIT;
  tg_ipc_reply(&call, ok, false, &r.base, -1);
}

static void m_notify_started(void *ctx, tg_ipc_call_t call, const uint8_t *args,
                             size_t len) {
  (void)ctx;
  tg_producer_t *p = ready_or_fail(call);
  if (!p) return;
  Perfetto__Protos__NotifyDataSourceStartedRequest *req =
      perfetto__protos__notify_data_source_started_request__unpack(NULL, len, args);
  tg_ds_instance_t *inst =
      req && req->has_data_source_id ? instance_by_id(p, req->data_source_id) : NULL;
  if (req) perfetto__protos__notify_data_source_started_request__free_unpacked(req, NULL);
  if (inst) tg__session_instance_started(inst);
  Perfetto__Protos__NotifyDataSourceStartedResponse r =
      PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STARTED_RESPONSE__INIT;
  tg_ipc_reply(&call, inst != NULL, false, &r.base, -1);
}

static void m_notify_stopped(void *ctx, tg_ipc_call_t call, const uint8_t *args,
                             size_t len) {
  (void)ctx;
  tg_producer_t *p = ready_or_fail(call);
  if (!p) return;
  Perfetto__Protos__NotifyDataSourceStoppedRequest *req =
      perfetto__protos__notify_data_source_stopped_request__unpack(NULL, len, args);
  tg_ds_instance_t *inst =
      req && req->has_data_source_id ? instance_by_id(p, req->data_source_id) : NULL;
  if (req) perfetto__protos__notify_data_source_stopped_request__free_unpacked(req, NULL);
  Perfetto__Protos__NotifyDataSourceStoppedResponse r =
      PERFETTO__PROTOS__NOTIFY_DATA_SOURCE_STOPPED_RESPONSE__INIT;
  tg_ipc_reply(&call, inst != NULL, false, &r.base, -1);
  if (inst) tg__session_instance_gone(inst);
}


static void m_activate_triggers(void *ctx, tg_ipc_call_t call,
                                const uint8_t *args, size_t len) {
  tg_service_t *svc = ctx;
  tg_producer_t *p = ready_or_fail(call);
  if (!p) return;
  Perfetto__Protos__ActivateTriggersRequest *req =
      perfetto__protos__activate_triggers_request__unpack(NULL, len, args);
  if (!req) {
    fail(call);
    return;
  }
  for (size_t i = 0; i < req->n_trigger_names && i < 64; i++)
    if (req->trigger_names[i]) tg__session_on_trigger(svc, p, req->trigger_names[i]);
  perfetto__protos__activate_triggers_request__free_unpacked(req, NULL);
  Perfetto__Protos__ActivateTriggersResponse r =
      PERFETTO__PROTOS__ACTIVATE_TRIGGERS_RESPONSE__INIT;
  tg_ipc_reply(&call, true, false, &r.base, -1);
}

static void m_sync(void *ctx, tg_ipc_call_t call, const uint8_t *args,
                   size_t len) {
  (void)ctx;
  (void)args;
  (void)len;
  /* Requests are handled in order on one thread: by the time this runs,
   * everything the producer sent before it has been processed. */
  Perfetto__Protos__SyncResponse r = PERFETTO__PROTOS__SYNC_RESPONSE__INIT;
  tg_ipc_reply(&call, ready_producer(call) != NULL, false, &r.base, -1);
}

static void on_producer_disconnect(void *ctx, tg_ipc_host_conn_t *conn) {
  tg_service_t *svc = ctx;
  tg_producer_t *p = conn->user;
  if (!p) return;
  conn->user = NULL;
  TG_INFO("producer %u ('%s', pid %d) disconnected", p->ident.producer_id,
          p->name ? p->name : "", (int)p->ident.pid);
  /* Salvage what it wrote but did not commit, then let its sequences be
   * read to the end. */
  tg__producer_scrape(p, NULL);
  tg__session_on_producer_gone(svc, p);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &p->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, producer_node);
    /* Detached first: the SMB was scraped above, and scraping it again
     * would re-commit its unfinished chunks as live ones after the buffers
     * were told the producer is gone, stalling their sequences for ever. */
    tg_list_remove(&inst->producer_node);
    inst->producer = NULL;
    tg__session_instance_gone(inst);
  }
  if (p->smb_map) munmap(p->smb_map, p->smb.size);
  if (p->smb_fd >= 0) close(p->smb_fd);
  if (p->pending_smb_fd >= 0) close(p->pending_smb_fd);
  tg_buf_free(&p->pending_cmds);
  for (size_t i = 0; i < p->n_ds; i++) ds_free(p, p->ds[i]);
  free(p->ds);
  free(p->writers);
  free(p->name);
  tg_list_remove(&p->node);
  svc->n_producers--;
  free(p);
}

static const tg_ipc_method_def_t producer_methods[] = {
    {"InitializeConnection", m_initialize_connection},
    {"RegisterDataSource", m_register_data_source},
    {"UnregisterDataSource", m_unregister_data_source},
    {"CommitData", m_commit_data},
    {"GetAsyncCommand", m_get_async_command},
    {"RegisterTraceWriter", m_register_trace_writer},
    {"UnregisterTraceWriter", m_unregister_trace_writer},
    {"NotifyDataSourceStarted", m_notify_started},
    {"NotifyDataSourceStopped", m_notify_stopped},
    {"ActivateTriggers", m_activate_triggers},
    {"Sync", m_sync},
    {"UpdateDataSource", m_update_data_source},
};

/* What the sessions ask of producers (session.h). */
static const tg_producer_ops_t producer_ops = {
    .setup_instance = cmd_setup_instance,
    .start_instance = cmd_start_instance,
    .stop_instance = cmd_stop_instance,
    .flush = cmd_flush,
    .clear_incremental_state = cmd_clear_incremental_state,
    .scrape = tg__producer_scrape,
    .by_id = producer_by_id,
};

void tg__producer_port_bind(tg_service_t *svc, tg_ipc_service_def_t *def) {
  svc->producer_ops = &producer_ops;
  memset(def, 0, sizeof(*def));
  def->name = "ProducerPort";
  def->methods = producer_methods;
  def->n_methods = sizeof(producer_methods) / sizeof(producer_methods[0]);
  def->ctx = svc;
  def->on_disconnect = on_producer_disconnect;
}
