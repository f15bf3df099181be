/* tls/ecdsa.h: the ECDSA signatures of mbedtls's handshakes, made and
 * checked by libcrypto.
 *
 * A full TLS 1.2 handshake with ECDSA certificates costs each end two
 * verifications (the peer's certificate, by its CA; the peer's signature
 * on the handshake) and one signature; mbedtls 2.28's own P-256 is many
 * times slower than libcrypto's (bench_tls_handshake prints both).
 *
 * mbedtls reaches a key's operations through its mbedtls_pk_info_t, a
 * table of functions declared in pk_internal.h (installed with mbedtls
 * 2.x, but internal: its layout may change in any release). So this path
 * is used only when tls/paths.c found the mbedtls running to be the
 * version compiled against and tg_tls_ecdsa_self_test() passed. An
 * adopted key keeps its mbedtls_ecp_keypair, next to libcrypto's copy of
 * the key made at adoption, and every entry of the EC table but sign and
 * verify, which hand the digest to libcrypto's copy (and the context's
 * allocation and freeing, which know of the copy). Parsing, pair checks
 * and the ECDHE exchange stay with mbedtls. Only tls/session.c and
 * tls/paths.c use it. */
#ifndef TRACEGATE_TLS_ECDSA_H
#define TRACEGATE_TLS_ECDSA_H

#include <stdbool.h>
#include <stdint.h>

#include <mbedtls/pk.h>

/* Makes |pk|'s signatures and verifications go through libcrypto, if it
 * is an EC key on P-256, P-384 or P-521 that libcrypto takes (its
 * private scalar too when it has one). Returns true if |pk| is adopted
 * (now or already), false if it stays as it was (another key type or
 * curve, or refused by libcrypto). The key stays owned by its caller and is
 * freed with mbedtls_pk_free() as before.
 *
 * mbedtls_pk_check_pair() refuses two keys with different tables: check
 * a pair before adopting either key. */
bool tg_tls_ecdsa_adopt(mbedtls_pk_context *pk);

/* Lets adopted |pk| answer a verification that already held with it (the
 * same digest, the same signature) without making it again: it keeps the
 * last TG_TLS_ECDSA_MEMO that held, whole, and forgets the one met longest
 * ago. Sound because a verification is a function of the key, the digest
 * and the signature alone; one that failed is never kept. For keys that
 * check the same few signatures over and over: a server's CA keys check
 * the client's certificate and the CRL at every connection, and a fleet
 * has few collectors (a client's CA keys meet a new server certificate
 * at every host instead). Returns false if |pk| is not
 * adopted or memory is short (then nothing changes); the memo is freed
 * with the key. */
#define TG_TLS_ECDSA_MEMO 8
bool tg_tls_ecdsa_remember(mbedtls_pk_context *pk);

/* Runs the adopted path on a test key through mbedtls's public entry
 * points: a known signature, a changed one, a signature made and checked
 * by mbedtls. Returns NULL when everything held, else what did not.
 * tls/paths.c runs it once, before any key is adopted for use. */
const char *tg_tls_ecdsa_self_test(void);

/* Whether |pk| is adopted. */
bool tg_tls_ecdsa_adopted(const mbedtls_pk_context *pk);

/* Operations made through adopted keys since the process started (every
 * thread): what tests and benches check to see the path taken. */
typedef struct tg_tls_ecdsa_counts {
  uint64_t signs;
  uint64_t verifies; /* made by libcrypto */
  uint64_t refused; /* verifications that did not hold */
  uint64_t remembered; /* answered by tg_tls_ecdsa_remember()'s memo */
} tg_tls_ecdsa_counts_t;

tg_tls_ecdsa_counts_t tg_tls_ecdsa_counts(void);

#endif /* TRACEGATE_TLS_ECDSA_H */
