/* SPDX-License-Identifier: Apache-2.0 */
/* `tracegate record`'s flags and the rules between them (record_flags.h).
 * The rules are those record's parse_args checked as ifs, in the order it
 * checked them, each with its message as it was. */
#include "cli/record_flags.h"

#include <errno.h>
#include <string.h>

#include "abi/protocol_limits.h"

size_t record_flag_table(record_opts_t *o, tg_flag_list_t *hosts,
                         tg_flag_t *out, size_t cap) {
  *hosts = (tg_flag_list_t){o->remote.hosts, CLI_MAX_HOST_ARGS,
                            &o->remote.n_hosts};
  const tg_flag_t flags[] = {
      {"config", TG_FLAG_STRING, &o->config, "FILE",
       "-c: the TraceConfig file ('-' reads stdin)", 0, 0},
      {"txt", TG_FLAG_BOOL, &o->txt, NULL,
       "the config is in protobuf text format", 0, 0},
      {"out", TG_FLAG_STRING, &o->out, "FILE", "-o: the trace file to write", 0, 0},
      {"time", TG_FLAG_STRING, &o->time, "DURATION",
       "-t: how long to trace (10s, 500ms, 2m, 1m30s; a number alone: "
       "seconds; 0 = until Ctrl-C)", 0, 0},
      {"buffer", TG_FLAG_STRING, &o->buffer, "SIZE",
       "-b: the buffer size (64mb, 512K; a number alone: bytes; default "
       DEFAULT_BUFFER ")", 0, 0},
      {"detach", TG_FLAG_STRING, &o->detach, "KEY",
       "start the session, leave it running under KEY and exit", 0, 0},
      {"attach", TG_FLAG_STRING, &o->attach, "KEY",
       "take over the detached session KEY and record it", 0, 0},
      {"stop", TG_FLAG_BOOL, &o->stop, NULL,
       "with --attach: stop the session at once and write OUT", 0, 0},
      {"read-buffers", TG_FLAG_BOOL, &o->read_buffers, NULL,
       "stream the trace over the connection even from a local service", 0, 0},
      {"socket", TG_FLAG_STRING, &o->socket, "PATH",
       "the service's consumer socket ('@name': abstract)", 0, 0},
      {"host", TG_FLAG_LIST, hosts, "HOST", CLI_HOST_HELP "; repeat for many",
       0, 0},
      {"hosts", TG_FLAG_STRING, &o->remote.hosts_file, "FILE",
       "more hosts, one per line: HOST [name=SERVER_NAME] [label=LABEL] "
       "('#' starts a comment)", 0, 0},
      CLI_TLS_FLAGS(&o->remote),
      CLI_SESSION_CACHE_FLAG(&o->remote),
      {"merge", TG_FLAG_BOOL, &o->merge, NULL,
       "with remote hosts: write one trace, each host a machine", 0, 0},
      {"strict", TG_FLAG_BOOL, &o->strict, NULL,
       "exit 4 for any data-source problem: one that runs without some "
       "of its events, or that no producer offered, too", 0, 0},
      {"summary-json", TG_FLAG_STRING, &o->summary_json, "FILE",
       "at the end, write what the recording came to as JSON (per host: "
       "outcome, reason, bytes, packets, every loss counter, reconnections, "
       "link-down time, clock offset) into FILE, or - for standard output; "
       "the schema is in docs/commands.md", 0, 0},
      {"app-tracks", TG_FLAG_STRING, &o->app_tracks, "joined|machines",
       "with --merge: where the hosts' app track events go: joined (the "
       "default: on the collector's machine, as HOST/process, so that "
       "trace processor joins flows across hosts) or machines (each on its "
       "host's machine: flows join within a host only; docs/merge.md)",
       0, 0},
      {"clock-from-requests", TG_FLAG_STRING, &o->clock_from_requests,
       "on|off",
       "with --merge: once the trace is written, place each host by the "
       "requests between hosts (a client slice's flow to its server's) "
       "instead of ClockSync alone, a second pass over the file (on, the "
       "default; docs/merge.md, \"Clocks from requests\")", 0, 0},
      {"merge-allow-fields", TG_FLAG_STRING, &o->merge_allow, "NAME[,NAME]",
       "with --merge: also keep these TracePacket fields (interned_data.NAME "
       "for InternedData's), which the merge leaves out as no Linux producer "
       "writes them; this trusts every host's producers with the whole "
       "trace (docs/merge.md)", 0, 0},
      {"reconnect-timeout", TG_FLAG_STRING, &o->reconnect, "DURATION",
       "how long to try to get a host back after its link dropped (default "
       DEFAULT_RECONNECT "; 0: do not)", 0, 0},
      {"grace", TG_FLAG_STRING, &o->grace, "DURATION",
       "how long past its duration a session may take to end before it is "
       "stopped (default " DEFAULT_GRACE ")", 0, 0},
      {"compress", TG_FLAG_STRING, &o->compress, "MODE",
       "with remote hosts: none, zstd or zstd:LEVEL (1-"
       CLI_STR(COMPRESS_LEVEL_MAX) ") for what the "
       "relay sends (default " DEFAULT_COMPRESS "; a relay without it sends "
       "plain)", 0, 0},
      {"dead-link-timeout", TG_FLAG_STRING, &o->dead_link, "DURATION",
       "with remote hosts: a link that answers nothing for this long is "
       "dead and reconnected (default " DEFAULT_DEAD_LINK ")", 0, 0},
      {"clock-sync-period", TG_FLAG_STRING, &o->clock_sync, "DURATION",
       "with remote hosts: re-read their clocks this often, and after every "
       "reconnection (default " DEFAULT_CLOCK_SYNC ")", 0, 0},
      {"clone", TG_FLAG_UINT, &o->clone_id, "ID",
       "write a snapshot of the running session ID (see " CLI_PROG
       " query) into OUT; the session runs on", 1, 0},
      {"clone-by-name", TG_FLAG_STRING, &o->clone_name, "NAME",
       "the same for the session with unique_session_name NAME", 0, 0},
      /* Perfetto's remaining perfetto_cmd flags, kept together. */
      {"background", TG_FLAG_BOOL, &o->background, NULL,
       "-d: go on in the background: print the pid of the process that "
       "records and exit (kill -TERM PID stops it cleanly)", 0, 0},
      {"background-wait", TG_FLAG_BOOL, &o->background_wait, NULL,
       "as --background, but exit only once every data source started: 0 "
       "then, 1 if the recording ended first or did not start within "
       "30s", 0, 0},
      {"size", TG_FLAG_STRING, &o->size, "SIZE",
       "-s: stop the session once the trace file holds SIZE bytes "
       "(max_file_size_bytes; 64mb, 1G; a number alone: bytes)", 0, 0},
      {"is_detached", TG_FLAG_STRING, &o->is_detached, "KEY",
       "is a detached session KEY there? exit 0: yes, 2: no, 1: error "
       "(it stays detached)", 0, 0},
      {"save-for-bugreport", TG_FLAG_BOOL, &o->bugreport, NULL,
       "write a snapshot of the running session with the highest "
       "bugreport_score into $TMPDIR/systrace.pftrace (/tmp without "
       "TMPDIR; -o names another file); none: no file, exit 0", 0, 0},
      {"save-all-for-bugreport", TG_FLAG_BOOL, &o->bugreport_all, NULL,
       "write a snapshot of every running session with a bugreport_score "
       "> 0 into $TMPDIR (/tmp without TMPDIR), each named by its "
       "bugreport_filename (default systrace.pftrace; _1, _2 for repeats), "
       "the highest score first; none: exit 0", 0, 0},
      {"clone-for-bugreport", TG_FLAG_BOOL, &o->clone_for_bugreport, NULL,
       "with --clone or --clone-by-name: clone as for a bugreport "
       "(CloneSession for_bugreport)", 0, 0},
  };
  size_t n = sizeof(flags) / sizeof(flags[0]);
  if (n > cap) return 0;
  memcpy(out, flags, sizeof(flags));
  return n;
}

