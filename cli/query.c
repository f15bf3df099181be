/* `tracegate query`: the service's producers, data sources and tracing
 * sessions as tables (QueryServiceState, its replies merged). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "cli/cli.h"
#include "cli/step.h"
#include "cli/json_out.h"
#include "ipc/channel.h"
#include "tracegate/error.h"

/* Names come from producers: print them without control characters. */
static void put_name(FILE *out, const char *s) {
  char shown[1024];
  tg_printable(shown, sizeof(shown), s && *s ? s : "-");
  fputs(shown, out);
}

static const char *producer_name(const Perfetto__Protos__TracingServiceState *st,
                                 int32_t id) {
  for (size_t i = 0; i < st->n_producers; i++)
    if (st->producers[i]->id == id) return st->producers[i]->name;
  return NULL;
}

void cli_print_sessions(FILE *out, const Perfetto__Protos__TracingServiceState *st,
                        bool filter, uint64_t id) {
  fprintf(out, "%-8s %-7s %-28s %-14s %-10s %-8s %s\n", "ID", "UID", "STATE",
          "BUFFERS_KB", "DURATION", "SOURCES", "NAME");
  for (size_t i = 0; i < st->n_tracing_sessions; i++) {
    const Perfetto__Protos__TracingServiceState__TracingSession *s =
        st->tracing_sessions[i];
    if (filter && s->id != id) continue;
    char bufs[64] = "", dur[32];
    size_t off = 0;
    for (size_t b = 0; b < s->n_buffer_size_kb && off < sizeof(bufs); b++)
      off += (size_t)snprintf(bufs + off, sizeof(bufs) - off, "%s%u", b ? "," : "",
                              s->buffer_size_kb[b]);
    if (s->has_duration_ms && s->duration_ms) cli_format_ms(dur, sizeof(dur), s->duration_ms);
    else snprintf(dur, sizeof(dur), "-");
    fprintf(out, "%-8" PRIu64 " %-7d ", s->id, s->consumer_uid);
    char state[64]; /* the service's words: no terminal escapes */
    tg_printable(state, sizeof(state), s->state ? s->state : "-");
    fprintf(out, "%-28s %-14s %-10s %-8u ", state, bufs[0] ? bufs : "-", dur,
            s->num_data_sources);
    put_name(out, s->unique_session_name);
    fputc('\n', out);
  }
}

static void print_state(FILE *out, const Perfetto__Protos__TracingServiceState *st) {
  if (st->tracing_service_version) {
    fputs("service: ", out);
    put_name(out, st->tracing_service_version);
    fputc('\n', out);
  }
  fprintf(out, "\nPRODUCERS (%zu)\n", st->n_producers);
  fprintf(out, "%-6s %-8s %-7s %s\n", "ID", "PID", "UID", "NAME");
  for (size_t i = 0; i < st->n_producers; i++) {
    const Perfetto__Protos__TracingServiceState__Producer *p = st->producers[i];
    fprintf(out, "%-6d %-8d %-7d ", p->id, p->pid, p->uid);
    put_name(out, p->name);
    fputc('\n', out);
  }
  fprintf(out, "\nDATA SOURCES (%zu)\n", st->n_data_sources);
  fprintf(out, "%-40s %-9s %s\n", "NAME", "PRODUCER", "PRODUCER_NAME");
  for (size_t i = 0; i < st->n_data_sources; i++) {
    const Perfetto__Protos__TracingServiceState__DataSource *d = st->data_sources[i];
    const char *name = d->ds_descriptor ? d->ds_descriptor->name : NULL;
    /* Pad by hand: the name is printed through put_name. */
    size_t len = name ? strlen(name) : 1;
    put_name(out, name);
    fprintf(out, "%*s %-9d ", len < 40 ? (int)(40 - len) : 0, "", d->producer_id);
    put_name(out, producer_name(st, d->producer_id));
    fputc('\n', out);
  }
  fprintf(out, "\nTRACING SESSIONS (%zu, %d started)\n", st->n_tracing_sessions,
          st->num_sessions_started);
  cli_print_sessions(out, st, false, 0);
}

/* A copy of |m| (a message the consumer library lends a callback) that
 * outlives the callback, freed with protobuf_c_message_free_unpacked();
 * NULL when memory runs out. */
