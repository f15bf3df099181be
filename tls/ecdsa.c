/* ECDSA for mbedtls's handshakes through libcrypto: see tls/ecdsa.h. */
#include "tls/ecdsa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecdsa.h>
#include <mbedtls/entropy.h>
#include <mbedtls/ecp.h>
/* Internal to mbedtls: used only where tls/paths.c found the version we
 * were compiled against and tg_tls_ecdsa_self_test() passed. */
#include <mbedtls/pk_internal.h>
#include <mbedtls/platform.h>
#include <mbedtls/platform_util.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "tls/self_test_key.h"

static mbedtls_pk_info_t adopted_info;

/* An adopted key's context: mbedtls's keypair first, since every entry of
 * the EC table reads the context as one (and so does mbedtls_pk_ec()),
 * then libcrypto's copy of the key, made once at adoption: importing a
 * key builds its curve's group, which cost about as much as the
 * verification itself when done per operation. */
typedef struct adopted_key {
  mbedtls_ecp_keypair kp;
  EVP_PKEY *evp; /* owned; NULL for a key set up empty (adopted_alloc) */
  struct memo *memo; /* owned; NULL unless tg_tls_ecdsa_remember() */
} adopted_key_t;

/* Verifications that held with one key, each kept whole (the digest and
 * the signature as given, no hash of them), least recently met first to
 * go. A key's memo may be met from any thread holding its config. */
typedef struct verified {
  uint64_t last_met; /* 0: an empty slot */
  uint8_t hash_len, sig_len;
  unsigned char hash[MBEDTLS_MD_MAX_SIZE];
  unsigned char sig[MBEDTLS_ECDSA_MAX_LEN];
} verified_t;

struct memo {
  pthread_mutex_t lock;
  uint64_t clock;
  verified_t slot[TG_TLS_ECDSA_MEMO];
};

static pthread_once_t adopted_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t n_signs, n_verifies, n_refused, n_remembered;

/* The curves' parameters as libcrypto keys without a point, made once:
 * an import that names its curve builds the curve's group, several times
 * the cost of copying ready parameters and setting the point. Read-only
 * once made, so shared by every thread. */
enum { CURVE_P256, CURVE_P384, CURVE_P521, N_CURVES };
static EVP_PKEY *curve_params[N_CURVES];
static pthread_once_t params_once = PTHREAD_ONCE_INIT;

static int curve_index(mbedtls_ecp_group_id id) {
  switch (id) {
    case MBEDTLS_ECP_DP_SECP256R1:
      return CURVE_P256;
    case MBEDTLS_ECP_DP_SECP384R1:
      return CURVE_P384;
    case MBEDTLS_ECP_DP_SECP521R1:
      return CURVE_P521;
    default:
      return -1;
  }
}

static const char *const curve_names[N_CURVES] = {"prime256v1", "secp384r1",
                                                  "secp521r1"};

/* A NULL entry (libcrypto refused the curve) makes to_evp() refuse that
 * curve's public keys, which then stay with mbedtls as any key libcrypto
 * refuses (tg_tls_ecdsa_adopt). Never freed: a few hundred bytes for the
 * process's life. */
static void make_curve_params(void) {
  for (int i = 0; i < N_CURVES; i++) {
    OSSL_PARAM params[2] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
                                         (char *)curve_names[i], 0),
        OSSL_PARAM_construct_end()};
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (!ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &curve_params[i], EVP_PKEY_KEY_PARAMETERS,
                          params) != 1)
      curve_params[i] = NULL;
    EVP_PKEY_CTX_free(ctx);
  }
}

/* A public key from its encoded point |pub|: a copy of the curve's
 * parameters with the point set (libcrypto checks it is on the curve). */
static EVP_PKEY *public_from_params(int curve, const unsigned char *pub,
                                    size_t pub_len) {
  pthread_once(&params_once, make_curve_params);
  if (!curve_params[curve]) return NULL;
  EVP_PKEY *key = EVP_PKEY_dup(curve_params[curve]);
  if (key && EVP_PKEY_set1_encoded_public_key(key, pub, pub_len) != 1) {
    EVP_PKEY_free(key);
    key = NULL;
  }
  return key;
}

/* |kp| as a libcrypto key: its public point, and its private scalar too
 * when |with_private|. NULL when libcrypto refuses it. A public key is
 * made per handshake (the peer's, in note_verify), a private one once per
 * config (our own). */
