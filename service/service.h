/* tracegated's internal model: producers, data source instances, sessions.
 *
 * Shared by the files of service/ only (producer_port.c, consumer_port.c,
 * session.c, readout.c, main.c); nothing outside service/ includes it.
 * Everything runs on one libuv loop thread.
 *
 *   consumer --EnableTracing--> session --buffers--> tg_trace_buffer
 *                                  |  \--instances--> producer (ds instance)
 *   producer --CommitData--> SMB chunk copied into the session's buffer
 */
#ifndef TRACEGATE_SERVICE_SERVICE_H
#define TRACEGATE_SERVICE_SERVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "abi/smb.h"
#include "pb/common/commit_data_request.pb-c.h"
#include "pb/common/trace_stats.pb-c.h"
#include "pb/config/trace_config.pb-c.h"
#include "ipc/host.h"
#include "service/trace_buffer.h"
#include "common/buf.h"
#include "common/list.h"

#define TG_SERVICE_MAX_BUFFERS_PER_SESSION 32
#define TG_SERVICE_MAX_SESSIONS 64
#define TG_SERVICE_MAX_BUFFER_BYTES (4ull << 30) /* per buffer */
#define TG_SERVICE_MAX_DATA_SOURCES_PER_PRODUCER 256
#define TG_SERVICE_MAX_WRITERS_PER_PRODUCER 1024
#define TG_SERVICE_DEFAULT_FLUSH_TIMEOUT_MS 5000
#define TG_SERVICE_DEFAULT_STOP_TIMEOUT_MS 5000

typedef struct tg_service tg_service_t;
typedef struct tg_producer tg_producer_t;
typedef struct tg_session tg_session_t;
typedef struct tg_ds_instance tg_ds_instance_t;

typedef struct tg_service_options {
  const char *producer_socket;
  const char *consumer_socket;
  mode_t producer_mode; /* default 0666: producers are untrusted */
  mode_t consumer_mode; /* default 0660: consumers are trusted */
  size_t max_producers;
  size_t max_consumers;
} tg_service_options_t;

typedef struct tg_registered_ds {
  char *name;
  uint64_t id; /* producer-chosen descriptor id */
  bool will_notify_on_start;
  bool will_notify_on_stop;
  bool handles_incremental_state_clear;
  bool no_flush;
} tg_registered_ds_t;

typedef struct tg_writer_reg {
  uint16_t writer_id;
  uint32_t target_buffer; /* global buffer id */
} tg_writer_reg_t;

struct tg_producer {
  tg_service_t *svc;
  tg_ipc_host_conn_t *conn;
  tg_list_t node;
  tg_producer_ident_t ident; /* id + SO_PEERCRED uid/pid */
  char *name;
  size_t smb_size_hint;
  size_t page_size_hint;
  bool initialized;

  /* SMB: created lazily when the first data source is set up. */
  int smb_fd;
  void *smb_map;
  tg_smb_t smb;

  bool has_async_call; /* GetAsyncCommand stream open */
  tg_ipc_call_t async_call;
  bool smb_sent;

  tg_registered_ds_t *ds;
  size_t n_ds;
  tg_writer_reg_t *writers;
  size_t n_writers;
  tg_list_t instances; /* tg_ds_instance_t.producer_node */
  tg_buf_t pending_cmds; /* [u32 len][GetAsyncCommandResponse] before the
                            GetAsyncCommand stream is open */
  int pending_smb_fd;    /* rides with the first pending command */

  uint64_t commits;
  uint64_t abi_violations; /* SMB misuse not attributable to a buffer */
};

enum tg_ds_state {
  TG_DS_SETUP,
  TG_DS_STARTING,
  TG_DS_STARTED,
  TG_DS_STOPPING,
  TG_DS_STOPPED,
};

struct tg_ds_instance {
  uint64_t id;
  tg_producer_t *producer;
  tg_session_t *session;
  tg_list_t producer_node;
  tg_list_t session_node;
  const tg_registered_ds_t *ds; /* valid while the producer lives */
  size_t cfg_index;             /* its entry in TraceConfig.data_sources */
  char *name;
  char *producer_name; /* copied: events outlive the producer */
  uint32_t target_buffer;
  enum tg_ds_state state;
  bool will_notify_on_stop;
  bool will_notify_on_start;
};

typedef struct tg_session_buffer {
  uint32_t global_id;
  tg_trace_buffer_t *tb;
} tg_session_buffer_t;

enum tg_session_state {
  TG_SESSION_CONFIGURED, /* deferred_start: waiting for StartTracing */
  TG_SESSION_STARTED,
  TG_SESSION_DISABLING,
  TG_SESSION_DISABLED,
};

