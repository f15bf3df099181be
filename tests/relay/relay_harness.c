/* The relay test harness: certificates, the relay process, the loop and
 * remote clients. */
#include "relay_harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_notice.h"
#include "test_proc.h"
#include "test_wait.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "tracegate/error.h"

#ifndef TRACEGATE_RELAY_PATH
#error "TRACEGATE_RELAY_PATH must name the tracegate-relay binary"
#endif

static char g_certs[128];
uv_loop_t *g_loop;

/* --- certificates ------------------------------------------------------------ */

int certs_setup(void) {
  static const char *const steps[] = {
      "ca pki", "host pki localhost --ip 127.0.0.1",
      "client pki alice --role record", "client pki bob --role observe",
      "client pki carol --role record", "client pki dave",
      "client pki old --expired --role record",
      "client pki rev --role record", "revoke pki rev", "ca other",
      "client other eve"};
  if (tg_test_mkdtemp(g_certs, sizeof(g_certs), "relay") < 0) return -1;
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
    if (tg_test_certs(g_certs, steps[i]) < 0) return -1;
  return 0;
}

void certs_teardown(void) {
  if (tg_test_rm_rf(g_certs) < 0) fprintf(stderr, "cannot remove %s\n", g_certs);
}

const char *cert_path(const char *dir, const char *file) {
  static char bufs[8][256];
  static int i;
  char *b = bufs[i++ % 8];
  snprintf(b, 256, "%s/%s/%s", g_certs, dir, file);
  return b;
}

tg_tls_config_t *client_cfg(const char *dir, const char *name,
                            const char *ca_dir) {
  char cert[64], key[64];
  snprintf(cert, sizeof(cert), "%s.pem", name ? name : "");
  snprintf(key, sizeof(key), "%s.key", name ? name : "");
  tg_tls_opts_t o = {
      .server = false,
      .cert_file = name ? cert_path(dir, cert) : NULL,
      .key_file = name ? cert_path(dir, key) : NULL,
      .ca_file = cert_path(ca_dir, "ca.pem"),
  };
  tg_tls_config_t *cfg = NULL;
  char err[256];
  int rv = tg_tls_config_new(&o, &cfg, err, sizeof(err));
  if (rv) fail_msg("tg_tls_config_new: %s: %s", tg_strerror(rv), err);
  return cfg;
}

/* --- files ------------------------------------------------------------------- */

static char *slurp(const char *path) {
  FILE *f = fopen(path, "re");
  if (!f) return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 2) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
      }
      buf = nb;
    }
  }
  fclose(f);
  if (buf) buf[len] = 0;
  return buf;
}

size_t file_count(const char *path, const char *needle) {
  char *s = slurp(path);
  size_t n = 0;
  for (const char *p = s; p && (p = strstr(p, needle)) != NULL; p++) n++;
  free(s);
  return n;
}

/* --- the audit trail ------------------------------------------------------- */

/* Whether the field at |*at| (up to a blank) is |want| (NULL: any); moves
 * |*at| past it and the blank after it. */
static bool field_is(const char **at, const char *want) {
  const char *p = *at, *e = p + strcspn(p, " \n");
  bool ok = !want || (strlen(want) == (size_t)(e - p) &&
                      !memcmp(p, want, (size_t)(e - p)));
  *at = *e == ' ' ? e + 1 : e;
  return ok;
}

/* |line| (one line, NUL-terminated) matches |w|; *reason is its REASON. */
static bool audit_line_is(const char *line, const audit_want_t *w,
                          const char **reason) {
  const char *at = line;
  bool ok = field_is(&at, NULL) && field_is(&at, w->who) &&
            field_is(&at, NULL) && field_is(&at, w->what) &&
            field_is(&at, w->verdict) &&
            field_is(&at, w->code ? tg_notice_tag(w->code) : NULL);
  *reason = at;
  return ok && (!w->data || strstr(at, w->data));
}

/* Calls each(line's REASON, ctx) for each line of |text| matching |w|;
 * returns how many. */
static size_t audit_each(const char *text, const audit_want_t *w,
                         void (*each)(const char *reason, void *ctx),
                         void *ctx) {
  char *s = strdup(text ? text : "");
  size_t n = 0;
  for (char *line = s, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    const char *reason;
    if (audit_line_is(line, w, &reason)) {
      n++;
      if (each) each(reason, ctx);
    }
    if (!next) break;
  }
  free(s);
  return n;
}

