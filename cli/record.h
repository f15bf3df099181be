/* `tracegate record`: shared by record.c (flags, config, setup) and
 * record_flow.c (the recording itself, driven by the loop). */
#ifndef TRACEGATE_CLI_RECORD_H
#define TRACEGATE_CLI_RECORD_H

#include "cli/cli.h"
#include "consumer/recording.h"

#define RECORD_MAX_DATA_SOURCES 64

typedef struct record_opts {
  const char *socket;
  const char *config;
  const char *out;
  const char *summary_json; /* --summary-json FILE|-: the outcome as JSON */
  const char *time;
  const char *buffer;
  const char *detach;
  const char *attach;
  bool txt;
  bool stop;
  bool read_buffers; /* never write_into_file */
  char *ds[RECORD_MAX_DATA_SOURCES];
  size_t n_ds;
  uint64_t duration_ms; /* -t, parsed */
  bool has_duration;
  uint64_t buffer_bytes; /* -b, parsed */
  bool has_buffer;
  /* Remote hosts (-H, --hosts) and how to reach them. */
  cli_remote_opts_t remote;
  bool merge;
  /* --strict: any data-source problem exits 4, a data source running
   * without some of its events or offered by no producer included. */
  bool strict;
  /* --merge-allow-fields: fields kept beyond the merge's allowlist
   * (docs/merge.md, "Trusting the producers"); NULL: none. */
  const char *merge_allow;
  /* --app-tracks: where the hosts' app track events go in the merged
   * trace (docs/merge.md, "Links across hosts"); NULL: joined. */
  const char *app_tracks;
  int app_tracks_mode; /* parsed: a tg_merge_app_tracks_t */
  /* --clock-from-requests: on (NULL, the default) or off: the merged
   * file re-clocked by its requests (docs/merge.md). */
  const char *clock_from_requests;
  bool clock_from_requests_off; /* parsed */
  const char *reconnect; /* --reconnect-timeout */
  uint64_t reconnect_ms; /* parsed; 0: never reconnect */
  const char *grace;     /* --grace */
  uint64_t grace_ms;     /* parsed; past duration + grace a session is stopped */
  const char *compress;  /* --compress */
  int compress_level;    /* parsed; 0: none, else zstd at this level */
  const char *dead_link;  /* --dead-link-timeout */
  uint64_t dead_link_ms;  /* parsed; a remote link silent this long is dead */
  const char *clock_sync; /* --clock-sync-period */
  uint64_t clock_sync_ms; /* parsed; remote clocks re-read this often */
  uint64_t clone_id;      /* --clone: snapshot this session (0: not given) */
  const char *clone_name; /* --clone-by-name */
  /* Perfetto's other record flags (perfetto_cmd.cc). */
  bool background;           /* -d: go on in a child, print its pid */
  bool background_wait;      /* ... once the child's session started */
  const char *size;          /* -s: max_file_size_bytes */
  uint64_t max_file_bytes;   /* parsed; 0: no limit */
  const char *is_detached;   /* --is_detached KEY: exit 0 yes, 2 no, 1 error */
  bool bugreport;            /* --save-for-bugreport: clone the session a
                                bugreport takes (for_bugreport) */
  bool clone_for_bugreport;  /* --clone-for-bugreport: --clone as one */
  bool bugreport_all;        /* --save-all-for-bugreport */
} record_opts_t;

/* Why a local recording's session ended: a token for --summary-json and
 * the words of the summary line (record_flow.c's table). */
typedef enum record_end {
  RECORD_END_UNKNOWN = 0, /* it has not ended, or failed first */
  RECORD_END_DURATION,
  RECORD_END_SIZE,          /* the trace reached --size (streamed) */
  RECORD_END_MAX_FILE_SIZE, /* the service stopped it at the size */
  RECORD_END_SIZE_OR_TRIGGER,
  RECORD_END_STOP_TRIGGER,
  RECORD_END_SERVICE, /* the service ended it, for none of the above */
  RECORD_END_SERVICE_GONE, /* the connection to the service was lost */
  RECORD_END_SIGINT,
  RECORD_END_SIGTERM,
  RECORD_END_STOP, /* --stop */
} record_end_t;

