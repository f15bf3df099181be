/* The TLS module (tls/session.h, tls/transport.h, tls/dial.h), end to end
 * on loopback in one loop.
 *
 * Certificates are made at test time with deploy/certs/tg-certs in a
 * temporary directory: a CA "pki" (server relay.test, clients alice, carol,
 * an expired one and a revoked one) and a second CA "other" (client eve,
 * a server also called relay.test). Each test builds a world: a loop, a
 * listener on 127.0.0.1:0 (or [::1]:0), a guard timer that bounds it, and
 * clients that are tg_tls_chan, raw TCP, or raw TLS on tg_tls sessions.
 * Outcomes are asserted from the statuses passed to on_handshake and
 * on_close, never from sleeps; every handle is closed and
 * uv_loop_close() must succeed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_notice.h"
#include "test_proc.h"
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <uv.h>

#include "abi/ipc_frame.h"
#include "tracegate/pb_wire.h"
#include "tls/ecdsa.h"
#include "tls/paths.h"
#include "tls/session.h"
#include "tls/dial.h"
#include "tls/transport.h"
#include "tls/transport_internal.h"
#include "tracegate/error.h"
#include "common/log.h"

#define GUARD_MS 20000
#define MAX_PEERS 4
#define KIND_BULK 1u
#define KIND_CTL 2u

static char g_dir[128];
static char g_last_warn[TG_LOG_LINE_MAX];

/* --- certificates -------------------------------------------------------- */

static int certs(const char *args) { return tg_test_certs(g_dir, args); }

static void log_sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  if (level <= TG_LOG_WARN)
    snprintf(g_last_warn, sizeof(g_last_warn), "%s", line);
  fprintf(stderr, "%s\n", line);
}

static int group_setup(void **state) {
  (void)state;
  if (tg_test_mkdtemp(g_dir, sizeof(g_dir), "tls") < 0) return -1;
  tg_log_set_sink(log_sink, NULL);
  if (certs("ca pki") || certs("host pki relay.test --ip 127.0.0.1 --ip ::1") ||
      certs("client pki alice --role record") || certs("client pki carol") ||
      certs("client pki old --expired") || certs("client pki bob") ||
      certs("revoke pki bob") || certs("ca other") ||
      certs("client other eve") || certs("host other relay.test"))
    return -1;
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  tg_log_set_sink(NULL, NULL);
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

static char *path(const char *dir, const char *file) {
  static char bufs[8][256];
  static int i;
  char *b = bufs[i++ % 8];
  snprintf(b, 256, "%s/%s/%s", g_dir, dir, file);
  return b;
}

/* A config from CA directory |dir|: |name|.pem/.key (NULL: none), ca.pem of
 * |ca_dir|, crl.pem when |crl|. */
static tg_tls_config_t *cfg_load(bool server, const char *dir, const char *name,
                                 const char *ca_dir, bool crl) {
  char cert[64], key[64];
  snprintf(cert, sizeof(cert), "%s.pem", name ? name : "");
  snprintf(key, sizeof(key), "%s.key", name ? name : "");
  tg_tls_opts_t o = {
      .server = server,
      .cert_file = name ? path(dir, cert) : NULL,
      .key_file = name ? path(dir, key) : NULL,
      .ca_file = path(ca_dir, "ca.pem"),
      .crl_file = crl ? path(ca_dir, "crl.pem") : NULL,
  };
  tg_tls_config_t *cfg = NULL;
  char err[256];
  int rv = tg_tls_config_new(&o, &cfg, err, sizeof(err));
  if (rv) fail_msg("tg_tls_config_new: %s: %s", tg_strerror(rv), err);
  return cfg;
}

/* --- frames -------------------------------------------------------------- */

/* [len][seq u32][kind u32][pattern...] */
static size_t make_frame(uint8_t *buf, size_t payload, uint32_t seq,
                         uint32_t kind) {
  assert_true(payload >= 8 && payload <= TG_IPC_FRAME_MAX_PAYLOAD);
  tg_pb_write_le32(buf, (uint32_t)payload);
  tg_pb_write_le32(buf + 4, seq);
  tg_pb_write_le32(buf + 8, kind);
  for (size_t i = 8; i < payload; i++)
    buf[4 + i] = (uint8_t)(seq * 7u + i);
  return payload + 4;
}

static bool frame_ok(const uint8_t *p, size_t n, uint32_t *seq,
                     uint32_t *kind) {
  if (n < 8) return false;
  *seq = tg_pb_read_le32(p);
  *kind = tg_pb_read_le32(p + 4);
  for (size_t i = 8; i < n; i++)
    if (p[i] != (uint8_t)(*seq * 7u + i)) return false;
  return true;
}

/* --- the world ----------------------------------------------------------- */

typedef struct world world_t;

typedef struct peer {
  world_t *w;
  tg_tls_chan_t *ch;
  bool hs_done, closed;
  int hs_status, close_status;
  char identity[256];
  char error[600];
  char suite[64];
  uint32_t nframes, bad_frames, drains;
  uint32_t next_seq;     /* next expected bulk/echo sequence number */
  uint32_t bulk_seen;    /* bulk frames received */
  int64_t ctl_at[4];     /* bulk_seen when control frame i arrived */
  uint32_t ctl_seq[4];   /* the sequence number it carried */
  uint32_t nctl;
} peer_t;

typedef struct raw {
  world_t *w;
  uv_tcp_t tcp;
  uv_connect_t conn;
  bool used, closed;
  const uint8_t *send;
  size_t send_len;
  tg_tls_session_t *tls; /* raw TLS client: sends an oversized frame */
  bool tls_sent;
  /* Instead: one good frame, then the end of the stream (FIN), after a
   * close_notify or without one. */
  enum { RAW_OVERSIZED, RAW_FIN_BARE, RAW_FIN_AFTER_CLOSE_NOTIFY } end;
  uv_shutdown_t shut;
} raw_t;

struct world {
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_timer_t guard, aux;
  bool shut, timed_out;
  int port;
  char hostport[64];
  tg_tls_config_t *scfg;
  tg_tls_chan_opts_t sopts, copts;
  peer_t srv[MAX_PEERS], cli[MAX_PEERS];
  int nsrv, ncli;
  raw_t raw;
  bool echo;               /* server echoes every frame */
  bool pause_on_handshake; /* server pauses reading when verified */
  bool (*done)(world_t *w);
  void (*on_cli_handshake)(peer_t *p);
  void (*on_srv_frame)(peer_t *p, const uint8_t *f, size_t n);
  void (*on_cli_drain)(peer_t *p);
  void *ctx;
};

static void shutdown_world(world_t *w);

static void check_done(world_t *w) {
  if (!w->shut && w->done && w->done(w)) shutdown_world(w);
}

static int on_frame(tg_transport_t *t, const uint8_t *p, size_t n) {
  peer_t *pe = t->data;
  world_t *w = pe->w;
  pe->nframes++;
  uint32_t seq, kind;
  if (!frame_ok(p, n, &seq, &kind)) {
    pe->bad_frames++;
  } else if (kind == KIND_CTL) {
    if (pe->nctl < 4) {
      pe->ctl_seq[pe->nctl] = seq;
      pe->ctl_at[pe->nctl++] = pe->bulk_seen;
    }
  } else {
    if (seq != pe->next_seq) pe->bad_frames++;
    pe->next_seq = seq + 1;
    pe->bulk_seen++;
  }
  if (pe >= w->srv && pe < w->srv + MAX_PEERS) {
    if (w->echo) {
      static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
      tg_pb_write_le32(buf, (uint32_t)n);
      memcpy(buf + 4, p, n);
      assert_int_equal(tg_transport_send(t, buf, n + 4, -1), 0);
    }
    if (w->on_srv_frame) w->on_srv_frame(pe, p, n);
  }
  check_done(w);
  return 0;
}

static void on_drain(tg_transport_t *t) {
  peer_t *pe = t->data;
  pe->drains++;
  if (pe->w->on_cli_drain && pe >= pe->w->cli && pe < pe->w->cli + MAX_PEERS)
    pe->w->on_cli_drain(pe);
  check_done(pe->w);
}

static void on_close(tg_transport_t *t, int status) {
  peer_t *pe = t->data;
  pe->closed = true;
  pe->close_status = status;
  snprintf(pe->error, sizeof(pe->error), "%s", tg_tls_chan_error(pe->ch));
  check_done(pe->w);
}

static const tg_transport_cbs_t cbs = {
    .on_frame = on_frame, .on_drain = on_drain, .on_close = on_close};

static void on_handshake(tg_tls_chan_t *ch, int status) {
  peer_t *pe = tg_tls_chan_transport(ch)->data;
  world_t *w = pe->w;
  assert_false(pe->hs_done); /* exactly once */
  pe->hs_done = true;
  pe->hs_status = status;
  const char *id = tg_tls_chan_peer_identity(ch);
  snprintf(pe->identity, sizeof(pe->identity), "%s", id ? id : "");
  snprintf(pe->error, sizeof(pe->error), "%s", tg_tls_chan_error(ch));
  snprintf(pe->suite, sizeof(pe->suite), "%s", tg_tls_chan_ciphersuite(ch));
  bool is_srv = pe >= w->srv && pe < w->srv + MAX_PEERS;
  if (status == 0 && is_srv && w->pause_on_handshake)
    tg_transport_pause_reading(tg_tls_chan_transport(ch), true);
  if (status == 0 && !is_srv && w->on_cli_handshake) w->on_cli_handshake(pe);
  check_done(w);
}

static void on_guard(uv_timer_t *t) {
  world_t *w = t->data;
  w->timed_out = true;
  shutdown_world(w);
}

static void on_accept(uv_stream_t *server, int status) {
  world_t *w = server->data;
  assert_int_equal(status, 0);
  assert_true(w->nsrv < MAX_PEERS);
  peer_t *pe = &w->srv[w->nsrv++];
  pe->w = w;
  int rv = tg_tls_chan_accept(server, w->scfg, &w->sopts, &cbs, pe, &pe->ch);
  assert_int_equal(rv, 0);
}

static void raw_closed(uv_handle_t *h) {
  raw_t *r = h->data;
  r->closed = true;
  check_done(r->w);
}

static void raw_close(raw_t *r) {
  if (r->used && !uv_is_closing((uv_handle_t *)&r->tcp))
    uv_close((uv_handle_t *)&r->tcp, raw_closed);
}

static void shutdown_world(world_t *w) {
  if (w->shut) return;
  w->shut = true;
  for (int i = 0; i < w->nsrv; i++)
    if (w->srv[i].ch && !w->srv[i].closed)
      tg_transport_close(tg_tls_chan_transport(w->srv[i].ch), 0);
  for (int i = 0; i < w->ncli; i++)
    if (w->cli[i].ch && !w->cli[i].closed) {
      tg_transport_close(tg_tls_chan_transport(w->cli[i].ch), 0);
      tg_transport_close(tg_tls_chan_transport(w->cli[i].ch), 0); /* again */
    }
  raw_close(&w->raw);
  uv_close((uv_handle_t *)&w->listener, NULL);
  uv_close((uv_handle_t *)&w->guard, NULL);
  uv_close((uv_handle_t *)&w->aux, NULL);
}

/* Listens on 127.0.0.1 (v6 false) or ::1. Returns false when the address
 * is not available (no IPv6 on this machine). */
static bool world_init(world_t *w, bool v6, tg_tls_config_t *scfg) {
  memset(w, 0, sizeof(*w));
  assert_int_equal(uv_loop_init(&w->loop), 0);
  w->scfg = scfg;
  w->sopts.on_handshake = on_handshake;
  w->copts.on_handshake = on_handshake;
  assert_int_equal(uv_tcp_init(&w->loop, &w->listener), 0);
  w->listener.data = w;
  struct sockaddr_storage ss;
  if (v6)
    assert_int_equal(uv_ip6_addr("::1", 0, (struct sockaddr_in6 *)&ss), 0);
  else
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, (struct sockaddr_in *)&ss), 0);
  int rv = uv_tcp_bind(&w->listener, (struct sockaddr *)&ss, 0);
  if (rv == 0) rv = uv_listen((uv_stream_t *)&w->listener, 16, on_accept);
  if (rv) {
    assert_true(v6);
    uv_close((uv_handle_t *)&w->listener, NULL);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    return false;
  }
  int sl = sizeof(ss);
  assert_int_equal(uv_tcp_getsockname(&w->listener, (struct sockaddr *)&ss, &sl), 0);
  w->port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                     : ((struct sockaddr_in *)&ss)->sin_port);
  snprintf(w->hostport, sizeof(w->hostport), v6 ? "[::1]:%d" : "127.0.0.1:%d",
           w->port);
  uv_timer_init(&w->loop, &w->guard);
  uv_timer_init(&w->loop, &w->aux);
  w->guard.data = w->aux.data = w;
  uv_timer_start(&w->guard, on_guard, GUARD_MS, 0);
  return true;
}

