/* `tracegate trigger NAME...`: activates triggers, as Perfetto's
 * trigger_perfetto does. It connects to the service's producer socket as a
 * producer named "tracegate-trigger", sends ActivateTriggers and exits
 * once the service has handled it: sessions waiting for one of the names
 * have started, begun to stop, or asked their consumer to snapshot them by
 * then, and each recorded a trigger packet naming this producer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ipc/channel.h"
#include "ipc/client.h"
#include "ipc/unix_transport.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "tracegate/error.h"

#define TRIGGER_PRODUCER_NAME "tracegate-trigger"
#define MAX_TRIGGERS 64 /* what the service takes from one request */
#define MAX_TRIGGER_NAME 1024

typedef struct trigger_run {
  tg_unix_transport_t tr;
  tg_ipc_client_t client;
  const tg_ipc_remote_service_t *svc;
  const char *socket;
  char **names;
  size_t n;
  bool done;     /* the service handled ActivateTriggers */
  char why[512]; /* the first failure */
} trigger_run_t;

static void failed(trigger_run_t *t, const char *what, int status) {
  if (!t->why[0])
    snprintf(t->why, sizeof(t->why), "%s: %s", what, tg_strerror(status));
  tg_ipc_client_close(&t->client, status);
}

static void on_activated(tg_ipc_client_t *cl, void *ctx, int status,
                         bool has_more, const uint8_t *r, size_t n) {
  (void)cl, (void)has_more, (void)r, (void)n;
  trigger_run_t *t = ctx;
  if (status < 0) {
    failed(t, "the service refused ActivateTriggers", status);
    return;
  }
  t->done = true;
  tg_ipc_client_close(&t->client, 0);
}

static void on_initialized(tg_ipc_client_t *cl, void *ctx, int status,
                           bool has_more, const uint8_t *r, size_t n) {
  (void)has_more, (void)r, (void)n;
  trigger_run_t *t = ctx;
  /* A shared memory buffer may come along: this producer writes nothing. */
  int smb_fd = tg_ipc_client_take_fd(cl);
  if (smb_fd >= 0) close(smb_fd);
  if (status < 0) {
    failed(t, "the service refused InitializeConnection", status);
    return;
  }
  Perfetto__Protos__ActivateTriggersRequest req =
      PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
  req.n_trigger_names = t->n;
  req.trigger_names = t->names;
  size_t len = protobuf_c_message_get_packed_size(&req.base);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) {
    failed(t, "ActivateTriggers", -ENOMEM);
    return;
  }
  protobuf_c_message_pack(&req.base, buf);
  int rv = tg_ipc_client_invoke(cl, t->svc, "ActivateTriggers", buf, len, -1,
                                on_activated, t, NULL);
  free(buf);
  if (rv < 0) failed(t, "cannot send ActivateTriggers", rv);
}

static void on_bound(tg_ipc_client_t *cl, void *ctx, int status,
                     const tg_ipc_remote_service_t *svc) {
  trigger_run_t *t = ctx;
  if (status < 0) {
    failed(t, "the socket does not offer ProducerPort", status);
    return;
  }
  t->svc = svc;
  Perfetto__Protos__InitializeConnectionRequest req =
      PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
  req.producer_name = TRIGGER_PRODUCER_NAME;
  uint8_t buf[256];
  size_t len = protobuf_c_message_pack(&req.base, buf);
  int rv = tg_ipc_client_invoke(cl, svc, "InitializeConnection", buf, len, -1,
                                on_initialized, t, NULL);
  if (rv < 0) failed(t, "cannot send InitializeConnection", rv);
}

static void on_close(tg_ipc_client_t *cl, int status) {
  trigger_run_t *t = cl->data;
  if (!t->done && !t->why[0])
    snprintf(t->why, sizeof(t->why), "the service closed the connection: %s",
             tg_strerror(status ? status : TG_EPEER_CLOSED));
}

static const tg_ipc_client_cbs_t client_cbs = {.on_close = on_close};

