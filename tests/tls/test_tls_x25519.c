/* The handshake's X25519 through libcrypto (tls/x25519.h).
 *
 * The proof that the interposed multiplication is mbedtls's is that both
 * give the same result, or the same error, on the same inputs: inside a
 * scope it is libcrypto's, outside mbedtls's own. Then the key exchange
 * through mbedtls's ECDH API across the two, the scope's limits (other
 * curves, other threads, after leaving), and the handshakes: the counters
 * show the path taken, and mixed pairs show the two meet on the wire.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <mbedtls/ecdh.h>

#include "test_proc.h"
#include "tls/session.h"
#include "tls/x25519.h"
#include "tls_pair.h"
#include "tracegate/error.h"

static char g_dir[128]; /* pki: the CA, relay.test, alice */

static int group_setup(void **state) {
  (void)state;
  return tg_test_pki(g_dir, sizeof(g_dir), "tlsx");
}

static int group_teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

/* R = m * P, by libcrypto (in a scope) or by mbedtls (outside). */
static int mul(mbedtls_ecp_group *grp, bool libcrypto, mbedtls_ecp_point *R,
               const mbedtls_mpi *m, const mbedtls_ecp_point *P) {
  if (libcrypto) tg_tls_x25519_enter();
  int ret = mbedtls_ecp_mul(grp, R, m, P, tls_pair_rng, NULL);
  if (libcrypto) tg_tls_x25519_leave();
  return ret;
}

/* Multiplies |m| by the point of x-coordinate |x| both ways and checks
 * that the results (or the errors) are the same; returns the error. */
static int both_ways(mbedtls_ecp_group *grp, const mbedtls_mpi *m,
                     const mbedtls_mpi *x) {
  mbedtls_ecp_point P, a, b;
  mbedtls_ecp_point_init(&P);
  mbedtls_ecp_point_init(&a);
  mbedtls_ecp_point_init(&b);
  assert_int_equal(mbedtls_mpi_copy(&P.X, x), 0);
  assert_int_equal(mbedtls_mpi_lset(&P.Z, 1), 0);
  int ra = mul(grp, true, &a, m, &P);
  int rb = mul(grp, false, &b, m, &P);
  assert_int_equal(ra, rb);
  if (ra == 0) {
    assert_int_equal(mbedtls_mpi_cmp_mpi(&a.X, &b.X), 0);
    assert_int_equal(mbedtls_mpi_cmp_int(&a.Z, 1), 0);
    assert_int_equal(mbedtls_mpi_cmp_int(&b.Z, 1), 0);
  }
  mbedtls_ecp_point_free(&P);
  mbedtls_ecp_point_free(&a);
  mbedtls_ecp_point_free(&b);
  return ra;
}

/* Curve25519 with a private key and a coordinate to fill, per test. */
typedef struct curve {
  mbedtls_ecp_group grp;
  mbedtls_mpi d, x;
} curve_t;

static int curve_setup(void **state) {
  curve_t *cv = calloc(1, sizeof(*cv));
  if (!cv) return -1;
  mbedtls_ecp_group_init(&cv->grp);
  mbedtls_mpi_init(&cv->d);
  mbedtls_mpi_init(&cv->x);
  *state = cv;
  return mbedtls_ecp_group_load(&cv->grp, MBEDTLS_ECP_DP_CURVE25519) == 0 ? 0
                                                                          : -1;
}

static int curve_teardown(void **state) {
  curve_t *cv = *state;
  mbedtls_mpi_free(&cv->d);
  mbedtls_mpi_free(&cv->x);
  mbedtls_ecp_group_free(&cv->grp);
  free(cv);
  return 0;
}

/* Fresh private keys against the base point, fresh public keys, values of
 * u at or above p (which both reduce), and the RFC 7748 test vector. */
