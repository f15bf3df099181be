/* `tracegate record`: shared by record.c (flags, config, setup) and
 * record_flow.c (the recording itself, driven by the loop). */
#ifndef TRACEGATE_CONSUMER_CLI_RECORD_H
#define TRACEGATE_CONSUMER_CLI_RECORD_H

#include "consumer/cli/cli.h"
#include "consumer/recording.h"

#define RECORD_MAX_DATA_SOURCES 64

typedef struct record_opts {
  const char *socket;
  const char *config;
  const char *out;
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
  const char *reconnect; /* --reconnect-timeout */
  uint64_t reconnect_ms; /* parsed; 0: never reconnect */
  const char *grace;     /* --grace */
  uint64_t grace_ms;     /* parsed; past duration + grace a session is stopped */
  /* Perfetto's other record flags (perfetto_cmd.cc). */
  bool background;           /* -d: go on in a child, print its pid */
  const char *size;          /* -s: max_file_size_bytes */
  uint64_t max_file_bytes;   /* parsed; 0: no limit */
  const char *is_detached;   /* --is_detached KEY: exit 0 yes, 2 no, 1 error */
  bool bugreport;            /* --save-for-bugreport: refused */
  bool version;              /* --version */
} record_opts_t;

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
  unsigned sigints;
  bool keep_partial; /* on failure, keep what was recorded */
  int exit_code;
  uv_signal_t sigterm;     /* -d: SIGTERM stops cleanly, like Ctrl-C */
  bool size_reached;       /* streamed: -s reached, the rest is dropped */
  bool conn_lost;          /* the service went away */
  bool no_final_stats;     /* the last GetTraceStats failed: loss unknown */
  const char *end_reason;  /* why the session ended, for the summary */
} record_t;

/* record_flow.c: starts the session on the connected |r| (handles are
 * initialised here); the loop then runs until everything is closed. */
void record_begin(record_t *r);
/* The connection closed: a failure unless the recording was over. */
void record_on_conn_lost(record_t *r, const char *msg);

/* record_check.c: before enabling, on the connected |r|: warns (stderr)
 * about data source names no producer registered, naming close matches,
 * and about config fields tracegate's probes do not act on. Never fails
 * the recording (a producer may register later). */
void record_check_config(record_t *r);

/* is_detached.c: --is_detached KEY on the service at |socket|: 0 if a
 * detached session KEY exists (it is left detached), 2 if not, 1 when
 * the service could not be asked. */
int record_is_detached(const char *socket, const char *key);

#endif /* TRACEGATE_CONSUMER_CLI_RECORD_H */
