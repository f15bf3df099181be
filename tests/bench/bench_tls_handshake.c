/* bench_tls_handshake: what one TLS handshake costs each end, with the
 * ECDSA signatures made and checked by libcrypto (tls/ecdsa.h) and the
 * X25519 multiplications of the ECDHE made by libcrypto (tls/x25519.h),
 * both the default, against mbedtls 2.28 doing one or both, the same-run
 * baselines.
 *
 * Server and client (deploy/certs/tg-certs: P-256 keys, one CA) talk
 * through memory in one thread, no socket: the figures are CPU time in
 * each side's handshake calls, full handshakes (x25519 ECDHE, two
 * verifications and one signature at each end) and resumed ones (a
 * session ticket: no public-key operation). A collector opening N hosts
 * pays the client's figure N times (bench_fanout measures that whole).
 *
 *   bench_tls_handshake [SECONDS per variant, default 2]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_children.h"
#include "tls/ecdsa.h"
#include "tls/session.h"
#include "tls/x25519.h"
#include "tls_pair.h"
#include "tracegate/error.h"

typedef struct figures {
  unsigned n;
  double client_ms, server_ms; /* CPU per handshake */
  double signs, verifies;      /* libcrypto operations per handshake */
  double x25519;               /* libcrypto X25519 per handshake */
} figures_t;

/* One handshake, resumed from |saved| when given; when |save|, the
 * client's session into *save (the caller frees it). Adds each side's CPU
 * time to |s_ns| and |c_ns|. */
static int one(tg_tls_config_t *scfg, tg_tls_config_t *ccfg,
               const uint8_t *saved, size_t saved_len, uint8_t **save,
               size_t *save_len, uint64_t *s_ns, uint64_t *c_ns) {
  tls_pair_t p = {.scfg = scfg, .ccfg = ccfg};
  int rv = tls_pair_open(&p, saved, saved_len);
  if (!rv) rv = tls_pair_handshake(&p);
  if (!rv && saved && !tg_tls_session_resumed(p.c)) rv = -EPROTO;
  if (rv)
    fprintf(stderr, "handshake: %s: %s\n", tg_strerror(rv),
            p.c ? tg_tls_last_error(p.c) : "");
  *s_ns += p.s_cpu_ns;
  *c_ns += p.c_cpu_ns;
  int closed = tls_pair_close(&p, rv ? NULL : save, save_len);
  if (!rv) rv = closed;
  return rv;
}

/* Handshakes between |scfg| and |ccfg| for |seconds| (at least 5 of
 * them): full ones, or each resumed from a first one's ticket. */
static int run(tg_tls_config_t *scfg, tg_tls_config_t *ccfg, bool resume,
               double seconds, figures_t *f) {
  uint8_t *saved = NULL;
  size_t saved_len = 0;
  uint64_t s_ns = 0, c_ns = 0;
  if (resume && one(scfg, ccfg, NULL, 0, &saved, &saved_len, &s_ns, &c_ns))
    return -1;
  s_ns = c_ns = 0;
  tg_tls_ecdsa_counts_t before = tg_tls_ecdsa_counts();
  tg_tls_x25519_counts_t kx_before = tg_tls_x25519_counts();
  unsigned n = 0;
  for (double end = bench_now_ms() + seconds * 1e3;
       n < 5 || bench_now_ms() < end; n++)
    if (one(scfg, ccfg, saved, saved_len, NULL, NULL, &s_ns, &c_ns)) {
      free(saved);
      return -1;
    }
  free(saved);
  tg_tls_ecdsa_counts_t after = tg_tls_ecdsa_counts();
  tg_tls_x25519_counts_t kx_after = tg_tls_x25519_counts();
  f->x25519 = (double)(kx_after.by_libcrypto - kx_before.by_libcrypto) / n;
  f->n = n;
  f->client_ms = (double)c_ns / n / 1e6;
  f->server_ms = (double)s_ns / n / 1e6;
  f->signs = (double)(after.signs - before.signs) / n;
  f->verifies = (double)(after.verifies - before.verifies) / n;
  return 0;
}

static void print(const char *what, const figures_t *f) {
  printf(
      "  %-36s %5u   client %6.3f ms  server %6.3f ms  both %6.3f ms"
      "   libcrypto: %.0f signatures, %.0f verifications, %.0f X25519\n",
      what, f->n, f->client_ms, f->server_ms, f->client_ms + f->server_ms,
      f->signs, f->verifies, f->x25519);
}

/* The variants, each with its server and client configuration. */
enum { ALL_LIBCRYPTO, KX_BY_MBEDTLS, ALL_MBEDTLS, VARIANTS };

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  if (seconds <= 0) {
    fprintf(stderr, "usage: bench_tls_handshake [SECONDS per variant]\n");
    return 2;
  }
  bench_children_init();
  char dir[128];
  if (bench_tempdir(dir, sizeof(dir), "hs") != 0 ||
      bench_certs(dir, "relay.test", "alice") != 0)
    return 1;
  tg_tls_config_t *cfg[VARIANTS][2] = {{0}}; /* [variant][server] */
  for (int v = 0; v < VARIANTS; v++)
    for (int srv = 0; srv < 2; srv++)
      if (!(cfg[v][srv] = tls_pair_config(
                dir, srv,
                (tg_tls_opts_t){.mbedtls_signatures = v == ALL_MBEDTLS,
                                .mbedtls_key_exchange = v != ALL_LIBCRYPTO})))
        return 1;

  figures_t lib, kx_mbed, mbed, resumed;
  if (run(cfg[ALL_LIBCRYPTO][1], cfg[ALL_LIBCRYPTO][0], false, seconds, &lib) ||
      run(cfg[KX_BY_MBEDTLS][1], cfg[KX_BY_MBEDTLS][0], false, seconds,
          &kx_mbed) ||
      run(cfg[ALL_MBEDTLS][1], cfg[ALL_MBEDTLS][0], false, seconds, &mbed) ||
      run(cfg[ALL_LIBCRYPTO][1], cfg[ALL_LIBCRYPTO][0], true, seconds,
          &resumed))
    return 1;
  printf(
      "bench_tls_handshake: TLS 1.2 handshakes through memory, one "
      "thread, P-256 certificates, x25519 ECDHE, %.1f s each\n",
      seconds);
  printf("  %-36s %5s   CPU per handshake at each end\n", "", "n");
  print("full, ECDSA and X25519 by libcrypto", &lib);
  print("full, X25519 by mbedtls (baseline)", &kx_mbed);
  print("full, all by mbedtls (baseline)", &mbed);
  print("resumed (ticket)", &resumed);
  printf(
      "  full handshake: %.2fx faster at the client than with mbedtls's "
      "X25519, %.2fx than with mbedtls alone (server: %.2fx, %.2fx)\n",
      kx_mbed.client_ms / lib.client_ms, mbed.client_ms / lib.client_ms,
      kx_mbed.server_ms / lib.server_ms, mbed.server_ms / lib.server_ms);
  printf(
      "  a collector opening 1000 hosts: %.2f s of client CPU (mbedtls's "
      "X25519: %.2f s; mbedtls alone: %.2f s; resumed: %.2f s)\n",
      lib.client_ms, kx_mbed.client_ms, mbed.client_ms, resumed.client_ms);
  for (int v = 0; v < VARIANTS; v++)
    for (int srv = 0; srv < 2; srv++) tg_tls_config_free(cfg[v][srv]);
  return 0;
}
