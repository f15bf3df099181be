/* `tracegate stats`: the buffer statistics of a tracing session.
 *
 * GetTraceStats only answers for the session of the asking connection, so
 * a detached session is attached, asked, and detached again under the same
 * key (it goes on running). Without a key the service's view of its
 * sessions (QueryServiceState) is what there is. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/step.h"
#include "ipc/channel.h"

/* stats --attach KEY: attach, GetTraceStats, detach again. */
enum { ATTACH, STATS, DETACH };

typedef struct detached {
  const char *key;
  bool json;
} detached_t;

static void on_stats(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st) {
  (void)c;
  cli_sm_t *m = ctx;
  const detached_t *d = m->ctx;
  if (status == 0 && !d->json) {
    cli_stats_print(stdout, st);
  } else if (status == 0) {
    json_t *doc = json_pack("{s:i, s:o, s:o}", "schema", 1, "session_key",
                            tg_json_text(d->key), "trace_stats",
                            cli_json_pb(&st->base));
    int rv = doc ? tg_json_dumpf_line(doc, stdout, 0) : -ENOMEM;
    json_decref(doc);
    if (rv < 0) {
      char why[128];
      snprintf(why, sizeof(why), "cannot write its JSON: %s", strerror(-rv));
      cli_sm_reply(m, rv, why);
      return;
    }
  }
  cli_sm_reply(m, status, msg);
}

static int send_attach(cli_sm_t *m) {
  const detached_t *d = m->ctx;
  return tg_consumer_attach(m->cc->c, d->key, cli_sm_on_attached, m);
}

static int send_stats(cli_sm_t *m) {
  const detached_t *d = m->ctx;
  if (!d->json) fprintf(stdout, "session '%s'\n\n", d->key);
  return tg_consumer_get_trace_stats(m->cc->c, on_stats, m);
}

/* Gives the session back, or it ends when this connection closes. */
static int send_detach(cli_sm_t *m) {
  const detached_t *d = m->ctx;
  return tg_consumer_detach(m->cc->c, d->key, cli_sm_on_done, m);
}

static const cli_sm_state_t detached_states[] = {
    [ATTACH] = {"attach", send_attach, STATS, CLI_SM_END,
                "cannot attach to the session", CLI_EXIT_FAIL, NULL,
                TG_N_ATTACH_FAILED},
    [STATS] = {"stats", send_stats, DETACH, DETACH,
               "cannot get the statistics", CLI_EXIT_FAIL, NULL,
               TG_N_STATS_FAILED},
    [DETACH] = {"detach", send_detach, CLI_SM_END, CLI_SM_END,
                "cannot detach again (the session ends now)", CLI_EXIT_FAIL,
                NULL, TG_N_DETACH_FAILED},
};

static int stats_of_detached(cli_conn_t *cc, const char *key, bool json) {
  detached_t d = {.key = key, .json = json};
  cli_sm_t m = {.cc = cc, .states = detached_states, .ctx = &d};
  return cli_sm_run(&m, ATTACH);
}

/* --json: {"schema": 1, "num_sessions_started": N, "tracing_sessions":
 * [TracingSession, with its trace_stats where the service gives them]}. */
static int sessions_json(const Perfetto__Protos__TracingServiceState *st,
                         bool filter, uint64_t id) {
  json_t *list = json_array();
  for (size_t i = 0; list && i < st->n_tracing_sessions; i++) {
    if (filter && st->tracing_sessions[i]->id != id) continue;
    list = tg_json_push(list, cli_json_pb(&st->tracing_sessions[i]->base));
  }
  json_t *doc = json_pack("{s:i, s:i, s:o}", "schema", 1, "num_sessions_started",
                          st->num_sessions_started, "tracing_sessions", list);
  int code = cli_json_stdout(doc);
  json_decref(doc);
  return code;
}

