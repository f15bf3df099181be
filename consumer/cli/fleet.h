/* `tracegate record -H ...`: recording from remote hosts, one or many, on
 * one loop. Shared by the fleet files:
 *
 *   fleet.c        the run: outputs, hosts, signals, the start and burst
 *                  windows, the end
 *   fleet_host.c   one host: its connection (connect, prepare, reconnect)
 *                  around its recording (consumer/recording.h), driven by
 *                  its link's state machine (consumer/fleet/link.h: the
 *                  states, their timers, where a dead link is detected)
 *   fleet_merge.c  the merged trace: packet rewriting and the packets the
 *                  collector adds (docs/merge.md)
 *   fleet_ui.c     progress lines and the summary
 *   fleet_ui_pick.c  which hosts the progress names when they are many
 *
 * One host failing never stops the others; the run ends when every host's
 * link is DONE or FAILED. Everything runs on the one loop thread.
 */
#ifndef TRACEGATE_CONSUMER_CLI_FLEET_H
#define TRACEGATE_CONSUMER_CLI_FLEET_H

#include "abi/protocol_limits.h"
#include "common/u32_map.h"
#include "consumer/cli/record.h"
#include "consumer/cli/remote.h"
#include "consumer/fleet/clock_sync.h"
#include "consumer/fleet/link.h"

/* Machine ids are k + 1 and sequence ids get (k + 1) << 20: this many hosts
 * keep every range below the overflow range (docs/merge.md). */
#define FLEET_MAX_HOSTS 1024
#define FLEET_SEQ_SHIFT 20
#define FLEET_SEQ_LOW_MASK ((1u << FLEET_SEQ_SHIFT) - 1)
/* The low value of a host's range that the collector's own packets about
 * that host use; producer ids from here up are mapped. */
#define FLEET_SEQ_COLLECTOR FLEET_SEQ_LOW_MASK
/* Mapped ids (producer ids too large for a range) come from here up. */
#define FLEET_SEQ_OVERFLOW_BASE 0xFFF00000u
/* The collector's own packets (machine 0). */
#define FLEET_SEQ_MACHINE0 1u
#define FLEET_CLOCK_SYNC_SAMPLES 5

typedef enum fleet_out_mode {
  FLEET_OUT_FILE,  /* one host, -o FILE: its packets as they are */
  FLEET_OUT_DIR,   /* -o DIR: DIR/<name>.pftrace per host */
  FLEET_OUT_MERGE, /* -o FILE --merge: one trace, machine ids */
} fleet_out_mode_t;

/* Which of fleet.c's windows counts the host (at most one: the start
 * window while it connects and prepares, the burst window once up). */
typedef enum fleet_slot {
  FLEET_SLOT_NONE,
  FLEET_SLOT_STARTING, /* counted in fleet_t.starting */
  FLEET_SLOT_BURSTING, /* counted in fleet_t.bursting */
} fleet_slot_t;

/* A big fleet's start (fleet_host.c, DEFER_READS_ABOVE_HOSTS): the host
 * enables tracing on the first sample of its first clock burst and takes
 * the rest once the fleet traces. */
typedef enum fleet_clock_hold {
  CLOCK_FREE,    /* the burst, if any, runs straight through */
  CLOCK_HELD,    /* paused after its first sample; reads held */
  CLOCK_RESUMED, /* the held burst goes on; reads still held */
} fleet_clock_hold_t;

/* What a host's relay sends, as the latest preparation of its link
 * settled it (the summary says it). */
typedef enum host_compression {
  HC_UNKNOWN = 0, /* no link was prepared */
  HC_ZSTD,        /* compressed, as asked */
  HC_NOT_ASKED,   /* plain: --compress none */
  HC_REFUSED,     /* plain: the relay answered SetCompression with a no */
  HC_UNSUPPORTED, /* plain: no TracegateRelay, or one without SetCompression */
} host_compression_t;

/* Producer sequence ids that do not fit a host's range, mapped one to one
 * into the overflow range. */
typedef tg_u32_map_t seq_map_t;

typedef struct fleet fleet_t;