size_t audit_count(const char *path, audit_want_t w) {
  char *s = slurp(path);
  size_t n = audit_each(s, &w, NULL, NULL);
  free(s);
  return n;
}

static bool has_audit(const char *text, void *arg) {
  return audit_each(text, arg, NULL, NULL) > 0;
}

bool audit_wait(const char *path, audit_want_t w, int timeout_ms) {
  return tg_test_wait_file_until(path, has_audit, &w, timeout_ms);
}

void audit_expect(const relay_proc_t *rp, audit_want_t w) {
  if (audit_wait(rp->audit, w, STEP_MS)) return;
  relay_dump(rp);
  fail_msg("no audit line: %s %s %s %s ... %s", w.who ? w.who : "*",
           w.what ? w.what : "*", w.verdict ? w.verdict : "*",
           w.code ? tg_notice_tag(w.code) : "*", w.data ? w.data : "");
}

static void add_count(const char *reason, void *ctx) {
  char *end = NULL;
  unsigned long long n = strtoull(reason, &end, 10);
  if (end == reason) fail_msg("no count at the start of '%s'", reason);
  *(uint64_t *)ctx += n;
}

uint64_t audit_sum(const char *path, audit_want_t w) {
  char *s = slurp(path);
  uint64_t sum = 0;
  audit_each(s, &w, add_count, &sum);
  free(s);
  return sum;
}

int file_replace(const char *path, const char *text) {
  char tmp[300];
  snprintf(tmp, sizeof(tmp), "%s.new", path);
  FILE *f = fopen(tmp, "we");
  if (!f) return -1;
  fputs(text, f);
  if (fclose(f) != 0) return -1;
  return rename(tmp, path);
}

/* --- the relay process --------------------------------------------------------- */

static int prepare(relay_proc_t *rp) {
  memset(rp, 0, sizeof(*rp));
  rp->exit_status = -1;
  if (tg_test_mkdtemp(rp->dir, sizeof(rp->dir), "relayd") < 0) return -1;
  snprintf(rp->authz, sizeof(rp->authz), "%s/authz", rp->dir);
  snprintf(rp->log, sizeof(rp->log), "%s/relay.log", rp->dir);
  snprintf(rp->audit, sizeof(rp->audit), "%s/audit.log", rp->dir);
  char *a = slurp(cert_path("pki", "authz"));
  if (!a) return -1;
  int rv = file_replace(rp->authz, a);
  free(a);
  return rv;
}

/* Forks the relay with |argv|; stderr to the log; |in|/|out| (or -1)
 * become its stdin/stdout; |keep| stays open in the child. */
static pid_t spawn(const relay_proc_t *rp, char *const *argv, int in, int out,
                   int keep) {
  int err = open(rp->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (err < 0) return -1;
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_RELAY_PATH;
  s.argv = (const char *const *)argv;
  s.stderr_fd = err;
  if (in >= 0) s.stdin_fd = in;
  if (out >= 0) s.stdout_fd = out;
  s.keep_fd = keep;
  pid_t pid = tg_test_spawn(&s);
  close(err);
  return pid;
}

int relay_start(relay_proc_t *rp, const char *consumer_sock,
                const char *const *extra) {
  if (prepare(rp) < 0) return -1;
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) < 0) return -1;
  char fdarg[16];
  snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
  const char *lvl = getenv("TG_TEST_LOG_LEVEL");
  const char *argv[40] = {
      "tracegate-relay", "--listen", "127.0.0.1:0", "--consumer-socket",
      consumer_sock, "--cert", cert_path("pki", "localhost.pem"), "--key",
      cert_path("pki", "localhost.key"), "--ca", cert_path("pki", "ca.pem"),
      "--crl", cert_path("pki", "crl.pem"), "--authz", rp->authz,
      "--audit-log", rp->audit, "--ready-fd", fdarg, "--log-level",
      lvl ? lvl : "info"};
  size_t n = 21;
  for (size_t i = 0; extra && extra[i] && n < 39; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  rp->pid = spawn(rp, (char *const *)argv, -1, -1, pfd[1]);
  close(pfd[1]);
  if (rp->pid < 0) {
    close(pfd[0]);
    return -1;
  }
  char buf[32] = "";
  int got = tg_test_wait_line(pfd[0], "ready", STEP_MS, buf, sizeof(buf));
  close(pfd[0]);
  if (got != 1 || sscanf(buf, "ready %d", &rp->port) != 1 || rp->port <= 0) {
    relay_dump(rp);
    relay_stop(rp);
    return -1;
  }
  return 0;
}

