/* `tracegate record`: flags, their checks, the config and the output file;
 * then the connection, handed to record_flow.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "consumer/fleet/merge.h"
#include "consumer/fleet/trace_schema.h"
#include "common/decimal.h"
#include "common/units.h"
#include "cli/fleet.h"
#include "cli/record.h"
#include "cli/record_flags.h"
#include "ipc/channel.h"

#define DEFAULT_QUICK_DURATION_MS 10000

static const char synopsis[] =
    "[-c CONFIG [--txt] | DATA_SOURCE...] -o OUT [-t DURATION] [-b SIZE]\n"
    "         [-s SIZE] [-d] [--detach KEY | --attach KEY [--stop]]\n"
    "         [--socket PATH]\n"
    "       " CLI_PROG " record --clone ID | --clone-by-name NAME -o OUT [--socket PATH]\n"
    "       " CLI_PROG " record --is_detached KEY [--socket PATH]\n"
    "       " CLI_PROG " record [-c CONFIG [--txt] | DATA_SOURCE...] -H HOST [-H HOST...]\n"
    "         [--hosts FILE] --ca F [--cert F --key F] [--tls-server-name NAME]\n"
    "         -o DIR | -o FILE [--merge] [-t DURATION] [-b SIZE]\n"
    "       " CLI_PROG " record -H HOST --attach KEY -o FILE [--merge] [--stop]";

/* --compress: "none" -> 0, "zstd" -> 1, "zstd:N" -> N (1..
 * COMPRESS_LEVEL_MAX). Returns 0 or -EINVAL. */
static int cli_parse_compress(const char *s, int *level) {
  if (strcmp(s, "none") == 0 || strcmp(s, "zstd") == 0) {
    *level = s[0] == 'z';
    return 0;
  }
  if (strncmp(s, "zstd:", 5) != 0) return -EINVAL;
  uint64_t v;
  if (tg_decimal_u64(s + 5, COMPRESS_LEVEL_MAX, &v) < 0 || v < 1)
    return -EINVAL;
  *level = (int)v;
  return 0;
}

/* about[] states TG_REC_READ_AGAIN_BYTES in words. */
_Static_assert(TG_REC_READ_AGAIN_BYTES == 1u << 20,
               "record's --help says a read of 1 MiB");

