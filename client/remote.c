/* Transports to remote tracing services: TLS to a tracegate-relay, or an
 * ssh child running `tracegate-relay --stdio`, each with a consumer on top.
 *
 * Every tg_remote_t has a timer handle; the struct is freed in that
 * timer's close callback, which comes after every other handle of the
 * remote (and of its transport) has closed. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/notice.h"
#include "client/remote.h"
#include "client/session_cache.h"
#include "common/printable.h"
#include "ipc/pipe_transport.h"
#include "tls/dial.h"
#include "tls/compress_transport.h"
#include "tls/transport.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

#define HANDSHAKE_TIMEOUT_MS 10000
#define SSH_TERM_AFTER_MS 3000
#define SSH_KILL_AFTER_MS 2000
#define SSH_STDERR_GRACE_MS 1000
#define SSH_MAX_ARGS 32
#define TAIL_MAX 2048
#define REMOTE_RELAY_CMD "tracegate-relay"

/* Sits between the TLS channel and the consumer to keep the words of a
 * relay's refusal (a RequestError frame: "this relay does not authorize
 * ..."), which the IPC client only turns into a status. |cbs| comes first:
 * the callbacks find this struct through the transport's cbs pointer. */
typedef struct refusal_peek {
  tg_transport_cbs_t cbs;
  const tg_transport_cbs_t *inner;
  char text[300];
} refusal_peek_t;

struct tg_remote {
  tg_target_kind_t kind;
  refusal_peek_t peek;
  /* Between the TLS or ssh transport and the consumer: a pass-through
   * until the relay agrees to compress (TracegateRelay.SetCompression). */
  tg_zstd_transport_t z;
  uv_timer_t timer; /* deferred report; the ssh child's kill schedule */
  bool timer_closing;
  bool released;
  tg_remote_gone_cb gone_cb;
  void *gone_ctx;
  char detail[600];

  tg_tls_chan_t *ch; /* TLS */
  tg_session_cache_t *sessions;    /* env's, borrowed */
  tg_remote_tls_counts_t *counts; /* env's, borrowed */
  const char *ca_setting;         /* env's, static */
  bool offered, resumed;
  char hostport[300], server_name[256]; /* the sessions' key */

  /* ssh */
  tg_pipe_transport_t pt;
  bool pt_open; /* its on_close has not run yet */
  uv_process_t proc;
  bool proc_running, proc_closed;
  int64_t exit_status;
  int term_signal;
  unsigned kill_stage;
  uv_pipe_t err;
  bool err_closed;
  char tail[TAIL_MAX];
  size_t tail_len;
};

/* --- freeing ------------------------------------------------------------- */

static void ssh_detail(tg_remote_t *rt);

static void on_timer_closed(uv_handle_t *h) {
  tg_remote_t *rt = h->data;
  /* The ssh child's account is complete only now: it exited and its
   * stderr reached its end. */
  if (rt->kind == TG_TARGET_SSH) ssh_detail(rt);
  if (rt->gone_cb) rt->gone_cb(rt->gone_ctx, rt->detail);
  free(rt);
}

/* Frees |rt| (through its timer) once the transport and the ssh child's
 * handles are all closed and the owner has released it. */
static void maybe_free(tg_remote_t *rt) {
  if (!rt->released || rt->timer_closing || rt->pt_open) return;
  if (rt->kind == TG_TARGET_SSH && (!rt->proc_closed || !rt->err_closed))
    return;
  rt->timer_closing = true;
  uv_close((uv_handle_t *)&rt->timer, on_timer_closed);
}

/* A transport closed before a consumer owned it, or after a failed
 * tg_consumer_open(): nobody else will release the remote. */
static int placeholder_frame(tg_transport_t *t, const uint8_t *p, size_t n) {
  (void)t;
  (void)p;
  (void)n;
  return 0;
}

static void schedule_kill(tg_remote_t *rt, uint64_t after_ms);
static void settle(tg_remote_t *rt);