typedef struct fleet_host {
  fleet_t *f;
  size_t index;
  uint32_t machine_id; /* index + 1 */
  const cli_target_t *t;
  /* The link's state, its deadlines and reconnections (link.h); the one
   * timer below is armed for tg_link_deadline() (and clock_due_ms). */
  tg_link_t link;
  uv_timer_t timer;
  tg_recording_t *rec; /* the session; NULL once the host finished */

  /* The current connection (NULL between connections). */
  tg_consumer_t *c;
  cli_remote_t *rt;
  bool relay;          /* TracegateRelay bound on this connection */
  bool bound;          /* ConsumerPort bound on this connection */
  bool ever_connected; /* ConsumerPort was bound once */
  bool key_set;        /* the relay took the resume key */
  host_compression_t compression;
  unsigned prep_wait;  /* parts of preparing not answered (fleet_host.c) */
  char conn_msg[512];  /* why the connection closed */
  char retry_why[300]; /* why the last reconnection attempt failed */

  /* From GetHostInfo. */
  bool has_info;
  char hostname[256];
  char host_machine_id[128];
  char kernel[256];
  uint32_t num_cpus;

  /* ClockSync: a burst of samples when a connection is prepared, then one
   * per heartbeat. Each estimate (clock.best) is written into a merged
   * trace as a RemoteClockSync (docs/merge.md). */
  unsigned syncs; /* samples of the current burst */
  tg_clock_sample_t cur;
  tg_clock_sync_t clock;
  bool preamble_written;
  fleet_clock_hold_t clock_hold;
  uint64_t clock_due_ms; /* a held burst goes on by then anyway; 0: none */

  /* The heartbeat's sample (link.h says when one is due). */
  tg_clock_sample_t hb_sample;
  char lost_why[300]; /* why the link was last lost */

  char key[TG_RELAY_SESSION_KEY_MAX + 1]; /* resume key (SetSessionKey; --attach KEY) */
  bool key_shown;

  bool stop_requested;
  bool has_traced; /* its recording reached TRACING once */
  fleet_slot_t slot; /* written by fleet.c only */
  bool names_checked; /* its data source names were checked (fleet_names.c) */
  bool names_recorded; /* its answer is noted, not yet counted */

  /* What link losses cost (their count and length: link). */
  unsigned reads_cut;  /* reads cut by a link loss (from the recording) */
  unsigned reads_lost; /* of those, the ones that did carry data */
  uint64_t loss_before_drop;
  bool recheck_loss; /* compare the loss after re-attaching */
  uint64_t loss_while_down;

  /* Output. */
  cli_output_t own; /* FILE and DIR modes */
  bool has_own;
  char *path;
  uint64_t bytes, packets;
  uint64_t malformed; /* merge: packets dropped for not decoding */
  seq_map_t seqs;
  cli_loss_t loss;
  bool has_loss;

  /* The outcome. */
  char why[600];
  bool kept_partial;
} fleet_host_t;

struct fleet {
  const record_opts_t *o;
  uv_loop_t *loop;
  cli_remote_env_t env;
  /* TLS sessions for resumption: always in memory (reconnections), read
   * from and written back to |sessions_path| with --session-cache. */
  struct cli_session_cache *sessions;
  char sessions_path[CLI_TLS_PATH_MAX];
  cli_tls_counts_t tls_counts;
  fleet_out_mode_t mode;
  const char *out; /* -o */
  tg_buf_t cfg;    /* the TraceConfig every host gets, serialised (empty
                      with --attach: the session has its own) */
  uint32_t duration_ms;
  uint64_t reconnect_ms; /* 0: no reconnection */
  uint64_t dead_link_ms; /* a link silent this long is dead */
  uint64_t clock_sync_ms; /* clock re-sync period */

  fleet_host_t *hosts;
  size_t n;
  /* fleet_names.c: the data source names each host has not registered. */
  const Perfetto__Protos__TraceConfig *pcfg; /* NULL with --attach */
  uint8_t *ds_missing; /* [host * n_data_sources + ds]: 1 if unregistered */
  char **ds_near;      /* per data source: "; did you mean ..." or NULL */
  size_t names_checked; /* hosts whose answer (or failure) is in */
  size_t finished;
  size_t traced; /* hosts whose recording reached TRACING once */
  size_t next_start; /* hosts before it were started (fleet.c start_more) */
  /* Started hosts still connecting or preparing: kept by fleet.c as links
   * change, so that starting more costs no walk over every host. */
  size_t starting;
  /* Once every host traces, the held clock bursts go on this many at a
   * time (fleet.c burst_more): next_burst as next_start, bursting as
   * starting. */
  size_t next_burst, bursting;
  FILE *keys;     /* many hosts: their resume keys (fleet_show_key) */
  char *keys_path;
  bool keys_failed;
  uint32_t next_overflow_seq;
  /* A host's compressed_packets, inflated so that the merge rewrites the
   * packets inside (consumer/packet_inflate.h). */
  tg_buf_t inflated;

  cli_output_t merged;
  bool has_merged;

  uv_signal_t sigint;
  uv_signal_t sigterm; /* stops as Ctrl-C does */
  uv_timer_t tick;   /* progress, stall watchdog */
  unsigned sigints;
  bool aborting;
  uv_timer_t abort_timer; /* exits if aborting takes too long */
  bool closed; /* timers and signal closed */
  bool tty;
  size_t lines_shown;
  uint64_t t0;
};

/* --- fleet.c ------------------------------------------------------------- */

/* Records from |targets| (|n|, named) with |cfg| into o->out. Returns the
 * exit code. */
int fleet_record(const record_opts_t *o, Perfetto__Protos__TraceConfig *cfg,
                 const cli_target_t *targets, size_t n,
                 tg_tls_config_t *tls);