static const char about[] =
    "Records a trace from the tracing service into OUT, a Perfetto trace file\n"
    "(open it at ui.perfetto.dev or with trace_processor).\n"
    "\n"
    "The config is a TraceConfig file (binary, or text with --txt; '-' reads\n"
    "stdin; an empty one is refused, as perfetto refuses it), or is built\n"
    "from the DATA_SOURCE names given: one ring buffer of\n"
    "-b SIZE (default " DEFAULT_BUFFER "), -t DURATION (default 10s). With a config,\n"
    "-t, -b and -s override its duration_ms, the size of its first buffer\n"
    "and its max_file_size_bytes. DURATION: 500ms, 10s, 2m, 1h, 1m30s; a\n"
    "number alone is seconds (0 = until Ctrl-C). SIZE: 512kb, 64M, 1gb.\n"
    "\n"
    "Before the session starts, data source names no producer has\n"
    "registered are named in a warning with the closest registered names\n"
    "(a producer may still register: the session goes on), and so are the\n"
    "config fields tracegate-probes does not act on. With `-H`, every host is\n"
    "checked; once all have answered, each name is warned about once with the\n"
    "hosts that lack it (beyond three: \"N of M hosts (a, b, c, ...)\").\n"
    "\n"
    "Ctrl-C or SIGTERM stops the trace cleanly and keeps the file; a second\n"
    "one aborts, leaving what was recorded in the partial file it names.\n"
    "On a terminal a progress line shows the time, the bytes and\n"
    "packets written and the data lost; a summary names every loss counter\n"
    "that is not zero, and why the session ended (its duration, -s or\n"
    "max_file_size_bytes, a stop trigger, Ctrl-C, --stop, the service gone).\n"
    "The exit status is 0 only if the trace was written; 4 when it was, but\n"
    "a data source did not start, or linux.ftrace got none of the events it\n"
    "asked for; one that runs without some of its events, or that no\n"
    "producer offered, is a warning (the summary names each, with its\n"
    "code), and with --strict exits 4 too.\n"
    "\n"
    "-d (Perfetto's --background) prints the pid of a process that records\n"
    "on, detached from the terminal; kill -TERM PID stops the trace cleanly\n"
    "and writes OUT.\n"
    "\n"
    "The config is recorded as written. When it asks for write_into_file, a\n"
    "local service writes the trace into OUT itself (the file passed over\n"
    "the socket). Otherwise, or with --read-buffers, the trace is read over\n"
    "the connection and written by " CLI_PROG ": "
    CLI_STR(TG_REC_DEFAULT_FIRST_READ_MS) "ms after tracing\n"
    "starts, then every " CLI_STR(TG_REC_DEFAULT_READ_PERIOD_MS) "ms, sooner "
    "as the source's rate needs (at once\n"
    "again after a read of 1 MiB, or a quarter of the smallest buffer), so\n"
    "that a ring buffer loses nothing; a config with a DISCARD buffer is\n"
    "read once the session ended, as Perfetto does, so that DISCARD keeps\n"
    "the first data up to the buffer's size.\n"
    "OUT is written to OUT.partial-<random>, renamed to OUT once complete (a\n"
    "symlink is followed, not replaced). A device, a FIFO or '-' (stdout) is\n"
    "written in place, by " CLI_PROG ".\n"
    "\n"
    "--clone ID (or --clone-by-name NAME) writes a read-only snapshot of a\n"
    "running session of yours into OUT, as Perfetto's --clone; the session\n"
    "runs on untouched.\n"
    "\n"
    "Triggers (trigger_config; fire them with " CLI_PROG " trigger NAME): a\n"
    "START_TRACING session shows 'waiting for trigger NAME' until one fires,\n"
    "and exits 1 saying so if none did before trigger_timeout_ms. With\n"
    "CLONE_SNAPSHOT, each trigger writes a snapshot to OUT.0, OUT.1, ...\n"
    "(after its stop_delay_ms; each says which trigger made it, and holds\n"
    "the triggers since the snapshot before) while the session runs on;\n"
    "it is read into OUT once it ends (a read while it runs would empty\n"
    "the buffers the snapshots copy).\n"
    "\n"
    "--save-for-bugreport (Perfetto's) writes a snapshot of the running\n"
    "session with the highest bugreport_score into $TMPDIR/systrace.pftrace\n"
    "(/tmp/systrace.pftrace without TMPDIR, as perfetto off Android; -o\n"
    "names another file); with no such session it writes nothing and\n"
    "exits 0. --save-all-for-bugreport writes every such session, the\n"
    "highest score first, each into $TMPDIR/ its bugreport_filename\n"
    "(systrace.pftrace if none; a repeated name gets _1, _2, ...).\n"
    "\n"
    "--detach KEY starts the session and leaves it running under KEY; later\n"
    "--attach KEY takes it back and waits for its end (or stops it at once\n"
    "with --stop, or after -t), then writes OUT. --is_detached KEY exits 0\n"
    "when a detached session KEY exists (it stays detached), 2 when not.\n"
    "\n"
    "Remote hosts (-H, repeated, and/or --hosts FILE: one per line, '#'\n"
    "comments): host[:port] is a tracegate-relay reached over mutual TLS\n"
    "(--ca verifies the relay, --cert/--key identify you; when connecting by\n"
    "IP address, --tls-server-name names the relay's certificate, or a hosts\n"
    "file line's name=: '10.0.0.5:7467 name=host5.example'). A host's name\n"
    "in the merged trace is its hosts file label= ('label=db-primary'),\n"
    "else its name= when no other host has it, else the host as given.\n"
    "--cert, --key and --ca default to $TRACEGATE_CERT, $TRACEGATE_KEY,\n"
    "$TRACEGATE_CA, then to ~/.config/tracegate/config ('cert = FILE',\n"
    "'key = FILE', 'ca = FILE');\n"
    "ssh://[user@]host[:port] runs 'ssh host tracegate-relay --stdio' ($"
    TG_SSH_ENV "\n"
    "replaces ssh). Every host starts at once and streams over its\n"
    "connection; one line per host shows progress on a terminal, and the\n"
    "summary gives each host's outcome, losses and how its relay sent (with\n"
    "zstd, or plain and why). The exit status is 1 when any host\n"
    "failed, else 4 when a host's data source did not start (or any\n"
    "problem, with --strict). -o DIR writes DIR/<host>.pftrace per host (DIR is created if\n"
    "missing, and said so; a name ending in .pftrace is refused);\n"
    "-o FILE --merge writes one trace where each host is\n"
    "a machine (machine_id 1, 2, ... in -H order, then --hosts order) with\n"
    "its clocks aligned to this machine's; one host and -o FILE writes its\n"
    "trace as is. If a link drops, the session goes on on the host and the\n"
    "host is reconnected and re-attached (--reconnect-timeout, default\n"
    DEFAULT_RECONNECT "; 0: never). A host that rebooted, or whose tracing\n"
    "service restarted or stopped, fails as soon as it answers again: its\n"
    "session is gone. Each host's resume key is printed when it starts: if " CLI_PROG "\n"
    "itself dies, -H HOST --attach KEY takes the session back (with -o\n"
    "FILE, and --merge for a merged trace).\n"
    "\n"
    "A session that has not ended by its duration + --grace (default\n"
    DEFAULT_GRACE ") is stopped, and fails if it does not end soon after.\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " record -o trace.pftrace -t 10s track_event linux.sys_stats\n"
    "  " CLI_PROG " record -c config.pbtxt --txt -o trace.pftrace\n"
    "  " CLI_PROG " record -c config.pbtxt --txt -o trace.pftrace --detach nightly\n"
    "  " CLI_PROG " record --attach nightly --stop -o trace.pftrace\n"
    "  " CLI_PROG " record -H web1 -H web2 --ca ca.pem --cert me.pem --key me.key \\\n"
    "      -o fleet.pftrace --merge -t 30s track_event\n"
    "  " CLI_PROG " record --hosts fleet.txt --ca ca.pem --cert me.pem --key me.key \\\n"
    "      -o traces/ -t 30s track_event\n"
    "  " CLI_PROG " record -H ssh://admin@db1 -o db1.pftrace -t 10s track_event\n";

