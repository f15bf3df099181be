/* tls/paths.h: which library carries each part of TLS in this process.
 *
 *   handshake (hashes, certificates, a server's key exchange)  mbedtls
 *   a client's x25519 key exchange                   libcrypto | mbedtls
 *   records after the handshake                      libcrypto | mbedtls
 *   the handshake's ECDSA signatures, verifications  libcrypto | mbedtls
 *
 * libcrypto's paths exist only in a build with TG_TLS_LIBCRYPTO. The
 * records reach libcrypto through mbedtls's documented key export
 * (tls/handoff.h) and need no check. The ECDSA path plugs libcrypto into
 * mbedtls through mbedtls_pk_info_t, a structure of mbedtls's internal
 * pk_internal.h (tls/ecdsa.h), and the key exchange path takes the
 * client's ClientKeyExchange step over mbedtls_ssl_handshake_params, of its
 * internal ssl_internal.h (tls/kex.h): each is used only when the mbedtls
 * running is exactly the version this was compiled against and that
 * path's self-test passes; otherwise mbedtls does that part, and the log
 * says why. Decided once per process, on first use; every
 * path in use is named once in the log (info) and by tg_tls_paths_describe()
 * (tracegate-relay --version). */
#ifndef TRACEGATE_TLS_PATHS_H
#define TRACEGATE_TLS_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_tls_paths {
  bool records_libcrypto;
  bool signatures_libcrypto;
  bool kex_libcrypto;
  /* Why the signatures, or the key exchange, stay with mbedtls ("" when
   * they do not, or when the build has no libcrypto). */
  char signatures_why[160];
  char kex_why[160];
} tg_tls_paths_t;

/* The process's paths, decided on the first call (thread-safe). */
const tg_tls_paths_t *tg_tls_paths(void);

/* The decision itself, for tests: as tg_tls_paths() decides it with
 * |runtime_version| standing for mbedtls_version_get_number(). Runs the
 * self-tests when the versions match. */
void tg_tls_paths_decide(tg_tls_paths_t *p, uint32_t runtime_version);

/* One line naming every path and the library versions, into |buf|. */
void tg_tls_paths_describe(const tg_tls_paths_t *p, char *buf, size_t cap);

#endif /* TRACEGATE_TLS_PATHS_H */
