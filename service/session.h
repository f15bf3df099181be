/* Tracing sessions: lifecycle, buffers, data source instances, timers,
 * triggers, and who the session's consumer is.
 *
 * Owns: struct tg_session and struct tg_ds_instance. session.c is their
 * only writer, helped by session_consumer.c (clones, the consumer binding),
 * session_triggers.c (triggers kept and waited for), session_config.c
 * (matchers, producer filters) and session_flush.c (flush bookkeeping;
 * Flush requests and acks go through session_flush.h), each for its own
 * part, and by readout.c for the tg_readout_t it embeds. Must never call
 * into a port's file: producers are driven through the tg_producer_ops_t
 * producer_port.c installs (below), consumers hear about the session
 * through the observer installed at creation. The ports call down into
 * the sessions; the session files call down into session_flush.c and
 * session_triggers.c, which answer through callbacks.
 *
 * Lifecycle (every change through tg__session_set_state, which refuses
 * any other under common/fsm.h's policy: not made, counted in the
 * service's bad_transitions, logged): CONFIGURED (deferred_start or waiting for a START trigger)
 * -> STARTED -> DISABLING (stop sent, waiting for acks or the timeout;
 * also straight from CONFIGURED, stopped before it started)
 * -> DISABLED (stats written, observer told) -> freed by FreeBuffers or
 * when its consumer goes away (unless that consumer set a disconnect
 * lease: then detached, and freed when the lease runs out unattached).
 * A clone (CloneSession) goes from CONFIGURED straight to DISABLED.
 */
#ifndef TRACEGATE_SERVICE_SESSION_H
#define TRACEGATE_SERVICE_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "common/list.h"
#include "pb/config/trace_config.pb-c.h"
#include "service/readout.h"
#include "service/service.h"
#include "service/session_config.h"
#include "service/session_flush.h"
#include "service/trace_buffer.h"

typedef struct tg_registered_ds tg_registered_ds_t;

/* Where a session with a trigger_config stands (trigger_timer runs in
 * WAITING and, with a stop_delay_ms, in FIRED). As in Perfetto:
 *   START_TRACING   WAITING from EnableTracing; the first trigger starts
 *                   the session (FIRED), which then stops after that
 *                   trigger's stop_delay_ms if it has one
 *   STOP_TRACING    WAITING from the start; the first trigger stops the
 *                   session after its stop_delay_ms (FIRED); later
 *                   triggers are recorded and change nothing
 *   CLONE_SNAPSHOT  WAITING from the start; each trigger has the session
 *                   cloned after its stop_delay_ms (FIRED from the first)
 * No trigger within trigger_timeout_ms: TIMED_OUT, the session ends, and
 * (STOP_TRACING, CLONE_SNAPSHOT) its trace holds no producer data. */
typedef enum tg_session_trigger_state {
  TG_TRIG_NONE = 0, /* no trigger_config, or not armed yet */
  TG_TRIG_WAITING,
  TG_TRIG_FIRED,
  TG_TRIG_TIMED_OUT,
} tg_session_trigger_state_t;

/* A data source instance's state: SETUP -> STARTING (its producer will
 * say when it started) -> STARTED -> STOPPING (its producer will say when
 * it stopped) -> STOPPED, each step skippable, and any state -> STOPPED.
 * Changed only by session.c's ds_set_state() against its table
 * (tg__ds_transition_ok), under common/fsm.h's policy. */
enum tg_ds_state {
  TG_DS_SETUP,
  TG_DS_STARTING,
  TG_DS_STARTED,
  TG_DS_STOPPING,
  TG_DS_STOPPED,
};