/* Where --save-for-bugreport writes without -o: perfetto_cmd's
 * GetBugreportTracePath() off Android, base::GetSysTempDir() (TMPDIR, else
 * /tmp) + "/systrace.pftrace". */
static const char *bugreport_dir(void) {
  const char *dir = getenv("TMPDIR");
  return dir && dir[0] ? dir : "/tmp";
}

/* NULL when TMPDIR is too long for a path (a cut one would name another
 * file). */
static const char *bugreport_path(void) {
  static char path[4096];
  int n = snprintf(path, sizeof(path), "%s/systrace.pftrace", bugreport_dir());
  return n >= 0 && (size_t)n < sizeof(path) ? path : NULL;
}

static int usage_error(const char *prog, const char *msg) {
  fprintf(stderr, "%s: %s %s (see --help)\n", prog, TG_NOTE(USAGE), msg);
  return CLI_EXIT_USAGE;
}

/* --save-for-bugreport is perfetto_cmd's --clone kBugreportSessionId
 * --clone-for-bugreport -o its bugreport path. */
static int resolve_bugreport(record_opts_t *o, const char *prog) {
  if (!o->out) {
    if (!(o->out = bugreport_path()))
      return usage_error(prog, "TMPDIR is too long for a path: give -o FILE");
    if (record_bugreport_target_ok(o->out) < 0) return CLI_EXIT_FAIL;
  }
  o->clone_id = UINT64_MAX;
  return -1; /* go on */
}