static void placeholder_close(tg_transport_t *t, int status) {
  (void)status;
  tg_remote_t *rt = t->data;
  rt->pt_open = false;
  if (rt->ch) {
    tg_tls_chan_free(rt->ch);
    rt->ch = NULL;
  }
  rt->released = true;
  if (rt->proc_running) schedule_kill(rt, SSH_TERM_AFTER_MS);
  else settle(rt);
  maybe_free(rt);
}

static const tg_transport_cbs_t placeholder_cbs = {
    .on_frame = placeholder_frame,
    .on_close = placeholder_close,
};

static tg_remote_t *remote_new(uv_loop_t *loop, tg_target_kind_t kind) {
  tg_remote_t *rt = calloc(1, sizeof(*rt));
  if (!rt) return NULL;
  rt->kind = kind;
  uv_timer_init(loop, &rt->timer);
  rt->timer.data = rt;
  rt->proc_closed = rt->err_closed = true; /* until an ssh child exists */
  return rt;
}

/* --- TLS ----------------------------------------------------------------- */

int tg_client_tls_load(const char *cert, const char *key, const char *ca,
                       tg_tls_config_t **out, char *err, size_t errn) {
  if (!ca) {
    snprintf(err, errn, "--ca FILE is required for -H host:port (the CA "
             "that signed the relays' certificates)");
    return -EINVAL;
  }
  if (!cert != !key) {
    snprintf(err, errn, "--cert and --key go together");
    return -EINVAL;
  }
  tg_tls_opts_t o = {.server = false, .cert_file = cert, .key_file = key,
                     .ca_file = ca};
  char why[512] = "";
  int rv = tg_tls_config_new(&o, out, why, sizeof(why));
  if (rv < 0) snprintf(err, errn, "TLS: %s", why);
  return rv < 0 ? rv : 0;
}

/* IPCFrame.msg_request_error = 7 {error = 1}; the field reader skips
 * everything else (ReadBuffers payloads) without copying. */
static void keep_refusal(refusal_peek_t *pk, const uint8_t *p, size_t n) {
  tg_pb_reader_t r, e;
  tg_pb_field_t f, g;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != 7 || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_init(&e, f.data, f.size);
    while (tg_pb_reader_next(&e, &g) == 1) {
      if (g.id != 1 || g.type != TG_PB_WT_LEN) continue;
      /* The relay's words, shown as they are: printable ASCII only. */
      size_t k = g.size < sizeof(pk->text) - 1 ? g.size : sizeof(pk->text) - 1;
      for (size_t i = 0; i < k; i++)
        pk->text[i] = g.data[i] >= 0x20 && g.data[i] < 0x7f ? (char)g.data[i]
                                                            : '?';
      pk->text[k] = 0;
    }
  }
}

static int peek_frame(tg_transport_t *t, const uint8_t *p, size_t n) {
  refusal_peek_t *pk = (refusal_peek_t *)t->cbs;
  const tg_transport_cbs_t *inner = pk->inner;
  keep_refusal(pk, p, n);
  return inner->on_frame(t, p, n);
}

static void peek_drain(tg_transport_t *t) {
  const tg_transport_cbs_t *inner = ((refusal_peek_t *)t->cbs)->inner;
  if (inner->on_drain) inner->on_drain(t);
}

static void peek_close(tg_transport_t *t, int status) {
  const tg_transport_cbs_t *inner = ((refusal_peek_t *)t->cbs)->inner;
  inner->on_close(t, status);
}

/* The outcome reaches the consumer anyway (bound, or closed with the
 * channel's status; the details are read at release). Here: the session
 * is saved for the next connection to this relay, or, when an offered one
 * ended in a refusal, forgotten (the next attempt is a full handshake). */
static void on_handshake(tg_tls_chan_t *ch, int status) {
  tg_remote_t *rt = tg_tls_chan_owner(ch);
  if (status != 0) {
    if (rt->offered && rt->sessions)
      tg_session_cache_forget(rt->sessions, rt->hostport, rt->server_name);
    return;
  }
  rt->resumed = tg_tls_chan_resumed(ch);
  if (rt->counts) {
    if (rt->resumed) rt->counts->resumed++;
    else rt->counts->full++;
  }
  if (!rt->sessions) return;
  uint8_t *data;
  size_t len;
  uint64_t expires;
  if (tg_tls_chan_save_session(ch, &data, &len, &expires) != 0) return;
  /* Not saved (no room, out of memory): the next handshake is full. */
  (void)tg_session_cache_put(rt->sessions, rt->hostport, rt->server_name,
                             data, len, expires);
  explicit_bzero(data, len);
  free(data);
}

