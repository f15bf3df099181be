/* Revocation lists (auth/crl.h). */
#include "auth/crl.h"
#include "auth/auth_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/error.h>
#include <mbedtls/md.h>
#include <mbedtls/pk.h>

#include "common/notice.h"
#include "common/read_file.h"
#include "tracegate/error.h"

/* A CRL or a CA file: a few certificates or a list of serials. */
#define PKI_FILE_MAX (4u * 1024 * 1024)

struct tg_crl {
  mbedtls_x509_crt ca;
  mbedtls_x509_crl crl;
};

/* |path| whole, NUL included in *len as mbedtls's PEM parsers want it. */
static int read_pki_file(const char *what, const char *path, char **out,
                         size_t *len, char *err, size_t errlen) {
  int rv = tg_read_regular_file(path, PKI_FILE_MAX, out, len);
  if (rv == -ENOMEM) return rv;
  if (rv < 0) {
    char why[96];
    return tg__auth_fail(err, errlen, TG_EBAD_CONFIG, "%s %s: %s", what, path,
                         tg_read_file_why(why, sizeof(why), rv, PKI_FILE_MAX));
  }
  ++*len;
  return 0;
}

/* Whether |c|'s signature is |ca|'s, as mbedtls checks a CRL while it
 * verifies a chain: the digest of its TBS part against the CA's key. */
static bool signed_by(const mbedtls_x509_crl *c, const mbedtls_x509_crt *ca) {
  const mbedtls_md_info_t *md = mbedtls_md_info_from_type(c->sig_md);
  unsigned char hash[MBEDTLS_MD_MAX_SIZE];
  if (!md || mbedtls_md(md, c->tbs.p, c->tbs.len, hash) != 0) return false;
  return mbedtls_pk_verify_ext(c->sig_pk, c->sig_opts,
                               (mbedtls_pk_context *)&ca->pk, c->sig_md, hash,
                               mbedtls_md_get_size(md), c->sig.p,
                               c->sig.len) == 0;
}

int tg_crl_parse_file(mbedtls_x509_crl *crl, const mbedtls_x509_crt *ca,
                      const char *path, char *err, size_t errlen) {
  char *text = NULL;
  size_t len = 0;
  int rv = read_pki_file("CRL", path, &text, &len, err, errlen);
  if (rv) return rv;
  int ret = mbedtls_x509_crl_parse(crl, (const unsigned char *)text, len);
  free(text);
  if (ret == MBEDTLS_ERR_X509_ALLOC_FAILED) return -ENOMEM;
  if (ret != 0) {
    char m[160];
    mbedtls_strerror(ret, m, sizeof(m));
    return tg__auth_fail(err, errlen, TG_EBAD_CONFIG,
                         "CRL %s: not a valid PEM CRL: %s (-0x%04x)", path, m,
                         (unsigned)-ret);
  }
  for (const mbedtls_x509_crl *c = crl; c && c->version != 0; c = c->next) {
    const mbedtls_x509_crt *issuer = NULL;
    for (const mbedtls_x509_crt *k = ca; k && k->raw.p && !issuer; k = k->next)
      if (k->subject_raw.len == c->issuer_raw.len &&
          memcmp(k->subject_raw.p, c->issuer_raw.p, c->issuer_raw.len) == 0)
        issuer = k;
    if (!issuer)
      return tg__auth_fail(err, errlen, TG_EBAD_CONFIG,
                           "%s CRL %s: not issued by the configured CA",
                           TG_NOTE(TLS_CRL_FOREIGN), path);
    if (!signed_by(c, issuer))
      return tg__auth_fail(err, errlen, TG_EBAD_CONFIG,
                           "CRL %s: not signed by the configured CA's key",
                           path);
    if (mbedtls_x509_time_is_past(&c->next_update))
      return tg__auth_fail(
          err, errlen, TG_EBAD_CONFIG,
          "CRL %s: expired on %04d-%02d-%02d (regenerate it: tg-certs crl); "
          "an expired CRL fails every handshake",
          path, c->next_update.year, c->next_update.mon, c->next_update.day);
  }
  return 0;
}

bool tg_crl_revokes(const mbedtls_x509_crl *crl, const mbedtls_x509_crt *crt) {
  for (const mbedtls_x509_crl *c = crl; c && c->version != 0; c = c->next)
    if (c->issuer_raw.len == crt->issuer_raw.len &&
        memcmp(c->issuer_raw.p, crt->issuer_raw.p, crt->issuer_raw.len) == 0 &&
        mbedtls_x509_crt_is_revoked(crt, c))
      return true;
  return false;
}

int tg_crl_load(const char *crl_path, const char *ca_path, tg_crl_t **out,
                char *err, size_t errlen) {
  *out = NULL;
  tg__auth_fail(err, errlen, 0, "%s", "");
  tg_crl_t *c = malloc(sizeof(*c));
  if (!c) return -ENOMEM;
  mbedtls_x509_crt_init(&c->ca);
  mbedtls_x509_crl_init(&c->crl);
  char *text = NULL;
  size_t len = 0;
  int rv = read_pki_file("CA", ca_path, &text, &len, err, errlen);
  if (rv == 0) {
    int ret = mbedtls_x509_crt_parse(&c->ca, (const unsigned char *)text, len);
    if (ret == MBEDTLS_ERR_X509_ALLOC_FAILED) {
      rv = -ENOMEM;
    } else if (ret != 0) {
      rv = tg__auth_fail(err, errlen, TG_EBAD_CONFIG,
                         "CA %s: not (all) valid PEM certificates (-0x%04x)",
                         ca_path, (unsigned)(ret < 0 ? -ret : ret));
    }
  }
  free(text);
  if (rv == 0) rv = tg_crl_parse_file(&c->crl, &c->ca, crl_path, err, errlen);
  if (rv) {
    tg_crl_free(c);
    return rv;
  }
  *out = c;
  return 0;
}

void tg_crl_free(tg_crl_t *c) {
  if (!c) return;
  mbedtls_x509_crl_free(&c->crl);
  mbedtls_x509_crt_free(&c->ca);
  free(c);
}

int tg_cert_check_der(const uint8_t *der_untrusted, size_t len,
                      const tg_crl_t *crl, char *identity, const char **why) {
  identity[0] = '\0';
  mbedtls_x509_crt crt;
  mbedtls_x509_crt_init(&crt);
  int ret = mbedtls_x509_crt_parse_der(&crt, der_untrusted, len);
  int rv = 0;
  if (ret == MBEDTLS_ERR_X509_ALLOC_FAILED) {
    rv = -ENOMEM;
  } else if (ret != 0) {
    *why = "the certificate does not parse";
    rv = TG_ETLS_CERT;
  } else if ((*why = tg_cert_identity(&crt, identity))) {
    rv = TG_ETLS_CERT;
  } else if (crl && tg_crl_revokes(&crl->crl, &crt)) {
    *why = "the certificate has been revoked (the CRL in force lists it)";
    identity[0] = '\0';
    rv = TG_ETLS_CERT;
  }
  mbedtls_x509_crt_free(&crt);
  return rv;
}
