/* One remote host of a fleet recording, driven end to end: its
 * connections (through the owner's dialer), the relay's preparation
 * (compression, host info, a burst of clock samples, the resume key, the
 * data source names), its recording (consumer/recording.h), the heartbeat,
 * and getting the session back when the link drops. The owner (the CLI's
 * `record -H`, a collector) holds many hosts on one loop and receives
 * everything that happens through one callback table: this library prints
 * nothing and writes no file; it logs (common/log.h) at debug and info
 * level only.
 *
 * States: the host's link (link.h) is its one state machine; its table
 * says what each state means and which deadline runs in it. host.c moves
 * the link (every transition through tg_link_set_state(), reported to
 * on_state), host_prep.c runs the preparation of each connection.
 *
 * What the owner sees: the fields it sets (name, target, config, key...)
 * and the report (tg_fleet_host_report_t), which the engine writes and
 * the owner only reads; it stays valid after the end and the close. The
 * engine's own state is private (h->e, host_internal.h), and what one
 * connection owns is one struct there, reset as a whole when the next
 * attempt begins.
 *
 * Timers: one uv timer per host, armed for the link's next deadline
 * (tg_link_deadline(): connect guard, heartbeat, dead link, backoff) or
 * the end of a held clock burst's wait, whichever comes first. The
 * recording runs its own read and stats timers.
 *
 * Where things happen:
 *  - a dead link is detected: link.h lists the four places; here the
 *    timer asks tg_link_due() and closes the connection on DEAD;
 *  - a host is reconnected: the connection's release (the dialer's
 *    release callback) decides between reconnecting and failing; the
 *    timer dials again when the backoff says ATTEMPT; the session comes
 *    back through tg_recording_rebind() once the new connection is
 *    prepared;
 *  - a reply is matched to its request: by the consumer library
 *    (consumer/consumer.h: one callback per call, matched by request id
 *    in ipc/client.c); every callback here
 *    first checks that the reply belongs to the host's current connection
 *    (a late answer from a dropped one is ignored).
 *
 * Threads: everything, callbacks included, runs on the owner's loop
 * thread. Callbacks may run inside a tg_fleet_host_* call (stop, abort,
 * resume_clock); after on_finished the host calls no callback again.
 */
#ifndef TRACEGATE_CONSUMER_FLEET_HOST_H
#define TRACEGATE_CONSUMER_FLEET_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "abi/protocol_limits.h"
#include "consumer/consumer.h"
#include "consumer/fleet/admit.h"
#include "consumer/fleet/clock_sync.h"
#include "consumer/fleet/link.h"
#include "consumer/recording.h"
#include "tls/compress_transport.h"

typedef struct tg_fleet tg_fleet_t;
typedef struct tg_fleet_host tg_fleet_host_t;

/* What a host's relay sends, as the latest preparation of its link
 * settled it. */
typedef enum tg_fleet_compression {
  TG_FLEET_COMP_UNKNOWN = 0,  /* no link was prepared */
  TG_FLEET_COMP_ZSTD,         /* compressed, as asked */
  TG_FLEET_COMP_NOT_ASKED,    /* plain: the owner asked for none */
  TG_FLEET_COMP_REFUSED,      /* plain: the relay said no to SetCompression */
  TG_FLEET_COMP_UNSUPPORTED,  /* plain: no TracegateRelay or no such method */
} tg_fleet_compression_t;

/* Why a host failed, for scripts (the summary's "failure"); the text in
 * |why| says it for people. */
typedef enum tg_fleet_failure {
  TG_FLEET_FAIL_NONE = 0,  /* not failed */
  TG_FLEET_FAIL_CONNECT,   /* never got a prepared link to the host */
  TG_FLEET_FAIL_LINK_LOST, /* lost the link and could not get the session back */
  TG_FLEET_FAIL_SESSION,   /* the service or relay refused or failed the session */
  TG_FLEET_FAIL_DEADLINE,  /* the session did not end by its deadline */
  TG_FLEET_FAIL_WRITE,     /* the owner could not write the host's trace */
  TG_FLEET_FAIL_STOPPED,   /* stopped or aborted by the owner (Ctrl-C) */
  TG_FLEET_FAIL_INTERNAL,  /* out of memory */
} tg_fleet_failure_t;

/* The failure's token: "connect", "link_lost", ...; NULL for NONE. */
const char *tg_fleet_failure_name(tg_fleet_failure_t f);

/* A held clock burst (fleets above TG_FLEET_DEFER_ABOVE_HOSTS): the host
 * enables tracing on the first sample of its first burst and takes the
 * rest when the owner says (tg_fleet_host_resume_clock). */