/* -s and -d, for a clone and a recording alike. */
static int resolve_size(record_opts_t *o, const char *prog) {
  if (o->size && cli_flag_size(prog, "size", o->size, 4096, UINT64_MAX,
                               &o->max_file_bytes) < 0)
    return CLI_EXIT_USAGE;
  if (o->background_wait) o->background = true;
  return -1;
}

/* -t and -b: the session's duration and buffer. */
static int resolve_session(record_opts_t *o, const char *prog) {
  if (o->time) {
    /* TraceConfig.duration_ms is a uint32. */
    if (cli_flag_duration_ms(prog, "time", o->time, 0, UINT32_MAX,
                             &o->duration_ms) < 0)
      return CLI_EXIT_USAGE;
    o->has_duration = true;
  }
  if (o->buffer) {
    /* BufferConfig.size_kb is a uint32. */
    if (cli_flag_size(prog, "buffer", o->buffer, 4096,
                      (uint64_t)UINT32_MAX * 1024 + 1023, &o->buffer_bytes) < 0)
      return CLI_EXIT_USAGE;
    o->has_buffer = true;
  }
  return -1;
}

/* The values of the --merge flags (the rules saw that --merge is there). */
static int resolve_merge(record_opts_t *o, const char *prog) {
  if (o->merge_allow) {
    tg_ts_allow_t allow;
    char bad[64];
    if (tg_trace_schema_allow(&allow, o->merge_allow, bad, sizeof(bad)) < 0) {
      fprintf(stderr, "%s: --merge-allow-fields: '%s' is not a field of "
                      "Perfetto's TracePacket (or InternedData, as "
                      "interned_data.NAME)\n", prog, bad);
      return CLI_EXIT_USAGE;
    }
  }
  o->app_tracks_mode = TG_MERGE_APP_DEFAULT;
  if (o->app_tracks) {
    tg_merge_app_tracks_t mode;
    if (tg_merge_app_tracks_parse(o->app_tracks, &mode) < 0)
      return usage_error(prog, "--app-tracks: expected joined or machines");
    o->app_tracks_mode = (int)mode;
  }
  if (o->clock_from_requests) {
    if (strcmp(o->clock_from_requests, "on") &&
        strcmp(o->clock_from_requests, "off"))
      return usage_error(prog, "--clock-from-requests: expected on or off");
    o->clock_from_requests_off = !strcmp(o->clock_from_requests, "off");
  }
  return -1;
}

/* The links' timings and compression, each flag or its default. */
static int resolve_links(record_opts_t *o, const char *prog) {
  if (cli_flag_duration_ms(prog, "reconnect-timeout",
                           o->reconnect ? o->reconnect : DEFAULT_RECONNECT, 0,
                           UINT64_MAX, &o->reconnect_ms) < 0)
    return CLI_EXIT_USAGE;
  if (cli_parse_compress(o->compress ? o->compress : DEFAULT_COMPRESS,
                         &o->compress_level) < 0) {
    fprintf(stderr, "%s: --compress: '%s' is not none, zstd or zstd:LEVEL "
            "with LEVEL 1..%d\n", prog, o->compress, COMPRESS_LEVEL_MAX);
    return CLI_EXIT_USAGE;
  }
  if (cli_flag_duration_ms(prog, "grace", o->grace ? o->grace : DEFAULT_GRACE,
                           1, UINT64_MAX, &o->grace_ms) < 0 ||
      cli_flag_duration_ms(prog, "dead-link-timeout",
                           o->dead_link ? o->dead_link : DEFAULT_DEAD_LINK,
                           1000, 3600000, &o->dead_link_ms) < 0 ||
      cli_flag_duration_ms(prog, "clock-sync-period",
                           o->clock_sync ? o->clock_sync : DEFAULT_CLOCK_SYNC,
                           1000, UINT64_MAX, &o->clock_sync_ms) < 0)
    return CLI_EXIT_USAGE;
  return -1;
}