record_mode_t record_mode(const record_opts_t *o) {
  if (o->bugreport_all) return RECORD_MODE_BUGREPORT_ALL;
  if (o->bugreport) return RECORD_MODE_BUGREPORT;
  if (o->is_detached) return RECORD_MODE_IS_DETACHED;
  if (o->clone_id || o->clone_name) return RECORD_MODE_CLONE;
  return RECORD_MODE_RECORD;
}

/* --- value rules (TG_RULE_CHECK): ctx is the record_opts_t ---------------- */

static bool is_stdout(const char *path) { return path && !strcmp(path, "-"); }

static bool remote(const record_opts_t *o) {
  return o->remote.n_hosts || o->remote.hosts_file;
}

static bool out_not_stdout(const void *ctx) {
  return !is_stdout(((const record_opts_t *)ctx)->out);
}

static bool stdout_not_shared(const void *ctx) {
  const record_opts_t *o = ctx;
  return !(is_stdout(o->out) && is_stdout(o->summary_json));
}

/* A resume key names one host's session. */
static bool attach_one_host(const void *ctx) {
  const record_opts_t *o = ctx;
  return !remote(o) || (!o->remote.hosts_file && o->remote.n_hosts == 1);
}

static bool attach_remote_has_out(const void *ctx) {
  const record_opts_t *o = ctx;
  return !remote(o) || o->out;
}

