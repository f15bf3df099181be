/* TLS throughput: the raw AEAD ciphers against the whole tls_chan path.
 *
 * 1. Raw mbedtls encryption of 16 KiB records (a TLS record's payload),
 *    AES-128-GCM, AES-256-GCM and CHACHA20-POLY1305, over ~1 GiB each.
 * 2. tg_tls_chan over loopback: a server on its own loop and thread, a
 *    client on the main thread sending ~1 GiB of 64 KiB frames as fast as
 *    congested()/on_drain allow, mutual TLS with certificates made by
 *    deploy/certs/tg-certs. Timed from the client's verified handshake to
 *    the server's last byte.
 * 3. The same channel with mbedtls's own record layer (mbedtls_records),
 *    against the default: records handed to libcrypto after the
 *    handshake (tls/handoff.h), whose raw sealing speed (tls/record.h) is
 *    printed next to mbedtls's.
 * Prints MB/s for each and the ratio chan / raw for the negotiated cipher:
 * the target is >= 80% of the raw cipher's speed for mbedtls records;
 * with libcrypto's the cipher is no longer what bounds the channel (the
 * socket copies are), so that ratio is printed for information.
 *
 * Wall-clock figures depend on having two idle cores. Each figure is also
 * given per CPU-second of the thread doing the work (CLOCK_THREAD_CPUTIME),
 * which does not move when other processes share the machine; for the
 * channel that is the slower of its two sides (sender encrypts, receiver
 * decrypts), so "cpu ratio" is the transport's own efficiency.
 *
 * usage: bench_tls_cipher [MiB]   (default 1024; --help)
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "abi/ipc_frame.h"
#include "tracegate/pb_wire.h"
#include "bench_args.h"
#include "bench_cipher.h"
#include "tls/session.h"
#include "tls/dial.h"
#include "tls/transport.h"
#include "tracegate/error.h"
#include "common/log.h"

#define FRAME_PAYLOAD (64 * 1024)

typedef struct rate {
  double wall; /* MB/s */
  double cpu;  /* MB per CPU-second */
} rate_t;

/* Raw encryption of 16 KiB records (bench_cipher.h); zeros if unavailable. */
static rate_t bench_raw(bench_aead_t a, bench_lib_t lib, uint64_t total) {
  bench_span_t s = {0};
  rate_t r = {0, 0};
  if (bench_aead_run(a, lib, total, &s) == 0) {
    r.wall = bench_span_wall(&s);
    r.cpu = bench_span_cpu(&s);
  }
  return r;
}

/* --- tls_chan over loopback --------------------------------------------------- */

typedef struct server {
  uv_loop_t loop;
  uv_tcp_t listener;
  tg_tls_config_t *cfg;
  tg_tls_chan_t *ch;
  uint64_t want, got;
  _Atomic uint64_t t_end;
  uint64_t cpu_start, cpu_used; /* the server thread's */
  int status;
  char suite[64];
} server_t;

typedef struct client {
  uv_loop_t loop;
  tg_tls_chan_t *ch;
  uint64_t total, sent_frames, frames;
  uint64_t t_start;
  uint64_t cpu_start, cpu_used; /* the main thread's */
  int hs_status, close_status;
  uint8_t *frame;
  size_t frame_len;
} client_t;

static int srv_frame(tg_transport_t *t, const uint8_t *p, size_t n) {
  server_t *s = t->data;
  (void)p;
  s->got += n + TG_IPC_FRAME_HEADER_SIZE;
  if (s->got >= s->want) {
    atomic_store_explicit(&s->t_end, uv_hrtime(), memory_order_relaxed);
    s->cpu_used = bench_thread_cpu_ns() - s->cpu_start;
    tg_transport_close(t, 0);
    return 1;
  }
  return 0;
}

static void srv_close(tg_transport_t *t, int status) {
  server_t *s = t->data;
  s->status = status;
  if (!uv_is_closing((uv_handle_t *)&s->listener))
    uv_close((uv_handle_t *)&s->listener, NULL);
}

static const tg_transport_cbs_t srv_cbs = {.on_frame = srv_frame,
                                           .on_close = srv_close};

static void srv_handshake(tg_tls_chan_t *ch, int status) {
  server_t *s = tg_tls_chan_transport(ch)->data;
  snprintf(s->suite, sizeof(s->suite), "%s", tg_tls_chan_ciphersuite(ch));
  s->cpu_start = bench_thread_cpu_ns();
  if (status) fprintf(stderr, "server handshake: %s\n", tg_strerror(status));
}

static void srv_accept(uv_stream_t *l, int status) {
  server_t *s = l->data;
  if (status < 0 || s->ch) return;
  tg_tls_chan_opts_t o = {.on_handshake = srv_handshake};
  if (tg_tls_chan_accept(l, s->cfg, &o, &srv_cbs, s, &s->ch) != 0)
    uv_close((uv_handle_t *)l, NULL);
}

static void *srv_thread(void *arg) {
  server_t *s = arg;
  uv_run(&s->loop, UV_RUN_DEFAULT);
  return NULL;
}