int relay_start_stdio(relay_proc_t *rp, const char *consumer_sock,
                      int *to_relay, int *from_relay) {
  if (prepare(rp) < 0) return -1;
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) < 0) return -1;
  if (pipe2(out, O_CLOEXEC) < 0) {
    close(in[0]);
    close(in[1]);
    return -1;
  }
  const char *argv[] = {"tracegate-relay", "--stdio", "--consumer-socket",
                        consumer_sock, "--log-level", "info", NULL};
  rp->pid = spawn(rp, (char *const *)argv, in[0], out[1], -1);
  close(in[0]);
  close(out[1]);
  if (rp->pid < 0) {
    close(in[1]);
    close(out[0]);
    return -1;
  }
  *to_relay = in[1];
  *from_relay = out[0];
  return 0;
}

int relay_wait_exit(relay_proc_t *rp, int timeout_ms) {
  if (rp->pid <= 0) return rp->exit_status;
  rp->exit_status = tg_test_reap(rp->pid, timeout_ms);
  rp->pid = 0;
  return rp->exit_status;
}

int relay_terminate(relay_proc_t *rp) {
  if (rp->pid <= 0) return rp->exit_status;
  rp->exit_status = tg_test_stop(rp->pid, SIGTERM, STEP_MS);
  rp->pid = 0;
  return rp->exit_status;
}

int relay_stop(relay_proc_t *rp) {
  int st = relay_terminate(rp);
  if (getenv("TG_TEST_DUMP")) relay_dump(rp); /* for a human reading along */
  if (rp->dir[0] && tg_test_rm_rf(rp->dir) < 0)
    fprintf(stderr, "cannot remove %s\n", rp->dir);
  return st;
}

void relay_dump(const relay_proc_t *rp) {
  char *l = slurp(rp->log), *a = slurp(rp->audit);
  fprintf(stderr, "--- relay log ---\n%s--- audit ---\n%s---\n", l ? l : "",
          a ? a : "");
  free(l);
  free(a);
}

/* --- the loop ------------------------------------------------------------------- */

void loop_setup(void) {
  g_loop = malloc(sizeof(*g_loop));
  assert_non_null(g_loop);
  assert_int_equal(uv_loop_init(g_loop), 0);
}

void loop_teardown(void) {
  uv_run(g_loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(g_loop), 0);
  free(g_loop);
  g_loop = NULL;
}


bool run_until(bool (*cond)(void *), void *arg, int ms) {
  return tg_test_run_loop_until(g_loop, cond, arg, ms);
}

/* --- remote clients ------------------------------------------------------------- */

static void rc_on_close(tg_ipc_client_t *c, int status) {
  rc_t *rc = c->data;
  rc->closed = true;
  rc->close_status = status;
  if (rc->ch)
    snprintf(rc->error, sizeof(rc->error), "%s", tg_tls_chan_error(rc->ch));
}

static const tg_ipc_client_cbs_t rc_cbs = {.on_close = rc_on_close};

static void rc_on_handshake(tg_tls_chan_t *ch, int status) {
  tg_ipc_client_t *c = tg_tls_chan_transport(ch)->data;
  rc_t *rc = c->data;
  rc->hs_done = true;
  rc->hs_status = status;
  snprintf(rc->error, sizeof(rc->error), "%s", tg_tls_chan_error(ch));
}

/* Placeholders until tg_ipc_client_init() takes the transport over. */
static int nop_frame(tg_transport_t *t, const uint8_t *p, size_t n) {
  (void)t;
  (void)p;
  (void)n;
  return 0;
}
static void nop_close(tg_transport_t *t, int s) {
  (void)t;
  (void)s;
}
static const tg_transport_cbs_t nop_cbs = {.on_frame = nop_frame,
                                           .on_close = nop_close};

static bool hs_or_closed(void *arg) {
  rc_t *rc = arg;
  return rc->hs_done || rc->closed;
}

int rc_connect(rc_t *rc, int port, tg_tls_config_t *cfg) {
  memset(rc, 0, sizeof(*rc));
  char hp[32];
  snprintf(hp, sizeof(hp), "127.0.0.1:%d", port);
  tg_tls_chan_opts_t o = {.on_handshake = rc_on_handshake,
                          .handshake_timeout_ms = STEP_MS};
  int rv = tg_tls_chan_connect(g_loop, hp, cfg, "localhost", &o, &nop_cbs,
                               NULL, &rc->ch);
  assert_int_equal(rv, 0);
  tg_ipc_client_init(&rc->ipc, tg_tls_chan_transport(rc->ch), &rc_cbs, rc);
  assert_true(run_until(hs_or_closed, rc, STEP_MS));
  return rc->hs_done ? rc->hs_status : rc->close_status;
}