static bool attach_key_fits(const void *ctx) {
  const record_opts_t *o = ctx;
  return !remote(o) || strlen(o->attach) <= TG_RELAY_SESSION_KEY_MAX;
}

/* --- the tables ----------------------------------------------------------- */

#define REMOTE "host", "hosts"
#define ANY_CLONE "clone", "clone-by-name"

/* Perfetto's --save-all-for-bugreport stands alone. */
static const tg_flag_rule_t bugreport_all_rules[] = {
    TG_FLAG_EXCLUDES(("save-all-for-bugreport"),
                     ("save-for-bugreport", "config", TG_FLAG_ARGS, "txt",
                      "time", "buffer", "size", "out", "attach", "detach",
                      "stop", "background", "background-wait", ANY_CLONE,
                      "clone-for-bugreport", "summary-json", REMOTE),
                     "--save-all-for-bugreport takes only --socket"),
};

static const tg_flag_rule_t bugreport_rules[] = {
    TG_FLAG_EXCLUDES(("save-for-bugreport"),
                     ("config", TG_FLAG_ARGS, "txt", "time", "buffer", "size",
                      "attach", "detach", "stop", "background",
                      "background-wait", ANY_CLONE, REMOTE),
                     "--save-for-bugreport takes only -o and --socket"),
};

static const tg_flag_rule_t is_detached_rules[] = {
    TG_FLAG_EXCLUDES(("is_detached"),
                     ("config", TG_FLAG_ARGS, "out", "attach", "detach",
                      "stop", "background", REMOTE),
                     "--is_detached KEY takes only --socket"),
};

/* Checked before a clone's and a recording's own. */
static const tg_flag_rule_t common_rules[] = {
    TG_FLAG_EXCLUDES(("size"), ("attach"),
                     "--attach cannot change the maximum file size"),
    TG_FLAG_EXCLUDES(("background-wait"), ("attach"),
                     "--background-wait starts a session: it cannot --attach"),
    /* --background-wait is a --background. */
    TG_FLAG_EXCLUDES(("background", "background-wait"), ("detach"),
                     "--detach and --background exclude each other"),
    TG_FLAG_CHECK(("background", "background-wait"), ("out"),
                  "--background cannot write to stdout (-o -)",
                  out_not_stdout),
    TG_FLAG_REQUIRES(("clone-for-bugreport"), (ANY_CLONE),
                     "--clone-for-bugreport goes with --clone or "
                     "--clone-by-name"),
};

/* --clone: a snapshot of a session that exists, written to -o. (An empty
 * --clone-by-name never gets here: the parser refuses empty values.) */
static const tg_flag_rule_t clone_rules[] = {
    TG_FLAG_AT_MOST_ONE_OF((ANY_CLONE),
                           "--clone and --clone-by-name exclude each other"),
    TG_FLAG_EXCLUDES((ANY_CLONE),
                     ("config", TG_FLAG_ARGS, "txt", "time", "buffer"),
                     "--clone records an existing session: no -c, data "
                     "sources, -t or -b"),
    TG_FLAG_EXCLUDES((ANY_CLONE), ("attach", "detach", "stop"),
                     "--clone leaves the session alone: no --attach, "
                     "--detach or --stop"),
    TG_FLAG_EXCLUDES((ANY_CLONE), (REMOTE),
                     "--clone works with the local service (--socket), not "
                     "with -H"),
    TG_FLAG_REQUIRES((ANY_CLONE), ("out"), "-o OUT is required"),
};

