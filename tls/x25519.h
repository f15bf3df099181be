/* tls/x25519.h: the X25519 key exchange of mbedtls's handshakes, computed
 * by libcrypto.
 *
 * Every full TLS 1.2 handshake costs each end two X25519 scalar
 * multiplications (its ephemeral key pair, then the shared secret).
 * mbedtls 2.28 takes ~0.77 ms for one on the development machine,
 * libcrypto ~0.045 ms: with ECDSA already in libcrypto (tls/ecdsa.h), they
 * were three quarters of a handshake's CPU, and a collector opening a
 * thousand connections pays them a thousand times (issue 13).
 *
 * mbedtls has no table to hand an ECDH key to another library (its
 * ECDH context is plain data, unlike a key's mbedtls_pk_info_t). But
 * libmbedcrypto.so reaches its own scalar multiplication,
 * mbedtls_ecp_mul_restartable(), through the dynamic linker (its PLT),
 * and so does everything that calls it from libmbedtls.so: a definition
 * of that public function in the executable is the one they call (ELF
 * symbol interposition, as a malloc replacement is). tls/x25519.c
 * defines it: on this thread, inside a scope opened by
 * tg_tls_x25519_enter(), a multiplication on Curve25519 goes to
 * libcrypto; every other call (other curves, outside a scope, inputs
 * libcrypto would read differently) goes on to mbedtls's own, found with
 * dlsym(RTLD_NEXT). mbedtls still makes the private keys, checks the
 * peer's public value, encodes, and decides what a failure means; the
 * result is the same number (tests/tls/test_tls_x25519.c and
 * tests/fuzz/fuzz_tls_x25519.c compare both).
 *
 * This needs tg_tls linked statically into an executable that links
 * libmbedcrypto dynamically without -Bsymbolic (Debian's build): anywhere
 * else mbedtls keeps its own multiplication, slower, with the same
 * results; tg_tls_x25519_counts() tells which. Only tls/session.c opens
 * scopes, around mbedtls_ssl_handshake(). */
#ifndef TRACEGATE_TLS_X25519_H
#define TRACEGATE_TLS_X25519_H

#include <stdint.h>

/* Opens and closes a scope on the calling thread; scopes nest. */
void tg_tls_x25519_enter(void);
void tg_tls_x25519_leave(void);

/* Curve25519 multiplications made inside scopes since the process started
 * (every thread): what tests and benches check to see the path taken. */
typedef struct tg_tls_x25519_counts {
  uint64_t by_libcrypto;
  /* Left to mbedtls: inputs refused by either check, or a public value
   * with its top bit set (libcrypto ignores that bit, mbedtls does not). */
  uint64_t by_mbedtls;
} tg_tls_x25519_counts_t;

tg_tls_x25519_counts_t tg_tls_x25519_counts(void);

#endif /* TRACEGATE_TLS_X25519_H */