/* The values of the flags the mode uses, parsed and defaulted. Returns
 * an exit status, or -1 to go on. */
static int resolve(record_opts_t *o, const char *prog) {
  int rc;
  switch (record_mode(o)) {
    case RECORD_MODE_BUGREPORT:
      return resolve_bugreport(o, prog);
    case RECORD_MODE_BUGREPORT_ALL:
    case RECORD_MODE_IS_DETACHED:
      return -1;
    case RECORD_MODE_CLONE:
      return resolve_size(o, prog);
    case RECORD_MODE_RECORD:
    case RECORD_MODES:
      break;
  }
  if ((rc = resolve_size(o, prog)) >= 0 ||
      (rc = resolve_session(o, prog)) >= 0 ||
      (rc = resolve_merge(o, prog)) >= 0)
    return rc;
  return resolve_links(o, prog);
}

/* The flags into |o|: parsed, checked against record's flag rules
 * (record_flags.c), then resolved. Returns an exit status, or -1 to go
 * on. */
static int parse_args(record_opts_t *o, const char *prog, int argc,
                      char **argv) {
  memset(o, 0, sizeof(*o));
  o->socket = tg_ipc_default_socket(false);
  tg_flag_list_t hosts;
  tg_flag_t flags[RECORD_MAX_FLAGS];
  size_t n = record_flag_table(o, &hosts, flags, RECORD_MAX_FLAGS);
  tg_flags_given_t given;
  int rv = cli_parse_flags_given(prog, synopsis, about, flags, n, argc, argv,
                                 o->ds, RECORD_MAX_DATA_SOURCES, &o->n_ds,
                                 &given);
  if (rv == 1) return CLI_EXIT_OK;
  if (rv < 0) return CLI_EXIT_USAGE;
  char err[512];
  if (record_check_flags(o, flags, n, &given, err, sizeof(err), NULL,
                         NULL) < 0)
    return usage_error(prog, err);
  return resolve(o, prog);
}

#define QUICK_FLUSH_PERIOD_MS 30000

static Perfetto__Protos__TraceConfig *make_config(record_opts_t *o) {
  Perfetto__Protos__TraceConfig *cfg;
  if (o->config) {
    cfg = cli_config_load(o->config, o->txt);
    if (!cfg) return NULL;
    if (o->has_duration) {
      cfg->has_duration_ms = 1;
      cfg->duration_ms = (uint32_t)o->duration_ms;
    }
    if (o->max_file_bytes) {
      cfg->has_max_file_size_bytes = 1;
      cfg->max_file_size_bytes = o->max_file_bytes;
    }
    if (o->has_buffer && cli_config_set_buffer(cfg, o->buffer_bytes) < 0) {
      perfetto__protos__trace_config__free_unpacked(cfg, NULL);
      fprintf(stderr, CLI_PROG ": out of memory\n");
      return NULL;
    }
    return cfg;
  }
  uint64_t size = o->buffer_bytes;
  if (!o->has_buffer) tg_units_parse_size(DEFAULT_BUFFER, 1, &size, NULL);
  cfg = cli_config_quick(o->ds, o->n_ds, size,
                         o->has_duration ? o->duration_ms
                                         : DEFAULT_QUICK_DURATION_MS);
  if (!cfg) return NULL;
  /* As Perfetto's quick form: a flush every 30 s, and the service writes
   * the file when its size is bounded. */
  cfg->has_flush_period_ms = 1;
  cfg->flush_period_ms = QUICK_FLUSH_PERIOD_MS;
  if (o->max_file_bytes) {
    cfg->has_max_file_size_bytes = 1;
    cfg->max_file_size_bytes = o->max_file_bytes;
    cfg->has_write_into_file = 1;
    cfg->write_into_file = 1;
  }
  return cfg;
}

