/* tls/kex.h: the x25519 key exchange of both ends, made by libcrypto.
 *
 * In a full TLS 1.2 handshake each end makes an ephemeral key pair and
 * the shared secret with the other's ephemeral key: two x25519 scalar
 * multiplications, which mbedtls 2.28 makes with its generic bignum code,
 * most of an end's CPU per handshake; a collector that opens a thousand
 * hosts pays it a thousand times, and a relay once per client. libcrypto
 * makes both in a small fraction of that (bench_tls_handshake prints the
 * two side by side).
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
 *
 * The server's side is two steps. At MBEDTLS_SSL_SERVER_KEY_EXCHANGE of
 * an ECDHE-ECDSA suite where mbedtls would pick x25519 (its preference
 * list against the client's groups), this module makes the key pair,
 * writes the parameters, signs them as mbedtls does (the hash the
 * client's signature_algorithms allow, over both randoms and the
 * parameters, with the config's own key) and keeps the private key for
 * the caller; at MBEDTLS_SSL_CLIENT_KEY_EXCHANGE it reads the client's
 * message, makes the shared secret, and derives the session keys. A
 * handshake whose first step this module took must have its second taken
 * here too: mbedtls holds no key of its own for it.
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

/* Whether the next handshake step of server |ssl| is the first of this
 * module's two: ServerKeyExchange of an ECDHE-ECDSA suite over x25519
 * (TLS 1.2, no asynchronous signer). */
bool tg_tls_kex_server_applies(const mbedtls_ssl_context *ssl);

/* Takes it, as mbedtls_ssl_handshake_step() would: 0 (or
 * MBEDTLS_ERR_SSL_WANT_WRITE, the message queued) with the handshake
 * moved on and |*key| the ephemeral private key, which the caller keeps
 * for tg_tls_kex_server_finish() and otherwise gives back with
 * tg_tls_kex_server_abandon(); or an mbedtls error code, |*key| NULL. */
int tg_tls_kex_server_params(mbedtls_ssl_context *ssl, void **key);

/* The second step, at MBEDTLS_SSL_CLIENT_KEY_EXCHANGE of a handshake
 * whose first step was taken here: 0 with the session keys derived and
 * |*key| freed; MBEDTLS_ERR_SSL_WANT_READ with |*key| kept (call again);
 * else an mbedtls error code (the client's message is not one x25519
 * value, the shared secret is zero), |*key| freed. */
int tg_tls_kex_server_finish(mbedtls_ssl_context *ssl, void **key);

/* Frees (and wipes) a key that no finish will use. NULL is a no-op. */
void tg_tls_kex_server_abandon(void **key);

/* Two handshakes in memory, each end taking its steps here against
 * mbedtls's own other end: NULL when all finish (each checks the other's
 * Finished, which holds only if both derived the same keys from the same
 * secret, and mbedtls's client checks the server's signature), else what
 * went wrong. A few milliseconds, once per process. */
const char *tg_tls_kex_self_test(void);

#endif /* TRACEGATE_TLS_KEX_H */
