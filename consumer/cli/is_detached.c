/* `tracegate record --is_detached KEY` (Perfetto's --is_detached): is
 * there a detached session under KEY? As perfetto_cmd does it: attach,
 * and detach again at once under the same key, so the session runs on.
 * Exit status 0: yes, 2: no, 1: the service could not tell. */
#include <string.h>

#include "consumer/cli/record.h"
#include "tracegate/error.h"

typedef struct step {
  bool done;
  int status;
  char msg[512];
} step_t;

static void on_done(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  step_t *s = ctx;
  s->done = true;
  s->status = status;
  snprintf(s->msg, sizeof(s->msg), "%s", msg ? msg : "");
}

static void on_attached(tg_consumer_t *c, void *ctx, int status,
                        const char *msg, const uint8_t *cfg, size_t len) {
  (void)cfg;
  (void)len;
  on_done(c, ctx, status, msg);
}

static int ask(cli_conn_t *cc, void *arg) {
  const char *key = arg;
  step_t a = {0}, d = {0};
  int rv = tg_consumer_attach(cc->c, key, on_attached, &a);
  if (rv == 0) cli_wait(cc, &a.done);
  if (rv < 0 || !a.done) {
    fprintf(stderr, CLI_PROG ": cannot ask the service: %s\n",
            rv < 0 ? tg_strerror(rv) : cc->close_msg);
    return CLI_EXIT_FAIL;
  }
  if (a.status) {
    /* The service refuses an attach only for a key it does not hold. */
    printf("no detached session '%s'\n", key);
    return CLI_EXIT_USAGE;
  }
  rv = tg_consumer_detach(cc->c, key, on_done, &d);
  if (rv == 0) cli_wait(cc, &d.done);
  if (rv < 0 || !d.done || d.status) {
    fprintf(stderr, CLI_PROG ": the session '%s' was there but could not be "
            "detached again (it ends now): %s\n", key,
            rv < 0 ? tg_strerror(rv) : d.done ? d.msg : cc->close_msg);
    return CLI_EXIT_FAIL;
  }
  printf("detached session '%s'\n", key);
  return CLI_EXIT_OK;
}

int record_is_detached(const char *socket, const char *key) {
  cli_remote_opts_t ro;
  memset(&ro, 0, sizeof(ro));
  return cli_run_one_shot(socket, &ro, ask, (void *)key);
}
