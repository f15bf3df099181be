/* tls/self_test_key.h: the throw-away P-256 key (and self-signed
 * certificate) the libcrypto paths' self-tests run on (tls/ecdsa.c,
 * tls/kex.c).
 *
 * Made fresh by each call from mbedtls's entropy source, so the product
 * carries no private key: a key compiled into a binary is public, and a
 * scanner cannot tell a test key from a leaked one. Nothing made here
 * proves anything to anyone; it lives for one self-test. */
#ifndef TRACEGATE_TLS_SELF_TEST_KEY_H
#define TRACEGATE_TLS_SELF_TEST_KEY_H

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>

/* Generates a P-256 key pair into |key| (initialised by the caller, empty)
 * with |drbg| (seeded by the caller) and, when |cert| is not NULL, a
 * self-signed certificate for it (CN "tracegate-self-test") parsed into
 * |cert| (initialised, empty). Both stay the caller's, freed with
 * mbedtls_pk_free() and mbedtls_x509_crt_free(). Returns 0, or an mbedtls
 * error code (the contexts may then hold part of the work: free them). */
int tg_tls_self_test_key(mbedtls_pk_context *key, mbedtls_x509_crt *cert,
                         mbedtls_ctr_drbg_context *drbg);

#endif /* TRACEGATE_TLS_SELF_TEST_KEY_H */
