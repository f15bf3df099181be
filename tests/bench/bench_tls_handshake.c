/* bench_tls_handshake: what one TLS handshake costs each end on the
 * paths this process takes (tls/paths.h: the ECDSA signatures and a
 * client's x25519 by libcrypto when their self-tests passed; the server's
 * key exchange and the hashes by mbedtls), against mbedtls 2.28 alone: the
 * same-run baseline.
 *
 * Server and client (deploy/certs/tg-certs: P-256 keys, one CA) talk
 * through memory in one thread, no socket: the figures are CPU time in
 * each side's handshake calls, full handshakes (x25519 ECDHE, two
 * verifications and one signature at each end) and resumed ones (a
 * session ticket: no public-key operation). A collector opening N hosts
 * pays the client's figure N times (bench_fanout measures that whole).
 * A server remembers the client certificate's signature (and its CRL's)
 * after the first handshake (tg_tls_ecdsa_remember); the variants with a
 * CRL, as the relay is deployed, show it against a server that remembers
 * nothing (a new config for every handshake, made outside the timing).
 *
 *   bench_tls_handshake [SECONDS per variant, default 2]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_children.h"
#include "tls/ecdsa.h"
#include "tls/paths.h"
#include "tls/session.h"
#include "tls_pair.h"
#include "tracegate/error.h"

typedef struct figures {
  unsigned n;
  double client_ms, server_ms; /* CPU per handshake */
  double signs, verifies;      /* libcrypto operations per handshake */
  double remembered;           /* verifications answered from memory */
} figures_t;

/* One handshake, resumed from |saved| when given; when |save|, the
 * client's session into *save (the caller frees it). Adds each side's CPU
 * time to |s_ns| and |c_ns|. */
static int one(tg_tls_config_t *scfg, tg_tls_config_t *ccfg,
               const uint8_t *saved, size_t saved_len, uint8_t **save,
               size_t *save_len, uint64_t *s_ns, uint64_t *c_ns) {
  tls_pair_t p = {.scfg = scfg, .ccfg = ccfg};
  int rv = tls_pair_once(&p, saved, saved_len, save, save_len);
  *s_ns += p.s_cpu_ns;
  *c_ns += p.c_cpu_ns;
  return rv;
}

/* Handshakes between |scfg| and |ccfg| for |seconds| (at least 5 of
 * them): full ones, or each resumed from a first one's ticket. With
 * |fresh| (and |dir|, |so|), each on a new server config made like
 * |scfg|, which then remembers nothing. */
static int run(tg_tls_config_t *scfg, tg_tls_config_t *ccfg, bool resume,
               bool fresh, const char *dir, tg_tls_opts_t so, double seconds,
               figures_t *f) {
  uint8_t *saved = NULL;
  size_t saved_len = 0;
  uint64_t s_ns = 0, c_ns = 0;
  if (resume && one(scfg, ccfg, NULL, 0, &saved, &saved_len, &s_ns, &c_ns))
    return -1;
  s_ns = c_ns = 0;
  tg_tls_ecdsa_counts_t before = tg_tls_ecdsa_counts();
  unsigned n = 0;
  for (double end = bench_now_ms() + seconds * 1e3;
       n < 5 || bench_now_ms() < end; n++) {
    tg_tls_config_t *srv = fresh ? tls_pair_config(dir, true, so) : scfg;
    int rv =
        srv ? one(srv, ccfg, saved, saved_len, NULL, NULL, &s_ns, &c_ns) : -1;
    if (fresh) tg_tls_config_free(srv);
    if (rv) {
      free(saved);
      return -1;
    }
  }
  free(saved);
  tg_tls_ecdsa_counts_t after = tg_tls_ecdsa_counts();
  f->n = n;
  f->client_ms = (double)c_ns / n / 1e6;
  f->server_ms = (double)s_ns / n / 1e6;
  f->signs = (double)(after.signs - before.signs) / n;
  f->verifies = (double)(after.verifies - before.verifies) / n;
  f->remembered = (double)(after.remembered - before.remembered) / n;
  return 0;
}

