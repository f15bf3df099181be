/* The handshake's ECDSA through libcrypto (tls/ecdsa.h).
 *
 * The proof that an adopted key signs and verifies as ECDSA does is that
 * mbedtls's own ECDSA accepts its signatures and it accepts mbedtls's, on
 * each curve, and that both refuse the same changed inputs. Then the
 * handshakes: the counters show the path taken, mixed pairs show the two
 * meet on the wire, and a certificate signed by an impostor CA of the same
 * name is refused by libcrypto's verification.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecdsa.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>

#include "test_proc.h"
#include "tls/ecdsa.h"
#include "tls/self_test_key.h"
#include "tls/session.h"
#include "tls_pair.h"
#include "tracegate/error.h"

static char g_dir[128];      /* pki: the CA, relay.test, alice */
static char g_impostor[128]; /* pki: another CA with the same name, and
                                an alice of its own */

static int group_setup(void **state) {
  (void)state;
  if (tg_test_pki(g_dir, sizeof(g_dir), "tlsec") < 0 ||
      tg_test_mkdtemp(g_impostor, sizeof(g_impostor), "tlsec-imp") < 0 ||
      tg_test_certs(g_impostor, "ca pki") ||
      tg_test_certs(g_impostor, "client pki alice"))
    return -1;
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  int a = tg_test_rm_rf(g_dir), b = tg_test_rm_rf(g_impostor);
  return a == 0 && b == 0 ? 0 : -1;
}

/* A fresh key on |grp| in |native| (mbedtls's ECDSA) and the same key in
 * |adopted|, parsed again from its DER. Returns whether |adopted| took. */
static bool key_pair(mbedtls_ecp_group_id grp, mbedtls_pk_context *native,
                     mbedtls_pk_context *adopted) {
  mbedtls_pk_init(native);
  mbedtls_pk_init(adopted);
  assert_int_equal(
      mbedtls_pk_setup(native, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)), 0);
  assert_int_equal(
      mbedtls_ecp_gen_key(grp, mbedtls_pk_ec(*native), tls_pair_rng, NULL), 0);
  unsigned char der[512];
  int len = mbedtls_pk_write_key_der(native, der, sizeof(der));
  assert_true(len > 0);
  assert_int_equal(mbedtls_pk_parse_key(adopted, der + sizeof(der) - len,
                                        (size_t)len, NULL, 0),
                   0);
  return tg_tls_ecdsa_adopt(adopted);
}

static void fill(unsigned char *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed * 31u + i * 7u);
}

static int sign(mbedtls_pk_context *k, const unsigned char *hash,
                size_t hash_len, unsigned char *sig, size_t *sig_len) {
  return mbedtls_pk_sign(k,
                         hash_len == 48 ? MBEDTLS_MD_SHA384 : MBEDTLS_MD_SHA256,
                         hash, hash_len, sig, sig_len, tls_pair_rng, NULL);
}

static int verify(mbedtls_pk_context *k, const unsigned char *hash,
                  size_t hash_len, const unsigned char *sig, size_t sig_len) {
  return mbedtls_pk_verify(
      k, hash_len == 48 ? MBEDTLS_MD_SHA384 : MBEDTLS_MD_SHA256, hash, hash_len,
      sig, sig_len);
}

static const mbedtls_ecp_group_id k_curves[] = {MBEDTLS_ECP_DP_SECP256R1,
                                                MBEDTLS_ECP_DP_SECP384R1,
                                                MBEDTLS_ECP_DP_SECP521R1};