static EVP_PKEY *to_evp(const mbedtls_ecp_keypair *kp, bool with_private) {
  int curve = curve_index(kp->grp.id);
  if (curve < 0) return NULL;
  unsigned char pub[MBEDTLS_ECP_MAX_PT_LEN];
  size_t pub_len = 0;
  if (mbedtls_ecp_point_write_binary(&kp->grp, &kp->Q,
                                     MBEDTLS_ECP_PF_UNCOMPRESSED, &pub_len, pub,
                                     sizeof(pub)) != 0)
    return NULL;
  if (!with_private) return public_from_params(curve, pub, pub_len);
  /* OSSL_PARAM integers are in the host's byte order. */
  unsigned char d[MBEDTLS_ECP_MAX_BYTES];
  size_t d_len = (kp->grp.nbits + 7) / 8;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  int ret = mbedtls_mpi_write_binary_le(&kp->d, d, d_len);
#else
  int ret = mbedtls_mpi_write_binary(&kp->d, d, d_len);
#endif
  if (ret != 0) return NULL;
  OSSL_PARAM params[4] = {
      OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
                                       (char *)curve_names[curve], 0),
      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, pub, pub_len),
      OSSL_PARAM_construct_BN(OSSL_PKEY_PARAM_PRIV_KEY, d, d_len),
      OSSL_PARAM_construct_end()};
  EVP_PKEY *key = NULL;
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
  if (!ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
      EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_KEYPAIR, params) != 1)
    key = NULL;
  EVP_PKEY_CTX_free(ctx);
  mbedtls_platform_zeroize(d, sizeof(d));
  return key;
}

/* Whether |m| holds this verification (then it is met now), or, when
 * |keep|, remembers it in the slot met longest ago. Sizes beyond a slot's
 * are never held nor kept. */
static bool memo_meet(struct memo *m, const unsigned char *hash,
                      size_t hash_len, const unsigned char *sig, size_t sig_len,
                      bool keep) {
  if (hash_len > MBEDTLS_MD_MAX_SIZE || sig_len > MBEDTLS_ECDSA_MAX_LEN)
    return false;
  bool found = false;
  pthread_mutex_lock(&m->lock);
  verified_t *oldest = &m->slot[0];
  for (size_t i = 0; i < TG_TLS_ECDSA_MEMO && !found; i++) {
    verified_t *v = &m->slot[i];
    if (v->last_met && v->hash_len == hash_len && v->sig_len == sig_len &&
        memcmp(v->hash, hash, hash_len) == 0 &&
        memcmp(v->sig, sig, sig_len) == 0) {
      v->last_met = ++m->clock;
      found = true;
    } else if (v->last_met < oldest->last_met) {
      oldest = v;
    }
  }
  if (!found && keep) {
    oldest->last_met = ++m->clock;
    oldest->hash_len = (uint8_t)hash_len;
    oldest->sig_len = (uint8_t)sig_len;
    memcpy(oldest->hash, hash, hash_len);
    memcpy(oldest->sig, sig, sig_len);
  }
  pthread_mutex_unlock(&m->lock);
  return found;
}

/* mbedtls's verify entry: |ctx| is the key's mbedtls_ecp_keypair, |hash|
 * the digest (mbedtls has filled in |hash_len| from |md_alg| if it was
 * 0), |sig| a DER ECDSA-Sig-Value from the peer. Any failure refuses. */
static int adopted_verify(void *ctx, mbedtls_md_type_t md_alg,
                          const unsigned char *hash, size_t hash_len,
                          const unsigned char *sig, size_t sig_len) {
  (void)md_alg; /* ECDSA signs the digest itself, whatever made it */
  const adopted_key_t *a = ctx;
  if (a->memo && memo_meet(a->memo, hash, hash_len, sig, sig_len, false)) {
    atomic_fetch_add_explicit(&n_remembered, 1, memory_order_relaxed);
    return 0;
  }
  atomic_fetch_add_explicit(&n_verifies, 1, memory_order_relaxed);
  EVP_PKEY_CTX *vc =
      a->evp ? EVP_PKEY_CTX_new_from_pkey(NULL, a->evp, NULL) : NULL;
  bool ok = vc && EVP_PKEY_verify_init(vc) == 1 &&
            EVP_PKEY_verify(vc, sig, sig_len, hash, hash_len) == 1;
  EVP_PKEY_CTX_free(vc);
  if (ok && a->memo) memo_meet(a->memo, hash, hash_len, sig, sig_len, true);
  if (ok) return 0;
  atomic_fetch_add_explicit(&n_refused, 1, memory_order_relaxed);
  return MBEDTLS_ERR_ECP_VERIFY_FAILED;
}

/* mbedtls's sign entry. mbedtls 2.28 passes no size for |sig|: its
 * callers leave room for MBEDTLS_ECDSA_MAX_LEN, the most its own ECDSA
 * writes, so a longer signature is refused rather than written. The nonce
 * comes from libcrypto's DRBG, not from |f_rng|. */
