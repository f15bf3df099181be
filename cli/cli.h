/* The `tracegate` CLI's shared helpers: argument units, the connection to
 * the service, the trace config, the output file, progress and summaries.
 * Each subcommand lives in its own file and only meets the others here. */
#ifndef TRACEGATE_CLI_CLI_H
#define TRACEGATE_CLI_CLI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "pb/common/trace_stats.pb-c.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/config/trace_config.pb-c.h"
#include "common/write_behind.h"
#include "consumer/fleet/ds_problem.h"
#include "consumer/fleet/ftrace_loss.h"
#include "client/tls_defaults.h"
#include "consumer/consumer.h"
#include "common/buf.h"
#include "common/flags.h"
#include "common/notice.h"
#include "common/printable.h"

/* The exit statuses of every program (common/flags.h), and the CLI's own. */
#define CLI_EXIT_OK TG_EXIT_OK
#define CLI_EXIT_FAIL TG_EXIT_FAIL
#define CLI_EXIT_USAGE TG_EXIT_USAGE
/* snapshot: the collector stored it, but some hosts failed. */
#define CLI_EXIT_PARTIAL 3
/* record: the trace was written, but a data source on a host did not run
 * as asked (consumer/fleet/ds_problem.h): it did not start, runs without some of
 * its events, or no producer offered it. */
#define CLI_EXIT_DATA_SOURCE 4
#define CLI_EXIT_ABORTED 130 /* a second Ctrl-C */

/* Every message the CLI prints starts with this; so does --version. */
#define CLI_PROG "tracegate"

/* A limit's decimal literal as a string, for a help text that states it
 * (CLI_STR(REASON_MAX) is "1024"): the text and the check read one
 * constant. */
#define CLI_STR(x) CLI_STR_(x)
#define CLI_STR_(x) #x

/* --- subcommands (one file each) --------------------------------------- */

int cli_record_main(int argc, char **argv);
int cli_query_main(int argc, char **argv);
int cli_stats_main(int argc, char **argv);
int cli_symbolize_main(int argc, char **argv);
int cli_trigger_main(int argc, char **argv);
int cli_snapshot_main(int argc, char **argv);
/* functions.c: a function's shares across the collector's snapshots. */
int cli_functions_main(int argc, char **argv);
int cli_bridge_main(int argc, char **argv);
int cli_profile_main(int argc, char **argv);
/* profile.c: |p|'s hosts named by |host| (NULL: the only one with
 * samples; "all") as pprof to |out| (NULL or "-": stdout), or as a
 * summary (|json|). Returns an exit status, after saying why. */
struct tg_prof;
int cli_profile_output(const char *prog, const struct tg_prof *p,
                       const char *host, const char *out, bool pprof,
                       bool json);

/* --- args.c --------------------------------------------------------------- */

/* Parses argv[1..] with |flags| (tg_prog_flags: Perfetto's short forms
 * come from the table's "-x: " help texts). Prints usage (|synopsis|, the
 * table, |about|) on --help and the program's version on --version.
 * Returns 0 to go on, 1 after --help or --version, -1 after an error was
 * printed. */
int cli_parse_flags(const char *prog, const char *synopsis, const char *about,
                    const tg_flag_t *flags, size_t n, int argc, char **argv,
                    char **pos, size_t max_pos, size_t *n_pos);
/* cli_parse_flags(), also filling |given| (owned by the caller) with the
 * flags the line gave, for the command's flag rules (common/flag_rules.h). */
int cli_parse_flags_given(const char *prog, const char *synopsis,
                          const char *about, const tg_flag_t *flags, size_t n,
                          int argc, char **argv, char **pos, size_t max_pos,
                          size_t *n_pos, tg_flags_given_t *given);

/* The value |v| of --|flag| as a duration in the grammar of
 * common/units.h ("10s", "1.5s", "1m30s"; a number alone is seconds, as
 * Perfetto's -t), in [min_ms, max_ms]. Returns 0 and *ms, or a negative
 * code after printing "prog: --flag: why" (*ms untouched). */
int cli_flag_duration_ms(const char *prog, const char *flag, const char *v,
                         uint64_t min_ms, uint64_t max_ms, uint64_t *ms);
/* The same for a size in bytes ("64mb", "64M", "512KiB", "4096"; binary
 * multiples, as Perfetto's -b). */
int cli_flag_size(const char *prog, const char *flag, const char *v,
                  uint64_t min, uint64_t max, uint64_t *bytes);
void cli_format_bytes(char *out, size_t n, uint64_t bytes);
void cli_format_ms(char *out, size_t n, uint64_t ms);
uint64_t cli_now_ms(void);

/* --- conn.c --------------------------------------------------------------- */

struct tg_remote;
struct tg_tls_config;

/* Where the one-shot commands and record find the service: the local
 * socket, or remote hosts (-H, --hosts) with the TLS files. */
