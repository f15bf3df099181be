/* `tracegate record --is_detached KEY` (Perfetto's --is_detached): is
 * there a detached session under KEY? As perfetto_cmd does it: attach,
 * and detach again at once under the same key, so the session runs on.
 * Exit status 0: yes, 2: no, 1: the service could not tell. */
#include <string.h>

#include "cli/record.h"
#include "cli/step.h"

enum { ATTACH, DETACH };

static int send_attach(cli_sm_t *m) {
  return tg_consumer_attach(m->cc->c, m->ctx, cli_sm_on_attached, m);
}

static int send_detach(cli_sm_t *m) {
  return tg_consumer_detach(m->cc->c, m->ctx, cli_sm_on_done, m);
}

/* The service refuses an attach only for a key it does not hold. */
static int after_attach(cli_sm_t *m, cli_sm_outcome_t o) {
  if (o != CLI_SM_REFUSED) return CLI_SM_TABLE;
  printf("no detached session '%s'\n", (const char *)m->ctx);
  m->code = CLI_EXIT_USAGE;
  return CLI_SM_END;
}

static int after_detach(cli_sm_t *m, cli_sm_outcome_t o) {
  if (o != CLI_SM_OK)
    cli_sm_fail(m, CLI_EXIT_FAIL, TG_N_NONE,
                "the session '%s' was there but could not be detached again "
                "(it ends now)", (const char *)m->ctx);
  return CLI_SM_END;
}

static const cli_sm_state_t states[] = {
    [ATTACH] = {"attach", send_attach, DETACH, CLI_SM_END,
                "cannot ask the service", CLI_EXIT_FAIL, after_attach,
                TG_N_NONE},
    [DETACH] = {"detach", send_detach, CLI_SM_END, CLI_SM_END, NULL,
                CLI_EXIT_FAIL, after_detach, TG_N_NONE},
};

static int ask(cli_conn_t *cc, void *arg) {
  cli_sm_t m = {.cc = cc, .states = states, .ctx = arg};
  int code = cli_sm_run(&m, ATTACH);
  if (code == CLI_EXIT_OK) printf("detached session '%s'\n", (const char *)arg);
  return code;
}

int record_is_detached(const char *socket, const char *key) {
  cli_remote_opts_t ro;
  memset(&ro, 0, sizeof(ro));
  return cli_run_one_shot(socket, &ro, ask, (void *)key);
}