static peer_t *client(world_t *w, tg_tls_config_t *ccfg, const char *name) {
  assert_true(w->ncli < MAX_PEERS);
  peer_t *pe = &w->cli[w->ncli++];
  pe->w = w;
  int rv = tg_tls_chan_connect(&w->loop, w->hostport, ccfg, name, &w->copts,
                               &cbs, pe, &pe->ch);
  assert_int_equal(rv, 0);
  return pe;
}

/* Runs the loop to the end and releases everything. */
static void world_run(world_t *w) {
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_false(w->timed_out);
  for (int i = 0; i < w->nsrv; i++) {
    assert_true(w->srv[i].closed);
    tg_tls_chan_free(w->srv[i].ch);
  }
  for (int i = 0; i < w->ncli; i++) {
    assert_true(w->cli[i].closed);
    tg_tls_chan_free(w->cli[i].ch);
  }
  if (w->raw.tls) tg_tls_session_free(w->raw.tls);
  assert_int_equal(uv_loop_close(&w->loop), 0);
}

/* --- raw clients ----------------------------------------------------------- */

typedef struct raw_write {
  uv_write_t req;
  uint8_t data[];
} raw_write_t;

static void raw_written(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

static void raw_send(raw_t *r, const uint8_t *p, size_t n) {
  if (n == 0 || uv_is_closing((uv_handle_t *)&r->tcp)) return;
  raw_write_t *wr = malloc(sizeof(*wr) + n);
  assert_non_null(wr);
  memcpy(wr->data, p, n);
  uv_buf_t b = uv_buf_init((char *)wr->data, (unsigned)n);
  if (uv_write(&wr->req, (uv_stream_t *)&r->tcp, &b, 1, raw_written)) free(wr);
}

static void raw_flush_tls(raw_t *r) {
  tg_buf_t *out = tg_tls_out(r->tls);
  raw_send(r, tg_buf_begin(out), tg_buf_size(out));
  tg_buf_consume(out, tg_buf_size(out));
}

static void raw_shut(uv_shutdown_t *req, int status) {
  (void)req;
  (void)status;
}

/* Raw TLS: once the handshake is done, a frame header claiming 1 MiB, or
 * a good frame and the end of the stream. */
static void raw_tls_step(raw_t *r) {
  int rv = tg_tls_handshake(r->tls);
  raw_flush_tls(r);
  if (rv == 0 && !r->tls_sent && r->end != RAW_OVERSIZED) {
    r->tls_sent = true;
    uint8_t frame[64];
    size_t n = make_frame(frame, 40, 1, KIND_CTL);
    assert_int_equal(tg_tls_write(r->tls, frame, n), 0);
    if (r->end == RAW_FIN_AFTER_CLOSE_NOTIFY) tg_tls_close_notify(r->tls);
    raw_flush_tls(r);
    assert_int_equal(uv_shutdown(&r->shut, (uv_stream_t *)&r->tcp, raw_shut),
                     0);
  } else if (rv == 0 && !r->tls_sent) {
    r->tls_sent = true;
    uint8_t bad[64] = {0};
    tg_pb_write_le32(bad, 1u << 20);
    assert_int_equal(tg_tls_write(r->tls, bad, sizeof(bad)), 0);
    raw_flush_tls(r);
  } else if (rv < 0 && rv != -EAGAIN) {
    raw_close(r);
  }
}

static void raw_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
  (void)h;
  static char space[65536];
  (void)sz;
  *buf = uv_buf_init(space, sizeof(space));
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  raw_t *r = s->data;
  if (n < 0) {
    raw_close(r); /* the server hung up: what we wait for */
    return;
  }
  if (n > 0 && r->tls) {
    assert_int_equal(tg_tls_feed(r->tls, (uint8_t *)buf->base, (size_t)n), 0);
    raw_tls_step(r);
  }
}

