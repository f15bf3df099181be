/* X25519 for mbedtls's handshakes through libcrypto: see tls/x25519.h. */
#include "tls/x25519.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <mbedtls/bignum.h>
#include <mbedtls/ecp.h>
#include <mbedtls/platform_util.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#define X25519_BYTES 32

typedef int (*ecp_mul_fn)(mbedtls_ecp_group *grp, mbedtls_ecp_point *R,
                          const mbedtls_mpi *m, const mbedtls_ecp_point *P,
                          int (*f_rng)(void *, unsigned char *, size_t),
                          void *p_rng, mbedtls_ecp_restart_ctx *rs_ctx);

static ecp_mul_fn mbedtls_own;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;
static _Thread_local unsigned scope;
static _Atomic uint64_t n_libcrypto, n_mbedtls;

static void find_own(void) {
  mbedtls_own = (ecp_mul_fn)dlsym(RTLD_NEXT, "mbedtls_ecp_mul_restartable");
}

void tg_tls_x25519_enter(void) { scope++; }

void tg_tls_x25519_leave(void) {
  if (scope > 0) scope--;
}

tg_tls_x25519_counts_t tg_tls_x25519_counts(void) {
  return (tg_tls_x25519_counts_t){
      .by_libcrypto = atomic_load_explicit(&n_libcrypto, memory_order_relaxed),
      .by_mbedtls = atomic_load_explicit(&n_mbedtls, memory_order_relaxed)};
}

/* A libcrypto X25519 key of the 32-byte |pub|, with the scalar |priv| too
 * when given. */
static EVP_PKEY *x25519_key(const unsigned char *priv,
                            const unsigned char pub[X25519_BYTES]) {
  OSSL_PARAM params[3];
  size_t n = 0;
  if (priv)
    params[n++] = OSSL_PARAM_construct_octet_string(
        OSSL_PKEY_PARAM_PRIV_KEY, (void *)priv, X25519_BYTES);
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY,
                                                  (void *)pub, X25519_BYTES);
  params[n] = OSSL_PARAM_construct_end();
  EVP_PKEY *key = NULL;
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "X25519", NULL);
  if (!ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
      EVP_PKEY_fromdata(ctx, &key,
                        priv ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY,
                        params) != 1)
    key = NULL;
  EVP_PKEY_CTX_free(ctx);
  return key;
}

/* out = X25519(k, u), all little-endian as RFC 7748 writes them; with
 * u = NULL, the base point's 9: a public key, which libcrypto computes
 * when it takes the private scalar alone. False when libcrypto refuses
 * (an all-zero result among others).
 *
 * For a shared secret, the scalar goes in with a public value beside it:
 * given none, libcrypto would derive one from the scalar, a whole
 * multiplication (half of this call's cost, measured) for a number the
 * derivation never reads: it reads the scalar and the peer's value only.
 * The key object is this call's alone and freed at its end, so the peer's
 * |u| stands in. The peer's value is not checked again here: mbedtls
 * checked it (multiply()). */
static bool libcrypto_x25519(const unsigned char k[X25519_BYTES],
                             const unsigned char *u,
                             unsigned char out[X25519_BYTES]) {
  size_t len = X25519_BYTES;
  if (!u) {
    EVP_PKEY *own =
        EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, k, X25519_BYTES);
    bool ok = own && EVP_PKEY_get_raw_public_key(own, out, &len) == 1 &&
              len == X25519_BYTES;
    EVP_PKEY_free(own); /* clears its copy of the scalar */
    return ok;
  }
  EVP_PKEY *own = x25519_key(k, u);
  EVP_PKEY *peer = own ? x25519_key(NULL, u) : NULL;
  EVP_PKEY_CTX *ctx = peer ? EVP_PKEY_CTX_new_from_pkey(NULL, own, NULL) : NULL;
  bool ok = ctx && EVP_PKEY_derive_init(ctx) == 1 &&
            EVP_PKEY_derive_set_peer_ex(ctx, peer, 0) == 1 &&
            EVP_PKEY_derive(ctx, out, &len) == 1 && len == X25519_BYTES;
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(peer);
  EVP_PKEY_free(own);
  return ok;
}