/* A Flush in progress: waits for every producer's ack or the timeout. */
typedef struct tg_pending_flush {
  tg_list_t node;
  tg_session_t *session;
  uint64_t request_id; /* sent to producers */
  uv_timer_t timer;
  uint16_t *waiting; /* producer ids not acked yet */
  size_t n_waiting;
  bool has_call;
  tg_ipc_call_t call; /* consumer's Flush, if it came from one */
  void (*done)(tg_session_t *s, bool ok); /* internal flushes */
} tg_pending_flush_t;

/* Maps {producer, writer} to the session's trusted_packet_sequence_id. */
typedef struct tg_seq_map {
  uint32_t *keys; /* producer_id << 16 | writer_id; 0 = empty */
  uint32_t *vals;
  size_t cap;
  size_t count;
  uint32_t next; /* next id; 1 is the service's own sequence */
} tg_seq_map_t;

struct tg_session {
  tg_service_t *svc;
  tg_list_t node;
  uint64_t id;
  enum tg_session_state state;
  Perfetto__Protos__TraceConfig *config; /* owned, unpacked */
  uint8_t *config_bytes;                 /* owned, as received */
  size_t config_len;

  tg_ipc_host_conn_t *consumer; /* NULL while detached */
  uid_t consumer_uid;
  bool has_enable_call;
  tg_ipc_call_t enable_call;
  char *detach_key;

  tg_session_buffer_t buffers[TG_SERVICE_MAX_BUFFERS_PER_SESSION];
  size_t n_buffers;
  tg_list_t instances;
  tg_list_t flushes;
  tg_seq_map_t seqs;

  uv_timer_t duration_timer;
  uv_timer_t period_timer; /* flush_period_ms */
  uv_timer_t file_timer;   /* file_write_period_ms */
  uv_timer_t stop_timer;   /* data source stop timeout */
  uv_timer_t clear_timer;  /* incremental_state_config.clear_period_ms */
  unsigned open_timers;    /* closing: free when 0 */
  bool freeing;

  int write_fd; /* write_into_file target, -1 if none */
  uint64_t file_bytes;
  bool file_limit_hit;

  tg_buf_t service_packets; /* pending service packets, [u32 len][bytes] */
  bool preamble_done;
  uint64_t last_sync_marker_ns;
  bool stats_emitted;
  uint64_t invalid_packets;
  uint64_t flushes_requested, flushes_succeeded, flushes_failed;
  uint64_t packets_read, bytes_read;

  /* ObserveEvents subscribers are per consumer; see consumer_port.c. */
};

struct tg_service {
  uv_loop_t *loop;
  tg_service_options_t opt;
  tg_ipc_service_def_t producer_def;
  tg_ipc_service_def_t consumer_def;
  unsigned hosts_open;
  void (*stopped)(void *);
  void *stopped_arg;
  tg_ipc_host_t *producer_host;
  tg_ipc_host_t *consumer_host;
  tg_list_t producers;
  tg_list_t sessions;
  tg_list_t consumers; /* tg_consumer_t, see consumer_port.c */
  size_t n_producers;
  size_t n_sessions;
  uint16_t last_producer_id;
  uint64_t last_session_id;
  uint64_t last_instance_id;
  uint16_t last_buffer_id; /* buffer ids are 16-bit in the SMB ABI */
  uint64_t last_flush_id;
  uint64_t producers_seen;
  uint64_t data_sources_seen;
  uint64_t chunks_discarded; /* commits for unknown/forbidden buffers */
  uint64_t patches_discarded;
  bool stopping;
};

/* --- service.c: lifetime --------------------------------------------- */
int tg_service_start(tg_service_t *svc, uv_loop_t *loop,
                     const tg_service_options_t *opt);
/* Ends every session (files flushed), closes sockets; |done| when closed. */
void tg_service_stop(tg_service_t *svc, void (*done)(void *), void *arg);

/* --- producer_port.c -------------------------------------------------- */
void tg__producer_port_bind(tg_service_t *svc, tg_ipc_service_def_t *def);
/* Sets up and starts |inst| on its producer (creates the SMB on first use). */
int tg__producer_setup_instance(tg_ds_instance_t *inst,
                                const Perfetto__Protos__DataSourceConfig *cfg);
void tg__producer_start_instance(tg_ds_instance_t *inst,
                                 const Perfetto__Protos__DataSourceConfig *cfg);
void tg__producer_stop_instance(tg_ds_instance_t *inst);
void tg__producer_flush(tg_producer_t *p, uint64_t flush_id,
                        const uint64_t *instance_ids, size_t n);
void tg__producer_clear_incremental_state(tg_producer_t *p,
                                          const uint64_t *ids, size_t n);
/* Copies the chunks of |p|'s SMB that are BeingWritten by writers of
 * |session| into its buffers (flush timeouts, disable, disconnect). */
void tg__producer_scrape(tg_producer_t *p, tg_session_t *session);
tg_producer_t *tg__producer_by_id(tg_service_t *svc, uint16_t id);

