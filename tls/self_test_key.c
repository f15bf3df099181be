#include "tls/self_test_key.h"

#include <mbedtls/bignum.h>
#include <mbedtls/ecp.h>
#include <mbedtls/x509_crt.h>

/* Large enough for a P-256 certificate with a short name (about 400). */
#define CERT_DER_MAX 1024

static int self_sign(mbedtls_pk_context *key, mbedtls_x509_crt *cert,
                     mbedtls_ctr_drbg_context *drbg) {
  static const char name[] = "CN=tracegate-self-test";
  mbedtls_x509write_cert w;
  mbedtls_mpi serial;
  unsigned char der[CERT_DER_MAX];
  mbedtls_x509write_crt_init(&w);
  mbedtls_mpi_init(&serial);
  int ret = mbedtls_mpi_lset(&serial, 1);
  if (ret == 0) ret = mbedtls_x509write_crt_set_serial(&w, &serial);
  /* Validity is not checked by the self-test's client (it verifies no
   * peer); any well-formed span does. */
  if (ret == 0)
    ret = mbedtls_x509write_crt_set_validity(&w, "20200101000000",
                                             "20991231235959");
  if (ret == 0) ret = mbedtls_x509write_crt_set_subject_name(&w, name);
  if (ret == 0) ret = mbedtls_x509write_crt_set_issuer_name(&w, name);
  if (ret == 0) {
    mbedtls_x509write_crt_set_version(&w, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&w, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&w, key);
    mbedtls_x509write_crt_set_issuer_key(&w, key);
    /* Written at the end of |der|; returns its length. */
    ret = mbedtls_x509write_crt_der(&w, der, sizeof(der),
                                    mbedtls_ctr_drbg_random, drbg);
    if (ret > 0)
      ret = mbedtls_x509_crt_parse_der(cert, der + sizeof(der) - (size_t)ret,
                                       (size_t)ret);
  }
  mbedtls_mpi_free(&serial);
  mbedtls_x509write_crt_free(&w);
  return ret;
}

int tg_tls_self_test_key(mbedtls_pk_context *key, mbedtls_x509_crt *cert,
                         mbedtls_ctr_drbg_context *drbg) {
  int ret = mbedtls_pk_setup(key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
  if (ret == 0)
    ret = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*key),
                              mbedtls_ctr_drbg_random, drbg);
  if (ret == 0 && cert != NULL) ret = self_sign(key, cert, drbg);
  return ret;
}