static void multiplications_match_mbedtls(void **state) {
  curve_t *cv = *state;
  mbedtls_ecp_group *grp = &cv->grp;
  mbedtls_mpi *d = &cv->d, *x = &cv->x;
  tg_tls_x25519_counts_t before = tg_tls_x25519_counts();
  for (int i = 0; i < 40; i++) {
    assert_int_equal(mbedtls_ecp_gen_privkey(grp, d, tls_pair_rng, NULL), 0);
    assert_int_equal(both_ways(grp, d, &grp->G.X), 0);
    /* A random u: any 255-bit value that is not a low-order point. */
    unsigned char u[32];
    assert_int_equal(tls_pair_rng(NULL, u, sizeof(u)), 0);
    u[31] &= 0x7f;
    assert_int_equal(mbedtls_mpi_read_binary_le(x, u, sizeof(u)), 0);
    assert_int_equal(both_ways(grp, d, x), 0);
  }
  /* u + p, below 2^255 for small u: the same point as u. */
  for (int u = 2; u < 12; u++) {
    assert_int_equal(mbedtls_mpi_add_int(x, &grp->P, u), 0);
    assert_int_equal(both_ways(grp, d, x), 0);
  }
  tg_tls_x25519_counts_t after = tg_tls_x25519_counts();
  assert_int_equal(after.by_libcrypto - before.by_libcrypto, 40 * 2 + 10);
  assert_int_equal(after.by_mbedtls - before.by_mbedtls, 0);

  /* RFC 7748, section 6.1: Alice's private key and public key. */
  static const unsigned char alice_k[32] = {
      0x77, 0x07, 0x6d, 0x0a, 0x73, 0x18, 0xa5, 0x7d, 0x3c, 0x16, 0xc1,
      0x72, 0x51, 0xb2, 0x66, 0x45, 0xdf, 0x4c, 0x2f, 0x87, 0xeb, 0xc0,
      0x99, 0x2a, 0xb1, 0x77, 0xfb, 0xa5, 0x1d, 0xb9, 0x2c, 0x2a};
  static const unsigned char alice_pub[32] = {
      0x85, 0x20, 0xf0, 0x09, 0x89, 0x30, 0xa7, 0x54, 0x74, 0x8b, 0x7d,
      0xdc, 0xb4, 0x3e, 0xf7, 0x5a, 0x0d, 0xbf, 0x3a, 0x0d, 0x26, 0x38,
      0x1a, 0xf4, 0xeb, 0xa4, 0xa9, 0x8e, 0xaa, 0x9b, 0x4e, 0x6a};
  unsigned char k[32];
  memcpy(k, alice_k, sizeof(k));
  k[0] &= 248; /* clamped as mbedtls keeps its private keys */
  k[31] = (unsigned char)((k[31] & 127) | 64);
  assert_int_equal(mbedtls_mpi_read_binary_le(d, k, sizeof(k)), 0);
  mbedtls_ecp_point R;
  mbedtls_ecp_point_init(&R);
  assert_int_equal(mul(grp, true, &R, d, &grp->G), 0);
  unsigned char got[32];
  assert_int_equal(mbedtls_mpi_write_binary_le(&R.X, got, sizeof(got)), 0);
  assert_memory_equal(got, alice_pub, sizeof(got));
  mbedtls_ecp_point_free(&R);
}

/* Inputs mbedtls refuses get the same error, and a u with its top bit set
 * (which RFC 7748 drops and mbedtls does not) is left to mbedtls. */
static void refusals_and_the_top_bit_stay_mbedtls_s(void **state) {
  curve_t *cv = *state;
  mbedtls_ecp_group *grp = &cv->grp;
  mbedtls_mpi *d = &cv->d, *x = &cv->x;
  assert_int_equal(mbedtls_ecp_gen_privkey(grp, d, tls_pair_rng, NULL), 0);
  tg_tls_x25519_counts_t before = tg_tls_x25519_counts();
  /* Low-order points: 0, 1, p - 1, p, p + 1. */
  assert_int_equal(mbedtls_mpi_lset(x, 0), 0);
  assert_int_not_equal(both_ways(grp, d, x), 0);
  assert_int_equal(mbedtls_mpi_lset(x, 1), 0);
  assert_int_not_equal(both_ways(grp, d, x), 0);
  for (int delta = -1; delta <= 1; delta++) {
    assert_int_equal(mbedtls_mpi_add_int(x, &grp->P, delta), 0);
    assert_int_not_equal(both_ways(grp, d, x), 0);
  }
  /* A scalar that is not clamped. */
  mbedtls_mpi bad;
  mbedtls_mpi_init(&bad);
  assert_int_equal(mbedtls_mpi_add_int(&bad, d, 1), 0);
  assert_int_not_equal(both_ways(grp, &bad, &grp->G.X), 0);
  mbedtls_mpi_free(&bad);
  /* The top bit: 2^255 + 9 is 28 mod p for mbedtls, 9 for RFC 7748. */
  assert_int_equal(mbedtls_mpi_lset(x, 9), 0);
  assert_int_equal(mbedtls_mpi_set_bit(x, 255, 1), 0);
  assert_int_equal(both_ways(grp, d, x), 0);
  tg_tls_x25519_counts_t after = tg_tls_x25519_counts();
  assert_int_equal(after.by_libcrypto - before.by_libcrypto, 0);
  assert_int_equal(after.by_mbedtls - before.by_mbedtls, 7);
}

