/* The CLI's connection to the service: connect, bind, run the loop until a
 * step is done, close everything it opened. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "client/remote.h"
#include "tls/session.h"
#include "tracegate/error.h"

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  cli_conn_t *cc = tg_consumer_data(c);
  if (status == 0) cc->ready = true;
  else snprintf(cc->close_msg, sizeof(cc->close_msg), "%s", msg);
  cc->bind_status = status;
}

static void on_remote_gone(void *ctx, const char *detail) {
  cli_conn_t *cc = ctx;
  cc->rt_pending = false;
  snprintf(cc->detail, sizeof(cc->detail), "%s", detail);
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  cli_conn_t *cc = tg_consumer_data(c);
  cc->c = NULL;
  if (cc->rt) {
    tg_remote_release(cc->rt, on_remote_gone, cc);
    cc->rt = NULL;
  }
  cc->closed = true;
  cc->ready = false;
  if (!cc->close_msg[0] || status == 0)
    snprintf(cc->close_msg, sizeof(cc->close_msg), "%s", msg);
  /* Only a connection cli_connect() handed over is the user's to hear
   * about: until then cli_connect() says why it failed, and the user's
   * state (record's handles) is not set up yet. */
  if (cc->on_close && cc->established) cc->on_close(cc, status, cc->close_msg);
}

static const tg_consumer_cbs_t conn_cbs = {.on_ready = on_ready,
                                           .on_close = on_close};

/* |hint|, NULL or a guess at the cause for the user: nothing answered (the
 * service may not be running), or it took the connection and closed it
 * before answering (at its connection limit). A peer that answered but is
 * not a consumer socket needs no guess. The reason stays in close_msg for
 * the caller's summary. */
static void cannot_connect(cli_conn_t *cc, tg_notice_t code, const char *addr,
                           const char *why, const char *hint) {
  char reason[257]; /* |why| may be close_msg itself */
  snprintf(reason, sizeof(reason), "%s", why);
  _Static_assert(sizeof(cc->close_msg) > 48 + 200 + 256, "room for both");
  snprintf(cc->close_msg, sizeof(cc->close_msg),
           "cannot connect to the tracing service at %.200s: %s", addr,
           reason);
  fprintf(stderr, CLI_PROG ": %s %s%s%s%s\n", tg_notice_tag(code),
          cc->close_msg, hint ? " (" : "",
          hint ? hint : "", hint ? ")" : "");
}

int cli_connect(cli_conn_t *cc, uv_loop_t *loop, const char *addr) {
  void (*user_close)(cli_conn_t *, int, const char *) = cc->on_close;
  void *data = cc->data;
  memset(cc, 0, sizeof(*cc));
  cc->on_close = user_close;
  cc->data = data;
  cc->loop = loop;
  int rv = tg_consumer_connect(loop, addr, &conn_cbs, cc, &cc->c);
  if (rv < 0) {
    cc->closed = true;
    cannot_connect(cc, TG_N_SERVICE_UNREACHABLE, addr, tg_strerror(rv),
                   "is tracegated running?");
    return -1;
  }
  /* The bind either succeeds or closes the connection. */
  while (!cc->ready && !cc->closed && uv_run(loop, UV_RUN_ONCE)) {
  }
  if (!cc->ready) {
    cli_disconnect(cc);
    bool not_consumer = cc->bind_status == TG_EUNKNOWN_SERVICE;
    cannot_connect(cc,
                   not_consumer ? TG_N_NOT_A_CONSUMER_SOCKET
                                : TG_N_SERVICE_CLOSED_EARLY,
                   addr, cc->close_msg[0] ? cc->close_msg : "the bind failed",
                   not_consumer
                       ? NULL
                       : "it closed the connection before answering: at its "
                         "--max-consumers limit? its log says why");
    return -1;
  }
  cc->established = true;
  return 0;
}

void cli_disconnect(cli_conn_t *cc) {
  if (cc->c) tg_consumer_close(cc->c);
  while ((!cc->closed || cc->rt_pending) && uv_run(cc->loop, UV_RUN_ONCE)) {
  }
}

