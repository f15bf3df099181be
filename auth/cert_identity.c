/* A certificate's identity (auth/cert_identity.h). */
#include "auth/cert_identity.h"

#include <string.h>

#include <mbedtls/asn1.h>
#include <mbedtls/oid.h>

const char *tg_cert_identity(const mbedtls_x509_crt *crt, char *out) {
  out[0] = '\0';
  const mbedtls_x509_buf *cn = NULL;
  int ncn = 0;
  /* Each attribute of the subject, as its own OID and value: a value's
   * text never passes for another attribute. */
  for (const mbedtls_x509_name *nm = &crt->subject; nm; nm = nm->next) {
    if (nm->oid.p && MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &nm->oid) == 0) {
      cn = &nm->val;
      ncn++;
    }
  }
  if (ncn > 1) return "more than one CN";
  const mbedtls_x509_buf *id = cn;
  if (!id && (crt->ext_types & MBEDTLS_X509_EXT_SUBJECT_ALT_NAME)) {
    for (const mbedtls_x509_sequence *seq = &crt->subject_alt_names; seq;
         seq = seq->next) {
      if (seq->buf.tag ==
          (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_DNS_NAME)) {
        id = &seq->buf;
        break;
      }
    }
  }
  if (!id) return "neither a CN nor a DNS SAN";
  const char *why = NULL;
  if (!tg_identity_valid((const char *)id->p, id->len, &why)) return why;
  memcpy(out, id->p, id->len);
  out[id->len] = '\0';
  return NULL;
}