int rc_open_pipe(rc_t *rc, int in_fd, int out_fd) {
  memset(rc, 0, sizeof(*rc));
  rc->is_pipe = true;
  int rv = tg_pipe_transport_open(g_loop, &rc->pipe, in_fd, out_fd, 0);
  if (rv < 0) return rv;
  tg_ipc_client_init(&rc->ipc, &rc->pipe.base, &rc_cbs, rc);
  rc->hs_done = true;
  return 0;
}

typedef struct bind_wait {
  bool done;
  int status;
  const tg_ipc_remote_service_t *svc;
  char said[sizeof(((tg_ipc_client_t *)0)->notice)];
} bind_wait_t;

static void on_bound(tg_ipc_client_t *c, void *ctx, int status,
                     const tg_ipc_remote_service_t *svc) {
  bind_wait_t *w = ctx;
  w->done = true;
  w->status = status;
  w->svc = svc;
  snprintf(w->said, sizeof(w->said), "%s", tg_ipc_client_notice(c));
}

static bool bind_done(void *arg) { return ((bind_wait_t *)arg)->done; }

int rc_bind(rc_t *rc, const char *service) {
  bind_wait_t w = {0};
  int rv = tg_ipc_client_bind(&rc->ipc, service, on_bound, &w);
  if (rv < 0) return rv;
  if (!run_until(bind_done, &w, STEP_MS)) {
    /* The callback must not outlive |w|: close, which fails it now. */
    tg_ipc_client_close(&rc->ipc, 0);
    run_until(bind_done, &w, STEP_MS);
    return -ETIMEDOUT;
  }
  if (w.status == 0 && !strcmp(service, "ConsumerPort")) rc->cp = w.svc;
  if (w.status == 0 && !strcmp(service, "TracegateRelay")) rc->relay = w.svc;
  snprintf(rc->bind_said, sizeof(rc->bind_said), "%s", w.said);
  return w.status;
}

static bool closed_cond(void *arg) { return ((rc_t *)arg)->closed; }

bool rc_wait_closed(rc_t *rc, int ms) { return run_until(closed_cond, rc, ms); }

void rc_close(rc_t *rc) {
  if (!rc->closed) tg_ipc_client_close(&rc->ipc, 0);
  assert_true(run_until(closed_cond, rc, STEP_MS));
  if (rc->ch) tg_tls_chan_free(rc->ch);
  rc->ch = NULL;
}

/* --- calls ----------------------------------------------------------------------- */

void call_init(call_t *c) {
  memset(c, 0, sizeof(*c));
  tg_buf_init(&c->last, 0);
  tg_buf_init(&c->partial, 0);
}

void call_free(call_t *c) {
  tg_buf_free(&c->last);
  tg_buf_free(&c->partial);
}

bool call_done(void *c) { return ((call_t *)c)->done; }

static void collect_packet(call_t *c) {
  c->n_packets++;
  Perfetto__Protos__TracePacket *pk = perfetto__protos__trace_packet__unpack(
      NULL, tg_buf_size(&c->partial),
      tg_buf_size(&c->partial) ? tg_buf_begin(&c->partial) : NULL);
  assert_non_null(pk);
  if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING) {
    uint32_t v = pk->for_testing->seq_value;
    if (c->n_values > 0 && v != c->values[(c->n_values - 1) % 64] + 1)
      c->out_of_order = true;
    c->values[c->n_values % 64] = v; /* the last 64 once there are more */
    c->n_values++;
  }
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  tg_buf_reset(&c->partial);
}

static void on_reply(tg_ipc_client_t *ipc, void *ctx, int status, bool more,
                     const uint8_t *reply, size_t len) {
  (void)ipc;
  call_t *c = ctx;
  c->replies++;
  c->status = status;
  tg_buf_reset(&c->last);
  if (len) assert_int_equal(tg_buf_append(&c->last, reply, len), 0);
  if (c->read_packets && status == 0 && len) {
    Perfetto__Protos__ReadBuffersResponse *rb =
        perfetto__protos__read_buffers_response__unpack(NULL, len, reply);
    assert_non_null(rb);
    for (size_t i = 0; i < rb->n_slices; i++) {
      const Perfetto__Protos__ReadBuffersResponse__Slice *s = rb->slices[i];
      if (s->data.len)
        assert_int_equal(tg_buf_append(&c->partial, s->data.data, s->data.len), 0);
      if (s->last_slice_for_packet) collect_packet(c);
    }
    perfetto__protos__read_buffers_response__free_unpacked(rb, NULL);
  }
  if (!more) c->done = true;
}