typedef enum tg_fleet_clock_hold {
  TG_FLEET_CLOCK_FREE,    /* the burst, if any, runs straight through */
  TG_FLEET_CLOCK_HELD,    /* paused after its first sample; reads held */
  TG_FLEET_CLOCK_RESUMED, /* the held burst goes on; reads still held */
} tg_fleet_clock_hold_t;

/* How much a notice matters to a person reading it. */
typedef enum tg_fleet_notice {
  TG_FLEET_INFO,    /* what happened (a link lost, a session re-attached) */
  TG_FLEET_NOTE,    /* a choice of the peer's, no harm done */
  TG_FLEET_WARNING, /* something the recording goes on without */
} tg_fleet_notice_t;

/* The owner's transports. |conn| is the dialer's own handle of one
 * connection attempt; it outlives the consumer opened over it until
 * release() has reported that it is gone. */
typedef void (*tg_fleet_gone_cb)(void *ctx, const char *detail);
typedef struct tg_fleet_dialer {
  /* Opens a transport to |h|'s target (h->target) and a consumer over it
   * with |cbs| and |h| as its data; on success *c and *conn are set. On
   * failure: a negative error with why in |err|, nothing left open. */
  int (*open)(void *ctx, tg_fleet_host_t *h, const tg_consumer_cbs_t *cbs,
              tg_consumer_t **c, void **conn, char *err, size_t n);
  /* After the consumer's on_close: closes what is left of |conn|, then
   * calls |cb| from the loop with the transport's account of a failure
   * ("" if none; valid during the call). */
  void (*release)(void *conn, tg_fleet_gone_cb cb, void *cb_ctx);
  /* Whether |conn|'s TLS handshake resumed a saved session. */
  bool (*resumed)(const void *conn);
  /* The zstd decorator between |conn|'s transport and its consumer. */
  tg_zstd_transport_t *(*zstd)(void *conn);
  void *ctx;
} tg_fleet_dialer_t;

/* Events of a host, up to the owner. Required unless said optional. An
 * int return is 0 or a negative error, which fails the host. */
typedef struct tg_fleet_host_cbs {
  /* A line for a person (|text| without the host's name, valid during the
   * call): a lost link, a re-attached session, a peer's refusal. */
  void (*on_notice)(tg_fleet_host_t *h, tg_fleet_notice_t kind,
                    const char *text);
  /* Every change of the link, after it happened (h->report.link_state
   * is the new state). Optional. */
  void (*on_state)(tg_fleet_host_t *h, tg_link_state_t from);
  /* The relay took h->key, before the session exists: told once, so that
   * a lost owner can take the session back (--attach KEY). */
  void (*on_key_ready)(tg_fleet_host_t *h);
  /* The host's QueryServiceState answer (borrowed for the call), asked on
   * the first connection when tg_fleet_opts_t.check_names, and on every
   * reconnection too with check_names_always. Optional. */
  void (*on_service_state)(tg_fleet_host_t *h,
                           const Perfetto__Protos__TracingServiceState *st);
  /* No more answer will come for the names: the host is about to enable
   * tracing, or it finished first. Once per host. Optional. */
  void (*on_names_settled)(tg_fleet_host_t *h);
  /* The recording reached TRACING for the first time (counted in
   * tg_fleet_t.traced before the call). Optional. */
  void (*on_tracing)(tg_fleet_host_t *h);
  /* The host is described (host info, h->report.clock's first estimate
   * if any), once, before its first packet. */
  int (*on_described)(tg_fleet_host_t *h);
  /* A later clock estimate (h->report.clock.best), after on_described. */
  int (*on_clock_estimate)(tg_fleet_host_t *h);
  /* One packet (borrowed for the call). Hot path: no allocation here. */
  int (*on_packet)(tg_fleet_host_t *h, const uint8_t *p, size_t n);
  /* Loss counters, and the relay's account of what a link loss took. */
  void (*on_stats)(tg_fleet_host_t *h, const Perfetto__Protos__TraceStats *st,
                   const tg_rec_replay_stats_t *rs);
  /* A held clock burst ended (its estimate is in, the reads go on). A
   * burst a lost link cuts short is not told: the reconnection takes a
   * whole one. Optional. */
  void (*on_burst_ended)(tg_fleet_host_t *h);
  /* The connection is gone, the host about to be DONE (|failing| false)
   * or FAILED: the owner finishes the host's output. A negative return
   * turns DONE into FAILED ("the trace could not be written"). Optional. */
  int (*on_closing)(tg_fleet_host_t *h, bool failing);
  /* DONE or FAILED (h->report.why says why). The host calls nothing
   * after. */
  void (*on_finished)(tg_fleet_host_t *h);
} tg_fleet_host_cbs_t;