#define CLI_MAX_HOST_ARGS 1024
typedef struct cli_remote_opts {
  const char *hosts[CLI_MAX_HOST_ARGS]; /* -H values, in order */
  size_t n_hosts;
  const char *hosts_file;
  const char *server_name; /* --tls-server-name */
  /* --cert, --key, --ca, --session-cache ("off" by default, "on" or a
   * file); the ones no flag gave come from tg_client_tls_defaults(). */
  tg_client_tls_files_t tls;
} cli_remote_opts_t;

#define CLI_HOST_HELP                                                       \
  "-H: a remote host: host[:port] (TLS to its tracegate-relay, port 7467) " \
  "or ssh://[user@]host[:port] (ssh host tracegate-relay --stdio)"
/* The TLS flags, as entries of a flag table. */
#define CLI_TLS_FLAGS(ro)                                                     \
  {"cert", TG_FLAG_STRING, &(ro)->tls.cert, "FILE",                           \
   "client certificate (PEM) presented to the relays (default: "             \
   "$TRACEGATE_CERT, or cert in ~/.config/tracegate/config)", 0, 0},          \
  {"key", TG_FLAG_STRING, &(ro)->tls.key, "FILE",                             \
   "its private key (PEM) (default: $TRACEGATE_KEY, or key in the config "   \
   "file)", 0, 0},                                                            \
  {"ca", TG_FLAG_STRING, &(ro)->tls.ca, "FILE",                               \
   "CA (PEM) that must have signed the relays' certificates (default: "      \
   "$TRACEGATE_CA, or ca in the config file)", 0, 0},                         \
  {"tls-server-name", TG_FLAG_STRING, &(ro)->server_name, "NAME",             \
   "the name the relays' certificates must carry (default: the host part of " \
   "-H; needed when connecting by IP address)", 0, 0}
/* record's TLS session cache flag (the one-shot commands make a single
 * connection: nothing to resume). */
#define CLI_SESSION_CACHE_FLAG(ro)                                            \
  {"session-cache", TG_FLAG_STRING, &(ro)->tls.session_cache, "on|off|FILE",  \
   "keep TLS sessions across runs so that the next run against the same "    \
   "relays resumes them (no public-key work) while their tickets live (1 h "  \
   "by default): on (~/.cache/tracegate/sessions, or under "                \
   "$XDG_CACHE_HOME), off, or a file. The file holds the sessions' master "  \
   "secrets: whoever reads it can decrypt recorded traffic of sessions "     \
   "resumed from it (no forward secrecy for those), so it is as sensitive "  \
   "as the key (kept 0600). Default: off, or $TRACEGATE_SESSION_CACHE, or "  \
   "session_cache in the config file. Reconnections within a run always "    \
   "resume from memory", 0, 0}

/* A connection for the one-shot commands, with a synchronous feel: each
 * step runs the loop until its callback fired. */
typedef struct cli_conn {
  uv_loop_t *loop;
  tg_consumer_t *c; /* NULL once closed */
  bool ready;
  bool closed;
  bool established; /* cli_connect() returned 0: on_close is called */
  int bind_status;  /* of ConsumerPort's bind, once it answered */
  char close_msg[512];
  /* A remote connection's transport, until released after the close. */
  struct tg_remote *rt;
  bool rt_pending;
  char detail[600];
  /* Optional: told when a connection that cli_connect() established
   * closes (record uses it); a failed connect is only cli_connect()'s. */
  void (*on_close)(struct cli_conn *cc, int status, const char *msg);
  void *data;
} cli_conn_t;

/* Connects to |addr| and waits until ConsumerPort is bound. Prints
 * "cannot connect to the tracing service at ADDR: ... (is tracegated
 * running?)" and returns -1 on failure. */
int cli_connect(cli_conn_t *cc, uv_loop_t *loop, const char *addr);
/* Connects to the one remote host of |ro| (-H), or to the local socket
 * |addr| when there is none; prints why and returns -1 on failure. The
 * TLS configuration it loads is returned in *tls (free it with
 * tg_tls_config_free after the loop is closed). */
int cli_connect_any(cli_conn_t *cc, uv_loop_t *loop, const char *addr,
                    const cli_remote_opts_t *ro, struct tg_tls_config **tls);
/* Runs the loop until *|flag| is true or the connection closed. Returns 0
 * if the flag was set. (step.c, beside the machines that wait with it.) */
int cli_wait(cli_conn_t *cc, const bool *flag);
/* Closes the connection (if open) and runs the loop until it is gone. */
void cli_disconnect(cli_conn_t *cc);
/* Closes every remaining handle and the loop; false if something leaked. */
bool cli_loop_close(uv_loop_t *loop);

/* The -H flag as an entry of a flag table: its values are collected
 * into |ro|'s hosts. */