static void raw_connected(uv_connect_t *req, int status) {
  raw_t *r = req->data;
  assert_int_equal(status, 0);
  uv_read_start((uv_stream_t *)&r->tcp, raw_alloc, raw_read);
  if (r->tls) raw_tls_step(r);
  else raw_send(r, r->send, r->send_len);
}

static void raw_connect(world_t *w, const uint8_t *send, size_t len,
                        tg_tls_session_t *tls) {
  raw_t *r = &w->raw;
  r->w = w;
  r->used = true;
  r->send = send;
  r->send_len = len;
  r->tls = tls;
  uv_tcp_init(&w->loop, &r->tcp);
  r->tcp.data = r;
  r->conn.data = r;
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", w->port, &a);
  assert_int_equal(uv_tcp_connect(&r->conn, &r->tcp, (struct sockaddr *)&a,
                                  raw_connected), 0);
}

/* --- (a) a verified session carries frames both ways ------------------------ */

#define SMALL_FRAMES 1000

static bool echo_done(world_t *w) {
  return w->cli[0].nframes == SMALL_FRAMES + 1 || w->cli[0].closed ||
         (w->nsrv && w->srv[0].closed);
}

static void send_small_frames(peer_t *p) {
  tg_transport_t *t = tg_tls_chan_transport(p->ch);
  uint8_t buf[256];
  for (uint32_t i = 1; i <= SMALL_FRAMES; i++) {
    size_t n = make_frame(buf, 8 + (i * 37) % 200, i, KIND_BULK);
    assert_int_equal(tg_transport_send(t, buf, n, -1), 0);
  }
  /* fds cannot cross a network: refused and closed. */
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  assert_int_equal(tg_transport_send(t, buf, 12, fds[0]), -EOPNOTSUPP);
  assert_int_equal(fcntl(fds[0], F_GETFD), -1);
  assert_int_equal(errno, EBADF);
  close(fds[1]);
  assert_int_equal(tg_transport_take_fd(t), -1);
  /* Not a whole frame: refused. */
  assert_int_equal(tg_transport_send(t, buf, 3, -1), -EINVAL);
  buf[0] ^= 1;
  assert_int_equal(tg_transport_send(t, buf, 12, -1), -EINVAL);
}