static int connect_remote(cli_conn_t *cc, uv_loop_t *loop,
                          const tg_remote_env_t *env, const tg_target_t *t) {
  memset(cc, 0, sizeof(*cc));
  cc->loop = loop;
  char err[512];
  int rv = tg_remote_open(env, t, &conn_cbs, cc, &cc->c, &cc->rt, err,
                          sizeof(err));
  if (rv < 0) {
    cc->closed = true;
    cc->c = NULL;
    /* Whatever the attempt opened closes through the loop. */
    uv_run(loop, UV_RUN_DEFAULT);
    fprintf(stderr, CLI_PROG ": %s cannot connect to %s: %s\n",
            TG_NOTE(REMOTE_UNREACHABLE), t->spec, err);
    return -1;
  }
  cc->rt_pending = true;
  while (!cc->ready && (!cc->closed || cc->rt_pending) &&
         uv_run(loop, UV_RUN_ONCE)) {
  }
  if (!cc->ready) {
    cli_disconnect(cc);
    fprintf(stderr, CLI_PROG ": %s cannot connect to %s: %s\n",
            TG_NOTE(REMOTE_UNREACHABLE), t->spec,
            cc->detail[0] ? cc->detail : cc->close_msg);
    return -1;
  }
  return 0;
}

int cli_connect_any(cli_conn_t *cc, uv_loop_t *loop, const char *addr,
                    const cli_remote_opts_t *ro, tg_tls_config_t **tls) {
  *tls = NULL;
  if (ro->n_hosts == 0 && !ro->hosts_file) return cli_connect(cc, loop, addr);
  memset(cc, 0, sizeof(*cc));
  cc->closed = true;
  if (ro->n_hosts != 1 || ro->hosts_file) {
    fprintf(stderr, CLI_PROG ": this command talks to one host: give one -H\n");
    return -1;
  }
  tg_target_t t;
  char err[400];
  if (tg_target_parse(ro->hosts[0], &t, err, sizeof(err)) < 0) {
    fprintf(stderr, CLI_PROG ": -H %s\n", err);
    return -1;
  }
  if (t.kind == TG_TARGET_TLS) {
    /* The flags, else the environment or the config file. */
    tg_client_tls_files_t *full = malloc(sizeof(*full));
    if (!full) return -1;
    *full = ro->tls;
    char why[TG_CLIENT_TLS_ERR_MAX];
    int rv = tg_client_tls_defaults(full, why, sizeof(why));
    if (rv == 0)
      rv = tg_client_tls_load(full->cert, full->key, full->ca, tls, why,
                              sizeof(why));
    free(full);
    if (rv < 0) {
      fprintf(stderr, CLI_PROG ": %s\n", why);
      return -1;
    }
  }
  tg_remote_env_t env = {.loop = loop, .tls = *tls,
                         .server_name = ro->server_name};
  return connect_remote(cc, loop, &env, &t);
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

/* --- the one-shot commands ---------------------------------------------- */

int cli_parse_one_shot_flags(const char *prog, const char *synopsis,
                             const char *about, const tg_flag_t *flags,
                             size_t n, int argc, char **argv) {
  return cli_parse_flags(prog, synopsis, about, flags, n, argc, argv, NULL, 0,
                         NULL);
}

int cli_run_one_shot(const char *addr, const cli_remote_opts_t *ro,
                     int (*fn)(cli_conn_t *cc, void *arg), void *arg) {
  uv_loop_t loop;
  if (uv_loop_init(&loop) < 0) return CLI_EXIT_FAIL;
  cli_conn_t cc;
  memset(&cc, 0, sizeof(cc));
  tg_tls_config_t *tls = NULL;
  int code = CLI_EXIT_FAIL;
  if (cli_connect_any(&cc, &loop, addr, ro, &tls) == 0) code = fn(&cc, arg);
  cli_disconnect(&cc);
  if (!cli_loop_close(&loop)) code = CLI_EXIT_FAIL;
  /* Only now: the connection used it until the loop closed. */
  tg_tls_config_free(tls);
  return code;
}