static ProtobufCMessage *copy_message(const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return NULL;
  protobuf_c_message_pack(m, buf);
  ProtobufCMessage *copy = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
  free(buf);
  return copy;
}

/* QueryServiceState and QueryCapabilities, each a one-step machine of
 * step.h whose answer is copied into |copy|. */
static void on_state(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     bool has_more, const Perfetto__Protos__TracingServiceState *st) {
  (void)c;
  (void)has_more; /* merged: one call */
  cli_sm_t *m = ctx;
  cli_sm_reply(m, status, msg);
  if (status) return;
  Perfetto__Protos__TracingServiceState **out = m->ctx;
  *out = (Perfetto__Protos__TracingServiceState *)copy_message(&st->base);
}

static int send_query(cli_sm_t *m) {
  return tg_consumer_query_service_state(m->cc->c, false, true, on_state, m);
}

static const cli_sm_state_t query_states[] = {
    {"query", send_query, CLI_SM_END, CLI_SM_END, "cannot query the service",
     CLI_EXIT_FAIL, NULL, TG_N_QUERY_FAILED},
};

Perfetto__Protos__TracingServiceState *cli_query_state(cli_conn_t *cc) {
  Perfetto__Protos__TracingServiceState *st = NULL;
  cli_sm_t m = {.cc = cc, .states = query_states, .ctx = &st};
  if (cli_sm_run(&m, 0) != CLI_EXIT_OK) return NULL;
  if (!st) fprintf(stderr, CLI_PROG ": out of memory\n");
  return st;
}

static void on_caps(tg_consumer_t *c, void *ctx, int status, const char *msg,
                    const Perfetto__Protos__TracingServiceCapabilities *caps) {
  (void)c;
  cli_sm_t *m = ctx;
  cli_sm_reply(m, status, msg);
  if (status || !caps) return;
  Perfetto__Protos__TracingServiceCapabilities **out = m->ctx;
  *out = (Perfetto__Protos__TracingServiceCapabilities *)copy_message(&caps->base);
}

static int send_caps(cli_sm_t *m) {
  return tg_consumer_query_capabilities(m->cc->c, on_caps, m);
}

/* Not answered is no failure here: the caller says why in its output. */
static const cli_sm_state_t caps_states[] = {
    {"capabilities", send_caps, CLI_SM_END, CLI_SM_END, NULL, CLI_EXIT_OK,
     NULL, TG_N_NONE},
};

/* QueryCapabilities, waited for. NULL with |why| filled when the service
 * did not answer (too old to know the call) or memory ran out. */
static Perfetto__Protos__TracingServiceCapabilities *query_caps(
    cli_conn_t *cc, char *why, size_t cap) {
  Perfetto__Protos__TracingServiceCapabilities *caps = NULL;
  cli_sm_t m = {.cc = cc, .states = caps_states, .ctx = &caps};
  cli_sm_run(&m, 0);
  if (m.outcome != CLI_SM_OK)
    snprintf(why, cap, "%s", cli_sm_why(&m));
  else if (!caps)
    snprintf(why, cap, "out of memory");
  return caps;
}

static const char *event_name(int type) {
  const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
      &perfetto__protos__observable_events__type__descriptor, type);
  return v ? v->name : "?";
}

/* QueryCapabilities: which optional consumer features the service has.
 * A service too old to answer is said so; the state is shown anyway. */
static void print_capabilities(FILE *out, cli_conn_t *cc) {
  char why[512];
  Perfetto__Protos__TracingServiceCapabilities *c =
      query_caps(cc, why, sizeof(why));
  fprintf(out, "\nCAPABILITIES\n");
  if (!c) {
    fprintf(out, "unknown: %s\n", why);
    return;
  }
  fprintf(out, "clone session (--clone):        %s\n",
          c->has_clone_session ? "yes" : "no");
  fprintf(out, "trace config output_path:       %s\n",
          c->has_trace_config_output_path ? "yes" : "no");
  fprintf(out, "observable events:              ");
  for (size_t i = 0; i < c->n_observable_events; i++)
    fprintf(out, "%s%s", i ? ", " : "",
            event_name((int)c->observable_events[i]));
  fprintf(out, "%s\n", c->n_observable_events ? "" : "none");
  perfetto__protos__tracing_service_capabilities__free_unpacked(c, NULL);
}