#define CLI_HOST_FLAG(ro, help)                                               \
  {"host", TG_FLAG_LIST,                                                      \
   &(tg_flag_list_t){(ro)->hosts, CLI_MAX_HOST_ARGS, &(ro)->n_hosts}, "HOST", \
   help, 0, 0}
/* The one-shot commands (query, stats) talk to one service: the local
 * socket or a single -H. These are their flags for finding it, as entries
 * of a flag table (in a function: the -H entry points to a compound
 * literal of the enclosing block). */
#define CLI_ONE_SHOT_FLAGS(socket, ro)                                  \
  {"socket", TG_FLAG_STRING, (socket), "PATH",                          \
   "the service's consumer socket ('@name': abstract)", 0, 0},          \
  CLI_HOST_FLAG(ro, CLI_HOST_HELP),                                     \
  CLI_TLS_FLAGS(ro)
/* cli_parse_flags without positional arguments. */
int cli_parse_one_shot_flags(const char *prog, const char *synopsis,
                             const char *about, const tg_flag_t *flags,
                             size_t n, int argc, char **argv);
/* Runs |fn| on a connection to the service (|addr|, or the -H of |ro|)
 * in a loop of its own, then closes it all. Returns what |fn| returned,
 * or CLI_EXIT_FAIL when the connection failed or a handle leaked. */
int cli_run_one_shot(const char *addr, const cli_remote_opts_t *ro,
                     int (*fn)(cli_conn_t *cc, void *arg), void *arg);

/* --- query.c ------------------------------------------------------------- */

/* QueryServiceState, merged; prints why and returns NULL on failure. Free
 * with perfetto__protos__tracing_service_state__free_unpacked. */
Perfetto__Protos__TracingServiceState *cli_query_state(cli_conn_t *cc);
/* The sessions table (only session |id| when |filter|). */
void cli_print_sessions(FILE *out, const Perfetto__Protos__TracingServiceState *st,
                        bool filter, uint64_t id);

/* --- config.c ----------------------------------------------------------- */

/* Reads |path| ("-" = stdin) as text (|txt|) or binary TraceConfig and
 * returns it decoded (free with perfetto__protos__trace_config__free_unpacked).
 * Errors are printed as "PATH: line L, column C: msg". A file of no bytes
 * is refused (NULL), as Perfetto's CLI refuses it. */
Perfetto__Protos__TraceConfig *cli_config_load(const char *path, bool txt);
/* The quick form: one ring buffer of |buffer_bytes|, one data source per
 * name, |duration_ms| (0: until stopped). linux.sys_stats samples CPU times
 * and memory and linux.process_stats polls every process, each once a
 * second. Same ownership as above. */
Perfetto__Protos__TraceConfig *cli_config_quick(char **names, size_t n,
                                                uint64_t buffer_bytes,
                                                uint64_t duration_ms);
/* Sets buffers[0].size_kb (adding a buffer if there is none). */
int cli_config_set_buffer(Perfetto__Protos__TraceConfig *cfg, uint64_t bytes);
/* Serialises |cfg| (unknown fields included) into |out|. */
int cli_config_pack(const Perfetto__Protos__TraceConfig *cfg, tg_buf_t *out);

/* --- output.c ------------------------------------------------------------- */

/* The trace file. A regular file (or a new one, or the file a symlink
 * points to) is written to a visible partial file next to it and renamed
 * over it only when complete; anything else (a device, a FIFO, "-" for
 * stdout) is written in place (|direct|). Either the CLI appends packets
 * (Trace.packet fields), or the service writes into the fd
 * (write_into_file: only when not |direct|) and the CLI only scans what
 * arrived. */
typedef struct cli_output {
  char *path;  /* for messages: as given, "standard output" for "-" */
  char *final; /* the rename's target: |path| with its symlinks followed */
  char *tmp;   /* the partial file; NULL when |direct| or renamed */
  bool direct; /* written in place: no partial file, no rename */
  int fd;
  uint8_t *buf; /* pending writes */
  size_t len;
  uint64_t bytes;   /* written or, for service-written files, seen */
  uint64_t packets; /* idem */
  uint64_t scan_off;
  bool by_service; /* write_into_file: the service writes, we scan */
  int err;         /* first error (negative errno or TG_E*) */
  tg_write_behind_t wb; /* what we write, out of the page cache early */
  /* The partial file written with O_DIRECT (common/direct_write.h), from
   * the first flush on; NULL: written as above. */
  struct tg_direct_writer *dw;
  bool dw_tried;
} cli_output_t;

/* Opens |path| ("-": stdout): creates the partial file, or opens a
 * device or FIFO in place (a FIFO blocks until a reader opens it). Prints
 * "cannot write PATH: why" and returns -1 when |path| cannot be written. */
