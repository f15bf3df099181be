/* tls/sha256.h: mbedtls's SHA-256 blocks, computed by libcrypto.
 *
 * A TLS 1.2 handshake hashes its transcript and runs its key derivation
 * (HMAC-SHA-256, a few dozen blocks per PRF) through mbedtls's SHA-256,
 * written in portable C: ~0.26 GB/s on the development machine, about a
 * tenth of a full handshake's CPU once libcrypto made the public-key
 * operations (tls/ecdsa.h, tls/x25519.h), and most of a resumed one's.
 * libcrypto's block function uses the CPU's SHA extensions where it has
 * them: the same blocks ran ~4.7x faster.
 *
 * As for X25519 (tls/x25519.h), mbedtls has no table for its hashes, but
 * libmbedcrypto.so calls its public block function,
 * mbedtls_internal_sha256_process(), through its PLT: tls/sha256.c
 * defines it in the executable, which the dynamic linker then binds
 * mbedtls's calls to. The definition runs libcrypto's SHA256_Transform()
 * on mbedtls's chaining state; mbedtls keeps its buffering, padding and
 * lengths. SHA-256 has one answer per input, so this holds everywhere,
 * on every thread, not only inside handshakes; tests/tls/test_tls_sha256.c
 * compares it with mbedtls's own block function (found with
 * dlsym(RTLD_NEXT)).
 *
 * Needs tg_tls linked statically into an executable that links
 * libmbedcrypto dynamically without -Bsymbolic (Debian's build); anywhere
 * else mbedtls keeps its own function, with the same results. */
#ifndef TRACEGATE_TLS_SHA256_H
#define TRACEGATE_TLS_SHA256_H

#include <stdbool.h>
#include <stdint.h>

/* Whether mbedtls's SHA-256 reaches libcrypto in this process: hashes a
 * few bytes through mbedtls once and looks. session.c asks when it makes
 * a config (which also links this file in) and logs the answer. */
bool tg_tls_sha256_interposed(void);

/* Process-wide: false sends every block to mbedtls's own function (for
 * the benches' same-run baselines and the tests); true (the default)
 * sends them to libcrypto. */
void tg_tls_sha256_use_libcrypto(bool on);

/* 64-byte blocks hashed since the process started, by each library. */
typedef struct tg_tls_sha256_counts {
  uint64_t by_libcrypto;
  uint64_t by_mbedtls;
} tg_tls_sha256_counts_t;

tg_tls_sha256_counts_t tg_tls_sha256_counts(void);

#endif /* TRACEGATE_TLS_SHA256_H */
