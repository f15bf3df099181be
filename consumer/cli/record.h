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
  const char *compress;  /* --compress */
  int compress_level;    /* parsed; 0: none, else zstd at this level */
  const char *dead_link;  /* --dead-link-timeout */
  uint64_t dead_link_ms;  /* parsed; a remote link silent this long is dead */
  const char *clock_sync; /* --clock-sync-period */
  uint64_t clock_sync_ms; /* parsed; remote clocks re-read this often */
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
} record_t;

/* record_flow.c: starts the session on the connected |r| (handles are
 * initialised here); the loop then runs until everything is closed. */
void record_begin(record_t *r);
/* The connection closed: a failure unless the recording was over. */
void record_on_conn_lost(record_t *r, const char *msg);

#endif /* TRACEGATE_CONSUMER_CLI_RECORD_H */