/* How long --background-wait waits for the child's session to start, as
 * Perfetto's. */
#define BACKGROUND_WAIT_MS 30000

/* --background-wait, in the parent: the child's word on |fd|. */
static int wait_for_child(int fd, pid_t pid) {
  struct pollfd pf = {fd, POLLIN, 0};
  int n;
  while ((n = poll(&pf, 1, BACKGROUND_WAIT_MS)) < 0 && errno == EINTR) {
  }
  char b = 0;
  ssize_t r = n > 0 ? read(fd, &b, 1) : 0;
  close(fd);
  if (r == 1 && b == 'S') {
    printf("%d\n", (int)pid);
    fflush(stdout);
    return 1;
  }
  fprintf(stderr, CLI_PROG ": --background-wait: the recording (pid %d) %s\n",
          (int)pid, n == 0 ? "did not start within 30s; it goes on"
                           : "ended before its data sources started");
  return 2;
}

/* -d, as Perfetto's Daemonize(): the parent prints the pid of the child
 * that goes on recording and exits 0 (with --background-wait, once the
 * child's data sources all started); the child leaves the terminal (its
 * own session, stdio on /dev/null). Called before the loop exists. Returns
 * 0 in the child; in the parent 1, or 2 when --background-wait saw no
 * start; -1 after printing why there is no child. */
static int go_background(record_t *r) {
  int p[2] = {-1, -1};
  if (r->o.background_wait && pipe2(p, O_CLOEXEC) < 0) {
    fprintf(stderr, CLI_PROG ": --background-wait: pipe: %s\n", strerror(errno));
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, CLI_PROG ": --background: fork: %s\n", strerror(errno));
    if (p[0] >= 0) close(p[0]), close(p[1]);
    return -1;
  }
  if (pid > 0) {
    if (p[0] >= 0) {
      close(p[1]);
      return wait_for_child(p[0], pid);
    }
    printf("%d\n", (int)pid);
    fflush(stdout);
    return 1;
  }
  if (p[0] >= 0) close(p[0]);
  r->bg_fd = p[1];
  setsid();
  int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    dup2(fd, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    if (fd > STDERR_FILENO) close(fd);
  }
  return 0;
}

/* The output mode is known once connected. The config goes as written,
 * so that the trace's trace_config says what was asked and imports as
 * Perfetto's would: the service writes into our file when the config asks
 * for write_into_file and the file can be handed over; otherwise the
 * trace comes over the connection (consumer/recording.h says when it is
 * read). */
static void choose_mode(record_t *r) {
  Perfetto__Protos__TraceConfig *cfg = r->cfg;
  bool asked = cfg->has_write_into_file && cfg->write_into_file;
  /* Only a file of ours can be handed over: the service's writes into a
   * device or FIFO could not be checked, nor counted; and only over a
   * transport that carries fds, to a local service. */
  r->file_mode = asked && r->has_out && !r->out.direct && !r->o.read_buffers &&
                 tg_consumer_can_pass_fds(r->conn.c);
  /* A write_into_file we cannot serve would have no file: the trace
   * comes over the connection, and the config says so. */
  if (asked && !r->file_mode) cfg->write_into_file = 0;
}

static void on_conn_close(cli_conn_t *cc, int status, const char *msg);

/* A path that is not a directory and ends like a trace file: with several
 * hosts and no --merge, -o would silently become a directory by that name. */
static bool looks_like_a_trace_file(const char *path) {
  static const char *const exts[] = {".pftrace", ".perfetto-trace", ".trace",
                                     ".pb"};
  struct stat st;
  if (!path || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) return false;
  size_t len = strlen(path);
  for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
    size_t el = strlen(exts[i]);
    if (len > el && !strcasecmp(path + len - el, exts[i])) return true;
  }
  return false;
}