static int activate(trigger_run_t *t) {
  uv_loop_t loop;
  if (uv_loop_init(&loop) < 0) {
    fprintf(stderr, CLI_PROG " trigger: cannot start an event loop\n");
    return CLI_EXIT_FAIL;
  }
  int rv = tg_unix_transport_connect(&loop, &t->tr, t->socket);
  if (rv < 0) {
    fprintf(stderr,
            CLI_PROG " trigger: %s cannot connect to the producer socket %s: "
            "%s (is tracegated running?)\n", TG_NOTE(TRIGGER_UNREACHABLE),
            t->socket, tg_strerror(rv));
  } else {
    tg_ipc_client_init(&t->client, &t->tr.base, &client_cbs, t);
    rv = tg_ipc_client_bind(&t->client, "ProducerPort", on_bound, t);
    if (rv < 0) failed(t, "cannot bind ProducerPort", rv);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  bool clean = cli_loop_close(&loop);
  if (rv < 0) return CLI_EXIT_FAIL;
  if (!t->done || !clean) {
    fprintf(stderr, CLI_PROG " trigger: %s\n",
            t->why[0] ? t->why : "internal error: handles left open");
    return CLI_EXIT_FAIL;
  }
  fprintf(stderr, CLI_PROG ": %s activated", TG_NOTE(TRIGGER_ACTIVATED));
  for (size_t i = 0; i < t->n; i++)
    fprintf(stderr, "%s '%s'", i ? "," : "", t->names[i]);
  fprintf(stderr, "\n");
  return CLI_EXIT_OK;
}

static const char about[] =
    "Activates the triggers NAME... (Perfetto's trigger_perfetto): tracing\n"
    "sessions whose TraceConfig.trigger_config lists one of them start\n"
    "(START_TRACING), stop after the trigger's stop_delay_ms (STOP_TRACING),\n"
    "or are snapshotted by their consumer (CLONE_SNAPSHOT), and each writes a\n"
    "trigger packet into its trace naming the trigger and the producer that\n"
    "fired it (\"" TRIGGER_PRODUCER_NAME "\"). A name no session waits for is\n"
    "not an error. " CLI_PROG " connects to the producer socket, as producers\n"
    "do; the exit status is 0 once the service has handled the triggers.\n"
    "\n"
    "examples:\n"
    "  " CLI_PROG " trigger start-frame-trace\n"
    "  " CLI_PROG " trigger --socket /run/tracegate/producer.sock stop snap\n";

int cli_trigger_main(int argc, char **argv) {
  const char *prog = CLI_PROG " trigger";
  trigger_run_t *t = calloc(1, sizeof(*t));
  char *names[MAX_TRIGGERS + 1];
  if (!t) return CLI_EXIT_FAIL;
  t->socket = tg_ipc_default_socket(true);
  const tg_flag_t flags[] = {
      {"socket", TG_FLAG_STRING, &t->socket, "PATH",
       "the service's producer socket ('@name': abstract)", 0, 0},
  };
  size_t n = 0;
  int rv = cli_parse_flags(prog, "[--socket PATH] NAME...", about, flags,
                           sizeof(flags) / sizeof(flags[0]), argc, argv, names,
                           MAX_TRIGGERS + 1, &n);
  int code = CLI_EXIT_USAGE;
  if (rv == 1) {
    code = CLI_EXIT_OK;
  } else if (rv == 0 && n == 0) {
    fprintf(stderr, "%s: %s give the names of the triggers to activate (see "
            "--help)\n", prog, TG_NOTE(USAGE));
  } else if (rv == 0 && n > MAX_TRIGGERS) {
    fprintf(stderr, "%s: %s at most %d triggers at a time\n", prog,
            TG_NOTE(USAGE), MAX_TRIGGERS);
  } else if (rv == 0) {
    for (size_t i = 0; i < n; i++) {
      if (!names[i][0] || strlen(names[i]) > MAX_TRIGGER_NAME) {
        fprintf(stderr, "%s: %s a trigger name is 1 to %d bytes\n", prog,
                TG_NOTE(USAGE), MAX_TRIGGER_NAME);
        free(t);
        return CLI_EXIT_USAGE;
      }
    }
    t->names = names;
    t->n = n;
    code = activate(t);
  }
  free(t);
  return code;
}
