/* mbedtls's SHA-256 blocks by libcrypto: see tls/sha256.h. */
#include "tls/sha256.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>
/* SHA256_Transform() is deprecated in OpenSSL 3.0 (kept, not removed):
 * it is the one entry that hashes a block on a caller's chaining state,
 * which is what mbedtls asks for. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

typedef int (*sha256_process_fn)(mbedtls_sha256_context *ctx,
                                 const unsigned char data[64]);

static sha256_process_fn mbedtls_own;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;
static atomic_bool use_libcrypto = true;
static _Atomic uint64_t n_libcrypto, n_mbedtls;

_Static_assert(sizeof(((SHA256_CTX *)0)->h) ==
                   sizeof(((mbedtls_sha256_context *)0)->state),
               "both libraries keep SHA-256's eight 32-bit words");

static void find_own(void) {
  mbedtls_own =
      (sha256_process_fn)dlsym(RTLD_NEXT, "mbedtls_internal_sha256_process");
}

/* The interposed definition (see the header), with mbedtls 2.28's
 * signature. Default visibility: the build hides every other symbol, and
 * a hidden one would not reach the dynamic linker. */
__attribute__((visibility("default"))) int mbedtls_internal_sha256_process(
    mbedtls_sha256_context *ctx, const unsigned char data[64]) {
  if (atomic_load_explicit(&use_libcrypto, memory_order_relaxed)) {
    /* SHA256_Transform() reads and writes the chaining words only; the
     * rest of its context (lengths, buffer) is mbedtls's business here. */
    SHA256_CTX c;
    memcpy(c.h, ctx->state, sizeof(c.h));
    SHA256_Transform(&c, data);
    memcpy(ctx->state, c.h, sizeof(c.h));
    /* As mbedtls wipes its own working state: under HMAC the chaining
     * words derive from the key. */
    mbedtls_platform_zeroize(&c, sizeof(c));
    atomic_fetch_add_explicit(&n_libcrypto, 1, memory_order_relaxed);
    return 0;
  }
  pthread_once(&own_once, find_own);
  atomic_fetch_add_explicit(&n_mbedtls, 1, memory_order_relaxed);
  /* Without mbedtls's own (a static mbedtls, where this definition would
   * not link anyway) there is nothing to call. */
  if (!mbedtls_own) return MBEDTLS_ERR_SHA256_HW_ACCEL_FAILED;
  return mbedtls_own(ctx, data);
}

static bool interposed;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void probe(void) {
  uint64_t before = atomic_load(&n_libcrypto) + atomic_load(&n_mbedtls);
  unsigned char out[32];
  interposed =
      mbedtls_sha256_ret((const unsigned char *)"tg", 2, out, 0) == 0 &&
      atomic_load(&n_libcrypto) + atomic_load(&n_mbedtls) > before;
}

bool tg_tls_sha256_interposed(void) {
  pthread_once(&probe_once, probe);
  return interposed;
}

void tg_tls_sha256_use_libcrypto(bool on) { atomic_store(&use_libcrypto, on); }

tg_tls_sha256_counts_t tg_tls_sha256_counts(void) {
  return (tg_tls_sha256_counts_t){
      .by_libcrypto = atomic_load_explicit(&n_libcrypto, memory_order_relaxed),
      .by_mbedtls = atomic_load_explicit(&n_mbedtls, memory_order_relaxed)};
}
