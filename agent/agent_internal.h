/* What the files of the agent's thread share. Not installed.
 *
 *   agent.c       public API (init, shutdown, waits, stats), the thread
 *                 and its loop, wake-ups from other threads, logging
 *   connection.c  connect, ProducerPort handshake, data source
 *                 registration, disconnect handling, reconnect backoff
 *   commands.c    GetAsyncCommand dispatch and the instances it drives
 *   commit.c      CommitData batches and the periodic commit timer
 *   smb_map.c     checks and maps SetupTracing's SMB (no state)
 *   triggers.c    tg_agent_activate_triggers: its queue (own mutex)
 *   agent_internal.c  the struct below, logging and the wake-up, which
 *                 every file uses; it calls none of them
 *
 * Calls go one way, agent.c -> commands.c -> commit.c -> connection.c
 * (triggers.c -> connection.c); what happens on the connection goes back
 * up through the events agent.c hands to tg__connection_init, never by a
 * call from connection.c into the files that send on it.
 *
 * The agent is a process singleton: its state is the one struct
 * tg__agent, split by writer. Each part names the one file that writes
 * it; the others only read it, on the agent's thread unless it says
 * otherwise. The data-source registry (data_source.h) is not part of it.
 */
#ifndef TRACEGATE_AGENT_AGENT_INTERNAL_H
#define TRACEGATE_AGENT_AGENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>
#include <uv.h>

#include "agent/smb_arbiter.h"
#include "common/buf.h"
#include "ipc/client.h"
#include "tracegate/agent.h"

#define TG__AGENT_SOCKET_PATH_MAX 108
#define TG__AGENT_PRODUCER_NAME_MAX 128

/* Written by tg_agent_init (agent.c) before the thread starts; constant
 * while it runs, so any thread reads it without a lock. */
typedef struct tg__agent_config {
  tg_agent_options_t opts; /* its strings point at the copies below */
  char socket_path[TG__AGENT_SOCKET_PATH_MAX];
  char producer_name[TG__AGENT_PRODUCER_NAME_MAX];
} tg__agent_config_t;

/* agent.c. |running| and |thread| change in init and shutdown under their
 * lock (|running| with atomic builtins: wakes read it from any thread);
 * the loop and |stopping| belong to the agent's thread while it runs. */
typedef struct tg__agent_thread {
  bool running; /* between init and shutdown */
  pthread_t thread;
  _Atomic bool stop_requested;
  uv_loop_t loop;
  uv_async_t async;
  uv_timer_t clock_timer; /* runs once a reader asked (clock.h) */
  _Atomic bool clock_active; /* mirrors |clock_timer| for other threads */
  bool tsc_usable;
  bool stopping; /* the loop is closing its handles */
} tg__agent_thread_t;

/* A connection to the service; connection.c owns it. */
typedef struct tg__conn tg__conn_t;

/* connection.c, agent's thread; the counters are read by any thread. */
typedef struct tg__agent_link {
  uv_timer_t reconnect_timer;
  tg__conn_t *conn; /* NULL between connections */
  uint32_t backoff_ms;
  size_t ds_acked; /* registrations answered on this connection */
  /* The service takes patches written into chunks not yet released
   * (InitializeConnectionResponse.direct_smb_patching_supported). */
  bool direct_patching;
  _Atomic uint64_t connects, disconnects;
} tg__agent_link_t;

/* For tg_agent_connected() and tg_agent_wait_connected(): written only by
 * tg__agent_set_ready() (connection.c), under |mu|. */
typedef struct tg__agent_readiness {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool ready;
} tg__agent_readiness_t;

/* commands.c, agent's thread: what SetupTracing set up. */
typedef struct tg__agent_session {
  tg_arbiter_t *arb; /* this connection's SMB; NULL before SetupTracing */
} tg__agent_session_t;

/* commit.c, agent's thread; the atomics are read by any thread. */
typedef struct tg__agent_commit {
  uv_timer_t timer;
  _Atomic bool timer_active; /* mirrors |timer| for other threads */
  tg_buf_t buf;
  _Atomic uint64_t commits_sent, flushes_acked;
  /* Arbiter counters: those of past SMBs plus a snapshot of the current
   * one, refreshed after each commit and each tick of the timer. */
  _Atomic uint64_t chunks_past, patches_past, stalls_past;
  _Atomic uint64_t chunks_now, patches_now, stalls_now;
  _Atomic uint64_t dropped_past, markers_past, reclaimed_past;
  _Atomic uint64_t dropped_now, markers_now, reclaimed_now;
  _Atomic uint64_t in_place_past, in_place_now;
  /* The current SMB's size, active size and bytes not Free, sampled at
   * each tick and commit; the peak since the process started; its bytes
   * in memory, sampled at the first tick of each SMB and then at most
   * every RESIDENT_PERIOD_MS (commit.c), when |resident_due_ms| (loop
   * time; agent's thread only) has passed. */
  _Atomic uint64_t smb_size, smb_in_use, smb_in_use_peak;
  _Atomic uint64_t smb_active, smb_resident;
  uint64_t resident_due_ms;
  /* When the next pass over the writers for idle chunks is due (loop
   * time; agent's thread only): every IDLE_SCAN_MS (commit.c). */
  uint64_t idle_due_ms;
} tg__agent_commit_t;