/* A host reached DONE or FAILED. */
void fleet_host_finished(fleet_t *f);
/* |h|'s link went from |from| to h->link.state (every change, from the
 * link's on_state): fleet.c counts the started hosts still connecting or
 * preparing. */
void fleet_host_link_changed(fleet_t *f, fleet_host_t *h, tg_link_state_t from);
/* Tells |h|'s resume key before its session exists: on the terminal with
 * a few hosts; with many, into the keys file (OUT.keys, or OUT/resume.keys
 * with -o DIR), "HOST KEY" a line, named once on the terminal. */
void fleet_show_key(fleet_t *f, fleet_host_t *h);
/* A host's recording started tracing for the first time. */
void fleet_host_traced(fleet_t *f, fleet_host_t *h);
/* Prints "tracegate: " + the text on its own line, clearing the progress
 * lines first. */
void fleet_say(fleet_t *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* --- fleet_names.c ------------------------------------------------------- */

/* Data source names checked against each host's registered ones: once
 * every host has answered or failed, one warning per name
 * that some host lacks, naming those hosts (a count and the first few
 * when they are many). */
int fleet_names_init(fleet_t *f, const Perfetto__Protos__TraceConfig *cfg);
/* |h|'s QueryServiceState answer noted, |h| not yet counted as checked
 * (its other preparations may still be under way). */
void fleet_names_record(fleet_t *f, fleet_host_t *h,
                        const Perfetto__Protos__TracingServiceState *st);
/* |h| is checked: with its answer |st|, or the one fleet_names_record()
 * noted, or none (NULL, nothing noted: the query failed or was refused).
 * Once per host; the last host's call says the warnings. */
void fleet_names_host(fleet_t *f, fleet_host_t *h,
                      const Perfetto__Protos__TracingServiceState *st);
void fleet_names_free(fleet_t *f);

/* --- fleet_host.c -------------------------------------------------------- */

void fleet_host_init(fleet_t *f, fleet_host_t *h, size_t index,
                     const cli_target_t *t);
/* Opens the first connection. */
void fleet_host_start(fleet_host_t *h);
/* Ctrl-C: stop tracing (now, or once started or reconnected). */
void fleet_host_stop(fleet_host_t *h);
/* A second Ctrl-C: ends the session (FreeBuffers) and the connection;
 * nothing is kept. */
void fleet_host_abort(fleet_host_t *h);
/* What the host is doing, for the progress line. */
const char *fleet_host_state(const fleet_host_t *h);
bool fleet_host_tracing(const fleet_host_t *h);
/* Every host traces: a first read the start deferred comes now. */
void fleet_host_fleet_started(fleet_host_t *h);
/* The rest of |h|'s held clock burst begins; false if it has none to take
 * (or not now: a reconnection takes a whole burst of its own). */
bool fleet_host_resume_clock(fleet_host_t *h);
/* |h|'s held burst ended (its estimate is in, its reads go on). */
void fleet_host_burst_ended(fleet_t *f, fleet_host_t *h);
/* Closes the host's handles (the loop then runs them out). */
void fleet_host_close(fleet_host_t *h);
/* Frees what the host holds (after the loop ended). */
void fleet_host_free(fleet_host_t *h);

/* --- fleet_merge.c ------------------------------------------------------- */

/* The collector's own packets at the head of a merged trace (machine 0). */
int fleet_merge_head(fleet_t *f);
/* Host |h|'s SystemInfo, ClockSnapshot and RemoteClockSync packets. */
int fleet_merge_host_preamble(fleet_t *f, fleet_host_t *h);
/* One more RemoteClockSync of |h| from its current estimate (clock.best). */
int fleet_merge_clock_sync(fleet_t *f, fleet_host_t *h);
/* One packet of |h| with its machine id and remapped sequence id
 * appended. A packet that does not decode is dropped and counted. */
int fleet_merge_packet(fleet_t *f, fleet_host_t *h, const uint8_t *p,
                       size_t n);
void fleet_seq_map_free(seq_map_t *m);

/* --- fleet_ui.c ---------------------------------------------------------- */

void fleet_ui_draw(fleet_t *f);

/* --- fleet_ui_pick.c ----------------------------------------------------- */

/* The hosts a progress display of |f| names, in order, into |idx| (at
 * most |cap|): every host when they fit, else the failing ones, then
 * those whose link is not up (connecting, preparing, reconnecting), then
 * those under half the median host's bytes. *total: how many hosts
 * qualified. Returns how many were picked. */
size_t fleet_ui_pick(const fleet_t *f, size_t *idx, size_t cap,
                     size_t *total);
void fleet_ui_clear(fleet_t *f);
/* The per-host summary; returns the number of hosts that failed. */
size_t fleet_ui_summary(fleet_t *f);

#endif /* TRACEGATE_CONSUMER_CLI_FLEET_H */
