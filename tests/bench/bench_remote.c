/* Relay children and remote consumers; see bench_remote.h. */
#include "bench_remote.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_children.h"
#include "tracegate/error.h"

#ifndef TRACEGATE_RELAY_PATH
#error "TRACEGATE_RELAY_PATH must name the tracegate-relay binary"
#endif

int bench_relay_spawn(bench_relay_t *r, const char *dir, unsigned idx,
                      const char *consumer_sock) {
  return bench_relay_spawn_with(r, dir, idx, consumer_sock, NULL);
}

int bench_relay_spawn_with(bench_relay_t *r, const char *dir, unsigned idx,
                           const char *consumer_sock,
                           const char *const extra[]) {
  memset(r, 0, sizeof(*r));
  r->ready_fd = -1;
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) < 0) return -1;
  char cert[160], key[160], ca[160], crl[160], authz[160], audit[160],
      fdarg[16];
  snprintf(cert, sizeof(cert), "%s/pki/%s.pem", dir, BENCH_HOST);
  snprintf(key, sizeof(key), "%s/pki/%s.key", dir, BENCH_HOST);
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", dir);
  snprintf(crl, sizeof(crl), "%s/pki/crl.pem", dir);
  snprintf(authz, sizeof(authz), "%s/pki/authz", dir);
  snprintf(audit, sizeof(audit), "%s/relay%u.audit", dir, idx);
  snprintf(r->log, sizeof(r->log), "%s/relay%u.log", dir, idx);
  snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
  const char *argv[32] = {TRACEGATE_RELAY_PATH,
                          "--listen",
                          "127.0.0.1:0",
                          "--consumer-socket",
                          consumer_sock,
                          "--cert",
                          cert,
                          "--key",
                          key,
                          "--ca",
                          ca,
                          "--crl",
                          crl,
                          "--authz",
                          authz,
                          "--audit-log",
                          audit,
                          "--ready-fd",
                          fdarg,
                          "--log-level",
                          "warn",
                          NULL};
  size_t n = 21;
  for (size_t i = 0; extra && extra[i] && n + 1 < 32; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  r->pid = bench_spawn(argv, pfd[1], r->log);
  close(pfd[1]);
  if (r->pid < 0) {
    close(pfd[0]);
    return -1;
  }
  r->ready_fd = pfd[0];
  return 0;
}

int bench_relay_wait(bench_relay_t *r, int timeout_ms) {
  char buf[64];
  int rv = bench_read_ready(r->ready_fd, timeout_ms, buf, sizeof(buf));
  close(r->ready_fd);
  r->ready_fd = -1;
  if (rv == 0 && sscanf(buf, "ready %d", &r->port) == 1 && r->port > 0)
    return 0;
  fprintf(stderr, "bench: tracegate-relay did not get ready; its log:\n");
  char cmd[200];
  snprintf(cmd, sizeof(cmd), "cat '%s' >&2", r->log);
  if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
  return -1;
}

tg_tls_config_t *bench_client_tls(const char *dir) {
  char cert[160], key[160], ca[160];
  snprintf(cert, sizeof(cert), "%s/pki/%s.pem", dir, BENCH_CLIENT);
  snprintf(key, sizeof(key), "%s/pki/%s.key", dir, BENCH_CLIENT);
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", dir);
  tg_tls_opts_t o = {.server = false, .cert_file = cert, .key_file = key,
                     .ca_file = ca};
  tg_tls_config_t *cfg = NULL;
  char err[256];
  if (tg_tls_config_new(&o, &cfg, err, sizeof(err)) != 0) {
    fprintf(stderr, "bench: client TLS config: %s\n", err);
    return NULL;
  }
  return cfg;
}

/* The channel's callbacks until the consumer takes them over, and again
 * if tg_consumer_open() hands the channel back: then nobody else frees it. */
static int orphan_frame(tg_transport_t *t, const uint8_t *p, size_t n) {
  (void)t, (void)p, (void)n;
  return 0;
}

static void orphan_close(tg_transport_t *t, int status) {
  (void)status;
  tg_tls_chan_free(tg_tls_chan_from_transport(t));
}

static const tg_transport_cbs_t orphan_cbs = {.on_frame = orphan_frame,
                                              .on_close = orphan_close};

/* The outcome reaches the consumer anyway (bound, or closed). */
static void on_handshake(tg_tls_chan_t *ch, int status) {
  if (status != 0)
    fprintf(stderr, "bench: TLS handshake: %s: %s\n", tg_strerror(status),
            tg_tls_chan_error(ch));
}

int bench_remote_open(uv_loop_t *loop, int port, tg_tls_config_t *cfg,
                      const tg_consumer_cbs_t *cbs, void *data,
                      tg_consumer_t **c, tg_tls_chan_t **ch) {
  char hp[32];
  snprintf(hp, sizeof(hp), "127.0.0.1:%d", port);
  tg_tls_chan_opts_t o = {.on_handshake = on_handshake};
  int rv = tg_tls_chan_connect(loop, hp, cfg, BENCH_HOST, &o, &orphan_cbs,
                               NULL, ch);
  if (rv < 0) return rv;
  tg_transport_t *t = tg_tls_chan_transport(*ch);
  rv = tg_consumer_open(loop, t, false, cbs, data, c);
  if (rv < 0) {
    tg_transport_close(t, rv); /* orphan_close frees it */
    *ch = NULL;
  }
  return rv;
}

static void on_deadline(uv_timer_t *t) { *(bool *)t->data = true; }

bool bench_run_until(uv_loop_t *loop, bool (*cond)(void *), void *arg,
                     int timeout_ms) {
  bool expired = false;
  uv_timer_t t;
  uv_timer_init(loop, &t);
  t.data = &expired;
  uv_timer_start(&t, on_deadline, (uint64_t)timeout_ms, 0);
  while (!cond(arg) && !expired) uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT); /* the timer's close completes: |t| is ours */
  return cond(arg);
}