/* -H / --hosts: the targets, the TLS files, then fleet.c. */
static int record_remote(record_opts_t *o) {
  tg_target_t *targets = NULL;
  size_t n = 0;
  tg_tls_config_t *tls = NULL;
  Perfetto__Protos__TraceConfig *cfg = NULL;
  int rc = CLI_EXIT_USAGE;
  if (o->remote.n_hosts) {
    targets = calloc(o->remote.n_hosts, sizeof(*targets));
    if (!targets) goto out;
  }
  for (size_t i = 0; i < o->remote.n_hosts; i++) {
    char err[400];
    if (tg_target_parse(o->remote.hosts[i], &targets[n], err, sizeof(err)) < 0) {
      fprintf(stderr, CLI_PROG " record: -H %s\n", err);
      goto out;
    }
    n++;
  }
  char why[TG_CLIENT_TLS_ERR_MAX];
  if (o->remote.hosts_file &&
      tg_targets_load(o->remote.hosts_file, &targets, &n, FLEET_MAX_HOSTS, why,
                      sizeof(why)) < 0) {
    fprintf(stderr, CLI_PROG ": %s\n", why);
    goto out;
  }
  if (n == 0) {
    fprintf(stderr, CLI_PROG " record: %s lists no hosts\n", o->remote.hosts_file);
    goto out;
  }
  if (n > FLEET_MAX_HOSTS) {
    fprintf(stderr, CLI_PROG " record: at most %d hosts\n", FLEET_MAX_HOSTS);
    goto out;
  }
  if (tg_targets_name(targets, n, why, sizeof(why)) < 0) {
    fprintf(stderr, CLI_PROG ": %s\n", why);
    goto out;
  }
  if (n > 1 && !o->merge && !o->attach && looks_like_a_trace_file(o->out)) {
    fprintf(stderr, CLI_PROG " record: -o %s names a trace file, but %zu hosts "
            "without --merge write one trace each into a directory: give "
            "--merge for one file, or a directory (-o DIR/)\n", o->out, n);
    goto out;
  }
  rc = CLI_EXIT_FAIL;
  bool need_tls = false;
  for (size_t i = 0; i < n; i++) need_tls |= targets[i].kind == TG_TARGET_TLS;
  /* The flags, else the environment or the config file. */
  if (need_tls &&
      (tg_client_tls_defaults(&o->remote.tls, why, sizeof(why)) < 0 ||
       tg_client_tls_load(o->remote.tls.cert, o->remote.tls.key,
                          o->remote.tls.ca, &tls, why, sizeof(why)) < 0)) {
    fprintf(stderr, CLI_PROG ": %s\n", why);
    goto out;
  }
  if (!o->attach) {
    cfg = make_config(o);
    if (!cfg) goto out;
  }
  if (record_snapshot_mode(cfg)) {
    fprintf(stderr, CLI_PROG " record: %s trigger_mode CLONE_SNAPSHOT works "
            "with the local service (each snapshot is cloned over its socket), "
            "not with -H\n", TG_NOTE(CLONE_SNAPSHOT_UNSUPPORTED));
    rc = CLI_EXIT_USAGE;
    goto out;
  }
  rc = fleet_record(o, cfg, targets, n, tls);
out:
  if (cfg) perfetto__protos__trace_config__free_unpacked(cfg, NULL);
  tg_tls_config_free(tls);
  free(targets);
  return rc;
}