int cli_output_open(cli_output_t *o, const char *path);
/* Appends one TracePacket as a Trace.packet field. Returns 0 or the error
 * (also kept in o->err). */
int cli_output_packet(cli_output_t *o, const uint8_t *p, size_t n);
/* The same with |extra| (|extra_n| bytes of more fields) appended inside
 * the packet: its length covers both. */
int cli_output_packet_ex(cli_output_t *o, const uint8_t *p, size_t n,
                         const uint8_t *extra, size_t extra_n);
/* Counts the whole packets the service wrote so far. Returns 0, or
 * TG_EPROTO_DECODE if the file holds something else than packets. */
int cli_output_scan(cli_output_t *o);
/* Finishes: writes what is pending, syncs, closes, checks the file holds
 * at least one whole packet and nothing else, and renames it to the final
 * path. Any failed write, fsync or close fails it: prints why and returns
 * -1 (the partial file is then removed). Closes |o| either way. */
int cli_output_commit(cli_output_t *o);
/* After a failure: renames the file anyway if it holds packets and every
 * write succeeded (saying so), else removes it. Closes |o|. */
void cli_output_keep_partial(cli_output_t *o);
/* An aborted run: the partial file, if it holds anything, stays under its
 * visible name, which is printed; else it is removed. Closes |o|. */
void cli_output_abandon(cli_output_t *o);
/* Renames now (the service goes on writing into the same file). */
int cli_output_rename_now(cli_output_t *o);
/* Closes |o| and removes the partial file. Idempotent. */
void cli_output_discard(cli_output_t *o);
/* Closes |o| and leaves its file alone: another process (a --background
 * child) writes it on. */
void cli_output_forget(cli_output_t *o);

/* --- progress.c ----------------------------------------------------------- */

/* The loss counters of a TraceStats: every non-zero one, by name, the
 * first 64 listed; |total| sums them all, listed or not. A fleet host adds
 * what its relay lost in transit to the list, summed in |transit|, not in
 * |total| (the service never counted it). */
typedef struct cli_loss {
  size_t n;
  struct {
    char name[64];
    uint64_t value;
  } items[64];
  size_t omitted; /* non-zero counters past the list's room */
  uint64_t total;
  uint64_t transit;
} cli_loss_t;

void cli_loss_collect(const Perfetto__Protos__TraceStats *st, cli_loss_t *out);
/* The live line on a terminal (\r, erase, text; no newline). */
void cli_progress_print(FILE *tty, uint64_t elapsed_ms, uint64_t duration_ms,
                        uint64_t bytes, uint64_t packets, uint64_t loss);
void cli_progress_clear(FILE *tty);
/* "tracegate: [TG-nnnn] MSG" as a line of stderr (without the code for
 * TG_N_NONE); the caller erased its live display (progress line, host
 * table) first. */
void cli_vsay(tg_notice_t code, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Prints every non-zero loss counter, or "no data loss". */
void cli_loss_print(FILE *out, const cli_loss_t *loss);
/* The line saying how many counters the list had no room for, if any. */
void cli_loss_print_omitted(FILE *out, const char *indent,
                            const cli_loss_t *loss);
/* A TraceStats as a table: a column per buffer, then the global counters. */
void cli_stats_print(FILE *out, const Perfetto__Protos__TraceStats *st);

/* Adds "ftrace_cpu_overrun" (per sequence, the overrun between
 * linux.ftrace's last end stats and the start before them,
 * consumer/fleet/ftrace_loss.h) to |out| when it is not 0. */
void cli_ftrace_loss_add(const tg_ftrace_loss_t *l, cli_loss_t *out);
/* One line per problem of |ps| (consumer/fleet/ds_problem.h) to |out|, each
 * "|indent|[TG-7010] |host|: linux.ftrace: did not start: ..." (|host|
 * NULL: none; |indent| NULL: "tracegate: "), and one saying how many
 * more were left out. */
void cli_ds_problems_print(FILE *out, const char *indent, const char *host,
                           const tg_ds_problems_t *ps);
/* The ftrace events |cfg| asks for (every linux.ftrace data source's
 * ftrace_events); |cfg| NULL: 0, unknown. */
uint64_t cli_ftrace_events_asked(const Perfetto__Protos__TraceConfig *cfg);
/* Whether the problems |ps| make `tracegate record` exit 4
 * (docs/commands.md, "Data sources that did not run"): a data source
 * that did not start, or linux.ftrace without every one of the |asked|
 * events its config named (0: unknown, never so); with |strict|, any
 * problem, a data source no producer offered included. A data source
 * that runs without some of its events is a warning (exit 0), as
 * Perfetto's CLI has it. */
bool cli_ds_problems_fail(const tg_ds_problems_t *ps, uint64_t asked,
                          bool strict);

#endif /* TRACEGATE_CLI_CLI_H */