typedef struct tg__agent {
  tg__agent_config_t cfg;
  /* tg_agent_set_commit_on_flush's choice: written under the life lock
   * while the agent does not run, read by its thread. */
  bool commit_on_flush;
  tg__agent_thread_t th;
  tg__agent_link_t link;
  tg__agent_readiness_t readiness;
  tg__agent_session_t session;
  tg__agent_commit_t commit;
} tg__agent_t;

extern tg__agent_t tg__agent;

/* --- agent_internal.c ------------------------------------------------- */

/* Wakes the agent's thread (commit, register new data sources): the wake
 * hook of the arbiter and of the data-source registry. Any thread; cheap
 * when a wake is already pending. |ctx| is unused. (tg__agent_log is in
 * agent_log.h.) */
void tg__agent_wake(void *ctx);

/* --- agent.c ---------------------------------------------------------- */

/* Whether the TSC calibration timer runs (tests read it). Any thread. */
bool tg__agent_clock_timer_active(void);

/* --- connection.c ----------------------------------------------------- */

/* What the connection tells the files that send on it, in this order on
 * each connection: |open_commands| once InitializeConnection is answered
 * (a negative return closes the connection), |connected| after the data
 * sources are registered, |lost| when it closes; |closing| at shutdown,
 * before the connection closes. Agent's thread. */
typedef struct tg__conn_events {
  int (*open_commands)(void);
  void (*connected)(void);
  void (*lost)(void);
  void (*closing)(void);
} tg__conn_events_t;

/* |ev| (every member set) must outlive the agent's thread. */
void tg__connection_init(uv_loop_t *loop, const tg__conn_events_t *ev);
/* Connects now, or schedules a retry with backoff. */
void tg__connection_start(void);
/* The connection answered InitializeConnection and is still open. */
bool tg__connection_ready(void);
/* Sends RegisterDataSource for each data source not yet registered on
 * this connection. */
void tg__connection_register_data_sources(void);
/* Sends NotifyDataSourceStarted for each start tg_ds_notify_started()
 * confirmed. Agent's thread, connected. */
void tg__connection_send_start_acks(void);
/* Shutdown: closes the connection (its close callback runs on the loop)
 * and stops reconnecting. */
void tg__connection_stop(void);
void tg__agent_set_ready(bool ready);

/* Sends one request on the current connection; |cb| (may be NULL) gets
 * the reply. Returns 0, or a negative code (logged) when not connected or
 * not sent, in which case |cb| is never called. */
int tg__conn_invoke(const char *method, const ProtobufCMessage *msg,
                    tg_ipc_reply_cb cb, void *ctx);
/* The same with an already serialized request, and without logging a
 * failure (CommitData's caller decides what a lost batch means). */
int tg__conn_invoke_bytes(const char *method, const uint8_t *req, size_t n,
                          tg_ipc_reply_cb cb, void *ctx);

/* --- triggers.c ------------------------------------------------------- */

/* Sends the queued trigger names if connected (agent's thread). */
void tg__triggers_send_pending(void);
/* Shutdown: the queued names are dropped. */
void tg__triggers_drop_pending(void);

/* --- commands.c ------------------------------------------------------- */

/* Opens the GetAsyncCommand stream on the connection just initialized.
 * Returns 0, or a negative code (logged) when it was not sent. */
int tg__commands_open(void);
/* The connection is gone: every instance stops (without telling the
 * service) and the SMB is abandoned. */
void tg__commands_on_disconnect(void);

/* --- commit.c --------------------------------------------------------- */

void tg__commit_init(uv_loop_t *loop);
void tg__commit_fini(void);
/* Sends writer (un)registrations, then everything the writers queued,
 * the last CommitData carrying |flush_id| (0: none). */
void tg__commit_all(uint64_t flush_id);
/* Runs the periodic commit timer while any instance is started (with
 * commit_on_flush: stops it when none is, starts nothing), and only
 * then: call after every instance start or stop. Each tick also takes
 * back the chunks of writers that went idle (trace_writer.h). */
void tg__commit_timer_update(void);
/* commit_on_flush: something was flushed or woke the agent; runs the
 * periodic commit timer (if an instance is started) until a tick finds
 * nothing to commit. Without commit_on_flush, nothing. */
void tg__commit_kick(void);
/* Shutdown: the timer stops for good. */
void tg__commit_timer_stop(void);
/* The current SMB is being abandoned: its counters join the past ones. */
void tg__commit_retire_arbiter_stats(void);
/* Whether the periodic commit timer runs (tg_ds_flush_thread relies on it
 * to send what a flush returned; tests read it). Any thread. */
bool tg__agent_commit_timer_active(void);

#endif /* TRACEGATE_AGENT_AGENT_INTERNAL_H */
