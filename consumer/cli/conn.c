/* The CLI's connection to the service: connect, bind, run the loop until a
 * step is done, close everything it opened. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "consumer/cli/cli.h"
#include "tracegate/error.h"

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  cli_conn_t *cc = tg_consumer_data(c);
  if (status == 0) cc->ready = true;
  else snprintf(cc->close_msg, sizeof(cc->close_msg), "%s", msg);
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  cli_conn_t *cc = tg_consumer_data(c);
  cc->c = NULL;
  cc->closed = true;
  cc->ready = false;
  cc->close_status = status;
  if (!cc->close_msg[0] || status == 0)
    snprintf(cc->close_msg, sizeof(cc->close_msg), "%s", msg);
  if (cc->on_close) cc->on_close(cc, status, cc->close_msg);
}

static const tg_consumer_cbs_t conn_cbs = {.on_ready = on_ready,
                                           .on_close = on_close};

static void cannot_connect(const char *addr, const char *why) {
  fprintf(stderr,
          CLI_PROG ": cannot connect to the tracing service at %s: %s (is "
          "tracegated running?)\n",
          addr, why);
}

int cli_connect(cli_conn_t *cc, uv_loop_t *loop, const char *addr) {
  void (*user_close)(cli_conn_t *, int, const char *) = cc->on_close;
  void *data = cc->data;
  memset(cc, 0, sizeof(*cc));
  cc->on_close = user_close;
  cc->data = data;
  cc->loop = loop;
  cc->addr = addr;
  int rv = tg_consumer_connect(loop, addr, &conn_cbs, cc, &cc->c);
  if (rv < 0) {
    cc->closed = true;
    cannot_connect(addr, tg_strerror(rv));
    return -1;
  }
  /* The bind either succeeds or closes the connection. */
  while (!cc->ready && !cc->closed && uv_run(loop, UV_RUN_ONCE)) {
  }
  if (!cc->ready) {
    cli_disconnect(cc);
    cannot_connect(addr, cc->close_msg[0] ? cc->close_msg : "the bind failed");
    return -1;
  }
  return 0;
}

int cli_wait(cli_conn_t *cc, const bool *flag) {
  while (!*flag && uv_run(cc->loop, UV_RUN_ONCE)) {
  }
  return *flag ? 0 : -1;
}

void cli_disconnect(cli_conn_t *cc) {
  if (cc->c) tg_consumer_close(cc->c);
  while (!cc->closed && uv_run(cc->loop, UV_RUN_ONCE)) {
  }
}

static void close_any(uv_handle_t *h, void *arg) {
  if (uv_is_closing(h)) return;
  ++*(int *)arg;
  uv_close(h, NULL);
}

bool cli_loop_close(uv_loop_t *loop) {
  /* Everything should be closed by now; do not hang if something is not. */
  int leaked = 0;
  uv_walk(loop, close_any, &leaked);
  uv_run(loop, UV_RUN_DEFAULT);
  return uv_loop_close(loop) == 0 && leaked == 0;
}