struct tg_ds_instance {
  uint64_t id;
  tg_producer_t *producer; /* NULL once the producer let go of it */
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

/* A trigger as the service received it (Perfetto's TriggerInfo): what
 * its trigger packet says, and a clone_snapshot_trigger packet repeats.
 * Stored in a session it owns its strings; passed to a call, they are
 * borrowed for the call. */
typedef struct tg_trigger_info {
  char *name;
  char *producer_name; /* may be NULL */
  uid_t producer_uid;
  uint64_t boot_time_ns; /* when it was received: its packet's timestamp */
  uint64_t delay_ms;     /* the config's stop_delay_ms for it */
} tg_trigger_info_t;

/* Received triggers kept for the next clone, and CLONE_SNAPSHOT hits
 * remembered for the CloneSession that answers them, at most. A producer
 * that fires more has the oldest forgotten, never the service's memory. */
#define TG_SESSION_MAX_TRIGGERS 256
#define TG_SESSION_MAX_CLONE_HITS 16
/* CLONE_SNAPSHOT triggers waiting for their delay at once: a producer that
 * fires faster than the delays run out has the rest ignored (and logged
 * once per burst), so what it makes the service keep stays bounded. */
#define TG_SESSION_MAX_CLONE_WAITS 16

/* How a session's events go up to the consumer port. Every callback gets
 * the session first and the observer's |ctx| last; any may be NULL.
 * None is called after |freed|. */
typedef struct tg_session_observer {
  void *ctx;
  /* A data source instance started or stopped (|inst| is valid only
   * during the call). */
  void (*instance_state)(tg_session_t *s, const tg_ds_instance_t *inst, void *ctx);
  /* Every instance of a started session runs. */
  void (*all_started)(tg_session_t *s, void *ctx);
  /* Tracing ended: the session is DISABLED, its data readable. */
  void (*ended)(tg_session_t *s, void *ctx);
  /* A flush started with a non-zero |cookie| completed: 0, -ETIMEDOUT
   * (a producer did not ack in time), -ECANCELED (session freed) or
   * -ENOMEM. */
  void (*flush_done)(tg_session_t *s, int status, uint64_t cookie, void *ctx);
  /* A CLONE_SNAPSHOT trigger of |s| fired: its consumer should clone it
   * (ObservableEvents.clone_trigger_hit). |trigger| valid during the call. */
  void (*clone_trigger)(tg_session_t *s, const tg_trigger_info_t *trigger,
                        void *ctx);
  /* |s| is being freed: forget it. */
  void (*freed)(tg_session_t *s, void *ctx);
} tg_session_observer_t;

struct tg_session {
  tg_service_t *svc;
  tg_list_t node;
  uint64_t id;
  enum tg_session_state state;
  Perfetto__Protos__TraceConfig *config; /* owned, unpacked */
  uint8_t *config_bytes;                 /* owned, as received */
  size_t config_len;
  tg_session_matchers_t matchers; /* session_config.c */
  /* {producer, buffer} pairs a producer may write into: the target buffer
   * of each of its instances, kept until the session is freed, so that
   * the commits a producer makes while its instance stops still count
   * (as in Perfetto, whose allowed target buffers go with FreeBuffers),
   * and revoked when the producer goes: its id comes back once ids wrap. */
  struct tg_session_writer_right {
    uint32_t producer_id, buffer_id;
  } *rights;
  size_t n_rights, cap_rights;

  tg_session_observer_t observer;
  tg_ipc_host_conn_t *consumer; /* NULL while detached */
  uid_t consumer_uid;
  char *detach_key;

  tg_session_buffer_t buffers[TG_SERVICE_MAX_BUFFERS_PER_SESSION];
  size_t n_buffers;
  tg_list_t instances;
  tg_session_flushes_t flushes; /* session_flush.c */

