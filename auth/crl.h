/* Certificate revocation lists, the relay's (--crl) and the collector's
 * (http_crl): loaded, checked and consulted by this code in both.
 *
 * A CRL is accepted only when every list in the file is issued by one of
 * the configured CA certificates, signed by its key, and not past its
 * next update (an expired CRL would otherwise fail every handshake of
 * that CA, or silently revoke nothing). A reload builds a new one and the
 * owner swaps the pointer, so a broken file never replaces a good one.
 *
 * Files are read whole, regular files only (common/read_file.h).
 */
#ifndef TRACEGATE_AUTH_CRL_H
#define TRACEGATE_AUTH_CRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mbedtls/x509_crl.h>
#include <mbedtls/x509_crt.h>

#include "auth/cert_identity.h"

/* Parses the PEM (or DER) CRL file |path| into |crl| (initialized by the
 * caller) and checks it against the CA chain |ca| (see above). 0, or
 * TG_EBAD_CONFIG / -ENOMEM with "CRL PATH: why" in |err|. */
int tg_crl_parse_file(mbedtls_x509_crl *crl, const mbedtls_x509_crt *ca,
                      const char *path, char *err, size_t errlen);

/* Whether |crt| is on a list of |crl| (a chain of CRLs, may be NULL)
 * issued by |crt|'s issuer. */
bool tg_crl_revokes(const mbedtls_x509_crl *crl, const mbedtls_x509_crt *crt);

/* A CA and its CRL, for a program whose TLS is not mbedtls (the
 * collector's HTTPS): immutable once loaded. */
typedef struct tg_crl tg_crl_t;

/* Loads the CA certificates of |ca_path| and the CRL |crl_path| checked
 * against them. On success *out is the caller's (tg_crl_free). 0, or
 * TG_EBAD_CONFIG / -ENOMEM with the reason in |err|. */
int tg_crl_load(const char *crl_path, const char *ca_path, tg_crl_t **out,
                char *err, size_t errlen);
void tg_crl_free(tg_crl_t *c);

/* A peer's certificate as the TLS layer received it (DER, |len| bytes,
 * already verified against the CA by that layer): its identity into
 * |identity| (TG_CERT_IDENTITY_SIZE bytes) and whether |crl| (NULL: none)
 * revokes it. 0: usable; TG_ETLS_CERT: not, with why (static) in *why;
 * -ENOMEM. */
int tg_cert_check_der(const uint8_t *der_untrusted, size_t len,
                      const tg_crl_t *crl, char *identity, const char **why);

#endif /* TRACEGATE_AUTH_CRL_H */