static void cli_pump(client_t *c) {
  tg_transport_t *t = tg_tls_chan_transport(c->ch);
  while (c->sent_frames < c->frames && !tg_transport_congested(t)) {
    if (tg_transport_send(t, c->frame, c->frame_len, -1) != 0) return;
    c->sent_frames++;
  }
}

static int cli_frame(tg_transport_t *t, const uint8_t *p, size_t n) {
  (void)t, (void)p, (void)n;
  return 0;
}

static void cli_drain(tg_transport_t *t) { cli_pump(t->data); }

static void cli_close(tg_transport_t *t, int status) {
  client_t *c = t->data;
  c->close_status = status;
  if (c->cpu_start) c->cpu_used = bench_thread_cpu_ns() - c->cpu_start;
}

static const tg_transport_cbs_t cli_cbs = {
    .on_frame = cli_frame, .on_drain = cli_drain, .on_close = cli_close};

static void cli_handshake(tg_tls_chan_t *ch, int status) {
  client_t *c = tg_tls_chan_transport(ch)->data;
  c->hs_status = status;
  if (status) {
    fprintf(stderr, "client handshake: %s: %s\n", tg_strerror(status),
            tg_tls_chan_error(ch));
    return;
  }
  c->t_start = uv_hrtime();
  c->cpu_start = bench_thread_cpu_ns();
  cli_pump(c);
}

static int make_certs(char *dir, size_t len) {
  snprintf(dir, len, "/tmp/tg-bench-tls-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  char cmd[1024];
  snprintf(cmd, sizeof(cmd),
           "(cd '%s' && T='%s' && sh $T ca pki && sh $T host pki relay.test && "
           "sh $T client pki bench) >/dev/null",
           dir, TG_CERTS_TOOL);
  return system(cmd) == 0 ? 0 : -1;
}

static tg_tls_config_t *load(const char *dir, bool server, const char *name,
                             bool mbedtls_records) {
  char cert[256], key[256], ca[256];
  snprintf(cert, sizeof(cert), "%s/pki/%s.pem", dir, name);
  snprintf(key, sizeof(key), "%s/pki/%s.key", dir, name);
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", dir);
  tg_tls_opts_t o = {.server = server, .cert_file = cert, .key_file = key,
                     .ca_file = ca, .mbedtls_records = mbedtls_records};
  tg_tls_config_t *cfg = NULL;
  char err[256];
  if (tg_tls_config_new(&o, &cfg, err, sizeof(err)) != 0)
    fprintf(stderr, "tls config: %s\n", err);
  return cfg;
}

/* Frames (headers included) through the channel: wall MB/s, and MB per
 * CPU-second of the slower side; zeros on failure. */
static rate_t bench_chan(const char *dir, uint64_t total, bool mbedtls_records,
                         char *suite, size_t suite_len, double *cpu_send,
                         double *cpu_recv) {
  server_t *s = calloc(1, sizeof(*s));
  client_t *c = calloc(1, sizeof(*c));
  rate_t r = {0, 0};
  if (!s || !c) goto out;
  s->cfg = load(dir, true, "relay.test", mbedtls_records);
  tg_tls_config_t *ccfg = load(dir, false, "bench", mbedtls_records);
  if (!s->cfg || !ccfg) goto out;

  c->frame_len = FRAME_PAYLOAD + TG_IPC_FRAME_HEADER_SIZE;
  c->frame = malloc(c->frame_len);
  c->frames = total / c->frame_len;
  s->want = c->frames * c->frame_len;
  memset(c->frame, 0x5a, c->frame_len);
  tg_pb_write_le32(c->frame, FRAME_PAYLOAD);

  uv_loop_init(&s->loop);
  uv_tcp_init(&s->loop, &s->listener);
  s->listener.data = s;
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", 0, &a);
  uv_tcp_bind(&s->listener, (struct sockaddr *)&a, 0);
  if (uv_listen((uv_stream_t *)&s->listener, 4, srv_accept) != 0) goto out;
  int sl = sizeof(a);
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&a, &sl);
  char hp[64];
  snprintf(hp, sizeof(hp), "127.0.0.1:%d", ntohs(a.sin_port));
  pthread_t th;
  pthread_create(&th, NULL, srv_thread, s); /* the loop moves to the thread */

  uv_loop_init(&c->loop);
  tg_tls_chan_opts_t o = {.on_handshake = cli_handshake};
  if (tg_tls_chan_connect(&c->loop, hp, ccfg, "relay.test", &o, &cli_cbs, c,
                          &c->ch) == 0) {
    uv_run(&c->loop, UV_RUN_DEFAULT); /* ends when the server hangs up */
    tg_tls_chan_free(c->ch);
  }
  pthread_join(th, NULL);
  tg_tls_chan_free(s->ch);
  uv_loop_close(&s->loop);
  uv_loop_close(&c->loop);
  uint64_t t_end = atomic_load_explicit(&s->t_end, memory_order_relaxed);
  if (s->got >= s->want && c->t_start && t_end > c->t_start) {
    r.wall = bench_mbps(s->got, t_end - c->t_start);
    *cpu_send = bench_mbps(s->got, c->cpu_used);
    *cpu_recv = bench_mbps(s->got, s->cpu_used);
    r.cpu = *cpu_send < *cpu_recv ? *cpu_send : *cpu_recv;
  } else
    fprintf(stderr, "chan: got %" PRIu64 " of %" PRIu64 " bytes (server %s)\n",
            s->got, s->want, tg_strerror(s->status));
  snprintf(suite, suite_len, "%s", s->suite);
  tg_tls_config_free(ccfg);
out:
  if (s) tg_tls_config_free(s->cfg);
  if (c) free(c->frame);
  free(s);
  free(c);
  return r;
}

