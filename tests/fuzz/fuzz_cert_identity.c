/* Fuzzes a peer certificate's identity (auth/crl.h tg_cert_check_der,
 * auth/cert_identity.h): the DER bytes a TLS peer sends.
 *
 * The certificate is parsed from an exact-size copy, so reads past the end
 * show up under ASan. A success must give an identity of the one alphabet
 * (common/identity.h); a failure must say why and leave no identity.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/crl.h"
#include "common/identity.h"
#include "tracegate/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  if (size) memcpy(copy, data, size);
  char id[TG_CERT_IDENTITY_SIZE];
  const char *why = NULL;
  int rv = tg_cert_check_der(copy, size, NULL, id, &why);
  if (rv == 0) {
    if (!tg_identity_valid(id, strlen(id), NULL)) abort();
  } else if (rv == TG_ETLS_CERT) {
    if (!why || id[0]) abort();
  } else if (rv != -ENOMEM) {
    abort();
  }
  free(copy);
  return 0;
}