static void signatures_cross_between_libcrypto_and_mbedtls(void **state) {
  (void)state;
  for (size_t c = 0; c < sizeof(k_curves) / sizeof(k_curves[0]); c++) {
    mbedtls_pk_context native, adopted;
    assert_true(key_pair(k_curves[c], &native, &adopted));
    assert_true(tg_tls_ecdsa_adopted(&adopted));
    assert_false(tg_tls_ecdsa_adopted(&native));
    assert_true(tg_tls_ecdsa_adopt(&adopted)); /* twice: no change */
    assert_int_equal(mbedtls_pk_get_type(&adopted), MBEDTLS_PK_ECKEY);
    for (size_t hash_len = 32; hash_len <= 48; hash_len += 16) {
      unsigned char hash[48], sig[MBEDTLS_ECDSA_MAX_LEN];
      size_t sig_len = 0;
      fill(hash, hash_len, (unsigned)(c + hash_len));
      tg_tls_ecdsa_counts_t before = tg_tls_ecdsa_counts();

      assert_int_equal(sign(&adopted, hash, hash_len, sig, &sig_len), 0);
      assert_true(sig_len > 0 && sig_len <= MBEDTLS_ECDSA_MAX_LEN);
      assert_int_equal(verify(&native, hash, hash_len, sig, sig_len), 0);
      assert_int_equal(verify(&adopted, hash, hash_len, sig, sig_len), 0);

      assert_int_equal(sign(&native, hash, hash_len, sig, &sig_len), 0);
      assert_int_equal(verify(&adopted, hash, hash_len, sig, sig_len), 0);

      tg_tls_ecdsa_counts_t after = tg_tls_ecdsa_counts();
      assert_int_equal(after.signs - before.signs, 1);
      assert_int_equal(after.verifies - before.verifies, 2);
      assert_int_equal(after.refused, before.refused);
    }
    mbedtls_pk_free(&native);
    mbedtls_pk_free(&adopted); /* mbedtls frees the keypair as before */
  }
}

/* A public key alone (a peer's certificate key, adopted per handshake, made
 * from ready curve parameters): it verifies what mbedtls signs on every
 * curve, refuses a changed signature, and cannot sign. */
static void public_keys_verify_on_every_curve(void **state) {
  (void)state;
  for (size_t c = 0; c < sizeof(k_curves) / sizeof(k_curves[0]); c++) {
    mbedtls_pk_context native, unused, pub;
    assert_true(key_pair(k_curves[c], &native, &unused));
    mbedtls_pk_free(&unused);
    unsigned char der[256];
    int len = mbedtls_pk_write_pubkey_der(&native, der, sizeof(der));
    assert_true(len > 0);
    mbedtls_pk_init(&pub);
    assert_int_equal(
        mbedtls_pk_parse_public_key(&pub, der + sizeof(der) - len, (size_t)len),
        0);
    assert_true(tg_tls_ecdsa_adopt(&pub));
    unsigned char hash[48], sig[MBEDTLS_ECDSA_MAX_LEN];
    size_t hash_len = k_curves[c] == MBEDTLS_ECP_DP_SECP256R1 ? 32 : 48;
    size_t sig_len = 0;
    fill(hash, hash_len, (unsigned)c + 11);
    assert_int_equal(sign(&native, hash, hash_len, sig, &sig_len), 0);
    tg_tls_ecdsa_counts_t before = tg_tls_ecdsa_counts();
    assert_int_equal(verify(&pub, hash, hash_len, sig, sig_len), 0);
    sig[sig_len / 2] ^= 1;
    assert_int_not_equal(verify(&pub, hash, hash_len, sig, sig_len), 0);
    tg_tls_ecdsa_counts_t after = tg_tls_ecdsa_counts();
    assert_int_equal(after.verifies - before.verifies, 2);
    assert_int_equal(after.refused - before.refused, 1);
    assert_int_not_equal(sign(&pub, hash, hash_len, sig, &sig_len), 0);
    mbedtls_pk_free(&native);
    mbedtls_pk_free(&pub);
  }
}

/* Every one-bit change of the signature, another digest, a byte more or
 * less, nothing at all: libcrypto refuses, and so does mbedtls. */
