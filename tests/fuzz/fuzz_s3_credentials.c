/* Fuzzes the bucket's credentials file (collector/s3/s3_credentials.h): an
 * operator's file, read at every start.
 *
 * Input: the file's text, all of it.
 *
 * Invariants (trap on violation):
 * - a parse that succeeded has both keys, each 1..TG_S3_CREDENTIAL_MAX
 *   printable bytes without blanks;
 * - a failed one leaves both empty and says why.
 */
#include <stdint.h>
#include <string.h>

#include "collector/s3/s3_credentials.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_value(const char *v) {
  size_t n = strlen(v);
  if (n == 0 || n > TG_S3_CREDENTIAL_MAX) __builtin_trap();
  for (size_t i = 0; i < n; i++)
    if (v[i] <= ' ' || v[i] >= 0x7f) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_s3_credentials_t c;
  char why[160];
  int rc = tg_s3_credentials_parse((const char *)data, size, &c, why,
                                   sizeof why);
  if (rc == 0) {
    check_value(c.access_key);
    check_value(c.secret_key);
  } else {
    if (c.access_key[0] || c.secret_key[0] || !why[0]) __builtin_trap();
  }
  tg_s3_credentials_clear(&c);
  return 0;
}