/* --json: {"schema": 1, "service_state": TracingServiceState,
 * "capabilities": TracingServiceCapabilities or null,
 * "capabilities_error": why they are null, or null}. */
static int write_json(cli_conn_t *cc,
                      const Perfetto__Protos__TracingServiceState *st) {
  char why[512];
  Perfetto__Protos__TracingServiceCapabilities *c =
      query_caps(cc, why, sizeof(why));
  json_t *doc = json_pack("{s:i, s:o, s:o, s:o}", "schema", 1, "service_state",
                          cli_json_pb(&st->base), "capabilities",
                          cli_json_pb(c ? &c->base : NULL),
                          "capabilities_error", tg_json_text(c ? NULL : why));
  if (c) perfetto__protos__tracing_service_capabilities__free_unpacked(c, NULL);
  int code = cli_json_stdout(doc);
  json_decref(doc);
  return code;
}

static const char about[] =
    "Lists the producers connected to the service, the data sources they\n"
    "offer, the tracing sessions, as tables, and the service's capabilities\n"
    "(QueryCapabilities). With -H, of a remote host (through its\n"
    "tracegate-relay). --raw writes the TracingServiceState message itself\n"
    "(binary protobuf) to stdout instead (Perfetto's --query-raw); --json\n"
    "writes it and the capabilities as one JSON object (docs/commands.md).\n"
    "\n"
    "example:\n"
    "  " CLI_PROG " query\n"
    "  " CLI_PROG " query -H relay.example --cert me.pem --key me.key --ca ca.pem\n";

/* --raw: the merged state, packed, as perfetto --query-raw prints it. */
static int write_raw(const Perfetto__Protos__TracingServiceState *st) {
  size_t n = perfetto__protos__tracing_service_state__get_packed_size(st);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    fprintf(stderr, CLI_PROG ": out of memory\n");
    return CLI_EXIT_FAIL;
  }
  perfetto__protos__tracing_service_state__pack(st, buf);
  size_t w = fwrite(buf, 1, n, stdout);
  free(buf);
  if (w != n || fflush(stdout) != 0) {
    fprintf(stderr, CLI_PROG ": cannot write to stdout: %s\n", strerror(errno));
    return CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

typedef struct query_args {
  bool raw, json;
} query_args_t;

static int query(cli_conn_t *cc, void *arg) {
  const query_args_t *a = arg;
  Perfetto__Protos__TracingServiceState *st = cli_query_state(cc);
  if (!st) return CLI_EXIT_FAIL;
  int rc = CLI_EXIT_OK;
  if (a->raw) {
    rc = write_raw(st);
  } else if (a->json) {
    rc = write_json(cc, st);
  } else {
    print_state(stdout, st);
    print_capabilities(stdout, cc);
  }
  perfetto__protos__tracing_service_state__free_unpacked(st, NULL);
  return rc;
}

int cli_query_main(int argc, char **argv) {
  const char *prog = CLI_PROG " query";
  const char *socket = tg_ipc_default_socket(false);
  cli_remote_opts_t ro;
  memset(&ro, 0, sizeof(ro));
  query_args_t a = {0};
  const tg_flag_t flags[] = {
      {"raw", TG_FLAG_BOOL, &a.raw, NULL,
       "write the TracingServiceState (binary protobuf) to stdout", 0, 0},
      {"json", TG_FLAG_BOOL, &a.json, NULL,
       "write the service's state and capabilities as JSON to stdout", 0, 0},
      CLI_ONE_SHOT_FLAGS(&socket, &ro)};
  int rv = cli_parse_one_shot_flags(
      prog, "[--raw | --json] [--socket PATH | -H HOST [--cert F --key F --ca F]]",
      about, flags, sizeof(flags) / sizeof(flags[0]), argc, argv);
  if (rv == 1) return CLI_EXIT_OK;
  if (rv < 0) return CLI_EXIT_USAGE;
  if (a.raw && a.json) {
    fprintf(stderr, "%s: --raw and --json exclude each other (see --help)\n",
            prog);
    return CLI_EXIT_USAGE;
  }
  return cli_run_one_shot(socket, &ro, query, &a);
}
