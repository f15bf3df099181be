/* tracegated's model: the service object, its limits and the names of the
 * objects its files pass around.
 *
 *   consumer --EnableTracing--> session --buffers--> tg_trace_buffer
 *                                  |  \--instances--> producer (ds instance)
 *   producer --CommitData--> SMB chunk copied into the session's buffer
 *
 * Owns: struct tg_service (written by service.c, and by the ports for the
 * counters and lists they keep). Each other struct is declared by the
 * header of the one file that writes it: tg_producer in producer_port.h,
 * tg_session and tg_ds_instance in session.h. Must never grow function
 * declarations of other files: each .c file has its own header. Everything
 * runs on one libuv loop thread; nothing outside service/ includes it.
 */
#ifndef TRACEGATE_SERVICE_SERVICE_H
#define TRACEGATE_SERVICE_SERVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "common/clock.h"
#include "common/list.h"
#include "ipc/host.h"

#define TG_SERVICE_MAX_BUFFERS_PER_SESSION 32
#define TG_SERVICE_MAX_SESSIONS 64
/* The longest unique_session_name or bugreport_filename a config may give. */
#define TG_SESSION_NAME_MAX 1024
#define TG_SERVICE_MAX_BUFFER_BYTES (4ull << 30) /* per buffer */
/* The longest a session may wait for its trigger, as in Perfetto. */
#define TG_SERVICE_MAX_TRIGGER_TIMEOUT_MS (7ull * 24 * 3600 * 1000)
#define TG_SERVICE_MAX_DATA_SOURCES_PER_PRODUCER 256
/* The descriptors one producer keeps registered, in all (each one is at
 * most TG_DS_DESCRIPTOR_MAX_BYTES, service/ds_descriptor.h). */
#define TG_SERVICE_MAX_DESCRIPTOR_BYTES_PER_PRODUCER (1u << 20)
#define TG_SERVICE_MAX_WRITERS_PER_PRODUCER 1024
#define TG_SERVICE_DEFAULT_FLUSH_TIMEOUT_MS 5000
#define TG_SERVICE_DEFAULT_STOP_TIMEOUT_MS 5000
/* How long a data source instance that will_notify_on_start may take to
 * acknowledge its start (NotifyDataSourceStarted) before the trace says
 * it did not start (TracingServiceEvent.slow_starting_data_sources), as
 * Perfetto's traced: the default (20 s) and the largest value
 * --ds-start-timeout-ms may set. */
#define TG_SERVICE_DEFAULT_START_TIMEOUT_MS 20000u
#define TG_SERVICE_MAX_START_TIMEOUT_MS (10u * 60 * 1000)
/* How long a session whose consumer connection died without Detach is
 * kept for a re-Attach, when the connection asked for it
 * (TracegateConsumer.SetDisconnectLease): the default, and the largest
 * value --session-lease-ms may set. */
#define TG_SERVICE_DEFAULT_SESSION_LEASE_MS (10u * 60 * 1000)
#define TG_SERVICE_MAX_SESSION_LEASE_MS (24u * 60 * 60 * 1000)

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
  /* Disconnect leases: what a client asking for 0 gets, and the most any
   * client gets (0: TG_SERVICE_DEFAULT_SESSION_LEASE_MS). */
  uint32_t session_lease_ms;
  /* What the service's decisions read (common/clock.h): leases, the sync
   * marker's period. Borrowed for the service's life; NULL:
   * tg_clock_monotonic. */
  const tg_clock_t *clock;
  /* 0: TG_SERVICE_DEFAULT_START_TIMEOUT_MS. */
  uint32_t ds_start_timeout_ms;
} tg_service_options_t;

struct tg_service {
  uv_loop_t *loop;
  tg_service_options_t opt;
  tg_ipc_service_def_t producer_def;
  /* ConsumerPort, then TracegateConsumer (service/consumer_lease.h). */
  tg_ipc_service_def_t consumer_defs[2];
  unsigned hosts_open;
  void (*stopped)(void *);
  void *stopped_arg;
  tg_ipc_host_t *producer_host;
  tg_ipc_host_t *consumer_host;
  tg_list_t producers; /* tg_producer_t, producer_port.c */
  /* How the sessions reach producers (session.h); set by producer_port.c
   * when it binds, before any session exists. */
  const struct tg_producer_ops *producer_ops;
  tg_list_t sessions;  /* tg_session_t, session.c */
  tg_list_t consumers; /* tg_consumer_conn_t, consumer_port.c */
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
  /* State changes a table refused (common/fsm.h): a bug, logged. */
  uint64_t bad_transitions;
  bool stopping;
  bool sndbuf_cap_logged; /* consumer_port.c: logged once per run */
};

int tg_service_start(tg_service_t *svc, uv_loop_t *loop,
                     const tg_service_options_t *opt);
/* Ends every session (files flushed), closes sockets; |done| when closed. */
void tg_service_stop(tg_service_t *svc, void (*done)(void *), void *arg);

#endif /* TRACEGATE_SERVICE_SERVICE_H */