static int adopted_sign(void *ctx, mbedtls_md_type_t md_alg,
                        const unsigned char *hash, size_t hash_len,
                        unsigned char *sig, size_t *sig_len,
                        int (*f_rng)(void *, unsigned char *, size_t),
                        void *p_rng) {
  (void)md_alg;
  (void)f_rng;
  (void)p_rng;
  atomic_fetch_add_explicit(&n_signs, 1, memory_order_relaxed);
  const adopted_key_t *a = ctx;
  EVP_PKEY_CTX *sc =
      a->evp ? EVP_PKEY_CTX_new_from_pkey(NULL, a->evp, NULL) : NULL;
  unsigned char out[256];
  size_t out_len = sizeof(out);
  bool ok = sc && EVP_PKEY_sign_init(sc) == 1 &&
            EVP_PKEY_sign(sc, out, &out_len, hash, hash_len) == 1 &&
            out_len <= MBEDTLS_ECDSA_MAX_LEN;
  EVP_PKEY_CTX_free(sc);
  if (!ok) return MBEDTLS_ERR_PK_HW_ACCEL_FAILED;
  memcpy(sig, out, out_len);
  *sig_len = out_len;
  return 0;
}

/* The table's allocation entry, for mbedtls_pk_setup() with this table
 * (tracegate never calls it so): an empty key with no libcrypto copy,
 * whose signatures and verifications then fail. */
static void *adopted_alloc(void) {
  adopted_key_t *a = mbedtls_calloc(1, sizeof(*a));
  if (a) mbedtls_ecp_keypair_init(&a->kp);
  return a;
}

static void adopted_free(void *ctx) {
  adopted_key_t *a = ctx;
  if (a->memo) {
    pthread_mutex_destroy(&a->memo->lock);
    free(a->memo);
  }
  EVP_PKEY_free(a->evp);
  mbedtls_ecp_keypair_free(&a->kp);
  mbedtls_free(a);
}

static void adopted_info_init(void) {
  adopted_info = *mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY);
  adopted_info.verify_func = adopted_verify;
  adopted_info.sign_func = adopted_sign;
  adopted_info.ctx_alloc_func = adopted_alloc;
  adopted_info.ctx_free_func = adopted_free;
#if defined(MBEDTLS_ECDSA_C) && defined(MBEDTLS_ECP_RESTARTABLE)
  /* Restartable operations would bypass the two above. */
  adopted_info.verify_rs_func = NULL;
  adopted_info.sign_rs_func = NULL;
#endif
}

bool tg_tls_ecdsa_adopt(mbedtls_pk_context *pk) {
  pthread_once(&adopted_once, adopted_info_init);
  if (pk->pk_info == &adopted_info) return true;
  if (mbedtls_pk_get_type(pk) != MBEDTLS_PK_ECKEY) return false;
  /* A key this libcrypto refuses (a curve left out of its build, say)
   * stays with mbedtls, as a session whose cipher libcrypto lacks keeps
   * mbedtls's records (tls/handoff.h). */
  mbedtls_ecp_keypair *kp = mbedtls_pk_ec(*pk);
  adopted_key_t *a = mbedtls_calloc(1, sizeof(*a));
  if (!a) return false;
  a->evp = to_evp(kp, mbedtls_mpi_cmp_int(&kp->d, 0) != 0);
  if (!a->evp) {
    mbedtls_free(a);
    return false;
  }
  /* The keypair moves into |a| (its numbers' storage with it); the EC
   * table's context, allocated by mbedtls, is freed empty. */
  a->kp = *kp;
  mbedtls_free(kp);
  pk->pk_ctx = a;
  pk->pk_info = &adopted_info;
  return true;
}

bool tg_tls_ecdsa_remember(mbedtls_pk_context *pk) {
  if (!tg_tls_ecdsa_adopted(pk)) return false;
  adopted_key_t *a = pk->pk_ctx;
  if (a->memo) return true;
  struct memo *m = calloc(1, sizeof(*m));
  if (!m) return false;
  if (pthread_mutex_init(&m->lock, NULL) != 0) {
    free(m);
    return false;
  }
  a->memo = m;
  return true;
}

bool tg_tls_ecdsa_adopted(const mbedtls_pk_context *pk) {
  pthread_once(&adopted_once, adopted_info_init);
  return pk->pk_info == &adopted_info;
}

tg_tls_ecdsa_counts_t tg_tls_ecdsa_counts(void) {
  return (tg_tls_ecdsa_counts_t){
      .signs = atomic_load_explicit(&n_signs, memory_order_relaxed),
      .verifies = atomic_load_explicit(&n_verifies, memory_order_relaxed),
      .refused = atomic_load_explicit(&n_refused, memory_order_relaxed),
      .remembered = atomic_load_explicit(&n_remembered, memory_order_relaxed)};
}

/* --- the self-test of this path (tls/paths.h) ------------------------------ */