  uv_timer_t duration_timer;
  uv_timer_t trigger_timer; /* trigger_timeout_ms, then a stop_delay_ms */
  tg_session_trigger_state_t trigger_state;
  /* Triggers received since the session was last cloned (Perfetto's
   * received_triggers): the next clone's trace has them, and they are
   * gone from here (session_triggers.c). */
  tg_trigger_info_t triggers[TG_SESSION_MAX_TRIGGERS];
  size_t n_triggers;
  /* CLONE_SNAPSHOT: each trigger waits its own stop_delay_ms (a list of
   * timers), then is told to the consumer and kept in |clone_hits| until
   * a CloneSession names it (session_triggers.c). */
  tg_list_t clone_waits;
  unsigned n_clone_waits; /* entries of clone_waits */
  bool clone_waits_full_said; /* the cap was logged for this burst */
  tg_trigger_info_t clone_hits[TG_SESSION_MAX_CLONE_HITS];
  size_t n_clone_hits;
  uv_timer_t period_timer; /* flush_period_ms */
  uv_timer_t file_timer;   /* file_write_period_ms */
  uv_timer_t stop_timer;   /* data source stop timeout */
  uv_timer_t clear_timer;  /* incremental_state_config.clear_period_ms */
  uv_timer_t lease_timer;  /* wakes tg__session_lease_left_ms's caller */
  uint64_t lease_end_ms;   /* svc clock: a detached session's lease end */
  uv_timer_t clock_timer;  /* builtin_data_sources.snapshot_interval_ms */
  uv_timer_t start_timer;  /* data source start timeout */
  /* The start timeout ran out with an instance not started: the trace
   * says so again at each flush until every instance runs. */
  bool start_overdue;
  unsigned open_timers;    /* closing: free when 0 */
  bool freeing;
  /* A read-only snapshot made by CloneSession: DISABLED from birth, no
   * instances, never started, triggered or cloned again. */
  bool cloned;

  /* This session's own loss (TraceStats): commits and patches aimed at
   * its buffers that were refused (the producer no longer had an instance
   * in it, or the request was malformed). The service's lifetime totals
   * stay in tg_service_t. */
  uint64_t chunks_discarded;
  uint64_t patches_discarded;