bool tg_remote_resumed(const tg_remote_t *rt) { return rt->resumed; }

static int open_tls(const tg_remote_env_t *env, const tg_target_t *t,
                    const tg_consumer_cbs_t *cbs, void *data, tg_consumer_t **c,
                    tg_remote_t *rt, char *err, size_t n) {
  if (!env->tls) {
    snprintf(err, n, "no TLS configuration (give --ca, --cert and --key)");
    return -EINVAL;
  }
  /* A fleet's cold start is a thousand handshakes at once: their
   * public-key work goes to the thread pool, on every core (the CLI's
   * config never reloads a CRL). */
  tg_tls_chan_opts_t opts = {.dead_link_timeout_s = env->dead_link_timeout_s,
                             .handshake_timeout_ms = HANDSHAKE_TIMEOUT_MS,
                             .on_handshake = on_handshake,
                             .owner = rt,
                             .threaded_handshake = true};
  const char *name = t->server_name[0] ? t->server_name : env->server_name;
  rt->sessions = env->sessions;
  rt->counts = env->counts;
  snprintf(rt->hostport, sizeof(rt->hostport), "%s", t->hostport);
  /* The name the certificate is checked against is part of the key: a
   * session verified for one name is never offered for another. */
  snprintf(rt->server_name, sizeof(rt->server_name), "%s",
           name ? name : t->host);
  if (rt->sessions) {
    opts.resume_session = tg_session_cache_get(
        rt->sessions, rt->hostport, rt->server_name, (uint64_t)time(NULL),
        &opts.resume_session_len);
    rt->offered = opts.resume_session != NULL;
  }
  int rv = tg_tls_chan_connect(env->loop, t->hostport, env->tls,
                               name, &opts, &placeholder_cbs, rt,
                               &rt->ch);
  if (rv < 0) {
    snprintf(err, n, "cannot connect to %s: %s", t->hostport, tg_strerror(rv));
    return rv;
  }
  rt->pt_open = true; /* the channel stands for the transport here */
  tg_zstd_transport_init(env->loop, &rt->z, tg_tls_chan_transport(rt->ch));
  tg_transport_t *tr = &rt->z.base;
  tr->cbs = &placeholder_cbs;
  tr->data = rt;
  rv = tg_consumer_open(env->loop, tr, false, cbs, data, c);
  if (rv < 0) {
    snprintf(err, n, "cannot talk to %s: %s", t->hostport, tg_strerror(rv));
    tg_transport_close(tr, rv); /* placeholder_close frees it all */
    return rv;
  }
  rt->peek.inner = tr->cbs;
  rt->peek.cbs.on_frame = peek_frame;
  rt->peek.cbs.on_drain = peek_drain;
  rt->peek.cbs.on_close = peek_close;
  tr->cbs = &rt->peek.cbs;
  return 0;
}

/* --- ssh ----------------------------------------------------------------- */

static void on_proc_closed(uv_handle_t *h) {
  tg_remote_t *rt = h->data;
  rt->proc_closed = true;
  maybe_free(rt);
}

static void on_err_closed(uv_handle_t *h);

/* The child is gone but its stderr is still open (a process it left
 * behind, e.g. an ssh connection master, holds it): stop waiting. */
static void on_err_grace(uv_timer_t *t) {
  tg_remote_t *rt = t->data;
  if (rt->err_closed || uv_is_closing((uv_handle_t *)&rt->err)) return;
  uv_read_stop((uv_stream_t *)&rt->err);
  uv_close((uv_handle_t *)&rt->err, on_err_closed);
}

/* Released, and the child has exited: what is left is its stderr. */
static void settle(tg_remote_t *rt) {
  if (!rt->err_closed && !uv_is_closing((uv_handle_t *)&rt->err))
    uv_timer_start(&rt->timer, on_err_grace, SSH_STDERR_GRACE_MS, 0);
  maybe_free(rt);
}