/* The digest the self-test signs: any 32 bytes do. */
static const unsigned char test_digest[32] = "tracegate ecdsa path self-test.";

/* The adopted path must never ask mbedtls's RNG: libcrypto draws the
 * nonce. */
static int no_rng(void *ctx, unsigned char *out, size_t n) {
  (void)ctx;
  (void)out;
  (void)n;
  return MBEDTLS_ERR_ECP_RANDOM_FAILED;
}

/* Through mbedtls's own public entry points, as a handshake reaches an
 * adopted key, on a key made for this run (tls/self_test_key.h): a
 * signature mbedtls made holds under the adopted public key and a changed
 * one does not; a signature made through the adopted private key holds
 * under mbedtls's own verification; and mbedtls still sees the adopted
 * keys as the same P-256 keys. */
static const char *self_test(mbedtls_ctr_drbg_context *drbg,
                             mbedtls_pk_context *key, mbedtls_pk_context *pub,
                             mbedtls_pk_context *plain_pub) {
  unsigned char der[128];
  if (tg_tls_self_test_key(key, NULL, drbg) != 0)
    return "mbedtls does not make a test key";
  int n = mbedtls_pk_write_pubkey_der(key, der, sizeof(der));
  /* The public key is written at the end of |der|. */
  const unsigned char *pub_der = der + sizeof(der) - (n > 0 ? n : 0);
  if (n <= 0 || mbedtls_pk_parse_public_key(pub, pub_der, (size_t)n) != 0 ||
      mbedtls_pk_parse_public_key(plain_pub, pub_der, (size_t)n) != 0)
    return "mbedtls does not parse the test key";
  /* Signed by mbedtls itself, before the key is adopted. */
  unsigned char known[MBEDTLS_ECDSA_MAX_LEN];
  size_t known_len = 0;
  if (mbedtls_pk_sign(key, MBEDTLS_MD_SHA256, test_digest, sizeof(test_digest),
                      known, &known_len, mbedtls_ctr_drbg_random, drbg) != 0 ||
      known_len == 0)
    return "mbedtls does not sign with the test key";
  if (!tg_tls_ecdsa_adopt(key) || !tg_tls_ecdsa_adopt(pub))
    return "libcrypto does not take the test key";
  if (mbedtls_pk_get_bitlen(pub) != 256 ||
      !mbedtls_pk_can_do(pub, MBEDTLS_PK_ECDSA) ||
      mbedtls_ecp_point_cmp(&mbedtls_pk_ec(*pub)->Q,
                            &mbedtls_pk_ec(*plain_pub)->Q) != 0)
    return "mbedtls no longer sees the adopted key as it was";
  tg_tls_ecdsa_counts_t before = tg_tls_ecdsa_counts();
  if (mbedtls_pk_verify(pub, MBEDTLS_MD_SHA256, test_digest,
                        sizeof(test_digest), known, known_len) != 0)
    return "a known signature does not verify";
  known[known_len - 1] ^= 1;
  if (mbedtls_pk_verify(pub, MBEDTLS_MD_SHA256, test_digest,
                        sizeof(test_digest), known, known_len) == 0)
    return "a changed signature verifies";
  unsigned char sig[MBEDTLS_ECDSA_MAX_LEN];
  size_t sig_len = 0;
  if (mbedtls_pk_sign(key, MBEDTLS_MD_SHA256, test_digest, sizeof(test_digest),
                      sig, &sig_len, no_rng, NULL) != 0)
    return "signing fails";
  if (mbedtls_pk_verify(plain_pub, MBEDTLS_MD_SHA256, test_digest,
                        sizeof(test_digest), sig, sig_len) != 0)
    return "mbedtls does not verify the signature made";
  tg_tls_ecdsa_counts_t after = tg_tls_ecdsa_counts();
  if (after.signs == before.signs || after.verifies - before.verifies < 2)
    return "the operations did not reach libcrypto";
  return NULL;
}

const char *tg_tls_ecdsa_self_test(void) {
  static const char seed[] = "tracegate ecdsa self-test";
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_pk_context key, pub, plain_pub;
  mbedtls_entropy_init(&entropy);
  mbedtls_ctr_drbg_init(&drbg);
  mbedtls_pk_init(&key);
  mbedtls_pk_init(&pub);
  mbedtls_pk_init(&plain_pub);
  const char *why =
      mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
                            (const unsigned char *)seed, sizeof(seed) - 1) != 0
          ? "no random numbers"
          : self_test(&drbg, &key, &pub, &plain_pub);
  mbedtls_pk_free(&key);
  mbedtls_pk_free(&pub);
  mbedtls_pk_free(&plain_pub);
  mbedtls_ctr_drbg_free(&drbg);
  mbedtls_entropy_free(&entropy);
  return why;
}
