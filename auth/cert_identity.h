/* What a client certificate names: the identity the relay and the
 * collector authorize (auth/authz.h) and log, taken from the certificate
 * by this one function in both, so that a certificate means the same
 * principal to each.
 *
 * The identity is the subject's CN attribute, when the subject has exactly
 * one; with none, the first DNS name of the subjectAltName; its value as
 * it stands must be an identity (common/identity.h). Never text pieced
 * together from a printed subject: a certificate without a CN whose O is
 * "Example/CN=rec" names nothing, one with two CNs names nothing, and
 * "CN=rec, OU=ops" names "rec". No fallback from a bad CN to a SAN, or
 * from a bad SAN to a later one: a certificate names one identity or none.
 *
 * Pure: parses, never verifies a chain (the TLS layer has done that).
 */
#ifndef TRACEGATE_AUTH_CERT_IDENTITY_H
#define TRACEGATE_AUTH_CERT_IDENTITY_H

#include <stddef.h>
#include <stdint.h>

#include <mbedtls/x509_crt.h>

#include "common/identity.h"

/* Room for an identity and its NUL. */
#define TG_CERT_IDENTITY_SIZE (TG_IDENTITY_MAX + 1)

/* The identity |crt| names into |out| (TG_CERT_IDENTITY_SIZE bytes):
 * NULL, or why it names none (a static string; |out| is then ""). */
const char *tg_cert_identity(const mbedtls_x509_crt *crt, char *out);

#endif /* TRACEGATE_AUTH_CERT_IDENTITY_H */
