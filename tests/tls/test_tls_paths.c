/* Which library carries each part of TLS (tls/paths.h): the ECDSA and key
 * exchange paths that reach into mbedtls's internals are taken only with
 * the version compiled against and passing self-tests, and the choice is
 * named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <mbedtls/version.h>

#include "tls/paths.h"

static void paths_take_libcrypto_with_the_version_built_against(void **state) {
  (void)state;
  tg_tls_paths_t p;
  tg_tls_paths_decide(&p, MBEDTLS_VERSION_NUMBER);
  char line[640];
  tg_tls_paths_describe(&p, line, sizeof(line));
  print_message("%s\n", line);
  assert_non_null(strstr(line, "handshakes by mbedtls " MBEDTLS_VERSION_STRING));
#if TG_TLS_LIBCRYPTO
  assert_true(p.records_libcrypto);
  assert_true(p.signatures_libcrypto);
  assert_string_equal(p.signatures_why, "");
  assert_true(p.kex_libcrypto);
  assert_string_equal(p.kex_why, "");
  assert_non_null(strstr(line, "ECDSA by libcrypto"));
  assert_non_null(strstr(line, "x25519 by libcrypto"));
  assert_non_null(strstr(line, "records by OpenSSL"));
#else
  assert_false(p.records_libcrypto);
  assert_false(p.signatures_libcrypto);
  assert_false(p.kex_libcrypto);
  assert_non_null(strstr(line, "without libcrypto"));
#endif
  /* The process decides the same way. */
  const tg_tls_paths_t *once = tg_tls_paths();
  assert_int_equal(once->records_libcrypto, p.records_libcrypto);
  assert_int_equal(once->signatures_libcrypto, p.signatures_libcrypto);
  assert_int_equal(once->kex_libcrypto, p.kex_libcrypto);
}

/* Another mbedtls at run time (a point release that may have moved the
 * internal structures): mbedtls makes the signatures and the key
 * exchange, and says why. The
 * records, handed over through documented interfaces only, stay with
 * libcrypto. */
static void paths_refuse_the_internal_path_on_a_version_mismatch(void **state) {
  (void)state;
  const uint32_t other[] = {MBEDTLS_VERSION_NUMBER + 0x100,
                            MBEDTLS_VERSION_NUMBER - 0x100, 0x03050000};
  for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
    tg_tls_paths_t p;
    tg_tls_paths_decide(&p, other[i]);
    assert_false(p.signatures_libcrypto);
    assert_false(p.kex_libcrypto);
#if TG_TLS_LIBCRYPTO
    assert_true(p.records_libcrypto);
    assert_non_null(strstr(p.signatures_why, MBEDTLS_VERSION_STRING));
    assert_non_null(strstr(p.kex_why, MBEDTLS_VERSION_STRING));
    char line[640];
    tg_tls_paths_describe(&p, line, sizeof(line));
    assert_non_null(strstr(line, "ECDSA by mbedtls ("));
    assert_non_null(strstr(line, "x25519 by mbedtls ("));
#endif
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(paths_take_libcrypto_with_the_version_built_against),
      cmocka_unit_test(paths_refuse_the_internal_path_on_a_version_mismatch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
