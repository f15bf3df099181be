/* libtracegate-agent: contribute trace data to the host's tracing service.
 *
 * The agent is a producer in Perfetto's sense. It connects to the service's
 * producer socket (tracegated, or Perfetto's traced: the protocol and the
 * shared memory layout are the same), registers the application's data
 * sources, and writes TracePackets straight into the shared memory buffer
 * (SMB) the service hands out. Writing a packet takes no lock, makes no
 * system call and allocates nothing; the agent's own thread talks to the
 * service in the background.
 *
 *   tg_agent_init(&opts);                    // once per process
 *   tg_ds_register(&ds_opts, &ds);           // e.g. "com.example.frames"
 *   ...
 *   TG_DS_TRACE(ds, inst, pbw) {             // for each active instance
 *     tg_pbw_append_varint(pbw, 8, ts);      // TracePacket.timestamp
 *   }
 *
 * For slices, instants and counters use tracegate/track_event.h instead.
 *
 * Threads: every function may be called from any thread. Data source
 * callbacks run on the agent's thread, one at a time. That thread runs
 * under SCHED_BATCH (Linux) when it inherits SCHED_OTHER, so that its
 * wake-ups, thousands a second when writers fill the SMB, do not preempt
 * the app's threads or the tracing service; any other policy inherited
 * from the thread that calls tg_agent_init is kept. A thread that writes
 * gets one trace writer per data source instance, created on first use and
 * released when the thread exits or the instance stops.
 *
 * Ownership: strings and option structs passed in are copied; nothing the
 * agent returns is to be freed by the caller except where stated.
 */
#ifndef TRACEGATE_AGENT_H
#define TRACEGATE_AGENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracegate/pb_writer.h"
#include "tracegate/export.h"
#include "tracegate/log_level.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a writer does when the SMB has no free chunk. */
typedef enum tg_agent_full_policy {
  /* Drop the packet, count it, and mark the next packet of the sequence
   * with previous_packet_dropped. Track events then restart their
   * sequence (descriptors, interned names) on their next event, so that
   * readers lose only the dropped packets. The app never waits. A writer that found
   * the SMB full drops 4 KiB to 256 KiB more (the step doubles while it
   * stays full) before it looks again, so a full SMB costs a dropped
   * packet about what a written one costs. */
  TG_AGENT_FULL_DROP = 0,
  /* Wait until the service frees a chunk. No loss, but the writing thread
   * blocks while the service is slow (never when disconnected: then the
   * packet is dropped). */
  TG_AGENT_FULL_STALL = 1,
} tg_agent_full_policy_t;

/* |msg| is valid during the call only. Called from the agent's thread (and
 * rarely from writer threads). */
typedef void (*tg_agent_log_fn)(void *ctx, tg_log_level_t level,
                                const char *msg);

/* The SMB the agent asks for when the app gives no smb_size_hint: a
 * reserve it grows into as threads start writing, and past 8 MiB only
 * while the service falls behind (see smb_size_hint). tracegated's cap. */
#define TG_AGENT_SMB_RESERVE (32u * 1024u * 1024u)