/* R = m * P on Curve25519 by libcrypto, for inputs mbedtls would accept
 * and libcrypto reads as the same numbers. False (R untouched) to leave
 * the call to mbedtls. */
static bool multiply(const mbedtls_ecp_group *grp, mbedtls_ecp_point *R,
                     const mbedtls_mpi *m, const mbedtls_ecp_point *P) {
  /* mbedtls's own checks first, so that libcrypto sees only what mbedtls
   * would multiply: a scalar already clamped as RFC 7748 clamps it (so
   * libcrypto's clamping changes nothing), a public value of at most 32
   * bytes that is not one of the low-order points. */
  if (mbedtls_ecp_check_privkey(grp, m) != 0 ||
      mbedtls_ecp_check_pubkey(grp, P) != 0)
    return false;
  /* RFC 7748 drops the top bit of u; mbedtls reduces all 256 bits mod p.
   * mbedtls clears that bit when it reads a peer's value off the wire, so
   * only a caller's own point can have it. */
  if (mbedtls_mpi_get_bit(&P->X, 8 * X25519_BYTES - 1)) return false;
  unsigned char k[X25519_BYTES], u[X25519_BYTES], out[X25519_BYTES];
  bool base = mbedtls_mpi_cmp_int(&P->X, 9) == 0; /* a key pair's */
  bool ok = mbedtls_mpi_write_binary_le(m, k, sizeof(k)) == 0 &&
            mbedtls_mpi_write_binary_le(&P->X, u, sizeof(u)) == 0 &&
            libcrypto_x25519(k, base ? NULL : u, out);
  /* As mbedtls leaves it: x in [0, p), z = 1, no y. P may be R. */
  if (ok) ok = mbedtls_mpi_read_binary_le(&R->X, out, sizeof(out)) == 0;
  if (ok) ok = mbedtls_mpi_lset(&R->Z, 1) == 0;
  if (ok) mbedtls_mpi_free(&R->Y);
  mbedtls_platform_zeroize(k, sizeof(k));
  mbedtls_platform_zeroize(out, sizeof(out));
  return ok;
}

/* The interposed definition (see the header). Its signature is mbedtls
 * 2.28's; a restartable multiplication (|rs_ctx|, not built by Debian)
 * and a call without an RNG (which mbedtls refuses) stay with mbedtls.
 * Default visibility: the build hides every other symbol, and a hidden
 * one would not reach the dynamic linker. RTLD_NEXT needs _GNU_SOURCE,
 * which the build defines. */
__attribute__((visibility("default"))) int mbedtls_ecp_mul_restartable(
    mbedtls_ecp_group *grp, mbedtls_ecp_point *R, const mbedtls_mpi *m,
    const mbedtls_ecp_point *P, int (*f_rng)(void *, unsigned char *, size_t),
    void *p_rng, mbedtls_ecp_restart_ctx *rs_ctx) {
  pthread_once(&own_once, find_own);
  if (scope > 0 && grp && grp->id == MBEDTLS_ECP_DP_CURVE25519) {
    if (!rs_ctx && f_rng && R && m && P && multiply(grp, R, m, P)) {
      atomic_fetch_add_explicit(&n_libcrypto, 1, memory_order_relaxed);
      return 0;
    }
    atomic_fetch_add_explicit(&n_mbedtls, 1, memory_order_relaxed);
  }
  /* Without mbedtls's own (a static mbedtls, where this definition would
   * not link anyway) there is nothing to call. */
  if (!mbedtls_own) return MBEDTLS_ERR_ECP_FEATURE_UNAVAILABLE;
  return mbedtls_own(grp, R, m, P, f_rng, p_rng, rs_ctx);
}