static void changed_signatures_and_digests_are_refused(void **state) {
  (void)state;
  mbedtls_pk_context native, adopted;
  assert_true(key_pair(MBEDTLS_ECP_DP_SECP256R1, &native, &adopted));
  unsigned char hash[32], sig[MBEDTLS_ECDSA_MAX_LEN + 1], bad[sizeof(sig)];
  size_t sig_len = 0;
  fill(hash, sizeof(hash), 5);
  assert_int_equal(sign(&native, hash, sizeof(hash), sig, &sig_len), 0);
  tg_tls_ecdsa_counts_t before = tg_tls_ecdsa_counts();
  uint64_t tried = 0;

  for (size_t i = 0; i < sig_len * 8; i++) {
    memcpy(bad, sig, sig_len);
    bad[i / 8] ^= (unsigned char)(1u << (i % 8));
    assert_int_not_equal(verify(&adopted, hash, sizeof(hash), bad, sig_len), 0);
    assert_int_not_equal(verify(&native, hash, sizeof(hash), bad, sig_len), 0);
    tried++;
  }
  unsigned char other[32];
  memcpy(other, hash, sizeof(other));
  other[31] ^= 1;
  assert_int_not_equal(verify(&adopted, other, sizeof(other), sig, sig_len), 0);
  memcpy(bad, sig, sig_len);
  bad[sig_len] = 0;
  assert_int_not_equal(verify(&adopted, hash, sizeof(hash), bad, sig_len + 1),
                       0);
  assert_int_not_equal(verify(&adopted, hash, sizeof(hash), sig, sig_len - 1),
                       0);
  assert_int_not_equal(verify(&adopted, hash, sizeof(hash), sig, 0), 0);
  tried += 4;
  /* The untouched signature still holds. */
  assert_int_equal(verify(&adopted, hash, sizeof(hash), sig, sig_len), 0);

  tg_tls_ecdsa_counts_t after = tg_tls_ecdsa_counts();
  assert_int_equal(after.refused - before.refused, tried);
  assert_int_equal(after.verifies - before.verifies, tried + 1);
  mbedtls_pk_free(&native);
  mbedtls_pk_free(&adopted);
}

/* A key told to remember answers a verification that held once from
 * memory, the same digest with the same signature only: any other digest
 * or signature, one a byte longer, or the digest within a longer one, is
 * verified, a refusal is never
 * kept, and the ninth signature makes room by forgetting the one met
 * longest ago. */
static void a_remembering_key_verifies_each_signature_once(void **state) {
  (void)state;
  mbedtls_pk_context native, adopted;
  assert_true(key_pair(MBEDTLS_ECP_DP_SECP256R1, &native, &adopted));
  assert_false(tg_tls_ecdsa_remember(&native));
  assert_true(tg_tls_ecdsa_remember(&adopted));
  assert_true(tg_tls_ecdsa_remember(&adopted)); /* twice: no change */
  enum { N = TG_TLS_ECDSA_MEMO + 1 };
  unsigned char hash[N][32], sig[N][MBEDTLS_ECDSA_MAX_LEN + 1];
  size_t sig_len[N];
  for (int i = 0; i < N; i++) {
    fill(hash[i], sizeof(hash[i]), (unsigned)i + 100);
    assert_int_equal(sign(&native, hash[i], 32, sig[i], &sig_len[i]), 0);
  }
  tg_tls_ecdsa_counts_t c0 = tg_tls_ecdsa_counts();
  for (int i = 0; i < N; i++) /* 0 is forgotten for N-1 */
    assert_int_equal(verify(&adopted, hash[i], 32, sig[i], sig_len[i]), 0);
  for (int i = 1; i < N; i++)
    assert_int_equal(verify(&adopted, hash[i], 32, sig[i], sig_len[i]), 0);
  tg_tls_ecdsa_counts_t c1 = tg_tls_ecdsa_counts();
  assert_int_equal(c1.verifies - c0.verifies, N);
  assert_int_equal(c1.remembered - c0.remembered, N - 1);
  /* 0 again: verified, and 1 (met longest ago) makes room for it. */
  assert_int_equal(verify(&adopted, hash[0], 32, sig[0], sig_len[0]), 0);
  assert_int_equal(verify(&adopted, hash[2], 32, sig[2], sig_len[2]), 0);
  assert_int_equal(verify(&adopted, hash[1], 32, sig[1], sig_len[1]), 0);
  tg_tls_ecdsa_counts_t c2 = tg_tls_ecdsa_counts();
  assert_int_equal(c2.verifies - c1.verifies, 2);
  assert_int_equal(c2.remembered - c1.remembered, 1);

  /* Near misses of a remembered verification (2, just met): each one
   * verified. */
  enum { K = 2 };
  unsigned char bad[MBEDTLS_ECDSA_MAX_LEN + 1];
  memcpy(bad, sig[K], sig_len[K]);
  bad[sig_len[K] - 1] ^= 1;
  assert_int_not_equal(verify(&adopted, hash[K], 32, bad, sig_len[K]), 0);
  assert_int_not_equal(verify(&adopted, hash[K], 32, bad, sig_len[K]), 0);
  assert_int_not_equal(verify(&adopted, hash[K + 3], 32, sig[K], sig_len[K]),
                       0);
  sig[K][sig_len[K]] = 0;
  assert_int_not_equal(verify(&adopted, hash[K], 32, sig[K], sig_len[K] + 1),
                       0);
  /* ECDSA reads a P-256 digest's leftmost 256 bits: this one holds, but
   * it is not the remembered input, so it is verified. */
  unsigned char longer[48] = {0};
  memcpy(longer, hash[K], 32);
  assert_int_equal(verify(&adopted, longer, 48, sig[K], sig_len[K]), 0);
  tg_tls_ecdsa_counts_t c3 = tg_tls_ecdsa_counts();
  assert_int_equal(c3.verifies - c2.verifies, 5);
  assert_int_equal(c3.refused - c2.refused, 4);
  assert_int_equal(c3.remembered, c2.remembered);
  /* The remembered one still holds, from memory. */
  assert_int_equal(verify(&adopted, hash[K], 32, sig[K], sig_len[K]), 0);
  assert_int_equal(tg_tls_ecdsa_counts().remembered - c3.remembered, 1);
  mbedtls_pk_free(&native);
  mbedtls_pk_free(&adopted); /* frees the memo with the key */
}