typedef struct tg_agent_options {
  /* Producer socket: a path or "@abstract". NULL: $PERFETTO_PRODUCER_SOCK_NAME,
   * else /run/perfetto/traced-producer.sock when /run/perfetto/ is
   * accessible, else /tmp/perfetto-producer. */
  const char *socket_path;
  /* Shown by the service (tracegate query). NULL: "tracegate-agent:<comm>". */
  const char *producer_name;
  /* Size of the shared memory buffer (SMB), sent as a hint to the
   * service, which caps it (tracegated: 32 MiB) and may override it per
   * producer (TraceConfig.producers[].shm_size_kb).
   * 0 (recommended): the agent asks for a reserve of TG_AGENT_SMB_RESERVE
   * and uses only a prefix of it, 256 KiB at first, doubled when more
   * threads write (4 KiB per writing thread, up to 8 MiB) or when a
   * thread finds it full (up to the whole reserve: room for about a
   * second of 4096 threads' writes while the service cannot take them);
   * it never shrinks while connected. The SMB is a memfd: pages never
   * used cost no memory, so an app with few threads pays for about
   * 256 KiB, one with thousands of threads for 8 MiB, and more only
   * after the service fell behind. (Perfetto's traced reads every page of the SMB when
   * it scrapes, which makes the whole reserve resident.)
   * Non-zero: an SMB of that size (as the service grants it), all of it
   * usable from the start, never grown. */
  size_t smb_size_hint;
  /* 0 lets the service choose (4 KiB). Invalid values are ignored. */
  size_t smb_page_size_hint;
  tg_agent_full_policy_t on_smb_full;
  /* Optional log sink; NULL logs nothing. Messages above |log_level| are
   * not formatted. */
  tg_agent_log_fn log;
  void *log_ctx;
  tg_log_level_t log_level;
  /* Reconnect backoff when the service is absent or goes away: starts at
   * |reconnect_min_ms| (0: 100) and doubles up to |reconnect_max_ms|
   * (0: 5000). */
  uint32_t reconnect_min_ms;
  uint32_t reconnect_max_ms;
  /* While a session runs, the agent's thread wakes every
   * |commit_period_ms| (0: 10) to send the chunks writers finished and to
   * take back those of writers idle for 100 ms. A producer whose writers
   * end each burst with tg_ds_flush_thread (tracegate-probes) may lengthen
   * it, so that an idle session does not wake the thread 100 times a
   * second (what they flush then waits up to that long for the service);
   * many writers on a small SMB still shorten it to 1 ms. */
  uint32_t commit_period_ms;
} tg_agent_options_t;

/* Starts the agent's thread, which connects in the background (and keeps
 * reconnecting with backoff). |opts| may be NULL for defaults; it is copied.
 * Returns 0, -EALREADY if the agent is running, or a negative error
 * (-ENOMEM, thread creation failure). */
TG_EXPORT int tg_agent_init(const tg_agent_options_t *opts);

/* For producers whose writers end each burst with tg_ds_flush_thread
 * (tracegate-probes). false (the default): the commit tick
 * (commit_period_ms) runs while any instance is started. true: it runs
 * only after activity, so that an idle session never wakes the agent's
 * thread. A flush that left data to send (or the service's Flush, or a
 * full SMB) wakes the agent, which commits and starts the tick; the first
 * tick that finds nothing to commit stops it. Chunks a writer keeps
 * without flushing wait for its next flush, another writer's, a Flush or
 * the stop. Set before tg_agent_init; the choice holds for every later
 * run. Returns 0, or -EBUSY while the agent runs (nothing changed). A
 * function, not a field of tg_agent_options_t, so that the options' size
 * stays the one apps built against an earlier header pass. */
TG_EXPORT int tg_agent_set_commit_on_flush(bool on);

/* Stops every instance (their on_stop callbacks run), disconnects, joins the
 * agent's thread and frees what it owns. Data source handles stay valid (a
 * later tg_agent_init re-registers them). Writer threads that are writing
 * during shutdown drop their packets. */
TG_EXPORT void tg_agent_shutdown(void);

/* True while connected to a service (for tests and status displays). */
TG_EXPORT bool tg_agent_connected(void);

/* Counters of the agent since the process started, for tests, stats and
 * benches. packets_written includes a writer's packets once the writer is
 * released (its thread exited, or its instance stopped and the thread wrote
 * again); SMB counters, packets_dropped included, are current as of the
 * agent's last commit or timer tick (every 1-10 ms while a session runs). */