/* What every host of a fleet shares; borrowed by the hosts for their
 * life, written by the owner before the first tg_fleet_host_start(). */
typedef struct tg_fleet_opts {
  const uint8_t *config; /* the TraceConfig, serialised (none with attach) */
  size_t config_len;
  const char *attach_key;  /* attach to this session instead of enabling */
  /* With attach_key and config: enable config when nothing is detached
   * under the key (recording.h, enable_if_absent). */
  bool enable_if_absent;
  /* Keep the session without reading it: a flight recorder's rings, read
   * only through clones (CloneSession on another connection). */
  bool hold;
  int compress_level;      /* 0: ask for no compression, else zstd level */
  uint64_t grace_ms;       /* the recording's grace past its duration */
  uint64_t stop_after_ms;  /* attach: stop after this long; 0: no */
  bool stop_at_start;      /* stop as soon as tracing starts */
  bool check_names;        /* ask for the registered data sources */
  /* ... again at every reconnection (on_service_state each time), not
   * only on the first connection: a holder that keeps a session for good
   * follows what the host offers. */
  bool check_names_always;
  uint64_t reconnect_ms;   /* 0: a lost link is not reconnected */
  uint64_t dead_link_ms;   /* a link silent this long is dead */
  uint64_t clock_sync_ms;  /* clock re-sync period */
  /* The heartbeat's longest period (link.h; 0: TG_LINK_HB_MAX_MS) and the
   * loss counters' period (0: once a second): a collector holding
   * thousands of idle rings asks less often. */
  uint64_t heartbeat_max_ms;
  uint32_t stats_period_ms;
} tg_fleet_opts_t;

/* Above this many hosts, a host's first reads and the rest of its first
 * clock burst wait for the fleet (see host.c). */
#define TG_FLEET_DEFER_ABOVE_HOSTS 64

struct tg_fleet {
  uv_loop_t *loop;
  tg_fleet_opts_t o;
  tg_fleet_dialer_t dialer;
  const tg_fleet_host_cbs_t *cbs;
  size_t n;      /* hosts in the fleet: sizes the zstd window and the deferrals */
  size_t traced; /* hosts whose recording reached TRACING once */
  /* Set by tg_fleet_init (fleet.c): the hosts by index, registered by
   * tg_fleet_host_init, and the windows they are admitted through. */
  tg_fleet_host_t **hosts;
  tg_fleet_admit_t admit;
  bool starting; /* inside tg_fleet_start: a nested call returns at once */
  /* Set by tg_fleet_init: how the hosts tell the admission (fleet.c). */
  const struct tg__fleet_hooks *hooks;
  /* Set by tg_fleet_init: the loop's clock (common/clock_loop.h), which
   * the hosts' decisions and their recordings read alike, so that a
   * recording's waiting time and the host's "now" are one time. */
  tg_clock_t clock;
};

/* The fleet's admission (fleet.c). Every host stays valid (registered in
 * |hosts|) until tg_fleet_free, also after its on_finished. The owner fills loop, o, dialer, cbs
 * and n, then calls tg_fleet_init (-ENOMEM; -EINVAL without a loop), initialises its n hosts
 * (tg_fleet_host_init) and calls tg_fleet_start. From then on the fleet
 * starts the next hosts as earlier ones get through their first
 * preparation, trace or finish (also after an on_finished: the owner keeps
 * the fleet until its loop ends), at most TG_FLEET_STARTING_MAX at once,
 * in index order; once every host traces it takes the held clock bursts,
 * TG_FLEET_BURSTING_MAX at a time, and tells each host
 * (tg_fleet_host_fleet_started). tg_fleet_halt: no host starts any more
 * (the owner stops the hosts that did not: tg_fleet_host_stop fails them).
 * tg_fleet_start may be called again at any time (a periodic tick). */
int tg_fleet_init(tg_fleet_t *f);
void tg_fleet_start(tg_fleet_t *f);
void tg_fleet_halt(tg_fleet_t *f);
void tg_fleet_free(tg_fleet_t *f);

/* What the owner reads of a host: written by the engine only, from its
 * loop thread; complete and stable once the host finished (also after
 * tg_fleet_host_close). */