static void on_child_exit(uv_process_t *p, int64_t status, int sig) {
  tg_remote_t *rt = p->data;
  rt->proc_running = false;
  rt->exit_status = status;
  rt->term_signal = sig;
  uv_close((uv_handle_t *)p, on_proc_closed);
  if (rt->released && !rt->timer_closing) settle(rt);
}

static void on_err_closed(uv_handle_t *h) {
  tg_remote_t *rt = h->data;
  rt->err_closed = true;
  maybe_free(rt);
}

static void on_err_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)hint;
  static char buf[4096]; /* one loop thread; copied out in on_err_read */
  (void)h;
  *b = uv_buf_init(buf, sizeof(buf));
}

/* Keeps the last TAIL_MAX bytes the child wrote to stderr. */
static void on_err_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b) {
  tg_remote_t *rt = s->data;
  if (nread < 0) {
    if (!uv_is_closing((uv_handle_t *)s)) uv_close((uv_handle_t *)s, on_err_closed);
    return;
  }
  size_t n = (size_t)nread;
  const char *p = b->base;
  if (n >= TAIL_MAX) {
    p += n - (TAIL_MAX - 1);
    n = TAIL_MAX - 1;
    rt->tail_len = 0;
  }
  if (rt->tail_len + n >= TAIL_MAX) {
    size_t drop = rt->tail_len + n - (TAIL_MAX - 1);
    memmove(rt->tail, rt->tail + drop, rt->tail_len - drop);
    rt->tail_len -= drop;
  }
  memcpy(rt->tail + rt->tail_len, p, n);
  rt->tail_len += n;
  rt->tail[rt->tail_len] = 0;
}