static void run_mutual(bool v6) {
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  if (!world_init(&w, v6, scfg)) {
    tg_tls_config_free(scfg);
    tg_tls_config_free(ccfg);
    skip();
  }
  w.echo = true;
  w.done = echo_done;
  w.on_cli_handshake = send_small_frames;
  peer_t *c = client(&w, ccfg, "relay.test");
  /* Queued before the handshake: the biggest frame there is. */
  static uint8_t big[TG_IPC_FRAME_BUFFER_SIZE];
  size_t n = make_frame(big, TG_IPC_FRAME_MAX_PAYLOAD, 0, KIND_BULK);
  assert_int_equal(n, 128 * 1024);
  assert_int_equal(tg_transport_send(tg_tls_chan_transport(c->ch), big, n, -1), 0);
  world_run(&w);

  peer_t *s = &w.srv[0];
  assert_int_equal(w.nsrv, 1);
  assert_int_equal(s->hs_status, 0);
  assert_int_equal(c->hs_status, 0);
  assert_string_equal(s->identity, "alice");
  assert_string_equal(c->identity, "relay.test");
  assert_non_null(strstr(s->suite, "ECDHE-ECDSA"));
  /* The server's first choice for the record layer it has. */
  bool aes = tg_tls_paths()->records_libcrypto && tg_tls_cpu_has_aes();
  assert_non_null(strstr(s->suite, aes ? "AES-128-GCM" : "CHACHA20-POLY1305"));
  assert_int_equal(s->nframes, SMALL_FRAMES + 1);
  assert_int_equal(s->bad_frames, 0);
  assert_int_equal(c->nframes, SMALL_FRAMES + 1);
  assert_int_equal(c->bad_frames, 0);
  assert_int_equal(c->next_seq, SMALL_FRAMES + 1);
  assert_int_equal(c->close_status, 0); /* closed by us, not by an error */
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

static void tls_mutual_handshake_frames_both_ways_ipv4(void **state) {
  (void)state;
  run_mutual(false);
}

static void tls_mutual_handshake_frames_both_ways_ipv6(void **state) {
  (void)state;
  run_mutual(true);
}

/* --- (b) control frames overtake queued bulk frames ------------------------ */

#define BULK_FRAMES 200
#define BULK_PAYLOAD (64 * 1024)

/* Bulk frames still queued in the client (some maybe in the write in
 * flight) when the second control frame was queued. */
static size_t g_bulk_left_at_ctl2;

static bool prio_done(world_t *w) {
  return (w->nsrv && (w->srv[0].bulk_seen == BULK_FRAMES &&
                      w->srv[0].nctl == 2)) ||
         w->cli[0].closed || (w->nsrv && w->srv[0].closed);
}

static void send_ctl(peer_t *p, uint32_t seq) {
  uint8_t buf[64];
  size_t n = make_frame(buf, 24, seq, KIND_CTL);
  assert_int_equal(tg_tls_chan_send_priority(p->ch, buf, n), 0);
}

static void on_aux_ctl(uv_timer_t *t) {
  world_t *w = t->data;
  g_bulk_left_at_ctl2 =
      tg_transport_pending(tg_tls_chan_transport(w->cli[0].ch)) /
      (BULK_PAYLOAD + 4);
  send_ctl(&w->cli[0], 2);
}

static void send_bulk_then_ctl(peer_t *p) {
  static uint8_t buf[BULK_PAYLOAD + 4];
  tg_transport_t *t = tg_tls_chan_transport(p->ch);
  for (uint32_t i = 0; i < BULK_FRAMES; i++) {
    size_t n = make_frame(buf, BULK_PAYLOAD, i, KIND_BULK);
    assert_int_equal(tg_transport_send(t, buf, n, -1), 0);
  }
  assert_true(tg_transport_congested(t));
  assert_true(tg_transport_pending(t) >= (size_t)BULK_FRAMES * BULK_PAYLOAD);
  g_bulk_left_at_ctl2 = 0;
  send_ctl(p, 1); /* queued after all bulk frames, one of them sent */
  /* And one more once the bulk stream is under way. */
  uv_timer_start(&p->w->aux, on_aux_ctl, 0, 0);
}

static void tls_priority_frame_overtakes_queued_bulk(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  w.done = prio_done;
  w.on_cli_handshake = send_bulk_then_ctl;
  client(&w, ccfg, "relay.test");
  world_run(&w);
  peer_t *s = &w.srv[0];
  assert_int_equal(s->hs_status, 0);
  assert_int_equal(s->bad_frames, 0);
  assert_int_equal(s->bulk_seen, BULK_FRAMES);
  assert_int_equal(s->nctl, 2);
  /* The first overtook all but the frame that went out at once. The
   * second overtook what was not yet encrypted when it was queued: it
   * waits at most for the write in flight (4 frames) and one more. */
  print_message("control frames arrived after %d and %d of %d bulk frames; "
                "%zu were queued when the second was sent\n",
                (int)s->ctl_at[0], (int)s->ctl_at[1], BULK_FRAMES,
                g_bulk_left_at_ctl2);
  assert_true(s->ctl_at[0] <= 1);
  assert_true(g_bulk_left_at_ctl2 >= BULK_FRAMES / 4); /* a real test */
  assert_true(s->ctl_at[1] <= (int64_t)(BULK_FRAMES - g_bulk_left_at_ctl2) + 5);
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

/* --- a barrier frame keeps its place among both queues ------------------ */

#define BARRIER_BULK 64

static bool barrier_done(world_t *w) {
  return (w->nsrv && w->srv[0].bulk_seen == BARRIER_BULK &&
          w->srv[0].nctl == 3) ||
         w->cli[0].closed || (w->nsrv && w->srv[0].closed);
}

/* Bulk frames, a control frame, the barrier, one more control frame: the
 * first control frame overtakes the bulk ones, the barrier does not, and
 * the last control frame does not overtake the barrier (a relay's grant
 * of compression, then its own plain replies). */
static void send_bulk_ctl_barrier_ctl(peer_t *p) {
  static uint8_t buf[BULK_PAYLOAD + 4];
  tg_transport_t *t = tg_tls_chan_transport(p->ch);
  for (uint32_t i = 0; i < BARRIER_BULK; i++) {
    size_t n = make_frame(buf, BULK_PAYLOAD, i, KIND_BULK);
    assert_int_equal(tg_transport_send(t, buf, n, -1), 0);
  }
  send_ctl(p, 1);
  uint8_t b[64];
  size_t n = make_frame(b, 24, 2, KIND_CTL);
  assert_int_equal(tg_tls_chan_send_barrier(p->ch, b, n), 0);
  assert_int_equal(tg_tls_chan_send_barrier(p->ch, b, 3), -EINVAL);
  send_ctl(p, 3);
}

static void tls_barrier_frame_keeps_its_place(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  w.done = barrier_done;
  w.on_cli_handshake = send_bulk_ctl_barrier_ctl;
  peer_t *c = client(&w, ccfg, "relay.test");
  /* Before the handshake nothing can be placed behind what is queued. */
  uint8_t b[64];
  size_t n = make_frame(b, 24, 9, KIND_CTL);
  assert_int_equal(tg_tls_chan_send_barrier(c->ch, b, n), -ENOTCONN);
  world_run(&w);
  peer_t *s = &w.srv[0];
  assert_int_equal(s->hs_status, 0);
  assert_int_equal(s->bad_frames, 0);
  assert_int_equal(s->bulk_seen, BARRIER_BULK);
  assert_int_equal(s->nctl, 3);
  assert_int_equal(s->ctl_seq[0], 1);
  assert_true(s->ctl_at[0] < BARRIER_BULK);
  assert_int_equal(s->ctl_seq[1], 2);
  assert_int_equal(s->ctl_at[1], BARRIER_BULK);
  assert_int_equal(s->ctl_seq[2], 3);
  assert_int_equal(s->ctl_at[2], BARRIER_BULK);
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

/* --- bulk frames are decrypted where they are assembled ------------------ */

#define INPLACE_FRAMES 96

static uint64_t g_inplace_bytes, g_inplace_copied;

static bool inplace_done(world_t *w) {
  return (w->nsrv && w->srv[0].bulk_seen == INPLACE_FRAMES) ||
         w->cli[0].closed || (w->nsrv && w->srv[0].closed);
}

static void note_copied(peer_t *p, const uint8_t *f, size_t n) {
  (void)f;
  g_inplace_bytes += n + 4;
  g_inplace_copied = p->ch->dec.copied;
}

/* Mostly 128 KiB frames, as a ReadBuffers stream is, with some of other
 * sizes among them (one of them small) so that frames start anywhere in a
 * record. */
static void send_bulk_frames(peer_t *p) {
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  tg_transport_t *t = tg_tls_chan_transport(p->ch);
  for (uint32_t i = 0; i < INPLACE_FRAMES; i++) {
    size_t payload = i % 8 == 3   ? 40000 + i * 11
                     : i % 8 == 6 ? 200 + i
                                  : TG_IPC_FRAME_MAX_PAYLOAD;
    size_t n = make_frame(buf, payload, i, KIND_BULK);
    assert_int_equal(tg_transport_send(t, buf, n, -1), 0);
  }
}

static void tls_bulk_frames_are_decrypted_in_place(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  w.done = inplace_done;
  w.on_cli_handshake = send_bulk_frames;
  w.on_srv_frame = note_copied;
  w.copts.max_queued = 32u * 1024 * 1024;
  g_inplace_bytes = g_inplace_copied = 0;
  client(&w, ccfg, "relay.test");
  world_run(&w);
  peer_t *s = &w.srv[0];
  assert_int_equal(s->bulk_seen, INPLACE_FRAMES);
  assert_int_equal(s->bad_frames, 0);
  /* Only the record where one frame ends and the next begins is copied:
   * at most a record per frame (16 KiB of 128). Decrypting into a 256 KiB
   * buffer and copying its partial frames made it about half. */
  print_message("decoder copied %llu of %llu bytes\n",
                (unsigned long long)g_inplace_copied,
                (unsigned long long)g_inplace_bytes);
  assert_true(g_inplace_copied <=
              (uint64_t)INPLACE_FRAMES * TG_TLS_RECORD_PLAIN_MAX);
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

/* --- backpressure ---------------------------------------------------------- */

#define BP_FRAMES 400
#define BP_PAYLOAD (16 * 1024)

static bool bp_done(world_t *w) {
  return (w->nsrv && w->srv[0].bulk_seen == BP_FRAMES && w->cli[0].drains) ||
         w->cli[0].closed || (w->nsrv && w->srv[0].closed);
}

static void on_aux_resume(uv_timer_t *t) {
  world_t *w = t->data;
  /* Paused since its handshake: nothing may have been delivered. */
  assert_int_equal(w->srv[0].nframes, 0);
  tg_transport_pause_reading(tg_tls_chan_transport(w->srv[0].ch), false);
}

static void send_until_congested(peer_t *p) {
  static uint8_t buf[BP_PAYLOAD + 4];
  tg_transport_t *t = tg_tls_chan_transport(p->ch);
  uint32_t i = 0;
  for (; i < BP_FRAMES; i++) {
    size_t n = make_frame(buf, BP_PAYLOAD, i, KIND_BULK);
    assert_int_equal(tg_transport_send(t, buf, n, -1), 0);
  }
  assert_true(tg_transport_congested(t));
  /* Over max_queued (4 x high water here): refused, not queued. */
  size_t n = make_frame(buf, BP_PAYLOAD, i, KIND_BULK);
  assert_int_equal(tg_transport_send(t, buf, n, -1), -ENOBUFS);
  uv_timer_start(&p->w->aux, on_aux_resume, 100, 0);
}

static void tls_pause_reading_and_drain(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  w.done = bp_done;
  w.pause_on_handshake = true;
  w.on_cli_handshake = send_until_congested;
  w.copts.high_water = 1024 * 1024;
  w.copts.max_queued = (BP_FRAMES * (BP_PAYLOAD + 4)) + 1024;
  client(&w, ccfg, "relay.test");
  world_run(&w);
  assert_int_equal(w.srv[0].bulk_seen, BP_FRAMES);
  assert_int_equal(w.srv[0].bad_frames, 0);
  assert_true(w.cli[0].drains >= 1);
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

/* --- (c) refusals ---------------------------------------------------------- */

static bool refused_done(world_t *w) {
  bool srv_over = w->nsrv > 0 && w->srv[0].closed;
  bool cli_over = w->ncli == 0 || w->cli[0].closed;
  bool raw_over = !w->raw.used || w->raw.closed;
  return srv_over && cli_over && raw_over;
}

static bool cli_closed_done(world_t *w) {
  return w->cli[0].closed && (w->nsrv == 0 || w->srv[0].closed);
}

/* A TLS client with |ccfg| expecting |name| is refused by the server with
 * |want| (on_handshake and on_close), and the log says why. */
static void expect_server_refuses(tg_tls_config_t *ccfg, int want,
                                  const char *why) {
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  world_t w;
  world_init(&w, false, scfg);
  w.done = refused_done;
  g_last_warn[0] = 0;
  client(&w, ccfg, "relay.test");
  world_run(&w);
  peer_t *s = &w.srv[0], *c = &w.cli[0];
  assert_true(s->hs_done);
  assert_int_equal(s->hs_status, want);
  assert_int_equal(s->close_status, want);
  assert_int_equal(s->nframes, 0);
  assert_true(c->hs_done);
  /* Told why, not just hung up on. */
  assert_int_equal(c->hs_status, TG_ETLS_PEER_ALERT);
  assert_int_equal(c->close_status, TG_ETLS_PEER_ALERT);
  if (!strstr(s->error, why)) fail_msg("'%s' not in '%s'", why, s->error);
  /* The client's refusal is logged last; the server's names its peer. */
  print_message("server: %s\nclient: %s (%s)\n", s->error,
                tg_strerror(c->hs_status), c->error);
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

static void tls_refuses_client_without_cert(void **state) {
  (void)state;
  expect_server_refuses(cfg_load(false, "pki", NULL, "pki", false),
                        TG_ETLS_CERT, "missing");
}

static void tls_refuses_client_cert_from_other_ca(void **state) {
  (void)state;
  expect_server_refuses(cfg_load(false, "other", "eve", "pki", false),
                        TG_ETLS_CERT, "not correctly signed");
}

static void tls_refuses_expired_client_cert(void **state) {
  (void)state;
  expect_server_refuses(cfg_load(false, "pki", "old", "pki", false),
                        TG_ETLS_CERT, "expired");
}

static void tls_refuses_revoked_client_cert(void **state) {
  (void)state;
  expect_server_refuses(cfg_load(false, "pki", "bob", "pki", false),
                        TG_ETLS_CERT, "revoked");
}

/* A client certificate of the pki CA with subject |subj| (openssl -subj
 * syntax) and, when |san| is not NULL, subjectAltName |san|, as
 * pki/|file|.pem and .key: what tg-certs refuses to make, made as any CA
 * could. */
static void odd_client_cert(const char *file, const char *subj,
                            const char *san) {
  char cmd[2048];
  snprintf(cmd, sizeof(cmd),
           "cd '%s/pki' && printf '[e]\\nextendedKeyUsage=clientAuth\\n"
           "%s%s\\n' > %s.ext && "
           "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 "
           "-out %s.key 2>/dev/null && "
           "openssl req -new -key %s.key -subj '%s' -out %s.csr 2>/dev/null "
           "&& openssl x509 -req -in %s.csr -CA ca.pem -CAkey ca.key -days 30 "
           "-extfile %s.ext -extensions e -out %s.pem 2>/dev/null",
           g_dir, san ? "subjectAltName=" : "", san ? san : "", file, file,
           file, subj, file, file, file, file);
  if (system(cmd) != 0) fail_msg("cannot make %s: %s", file, cmd);
}

/* An identity names one principal: the CN (else the first DNS SAN) must be
 * in the identity alphabet as it stands, with no fallback from a bad CN to
 * a SAN. A CA-signed "alice/ops" would otherwise own alice's sessions on a
 * relay, and "ssh:alice" pass for an ssh user. */
static void tls_refuses_identities_with_separators(void **state) {
  (void)state;
  static const struct {
    const char *file, *subj, *san, *why;
  } cases[] = {
      {"slash", "/CN=alice\\/ops", NULL, "'/'"},
      {"colon", "/CN=ssh:alice", NULL, "':'"},
      {"blank", "/CN=alice ops", NULL, "only letters"},
      {"hash", "/CN=alice#x", NULL, "only letters"},
      {"fallback", "/CN=alice\\/ops", "DNS:alice", "'/'"},
      {"san-slash", "/O=tracegate", "DNS:alice/ops,DNS:alice", "'/'"},
      {"two-cns", "/CN=alice/CN=ops", NULL, "more than one CN"},
      {"nothing", "/O=tracegate", NULL, "neither a CN nor a DNS SAN"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    odd_client_cert(cases[i].file, cases[i].subj, cases[i].san);
    expect_server_refuses(cfg_load(false, "pki", cases[i].file, "pki", false),
                          TG_ETLS_CERT, cases[i].why);
  }
  /* No CN: the first DNS SAN is the identity. */
  odd_client_cert("sanonly", "/O=tracegate", "DNS:dave,DNS:other");
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "sanonly", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  w.done = refused_done; /* both sides up, then closed by the idle timer */
  w.sopts.idle_timeout_ms = 100;
  client(&w, ccfg, "relay.test");
  world_run(&w);
  assert_int_equal(w.srv[0].hs_status, 0);
  assert_string_equal(w.srv[0].identity, "dave");
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

/* The client refuses a server whose certificate does not carry the name it
 * expects, or is not signed by its CA. */
static void expect_client_refuses(const char *srv_dir, const char *name,
                                  const char *why) {
  tg_tls_config_t *scfg = cfg_load(true, srv_dir, "relay.test", srv_dir, false);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  w.done = cli_closed_done;
  client(&w, ccfg, name);
  world_run(&w);
  peer_t *c = &w.cli[0];
  assert_int_equal(c->hs_status, TG_ETLS_CERT);
  assert_int_equal(c->close_status, TG_ETLS_CERT);
  assert_int_equal(c->nframes, 0);
  if (!strstr(c->error, why)) fail_msg("'%s' not in '%s'", why, c->error);
  if (w.nsrv) assert_true(w.srv[0].hs_status < 0);
  print_message("client: %s\n", c->error);
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

static void tls_client_refuses_wrong_server_name(void **state) {
  (void)state;
  expect_client_refuses("pki", "wrong.test", "CN");
}

static void tls_client_refuses_server_from_other_ca(void **state) {
  (void)state;
  expect_client_refuses("other", "relay.test", "not correctly signed");
}

/* mbedtls 2.28 matches DNS names only: connecting by address without
 * naming the certificate fails, and the error says what to do. */
static void tls_client_by_address_needs_certificate_name(void **state) {
  (void)state;
  expect_client_refuses("pki", NULL, "DNS names only");
}

/* Connecting by name goes through the resolver. (Where "localhost" also
 * resolves to ::1 first, this exercises trying the next address too.) */
static void tls_connect_by_name(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  snprintf(w.hostport, sizeof(w.hostport), "localhost:%d", w.port);
  w.done = refused_done; /* both sides up, then closed by the idle timer */
  w.sopts.idle_timeout_ms = 100;
  client(&w, ccfg, "relay.test");
  world_run(&w);
  assert_int_equal(w.cli[0].hs_status, 0);
  assert_int_equal(w.srv[0].hs_status, 0);
  assert_string_equal(w.srv[0].identity, "alice");
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

static bool closed_done(world_t *w) { return w->cli[0].closed; }

/* Closing while the name is being resolved: on_close only, status 0. */
static void tls_close_while_resolving(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  snprintf(w.hostport, sizeof(w.hostport), "localhost:%d", w.port);
  w.done = closed_done;
  peer_t *c = client(&w, ccfg, "relay.test");
  uint8_t buf[16];
  size_t n = make_frame(buf, 12, 0, KIND_BULK);
  tg_transport_t *t = tg_tls_chan_transport(c->ch);
  assert_int_equal(tg_transport_send(t, buf, n, -1), 0); /* queued */
  tg_transport_close(t, 0);
  tg_transport_close(t, TG_ETLS); /* idempotent: the first status stays */
  assert_int_equal(tg_transport_send(t, buf, n, -1), -EPIPE);
  assert_false(c->closed); /* never inside the call */
  world_run(&w);
  assert_true(c->closed);
  assert_int_equal(c->close_status, 0);
  assert_false(c->hs_done);
  assert_int_equal(w.nsrv, 0);
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

static void tls_client_reports_connection_refused(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  /* A port nobody listens on: bind one, then close it. */
  uv_tcp_t tmp;
  uv_tcp_init(&w.loop, &tmp);
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", 0, &a);
  assert_int_equal(uv_tcp_bind(&tmp, (struct sockaddr *)&a, 0), 0);
  int sl = sizeof(a);
  uv_tcp_getsockname(&tmp, (struct sockaddr *)&a, &sl);
  snprintf(w.hostport, sizeof(w.hostport), "127.0.0.1:%d", ntohs(a.sin_port));
  uv_close((uv_handle_t *)&tmp, NULL);
  w.done = cli_closed_done;
  g_last_warn[0] = 0;
  client(&w, ccfg, "relay.test");
  world_run(&w);
  assert_int_equal(w.cli[0].hs_status, UV_ECONNREFUSED);
  assert_int_equal(w.cli[0].close_status, UV_ECONNREFUSED);
  /* The owner reports it, with the address it dialled (a client's
   * channel only logs at debug level): the error it is given says why. */
  print_message("client error: %s\n", w.cli[0].error);
  assert_non_null(strstr(w.cli[0].error, "refused"));
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

/* Raw TCP clients: the server refuses with |want|, and tells its owner
 * why without logging a warning itself. */
static void expect_raw_refused(const uint8_t *send, size_t len, int want,
                               const char *why, uint32_t hs_timeout_ms) {
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  world_t w;
  world_init(&w, false, scfg);
  w.done = refused_done;
  w.sopts.handshake_timeout_ms = hs_timeout_ms;
  g_last_warn[0] = 0;
  raw_connect(&w, send, len, NULL);
  world_run(&w);
  peer_t *s = &w.srv[0];
  assert_int_equal(s->hs_status, want);
  assert_int_equal(s->close_status, want);
  assert_int_equal(s->nframes, 0);
  if (!strstr(s->error, why)) fail_msg("'%s' not in '%s'", why, s->error);
  /* The owner says it, at a rate it chooses (the relay: within one budget
   * for all unverified peers); the channel itself only at debug level, or
   * a peer opening connections in a loop would write a warning each. */
  if (g_last_warn[0]) fail_msg("the channel warned: %s", g_last_warn);
  tg_tls_config_free(scfg);
}

static void tls_refuses_plain_tcp_ipc_frame(void **state) {
  (void)state;
  /* What a consumer speaking the UNIX-socket protocol would send. */
  static const uint8_t frame[] = {0x0a, 0, 0, 0, 0x10, 0x01, 0x22, 0x06,
                                  'c',  'o', 'n', 's', 'u', 'm'};
  expect_raw_refused(frame, sizeof(frame), TG_ETLS_NOT_TLS, "plain IPC frame",
                     0);
}

static void tls_refuses_garbage_before_handshake(void **state) {
  (void)state;
  static const char http[] = "GET / HTTP/1.1\r\nHost: relay\r\n\r\n";
  expect_raw_refused((const uint8_t *)http, sizeof(http) - 1, TG_ETLS_NOT_TLS,
                     "47 45 54 20", 0);
}

static void tls_refuses_garbage_that_looks_like_tls(void **state) {
  (void)state;
  /* A handshake record header, then nonsense for a ClientHello. */
  static const uint8_t junk[] = {0x16, 0x03, 0x03, 0x00, 0x08, 0xde, 0xad,
                                 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef};
  expect_raw_refused(junk, sizeof(junk), TG_ETLS_HANDSHAKE, "ClientHello", 0);
}

static void tls_handshake_timeout_on_silent_client(void **state) {
  (void)state;
  expect_raw_refused(NULL, 0, TG_ETIMEOUT, "no verified peer within 200 ms",
                     200);
}

static void tls_closes_on_oversized_frame(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  w.done = refused_done;
  tg_tls_session_t *tls;
  assert_int_equal(tg_tls_session_new(ccfg, "relay.test", 0, &tls), 0);
  raw_connect(&w, NULL, 0, tls);
  g_last_warn[0] = 0;
  world_run(&w);
  peer_t *s = &w.srv[0];
  assert_int_equal(s->hs_status, 0);
  assert_string_equal(s->identity, "alice");
  assert_int_equal(s->close_status, TG_EFRAME_TOO_LARGE);
  assert_int_equal(s->nframes, 0);
  assert_non_null(strstr(g_last_warn, "oversized frame"));
  assert_non_null(strstr(g_last_warn, "alice"));
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

static void tls_idle_timeout_closes(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  w.done = refused_done;
  w.sopts.idle_timeout_ms = 200;
  client(&w, ccfg, "relay.test");
  world_run(&w);
  assert_int_equal(w.srv[0].hs_status, 0);
  assert_int_equal(w.srv[0].close_status, TG_ETIMEOUT);
  assert_int_equal(w.cli[0].hs_status, 0);
  /* The client sees the server go away, with no close_notify: the server
   * closed on a failure, not at an end of its data. */
  assert_int_equal(w.cli[0].close_status, TG_ETLS_TRUNCATED);
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

/* A stream that ends (FIN) without close_notify is a truncation, told
 * apart from an orderly end: an attacker on the path, or a crash, may end
 * a stream early, and a reader must not take that for the end of the
 * data. */
static void tls_tells_truncation_from_close_notify(void **state) {
  (void)state;
  for (int bare = 0; bare < 2; bare++) {
    tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
    tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
    world_t w;
    world_init(&w, false, scfg);
    w.done = refused_done;
    tg_tls_session_t *tls;
    assert_int_equal(tg_tls_session_new(ccfg, "relay.test", 0, &tls), 0);
    w.raw.end = bare ? RAW_FIN_BARE : RAW_FIN_AFTER_CLOSE_NOTIFY;
    raw_connect(&w, NULL, 0, tls);
    world_run(&w);
    peer_t *s = &w.srv[0];
    assert_int_equal(s->hs_status, 0);
    assert_int_equal(s->nframes, 1); /* what came before the end is read */
    assert_int_equal(s->bad_frames, 0);
    assert_int_equal(s->close_status,
                     bare ? TG_ETLS_TRUNCATED : TG_EPEER_CLOSED);
    tg_tls_config_free(scfg);
    tg_tls_config_free(ccfg);
  }
}

/* The owner ending an open channel (status 0, or -ECANCELED as a consumer
 * that is done closes it) is an orderly end: the peer gets a close_notify
 * and sees TG_EPEER_CLOSED, where every recording's end through a relay
 * used to read as a truncation there. A close on a failure (a timeout
 * here) still sends none. */
static int g_close_with;

static void close_client_now(peer_t *p) {
  tg_transport_close(tg_tls_chan_transport(p->ch), g_close_with);
}

static void tls_owner_close_is_orderly_for_the_peer(void **state) {
  (void)state;
  const int statuses[] = {0, -ECANCELED, TG_ETIMEOUT};
  const int seen[] = {TG_EPEER_CLOSED, TG_EPEER_CLOSED, TG_ETLS_TRUNCATED};
  for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
    tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
    tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
    world_t w;
    world_init(&w, false, scfg);
    w.done = refused_done;
    g_close_with = statuses[i];
    w.on_cli_handshake = close_client_now;
    client(&w, ccfg, "relay.test");
    world_run(&w);
    assert_int_equal(w.cli[0].hs_status, 0);
    assert_int_equal(w.cli[0].close_status, statuses[i]);
    assert_int_equal(w.srv[0].hs_status, 0);
    assert_int_equal(w.srv[0].close_status, seen[i]);
    tg_tls_config_free(scfg);
    tg_tls_config_free(ccfg);
  }
}

/* --- handshakes on the thread pool ------------------------------------------ */

static bool all_closed(world_t *w) {
  if (w->ncli < MAX_PEERS || w->nsrv < MAX_PEERS) return false;
  for (int i = 0; i < MAX_PEERS; i++)
    if (!w->cli[i].closed || !w->srv[i].closed) return false;
  return true;
}

/* Both ends run their handshake steps on libuv's thread pool: several
 * handshakes at once complete, with the right identities, and carry
 * frames (each client's echo). */
static void tls_threaded_handshakes_at_once(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  w.sopts.threaded_handshake = w.copts.threaded_handshake = true;
  w.sopts.idle_timeout_ms = 300; /* then the server closes each one */
  w.echo = true;
  w.done = all_closed;
  w.on_cli_handshake = send_small_frames;
  /* send_small_frames numbers its frames from 1. */
  for (int i = 0; i < MAX_PEERS; i++) client(&w, ccfg, "relay.test")->next_seq = 1;
  world_run(&w);
  for (int i = 0; i < MAX_PEERS; i++) {
    assert_int_equal(w.cli[i].hs_status, 0);
    assert_int_equal(w.srv[i].hs_status, 0);
    assert_string_equal(w.srv[i].identity, "alice");
    assert_string_equal(w.cli[i].identity, "relay.test");
    assert_int_equal(w.cli[i].nframes, SMALL_FRAMES);
    assert_int_equal(w.cli[i].bad_frames, 0);
    assert_int_equal(w.srv[i].close_status, TG_ETIMEOUT);
  }
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

/* The thread pool's workers, held busy until released, so that a
 * handshake step stays queued. */
static uv_sem_t g_release;

static void hold_worker(uv_work_t *w) {
  (void)w;
  uv_sem_wait(&g_release);
}

static void held_done(uv_work_t *w, int status) {
  (void)w;
  (void)status;
}

typedef struct step_ctx {
  uv_work_t blockers[64];
  unsigned n_blockers;
  bool closed_mid_step;
} step_ctx_t;

/* Once the server's step is queued behind the held workers: close the
 * channel, then let the workers go. */
static void on_step_poll(uv_timer_t *t) {
  world_t *w = t->data;
  step_ctx_t *cx = w->ctx;
  if (w->nsrv == 0 || !w->srv[0].ch->hs_working) return;
  uv_timer_stop(t);
  tg_transport_close(tg_tls_chan_transport(w->srv[0].ch), -ECANCELED);
  cx->closed_mid_step = true;
  for (unsigned i = 0; i < cx->n_blockers; i++) uv_sem_post(&g_release);
}

/* A channel closed while its handshake step is queued or running is
 * freed only after the step: the session is the worker's until then. */
static void tls_threaded_step_outlives_a_close(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  world_t w;
  world_init(&w, false, scfg);
  static step_ctx_t cx;
  memset(&cx, 0, sizeof(cx));
  w.ctx = &cx;
  w.sopts.threaded_handshake = true;
  w.done = refused_done;
  /* As many blockers as the pool has threads (UV_THREADPOOL_SIZE, 4 by
   * default; the test's environment may raise it up to the array). */
  const char *env = getenv("UV_THREADPOOL_SIZE");
  cx.n_blockers = env && atoi(env) > 0 ? (unsigned)atoi(env) : 4;
  assert_true(cx.n_blockers <= 64);
  assert_int_equal(uv_sem_init(&g_release, 0), 0);
  for (unsigned i = 0; i < cx.n_blockers; i++)
    assert_int_equal(uv_queue_work(&w.loop, &cx.blockers[i], hold_worker,
                                   held_done), 0);
  client(&w, ccfg, "relay.test");
  uv_timer_start(&w.aux, on_step_poll, 1, 1);
  world_run(&w);
  assert_true(cx.closed_mid_step);
  assert_int_equal(w.srv[0].close_status, -ECANCELED);
  assert_true(w.cli[0].closed);
  uv_sem_destroy(&g_release);
  tg_tls_config_free(scfg);
  tg_tls_config_free(ccfg);
}

/* --- CRL reload ------------------------------------------------------------- */

typedef struct crl_ctx {
  tg_tls_config_t *ccfg;
  int phase;
#if TG_TLS_LIBCRYPTO
  tg_tls_ecdsa_counts_t reloaded; /* counts once the new CRL is in */
#endif
} crl_ctx_t;

static bool crl_done(world_t *w) {
  crl_ctx_t *cx = w->ctx;
  if (w->ncli >= 1 && w->cli[0].closed) return true; /* failure: stop */
  if (cx->phase == 0 && w->nsrv == 1 && w->srv[0].hs_done &&
      w->cli[0].hs_done) {
    /* Connection 1 is up. Revoke carol, reload, connect again. */
    cx->phase = 1;
    assert_int_equal(certs("revoke pki carol"), 0);
    char err[256];
    assert_int_equal(tg_tls_config_reload_crl(w->scfg, NULL, err, sizeof(err)), 0);
#if TG_TLS_LIBCRYPTO
    cx->reloaded = tg_tls_ecdsa_counts();
#endif
    client(w, cx->ccfg, "relay.test");
    return false;
  }
  if (cx->phase == 1 && w->nsrv == 2 && w->srv[1].closed && w->cli[1].closed) {
    /* Refused. The established session still carries frames. */
    cx->phase = 2;
    uint8_t buf[64];
    size_t n = make_frame(buf, 40, 0, KIND_BULK);
    assert_int_equal(
        tg_transport_send(tg_tls_chan_transport(w->cli[0].ch), buf, n, -1), 0);
    return false;
  }
  return cx->phase == 2 && w->srv[0].nframes == 1;
}

static void tls_crl_reload_refuses_newly_revoked(void **state) {
  (void)state;
  tg_tls_config_t *scfg = cfg_load(true, "pki", "relay.test", "pki", true);
  crl_ctx_t cx = {.ccfg = cfg_load(false, "pki", "carol", "pki", false)};
  world_t w;
  world_init(&w, false, scfg);
  w.ctx = &cx;
  w.done = crl_done;
  client(&w, cx.ccfg, "relay.test");
  world_run(&w);
  assert_int_equal(cx.phase, 2);
  assert_int_equal(w.srv[0].hs_status, 0);
  assert_string_equal(w.srv[0].identity, "carol");
  assert_int_equal(w.srv[0].nframes, 1);
  assert_int_equal(w.srv[1].hs_status, TG_ETLS_CERT);
  assert_non_null(strstr(w.srv[1].error, "revoked"));
  assert_true(w.cli[1].hs_status < 0);
#if TG_TLS_LIBCRYPTO
  /* The server remembered carol's certificate from the first connection
   * (its CA keys' memo, tls/ecdsa.h): the revocation is found all the
   * same. */
  assert_true(tg_tls_ecdsa_counts().remembered > cx.reloaded.remembered);
#endif
  tg_tls_config_free(scfg);
  tg_tls_config_free(cx.ccfg);
}

/* --- configuration errors --------------------------------------------------- */

static void tls_config_errors_name_the_file(void **state) {
  (void)state;
  char err[256];
  tg_tls_config_t *cfg = NULL;
  tg_tls_opts_t o = {.server = true,
                     .cert_file = path("pki", "nope.pem"),
                     .key_file = path("pki", "relay.test.key"),
                     .ca_file = path("pki", "ca.pem")};
  assert_int_equal(tg_tls_config_new(&o, &cfg, err, sizeof(err)), TG_EBAD_CONFIG);
  assert_null(cfg);
  assert_notice_with(err, TG_N_TLS_FILE_UNREADABLE, "nope.pem");
  assert_notice_with(err, TG_N_TLS_FILE_UNREADABLE, strerror(ENOENT));

  o.cert_file = path("pki", "relay.test.pem");
  o.key_file = path("pki", "alice.key");
  assert_int_equal(tg_tls_config_new(&o, &cfg, err, sizeof(err)), TG_EBAD_CONFIG);
  char line[256];
  assert_true(tg_test_notice_line(err, TG_N_TLS_KEY_MISMATCH, "alice.key", line,
                                  sizeof(line)));
  assert_non_null(strstr(line, "relay.test.pem"));

  o.key_file = path("pki", "relay.test.key");
  o.ca_file = path("pki", "relay.test.key"); /* not a certificate */
  assert_int_equal(tg_tls_config_new(&o, &cfg, err, sizeof(err)), TG_EBAD_CONFIG);
  assert_notice_with(err, TG_N_TLS_CONFIG_INVALID, "relay.test.key");

  o.ca_file = path("pki", "ca.pem");
  o.crl_file = path("other", "crl.pem");
  assert_int_equal(tg_tls_config_new(&o, &cfg, err, sizeof(err)), TG_EBAD_CONFIG);
  assert_notice_with(err, TG_N_TLS_CRL_FOREIGN, "crl.pem");

  o.crl_file = NULL;
  o.ca_file = NULL;
  assert_int_equal(tg_tls_config_new(&o, &cfg, err, sizeof(err)), TG_EBAD_CONFIG);

  o.ca_file = path("pki", "ca.pem");
  assert_int_equal(tg_tls_config_new(&o, &cfg, err, sizeof(err)), 0);
  assert_int_equal(tg_tls_config_reload_crl(cfg, NULL, err, sizeof(err)),
                   TG_EBAD_CONFIG);
  assert_int_equal(
      tg_tls_config_reload_crl(cfg, path("other", "crl.pem"), err, sizeof(err)),
      TG_EBAD_CONFIG);
  assert_int_equal(
      tg_tls_config_reload_crl(cfg, path("pki", "crl.pem"), err, sizeof(err)), 0);
  tg_tls_config_free(cfg);

  /* Clients need a hostname; malformed addresses are refused at once. */
  tg_tls_config_t *ccfg = cfg_load(false, "pki", "alice", "pki", false);
  tg_tls_session_t *s;
  assert_int_equal(tg_tls_session_new(ccfg, NULL, 0, &s), -EINVAL);
  uv_loop_t loop;
  uv_loop_init(&loop);
  tg_tls_chan_opts_t co = {.on_handshake = on_handshake};
  tg_tls_chan_t *ch;
  const char *bad[] = {"nohost", "host:", ":443", "::1:443", "[::1]443",
                       "h:0",    "h:65536", "h:12a"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(
        tg_tls_chan_connect(&loop, bad[i], ccfg, NULL, &co, &cbs, NULL, &ch),
        -EINVAL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  tg_tls_config_free(ccfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tls_mutual_handshake_frames_both_ways_ipv4),
      cmocka_unit_test(tls_mutual_handshake_frames_both_ways_ipv6),
      cmocka_unit_test(tls_priority_frame_overtakes_queued_bulk),
      cmocka_unit_test(tls_barrier_frame_keeps_its_place),
      cmocka_unit_test(tls_bulk_frames_are_decrypted_in_place),
      cmocka_unit_test(tls_pause_reading_and_drain),
      cmocka_unit_test(tls_refuses_client_without_cert),
      cmocka_unit_test(tls_refuses_client_cert_from_other_ca),
      cmocka_unit_test(tls_refuses_expired_client_cert),
      cmocka_unit_test(tls_refuses_revoked_client_cert),
      cmocka_unit_test(tls_refuses_identities_with_separators),
      cmocka_unit_test(tls_client_refuses_wrong_server_name),
      cmocka_unit_test(tls_client_refuses_server_from_other_ca),
      cmocka_unit_test(tls_client_by_address_needs_certificate_name),
      cmocka_unit_test(tls_connect_by_name),
      cmocka_unit_test(tls_close_while_resolving),
      cmocka_unit_test(tls_client_reports_connection_refused),
      cmocka_unit_test(tls_refuses_plain_tcp_ipc_frame),
      cmocka_unit_test(tls_refuses_garbage_before_handshake),
      cmocka_unit_test(tls_refuses_garbage_that_looks_like_tls),
      cmocka_unit_test(tls_handshake_timeout_on_silent_client),
      cmocka_unit_test(tls_closes_on_oversized_frame),
      cmocka_unit_test(tls_idle_timeout_closes),
      cmocka_unit_test(tls_tells_truncation_from_close_notify),
      cmocka_unit_test(tls_owner_close_is_orderly_for_the_peer),
      cmocka_unit_test(tls_threaded_handshakes_at_once),
      cmocka_unit_test(tls_threaded_step_outlives_a_close),
      cmocka_unit_test(tls_crl_reload_refuses_newly_revoked),
      cmocka_unit_test(tls_config_errors_name_the_file),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