/* --- producer_smb.c ---------------------------------------------------- */
/* Creates |p|'s SMB (sealed memfd, mapped shared) sized for session |s|. */
int tg__producer_smb_create(tg_producer_t *p, tg_session_t *s);
/* The session owning |buffer_id| if |p| has an instance in it, else NULL. */
tg_session_t *tg__producer_allowed_session(tg_producer_t *p, uint32_t buffer_id);
void tg__producer_commit_move(
    tg_producer_t *p, const Perfetto__Protos__CommitDataRequest__ChunksToMove *m);
void tg__producer_commit_patch(
    tg_producer_t *p, const Perfetto__Protos__CommitDataRequest__ChunkToPatch *cp);

/* --- session.c -------------------------------------------------------- */
/* Validates and creates a session from |cfg_bytes| (a TraceConfig; copied).
 * Takes ownership of |write_fd| (-1 for none) in every outcome: kept for
 * write_into_file, closed otherwise. On failure returns NULL and a message
 * naming the field in |err|. */
tg_session_t *tg__session_create(tg_service_t *svc, const uint8_t *cfg_bytes,
                                 size_t cfg_len, int write_fd, char *err,
                                 size_t errlen);
void tg__session_start(tg_session_t *s);
void tg__session_disable(tg_session_t *s);
void tg__session_free(tg_session_t *s);
/* Starts a flush; |call| (may be NULL) is answered when done. */
void tg__session_flush(tg_session_t *s, uint32_t timeout_ms,
                       const tg_ipc_call_t *call,
                       void (*done)(tg_session_t *, bool));
void tg__session_flush_ack(tg_service_t *svc, tg_producer_t *p,
                           uint64_t flush_id);
/* A producer acked StopDataSource (or went away). */
void tg__session_instance_stopped(tg_ds_instance_t *inst);
/* The session's producer filters changed: instantiate its data sources on
 * producers that match now (existing instances stay). */
void tg__session_rematch(tg_session_t *s);
/* A producer registered a data source: existing sessions may want it. */
void tg__session_on_data_source_registered(tg_service_t *svc,
                                           tg_producer_t *p,
                                           const tg_registered_ds_t *ds);
void tg__session_on_producer_gone(tg_service_t *svc, tg_producer_t *p);
/* Arms the START_TRACING trigger timeout (EnableTracing with a START
 * trigger config leaves the session CONFIGURED until the trigger). */
void tg__session_arm_trigger_timeout(tg_session_t *s);
bool tg__session_waits_for_trigger(const tg_session_t *s);
/* A producer activated trigger |name| (ActivateTriggers). */
void tg__session_on_trigger(tg_service_t *svc, tg_producer_t *p,
                            const char *name);
tg_trace_buffer_t *tg__session_buffer(tg_session_t *s, uint32_t global_id);
/* Finds the session owning global buffer |id|. */
tg_session_t *tg__session_by_buffer(tg_service_t *svc, uint32_t id);
uint32_t tg__session_sequence_id(tg_session_t *s, uint16_t producer_id,
                                 uint16_t writer_id);
/* Notifies the consumer that tracing ended (EnableTracing reply). */
void tg__session_notify_disabled(tg_session_t *s, const char *error);

/* --- readout.c -------------------------------------------------------- */
/* Queues the service packets that open a trace (config, clocks, system). */
void tg__readout_preamble(tg_session_t *s);
void tg__readout_clock_snapshot(tg_session_t *s);
void tg__readout_service_event(tg_session_t *s, int event_field);
void tg__readout_trace_stats(tg_session_t *s);
/* Fills |pbw|-free callback-based output: for each packet, calls |emit|
 * with the packet's pieces. Returns 1 if more data remains, 0 if drained,
 * negative on error. Stops when |emit| returns non-zero (budget reached). */
typedef int (*tg_readout_emit_fn)(void *ctx, const uint8_t *const *pieces,
                                  const size_t *lens, unsigned n, size_t total);
int tg__readout_drain(tg_session_t *s, tg_readout_emit_fn emit, void *ctx);
/* Fills a TraceStats message for |s|; free with tg__readout_stats_free. */

Perfetto__Protos__TraceStats *tg__readout_stats_new(tg_session_t *s);
void tg__readout_stats_free(Perfetto__Protos__TraceStats *st);
/* Drains the session into its write_into_file fd. */
void tg__readout_write_file(tg_session_t *s);

/* --- consumer_port.c -------------------------------------------------- */
void tg__consumer_port_bind(tg_service_t *svc, tg_ipc_service_def_t *def);
/* Observable events: tell subscribed consumers. */
void tg__consumer_notify_instance_state(tg_service_t *svc,
                                        tg_ds_instance_t *inst);
void tg__consumer_notify_all_started(tg_session_t *s);
/* |s| is being freed: consumers holding it forget it. */
void tg__consumer_forget_session(tg_service_t *svc, tg_session_t *s);

#endif /* TRACEGATE_SERVICE_SERVICE_H */