static void print(const char *what, const figures_t *f) {
  printf(
      "  %-38s %5u   client %6.3f ms  server %6.3f ms  both %6.3f ms"
      "   libcrypto: %.0f signatures, %.0f verifications (+%.0f "
      "remembered)\n",
      what, f->n, f->client_ms, f->server_ms, f->client_ms + f->server_ms,
      f->signs, f->verifies, f->remembered);
}

/* The variants: the process's paths, mbedtls alone, a server with a CRL
 * with and without its memo, resumed handshakes. */
typedef struct variant {
  const char *name;
  bool all_by_mbedtls, resume;
  bool crl, fresh_server;
} variant_t;

static const variant_t variants[] = {
    {"full", false, false, false, false},
    {"full, all by mbedtls (baseline)", true, false, false, false},
    {"full, CRL at server", false, false, true, false},
    {"full, CRL at server, no memo (baseline)", false, false, true, true},
    {"resumed (ticket)", false, true, false, false},
};
enum { FULL, FULL_MBED, FULL_CRL, FULL_CRL_FORGETFUL, RESUMED, VARIANTS };
_Static_assert(sizeof(variants) / sizeof(variants[0]) == VARIANTS,
               "a name per variant");

/* The goals of a handshake's CPU, both ends together. */
#define GOAL_FULL_MS 3.0
#define GOAL_RESUMED_MS 0.2

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
  char paths[640];
  tg_tls_paths_describe(tg_tls_paths(), paths, sizeof(paths));
  char crl[160];
  snprintf(crl, sizeof(crl), "%s/pki/crl.pem", dir);
  figures_t f[VARIANTS];
  for (int v = 0; v < VARIANTS; v++) {
    const variant_t *var = &variants[v];
    tg_tls_config_t *cfg[2] = {0}; /* [server] */
    tg_tls_opts_t o[2];
    for (int srv = 0; srv < 2; srv++) {
      o[srv] = (tg_tls_opts_t){.mbedtls_signatures = var->all_by_mbedtls,
                               .mbedtls_kex = var->all_by_mbedtls,
                               .crl_file = srv && var->crl ? crl : NULL};
      if (!(cfg[srv] = tls_pair_config(dir, srv, o[srv]))) return 1;
    }
    int rv = run(cfg[1], cfg[0], var->resume, var->fresh_server, dir, o[1],
                 seconds, &f[v]);
    for (int srv = 0; srv < 2; srv++) tg_tls_config_free(cfg[srv]);
    if (rv) return 1;
  }
  printf(
      "bench_tls_handshake: TLS 1.2 handshakes through memory, one "
      "thread, P-256 certificates, x25519 ECDHE, %.1f s each\n  %s\n",
      seconds, paths);
  printf("  %-38s %5s   CPU per handshake at each end\n", "", "n");
  for (int v = 0; v < VARIANTS; v++) print(variants[v].name, &f[v]);
  double full = f[FULL].client_ms + f[FULL].server_ms;
  double resumed = f[RESUMED].client_ms + f[RESUMED].server_ms;
  printf("  full handshake, both ends: %.3f ms (goal <= %.1f: %s); %.2fx "
         "faster than mbedtls alone\n",
         full, GOAL_FULL_MS, full <= GOAL_FULL_MS ? "met" : "NOT met",
         (f[FULL_MBED].client_ms + f[FULL_MBED].server_ms) / full);
  printf("  resumed handshake, both ends: %.3f ms (goal <= %.1f: %s)\n",
         resumed, GOAL_RESUMED_MS, resumed <= GOAL_RESUMED_MS ? "met" : "NOT met");
  printf(
      "  full handshake at a server with a CRL (as the relay is deployed): "
      "%.3f ms remembering the client's certificate and the CRL, %.3f ms "
      "verifying them every time: %.2fx faster\n",
      f[FULL_CRL].server_ms, f[FULL_CRL_FORGETFUL].server_ms,
      f[FULL_CRL_FORGETFUL].server_ms / f[FULL_CRL].server_ms);
  printf(
      "  a collector opening 1000 hosts: %.2f s of client CPU cold "
      "(mbedtls alone: %.2f s), %.2f s resumed\n",
      f[FULL].client_ms, f[FULL_MBED].client_ms, f[RESUMED].client_ms);
  return 0;
}
