/* tls/kex.h: a client's x25519 key exchange, made by libcrypto.
 *
 * In a full TLS 1.2 handshake the client makes an ephemeral key pair and
 * the shared secret with the server's ephemeral key: two x25519 scalar
 * multiplications, which mbedtls 2.28 makes with its generic bignum code,
 * most of a client's CPU per handshake, and a collector that opens a
 * thousand hosts pays it a thousand times. libcrypto makes both in a small
 * fraction of that (bench_tls_handshake prints the two side by side).
 *
 * mbedtls 2.28 offers no hook for the key exchange, so the client's
 * ClientKeyExchange step is taken here instead of by mbedtls, and only it:
 * when the handshake stands at MBEDTLS_SSL_CLIENT_KEY_EXCHANGE with an
 * ECDHE suite and the server chose x25519, this step reads the server's
 * public value from the handshake's ECDH context, makes the key pair and
 * the shared secret with libcrypto, writes the message, leaves the secret
 * where mbedtls derives the session keys from it, and hands the rest of
 * the handshake back to mbedtls. That reads and writes fields of
 * mbedtls_ssl_handshake_params, a structure of mbedtls's internal
 * ssl_internal.h (installed with mbedtls 2.x, but its layout may change in
 * any release): tls/paths.c takes this path only when the mbedtls running
 * is exactly the version compiled against and tg_tls_kex_self_test()
 * passed; otherwise mbedtls makes the exchange, and the log says why.
 * The server's side of the exchange always stays with mbedtls.
 *
 * Only tls/session.c and tls/paths.c use it. */
#ifndef TRACEGATE_TLS_KEX_H
#define TRACEGATE_TLS_KEX_H

#include <stdbool.h>

#include <mbedtls/ssl.h>

/* Whether this build can take the step at all (mbedtls configured with
 * the legacy ECDH context, without PSA or restartable ECC, whose
 * handshakes keep the exchange elsewhere). */
bool tg_tls_kex_built(void);

/* Whether the next handshake step of client |ssl| is one this module
 * takes: ClientKeyExchange of an ECDHE suite over x25519. */
bool tg_tls_kex_applies(const mbedtls_ssl_context *ssl);

/* Takes that step, as mbedtls_ssl_handshake_step() would: 0 and the
 * handshake moved on, or an mbedtls error code (the server's value is not
 * a valid x25519 key, the shared secret is zero, no memory), after which
 * the handshake has failed as after any failed step. The key pair and
 * the secret's copies outside mbedtls are wiped before it returns. */
int tg_tls_kex_client_step(mbedtls_ssl_context *ssl);

/* A handshake in memory between a client that takes this step and an
 * mbedtls server that makes its side itself: NULL when both ends finish
 * (each checks the other's Finished, which holds only if both derived the
 * same keys from the same secret), else what went wrong. A few
 * milliseconds, once per process. */
const char *tg_tls_kex_self_test(void);

/* How many handshakes took the step, for tests and benches. */
unsigned long tg_tls_kex_count(void);

#endif /* TRACEGATE_TLS_KEX_H */