/* The last non-empty line of the child's stderr, without control bytes. */
static void last_line(const tg_remote_t *rt, char *out, size_t cap) {
  char tmp[TAIL_MAX];
  memcpy(tmp, rt->tail, rt->tail_len);
  tmp[rt->tail_len] = 0;
  char *end = tmp + rt->tail_len;
  while (end > tmp && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
    *--end = 0;
  char *start = end;
  while (start > tmp && start[-1] != '\n') start--;
  tg_printable(out, cap, start);
}

static void ssh_detail(tg_remote_t *rt) {
  char line[400];
  last_line(rt, line, sizeof(line));
  char how[64] = "";
  if (rt->term_signal)
    snprintf(how, sizeof(how), "ssh was killed by signal %d", rt->term_signal);
  else if (rt->exit_status)
    snprintf(how, sizeof(how), "ssh exited with status %lld",
             (long long)rt->exit_status);
  snprintf(rt->detail, sizeof(rt->detail), "%s%s%s", how,
           how[0] && line[0] ? ": " : "", line);
}

static void on_kill_timer(uv_timer_t *t) {
  tg_remote_t *rt = t->data;
  if (!rt->proc_running) return;
  if (rt->kill_stage++ == 0) {
    uv_process_kill(&rt->proc, SIGTERM);
    uv_timer_start(&rt->timer, on_kill_timer, SSH_KILL_AFTER_MS, 0);
  } else {
    uv_process_kill(&rt->proc, SIGKILL);
  }
}

static void schedule_kill(tg_remote_t *rt, uint64_t after_ms) {
  uv_timer_start(&rt->timer, on_kill_timer, after_ms, 0);
}

/* Splits $TRACEGATE_SSH (default "ssh") on blanks and appends the
 * arguments that reach |t|'s relay. */
static int ssh_argv(const tg_target_t *t, char *words, size_t cap, char **argv,
                    char *port, char *dest) {
  const char *cmd = getenv(TG_SSH_ENV);
  if (!cmd || !*cmd) cmd = "ssh";
  snprintf(words, cap, "%s", cmd);
  size_t n = 0;
  for (char *save = NULL, *w = strtok_r(words, " \t", &save); w;
       w = strtok_r(NULL, " \t", &save)) {
    if (n + 8 >= SSH_MAX_ARGS) return -E2BIG;
    argv[n++] = w;
  }
  if (n == 0) return -EINVAL;
  /* No password prompts: many hosts at once, and a progress display. */
  argv[n++] = "-o";
  argv[n++] = "BatchMode=yes";
  if (t->port) {
    argv[n++] = "-p";
    snprintf(port, 12, "%u", t->port % 100000u);
    argv[n++] = port;
  }
  snprintf(dest, 330, "%s%s%s", t->user, t->user[0] ? "@" : "", t->host);
  argv[n++] = dest;
  argv[n++] = REMOTE_RELAY_CMD;
  argv[n++] = "--stdio";
  argv[n] = NULL;
  return 0;
}

static int open_ssh(const tg_remote_env_t *env, const tg_target_t *t,
                    const tg_consumer_cbs_t *cbs, void *data, tg_consumer_t **c,
                    tg_remote_t *rt, char *err, size_t n) {
  char words[512], port[12], dest[330];
  char *argv[SSH_MAX_ARGS];
  int rv = ssh_argv(t, words, sizeof(words), argv, port, dest);
  if (rv < 0) {
    snprintf(err, n, "$" TG_SSH_ENV " is not a usable command");
    return rv;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    rv = -errno;
    snprintf(err, n, "cannot make a socket pair: %s", strerror(errno));
    return rv;
  }
  uv_pipe_init(env->loop, &rt->err, 0);
  rt->err.data = rt;
  rt->err_closed = false;
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_INHERIT_FD, .data.fd = sv[1]},
      {.flags = UV_INHERIT_FD, .data.fd = sv[1]},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
       .data.stream = (uv_stream_t *)&rt->err},
  };
  /* Detached (its own session): Ctrl-C on the terminal is ours to handle,
   * it must not kill the links. */
  uv_process_options_t o = {.exit_cb = on_child_exit,
                            .file = argv[0],
                            .args = argv,
                            .flags = UV_PROCESS_DETACHED,
                            .stdio_count = 3,
                            .stdio = stdio};
  rt->proc.data = rt;
  rt->proc_closed = false;
  rv = uv_spawn(env->loop, &rt->proc, &o);
  close(sv[1]);
  if (rv < 0) {
    close(sv[0]);
    snprintf(err, n, "cannot run %s: %s", argv[0], uv_strerror(rv));
    uv_close((uv_handle_t *)&rt->proc, on_proc_closed);
    uv_close((uv_handle_t *)&rt->err, on_err_closed);
    return rv;
  }
  rt->proc_running = true;
  uv_read_start((uv_stream_t *)&rt->err, on_err_alloc, on_err_read);
  rv = tg_pipe_transport_open(env->loop, &rt->pt, sv[0], sv[0], 0);
  if (rv < 0) {
    snprintf(err, n, "cannot use the ssh socket: %s", tg_strerror(rv));
    schedule_kill(rt, 0);
    return rv;
  }
  rt->pt_open = true;
  tg_zstd_transport_init(env->loop, &rt->z, &rt->pt.base);
  rt->z.base.cbs = &placeholder_cbs;
  rt->z.base.data = rt;
  rv = tg_consumer_open(env->loop, &rt->z.base, false, cbs, data, c);
  if (rv < 0) {
    snprintf(err, n, "cannot talk to ssh: %s", tg_strerror(rv));
    tg_transport_close(&rt->z.base, rv); /* placeholder_close releases */
    return rv;
  }
  return 0;
}

/* --- common -------------------------------------------------------------- */

int tg_remote_open(const tg_remote_env_t *env, const tg_target_t *t,
                   const tg_consumer_cbs_t *cbs, void *data, tg_consumer_t **c,
                   tg_remote_t **out, char *err, size_t n) {
  tg_remote_t *rt = remote_new(env->loop, t->kind);
  if (!rt) {
    snprintf(err, n, "out of memory");
    return -ENOMEM;
  }
  rt->ca_setting = env->ca_setting;
  int rv = t->kind == TG_TARGET_SSH ? open_ssh(env, t, cbs, data, c, rt, err, n)
                                     : open_tls(env, t, cbs, data, c, rt, err, n);
  if (rv < 0) {
    if (!rt->pt_open && !rt->released) {
      /* Nothing owns it: it goes once its handles are closed. */
      rt->released = true;
      maybe_free(rt);
    }
    return rv;
  }
  *out = rt;
  return 0;
}

