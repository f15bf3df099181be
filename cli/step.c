/* The CLI's request/reply state machines (step.h), and the wait every
 * synchronous-looking call of the CLI makes (cli_wait). */
#include "cli/step.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "tracegate/error.h"

int cli_wait(cli_conn_t *cc, const bool *flag) {
  while (!*flag && uv_run(cc->loop, UV_RUN_ONCE)) {
  }
  return *flag ? 0 : -1;
}

void cli_sm_reply(cli_sm_t *m, int status, const char *msg) {
  m->done = true;
  m->status = status;
  snprintf(m->msg, sizeof(m->msg), "%s", msg ? msg : "");
}

void cli_sm_on_done(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  cli_sm_reply(ctx, status, msg);
}

void cli_sm_on_attached(tg_consumer_t *c, void *ctx, int status,
                        const char *msg, const uint8_t *cfg, size_t len) {
  (void)c;
  (void)cfg;
  (void)len;
  cli_sm_reply(ctx, status, msg);
}

const char *cli_sm_why(const cli_sm_t *m) {
  if (m->send_rv < 0) return tg_strerror(m->send_rv);
  return m->done ? m->msg : m->cc->close_msg;
}

static void say_failed(cli_sm_t *m, int code, tg_notice_t notice,
                       const char *what) {
  bool coded = notice != TG_N_NONE;
  fprintf(stderr, CLI_PROG ": %s%s%s: %s\n", coded ? tg_notice_tag(notice) : "",
          coded ? " " : "", what, cli_sm_why(m));
  if (code != CLI_EXIT_OK) m->code = code;
}

void cli_sm_fail(cli_sm_t *m, int code, tg_notice_t notice, const char *fmt,
                 ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  say_failed(m, code, notice, what);
}

static const char *outcome_name(cli_sm_outcome_t o) {
  switch (o) {
    case CLI_SM_OK: return "ok";
    case CLI_SM_REFUSED: return "refused";
    case CLI_SM_LOST: return "lost";
  }
  return "?";
}

/* One state: send, wait, judge. Returns the next state. */
static int step(cli_sm_t *m) {
  const cli_sm_state_t *st = &m->states[m->state];
  m->done = false;
  m->status = 0;
  m->msg[0] = 0;
  m->send_rv = st->send(m);
  if (m->send_rv == 0) cli_wait(m->cc, &m->done);
  cli_sm_outcome_t o = m->send_rv < 0 || !m->done ? CLI_SM_LOST
                       : m->status != 0           ? CLI_SM_REFUSED
                                                  : CLI_SM_OK;
  m->outcome = o;
  int next = st->decide ? st->decide(m, o) : CLI_SM_TABLE;
  if (next == CLI_SM_TABLE) {
    next = o == CLI_SM_OK ? st->on_ok : st->on_fail;
    if (o != CLI_SM_OK && st->fail) say_failed(m, st->fail_code, st->notice, st->fail);
  }
  TG_DEBUG("%s: %s -> %s%s%s", st->name, outcome_name(o),
           next == CLI_SM_END ? "end" : m->states[next].name,
           o == CLI_SM_OK ? "" : ": ", o == CLI_SM_OK ? "" : cli_sm_why(m));
  return next;
}

int cli_sm_run(cli_sm_t *m, int first) {
  m->code = CLI_EXIT_OK;
  for (m->state = first; m->state != CLI_SM_END;) m->state = step(m);
  return m->code;
}