int cli_record_main(int argc, char **argv) {
  const char *prog = CLI_PROG " record";
  record_t *r = calloc(1, sizeof(*r));
  if (!r) return CLI_EXIT_FAIL;
  int rc = parse_args(&r->o, prog, argc, argv);
  if (rc >= 0) {
    free(r);
    return rc;
  }
  if (r->o.is_detached) {
    rc = record_is_detached(r->o.socket, r->o.is_detached);
    free(r);
    return rc;
  }
  r->exit_code = CLI_EXIT_FAIL;
  r->bg_fd = -1;
  r->tty = isatty(STDERR_FILENO);
  if (r->o.remote.n_hosts || r->o.remote.hosts_file) {
    rc = record_remote(&r->o);
    free(r);
    return rc;
  }
  bool cloning = r->o.clone_id || r->o.clone_name || r->o.bugreport_all;
  if (!r->o.attach && !cloning) {
    r->cfg = make_config(&r->o);
    if (!r->cfg) {
      r->early_failure = "config";
      goto out;
    }
  }
  /* Checked before any session exists. */
  if (r->o.out) {
    if (cli_output_open(&r->out, r->o.out) < 0) {
      r->early_failure = "write";
      goto out;
    }
    r->has_out = true;
  }
  /* CLONE_SNAPSHOT: tracegate clones at each trigger, into OUT.N. */
  if (record_snapshot_mode(r->cfg) && (r->o.detach || r->out.direct)) {
    fprintf(stderr, CLI_PROG " record: %s trigger_mode CLONE_SNAPSHOT: %s\n",
            TG_NOTE(CLONE_SNAPSHOT_UNSUPPORTED), r->o.detach ? "the snapshots are taken by this command at each "
                          "trigger: it cannot --detach"
                        : "each snapshot goes to OUT.N next to OUT: -o must "
                          "name a file");
    r->exit_code = CLI_EXIT_USAGE;
    goto out;
  }
  if (r->o.background) {
    int bg = go_background(r);
    if (bg != 0) {
      /* The parent: the child owns the partial file from here, whether
       * its session started or not. */
      if (bg > 0) {
        r->bg_parent = true;
        cli_output_forget(&r->out);
        r->has_out = false;
        r->exit_code = bg == 1 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
      }
      goto out;
    }
    r->tty = false;
  }
  uv_loop_t loop;
  if (uv_loop_init(&loop) < 0) {
    r->early_failure = "internal";
    goto out;
  }
  r->loop = &loop;
  /* A lost connection fails the clone's current step itself. */
  r->conn.on_close = cloning ? NULL : on_conn_close;
  r->conn.data = r;
  if (cli_connect(&r->conn, &loop, r->o.socket) == 0 && r->o.bugreport_all) {
    r->exit_code = record_save_all_for_bugreport(r, bugreport_dir());
  } else if (r->conn.established && cloning) {
    r->exit_code = record_clone(r);
  } else if (r->conn.established) {
    if (!r->o.attach) choose_mode(r);
    record_check_config(r);
    /* The check runs the loop: the connection may have gone meanwhile. */
    if (r->conn.c && !r->conn.closed) {
      record_begin(r);
      uv_run(&loop, UV_RUN_DEFAULT);
    } else {
      fprintf(stderr, CLI_PROG ": lost the connection to the tracing "
              "service: %s\n", r->conn.close_msg);
    }
  }
  cli_disconnect(&r->conn);
  if (!cli_loop_close(&loop)) {
    fprintf(stderr, CLI_PROG ": internal error: handles left open\n");
    r->exit_code = CLI_EXIT_FAIL;
  }
out:
  /* A parent gone to the background leaves the summary to its child; a
   * usage error writes none. */
  if (r->o.summary_json && !r->bg_parent && r->exit_code != CLI_EXIT_USAGE)
    record_write_summary(r);
  if (r->has_out) {
    /* Success committed the file already; what is left is a failure. */
    if (r->keep_partial && !r->watch_only) cli_output_keep_partial(&r->out);
    else cli_output_discard(&r->out);
  }
  if (r->cfg) perfetto__protos__trace_config__free_unpacked(r->cfg, NULL);
  rc = r->exit_code;
  free(r);
  return rc;
}

static void on_conn_close(cli_conn_t *cc, int status, const char *msg) {
  (void)status;
  record_t *r = cc->data;
  if (r->rec) record_on_conn_lost(r, msg); /* else: before record_begin */
}