static const tg_flag_rule_t record_rules[] = {
    TG_FLAG_EXCLUDES((REMOTE), ("background", "background-wait"),
                     "--background works with the local service"),
    TG_FLAG_EXCLUDES((REMOTE), ("size"), "--size works with the local service"),
    TG_FLAG_EXCLUDES(("attach"), ("detach"),
                     "--attach and --detach exclude each other"),
    TG_FLAG_REQUIRES(("stop"), ("attach"), "--stop needs --attach KEY"),
    TG_FLAG_EXCLUDES(("attach"), ("config", TG_FLAG_ARGS),
                     "--attach records the detached session's config: no -c "
                     "or data sources"),
    TG_FLAG_EXCLUDES(("attach"), ("buffer"),
                     "--attach cannot change the buffer size"),
    TG_FLAG_EXCLUDES(("config"), (TG_FLAG_ARGS),
                     "give either -c CONFIG or data source names, not both"),
    TG_FLAG_REQUIRES(("txt"), ("config"), "--txt needs -c CONFIG"),
    TG_FLAG_ANY_OF(("attach", "config", TG_FLAG_ARGS),
                   "nothing to record: give -c CONFIG or data source names"),
    TG_FLAG_ANY_OF(("out", "detach", "attach"), "-o OUT is required"),
    TG_FLAG_CHECK(("detach"), ("out"),
                  "--detach leaves the trace with the service: -o - (stdout) "
                  "cannot follow it",
                  out_not_stdout),
    TG_FLAG_CHECK(("summary-json"), ("out"),
                  "-o - and --summary-json - would share standard output: "
                  "give the summary a file",
                  stdout_not_shared),
    TG_FLAG_REQUIRES(("merge"), (REMOTE),
                     "--merge is for remote hosts (-H, --hosts)"),
    TG_FLAG_REQUIRES(("merge-allow-fields"), ("merge"),
                     "--merge-allow-fields is for --merge"),
    TG_FLAG_REQUIRES(("app-tracks"), ("merge"), "--app-tracks is for --merge"),
    TG_FLAG_REQUIRES(("clock-from-requests"), ("merge"),
                     "--clock-from-requests is for --merge"),
    TG_FLAG_EXCLUDES((REMOTE), ("detach"),
                     "--detach works with the local service (--socket), not "
                     "with -H"),
    TG_FLAG_CHECK(("attach"), (REMOTE),
                  "--attach takes back one host's session: give one -H HOST",
                  attach_one_host),
    TG_FLAG_CHECK(("attach"), (REMOTE, "out"), "-o OUT is required",
                  attach_remote_has_out),
    TG_FLAG_CHECK(("attach"), (REMOTE),
                  "--attach: a resume key is at most " CLI_STR(
                      TG_RELAY_SESSION_KEY_MAX) " characters",
                  attach_key_fits),
    TG_FLAG_REQUIRES(("cert", "key", "ca", "tls-server-name", "session-cache",
                      "reconnect-timeout", "compress"),
                     (REMOTE),
                     "--cert, --key, --ca, --tls-server-name, "
                     "--session-cache, --reconnect-timeout and --compress "
                     "are for remote hosts (-H)"),
    TG_FLAG_REQUIRES(("dead-link-timeout", "clock-sync-period"), (REMOTE),
                     "--dead-link-timeout and --clock-sync-period are for "
                     "remote hosts (-H)"),
};

#define TABLE(t) ((record_rules_t){t, sizeof(t) / sizeof(t[0])})

size_t record_rules_of(record_mode_t m, record_rules_t *out) {
  switch (m) {
    case RECORD_MODE_BUGREPORT_ALL:
      out[0] = TABLE(bugreport_all_rules);
      return 1;
    case RECORD_MODE_BUGREPORT:
      out[0] = TABLE(bugreport_rules);
      return 1;
    case RECORD_MODE_IS_DETACHED:
      out[0] = TABLE(is_detached_rules);
      return 1;
    case RECORD_MODE_CLONE:
      out[0] = TABLE(common_rules);
      out[1] = TABLE(clone_rules);
      return 2;
    case RECORD_MODE_RECORD:
    case RECORD_MODES:
      break;
  }
  out[0] = TABLE(common_rules);
  out[1] = TABLE(record_rules);
  return 2;
}

int record_check_flags(const record_opts_t *o, const tg_flag_t *flags,
                       size_t n, const tg_flags_given_t *given, char *err,
                       size_t cap, size_t *table, size_t *rule) {
  record_rules_t t[RECORD_MAX_RULE_TABLES];
  size_t nt = record_rules_of(record_mode(o), t);
  for (size_t i = 0; i < nt; i++) {
    int rv = tg_flag_rules_check(flags, n, given, t[i].rules, t[i].n, o, err,
                                 cap, rule);
    if (rv < 0) {
      if (table) *table = i;
      return rv;
    }
  }
  return 0;
}