typedef struct tg_agent_stats {
  uint64_t connects;          /* successful connections */
  uint64_t disconnects;       /* lost connections */
  uint64_t packets_written;   /* packets completed into the SMB */
  uint64_t packets_dropped;   /* packets lost to a full SMB (drop policy) */
  uint64_t chunks_committed;
  uint64_t commits_sent;      /* CommitData requests */
  uint64_t patches_sent;
  uint64_t flushes_acked;
  uint64_t stalls;            /* times a writer waited for a chunk */
  /* Fields below were added after the first release: new ones only ever
   * go at the end. */
  /* Losses reported to the service as drop markers in the SMB (it counts
   * them as trace_writer_packet_loss): one per run of packets a writer
   * lost in a row, so at most packets_dropped. */
  uint64_t drop_markers;
  /* Partly filled chunks the agent took back from writers that had been
   * idle (or, with the SMB nearly full, between packets). */
  uint64_t chunks_reclaimed;
  uint64_t smb_size;              /* the current SMB, 0 when none */
  /* Its chunks not Free, sampled at the agent's commit tick (every 1-10
   * ms while it traces), and the highest sample since process start. */
  uint64_t smb_bytes_in_use;
  uint64_t smb_bytes_in_use_peak;
  /* The part of the current SMB writers use now (its size unless it is a
   * reserve, see smb_size_hint), and its bytes in memory (pages anyone
   * touched; sampled at the agent's first tick with that SMB, then every
   * 100 ms or so while it traces). 0 when none. */
  uint64_t smb_active_size;
  uint64_t smb_resident_bytes;
  /* Patches written into their chunk in the SMB while its commit was
   * still pending (when the service supports it), instead of being sent
   * in CommitData (patches_sent). */
  uint64_t patches_in_place;
} tg_agent_stats_t;
TG_EXPORT void tg_agent_get_stats(tg_agent_stats_t *out);

/* Waits until the agent is connected and every data source registered, or
 * |timeout_ms| passes. Returns 0 or TG_ETIMEOUT. For tests and tools. */
TG_EXPORT int tg_agent_wait_connected(uint32_t timeout_ms);

/* --- triggers ------------------------------------------------------------ */

/* Limits of tg_agent_activate_triggers(). */
#define TG_AGENT_MAX_TRIGGER_NAME 1024    /* bytes, without the NUL */
#define TG_AGENT_MAX_PENDING_TRIGGERS 256 /* names queued, not yet sent */

/* Activates the triggers |names[0..n-1]| (TraceConfig.trigger_config):
 * sessions waiting for one start, stop or are snapshotted, and each
 * records a trigger packet naming this producer. Any thread; does not
 * block. The names are copied (the caller keeps |names| and its strings)
 * and sent by the agent's thread as soon as it is connected, at once if
 * it is; names still unsent at tg_agent_shutdown() are dropped. Returns 0
 * once queued, -EINVAL (|names| NULL, |n| 0, a NULL or empty name, or one
 * longer than TG_AGENT_MAX_TRIGGER_NAME), TG_ENOT_CONNECTED when the agent
 * is not running (no tg_agent_init), -ENOSPC when more than
 * TG_AGENT_MAX_PENDING_TRIGGERS names would be waiting, -ENOMEM. */
TG_EXPORT int tg_agent_activate_triggers(const char *const *names, size_t n);

/* --- data sources -------------------------------------------------------- */

/* At most this many concurrent instances of one data source (sessions that
 * enabled it at the same time), as in Perfetto's SDK. */
#define TG_DS_MAX_INSTANCES 8
#define TG_DS_MAX 64

typedef struct tg_ds tg_ds_t;

/* Callbacks run on the agent's thread. |inst| is the instance slot
 * (0..TG_DS_MAX_INSTANCES-1); |cfg| is the serialized DataSourceConfig the
 * session sent (valid during the call). All optional. */
typedef struct tg_ds_callbacks {
  void (*on_setup)(void *ctx, unsigned inst, const uint8_t *cfg, size_t len);
  /* The instance is enabled when this runs: it may write packets. */
  void (*on_start)(void *ctx, unsigned inst, const uint8_t *cfg, size_t len);
  /* After on_stop returns, the instance's writers are released and further
   * packets for it are dropped silently. */
  void (*on_stop)(void *ctx, unsigned inst);
  /* The service asks for a flush: commit what is buffered. Packets written
   * before the callback returns are part of the flush. */
  void (*on_flush)(void *ctx, unsigned inst);
  /* Incremental state (interning tables, descriptors) must be re-emitted.
   * The agent also bumps the instance's incremental-state generation that
   * tg_ds_incremental_state_cleared() reports to writers. */
  void (*on_clear_incremental_state)(void *ctx, unsigned inst);
  void *ctx;
} tg_ds_callbacks_t;

typedef struct tg_ds_options {
  const char *name; /* e.g. "track_event", "linux.sys_stats"; copied */
  bool handles_incremental_state_clear;
  tg_ds_callbacks_t cbs;
} tg_ds_options_t;

/* Registers a data source (also before tg_agent_init; registration reaches
 * the service once connected). |*out| lives until process exit. Returns 0,
 * -EINVAL (no name, name too long), -EEXIST, -ENOSPC (TG_DS_MAX reached). */