/* Both ends of an ECDH exchange through mbedtls's own API, one in a scope
 * and one not, both ways round: they agree on the secret. */
static void an_exchange_agrees_across_the_two(void **state) {
  (void)state;
  for (int lib_first = 0; lib_first < 2; lib_first++) {
    mbedtls_ecdh_context a, b;
    mbedtls_ecdh_init(&a);
    mbedtls_ecdh_init(&b);
    assert_int_equal(mbedtls_ecdh_setup(&a, MBEDTLS_ECP_DP_CURVE25519), 0);
    assert_int_equal(mbedtls_ecdh_setup(&b, MBEDTLS_ECP_DP_CURVE25519), 0);
    unsigned char params[128], pub[128], sa[32], sb[32];
    size_t params_len, pub_len, sa_len, sb_len;
    tg_tls_x25519_counts_t before = tg_tls_x25519_counts();
    if (lib_first) tg_tls_x25519_enter();
    assert_int_equal(
        mbedtls_ecdh_make_params(&a, &params_len, params, sizeof(params),
                                 tls_pair_rng, NULL),
        0);
    if (lib_first) tg_tls_x25519_leave();
    const unsigned char *p = params;
    assert_int_equal(mbedtls_ecdh_read_params(&b, &p, params + params_len), 0);
    if (!lib_first) tg_tls_x25519_enter();
    assert_int_equal(mbedtls_ecdh_make_public(&b, &pub_len, pub, sizeof(pub),
                                              tls_pair_rng, NULL),
                     0);
    assert_int_equal(mbedtls_ecdh_calc_secret(&b, &sb_len, sb, sizeof(sb),
                                              tls_pair_rng, NULL),
                     0);
    if (!lib_first) tg_tls_x25519_leave();
    assert_int_equal(mbedtls_ecdh_read_public(&a, pub, pub_len), 0);
    if (lib_first) tg_tls_x25519_enter();
    assert_int_equal(mbedtls_ecdh_calc_secret(&a, &sa_len, sa, sizeof(sa),
                                              tls_pair_rng, NULL),
                     0);
    if (lib_first) tg_tls_x25519_leave();
    assert_int_equal(sa_len, sb_len);
    assert_memory_equal(sa, sb, sa_len);
    tg_tls_x25519_counts_t after = tg_tls_x25519_counts();
    assert_int_equal(after.by_libcrypto - before.by_libcrypto, 2);
    mbedtls_ecdh_free(&a);
    mbedtls_ecdh_free(&b);
  }
}

/* What a scope does not cover: other curves, other threads, the calling
 * thread after it left; and scopes nest. */
static void *mul_on_another_thread(void *arg) {
  mbedtls_ecp_group *grp = arg;
  mbedtls_mpi d;
  mbedtls_ecp_point Q;
  mbedtls_mpi_init(&d);
  mbedtls_ecp_point_init(&Q);
  /* tls_pair_rng: the test's thread waits in pthread_join meanwhile. */
  int ret = mbedtls_ecdh_gen_public(grp, &d, &Q, tls_pair_rng, NULL);
  mbedtls_mpi_free(&d);
  mbedtls_ecp_point_free(&Q);
  return ret == 0 ? grp : NULL;
}