typedef struct record {
  record_opts_t o;
  uv_loop_t *loop;
  cli_conn_t conn;
  cli_output_t out;
  bool has_out;    /* |out| is open */
  bool watch_only; /* attached write_into_file session: |out| is read-only */
  Perfetto__Protos__TraceConfig *cfg; /* the config to enable */
  bool file_mode; /* the service writes the trace into our file */
  bool tty;       /* stderr is a terminal: live progress */
  bool progress_shown;
  tg_recording_t *rec; /* the session (consumer/recording.h) */
  bool began;          /* tracing began: a failure keeps what was written */
  bool finished;       /* the loop is winding down */
  uv_signal_t sigint;
  uint64_t t0;
  uint64_t duration_ms; /* for the progress line; 0 = open-ended */
  cli_loss_t loss;
  tg_ftrace_loss_t ftrace; /* from the packets written */
  /* Data sources that did not run as asked: none offered when the session
   * was enabled (record_check.c), then what the trace's packets say. */
  tg_ds_problems_t problems;
  unsigned sigints;
  bool keep_partial; /* on failure, keep what was recorded */
  int exit_code;
  /* A START_TRACING trigger config (record_trigger.c). */
  /* --background-wait, in the child: the pipe its parent waits on (one
   * byte once every data source started; EOF says it never did); -1. */
  int bg_fd;
  bool snapshot_watch;     /* CLONE_SNAPSHOT hits are cloned into OUT.N */
  bool trigger_wait;       /* the session waits for a trigger */
  bool trigger_fired;      /* ... and it fired: tracing began */
  char trigger_names[256]; /* "'a' or 'b'", for messages */
  uint64_t trigger_timeout_ms;
  /* CLONE_SNAPSHOT snapshots (record_snapshot.c): OUT.<taken>. */
  unsigned snapshots_taken, snapshots_running;
  uv_signal_t sigterm;     /* SIGTERM stops cleanly, like Ctrl-C */
  bool size_reached;       /* streamed: -s reached, the rest is dropped */
  bool conn_lost;          /* the service went away */
  bool deadline_failed;    /* the session did not end by its deadline */
  bool write_failed;       /* the trace could not be written */
  const char *early_failure; /* a failure before connecting: its kind */
  bool bg_parent;          /* the parent of a --background child */
  bool no_final_stats;     /* the last GetTraceStats failed: loss unknown */
  record_end_t end;        /* why the session ended, for the summary */
  char fail_why[300];      /* why it failed, for --summary-json */
  bool nothing_saved;      /* --save-for-bugreport found no session: no
                              file, exit 0, as perfetto_cmd */
} record_t;

/* record_trigger.c: --background-wait's child tells its parent that every
 * data source started (once; closes r->bg_fd). */
void record_background_started(record_t *r);

/* record_flow.c: --summary-json for a local recording, once it ended
 * (r->exit_code is final), whatever ended it. */
void record_write_summary(record_t *r);

/* record_clone.c: --clone / --clone-by-name on the connected |r| (its
 * output open): snapshot, read, free, commit. Returns the exit code
 * (CLI_EXIT_DATA_SOURCE when the snapshot shows a data source that did
 * not start or runs without some events: r->problems). */
int record_clone(record_t *r);
/* --save-all-for-bugreport on the connected |r|: every started session
 * with a bugreport_score > 0, highest first, cloned for a bugreport into
 * |dir|/its bugreport_filename (default systrace.pftrace; "_N" added to a
 * repeated name). None: exit 0. */
#define TG_BUGREPORT_NAME_MAX 128
int record_save_all_for_bugreport(record_t *r, const char *dir);
/* A bugreport's default file is in a shared directory (TMPDIR, /tmp):
 * what another user left at |path| (a symlink, a FIFO, a file not ours)
 * is refused, never followed or written. 0, or -errno after saying why. */
int record_bugreport_target_ok(const char *path);

/* record_trigger.c: when the session of |r| with config |cfg| is asked
 * for (or attached), watches what the recording needs to know: the start
 * of one that waits for a START_TRACING trigger, CLONE_SNAPSHOT hits
 * (record_snapshot.c), every data source started (--background-wait). */
void record_trigger_watch(record_t *r, const Perfetto__Protos__TraceConfig *cfg);
/* Shows "waiting for trigger NAME" while it waits; false otherwise. */
bool record_trigger_progress(record_t *r);
/* At the end: says so when the trigger never fired; false otherwise. */
bool record_trigger_never_fired(record_t *r);

/* record_snapshot.c: whether |cfg| (may be NULL) has CLONE_SNAPSHOT
 * triggers; then each hit is cloned into OUT.0, OUT.1, ... */
bool record_snapshot_mode(const Perfetto__Protos__TraceConfig *cfg);
/* A clone_trigger_hit record_trigger_watch() saw: the next snapshot. */
void record_snapshot_hit(record_t *r,
                         const Perfetto__Protos__ObservableEvents__CloneTriggerHit *hit);

/* record_flow.c: starts the session on the connected |r| (handles are
 * initialised here); the loop then runs until everything is closed. */
void record_begin(record_t *r);
/* The connection closed: a failure unless the recording was over. */
void record_on_conn_lost(record_t *r, const char *msg);

/* record_check.c: calls |fn| for each data source of |cfg| that no
 * producer registered in |st|: its index in cfg->data_sources, its name
 * (printable) and "; did you mean: a, b?" (or ""), both valid for the
 * call only. */
typedef void (*record_missing_fn)(void *ctx, size_t index, const char *name,
                                  const char *near);
void record_missing_names(const Perfetto__Protos__TraceConfig *cfg,
                          const Perfetto__Protos__TracingServiceState *st,
                          record_missing_fn fn, void *ctx);
/* record_check.c: before enabling, on the connected |r|: warns (stderr)
 * about data source names no producer registered, naming close matches,
 * and about config fields tracegate's probes do not act on. Never fails
 * the recording (a producer may register later). */
void record_check_config(record_t *r);

/* is_detached.c: --is_detached KEY on the service at |socket|: 0 if a
 * detached session KEY exists (it is left detached), 2 if not, 1 when
 * the service could not be asked. */
int record_is_detached(const char *socket, const char *key);

#endif /* TRACEGATE_CLI_RECORD_H */