TG_EXPORT int tg_ds_register(const tg_ds_options_t *opts, tg_ds_t **out);

/* Flags of tg_ds_register_flags. TG_DS_WILL_NOTIFY_ON_START: an instance
 * counts as started for the service only once tg_ds_notify_started() says
 * so (Perfetto's will_notify_on_start); one whose start never succeeds is
 * named in the trace as not started (TracingServiceEvent
 * .slow_starting_data_sources), so that a data source that cannot run is
 * seen by whoever reads the trace, not only in the app's log. */
#define TG_DS_WILL_NOTIFY_ON_START 1u
/* tg_ds_register with |flags|; also -EINVAL for a flag it does not know. */
TG_EXPORT int tg_ds_register_flags(const tg_ds_options_t *opts, uint32_t flags,
                                   tg_ds_t **out);
/* Instance |inst| of |ds|, registered with TG_DS_WILL_NOTIFY_ON_START,
 * runs: the agent tells the service. Any thread, from on_start until
 * on_stop; nothing for an instance that is not started or a data source
 * registered without the flag. */
TG_EXPORT void tg_ds_notify_started(tg_ds_t *ds, unsigned inst);

/* The hot-path view of a data source: one bit per active instance. */
struct tg_ds_hot {
  _Atomic uint8_t enabled_mask;
};

/* Bit i set: instance i is started. One relaxed load. */
static inline uint8_t tg_ds_enabled_mask(const tg_ds_t *ds) {
  return atomic_load_explicit(&((const struct tg_ds_hot *)ds)->enabled_mask,
                              memory_order_relaxed);
}

/* Begins a TracePacket for instance |inst| on the calling thread's writer
 * and returns the writer to put its fields into (TracePacket field numbers),
 * or NULL when the instance is not active or this thread cannot trace now
 * (then do not call end). The packet is private until tg_ds_packet_end(). */
TG_EXPORT tg_pbw_t *tg_ds_packet_begin(tg_ds_t *ds, unsigned inst);
TG_EXPORT void tg_ds_packet_end(tg_ds_t *ds, unsigned inst);

/* Returns the calling thread's partial chunk of instance |inst| now (e.g.
 * before the thread sleeps for long); the agent sends it with its next
 * commit, at most commit_period_ms later (or at a Flush or stop). */
TG_EXPORT void tg_ds_flush_thread(tg_ds_t *ds, unsigned inst);

/* True once per incremental-state clear (and on a writer's first packet) for
 * the calling thread's writer of |inst|: the caller must then re-emit its
 * interned data and set SEQ_INCREMENTAL_STATE_CLEARED on the packet. Also
 * true once after the writer lost packets (a full SMB, drop policy):
 * readers lose the sequence's state at the loss and get it back only from
 * a packet that clears it, so the next packet written should be that one
 * rather than wait for the service's periodic clear. */
TG_EXPORT bool tg_ds_incremental_state_cleared(tg_ds_t *ds, unsigned inst);

/* Per-thread, per-instance user slot that lives as long as the writer
 * (reset to NULL when the writer is recreated). For interning tables. The
 * |dtor| runs when the writer is released, on the writer's thread or the
 * agent's. */
TG_EXPORT void **tg_ds_writer_user(tg_ds_t *ds, unsigned inst,
                                   void (*dtor)(void *));

/* Iterates over the active instances of |ds| and writes one packet to each:
 *   TG_DS_TRACE(ds, inst, pbw) { ...fields into pbw... }
 * The block runs once per active instance with |pbw| set; costs one relaxed
 * load and a branch when no instance is active. */
#define TG_DS_TRACE(ds, inst, pbw)                                          \
  for (uint8_t tg__m = tg_ds_enabled_mask(ds), inst = 0; tg__m;             \
       tg__m = (uint8_t)(tg__m >> 1), inst++)                               \
    if (tg__m & 1u)                                                         \
      for (tg_pbw_t *pbw = tg_ds_packet_begin((ds), inst); pbw;             \
           tg_ds_packet_end((ds), inst), pbw = NULL)

#ifdef __cplusplus
}
#endif

#endif /* TRACEGATE_AGENT_H */