typedef struct raws {
  rate_t g128, g256, cc;
} raws_t;

static rate_t raw_for(const raws_t *r, const char *suite) {
  return strstr(suite, "AES-256-GCM") ? r->g256
         : strstr(suite, "CHACHA20")  ? r->cc
                                      : r->g128;
}

/* One channel run and its lines; 0, or -1 when it failed. */
static int chan_lines(const char *dir, uint64_t total, bool mbedtls_records,
                      const raws_t *raw, const char *what, const char *target) {
  char suite[64] = "";
  double cpu_send = 0, cpu_recv = 0;
  rate_t chan = bench_chan(dir, total, mbedtls_records, suite, sizeof(suite),
                           &cpu_send, &cpu_recv);
  if (chan.wall <= 0) return -1;
  rate_t base = raw_for(raw, suite);
  printf("  %-34s %10.0f %14.0f\n", what, chan.wall, chan.cpu);
  printf("    (%s; sender %.0f, receiver %.0f MB/CPU-s)\n", suite, cpu_send,
         cpu_recv);
  printf("    ratio chan / raw cipher          %10.2f %14.2f  %s\n",
         base.wall > 0 ? chan.wall / base.wall : 0,
         base.cpu > 0 ? chan.cpu / base.cpu : 0, target);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_tls_cipher [MiB]\n"
          "  Raw AEAD ciphers (mbedtls and libcrypto, 16 KiB records) against "
          "the whole\n"
          "  tls_chan path over loopback (mbedtls's records, then "
          "libcrypto's): MB/s\n"
          "  and MB per CPU-second, and the ratio chan / raw cipher.\n"
          "  MiB  encrypted per cipher and sent per channel (1-65536, "
          "default 1024)\n");
}

int main(int argc, char **argv) {
  uint64_t mib = 1024;
  const bench_arg_t args[] = {{"MiB", 1, 65536, &mib}};
  int parsed = bench_args_parse("bench_tls_cipher", argc, argv, args, 1,
                                usage, NULL);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  uint64_t total = mib << 20;
  tg_log_set_level(TG_LOG_WARN);

  printf("bench_tls_cipher: %" PRIu64 " MiB each, 16 KiB records, "
         "64 KiB frames\n", mib);
  printf("  %-34s %10s %14s\n", "", "MB/s", "MB/CPU-second");
  raws_t mb = {bench_raw(BENCH_AES128_GCM, BENCH_MBEDTLS, total),
               bench_raw(BENCH_AES256_GCM, BENCH_MBEDTLS, total),
               bench_raw(BENCH_CHACHAPOLY, BENCH_MBEDTLS, total)};
  raws_t lc = {bench_raw(BENCH_AES128_GCM, BENCH_LIBCRYPTO, total),
               bench_raw(BENCH_AES256_GCM, BENCH_LIBCRYPTO, total),
               bench_raw(BENCH_CHACHAPOLY, BENCH_LIBCRYPTO, total)};
  const char *names[] = {"AES-128-GCM", "AES-256-GCM", "CHACHA20-POLY1305"};
  const rate_t *m[] = {&mb.g128, &mb.g256, &mb.cc}, *l[] = {&lc.g128, &lc.g256, &lc.cc};
  for (int i = 0; i < 3; i++) {
    char what[64];
    snprintf(what, sizeof(what), "raw %s, mbedtls", names[i]);
    if (m[i]->wall > 0)
      printf("  %-34s %10.0f %14.0f\n", what, m[i]->wall, m[i]->cpu);
    snprintf(what, sizeof(what), "raw %s, libcrypto", names[i]);
    printf("  %-34s %10.0f %14.0f\n", what, l[i]->wall, l[i]->cpu);
  }

  char dir[64];
  if (make_certs(dir, sizeof(dir)) != 0) {
    fprintf(stderr, "bench_tls_cipher: cannot make certificates\n");
    return 1;
  }
  int rv = chan_lines(dir, total, true, &mb,
                      "tls_chan, mbedtls records", "(target >= 0.80)");
  if (rv == 0)
    rv = chan_lines(dir, total, false, &lc, "tls_chan, libcrypto records",
                    "(the socket copies bound it, not the cipher)");
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
  return rv == 0 ? 0 : 1;
}