static int stats_of_service(cli_conn_t *cc, bool filter, uint64_t id,
                            bool json) {
  Perfetto__Protos__TracingServiceState *st = cli_query_state(cc);
  if (!st) return CLI_EXIT_FAIL;
  int code = CLI_EXIT_OK;
  bool found = !filter;
  for (size_t i = 0; filter && i < st->n_tracing_sessions; i++)
    if (st->tracing_sessions[i]->id == id) found = true;
  if (!found) {
    fprintf(stderr, CLI_PROG ": %s no tracing session %" PRIu64 "\n",
            TG_NOTE(NO_SUCH_SESSION), id);
    code = CLI_EXIT_FAIL;
  } else if (json) {
    code = sessions_json(st, filter, id);
  } else if (st->n_tracing_sessions == 0) {
    printf("no tracing sessions\n");
  } else {
    printf("TRACING SESSIONS (%zu, %d started)\n", st->n_tracing_sessions,
           st->num_sessions_started);
    cli_print_sessions(stdout, st, filter, id);
    /* The live counters the service gives with each session. */
    bool any = false;
    for (size_t i = 0; i < st->n_tracing_sessions; i++) {
      const Perfetto__Protos__TracingServiceState__TracingSession *ts =
          st->tracing_sessions[i];
      if ((filter && ts->id != id) || !ts->trace_stats) continue;
      printf("\nsession %" PRIu64 "\n", ts->id);
      cli_stats_print(stdout, ts->trace_stats);
      any = true;
    }
    if (!any)
      printf("\nper-buffer counters: " CLI_PROG " stats --attach KEY (a "
             "detached session),\nor the trace_stats packet at the end of a "
             "trace file (this service does not give them with its "
             "sessions)\n");
  }
  perfetto__protos__tracing_service_state__free_unpacked(st, NULL);
  return code;
}

typedef struct stats_args {
  const char *key; /* --attach */
  uint64_t session; /* --session, 0: all */
  bool json;
} stats_args_t;

static int stats(cli_conn_t *cc, void *arg) {
  const stats_args_t *a = arg;
  int code = a->key ? stats_of_detached(cc, a->key, a->json)
                    : stats_of_service(cc, a->session != 0, a->session,
                                       a->json);
  if (fflush(stdout) != 0) {
    fprintf(stderr, CLI_PROG ": cannot write to stdout\n");
    code = CLI_EXIT_FAIL;
  }
  return code;
}

static const char about[] =
    "Shows the buffer statistics of a tracing session. With --attach KEY,\n"
    "the detached session KEY is attached, asked for its statistics\n"
    "(GetTraceStats: one column per buffer) and detached again; it keeps\n"
    "running. Otherwise the service's sessions are listed (all, or the one\n"
    "given with --session) with their state and buffer sizes, and each\n"
    "one's live counters (tracegated gives them with QueryServiceState;\n"
    "Perfetto's traced does not). With -H, of a\n"
    "remote host (through its tracegate-relay; keys are then the relay's,\n"
    "namespaced by the client certificate's identity). --json writes the\n"
    "same as one JSON object (docs/commands.md).\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " stats\n"
    "  " CLI_PROG " stats --attach nightly\n";

int cli_stats_main(int argc, char **argv) {
  const char *prog = CLI_PROG " stats";
  const char *socket = tg_ipc_default_socket(false);
  const char *key = NULL;
  uint64_t session = 0;
  bool json = false;
  cli_remote_opts_t ro;
  memset(&ro, 0, sizeof(ro));
  const tg_flag_t flags[] = {
      {"session", TG_FLAG_UINT, &session, "ID",
       "only the session with this id (see " CLI_PROG " query)", 1, 0},
      {"attach", TG_FLAG_STRING, &key, "KEY",
       "the detached session KEY: its per-buffer counters", 0, 0},
      {"json", TG_FLAG_BOOL, &json, NULL,
       "write the statistics as JSON to stdout", 0, 0},
      CLI_ONE_SHOT_FLAGS(&socket, &ro),
  };
  int rv = cli_parse_one_shot_flags(
      prog,
      "[--session ID | --attach KEY] [--json]\n"
      "         [--socket PATH | -H HOST [--cert F --key F --ca F]]",
      about, flags, sizeof(flags) / sizeof(flags[0]), argc, argv);
  if (rv == 1) return CLI_EXIT_OK;
  if (rv < 0) return CLI_EXIT_USAGE;
  if (key && session) {
    fprintf(stderr, "%s: --session and --attach exclude each other (see --help)\n",
            prog);
    return CLI_EXIT_USAGE;
  }
  stats_args_t a = {.key = key, .session = session, .json = json};
  return cli_run_one_shot(socket, &ro, stats, &a);
}