static void a_scope_covers_curve25519_on_its_thread_only(void **state) {
  (void)state;
  mbedtls_ecp_group x25519, p256;
  mbedtls_ecp_group_init(&x25519);
  mbedtls_ecp_group_init(&p256);
  assert_int_equal(mbedtls_ecp_group_load(&x25519, MBEDTLS_ECP_DP_CURVE25519),
                   0);
  assert_int_equal(mbedtls_ecp_group_load(&p256, MBEDTLS_ECP_DP_SECP256R1), 0);
  /* A key pair per curve: mbedtls itself refuses to reuse a P-256 point's
   * storage (its numbers' sizes) for a Curve25519 result. */
  mbedtls_mpi d, d256;
  mbedtls_ecp_point Q, Q256;
  mbedtls_mpi_init(&d);
  mbedtls_mpi_init(&d256);
  mbedtls_ecp_point_init(&Q);
  mbedtls_ecp_point_init(&Q256);
  tg_tls_x25519_counts_t c0 = tg_tls_x25519_counts();
  tg_tls_x25519_enter();
  tg_tls_x25519_enter();
  assert_int_equal(
      mbedtls_ecdh_gen_public(&p256, &d256, &Q256, tls_pair_rng, NULL), 0);
  pthread_t t;
  void *res = NULL;
  assert_int_equal(pthread_create(&t, NULL, mul_on_another_thread, &x25519), 0);
  assert_int_equal(pthread_join(t, &res), 0);
  assert_ptr_equal(res, &x25519);
  tg_tls_x25519_counts_t c1 = tg_tls_x25519_counts();
  assert_int_equal(c1.by_libcrypto, c0.by_libcrypto);
  assert_int_equal(c1.by_mbedtls, c0.by_mbedtls);
  tg_tls_x25519_leave(); /* still inside the outer scope */
  assert_int_equal(mbedtls_ecdh_gen_public(&x25519, &d, &Q, tls_pair_rng, NULL),
                   0);
  tg_tls_x25519_counts_t c2 = tg_tls_x25519_counts();
  assert_int_equal(c2.by_libcrypto - c1.by_libcrypto, 1);
  tg_tls_x25519_leave();
  assert_int_equal(mbedtls_ecdh_gen_public(&x25519, &d, &Q, tls_pair_rng, NULL),
                   0);
  tg_tls_x25519_counts_t c3 = tg_tls_x25519_counts();
  assert_int_equal(c3.by_libcrypto, c2.by_libcrypto);
  mbedtls_mpi_free(&d);
  mbedtls_mpi_free(&d256);
  mbedtls_ecp_point_free(&Q);
  mbedtls_ecp_point_free(&Q256);
  mbedtls_ecp_group_free(&x25519);
  mbedtls_ecp_group_free(&p256);
}

static tg_tls_config_t *config(bool server, bool mbedtls_kx) {
  tg_tls_config_t *cfg = tls_pair_config(
      g_dir, server, (tg_tls_opts_t){.mbedtls_key_exchange = mbedtls_kx});
  assert_non_null(cfg);
  return cfg;
}

/* One handshake between |s| and |c| (resumed from |saved| if given) that
 * must make |want| X25519 multiplications by libcrypto; returns the
 * client's session for a later resumption (the caller frees it). */
static uint8_t *handshake_counts(tg_tls_config_t *s, tg_tls_config_t *c,
                                 const uint8_t *saved, size_t saved_len,
                                 uint64_t want, size_t *out_len) {
  tls_pair_t p = {.scfg = s, .ccfg = c};
  tg_tls_x25519_counts_t before = tg_tls_x25519_counts();
  uint8_t *out = NULL;
  /* Each end checked the other's Finished, sealed with keys from the
   * shared secret: the two ends derived the same one. */
  assert_int_equal(tls_pair_once(&p, saved, saved_len, &out, out_len), 0);
  tg_tls_x25519_counts_t after = tg_tls_x25519_counts();
  assert_int_equal(after.by_libcrypto - before.by_libcrypto, want);
  assert_int_equal(after.by_mbedtls - before.by_mbedtls, 0);
  return out;
}

/* A full handshake: each end makes its key pair and the shared secret, 4
 * multiplications, all libcrypto's. A resumed one: none. Either end on
 * mbedtls's multiplication meets the other; both on it, none by
 * libcrypto. */
static void handshakes_exchange_keys_through_libcrypto(void **state) {
  (void)state;
  for (int mbed_server = 0; mbed_server < 2; mbed_server++)
    for (int mbed_client = 0; mbed_client < 2; mbed_client++) {
      tg_tls_config_t *s = config(true, mbed_server);
      tg_tls_config_t *c = config(false, mbed_client);
      uint64_t want = (mbed_server ? 0 : 2) + (mbed_client ? 0 : 2);
      size_t len = 0;
      uint8_t *saved = handshake_counts(s, c, NULL, 0, want, &len);
      free(handshake_counts(s, c, saved, len, 0, &len));
      free(saved);
      tg_tls_config_free(s);
      tg_tls_config_free(c);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(multiplications_match_mbedtls,
                                      curve_setup, curve_teardown),
      cmocka_unit_test_setup_teardown(refusals_and_the_top_bit_stay_mbedtls_s,
                                      curve_setup, curve_teardown),
      cmocka_unit_test(an_exchange_agrees_across_the_two),
      cmocka_unit_test(a_scope_covers_curve25519_on_its_thread_only),
      cmocka_unit_test(handshakes_exchange_keys_through_libcrypto),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