/* A curve libcrypto is not given, or no key at all: left to mbedtls. */
static void other_keys_stay_with_mbedtls(void **state) {
  (void)state;
  mbedtls_pk_context native, other;
  assert_false(key_pair(MBEDTLS_ECP_DP_BP256R1, &native, &other));
  assert_ptr_equal(other.pk_info, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
  assert_false(tg_tls_ecdsa_adopted(&other));
  unsigned char hash[32], sig[MBEDTLS_ECDSA_MAX_LEN];
  size_t sig_len = 0;
  fill(hash, sizeof(hash), 9);
  tg_tls_ecdsa_counts_t before = tg_tls_ecdsa_counts();
  assert_int_equal(sign(&other, hash, sizeof(hash), sig, &sig_len), 0);
  assert_int_equal(verify(&native, hash, sizeof(hash), sig, sig_len), 0);
  tg_tls_ecdsa_counts_t after = tg_tls_ecdsa_counts();
  assert_int_equal(after.signs, before.signs);
  assert_int_equal(after.verifies, before.verifies);
  mbedtls_pk_free(&native);
  mbedtls_pk_free(&other);

  mbedtls_pk_context none;
  mbedtls_pk_init(&none);
  assert_false(tg_tls_ecdsa_adopt(&none));
  assert_null(none.pk_info);
}

static tg_tls_config_t *config(bool server, tg_tls_opts_t o) {
  tg_tls_config_t *c = tls_pair_config(g_dir, server, o);
  assert_non_null(c);
  return c;
}

/* Runs a handshake between a server and a client that use libcrypto's
 * signatures unless told otherwise; checks the operations it counted.
 * Returns the client's session, saved, for a resumption (free it). */
static uint8_t *handshake_counts(tg_tls_config_t *scfg, tg_tls_config_t *ccfg,
                                 const uint8_t *saved, size_t saved_len,
                                 uint64_t signs, uint64_t verifies,
                                 uint64_t remembered, size_t *out_len) {
  tls_pair_t p = {.scfg = scfg, .ccfg = ccfg};
  tg_tls_ecdsa_counts_t before = tg_tls_ecdsa_counts();
  uint8_t *out = NULL;
  assert_int_equal(tls_pair_once(&p, saved, saved_len, &out, out_len), 0);
  tg_tls_ecdsa_counts_t after = tg_tls_ecdsa_counts();
  assert_int_equal(after.signs - before.signs, signs);
  assert_int_equal(after.verifies - before.verifies, verifies);
  assert_int_equal(after.remembered - before.remembered, remembered);
  assert_int_equal(after.refused, before.refused);
  return out;
}

/* A full handshake: each end verifies the other's certificate and its
 * signature on the handshake, and signs once: 4 verifications and 2
 * signatures, all libcrypto's. A resumed one: none. The next full one:
 * the server remembers the client's certificate (tg_tls_ecdsa_remember
 * on its CA keys), the client verifies the server's again. */
static void a_full_handshake_signs_and_verifies_through_libcrypto(
    void **state) {
  (void)state;
  tg_tls_config_t *s = config(true, (tg_tls_opts_t){0});
  tg_tls_config_t *c = config(false, (tg_tls_opts_t){0});
  size_t len = 0;
  uint8_t *saved = handshake_counts(s, c, NULL, 0, 2, 4, 0, &len);
  uint8_t *again = handshake_counts(s, c, saved, len, 0, 0, 0, &len);
  free(again);
  again = handshake_counts(s, c, NULL, 0, 2, 3, 1, &len);
  free(saved);
  free(again);
  tg_tls_config_free(s);
  tg_tls_config_free(c);
}

/* One end on mbedtls's ECDSA, the other on libcrypto's, both ways round:
 * each verifies what the other signed. */
static void libcrypto_and_mbedtls_signatures_meet_in_a_handshake(void **state) {
  (void)state;
  for (int mbed_server = 0; mbed_server < 2; mbed_server++) {
    tg_tls_config_t *s =
        config(true, (tg_tls_opts_t){.mbedtls_signatures = mbed_server});
    tg_tls_config_t *c =
        config(false, (tg_tls_opts_t){.mbedtls_signatures = !mbed_server});
    size_t len = 0;
    free(handshake_counts(s, c, NULL, 0, 1, 2, 0, &len));
    tg_tls_config_free(s);
    tg_tls_config_free(c);
  }
  tg_tls_config_t *s =
      config(true, (tg_tls_opts_t){.mbedtls_signatures = true});
  tg_tls_config_t *c =
      config(false, (tg_tls_opts_t){.mbedtls_signatures = true});
  size_t len = 0;
  free(handshake_counts(s, c, NULL, 0, 0, 0, 0, &len));
  tg_tls_config_free(s);
  tg_tls_config_free(c);
}

/* A handshake between |scfg| and |ccfg| that fails on one signature
 * check made by libcrypto (none answered from memory), said by the
 * server (|by_server|) or the client as a certificate not correctly
 * signed. */
static void refused_by_one_verification(tg_tls_config_t *scfg,
                                        tg_tls_config_t *ccfg,
                                        bool by_server) {
  tls_pair_t p = {.scfg = scfg, .ccfg = ccfg};
  assert_int_equal(tls_pair_open(&p, NULL, 0), 0);
  tg_tls_ecdsa_counts_t before = tg_tls_ecdsa_counts();
  assert_int_not_equal(tls_pair_handshake(&p), 0);
  tg_tls_ecdsa_counts_t after = tg_tls_ecdsa_counts();
  assert_int_equal(after.refused - before.refused, 1);
  assert_int_equal(after.remembered, before.remembered);
  assert_non_null(strstr(tg_tls_last_error(by_server ? p.s : p.c),
                         "not correctly signed"));
  tls_pair_close(&p, NULL, NULL);
}

/* A CA of the same name but another key: mbedtls finds it as the parent
 * of the server's certificate, and the signature check, libcrypto's,
 * refuses. */
static void an_impostor_ca_of_the_same_name_is_refused(void **state) {
  (void)state;
  char ca[256];
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", g_impostor);
  tg_tls_config_t *s = config(true, (tg_tls_opts_t){0});
  tg_tls_config_t *c = config(false, (tg_tls_opts_t){.ca_file = ca});
  refused_by_one_verification(s, c, false);
  tg_tls_config_free(s);
  tg_tls_config_free(c);
}

/* A client certificate of the same name from an impostor CA, after the
 * real one was remembered: its signature is another, so it is verified,
 * and refused. */
static void an_impostor_client_is_refused_after_the_real_one(void **state) {
  (void)state;
  char cert[256], key[256];
  snprintf(cert, sizeof(cert), "%s/pki/alice.pem", g_impostor);
  snprintf(key, sizeof(key), "%s/pki/alice.key", g_impostor);
  tg_tls_config_t *s = config(true, (tg_tls_opts_t){0});
  tg_tls_config_t *c = config(false, (tg_tls_opts_t){0});
  size_t len = 0;
  free(handshake_counts(s, c, NULL, 0, 2, 4, 0, &len));
  free(handshake_counts(s, c, NULL, 0, 2, 3, 1, &len));
  tg_tls_config_free(c);
  char ca[256];
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", g_dir);
  tg_tls_opts_t o = {
      .server = false, .ca_file = ca, .cert_file = cert, .key_file = key};
  char err[256];
  assert_int_equal(tg_tls_config_new(&o, &c, err, sizeof(err)), 0);
  refused_by_one_verification(s, c, true);
  tg_tls_config_free(s);
  tg_tls_config_free(c);
}

/* The self-tests' key is made at each run (tls/self_test_key.h): two runs
 * never share one, and the certificate made with it is its own: it names
 * the key's public half and verifies under it. */
static void self_test_keys_are_made_fresh(void **state) {
  (void)state;
  static const char seed[] = "test_tls_ecdsa";
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_pk_context a, b;
  mbedtls_x509_crt cert;
  mbedtls_entropy_init(&entropy);
  mbedtls_ctr_drbg_init(&drbg);
  mbedtls_pk_init(&a);
  mbedtls_pk_init(&b);
  mbedtls_x509_crt_init(&cert);
  assert_int_equal(mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
                                         (const unsigned char *)seed,
                                         sizeof(seed) - 1), 0);
  assert_int_equal(tg_tls_self_test_key(&a, &cert, &drbg), 0);
  assert_int_equal(tg_tls_self_test_key(&b, NULL, &drbg), 0);
  assert_int_equal(mbedtls_pk_get_bitlen(&a), 256);
  assert_int_not_equal(mbedtls_mpi_cmp_mpi(&mbedtls_pk_ec(a)->d,
                                           &mbedtls_pk_ec(b)->d), 0);
  assert_int_equal(mbedtls_ecp_point_cmp(&mbedtls_pk_ec(cert.pk)->Q,
                                         &mbedtls_pk_ec(a)->Q), 0);
  uint32_t flags = 0;
  assert_int_equal(mbedtls_x509_crt_verify(&cert, &cert, NULL, NULL, &flags,
                                           NULL, NULL), 0);
  mbedtls_x509_crt_free(&cert);
  mbedtls_pk_free(&a);
  mbedtls_pk_free(&b);
  mbedtls_ctr_drbg_free(&drbg);
  mbedtls_entropy_free(&entropy);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(signatures_cross_between_libcrypto_and_mbedtls),
      cmocka_unit_test(public_keys_verify_on_every_curve),
      cmocka_unit_test(changed_signatures_and_digests_are_refused),
      cmocka_unit_test(a_remembering_key_verifies_each_signature_once),
      cmocka_unit_test(other_keys_stay_with_mbedtls),
      cmocka_unit_test(a_full_handshake_signs_and_verifies_through_libcrypto),
      cmocka_unit_test(libcrypto_and_mbedtls_signatures_meet_in_a_handshake),
      cmocka_unit_test(an_impostor_ca_of_the_same_name_is_refused),
      cmocka_unit_test(an_impostor_client_is_refused_after_the_real_one),
      cmocka_unit_test(self_test_keys_are_made_fresh),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