  int write_fd; /* write_into_file target, -1 if none */
  tg_readout_t readout; /* readout.c */
};

/* --- state ------------------------------------------------------------------ */

/* Perfetto's spelling of |st| (TracingServiceState.TracingSession.state). */
const char *tg__session_state_name(enum tg_session_state st);
/* Whether the Lifecycle above allows |from| -> |to|; |cloned|: a snapshot,
 * born DISABLED from CONFIGURED (the zero of a new session). Pure. */
bool tg__session_transition_ok(enum tg_session_state from,
                               enum tg_session_state to, bool cloned);
/* The only writer of tg_session.state: moves |s| to |to| and logs |why|
 * (borrowed for the call). A transition the Lifecycle does not allow is
 * a bug of the service: -EINVAL, logged, counted (svc->bad_transitions),
 * |s| unchanged; |to| the state |s| is in is -EINVAL, not counted. */
int tg__session_set_state(tg_session_t *s, enum tg_session_state to,
                          const char *why);
/* Whether a data source instance may go |from| -> |to| (enum tg_ds_state's
 * diagram). Pure. */
bool tg__ds_transition_ok(enum tg_ds_state from, enum tg_ds_state to);

/* --- consumer side ---------------------------------------------------------- */

/* Validates and creates a session from |cfg_bytes| (a TraceConfig; copied)
 * for consumer connection |conn|, which |obs| (copied) speaks for.
 * Takes ownership of |write_fd| (-1 for none) in every outcome: kept for
 * write_into_file, closed otherwise. On failure returns NULL and a message
 * naming the field in |err|. */
tg_session_t *tg__session_create(tg_service_t *svc, const uint8_t *cfg_bytes,
                                 size_t cfg_len, int write_fd,
                                 tg_ipc_host_conn_t *conn,
                                 const tg_session_observer_t *obs, char *err,
                                 size_t errlen);
/* Starts now, arms the START trigger timeout, or waits for StartTracing,
 * as the config says. */
void tg__session_enable(tg_session_t *s);
void tg__session_start(tg_session_t *s);
void tg__session_disable(tg_session_t *s);
void tg__session_free(tg_session_t *s);
/* ChangeTraceConfig; see tg__session_config_change_filters. */
int tg__session_change_filters(tg_session_t *s, Perfetto__Protos__TraceConfig *neu);
/* Detaches |s| from its consumer under |key| (copied). -EEXIST when the
 * consumer's uid already detached a session under it, -ENOMEM. */
int tg__session_detach(tg_session_t *s, const char *key);
/* The detached session of |key| and |conn|'s uid, now attached to |conn|;
 * NULL if there is none. */
tg_session_t *tg__session_attach(tg_service_t *svc, const char *key,
                                 tg_ipc_host_conn_t *conn);
/* Bounds the detachment of |s| (detached: tg__session_detach succeeded)
 * to |lease_ms|: freed then unless attached again. */
void tg__session_lease_start(tg_session_t *s, uint64_t lease_ms);
/* The lease's decision, pure: what is left of |s|'s lease at |now_ms|
 * (the service's clock), 0 when it has run out (free |s| now), or
 * UINT64_MAX when no lease holds |s| (attached, never detached under one,
 * or being freed). */
uint64_t tg__session_lease_left_ms(const tg_session_t *s, uint64_t now_ms);
/* |conn| closed: sessions it was attached to are detached from it. */
void tg__session_consumer_gone(tg_service_t *svc, tg_ipc_host_conn_t *conn);

/* Whether a consumer of uid |uid| may clone |s|: only the uid that owns
 * it, as for Attach. */
bool tg__session_clone_allowed(const tg_session_t *s, uid_t uid);
/* session.c, for session_consumer.c's clones. Buffer ids travel as 16 bits
 * in the SMB ABI (target_buffer of writers and chunks), so they are taken
 * from 1..65535, round robin (a late commit for a freed buffer does not
 * land in a new one at once), skipping ids in use by live sessions and by
 * |s|'s buffers so far (the last one is |s|'s new buffer, still 0).
 * Returns 0 when every id is taken. */
uint16_t tg__session_next_buffer_id(tg_service_t *svc, tg_session_t *s);
/* Every timer of a session, however it was made: freeing closes them
 * all. */
void tg__session_timers_init(tg_session_t *s);
/* A read-only snapshot of |src|'s buffers (CloneSession) for consumer
 * |conn|: a new DISABLED session with its own copies, read with
 * ReadBuffers and freed with FreeBuffers; |src| runs on untouched.
 * The snapshot's trace has |trigger| (may be NULL: not cloned for a
 * trigger) as its clone_snapshot_trigger packet, and the triggers |src|
 * received since its last clone, which |src| then forgets, as Perfetto's
 * CloneSession does. |skip_trace_filter| (CloneSession's): the snapshot
 * is read without |src|'s trace filter. On failure returns NULL and a
 * message in |err|. */
tg_session_t *tg__session_clone(tg_session_t *src, tg_ipc_host_conn_t *conn,
                                const tg_trigger_info_t *trigger,
                                bool skip_trace_filter, char *err,
                                size_t errlen);
/* The live session a bugreport clones: the highest positive
 * TraceConfig.bugreport_score among the STARTED sessions a consumer of
 * |uid| may clone (the first of equals); NULL when there is none. */
tg_session_t *tg__session_find_for_bugreport(tg_service_t *svc, uid_t uid);
/* The live session with |id|, or named |name| (unique_session_name) when
 * |name| is not NULL. */
tg_session_t *tg__session_find(tg_service_t *svc, uint64_t id, const char *name);

/* --- producer side ---------------------------------------------------------- */

/* What the sessions ask of producers: producer_port.c installs its table
 * in svc->producer_ops when it binds (tg__producer_port_bind), so that
 * session.c and session_flush.c never call a port's file. */
typedef struct tg_producer_ops {
  /* Sends SetupDataSource for |inst| (creates the SMB on first use). */
  int (*setup_instance)(tg_ds_instance_t *inst,
                        const Perfetto__Protos__DataSourceConfig *cfg);
  /* Sends StartDataSource; the instance's state is the session's. */
  void (*start_instance)(tg_ds_instance_t *inst,
                         const Perfetto__Protos__DataSourceConfig *cfg);
  void (*stop_instance)(tg_ds_instance_t *inst);
  void (*flush)(tg_producer_t *p, uint64_t flush_id,
                const uint64_t *instance_ids, size_t n);
  void (*clear_incremental_state)(tg_producer_t *p, const uint64_t *ids,
                                  size_t n);
  /* Copies |p|'s chunks still being written for |s| (NULL: every
   * session) into their buffers (producer_smb.h). */
  void (*scrape)(tg_producer_t *p, tg_session_t *s);
  /* The connected producer with |id|, or NULL. */
  tg_producer_t *(*by_id)(tg_service_t *svc, uint16_t id);
} tg_producer_ops_t;

/* A producer registered a data source: existing sessions may want it. */
void tg__session_on_data_source_registered(tg_service_t *svc,
                                           tg_producer_t *p,
                                           const tg_registered_ds_t *ds);
/* The producer of |inst| acked StartDataSource. */
void tg__session_instance_started(tg_ds_instance_t *inst);
/* Writes TracingServiceEvent.slow_starting_data_sources into |into|'s
 * service packets (|into| is |s| or its clone), naming |s|'s instances
 * that have not started (at most TG_SESSION_SLOW_START_LISTED, as
 * Perfetto lists), when |s| started and has any. Returns how many have
 * not started. */
#define TG_SESSION_SLOW_START_LISTED 32
size_t tg__session_report_not_started(tg_session_t *s, tg_session_t *into);
/* The producer of |inst| acked StopDataSource, unregistered the data
 * source or went away: |inst| ends and is freed. */
void tg__session_instance_gone(tg_ds_instance_t *inst);
void tg__session_on_producer_gone(tg_service_t *svc, tg_producer_t *p);
/* A producer activated trigger |name| (ActivateTriggers): every session
 * with a matching trigger records a trigger packet and starts, stops, or
 * (CLONE_SNAPSHOT) has its observer's clone_trigger run. */
void tg__session_on_trigger(tg_service_t *svc, tg_producer_t *p,
                            const char *name);

/* --- triggers (session_triggers.c) ------------------------------------------ */

/* Keeps |t| (copied) among the triggers the next clone gets. -ENOMEM. */
int tg__session_triggers_add(tg_session_t *s, const tg_trigger_info_t *t);
/* Queues |src|'s received triggers as trigger packets into |clone|'s
 * trace and forgets them in |src|. */
void tg__session_triggers_move(tg_session_t *src, tg_session_t *clone);
/* CLONE_SNAPSHOT: |t| (copied) is told to the observer's clone_trigger
 * after its delay_ms, unless |s| stops first. Returns 0 when it waits on
 * a timer of its own, for which |closed| runs once, after it closed (the
 * caller counts it in open_timers); a negative code when |t| is dropped
 * (logged), and |closed| never runs. */
int tg__session_clone_wait(tg_session_t *s, const tg_trigger_info_t *t,
                           void (*closed)(tg_session_t *s));
/* The oldest hit of trigger |name| (and |producer_name| unless NULL or
 * empty) told for |s| and not yet answered by a successful clone, or
 * NULL. Borrowed: valid until |s|'s hits change. */
const tg_trigger_info_t *tg__session_clone_hit_find(const tg_session_t *s,
                                                    const char *name,
                                                    const char *producer_name);
/* Forgets that hit: a clone answered it. No-op when there is none, so a
 * failed or repeated clone leaves the hit for the next one. */
void tg__session_clone_hit_answered(tg_session_t *s, const char *name,
                                    const char *producer_name);
/* Freeing |s|: its waits' timers close (each counted in open_timers). */
void tg__session_triggers_close(tg_session_t *s);
/* The strings of every trigger |s| keeps. */
void tg__session_triggers_free(tg_session_t *s);
void tg__trigger_info_free(tg_trigger_info_t *t);

/* --- lookups ---------------------------------------------------------------- */

tg_trace_buffer_t *tg__session_buffer(tg_session_t *s, uint32_t global_id);
/* Finds the session owning global buffer |id|. */
tg_session_t *tg__session_by_buffer(tg_service_t *svc, uint32_t id);
/* Whether producer |producer_id| may write into buffer |buffer_id| of |s|
 * (one of its instances of |s| targets or targeted it). */
bool tg__session_writer_may(const tg_session_t *s, uint32_t producer_id,
                            uint32_t buffer_id);

#endif /* TRACEGATE_SERVICE_SESSION_H */