/* A TLS failure in words a user acts on, rather than mbedtls's: the
 * handshake errors a client meets are told apart by the mbedtls code that
 * tls.c puts in its text and by the certificate verification flags. */
static void plain_tls_failure(const char *raw, const char *ca_setting,
                              char *out, size_t n) {
  const char *sentence = NULL;
  tg_notice_t code = TG_N_TLS_FAILED;
  if (strstr(raw, "(-0x7780)")) {
    code = TG_N_TLS_CLIENT_CERT_REFUSED;
    /* MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE: the relay hung up on us. */
    sentence = "the relay did not accept this client certificate (give "
               "--cert/--key of a certificate signed by the relay's CA, "
               "not revoked or expired)";
  } else if (strstr(raw, "(-0x2700)")) {
    /* MBEDTLS_ERR_X509_CERT_VERIFY_FAILED: we refused the relay's. */
    if (strstr(raw, "Common Name") || strstr(raw, "CN")) {
      code = TG_N_TLS_RELAY_NAME_MISMATCH;
      sentence = "the relay's certificate is not for this host name "
                 "(connect by the name in it, or give --tls-server-name)";
    } else if (strstr(raw, "expired")) {
      code = TG_N_TLS_RELAY_CERT_EXPIRED;
      sentence = "the relay's certificate has expired";
    } else {
      snprintf(out, n,
               "%s the relay's certificate is not signed by the CA given "
               "with %s", TG_NOTE(TLS_RELAY_CA_MISMATCH),
               ca_setting ? ca_setting : "--ca");
      return;
    }
  }
  snprintf(out, n, "%s %s", tg_notice_tag(code), sentence ? sentence : raw);
}

static void on_report(uv_timer_t *t) {
  tg_remote_t *rt = t->data;
  maybe_free(rt);
}

tg_zstd_transport_t *tg_remote_zstd(tg_remote_t *rt) { return &rt->z; }

void tg_remote_release(tg_remote_t *rt, tg_remote_gone_cb cb, void *ctx) {
  rt->gone_cb = cb;
  rt->gone_ctx = ctx;
  rt->released = true;
  /* The consumer's on_close ran: the transport is closed. */
  rt->pt_open = false;
  if (rt->kind == TG_TARGET_TLS) {
    /* The relay's own words about a refusal come first. */
    if (rt->peek.text[0])
      snprintf(rt->detail, sizeof(rt->detail), "%s", rt->peek.text);
    else
      plain_tls_failure(tg_tls_chan_error(rt->ch), rt->ca_setting, rt->detail,
                        sizeof(rt->detail));
    tg_tls_chan_free(rt->ch);
    rt->ch = NULL;
    /* Reported from the loop, never inside this call. */
    uv_timer_start(&rt->timer, on_report, 0, 0);
    return;
  }
  if (rt->proc_running)
    schedule_kill(rt, SSH_TERM_AFTER_MS);
  else
    settle(rt);
}

/* --- a fleet's dialer --------------------------------------------------------- */

static int dial_open(void *ctx, tg_fleet_host_t *h, const tg_consumer_cbs_t *cbs,
                     tg_consumer_t **consumer, void **conn, char *err,
                     size_t n) {
  tg_remote_t *rt = NULL;
  int rv = tg_remote_open(ctx, h->target, cbs, h, consumer, &rt, err, n);
  *conn = rt;
  return rv;
}

static void dial_release(void *conn, tg_fleet_gone_cb cb, void *ctx) {
  tg_remote_release(conn, cb, ctx);
}

static bool dial_resumed(const void *conn) { return tg_remote_resumed(conn); }

static tg_zstd_transport_t *dial_zstd(void *conn) {
  return tg_remote_zstd(conn);
}

tg_fleet_dialer_t tg_remote_dialer(tg_remote_env_t *env) {
  return (tg_fleet_dialer_t){.open = dial_open,
                             .release = dial_release,
                             .resumed = dial_resumed,
                             .zstd = dial_zstd,
                             .ctx = env};
}