int rc_start(rc_t *rc, const tg_ipc_remote_service_t *svc, const char *method,
             const ProtobufCMessage *args, call_t *c) {
  uint8_t buf[4096];
  size_t n = 0;
  if (args) {
    n = protobuf_c_message_get_packed_size(args);
    assert_true(n <= sizeof(buf));
    protobuf_c_message_pack(args, buf);
  }
  c->read_packets = !strcmp(method, "ReadBuffers");
  return tg_ipc_client_invoke(&rc->ipc, svc, method, buf, n, -1, on_reply, c,
                              NULL);
}

int rc_call(rc_t *rc, const tg_ipc_remote_service_t *svc, const char *method,
            const ProtobufCMessage *args,
            const ProtobufCMessageDescriptor *desc, ProtobufCMessage **reply) {
  call_t c;
  call_init(&c);
  if (reply) *reply = NULL;
  int rv = rc_start(rc, svc, method, args, &c);
  if (rv < 0) {
    call_free(&c);
    return rv;
  }
  if (!run_until(call_done, &c, STEP_MS)) {
    tg_ipc_client_close(&rc->ipc, 0); /* fails the call: |c| goes away */
    run_until(call_done, &c, STEP_MS);
    call_free(&c);
    return -ETIMEDOUT;
  }
  if (desc && reply && c.replies)
    *reply = protobuf_c_message_unpack(
        desc, NULL, tg_buf_size(&c.last),
        tg_buf_size(&c.last) ? tg_buf_begin(&c.last) : (const uint8_t *)"");
  rv = c.status;
  call_free(&c);
  return rv;
}

/* --- the fixture ------------------------------------------------------------------ */

relay_fx_t *relay_fx_start(void **state, const char *const *service_args) {
  relay_fx_t *f = calloc(1, sizeof(*f));
  if (!f) return NULL;
  int rv = service_args ? test_service_start_with(&f->ts, service_args, STEP_MS)
                        : test_service_start(&f->ts);
  if (rv < 0) {
    free(f);
    return NULL;
  }
  loop_setup();
  *state = f;
  return f;
}

int relay_fx_setup_service(void **state) {
  return relay_fx_start(state, NULL) ? 0 : -1;
}

int relay_fx_setup(void **state) {
  relay_fx_t *f = relay_fx_start(state, NULL);
  if (!f || relay_start(&f->rp, f->ts.consumer_sock, NULL) < 0) return -1;
  f->relay_up = true;
  return 0;
}

int relay_fx_teardown(void **state) {
  relay_fx_t *f = *state;
  int rv = 0;
  if (f->relay_up) {
    int st = relay_stop(&f->rp);
    /* A clean exit (no sanitizer report either) is part of the contract. */
    if (st != f->want_relay_status) {
      fprintf(stderr, "relay exit status %d\n", st);
      rv = -1;
    }
  }
  loop_teardown();
  if (test_service_stop(&f->ts) != 0) rv = -1;
  free(f);
  return rv;
}

int relay_fx_group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  return certs_setup();
}

int relay_fx_group_teardown(void **state) {
  (void)state;
  certs_teardown();
  return 0;
}

void relay_fx_connect(relay_fx_t *f, rc_t *rc, const char *name,
                      tg_tls_config_t **cfg) {
  *cfg = client_cfg("pki", name, "pki");
  int hs = rc_connect(rc, f->rp.port, *cfg);
  if (hs != 0) {
    relay_dump(&f->rp);
    fail_msg("%s: handshake %s: %s", name, tg_strerror(hs), rc->error);
  }
  assert_int_equal(rc_bind(rc, "ConsumerPort"), 0);
}

void relay_fx_disconnect(rc_t *rc, tg_tls_config_t *cfg) {
  rc_close(rc);
  tg_tls_config_free(cfg);
}

int rc_key_call(rc_t *rc, const char *method, const char *key) {
  Perfetto__Protos__DetachRequest d = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
  d.key = (char *)key; /* Detach and Attach requests have the same shape */
  return rc_call(rc, rc->cp, method, &d.base, NULL, NULL);
}