typedef struct tg_fleet_host_report {
  /* The link (link.h): its state, connection attempts (of this connection
   * or this outage), outages survived and their total length. */
  tg_link_state_t link_state;
  unsigned attempts;
  unsigned reconnects;
  uint64_t down_ms;

  /* From the first GetHostInfo. */
  bool has_info;
  char hostname[256];
  char host_machine_id[128];
  char kernel[256];
  uint32_t num_cpus;
  /* ClockSync: a burst of samples on every prepared connection, then one
   * per heartbeat; each estimate goes to on_described or
   * on_clock_estimate. */
  tg_clock_sync_t clock;
  tg_fleet_compression_t compression;

  /* What the host sent, and what link losses cost (reads_*: at the end). */
  uint64_t bytes, packets;
  unsigned reads_cut;  /* reads cut by a link loss (from the recording) */
  unsigned reads_lost; /* of those, the ones that did carry data */

  char conn_why[512];  /* why the last connection closed ("" before) */
  char lost_why[300];  /* why the link was last lost */
  char retry_why[300]; /* why the last reconnection attempt failed */
  tg_fleet_failure_t failure; /* FAILING, FAILED: its kind */
  char why[600];              /* FAILING, FAILED: why */
} tg_fleet_host_report_t;

/* The engine's own state: host_internal.h. */
typedef struct tg__fleet_engine tg__fleet_engine_t;

struct tg_fleet_host {
  /* The owner's, set by tg_fleet_host_init() or before
   * tg_fleet_host_start(); pointers borrowed for the host's life. */
  tg_fleet_t *fleet;
  size_t index;
  const char *name;     /* for notices and logs */
  const void *target;   /* the dialer's */
  const char *out_name; /* where its packets go, for "cannot write" */
  /* The owner's TraceConfig for this host alone (NULL: the fleet's). */
  const uint8_t *config;
  size_t config_len;
  void *data;
  /* The resume key: random, or the fleet's attach_key; an owner may set
   * one of its own for this host after tg_fleet_host_init() (attach mode:
   * the host then attaches by it). */
  char key[TG_RELAY_SESSION_KEY_MAX + 1];

  tg_fleet_host_report_t report; /* read only: the engine writes it */

  /* Owned by the host; NULL when tg_fleet_host_init() ran out of memory
   * (the host then fails at its start) and after tg_fleet_host_close()'s
   * handles closed. */
  tg__fleet_engine_t *e;
};

/* A host of |fleet| in CONNECTING, not started, in memory the owner
 * provides (and frees after tg_fleet_host_close's callback, or once its
 * loop ran the close). |name|, |target| and |fleet| are borrowed for the
 * host's life. Returns 0 or -ENOMEM (then tg_fleet_host_start() fails
 * it: "out of memory"). */
int tg_fleet_host_init(tg_fleet_t *fleet, tg_fleet_host_t *h, size_t index,
                       const char *name, const void *target, void *data);
/* Opens the first connection. */
void tg_fleet_host_start(tg_fleet_host_t *h);
/* Stop tracing (now, or once started or reconnected); a host that has not
 * started tracing fails ("stopped before tracing began"). */
void tg_fleet_host_stop(tg_fleet_host_t *h);
/* Ends the session (FreeBuffers) and the connection; nothing is kept. */
void tg_fleet_host_abort(tg_fleet_host_t *h);
/* What the host is doing, in a word or two, for a progress display. */
const char *tg_fleet_host_state(const tg_fleet_host_t *h);
bool tg_fleet_host_tracing(const tg_fleet_host_t *h);
/* Between a lost link and the session back (tg_link_reconnecting). */
bool tg_fleet_host_reconnecting(const tg_fleet_host_t *h);
/* The current connection's consumer (borrowed until its on_close: the
 * owner may make calls of its own on it); NULL between connections. */
tg_consumer_t *tg_fleet_host_consumer(const tg_fleet_host_t *h);
/* The host's recording (borrowed; NULL before init, once finished or
 * closed). */
const tg_recording_t *tg_fleet_host_recording(const tg_fleet_host_t *h);
/* Every host traces: a first read the start deferred comes now. */
void tg_fleet_host_fleet_started(tg_fleet_host_t *h);
/* The rest of |h|'s held clock burst begins. True when that burst is
 * under way after the call (false: none to take, not now, or it ended at
 * once; a reconnection takes a whole burst of its own). */
bool tg_fleet_host_resume_clock(tg_fleet_host_t *h);
/* Closes the host's handles; the loop then runs them out and frees the
 * engine (h->e). The report stays. */
void tg_fleet_host_close(tg_fleet_host_t *h);
/* The same, and |cb| runs from the loop once its last handle is closed:
 * then the owner's memory may go. A host without an engine (out of memory
 * at init) has no handle: |cb| runs at once. */
typedef void (*tg_fleet_host_closed_cb)(tg_fleet_host_t *h);
void tg_fleet_host_close_cb(tg_fleet_host_t *h, tg_fleet_host_closed_cb cb);

#endif /* TRACEGATE_CONSUMER_FLEET_HOST_H */
